//! Softmax, LogSoftmax and Hardmax over the `(outer, len, inner)` view: each outer block of
//! `len * inner` elements is decoded once; contiguous rows (`inner` = 1) run row by row, strided
//! ones keep per-column statistics so every inner loop is contiguous.
//!
//! Modes (see [`crate::softmax::mode`]): 0 Softmax, 1 LogSoftmax, 2 Hardmax, and for the half
//! types Softmax with numpy's rounding points in the storage type — `x - max`, `exp` and the
//! quotient rounded to `T`, the sum formed in the compute type as numpy's pairwise summation
//! forms it and rounded once (3), or rounded after every addition (4).

use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::Element;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, OpError};

use super::{Real, decode_into, encode_from, nan_max};

/// Whether `a` beats the current best `b` in an argmax (numpy: the first NaN wins, then the first
/// maximum).
#[inline(always)]
fn beats<C: Real>(a: C, b: C) -> bool {
    !b.is_nan() && (a.is_nan() || a > b)
}

pub fn softmax<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, y) = (r.ptr()?, r.ptr()?);
    let (outer, len, inner, mode) = (r.u64()?, r.u64()?, r.u64()?, r.u32()?);
    check_mode(mode)?;
    let overflow = || OpError::internal("softmax: element count overflows");
    let blk = len.checked_mul(inner).ok_or_else(overflow)?;
    let n = outer.checked_mul(blk).ok_or_else(overflow)?;
    let size = std::mem::size_of::<T>() as u64;
    let x = bufs.input(x, n * size)?;
    let mut out = bufs.output(y, n * size)?;
    let (blk, len, inner) = (blk as usize, len as usize, inner as usize);
    let mut v = vec![T::Compute::from_f64(0.0); blk];
    let mut cols = Columns::default();
    for o in 0..outer as usize {
        decode_into::<T>(x, o * blk, &mut v);
        if inner == 1 {
            row(&mut v, mode, round::<T>);
        } else {
            cols.run(&mut v, len, inner, mode, round::<T>);
        }
        encode_from::<T>(&mut out.data, o * blk, &v);
    }
    Ok(vec![out])
}

/// Refuses a mode no plan writes.
pub(super) fn check_mode(mode: u32) -> Result<(), OpError> {
    if mode > 4 {
        return Err(OpError::internal(format!("softmax: unknown mode {mode}")));
    }
    Ok(())
}

/// `v` rounded to `T`'s precision and back (the identity for f32 and f64).
#[inline(always)]
pub(super) fn round<T: Element>(v: T::Compute) -> T::Compute {
    T::from_compute(v).to_compute()
}

/// numpy's `pairwise_sum` (how its add-reduction sums a contiguous float16 run, in float32):
/// in order below 8 values, 8 running sums up to 128 (combined as `((r0+r1)+(r2+r3))+
/// ((r4+r5)+(r6+r7))`, then the rest in order), else the two halves (the first a multiple of 8).
pub(super) fn pairwise_sum<C: Real>(v: &[C]) -> C {
    let n = v.len();
    if n < 8 {
        return v.iter().fold(C::from_f64(0.0), |s, &x| s + x);
    }
    if n <= 128 {
        let mut r = [C::from_f64(0.0); 8];
        r.copy_from_slice(&v[..8]);
        let whole = n - n % 8;
        for chunk in v[8..whole].chunks_exact(8) {
            for (acc, &x) in r.iter_mut().zip(chunk) {
                *acc = *acc + x;
            }
        }
        let head = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        return v[whole..].iter().fold(head, |s, &x| s + x);
    }
    let half = n / 2;
    let half = half - half % 8;
    pairwise_sum(&v[..half]) + pairwise_sum(&v[half..])
}

/// One contiguous row; `rnd` rounds to the storage type (modes 3 and 4).
pub(super) fn row<C: Real>(v: &mut [C], mode: u32, rnd: impl Fn(C) -> C) {
    let (zero, one) = (C::from_f64(0.0), C::from_f64(1.0));
    if mode == 2 {
        let mut best = 0;
        for i in 1..v.len() {
            if beats(v[i], v[best]) {
                best = i;
            }
        }
        v.fill(zero);
        if let Some(b) = v.get_mut(best) {
            *b = one;
        }
        return;
    }
    let m = v.iter().fold(C::NEG_INFINITY, |m, &x| nan_max(m, x));
    if mode >= 3 {
        let mut s = zero;
        for x in v.iter_mut() {
            *x = rnd(rnd(*x - m).exp());
            if mode == 4 {
                s = rnd(s + *x);
            }
        }
        let s = rnd(if mode == 3 { pairwise_sum(v) } else { s });
        v.iter_mut().for_each(|x| *x = *x / s);
        return;
    }
    if mode == 0 {
        let mut sum = 0f64;
        for x in v.iter_mut() {
            *x = (*x - m).exp();
            sum += x.to_f64();
        }
        let s = C::from_f64(sum);
        v.iter_mut().for_each(|x| *x = *x / s);
    } else {
        let sum: f64 = v.iter().map(|&x| (x - m).exp().to_f64()).sum();
        let lse = C::from_f64(sum.ln());
        v.iter_mut().for_each(|x| *x = (*x - m) - lse);
    }
}

/// Per-column statistics of a strided block, reused across blocks.
struct Columns<C> {
    best: Vec<C>,
    at: Vec<usize>,
    sum: Vec<f64>,
}

impl<C> Default for Columns<C> {
    fn default() -> Self {
        Columns {
            best: Vec::new(),
            at: Vec::new(),
            sum: Vec::new(),
        }
    }
}

impl<C: Real> Columns<C> {
    fn run(&mut self, v: &mut [C], len: usize, inner: usize, mode: u32, rnd: impl Fn(C) -> C) {
        let (zero, one) = (C::from_f64(0.0), C::from_f64(1.0));
        if len == 0 {
            return;
        }
        if inner == 0 {
            return;
        }
        self.best.clear();
        self.best.extend_from_slice(&v[..inner]);
        if mode == 2 {
            self.at.clear();
            self.at.resize(inner, 0);
            for e in 1..len {
                let rowv = &v[e * inner..(e + 1) * inner];
                for ((b, at), &x) in self.best.iter_mut().zip(&mut self.at).zip(rowv) {
                    if beats(x, *b) {
                        *b = x;
                        *at = e;
                    }
                }
            }
            v.fill(zero);
            for (i, &e) in self.at.iter().enumerate() {
                v[e * inner + i] = one;
            }
            return;
        }
        for rowv in v.chunks_exact(inner).skip(1) {
            for (b, &x) in self.best.iter_mut().zip(rowv) {
                *b = nan_max(*b, x);
            }
        }
        if mode >= 3 {
            self.rounded(v, inner, rnd);
            return;
        }
        self.sum.clear();
        self.sum.resize(inner, 0.0);
        for rowv in v.chunks_exact_mut(inner) {
            for ((s, &m), x) in self.sum.iter_mut().zip(&self.best).zip(rowv.iter_mut()) {
                let t = (*x - m).exp();
                *s += t.to_f64();
                if mode == 0 {
                    *x = t;
                }
            }
        }
        if mode == 0 {
            let s: Vec<C> = self.sum.iter().map(|&s| C::from_f64(s)).collect();
            for rowv in v.chunks_exact_mut(inner) {
                for (x, &s) in rowv.iter_mut().zip(&s) {
                    *x = *x / s;
                }
            }
        } else {
            let lse: Vec<C> = self.sum.iter().map(|&s| C::from_f64(s.ln())).collect();
            for rowv in v.chunks_exact_mut(inner) {
                for ((x, &m), &l) in rowv.iter_mut().zip(&self.best).zip(&lse) {
                    *x = (*x - m) - l;
                }
            }
        }
    }

    /// Softmax modes 3 and 4 (see the module doc), the maxima already in `best`: numpy adds
    /// strided columns in order in the storage type, so both round every addition here.
    fn rounded(&mut self, v: &mut [C], inner: usize, rnd: impl Fn(C) -> C) {
        let mut sum = vec![C::from_f64(0.0); inner];
        for rowv in v.chunks_exact_mut(inner) {
            for ((s, &m), x) in sum.iter_mut().zip(&self.best).zip(rowv.iter_mut()) {
                *x = rnd(rnd(*x - m).exp());
                *s = rnd(*s + *x);
            }
        }
        sum.iter_mut().for_each(|s| *s = rnd(*s));
        for rowv in v.chunks_exact_mut(inner) {
            for (x, &s) in rowv.iter_mut().zip(&sum) {
                *x = *x / s;
            }
        }
    }
}
