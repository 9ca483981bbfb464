//! The packed GEMM plugins' CPU kernels share (MatMul, Gemm, Conv, ConvTranspose…): `C = A · B`
//! for a chunk of rows of A against a packed B (a whole operand, kept, or one block of it packed
//! per block into reused memory: [`PackedB::pack_into`]). B is packed into zero-padded
//! [`NR`]-column strips, a chunk of A
//! into [`MR`]-row panels; an MR×NR register micro-kernel runs over [`KC`]-deep slices, B
//! strips grouped [`NC`] columns wide so a group stays in L2 while every panel of A passes it.
//!
//! The accumulation type ([`Acc`]) picks the micro-kernel: f32 (for f32, f16 and bf16) uses
//! explicit [`F32x4`] lanes (wasm SIMD128: 8 accumulators, 2 B vectors and a splat fit
//! Cranelift's 16 vector registers); f64 and the wrapping integers a plain loop.

use crate::OpError;
use crate::kernel::Memory;
use crate::matrix::Operand;
use crate::simd::F32x4;

/// Rows of the register micro-tile (the height of a packed panel of A).
pub const MR: usize = 4;
/// Columns of the register micro-tile (the width of a packed strip of B).
pub const NR: usize = 8;
/// Depth of one pass of the micro-kernel and width of a group of B strips.
const KC: usize = 256;
const NC: usize = 256;

/// What products accumulate in: f32 (f32, f16, bf16), f64, and wrapping i32/i64.
pub trait Acc: Copy + Send + Sync + 'static {
    const ZERO: Self;
    /// `self + a * b` (wrapping for integers).
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Gemm's alpha/beta in this type (integers: whole numbers, checked when planning).
    fn from_f64(v: f64) -> Self;
    /// Whether the device's matrix unit ([`crate::matrix`], ABI 1.8) multiplies this type
    /// (f32): kernels then hand it [`Acc::unit`] products instead of packing for
    /// [`multiply`].
    const UNIT: bool = false;
    /// `a · b` (`m × k` by `k × n`, row-major `m × n`) on the matrix unit; `None` when it has
    /// none for this type, or refused (the caller multiplies on [`multiply`]).
    fn unit(
        _m: usize,
        _n: usize,
        _k: usize,
        _a: Strided<Self>,
        _b: Strided<Self>,
    ) -> Option<Vec<Self>> {
        None
    }
    /// (ABI 1.9) `a · b` (`m × k` by `k × n`, row-major `m × n`) on the matrix unit with
    /// operands in the kernel's memory or bound to the launch ([`crate::matrix::multiply`],
    /// read by the host in place); `None` when it has none for this type.
    fn unit_operands(
        _mnk: (usize, usize, usize),
        _a: Operand<Self>,
        _b: Operand<Self>,
        _mem: &mut dyn Memory,
    ) -> Option<Result<Vec<Self>, OpError>> {
        None
    }
    /// Fills `block` (`kc` rows of [`NR`]) with columns `0..cols` of a transposed operand:
    /// column `c` is `data[at + c * cs..][..kc]` (contiguous along the depth).
    #[inline(always)]
    fn pack_columns(
        block: &mut [Self],
        data: &[Self],
        at: usize,
        cs: usize,
        kc: usize,
        cols: usize,
    ) {
        pack_columns_by_element(block, data, at, cs, kc, 0..cols);
    }
    /// Fills `panel` (`k` groups of [`MR`]) with rows `r0..r0 + live` of `a` (`live ≤ MR`;
    /// the rest of each group stays as it is).
    #[inline(always)]
    fn pack_rows(panel: &mut [Self], a: Strided<Self>, r0: usize, live: usize, k: usize) {
        pack_rows_by_element(panel, a, r0, live, 0..k);
    }
    /// Adds the tile `Σ_kk a[kk][r] · b[kk][c]` (`a`: `kc` groups of MR, `b`: `kc` groups of
    /// NR) to `c[r * ldc + c]` for `r < rows`, `c < cols`.
    #[inline(always)]
    fn micro(
        kc: usize,
        a: &[Self],
        b: &[Self],
        c: &mut [Self],
        ldc: usize,
        rows: usize,
        cols: usize,
    ) {
        let mut acc = [[Self::ZERO; NR]; MR];
        let (a, _) = a.as_chunks::<MR>();
        let (b, _) = b.as_chunks::<NR>();
        for (av, bv) in a.iter().zip(b).take(kc) {
            for r in 0..MR {
                for c in 0..NR {
                    acc[r][c] = acc[r][c].mul_add(av[r], bv[c]);
                }
            }
        }
        add_tile(&acc, c, ldc, rows, cols);
    }
}

/// [`Acc::pack_columns`] of columns `cols` one element at a time: each column read whole
/// along the depth and scattered down the block.
#[inline(always)]
fn pack_columns_by_element<A: Copy>(
    block: &mut [A],
    data: &[A],
    at: usize,
    cs: usize,
    kc: usize,
    cols: std::ops::Range<usize>,
) {
    for c in cols {
        let column = &data[at + c * cs..][..kc];
        for (row, &v) in block.chunks_exact_mut(NR).zip(column) {
            row[c] = v;
        }
    }
}

/// [`Acc::pack_rows`] of depth steps `ks` one element at a time.
#[inline(always)]
fn pack_rows_by_element<A: Copy>(
    panel: &mut [A],
    a: Strided<A>,
    r0: usize,
    live: usize,
    ks: std::ops::Range<usize>,
) {
    for r in 0..live {
        let at = (r0 + r) * a.rs;
        for kk in ks.clone() {
            panel[kk * MR + r] = a.data[at + kk * a.cs];
        }
    }
}

/// `c[r * ldc + j] += tile[r][j]` inside the `rows × cols` corner.
#[inline(always)]
fn add_tile<A: Acc>(tile: &[[A; NR]; MR], c: &mut [A], ldc: usize, rows: usize, cols: usize) {
    for (r, t) in tile.iter().enumerate().take(rows) {
        for (o, v) in c[r * ldc..r * ldc + cols].iter_mut().zip(t) {
            *o = o.add(*v);
        }
    }
}

impl Acc for f32 {
    const UNIT: bool = true;
    fn unit(m: usize, n: usize, k: usize, a: Strided<f32>, b: Strided<f32>) -> Option<Vec<f32>> {
        crate::matrix::multiply_f32(m, n, k, a, b)
            .inspect_err(|e| {
                // said once per instance: the product still comes out, on the SDK's GEMM
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    let msg = format!("{e:?}; multiplying on the SDK's GEMM instead");
                    crate::log(crate::LogLevel::Warn, &msg)
                });
            })
            .ok()
    }
    fn unit_operands(
        mnk: (usize, usize, usize),
        a: Operand<f32>,
        b: Operand<f32>,
        mem: &mut dyn Memory,
    ) -> Option<Result<Vec<f32>, OpError>> {
        Some(crate::matrix::multiply(mnk, a, b, mem))
    }
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        self + a * b
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    /// 4×4 blocks (4 columns, 4 steps of depth) transposed in registers; the rest by element.
    fn pack_columns(block: &mut [f32], data: &[f32], at: usize, cs: usize, kc: usize, cols: usize) {
        let (c4, k4) = (cols / 4 * 4, kc / 4 * 4);
        for c in (0..c4).step_by(4) {
            let col = |i: usize| &data[at + (c + i) * cs..][..kc];
            let cols4 = [col(0), col(1), col(2), col(3)];
            for k in (0..k4).step_by(4) {
                let t = F32x4::transpose4(cols4.map(|s| F32x4::load(&s[k..])));
                for (i, v) in t.into_iter().enumerate() {
                    v.store(&mut block[(k + i) * NR + c..]);
                }
            }
            for k in k4..kc {
                for (i, s) in cols4.iter().enumerate() {
                    block[k * NR + c + i] = s[k];
                }
            }
        }
        pack_columns_by_element(block, data, at, cs, kc, c4..cols);
    }
    /// A whole panel of rows contiguous along the depth: 4×4 blocks (4 rows, 4 depth steps)
    /// transposed in registers; the rest by element.
    fn pack_rows(panel: &mut [f32], a: Strided<f32>, r0: usize, live: usize, k: usize) {
        if live != MR || a.cs != 1 {
            return pack_rows_by_element(panel, a, r0, live, 0..k);
        }
        let row = |i: usize| &a.data[(r0 + i) * a.rs..][..k];
        let rows4 = [row(0), row(1), row(2), row(3)];
        let k4 = k / 4 * 4;
        for kk in (0..k4).step_by(4) {
            let t = F32x4::transpose4(rows4.map(|s| F32x4::load(&s[kk..])));
            for (i, v) in t.into_iter().enumerate() {
                v.store(&mut panel[(kk + i) * MR..]);
            }
        }
        pack_rows_by_element(panel, a, r0, live, k4..k);
    }
    #[inline(always)]
    fn micro(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, rows: usize, cols: usize) {
        let mut acc = [F32x4::zero(); 2 * MR];
        micro_f32(&a[..kc * MR], &b[..kc * NR], &mut acc);
        if rows == MR && cols == NR {
            for r in 0..MR {
                let row = &mut c[r * ldc..r * ldc + NR];
                (F32x4::load(row) + acc[2 * r]).store(row);
                (F32x4::load(&row[4..]) + acc[2 * r + 1]).store(&mut row[4..]);
            }
        } else {
            let mut tile = [[0.0; NR]; MR];
            for (r, t) in tile.iter_mut().enumerate() {
                acc[2 * r].store(&mut t[..4]);
                acc[2 * r + 1].store(&mut t[4..]);
            }
            add_tile(&tile, c, ldc, rows, cols);
        }
    }
}

/// Depth steps per iteration of the f32 micro-kernel's loop (see [`micro_f32`]).
const UNROLL: usize = 4;

/// The f32 register tile: `acc[2r..2r + 2] = Σ_kk a[kk][r] · b[kk][..]` over the packed
/// panels `a` (groups of MR) and `b` (groups of NR). A function of its own, never inlined, its
/// loop unrolled [`UNROLL`] depth steps: Wasmtime checks for an epoch interruption at every
/// loop header, and Cranelift's register allocator keeps the accumulators on the stack across
/// that check (a load and a store of each per iteration), so the unrolled body pays it once per
/// UNROLL steps instead of every step. 4 measured fastest (8: 15-20 % slower, the unrolled
/// body's loads spilled; 2: 10-20 % slower).
#[inline(never)]
fn micro_f32(a: &[f32], b: &[f32], acc: &mut [F32x4; 2 * MR]) {
    let mut t = *acc;
    let (a8, a_rest) = a.as_chunks::<{ MR * UNROLL }>();
    let (b8, b_rest) = b.as_chunks::<{ NR * UNROLL }>();
    for (av, bv) in a8.iter().zip(b8) {
        // written out: LLVM does not always unroll a constant loop of these steps
        macro_rules! steps {
            ($($u:literal)*) => {
                $(step_f32(&mut t, &av[$u * MR..][..MR], &bv[$u * NR..][..NR]);)*
            };
        }
        steps!(0 1 2 3);
    }
    for (av, bv) in a_rest.chunks_exact(MR).zip(b_rest.chunks_exact(NR)) {
        step_f32(&mut t, av, bv);
    }
    *acc = t;
}

/// One depth step of [`micro_f32`]: the 4 A values in one load, each broadcast by a shuffle
/// (a `v128.load32_splat` per value is lowered to a scalar load, a move and a broadcast).
#[inline(always)]
fn step_f32(t: &mut [F32x4; 2 * MR], av: &[f32], bv: &[f32]) {
    let a = F32x4::load(av);
    let (b0, b1) = (F32x4::load(&bv[..4]), F32x4::load(&bv[4..]));
    let s = [
        a.broadcast::<0>(),
        a.broadcast::<1>(),
        a.broadcast::<2>(),
        a.broadcast::<3>(),
    ];
    for r in 0..MR {
        t[2 * r] = t[2 * r].madd(s[r], b0);
        t[2 * r + 1] = t[2 * r + 1].madd(s[r], b1);
    }
}

impl Acc for f64 {
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        self + a * b
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

macro_rules! int_acc {
    ($t:ty) => {
        impl Acc for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                self.wrapping_add(a.wrapping_mul(b))
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn from_f64(v: f64) -> Self {
                v as i64 as $t
            }
        }
    };
}
int_acc!(i32);
int_acc!(i64);

/// A matrix in memory: element `(r, c)` at `data[r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub struct Strided<'a, A> {
    pub data: &'a [A],
    pub rs: usize,
    pub cs: usize,
}

/// Columns `first..first + n` of a right operand of depth `k`, packed into NR-column strips
/// (zero padded), in [`KC`]-deep blocks: block `k0` of strip `s` (`kc` rows of NR) at
/// `k0 * strips * NR + s * kc * NR`.
pub struct PackedB<A> {
    pub k: usize,
    strips: usize,
    pub first: usize,
    data: Vec<A>,
}

impl<A: Acc> PackedB<A> {
    /// Elements held (zero padding included).
    pub fn elements(&self) -> usize {
        self.data.len()
    }

    /// Packs the `k × cols.len()` matrix `b`, which holds the operand's columns `cols`; `None`
    /// when the packed copy would not fit in memory.
    pub fn pack(k: usize, cols: std::ops::Range<usize>, b: Strided<A>) -> Option<Self> {
        let mut p = Self::empty();
        p.pack_into(k, cols, b)?;
        Some(p)
    }

    /// No columns yet: memory for [`PackedB::pack_into`] to fill.
    pub fn empty() -> Self {
        PackedB {
            k: 0,
            strips: 0,
            first: 0,
            data: Vec::new(),
        }
    }

    /// [`PackedB::pack`] into this one's memory (a kernel packing a B per block reuses one).
    pub fn pack_into(
        &mut self,
        k: usize,
        cols: std::ops::Range<usize>,
        b: Strided<A>,
    ) -> Option<()> {
        let n = cols.len();
        let strips = n.div_ceil(NR);
        let len = strips.checked_mul(NR)?.checked_mul(k)?;
        // empty until packed: a failed pack leaves no stale extents behind
        (self.k, self.strips, self.first) = (0, 0, 0);
        let data = &mut self.data;
        data.clear();
        data.try_reserve_exact(len).ok()?;
        data.resize(len, A::ZERO);
        // KC-deep blocks of every strip, one block after the other: the strips a group of
        // [`multiply`] streams lie together (strips of the whole depth, a k-block apart, map
        // to few cache sets when k is a power of two).
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            let level = &mut data[k0 * strips * NR..][..strips * kc * NR];
            for (st, block) in level.chunks_exact_mut(kc * NR).enumerate() {
                let (j0, cols) = (st * NR, NR.min(n - st * NR));
                if b.cs == 1 {
                    for (kk, row) in block.chunks_exact_mut(NR).enumerate() {
                        let at = (k0 + kk) * b.rs + j0;
                        row[..cols].copy_from_slice(&b.data[at..at + cols]);
                    }
                } else if b.rs == 1 {
                    // transposed: each column lies together along k
                    A::pack_columns(block, b.data, j0 * b.cs + k0, b.cs, kc, cols);
                } else {
                    for (kk, row) in block.chunks_exact_mut(NR).enumerate() {
                        let at = (k0 + kk) * b.rs + j0 * b.cs;
                        for (c, v) in row[..cols].iter_mut().enumerate() {
                            *v = b.data[at + c * b.cs];
                        }
                    }
                }
            }
        }
        (self.k, self.strips, self.first) = (k, strips, cols.start);
        Some(())
    }

    /// The packed columns (for [`multiply`]) of the operand's columns `cols`.
    pub fn columns(&self, cols: &std::ops::Range<usize>) -> std::ops::Range<usize> {
        cols.start - self.first..cols.end - self.first
    }
}

/// Packs the `rows × k` matrix `a` into MR-row panels of `k` columns (zero padded) in `out`.
pub fn pack_a<A: Acc>(rows: usize, k: usize, a: Strided<A>, out: &mut Vec<A>) {
    out.clear();
    out.resize(rows.div_ceil(MR) * MR * k, A::ZERO);
    if k == 0 {
        return;
    }
    for (p, panel) in out.chunks_exact_mut(k * MR).enumerate() {
        let live = MR.min(rows - p * MR);
        if a.rs == 1 && a.cs != 1 {
            // transposed: the panel's rows lie together in each column
            for (kk, col) in panel.chunks_exact_mut(MR).enumerate() {
                let at = kk * a.cs + p * MR;
                col[..live].copy_from_slice(&a.data[at..at + live]);
            }
        } else {
            A::pack_rows(panel, a, p * MR, live, k);
        }
    }
}

/// `c = apack · b[.., cols]` for `rows` packed rows ([`pack_a`]) and the packed columns
/// `cols` (starting on a strip); `c` is `rows × cols.len()`, row-major.
#[inline(always)]
pub fn multiply<A: Acc>(
    rows: usize,
    apack: &[A],
    b: &PackedB<A>,
    cols: std::ops::Range<usize>,
    c: &mut Vec<A>,
) {
    let (k, n) = (b.k, cols.len());
    c.clear();
    c.resize(rows * n, A::ZERO);
    if n == 0 {
        return;
    }
    let (first, end) = (cols.start / NR, cols.end.div_ceil(NR));
    let group = NC / NR;
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        for s0 in (first..end).step_by(group) {
            for p in 0..rows.div_ceil(MR) {
                let ap = &apack[p * k * MR + k0 * MR..][..kc * MR];
                let live = MR.min(rows - p * MR);
                for s in s0..end.min(s0 + group) {
                    let bp = &b.data[k0 * b.strips * NR + s * kc * NR..][..kc * NR];
                    let j = s * NR - cols.start;
                    let width = NR.min(n - j);
                    A::micro(kc, ap, bp, &mut c[p * MR * n + j..], n, live, width);
                }
            }
        }
    }
}

/// Work memory of [`product`], reused between calls.
pub struct Work<A> {
    pub apack: Vec<A>,
    pub packed: PackedB<A>,
}

impl<A: Acc> Default for Work<A> {
    fn default() -> Self {
        Work {
            apack: Vec::new(),
            packed: PackedB::empty(),
        }
    }
}

/// `c` (row-major `rows × n`) = `a · b` (`rows × k` by `k × n`): on the device's matrix unit
/// when `A` has one ([`Acc::unit`]), else — or when it refuses — on [`multiply`], packing `b`
/// and `a` (unless `a_packed` holds `a` packed by [`pack_a`]) into `work`.
pub fn product<A: Acc>(
    (rows, n, k): (usize, usize, usize),
    a: Strided<A>,
    a_packed: Option<&[A]>,
    b: Strided<A>,
    work: &mut Work<A>,
    c: &mut Vec<A>,
) {
    if A::UNIT
        && let Some(p) = A::unit(rows, n, k, a, b)
    {
        *c = p;
        return;
    }
    work.packed
        .pack_into(k, 0..n, b)
        .expect("the packed operand fits memory");
    let apack = match a_packed {
        Some(p) => p,
        None => {
            pack_a(rows, k, a, &mut work.apack);
            &work.apack
        }
    };
    multiply(rows, apack, &work.packed, 0..n, c);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<A: Acc + PartialEq + std::fmt::Debug>(
        rows: usize,
        n: usize,
        k: usize,
        of: fn(i64) -> A,
    ) {
        let a = |r: usize, kk: usize| of(((r * 7 + kk * 3) % 11) as i64 - 5);
        let b = |kk: usize, j: usize| of(((kk * 5 + j) % 13) as i64 - 6);
        // A row-major, B column-major (the transposed layouts take the other paths)
        let av: Vec<A> = (0..rows * k).map(|i| a(i / k, i % k)).collect();
        let bv: Vec<A> = (0..k * n).map(|i| b(i % k, i / k)).collect();
        let (bs, as_) = (
            Strided {
                data: &bv,
                rs: 1,
                cs: k,
            },
            Strided {
                data: &av,
                rs: k,
                cs: 1,
            },
        );
        let pb = PackedB::pack(k, 0..n, bs).unwrap();
        let (mut ap, mut c) = (Vec::new(), Vec::new());
        pack_a(rows, k, as_, &mut ap);
        // every column, then the columns from the second strip on
        for j0 in [0, NR].into_iter().filter(|&j| j == 0 || j < n) {
            let w = n - j0;
            multiply(rows, &ap, &pb, j0..n, &mut c);
            for r in 0..rows {
                for j in j0..n {
                    let want = (0..k).fold(A::ZERO, |s, kk| s.mul_add(a(r, kk), b(kk, j)));
                    assert_eq!(c[r * w + j - j0], want, "{rows}x{n}x{k} at ({r}, {j})");
                }
            }
        }
    }

    /// `A · B` by definition.
    fn naive(rows: usize, n: usize, k: usize, a: Strided<f64>, b: Strided<f64>) -> Vec<f64> {
        let at = |m: Strided<f64>, r: usize, c: usize| m.data[r * m.rs + c * m.cs];
        (0..rows * n)
            .map(|i| (0..k).map(|kk| at(a, i / n, kk) * at(b, kk, i % n)).sum())
            .collect()
    }

    #[test]
    fn row_major_blocks_transposed_a_and_a_reused_packing() {
        let buf: Vec<f64> = (0..8000).map(|i| ((i * 5) % 13) as f64 - 6.0).collect();
        let abuf: Vec<f64> = (0..4000).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
        let mut packed = PackedB::empty();
        let (mut ap, mut c) = (Vec::new(), Vec::new());
        // B: a block of a wider row-major matrix starting at an offset (a conv's input rows);
        // A: transposed (rows lie together in each column); the same PackedB packed big, small
        // and big again
        for (rows, n, k, off) in [
            (9, 19, 300, 7),
            (3, 5, 3, 0),
            (9, 19, 300, 11),
            (5, 8, 1, 2),
        ] {
            let b = Strided {
                data: &buf[off..],
                rs: n + 5,
                cs: 1,
            };
            let a = Strided {
                data: &abuf[..],
                rs: 1,
                cs: rows + 2,
            };
            packed.pack_into(k, 0..n, b).unwrap();
            pack_a(rows, k, a, &mut ap);
            multiply(rows, &ap, &packed, 0..n, &mut c);
            assert_eq!(c, naive(rows, n, k, a, b), "{rows}x{n}x{k} at {off}");
        }
    }

    #[test]
    fn packed_products_are_exact_on_small_integers() {
        for (rows, n, k) in [(1, 1, 1), (4, 8, 3), (7, 19, 300), (9, 264, 257), (3, 5, 0)] {
            check::<f32>(rows, n, k, |v| v as f32);
            check::<f64>(rows, n, k, |v| v as f64);
            check::<i32>(rows, n, k, |v| v as i32);
            check::<i64>(rows, n, k, |v| v);
        }
    }
}
