//! f32 `exp`, `tanh`, `sigmoid` and `erf` for CPU kernels, without libm: in WebAssembly `f32::exp`
//! and `f32::tanh` are software libm calls (10–40 ns an element: a GPT-2 block's `tanh` GELU
//! took longer than its matrix products). These are a few dozen inline f32 operations without
//! branches (both sides of every choice computed, then selected; no `f32::min`/`max`, which
//! are libm calls in WebAssembly), so a loop over a slice vectorizes to SIMD128, and a lane computes exactly what the scalar call does (a split
//! launch gives the bytes of the whole). Against f64 over every 4099th f32: at most 1 ulp
//! from the correctly rounded result (`exp`, `tanh`) and 2 (`sigmoid`), tested to within 2;
//! `erf` within 6;
//! NaN, ±0, ±∞ and the overflow and subnormal ranges as IEEE says.
//!
//! ```
//! assert_eq!(umd_sdk::fmath::exp(0.0), 1.0);
//! assert_eq!(umd_sdk::fmath::tanh(f32::NEG_INFINITY), -1.0);
//! assert_eq!(umd_sdk::fmath::sigmoid(0.0), 0.5);
//! ```

/// `e^x`: Cody–Waite reduction `x = n ln 2 + r` (|r| ≤ ln 2 / 2), Cephes' degree-6 polynomial
/// for `e^r`, scaled by `2^n` as two normal powers of two (one rounding, into the subnormals
/// or to infinity where `e^x` is).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // NaN stays NaN through the clamp and the polynomial (its n converts to 0)
    let xc = x.clamp(-104.0, 89.0);
    let n = (xc * std::f32::consts::LOG2_E).round_ties_even();
    let r = xc - n * 0.693_359_4;
    let r = r - n * -2.121_944_4e-4;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let y = p * (r * r) + r + 1.0;
    // n in [-150, 128]: halves in [-75, 64], each a normal power of two
    let n = n as i32;
    let n1 = n >> 1;
    let n2 = n - n1;
    let pow2 = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    y * pow2(n1) * pow2(n2)
}

/// `tanh(x)`: Cephes' odd polynomial below |x| = 0.625, `1 - 2 / (e^{2|x|} + 1)` (sign of `x`)
/// above; ±0 and NaN as they are.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let z = x * x;
    let p = -5.704_988_7e-3_f32;
    let p = p * z + 2.063_909e-2;
    let p = p * z - 5.373_971_6e-2;
    let p = p * z + 1.333_144_2e-1;
    let p = p * z - 3.333_328e-1;
    let small = x + x * (p * z);
    // |x| ≥ 9.1 is ±1 in f32; 10 keeps e^{2|x|} finite (and takes ±∞). A comparison, not
    // `f32::min`: WebAssembly has no IEEE minNum, so `min` is a call of `fminf` per element
    let a = x.abs();
    let a = if a < 10.0 { a } else { 10.0 };
    let large = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    let t = if x.abs() < 0.625 { small } else { large };
    if x == 0.0 || x.is_nan() { x } else { t }
}

/// `erf(x)`: a rational function `x·P(x²)/Q(x²)` on `x` clamped to [-4, 4] (erf is ±1 in f32
/// beyond), the coefficients of Eigen's `generic_fast_erf_float`; `2x/√π` below |x| = 2⁻¹⁴,
/// where the rational form would lose the low bits of subnormal products. Within 6 ulp (3.3e-7
/// relative) of the correctly rounded value, against libm's 1 — what GELU needs, at a fraction
/// of libm's cost in WebAssembly.
#[inline(always)]
#[allow(clippy::excessive_precision)] // Eigen's coefficients as published
pub fn erf(x: f32) -> f32 {
    let c = x.clamp(-4.0, 4.0);
    let z = c * c;
    let p = -2.72614225801306e-10_f32;
    let p = p * z + 2.77068142495902e-08;
    let p = p * z - 2.10102402082508e-06;
    let p = p * z - 5.69250639462346e-05;
    let p = p * z - 7.34990630326855e-04;
    let p = p * z - 2.95459980854025e-03;
    let p = p * z - 1.60960333262415e-02;
    let q = -1.45660718464996e-05_f32;
    let q = q * z - 2.13374055278905e-04;
    let q = q * z - 1.68282697438203e-03;
    let q = q * z - 7.37332916720468e-03;
    let q = q * z - 1.42647390514189e-02;
    let r = c * p / q;
    let a = x.abs();
    // ±1 where erf rounds to it in f32 (|x| > 3.9192); NaN falls through both tests
    let r = if a > 3.92 { 1.0f32.copysign(x) } else { r };
    if a < 6.103_515_6e-5 {
        x * std::f32::consts::FRAC_2_SQRT_PI
    } else {
        r
    }
}

/// `1 / (1 + e^-x)` without overflow: `e = e^{-|x|}`, then `1 / (1 + e)` or `e / (1 + e)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let d = 1.0 / (1.0 + e);
    // NaN: `e` is NaN and so is `e * d`
    if x >= 0.0 { d } else { e * d }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulp between `got` and the f64 value `want` rounded to f32 (0 for two NaNs).
    fn ulp(got: f32, want: f64) -> u32 {
        let w = want as f32;
        if got.is_nan() && w.is_nan() {
            return 0;
        }
        if got == w {
            return 0;
        }
        if got.is_nan() || w.is_nan() || got.is_sign_negative() != w.is_sign_negative() {
            return u32::MAX;
        }
        (got.to_bits() as i64 - w.to_bits() as i64).unsigned_abs() as u32
    }

    fn sweep(f: fn(f32) -> f32, reference: fn(f64) -> f64, max_ulp: u32) {
        let mut worst = (0, 0.0f32);
        for bits in (0..=u32::MAX).step_by(4099) {
            let x = f32::from_bits(bits);
            let d = ulp(f(x), reference(x as f64));
            if d > worst.0 {
                worst = (d, x);
            }
        }
        assert!(worst.0 <= max_ulp, "{} ulp at {:e}", worst.0, worst.1);
    }

    #[test]
    fn exp_is_within_2_ulp_and_takes_the_ieee_special_values() {
        sweep(exp, f64::exp, 2);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(88.8), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(-0.0), 1.0);
        // the subnormal range, rounded once
        for x in [-87.5f32, -95.0, -100.0, -103.0, -103.97] {
            assert!(ulp(exp(x), (x as f64).exp()) <= 2, "{x}");
        }
        assert_eq!(exp(-104.0), 0.0);
    }

    #[test]
    fn exp_is_within_2_ulp_densely_over_its_whole_range() {
        let mut worst = 0f64;
        let mut x = -104.0f32;
        while x < 89.0 {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            if want > f32::MIN_POSITIVE as f64 && want < f32::MAX as f64 {
                worst = worst.max(((got - want) / want).abs());
            } else if want >= f32::MAX as f64 * 1.0000001 {
                assert_eq!(got, f64::INFINITY, "{x}");
            } else {
                assert!((got - want).abs() <= 2.0 * 1.4e-45, "{x}: {got} vs {want}");
            }
            x += 0.000_731;
        }
        assert!(worst < 2.4e-7, "worst relative error {worst}");
    }

    #[test]
    fn tanh_is_within_2_ulp_and_keeps_zeros_signs_and_nan() {
        sweep(tanh, f64::tanh, 2);
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!(tanh(1e-30), 1e-30);
    }

    #[test]
    fn erf_is_within_6_ulp_and_keeps_zeros_signs_and_nan() {
        sweep(erf, libm::erf, 6);
        assert_eq!(erf(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert_eq!(erf(4.5), 1.0);
        assert!(erf(f32::NAN).is_nan());
        // subnormal inputs: 2x/√π rounded once
        let tiny = f32::from_bits(5);
        assert_eq!(erf(tiny), tiny * std::f32::consts::FRAC_2_SQRT_PI);
    }

    #[test]
    fn sigmoid_is_within_2_ulp_on_both_sides() {
        sweep(sigmoid, |x| 1.0 / (1.0 + (-x).exp()), 2);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert!(sigmoid(f32::NAN).is_nan());
        assert_eq!(sigmoid(-0.0), 0.5);
    }

    #[test]
    fn a_loop_over_a_slice_computes_what_each_call_does() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.173).collect();
        let mut ys = xs.clone();
        ys.iter_mut().for_each(|v| *v = tanh(*v));
        for (&x, &y) in xs.iter().zip(&ys) {
            assert_eq!(y.to_bits(), tanh(x).to_bits());
        }
    }
}
