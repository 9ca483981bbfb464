//! The element-wise kernels `batchnorm` and `lrn` (see [`crate::pointwise`]), run one
//! contiguous `(n, c)` run of `inner` elements at a time.

use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::Element;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, OpError};

use super::{Real, load_f64, store_f64};

/// `(outer, channels, inner)` with `n = outer * channels * inner` checked.
pub(super) fn runs(n: u64, c: u64, inner: u64) -> Result<(usize, usize, usize), OpError> {
    let per = c.checked_mul(inner).filter(|&p| p > 0);
    match per {
        Some(p) if n.is_multiple_of(p) => Ok(((n / p) as usize, c as usize, inner as usize)),
        None if n == 0 => Ok((0, c as usize, inner as usize)),
        _ => Err(OpError::internal(format!(
            "{n} elements are not a whole number of {c} x {inner} blocks"
        ))),
    }
}

pub fn batchnorm<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, scale, bias, mean, var, y) =
        (r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?);
    let (n, c, inner, eps) = (r.u64()?, r.u64()?, r.u64()?, r.f64()?);
    let size = std::mem::size_of::<T>() as u64;
    let (outer, c, inner) = runs(n, c, inner)?;
    let x = bufs.input(x, n * size)?;
    let vec = |b| -> Result<Vec<f64>, OpError> {
        let d = bufs.input(b, c as u64 * size)?;
        Ok((0..c).map(|i| load_f64::<T>(d, i)).collect())
    };
    let (scale, bias, mean, var) = (vec(scale)?, vec(bias)?, vec(mean)?, vec(var)?);
    let mut out = bufs.output(y, n * size)?;
    for o in 0..outer {
        for ch in 0..c {
            let (s, b, m) = (scale[ch], bias[ch], mean[ch]);
            let inv = 1.0 / (var[ch] + eps).sqrt();
            let start = (o * c + ch) * inner;
            for i in start..start + inner {
                let v = load_f64::<T>(x, i);
                store_f64::<T>(&mut out.data, i, s * (v - m) * inv + b);
            }
        }
    }
    Ok(vec![out])
}

pub fn lrn<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, y) = (r.ptr()?, r.ptr()?);
    let (n, c, inner, size) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?.max(1));
    let (alpha, beta, bias) = (r.f64()?, r.f64()?, r.f64()?);
    let esize = std::mem::size_of::<T>() as u64;
    let (outer, c, inner) = runs(n, c, inner)?;
    let x = bufs.input(x, n * esize)?;
    let mut out = bufs.output(y, n * esize)?;
    let (before, after) = ((size - 1) / 2, size / 2); // ⌊(size-1)/2⌋, ⌈(size-1)/2⌉
    let k = alpha / size as f64;
    let pow = power(beta);
    let mut sq = vec![0f64; inner];
    for o in 0..outer {
        for ch in 0..c {
            let lo = ch.saturating_sub(before as usize);
            let hi = (ch as u64 + after).min(c as u64 - 1) as usize;
            sq.fill(0.0);
            for cc in lo..=hi {
                let start = (o * c + cc) * inner;
                for (j, s) in sq.iter_mut().enumerate() {
                    let v = load_f64::<T>(x, start + j);
                    *s += v * v;
                }
            }
            let start = (o * c + ch) * inner;
            for (j, s) in sq.iter().enumerate() {
                let v = load_f64::<T>(x, start + j);
                store_f64::<T>(&mut out.data, start + j, v / pow(bias + k * s));
            }
        }
    }
    Ok(vec![out])
}

/// `b ↦ b^beta` for LRN's denominator: by square roots for the exponents models use (3/4 in
/// AlexNet, GoogLeNet, ZFNet and the Inceptions; 1/2; 1) — each root correctly rounded, so
/// within an ulp or two of f64 `powf`, far below the f32 a result is stored in — and `powf`
/// (a slow libm call in WebAssembly, once per element) for any other.
fn power(beta: f64) -> impl Fn(f64) -> f64 {
    move |b: f64| {
        if beta == 0.75 {
            let r = b.sqrt();
            r * r.sqrt()
        } else if beta == 0.5 {
            b.sqrt()
        } else if beta == 1.0 {
            b
        } else {
            b.powf(beta)
        }
    }
}
