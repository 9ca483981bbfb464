//! Replays `fixtures/onnx_cases.txt` (written by `scripts/gen_onnx_cases.py`): the ONNX backend
//! node tests of every op served, plus random cases whose expected values come from ONNX's
//! reference implementation. Inputs the op's signature names are sent as plan-time constants,
//! the others as data; outputs are compared within the plugin's tolerance (exactly otherwise).
//! Every case is also planned for CUDA and its module sources fetched.

use umd_sdk::{
    AttrValueExt, AttributeExt, Dtype, PlanRequestExt, Plugin, Target, TensorDesc, dtype,
};

use crate::GatherPlugin;

const CASES: &str = include_str!("../../fixtures/onnx_cases.txt");

pub struct Tensor {
    pub dt: Dtype,
    pub shape: Vec<u64>,
    pub values: Vec<f64>,
}

pub struct Case {
    pub name: String,
    pub op: String,
    pub opset: u32,
    pub attrs: Vec<AttributeExt>,
    pub inputs: Vec<Option<Tensor>>,
    pub outputs: Vec<Tensor>,
}

fn tensor(words: &[&str]) -> Tensor {
    let dt = dtype::from_name(words[0]).unwrap_or_else(|| panic!("dtype {}", words[0]));
    let shape = if words[1] == "-" {
        vec![]
    } else {
        words[1].split('x').map(|d| d.parse().unwrap()).collect()
    };
    let values = words[2..]
        .iter()
        .map(|v| v.parse::<f64>().unwrap())
        .collect();
    Tensor { dt, shape, values }
}

fn attr(words: &[&str]) -> AttributeExt {
    let value = match words[1] {
        "i" => AttrValueExt::Int(words[2].parse().unwrap()),
        "f" => AttrValueExt::Float(words[2].parse().unwrap()),
        "s" => AttrValueExt::Text(words.get(2).unwrap_or(&"").to_string()),
        "is" => AttrValueExt::Ints(words[2..].iter().map(|v| v.parse().unwrap()).collect()),
        "fs" => AttrValueExt::Floats(words[2..].iter().map(|v| v.parse().unwrap()).collect()),
        k => panic!("attribute kind {k}"),
    };
    AttributeExt {
        name: words[0].into(),
        value,
    }
}

/// Parses the fixture.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut cur: Option<Case> = None;
    for line in CASES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "case" => {
                cur = Some(Case {
                    name: w[1].into(),
                    op: w[2].into(),
                    opset: w[3].parse().unwrap(),
                    attrs: vec![],
                    inputs: vec![],
                    outputs: vec![],
                })
            }
            "attr" => cur.as_mut().unwrap().attrs.push(attr(&w[1..])),
            "in" => cur.as_mut().unwrap().inputs.push(Some(tensor(&w[1..]))),
            "absent" => cur.as_mut().unwrap().inputs.push(None),
            "out" => cur.as_mut().unwrap().outputs.push(tensor(&w[1..])),
            "end" => out.push(cur.take().unwrap()),
            k => panic!("fixture line kind {k}"),
        }
    }
    out
}

/// The request of a case and the bytes of its data (non-constant) inputs.
pub fn request(c: &Case) -> (PlanRequestExt, Vec<Vec<u8>>) {
    let constants = GatherPlugin::signatures()
        .into_iter()
        .find(|s| s.name == c.op)
        .map(|s| s.constant_inputs)
        .unwrap_or_default();
    let mut b = PlanRequestExt::builder(&c.op).opset(c.opset);
    let mut data = Vec::new();
    for (i, t) in c.inputs.iter().enumerate() {
        b = match t {
            None => b.absent(),
            Some(t) => {
                let desc = TensorDesc::new(format!("in{i}"), t.shape.clone(), t.dt);
                let bytes = dtype::encode(t.dt, &t.values).unwrap();
                if constants.contains(&(i as u32)) {
                    data.push(bytes.clone());
                    b.constant(desc, &bytes)
                } else {
                    data.push(bytes);
                    b.input(desc)
                }
            }
        };
    }
    for a in &c.attrs {
        b = b.attr(&a.name, a.value.clone());
    }
    (b.build(Target::cpu()), data)
}

/// Compares `got` with `want` within the plugin's tolerance for `op` (exact without one).
pub fn compare(
    op: &str,
    want: &Tensor,
    dt: Dtype,
    shape: &[u64],
    got: &[u8],
) -> Result<(), String> {
    if dt != want.dt || shape != want.shape {
        return Err(format!(
            "output {} {shape:?}, want {} {:?}",
            dtype::name(dt),
            dtype::name(want.dt),
            want.shape
        ));
    }
    let got = dtype::decode_f64(dt, got);
    let exact = std::env::var("UMD_EXACT").is_ok();
    let (abs, rel) = match GatherPlugin::tolerance(op, dt) {
        Some(t) if !exact => (t.absolute, t.relative),
        _ => (0.0, 0.0),
    };
    for (i, (g, w)) in got.iter().zip(&want.values).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= abs + rel * w.abs();
        if !ok {
            return Err(format!("element {i}: got {g}, want {w}"));
        }
    }
    Ok(())
}

#[test]
fn onnx_cases() {
    let cases = cases();
    assert!(cases.len() > 200, "fixture holds {} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let (req, data) = request(c);
        let res = umd_sdk::testing::run::<GatherPlugin>(&req, &data)
            .map_err(|e| format!("{e:?}"))
            .and_then(|(plan, outs)| {
                for (k, want) in c.outputs.iter().enumerate() {
                    let o = &plan.outputs[k];
                    compare(&c.op, want, o.dtype, &o.shape, &outs[k])?;
                }
                umd_sdk::testing::cuda_sources::<GatherPlugin>(&req)
                    .map_err(|e| format!("cuda: {e:?}"))?;
                Ok(())
            });
        if let Err(e) = res {
            failures.push(format!("{} ({} opset {}): {e}", c.name, c.op, c.opset));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
