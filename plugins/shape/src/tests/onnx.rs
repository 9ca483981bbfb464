//! The ONNX backend node tests of this plugin's ops, dumped by `tools/onnx_cases.py`, run on the
//! CPU kernels. Runs only when `UMD_SHAPE_ONNX_CASES` names the dump (no file is committed).

use super::*;
use umd_sdk::{Plugin, TensorValue};

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

fn tensor(words: &[&str]) -> (TensorDesc, Vec<u8>) {
    let dt = dtype::from_name(words[0]).unwrap();
    let shape = if words[1] == "-" {
        vec![]
    } else {
        words[1].split(',').map(|d| d.parse().unwrap()).collect()
    };
    (TensorDesc::new("t", shape, dt), hex(words[2]))
}

fn parse(text: &str) -> Vec<NodeCase> {
    let mut out = Vec::new();
    let mut cur: Option<NodeCase> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
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
                    "is" => AttrValueExt::Ints(
                        w[3..]
                            .iter()
                            .filter(|s| !s.is_empty())
                            .map(|v| v.parse().unwrap())
                            .collect(),
                    ),
                    "f" => AttrValueExt::Float(w[3].parse().unwrap()),
                    "s" => AttrValueExt::Text(w[3].into()),
                    "fs" => AttrValueExt::Floats(
                        w[3..]
                            .iter()
                            .filter(|s| !s.is_empty())
                            .map(|v| v.parse().unwrap())
                            .collect(),
                    ),
                    _ => {
                        let (desc, data) = tensor(&w[3..]);
                        AttrValueExt::Tensor(TensorValue { desc, data })
                    }
                };
                cur.as_mut().unwrap().attrs.push(AttributeExt {
                    name: w[1].into(),
                    value,
                });
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

/// Element-wise comparison within the op's tolerance (NaN equals NaN).
fn close(dt: Dtype, got: &[u8], want: &[u8], tol: (f64, f64)) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, want {}", got.len(), want.len()));
    }
    let (g, w) = (dtype::decode_f64(dt, got), dtype::decode_f64(dt, want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol.0 + tol.1 * b.abs();
        if !ok {
            return Err(format!("element {i}: got {a}, want {b}"));
        }
    }
    Ok(())
}

fn run_case(c: &NodeCase) -> Result<(), String> {
    let constants = Shape::signatures()
        .into_iter()
        .find(|s| s.name == c.op)
        .map(|s| s.constant_inputs)
        .unwrap_or_default();
    let mut req = case(&c.op).opset(c.opset).wanted(c.outputs).request();
    req.attributes = c.attrs.clone();
    let mut data = Vec::new();
    for (i, slot) in c.inputs.iter().enumerate() {
        req.inputs
            .push(slot.as_ref().map(|(desc, bytes)| InputSlot {
                desc: desc.clone(),
                value: constants.contains(&(i as u32)).then(|| bytes.clone()),
            }));
        if let Some((_, bytes)) = slot {
            data.push(bytes.clone());
        }
    }
    let (plan, outs) = umd_sdk::testing::run::<Shape>(&req, &data).map_err(|e| format!("{e:?}"))?;
    for (k, (want, bytes)) in c.expected.iter().enumerate() {
        let got = &plan.outputs[k];
        if (got.shape.as_slice(), got.dtype) != (want.shape.as_slice(), want.dtype) {
            return Err(format!(
                "output {k}: {:?} {:?}, want {:?} {:?}",
                got.shape, got.dtype, want.shape, want.dtype
            ));
        }
        let tol =
            Shape::tolerance(&c.op, got.dtype).map_or((0.0, 0.0), |t| (t.absolute, t.relative));
        close(got.dtype, &outs[k], bytes, tol).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(())
}

#[test]
fn onnx_node_cases() {
    let Ok(path) = std::env::var("UMD_SHAPE_ONNX_CASES") else {
        return;
    };
    let cases = parse(&std::fs::read_to_string(path).unwrap());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| run_case(c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    eprintln!("{} ONNX node cases, {} failed", cases.len(), failures.len());
    assert!(failures.is_empty(), "{failures:#?}");
}
