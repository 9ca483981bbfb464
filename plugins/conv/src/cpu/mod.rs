//! CPU kernels: the entry points of [`crate::cuda`] on the CPU, reading the same parameter
//! block. Inputs are decoded once into the compute type, the op runs on plain slices, and the
//! outputs are encoded back: [`run`] on whole buffers (`run-cpu`), [`inplace`] a share of the
//! output planes per block range (ABI 1.3).

pub mod conv;
mod epilogue;
pub mod inplace;
mod lanes4;
mod pool;
pub mod real;

use half::{bf16, f16};
use pool::MaxVal;
use real::{Acc, Real};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use crate::geom::Geom;

/// Runs one launch; entry points are `{kernel}_{dtype}`.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let (kernel, dt) = call
        .entry_point
        .rsplit_once('_')
        .and_then(|(k, d)| Some((k, dtype::from_name(d)?)))
        .ok_or_else(unknown)?;
    match (dt, kernel) {
        (Dtype::F32, _) => float::<f32>(call, kernel),
        (Dtype::F16, _) => float::<f16>(call, kernel),
        (Dtype::Bf16, _) => float::<bf16>(call, kernel),
        (Dtype::F64, _) => float::<f64>(call, kernel),
        (Dtype::I8, "maxpool" | "maxpool_idx") => max_pool::<i8>(call, kernel == "maxpool_idx"),
        (Dtype::U8, "maxpool" | "maxpool_idx") => max_pool::<u8>(call, kernel == "maxpool_idx"),
        _ => Err(unknown()),
    }
}

fn float<T: Element>(call: &CpuCall, kernel: &str) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real + MaxVal,
{
    match kernel {
        "conv" | "conv_bias" | "convt" | "convt_bias" => {
            conv_op::<T>(call, kernel.starts_with("convt"), kernel.ends_with("_bias"))
        }
        "maxpool" | "maxpool_idx" => max_pool::<T>(call, kernel == "maxpool_idx"),
        "avgpool" | "lppool" => sum_pool::<T>(call, kernel == "lppool"),
        _ => Err(OpError::internal(format!(
            "unknown entry point `{}`",
            call.entry_point
        ))),
    }
}

/// Element count as usize, refusing what does not fit (wasm32 has 32-bit usize).
fn count(v: i64) -> Result<usize, OpError> {
    usize::try_from(v).map_err(|_| OpError::internal(format!("{v} elements do not fit memory")))
}

fn bytes<T>(n: usize) -> Result<u64, OpError> {
    (n as u64)
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| OpError::internal("byte size overflows"))
}

/// The first `n` elements of a read binding, decoded to the compute type.
fn decode<T: Element>(bufs: &Buffers, binding: u32, n: usize) -> Result<Vec<T::Compute>, OpError> {
    let s = std::mem::size_of::<T>();
    let data = bufs.input(binding, bytes::<T>(n)?)?;
    Ok(data[..n * s]
        .chunks_exact(s)
        .map(|b| T::load(b).to_compute())
        .collect())
}

fn encode<T: Element>(bufs: &Buffers, binding: u32, v: &[T::Compute]) -> Result<CpuWrite, OpError> {
    let s = std::mem::size_of::<T>();
    let mut w = bufs.output(binding, bytes::<T>(v.len())?)?;
    for (o, &x) in w.data.chunks_exact_mut(s).zip(v) {
        T::from_compute(x).store(o);
    }
    Ok(w)
}

fn conv_op<T: Element>(
    call: &CpuCall,
    transpose: bool,
    bias: bool,
) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, wb) = (r.ptr()?, r.ptr()?);
    let bb = if bias { Some(r.ptr()?) } else { None };
    let yb = r.ptr()?;
    let g = Geom::read(&mut r)?;
    let (in_sz, out_sz, ks) = (
        count(g.in_size())?,
        count(g.out_size())?,
        count(g.k_size())?,
    );
    let x_len = count(g.n * g.c)?.checked_mul(in_sz);
    let w_len = count(if transpose { g.c * g.mg } else { g.m * g.cg })?.checked_mul(ks);
    let y_len = count(g.n * g.m)?.checked_mul(out_sz);
    let (Some(x_len), Some(w_len), Some(y_len)) = (x_len, w_len, y_len) else {
        return Err(OpError::internal("tensor sizes overflow"));
    };
    let x = decode::<T>(&bufs, xb, x_len)?;
    let w = decode::<T>(&bufs, wb, w_len)?;
    let mut y = vec![<T::Compute as Acc>::ZERO; y_len];
    if transpose {
        conv::conv_transpose(&g, &x, &w, &mut y);
    } else {
        conv::conv(&g, &x, &w, &mut y);
    }
    if let Some(bb) = bb {
        let b = decode::<T>(&bufs, bb, count(g.m)?)?;
        conv::add_bias(&mut y, &b, out_sz);
    }
    Ok(vec![encode::<T>(&bufs, yb, &y)?])
}

/// The pointers and geometry of a pooling launch, with the input decoded.
struct PoolCall<'a, C> {
    bufs: Buffers<'a>,
    x: Vec<C>,
    y: u32,
    idx: Option<u32>,
    g: Geom,
    out_len: usize,
}

fn pool_call<T: Element>(
    call: &CpuCall,
    with_idx: bool,
) -> Result<PoolCall<'_, T::Compute>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, y) = (r.ptr()?, r.ptr()?);
    let idx = if with_idx { Some(r.ptr()?) } else { None };
    let g = Geom::read(&mut r)?;
    let planes = count(g.n * g.c)?;
    let (x_len, out_len) = (
        planes.checked_mul(count(g.in_size())?),
        planes.checked_mul(count(g.out_size())?),
    );
    let (Some(x_len), Some(out_len)) = (x_len, out_len) else {
        return Err(OpError::internal("tensor sizes overflow"));
    };
    let x = decode::<T>(&bufs, xb, x_len)?;
    Ok(PoolCall {
        bufs,
        x,
        y,
        idx,
        g,
        out_len,
    })
}

fn max_pool<T: Element>(call: &CpuCall, with_idx: bool) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: MaxVal,
{
    let p = pool_call::<T>(call, with_idx)?;
    let Some(ib) = p.idx else {
        let mut v = vec![<T::Compute as MaxVal>::LOWEST; p.out_len];
        pool::max_rows(&p.g, &p.x, &mut v);
        return Ok(vec![encode::<T>(&p.bufs, p.y, &v)?]);
    };
    let s = std::mem::size_of::<T>();
    let mut y = p.bufs.output(p.y, bytes::<T>(p.out_len)?)?;
    let mut idx = p.bufs.output(ib, bytes::<i64>(p.out_len)?)?;
    let mut indices = vec![0i64; p.out_len];
    pool::max_indexed(
        &p.g,
        &p.x,
        |o, v| T::from_compute(v).store(&mut y.data[o * s..o * s + s]),
        &mut indices,
    );
    for (o, v) in idx.data.chunks_exact_mut(8).zip(indices) {
        o.copy_from_slice(&v.to_le_bytes());
    }
    Ok(vec![y, idx])
}

fn sum_pool<T: Element>(call: &CpuCall, lp: bool) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let p = pool_call::<T>(call, false)?;
    let lp = lp.then(|| <T::Compute as Acc>::from_f64(p.g.p));
    let mut v = vec![<T::Compute as Acc>::ZERO; p.out_len];
    pool::sum(&p.g, &p.x, lp, &mut v);
    Ok(vec![encode::<T>(&p.bufs, p.y, &v)?])
}
