//! The whole-buffer reductions and ArgMax/ArgMin over a [`View`]: every output of a launch
//! from the whole input, on the op tables and folds the in-place kernels share
//! ([`crate::cpu::reduce`]).

use crate::cpu::Num;
use crate::cpu::reduce::{Max, ROp, Reduced, arg_one, fold_range_at, for_each_reduced, shift_of};
use crate::view::{Odometer, View};

/// Reduces `xs` (the input in compute type) over the view with op `O`; `lo`/`hi` are the
/// dtype's bounds. Returns the `n_out` results in output order.
pub fn reduce<C: Num, O: ROp<C>>(xs: &[C], v: &View, lo: C, hi: C) -> Vec<C> {
    let init = O::init(lo, hi);
    let mut out = Vec::with_capacity(v.n_out as usize);
    let kr = v.kshape.len();
    if kr >= 1 && v.kstride[kr - 1] == 1 && v.kshape[kr - 1] >= 4 {
        // The innermost kept dimension is contiguous: reduce whole rows of it at once.
        let inner = v.kshape[kr - 1] as usize;
        let mut acc = vec![init; inner];
        let mut shift = vec![C::ZERO; inner];
        let mut oo = Odometer::new(&v.kshape[..kr - 1], &v.kstride[..kr - 1]);
        for _ in 0..v.n_out / inner as u64 {
            let base = oo.off as usize;
            if O::TWO_PASS {
                shift.fill(lo);
                for_each_reduced(v, |off| {
                    for (m, x) in shift.iter_mut().zip(&xs[base + off..base + off + inner]) {
                        *m = m.max_nan(*x);
                    }
                });
                shift.iter_mut().for_each(|m| *m = shift_of(*m));
            }
            acc.fill(init);
            for_each_reduced(v, |off| {
                let row = &xs[base + off..base + off + inner];
                for ((a, x), s) in acc.iter_mut().zip(row).zip(&shift) {
                    *a = O::comb(*a, O::map(*x, *s));
                }
            });
            out.extend(acc.iter().zip(&shift).map(|(a, s)| O::fin(*a, v.r, *s)));
            oo.step();
        }
    } else {
        let red = Reduced::new(v);
        let mut ko = Odometer::new(&v.kshape, &v.kstride);
        for _ in 0..v.n_out {
            let base = ko.off as usize;
            let shift = if O::TWO_PASS {
                shift_of(red.fold::<C, Max>(xs, base, lo, C::ZERO))
            } else {
                C::ZERO
            };
            let acc = red.fold::<C, O>(xs, base, init, shift);
            out.push(O::fin(acc, v.r, shift));
            ko.step();
        }
    }
    out
}

/// The partials of a split reduction: for each output, `s` chunks of `chunk` reduced indices
/// folded with `O` (not finalized), output-major.
pub fn partials<C: Num, O: ROp<C>>(xs: &[C], v: &View, s: u64, chunk: u64, lo: C, hi: C) -> Vec<C> {
    let init = O::init(lo, hi);
    let mut out = Vec::with_capacity(v.n_out.saturating_mul(s) as usize);
    let mut ko = Odometer::new(&v.kshape, &v.kstride);
    for _ in 0..v.n_out {
        let base = ko.off as usize;
        for j in 0..s {
            let r0 = j.saturating_mul(chunk).min(v.r);
            let r1 = r0.saturating_add(chunk).min(v.r);
            out.push(fold_range::<C, O>(xs, base, v, r0, r1, init));
        }
        ko.step();
    }
    out
}

/// Folds reduced indices `r0..r1` of the output at `base` (no shift: never LogSumExp).
fn fold_range<C: Num, O: ROp<C>>(xs: &[C], base: usize, v: &View, r0: u64, r1: u64, init: C) -> C {
    if r1 <= r0 {
        return init;
    }
    let first = Odometer::at(&v.rshape, &v.rstride, r0).off;
    fold_range_at::<C, O>(&xs[base + first as usize..], first, v, r0, r1, init)
}

/// ArgMax/ArgMin over a view with one reduced axis (or none, when it has extent 1).
pub fn arg<C: Num>(xs: &[C], v: &View, is_max: bool, last: bool) -> Vec<i64> {
    let mut out = Vec::with_capacity(v.n_out as usize);
    let mut ko = Odometer::new(&v.kshape, &v.kstride);
    for _ in 0..v.n_out {
        out.push(arg_one(xs, ko.off as usize, v, is_max, last));
        ko.step();
    }
    out
}
