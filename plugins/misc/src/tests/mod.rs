//! Native tests of the `misc` plugin: every op on the CPU kernels against hand-computed values
//! or naive references, error cases, and the CUDA source of every op × dtype.

use umd_sdk::{
    AttrValueExt, Dtype, OpError, OpPlan, PlanRequestExt, Target, TensorDesc, dtype, testing,
};

use crate::Misc;

mod col2im;
mod copy;
mod cuda;
mod einsum;
mod grid;
mod layout;
mod mel;
mod nms;
mod random;
mod roipool;
mod signal;
mod unique;
mod window;

pub fn target() -> Target {
    Target::cpu()
}

pub fn desc(shape: &[u64], dt: Dtype) -> TensorDesc {
    TensorDesc::new("t", shape.to_vec(), dt)
}

pub fn int(v: i64) -> AttrValueExt {
    AttrValueExt::Int(v)
}

pub fn text(v: &str) -> AttrValueExt {
    AttrValueExt::Text(v.into())
}

pub fn enc(dt: Dtype, v: &[f64]) -> Vec<u8> {
    dtype::encode(dt, v).unwrap()
}

/// Plans and runs `req` on inputs given as values (each encoded in its slot's dtype).
pub fn run(req: &PlanRequestExt, inputs: &[Vec<f64>]) -> Result<(OpPlan, Vec<Vec<f64>>), OpError> {
    let bytes: Vec<Vec<u8>> = req
        .present()
        .zip(inputs)
        .map(|(d, v)| enc(d.dtype, v))
        .collect();
    let (plan, outs) = testing::run::<Misc>(req, &bytes)?;
    let vals = plan
        .outputs
        .iter()
        .zip(&outs)
        .map(|(d, b)| dtype::decode_f64(d.dtype, b))
        .collect();
    Ok((plan, vals))
}

pub fn err(req: &PlanRequestExt) -> OpError {
    match <Misc as umd_sdk::Plugin>::plan_ext(req) {
        Ok(_) => panic!("{}: expected an error", req.op),
        Err(e) => e,
    }
}

pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Tolerance of a float dtype for the tests.
pub fn tol(dt: Dtype) -> f64 {
    match dt {
        Dtype::F32 => 1e-5,
        Dtype::F16 => 2e-3,
        Dtype::Bf16 => 1.6e-2,
        _ => 1e-12,
    }
}

/// Rounds values to `dt` (as an input of that dtype holds them).
pub fn quantize(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &enc(dt, v))
}

/// Deterministic sample values in [-2, 2).
pub fn sample(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 4096) as f64 / 1024.0 - 2.0
        })
        .collect()
}

#[test]
fn describe_and_self_tests() {
    use umd_sdk::Plugin;
    let info = Misc::describe();
    assert_eq!(info.name, "misc");
    for op in [
        "Dropout",
        "BitCast",
        "Einsum",
        "AffineGrid",
        "GridSample",
        "HannWindow",
        "HammingWindow",
        "BlackmanWindow",
        "DFT",
        "CenterCropPad",
        "ReverseSequence",
        "Col2Im",
        "Compress",
        "Det",
        "Unique",
        "NonZero",
        "MaxUnpool",
        "RoiAlign",
        "STFT",
        "MelWeightMatrix",
    ] {
        assert!(info.ops.iter().any(|o| o.name == op), "{op}");
    }
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    for case in Misc::self_tests() {
        let legacy = umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        };
        let req = PlanRequestExt::from_legacy(&legacy);
        let (plan, outs) = testing::run::<Misc>(&req, &case.input_data).unwrap();
        for ((o, got), want) in plan.outputs.iter().zip(&outs).zip(&case.expected) {
            assert_close(
                &dtype::decode_f64(o.dtype, got),
                &dtype::decode_f64(o.dtype, want),
                case.tolerance,
                &case.name,
            );
        }
    }
    let e = err(&PlanRequestExt::builder("Nope")
        .input(desc(&[1], Dtype::F32))
        .build(target()));
    assert!(matches!(e, OpError::UnsupportedOp(_)));
}
