//! Comparing a device's output with the reference's: the tolerance for an op and dtype (the
//! element-wise error `|got - want| / (1 + |want|)` is [`crate::data::compare`]).
//!
//! The only place `umd check` tells ops apart: ops that sum many products ([`REDUCING_OPS`])
//! may round differently on every device; the others must agree to the dtype's last bits.

pub use crate::data::{Difference, compare};
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data;

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
