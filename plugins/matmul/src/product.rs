//! One launch's product as the kernels see it: the operands checked against the bound sizes
//! ([`Product`]), and the share of output tiles a block range computes
//! ([`Product::for_each_chunk`]): column panels × rows, rows outermost.

use std::ops::Range;
use std::rc::Rc;
use umd_sdk::kernel::{self, Memory, resident};
use umd_sdk::matrix::{Bound, Operand};
use umd_sdk::{KernelCall, OpError};

use crate::block::{Block, check_fits, extent, read_block};
use crate::operand::{BOperand, UNIT_MIN_ROWS};
use crate::plan::Geometry;
use crate::stream;
use umd_sdk::gemm::{Acc, MR, NR};

/// Most work memory packing one group of B's columns takes (its bytes as read, decoded and
/// packed): a Gemm with a 400 MB weight (VGG's first fully connected layer) packs it group by
/// group instead of whole, within the plugin's memory limit.
#[cfg(not(test))]
const GROUP_BYTES: usize = 64 << 20;
/// (Small in tests, so that a test case spans several groups.)
#[cfg(test)]
const GROUP_BYTES: usize = 256 << 10;

/// Width of the column panels the output is shared in: about a quarter of N for large N (at
/// most 8 panels, at least 256 columns), a multiple of the micro-tile width.
pub fn panel_width(n: usize) -> usize {
    n.div_ceil((n / 256).clamp(1, 8)).div_ceil(NR) * NR
}

/// The operands of one launch, checked against the bound sizes.
pub struct Product {
    pub g: Geometry,
    pub a: (u32, usize),
    pub b: (u32, usize),
    pub y: (u32, usize),
    /// Output rows over all batches (batch × M).
    pub rows: u64,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Product {
    pub fn new(
        call: &KernelCall,
        g: Geometry,
        a: (u32, usize),
        b: (u32, usize),
        y: (u32, usize),
    ) -> Result<Self, OpError> {
        let batch: Vec<(u64, u64)> = g.bshape.iter().copied().zip(g.sa.iter().copied()).collect();
        let batch_b: Vec<(u64, u64)> = g.bshape.iter().copied().zip(g.sb.iter().copied()).collect();
        let ea = extent(&[batch, vec![(g.m, g.sam), (g.k, g.sak)]].concat());
        let eb = extent(&[batch_b, vec![(g.k, g.sbk), (g.n, g.sbn)]].concat());
        check_fits(call, "A", a, ea)?;
        check_fits(call, "B", b, eb)?;
        let rows = g.bshape.iter().try_fold(g.m, |e, &d| e.checked_mul(d));
        check_fits(call, "Y", y, rows.and_then(|r| r.checked_mul(g.n)))?;
        let fit = |v: u64, what: &str| {
            usize::try_from(v)
                .map_err(|_| OpError::internal(format!("{what} = {v} does not fit in memory")))
        };
        let (m, n, k) = (fit(g.m, "M")?, fit(g.n, "N")?, fit(g.k, "K")?);
        for (v, what) in [
            (g.sam, "A's row stride"),
            (g.sak, "A's depth stride"),
            (g.sbk, "B's depth stride"),
            (g.sbn, "B's column stride"),
        ] {
            fit(v, what)?;
        }
        Ok(Product {
            rows: rows.unwrap_or(0),
            g,
            a,
            b,
            y,
            m,
            n,
            k,
        })
    }

    /// Calls `rows(pb, z, i0..i1, j0..j1)` for the output tiles of this call's share, rows
    /// in chunks of at most `chunk`, with `pb` holding B of batch `z` (at least columns
    /// `j0..j1`), packed or as decoded for the matrix unit ([`BOperand`]). `decode_b(block, columns)` decodes a block of B holding `columns` (of B's
    /// whole width) into the accumulation type.
    ///
    /// The share is of `panels × (batch × M)` items, column panel by column panel, so that
    /// with many block ranges each packs only the B columns of its panels (and reads only the
    /// rows of A it needs). B's columns are packed in groups of at most [`GROUP_BYTES`] of
    /// work memory, groups outermost: within a group rows run outermost, so a range reads each
    /// of its A rows once per group (once in all when B is one group, the common case).
    ///
    /// `keep`: when the host names B's bytes resident (a compiled model's weights, frozen), B
    /// is packed whole once per instance and kept ([`resident::derived`]) under `keep` — which
    /// must tell apart every way the kernel decodes B (its dtype) — and the geometry; later
    /// launches neither read nor pack it. Not when the store would not keep it
    /// ([`resident::would_keep`]: too large, or a model's weights that do not fit together),
    /// nor with `None`: then the share's columns are packed on every launch.
    ///
    /// `streams`: whether `rows` can multiply a B it reads itself ([`crate::stream`]); then
    /// a B not kept, multiplying at most [`stream::MAX_ROWS`] rows per batch, is neither read
    /// nor packed here and `rows` gets `None` for it.
    ///
    /// `bound`: whether B's bytes are f32s as the matrix unit takes them; then a B the matrix
    /// unit would multiply (not streamed; [`BOperand::prepare`]'s rule) is neither read nor
    /// kept: `rows` gets [`BOperand::Bound`], where it lies in its binding (ABI 1.9).
    pub fn for_each_chunk<A: Acc>(
        &self,
        call: &KernelCall,
        mem: &mut dyn Memory,
        (keep, streams, bound): (Option<u64>, bool, bool),
        decode_b: impl Fn(&Block, Range<usize>) -> Vec<A>,
        mut rows: impl FnMut(
            &mut dyn Memory,
            Option<&BOperand<A>>,
            u64,
            Range<usize>,
            Range<usize>,
        ) -> Result<(), OpError>,
    ) -> Result<(), OpError> {
        let (m, n, k) = (self.m, self.n, self.k);
        if m == 0 || n == 0 || self.rows == 0 {
            return Ok(());
        }
        let esize = self.a.1.max(self.b.1);
        let budget = 4 * kernel::CHUNK_BYTES;
        let chunk = (budget / k.saturating_mul(esize).max(1))
            .min(budget / n.saturating_mul(4))
            .clamp(MR, 256)
            / MR
            * MR;
        let width = panel_width(n);
        let total = self.rows;
        let share = call.share(n.div_ceil(width) as u64 * total);
        if share.is_empty() {
            return Ok(());
        }
        let (p0, r0) = (share.start / total, share.start % total);
        let (p1, r1) = ((share.end - 1) / total, (share.end - 1) % total + 1);
        let cols = |pa: u64, pb: u64| pa as usize * width..n.min((pb as usize + 1) * width);
        // B whole, packed: strips of NR columns, k deep
        let whole = (NR * std::mem::size_of::<A>())
            .checked_mul(k)
            .and_then(|v| v.checked_mul(n.div_ceil(NR)))
            .unwrap_or(usize::MAX);
        let name = keep
            .and_then(|tag| Some((tag, mem.resident(self.b.0)?)))
            .filter(|&(_, name)| resident::would_keep(name, whole));
        // (not when batches share B: the packed B serves them all, streaming would read it
        // once per batch)
        let shared = (self.g.bshape.iter().zip(&self.g.sb)).any(|(&d, &s)| d > 1 && s == 0);
        let streamed = streams && name.is_none() && m <= stream::MAX_ROWS && !shared;
        let bound = bound && A::UNIT && !streamed && (m >= UNIT_MIN_ROWS || name.is_none());
        let name = name.filter(|_| !bound);
        let packed_cols = if name.is_some() { 0..n } else { cols(p0, p1) };
        // B is packed in groups of columns of at most GROUP_BYTES of work memory (its bytes,
        // decoded, packed), each group a whole number of strips; a kept B is one group
        let per_col = k
            .saturating_mul(esize + 2 * std::mem::size_of::<A>())
            .max(1);
        let group = if name.is_some() || streamed || bound {
            packed_cols.len().max(1)
        } else {
            (GROUP_BYTES / per_col).max(NR) / NR * NR
        };
        let mut cuts = [0, r0, r1, total];
        cuts.sort_unstable();
        for g0 in (packed_cols.start..packed_cols.end).step_by(group) {
            let gcols = g0..packed_cols.end.min(g0 + group);
            let mut packed: Option<(u64, Option<Rc<BOperand<A>>>)> = None;
            for w in cuts.windows(2).filter(|w| w[0] < w[1]) {
                // the panels that hold every row of this segment
                let pa = if w[0] >= r0 { p0 } else { p0 + 1 };
                let pb = if w[1] <= r1 {
                    Some(p1)
                } else {
                    p1.checked_sub(1)
                };
                let Some(pb) = pb.filter(|&pb| pa <= pb) else {
                    continue;
                };
                // this segment's columns in this group
                let seg = cols(pa, pb);
                let seg = seg.start.max(gcols.start)..seg.end.min(gcols.end);
                if seg.is_empty() {
                    continue;
                }
                let mut row = w[0];
                while row < w[1] {
                    let (z, i0) = (row / self.g.m, (row % self.g.m) as usize);
                    let i1 = (m as u64).min(i0 as u64 + (w[1] - row)) as usize;
                    let ob = self.g.batch_offsets(z).1;
                    if packed.as_ref().is_none_or(|p| p.0 != ob) {
                        drop(packed.take()); // free the old B before packing the next
                        let j = gcols.clone();
                        let mut pack = || {
                            let blk = read_block(
                                mem,
                                self.b,
                                ob + j.start as u64 * self.g.sbn,
                                (k, self.g.sbk as usize),
                                (j.len(), self.g.sbn as usize),
                            )?;
                            let (rs, cs) = (blk.rs, blk.cs);
                            let bv = decode_b(&blk, j.clone());
                            drop(blk); // its bytes, before the packed copy is made
                            let pb =
                                BOperand::prepare(k, j.clone(), (bv, rs, cs), (m, name.is_some()))
                                    .ok_or_else(|| {
                                        OpError::internal(format!(
                                            "no memory to pack B of {k}x{}",
                                            j.len()
                                        ))
                                    })?;
                            let bytes = pb.elements() * std::mem::size_of::<A>();
                            Ok::<_, OpError>((pb, bytes))
                        };
                        let pb = match name {
                            _ if streamed => None,
                            _ if bound => {
                                let at = ob + j.start as u64 * self.g.sbn;
                                let b = bound_at("B", self.b.0, at, (self.g.sbk, self.g.sbn))?;
                                let first = j.start;
                                Some(Rc::new(BOperand::Bound { b, first }))
                            }
                            Some((tag, name)) => {
                                let g = &self.g;
                                let key = [tag, ob, g.k, g.n, g.sbk, g.sbn];
                                Some(resident::derived(name, &key, pack)?)
                            }
                            None => Some(Rc::new(pack()?.0)),
                        };
                        packed = Some((ob, pb));
                    }
                    let pbk = packed.as_ref().expect("packed above").1.as_deref();
                    let mut at = i0;
                    while at < i1 {
                        let end = i1.min(at + chunk);
                        rows(mem, pbk, z, at..end, seg.clone())?;
                        at = end;
                    }
                    row += (i1 - i0) as u64;
                }
            }
        }
        Ok(())
    }

    /// Rows `i0..` of A in batch `z` where they lie in A's binding (f32 only, ABI 1.9).
    pub fn bound_a<'v, A>(&self, z: u64, i0: usize) -> Result<Operand<'v, A>, OpError> {
        let at = self.g.batch_offsets(z).0 + i0 as u64 * self.g.sam;
        bound_at("A", self.a.0, at, (self.g.sam, self.g.sak)).map(Operand::Bound)
    }

    /// Reads rows `i0..i1` of A in batch `z`.
    pub fn read_a(
        &self,
        mem: &mut dyn Memory,
        z: u64,
        i0: usize,
        i1: usize,
    ) -> Result<Block, OpError> {
        let oa = self.g.batch_offsets(z).0 + i0 as u64 * self.g.sam;
        read_block(
            mem,
            self.a,
            oa,
            (i1 - i0, self.g.sam as usize),
            (self.k, self.g.sak as usize),
        )
    }

    /// Writes the finished tile of rows `i0..` and columns `cols` of batch `z` (row-major):
    /// in one piece when it spans whole rows.
    pub fn write_y(
        &self,
        mem: &mut dyn Memory,
        z: u64,
        i0: usize,
        cols: Range<usize>,
        bytes: &[u8],
    ) -> Result<(), OpError> {
        let s = self.y.1 as u64;
        let at = |i: usize| ((z * self.g.m + i as u64) * self.g.n + cols.start as u64) * s;
        if cols.len() == self.n {
            return mem.write(self.y.0, at(i0), bytes);
        }
        for (r, row) in bytes.chunks_exact(cols.len() * self.y.1).enumerate() {
            mem.write(self.y.0, at(i0 + r), row)?;
        }
        Ok(())
    }
}

/// `what` in `binding` from element `at`, rows and columns `(rs, cs)` apart (checked to fit
/// `usize` by [`Product::new`]), as the matrix unit reads it in place.
fn bound_at(what: &str, binding: u32, at: u64, (rs, cs): (u64, u64)) -> Result<Bound, OpError> {
    let offset = usize::try_from(at)
        .map_err(|_| OpError::internal(format!("{what}'s offset {at} overflows")))?;
    Ok(Bound {
        binding,
        offset,
        rs: rs as usize,
        cs: cs as usize,
    })
}
