//! CPU kernels of the three stages (see [`crate::plan`]), in place over the launch's memory:
//! each reads the regions it needs, computes in f64 (rounding to T where the CUDA kernel stores
//! T) and writes its results back.

use half::{bf16, f16};
use umd_sdk::dtype::Element;
use umd_sdk::kernel::Memory;
use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, KernelCall, OpError};

use crate::plan::parse;

/// A float element as f64 and back (the CUDA kernels' compute: f32 for the halves, f64 for f64).
trait Real: Element {
    fn get(b: &[u8]) -> f64;
    fn put(v: f64, b: &mut [u8]);
}
macro_rules! real {
    ($t:ty, $load:expr, $store:expr) => {
        impl Real for $t {
            #[inline(always)]
            fn get(b: &[u8]) -> f64 {
                let f: fn($t) -> f64 = $load;
                f(<$t>::load(b))
            }
            #[inline(always)]
            fn put(v: f64, b: &mut [u8]) {
                let f: fn(f64) -> $t = $store;
                f(v).store(b)
            }
        }
    };
}
real!(f32, |x| x as f64, |v| v as f32);
real!(f64, |x| x, |v| v);
real!(f16, |x| x.to_f64(), |v| f16::from_f32(v as f32));
real!(bf16, |x| x.to_f64(), |v| bf16::from_f32(v as f32));

fn decode<T: Real>(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(std::mem::size_of::<T>())
        .map(T::get)
        .collect()
}

fn encode<T: Real>(v: &[f64]) -> Vec<u8> {
    let s = std::mem::size_of::<T>();
    let mut out = vec![0u8; v.len() * s];
    for (x, b) in v.iter().zip(out.chunks_exact_mut(s)) {
        T::put(*x, b);
    }
    out
}

fn targets(dt: Dtype, b: &[u8]) -> Vec<i64> {
    match dt {
        Dtype::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
            .collect(),
        _ => b
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

/// Runs one launch (the whole grid).
pub fn run(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let (t, i) = parse(&call.module_id)
        .ok_or_else(|| OpError::internal(format!("unknown module `{}`", call.module_id)))?;
    match t {
        Dtype::F32 => stage::<f32>(call, mem, i),
        Dtype::F64 => stage::<f64>(call, mem, i),
        Dtype::F16 => stage::<f16>(call, mem, i),
        _ => stage::<bf16>(call, mem, i),
    }
}

fn stage<T: Real>(call: &KernelCall, mem: &mut dyn Memory, i_dt: Dtype) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let s = std::mem::size_of::<T>();
    let stage = call.entry_point.rsplit('_').next().unwrap_or("");
    match stage {
        "lsm" => {
            let (xb, lpb, lp_off) = (r.ptr()?, r.ptr()?, r.u64()?);
            let (n, c, d) = (r.u64()? as usize, r.u64()? as usize, r.u64()? as usize);
            let total = n * c * d;
            let x = decode::<T>(&mem.read(xb, 0, total * s)?);
            let mut lp = vec![0f64; total];
            let mut row = vec![0f64; c];
            for nn in 0..n {
                for dd in 0..d {
                    let at = |cc: usize| (nn * c + cc) * d + dd;
                    for (cc, v) in row.iter_mut().enumerate() {
                        *v = x[at(cc)];
                    }
                    let m = row.iter().copied().fold(f64::NEG_INFINITY, |a, b| {
                        if a > b || a.is_nan() { a } else { b }
                    });
                    let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
                    let l = sum.ln();
                    for (cc, v) in row.iter().enumerate() {
                        lp[at(cc)] = (v - m) - l;
                    }
                }
            }
            mem.write(lpb, lp_off, &encode::<T>(&lp))
        }
        "nll" => {
            let flags = r.u32()?;
            let (xb, x_off, tb) = (r.ptr()?, r.u64()?, r.ptr()?);
            let wb = if flags & 1 != 0 {
                Some(r.ptr()?)
            } else {
                r.u64()?;
                None
            };
            let (ob, o_off, ii) = (r.ptr()?, r.u64()?, r.i64()?);
            let (n, c, d) = (r.u64()? as usize, r.u64()? as usize, r.u64()? as usize);
            let rows = n * d;
            let x = decode::<T>(&mem.read(xb, x_off, n * c * d * s)?);
            let tg = targets(i_dt, &mem.read(tb, 0, rows * umd_sdk::dtype::size(i_dt))?);
            let w = match wb {
                Some(b) => Some(decode::<T>(&mem.read(b, 0, c * s)?)),
                None => None,
            };
            let mut loss = vec![0f64; rows];
            let mut wts = vec![0f64; rows];
            for (r, (l, wt)) in loss.iter_mut().zip(wts.iter_mut()).enumerate() {
                let t = tg[r];
                (*l, *wt) = if flags & 2 != 0 && t == ii {
                    (0.0, 0.0)
                } else if t < 0 || t as usize >= c {
                    (f64::NAN, f64::NAN)
                } else {
                    let wv = w.as_ref().map_or(1.0, |w| w[t as usize]);
                    let (nn, dd) = (r / d, r % d);
                    (-wv * x[(nn * c + t as usize) * d + dd], wv)
                };
            }
            if flags & 4 != 0 {
                let mut bytes = Vec::with_capacity(16 * rows);
                for v in loss.iter().chain(&wts) {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
                mem.write(ob, o_off, &bytes)
            } else {
                mem.write(ob, o_off, &encode::<T>(&loss))
            }
        }
        "red" => {
            let (wsb, off, yb, count, mean) = (
                r.ptr()?,
                r.u64()?,
                r.ptr()?,
                r.u64()? as usize,
                r.u32()? != 0,
            );
            let bytes = mem.read(wsb, off, 16 * count)?;
            let v: Vec<f64> = bytes
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let l: f64 = v[..count].iter().sum();
            let w: f64 = v[count..].iter().sum();
            mem.write(yb, 0, &encode::<T>(&[if mean { l / w } else { l }]))
        }
        other => Err(OpError::internal(format!("unknown stage `{other}`"))),
    }
}
