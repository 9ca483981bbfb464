//! CPU pooling: MaxPool, AveragePool and LpPool row by row (each output row gathers the
//! in-bounds input rows of its windows in turn), and
//! MaxPool with Indices one window per output element; both visit only the windows' in-bounds
//! positions, in the kernel's order (the same arithmetic as the CUDA kernels).

use super::lanes4;
use super::real::{Plane3, Real};
use crate::geom::{FLAG_COL_MAJOR, FLAG_COUNT_PAD, Geom, valid_range};

/// What MaxPool compares: NaN-aware ordering and the value of an empty window.
pub trait MaxVal: Copy + PartialOrd {
    const LOWEST: Self;
    fn is_nan(self) -> bool;
    /// `v` when it is greater than `best`, or the first NaN, else `best` (without a branch):
    /// the window's first NaN wins, as in [`max_indexed`] and the CUDA kernel.
    #[inline(always)]
    fn max_nan(best: Self, v: Self) -> Self {
        let take = (v > best) | (v.is_nan() & !best.is_nan());
        [best, v][take as usize]
    }
    /// [`RowWindows::fold_fast`]'s fast path for whole windows of `k` wide, stride `s`: how
    /// many leading outputs it folded (none by default).
    #[inline(always)]
    fn max_windows(_out: &mut [Self], _row: &[Self], _at: usize, _k: usize, _s: usize) -> usize {
        0
    }
    /// `out[i] = max_nan(out[i], r[i])` for every element of `out`.
    #[inline(always)]
    fn max_into(out: &mut [Self], r: &[Self]) {
        out.iter_mut()
            .zip(r)
            .for_each(|(o, &v)| *o = Self::max_nan(*o, v));
    }
}

macro_rules! max_val {
    ($t:ty, $lowest:expr, $nan:expr) => {
        impl MaxVal for $t {
            const LOWEST: $t = $lowest;
            #[inline(always)]
            fn is_nan(self) -> bool {
                $nan(self)
            }
        }
    };
}
impl MaxVal for f32 {
    const LOWEST: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    #[inline(always)]
    fn max_windows(out: &mut [f32], row: &[f32], at: usize, k: usize, s: usize) -> usize {
        lanes4::fold_windows(lanes4::Op::Max, out, row, at, k, s)
    }
    #[inline(always)]
    fn max_into(out: &mut [f32], r: &[f32]) {
        lanes4::combine(lanes4::Op::Max, out, r)
    }
}
max_val!(f64, f64::NEG_INFINITY, f64::is_nan);
max_val!(i8, i8::MIN, |_| false);
max_val!(u8, 0, |_| false);

/// Visits every output position of every (image, channel) plane with the in-bounds window
/// ranges: `f(plane, out_index, base, ranges)` where `base[d] = o[d]*s[d] - pb[d]` and
/// `ranges[d]` are the kernel offsets `k` with `0 <= base[d] + k*d[d] < in[d]`. The bases and
/// ranges depend on one axis each: computed once per axis position (a division each), not per
/// output.
fn each_window(g: &Geom, mut f: impl FnMut(usize, usize, [i64; 3], [(i64, i64); 3])) {
    let axis = |d: usize| -> Vec<(i64, (i64, i64))> {
        (0..g.out[d])
            .map(|o| {
                let b = o * g.s[d] - g.pb[d];
                (b, valid_range(b, g.d[d], g.k[d], g.inp[d]))
            })
            .collect()
    };
    let (zs, ys, xs) = (axis(0), axis(1), axis(2));
    let planes = (g.n * g.c) as usize;
    let mut o = 0usize;
    for plane in 0..planes {
        for &(bz, rz) in &zs {
            for &(by, ry) in &ys {
                for &(bx, rx) in &xs {
                    f(plane, o, [bz, by, bx], [rz, ry, rx]);
                    o += 1;
                }
            }
        }
    }
}

/// MaxPool with Indices: writes the maxima to `y` and their flat input indices to `idx`
/// (row-major, or column-major over the spatial axes with `storage_order = 1`). NaN wins.
pub fn max_indexed<V: MaxVal>(g: &Geom, x: &[V], mut y: impl FnMut(usize, V), idx: &mut [i64]) {
    let in_sz = g.in_size() as usize;
    let col_major = g.flags & FLAG_COL_MAJOR != 0;
    each_window(g, |plane, o, b, r| {
        let xp = &x[plane * in_sz..][..in_sz];
        let mut best = V::LOWEST;
        let mut arg: Option<[i64; 3]> = None;
        for kz in r[0].0..r[0].1 {
            let iz = b[0] + kz * g.d[0];
            for ky in r[1].0..r[1].1 {
                let iy = b[1] + ky * g.d[1];
                let row = (iz * g.inp[1] + iy) * g.inp[2];
                for kx in r[2].0..r[2].1 {
                    let ix = b[2] + kx * g.d[2];
                    let v = xp[(row + ix) as usize];
                    if arg.is_none() || v > best || (v.is_nan() && !best.is_nan()) {
                        best = v;
                        arg = Some([iz, iy, ix]);
                    }
                }
            }
        }
        y(o, best);
        idx[o] = match arg {
            None => -1,
            Some([iz, iy, ix]) => {
                let within = if col_major {
                    iz + g.inp[0] * (iy + g.inp[1] * ix)
                } else {
                    (iz * g.inp[1] + iy) * g.inp[2] + ix
                };
                (plane * in_sz) as i64 + within
            }
        };
    });
}

/// The windows of one output row along the last axis: for every output position its first
/// in-bounds input position and how many of its kernel offsets lie inside the row, and the
/// range of positions whose windows are whole (folded with the kernel width as a constant:
/// a loop of unknown trip count per output costs several times more).
struct RowWindows {
    wins: Vec<(usize, usize)>,
    whole: std::ops::Range<usize>,
    k: usize,
    s: usize,
    d: usize,
}

impl RowWindows {
    fn new(g: &Geom) -> Self {
        let wins: Vec<(usize, usize)> = (0..g.out[2])
            .map(|ox| {
                let b = ox * g.s[2] - g.pb[2];
                let (lo, hi) = valid_range(b, g.d[2], g.k[2], g.inp[2]);
                if lo < hi {
                    ((b + lo * g.d[2]) as usize, (hi - lo) as usize)
                } else {
                    (0, 0)
                }
            })
            .collect();
        let k = g.k[2] as usize;
        // windows are whole on one contiguous range of positions
        let lo = wins.iter().position(|w| w.1 == k).unwrap_or(0);
        let hi = wins.iter().rposition(|w| w.1 == k).map_or(0, |i| i + 1);
        RowWindows {
            whole: lo..hi.max(lo),
            wins,
            k,
            s: g.s[2] as usize,
            d: g.d[2] as usize,
        }
    }

    /// `out[ox] = f(… f(f(out[ox], x₀), x₁) …)` over the in-bounds inputs of `row` in the
    /// window of every output position `ox`, in kernel order.
    #[inline(always)]
    fn fold<V: Copy>(&self, out: &mut [V], row: &[V], f: impl Fn(V, V) -> V + Copy) {
        self.fold_fast(out, row, f, |_, _, _, _, _| 0)
    }

    /// [`RowWindows::fold`], whose whole windows (dilation 1) go first to `fast(outputs, row,
    /// first input, kernel width, stride)`, which folds as many leading outputs as it can and
    /// says how many: the same values, faster for some types and windows. Not inlined: the
    /// compiled loops of a function as large as its caller would keep their values on the
    /// stack.
    #[inline(never)]
    fn fold_fast<V: Copy>(
        &self,
        out: &mut [V],
        row: &[V],
        f: impl Fn(V, V) -> V + Copy,
        fast: impl Fn(&mut [V], &[V], usize, usize, usize) -> usize,
    ) {
        let edge = |out: &mut [V], wins: &[(usize, usize)]| {
            for (o, &(at, n)) in out.iter_mut().zip(wins) {
                let mut acc = *o;
                for t in 0..n {
                    acc = f(acc, row[at + t * self.d]);
                }
                *o = acc;
            }
        };
        let w = self.whole.clone();
        edge(&mut out[..w.start], &self.wins[..w.start]);
        edge(&mut out[w.end..], &self.wins[w.end..]);
        if w.is_empty() {
            return;
        }
        let (mid, at, s) = (&mut out[w.clone()], self.wins[w.start].0, self.s);
        let done = if self.d == 1 {
            fast(mid, row, at, self.k, s)
        } else {
            0
        };
        let (mid, at, w) = (&mut mid[done..], at + done * s, w.start + done..w.end);
        // the common cases with constant strides: dilation 1, stride 1 or 2
        match (self.k, self.d, s) {
            (2, 1, 2) => whole::<V, 2>(mid, row, at, 2, 1, f),
            (3, 1, 1) => whole::<V, 3>(mid, row, at, 1, 1, f),
            (3, 1, 2) => whole::<V, 3>(mid, row, at, 2, 1, f),
            (1, _, _) => whole::<V, 1>(mid, row, at, s, self.d, f),
            (2, _, _) => whole::<V, 2>(mid, row, at, s, self.d, f),
            (3, _, _) => whole::<V, 3>(mid, row, at, s, self.d, f),
            (4, _, _) => whole::<V, 4>(mid, row, at, s, self.d, f),
            (5, _, _) => whole::<V, 5>(mid, row, at, s, self.d, f),
            (7, _, _) => whole::<V, 7>(mid, row, at, s, self.d, f),
            _ => edge(mid, &self.wins[w]),
        }
    }
}

/// [`RowWindows::fold`] over whole windows of `K` offsets, the first starting at `at`: eight
/// outputs at a time, their folds interleaved (independent chains the CPU overlaps, each in
/// kernel order).
#[inline(always)]
fn whole<V: Copy, const K: usize>(
    out: &mut [V],
    row: &[V],
    at: usize,
    s: usize,
    d: usize,
    f: impl Fn(V, V) -> V,
) {
    const LANES: usize = 8;
    let mut blocks = out.chunks_exact_mut(LANES);
    let mut first = at;
    for o in &mut blocks {
        let mut acc: [V; LANES] = o.try_into().expect("a block of LANES");
        let src = &row[first..][..(LANES - 1) * s + (K - 1) * d + 1];
        for t in 0..K {
            for (j, a) in acc.iter_mut().enumerate() {
                *a = f(*a, src[j * s + t * d]);
            }
        }
        o.copy_from_slice(&acc);
        first += LANES * s;
    }
    for (i, o) in blocks.into_remainder().iter_mut().enumerate() {
        let at = first + i * s;
        let mut acc = *o;
        for t in 0..K {
            acc = f(acc, row[at + t * d]);
        }
        *o = acc;
    }
}

/// For every output row `(plane, oz, oy)` of `y` (whole output planes of `x`'s planes):
/// fills it with `init`, then calls `f(output row, input row)` for every in-bounds input row
/// `(iz, iy)` of its window, in the kernel's `(kz, ky)` order.
fn each_row_pair<V: Copy>(
    g: &Geom,
    x: &[V],
    y: &mut [V],
    init: V,
    mut f: impl FnMut(&mut [V], &[V]),
) {
    let (ow, iw) = (g.out[2] as usize, g.inp[2] as usize);
    let (ih, id) = (g.inp[1] as usize, g.inp[0] as usize);
    let planes = (g.n * g.c) as usize;
    if ow == 0 || g.out[1] == 0 || g.out[0] == 0 {
        return;
    }
    let mut rows = y.chunks_exact_mut(ow);
    for plane in 0..planes {
        for oz in 0..g.out[0] {
            let bz = oz * g.s[0] - g.pb[0];
            let rz = valid_range(bz, g.d[0], g.k[0], g.inp[0]);
            for oy in 0..g.out[1] {
                let by = oy * g.s[1] - g.pb[1];
                let ry = valid_range(by, g.d[1], g.k[1], g.inp[1]);
                let out = rows.next().expect("one output row per (plane, oz, oy)");
                out.fill(init);
                for kz in rz.0..rz.1 {
                    let iz = (bz + kz * g.d[0]) as usize;
                    for ky in ry.0..ry.1 {
                        let iy = (by + ky * g.d[1]) as usize;
                        f(out, &x[((plane * id + iz) * ih + iy) * iw..][..iw]);
                    }
                }
            }
        }
    }
}

/// Whether every output plane is one window over its whole input plane (the global pools, or
/// a pool whose kernel is the input's extent): no padding, no dilation.
fn global(g: &Geom) -> bool {
    g.out == [1; 3] && g.k == g.inp && g.pb == [0; 3] && g.d == [1; 3]
}

/// For a [`global`] geometry: `y[plane]` folds `f` over the plane's inputs from `init`, in
/// row-major order — the order (and so the values) of the row-by-row path, without its calls
/// per input row.
fn each_plane<V: Copy>(g: &Geom, x: &[V], y: &mut [V], init: V, f: impl Fn(V, V) -> V) {
    let in_sz = g.in_size() as usize;
    if in_sz == 0 {
        return y.fill(init);
    }
    for (o, plane) in y.iter_mut().zip(x.chunks_exact(in_sz)) {
        *o = plane.iter().fold(init, |acc, &v| f(acc, v));
    }
}

/// MaxPool without indices, row by row: every output row takes the maximum over the
/// in-bounds input rows of its window (the same values as [`max_indexed`], compared in the
/// same order, without a call per window). NaN wins.
pub fn max_rows<V: MaxVal>(g: &Geom, x: &[V], y: &mut [V]) {
    if global(g) {
        return each_plane(g, x, y, V::LOWEST, V::max_nan);
    }
    if separable(g) {
        return max_separable(g, x, y);
    }
    let wins = RowWindows::new(g);
    each_row_pair(g, x, y, V::LOWEST, |out, row| {
        wins.fold_fast(out, row, V::max_nan, V::max_windows)
    });
}

/// [`max_rows`] of a 1-D or 2-D pool in two passes per plane: every input row's maxima over
/// the windows' columns (one fold per input row, where row by row folds each input row once
/// per output row reading it), then every output row the maximum of its window's rows of
/// those, whole rows at a time (vectorized). The same values, bit for bit: each pass keeps the
/// first of equal values and the first NaN, so the result is the window's first maximum (or
/// first NaN) in kernel order, as row by row.
///
/// Taken for 1-D and 2-D pools with non-empty input planes whose per-plane scratch of column
/// maxima (input rows × output width) is no larger than twice the input and output planes
/// together (huge paddings or strides would make it so; those stay row by row).
fn separable(g: &Geom) -> bool {
    let (ih, iw) = (g.inp[1] as u64, g.inp[2] as u64);
    let (oh, ow) = (g.out[1] as u64, g.out[2] as u64);
    let planes = ih.saturating_mul(iw).saturating_add(oh.saturating_mul(ow));
    g.inp[0] == 1
        && g.out[0] == 1
        && g.k[0] == 1
        && g.pb[0] == 0
        && ih > 0
        && iw > 0
        && ih.saturating_mul(ow) <= planes.saturating_mul(2)
}

fn max_separable<V: MaxVal>(g: &Geom, x: &[V], y: &mut [V]) {
    let (ih, iw) = (g.inp[1] as usize, g.inp[2] as usize);
    let (oh, ow) = (g.out[1] as usize, g.out[2] as usize);
    if oh == 0 || ow == 0 {
        return;
    }
    let wins = RowWindows::new(g);
    let mut rows = vec![V::LOWEST; ih * ow];
    for (xp, yp) in x.chunks_exact(ih * iw).zip(y.chunks_exact_mut(oh * ow)) {
        fill(&mut rows, V::LOWEST);
        for (r, xr) in rows.chunks_exact_mut(ow).zip(xp.chunks_exact(iw)) {
            wins.fold_fast(r, xr, V::max_nan, V::max_windows);
        }
        columns_max(g, &rows, yp);
    }
}

/// `v[i] = x` for every element, 16 per loop iteration, in its own function (as
/// [`columns_max`]).
#[inline(never)]
fn fill<V: Copy>(v: &mut [V], x: V) {
    umd_sdk::lanes::map(v, |_| x)
}

/// [`max_separable`]'s second pass over one plane: every output row of `yp` the element-wise
/// maximum of its window's rows of `rows` (the column maxima, `ow` per input row), in kernel
/// order, the first NaN winning; an empty window's row the empty window's value. Its own
/// function, as [`RowWindows::fold_fast`]: a loop compiled inside a large function keeps its
/// values on the stack.
#[inline(never)]
fn columns_max<V: MaxVal>(g: &Geom, rows: &[V], yp: &mut [V]) {
    let ow = g.out[2] as usize;
    for (oy, out) in yp.chunks_exact_mut(ow).enumerate() {
        let by = oy as i64 * g.s[1] - g.pb[1];
        let (lo, hi) = valid_range(by, g.d[1], g.k[1], g.inp[1]);
        let mut iys = (lo..hi).map(|ky| (by + ky * g.d[1]) as usize * ow);
        // the first row as it is (`max_nan(LOWEST, v)` is `v`, bit for bit), copied in a loop:
        // a `memory.copy` of a short row costs a call into the engine
        match iys.next() {
            Some(at) => umd_sdk::lanes::zip(out, &rows[at..], |_, v| v),
            None => out.fill(V::LOWEST),
        }
        for at in iys {
            V::max_into(out, &rows[at..][..ow]);
        }
    }
}

/// Whether `g` is a 2-D 3×3 window, stride 1 or 2 on both axes, no dilation
/// ([`Real::plane3x3`]'s geometry).
pub fn plane3(g: &Geom) -> bool {
    g.k == [1, 3, 3]
        && g.inp[0] == 1
        && g.out[0] == 1
        && g.pb[0] == 0
        && g.d == [1; 3]
        && g.s[1] == g.s[2]
        && matches!(g.s[2], 1 | 2)
        && g.pb[1] >= 0
        && g.pb[2] >= 0
}

/// The [`Plane3`] of a [`plane3`] geometry.
pub fn plane3_geometry(g: &Geom) -> Plane3 {
    let u = |v: i64| v as usize;
    Plane3 {
        out: (u(g.out[1]), u(g.out[2])),
        inp: (u(g.inp[1]), u(g.inp[2])),
        s: u(g.s[2]),
        pads: (u(g.pb[1]), u(g.pb[2])),
    }
}

/// AveragePool (`lp = None`) or LpPool (`lp = Some(p)`), row by row: the window's in-bounds
/// sum (each output's terms added in the kernel's order), divided by the in-bounds count (or,
/// with `count_include_pad`, by the count of positions inside the padded input), or raised
/// to `1/p`. `y` holds whole output planes, zeroed (+0: the 3×3 path adds into it).
pub fn sum<A: Real>(g: &Geom, x: &[A], lp: Option<A>, y: &mut [A]) {
    let (one, two) = (A::ONE, A::ONE + A::ONE);
    match lp {
        None if plane3(g) && {
            // a 3×3 window's sum is its nine inputs times one, added in kernel order from
            // zero — the direct 3×3 convolution with unit weights, bit for bit (a border zero
            // added to a sum that started at +0 leaves it as skipping the tap does); taken
            // where the type has that kernel
            let (in_sz, out_sz) = (g.in_size() as usize, g.out_size() as usize);
            let (ones, p) = ([A::ONE; 9], plane3_geometry(g));
            in_sz > 0
                && out_sz > 0
                && x.chunks_exact(in_sz)
                    .zip(y.chunks_exact_mut(out_sz))
                    .all(|(xp, yp)| A::plane3x3(yp, xp, &ones, p))
        } => {}
        None if !global(g) => {
            // AveragePool's terms are the inputs: whole windows on the fast path
            let wins = RowWindows::new(g);
            each_row_pair(g, x, y, A::ZERO, |out, row| {
                wins.fold_fast(out, row, |acc, v| acc + v, A::sum_windows)
            });
        }
        None => sum_rows(g, x, y, |v| v),
        Some(p) if p == one => sum_rows(g, x, y, |v| v.abs()),
        Some(p) if p == two => sum_rows(g, x, y, |v| v * v),
        Some(p) => sum_rows(g, x, y, |v| v.abs().powf(p)),
    }
    let (oh, ow) = (g.out[1] as usize, g.out[2] as usize);
    if ow == 0 || oh == 0 {
        return;
    }
    match lp {
        Some(p) if p == one => {}
        Some(p) if p == two => y.iter_mut().for_each(|v| *v = v.sqrt()),
        Some(p) => y.iter_mut().for_each(|v| *v = v.powf(one / p)),
        None => {
            // the count of each output is a product of one count per axis
            let count_pad = g.flags & FLAG_COUNT_PAD != 0;
            let axis = |d: usize| -> Vec<i64> {
                (0..g.out[d])
                    .map(|o| {
                        let (lo, hi) = if count_pad {
                            let padded = g.inp[d] + g.pb[d] + g.pe[d];
                            valid_range(o * g.s[d], g.d[d], g.k[d], padded)
                        } else {
                            valid_range(o * g.s[d] - g.pb[d], g.d[d], g.k[d], g.inp[d])
                        };
                        hi - lo
                    })
                    .collect()
            };
            let (cz, cy, cx) = (axis(0), axis(1), axis(2));
            let rows_per_plane = g.out[0] as usize * oh;
            let mut den = vec![A::ONE; ow];
            let mut den_of = None;
            for (r, row) in y.chunks_exact_mut(ow).enumerate() {
                let r = r % rows_per_plane;
                let zy = cz[r / oh] * cy[r % oh];
                if den_of != Some(zy) {
                    for (d, &c) in den.iter_mut().zip(&cx) {
                        *d = A::from_f64((zy * c) as f64);
                    }
                    den_of = Some(zy);
                }
                umd_sdk::lanes::zip(row, &den, |v, d| v / d);
            }
        }
    }
}

/// `y` (whole output planes) gets the in-bounds window sums of `term(x)`.
#[inline(always)]
fn sum_rows<A: Real>(g: &Geom, x: &[A], y: &mut [A], term: impl Fn(A) -> A + Copy) {
    if global(g) {
        return each_plane(g, x, y, A::ZERO, |acc, v| acc + term(v));
    }
    let wins = RowWindows::new(g);
    each_row_pair(g, x, y, A::ZERO, |out, row| {
        wins.fold(out, row, |acc, v| acc + term(v))
    });
}
