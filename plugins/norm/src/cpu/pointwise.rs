//! The whole-buffer `batchnorm` kernel (see [`crate::pointwise`]), run one contiguous `(n, c)`
//! run of `inner` elements at a time (LRN's kernel runs in place: [`super::inplace`]).

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
