//! The ONNX backend node cases of this plugin's ops (`node_cases.txt`, written by
//! `node_cases.py` from onnx's own generators: every case with at most 200 input elements), run
//! on the CPU kernels. `UMD_ONNX_NODE_CASES=<file>` also runs a file with every case
//! (`node_cases.py FILE` without a limit writes one).

use super::run;
use crate::Conv;
use umd_sdk::Plugin;
use umd_sdk::{AttrValueExt, Dtype, PlanRequestExt, Target, TensorDesc, dtype};

struct Tensor {
    dt: Dtype,
    shape: Vec<u64>,
    values: Vec<f64>,
}

struct Case {
    name: String,
    op: String,
    outputs: usize,
    attrs: Vec<(String, AttrValueExt)>,
    inputs: Vec<Tensor>,
    expected: Vec<Tensor>,
}

fn tensor(rest: &str) -> Tensor {
    let (head, values) = rest.split_once('|').expect("`|` between shape and values");
    let mut head = head.split_whitespace();
    let dt = dtype::from_name(head.next().expect("dtype")).expect("known dtype");
    Tensor {
        dt,
        shape: head.map(|d| d.parse().expect("dim")).collect(),
        values: values
            .split_whitespace()
            .map(|v| v.parse().expect("value"))
            .collect(),
    }
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines() {
        let (kind, rest) = line.split_once(' ').expect("a keyword");
        if kind == "case" {
            let f: Vec<&str> = rest.split_whitespace().collect();
            cases.push(Case {
                name: f[0].into(),
                op: f[1].into(),
                outputs: f[2].parse().expect("outputs"),
                attrs: Vec::new(),
                inputs: Vec::new(),
                expected: Vec::new(),
            });
            continue;
        }
        let case = cases.last_mut().expect("a case first");
        match kind {
            "attr" => {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let v = match f[1] {
                    "int" => AttrValueExt::Int(f[2].parse().unwrap()),
                    "text" => AttrValueExt::Text(f[2].into()),
                    _ => AttrValueExt::Ints(f[2..].iter().map(|v| v.parse().unwrap()).collect()),
                };
                case.attrs.push((f[0].into(), v));
            }
            "input" => case.inputs.push(tensor(rest)),
            "output" => case.expected.push(tensor(rest)),
            other => panic!("unknown line kind {other}"),
        }
    }
    cases
}

fn run_case(c: &Case) {
    let mut b = PlanRequestExt::builder(&c.op);
    for (i, t) in c.inputs.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{i}"), t.shape.clone(), t.dt));
    }
    for (name, v) in &c.attrs {
        b = b.attr(name, v.clone());
    }
    if c.outputs > 1 {
        b = b.outputs_wanted(vec![true; c.outputs]);
    }
    let req = b.build(Target::cpu());
    let inputs: Vec<Vec<f64>> = c.inputs.iter().map(|t| t.values.clone()).collect();
    let (plan, outs) = run(&req, &inputs).unwrap_or_else(|e| panic!("{}: {e:?}", c.name));
    assert_eq!(plan.outputs.len(), c.expected.len(), "{}: outputs", c.name);
    for ((d, got), want) in plan.outputs.iter().zip(&outs).zip(&c.expected) {
        assert_eq!(d.shape, want.shape, "{}: shape", c.name);
        assert_eq!(d.dtype, want.dt, "{}: dtype", c.name);
        // the plugin's own tolerance for the op (none: exact)
        let t = Conv::tolerance(&c.op, want.dt).filter(|_| want.dt != Dtype::I64);
        for (i, (g, w)) in got.iter().zip(&want.values).enumerate() {
            let ok = match t {
                Some(t) => (g - w).abs() <= t.absolute + t.relative * w.abs(),
                None => g == w,
            };
            assert!(ok, "{}: element {i}: got {g}, want {w}", c.name);
        }
    }
}

#[test]
fn onnx_node_cases_pass() {
    let cases = parse(include_str!("node_cases.txt"));
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for c in &cases {
        run_case(c);
    }
}

#[test]
fn onnx_node_cases_from_a_file() {
    let Ok(path) = std::env::var("UMD_ONNX_NODE_CASES") else {
        return;
    };
    let text = std::fs::read_to_string(&path).expect("readable case file");
    let cases = parse(&text);
    for c in &cases {
        run_case(c);
    }
    eprintln!("{} node cases from {path} pass", cases.len());
}
