//! Products of a few rows of A with a B read once ([`multiply`]): a batch-1 fully connected
//! layer whose weights are not kept between launches (too large for the resident store) is a
//! matrix-vector product bound by reading B. Packing B (for the SDK's GEMM or the matrix
//! unit) would copy all of it twice more per run, so B is instead read in tiles of about
//! [`TILE_ELEMENTS`] — each stays in cache — and multiplied as it is read: one pass over
//! memory. Every dtype the float kernel serves (its compute type) and both layouts of B
//! (rows contiguous: `axpy` per row; columns contiguous, a transposed weight: dot products).

use std::ops::Range;
use umd_sdk::OpError;
use umd_sdk::dtype::Element;
use umd_sdk::gemm::Acc;
use umd_sdk::kernel::Memory;

use crate::block::read_block;
use crate::product::Product;

/// Most rows of A per batch whose products are streamed (when B is not kept): the work per
/// element of B stays below what reading it costs.
pub const MAX_ROWS: usize = 4;

/// Elements of B per tile read (1 MiB of f32): well inside a core's L2, large enough that a
/// `kernel-io` read's fixed cost does not show.
#[cfg(not(test))]
const TILE_ELEMENTS: usize = 1 << 18;
/// (Small in tests, so that a case spans several tiles along both directions.)
#[cfg(test)]
const TILE_ELEMENTS: usize = 96;

/// Lanes of the partial sums of a dot product (two 128-bit vectors of f32).
const LANES: usize = 8;

/// `acc` (row-major `rows × cols.len()`) = `a` (`rows` rows of `k` contiguous values) · B's
/// columns `cols` in batch `z`, B read tile by tile from its binding as elements of `T`.
pub fn multiply<T: Element>(
    p: &Product,
    mem: &mut dyn Memory,
    z: u64,
    (a, rows): (&[T::Compute], usize),
    cols: Range<usize>,
    acc: &mut Vec<T::Compute>,
) -> Result<(), OpError>
where
    T::Compute: Acc,
{
    let (k, ncols) = (p.k, cols.len());
    acc.clear();
    acc.resize(rows * ncols, T::Compute::ZERO);
    if rows == 0 || ncols == 0 || k == 0 {
        return Ok(());
    }
    let (sbk, sbn) = (p.g.sbk as usize, p.g.sbn as usize);
    // B's columns contiguous (a transposed weight): dot products; else rows. Decided from B's
    // layout only — never from a tile's shape, which depends on the launch's split — so that
    // every split sums each output in the same order.
    let columns = sbk == 1 && sbn != 1;
    // tiles whole along the contiguous direction of B where one fits
    let (kc, cw) = if columns {
        let kc = k.min(TILE_ELEMENTS);
        (kc, (TILE_ELEMENTS / kc).clamp(1, ncols))
    } else {
        let cw = ncols.min(TILE_ELEMENTS);
        ((TILE_ELEMENTS / cw).clamp(1, k), cw)
    };
    let ob = p.g.batch_offsets(z).1;
    let mut values = Vec::new();
    for j0 in (0..ncols).step_by(cw) {
        let w = cw.min(ncols - j0);
        for k0 in (0..k).step_by(kc) {
            let d = kc.min(k - k0);
            let origin = ob + k0 as u64 * sbk as u64 + (cols.start + j0) as u64 * sbn as u64;
            let blk = read_block(mem, p.b, origin, (d, sbk), (w, sbn))?;
            let b = blk.values::<T>(&mut values);
            let tile = Tile {
                b,
                columns,
                rs: blk.rs,
                cs: blk.cs,
                depth: k0..k0 + d,
                cols: j0..j0 + w,
            };
            for (i, out) in acc.chunks_exact_mut(ncols).enumerate() {
                tile.accumulate(&a[i * k..][..k], out);
            }
        }
    }
    Ok(())
}

/// A tile of B as read: element `(r, c)` (depth `depth.start + r`, column `cols.start + c`
/// of the product's share) at `b[r * rs + c * cs]`.
struct Tile<'a, C> {
    b: &'a [C],
    /// Dot products along the depth (B's columns contiguous), else row by row.
    columns: bool,
    rs: usize,
    cs: usize,
    depth: Range<usize>,
    cols: Range<usize>,
}

impl<C: Acc> Tile<'_, C> {
    /// `out[cols] += a[depth] · tile` for one row `a` of A and its row `out` of the product.
    fn accumulate(&self, a: &[C], out: &mut [C]) {
        let a = &a[self.depth.clone()];
        let out = &mut out[self.cols.clone()];
        let (d, w) = (a.len(), out.len());
        if self.columns {
            // out[c] += a · column c, in the same lane order whatever the tile's width; a
            // column is contiguous (`read_block` keeps a unit depth stride, `rs == 1`)
            debug_assert!(self.rs == 1 || d <= 1, "a column of B is contiguous");
            for (c, o) in out.iter_mut().enumerate() {
                *o = o.add(dot(a, &self.b[c * self.cs..][..d]));
            }
        } else if self.cs == 1 {
            // rows contiguous: out += a[r] * row r
            for (r, &ar) in a.iter().enumerate() {
                let row = &self.b[r * self.rs..][..w];
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = o.mul_add(ar, v);
                }
            }
        } else {
            // the same order as rows: each output sums r = 0, 1, … in turn
            for (r, &ar) in a.iter().enumerate() {
                for (c, o) in out.iter_mut().enumerate() {
                    *o = o.mul_add(ar, self.b[r * self.rs + c * self.cs]);
                }
            }
        }
    }
}

/// `a · b` over [`LANES`] partial sums (so that it vectorizes), added in a fixed order.
#[inline(always)]
fn dot<C: Acc>(a: &[C], b: &[C]) -> C {
    let mut lanes = [C::ZERO; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (at, bt) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..LANES {
            lanes[l] = lanes[l].mul_add(x[l], y[l]);
        }
    }
    let mut s = at
        .iter()
        .zip(bt)
        .fold(C::ZERO, |s, (&x, &y)| s.mul_add(x, y));
    for v in lanes {
        s = s.add(v);
    }
    s
}
