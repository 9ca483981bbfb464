//! The f32 pools' and convolutions' hot loops on four-lane vectors ([`umd_sdk::simd::F32x4`]),
//! each running many values per loop iteration so that the compiled loop's interruption check
//! (see [`umd_sdk::lanes`]) and its bookkeeping are paid rarely:
//! - the horizontal folds of whole pooling windows for the common geometries (3 wide stride 1,
//!   2 or 3 wide stride 2, no dilation), and one row combined into another;
//! - im2col's gather of every other input (stride-2 convs);
//! - the direct convolution of a plane with a 3×3 kernel (depthwise convs, 3×3 AveragePool),
//!   on a zero-bordered copy of the input plane the caller keeps.
//!
//! Every output is computed alone, with the same operations in the same order as the scalar
//! loops: the results are those of the scalar code, bit for bit (`max` keeps the first NaN
//! and the first of equal values; sums add in kernel order). Owns no state; reads and writes
//! only the slices it is given. The conv epilogue and Relu are [`umd_sdk::stages`].

use umd_sdk::simd::F32x4;

/// What a fold combines.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    /// NaN-aware maximum ([`F32x4::max_nan`]; `super::pool::MaxVal::max_nan` per element).
    Max,
    /// Sum.
    Add,
}

impl Op {
    #[inline(always)]
    fn lanes(self, acc: F32x4, v: F32x4) -> F32x4 {
        match self {
            Op::Max => acc.max_nan(v),
            Op::Add => acc + v,
        }
    }

    #[inline(always)]
    fn one(self, acc: f32, v: f32) -> f32 {
        match self {
            Op::Max => {
                if v > acc || (v.is_nan() && !acc.is_nan()) {
                    v
                } else {
                    acc
                }
            }
            Op::Add => acc + v,
        }
    }
}

/// Outputs per loop iteration of the window folds (two vectors).
const OUTS: usize = 8;

/// For as many leading outputs `o` of `out` as it can, in blocks of [`OUTS`] then one of four:
/// `out[o]` folded
/// with `row[at + o * s + t]` for `t` in `0..k` in that order, for `(k, s)` of `(3, 1)`,
/// `(2, 2)` or `(3, 2)` (dilation 1). Returns how many outputs it folded (0 for any other
/// window); the caller folds the rest. Reads only inside `row`.
#[inline(always)]
pub fn fold_windows(op: Op, out: &mut [f32], row: &[f32], at: usize, k: usize, s: usize) -> usize {
    // the furthest element a block of OUTS outputs loads (whole vectors, a few past its
    // windows), from the block's first input
    let reach = match (k, s) {
        (3, 1) => 12,
        (2, 2) => 16,
        (3, 2) => 20,
        _ => return 0,
    };
    let Some(avail) = row.len().checked_sub(at) else {
        return 0;
    };
    let blocks = (out.len() / OUTS).min(match avail.checked_sub(reach) {
        Some(spare) => spare / (OUTS * s) + 1,
        None => 0,
    });
    for b in 0..blocks {
        let p = at + b * OUTS * s;
        let o = &mut out[b * OUTS..][..OUTS];
        let src = &row[p..p + reach];
        let (mut lo, mut hi) = (F32x4::load(o), F32x4::load(&o[4..]));
        let v = |i: usize| F32x4::load(&src[4 * i..]);
        match (k, s) {
            (3, 1) => {
                let (a, b, c) = (v(0), v(1), v(2));
                for (x, y) in [
                    (a, b),
                    (a.shift1(b), b.shift1(c)),
                    (a.shift2(b), b.shift2(c)),
                ] {
                    lo = op.lanes(lo, x);
                    hi = op.lanes(hi, y);
                }
            }
            _ => {
                let (e0, o0) = v(0).deinterleave(v(1));
                let (e1, o1) = v(2).deinterleave(v(3));
                lo = op.lanes(op.lanes(lo, e0), o0);
                hi = op.lanes(op.lanes(hi, e1), o1);
                if k == 3 {
                    lo = op.lanes(lo, e0.shift1(e1));
                    hi = op.lanes(hi, e1.shift1(v(4)));
                }
            }
        }
        lo.store(o);
        hi.store(&mut o[4..]);
    }
    // then one block of four when it fits (a row's last few outputs)
    let (done, p) = (blocks * OUTS, at + blocks * OUTS * s);
    let half = match (k, s) {
        (3, 2) => 12,
        _ => 8,
    };
    if out.len() - done < 4 || row.len() < p + half {
        return done;
    }
    let o = &mut out[done..][..4];
    let src = &row[p..p + half];
    let v = |i: usize| F32x4::load(&src[4 * i..]);
    let mut lo = F32x4::load(o);
    if (k, s) == (3, 1) {
        let (a, b) = (v(0), v(1));
        lo = op.lanes(op.lanes(op.lanes(lo, a), a.shift1(b)), a.shift2(b));
    } else {
        let (e0, o0) = v(0).deinterleave(v(1));
        lo = op.lanes(op.lanes(lo, e0), o0);
        if k == 3 {
            lo = op.lanes(lo, e0.shift1(v(2)));
        }
    }
    lo.store(o);
    done + 4
}

/// `out[i]` combined with `r[i]` for every element of `out` (`r` at least as long).
///
/// # Panics
/// When `r` is shorter than `out`.
#[inline(always)]
pub fn combine(op: Op, out: &mut [f32], r: &[f32]) {
    let r = &r[..out.len()];
    let mut oc = out.chunks_exact_mut(16);
    let mut rc = r.chunks_exact(16);
    for (o, x) in (&mut oc).zip(&mut rc) {
        for q in 0..4 {
            op.lanes(F32x4::load(&o[4 * q..]), F32x4::load(&x[4 * q..]))
                .store(&mut o[4 * q..]);
        }
    }
    // then four at a time, then one
    let mut oc = oc.into_remainder().chunks_exact_mut(4);
    let mut rc = rc.remainder().chunks_exact(4);
    for (o, x) in (&mut oc).zip(&mut rc) {
        op.lanes(F32x4::load(o), F32x4::load(x)).store(o);
    }
    for (o, &x) in oc.into_remainder().iter_mut().zip(rc.remainder()) {
        *o = op.one(*o, x);
    }
}

/// `dst[t] = src[2 t]` for every element of `dst` (`src` holds at least `2 dst.len() - 1`
/// elements): every other input, as im2col takes a stride-2 conv's inputs.
///
/// # Panics
/// When `src` is shorter than that.
#[inline(always)]
pub fn every_other(dst: &mut [f32], src: &[f32]) {
    if dst.is_empty() {
        return;
    }
    assert!(
        src.len() >= 2 * dst.len() - 1,
        "every_other: too few inputs"
    );
    // 16 outputs per iteration while their 32 inputs lie inside `src`, then 4, then 1
    let mut t = 0;
    while t + 16 <= dst.len() && 2 * t + 32 <= src.len() {
        let (s, d) = (&src[2 * t..][..32], &mut dst[t..][..16]);
        for q in 0..4 {
            let (even, _) = F32x4::load(&s[8 * q..]).deinterleave(F32x4::load(&s[8 * q + 4..]));
            even.store(&mut d[4 * q..]);
        }
        t += 16;
    }
    while t + 4 <= dst.len() && 2 * t + 8 <= src.len() {
        let (even, _) = F32x4::load(&src[2 * t..]).deinterleave(F32x4::load(&src[2 * t + 4..]));
        even.store(&mut dst[t..]);
        t += 4;
    }
    for (o, &v) in dst[t..].iter_mut().zip(src[2 * t..].iter().step_by(2)) {
        *o = v;
    }
}

/// The geometry of [`plane3x3`]: output and input planes (rows, columns), the stride along
/// both axes and the leading pads (top, left).
#[derive(Clone, Copy, Debug)]
pub struct Plane3 {
    pub out: (usize, usize),
    pub inp: (usize, usize),
    pub s: usize,
    pub pads: (usize, usize),
}

/// The direct convolution of one input plane with one 3×3 kernel (2-D, dilation 1, stride
/// `s` of 1 or 2 along both axes, `pads` = (top, left)), added to the `oh × ow` output plane
/// `y`: `y[oy][ox] += w[ky][kx] * x[oy·s - top + ky][ox·s - left + kx]` over `(ky, kx)` in
/// order. The input is first copied into `pad` with its zero border, so every output row is
/// one run of four-lane products (no edges, no call per row); a border tap adds `w · 0`, which
/// leaves every sum as skipping it does as long as the weights are finite — the caller's to
/// check (an infinite weight times a border zero would be NaN). `self + w · x` per tap, as the
/// scalar loop: the same bits.
///
/// # Panics
/// When `y` or `x` is smaller than its plane.
#[inline(never)]
pub fn plane3x3(y: &mut [f32], x: &[f32], w: &[f32; 9], p: Plane3, pad: &mut Vec<f32>) {
    let Plane3 {
        out: (oh, ow),
        inp: (ih, iw),
        s,
        pads: (top, left),
    } = p;
    debug_assert!(s == 1 || s == 2);
    if oh == 0 || ow == 0 {
        return;
    }
    let (y, x) = (&mut y[..oh * ow], &x[..ih * iw]);
    // the padded plane: rows (oh-1)·s + 3, and columns for whole blocks of four outputs and
    // their vector loads (12 inputs per block at stride 2, 8 at stride 1)
    let blocks = ow.div_ceil(4);
    let (ph, pw) = ((oh - 1) * s + 3, (blocks - 1) * 4 * s + 4 * s + 4);
    pad.clear();
    pad.resize(ph * pw, 0.0);
    // (a left pad wider than the padded row leaves it all border: nothing to copy)
    let cols = iw.min(pw.saturating_sub(left));
    for r in 0..ph.min(ih + top).saturating_sub(top) {
        if cols > 0 {
            pad[(r + top) * pw + left..][..cols].copy_from_slice(&x[r * iw..][..cols]);
        }
    }
    let ws = w.map(F32x4::splat);
    let mut tail = [0f32; 4];
    for (oy, yr) in y.chunks_exact_mut(ow).enumerate() {
        let rows: [&[f32]; 3] = std::array::from_fn(|ky| &pad[(oy * s + ky) * pw..][..pw]);
        for b in 0..blocks {
            let o = 4 * b;
            let whole = o + 4 <= ow;
            let mut acc = if whole {
                F32x4::load(&yr[o..])
            } else {
                tail[..ow - o].copy_from_slice(&yr[o..]);
                F32x4::load(&tail)
            };
            for (ky, r) in rows.iter().enumerate() {
                let v = |i: usize| F32x4::load(&r[o * s + 4 * i..]);
                let (t0, t1, t2) = if s == 1 {
                    let (a, b) = (v(0), v(1));
                    (a, a.shift1(b), a.shift2(b))
                } else {
                    let (e, od) = v(0).deinterleave(v(1));
                    (e, od, e.shift1(v(2)))
                };
                acc = acc
                    .madd(ws[3 * ky], t0)
                    .madd(ws[3 * ky + 1], t1)
                    .madd(ws[3 * ky + 2], t2);
            }
            if whole {
                acc.store(&mut yr[o..]);
            } else {
                acc.store(&mut tail);
                yr[o..].copy_from_slice(&tail[..ow - o]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use umd_sdk::testing::awkward_f32s as row;

    #[test]
    fn window_folds_equal_the_scalar_fold_bit_for_bit() {
        for (k, s) in [(3, 1), (2, 2), (3, 2), (4, 2)] {
            for n in [0, 1, 7, 8, 9, 17, 40] {
                for at in [0, 1, 3] {
                    for op in [Op::Max, Op::Add] {
                        let r = row(at + n * s + k + 5);
                        let mut fast: Vec<f32> = (0..n).map(|i| i as f32 - 20.0).collect();
                        let mut slow = fast.clone();
                        let done = fold_windows(op, &mut fast, &r, at, k, s);
                        assert!(done <= n && done.is_multiple_of(4));
                        if (k, s) != (4, 2) && at + n * s + k + 5 >= at + (n / 4 * 4) * s + 20 {
                            assert!(n - done < 4, "{k} {s} {n}: only {done} on the fast path");
                        }
                        if (k, s) == (4, 2) {
                            assert_eq!(done, 0, "an unserved window is left to the caller");
                        }
                        for (o, v) in slow.iter_mut().enumerate() {
                            for t in 0..k {
                                *v = op.one(*v, r[at + o * s + t]);
                            }
                        }
                        for o in 0..done {
                            assert_eq!(
                                fast[o].to_bits(),
                                slow[o].to_bits(),
                                "{k} {s} {n} {at} {op:?} {o}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn window_folds_never_read_past_the_row() {
        // the row ends right after the last window: blocks that would load past it are left
        let (k, s) = (3, 2);
        for n in 0..30 {
            let r = row(n * s + 1);
            let mut out = vec![f32::NEG_INFINITY; n];
            let done = fold_windows(Op::Max, &mut out, &r, 0, k, s);
            // the last block loaded up to 20 (eight outputs) or 12 (four) elements from its
            // first input
            let last = if done % OUTS == 4 {
                (done - 4) * s + 12
            } else {
                done.saturating_sub(OUTS) * s + 20
            };
            assert!(done == 0 || last <= r.len(), "{n}: {done}");
        }
    }

    #[test]
    fn every_other_takes_the_even_inputs_of_any_length() {
        for n in 0..70 {
            for extra in [0, 1, 5] {
                let src = row((2 * n).max(1) - 1 + extra);
                let mut dst = vec![7.0f32; n];
                every_other(&mut dst, &src);
                let want: Vec<u32> = (0..n).map(|t| src[2 * t].to_bits()).collect();
                assert_eq!(
                    dst.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want,
                    "{n}"
                );
            }
        }
    }

    #[test]
    fn plane3x3_equals_the_tap_by_tap_loop_bit_for_bit() {
        let w = [0.5f32, -1.25, 3.0, 0.0, -0.0, 2.5, 1.0, -7.0, 0.125];
        for s in [1usize, 2] {
            for (ih, iw) in [
                (1usize, 1usize),
                (3, 3),
                (5, 7),
                (7, 7),
                (14, 14),
                (6, 13),
                (2, 30),
            ] {
                // leading pads, and end pads beyond them (a ceil_mode's or an asymmetric
                // pad's windows past the input)
                for (top, left, more) in [(0usize, 0usize, 0usize), (1, 1, 0), (2, 1, 1), (0, 2, 3)]
                {
                    let oh = (ih + 2 * top + more).saturating_sub(3) / s + 1;
                    let ow = (iw + 2 * left + more).saturating_sub(3) / s + 1;
                    if ih + 2 * top + more < 3 || iw + 2 * left + more < 3 {
                        continue;
                    }
                    // infinities at the borders too: a border tap must add nothing
                    let mut x = row(ih * iw);
                    if let [first, .., last] = &mut x[..] {
                        (*first, *last) = (f32::INFINITY, f32::NEG_INFINITY);
                    }
                    // outputs from +0 (as the callers zero them), and from other values
                    let mut fast: Vec<f32> = (0..oh * ow)
                        .map(|o| {
                            if o % 3 == 0 {
                                0.0
                            } else {
                                o as f32 * 0.1 - 1.0
                            }
                        })
                        .collect();
                    let mut slow = fast.clone();
                    let p = Plane3 {
                        out: (oh, ow),
                        inp: (ih, iw),
                        s,
                        pads: (top, left),
                    };
                    plane3x3(&mut fast, &x, &w, p, &mut Vec::new());
                    for (ky, kx) in (0..3).flat_map(|ky| (0..3).map(move |kx| (ky, kx))) {
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let iy = (oy * s + ky) as i64 - top as i64;
                                let ix = (ox * s + kx) as i64 - left as i64;
                                if (0..ih as i64).contains(&iy) && (0..iw as i64).contains(&ix) {
                                    slow[oy * ow + ox] +=
                                        w[3 * ky + kx] * x[iy as usize * iw + ix as usize];
                                }
                            }
                        }
                    }
                    // bits, but any NaN as one: which operand's payload a sum of two NaNs
                    // carries is the compiler's choice (it may swap the operands of `+`)
                    let bits = |v: &[f32]| {
                        v.iter()
                            .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(
                        bits(&fast),
                        bits(&slow),
                        "s {s} {ih}x{iw} pads {top},{left}"
                    );
                }
            }
        }
    }

    #[test]
    fn combine_matches_its_scalar_loop() {
        for n in [0, 5, 16, 27, 33] {
            for op in [Op::Max, Op::Add] {
                let (mut a, b) = (row(n), row(n + 7)[7..].to_vec());
                let want: Vec<u32> = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| op.one(x, y).to_bits())
                    .collect();
                combine(op, &mut a, &b);
                assert_eq!(
                    a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want,
                    "{n} {op:?}"
                );
            }
        }
    }
}
