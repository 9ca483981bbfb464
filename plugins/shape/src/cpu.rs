//! CPU kernels, in place (ABI 1.3): every entry point of [`crate::cuda`] on the CPU, reading the
//! same parameter block. The entry point is decoded once per launch; a block range then computes
//! its share of the launch's work items (`KernelCall::share`) in cache-sized chunks, reading what
//! it needs and writing what it computed through [`Memory`]. Every kernel writes each output
//! byte from exactly one work item and reads only bindings it does not write, so every launch is
//! splittable (the CUDA rule for blocks): the strided copy's items are distinct destination
//! elements, `fill_bytes`' items its bytes, a cast's items groups of 8 elements (whole bytes of
//! a packed type), the others' items their output elements.

use half::{bf16, f16};
use umd_sdk::kernel::{self, CHUNK_BYTES, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::{Access, CpuCall, CpuWrite, Dtype, KernelCall, OpError, dtype};

use crate::cast::f64_to_f32_odd;
use crate::consts::FILL_CHUNK;
use crate::copy::KMAX;

/// The most bytes the strided copy reads at once (its buffer; the host also refuses one
/// `kernel-io` call over 64 MiB).
const MAX_READ: u64 = 64 << 20;

/// What a launch runs, decoded from its entry point.
enum Kernel {
    Gather(usize),
    Fill,
    Splat(usize),
    Eye(usize),
    Trilu(usize),
    Range(Dtype),
    Cast(Dtype, Dtype),
}

fn decode(entry: &str) -> Option<Kernel> {
    let size = |s: &str| s.parse::<usize>().ok().filter(|s| [1, 2, 4, 8].contains(s));
    if entry == "fill_bytes" {
        return Some(Kernel::Fill);
    }
    if let Some(rest) = entry.strip_prefix("cast_") {
        let (a, b) = rest.split_once('_')?;
        return Some(Kernel::Cast(dtype::from_name(a)?, dtype::from_name(b)?));
    }
    if let Some(dt) = entry.strip_prefix("range_") {
        return Some(Kernel::Range(dtype::from_name(dt)?));
    }
    let (kind, bytes) = entry.split_once("_b")?;
    let s = size(bytes)?;
    Some(match kind {
        "gather" => Kernel::Gather(s),
        "splat" => Kernel::Splat(s),
        "eye" => Kernel::Eye(s),
        "trilu" => Kernel::Trilu(s),
        _ => return None,
    })
}

/// Whether distinct block ranges of a launch of `entry` may run concurrently: every kernel of
/// this plugin (see the module docs).
pub fn splittable(entry: &str) -> bool {
    decode(entry).is_some()
}

/// `run-cpu`: the strided copy straight between the call's buffers when its destination rows
/// are contiguous (the same pieces and tiles as in place, without the chunk copies of a
/// [`Memory`]: small launches run this way); everything else runs in place over the buffers in
/// memory ([`kernel::run_cpu_in_memory`]).
pub fn run_cpu(mut call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    if let Some(Kernel::Gather(elem)) = decode(&call.entry_point) {
        let g = Gather::decode(&KernelCall::from_cpu_call(&call), elem)?;
        if g.ds.last() == Some(&1) {
            let rw = kernel::binding_access(&call.relocations, g.dst) != Access::Write;
            let take = |call: &mut CpuCall, b: u32| {
                call.buffers
                    .iter_mut()
                    .find(|x| x.binding == b)
                    .map(|x| (x.size, std::mem::take(&mut x.data)))
                    .ok_or_else(|| OpError::internal(format!("binding {b} is not bound")))
            };
            let (size, kept) = take(&mut call, g.dst)?;
            let mut data = if rw && kept.len() as u64 == size {
                kept
            } else {
                vec![0; size as usize]
            };
            let (size, src) = take(&mut call, g.src)?;
            if src.len() as u64 != size {
                return Err(too_small("gather"));
            }
            g.run_whole(&src, &mut data);
            return Ok(vec![CpuWrite {
                binding: g.dst,
                data,
            }]);
        }
    }
    kernel::run_cpu_in_memory::<crate::Shape>(call)
}

/// Runs blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    run_kernel_reading(call, mem, MAX_READ)
}

/// [`run_kernel`] with the strided copy reading at most `max_read` bytes at once (tests: the
/// paths for sources past the 64 MiB of one read, on small tensors).
pub fn run_kernel_reading(
    call: &KernelCall,
    mem: &mut dyn Memory,
    max_read: u64,
) -> Result<(), OpError> {
    let kernel = decode(&call.entry_point)
        .ok_or_else(|| OpError::internal(format!("unknown entry point `{}`", call.entry_point)))?;
    match kernel {
        Kernel::Gather(s) => Gather::decode(call, s)?.run(call, mem, max_read),
        Kernel::Fill => fill(call, mem),
        Kernel::Splat(s) => splat(call, mem, s),
        Kernel::Eye(s) => eye(call, mem, s),
        Kernel::Trilu(s) => trilu(call, mem, s),
        Kernel::Range(dt) => range(call, mem, dt),
        Kernel::Cast(a, b) => crate::cast::run_kernel(call, mem, a, b),
    }
}

fn too_small(what: &str) -> OpError {
    OpError::internal(format!(
        "{what}: a buffer is smaller than the parameters address"
    ))
}

/// Refuses a launch whose binding `b` holds fewer than `bytes` bytes.
pub fn check_holds(
    call: &KernelCall,
    b: u32,
    bytes: Option<u64>,
    what: &str,
) -> Result<(), OpError> {
    match bytes {
        Some(n) if n <= call.size_of(b)? => Ok(()),
        _ => Err(too_small(what)),
    }
}

/// Runs `f(lo, hi, out)` on consecutive chunks of this call's share of `n` items of `elem`
/// output bytes each, `out` being the chunk's `(hi - lo) * elem` output bytes, then writes `out`
/// to binding `dst` at item `lo`.
fn map_share(
    call: &KernelCall,
    mem: &mut dyn Memory,
    dst: u32,
    n: u64,
    elem: usize,
    mut f: impl FnMut(&mut dyn Memory, u64, u64, &mut [u8]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let step = (CHUNK_BYTES / elem.max(1)) as u64;
    let mut out = Vec::new();
    kernel::chunks(call.share(n), step, |lo, hi| {
        out.clear();
        out.resize((hi - lo) as usize * elem, 0);
        f(mem, lo, hi, &mut out)?;
        mem.write(dst, lo * elem as u64, &out)
    })
}

/// Lowest and highest element offsets a strided walk touches (`None` when empty).
fn extent(shape: &[u64], strides: &[i64], base: i64) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (base as i128, base as i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let span = (n as i128 - 1) * s as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    Some((lo, hi))
}

/// `gather_b{elem}`: the strided copy of [`crate::copy::StridedCopy`], validated against the
/// bound sizes. Work item `j` (row-major in `shape`) copies one element.
struct Gather {
    src: u32,
    dst: u32,
    n: u64,
    elem: usize,
    shape: Vec<u64>,
    ss: Vec<i64>,
    ds: Vec<i64>,
    sb: i64,
    db: i64,
    /// `step[k]`: items per step along dim `k` (the product of the dims after it).
    step: Vec<u64>,
}

/// A piece of one innermost row of the iteration space: `len` elements from source element
/// `src` and destination element `dst`, stepping by the innermost strides.
#[derive(Clone, Copy)]
struct Segment {
    src: i64,
    dst: i64,
    len: u64,
}

impl Gather {
    fn decode(call: &KernelCall, elem: usize) -> Result<Self, OpError> {
        let mut r = ParamReader::new(&call.params, &call.relocations);
        let (src, dst, n, rank) = (r.ptr()?, r.ptr()?, r.u64()?, r.u32()? as usize);
        let shape = r.u64_array::<KMAX>()?;
        let (ss, ds) = (r.u64_array::<KMAX>()?, r.u64_array::<KMAX>()?);
        let (sb, db) = (r.i64()?, r.i64()?);
        if rank == 0
            || rank > KMAX
            || shape[..rank]
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                != Some(n)
        {
            return Err(OpError::internal(format!(
                "gather: bad iteration space (rank {rank}, n {n})"
            )));
        }
        let shape = shape[..rank].to_vec();
        let mut step = vec![1u64; rank];
        for k in (0..rank - 1).rev() {
            step[k] = step[k + 1] * shape[k + 1];
        }
        let g = Gather {
            src,
            dst,
            n,
            elem,
            ss: ss[..rank].iter().map(|&v| v as i64).collect(),
            ds: ds[..rank].iter().map(|&v| v as i64).collect(),
            shape,
            sb,
            db,
            step,
        };
        if let Some((slo, shi)) = extent(&g.shape, &g.ss, sb) {
            let (dlo, dhi) = extent(&g.shape, &g.ds, db).expect("same shape");
            let fits =
                |lo: i128, hi: i128, size: u64| lo >= 0 && (hi + 1) * elem as i128 <= size as i128;
            if !fits(slo, shi, call.size_of(src)?) || !fits(dlo, dhi, call.size_of(dst)?) {
                return Err(too_small("gather"));
            }
        }
        Ok(g)
    }

    /// The multi-index of item `c`.
    fn index(&self, mut c: u64) -> [u64; KMAX] {
        let mut idx = [0u64; KMAX];
        for k in (0..self.shape.len()).rev() {
            idx[k] = c % self.shape[k];
            c /= self.shape[k];
        }
        idx
    }

    /// Element offset of multi-index `idx` under `strides` from `base`.
    fn offset(idx: &[u64], strides: &[i64], base: i64) -> i128 {
        idx.iter()
            .zip(strides)
            .fold(base as i128, |a, (&i, &s)| a + i as i128 * s as i128)
    }

    /// Lowest and highest source element items `c0..c1` (not empty) read: the range cut into
    /// at most ~2·rank boxes (a run along one dim with the dims after it whole).
    fn src_extent(&self, c0: u64, c1: u64) -> (i128, i128) {
        let rank = self.shape.len();
        let (mut lo, mut hi) = (i128::MAX, i128::MIN);
        let mut c = c0;
        while c < c1 {
            let k = (0..rank)
                .find(|&k| c.is_multiple_of(self.step[k]) && c + self.step[k] <= c1)
                .expect("the innermost dim always steps");
            let idx = self.index(c);
            let m = (self.shape[k] - idx[k]).min((c1 - c) / self.step[k]);
            let at = Self::offset(&idx[..rank], &self.ss, self.sb);
            let (mut blo, mut bhi) = (at, at);
            let mut widen = |n: u64, s: i64| {
                let span = (n as i128 - 1) * s as i128;
                if span < 0 {
                    blo += span;
                } else {
                    bhi += span;
                }
            };
            widen(m, self.ss[k]);
            for j in k + 1..rank {
                widen(self.shape[j], self.ss[j]);
            }
            lo = lo.min(blo);
            hi = hi.max(bhi);
            c += m * self.step[k];
        }
        (lo, hi)
    }

    /// The innermost-row pieces of items `c0..c1`, in order.
    fn segments(&self, c0: u64, c1: u64, out: &mut Vec<Segment>) {
        out.clear();
        let rank = self.shape.len();
        let last = rank - 1;
        let inner = self.shape[last];
        let mut idx = self.index(c0);
        let mut so = Self::offset(&idx[..rank], &self.ss, self.sb) as i64;
        let mut dof = Self::offset(&idx[..rank], &self.ds, self.db) as i64;
        let mut c = c0;
        while c < c1 {
            let len = (inner - idx[last]).min(c1 - c);
            out.push(Segment {
                src: so,
                dst: dof,
                len,
            });
            c += len;
            idx[last] += len;
            so = so.wrapping_add(self.ss[last].wrapping_mul(len as i64));
            dof = dof.wrapping_add(self.ds[last].wrapping_mul(len as i64));
            if idx[last] < inner {
                continue;
            }
            idx[last] = 0;
            so = so.wrapping_sub(self.ss[last].wrapping_mul(inner as i64));
            dof = dof.wrapping_sub(self.ds[last].wrapping_mul(inner as i64));
            for k in (0..last).rev() {
                idx[k] += 1;
                so = so.wrapping_add(self.ss[k]);
                dof = dof.wrapping_add(self.ds[k]);
                if idx[k] < self.shape[k] {
                    break;
                }
                so = so.wrapping_sub(self.ss[k].wrapping_mul(self.shape[k] as i64));
                dof = dof.wrapping_sub(self.ds[k].wrapping_mul(self.shape[k] as i64));
                idx[k] = 0;
            }
        }
    }

    /// Copies this call's share of the items, a chunk of ~256 KiB of destination at a time.
    /// Each chunk reads the span of source it touches when that span is at most 4× the chunk
    /// (plus 64 KiB); otherwise (a transpose: a chunk of rows reads columns across the whole
    /// source) the span of the whole share is read once, up to 64 MiB, and reused; past that,
    /// each row piece reads its own span, or its elements one by one.
    fn run(&self, call: &KernelCall, mem: &mut dyn Memory, max_read: u64) -> Result<(), OpError> {
        let share = call.share(self.n);
        if share.is_empty() {
            return Ok(());
        }
        let elem = self.elem as u64;
        let step = (CHUNK_BYTES as u64 / elem).max(1);
        let span_bytes = |(lo, hi): (i128, i128)| (hi - lo + 1) as u64 * elem;
        let read_span = |mem: &mut dyn Memory, (lo, hi): (i128, i128)| {
            mem.read(self.src, lo as u64 * elem, span_bytes((lo, hi)) as usize)
                .map(|v| (lo, v))
        };
        // The source span of the whole share, once read.
        let mut whole: Option<(i128, Vec<u8>)> = None;
        let mut whole_fits: Option<bool> = None;
        let (mut segs, mut out, mut runs) = (Vec::new(), Vec::new(), Vec::<(i64, u64)>::new());
        let mut c0 = share.start;
        while c0 < share.end {
            let c1 = share.end.min(c0 + step);
            self.segments(c0, c1, &mut segs);
            // Every byte of `out` is copied below: no need to clear it.
            out.resize(((c1 - c0) * elem) as usize, 0);
            let chunk = self.src_extent(c0, c1);
            let local;
            let source: Option<(i128, &[u8])> = if whole.is_some() {
                whole.as_ref().map(|(b, v)| (*b, &v[..]))
            } else if span_bytes(chunk) <= 4 * (c1 - c0) * elem + (64 << 10) {
                local = read_span(mem, chunk)?;
                Some((local.0, &local.1[..]))
            } else if *whole_fits.get_or_insert_with(|| {
                span_bytes(self.src_extent(share.start, share.end)) <= max_read
            }) {
                whole = Some(read_span(mem, self.src_extent(share.start, share.end))?);
                whole.as_ref().map(|(b, v)| (*b, &v[..]))
            } else if span_bytes(chunk) <= max_read {
                local = read_span(mem, chunk)?;
                Some((local.0, &local.1[..]))
            } else {
                None
            };
            let si = *self.ss.last().expect("rank >= 1");
            if let (Some((base, buf)), false) = (source, si == 1) {
                self.copy_tiled(buf, base, &segs, si, &mut out);
                segs_to_runs(&segs, &self.ds, &mut runs);
                self.write_runs(mem, &runs, &out)?;
                c0 = c1;
                continue;
            }
            let mut at = 0usize;
            for s in &segs {
                let bytes = (s.len * elem) as usize;
                let o = &mut out[at..at + bytes];
                match source {
                    Some((base, buf)) => self.copy(buf, (s.src as i128 - base) as usize, si, o),
                    None => {
                        let seg = (
                            (s.src as i128).min(s.src as i128 + (s.len as i128 - 1) * si as i128),
                            (s.src as i128).max(s.src as i128 + (s.len as i128 - 1) * si as i128),
                        );
                        if span_bytes(seg) <= (4 * bytes as u64 + (64 << 10)).min(max_read) {
                            let (base, buf) = read_span(mem, seg)?;
                            self.copy(&buf, (s.src as i128 - base) as usize, si, o);
                        } else {
                            for (t, e) in o.chunks_exact_mut(self.elem).enumerate() {
                                let at = s.src + t as i64 * si;
                                e.copy_from_slice(&mem.read(
                                    self.src,
                                    at as u64 * elem,
                                    self.elem,
                                )?);
                            }
                        }
                    }
                }
                at += bytes;
            }
            segs_to_runs(&segs, &self.ds, &mut runs);
            self.write_runs(mem, &runs, &out)?;
            c0 = c1;
        }
        Ok(())
    }

    /// Writes `out` (items in order) to the destination runs `runs`.
    fn write_runs(
        &self,
        mem: &mut dyn Memory,
        runs: &[(i64, u64)],
        out: &[u8],
    ) -> Result<(), OpError> {
        let mut at = 0usize;
        for &(start, len) in runs {
            let bytes = len as usize * self.elem;
            mem.write(
                self.dst,
                start as u64 * self.elem as u64,
                &out[at..at + bytes],
            )?;
            at += bytes;
        }
        Ok(())
    }

    /// The pieces `segs` (source elements `src + t·si`, `buf` holding the source from element
    /// `base`) into `out`, in tiles of 16 pieces × 16 elements: a transpose's pieces start at
    /// neighbouring source elements, so a tile reads each source cache line once instead of
    /// once per piece.
    fn copy_tiled(&self, buf: &[u8], base: i128, segs: &[Segment], si: i64, out: &mut [u8]) {
        self.tiles(buf, base, segs, si, out, false)
    }

    fn tiles(
        &self,
        buf: &[u8],
        base: i128,
        segs: &[Segment],
        si: i64,
        out: &mut [u8],
        direct: bool,
    ) {
        match self.elem {
            1 => tiled::<1>(buf, base, segs, si, out, direct),
            2 => tiled::<2>(buf, base, segs, si, out, direct),
            4 => tiled::<4>(buf, base, segs, si, out, direct),
            _ => tiled::<8>(buf, base, segs, si, out, direct),
        }
    }

    /// The whole copy between buffers in memory (`run-cpu`), by the same pieces and tiles as in
    /// place, straight from `src` into `dst` (whose innermost stride is 1).
    fn run_whole(&self, src: &[u8], dst: &mut [u8]) {
        let si = *self.ss.last().expect("rank >= 1");
        let step = (CHUNK_BYTES / self.elem).max(1) as u64;
        let mut segs = Vec::new();
        let mut c0 = 0;
        while c0 < self.n {
            let c1 = self.n.min(c0 + step);
            self.segments(c0, c1, &mut segs);
            if si == 1 {
                for s in &segs {
                    let (a, b, len) = (s.src as usize, s.dst as usize, s.len as usize);
                    let e = self.elem;
                    dst[b * e..(b + len) * e].copy_from_slice(&src[a * e..(a + len) * e]);
                }
            } else {
                self.tiles(src, 0, &segs, si, dst, true);
            }
            c0 = c1;
        }
    }

    /// `out` (whole elements) from `src` starting at element `s0`, stepping `si` elements.
    fn copy(&self, src: &[u8], s0: usize, si: i64, out: &mut [u8]) {
        match self.elem {
            1 => copy_strided::<1>(src, s0, si, out),
            2 => copy_strided::<2>(src, s0, si, out),
            4 => copy_strided::<4>(src, s0, si, out),
            _ => copy_strided::<8>(src, s0, si, out),
        }
    }
}

/// Destination runs of the pieces `segs` (destination strides `ds`), merged where consecutive
/// pieces are adjacent.
fn segs_to_runs(segs: &[Segment], ds: &[i64], runs: &mut Vec<(i64, u64)>) {
    runs.clear();
    let di = *ds.last().expect("rank >= 1");
    let mut push = |start: i64, len: u64| match runs.last_mut() {
        Some((s, l)) if *s + *l as i64 == start => *l += len,
        _ => runs.push((start, len)),
    };
    for s in segs {
        if di == 1 || s.len == 1 {
            push(s.dst, s.len);
        } else {
            (0..s.len).for_each(|t| push(s.dst + t as i64 * di, 1));
        }
    }
}

/// The pieces `segs` from `buf` (source from element `base`) into `out`: one after another,
/// or at each piece's destination element when `direct` (`out` is then the destination, whose
/// innermost stride is 1).
fn tiled<const S: usize>(
    buf: &[u8],
    base: i128,
    segs: &[Segment],
    si: i64,
    out: &mut [u8],
    direct: bool,
) {
    const TILE: usize = 16;
    let mut at = 0usize;
    for group in segs.chunks(TILE) {
        let mut starts = [(0usize, 0usize, 0usize); TILE];
        for (k, s) in group.iter().enumerate() {
            let o = if direct { s.dst as usize * S } else { at };
            starts[k] = (o, (s.src as i128 - base) as usize, s.len as usize);
            at += s.len as usize * S;
        }
        let longest = group.iter().map(|s| s.len as usize).max().unwrap_or(0);
        for t0 in (0..longest).step_by(TILE) {
            for &(o, src0, len) in &starts[..group.len()] {
                let mut s = src0 as isize + t0 as isize * si as isize;
                for t in t0..len.min(t0 + TILE) {
                    let (a, b) = (s as usize * S, o + t * S);
                    out[b..b + S].copy_from_slice(&buf[a..a + S]);
                    s += si as isize;
                }
            }
        }
    }
}

#[inline(always)]
fn copy_strided<const S: usize>(src: &[u8], s0: usize, si: i64, out: &mut [u8]) {
    if si == 1 {
        out.copy_from_slice(&src[s0 * S..s0 * S + out.len()]);
        return;
    }
    let mut s = s0 as isize;
    for o in out.chunks_exact_mut(S) {
        let a = s as usize * S;
        o.copy_from_slice(&src[a..a + S]);
        s += si as isize;
    }
}

/// `fill_bytes(dst, offset, nbytes, blob)`: one item per byte of the window.
fn fill(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, offset, nbytes) = (r.ptr()?, r.u64()?, r.u64()?);
    let blob = r.u64_array::<{ FILL_CHUNK / 8 }>()?;
    if nbytes as usize > FILL_CHUNK {
        return Err(OpError::internal(format!(
            "fill_bytes: {nbytes} bytes exceed the blob"
        )));
    }
    check_holds(call, dst, offset.checked_add(nbytes), "fill_bytes")?;
    let bytes: Vec<u8> = blob
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .take(nbytes as usize)
        .collect();
    let part = call.share(nbytes);
    if part.is_empty() {
        return Ok(());
    }
    mem.write(
        dst,
        offset + part.start,
        &bytes[part.start as usize..part.end as usize],
    )
}

fn splat(call: &KernelCall, mem: &mut dyn Memory, elem: usize) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, n, bits) = (r.ptr()?, r.u64()?, r.u64()?);
    check_holds(call, dst, n.checked_mul(elem as u64), "splat")?;
    let value = &bits.to_le_bytes()[..elem];
    map_share(call, mem, dst, n, elem, |_, _, _, out| {
        for o in out.chunks_exact_mut(elem) {
            o.copy_from_slice(value);
        }
        Ok(())
    })
}

fn eye(call: &KernelCall, mem: &mut dyn Memory, elem: usize) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, rows, cols, k, one) = (r.ptr()?, r.u64()?, r.u64()?, r.i64()?, r.u64()?);
    let n = rows.checked_mul(cols).ok_or_else(|| too_small("eye"))?;
    check_holds(call, dst, n.checked_mul(elem as u64), "eye")?;
    let one = &one.to_le_bytes()[..elem];
    map_share(call, mem, dst, n, elem, |_, lo, _, out| {
        for (i, o) in (lo..).zip(out.chunks_exact_mut(elem)) {
            let (row, col) = (i / cols, i % cols);
            if col as i64 - row as i64 == k {
                o.copy_from_slice(one);
            }
        }
        Ok(())
    })
}

fn trilu(call: &KernelCall, mem: &mut dyn Memory, elem: usize) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst, n) = (r.ptr()?, r.ptr()?, r.u64()?);
    let (rows, cols, k, upper) = (r.u64()?, r.u64()?, r.i64()?, r.u32()? != 0);
    check_holds(call, dst, n.checked_mul(elem as u64), "trilu")?;
    check_holds(call, src, n.checked_mul(elem as u64), "trilu")?;
    if n > 0 && (rows == 0 || cols == 0) {
        return Err(too_small("trilu"));
    }
    let rows_cols = rows.saturating_mul(cols);
    let e = elem as u64;
    map_share(call, mem, dst, n, elem, |mem, lo, hi, out| {
        let x = mem.read(src, lo * e, ((hi - lo) * e) as usize)?;
        for ((i, o), x) in (lo..)
            .zip(out.chunks_exact_mut(elem))
            .zip(x.chunks_exact(elem))
        {
            let (row, col) = ((i % rows_cols) / cols, i % cols);
            let diff = col as i64 - row as i64;
            if (upper && diff >= k) || (!upper && diff <= k) {
                o.copy_from_slice(x);
            }
        }
        Ok(())
    })
}

fn range(call: &KernelCall, mem: &mut dyn Memory, dt: Dtype) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, n, start, delta) = (r.ptr()?, r.u64()?, r.f64()?, r.f64()?);
    let (istart, idelta, wide) = (r.i64()?, r.i64()?, r.u32()? != 0);
    let elem = dtype::size(dt);
    if !crate::consts::RANGE_DTYPES.contains(&dt) {
        return Err(OpError::internal(format!(
            "no range kernel for {}",
            dtype::name(dt)
        )));
    }
    check_holds(call, dst, n.checked_mul(elem as u64), "range")?;
    let (fs, fd) = (start as f32, delta as f32);
    let f32_at = |i: u64| fs + (i as f32) * fd;
    let f64_at = |i: u64| start + (i as f64) * delta;
    let int_at = |i: u64| istart.wrapping_add((i as i64).wrapping_mul(idelta));
    map_share(call, mem, dst, n, elem, |_, lo, _, out| {
        let out = (lo..).zip(out.chunks_exact_mut(elem));
        match dt {
            Dtype::F32 => {
                out.for_each(|(i, o)| o.copy_from_slice(&(f64_at(i) as f32).to_le_bytes()))
            }
            Dtype::F64 => out.for_each(|(i, o)| o.copy_from_slice(&f64_at(i).to_le_bytes())),
            Dtype::F16 | Dtype::Bf16 => out.for_each(|(i, o)| {
                let v = if wide {
                    f64_to_f32_odd(f64_at(i))
                } else {
                    f32_at(i)
                };
                let bits = if dt == Dtype::F16 {
                    f16::from_f32(v).to_bits()
                } else {
                    bf16::from_f32(v).to_bits()
                };
                o.copy_from_slice(&bits.to_le_bytes());
            }),
            Dtype::I64 => out.for_each(|(i, o)| o.copy_from_slice(&int_at(i).to_le_bytes())),
            Dtype::I32 => {
                out.for_each(|(i, o)| o.copy_from_slice(&(int_at(i) as i32).to_le_bytes()))
            }
            _ => out.for_each(|(i, o)| o.copy_from_slice(&(int_at(i) as i16).to_le_bytes())),
        }
        Ok(())
    })
}
