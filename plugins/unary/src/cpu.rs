//! CPU kernels, in place (ABI 1.3): the entry point `{kernel}_{dtype}` is decoded once per
//! launch, then a block range computes its share of the `n` elements in cache-sized chunks
//! (read a chunk of `x`, run one monomorphic loop, write the chunk of `y`), reading the
//! parameter block the CUDA kernel gets (see [`crate::plan`] for its layout). Every op is
//! independent per element, so every launch is splittable.

use half::{bf16, f16};
use umd_sdk::dtype::{self, Element};
use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, KernelCall, OpError};

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

fn bad_entry(entry: &str) -> OpError {
    OpError::internal(format!("unknown entry point `{entry}`"))
}

fn bytes(n: u64, dt: Dtype) -> Result<u64, OpError> {
    n.checked_mul(dtype::size(dt) as u64)
        .ok_or_else(|| OpError::internal(format!("{n} elements overflow")))
}

/// The op an entry point names and its input dtype.
fn entry(entry: &str) -> Result<(&'static ops::OpDef, Dtype), OpError> {
    let (kernel, dt) = entry
        .rsplit_once('_')
        .and_then(|(k, d)| Some((k, dtype::from_name(d)?)))
        .ok_or_else(|| bad_entry(entry))?;
    let def = ops::by_kernel(kernel)
        .filter(|d| d.class.dtypes().contains(&dt))
        .ok_or_else(|| bad_entry(entry))?;
    Ok((def, dt))
}

/// Whether an entry point runs as independent block ranges: every known one.
pub fn splittable(entry_point: &str) -> bool {
    entry(entry_point).is_ok()
}

/// What one launch computes on each chunk.
enum Job {
    /// `y = f(x)` with the row's attributes `a`, `b`.
    Map { a: f64, b: f64 },
    /// Clip with its flags, bound values and the bounds' bytes read from their inputs.
    Clip {
        flags: u32,
        lo: (Vec<u8>, f64),
        hi: (Vec<u8>, f64),
    },
}

/// Runs the blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let (def, dt) = entry(&call.entry_point)?;
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out, n, job) = if def.class == Class::Clip {
        let (x, lo_p, hi_p, out, n) = (r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?, r.u64()?);
        let (flags, lo_v, hi_v) = (r.u32()?, r.f64()?, r.f64()?);
        let s = dtype::size(dt);
        let mut bound = |bit: u32, p: u32| -> Result<Vec<u8>, OpError> {
            if flags & bit == 0 {
                return Ok(Vec::new());
            }
            if call.size_of(p)? < s as u64 {
                return Err(OpError::internal(format!(
                    "binding {p} (a Clip bound) holds fewer than {s} bytes"
                )));
            }
            mem.read(p, 0, s)
        };
        let (lo, hi) = (bound(LO_PTR, lo_p)?, bound(HI_PTR, hi_p)?);
        let job = Job::Clip {
            flags,
            lo: (lo, lo_v),
            hi: (hi, hi_v),
        };
        (x, out, n, job)
    } else {
        let (x, out, n, a, b) = (r.ptr()?, r.ptr()?, r.u64()?, r.f64()?, r.f64()?);
        (x, out, n, Job::Map { a, b })
    };
    let out_dt = def.class.output(dt);
    for (binding, dt, what) in [(x, dt, "x"), (out, out_dt, "y")] {
        let need = bytes(n, dt)?;
        if call.size_of(binding)? < need {
            return Err(OpError::internal(format!(
                "binding {binding} ({what}) is smaller than the {need} bytes of {n} elements"
            )));
        }
    }
    let (si, so) = (dtype::size(dt) as u64, dtype::size(out_dt) as u64);
    let step = (kernel::CHUNK_BYTES as u64 / si.max(so)).max(1);
    let mut y = Vec::new();
    kernel::chunks(call.share(n), step, |lo, hi| {
        let xs = mem.read(x, lo * si, ((hi - lo) * si) as usize)?;
        y.clear();
        y.resize(((hi - lo) * so) as usize, 0);
        let done = match &job {
            Job::Map { a, b } => compute(def, dt, &xs, &mut y, *a, *b),
            Job::Clip { flags, lo, hi } => clip(dt, *flags, lo, hi, &xs, &mut y),
        };
        if !done {
            return Err(bad_entry(&call.entry_point));
        }
        mem.write(out, lo * so, &y)
    })
}

/// `o = op(x)` for a chunk; false when the (class, dtype) pair has no kernel.
fn compute(def: &ops::OpDef, dt: Dtype, x: &[u8], o: &mut [u8], a: f64, b: f64) -> bool {
    let kernel = def.kernel;
    match (def.class, dt) {
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
    }
}

/// Clip flag bits (the same in the CUDA template): min/max read from their input's first element,
/// or taken from the f64 parameter (an opset-6 attribute).
pub const LO_PTR: u32 = 1;
pub const HI_PTR: u32 = 2;
pub const LO_VAL: u32 = 4;
pub const HI_VAL: u32 = 8;

/// Clip of a chunk; false for a dtype Clip does not serve.
fn clip(
    dt: Dtype,
    flags: u32,
    lo: &(Vec<u8>, f64),
    hi: &(Vec<u8>, f64),
    x: &[u8],
    o: &mut [u8],
) -> bool {
    let args = (flags, lo, hi, x, o);
    match dt {
        Dtype::F32 => clip_typed::<f32>(args),
        Dtype::F16 => clip_typed::<f16>(args),
        Dtype::Bf16 => clip_typed::<bf16>(args),
        Dtype::F64 => clip_typed::<f64>(args),
        Dtype::I8 => clip_typed::<i8>(args),
        Dtype::U8 => clip_typed::<u8>(args),
        Dtype::I32 => clip_typed::<i32>(args),
        Dtype::I64 => clip_typed::<i64>(args),
        Dtype::I16 => clip_typed::<i16>(args),
        Dtype::U16 => clip_typed::<u16>(args),
        Dtype::U32 => clip_typed::<u32>(args),
        Dtype::U64 => clip_typed::<u64>(args),
        _ => return false,
    }
    true
}

type ClipArgs<'a> = (
    u32,
    &'a (Vec<u8>, f64),
    &'a (Vec<u8>, f64),
    &'a [u8],
    &'a mut [u8],
);

fn clip_typed<T: Element>((flags, lo, hi, xs, o): ClipArgs)
where
    T::Compute: Num,
{
    let s = std::mem::size_of::<T>();
    let bound = |ptr_bit: u32, val_bit: u32, (bytes, v): &(Vec<u8>, f64)| {
        if flags & ptr_bit != 0 {
            Some(T::load(&bytes[..s]).to_compute())
        } else if flags & val_bit != 0 {
            Some(<T::Compute as Num>::from_f64(*v))
        } else {
            None
        }
    };
    let (lo, hi) = (bound(LO_PTR, LO_VAL, lo), bound(HI_PTR, HI_VAL, hi));
    // NaN stays NaN: comparisons with it are false.
    match (lo, hi) {
        (Some(l), Some(h)) => map::<T>(xs, o, |v| {
            let v = if v < l { l } else { v };
            if v > h { h } else { v }
        }),
        (Some(l), None) => map::<T>(xs, o, |v| if v < l { l } else { v }),
        (None, Some(h)) => map::<T>(xs, o, |v| if v > h { h } else { v }),
        (None, None) => map::<T>(xs, o, |v| v),
    }
}
