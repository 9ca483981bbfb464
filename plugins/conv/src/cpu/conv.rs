//! CPU Conv and ConvTranspose, per (image, group), over blocks of output (Conv) or input
//! (ConvTranspose) positions. f32 compute (f32, f16, bf16) multiplies on the device's matrix
//! unit (ABI 1.8: [`umd_sdk::gemm::product`], which packs nothing here), f64 on the SDK's packed
//! GEMM (the weights packed once per group, each block's right operand packed per block):
//! - Conv: im2col of the block into a `[Cg·K, block]` scratch, then `Y[Mg, block] += W[Mg,
//!   Cg·K] · col` (a pointwise conv's columns are its input rows: the matrix unit reads them in
//!   place, the packed GEMM packs from them);
//! - ConvTranspose: `col[Mg·K, block] = Wᵀ[Mg·K, Cg] · X[Cg, block]`, then col2im adds every
//!   column into the output positions it reaches.
//!
//! Both accumulate in the compute type (f32, or f64 for f64) and add the bias at the end.

use super::pool;
use super::real::{MR, Real};
use crate::geom::{Geom, valid_range};
use umd_sdk::OpError;
use umd_sdk::gemm::{self, Strided, Work};
use umd_sdk::kernel::Memory;
use umd_sdk::matrix::{Bound, Operand};

/// A run of consecutive positions along the last axis of a 3-D grid, inside a block of the
/// grid's flattened positions.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub z: i64,
    pub y: i64,
    pub x0: i64,
    pub len: usize,
    /// Offset of the run in the block.
    pub at: usize,
}
/// The runs covering flattened positions `start..start + len` of a grid of extents `shape`.
pub fn runs(shape: [i64; 3], start: usize, len: usize, out: &mut Vec<Run>) {
    out.clear();
    let (h, w) = (shape[1] as usize, shape[2] as usize);
    let (mut pos, end) = (start, start + len);
    while pos < end {
        let (row, x0) = (pos / w, pos % w);
        let l = (w - x0).min(end - pos);
        out.push(Run {
            z: (row / h) as i64,
            y: (row % h) as i64,
            x0: x0 as i64,
            len: l,
            at: pos - start,
        });
        pos += l;
    }
}

/// Positions per block: a B panel of the GEMM (256 deep × block) stays within L2.
const BLOCK: usize = 256;
/// Largest im2col / col2im scratch with its packed copy, in bytes (deep kernels take narrower
/// blocks).
const MAX_SCRATCH: usize = 16 << 20;

/// Positions per block on the matrix unit (it packs its operands itself: wider blocks spread
/// its per-call packing of the weights over more columns).
const WIDE_BLOCK: usize = 1024;

/// Positions per block for scratch rows of `rows` elements of `A`: [`BLOCK`] ([`WIDE_BLOCK`]
/// on the matrix unit), narrower (down to 64) when the scratch and the GEMM's packed copy of
/// it (none on the matrix unit) would exceed [`MAX_SCRATCH`], at most `total`.
fn block_len<A: Real>(rows: usize, total: usize) -> usize {
    let (block, copies) = if A::UNIT { (WIDE_BLOCK, 1) } else { (BLOCK, 2) };
    let fit = MAX_SCRATCH / (copies * rows.max(1) * std::mem::size_of::<A>());
    block.min(fit.max(64) / 8 * 8).min(total).max(1)
}

fn usize_of(v: i64) -> usize {
    v as usize
}

/// Conv: `y` (`[N, M, out]`) gets `x` (`[N, C, in]`) convolved with `w`
/// (`[M, Cg, K]`).
pub fn conv<A: Real>(g: &Geom, x: &[A], w: &[A], y: &mut [A]) {
    conv_with(g, g.mg < MR as i64, x, w, y)
}

/// [`conv`], direct (no im2col) or not as `direct` says: a part of a conv's output channels
/// computes exactly as the whole does when it takes the whole conv's choice.
pub fn conv_with<A: Real>(g: &Geom, direct: bool, x: &[A], w: &[A], y: &mut [A]) {
    let (in_sz, out_sz, ks) = (
        usize_of(g.in_size()),
        usize_of(g.out_size()),
        usize_of(g.k_size()),
    );
    let (c, m, cg, mg) = (usize_of(g.c), usize_of(g.m), usize_of(g.cg), usize_of(g.mg));
    let ck = cg * ks;
    if ck == 0 {
        return;
    }
    if direct {
        return A::conv_direct(g, x, w, y);
    }
    let jb = block_of::<A>(g, ck, out_sz);
    let mut s = Scratch::default();
    let mut wpack = Vec::new();
    for grp in 0..usize_of(g.group) {
        let wg = &w[grp * mg * ck..][..mg * ck];
        if !A::UNIT {
            gemm::pack_a(mg, ck, strided(wg, ck), &mut wpack);
        }
        for n in 0..usize_of(g.n) {
            let xg = &x[(n * c + grp * cg) * in_sz..][..cg * in_sz];
            let yg = &mut y[(n * m + grp * mg) * out_sz..][..mg * out_sz];
            let ws = Weights {
                w: wg,
                packed: &wpack,
                bound: None,
            };
            positions(
                g,
                Planes::Values(xg),
                ws,
                0..out_sz,
                jb,
                (yg, out_sz, 0),
                &mut s,
                None,
            )
            .expect("weights in memory multiply without the host's buffers");
        }
    }
}

/// Whether output position `j` reads input position `j` (1×1 kernel, stride 1, no padding).
pub fn pointwise(g: &Geom) -> bool {
    g.k_size() == 1 && g.s == [1; 3] && g.pb == [0; 3] && g.out == g.inp
}

/// Positions per block of [`positions`] for a group of depth `ck` and `out_sz` positions.
pub fn block_of<A: Real>(g: &Geom, ck: usize, out_sz: usize) -> usize {
    // the matrix unit reads a pointwise conv's input rows in place: one block
    if pointwise(g) && A::UNIT {
        out_sz.max(1)
    } else {
        block_len::<A>(ck, out_sz)
    }
}

/// Work memory [`positions`] reuses between calls.
pub struct Scratch<A> {
    runs: Vec<Run>,
    col: Vec<A>,
    work: Work<A>,
    prod: Vec<A>,
}

impl<A: Real> Default for Scratch<A> {
    fn default() -> Self {
        Scratch {
            runs: Vec::new(),
            col: Vec::new(),
            work: Work::default(),
            prod: Vec::new(),
        }
    }
}

/// A group's weights `[Mg, Cg·K]` and (not on the matrix unit) their packed copy; or (ABI
/// 1.9, f32 on the matrix unit) where they are in a bound buffer, which the host reads in
/// place (`w` then empty).
#[derive(Clone, Copy)]
pub struct Weights<'a, A> {
    pub w: &'a [A],
    pub packed: &'a [A],
    pub bound: Option<Bound>,
}

/// One (image, group)'s input planes: their values, or (ABI 1.9: f32 pointwise convs with
/// bound weights) where they lie in a bound buffer — plane `ci` from element `offset + ci *
/// rs` of `binding` — which the matrix unit reads in place.
#[derive(Clone, Copy)]
pub enum Planes<'a, A> {
    Values(&'a [A]),
    Bound(Bound),
}

/// Stores output positions `range` of one (image, group) — `xg` its input planes — into
/// `y = (data, row stride, first position)`: position `j` of channel `mi` at
/// `data[mi * rs + j - first]`, in blocks of `jb` positions ([`block`]; `mem` the launch's
/// buffers when the weights are bound).
#[allow(clippy::too_many_arguments)]
pub fn positions<A: Real>(
    g: &Geom,
    xg: Planes<A>,
    w: Weights<A>,
    range: std::ops::Range<usize>,
    jb: usize,
    (y, y_rs, first): (&mut [A], usize, usize),
    s: &mut Scratch<A>,
    mut mem: Option<&mut dyn Memory>,
) -> Result<(), OpError> {
    let mut j0 = range.start;
    while j0 < range.end {
        let len = jb.min(range.end - j0);
        let reborrowed: Option<&mut dyn Memory> = match &mut mem {
            Some(m) => Some(&mut **m),
            None => None,
        };
        let prod = block(g, xg, w, j0..j0 + len, s, reborrowed)?;
        for (yrow, prow) in y.chunks_mut(y_rs).zip(prod.chunks_exact(len)) {
            yrow[j0 - first..][..len].copy_from_slice(prow);
        }
        j0 += len;
    }
    Ok(())
}

/// Output positions `js` of one (image, group) — `xg` its input planes — as a row-major
/// `Mg × js.len()` matrix in `s`: im2col of those positions (a pointwise conv's input rows as
/// they are), then one product with the group's weights (bound ones read by the host from
/// `mem`'s buffer; refused without `mem` or for a type the matrix unit does not multiply).
pub fn block<'s, A: Real>(
    g: &Geom,
    xg: Planes<A>,
    w: Weights<A>,
    js: std::ops::Range<usize>,
    s: &'s mut Scratch<A>,
    mem: Option<&mut dyn Memory>,
) -> Result<&'s mut [A], OpError> {
    let (in_sz, mg, ck) = (
        usize_of(g.in_size()),
        usize_of(g.mg),
        usize_of(g.cg) * usize_of(g.k_size()),
    );
    let (j0, len) = (js.start, js.len());
    let b = match (pointwise(g), xg) {
        (true, Planes::Bound(x)) => Operand::Bound(Bound {
            offset: x.offset + j0,
            ..x
        }),
        (true, Planes::Values(xg)) => Operand::Memory(strided(&xg[j0..], in_sz)),
        (false, Planes::Values(xg)) => {
            s.col.resize(ck * len, A::ZERO);
            runs(g.out, j0, len, &mut s.runs);
            im2col(g, xg, &s.runs, len, &mut s.col[..ck * len]);
            Operand::Memory(strided(&s.col[..ck * len], len))
        }
        (false, Planes::Bound(_)) => {
            return Err(OpError::internal("im2col needs the input planes' values"));
        }
    };
    match (w.bound, b) {
        (Some(bw), b) => {
            let refused = || OpError::internal("bound weights without a bound buffer to read");
            let mem = mem.ok_or_else(refused)?;
            s.prod = A::unit_operands((mg, len, ck), Operand::Bound(bw), b, mem)
                .ok_or_else(refused)??;
        }
        (None, Operand::Memory(b)) => {
            let a = strided(w.w, ck);
            let a_packed = (!w.packed.is_empty()).then_some(w.packed);
            gemm::product((mg, len, ck), a, a_packed, b, &mut s.work, &mut s.prod);
        }
        (None, Operand::Bound(_)) => {
            return Err(OpError::internal("bound input planes need bound weights"));
        }
    }
    Ok(&mut s.prod[..mg * len])
}

/// A row-major matrix of rows `rs` apart.
fn strided<A>(data: &[A], rs: usize) -> Strided<'_, A> {
    Strided { data, rs, cs: 1 }
}

/// Conv without im2col, for groups of fewer than [`MR`] output channels (depthwise convs):
/// for every output plane, input channel and kernel offset, every output row takes
/// `w * input row` over its in-bounds span (contiguous when the stride along x is 1).
#[inline(always)]
pub fn direct_body<A: Real>(g: &Geom, x: &[A], w: &[A], y: &mut [A]) {
    let (in_sz, out_sz, ks) = (
        usize_of(g.in_size()),
        usize_of(g.out_size()),
        usize_of(g.k_size()),
    );
    let (c, cg, mg) = (usize_of(g.c), usize_of(g.cg), usize_of(g.mg));
    let (ow, iw) = (usize_of(g.out[2]), g.inp[2]);
    if out_sz == 0 {
        return;
    }
    for (plane, yp) in y.chunks_exact_mut(out_sz).enumerate() {
        let (n, m) = (plane / usize_of(g.m), plane % usize_of(g.m));
        let grp = m / mg;
        for ci in 0..cg {
            let xc = &x[(n * c + grp * cg + ci) * in_sz..][..in_sz];
            let wc = &w[(m * cg + ci) * ks..][..ks];
            let mut wk = wc.iter();
            // a 3×3 plane in one call where the type has a kernel for it
            if pool::plane3(g) && A::plane3x3(yp, xc, wc, pool::plane3_geometry(g)) {
                continue;
            }
            for kz in 0..g.k[0] {
                for ky in 0..g.k[1] {
                    for kx in 0..g.k[2] {
                        let wv = *wk.next().expect("one weight per offset");
                        let start = -g.pb[2] + kx * g.d[2];
                        let (lo, hi) = valid_range(start, g.s[2], ow as i64, iw);
                        let (lo, hi) = (lo as usize, hi as usize);
                        if lo >= hi {
                            continue;
                        }
                        for oz in 0..g.out[0] {
                            let iz = oz * g.s[0] - g.pb[0] + kz * g.d[0];
                            if !(0..g.inp[0]).contains(&iz) {
                                continue;
                            }
                            for oy in 0..g.out[1] {
                                let iy = oy * g.s[1] - g.pb[1] + ky * g.d[1];
                                if !(0..g.inp[1]).contains(&iy) {
                                    continue;
                                }
                                let yrow = &mut yp[(oz * g.out[1] + oy) as usize * ow..][lo..hi];
                                let first = ((iz * g.inp[1] + iy) * iw + start + lo as i64 * g.s[2])
                                    as usize;
                                if g.s[2] == 1 {
                                    // (a plain loop: rows are short, `lanes`' 16 per
                                    // iteration left most of them to its remainder loop)
                                    let xr = &xc[first..first + (hi - lo)];
                                    for (o, &v) in yrow.iter_mut().zip(xr) {
                                        *o += wv * v;
                                    }
                                } else {
                                    // the row's inputs as one checked slice, stepped through
                                    let s = g.s[2] as usize;
                                    let xr = &xc[first..first + (hi - lo - 1) * s + 1];
                                    for (o, &v) in yrow.iter_mut().zip(xr.iter().step_by(s)) {
                                        *o += wv * v;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Rows `(c, kz, ky, kx)` of the im2col matrix for the output positions of `runs`. Not
/// inlined into [`block`]: its loops compiled inside a larger function kept their values on
/// the stack.
#[inline(never)]
fn im2col<A: Real>(g: &Geom, xg: &[A], runs: &[Run], len: usize, col: &mut [A]) {
    let in_sz = usize_of(g.in_size());
    let mut rows = col.chunks_exact_mut(len);
    for ci in 0..usize_of(g.cg) {
        let xc = &xg[ci * in_sz..][..in_sz];
        for kz in 0..g.k[0] {
            for ky in 0..g.k[1] {
                for kx in 0..g.k[2] {
                    let row = rows.next().expect("one row per (c, k)");
                    for r in runs {
                        let dst = &mut row[r.at..r.at + r.len];
                        let iz = r.z * g.s[0] - g.pb[0] + kz * g.d[0];
                        let iy = r.y * g.s[1] - g.pb[1] + ky * g.d[1];
                        if !(0..g.inp[0]).contains(&iz) || !(0..g.inp[1]).contains(&iy) {
                            dst.fill(A::ZERO);
                            continue;
                        }
                        let start = r.x0 * g.s[2] - g.pb[2] + kx * g.d[2];
                        let (lo, hi) = valid_range(start, g.s[2], r.len as i64, g.inp[2]);
                        let (lo, hi) = (lo as usize, hi as usize);
                        dst[..lo].fill(A::ZERO);
                        dst[hi..].fill(A::ZERO);
                        if lo >= hi {
                            // the whole run reads padding: `first` below would lie outside
                            continue;
                        }
                        // first in-bounds element of the run
                        let first =
                            ((iz * g.inp[1] + iy) * g.inp[2] + start + lo as i64 * g.s[2]) as usize;
                        let s = g.s[2] as usize;
                        if s == 1 {
                            dst[lo..hi].copy_from_slice(&xc[first..first + hi - lo]);
                        } else {
                            // (the rest of the plane: a vector gather may load past the
                            // run's last input)
                            A::gather(&mut dst[lo..hi], &xc[first..], s);
                        }
                    }
                }
            }
        }
    }
}

/// ConvTranspose: `y` (zeroed, `[N, M, out]`) gets the transposed convolution of `x`
/// (`[N, C, in]`) with `w` (`[C, Mg, K]`).
pub fn conv_transpose<A: Real>(g: &Geom, x: &[A], w: &[A], y: &mut [A]) {
    conv_transpose_with(g, transpose_block::<A>(g), x, w, y)
}

/// Input positions per block of [`conv_transpose`] on `g`: a part of its output channels
/// computes exactly as the whole does with the whole's blocks (they order the additions into
/// each output element).
pub fn transpose_block<A: Real>(g: &Geom) -> usize {
    block_len::<A>(usize_of(g.mg) * usize_of(g.k_size()), usize_of(g.in_size()))
}

/// [`conv_transpose`] over blocks of `pb` input positions.
pub fn conv_transpose_with<A: Real>(g: &Geom, pb: usize, x: &[A], w: &[A], y: &mut [A]) {
    let (in_sz, out_sz, ks) = (
        usize_of(g.in_size()),
        usize_of(g.out_size()),
        usize_of(g.k_size()),
    );
    let (c, m, cg, mg, groups) = (
        usize_of(g.c),
        usize_of(g.m),
        usize_of(g.cg),
        usize_of(g.mg),
        usize_of(g.group),
    );
    let rows = mg * ks;
    if cg == 0 || rows == 0 {
        return;
    }
    let pb = pb.clamp(1, in_sz.max(1));
    let (mut rs, mut wpack, mut col) = (Vec::new(), Vec::new(), Vec::new());
    let mut work = Work::default();
    for grp in 0..groups {
        // Wᵀ: element ((mi, k), ci) of the group is w[grp*cg + ci][mi][k], rows*ci + r apart
        let wt = Strided {
            data: &w[grp * cg * rows..][..cg * rows],
            rs: 1,
            cs: rows,
        };
        if !A::UNIT {
            gemm::pack_a(rows, cg, wt, &mut wpack);
        }
        for n in 0..usize_of(g.n) {
            let xg = &x[(n * c + grp * cg) * in_sz..][..cg * in_sz];
            let yg = &mut y[(n * m + grp * mg) * out_sz..][..mg * out_sz];
            let mut p0 = 0;
            while p0 < in_sz {
                let len = pb.min(in_sz - p0);
                // X[Cg, p0..p0 + len]: rows a plane apart
                let b = strided(&xg[p0..], in_sz);
                let a_packed = (!A::UNIT).then_some(&wpack[..]);
                gemm::product((rows, len, cg), wt, a_packed, b, &mut work, &mut col);
                runs(g.inp, p0, len, &mut rs);
                col2im(g, &col, len, &rs, yg);
                p0 += len;
            }
        }
    }
}

/// Adds rows `(mi, kz, ky, kx)` of `col` (input positions of `runs`) into the output planes.
fn col2im<A: Real>(g: &Geom, col: &[A], len: usize, runs: &[Run], yg: &mut [A]) {
    let out_sz = usize_of(g.out_size());
    if out_sz == 0 {
        return;
    }
    let mut rows = col.chunks_exact(len);
    for plane in yg.chunks_exact_mut(out_sz) {
        for kz in 0..g.k[0] {
            for ky in 0..g.k[1] {
                for kx in 0..g.k[2] {
                    let row = rows.next().expect("one row per (m, k)");
                    for r in runs {
                        let oz = r.z * g.s[0] - g.pb[0] + kz * g.d[0];
                        let oy = r.y * g.s[1] - g.pb[1] + ky * g.d[1];
                        if !(0..g.out[0]).contains(&oz) || !(0..g.out[1]).contains(&oy) {
                            continue;
                        }
                        let start = r.x0 * g.s[2] - g.pb[2] + kx * g.d[2];
                        let (lo, hi) = valid_range(start, g.s[2], r.len as i64, g.out[2]);
                        let base = (oz * g.out[1] + oy) * g.out[2] + start;
                        let s = g.s[2];
                        let src = &row[r.at..r.at + r.len];
                        for t in lo..hi {
                            plane[(base + t * s) as usize] += src[t as usize];
                        }
                    }
                }
            }
        }
    }
}

/// Adds `b[m]` to every element of channel `m` of `y` (`[N, M, out]`).
pub fn add_bias<A: Real>(y: &mut [A], b: &[A], out_sz: usize) {
    if out_sz == 0 || b.is_empty() {
        return;
    }
    for (i, plane) in y.chunks_exact_mut(out_sz).enumerate() {
        let bias = b[i % b.len()];
        for v in plane {
            *v += bias;
        }
    }
}
