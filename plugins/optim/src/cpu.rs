//! CPU kernels: the reference implementation of the entry points of [`crate::cuda`], reading the
//! same parameter blocks ([`crate::plan`]). The entry point is decoded once
//! (`{adagrad|adam|momentum}_{dtype}`), then a loop monomorphic in the element type runs over
//! every element, with the arithmetic of the CUDA kernels: the learning-rate scalar in f64, the
//! per-element update in the compute type (f32 for f32/f16/bf16, f64 for f64).

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use crate::plan::{Kind, NESTEROV, R_F64};

/// What the kernels compute in: f32 or f64.
pub trait Real:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn from_f64(v: f64) -> Self;
    fn sqrt(self) -> Self;
}

impl Real for f32 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let (kernel, dt) = call.entry_point.split_once('_').ok_or_else(unknown)?;
    let kind = [Kind::Adagrad, Kind::Adam, Kind::Momentum]
        .into_iter()
        .find(|k| k.kernel() == kernel)
        .ok_or_else(unknown)?;
    match dtype::from_name(dt).ok_or_else(unknown)? {
        Dtype::F32 => step::<f32>(call, kind),
        Dtype::F16 => step::<f16>(call, kind),
        Dtype::Bf16 => step::<bf16>(call, kind),
        Dtype::F64 => step::<f64>(call, kind),
        _ => Err(unknown()),
    }
}

/// The optional pointer `s2` (null for Adagrad and Momentum).
fn opt_ptr(r: &mut ParamReader, on: bool) -> Result<Option<u32>, OpError> {
    if on {
        r.ptr().map(Some)
    } else {
        r.u64().map(|_| None)
    }
}

fn step<T: Element>(call: &CpuCall, kind: Kind) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut p = ParamReader::new(&call.params, &call.relocations);
    let flags = p.u32()?;
    let adam = kind == Kind::Adam;
    let (rb, tb, xb, gb, s1b) = (p.ptr()?, p.ptr()?, p.ptr()?, p.ptr()?, p.ptr()?);
    let s2b = opt_ptr(&mut p, adam)?;
    let (xob, s1ob) = (p.ptr()?, p.ptr()?);
    let s2ob = opt_ptr(&mut p, adam)?;
    let n = p.u64()?;
    let mut c = [0f64; 5];
    for v in &mut c {
        *v = p.f64()?;
    }
    let r = if flags & R_F64 != 0 {
        f64::load(&bufs.input(rb, 8)?[..8])
    } else {
        f32::load(&bufs.input(rb, 4)?[..4]) as f64
    };
    let t = i64::load(&bufs.input(tb, 8)?[..8]);
    let size = std::mem::size_of::<T>();
    let bytes = n
        .checked_mul(size as u64)
        .ok_or_else(|| OpError::internal("optim: byte size overflows"))?;
    let read = |b: u32| -> Result<&[u8], OpError> { Ok(&bufs.input(b, bytes)?[..bytes as usize]) };
    let (x, g, s1) = (read(xb)?, read(gb)?, read(s1b)?);
    let s2 = match s2b {
        Some(b) => read(b)?,
        None => &[][..],
    };
    let mut xo = bufs.output(xob, bytes)?;
    let mut s1o = bufs.output(s1ob, bytes)?;
    let mut s2o = match s2ob {
        Some(b) => Some(bufs.output(b, bytes)?),
        None => None,
    };
    let k = |v: f64| T::Compute::from_f64(v);
    let ld = |buf: &[u8], i: usize| T::load(&buf[i * size..(i + 1) * size]).to_compute();
    let st = |buf: &mut [u8], i: usize, v: T::Compute| {
        T::from_compute(v).store(&mut buf[i * size..(i + 1) * size])
    };
    let n = n as usize;
    match kind {
        Kind::Adagrad => {
            let [decay, eps, norm, _, _] = c;
            let lr = k(r / (1.0 + t as f64 * decay));
            let (eps, norm) = (k(eps), k(norm));
            for i in 0..n {
                let (xv, h) = (ld(x, i), ld(s1, i));
                let gr = norm * xv + ld(g, i);
                let h2 = h + gr * gr;
                st(&mut xo.data, i, xv - lr * gr / (h2.sqrt() + eps));
                st(&mut s1o.data, i, h2);
            }
        }
        Kind::Adam => {
            let [alpha, beta, eps, norm, post] = c;
            let lr = if t > 0 {
                let tf = t as f64;
                r * (1.0 - beta.powf(tf)).sqrt() / (1.0 - alpha.powf(tf))
            } else {
                r
            };
            let lr = k(lr);
            let (one, alpha, beta, eps, norm, post) =
                (k(1.0), k(alpha), k(beta), k(eps), k(norm), k(post));
            let ho = s2o.as_mut().expect("Adam has H_new");
            for i in 0..n {
                let (xv, v, h) = (ld(x, i), ld(s1, i), ld(s2, i));
                let gr = norm * xv + ld(g, i);
                let v2 = alpha * v + (one - alpha) * gr;
                let h2 = beta * h + (one - beta) * (gr * gr);
                let x2 = xv - lr * (v2 / (h2.sqrt() + eps));
                st(&mut xo.data, i, (one - post) * x2);
                st(&mut s1o.data, i, v2);
                st(&mut ho.data, i, h2);
            }
        }
        Kind::Momentum => {
            let [alpha, beta, norm, _, _] = c;
            let beta = if t > 0 { beta } else { 1.0 };
            let (lr, alpha, beta, norm) = (k(r), k(alpha), k(beta), k(norm));
            let nesterov = flags & NESTEROV != 0;
            for i in 0..n {
                let (xv, v) = (ld(x, i), ld(s1, i));
                let gr = norm * xv + ld(g, i);
                let v2 = alpha * v + beta * gr;
                let x2 = if nesterov {
                    xv - lr * (gr + alpha * v2)
                } else {
                    xv - lr * v2
                };
                st(&mut xo.data, i, x2);
                st(&mut s1o.data, i, v2);
            }
        }
    }
    let mut out = vec![xo, s1o];
    out.extend(s2o);
    Ok(out)
}
