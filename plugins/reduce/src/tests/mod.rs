//! Native tests: planning, every op on the CPU kernels against naive references written here
//! (f64 arithmetic over explicit multi-indices), the in-place kernels against the whole-buffer
//! ones they replaced ([`oracle`]), errors, and the CUDA sources of every op × dtype.

mod arg;
mod axis;
mod cuda;
mod emulate;
mod errors;
mod inplace;
mod oracle;
mod reduce;
mod wide;
mod xcheck;

use umd_sdk::{AttrValueExt, Dtype, OpError, OpPlan, PlanRequestExt, Target, TensorDesc, dtype};

use crate::Reduce;

/// Deterministic pseudo-random values in [-range, range], rounded to `step` (so integer and
/// half dtypes hold them exactly when `step` is 1 or a power of two).
pub fn data(n: usize, seed: u64, range: f64, step: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            ((u * 2.0 - 1.0) * range / step).round() * step
        })
        .collect()
}

/// Whether `dt` is an unsigned integer type (test data for it is made non-negative).
pub fn unsigned(dt: Dtype) -> bool {
    matches!(dt, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64)
}

/// [`data`] made non-negative for the unsigned dtypes, then [`quantize`]d to `dt`.
pub fn sample(dt: Dtype, n: usize, seed: u64, range: f64, step: f64) -> Vec<f64> {
    let v = data(n, seed, range, step);
    let v: Vec<f64> = if unsigned(dt) {
        v.iter().map(|x| x.abs()).collect()
    } else {
        v
    };
    quantize(dt, &v)
}

/// An exact integer result wrapped to the width of integer dtype `dt` (two's complement, as
/// the kernels' wrapping arithmetic); other dtypes unchanged.
pub fn wrap(dt: Dtype, v: f64) -> f64 {
    let bits = match dt {
        Dtype::I8 | Dtype::U8 => 8,
        Dtype::I16 | Dtype::U16 => 16,
        Dtype::I32 | Dtype::U32 => 32,
        Dtype::I64 | Dtype::U64 => 64,
        _ => return v,
    };
    if !v.is_finite() {
        return v;
    }
    let m = 2f64.powi(bits);
    let lo = if unsigned(dt) { 0.0 } else { -m / 2.0 };
    if v >= lo && v < lo + m {
        return v; // in range (and exact: no rounding through the modulus)
    }
    let r = v.rem_euclid(m);
    if !unsigned(dt) && r >= m / 2.0 {
        r - m
    } else {
        r
    }
}

/// Values as stored in `dt` and read back (what the kernel actually sees).
pub fn quantize(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A request builder with the data input `x` of `shape` and `dt`.
pub fn builder(op: &str, shape: &[u64], dt: Dtype) -> umd_sdk::request::RequestBuilder {
    PlanRequestExt::builder(op).input(TensorDesc::new("x", shape.to_vec(), dt))
}

/// Adds a constant i64 input of `values` (shape `[len]`, or `[]` when `scalar`).
pub fn with_ints(
    b: umd_sdk::request::RequestBuilder,
    values: &[i64],
    scalar: bool,
) -> umd_sdk::request::RequestBuilder {
    let shape = if scalar {
        vec![]
    } else {
        vec![values.len() as u64]
    };
    b.constant(TensorDesc::new("c", shape, Dtype::I64), &i64_bytes(values))
}

pub fn int(v: i64) -> AttrValueExt {
    AttrValueExt::Int(v)
}

pub fn ints(v: &[i64]) -> AttrValueExt {
    AttrValueExt::Ints(v.to_vec())
}

/// Plans and runs on the CPU kernels; returns the plan and each output decoded as f64.
/// `x` is the data input's values; constant inputs are sent as their bytes.
pub fn run(req: &PlanRequestExt, x: &[f64]) -> Result<(OpPlan, Vec<Vec<f64>>), OpError> {
    let dt = req.input(0).unwrap().dtype;
    let mut inputs = vec![dtype::encode(dt, x).unwrap()];
    for i in 1..req.slots() {
        if let Some(v) = req.value(i) {
            inputs.push(v.to_vec());
        } else if req.input(i).is_some() {
            panic!("test inputs past 0 must be constants");
        }
    }
    let (plan, outs) = umd_sdk::testing::run::<Reduce>(req, &inputs)?;
    let decoded = plan
        .outputs
        .iter()
        .zip(&outs)
        .map(|(d, b)| dtype::decode_f64(d.dtype, b))
        .collect();
    Ok((plan, decoded))
}

/// Asserts `got` matches `want` element-wise within `|d| <= tol * (1 + |want|)` (NaN = NaN,
/// infinities equal).
pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g == w
            || (g.is_finite() && w.is_finite() && (g - w).abs() <= tol * (1.0 + w.abs()));
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

pub fn target() -> Target {
    Target::cpu()
}

/// Row-major unravel of `flat` over `shape`.
pub fn unravel(mut flat: usize, shape: &[u64]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d] as usize;
        flat /= shape[d] as usize;
    }
    idx
}

/// Row-major flat index of `idx` over `shape`.
pub fn ravel(idx: &[usize], shape: &[u64]) -> usize {
    idx.iter()
        .zip(shape)
        .fold(0, |acc, (i, d)| acc * *d as usize + i)
}

/// Tolerance of a result in `dt` against the f64 reference.
pub fn tol(dt: Dtype) -> f64 {
    match dt {
        Dtype::F32 => 2e-5,
        Dtype::F16 => 2e-3,
        Dtype::Bf16 => 1e-2,
        Dtype::F64 => 1e-12,
        _ => 0.0,
    }
}

/// The plugin's self-tests pass through the native harness.
#[test]
fn self_tests_pass() {
    use umd_sdk::Plugin;
    for case in Reduce::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: target(),
        });
        let (plan, outs) = umd_sdk::testing::run::<Reduce>(&req, &case.input_data).unwrap();
        for ((o, got), want) in plan.outputs.iter().zip(&outs).zip(&case.expected) {
            let (g, w) = (
                dtype::decode_f64(o.dtype, got),
                dtype::decode_f64(o.dtype, want),
            );
            assert_close(&g, &w, case.tolerance, &case.name);
        }
    }
}
