//! Element types: sizes, names, CUDA C storage types, and the [`Element`] trait the CPU kernels
//! use to load, compute and store every dtype the same way (f16/bf16 compute in f32 and round to
//! nearest even, as the CUDA kernels do).

use crate::{Dtype, OpError};
use half::{bf16, f16};

/// Bytes per element; 1 for the packed sub-byte types (their storage unit: size their tensors
/// with [`byte_len`], see [`bits`]).
pub fn size(dt: Dtype) -> usize {
    match dt {
        Dtype::I4 | Dtype::U4 | Dtype::I2 | Dtype::U2 | Dtype::F4e2m1 => 1,
        // A string element's offset; the text comes on top (see `crate::strings`).
        Dtype::F64 | Dtype::I64 | Dtype::U64 | Dtype::String => 8,
        Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
        Dtype::F16 | Dtype::Bf16 | Dtype::I16 | Dtype::U16 => 2,
        Dtype::I8
        | Dtype::U8
        | Dtype::Boolean
        | Dtype::F8e4m3fn
        | Dtype::F8e4m3fnuz
        | Dtype::F8e5m2
        | Dtype::F8e5m2fnuz
        | Dtype::F8e8m0 => 1,
    }
}

/// Short lowercase name (`f32`, `bf16`, …), used in module ids and entry points.
pub fn name(dt: Dtype) -> &'static str {
    match dt {
        Dtype::F32 => "f32",
        Dtype::F16 => "f16",
        Dtype::Bf16 => "bf16",
        Dtype::F64 => "f64",
        Dtype::I32 => "i32",
        Dtype::I64 => "i64",
        Dtype::I8 => "i8",
        Dtype::U8 => "u8",
        Dtype::Boolean => "bool",
        Dtype::I16 => "i16",
        Dtype::U16 => "u16",
        Dtype::U32 => "u32",
        Dtype::U64 => "u64",
        Dtype::F8e4m3fn => "f8e4m3fn",
        Dtype::F8e4m3fnuz => "f8e4m3fnuz",
        Dtype::F8e5m2 => "f8e5m2",
        Dtype::F8e5m2fnuz => "f8e5m2fnuz",
        Dtype::F8e8m0 => "f8e8m0",
        Dtype::I4 => "i4",
        Dtype::U4 => "u4",
        Dtype::I2 => "i2",
        Dtype::U2 => "u2",
        Dtype::F4e2m1 => "f4e2m1",
        Dtype::String => "string",
    }
}

/// Bits per element: 8 x [`size`], except 4 for `I4`, `U4`, `F4e2m1` and 2 for `I2`, `U2`.
pub fn bits(dt: Dtype) -> u32 {
    match dt {
        Dtype::I4 | Dtype::U4 | Dtype::F4e2m1 => 4,
        Dtype::I2 | Dtype::U2 => 2,
        other => 8 * size(other) as u32,
    }
}

/// Whether `dt` is a packed sub-byte type (ABI 1.4): several elements per byte, element `i` in
/// byte `i * bits / 8`, the first element of a byte in its lowest bits.
pub fn is_packed(dt: Dtype) -> bool {
    bits(dt) < 8
}

/// Bytes of `n` elements of `dt` (packed types round up to whole bytes); `None` on overflow.
pub fn byte_len(dt: Dtype, n: u64) -> Option<u64> {
    Some(n.checked_mul(bits(dt) as u64)?.div_ceil(8))
}

/// The code (low `bits` bits) of element `i` of a packed buffer.
#[inline(always)]
pub fn packed_code(bytes: &[u8], dt: Dtype, i: usize) -> u8 {
    let b = bits(dt) as usize;
    let per = 8 / b;
    (bytes[i / per] >> ((i % per) * b)) & ((1u8 << b) - 1)
}

/// The value of a packed code: the integer of `I4`/`U4`/`I2`/`U2` (sign-extended for the
/// signed ones), the float of `F4e2m1`.
pub fn packed_value(code: u8, dt: Dtype) -> f32 {
    match dt {
        Dtype::I4 => ((code << 4) as i8 >> 4) as f32,
        Dtype::I2 => ((code << 6) as i8 >> 6) as f32,
        Dtype::F4e2m1 => f4e2m1_to_f32(code),
        _ => code as f32,
    }
}

/// The 8 magnitudes of FLOAT4E2M1 (1 sign, 2 exponent bits with bias 1, 1 mantissa bit).
const F4_MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Decodes a FLOAT4E2M1 code (low 4 bits).
pub fn f4e2m1_to_f32(code: u8) -> f32 {
    let m = F4_MAGNITUDES[(code & 7) as usize];
    if code & 8 != 0 { -m } else { m }
}

/// Encodes `v` as FLOAT4E2M1 as ONNX's reference (ml_dtypes) does: round to nearest, ties to
/// the even code; beyond ±6 (±inf included) saturates to ±6; NaN becomes the code 0b1000 (a
/// NaN with the sign bit set, 0b0000); the type has no NaN or infinity.
pub fn f32_to_f4e2m1(v: f64) -> u8 {
    if v.is_nan() {
        return if v.is_sign_negative() { 0 } else { 8 };
    }
    let sign = if v.is_sign_negative() { 8 } else { 0 };
    let a = v.abs().min(6.0); // saturate (infinities included) before rounding
    let mut best = 0u8;
    for (c, &m) in F4_MAGNITUDES.iter().enumerate().skip(1) {
        let (d, bd) = (
            (a - m as f64).abs(),
            (a - F4_MAGNITUDES[best as usize] as f64).abs(),
        );
        if d < bd || (d == bd && c % 2 == 0) {
            best = c as u8;
        }
    }
    sign | best
}

/// The packed code of integer `v` in `dt` (`I4`/`U4`/`I2`/`U2`): its low bits, so values
/// outside the type's range wrap (two's complement), as ONNX's reference casts do.
pub fn int_to_packed(v: i64, dt: Dtype) -> u8 {
    (v as u8) & ((1u8 << bits(dt)) - 1)
}

/// Packs element codes (one per byte, low `bits` bits used) into `out`, `8 / bits` per byte.
pub fn pack_codes(codes: impl IntoIterator<Item = u8>, dt: Dtype, out: &mut [u8]) {
    let b = bits(dt) as usize;
    let per = 8 / b;
    out.fill(0);
    for (i, c) in codes.into_iter().enumerate() {
        out[i / per] |= (c & ((1u8 << b) - 1)) << ((i % per) * b);
    }
}

/// CUDA C helpers for the packed types (FLOAT4E2M1 decode/encode as [`f4e2m1_to_f32`] and
/// [`f32_to_f4e2m1`], and float → packed integer as the CPU: truncate to a 64-bit integer, NaN
/// and out-of-range → 0, keep the low bits).
pub const CUDA_PACKED: &str = r#"
__device__ __forceinline__ float umd_f4_decode(unsigned int c) {
    const float m[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float v = m[c & 7u];
    return (c & 8u) ? -v : v;
}
__device__ __forceinline__ unsigned int umd_f4_encode(double v) {
    if (v != v) return signbit(v) ? 0u : 8u;
    const unsigned int sign = signbit(v) ? 8u : 0u;
    const double a = fmin(fabs(v), 6.0);
    const double m[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    unsigned int best = 0u;
    for (unsigned int c = 1u; c < 8u; ++c) {
        const double d = fabs(a - m[c]), bd = fabs(a - m[best]);
        if (d < bd || (d == bd && (c & 1u) == 0u)) best = c;
    }
    return sign | best;
}
__device__ __forceinline__ long long umd_f2ll_wrap(double d) {
    if (d != d || d >= 9223372036854775808.0 || d < -9223372036854775808.0) return 0;
    return (long long)d;
}
"#;

/// Every dtype whose elements are whole bytes (every one but [`PACKED`]), in `dtype2` order:
/// what a byte-moving kernel serves.
pub const ALL: [Dtype; 18] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::Boolean,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
    Dtype::F8e4m3fn,
    Dtype::F8e4m3fnuz,
    Dtype::F8e5m2,
    Dtype::F8e5m2fnuz,
    Dtype::F8e8m0,
];

/// The packed sub-byte dtypes (ABI 1.4), in `dtype2` order.
pub const PACKED: [Dtype; 5] = [Dtype::I4, Dtype::U4, Dtype::I2, Dtype::U2, Dtype::F4e2m1];

/// Whether `dt` is one of the 8-bit float types.
pub fn is_f8(dt: Dtype) -> bool {
    matches!(
        dt,
        Dtype::F8e4m3fn | Dtype::F8e4m3fnuz | Dtype::F8e5m2 | Dtype::F8e5m2fnuz | Dtype::F8e8m0
    )
}

/// (exponent bits, bias, "fnuz": no negative zero / inf, NaN is 0x80) of an 8-bit float.
fn f8_format(dt: Dtype) -> (u32, i32, bool) {
    match dt {
        Dtype::F8e4m3fn => (4, 7, false),
        Dtype::F8e4m3fnuz => (4, 8, true),
        Dtype::F8e5m2 => (5, 15, false),
        _ => (5, 16, true),
    }
}

/// Decodes an 8-bit float of type `dt` (ONNX FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0).
pub fn f8_to_f32(bits: u8, dt: Dtype) -> f32 {
    if dt == Dtype::F8e8m0 {
        return if bits == 0xff {
            f32::NAN
        } else {
            2f32.powi(bits as i32 - 127)
        };
    }
    let (e_bits, bias, fnuz) = f8_format(dt);
    let m_bits = 7 - e_bits;
    if fnuz && bits == 0x80 {
        return f32::NAN;
    }
    let sign = if bits & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let e = ((bits >> m_bits) & ((1 << e_bits) - 1)) as i32;
    let f = (bits & ((1 << m_bits) - 1)) as f32;
    let e_max = (1 << e_bits) - 1;
    if !fnuz {
        if e_bits == 4 && e == e_max && f as u32 == (1 << m_bits) - 1 {
            return f32::NAN;
        }
        if e_bits == 5 && e == e_max {
            return if f == 0.0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            };
        }
    }
    let scale = (1u32 << m_bits) as f32;
    if e == 0 {
        sign * f / scale * 2f32.powi(1 - bias)
    } else {
        sign * (1.0 + f / scale) * 2f32.powi(e - bias)
    }
}

/// Encodes `v` as an 8-bit float of type `dt`, rounding to nearest even (distances in f64, so
/// far-out values never tie by rounding); with `saturate` (ONNX's default) values beyond the
/// largest finite one, ±inf included, become ±that value; without it a value rounds first and
/// overflows only past the largest finite value plus half its spacing (as ml_dtypes does): to
/// ±inf for E5M2, NaN otherwise. An exact reference (it searches the 256 codes), not a fast path.
pub fn f32_to_f8(v: f32, dt: Dtype, saturate: bool) -> u8 {
    let fnuz = matches!(dt, Dtype::F8e4m3fnuz | Dtype::F8e5m2fnuz);
    let nan = if dt == Dtype::F8e8m0 {
        0xff
    } else if fnuz {
        0x80
    } else {
        0x7f
    };
    if v.is_nan() {
        return nan;
    }
    let finite = |code: u8| {
        let x = f8_to_f32(code, dt);
        (x.is_finite() && !(fnuz && code == 0x80)).then_some(x as f64)
    };
    // The largest finite value, its code (positive), and the spacing below it.
    let (max_code, max) = (0u8..=255)
        .filter_map(|c| finite(c).map(|x| (c, x)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("some finite code");
    let below = (0u8..=255)
        .filter_map(finite)
        .filter(|&x| x < max)
        .fold(f64::MIN, f64::max);
    let negative_of = |code: u8| {
        if dt == Dtype::F8e8m0 {
            code
        } else {
            code | 0x80
        }
    };
    let signed_max = if v < 0.0 {
        negative_of(max_code)
    } else {
        max_code
    };
    let overflow = || {
        if dt == Dtype::F8e5m2 {
            if v > 0.0 { 0x7c } else { 0xfc }
        } else {
            nan
        }
    };
    let a = (v as f64).abs();
    if a > max {
        if saturate {
            return signed_max;
        }
        let half = (max - below) / 2.0;
        // A tie rounds to the even code: the maximum when its code is even, else the overflow.
        return if a < max + half || (a == max + half && max_code & 1 == 0) {
            signed_max
        } else {
            overflow()
        };
    }
    let mut best: Option<(u8, f64)> = None;
    for code in 0u8..=255 {
        let Some(x) = finite(code) else { continue };
        let d = (x - v as f64).abs();
        best = match best {
            Some((c, bd)) if bd < d || (bd == d && (c & 1) == 0) => Some((c, bd)),
            _ => Some((code, d)),
        };
    }
    let (code, _) = best.expect("some finite code");
    if v == 0.0 && v.is_sign_negative() && !fnuz && dt != Dtype::F8e8m0 {
        return 0x80;
    }
    code
}

/// The dtype of a module id `{prefix}{dtype name}` when it is one of `served`; otherwise an
/// internal error naming the module (what `kernel_source` answers for an id it never planned).
pub fn of_module(module_id: &str, prefix: &str, served: &[Dtype]) -> Result<Dtype, OpError> {
    module_id
        .strip_prefix(prefix)
        .and_then(from_name)
        .filter(|d| served.contains(d))
        .ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`")))
}

/// The dtype named by [`name`].
pub fn from_name(s: &str) -> Option<Dtype> {
    ALL.into_iter().chain(PACKED).find(|d| name(*d) == s)
}

/// CUDA C helpers every template includes: f16/bf16 stored as `unsigned short` and converted
/// through f32 with round-to-nearest-even (no cuda_fp16.h needed, so NVRTC needs no include path).
pub const CUDA_PRELUDE: &str = r#"
typedef unsigned short umd_half;
typedef unsigned short umd_bf16;
__device__ __forceinline__ float umd_load(float v) { return v; }
__device__ __forceinline__ float umd_store_f32(float v) { return v; }
__device__ __forceinline__ float umd_h2f(umd_half h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ umd_half umd_f2h(float f) {
    umd_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float umd_b2f(umd_bf16 b) {
    return __uint_as_float(((unsigned int)b) << 16);
}
__device__ __forceinline__ umd_bf16 umd_f2b(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (umd_bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (umd_bf16)(u >> 16);
}
"#;

/// How a CUDA template reads and writes one dtype: storage type, load-to-compute and
/// store-from-compute expressions (`X` stands for the operand), and the compute type.
pub struct CudaType {
    pub storage: &'static str,
    pub compute: &'static str,
    pub load: &'static str,
    pub store: &'static str,
}

/// The CUDA C spelling of a dtype for the bundled templates; `None` where unsupported.
pub fn cuda_type(dt: Dtype) -> Option<CudaType> {
    let t = |storage, compute, load, store| CudaType {
        storage,
        compute,
        load,
        store,
    };
    Some(match dt {
        Dtype::F32 => t("float", "float", "(X)", "(X)"),
        Dtype::F16 => t("umd_half", "float", "umd_h2f(X)", "umd_f2h(X)"),
        Dtype::Bf16 => t("umd_bf16", "float", "umd_b2f(X)", "umd_f2b(X)"),
        Dtype::I32 => t("int", "int", "(X)", "(X)"),
        Dtype::F64 => t("double", "double", "(X)", "(X)"),
        Dtype::I64 => t("long long", "long long", "(X)", "(X)"),
        Dtype::I8 => t("signed char", "int", "((int)(X))", "((signed char)(X))"),
        Dtype::U8 => t("unsigned char", "int", "((int)(X))", "((unsigned char)(X))"),
        Dtype::I16 => t("short", "int", "((int)(X))", "((short)(X))"),
        Dtype::U16 => t(
            "unsigned short",
            "unsigned int",
            "((unsigned int)(X))",
            "((unsigned short)(X))",
        ),
        Dtype::U32 => t("unsigned int", "unsigned int", "(X)", "(X)"),
        Dtype::U64 => t("unsigned long long", "unsigned long long", "(X)", "(X)"),
        Dtype::F8e4m3fn
        | Dtype::F8e4m3fnuz
        | Dtype::F8e5m2
        | Dtype::F8e5m2fnuz
        | Dtype::F8e8m0
        | Dtype::I4
        | Dtype::U4
        | Dtype::I2
        | Dtype::U2
        | Dtype::F4e2m1
        | Dtype::String => {
            return None;
        }
        Dtype::Boolean => t(
            "unsigned char",
            "int",
            "((int)((X) != 0))",
            "((unsigned char)((X) != 0))",
        ),
    })
}

/// An element type a CPU kernel computes on.
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype this is.
    const DTYPE: Dtype;
    /// What arithmetic is done in (f32 for the half types).
    type Compute: Copy;
    fn load(bytes: &[u8]) -> Self;
    fn store(self, out: &mut [u8]);
    fn to_compute(self) -> Self::Compute;
    fn from_compute(v: Self::Compute) -> Self;
    /// `bytes` (little-endian elements) viewed in place as `Compute` values, when `Compute`
    /// is `Self` with its little-endian layout and `bytes` is aligned for it; `None`: decode.
    fn view(_bytes: &[u8]) -> Option<&[Self::Compute]> {
        None
    }
    /// [`Element::view`], mutable.
    fn view_mut(_bytes: &mut [u8]) -> Option<&mut [Self::Compute]> {
        None
    }
    /// The little-endian bytes of `values` as they lie in memory, when that is how `Self`
    /// stores them; `None`: encode.
    fn bytes_of(_values: &[Self::Compute]) -> Option<&[u8]> {
        None
    }
}

/// Little-endian elements of `T` read as bytes, as `T::Compute` values: viewed in place when
/// the layouts agree (f32, f64, the integers on a little-endian machine such as wasm32), else
/// decoded once — a kernel reading f32 planes pays no decode pass.
pub struct Decoded<T: Element>(Repr<T>);

enum Repr<T: Element> {
    Bytes(Vec<u8>),
    Values(Vec<T::Compute>),
}

impl<T: Element> Decoded<T> {
    /// `bytes` as values (a trailing partial element is ignored).
    pub fn new(bytes: Vec<u8>) -> Self {
        let s = std::mem::size_of::<T>();
        let whole = bytes.len() / s * s;
        if T::view(&bytes[..whole]).is_some() {
            let mut bytes = bytes;
            bytes.truncate(whole);
            return Decoded(Repr::Bytes(bytes));
        }
        Decoded(Repr::Values(
            bytes
                .chunks_exact(s)
                .map(|b| T::load(b).to_compute())
                .collect(),
        ))
    }
}

impl<T: Element> Default for Decoded<T> {
    fn default() -> Self {
        Decoded(Repr::Values(Vec::new()))
    }
}

impl<T: Element> std::ops::Deref for Decoded<T> {
    type Target = [T::Compute];
    fn deref(&self) -> &[T::Compute] {
        match &self.0 {
            Repr::Bytes(b) => T::view(b).expect("viewable when made"),
            Repr::Values(v) => v,
        }
    }
}

impl<T: Element> std::ops::DerefMut for Decoded<T> {
    fn deref_mut(&mut self) -> &mut [T::Compute] {
        match &mut self.0 {
            Repr::Bytes(b) => T::view_mut(b).expect("viewable when made"),
            Repr::Values(v) => v,
        }
    }
}

/// `values` as little-endian bytes of `T`: their own bytes when that is how `T` stores them,
/// else encoded into `buf`.
pub fn bytes<'a, T: Element>(values: &'a [T::Compute], buf: &'a mut Vec<u8>) -> &'a [u8] {
    if let Some(b) = T::bytes_of(values) {
        return b;
    }
    let s = std::mem::size_of::<T>();
    buf.clear();
    buf.resize(values.len() * s, 0);
    for (o, &v) in buf.chunks_exact_mut(s).zip(values) {
        T::from_compute(v).store(o);
    }
    buf
}

macro_rules! plain_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: Dtype = $dt;
            type Compute = $t;
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("element-sized slice"))
            }
            #[inline(always)]
            fn store(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes())
            }
            #[inline(always)]
            fn to_compute(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_compute(v: $t) -> Self {
                v
            }
            #[inline(always)]
            fn view(bytes: &[u8]) -> Option<&[$t]> {
                if cfg!(target_endian = "little") {
                    bytemuck::try_cast_slice(bytes).ok()
                } else {
                    None
                }
            }
            #[inline(always)]
            fn view_mut(bytes: &mut [u8]) -> Option<&mut [$t]> {
                if cfg!(target_endian = "little") {
                    bytemuck::try_cast_slice_mut(bytes).ok()
                } else {
                    None
                }
            }
            #[inline(always)]
            fn bytes_of(values: &[$t]) -> Option<&[u8]> {
                cfg!(target_endian = "little").then(|| bytemuck::cast_slice(values))
            }
        }
    };
}
plain_element!(f32, Dtype::F32);
plain_element!(f64, Dtype::F64);
plain_element!(i32, Dtype::I32);
plain_element!(i64, Dtype::I64);
plain_element!(i8, Dtype::I8);
plain_element!(u8, Dtype::U8);
plain_element!(i16, Dtype::I16);
plain_element!(u16, Dtype::U16);
plain_element!(u32, Dtype::U32);
plain_element!(u64, Dtype::U64);

macro_rules! half_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: Dtype = $dt;
            type Compute = f32;
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_bits(u16::from_le_bytes(
                    b.try_into().expect("element-sized slice"),
                ))
            }
            #[inline(always)]
            fn store(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_bits().to_le_bytes())
            }
            #[inline(always)]
            fn to_compute(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn from_compute(v: f32) -> Self {
                <$t>::from_f32(v)
            }
        }
    };
}
half_element!(f16, Dtype::F16);
half_element!(bf16, Dtype::Bf16);

/// Encodes values as little-endian elements of `dt` (self-test cases, constants). Integers are
/// truncated toward zero and saturate; booleans are `v != 0`.
pub fn encode(dt: Dtype, values: &[f64]) -> Option<Vec<u8>> {
    if is_packed(dt) {
        let mut out = vec![0u8; byte_len(dt, values.len() as u64)? as usize];
        let codes = values.iter().map(|&v| match dt {
            Dtype::F4e2m1 => f32_to_f4e2m1(v),
            _ => int_to_packed(v as i64, dt),
        });
        pack_codes(codes, dt, &mut out);
        return Some(out);
    }
    let mut out = Vec::with_capacity(values.len() * size(dt));
    for &v in values {
        match dt {
            Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            Dtype::F64 => out.extend_from_slice(&v.to_le_bytes()),
            Dtype::F16 => out.extend_from_slice(&f16::from_f64(v).to_bits().to_le_bytes()),
            Dtype::Bf16 => out.extend_from_slice(&bf16::from_f64(v).to_bits().to_le_bytes()),
            Dtype::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            Dtype::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            Dtype::I8 => out.push(v as i8 as u8),
            Dtype::U8 => out.push(v as u8),
            Dtype::Boolean => out.push((v != 0.0) as u8),
            Dtype::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            Dtype::U16 => out.extend_from_slice(&(v as u16).to_le_bytes()),
            Dtype::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            Dtype::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            f8 => out.push(f32_to_f8(v as f32, f8, true)),
        }
    }
    Some(out)
}

/// Decodes little-endian elements of `dt` as f64 (any dtype; booleans are 0/1). A trailing
/// partial element is ignored.
pub fn decode_f64(dt: Dtype, bytes: &[u8]) -> Vec<f64> {
    if is_packed(dt) {
        let n = bytes.len() * 8 / bits(dt) as usize;
        return (0..n)
            .map(|i| packed_value(packed_code(bytes, dt, i), dt) as f64)
            .collect();
    }
    let s = size(dt);
    bytes
        .chunks_exact(s)
        .map(|b| match dt {
            Dtype::F32 => f32::load(b) as f64,
            Dtype::F64 => f64::load(b),
            Dtype::F16 => f16::load(b).to_f64(),
            Dtype::Bf16 => bf16::load(b).to_f64(),
            Dtype::I32 => i32::load(b) as f64,
            Dtype::I64 => i64::load(b) as f64,
            Dtype::I8 => i8::load(b) as f64,
            Dtype::U8 => b[0] as f64,
            Dtype::Boolean => (b[0] != 0) as u8 as f64,
            Dtype::I16 => i16::load(b) as f64,
            Dtype::U16 => u16::load(b) as f64,
            Dtype::U32 => u32::load(b) as f64,
            Dtype::U64 => u64::load(b) as f64,
            f8 => f8_to_f32(b[0], f8) as f64,
        })
        .collect()
}

/// Decodes little-endian elements of an integer (or bool) dtype as i64; `None` for a float dtype.
pub fn decode_ints(dt: Dtype, bytes: &[u8]) -> Option<Vec<i64>> {
    if is_packed(dt) && dt != Dtype::F4e2m1 {
        return Some(
            decode_f64(dt, bytes)
                .into_iter()
                .map(|v| v as i64)
                .collect(),
        );
    }
    let s = size(dt);
    let it = bytes.chunks_exact(s);
    Some(match dt {
        Dtype::I32 => it.map(|b| i32::load(b) as i64).collect(),
        Dtype::I64 => it.map(i64::load).collect(),
        Dtype::I8 => it.map(|b| i8::load(b) as i64).collect(),
        Dtype::U8 | Dtype::Boolean => it.map(|b| b[0] as i64).collect(),
        Dtype::I16 => it.map(|b| i16::load(b) as i64).collect(),
        Dtype::U16 => it.map(|b| u16::load(b) as i64).collect(),
        Dtype::U32 => it.map(|b| u32::load(b) as i64).collect(),
        Dtype::U64 => it.map(|b| u64::load(b) as i64).collect(),
        _ => return None,
    })
}

/// f32 → f16 bits, round to nearest even.
pub fn f32_to_f16_bits(v: f32) -> u16 {
    f16::from_f32(v).to_bits()
}
/// f16 bits → f32.
pub fn f16_bits_to_f32(b: u16) -> f32 {
    f16::from_bits(b).to_f32()
}
/// f32 → bf16 bits, round to nearest even.
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    bf16::from_f32(v).to_bits()
}
/// bf16 bits → f32.
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    bf16::from_bits(b).to_f32()
}

/// ONNX `TensorProto.DataType` numbers and names of the umd dtypes, in `dtype3` order.
const ONNX_CODES: [(Dtype, i64, &str); 24] = [
    (Dtype::F32, 1, "FLOAT"),
    (Dtype::F16, 10, "FLOAT16"),
    (Dtype::Bf16, 16, "BFLOAT16"),
    (Dtype::F64, 11, "DOUBLE"),
    (Dtype::I32, 6, "INT32"),
    (Dtype::I64, 7, "INT64"),
    (Dtype::I8, 3, "INT8"),
    (Dtype::U8, 2, "UINT8"),
    (Dtype::Boolean, 9, "BOOL"),
    (Dtype::I16, 5, "INT16"),
    (Dtype::U16, 4, "UINT16"),
    (Dtype::U32, 12, "UINT32"),
    (Dtype::U64, 13, "UINT64"),
    (Dtype::F8e4m3fn, 17, "FLOAT8E4M3FN"),
    (Dtype::F8e4m3fnuz, 18, "FLOAT8E4M3FNUZ"),
    (Dtype::F8e5m2, 19, "FLOAT8E5M2"),
    (Dtype::F8e5m2fnuz, 20, "FLOAT8E5M2FNUZ"),
    (Dtype::F8e8m0, 24, "FLOAT8E8M0"),
    (Dtype::I4, 22, "INT4"),
    (Dtype::U4, 21, "UINT4"),
    (Dtype::I2, 26, "INT2"),
    (Dtype::U2, 25, "UINT2"),
    (Dtype::F4e2m1, 23, "FLOAT4E2M1"),
    (Dtype::String, 8, "STRING"),
];

/// The umd dtype of an ONNX `TensorProto.DataType` number (`None` for COMPLEX…).
pub fn from_onnx(code: i64) -> Option<Dtype> {
    ONNX_CODES
        .iter()
        .find(|(_, c, _)| *c == code)
        .map(|(d, _, _)| *d)
}

/// The ONNX `TensorProto.DataType` number of a dtype.
pub fn to_onnx(dt: Dtype) -> i64 {
    ONNX_CODES
        .iter()
        .find(|(d, _, _)| *d == dt)
        .map(|(_, c, _)| *c)
        .expect("every dtype has an ONNX number")
}

/// "1 FLOAT, 2 UINT8, …": the ONNX numbers of umd's numeric dtypes (all but STRING, which only
/// string ops take), for error messages.
pub fn onnx_codes_served() -> String {
    let mut v: Vec<(i64, &str)> = ONNX_CODES
        .iter()
        .filter(|(d, _, _)| *d != Dtype::String)
        .map(|(_, c, n)| (*c, *n))
        .collect();
    v.sort_by_key(|(c, _)| *c);
    v.iter()
        .map(|(c, n)| format!("{c} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        assert_eq!(size(Dtype::Bf16), 2);
        assert_eq!(size(Dtype::I64), 8);
        assert_eq!(from_name(name(Dtype::Bf16)), Some(Dtype::Bf16));
        assert_eq!(from_name("float32"), None);
        assert_eq!(cuda_type(Dtype::I64).unwrap().storage, "long long");
        for d in ALL {
            assert_eq!(from_name(name(d)), Some(d));
        }
    }

    #[test]
    fn decoded_views_or_decodes_and_bytes_round_trips() {
        let vals = [1.5f32, -2.0, 3.25, f32::NAN];
        let raw: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        // aligned: viewed in place, same values
        let mut d = Decoded::<f32>::new(raw.clone());
        assert!(matches!(d.0, Repr::Bytes(_)));
        assert_eq!(d[..3], vals[..3]);
        assert!(d[3].is_nan());
        d[0] = 7.0;
        assert_eq!(d[0], 7.0);
        // misaligned bytes are decoded, not viewed, with the same values
        let mut shifted = vec![0u8; raw.len() + 1];
        shifted[1..].copy_from_slice(&raw);
        assert_eq!(
            f32::view(&shifted[1..]).is_none(),
            !(shifted[1..].as_ptr() as usize).is_multiple_of(4)
        );
        let odd = Decoded::<f32>::new(shifted[1..].to_vec());
        assert_eq!(odd[..3], vals[..3]);
        // a trailing partial element is dropped
        assert_eq!(Decoded::<f32>::new(raw[..6].to_vec()).len(), 1);
        // halves decode to f32 and encode back through the buffer
        let h: Vec<u8> = [half::f16::from_f32(0.5), half::f16::from_f32(-4.0)]
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect();
        let dh = Decoded::<half::f16>::new(h.clone());
        assert_eq!(&dh[..], &[0.5, -4.0]);
        let mut buf = Vec::new();
        assert_eq!(bytes::<half::f16>(&dh, &mut buf), &h[..]);
        // plain types give their own bytes
        let mut unused = Vec::new();
        assert_eq!(bytes::<f32>(&vals, &mut unused), &raw[..]);
        assert!(unused.is_empty());
    }

    #[test]
    fn half_conversions_round_to_nearest_even() {
        assert_eq!(f16_bits_to_f32(f32_to_f16_bits(1.5)), 1.5);
        // 1 + 2^-11 is exactly between two f16 values: ties to even (1.0)
        assert_eq!(f16_bits_to_f32(f32_to_f16_bits(1.0 + 2f32.powi(-11))), 1.0);
        assert_eq!(bf16_bits_to_f32(f32_to_bf16_bits(3.0)), 3.0);
        // bf16 keeps 8 mantissa bits: 1 + 2^-8 ties to 1.0, 1 + 3*2^-9 rounds up
        assert_eq!(
            bf16_bits_to_f32(f32_to_bf16_bits(1.0 + 2f32.powi(-8) / 2.0)),
            1.0
        );
        assert!(f16_bits_to_f32(f32_to_f16_bits(1e6)).is_infinite());
    }

    #[test]
    fn f8_codes_decode_and_encode_as_onnx_says() {
        assert_eq!(f8_to_f32(0x38, Dtype::F8e4m3fn), 1.0);
        assert_eq!(f8_to_f32(0x7e, Dtype::F8e4m3fn), 448.0);
        assert!(f8_to_f32(0x7f, Dtype::F8e4m3fn).is_nan());
        assert_eq!(f8_to_f32(0x7b, Dtype::F8e5m2), 57344.0);
        assert!(f8_to_f32(0x7c, Dtype::F8e5m2).is_infinite());
        assert!(f8_to_f32(0x80, Dtype::F8e4m3fnuz).is_nan());
        assert_eq!(
            f32_to_f8(1000.0, Dtype::F8e4m3fn, true),
            0x7e,
            "saturates to 448"
        );
        assert_eq!(
            f32_to_f8(1e6, Dtype::F8e5m2, false),
            0x7c,
            "inf without saturation"
        );
        // Infinities saturate; without saturation values round first, then overflow (ml_dtypes).
        assert_eq!(f32_to_f8(f32::INFINITY, Dtype::F8e4m3fn, true), 0x7e);
        assert_eq!(f32_to_f8(f32::NEG_INFINITY, Dtype::F8e5m2, true), 0xfb);
        assert_eq!(f32_to_f8(f32::INFINITY, Dtype::F8e5m2, false), 0x7c);
        assert_eq!(f32_to_f8(f32::INFINITY, Dtype::F8e4m3fnuz, false), 0x80);
        assert_eq!(
            f32_to_f8(464.0, Dtype::F8e4m3fn, false),
            0x7e,
            "a tie to the even max"
        );
        assert_eq!(f32_to_f8(-464.0, Dtype::F8e4m3fn, false), 0xfe);
        assert_eq!(
            f32_to_f8(465.0, Dtype::F8e4m3fn, false),
            0x7f,
            "past the tie: NaN"
        );
        assert_eq!(f32_to_f8(60000.0, Dtype::F8e5m2, false), 0x7b);
        assert_eq!(
            f32_to_f8(61440.0, Dtype::F8e5m2, false),
            0x7c,
            "a tie to even: inf"
        );
        assert_eq!(
            f32_to_f8(1e9, Dtype::F8e4m3fnuz, true),
            0x7f,
            "240, not a far-out tie"
        );
        assert_eq!(f8_to_f32(127, Dtype::F8e8m0), 1.0);
        assert_eq!(f32_to_f8(2.0, Dtype::F8e8m0, true), 128);
        for dt in [
            Dtype::F8e4m3fn,
            Dtype::F8e4m3fnuz,
            Dtype::F8e5m2,
            Dtype::F8e5m2fnuz,
        ] {
            for code in 0u8..=255 {
                let x = f8_to_f32(code, dt);
                if x.is_finite() && !(x == 0.0 && code != 0) {
                    assert_eq!(f32_to_f8(x, dt, true), code, "{dt:?} {code:#x}");
                }
            }
        }
    }

    #[test]
    fn elements_round_trip_through_bytes() {
        let mut buf = [0u8; 4];
        (-7i32).store(&mut buf);
        assert_eq!(i32::load(&buf), -7);
        let mut b2 = [0u8; 2];
        bf16::from_f32(2.5).store(&mut b2);
        assert_eq!(bf16::load(&b2).to_compute(), 2.5);
    }
}
