//! The arithmetic of the `Reduce*` ops and ArgMax/ArgMin over a [`View`], which the in-place
//! kernels ([`super::inplace`]) run: the op tables ([`ROp`]: init, map, combine, finalize), the
//! folds of one output's reduced elements (contiguous ones in 8 vectorisable lanes) and the
//! ArgMax/ArgMin order. (The whole-buffer kernels that once ran them over a whole input are the
//! tests' oracle now, `tests/oracle`.)

use super::num::Num;
use crate::view::{Odometer, View};

/// One reduction as (init, map, combine, finalize), the CPU twin of the CUDA `Op*` structs.
pub trait ROp<C: Num> {
    /// LogSumExp: a first pass finds the shift (max, 0 when infinite) given to `map`/`fin`.
    const TWO_PASS: bool = false;
    /// The identity of `comb`; `lo`/`hi` are the dtype's lowest and highest values.
    fn init(lo: C, hi: C) -> C;
    fn map(x: C, shift: C) -> C;
    fn comb(a: C, b: C) -> C;
    fn fin(a: C, n: u64, shift: C) -> C;
}

macro_rules! rop {
    ($name:ident, init($lo:ident, $hi:ident) $init:expr, map($x:ident, $s:ident) $map:expr,
     comb($a:ident, $b:ident) $comb:expr, fin($fa:ident, $n:ident, $fs:ident) $fin:expr
     $(, two_pass = $two:expr)?) => {
        pub struct $name;
        impl<C: Num> ROp<C> for $name {
            $(const TWO_PASS: bool = $two;)?
            #[inline(always)]
            #[allow(unused_variables)]
            fn init($lo: C, $hi: C) -> C {
                $init
            }
            #[inline(always)]
            #[allow(unused_variables)]
            fn map($x: C, $s: C) -> C {
                $map
            }
            #[inline(always)]
            fn comb($a: C, $b: C) -> C {
                $comb
            }
            #[inline(always)]
            #[allow(unused_variables)]
            fn fin($fa: C, $n: u64, $fs: C) -> C {
                $fin
            }
        }
    };
}

rop!(Sum, init(lo, hi) C::ZERO, map(x, s) x, comb(a, b) a.add(b), fin(a, n, s) a);
rop!(Mean, init(lo, hi) C::ZERO, map(x, s) x, comb(a, b) a.add(b), fin(a, n, s) a.div_count(n));
rop!(Max, init(lo, hi) lo, map(x, s) x, comb(a, b) a.max_nan(b), fin(a, n, s) a);
rop!(Min, init(lo, hi) hi, map(x, s) x, comb(a, b) a.min_nan(b), fin(a, n, s) a);
rop!(Prod, init(lo, hi) C::ONE, map(x, s) x, comb(a, b) a.mul(b), fin(a, n, s) a);
rop!(L1, init(lo, hi) C::ZERO, map(x, s) x.abs(), comb(a, b) a.add(b), fin(a, n, s) a);
rop!(L2, init(lo, hi) C::ZERO, map(x, s) x.mul(x), comb(a, b) a.add(b), fin(a, n, s) a.sqrt());
rop!(SumSquare, init(lo, hi) C::ZERO, map(x, s) x.mul(x), comb(a, b) a.add(b), fin(a, n, s) a);
rop!(LogSum, init(lo, hi) C::ZERO, map(x, s) x, comb(a, b) a.add(b), fin(a, n, s) a.ln());
rop!(LogSumExp, init(lo, hi) C::ZERO, map(x, s) x.sub(s).exp(), comb(a, b) a.add(b),
     fin(a, n, s) a.ln().add(s), two_pass = true);

/// The LogSumExp shift from a maximum: the maximum itself, or 0 when it is infinite (all
/// values -inf, an empty set, or a +inf present), as onnxruntime does.
#[inline(always)]
pub(crate) fn shift_of<C: Num>(m: C) -> C {
    if m.is_inf() { C::ZERO } else { m }
}

/// Folds a contiguous row into one value with 8 independent lanes (vectorisable).
#[inline(always)]
fn fold_contig<C: Num, O: ROp<C>>(row: &[C], init: C, shift: C) -> C {
    let mut lanes = [init; 8];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            lanes[l] = O::comb(lanes[l], O::map(c[l], shift));
        }
    }
    let mut acc = init;
    for x in chunks.remainder() {
        acc = O::comb(acc, O::map(*x, shift));
    }
    lanes.into_iter().fold(acc, O::comb)
}

/// The reduced dimensions split into the outer ones (walked by an odometer) and the last one
/// (looped directly, contiguous when its stride is 1).
pub(crate) struct Reduced<'a> {
    outer_shape: &'a [u64],
    outer_stride: &'a [u64],
    outer_count: u64,
    last_n: usize,
    last_stride: usize,
}

impl<'a> Reduced<'a> {
    pub(crate) fn new(v: &'a View) -> Self {
        let rr = v.rshape.len();
        if rr == 0 {
            return Reduced {
                outer_shape: &[],
                outer_stride: &[],
                outer_count: 1,
                last_n: 1,
                last_stride: 0,
            };
        }
        let last_n = v.rshape[rr - 1];
        Reduced {
            outer_shape: &v.rshape[..rr - 1],
            outer_stride: &v.rstride[..rr - 1],
            outer_count: v.r.checked_div(last_n).unwrap_or(0),
            last_n: last_n as usize,
            last_stride: v.rstride[rr - 1] as usize,
        }
    }

    /// Folds every reduced element of the output at `base`.
    #[inline(always)]
    pub(crate) fn fold<C: Num, O: ROp<C>>(&self, xs: &[C], base: usize, init: C, shift: C) -> C {
        let mut acc = init;
        let mut ro = Odometer::new(self.outer_shape, self.outer_stride);
        for _ in 0..self.outer_count {
            let start = base + ro.off as usize;
            if self.last_stride == 1 {
                acc = O::comb(
                    acc,
                    fold_contig::<C, O>(&xs[start..start + self.last_n], init, shift),
                );
            } else {
                for j in 0..self.last_n {
                    acc = O::comb(acc, O::map(xs[start + j * self.last_stride], shift));
                }
            }
            ro.step();
        }
        acc
    }
}

/// Calls `f` with the offset of every reduced index, in order.
#[inline(always)]
pub(crate) fn for_each_reduced(v: &View, mut f: impl FnMut(usize)) {
    let mut ro = Odometer::new(&v.rshape, &v.rstride);
    for _ in 0..v.r {
        f(ro.off as usize);
        ro.step();
    }
}

/// Folds reduced indices `r0..r1` (no shift: never LogSumExp) of one output from `xs` holding
/// the input from the offset of reduced index `r0` (`first`) of that output on.
pub(crate) fn fold_range_at<C: Num, O: ROp<C>>(
    xs: &[C],
    first: u64,
    v: &View,
    r0: u64,
    r1: u64,
    init: C,
) -> C {
    let n = (r1 - r0) as usize;
    if v.rshape.len() == 1 {
        let st = v.rstride[0] as usize;
        if st == 1 {
            return fold_contig::<C, O>(&xs[..n], init, C::ZERO);
        }
        return (0..n).fold(init, |a, j| O::comb(a, O::map(xs[j * st], C::ZERO)));
    }
    let mut ro = Odometer::at(&v.rshape, &v.rstride, r0);
    let mut acc = init;
    for _ in 0..n {
        acc = O::comb(acc, O::map(xs[(ro.off - first) as usize], C::ZERO));
        ro.step();
    }
    acc
}

/// Whether `(av, ai)` wins over `(bv, bi)` in ArgMax (`is_max`) or ArgMin: NaN wins (as numpy),
/// then the larger (smaller) value, then the first index (the last with `last`). An index of
/// -1 is "nothing yet". The CPU twin of the CUDA `umd_arg_better`.
#[inline(always)]
pub fn arg_better<C: Num>(av: C, ai: i64, bv: C, bi: i64, is_max: bool, last: bool) -> bool {
    if bi < 0 {
        return true;
    }
    if ai < 0 {
        return false;
    }
    let (an, bn) = (av.is_nan(), bv.is_nan());
    if an != bn {
        return an;
    }
    if !an && av != bv {
        return if is_max { av > bv } else { av < bv };
    }
    if last { ai > bi } else { ai < bi }
}

/// ArgMax/ArgMin of the output at `base`.
#[inline(always)]
pub(crate) fn arg_one<C: Num>(xs: &[C], base: usize, v: &View, is_max: bool, last: bool) -> i64 {
    let (mut bv, mut bi) = (C::ZERO, -1i64);
    let mut t = 0i64;
    for_each_reduced(v, |off| {
        let x = xs[base + off];
        if arg_better(x, t, bv, bi, is_max, last) {
            (bv, bi) = (x, t);
        }
        t += 1;
    });
    bi.max(0)
}
