//! Replaying ONNX backend node tests on a plugin's CPU kernels, natively: the cases of a dump
//! (written by `plugins/norm/tools/onnx_cases.py`: one line per case with the op, opset,
//! attributes, hex-encoded inputs and expected outputs) whose op the plugin serves are planned
//! with [`crate::testing::run`] and compared as the ONNX backend runner does (rtol 1e-3,
//! atol 1e-7). Native builds only.

use crate::{
    AttrValueExt, AttributeExt, Dtype, InputSlot, PlanRequestExt, Plugin, Target, TensorDesc, dtype,
};

struct NodeCase {
    name: String,
    op: String,
    opset: u32,
    outputs: usize,
    attrs: Vec<AttributeExt>,
    inputs: Vec<Option<(TensorDesc, Vec<u8>)>>,
    expected: Vec<(TensorDesc, Vec<u8>)>,
}

fn hex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn tensor(w: &[&str]) -> (TensorDesc, Vec<u8>) {
    let dt = dtype::from_name(w[0]).unwrap();
    let shape = if w[1] == "-" {
        vec![]
    } else {
        w[1].split(',').map(|d| d.parse().unwrap()).collect()
    };
    (TensorDesc::new("t", shape, dt), hex(w[2]))
}

fn parse(text: &str) -> Vec<NodeCase> {
    let mut out = Vec::new();
    let mut cur: Option<NodeCase> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let list = || w[3..].iter().filter(|s| !s.is_empty());
        match w[0] {
            "case" => {
                cur = Some(NodeCase {
                    name: w[1].into(),
                    op: w[2].into(),
                    opset: w[3].parse().unwrap(),
                    outputs: w[4].parse().unwrap(),
                    attrs: vec![],
                    inputs: vec![],
                    expected: vec![],
                })
            }
            "attr" => {
                let value = match w[2] {
                    "i" => AttrValueExt::Int(w[3].parse().unwrap()),
                    "is" => AttrValueExt::Ints(list().map(|v| v.parse().unwrap()).collect()),
                    "f" => AttrValueExt::Float(w[3].parse().unwrap()),
                    _ => AttrValueExt::Floats(list().map(|v| v.parse().unwrap()).collect()),
                };
                let name = w[1].into();
                cur.as_mut()
                    .unwrap()
                    .attrs
                    .push(AttributeExt { name, value });
            }
            "in" if w[1] == "none" => cur.as_mut().unwrap().inputs.push(None),
            "in" => cur.as_mut().unwrap().inputs.push(Some(tensor(&w[1..]))),
            "out" => cur.as_mut().unwrap().expected.push(tensor(&w[1..])),
            "end" => out.push(cur.take().unwrap()),
            _ => {}
        }
    }
    out
}

fn close(dt: Dtype, got: &[u8], want: &[u8]) -> Result<(), String> {
    let (g, w) = (dtype::decode_f64(dt, got), dtype::decode_f64(dt, want));
    if g.len() != w.len() {
        return Err(format!("{} elements, want {}", g.len(), w.len()));
    }
    let (atol, rtol) = match dt {
        Dtype::F16 | Dtype::Bf16 => (1e-3, 1e-2),
        _ => (1e-7, 1e-3),
    };
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if !(a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol + rtol * b.abs()) {
            return Err(format!("element {i}: got {a}, want {b}"));
        }
    }
    Ok(())
}

fn run_case<P: Plugin>(c: &NodeCase) -> Result<(), String> {
    let mut req = PlanRequestExt::builder(&c.op)
        .opset(c.opset)
        .outputs_wanted(vec![true; c.outputs])
        .build(Target::cpu());
    req.attributes = c.attrs.clone();
    let mut data = Vec::new();
    for slot in &c.inputs {
        req.inputs.push(slot.as_ref().map(|(desc, bytes)| {
            data.push(bytes.clone());
            InputSlot {
                desc: desc.clone(),
                value: None,
            }
        }));
    }
    let (plan, outs) = crate::testing::run::<P>(&req, &data).map_err(|e| format!("{e:?}"))?;
    for (k, (want, bytes)) in c.expected.iter().enumerate() {
        let got = &plan.outputs[k];
        if (got.shape.as_slice(), got.dtype) != (want.shape.as_slice(), want.dtype) {
            return Err(format!(
                "output {k}: {:?} {:?}, want {:?} {:?}",
                got.shape, got.dtype, want.shape, want.dtype
            ));
        }
        close(got.dtype, &outs[k], bytes).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(())
}

/// Runs every case of the dump named by `UMD_ONNX_CASES` whose op `P` serves; panics listing
/// every failing case. Without the variable it says so on stderr and checks nothing (the dump
/// is generated, not committed).
pub fn run_dump<P: Plugin>() {
    let Ok(path) = std::env::var("UMD_ONNX_CASES") else {
        eprintln!(
            "ONNX node cases not run: UMD_ONNX_CASES is not set (write a dump with \
             plugins/norm/tools/onnx_cases.py)"
        );
        return;
    };
    let ops: Vec<String> = P::describe().ops.into_iter().map(|o| o.name).collect();
    let cases: Vec<NodeCase> = parse(&std::fs::read_to_string(path).unwrap())
        .into_iter()
        .filter(|c| ops.contains(&c.op))
        .collect();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| run_case::<P>(c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    eprintln!("{} ONNX node cases, {} failed", cases.len(), failures.len());
    assert!(failures.is_empty(), "{failures:#?}");
}
