//! Comparing a device's output with the reference's: the tolerance for an op and dtype (the
//! element-wise error `|got - want| / (1 + |want|)` is [`crate::data::compare`]).
//!
//! The host never tells ops apart: every dtype has a default that allows for the last bits of
//! rounding, and a plugin (ABI 1.2) declares a looser tolerance for ops that need one (sums of
//! many products, transcendental functions).

pub use crate::data::{Difference, compare};
use crate::plugin::LoadedPlugin;
use crate::tensor::Dtype;

/// The host's tolerance for a dtype when the plugin declares none (0: exact).
pub fn default_tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::F16 => 2e-3,
        Dtype::Bf16 => 1e-2,
        Dtype::F64 => 1e-12,
        // Integers and booleans: exact.
        _ => 0.0,
    }
}

/// Largest allowed `|got - want| / (1 + |want|)` for `op`'s outputs of `dtype` planned by
/// `plugin`: the dtype's default, raised to the plugin's declared tolerance (the larger of its
/// absolute and relative parts, which bounds `|got - want| <= abs + rel * |want|`).
pub fn tolerance(plugin: &LoadedPlugin, op: &str, dtype: Dtype) -> f64 {
    let declared = plugin
        .tolerance(op, dtype)
        .map(|t| t.absolute.max(t.relative))
        .unwrap_or(0.0);
    default_tolerance(dtype).max(declared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data;

    fn f32s(v: &[f64]) -> Vec<u8> {
        data::encode(Dtype::F32, v)
    }

    #[test]
    fn tolerances_come_from_the_dtype_and_the_plugin() {
        let host = crate::Host::builder().build().unwrap();
        let snap = host.registry().snapshot();
        let matmul = snap.candidates("MatMul", host.device().target())[0]
            .plugin
            .clone();
        let add = snap.candidates("Add", host.device().target())[0]
            .plugin
            .clone();
        assert_eq!(
            tolerance(&add, "Add", Dtype::F32),
            1e-5,
            "the dtype default"
        );
        assert_eq!(tolerance(&add, "Div", Dtype::I32), 0.0);
        assert!(
            tolerance(&matmul, "MatMul", Dtype::F32) > 1e-5,
            "declared by the plugin"
        );
        assert!(tolerance(&matmul, "matmul", Dtype::Bf16) >= 1e-2);
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
