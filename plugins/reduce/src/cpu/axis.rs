//! CPU kernels of the ops along one axis, seen as `(outer, R, inner)`: CumSum (accumulating in
//! the compute type, like the CUDA kernel, row by row so the inner loop is contiguous) and TopK
//! (a per-line selection then sort, under the same total order as the CUDA kernel).

use std::cmp::Ordering;

use super::num::Num;

/// CumSum (or CumProd when `prod`) of `xs` (`outer × r × inner` elements) along the middle axis.
pub fn cumsum<C: Num>(
    xs: &[C],
    outer: usize,
    r: usize,
    inner: usize,
    (exclusive, reverse, prod): (bool, bool, bool),
) -> Vec<C> {
    if prod {
        scan(xs, outer, r, inner, exclusive, reverse, C::ONE, C::mul)
    } else {
        scan(xs, outer, r, inner, exclusive, reverse, C::ZERO, C::add)
    }
}

/// An inclusive or exclusive scan with `op` (identity `id`), one monomorphic loop per op.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn scan<C: Num>(
    xs: &[C],
    outer: usize,
    r: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
    id: C,
    op: impl Fn(C, C) -> C + Copy,
) -> Vec<C> {
    let mut ys = vec![id; xs.len()];
    if inner == 1 {
        for (x, y) in xs.chunks_exact(r.max(1)).zip(ys.chunks_exact_mut(r.max(1))) {
            let mut acc = id;
            let mut step = |x: &C, y: &mut C| {
                if exclusive {
                    *y = acc;
                    acc = op(acc, *x);
                } else {
                    acc = op(acc, *x);
                    *y = acc;
                }
            };
            if reverse {
                x.iter()
                    .rev()
                    .zip(y.iter_mut().rev())
                    .for_each(|(x, y)| step(x, y));
            } else {
                x.iter().zip(y.iter_mut()).for_each(|(x, y)| step(x, y));
            }
        }
        return ys;
    }
    let mut acc = vec![id; inner];
    for o in 0..outer {
        acc.fill(id);
        for t in 0..r {
            let j = if reverse { r - 1 - t } else { t };
            let off = (o * r + j) * inner;
            let (x, y) = (&xs[off..off + inner], &mut ys[off..off + inner]);
            for ((a, x), y) in acc.iter_mut().zip(x).zip(y) {
                if exclusive {
                    *y = *a;
                    *a = op(*a, *x);
                } else {
                    *a = op(*a, *x);
                    *y = *a;
                }
            }
        }
    }
    ys
}

/// Whether `(av, ai)` comes before `(bv, bi)` in TopK's output: NaN counts as the largest
/// value, then larger (or smaller) values first, then lower indices first. The CPU twin of the
/// CUDA `umd_topk_before`.
#[inline(always)]
pub fn topk_before<C: Num>(av: C, ai: u64, bv: C, bi: u64, largest: bool) -> bool {
    let (an, bn) = (av.is_nan(), bv.is_nan());
    if an != bn {
        return if largest { an } else { bn };
    }
    if !an && av != bv {
        return if largest { av > bv } else { av < bv };
    }
    ai < bi
}

/// TopK of `xs` (`outer × r × inner`) along the middle axis: `k` values and their indices per
/// line, in order.
pub fn topk<C: Num>(
    xs: &[C],
    outer: usize,
    r: usize,
    inner: usize,
    k: usize,
    largest: bool,
) -> (Vec<C>, Vec<i64>) {
    let n = outer * k * inner;
    let (mut vals, mut idx) = (vec![C::ZERO; n], vec![0i64; n]);
    if k == 0 {
        return (vals, idx);
    }
    let cmp = |a: &(C, u64), b: &(C, u64)| {
        if topk_before(a.0, a.1, b.0, b.1, largest) {
            Ordering::Less
        } else if topk_before(b.0, b.1, a.0, a.1, largest) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    };
    let mut line: Vec<(C, u64)> = Vec::with_capacity(r);
    for o in 0..outer {
        for i in 0..inner {
            line.clear();
            let base = o * r * inner + i;
            line.extend((0..r).map(|j| (xs[base + j * inner], j as u64)));
            if k < r {
                line.select_nth_unstable_by(k - 1, cmp);
            }
            line[..k].sort_unstable_by(cmp);
            let obase = o * k * inner + i;
            for (j, (v, at)) in line[..k].iter().enumerate() {
                vals[obase + j * inner] = *v;
                idx[obase + j * inner] = *at as i64;
            }
        }
    }
    (vals, idx)
}
