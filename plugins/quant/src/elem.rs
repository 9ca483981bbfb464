//! Element access for every dtype the quantization ops touch, in both worlds: CPU loaders and
//! storers through `f64` (exact for every served dtype), and the matching CUDA C expressions
//! (a `double` value from storage, storage from a `double`). 8-bit floats decode and encode
//! through [`crate::f8`].

use half::{bf16, f16};
use umd_sdk::dtype::{self, Element};
use umd_sdk::{Dtype, OpError};

use crate::f8;

/// Element `i` of a little-endian buffer, as f64.
pub type Load = fn(&[u8], usize) -> f64;
/// Stores a value (already in range for integers) as element `i`.
pub type Store = fn(&mut [u8], usize, f64);

fn ld<T: Element>(b: &[u8], i: usize) -> f64
where
    T::Compute: Into<f64>,
{
    let s = std::mem::size_of::<T>();
    T::load(&b[i * s..i * s + s]).to_compute().into()
}

fn ld_f8<const CODE: u8>(b: &[u8], i: usize) -> f64 {
    f8::decode(b[i], f8::from_code(CODE)) as f64
}

/// The loader of `dt`.
pub fn loader(dt: Dtype) -> Result<Load, OpError> {
    Ok(match dt {
        Dtype::F32 => ld::<f32>,
        Dtype::F64 => ld::<f64>,
        Dtype::F16 => ld::<f16>,
        Dtype::Bf16 => ld::<bf16>,
        Dtype::I32 => ld::<i32>,
        Dtype::I8 => |b, i| b[i] as i8 as f64,
        Dtype::U8 => |b, i| b[i] as f64,
        Dtype::I16 => |b, i| i16::from_le_bytes([b[2 * i], b[2 * i + 1]]) as f64,
        Dtype::U16 => |b, i| u16::from_le_bytes([b[2 * i], b[2 * i + 1]]) as f64,
        Dtype::F8e4m3fn => ld_f8::<0>,
        Dtype::F8e4m3fnuz => ld_f8::<1>,
        Dtype::F8e5m2 => ld_f8::<2>,
        Dtype::F8e5m2fnuz => ld_f8::<3>,
        Dtype::F8e8m0 => ld_f8::<4>,
        Dtype::I4 => ld_packed::<{ Dtype::I4 as u8 }>,
        Dtype::U4 => ld_packed::<{ Dtype::U4 as u8 }>,
        Dtype::I2 => ld_packed::<{ Dtype::I2 as u8 }>,
        Dtype::U2 => ld_packed::<{ Dtype::U2 as u8 }>,
        Dtype::F4e2m1 => ld_packed::<{ Dtype::F4e2m1 as u8 }>,
        other => return Err(unsupported(other)),
    })
}

/// The packed dtype of its `dtype2` discriminant.
fn packed_of(code: u8) -> Dtype {
    dtype::PACKED
        .into_iter()
        .find(|d| *d as u8 == code)
        .expect("a packed dtype")
}

fn ld_packed<const DT: u8>(b: &[u8], i: usize) -> f64 {
    let dt = packed_of(DT);
    dtype::packed_value(dtype::packed_code(b, dt, i), dt) as f64
}

/// ORs the code of `v` (an integer already in range) into element `i` of a zeroed packed buffer.
fn st_packed<const DT: u8>(b: &mut [u8], i: usize, v: f64) {
    let dt = packed_of(DT);
    let bits = dtype::bits(dt) as usize;
    let per = 8 / bits;
    b[i / per] |= dtype::int_to_packed(v as i64, dt) << ((i % per) * bits);
}

fn st<T: Element>(b: &mut [u8], i: usize, v: f64)
where
    T::Compute: FromF64,
{
    let s = std::mem::size_of::<T>();
    T::from_compute(T::Compute::from_f64(v)).store(&mut b[i * s..i * s + s]);
}

/// `as` conversions from f64 (saturating for integers).
pub trait FromF64 {
    fn from_f64(v: f64) -> Self;
}
macro_rules! from_f64 {
    ($($t:ty),*) => {$(impl FromF64 for $t {
        #[inline(always)]
        fn from_f64(v: f64) -> Self { v as $t }
    })*};
}
from_f64!(f32, f64, i32, i8, u8, i16, u16);

/// The storer of `dt` (8-bit floats saturate).
pub fn storer(dt: Dtype) -> Result<Store, OpError> {
    Ok(match dt {
        Dtype::F32 => st::<f32>,
        Dtype::F64 => st::<f64>,
        // through f32, as the CUDA kernels round
        Dtype::F16 => |b, i, v| st::<f16>(b, i, v as f32 as f64),
        Dtype::Bf16 => |b, i, v| st::<bf16>(b, i, v as f32 as f64),
        Dtype::I32 => st::<i32>,
        Dtype::I8 => st::<i8>,
        Dtype::U8 => st::<u8>,
        Dtype::I16 => st::<i16>,
        Dtype::U16 => st::<u16>,
        // Packed integers OR their code into a zeroed output (each element written once).
        Dtype::I4 => st_packed::<{ Dtype::I4 as u8 }>,
        Dtype::U4 => st_packed::<{ Dtype::U4 as u8 }>,
        Dtype::I2 => st_packed::<{ Dtype::I2 as u8 }>,
        Dtype::U2 => st_packed::<{ Dtype::U2 as u8 }>,
        other => return Err(unsupported(other)),
    })
}

fn unsupported(dt: Dtype) -> OpError {
    OpError::internal(format!("no element access for {}", dtype::name(dt)))
}

/// Rounds `v` to the precision of float dtype `dt` (f32, f16, bf16; f64 unchanged).
pub fn round_to(dt: Dtype, v: f64) -> f64 {
    match dt {
        Dtype::F16 => f16::from_f32(v as f32).to_f64(),
        Dtype::Bf16 => bf16::from_f32(v as f32).to_f64(),
        Dtype::F64 => v,
        _ => v as f32 as f64,
    }
}

/// A stable numeric code of a rounding precision (packed into parameter blocks).
pub fn precision_code(dt: Dtype) -> u32 {
    match dt {
        Dtype::F16 => 1,
        Dtype::Bf16 => 2,
        Dtype::F64 => 3,
        _ => 0,
    }
}

/// The precision a [`precision_code`] names.
pub fn precision_dtype(code: u32) -> Dtype {
    match code {
        1 => Dtype::F16,
        2 => Dtype::Bf16,
        3 => Dtype::F64,
        _ => Dtype::F32,
    }
}

/// The CUDA C storage type of `dt`.
pub fn cuda_storage(dt: Dtype) -> &'static str {
    if dtype::is_f8(dt) {
        return "unsigned char";
    }
    dtype::cuda_type(dt)
        .map(|t| t.storage)
        .unwrap_or("unsigned char")
}

/// A CUDA C `double` expression of element `idx` of the array `arr` of dtype `dt` (packed
/// types: the code of element `idx`, sign-extended or decoded).
pub fn cuda_load_at(dt: Dtype, arr: &str, idx: &str) -> String {
    if !dtype::is_packed(dt) {
        return cuda_load(dt, &format!("{arr}[{idx}]"));
    }
    let b = dtype::bits(dt);
    let per = 8 / b;
    let code = format!(
        "(((unsigned int){arr}[({idx}) / {per}ull] >> ((unsigned int)(({idx}) % {per}ull) * {b}u)) & {}u)",
        (1u32 << b) - 1
    );
    match dt {
        Dtype::I4 => format!("(double)((int)({code} << 28) >> 28)"),
        Dtype::I2 => format!("(double)((int)({code} << 30) >> 30)"),
        Dtype::F4e2m1 => format!("(double)umd_f4_decode({code})"),
        _ => format!("(double){code}"),
    }
}

/// A CUDA C `double` expression of the element `e` (a storage lvalue) of dtype `dt`.
pub fn cuda_load(dt: Dtype, e: &str) -> String {
    match dt {
        Dtype::F16 => format!("(double)umd_h2f({e})"),
        Dtype::Bf16 => format!("(double)umd_b2f({e})"),
        Dtype::F8e8m0 => format!("(double)umd_e8m0_dec({e})"),
        d if dtype::is_f8(d) => {
            let (eb, bias, fnuz) = f8::format(d);
            format!("(double)umd_f8_dec({e}, {eb}, {bias}, {})", fnuz as u32)
        }
        _ => format!("(double)({e})"),
    }
}

/// A CUDA C expression converting the `double` `v` to the storage of float or integer `dt`
/// (integers: `v` already in range).
pub fn cuda_store(dt: Dtype, v: &str) -> String {
    match dt {
        Dtype::F16 => format!("umd_f2h((float)({v}))"),
        Dtype::Bf16 => format!("umd_f2b((float)({v}))"),
        _ => format!("({})({v})", cuda_storage(dt)),
    }
}

/// CUDA C rounding of a `double` to a precision code's dtype (the CPU's [`round_to`]).
pub const CUDA_ROUND: &str = r#"
__device__ __forceinline__ double umd_round_to(double v, unsigned int prec) {
  if (prec == 1u) return (double)umd_h2f(umd_f2h((float)v));
  if (prec == 2u) return (double)umd_b2f(umd_f2b((float)v));
  if (prec == 3u) return v;
  return (double)(float)v;
}
"#;

/// The integer range of a quantized integer dtype.
pub fn int_range(dt: Dtype) -> Option<(f64, f64)> {
    Some(match dt {
        Dtype::I8 => (-128.0, 127.0),
        Dtype::U8 => (0.0, 255.0),
        Dtype::I16 => (-32768.0, 32767.0),
        Dtype::U16 => (0.0, 65535.0),
        Dtype::I32 => (i32::MIN as f64, i32::MAX as f64),
        Dtype::I4 => (-8.0, 7.0),
        Dtype::U4 => (0.0, 15.0),
        Dtype::I2 => (-2.0, 1.0),
        Dtype::U2 => (0.0, 3.0),
        _ => return None,
    })
}

/// Clamps a rounded value to `[lo, hi]`; NaN goes to `lo` (as a NaN cast to int, then clipped).
#[inline(always)]
pub fn clamp(v: f64, lo: f64, hi: f64) -> f64 {
    if v.is_nan() { lo } else { v.clamp(lo, hi) }
}
