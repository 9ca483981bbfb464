//! In-place, splittable CPU kernels (ABI 1.3) for the reductions (`{op}_{T}_{rows|cols}`,
//! `_split1`, `_split2`), ArgMax/ArgMin and CumSum/CumProd. The arithmetic is the whole-buffer
//! kernels' (the `run-cpu` kernels before these, kept as the tests' oracle in `tests/oracle`, on
//! the same `super::reduce` folds and `super::axis` scan) element for element, in the same
//! order, so both paths give the same bits; only what is read and written at a time differs.
//!
//! - Reductions and ArgMax/ArgMin: a block range computes its share of the `n_out` outputs
//!   ([`KernelCall::share`]). When the innermost kept dimension is contiguous (the column-wise
//!   kernels, e.g. a reduction over axis 0) a chunk is a run of up to [`kernel::CHUNK_BYTES`] of
//!   adjacent outputs, and every reduced row of it is read: from one span read when the run's
//!   input span is at most [`SPAN_BYTES`], else a group of reduced rows per read when they are
//!   at most twice the run's width apart, else one read per reduced row. Otherwise a chunk is
//!   as many outputs as make an input span of at most [`SPAN_BYTES`] (at least one: a single
//!   output reaching further is read whole, in reads of at most 32 MiB).
//! - `_split1` shares its `n_out × s` partials, `_split2` its outputs.
//! - CumSum/CumProd share the independent lines (`outer × inner`): whole outers are read and
//!   scanned a chunk at a time (long ones in pieces of rows carrying the running value), the
//!   partial outers at a range's ends lane-segment by lane-segment. A scan is never split along
//!   its axis: every element depends on all before it.
//!
//! TopK runs through its whole-buffer kernel ([`super::run`]), unsplit.

use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, KernelCall, OpError, dtype};

use super::Bool;
use super::num::{Elem, Num, store_all};
use super::reduce::{self as red, Max, ROp, Reduced, arg_better, shift_of};
use crate::ops::Red;
use crate::view::{Odometer, View};
use half::{bf16, f16};

/// The largest input span a chunk of outputs reads at once; above it, the column kernels read
/// reduced rows in groups or one at a time.
pub const SPAN_BYTES: u64 = kernel::CHUNK_BYTES as u64;
/// The most bytes asked of the host in one read (its limit is 64 MiB).
const MAX_READ: u64 = 32 << 20;

/// What an entry point runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Reduce(Red),
    Arg(bool),
    Scan(bool),
    TopK,
}

/// `(kind, dtype, variant)` of an entry point `{kernel}_{dtype}[_{variant}]`.
fn decode(entry: &str) -> Option<(Kind, Dtype, &str)> {
    let mut parts = entry.splitn(3, '_');
    let kernel = parts.next()?;
    let dt = dtype::from_name(parts.next()?)?;
    let variant = parts.next().unwrap_or("");
    let kind = match kernel {
        "cumsum" => Kind::Scan(false),
        "cumprod" => Kind::Scan(true),
        "topk" => Kind::TopK,
        "argmax" => Kind::Arg(true),
        "argmin" => Kind::Arg(false),
        k => Kind::Reduce(Red::from_kernel(k)?),
    };
    Some((kind, dt, variant))
}

/// Whether the in-place kernels run `entry` (every entry point but TopK's).
fn handles(entry: &str) -> bool {
    matches!(decode(entry), Some((k, _, _)) if k != Kind::TopK)
}

/// Whether distinct block ranges of `entry` may run concurrently: every in-place kernel
/// (each range writes only its share of the outputs, partials or lines, and reads inputs only).
pub fn splittable(entry: &str) -> bool {
    handles(entry)
}

/// `run-cpu` of the plugin: the in-place kernels over the call's buffers in memory (so both
/// paths give the same bits), or [`super::run`] (TopK whole; unknown entry points refused).
pub fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    if handles(&call.entry_point) {
        kernel::run_cpu_in_memory::<crate::Reduce>(call)
    } else {
        super::run(&call)
    }
}

/// Runs blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let Some((kind, dt, variant)) = decode(&call.entry_point) else {
        return Err(OpError::internal(format!(
            "unknown entry point `{}`",
            call.entry_point
        )));
    };
    match kind {
        Kind::TopK => kernel::run_via_cpu_call::<crate::Reduce>(call, mem),
        Kind::Scan(prod) => by_dtype!(dt, scan_launch(call, mem, prod)),
        Kind::Arg(is_max) => by_dtype!(dt, arg_launch(call, mem, is_max)),
        Kind::Reduce(r) => by_dtype!(dt, reduce_dispatch(call, mem, r, variant)),
    }
}

fn reduce_dispatch<E: Elem>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    r: Red,
    variant: &str,
) -> Result<(), OpError> {
    use super::reduce::*;
    match r {
        Red::Sum => reduce_launch::<E, Sum>(call, mem, variant),
        Red::Mean => reduce_launch::<E, Mean>(call, mem, variant),
        Red::Max => reduce_launch::<E, Max>(call, mem, variant),
        Red::Min => reduce_launch::<E, Min>(call, mem, variant),
        Red::Prod => reduce_launch::<E, Prod>(call, mem, variant),
        Red::L1 => reduce_launch::<E, L1>(call, mem, variant),
        Red::L2 => reduce_launch::<E, L2>(call, mem, variant),
        Red::SumSquare => reduce_launch::<E, SumSquare>(call, mem, variant),
        Red::LogSum => reduce_launch::<E, LogSum>(call, mem, variant),
        Red::LogSumExp => reduce_launch::<E, LogSumExp>(call, mem, variant),
    }
}

/// Elements `first .. first + n` of `binding`, loaded in compute type (read in pieces of at
/// most [`MAX_READ`] bytes).
fn load<E: Elem>(
    mem: &mut dyn Memory,
    binding: u32,
    first: u64,
    n: u64,
    into: &mut Vec<E::C>,
) -> Result<(), OpError> {
    into.clear();
    let step = (MAX_READ / E::SIZE as u64).max(1);
    kernel::chunks(first..first + n, step, |a, b| {
        let bytes = mem.read(
            binding,
            a * E::SIZE as u64,
            ((b - a) * E::SIZE as u64) as usize,
        )?;
        into.extend(bytes.chunks_exact(E::SIZE).map(E::load));
        Ok(())
    })
}

/// Stores `vals` as elements `first ..` of `binding`.
fn store<E: Elem>(
    mem: &mut dyn Memory,
    binding: u32,
    first: u64,
    vals: &[E::C],
    buf: &mut Vec<u8>,
) -> Result<(), OpError> {
    buf.clear();
    buf.resize(vals.len() * E::SIZE, 0);
    store_all::<E>(vals, buf);
    mem.write(binding, first * E::SIZE as u64, buf)
}

/// The largest reduced offset of a view (0 when it reduces nothing).
fn reduced_reach(v: &View) -> u64 {
    if v.r == 0 {
        return 0;
    }
    v.rshape
        .iter()
        .zip(&v.rstride)
        .map(|(n, s)| (n - 1) * s)
        .sum()
}

/// Whether the whole-buffer kernel (the tests' oracle) takes its row-at-once path (innermost
/// kept dimension contiguous and at least 4 wide); the in-place kernels follow the same
/// arithmetic.
fn contiguous_inner(v: &View) -> Option<u64> {
    let kr = v.kshape.len();
    (kr >= 1 && v.kstride[kr - 1] == 1 && v.kshape[kr - 1] >= 4).then(|| v.kshape[kr - 1])
}

/// Calls `f(first output, count, input offset of the first)` for the runs of adjacent outputs
/// (at most `step`, never across a row of the innermost kept dimension `inner`) in `lo..hi`.
fn segments(
    v: &View,
    inner: u64,
    (lo, hi): (u64, u64),
    step: u64,
    mut f: impl FnMut(u64, u64, u64) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let kr = v.kshape.len();
    let mut o = lo;
    while o < hi {
        let (q, i0) = (o / inner, o % inner);
        let w = (inner - i0).min(hi - o).min(step.max(1));
        let base = Odometer::at(&v.kshape[..kr - 1], &v.kstride[..kr - 1], q).off + i0;
        f(o, w, base)?;
        o += w;
    }
    Ok(())
}

/// Calls `f(first output, input offsets of the outputs, span start, span length)` for chunks of
/// the outputs `lo..hi` whose inputs lie within at most [`SPAN_BYTES`] (at least one output).
fn spans(
    v: &View,
    size: u64,
    (lo, hi): (u64, u64),
    mut f: impl FnMut(u64, &[u64], u64, u64) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let reach = reduced_reach(v);
    let step = (kernel::CHUNK_BYTES as u64 / size).max(1);
    let mut ko = Odometer::at(&v.kshape, &v.kstride, lo);
    let mut offs: Vec<u64> = Vec::new();
    let mut o = lo;
    while o < hi {
        offs.clear();
        let start = ko.off;
        loop {
            offs.push(ko.off);
            ko.step();
            let m = offs.len() as u64;
            if o + m == hi || m == step || (ko.off + reach + 1 - start) * size > SPAN_BYTES {
                break;
            }
        }
        let len = if v.r == 0 {
            0
        } else {
            offs[offs.len() - 1] + reach + 1 - start
        };
        f(o, &offs, start, len)?;
        o += offs.len() as u64;
    }
    Ok(())
}

/// Calls `f(offset)` for every reduced index of `v`, in order.
fn each_reduced(v: &View, mut f: impl FnMut(u64) -> Result<(), OpError>) -> Result<(), OpError> {
    let mut ro = Odometer::new(&v.rshape, &v.rstride);
    for _ in 0..v.r {
        f(ro.off)?;
        ro.step();
    }
    Ok(())
}

/// Calls `f` with the `w` elements at `base + off` for every reduced offset `off` of `v`, in
/// order: from `held` (the span from `base`, already read), or read a group of reduced rows at
/// a time when they are one reduced dimension apart by at most twice their width, or one by one.
fn each_row<E: Elem>(
    mem: &mut dyn Memory,
    (x, base, w): (u32, u64, u64),
    v: &View,
    held: Option<&[E::C]>,
    buf: &mut Vec<E::C>,
    f: &mut dyn FnMut(&[E::C]),
) -> Result<(), OpError> {
    let wu = w as usize;
    if let Some(xs) = held {
        return each_reduced(v, |off| {
            f(&xs[off as usize..off as usize + wu]);
            Ok(())
        });
    }
    let per_chunk = (kernel::CHUNK_BYTES / E::SIZE) as u64;
    if let ([r], [st]) = (&v.rshape[..], &v.rstride[..]) {
        let (r, st) = (*r, *st);
        let group = (per_chunk / st.max(1)).min(r);
        if st <= 2 * w && group >= 2 {
            return kernel::chunks(0..r, group, |g0, g1| {
                load::<E>(mem, x, base + g0 * st, (g1 - 1 - g0) * st + w, buf)?;
                for j in 0..(g1 - g0) as usize {
                    let at = j * st as usize;
                    f(&buf[at..at + wu]);
                }
                Ok(())
            });
        }
    }
    each_reduced(v, |off| {
        load::<E>(mem, x, base + off, w, buf)?;
        f(buf);
        Ok(())
    })
}

/// One launch of reduction `O` over its share of outputs (or partials).
fn reduce_launch<E: Elem, O: ROp<E::C>>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    variant: &str,
) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (lo, hi) = (E::LOWEST, E::HIGHEST);
    let size = E::SIZE as u64;
    let mut buf = Vec::new();
    if variant == "split2" {
        let (ws, out) = (r.ptr()?, r.ptr()?);
        let (n_out, len, s) = (r.u64()?, r.u64()?, r.u64()?);
        if s == 0 {
            return Err(OpError::internal("a split reduction of 0 chunks"));
        }
        call.require_size(ws, n_out.saturating_mul(s).saturating_mul(8), "partials")?;
        call.require_size(out, n_out.saturating_mul(size), "output")?;
        let init = O::init(lo, hi);
        let step = (kernel::CHUNK_BYTES as u64 / (8 * s)).max(1);
        let mut vals = Vec::new();
        return kernel::chunks(call.share(n_out), step, |a, b| {
            let parts = mem.read(ws, a * s * 8, ((b - a) * s * 8) as usize)?;
            vals.clear();
            vals.extend(parts.chunks_exact(s as usize * 8).map(|c| {
                let acc = c.chunks_exact(8).fold(init, |acc, p| {
                    let bits = u64::from_le_bytes(p.try_into().expect("8 bytes"));
                    O::comb(acc, E::C::from_bits64(bits))
                });
                O::fin(acc, len, <E::C as Num>::ZERO)
            }));
            store::<E>(mem, out, a, &vals, &mut buf)
        });
    }
    let (x, out) = (r.ptr()?, r.ptr()?);
    let v = View::read(&mut r)?;
    call.require_size(x, v.extent().saturating_mul(size), "input")?;
    if variant == "split1" {
        let (s, chunk) = (r.u64()?, r.u64()?);
        let parts = v.n_out.saturating_mul(s);
        call.require_size(out, parts.saturating_mul(8), "partials")?;
        return split1::<E, O>(call, mem, (x, out), &v, (s, chunk));
    }
    call.require_size(out, v.n_out.saturating_mul(size), "output")?;
    let share = call.share(v.n_out);
    let init = O::init(lo, hi);
    let mut xs: Vec<E::C> = Vec::new();
    let mut vals: Vec<E::C> = Vec::new();
    if let Some(inner) = contiguous_inner(&v) {
        // Runs of adjacent outputs, each output folding its reduced elements in order.
        let reach = reduced_reach(&v);
        let step = (kernel::CHUNK_BYTES as u64 / size).max(1);
        let mut row: Vec<E::C> = Vec::new();
        return segments(&v, inner, (share.start, share.end), step, |o, w, base| {
            let wu = w as usize;
            let mut shift = vec![<E::C as Num>::ZERO; wu];
            let mut acc = vec![init; wu];
            let whole = v.r > 0 && (w + reach) * size <= SPAN_BYTES;
            if whole {
                load::<E>(mem, x, base, w + reach, &mut xs)?;
            }
            // every reduced row of the run: from the span read, or read in groups or alone
            let held = whole.then_some(&xs[..]);
            let mut rows = |mem: &mut dyn Memory, f: &mut dyn FnMut(&[E::C])| {
                each_row::<E>(mem, (x, base, w), &v, held, &mut row, f)
            };
            if O::TWO_PASS {
                shift.fill(lo);
                rows(mem, &mut |row| {
                    for (m, x) in shift.iter_mut().zip(row) {
                        *m = m.max_nan(*x);
                    }
                })?;
                shift.iter_mut().for_each(|m| *m = shift_of(*m));
            }
            rows(mem, &mut |row| {
                for ((a, x), s) in acc.iter_mut().zip(row).zip(&shift) {
                    *a = O::comb(*a, O::map(*x, *s));
                }
            })?;
            vals.clear();
            vals.extend(acc.iter().zip(&shift).map(|(a, s)| O::fin(*a, v.r, *s)));
            store::<E>(mem, out, o, &vals, &mut buf)
        });
    }
    let folds = Reduced::new(&v);
    spans(&v, size, (share.start, share.end), |o, offs, start, len| {
        load::<E>(mem, x, start, len, &mut xs)?;
        vals.clear();
        for &b in offs {
            let b = (b - start) as usize;
            let shift = if O::TWO_PASS {
                shift_of(folds.fold::<E::C, Max>(&xs, b, lo, <E::C as Num>::ZERO))
            } else {
                <E::C as Num>::ZERO
            };
            let acc = folds.fold::<E::C, O>(&xs, b, init, shift);
            vals.push(O::fin(acc, v.r, shift));
        }
        store::<E>(mem, out, o, &vals, &mut buf)
    })
}

/// `_split1`: partials `o * s + j` (chunk `j` of the reduced indices of output `o`) of this
/// range's share, each from the span of input it folds.
fn split1<E: Elem, O: ROp<E::C>>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    (x, ws): (u32, u32),
    v: &View,
    (s, chunk): (u64, u64),
) -> Result<(), OpError> {
    let init = O::init(E::LOWEST, E::HIGHEST);
    let share = call.share(v.n_out.saturating_mul(s));
    let mut xs: Vec<E::C> = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    let step = (kernel::CHUNK_BYTES as u64 / 8).max(1);
    kernel::chunks(share, step, |a, b| {
        out.clear();
        let mut ko = Odometer::at(&v.kshape, &v.kstride, a / s);
        for p in a..b {
            let (o, j) = (p / s, p % s);
            if p > a && j == 0 {
                ko.step();
            }
            debug_assert!(o < v.n_out);
            let r0 = j.saturating_mul(chunk).min(v.r);
            let r1 = r0.saturating_add(chunk).min(v.r);
            let val = if r1 > r0 {
                let first = Odometer::at(&v.rshape, &v.rstride, r0).off;
                let last = Odometer::at(&v.rshape, &v.rstride, r1 - 1).off;
                load::<E>(mem, x, ko.off + first, last - first + 1, &mut xs)?;
                red::fold_range_at::<E::C, O>(&xs, first, v, r0, r1, init)
            } else {
                init
            };
            out.extend_from_slice(&val.to_bits64().to_le_bytes());
        }
        mem.write(ws, a * 8, &out)
    })
}

/// ArgMax (`is_max`) or ArgMin over this range's share of the outputs.
fn arg_launch<E: Elem>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    is_max: bool,
) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out) = (r.ptr()?, r.ptr()?);
    let v = View::read(&mut r)?;
    let last = r.u32()? != 0;
    call.require_size(x, v.extent().saturating_mul(E::SIZE as u64), "input")?;
    call.require_size(out, v.n_out.saturating_mul(8), "output")?;
    let share = call.share(v.n_out);
    let size = E::SIZE as u64;
    let mut xs: Vec<E::C> = Vec::new();
    let mut idx: Vec<i64> = Vec::new();
    let mut buf = Vec::new();
    if let Some(inner) = contiguous_inner(&v) {
        let reach = reduced_reach(&v);
        let step = (kernel::CHUNK_BYTES as u64 / size).max(1);
        let mut rowbuf: Vec<E::C> = Vec::new();
        return segments(&v, inner, (share.start, share.end), step, |o, w, base| {
            let wu = w as usize;
            let whole = v.r > 0 && (w + reach) * size <= SPAN_BYTES;
            if whole {
                load::<E>(mem, x, base, w + reach, &mut xs)?;
            }
            let mut best = vec![(<E::C as Num>::ZERO, -1i64); wu];
            let mut t = 0i64;
            let held = whole.then_some(&xs[..]);
            each_row::<E>(mem, (x, base, w), &v, held, &mut rowbuf, &mut |row| {
                for (b, x) in best.iter_mut().zip(row) {
                    if arg_better(*x, t, b.0, b.1, is_max, last) {
                        *b = (*x, t);
                    }
                }
                t += 1;
            })?;
            idx.clear();
            idx.extend(best.iter().map(|b| b.1.max(0)));
            store::<i64>(mem, out, o, &idx, &mut buf)
        });
    }
    spans(&v, size, (share.start, share.end), |o, offs, start, len| {
        load::<E>(mem, x, start, len, &mut xs)?;
        idx.clear();
        for &b in offs {
            idx.push(red::arg_one(&xs, (b - start) as usize, &v, is_max, last));
        }
        store::<i64>(mem, out, o, &idx, &mut buf)
    })
}

/// CumSum (CumProd when `prod`) over this range's share of the `outer × inner` lines.
fn scan_launch<E: Elem>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    prod: bool,
) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, y) = (r.ptr()?, r.ptr()?);
    let (lines, len, inner) = (r.u64()?, r.u64()?, r.u64()?);
    let (exclusive, reverse) = (r.u32()? != 0, r.u32()? != 0);
    let n = lines
        .checked_mul(len)
        .ok_or_else(|| OpError::internal("element count overflows"))?;
    let size = E::SIZE as u64;
    call.require_size(x, n.saturating_mul(size), "x")?;
    call.require_size(y, n.saturating_mul(size), "y")?;
    if n == 0 || inner == 0 {
        return Ok(());
    }
    let id = if prod {
        <E::C as Num>::ONE
    } else {
        <E::C as Num>::ZERO
    };
    let op = if prod {
        <E::C as Num>::mul
    } else {
        <E::C as Num>::add
    };
    let flags = (exclusive, reverse, prod);
    let share = call.share(lines);
    let block = len * inner; // elements of one outer
    let chunk_elems = (kernel::CHUNK_BYTES as u64 / size).max(1);
    let mut xs: Vec<E::C> = Vec::new();
    let mut acc: Vec<E::C> = Vec::new();
    let mut buf = Vec::new();
    let mut cur = share.start;
    while cur < share.end {
        let (o, i0) = (cur / inner, cur % inner);
        let i1 = inner.min(i0 + (share.end - cur));
        if i0 == 0 && i1 == inner && block <= chunk_elems {
            // whole small outers: as many as fill a chunk, scanned as the whole-buffer kernel
            let k = ((share.end - cur) / inner)
                .min(chunk_elems / block.max(1))
                .max(1);
            load::<E>(mem, x, o * block, k * block, &mut xs)?;
            let ys = super::axis::cumsum(&xs, k as usize, len as usize, inner as usize, flags);
            store::<E>(mem, y, o * block, &ys, &mut buf)?;
            cur += k * inner;
            continue;
        }
        if i0 == 0 && i1 == inner && inner <= chunk_elems {
            // one whole outer, pieces of whole rows along the axis (in scan order)
            let rows = (chunk_elems / inner).max(1);
            acc.clear();
            acc.resize(inner as usize, id);
            let mut t = 0;
            while t < len {
                let m = rows.min(len - t);
                // rows j0..j0+m of the axis, visited in scan order
                let j0 = if reverse { len - t - m } else { t };
                let at = (o * len + j0) * inner;
                load::<E>(mem, x, at, m * inner, &mut xs)?;
                scan_rows(&mut xs, &mut acc, inner as usize, exclusive, reverse, op);
                store::<E>(mem, y, at, &xs, &mut buf)?;
                t += m;
            }
            cur += inner;
            continue;
        }
        // a part of an outer's lanes (or rows too wide for a chunk): lane segments, row by row
        let mut a = i0;
        while a < i1 {
            let b = i1.min(a + chunk_elems);
            acc.clear();
            acc.resize((b - a) as usize, id);
            for t in 0..len {
                let j = if reverse { len - 1 - t } else { t };
                let at = (o * len + j) * inner + a;
                load::<E>(mem, x, at, b - a, &mut xs)?;
                scan_rows(&mut xs, &mut acc, (b - a) as usize, exclusive, false, op);
                store::<E>(mem, y, at, &xs, &mut buf)?;
            }
            a = b;
        }
        cur += i1 - i0;
    }
    Ok(())
}

/// Scans the rows (of `w` lanes) held in `xs` into place, in order (last row first when
/// `reverse`), with the running values `acc` carried in and out: per lane the same sequence of
/// `op`s as [`super::axis::cumsum`].
#[inline(always)]
fn scan_rows<C: Num>(
    xs: &mut [C],
    acc: &mut [C],
    w: usize,
    exclusive: bool,
    reverse: bool,
    op: fn(C, C) -> C,
) {
    let mut step = |row: &mut [C]| {
        for (a, v) in acc.iter_mut().zip(row) {
            let x = *v;
            if exclusive {
                *v = *a;
                *a = op(*a, x);
            } else {
                *a = op(*a, x);
                *v = *a;
            }
        }
    };
    if reverse {
        xs.chunks_exact_mut(w.max(1)).rev().for_each(&mut step);
    } else {
        xs.chunks_exact_mut(w.max(1)).for_each(&mut step);
    }
}
