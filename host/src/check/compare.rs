//! Comparing a device's output with the reference's: the tolerance for an op and dtype, and the
//! element-wise error `|got - want| / (1 + |want|)`.
//!
//! The only place `umd check` tells ops apart: ops that sum many products ([`REDUCING_OPS`])
//! may round differently on every device; the others must agree to the dtype's last bits.

use crate::data;
use crate::tensor::Dtype;

/// Ops whose results are sums of many terms, compared with the looser tolerances.
pub const REDUCING_OPS: [&str; 4] = ["MatMul", "Gemm", "Conv", "ConvTranspose"];

/// Largest allowed `|got - want| / (1 + |want|)` for `op`'s outputs of `dtype` (0: exact).
pub fn tolerance(op: &str, dtype: Dtype) -> f64 {
    let reducing = REDUCING_OPS.iter().any(|r| op.eq_ignore_ascii_case(r));
    match (dtype, reducing) {
        (Dtype::F32, false) => 1e-5,
        (Dtype::F16, false) => 2e-3,
        (Dtype::Bf16, false) => 1e-2,
        (Dtype::F64, false) => 1e-12,
        (Dtype::F32, true) => 1e-4,
        (Dtype::F16, true) => 2e-2,
        (Dtype::Bf16, true) => 5e-2,
        (Dtype::F64, true) => 1e-10,
        // Integers and booleans: exact.
        _ => 0.0,
    }
}

/// How far one output is from the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Largest error over the elements (`inf` where one side is NaN or infinite and the other
    /// is not the same).
    pub max_error: f64,
    /// The first element over `tolerance`: (index, got, want).
    pub first_bad: Option<(usize, f64, f64)>,
}

/// Compares two outputs of `dtype` element by element. Equal values (infinities of one sign
/// included) and NaN against NaN count as exact.
pub fn compare(
    dtype: Dtype,
    got: &[u8],
    want: &[u8],
    tolerance: f64,
) -> Result<Difference, String> {
    let (got, want) = (data::decode(dtype, got), data::decode(dtype, want));
    if got.len() != want.len() {
        return Err(format!(
            "{} elements, the reference has {}",
            got.len(),
            want.len()
        ));
    }
    let mut d = Difference {
        max_error: 0.0,
        first_bad: None,
    };
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let err = if g == w || (g.is_nan() && w.is_nan()) {
            0.0
        } else {
            let e = (g - w).abs() / (1.0 + w.abs());
            if e.is_nan() { f64::INFINITY } else { e }
        };
        d.max_error = d.max_error.max(err);
        if err > tolerance && d.first_bad.is_none() {
            d.first_bad = Some((i, g, w));
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f64]) -> Vec<u8> {
        data::encode(Dtype::F32, v)
    }

    #[test]
    fn tolerances_by_op_and_dtype() {
        assert_eq!(tolerance("Add", Dtype::F32), 1e-5);
        assert_eq!(tolerance("matmul", Dtype::F32), 1e-4);
        assert_eq!(tolerance("MatMul", Dtype::F16), 2e-2);
        assert_eq!(tolerance("MatMul", Dtype::Bf16), 5e-2);
        assert_eq!(tolerance("Div", Dtype::I32), 0.0);
    }

    #[test]
    fn errors_are_relative_to_one_plus_the_reference() {
        let d = compare(Dtype::F32, &f32s(&[1.0, 3.0]), &f32s(&[1.0, 2.0]), 0.5).unwrap();
        assert!((d.max_error - 1.0 / 3.0).abs() < 1e-9, "{d:?}");
        assert_eq!(d.first_bad, None);
        let d = compare(Dtype::F32, &f32s(&[1.0, 3.0]), &f32s(&[1.0, 2.0]), 0.1).unwrap();
        assert_eq!(d.first_bad, Some((1, 3.0, 2.0)));
    }

    #[test]
    fn nan_inf_and_integers() {
        let same = f32s(&[f64::NAN, f64::INFINITY, -0.0]);
        let d = compare(
            Dtype::F32,
            &same,
            &f32s(&[f64::NAN, f64::INFINITY, 0.0]),
            0.0,
        );
        assert_eq!(d.unwrap().max_error, 0.0);
        let d = compare(Dtype::F32, &f32s(&[f64::NAN]), &f32s(&[1.0]), 1e9).unwrap();
        assert_eq!(d.max_error, f64::INFINITY);
        assert!(d.first_bad.is_some());
        let i = |v: &[f64]| data::encode(Dtype::I32, v);
        let d = compare(Dtype::I32, &i(&[3.0, -3.0]), &i(&[3.0, -2.0]), 0.0).unwrap();
        assert_eq!(d.first_bad, Some((1, -3.0, -2.0)));
        assert!(compare(Dtype::I32, &i(&[1.0]), &i(&[1.0, 2.0]), 0.0).is_err());
    }
}
