//! CPU kernels, in place (ABI 1.3): `matmul_{T}` (MatMul and Gemm, every served dtype) and
//! `matmulint_{TA}_{TB}` (MatMulInteger) read the parameter blocks of [`crate::plan`]. A block
//! range computes its share of the output rows (over batch × M): per batch it reads and packs
//! B once ([`gemm::PackedB`]), then reads the A rows of a chunk (and Gemm's C rows), multiplies
//! and writes the finished rows at once. Every launch is splittable; `run-cpu` runs the whole
//! grid through the same code ([`umd_sdk::kernel::run_cpu_in_memory`]).

use half::{bf16, f16};
use umd_sdk::dtype::{self, Element};
use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, KernelCall, OpError};

use crate::gemm::{self, Acc, MR, NR, PackedB, Strided};
use crate::plan::Geometry;
use std::ops::Range;

/// Whether `entry_point` names a kernel of this plugin (all of them split by output rows).
pub fn splittable(entry_point: &str) -> bool {
    kernel_of(entry_point).is_ok()
}

enum Kernel {
    Float(Dtype),
    Int(Dtype, Dtype),
}

fn kernel_of(entry: &str) -> Result<Kernel, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{entry}`"));
    let mut parts = entry.split('_');
    let kernel = parts.next();
    let mut dt = || parts.next().and_then(dtype::from_name).ok_or_else(unknown);
    let k = match kernel {
        Some("matmul") => Kernel::Float(dt()?),
        Some("matmulint") => Kernel::Int(dt()?, dt()?),
        _ => return Err(unknown()),
    };
    if parts.next().is_some() {
        return Err(unknown());
    }
    Ok(k)
}

/// Runs the blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    match kernel_of(&call.entry_point)? {
        Kernel::Float(Dtype::F32) => matmul::<f32>(call, mem),
        Kernel::Float(Dtype::F16) => matmul::<f16>(call, mem),
        Kernel::Float(Dtype::Bf16) => matmul::<bf16>(call, mem),
        Kernel::Float(Dtype::F64) => matmul::<f64>(call, mem),
        Kernel::Float(Dtype::I32) => matmul::<i32>(call, mem),
        Kernel::Float(Dtype::I64) => matmul::<i64>(call, mem),
        Kernel::Int(Dtype::U8, Dtype::U8) => matmul_int::<u8, u8>(call, mem),
        Kernel::Int(Dtype::U8, Dtype::I8) => matmul_int::<u8, i8>(call, mem),
        Kernel::Int(Dtype::I8, Dtype::U8) => matmul_int::<i8, u8>(call, mem),
        Kernel::Int(Dtype::I8, Dtype::I8) => matmul_int::<i8, i8>(call, mem),
        _ => Err(unknown()),
    }
}

/// Element `(r, c)` of a block read from a binding lies at `base + r * rs + c * cs`.
struct Block {
    data: Vec<u8>,
    base: usize,
    rs: usize,
    cs: usize,
}

impl Block {
    #[inline(always)]
    fn get<T: Element>(&self, r: usize, c: usize) -> T {
        let s = std::mem::size_of::<T>();
        let at = (self.base + r * self.rs + c * self.cs) * s;
        T::load(&self.data[at..at + s])
    }

    /// Every element of the block's bytes, as `f` maps it (in the block's layout).
    fn decode<T: Element, A>(&self, f: impl Fn(T) -> A) -> Vec<A> {
        let s = std::mem::size_of::<T>();
        self.data[self.base * s..]
            .chunks_exact(s)
            .map(|b| f(T::load(b)))
            .collect()
    }

    /// `values` (from [`Block::decode`]) as a matrix.
    fn view<'a, A>(&self, values: &'a [A]) -> Strided<'a, A> {
        Strided {
            data: values,
            rs: self.rs,
            cs: self.cs,
        }
    }
}

/// Reads `len` bytes from `offset` in pieces of at most 16 MiB.
fn read_span(
    mem: &mut dyn Memory,
    binding: u32,
    offset: u64,
    len: usize,
) -> Result<Vec<u8>, OpError> {
    const PIECE: usize = 16 << 20;
    if len <= PIECE {
        return mem.read(binding, offset, len);
    }
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| OpError::internal(format!("binding {binding}: no memory for {len} bytes")))?;
    kernel::chunks(0..len as u64, PIECE as u64, |lo, hi| {
        out.extend(mem.read(binding, offset + lo, (hi - lo) as usize)?);
        Ok(())
    })?;
    Ok(out)
}

/// Reads the `rows × cols` block of `esize`-byte elements at element `origin` + `r * rs + c *
/// cs`: in one span when little lies between its elements, else line by line along the
/// contiguous direction. The caller has checked that every element lies inside the binding.
fn read_block(
    mem: &mut dyn Memory,
    (binding, esize): (u32, usize),
    origin: u64,
    (rows, rs): (usize, usize),
    (cols, cs): (usize, usize),
) -> Result<Block, OpError> {
    let empty = || Block {
        data: Vec::new(),
        base: 0,
        rs: 0,
        cs: 0,
    };
    if rows == 0 || cols == 0 {
        return Ok(empty());
    }
    let span = (rows - 1)
        .checked_mul(rs)
        .zip((cols - 1).checked_mul(cs))
        .and_then(|(r, c)| r.checked_add(c)?.checked_add(1))
        .filter(|s| s.checked_mul(esize).is_some())
        .ok_or_else(|| {
            OpError::internal(format!(
                "a {rows}x{cols} block of binding {binding} does not fit in memory"
            ))
        })?;
    let needed = rows * cols;
    let at = |e: u64| e * esize as u64;
    if span <= 2 * needed + kernel::CHUNK_BYTES / esize {
        let data = read_span(mem, binding, at(origin), span * esize)?;
        return Ok(Block {
            data,
            base: 0,
            rs,
            cs,
        });
    }
    // Lines along the unit stride (an element at a time when neither is).
    let (lines, ls, len, es) = if rs == 1 && cs != 1 {
        (cols, cs, rows, rs)
    } else {
        (rows, rs, cols, cs)
    };
    let line = (len - 1) * es + 1;
    let mut data = Vec::with_capacity(lines * line * esize);
    for l in 0..lines {
        data.extend(mem.read(binding, at(origin + (l * ls) as u64), line * esize)?);
    }
    Ok(if rs == 1 && cs != 1 {
        Block {
            data,
            base: 0,
            rs: es,
            cs: line,
        }
    } else {
        Block {
            data,
            base: 0,
            rs: line,
            cs: es,
        }
    })
}

/// Width of the column panels the output is shared in: about a quarter of N for large N (at
/// most 8 panels, at least 256 columns), a multiple of the micro-tile width.
pub fn panel_width(n: usize) -> usize {
    n.div_ceil((n / 256).clamp(1, 8)).div_ceil(NR) * NR
}

/// The operands of one launch, checked against the bound sizes.
struct Product {
    g: Geometry,
    a: (u32, usize),
    b: (u32, usize),
    y: (u32, usize),
    /// Output rows over all batches (batch × M).
    rows: u64,
    m: usize,
    n: usize,
    k: usize,
}

/// One past the largest element offset of `dims` (count, stride) from 0; `None` on overflow.
fn extent(dims: &[(u64, u64)]) -> Option<u64> {
    if dims.iter().any(|&(d, _)| d == 0) {
        return Some(0);
    }
    dims.iter()
        .try_fold(1u64, |e, &(d, s)| e.checked_add((d - 1).checked_mul(s)?))
}

/// Checks that `need` elements (`None`: an overflowing count) of `esize` bytes fit in `binding`.
fn check_fits(
    call: &KernelCall,
    what: &str,
    (binding, esize): (u32, usize),
    need: Option<u64>,
) -> Result<(), OpError> {
    let size = call.size_of(binding)?;
    match need.and_then(|e| e.checked_mul(esize as u64)) {
        Some(bytes) if bytes <= size => Ok(()),
        Some(bytes) => Err(OpError::internal(format!(
            "binding {binding} ({what}) holds {size} bytes, the geometry reads {bytes}"
        ))),
        None => Err(OpError::internal(format!(
            "the geometry of {what} overflows 64 bits"
        ))),
    }
}

impl Product {
    fn new(
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
    /// in chunks of at most `chunk`, with `pb` holding B of batch `z` packed (at least columns
    /// `j0..j1`; packed once per distinct B).
    ///
    /// The share is of `panels × (batch × M)` items, column panel by column panel, so that
    /// with many block ranges each packs only the B columns of its panels (and reads only the
    /// rows of A it needs); rows run outermost, so a range that covers every panel of a row
    /// reads its A rows once and writes them whole.
    fn for_each_chunk<A: Acc>(
        &self,
        call: &KernelCall,
        mem: &mut dyn Memory,
        decode_b: impl Fn(&Block) -> Vec<A>,
        mut rows: impl FnMut(
            &mut dyn Memory,
            &PackedB<A>,
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
        let packed_cols = cols(p0, p1);
        let mut cuts = [0, r0, r1, total];
        cuts.sort_unstable();
        let mut packed: Option<(u64, PackedB<A>)> = None;
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
            let mut row = w[0];
            while row < w[1] {
                let (z, i0) = (row / self.g.m, (row % self.g.m) as usize);
                let i1 = (m as u64).min(i0 as u64 + (w[1] - row)) as usize;
                let ob = self.g.batch_offsets(z).1;
                if packed.as_ref().is_none_or(|p| p.0 != ob) {
                    drop(packed.take()); // free the old B before packing the next
                    let j = packed_cols.clone();
                    let blk = read_block(
                        mem,
                        self.b,
                        ob + j.start as u64 * self.g.sbn,
                        (k, self.g.sbk as usize),
                        (j.len(), self.g.sbn as usize),
                    )?;
                    let bv = decode_b(&blk);
                    let pb = PackedB::pack(k, j.clone(), blk.view(&bv)).ok_or_else(|| {
                        OpError::internal(format!("no memory to pack B of {k}x{}", j.len()))
                    })?;
                    packed = Some((ob, pb));
                }
                let pbk = &packed.as_ref().expect("packed above").1;
                let mut at = i0;
                while at < i1 {
                    let end = i1.min(at + chunk);
                    rows(mem, pbk, z, at..end, cols(pa, pb))?;
                    at = end;
                }
                row += (i1 - i0) as u64;
            }
        }
        Ok(())
    }

    /// Reads rows `i0..i1` of A in batch `z`.
    fn read_a(&self, mem: &mut dyn Memory, z: u64, i0: usize, i1: usize) -> Result<Block, OpError> {
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
    fn write_y(
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

/// `matmul_{T}`: MatMul and Gemm (`Y = alpha · A·B + beta · C`).
fn matmul<T: Element>(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError>
where
    T::Compute: Acc,
{
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (a, b) = (r.ptr()?, r.ptr()?);
    let c = if flags & 1 != 0 {
        Some(r.ptr()?)
    } else {
        r.u64()?;
        None
    };
    let y = r.ptr()?;
    let (alpha, beta, scm, scn) = (r.f64()?, r.f64()?, r.u64()?, r.u64()?);
    let g = Geometry::read(&mut r)?;
    let s = std::mem::size_of::<T>();
    let p = Product::new(call, g, (a, s), (b, s), (y, s))?;
    if let Some(c) = c {
        check_fits(call, "C", (c, s), extent(&[(p.g.m, scm), (p.g.n, scn)]))?;
    }
    let (scm, scn) = (scm as usize, scn as usize);
    let (alpha_c, beta_c) = (
        <T::Compute as Acc>::from_f64(alpha),
        <T::Compute as Acc>::from_f64(beta),
    );
    let (mut apack, mut acc, mut out) = (Vec::new(), Vec::new(), Vec::new());
    p.for_each_chunk(
        call,
        mem,
        |blk| blk.decode::<T, _>(|v| v.to_compute()),
        |mem, pb, z, rows, cols| {
            let (i0, i1) = (rows.start, rows.end);
            let ab = p.read_a(mem, z, i0, i1)?;
            let av = ab.decode::<T, _>(|v| v.to_compute());
            gemm::pack_a(i1 - i0, p.k, ab.view(&av), &mut apack);
            gemm::multiply(i1 - i0, &apack, pb, pb.columns(&cols), &mut acc);
            let cb = match c {
                Some(c) => Some(read_block(
                    mem,
                    (c, s),
                    (i0 * scm + cols.start * scn) as u64,
                    (i1 - i0, scm),
                    (cols.len(), scn),
                )?),
                None => None,
            };
            out.clear();
            out.resize(acc.len() * s, 0);
            for (i, (row, o)) in acc
                .chunks_exact(cols.len())
                .zip(out.chunks_exact_mut(cols.len() * s))
                .enumerate()
            {
                for (j, (&v, o)) in row.iter().zip(o.chunks_exact_mut(s)).enumerate() {
                    let mut v = if alpha == 1.0 { v } else { alpha_c.mul(v) };
                    if let Some(cb) = &cb {
                        v = v.add(beta_c.mul(cb.get::<T>(i, j).to_compute()));
                    }
                    T::from_compute(v).store(o);
                }
            }
            p.write_y(mem, z, i0, cols, &out)
        },
    )
}

/// An 8-bit MatMulInteger operand element.
trait Int8: Element {
    fn widen(self) -> i32;
}
impl Int8 for u8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}
impl Int8 for i8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}

/// The zero points of an operand, widened (absent: one zero); `stride` 1: one per row/column.
fn zero_points<T: Int8>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    z: Option<u32>,
    per: u64,
    stride: u64,
) -> Result<Vec<i32>, OpError> {
    let Some(z) = z else { return Ok(vec![0]) };
    let count = match stride {
        0 => 1,
        1 => per,
        s => {
            return Err(OpError::internal(format!(
                "zero point stride {s} is neither 0 nor 1"
            )));
        }
    };
    check_fits(call, "zero point", (z, 1), Some(count))?;
    Ok(read_span(mem, z, 0, count as usize)?
        .into_iter()
        .map(|v| T::load(&[v]).widen())
        .collect())
}

/// `matmulint_{TA}_{TB}`: `(A - a_zero_point) · (B - b_zero_point)` in wrapping i32.
fn matmul_int<TA: Int8, TB: Int8>(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (a, b) = (r.ptr()?, r.ptr()?);
    let mut zp = |bit: u32| -> Result<Option<u32>, OpError> {
        if flags & bit != 0 {
            r.ptr().map(Some)
        } else {
            r.u64().map(|_| None)
        }
    };
    let (az, bz) = (zp(1)?, zp(2)?);
    let y = r.ptr()?;
    let (azs, bzs) = (r.u64()?, r.u64()?);
    let g = Geometry::read(&mut r)?;
    let p = Product::new(call, g, (a, 1), (b, 1), (y, 4))?;
    let za = zero_points::<TA>(call, mem, az, p.g.m, azs)?;
    let zb = zero_points::<TB>(call, mem, bz, p.g.n, bzs)?;
    let (azs, bzs) = ((za.len() > 1) as usize, (zb.len() > 1) as usize);
    let (mut apack, mut acc, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let decode_b = |blk: &Block| {
        let mut bv = blk.decode::<TB, _>(TB::widen);
        for kk in 0..p.k {
            for j in 0..p.n {
                bv[kk * blk.rs + j * blk.cs] -= zb[j * bzs];
            }
        }
        bv
    };
    p.for_each_chunk(call, mem, decode_b, |mem, pb, z, rows, cols| {
        let (i0, i1) = (rows.start, rows.end);
        let ab = p.read_a(mem, z, i0, i1)?;
        let mut av = ab.decode::<TA, _>(TA::widen);
        for r in 0..i1 - i0 {
            for kk in 0..p.k {
                av[r * ab.rs + kk * ab.cs] -= za[(i0 + r) * azs];
            }
        }
        gemm::pack_a(i1 - i0, p.k, ab.view(&av), &mut apack);
        gemm::multiply(i1 - i0, &apack, pb, pb.columns(&cols), &mut acc);
        out.clear();
        out.extend(acc.iter().flat_map(|v| v.to_le_bytes()));
        p.write_y(mem, z, i0, cols, &out)
    })
}
