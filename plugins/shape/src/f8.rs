//! Fast 8-bit float conversions (ONNX FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) by bit
//! manipulation, in Rust for the CPU kernel and in CUDA C ([`CUDA`]) for the GPU, with the same
//! rules as the ONNX reference (ml_dtypes):
//! - f32 → E4M3/E5M2: round to nearest even; out of range (incl. ±inf) saturates to ±max when
//!   `saturate`, else becomes ±inf (E5M2) or NaN; NaN → NaN (0x7f/0x7e with the sign, 0x80 for
//!   the FNUZ types, which also have no -0);
//! - f32 → E8M0: the exponent of |x| (sign ignored), rounded "up", "down" or "nearest" as
//!   `onnx.numpy_helper.to_float8e8m0`; NaN/±inf → 0xff; saturation keeps 0xfe.
//!
//! The encoders expect the exact value or one rounded to odd in f32 (see `crate::cast`), so one
//! rounding happens overall.

use umd_sdk::Dtype;

/// The layout of an E4M3/E5M2 type.
#[derive(Clone, Copy)]
pub struct Fmt {
    /// Mantissa bits.
    pub m: u32,
    pub bias: i32,
    /// No -0, no inf, NaN is 0x80.
    pub fnuz: bool,
    /// The largest finite code.
    pub max: u8,
    /// Has infinities (E5M2).
    pub inf: bool,
    /// The positive NaN code (non-FNUZ).
    pub nan: u8,
}

/// The layout of `dt`; `None` for E8M0 and the non-f8 types.
pub fn fmt(dt: Dtype) -> Option<Fmt> {
    let f = |m, bias, fnuz, max, inf, nan| Fmt {
        m,
        bias,
        fnuz,
        max,
        inf,
        nan,
    };
    Some(match dt {
        Dtype::F8e4m3fn => f(3, 7, false, 0x7e, false, 0x7f),
        Dtype::F8e4m3fnuz => f(3, 8, true, 0x7f, false, 0x80),
        Dtype::F8e5m2 => f(2, 15, false, 0x7b, true, 0x7e),
        Dtype::F8e5m2fnuz => f(2, 16, true, 0x7f, false, 0x80),
        _ => return None,
    })
}

/// E8M0 rounding (`round_mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Round {
    Up = 0,
    Down = 1,
    Nearest = 2,
}

impl Round {
    pub fn parse(s: &str) -> Option<Round> {
        Some(match s {
            "up" => Round::Up,
            "down" => Round::Down,
            "nearest" => Round::Nearest,
            _ => return None,
        })
    }
    pub fn from_bits(b: u32) -> Round {
        match b {
            1 => Round::Down,
            2 => Round::Nearest,
            _ => Round::Up,
        }
    }
}

/// f32 → E4M3/E5M2 code.
#[inline]
pub fn encode(x: f32, f: Fmt, sat: bool) -> u8 {
    let b = x.to_bits();
    let sign = ((b >> 24) & 0x80) as u8;
    let a = b & 0x7fff_ffff;
    let nan = if f.fnuz { 0x80 } else { f.nan | sign };
    let overflow = if sat {
        f.max | sign
    } else if f.inf {
        0x7c | sign
    } else {
        nan
    };
    if a > 0x7f80_0000 {
        return nan;
    }
    if a == 0x7f80_0000 {
        return overflow;
    }
    let emin = 1 - f.bias;
    let e = (a >> 23) as i32 - 127;
    let code = if e < emin {
        // below the smallest normal: a multiple of 2^(emin - m), scaled exactly, rounded even
        let scale = f32::from_bits(((f.m as i32 - emin + 127) as u32) << 23);
        (f32::from_bits(a) * scale).round_ties_even() as u32
    } else {
        let sh = 23 - f.m;
        let r = (a + (1 << (sh - 1)) - 1 + ((a >> sh) & 1)) >> sh;
        r - (((127 - f.bias) as u32) << f.m)
    };
    if code > f.max as u32 {
        return overflow;
    }
    if f.fnuz && code == 0 {
        return 0;
    }
    code as u8 | sign
}

/// E4M3/E5M2 code → f32 (exact).
#[inline]
pub fn decode(code: u8, f: Fmt) -> f32 {
    if f.fnuz && code == 0x80 {
        return f32::NAN;
    }
    let sign = ((code & 0x80) as u32) << 24;
    let e = ((code as u32) >> f.m) & ((1 << (7 - f.m)) - 1);
    let mant = (code as u32) & ((1 << f.m) - 1);
    if !f.fnuz {
        if f.m == 3 && code & 0x7f == 0x7f {
            return f32::NAN;
        }
        if f.m == 2 && e == 31 {
            return if mant == 0 {
                f32::from_bits(sign | 0x7f80_0000)
            } else {
                f32::NAN
            };
        }
    }
    if e == 0 {
        let scale = f32::from_bits(((1 - f.bias - f.m as i32 + 127) as u32) << 23);
        f32::from_bits(sign | (mant as f32 * scale).to_bits())
    } else {
        f32::from_bits(sign | (((e as i32 - f.bias + 127) as u32) << 23) | (mant << (23 - f.m)))
    }
}

/// f32 → E8M0 code, as `onnx.numpy_helper.to_float8e8m0`.
#[inline]
pub fn encode_e8m0(x: f32, sat: bool, round: Round) -> u8 {
    let b = x.to_bits();
    let exp = (b >> 23) & 0xff;
    if exp == 0xff {
        return 0xff;
    }
    let up = match round {
        Round::Up => b & 0x7f_ffff != 0,
        Round::Down => false,
        Round::Nearest => {
            let (g, r, s) = (b & 0x40_0000 != 0, b & 0x20_0000 != 0, b & 0x1f_ffff != 0);
            g && (r || s || exp > 0)
        }
    };
    let up = up && !(sat && exp == 0xfe);
    (exp + up as u32) as u8
}

/// E8M0 code → f32 (2^(code-127); 0xff is NaN).
#[inline]
pub fn decode_e8m0(code: u8) -> f32 {
    match code {
        0xff => f32::NAN,
        0 => f32::from_bits(0x40_0000),
        c => f32::from_bits((c as u32) << 23),
    }
}

/// The CUDA C twins: `umd_f2f8(x, m, bias, fnuz, max, inf, nan, sat)`,
/// `umd_f82f(code, m, bias, fnuz)`, `umd_f2e8m0(x, sat, round)`, `umd_e8m02f(code)`.
pub const CUDA: &str = r#"
__device__ __forceinline__ unsigned char umd_f2f8(float x, unsigned int m, int bias, bool fnuz,
    unsigned int maxc, bool inf, unsigned int nanc, bool sat) {
    const unsigned int b = __float_as_uint(x), sign = (b >> 24) & 0x80u, a = b & 0x7fffffffu;
    const unsigned int nan = fnuz ? 0x80u : (nanc | sign);
    const unsigned int ovf = sat ? (maxc | sign) : inf ? (0x7cu | sign) : nan;
    if (a > 0x7f800000u) return (unsigned char)nan;
    if (a == 0x7f800000u) return (unsigned char)ovf;
    const int emin = 1 - bias, e = (int)(a >> 23) - 127;
    unsigned int code;
    if (e < emin) {
        code = (unsigned int)rintf(__uint_as_float(a) * __uint_as_float((unsigned int)((int)m - emin + 127) << 23));
    } else {
        const unsigned int sh = 23u - m;
        code = ((a + (1u << (sh - 1u)) - 1u + ((a >> sh) & 1u)) >> sh) - ((unsigned int)(127 - bias) << m);
    }
    if (code > maxc) return (unsigned char)ovf;
    if (fnuz && code == 0u) return 0;
    return (unsigned char)(code | sign);
}
__device__ __forceinline__ float umd_f82f(unsigned char c, unsigned int m, int bias, bool fnuz) {
    const unsigned int code = c;
    if (fnuz && code == 0x80u) return __uint_as_float(0x7fc00000u);
    const unsigned int sign = (code & 0x80u) << 24;
    const unsigned int e = (code >> m) & ((1u << (7u - m)) - 1u), mant = code & ((1u << m) - 1u);
    if (!fnuz) {
        if (m == 3u && (code & 0x7fu) == 0x7fu) return __uint_as_float(0x7fc00000u);
        if (m == 2u && e == 31u) return mant == 0u ? __uint_as_float(sign | 0x7f800000u) : __uint_as_float(0x7fc00000u);
    }
    if (e == 0u) {
        const float scale = __uint_as_float((unsigned int)(1 - bias - (int)m + 127) << 23);
        return __uint_as_float(sign | __float_as_uint((float)mant * scale));
    }
    return __uint_as_float(sign | ((unsigned int)((int)e - bias + 127) << 23) | (mant << (23u - m)));
}
__device__ __forceinline__ unsigned char umd_f2e8m0(float x, bool sat, unsigned int round) {
    const unsigned int b = __float_as_uint(x), exp = (b >> 23) & 0xffu;
    if (exp == 0xffu) return 0xff;
    bool up = false;
    if (round == 0u) up = (b & 0x7fffffu) != 0u;
    else if (round == 2u) up = (b & 0x400000u) && ((b & 0x200000u) || (b & 0x1fffffu) || exp > 0u);
    if (sat && exp == 0xfeu) up = false;
    return (unsigned char)(exp + (up ? 1u : 0u));
}
__device__ __forceinline__ float umd_e8m02f(unsigned char c) {
    if (c == 0xff) return __uint_as_float(0x7fc00000u);
    if (c == 0) return __uint_as_float(0x400000u);
    return __uint_as_float(((unsigned int)c) << 23);
}
"#;

/// The CUDA C call encoding the float expression `x` as `dt` (an f8 type), with the kernel's
/// `mode` (bit 0 saturate, bits 1-2 the E8M0 rounding).
pub fn cuda_encode(dt: Dtype, x: &str) -> String {
    match fmt(dt) {
        Some(f) => format!(
            "umd_f2f8({x}, {}u, {}, {}, {}u, {}, {}u, (mode & 1u) != 0u)",
            f.m, f.bias, f.fnuz, f.max, f.inf, f.nan
        ),
        None => format!("umd_f2e8m0({x}, (mode & 1u) != 0u, (mode >> 1) & 3u)"),
    }
}

/// The CUDA C expression decoding the byte expression `c` of f8 type `dt` to float.
pub fn cuda_decode(dt: Dtype, c: &str) -> String {
    match fmt(dt) {
        Some(f) => format!("umd_f82f({c}, {}u, {}, {})", f.m, f.bias, f.fnuz),
        None => format!("umd_e8m02f({c})"),
    }
}
