//! CPU kernels: the entry point `{kernel}_{dtype}` is decoded once per launch, then one
//! monomorphic loop runs over the whole tensor, reading the parameter block the CUDA kernel gets
//! (see [`crate::plan`] for its layout).

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use crate::math::Num;
use crate::ops::{self, Class};

/// `out[i] = f(x[i])` in the compute type of `T`.
#[inline(always)]
pub fn map<T: Element>(x: &[u8], out: &mut [u8], f: impl Fn(T::Compute) -> T::Compute) {
    let s = std::mem::size_of::<T>();
    for (o, x) in out.chunks_exact_mut(s).zip(x.chunks_exact(s)) {
        T::from_compute(f(T::load(x).to_compute())).store(o);
    }
}

/// `out[i] = f(x[i])` with a bool (one byte, 0 or 1) result.
#[inline(always)]
pub fn map_pred<T: Element>(x: &[u8], out: &mut [u8], f: impl Fn(T::Compute) -> bool) {
    let s = std::mem::size_of::<T>();
    for (o, x) in out.iter_mut().zip(x.chunks_exact(s)) {
        *o = f(T::load(x).to_compute()) as u8;
    }
}

/// `out[i] = f(x[i])` on bools (any nonzero byte is true).
#[inline(always)]
pub fn map_bool(x: &[u8], out: &mut [u8], f: impl Fn(bool) -> bool) {
    for (o, x) in out.iter_mut().zip(x) {
        *o = f(*x != 0) as u8;
    }
}

fn bad_entry(call: &CpuCall) -> OpError {
    OpError::internal(format!("unknown entry point `{}`", call.entry_point))
}

fn bytes(n: u64, dt: Dtype) -> Result<u64, OpError> {
    n.checked_mul(dtype::size(dt) as u64)
        .ok_or_else(|| OpError::internal(format!("{n} elements overflow")))
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let (kernel, dt) = call
        .entry_point
        .rsplit_once('_')
        .and_then(|(k, d)| Some((k, dtype::from_name(d)?)))
        .ok_or_else(|| bad_entry(call))?;
    let def = ops::by_kernel(kernel)
        .filter(|d| d.class.dtypes().contains(&dt))
        .ok_or_else(|| bad_entry(call))?;
    if def.class == Class::Clip {
        return clip(call, dt);
    }
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out, n, a, b) = (r.ptr()?, r.ptr()?, r.u64()?, r.f64()?, r.f64()?);
    let x = bufs.input(x, bytes(n, dt)?)?;
    let mut w = bufs.output(out, bytes(n, def.class.output(dt))?)?;
    let x = &x[..bytes(n, dt)? as usize];
    let o = &mut w.data[..];
    let done = match (def.class, dt) {
        (Class::Float, Dtype::F32) => ops::run_float::<f32>(kernel, x, o, a, b),
        (Class::Float, Dtype::F16) => ops::run_float::<f16>(kernel, x, o, a, b),
        (Class::Float, Dtype::Bf16) => ops::run_float::<bf16>(kernel, x, o, a, b),
        (Class::Float, Dtype::F64) => ops::run_float::<f64>(kernel, x, o, a, b),
        (Class::Pred, Dtype::F32) => ops::run_pred::<f32>(kernel, x, o, a, b),
        (Class::Pred, Dtype::F16) => ops::run_pred::<f16>(kernel, x, o, a, b),
        (Class::Pred, Dtype::Bf16) => ops::run_pred::<bf16>(kernel, x, o, a, b),
        (Class::Pred, Dtype::F64) => ops::run_pred::<f64>(kernel, x, o, a, b),
        (Class::Num, Dtype::F32) => ops::run_num::<f32>(kernel, x, o),
        (Class::Num, Dtype::F16) => ops::run_num::<f16>(kernel, x, o),
        (Class::Num, Dtype::Bf16) => ops::run_num::<bf16>(kernel, x, o),
        (Class::Num, Dtype::F64) => ops::run_num::<f64>(kernel, x, o),
        (Class::Num, Dtype::I8) => ops::run_num::<i8>(kernel, x, o),
        (Class::Num, Dtype::U8) => ops::run_num::<u8>(kernel, x, o),
        (Class::Num, Dtype::I32) => ops::run_num::<i32>(kernel, x, o),
        (Class::Num, Dtype::I64) => ops::run_num::<i64>(kernel, x, o),
        (Class::Num, Dtype::I16) => ops::run_num::<i16>(kernel, x, o),
        (Class::Num, Dtype::U16) => ops::run_num::<u16>(kernel, x, o),
        (Class::Num, Dtype::U32) => ops::run_num::<u32>(kernel, x, o),
        (Class::Num, Dtype::U64) => ops::run_num::<u64>(kernel, x, o),
        (Class::Int, Dtype::I8) => ops::run_int::<i8>(kernel, x, o),
        (Class::Int, Dtype::U8) => ops::run_int::<u8>(kernel, x, o),
        (Class::Int, Dtype::I32) => ops::run_int::<i32>(kernel, x, o),
        (Class::Int, Dtype::I64) => ops::run_int::<i64>(kernel, x, o),
        (Class::Int, Dtype::I16) => ops::run_int::<i16>(kernel, x, o),
        (Class::Int, Dtype::U16) => ops::run_int::<u16>(kernel, x, o),
        (Class::Int, Dtype::U32) => ops::run_int::<u32>(kernel, x, o),
        (Class::Int, Dtype::U64) => ops::run_int::<u64>(kernel, x, o),
        (Class::Logic, Dtype::Boolean) => ops::run_logic(kernel, x, o),
        _ => false,
    };
    if !done {
        return Err(bad_entry(call));
    }
    Ok(vec![w])
}

/// Clip flag bits (the same in the CUDA template): min/max read from their input's first element,
/// or taken from the f64 parameter (an opset-6 attribute).
pub const LO_PTR: u32 = 1;
pub const HI_PTR: u32 = 2;
pub const LO_VAL: u32 = 4;
pub const HI_VAL: u32 = 8;

fn clip(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    match dt {
        Dtype::F32 => clip_typed::<f32>(call),
        Dtype::F16 => clip_typed::<f16>(call),
        Dtype::Bf16 => clip_typed::<bf16>(call),
        Dtype::F64 => clip_typed::<f64>(call),
        Dtype::I8 => clip_typed::<i8>(call),
        Dtype::U8 => clip_typed::<u8>(call),
        Dtype::I32 => clip_typed::<i32>(call),
        Dtype::I64 => clip_typed::<i64>(call),
        Dtype::I16 => clip_typed::<i16>(call),
        Dtype::U16 => clip_typed::<u16>(call),
        Dtype::U32 => clip_typed::<u32>(call),
        Dtype::U64 => clip_typed::<u64>(call),
        _ => Err(bad_entry(call)),
    }
}

fn clip_typed<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Num,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, lo_p, hi_p, out, n) = (r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?, r.u64()?);
    let (flags, lo_v, hi_v) = (r.u32()?, r.f64()?, r.f64()?);
    let size = bytes(n, T::DTYPE)?;
    let bound = |ptr_bit: u32, val_bit: u32, p: u32, v: f64| -> Result<_, OpError> {
        Ok(if flags & ptr_bit != 0 {
            let s = std::mem::size_of::<T>();
            Some(T::load(&bufs.input(p, s as u64)?[..s]).to_compute())
        } else if flags & val_bit != 0 {
            Some(<T::Compute as Num>::from_f64(v))
        } else {
            None
        })
    };
    let lo = bound(LO_PTR, LO_VAL, lo_p, lo_v)?;
    let hi = bound(HI_PTR, HI_VAL, hi_p, hi_v)?;
    let xs = &bufs.input(x, size)?[..size as usize];
    let mut w = bufs.output(out, size)?;
    // NaN stays NaN: comparisons with it are false.
    match (lo, hi) {
        (Some(l), Some(h)) => map::<T>(xs, &mut w.data, |v| {
            let v = if v < l { l } else { v };
            if v > h { h } else { v }
        }),
        (Some(l), None) => map::<T>(xs, &mut w.data, |v| if v < l { l } else { v }),
        (None, Some(h)) => map::<T>(xs, &mut w.data, |v| if v > h { h } else { v }),
        (None, None) => map::<T>(xs, &mut w.data, |v| v),
    }
    Ok(vec![w])
}
