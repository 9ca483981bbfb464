//! CPU kernels: the reference implementation of every entry point of [`crate::cuda`], reading the
//! same parameter blocks. The entry point is decoded once (`{kernel}_{dtype}[_{suffix}]`), then a
//! loop monomorphic in the element type runs over the whole grid.

pub mod inplace;
mod normalize;
mod pointwise;
mod softmax;

use half::{bf16, f16};
use umd_sdk::dtype::{self, Element};
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

/// What the CPU kernels compute in: f32 (for f32, f16, bf16) or f64.
pub trait Real:
    Copy
    + PartialOrd
    + std::ops::Sub<Output = Self>
    + std::ops::Add<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Mul<Output = Self>
{
    const NEG_INFINITY: Self;
    fn exp(self) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn is_nan(self) -> bool;
    fn sqrt(self) -> Self;
    fn powf(self, p: Self) -> Self;
    /// A channel's run through `st` in one pass where this type has a kernel for it
    /// ([`umd_sdk::stages::apply`]); false (nothing done) otherwise.
    fn stages(_v: &mut [Self], _st: &umd_sdk::stages::Stages<Self>) -> bool {
        false
    }
}

macro_rules! real {
    ($t:ty, $exp:path $(, $stages:path)?) => {
        impl Real for $t {
            $(
            fn stages(v: &mut [Self], st: &umd_sdk::stages::Stages<Self>) -> bool {
                $stages(v, None, st)
            }
            )?
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn powf(self, p: Self) -> Self {
                <$t>::powf(self, p)
            }
        }
    };
}
real!(f32, umd_sdk::fmath::exp, umd_sdk::stages::apply);
real!(f64, f64::exp);

/// `max` that propagates NaN (as numpy's `max`).
#[inline(always)]
pub fn nan_max<C: Real>(a: C, b: C) -> C {
    if a > b || a.is_nan() { a } else { b }
}

/// Element `i` of a little-endian buffer of `T`s, as f64.
#[inline(always)]
pub fn load_f64<T: Element>(buf: &[u8], i: usize) -> f64
where
    T::Compute: Real,
{
    let s = std::mem::size_of::<T>();
    T::load(&buf[i * s..i * s + s]).to_compute().to_f64()
}

/// Stores `v` (rounded through the compute type) as element `i` of a buffer of `T`s.
#[inline(always)]
pub fn store_f64<T: Element>(buf: &mut [u8], i: usize, v: f64)
where
    T::Compute: Real,
{
    let s = std::mem::size_of::<T>();
    T::from_compute(T::Compute::from_f64(v)).store(&mut buf[i * s..i * s + s]);
}

/// Stores `v` as element `i` of a buffer of dtype `dt` (for the few per-group statistics whose
/// dtype may differ from the data's).
pub fn store_dyn(dt: Dtype, buf: &mut [u8], i: usize, v: f64) -> Result<(), OpError> {
    match dt {
        Dtype::F32 => store_f64::<f32>(buf, i, v),
        Dtype::F64 => store_f64::<f64>(buf, i, v),
        Dtype::F16 => store_f64::<f16>(buf, i, v),
        Dtype::Bf16 => store_f64::<bf16>(buf, i, v),
        other => {
            return Err(OpError::internal(format!(
                "no statistics in {}",
                dtype::name(other)
            )));
        }
    }
    Ok(())
}

/// Elements `[start, start + out.len())` of a buffer of `T`s, decoded into `out`.
pub fn decode_into<T: Element>(buf: &[u8], start: usize, out: &mut [T::Compute]) {
    let s = std::mem::size_of::<T>();
    let src = &buf[start * s..(start + out.len()) * s];
    for (o, b) in out.iter_mut().zip(src.chunks_exact(s)) {
        *o = T::load(b).to_compute();
    }
}

/// Encodes `vals` into elements `[start, start + vals.len())` of a buffer of `T`s.
pub fn encode_from<T: Element>(buf: &mut [u8], start: usize, vals: &[T::Compute]) {
    let s = std::mem::size_of::<T>();
    let dst = &mut buf[start * s..(start + vals.len()) * s];
    for (b, v) in dst.chunks_exact_mut(s).zip(vals) {
        T::from_compute(*v).store(b);
    }
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let mut parts = call.entry_point.split('_');
    let kernel = parts.next().ok_or_else(unknown)?;
    let dt = parts
        .next()
        .and_then(dtype::from_name)
        .ok_or_else(unknown)?;
    let suffix = parts.next();
    macro_rules! typed {
        ($f:ident $(, $arg:expr)*) => {
            match dt {
                Dtype::F32 => $f::<f32>(call $(, $arg)*),
                Dtype::F16 => $f::<f16>(call $(, $arg)*),
                Dtype::Bf16 => $f::<bf16>(call $(, $arg)*),
                Dtype::F64 => $f::<f64>(call $(, $arg)*),
                _ => Err(unknown()),
            }
        };
    }
    use normalize::normalize;
    use pointwise::batchnorm;
    use softmax::softmax;
    match kernel {
        "softmax" => typed!(softmax),
        "normalize" => {
            let stat = suffix.and_then(dtype::from_name).ok_or_else(unknown)?;
            typed!(normalize, stat)
        }
        // `batchnorm_{T}_fused` runs in place only (`inplace::handles`)
        "batchnorm" if suffix.is_none() => typed!(batchnorm),
        _ => Err(unknown()),
    }
}
