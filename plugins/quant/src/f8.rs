//! 8-bit floats (ONNX FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0): a fast encoder (round to
//! nearest even on the format's grid, sign kept, saturating or not) and decoder, and the same
//! two as CUDA C device functions. `umd_sdk::dtype::f32_to_f8` is the exhaustive reference the
//! tests compare with.

use umd_sdk::Dtype;

/// The five formats by a small code (module ids and const generics).
pub fn from_code(code: u8) -> Dtype {
    match code {
        0 => Dtype::F8e4m3fn,
        1 => Dtype::F8e4m3fnuz,
        2 => Dtype::F8e5m2,
        3 => Dtype::F8e5m2fnuz,
        _ => Dtype::F8e8m0,
    }
}

/// (exponent bits, bias, fnuz) of a sign-exponent-mantissa 8-bit float.
pub fn format(dt: Dtype) -> (i32, i32, bool) {
    match dt {
        Dtype::F8e4m3fn => (4, 7, false),
        Dtype::F8e4m3fnuz => (4, 8, true),
        Dtype::F8e5m2 => (5, 15, false),
        _ => (5, 16, true),
    }
}

/// The largest finite value of a format.
pub fn max_finite(dt: Dtype) -> f64 {
    match dt {
        Dtype::F8e4m3fn => 448.0,
        Dtype::F8e4m3fnuz => 240.0,
        _ => 57344.0,
    }
}

/// Decodes a code of `dt`.
pub fn decode(bits: u8, dt: Dtype) -> f32 {
    umd_sdk::dtype::f8_to_f32(bits, dt)
}

fn ilogb(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// Encodes `v` in `dt` (not E8M0), rounding to nearest even. Out-of-range values (inf included)
/// become the largest finite value when `saturate`, else inf (E5M2) or NaN.
pub fn encode(v: f32, dt: Dtype, saturate: bool) -> u8 {
    let (eb, bias, fnuz) = format(dt);
    let mb = 7 - eb;
    let nan: u8 = if fnuz { 0x80 } else { 0x7f };
    if v.is_nan() {
        return nan;
    }
    let sign: u8 = if v.is_sign_negative() { 0x80 } else { 0 };
    let a = (v as f64).abs();
    let emin = 1 - bias;
    let max = max_finite(dt);
    let r = if a.is_infinite() {
        a
    } else {
        let e = if a == 0.0 { emin } else { ilogb(a).max(emin) };
        let q = 2f64.powi(e - mb);
        (a / q).round_ties_even() * q
    };
    if r > max {
        if saturate {
            return sign | encode(max as f32, dt, true);
        }
        if dt == Dtype::F8e5m2 {
            return sign | 0x7c;
        }
        return if fnuz { nan } else { sign | nan };
    }
    if r == 0.0 {
        return if fnuz { 0 } else { sign };
    }
    let e = ilogb(r);
    if e < emin {
        return sign | (r / 2f64.powi(emin - mb)) as u8;
    }
    let mant = (r / 2f64.powi(e - mb)) as u32 - (1 << mb);
    sign | (((e + bias) as u32) << mb | mant) as u8
}

/// CUDA C: `umd_f8_dec(bits, ebits, bias, fnuz)`, `umd_e8m0_dec(bits)` and
/// `umd_f8_enc(v, ebits, bias, fnuz, max, saturate, e5m2)` (the CPU's [`decode`] and [`encode`]).
pub const CUDA: &str = r#"
__device__ float umd_f8_dec(unsigned int b, int eb, int bias, int fnuz) {
  int mb = 7 - eb;
  if (fnuz && b == 0x80u) return __int_as_float(0x7fc00000);
  float sign = (b & 0x80u) ? -1.0f : 1.0f;
  int e = (int)((b >> mb) & ((1u << eb) - 1u));
  float f = (float)(b & ((1u << mb) - 1u));
  int emax = (1 << eb) - 1;
  if (!fnuz) {
    if (eb == 4 && e == emax && (int)f == (1 << mb) - 1) return __int_as_float(0x7fc00000);
    if (eb == 5 && e == emax) return f == 0.0f ? sign * __int_as_float(0x7f800000) : __int_as_float(0x7fc00000);
  }
  float scale = (float)(1 << mb);
  if (e == 0) return sign * f / scale * ldexpf(1.0f, 1 - bias);
  return sign * (1.0f + f / scale) * ldexpf(1.0f, e - bias);
}
__device__ float umd_e8m0_dec(unsigned int b) {
  return b == 0xffu ? __int_as_float(0x7fc00000) : ldexpf(1.0f, (int)b - 127);
}
__device__ unsigned char umd_f8_enc(float v, int eb, int bias, int fnuz, double mx, int sat, int e5m2) {
  int mb = 7 - eb;
  unsigned int nan = fnuz ? 0x80u : 0x7fu;
  if (v != v) return (unsigned char)nan;
  unsigned int sign = (__float_as_uint(v) & 0x80000000u) ? 0x80u : 0u;
  double a = fabs((double)v);
  int emin = 1 - bias;
  double r = a;
  if (a <= 1.7976931348623157e308) {
    int e = a == 0.0 ? emin : ilogb(a);
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mb);
    r = rint(a / q) * q;
  }
  if (r > mx) {
    if (sat) r = mx;
    else if (e5m2) return (unsigned char)(sign | 0x7cu);
    else return (unsigned char)(fnuz ? nan : (sign | nan));
  }
  if (r == 0.0) return (unsigned char)(fnuz ? 0u : sign);
  int e = ilogb(r);
  if (e < emin) return (unsigned char)(sign | (unsigned int)(r / ldexp(1.0, emin - mb)));
  unsigned int mant = (unsigned int)(r / ldexp(1.0, e - mb)) - (1u << mb);
  return (unsigned char)(sign | ((unsigned int)(e + bias) << mb) | mant);
}
"#;
