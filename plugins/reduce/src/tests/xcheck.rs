//! Cross-check against cases written by `scripts/xcheck_gen.py` from the ONNX reference
//! evaluator: runs when `REDUCE_XCHECK` names the case file, passes trivially otherwise.

use super::*;

fn parse_vals(s: &str) -> Vec<f64> {
    s.split_whitespace().map(|t| t.parse().unwrap()).collect()
}

fn parse_shape(s: &str) -> Vec<u64> {
    s.split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().unwrap())
        .collect()
}

/// One case of the file.
struct Case {
    name: String,
    op: String,
    opset: u32,
    req: PlanRequestExt,
    x: Vec<f64>,
    outs: Vec<(Vec<u64>, Vec<f64>)>,
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        let name = l.strip_prefix("case ").expect("case line").to_string();
        let (mut op, mut opset, mut b, mut attrs) = (String::new(), 0, None, vec![]);
        let (mut x, mut outs) = (vec![], vec![]);
        for l in lines.by_ref().take_while(|l| *l != "end") {
            let (head, vals) = l.split_once(" : ").unwrap_or((l, ""));
            let f: Vec<&str> = head.split(' ').collect();
            let at = |i: usize| f.get(i).copied().unwrap_or("");
            match f[0] {
                "op" => (op, opset) = (f[1].to_string(), f[2].parse().unwrap()),
                "attr" if f[2] == "int" => {
                    attrs.push((f[1].to_string(), int(f[3].parse().unwrap())))
                }
                "attr" => {
                    let v: Vec<i64> = at(3)
                        .split(',')
                        .filter(|t| !t.is_empty())
                        .map(|t| t.parse().unwrap())
                        .collect();
                    attrs.push((f[1].to_string(), ints(&v)));
                }
                "input" => {
                    let dt = dtype::from_name(f[1]).unwrap();
                    x = parse_vals(vals);
                    b = Some(builder(&op, &parse_shape(at(2)), dt).opset(opset));
                }
                "const" => {
                    let v: Vec<i64> = vals
                        .split_whitespace()
                        .map(|t| t.parse::<f64>().unwrap() as i64)
                        .collect();
                    b = Some(with_ints(b.take().unwrap(), &v, f[1] == "scalar"));
                }
                "output" => outs.push((parse_shape(at(2)), parse_vals(vals))),
                _ => panic!("unknown line {l}"),
            }
        }
        let req = attrs
            .into_iter()
            .fold(b.unwrap(), |b, (k, v)| b.attr(&k, v))
            .build(target());
        cases.push(Case {
            name,
            op,
            opset,
            req,
            x,
            outs,
        });
    }
    cases
}

/// Differences from the reference that are its artefacts (see the script's notes).
fn known_difference(c: &Case, dt: Dtype, got: &[f64], want: &[f64]) -> bool {
    let int_empty_mean = c.op == "ReduceMean"
        && matches!(dt, Dtype::I32 | Dtype::I64)
        && got.iter().all(|v| *v == 0.0)
        && want
            .iter()
            .all(|v| *v == i32::MIN as f64 || *v == i64::MIN as f64);
    let old_bool_max = c.op == "ReduceMax" && dt == Dtype::Boolean && c.opset < 20;
    int_empty_mean || old_bool_max
}

#[test]
fn onnx_reference_cases() {
    let Ok(path) = std::env::var("REDUCE_XCHECK") else {
        return;
    };
    let cases = parse(&std::fs::read_to_string(path).unwrap());
    let mut fails = Vec::new();
    for c in &cases {
        let (plan, got) = match run(&c.req, &c.x) {
            Ok(r) => r,
            Err(e) => {
                fails.push(format!("{}: refused: {e:?}", c.name));
                continue;
            }
        };
        for (k, (shape, want)) in c.outs.iter().enumerate() {
            let out = &plan.outputs[k];
            let tol = match out.dtype {
                Dtype::F32 => 1e-5,
                Dtype::F16 => 1e-2,
                Dtype::F64 => 1e-12,
                _ => 0.0,
            };
            let close =
                std::panic::catch_unwind(|| assert_close(&got[k], want, tol, &c.name)).is_ok();
            if out.shape != *shape {
                fails.push(format!(
                    "{}: output {k} shape {:?}, want {shape:?}",
                    c.name, out.shape
                ));
            } else if !close && !known_difference(c, out.dtype, &got[k], want) {
                fails.push(format!(
                    "{}: output {k} {:?}, want {want:?}",
                    c.name, got[k]
                ));
            }
        }
    }
    eprintln!("{} cases, {} failures", cases.len(), fails.len());
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}
