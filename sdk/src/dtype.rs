//! Element types: sizes, names, CUDA C storage types, and the [`Element`] trait the CPU kernels
//! use to load, compute and store every dtype the same way (f16/bf16 compute in f32 and round to
//! nearest even, as the CUDA kernels do).

use crate::Dtype;
use half::{bf16, f16};

/// Bytes per element.
pub fn size(dt: Dtype) -> usize {
    match dt {
        Dtype::F64 | Dtype::I64 => 8,
        Dtype::F32 | Dtype::I32 => 4,
        Dtype::F16 | Dtype::Bf16 => 2,
        Dtype::I8 | Dtype::U8 | Dtype::Boolean => 1,
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
    }
}

/// The dtype named by [`name`].
pub fn from_name(s: &str) -> Option<Dtype> {
    [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I32,
        Dtype::I64,
        Dtype::I8,
        Dtype::U8,
        Dtype::Boolean,
    ]
    .into_iter()
    .find(|d| name(*d) == s)
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
        }
    };
}
plain_element!(f32, Dtype::F32);
plain_element!(f64, Dtype::F64);
plain_element!(i32, Dtype::I32);
plain_element!(i64, Dtype::I64);
plain_element!(i8, Dtype::I8);
plain_element!(u8, Dtype::U8);

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
        }
    }
    Some(out)
}

/// Decodes little-endian elements of `dt` as f64 (any dtype; booleans are 0/1). A trailing
/// partial element is ignored.
pub fn decode_f64(dt: Dtype, bytes: &[u8]) -> Vec<f64> {
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
        })
        .collect()
}

/// Decodes little-endian elements of an integer (or bool) dtype as i64; `None` for a float dtype.
pub fn decode_ints(dt: Dtype, bytes: &[u8]) -> Option<Vec<i64>> {
    let s = size(dt);
    let it = bytes.chunks_exact(s);
    Some(match dt {
        Dtype::I32 => it.map(|b| i32::load(b) as i64).collect(),
        Dtype::I64 => it.map(i64::load).collect(),
        Dtype::I8 => it.map(|b| i8::load(b) as i64).collect(),
        Dtype::U8 | Dtype::Boolean => it.map(|b| b[0] as i64).collect(),
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
    fn elements_round_trip_through_bytes() {
        let mut buf = [0u8; 4];
        (-7i32).store(&mut buf);
        assert_eq!(i32::load(&buf), -7);
        let mut b2 = [0u8; 2];
        bf16::from_f32(2.5).store(&mut b2);
        assert_eq!(bf16::load(&b2).to_compute(), 2.5);
    }
}
