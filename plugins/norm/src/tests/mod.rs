//! Native tests: every op planned and run on the CPU kernels against naive f64 references
//! ([`reference`]) or ONNX's published values, across dtypes, attributes, opsets, empty and
//! strided shapes, error cases, and the CUDA sources of every op × dtype. This file: the request
//! builder and comparison helpers, and the behaviour every op shares.

mod emu;
mod fused;
mod inplace;
mod moments;
mod onnx;
mod reference;
mod rms_lp;
mod softmax;

use super::*;
use umd_sdk::{AttrValueExt as A, PlanRequestExt, Target, testing};

pub const ALL: [Dtype; 4] = DTYPES;

/// Deterministic values in [-2, 2).
pub fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

/// Positive values in [0.1, 2.1) (variances).
pub fn positive(n: usize, seed: u64) -> Vec<f64> {
    data(n, seed).into_iter().map(|v| v.abs() + 0.1).collect()
}

/// `v` rounded to `dt` (references start from the values the kernel sees).
pub fn round(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

pub fn numel(shape: &[u64]) -> usize {
    shape.iter().product::<u64>() as usize
}

/// A request: `inputs` as (shape, dtype) or absent, attributes, opset, outputs wanted.
pub struct Req {
    op: &'static str,
    inputs: Vec<Option<(Vec<u64>, Dtype)>>,
    attrs: Vec<(&'static str, A)>,
    opset: u32,
    outputs: usize,
}

impl Req {
    fn new(op: &'static str, x: &[u64], dt: Dtype) -> Self {
        Req {
            op,
            inputs: vec![Some((x.to_vec(), dt))],
            attrs: vec![],
            opset: 0,
            outputs: 0,
        }
    }
    fn input(mut self, shape: &[u64], dt: Dtype) -> Self {
        self.inputs.push(Some((shape.to_vec(), dt)));
        self
    }
    fn absent(mut self) -> Self {
        self.inputs.push(None);
        self
    }
    fn attr(mut self, name: &'static str, v: A) -> Self {
        self.attrs.push((name, v));
        self
    }
    fn opset(mut self, o: u32) -> Self {
        self.opset = o;
        self
    }
    fn outputs(mut self, n: usize) -> Self {
        self.outputs = n;
        self
    }
    fn build(&self, target: Target) -> PlanRequestExt {
        let mut b = PlanRequestExt::builder(self.op).opset(self.opset);
        for (i, s) in self.inputs.iter().enumerate() {
            b = match s {
                Some((shape, dt)) => b.input(TensorDesc::new(format!("in{i}"), shape.clone(), *dt)),
                None => b.absent(),
            };
        }
        for (n, v) in &self.attrs {
            b = b.attr(n, v.clone());
        }
        if self.outputs > 0 {
            b = b.outputs_wanted(vec![true; self.outputs]);
        }
        b.build(target)
    }
    fn plan(&self) -> Result<OpPlan, OpError> {
        Norm::plan_ext(&self.build(Target::cpu()))
    }
    /// Runs on the CPU kernels with one value list per present input (rounded to its dtype);
    /// returns every output decoded.
    fn run(&self, values: &[Vec<f64>]) -> Result<Vec<(TensorDesc, Vec<f64>)>, OpError> {
        let present: Vec<_> = self.inputs.iter().flatten().collect();
        assert_eq!(
            present.len(),
            values.len(),
            "one value list per present input"
        );
        let bytes: Vec<Vec<u8>> = present
            .iter()
            .zip(values)
            .map(|((shape, dt), v)| {
                assert_eq!(v.len(), numel(shape));
                dtype::encode(*dt, v).unwrap()
            })
            .collect();
        let (plan, outs) = testing::run::<Norm>(&self.build(Target::cpu()), &bytes)?;
        Ok(plan
            .outputs
            .into_iter()
            .zip(outs)
            .map(|(d, b)| {
                let v = dtype::decode_f64(d.dtype, &b);
                (d, v)
            })
            .collect())
    }
}

/// Comparison tolerance of CPU results against f64 references (inputs already rounded).
pub fn tol(dt: Dtype) -> (f64, f64) {
    match dt {
        Dtype::F32 => (1e-5, 1e-5),
        Dtype::F16 => (2e-3, 2e-3),
        Dtype::Bf16 => (1.6e-2, 1.6e-2),
        _ => (1e-12, 1e-12),
    }
}

pub fn assert_close(got: &[f64], want: &[f64], dt: Dtype, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (a, r) = tol(dt);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= a + r * w.abs() || g == w;
        assert!(ok, "{what} [{i}]: got {g}, want {w} ({dt:?})");
    }
}

/// BatchNormalization of `shape` with its four (C) parameter inputs.
fn bn_request(shape: &[u64], dt: Dtype) -> Req {
    let c = shape[1];
    let mut r = Req::new("BatchNormalization", shape, dt);
    for _ in 0..4 {
        r = r.input(&[c], dt);
    }
    r
}

/// A runnable request for every op on `shape` (rank ≥ 2) in `dt`, with its inputs' values.
fn every_op(shape: &[u64], dt: Dtype) -> Vec<(Req, Vec<Vec<f64>>)> {
    let c = shape[1];
    let x = data(numel(shape), 1);
    let v = |n| data(n as usize, 2);
    let mut out = vec![];
    for op in [
        "Softmax",
        "LogSoftmax",
        "Hardmax",
        "LRN",
        "MeanVarianceNormalization",
    ] {
        let mut r = Req::new(op, shape, dt);
        if op == "LRN" {
            r = r.attr("size", A::Int(3));
        }
        if op == "MeanVarianceNormalization" {
            r = r.attr("axes", A::Ints(vec![0]));
        }
        out.push((r, vec![x.clone()]));
    }
    let last = *shape.last().unwrap();
    for p in [1, 2] {
        out.push((
            Req::new("LpNormalization", shape, dt).attr("p", A::Int(p)),
            vec![x.clone()],
        ));
    }
    out.push((
        Req::new("RMSNormalization", shape, dt).input(&[last], dt),
        vec![x.clone(), v(last)],
    ));
    out.push((
        Req::new("LayerNormalization", shape, dt)
            .input(&[last], dt)
            .input(&[last], dt)
            .outputs(3),
        vec![x.clone(), v(last), v(last)],
    ));
    for op in ["InstanceNormalization", "GroupNormalization"] {
        let mut r = Req::new(op, shape, dt).input(&[c], dt).input(&[c], dt);
        if op == "GroupNormalization" {
            r = r.attr("num_groups", A::Int(1));
        }
        out.push((r, vec![x.clone(), v(c), v(c)]));
    }
    for training in [0, 1] {
        let mut r = bn_request(shape, dt);
        if training == 1 {
            r = r.attr("training_mode", A::Int(1)).outputs(3);
        }
        out.push((
            r,
            vec![x.clone(), v(c), v(c), v(c), positive(c as usize, 3)],
        ));
    }
    out
}

#[test]
fn empty_tensors_plan_a_launch_and_touch_nothing() {
    for shape in [&[0u64, 3, 2][..], &[2, 0, 3], &[2, 3, 0]] {
        for dt in ALL {
            for (r, vals) in every_op(shape, dt) {
                let got = r
                    .run(&vals)
                    .unwrap_or_else(|e| panic!("{} {shape:?}: {e:?}", r.op));
                let plan = r.plan().unwrap();
                assert_eq!(plan.launches.len(), 1);
                assert!(plan.launches[0].grid.x >= 1);
                assert_eq!(got[0].1.len(), numel(shape), "{}", r.op);
            }
        }
    }
    // LayerNorm over an empty normalized shape: statistics of nothing are NaN, as in numpy
    let got = Req::new("LayerNormalization", &[2, 0], Dtype::F32)
        .input(&[0], Dtype::F32)
        .outputs(3)
        .run(&[vec![], vec![]])
        .unwrap();
    assert!(got[1].1.iter().all(|v| v.is_nan()) && got[1].1.len() == 2);
}

#[test]
fn unknown_ops_attributes_and_dtypes_are_refused() {
    let e = Req::new("Relu", &[2], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedOp(_)));
    let e = Req::new("Softmax", &[2], Dtype::I32).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32, f16, bf16 and f64")));
    let e = Req::new("Softmax", &[2], Dtype::F32)
        .attr("axes", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axes")));
    let e = Req::new("Softmax", &[], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = Req::new("Hardmax", &[2, 3], Dtype::F32)
        .attr("axis", A::Int(-3))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)));
    let e = Req::new("Softmax", &[2, 3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    // names are matched case-insensitively
    assert!(Req::new("softmax", &[2, 3], Dtype::F32).plan().is_ok());
}

#[test]
fn cuda_sources_exist_for_every_op_and_dtype() {
    for dt in ALL {
        for shape in [&[2u64, 3, 4][..], &[2, 8]] {
            for (r, _) in every_op(shape, dt) {
                let srcs = testing::cuda_sources::<Norm>(&r.build(Target::cpu()))
                    .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", r.op));
                assert_eq!(srcs.len(), 1);
            }
        }
        // the other statistics dtypes of LayerNorm, and the strided softmax kernel
        let r = Req::new("LayerNormalization", &[2, 4], dt)
            .input(&[4], dt)
            .attr("stash_type", A::Int(16))
            .outputs(2);
        testing::cuda_sources::<Norm>(&r.build(Target::cpu())).unwrap();
        let src =
            Norm::kernel_source(&format!("norm_{}", dtype::name(dt)), &Target::cpu()).unwrap();
        for e in &src.entry_points {
            assert!(src.code.contains(&format!("void {e}(")), "{e} missing");
        }
    }
    assert!(Norm::kernel_source("norm_i32", &Target::cpu()).is_err());
}

#[test]
fn self_tests_pass_and_describe_lists_every_op() {
    for case in Norm::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<Norm>(&req, &case.input_data).unwrap();
        assert_eq!(outs.len(), case.expected.len(), "{}", case.name);
        for ((o, want), d) in outs.iter().zip(&case.expected).zip(&plan.outputs) {
            let (g, w) = (
                dtype::decode_f64(d.dtype, o),
                dtype::decode_f64(d.dtype, want),
            );
            for (g, w) in g.iter().zip(&w) {
                assert!(
                    (g - w).abs() <= case.tolerance + 1e-7,
                    "{}: {g} vs {w}",
                    case.name
                );
            }
        }
    }
    let info = Norm::describe();
    // the ONNX ops, then the fused chains (each with its signature in the fused domain)
    assert_eq!(info.ops.len(), OPS.len() + crate::fused::OPS.len());
    assert!(info.ops.iter().all(|o| o.targets == ["cpu", "cuda"]));
    let sigs = Norm::signatures();
    assert!(crate::fused::OPS.iter().all(|op| {
        sigs.iter()
            .any(|s| s.name == *op && s.domain == umd_sdk::fused::DOMAIN)
    }));
    assert_eq!(
        Norm::tolerance("Hardmax", Dtype::F32).unwrap().absolute,
        0.0
    );
    assert!(Norm::tolerance("Softmax", Dtype::Bf16).is_some());
}
