//! Native tests: both ops planned and run on the CPU kernels against naive f64 references
//! ([`reference`]), across dtypes, layouts, attributes, optional inputs and outputs, empty
//! shapes and error cases, and the CUDA sources of every op × dtype. This file: the request
//! builder and comparison helpers, and what both ops share.

mod attention;
mod emu;
mod reference;
mod rotary;
mod scatter;
mod state;

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

/// `v` rounded to `dt` (references start from the values the kernel sees).
pub fn round(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

pub fn numel(shape: &[u64]) -> usize {
    shape.iter().product::<u64>() as usize
}

/// A request: `inputs` as (shape, dtype) or absent, attributes, opset, outputs wanted.
#[derive(Clone)]
pub struct Req {
    pub op: &'static str,
    pub inputs: Vec<Option<(Vec<u64>, Dtype)>>,
    pub attrs: Vec<(&'static str, A)>,
    pub opset: u32,
    pub outputs: Vec<bool>,
}

impl Req {
    pub fn new(op: &'static str) -> Self {
        Req {
            op,
            inputs: vec![],
            attrs: vec![],
            opset: 0,
            outputs: vec![],
        }
    }
    pub fn input(mut self, shape: &[u64], dt: Dtype) -> Self {
        self.inputs.push(Some((shape.to_vec(), dt)));
        self
    }
    pub fn absent(mut self) -> Self {
        self.inputs.push(None);
        self
    }
    pub fn attr(mut self, name: &'static str, v: A) -> Self {
        self.attrs.push((name, v));
        self
    }
    pub fn opset(mut self, o: u32) -> Self {
        self.opset = o;
        self
    }
    pub fn outputs(mut self, wanted: &[bool]) -> Self {
        self.outputs = wanted.to_vec();
        self
    }
    pub fn build(&self, target: Target) -> PlanRequestExt {
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
        b.outputs_wanted(self.outputs.clone()).build(target)
    }
    pub fn plan(&self) -> Result<OpPlan, OpError> {
        AttentionPlugin::plan_ext(&self.build(Target::cpu()))
    }
    /// Input bytes from one value list per present input (encoded in its dtype).
    pub fn bytes(&self, values: &[Vec<f64>]) -> Vec<Vec<u8>> {
        let present: Vec<_> = self.inputs.iter().flatten().collect();
        assert_eq!(
            present.len(),
            values.len(),
            "one value list per present input"
        );
        present
            .iter()
            .zip(values)
            .map(|((shape, dt), v)| {
                assert_eq!(v.len(), numel(shape), "values of {shape:?}");
                dtype::encode(*dt, v).unwrap()
            })
            .collect()
    }
    /// Runs on the CPU kernels; returns every output decoded.
    pub fn run(&self, values: &[Vec<f64>]) -> Result<Vec<(TensorDesc, Vec<f64>)>, OpError> {
        let (plan, outs) =
            testing::run::<AttentionPlugin>(&self.build(Target::cpu()), &self.bytes(values))?;
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
        Dtype::F32 => (2e-5, 2e-5),
        Dtype::F16 => (1e-2, 1e-2),
        Dtype::Bf16 => (6e-2, 6e-2),
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

/// A runnable request of each op in `dt` (4-D attention with every optional input and output,
/// 3-D attention, rotary with and without position ids), with its inputs' values.
pub fn every_op(dt: Dtype) -> Vec<(Req, Vec<Vec<f64>>)> {
    let v = |n: usize, seed| data(n, seed);
    let full = Req::new("Attention")
        .input(&[2, 4, 3, 8], dt)
        .input(&[2, 2, 5, 8], dt)
        .input(&[2, 2, 5, 6], dt)
        .input(&[3, 7], dt)
        .input(&[2, 2, 2, 8], dt)
        .input(&[2, 2, 2, 6], dt)
        .attr("is_causal", A::Int(1))
        .attr("softcap", A::Float(2.0))
        .attr("qk_matmul_output_mode", A::Int(3))
        .outputs(&[true; 4]);
    let full_vals = vec![
        v(192, 1),
        v(160, 2),
        v(120, 3),
        v(21, 4),
        v(64, 5),
        v(48, 6),
    ];
    let padded = Req::new("Attention")
        .input(&[2, 2, 3, 4], dt)
        .input(&[2, 2, 4, 4], dt)
        .input(&[2, 2, 4, 4], dt)
        .input(&[2, 1, 3, 4], Dtype::Boolean)
        .absent()
        .absent()
        .input(&[2], Dtype::I64)
        .attr("is_causal", A::Int(1))
        .opset(24);
    let mask: Vec<f64> = (0..24).map(|i| ((i * 7) % 5 != 0) as u8 as f64).collect();
    let three_d = Req::new("Attention")
        .input(&[2, 3, 16], dt)
        .input(&[2, 4, 8], dt)
        .input(&[2, 4, 6], dt)
        .attr("q_num_heads", A::Int(4))
        .attr("kv_num_heads", A::Int(2));
    let rot = Req::new("RotaryEmbedding")
        .input(&[2, 3, 2, 8], dt)
        .input(&[10, 4], dt)
        .input(&[10, 4], dt)
        .input(&[2, 2], Dtype::I64)
        .attr("interleaved", A::Int(1));
    let rot3 = Req::new("RotaryEmbedding")
        .input(&[2, 2, 12], dt)
        .input(&[2, 2, 2], dt)
        .input(&[2, 2, 2], dt)
        .attr("num_heads", A::Int(2))
        .attr("rotary_embedding_dim", A::Int(4));
    let conv = Req::new("CausalConvWithState")
        .input(&[2, 3, 5], dt)
        .input(&[3, 1, 4], dt)
        .input(&[3], dt)
        .input(&[2, 3, 3], dt)
        .attr("activation", A::Text("silu".into()));
    let linear = Req::new("LinearAttention")
        .input(&[2, 3, 16], dt)
        .input(&[2, 3, 8], dt)
        .input(&[2, 3, 12], dt)
        .input(&[2, 2, 4, 6], dt)
        .input(&[2, 3, 8], dt)
        .input(&[2, 3, 2], dt)
        .attr("q_num_heads", A::Int(4))
        .attr("kv_num_heads", A::Int(2));
    let small = |n, s| {
        data(n, s)
            .iter()
            .map(|x| -x.abs() / 4.0)
            .collect::<Vec<_>>()
    };
    let flex = Req::new("FlexAttention")
        .input(&[2, 4, 3, 8], dt)
        .input(&[2, 2, 5, 8], dt)
        .input(&[2, 2, 5, 6], dt);
    vec![
        (conv, vec![v(30, 19), v(12, 20), v(3, 21), v(18, 22)]),
        (
            linear,
            vec![
                v(96, 23),
                v(48, 24),
                v(72, 25),
                v(96, 26),
                small(48, 27),
                small(12, 28),
            ],
        ),
        (flex, vec![v(192, 29), v(160, 30), v(120, 31)]),
        (full, full_vals),
        (
            padded,
            vec![v(48, 7), v(64, 8), v(64, 9), mask, vec![3., 4.]],
        ),
        (three_d, vec![v(96, 10), v(64, 11), v(48, 12)]),
        (
            rot,
            vec![v(96, 13), v(40, 14), v(40, 15), vec![0., 9., 3., 4.]],
        ),
        (rot3, vec![v(48, 16), v(8, 17), v(8, 18)]),
        (
            Req::new("SwiGLU")
                .input(&[3, 5], dt)
                .input(&[3, 5], dt)
                .attr("alpha", A::Float(1.5)),
            vec![v(15, 32), v(15, 33)],
        ),
    ]
}

#[test]
fn cuda_sources_exist_for_every_op_and_dtype() {
    for dt in ALL {
        for (r, _) in every_op(dt) {
            let srcs = testing::cuda_sources::<AttentionPlugin>(&r.build(Target::cpu()))
                .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", r.op));
            assert_eq!(srcs.len(), 1);
        }
        let src = AttentionPlugin::kernel_source(&module_id(dt), &Target::cpu()).unwrap();
        for e in &src.entry_points {
            assert!(src.code.contains(&format!("void {e}(")), "{e} missing");
        }
        assert!(!src.code.contains("#include"));
    }
    assert!(AttentionPlugin::kernel_source("attention_i32", &Target::cpu()).is_err());
    assert!(AttentionPlugin::kernel_source("norm_f32", &Target::cpu()).is_err());
}

#[test]
fn every_op_runs_in_every_dtype() {
    for dt in ALL {
        for (r, vals) in every_op(dt) {
            let got = r
                .run(&vals)
                .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", r.op));
            for (d, v) in &got {
                assert_eq!(v.len(), numel(&d.shape));
                assert!(
                    v.iter().all(|x| x.is_finite()),
                    "{} {dt:?} {}",
                    r.op,
                    d.name
                );
            }
        }
    }
}

#[test]
fn unknown_ops_attributes_and_dtypes_are_refused() {
    let e = Req::new("Relu").input(&[2], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedOp(_)));
    for op in ["Attention", "RotaryEmbedding"] {
        let e = Req::new(op)
            .input(&[1, 1, 2, 4], Dtype::I32)
            .input(&[1, 1, 2, 4], Dtype::I32)
            .input(&[1, 1, 2, 4], Dtype::I32)
            .plan()
            .unwrap_err();
        assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32, f16, bf16 and f64")));
        let e = Req::new(op)
            .input(&[1, 1, 2, 4], Dtype::F32)
            .input(&[1, 1, 2, 4], Dtype::F32)
            .input(&[1, 1, 2, 4], Dtype::F32)
            .attr("bogus", A::Int(1))
            .plan()
            .unwrap_err();
        assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("bogus")));
    }
    // names are matched case-insensitively
    assert!(
        Req::new("attention")
            .input(&[1, 1, 2, 4], Dtype::F32)
            .input(&[1, 1, 2, 4], Dtype::F32)
            .input(&[1, 1, 2, 4], Dtype::F32)
            .plan()
            .is_ok()
    );
}

#[test]
fn self_tests_pass_and_describe_lists_every_op() {
    for case in AttentionPlugin::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<AttentionPlugin>(&req, &case.input_data).unwrap();
        assert_eq!(outs.len(), case.expected.len(), "{}", case.name);
        for ((o, want), d) in outs.iter().zip(&case.expected).zip(&plan.outputs) {
            let (g, w) = (
                dtype::decode_f64(d.dtype, o),
                dtype::decode_f64(d.dtype, want),
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
    let info = AttentionPlugin::describe();
    assert_eq!(info.ops.len(), OPS.len());
    assert!(info.ops.iter().all(|o| o.targets == ["cpu", "cuda"]));
    assert!(AttentionPlugin::tolerance("Attention", Dtype::Bf16).is_some());
}
