//! In-place, splittable CPU kernels (ABI 1.3) for the data-movement launches: `copy`, Gather,
//! GatherElements, GatherND, Pad, DepthToSpace/SpaceToDepth and Resize (nearest and
//! interpolating). Each writes its output element for element from the same index mapping as
//! the whole-buffer kernels they replaced (kept, test-only, as the oracle `tests/oracle`), so
//! both give the same bytes.
//!
//! A block range computes its share of the `n` output elements ([`KernelCall::share`]) in
//! chunks of about [`kernel::CHUNK_BYTES`]; a chunk's sources are read as one span of the input
//! ([`Slab`], kept while the next chunks fall inside it) — Gather and GatherND with rows of at
//! least [`ROW_READ_BYTES`] read each source row on its own instead. Every range writes only its
//! own elements and reads only inputs, so every one of these launches is splittable.
//!
//! Not converted, run whole through `run-cpu` ([`kernel::run_via_cpu_call`]): the scatter
//! launches of ScatterElements/ScatterND (their writes go where the indices say, duplicates
//! included — `reduction = none` keeps the last update, the others combine in update order —
//! so no range of updates owns a range of output bytes, and the launch cannot be split; the
//! `copy` launch before them is in place and split), and OneHot.

use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{CpuCall, CpuWrite, Dtype, KernelCall, OpError, dtype};

use crate::common::{self, by_size, norm_index};
use crate::gather::{ElementsParams, GatherParams, NdParams};
use crate::layout::{BlockParams, block_channel};
use crate::pad::{PadParams, map_coord};
use crate::resize_core::{self as rc, Pick, ResizeParams, Saturate};

/// Rows (Gather's `inner`, GatherND's slices) at least this long are read one by one;
/// shorter ones from a span of the data.
pub const ROW_READ_BYTES: u64 = 512;
/// The most bytes asked of the host in one read (its limit is 64 MiB).
const MAX_READ: u64 = 32 << 20;

/// What a launch runs, from its module and entry point.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kernel {
    Copy(usize),
    Gather(usize),
    Elements(usize),
    Nd(usize),
    Pad(usize, bool),
    Block(usize, bool),
    Nearest(usize),
    Interp(Dtype),
    /// Scatter and OneHot: whole grid through `run-cpu`.
    Whole,
}

fn decode(module: &str, entry: &str) -> Option<Kernel> {
    if let Some(ms) = module.strip_prefix("gather_move_s") {
        let (base, size) = common::split_size(entry)?;
        if ms != size.to_string() {
            return None;
        }
        return Some(match base {
            "copy" => Kernel::Copy(size),
            "gather" => Kernel::Gather(size),
            "gather_elements" => Kernel::Elements(size),
            "gather_nd" => Kernel::Nd(size),
            "pad" => Kernel::Pad(size, false),
            "pad_cptr" => Kernel::Pad(size, true),
            "d2s" => Kernel::Block(size, true),
            "s2d" => Kernel::Block(size, false),
            "resize_nearest" => Kernel::Nearest(size),
            "scatter_elements" | "scatter_nd" => Kernel::Whole,
            _ => return None,
        });
    }
    if let Some(d) = module.strip_prefix("gather_resize_") {
        return Some(Kernel::Interp(dtype::from_name(d)?));
    }
    (module.starts_with("gather_scatter_") || module.starts_with("gather_onehot_"))
        .then_some(Kernel::Whole)
}

/// Whether distinct block ranges of a launch may run concurrently: every in-place kernel.
pub fn splittable(module: &str, entry: &str) -> bool {
    !matches!(decode(module, entry), None | Some(Kernel::Whole))
}

/// `run-cpu`: the in-place kernels over the call's buffers in memory, or the whole-buffer
/// kernels (scatter, OneHot, unknown entry points).
pub fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    if splittable(&call.module_id, &call.entry_point) {
        kernel::run_cpu_in_memory::<crate::GatherPlugin>(call)
    } else {
        crate::run_cpu(&call)
    }
}

/// Runs blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let k = decode(&call.module_id, &call.entry_point)
        .ok_or_else(|| common::unknown_entry(&call.module_id, &call.entry_point))?;
    let mut r = ParamReader::new(&call.params, &call.relocations);
    match k {
        Kernel::Whole => kernel::run_via_cpu_call::<crate::GatherPlugin>(call, mem),
        Kernel::Copy(s) => copy(call, mem, &mut r, s),
        Kernel::Gather(s) => gather(call, mem, &mut r, s),
        Kernel::Elements(s) => by_size!(s, elements(call, mem, &mut r)),
        Kernel::Nd(s) => nd(call, mem, &mut r, s),
        Kernel::Pad(s, cptr) => by_size!(s, pad(call, mem, &mut r, cptr)),
        Kernel::Block(s, to_space) => by_size!(s, block(call, mem, &mut r, to_space)),
        Kernel::Nearest(s) => by_size!(s, nearest(call, mem, &mut r)),
        Kernel::Interp(dt) => match dt {
            Dtype::F32 => interp::<f32>(call, mem, &mut r),
            Dtype::F16 => interp::<half::f16>(call, mem, &mut r),
            Dtype::Bf16 => interp::<half::bf16>(call, mem, &mut r),
            Dtype::F64 => interp::<f64>(call, mem, &mut r),
            Dtype::I32 => interp::<i32>(call, mem, &mut r),
            Dtype::I64 => interp::<i64>(call, mem, &mut r),
            Dtype::I8 => interp::<i8>(call, mem, &mut r),
            Dtype::U8 => interp::<u8>(call, mem, &mut r),
            Dtype::I16 => interp::<i16>(call, mem, &mut r),
            Dtype::U16 => interp::<u16>(call, mem, &mut r),
            Dtype::U32 => interp::<u32>(call, mem, &mut r),
            Dtype::U64 => interp::<u64>(call, mem, &mut r),
            _ => Err(common::unknown_entry(&call.module_id, &call.entry_point)),
        },
    }
}

/// Bytes `off .. off + len` of `binding`, in reads of at most [`MAX_READ`].
fn read(mem: &mut dyn Memory, binding: u32, off: u64, len: u64) -> Result<Vec<u8>, OpError> {
    if len <= MAX_READ {
        return mem.read(binding, off, len as usize);
    }
    let mut v = Vec::with_capacity(len as usize);
    kernel::chunks(off..off + len, MAX_READ, |a, b| {
        v.extend_from_slice(&mem.read(binding, a, (b - a) as usize)?);
        Ok(())
    })?;
    Ok(v)
}

/// A span of an input's elements (of `S` bytes), read once and kept while the chunks that
/// follow need only what it holds.
struct Slab {
    binding: u32,
    size: u64,
    start: u64,
    data: Vec<u8>,
}

impl Slab {
    fn new(binding: u32, size: usize) -> Self {
        Slab {
            binding,
            size: size as u64,
            start: 0,
            data: Vec::new(),
        }
    }

    /// Makes elements `a..b` available (reading them unless already held).
    fn ensure(&mut self, mem: &mut dyn Memory, a: u64, b: u64) -> Result<(), OpError> {
        let end = self.start + self.data.len() as u64 / self.size;
        if b <= a || (a >= self.start && b <= end) {
            return Ok(());
        }
        self.data = read(mem, self.binding, a * self.size, (b - a) * self.size)?;
        self.start = a;
        Ok(())
    }

    /// Element `i` (held) as `S` bytes.
    #[inline(always)]
    fn elem<const S: usize>(&self, i: u64) -> &[u8] {
        let at = (i - self.start) as usize * S;
        &self.data[at..at + S]
    }
}

/// Calls `f(lo, hi, out)` for the chunks of this range's share of `n` output elements of
/// `size` bytes and writes each `out` (zeroed, `hi - lo` elements) to `binding`.
fn out_chunks(
    call: &KernelCall,
    mem: &mut dyn Memory,
    binding: u32,
    n: u64,
    size: usize,
    mut f: impl FnMut(&mut dyn Memory, u64, u64, &mut [u8]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    call.require_size(binding, n.saturating_mul(size as u64), "output")?;
    let step = (kernel::CHUNK_BYTES / size.max(1)).max(1) as u64;
    let mut out = Vec::new();
    kernel::chunks(call.share(n), step, |lo, hi| {
        out.clear();
        out.resize((hi - lo) as usize * size, 0);
        f(mem, lo, hi, &mut out)?;
        mem.write(binding, lo * size as u64, &out)
    })
}

/// `copy_s{S}`: `(src, out, n)`, chunk by chunk.
fn copy(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
    size: usize,
) -> Result<(), OpError> {
    let (src, out, n) = (r.ptr()?, r.ptr()?, r.u64()?);
    call.require_size(src, n.saturating_mul(size as u64), "source")?;
    out_chunks(call, mem, out, n, size, |mem, lo, hi, o| {
        let s = size as u64;
        o.copy_from_slice(&mem.read(src, lo * s, ((hi - lo) * s) as usize)?);
        Ok(())
    })
}

/// The indices `a..b` of an index buffer (i32 or i64), decoded.
fn indices(
    mem: &mut dyn Memory,
    binding: u32,
    is64: bool,
    (a, b): (u64, u64),
) -> Result<Vec<i64>, OpError> {
    let isz = if is64 { 8 } else { 4 };
    let bytes = read(mem, binding, a * isz, (b - a) * isz)?;
    Ok(common::decode_indices(&bytes, is64, (b - a) as usize))
}

/// Copies `len` bytes of rows into `out`, merging consecutive source rows into one read.
struct RowReads {
    runs: Vec<(u64, usize, usize)>,
}

impl RowReads {
    /// Queues `len` bytes from byte `src` of the input to byte `dst` of the chunk.
    fn push(&mut self, src: u64, dst: usize, len: usize) {
        if let Some(last) = self.runs.last_mut()
            && last.0 + last.2 as u64 == src
            && last.1 + last.2 == dst
        {
            last.2 += len;
            return;
        }
        self.runs.push((src, dst, len));
    }

    fn flush(&mut self, mem: &mut dyn Memory, binding: u32, out: &mut [u8]) -> Result<(), OpError> {
        for (src, dst, len) in self.runs.drain(..) {
            out[dst..dst + len].copy_from_slice(&read(mem, binding, src, len as u64)?);
        }
        Ok(())
    }
}

/// `gather_s{S}`: `out[o, j, i] = data[o, idx[j], i]` (zero for an index out of range).
fn gather(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
    size: usize,
) -> Result<(), OpError> {
    let (data, idx, out) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let p = GatherParams {
        n: r.u64()?,
        inner: r.u64()?,
        nidx: r.u64()?,
        axis_dim: r.u64()?,
        idx64: r.u32()? != 0,
    };
    call.require_size(idx, p.nidx * if p.idx64 { 8 } else { 4 }, "indices")?;
    if p.n == 0 {
        return call.require_size(out, 0, "output");
    }
    let (inner, nidx, s) = (p.inner, p.nidx, size as u64);
    let outer = p.n / (inner * nidx);
    call.require_size(data, outer * p.axis_dim * inner * s, "data")?;
    let row = inner * s;
    let by_row = row >= ROW_READ_BYTES;
    let mut slab = Slab::new(data, size);
    let mut reads = RowReads { runs: Vec::new() };
    let mut all_idx: Option<Vec<i64>> = None;
    out_chunks(call, mem, out, p.n, size, |mem, lo, hi, o| {
        // output rows (o, j) the chunk touches, and their indices
        let (r0, r1) = (lo / inner, (hi - 1) / inner + 1);
        let (j0, q0) = (r0 % nidx, r0 / nidx);
        let single = (r1 - 1) / nidx == q0;
        let local = if single {
            indices(mem, idx, p.idx64, (j0, j0 + (r1 - r0)))?
        } else {
            if all_idx.is_none() {
                all_idx = Some(indices(mem, idx, p.idx64, (0, nidx))?);
            }
            Vec::new()
        };
        let all = all_idx.as_deref().unwrap_or_default();
        for rr in r0..r1 {
            let (q, j) = (rr / nidx, rr % nidx);
            let kj = if single {
                local[(rr - r0) as usize]
            } else {
                all[j as usize]
            };
            let Some(k) = norm_index(kj, p.axis_dim) else {
                continue; // zeros
            };
            let (a, b) = ((rr * inner).max(lo), ((rr + 1) * inner).min(hi));
            let src = (q * p.axis_dim + k) * inner + (a - rr * inner);
            let dst = ((a - lo) * s) as usize;
            if by_row {
                reads.push(src * s, dst, ((b - a) * s) as usize);
            } else {
                let slab_lo = q * p.axis_dim * inner;
                slab.ensure(mem, slab_lo, slab_lo + p.axis_dim * inner)?;
                let at = ((src - slab.start) * s) as usize;
                o[dst..dst + ((b - a) * s) as usize]
                    .copy_from_slice(&slab.data[at..at + ((b - a) * s) as usize]);
            }
        }
        reads.flush(mem, data, o)
    })
}

/// `gather_elements_s{S}`: `out[i] = data[i with i[axis] = idx[i]]`.
fn elements<const S: usize>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
) -> Result<(), OpError> {
    let (data, idx, out) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let p = ElementsParams {
        n: r.u64()?,
        rank: r.u32()?,
        axis: r.u32()?,
        idx64: r.u32()? != 0,
        odims: r.u64_array()?,
        dstrides: r.u64_array()?,
        axis_dim: r.u64()?,
    };
    let (rank, axis) = (p.rank as usize, p.axis as usize);
    if p.n == 0 || rank == 0 || rank > MAX_RANK || axis >= rank {
        return call.require_size(out, 0, "output");
    }
    call.require_size(idx, p.n * if p.idx64 { 8 } else { 4 }, "indices")?;
    let extent: u64 = (0..rank)
        .map(|d| {
            let dim = if d == axis { p.axis_dim } else { p.odims[d] };
            dim.saturating_sub(1) * p.dstrides[d]
        })
        .sum::<u64>()
        + 1;
    call.require_size(data, extent * S as u64, "data")?;
    let mut slab = Slab::new(data, S);
    out_chunks(call, mem, out, p.n, S, |mem, lo, hi, o| {
        let ks = indices(mem, idx, p.idx64, (lo, hi))?;
        let mut coord = unravel(lo, &p.odims[..rank]);
        // the data span this chunk may read: its rows of dimension 0, or everything
        let (a, b) = if axis == 0 {
            (0, extent)
        } else {
            let last = unravel(hi - 1, &p.odims[..rank]);
            let d0 = p.dstrides[0];
            (coord[0] * d0, ((last[0] + 1) * d0).min(extent))
        };
        slab.ensure(mem, a, b)?;
        let mut base: u64 = (0..rank)
            .filter(|&d| d != axis)
            .map(|d| coord[d] * p.dstrides[d])
            .sum();
        for (i, &k) in ks.iter().enumerate() {
            if let Some(k) = norm_index(k, p.axis_dim) {
                let src = base + k * p.dstrides[axis];
                o[i * S..i * S + S].copy_from_slice(slab.elem::<S>(src));
            }
            for d in (0..rank).rev() {
                coord[d] += 1;
                if d != axis {
                    base += p.dstrides[d];
                }
                if coord[d] < p.odims[d] {
                    break;
                }
                if d != axis {
                    base -= p.dstrides[d] * coord[d];
                }
                coord[d] = 0;
            }
        }
        Ok(())
    })
}

/// The coordinates of flat index `i` over `dims` (row-major).
fn unravel(mut i: u64, dims: &[u64]) -> [u64; MAX_RANK] {
    let mut c = [0u64; MAX_RANK];
    for d in (0..dims.len()).rev() {
        c[d] = i % dims[d].max(1);
        i /= dims[d].max(1);
    }
    c
}

/// `gather_nd_s{S}`: `out[t, s] = data[batch(t), idx[t, 0..k], s]`.
fn nd(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
    size: usize,
) -> Result<(), OpError> {
    let (data, idx, out) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let p = NdParams {
        n: r.u64()?,
        slice: r.u64()?,
        k: r.u64()?,
        per_batch: r.u64()?,
        batch_stride: r.u64()?,
        idx64: r.u32()? != 0,
        ddims: r.u64_array()?,
        dstrides: r.u64_array()?,
    };
    if p.n == 0 || p.slice == 0 {
        return call.require_size(out, 0, "output");
    }
    let (k, slice, s) = (p.k, p.slice, size as u64);
    let tuples = p.n / slice;
    let batches = tuples / p.per_batch.max(1);
    call.require_size(idx, tuples * k * if p.idx64 { 8 } else { 4 }, "indices")?;
    call.require_size(data, batches * p.batch_stride * s, "data")?;
    let by_row = slice * s >= ROW_READ_BYTES;
    let mut slab = Slab::new(data, size);
    let mut reads = RowReads { runs: Vec::new() };
    out_chunks(call, mem, out, p.n, size, |mem, lo, hi, o| {
        let (t0, t1) = (lo / slice, (hi - 1) / slice + 1);
        let ks = indices(mem, idx, p.idx64, (t0 * k, t1 * k))?;
        if !by_row {
            // the batches of the chunk's tuples
            let (b0, b1) = (t0 / p.per_batch.max(1), (t1 - 1) / p.per_batch.max(1) + 1);
            slab.ensure(mem, b0 * p.batch_stride, b1.min(batches) * p.batch_stride)?;
        }
        'tuple: for t in t0..t1 {
            let mut src = (t / p.per_batch) * p.batch_stride;
            let tk = ((t - t0) * k) as usize;
            for j in 0..k as usize {
                match norm_index(ks[tk + j], p.ddims[j]) {
                    Some(v) => src += v * p.dstrides[j],
                    None => continue 'tuple,
                }
            }
            let (a, b) = ((t * slice).max(lo), ((t + 1) * slice).min(hi));
            let src = src + (a - t * slice);
            let (dst, len) = (((a - lo) * s) as usize, ((b - a) * s) as usize);
            if by_row {
                reads.push(src * s, dst, len);
            } else {
                let at = ((src - slab.start) * s) as usize;
                o[dst..dst + len].copy_from_slice(&slab.data[at..at + len]);
            }
        }
        reads.flush(mem, data, o)
    })
}

/// `pad_s{S}` / `pad_cptr_s{S}`: rows of the last dimension, each element copied from its
/// mapped source or set to the pad value.
fn pad<const S: usize>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
    cptr: bool,
) -> Result<(), OpError> {
    let x = r.ptr()?;
    let cval = if cptr { Some(r.ptr()?) } else { None };
    let out = r.ptr()?;
    let mut p = PadParams {
        n: r.u64()?,
        rank: r.u32()?,
        mode: r.u32()?,
        odims: r.u64_array()?,
        idims: r.u64_array()?,
        begin: r.u64_array::<MAX_RANK>()?.map(|b| b as i64),
        value_bits: 0,
    };
    match cval {
        Some(c) => {
            call.require_size(c, S as u64, "constant value")?;
            let b = mem.read(c, 0, S)?;
            let mut v = [0u8; 8];
            v[..S].copy_from_slice(&b);
            p.value_bits = u64::from_le_bytes(v);
        }
        None => p.value_bits = r.u64()?,
    }
    if p.rank as usize > MAX_RANK {
        return Err(OpError::internal("pad: rank over 8"));
    }
    let rank = p.rank as usize;
    let in_n = shape::numel(&p.idims[..rank])?;
    if p.n == 0 {
        return call.require_size(out, 0, "output");
    }
    call.require_size(x, in_n * S as u64, "input")?;
    let fill = p.value_bits.to_le_bytes();
    let mut slab = Slab::new(x, S);
    if rank == 0 {
        return out_chunks(call, mem, out, p.n, S, |mem, _, _, o| {
            slab.ensure(mem, 0, 1)?;
            o.copy_from_slice(slab.elem::<S>(0));
            Ok(())
        });
    }
    let last = rank - 1;
    let istr = common::strides(&p.idims[..rank]);
    let ow = p.odims[last];
    let cols: Vec<Option<u64>> = (0..ow)
        .map(|c| map_coord(p.mode, c, p.begin[last], p.idims[last]))
        .collect();
    let (cmin, cmax) = min_max(cols.iter().flatten().copied());
    out_chunks(call, mem, out, p.n, S, |mem, lo, hi, o| {
        let (r0, r1) = (lo / ow, (hi - 1) / ow + 1);
        // each row's source offset (None: all pad), and the span they reach
        let mut bases = Vec::with_capacity((r1 - r0) as usize);
        let mut coord = unravel(r0, &p.odims[..last]);
        for _ in r0..r1 {
            let mut base = Some(0u64);
            for d in 0..last {
                base = match (base, map_coord(p.mode, coord[d], p.begin[d], p.idims[d])) {
                    (Some(b), Some(i)) => Some(b + i * istr[d]),
                    _ => None,
                };
            }
            bases.push(base);
            for d in (0..last).rev() {
                coord[d] += 1;
                if coord[d] < p.odims[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
        if let (Some(cmin), Some(cmax)) = (cmin, cmax) {
            let (bmin, bmax) = min_max(bases.iter().flatten().copied());
            if let (Some(bmin), Some(bmax)) = (bmin, bmax) {
                slab.ensure(mem, bmin + cmin, bmax + cmax + 1)?;
            }
        }
        for (rr, base) in (r0..r1).zip(&bases) {
            let (a, b) = ((rr * ow).max(lo), ((rr + 1) * ow).min(hi));
            for e in a..b {
                let dst = ((e - lo) as usize) * S;
                let src = match (base, cols[(e - rr * ow) as usize]) {
                    (Some(b), Some(i)) => slab.elem::<S>(b + i),
                    _ => &fill[..S],
                };
                o[dst..dst + S].copy_from_slice(src);
            }
        }
        Ok(())
    })
}

/// The least and greatest of `it` (`None` when empty).
fn min_max(it: impl Iterator<Item = u64>) -> (Option<u64>, Option<u64>) {
    it.fold((None, None), |(lo, hi), v| {
        (
            Some(lo.map_or(v, |l: u64| l.min(v))),
            Some(hi.map_or(v, |h: u64| h.max(v))),
        )
    })
}

/// `d2s_s{S}` (DepthToSpace, `to_space`) and `s2d_s{S}`: each output element from its source
/// in the same batch.
fn block<const S: usize>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
    to_space: bool,
) -> Result<(), OpError> {
    let (x, out) = (r.ptr()?, r.ptr()?);
    let p = BlockParams {
        n: r.u64()?,
        c: r.u64()?,
        h: r.u64()?,
        w: r.u64()?,
        b: r.u64()?,
        crd: r.u32()? != 0,
    };
    call.require_size(x, p.n.saturating_mul(S as u64), "input")?;
    if p.n == 0 {
        return call.require_size(out, 0, "output");
    }
    let (c, h, w, b) = (p.c, p.h, p.w, p.b);
    let (hd, wd, cd) = (h / b, w / b, c * b * b);
    let batch = c * h * w;
    let mut slab = Slab::new(x, S);
    out_chunks(call, mem, out, p.n, S, |mem, lo, hi, o| {
        slab.ensure(mem, lo / batch * batch, ((hi - 1) / batch + 1) * batch)?;
        for e in lo..hi {
            let src = if to_space {
                // e = ((nb * c + ci) * h + y) * w + xx (shallow); source deep
                let (xx, y, ci, nb) = (e % w, e / w % h, e / (w * h) % c, e / batch);
                let dc = block_channel(p.crd, ci, c, b, y % b, xx % b);
                ((nb * cd + dc) * hd + y / b) * wd + xx / b
            } else {
                // e = ((nb * cd + dc) * hd + hh) * wd + ww (deep); source shallow
                let (ww, hh, dc, nb) = (e % wd, e / wd % hd, e / (wd * hd) % cd, e / batch);
                let (ci, bh, bw) = if p.crd {
                    (dc / (b * b), dc / b % b, dc % b)
                } else {
                    (dc % c, dc / c / b, dc / c % b)
                };
                ((nb * c + ci) * h + hh * b + bh) * w + ww * b + bw
            };
            let dst = (e - lo) as usize * S;
            o[dst..dst + S].copy_from_slice(slab.elem::<S>(src));
        }
        Ok(())
    })
}

/// A nearest-mode level's pick along its axis, or the bits it stores (0 or the extrapolation
/// value).
#[derive(Clone, Copy)]
enum Src {
    At(u64),
    Fill(u64),
}

fn pick_src(p: &ResizeParams, pick: Pick) -> Src {
    match pick {
        Pick::Index(i) => Src::At(i),
        Pick::Zero => Src::Fill(0),
        Pick::Extrapolated => Src::Fill(p.ev_bits),
    }
}

/// `resize_nearest_s{S}`: per output row of the last dimension, the source row from the outer
/// coordinates' picks and each column's pick along the last axis — as the whole-buffer kernel did,
/// the outermost level (in level order, last first) that gives a fill value decides the value.
fn nearest<const S: usize>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
) -> Result<(), OpError> {
    let (x, out) = (r.ptr()?, r.ptr()?);
    let p = ResizeParams::read(r)?;
    let rank = p.rank as usize;
    if p.n == 0 {
        return call.require_size(out, 0, "output");
    }
    let in_n = shape::numel(&p.idims[..rank])?;
    call.require_size(x, in_n * S as u64, "input")?;
    let mut slab = Slab::new(x, S);
    if rank == 0 {
        return out_chunks(call, mem, out, p.n, S, |mem, _, _, o| {
            slab.ensure(mem, 0, 1)?;
            o.copy_from_slice(slab.elem::<S>(0));
            Ok(())
        });
    }
    let istr = common::strides(&p.idims[..rank]);
    let nlev = p.nlev as usize;
    let last = rank - 1;
    // the level of each axis (None: passes through)
    let mut level_of = [None; MAX_RANK];
    for l in 0..nlev {
        level_of[p.levaxis[l] as usize] = Some(l);
    }
    let picks: Vec<Vec<Src>> = (0..rank)
        .map(|d| match level_of[d] {
            Some(_) => (0..p.odims[d])
                .map(|y| pick_src(&p, rc::nearest_pick(&p, d, y)))
                .collect(),
            None => (0..p.odims[d]).map(Src::At).collect(),
        })
        .collect();
    let ow = p.odims[last];
    let last_level = level_of[last];
    // the columns: source offset or fill bits
    let cols: Vec<Src> = picks[last]
        .iter()
        .map(|s| match s {
            Src::At(i) => Src::At(i * istr[last]),
            f => *f,
        })
        .collect();
    let at_cols = cols.iter().filter_map(|s| match s {
        Src::At(i) => Some(*i),
        Src::Fill(_) => None,
    });
    let (cmin, cmax) = min_max(at_cols);
    // when no column fills: each column's byte offset from the least source
    let col_rel: Option<Vec<usize>> = cols
        .iter()
        .map(|c| match c {
            Src::At(i) => Some((i - cmin.unwrap_or(0)) as usize * S),
            Src::Fill(_) => None,
        })
        .collect();
    out_chunks(call, mem, out, p.n, S, |mem, lo, hi, o| {
        let (r0, r1) = (lo / ow, (hi - 1) / ow + 1);
        // per row: the source base, the fill of a level outside the last axis's (it wins),
        // and the fill of a level inside it (the column's fill wins over it)
        let mut rows = Vec::with_capacity((r1 - r0) as usize);
        let mut coord = unravel(r0, &p.odims[..last]);
        for _ in r0..r1 {
            let mut base = 0u64;
            let (mut outside, mut inside): (Fill, Fill) = (None, None);
            for d in 0..last {
                match picks[d][coord[d] as usize] {
                    Src::At(i) => base += i * istr[d],
                    Src::Fill(bits) => {
                        let l = level_of[d].expect("a fill comes from a level");
                        let outer = last_level.is_none_or(|ll| l > ll);
                        let slot = if outer { &mut outside } else { &mut inside };
                        // the greatest level is met first
                        if slot.is_none_or(|(sl, _)| l > sl) {
                            *slot = Some((l, bits));
                        }
                    }
                }
            }
            rows.push((base, outside.map(|s| s.1), inside.map(|s| s.1)));
            for d in (0..last).rev() {
                coord[d] += 1;
                if coord[d] < p.odims[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
        if let (Some(cmin), Some(cmax)) = (cmin, cmax) {
            let live = rows
                .iter()
                .filter(|(_, out, inn)| out.is_none() && inn.is_none())
                .map(|(b, _, _)| *b);
            if let (Some(bmin), Some(bmax)) = min_max(live) {
                slab.ensure(mem, bmin + cmin, bmax + cmax + 1)?;
            }
        }
        for (rr, &(base, outside, inside)) in (r0..r1).zip(&rows) {
            let (a, b) = ((rr * ow).max(lo), ((rr + 1) * ow).min(hi));
            let dst0 = (a - lo) as usize * S;
            let dst = &mut o[dst0..dst0 + (b - a) as usize * S];
            let cs = &cols[(a - rr * ow) as usize..(b - rr * ow) as usize];
            if let Some(bits) = outside {
                fill_with::<S>(dst, bits);
                continue;
            }
            if let (Some(rel), None, Some(cmin)) = (&col_rel, inside, cmin) {
                // every column copies: byte offsets from the row's first source
                let src = &slab.data[((base + cmin - slab.start) as usize) * S..];
                let rel = &rel[(a - rr * ow) as usize..(b - rr * ow) as usize];
                for (d, &i) in dst.chunks_exact_mut(S).zip(rel) {
                    d.copy_from_slice(&src[i..i + S]);
                }
                continue;
            }
            for (d, c) in dst.chunks_exact_mut(S).zip(cs) {
                match (*c, inside) {
                    (Src::Fill(bits), _) | (Src::At(_), Some(bits)) => {
                        d.copy_from_slice(&bits.to_le_bytes()[..S])
                    }
                    (Src::At(i), None) => d.copy_from_slice(slab.elem::<S>(base + i)),
                }
            }
        }
        Ok(())
    })
}

/// A fill value and the level it comes from.
type Fill = Option<(usize, u64)>;

fn fill_with<const S: usize>(dst: &mut [u8], bits: u64) {
    let b = bits.to_le_bytes();
    for d in dst.chunks_exact_mut(S) {
        d.copy_from_slice(&b[..S]);
    }
}

/// `resize_interp_{T}`: per output, the nested weighted sum the whole-buffer kernel took, over
/// the span of input its taps reach.
fn interp<T: Saturate>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: &mut ParamReader,
) -> Result<(), OpError> {
    let s = std::mem::size_of::<T>();
    let (x, out) = (r.ptr()?, r.ptr()?);
    let p = ResizeParams::read(r)?;
    let rank = p.rank as usize;
    if p.n == 0 {
        return call.require_size(out, 0, "output");
    }
    let in_n = shape::numel(&p.idims[..rank])?;
    call.require_size(x, in_n * s as u64, "input")?;
    let istr = common::strides(&p.idims[..rank]);
    let tables = rc::level_tables(&p);
    let k = tables.len();
    // per level and output coordinate: the least and greatest tap offset
    let reach: Vec<Vec<(u64, u64)>> = tables
        .iter()
        .map(|t| {
            (0..p.odims[t.axis] as usize)
                .map(|y| {
                    let offs = t.index[y * t.n..(y + 1) * t.n]
                        .iter()
                        .map(|i| i * istr[t.axis]);
                    let (a, b) = min_max(offs);
                    (a.unwrap_or(0), b.unwrap_or(0))
                })
                .collect()
        })
        .collect();
    let mut slab = Slab::new(x, s);
    out_chunks(call, mem, out, p.n, s, |mem, lo, hi, o| {
        // the span the chunk's outputs reach
        let (mut a, mut b) = (u64::MAX, 0u64);
        let mut c = unravel(lo, &p.odims[..rank]);
        for _ in lo..hi {
            let base = rc::identity_base(&p, &c, &istr);
            let (mut lo_o, mut hi_o) = (base, base);
            for (t, rch) in tables.iter().zip(&reach) {
                let (l, h) = rch[c[t.axis] as usize];
                lo_o += l;
                hi_o += h;
            }
            a = a.min(lo_o);
            b = b.max(hi_o + 1);
            step(&mut c, &p.odims[..rank]);
        }
        slab.ensure(mem, a, b)?;
        let load = |i: u64| {
            let at = (i - slab.start) as usize * s;
            T::load(&slab.data[at..at + s]).to_f64()
        };
        let mut c = unravel(lo, &p.odims[..rank]);
        for e in 0..(hi - lo) as usize {
            let base = rc::identity_base(&p, &c, &istr);
            // the outermost extrapolated level hides every level inside it
            let lev = (0..k)
                .rev()
                .find(|&l| tables[l].extrapolated[c[tables[l].axis] as usize])
                .map(|l| l + 1);
            let leaf_ev = lev.is_some();
            let lev = lev.unwrap_or(0);
            let v = if lev == k {
                if leaf_ev { p.ev } else { load(base) }
            } else {
                rc::nested_sum(&tables[lev..], &c, &istr, base, |i| {
                    if leaf_ev { p.ev } else { load(i) }
                })
            };
            T::saturate(v).store(&mut o[e * s..e * s + s]);
            step(&mut c, &p.odims[..rank]);
        }
        Ok(())
    })
}

/// Steps coordinates `c` over `dims` to the next index (row-major).
#[inline(always)]
fn step(c: &mut [u64; MAX_RANK], dims: &[u64]) {
    for d in (0..dims.len()).rev() {
        c[d] += 1;
        if c[d] < dims[d] {
            return;
        }
        c[d] = 0;
    }
}
