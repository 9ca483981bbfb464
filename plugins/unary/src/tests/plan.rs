//! Planning: empty tensors, limits, errors, describe, self-tests and the CUDA path.

use super::*;
use umd_sdk::{AttrValueExt, testing};

#[test]
fn empty_and_scalar_tensors() {
    for (op, dt) in [
        ("Relu", Dtype::F32),
        ("Exp", Dtype::F16),
        ("IsNaN", Dtype::Bf16),
        ("Not", Dtype::Boolean),
        ("BitwiseNot", Dtype::U8),
        ("Clip", Dtype::I32),
    ] {
        let req = request(op, &[0, 4], dt, &[]);
        let (plan, outs) = testing::run::<Unary>(&req, &[vec![]]).unwrap();
        assert_eq!(plan.outputs[0].shape, [0, 4]);
        assert_eq!(plan.launches.len(), 1);
        assert_eq!(plan.launches[0].grid.x, 1);
        assert!(outs[0].is_empty());
    }
    // empty with min/max present
    let req = PlanRequestExt::builder("Clip")
        .input(desc("x", &[0], Dtype::F32))
        .input(desc("min", &[1], Dtype::F32))
        .input(desc("max", &[], Dtype::F32))
        .build(Target::cpu());
    let (_, outs) = testing::run::<Unary>(
        &req,
        &[vec![], enc(Dtype::F32, &[0.0]), enc(Dtype::F32, &[1.0])],
    )
    .unwrap();
    assert!(outs[0].is_empty());
    let got = run1(&request("Neg", &[], Dtype::F64, &[]), &[2.5]).unwrap();
    assert_eq!(got, [-2.5]);
}

#[test]
fn launches_fit_the_limits() {
    let plan = Unary::plan_ext(&request("Exp", &[1 << 40], Dtype::F32, &[])).unwrap();
    let l = &plan.launches[0];
    assert!(l.grid.x <= i32::MAX as u32 && l.block.x == 256);
    assert!(l.params.len() <= 4096);
    assert!(Unary::plan_ext(&request("Exp", &[1 << 62, 4], Dtype::F32, &[])).is_err());
    // a 0-d output of a bool predicate on f64 input
    assert!(Unary::plan_ext(&request("IsNaN", &[1 << 61], Dtype::F64, &[])).is_err());
}

/// The error of planning `req`, as (variant, message).
fn refusal(req: &PlanRequestExt) -> (&'static str, String) {
    match Unary::plan_ext(req).expect_err("the request is refused") {
        OpError::UnsupportedOp(m) => ("UnsupportedOp", m),
        OpError::UnsupportedDtype(m) => ("UnsupportedDtype", m),
        OpError::InvalidAttribute(m) => ("InvalidAttribute", m),
        OpError::InvalidShape(m) => ("InvalidShape", m),
        other => ("other", format!("{other:?}")),
    }
}

#[test]
fn bad_requests_are_named() {
    let text = |v: &str| AttrValueExt::Text(v.into());
    let one = AttrValueExt::Float(1.0);
    let cases = [
        (
            "Exp",
            Dtype::I32,
            vec![],
            "UnsupportedDtype",
            "f32, f16, bf16, f64",
        ),
        ("Not", Dtype::F32, vec![], "UnsupportedDtype", "bool"),
        (
            "BitwiseNot",
            Dtype::F32,
            vec![],
            "UnsupportedDtype",
            "i8, u8, i32, i64",
        ),
        ("IsNaN", Dtype::I64, vec![], "UnsupportedDtype", "i64"),
        ("Abs", Dtype::Boolean, vec![], "UnsupportedDtype", "bool"),
        (
            "Relu",
            Dtype::F32,
            vec![("alpha", one.clone())],
            "InvalidAttribute",
            "alpha",
        ),
        (
            "Gelu",
            Dtype::F32,
            vec![("approximate", text("fast"))],
            "InvalidAttribute",
            "approximate",
        ),
        (
            "Gelu",
            Dtype::F32,
            vec![("alpha", one.clone())],
            "InvalidAttribute",
            "alpha",
        ),
        (
            "LeakyRelu",
            Dtype::F32,
            vec![("alpha", text("x"))],
            "InvalidAttribute",
            "alpha",
        ),
        (
            "Selu",
            Dtype::F32,
            vec![("beta", one)],
            "InvalidAttribute",
            "beta",
        ),
        (
            "IsInf",
            Dtype::F32,
            vec![("detect_positive", text("yes"))],
            "InvalidAttribute",
            "detect_positive",
        ),
        ("Conv", Dtype::F32, vec![], "UnsupportedOp", "Conv"),
    ];
    for (op, dt, attrs, kind, word) in cases {
        let (k, m) = refusal(&request(op, &[2], dt, &attrs));
        assert_eq!(k, kind, "{op}: {m}");
        assert!(m.contains(word), "{op}: `{m}` should name {word}");
    }
    let x = || desc("x", &[2], Dtype::F32);
    let two = PlanRequestExt::builder("Relu").input(x()).input(x());
    let none = PlanRequestExt::builder("Relu");
    let outs = PlanRequestExt::builder("Relu")
        .input(x())
        .outputs_wanted(vec![true, true]);
    for b in [two, none, outs] {
        assert_eq!(refusal(&b.build(Target::cpu())).0, "InvalidShape");
    }
    // opset 1's `consumed_inputs` changes nothing and is accepted
    let legacy = [("consumed_inputs", AttrValueExt::Ints(vec![0]))];
    assert!(Unary::plan_ext(&request("Relu", &[2], Dtype::F32, &legacy)).is_ok());
    // op names match case-insensitively
    assert!(Unary::plan_ext(&request("leakyrelu", &[2], Dtype::F32, &[])).is_ok());
}

#[test]
fn cpu_refuses_unknown_entry_points() {
    let plan = Unary::plan_ext(&request("Relu", &[2], Dtype::F32, &[])).unwrap();
    let l = plan.launches[0].clone();
    for entry in ["relu_bool", "exp_i32", "nope_f32", "relu"] {
        let call = CpuCall {
            module_id: l.module_id.clone(),
            entry_point: entry.into(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: vec![],
        };
        assert!(
            matches!(Unary::run_cpu(call), Err(OpError::Internal(_))),
            "{entry}"
        );
    }
}

#[test]
fn describe_and_tolerances() {
    let info = Unary::describe();
    let names: Vec<&str> = info.ops.iter().map(|o| o.name.as_str()).collect();
    for op in [
        "Abs",
        "Neg",
        "Exp",
        "Log",
        "Sqrt",
        "Reciprocal",
        "Sin",
        "Cos",
        "Tan",
        "Tanh",
        "Asin",
        "Acos",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
        "Sigmoid",
        "HardSigmoid",
        "HardSwish",
        "Relu",
        "LeakyRelu",
        "Elu",
        "Selu",
        "Celu",
        "ThresholdedRelu",
        "Gelu",
        "Erf",
        "Softplus",
        "Softsign",
        "Mish",
        "Clip",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Not",
        "IsNaN",
        "IsInf",
        "BitwiseNot",
        "Swish",
        "Shrink",
    ] {
        assert_eq!(names.iter().filter(|n| **n == op).count(), 1, "{op}");
    }
    assert_eq!(names.len(), 43);
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    assert_eq!(Unary::tolerance("Exp", Dtype::F16).unwrap().relative, 1e-3);
    assert!(Unary::tolerance("Relu", Dtype::F32).is_none());
    assert!(Unary::tolerance("Exp", Dtype::I32).is_none());
}

#[test]
fn self_tests_pass() {
    for case in Unary::self_tests() {
        let legacy = umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        };
        let req = PlanRequestExt::from_legacy(&legacy);
        let (plan, outs) = testing::run::<Unary>(&req, &case.input_data).unwrap();
        for ((o, got), want) in plan.outputs.iter().zip(&outs).zip(&case.expected) {
            let (g, w) = (
                dtype::decode_f64(o.dtype, got),
                dtype::decode_f64(o.dtype, want),
            );
            for (g, w) in g.iter().zip(&w) {
                assert!(
                    (g - w).abs() <= case.tolerance * (1.0 + w.abs()),
                    "{}: {g} vs {w}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn cuda_sources_for_every_op_and_dtype() {
    let mut modules = std::collections::BTreeSet::new();
    for def in ops::all() {
        for &dt in def.class.dtypes() {
            let attrs = if def.kernel == "gelu_tanh" {
                vec![("approximate", AttrValueExt::Text("tanh".into()))]
            } else {
                vec![]
            };
            let srcs = testing::cuda_sources::<Unary>(&request(def.onnx, &[7, 3], dt, &attrs))
                .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", def.kernel));
            for (id, src) in srcs {
                assert!(id.starts_with("unary_"));
                for e in &src.entry_points {
                    assert!(
                        src.code.contains(&format!("void {e}(")),
                        "{e} missing from {id}"
                    );
                }
                assert!(!src.code.contains("#include"));
                modules.insert(id);
            }
        }
    }
    // Clip with min and max inputs
    let req = PlanRequestExt::builder("Clip")
        .input(desc("x", &[4], Dtype::I8))
        .input(desc("min", &[], Dtype::I8))
        .input(desc("max", &[], Dtype::I8))
        .build(Target::cpu());
    testing::cuda_sources::<Unary>(&req).unwrap();
    assert_eq!(modules.len(), cuda::MODULE_DTYPES.len());
    assert!(Unary::kernel_source("unary_f8e4m3fn", &Target::cpu()).is_err());
    assert!(Unary::kernel_source("elementwise_f32", &Target::cpu()).is_err());
}
