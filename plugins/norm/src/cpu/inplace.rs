//! In-place, splittable CPU kernels (ABI 1.3) for the row-wise ops: `softmax_{T}_rows`
//! (Softmax, LogSoftmax, Hardmax over contiguous rows) and the `normalize_{T}_{U}` launches
//! whose groups are contiguous rows (axis view with `inner` = 1 and no running or saved
//! statistics: LayerNormalization, RMSNormalization, InstanceNormalization,
//! GroupNormalization, MeanVarianceNormalization over trailing axes, LpNormalization on the
//! last axis). A launch's blocks share its rows ([`KernelCall::share`]); each range reads its
//! rows in chunks of about [`kernel::CHUNK_BYTES`] (at least one row) through
//! [`Memory::read`], computes them, and writes the chunk of `y` (and of the per-row statistics)
//! through [`Memory::write`]. The arithmetic is the whole-buffer kernels' ([`super::softmax`],
//! [`super::normalize`]), so both paths give the same bits.
//!
//! `batchnorm_{T}` (BatchNormalization inference) shares its `(n, c)` planes the same way.
//! Every other launch (strided Softmax, channel-view and strided `normalize`, LRN) runs
//! through the whole-buffer `run-cpu` kernels. A `normalize` launch is
//! splittable by its entry point alone, whatever its parameters say, so for one that is not
//! row-wise the block range holding block 0 runs the whole grid and the others do nothing.

use umd_sdk::dtype::{self, Decoded, Element};
use umd_sdk::kernel::{self, Memory};
use umd_sdk::lanes;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, KernelCall, OpError};

use umd_sdk::simd::F32x4;

use super::{Real, decode_into, store_dyn};
use crate::plan::read_opt_ptr;
use crate::stats::{
    BIAS, EPS_OUTSIDE, INVSTD_OUT, L1, L2, MEAN_OUT, NO_MEAN, RUN_MEAN, RUN_VAR, SAVED_MEAN,
    SAVED_VAR, SCALE, VIEW_AXIS,
};

/// `(kernel, dtype, suffix)` of an entry point `{kernel}_{dtype}[_{suffix}]`.
fn decode(entry: &str) -> Option<(&str, Dtype, Option<&str>)> {
    let mut parts = entry.split('_');
    let kernel = parts.next()?;
    let dt = dtype::from_name(parts.next()?)?;
    Some((kernel, dt, parts.next()))
}

/// Whether the host may run distinct block ranges of `entry` concurrently.
pub fn splittable(entry: &str) -> bool {
    matches!(
        decode(entry),
        Some(("softmax", _, Some("rows")))
            | Some(("normalize", _, Some(_)))
            | Some(("batchnorm", _, None | Some("fused")))
            | Some(("lrn", _, None))
    )
}

/// The parameters of a row-wise `normalize` launch.
struct RowNorm {
    flags: u32,
    x: u32,
    y: u32,
    scale: Option<u32>,
    bias: Option<u32>,
    mean_out: Option<u32>,
    invstd_out: Option<u32>,
    rows: u64,
    len: u64,
    gm: u64,
    ga: u64,
    ed: u64,
    eps: f64,
}

/// The parameters of a `normalize` launch when its groups are contiguous rows without
/// running or saved statistics; `None` for any other `normalize` launch.
fn row_norm(call: &KernelCall) -> Result<Option<RowNorm>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (flags, view) = (r.u32()?, r.u32()?);
    if view != VIEW_AXIS || flags & (RUN_MEAN | RUN_VAR | SAVED_MEAN | SAVED_VAR) != 0 {
        return Ok(None);
    }
    let has = |bit: u32| flags & bit != 0;
    let (x, y) = (r.ptr()?, r.ptr()?);
    let mut opt = |bit| read_opt_ptr(&mut r, has(bit));
    let (scale, bias) = (opt(SCALE)?, opt(BIAS)?);
    let (mean_out, invstd_out) = (opt(MEAN_OUT)?, opt(INVSTD_OUT)?);
    for _ in 0..6 {
        r.u64()?; // the running/saved statistics' pointers, all null here
    }
    let (outer, len, inner) = (r.u64()?, r.u64()?, r.u64()?);
    let (gm, ga, ed) = (r.u64()?.max(1), r.u64()?, r.u64()?.max(1));
    let eps = r.f64()?;
    if inner != 1 {
        return Ok(None);
    }
    Ok(Some(RowNorm {
        flags,
        x,
        y,
        scale,
        bias,
        mean_out,
        invstd_out,
        rows: outer,
        len,
        gm,
        ga,
        ed,
        eps,
    }))
}

/// Whether the in-place row kernels run `call` (otherwise the whole-buffer kernels do).
pub fn handles(call: &KernelCall) -> Result<bool, OpError> {
    Ok(match decode(&call.entry_point) {
        Some(("softmax", _, Some("rows")))
        | Some(("batchnorm", _, None | Some("fused")))
        | Some(("lrn", _, None)) => true,
        Some(("normalize", _, Some(_))) => row_norm(call)?.is_some(),
        _ => false,
    })
}

/// `run-cpu` of the plugin: the in-place row kernels over the call's buffers in memory, or the
/// whole-buffer kernels.
pub fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    if handles(&KernelCall::from_cpu_call(&call))? {
        kernel::run_cpu_in_memory::<crate::Norm>(call)
    } else {
        super::run(&call)
    }
}

/// Runs blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let (kernel, dt, suffix) = decode(&call.entry_point).ok_or_else(unknown)?;
    macro_rules! typed {
        ($f:ident $(, $arg:expr)*) => {
            match dt {
                Dtype::F32 => $f::<f32>(call, mem $(, $arg)*),
                Dtype::F16 => $f::<half::f16>(call, mem $(, $arg)*),
                Dtype::Bf16 => $f::<half::bf16>(call, mem $(, $arg)*),
                Dtype::F64 => $f::<f64>(call, mem $(, $arg)*),
                _ => Err(unknown()),
            }
        };
    }
    match (kernel, suffix) {
        ("softmax", Some("rows")) => typed!(softmax_rows),
        ("batchnorm", None) => typed!(batchnorm_planes, false),
        ("batchnorm", Some("fused")) => typed!(batchnorm_planes, true),
        ("lrn", None) => typed!(lrn_planes),
        ("normalize", Some(stat)) => {
            let stat = dtype::from_name(stat).ok_or_else(unknown)?;
            match row_norm(call)? {
                Some(p) => typed!(normalize_rows, &p, stat),
                None if call.is_whole() => kernel::run_via_cpu_call::<crate::Norm>(call, mem),
                // not row-wise: the range holding block 0 runs the whole grid
                None if call.blocks.first == 0 && call.blocks.count > 0 => {
                    let mut whole = call.clone();
                    whole.blocks.count = whole.grid_blocks();
                    kernel::run_via_cpu_call::<crate::Norm>(&whole, mem)
                }
                None => Ok(()),
            }
        }
        _ => kernel::run_via_cpu_call::<crate::Norm>(call, mem),
    }
}

/// Refuses a launch whose binding `b` (`what`) holds fewer than `elems` elements of `size`
/// bytes.
fn holds(call: &KernelCall, (b, what): (u32, &str), elems: u64, size: u64) -> Result<(), OpError> {
    match elems.checked_mul(size) {
        Some(bytes) if bytes <= call.size_of(b)? => Ok(()),
        _ => Err(OpError::internal(format!(
            "binding {b} ({what}) holds fewer than {elems} elements"
        ))),
    }
}

fn overflow(what: &str) -> OpError {
    OpError::internal(format!("{what}: element count overflows"))
}

/// Rows per chunk for rows of `row_bytes`: about [`kernel::CHUNK_BYTES`], at least one.
fn rows_per_chunk(row_bytes: u64) -> u64 {
    (kernel::CHUNK_BYTES as u64 / row_bytes.max(1)).max(1)
}

/// BatchNormalization (inference): this range's share of the `outer × c` planes of `inner`
/// elements, `y = (x − mean) · scale / √(var + ε) + bias` with the channel's constants formed
/// in f64 and the rest in the compute type, read and written in pieces of about
/// [`kernel::CHUNK_BYTES`] that may span planes.
///
/// `fused` (`batchnorm_{T}_fused`, [`crate::fused`]): then × a per-channel scale, + a
/// per-channel shift and Relu, as its flags say, each value rounded to `T` between stages.
fn batchnorm_planes<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    fused: bool,
) -> Result<(), OpError>
where
    T::Compute: Real,
{
    use crate::fused::{ADD, MUL, RELU};
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, scale, bias, mean, var) = (r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?);
    let (mul, add) = if fused { (r.ptr()?, r.ptr()?) } else { (x, x) };
    let y = r.ptr()?;
    let (n, c, inner, eps) = (r.u64()?, r.u64()?, r.u64()?, r.f64()?);
    let flags = if fused { r.u32()? } else { 0 };
    let (outer, c, inner) = super::pointwise::runs(n, c, inner)?;
    let s = std::mem::size_of::<T>() as u64;
    let fits = |b: u32, elems: u64, what: &str| holds(call, (b, what), elems, s);
    fits(x, n, "X")?;
    fits(y, n, "Y")?;
    for (b, what) in [(scale, "scale"), (bias, "B"), (mean, "mean"), (var, "var")] {
        fits(b, c as u64, what)?;
    }
    for (bit, b, what) in [(MUL, mul, "Mul's scale"), (ADD, add, "Add's shift")] {
        if flags & bit != 0 {
            fits(b, c as u64, what)?;
        }
    }
    let planes = (outer as u64)
        .checked_mul(c as u64)
        .ok_or_else(|| overflow("BatchNormalization"))?;
    let share = call.share(planes);
    if share.is_empty() || inner == 0 {
        return Ok(());
    }
    let inner = inner as u64;
    let chan = |mem: &mut dyn Memory, b: u32| -> Result<Vec<f64>, OpError> {
        let d = mem.read(b, 0, c * s as usize)?;
        Ok((0..c).map(|i| super::load_f64::<T>(&d, i)).collect())
    };
    let (sc, bi, me, va) = (
        chan(mem, scale)?,
        chan(mem, bias)?,
        chan(mem, mean)?,
        chan(mem, var)?,
    );
    let k = |v: f64| <T::Compute as Real>::from_f64(v);
    // per channel: (mean, scale / √(var + ε), bias)
    let consts: Vec<_> = (0..c)
        .map(|i| (k(me[i]), k(sc[i] / (va[i] + eps).sqrt()), k(bi[i])))
        .collect();
    // the epilogue's per-channel scale and shift (1 and 0 where absent)
    let per = |mem: &mut dyn Memory, bit: u32, b: u32, none: f64| -> Result<Vec<_>, OpError> {
        Ok(if flags & bit != 0 {
            chan(mem, b)?.into_iter().map(k).collect()
        } else {
            vec![k(none); c]
        })
    };
    let (muls, adds) = (per(mem, MUL, mul, 1.0)?, per(mem, ADD, add, 0.0)?);
    // f16/bf16 values are rounded between the chain's stages, as it stores them
    let narrow = std::mem::size_of::<T>() < std::mem::size_of::<T::Compute>();
    let round = |v: T::Compute| {
        if narrow {
            T::from_compute(v).to_compute()
        } else {
            v
        }
    };
    let zero = k(0.0);
    let step = (kernel::CHUNK_BYTES as u64 / s).max(1);
    let (end, mut e) = (share.end * inner, share.start * inner);
    let mut out = Vec::new();
    while e < end {
        let len = step.min(end - e);
        // f32 is transformed in the bytes read, as read
        let mut vals = Decoded::<T>::new(mem.read(x, e * s, (len * s) as usize)?);
        // the planes this piece spans, each with its channel's constants
        let mut at = e;
        while at < e + len {
            let plane = at / inner;
            let stop = (e + len).min((plane + 1) * inner);
            let ch = (plane % c as u64) as usize;
            let (m, a, b) = consts[ch];
            let run = &mut vals[(at - e) as usize..(stop - e) as usize];
            // the normalization and the fused stages after it in one pass, where the type
            // has a kernel for it (and no rounding between stages)
            let st = umd_sdk::stages::Stages {
                norm: Some((m, a, b)),
                scale: (flags & MUL != 0).then(|| muls[ch]),
                shift: (flags & ADD != 0).then(|| adds[ch]),
                relu: flags & RELU != 0,
                ..Default::default()
            };
            if !narrow && T::Compute::stages(run, &st) {
                at = stop;
                continue;
            }
            // 16 values per loop iteration (`lanes`: one interruption check each)
            lanes::map(run, |v| (v - m) * a + b);
            if flags & MUL != 0 {
                let s = muls[ch];
                lanes::map(run, |v| round(v) * s);
            }
            if flags & ADD != 0 {
                let t = adds[ch];
                lanes::map(run, |v| round(v) + t);
            }
            if flags & RELU != 0 {
                // NaN stays NaN (it is not below zero); a select in a plain loop, which LLVM
                // vectorizes (4 values per iteration; unrolled in `lanes` it does not)
                run.iter_mut()
                    .for_each(|v| *v = if *v < zero { zero } else { *v });
            }
            at = stop;
        }
        mem.write(y, e * s, dtype::bytes::<T>(&vals, &mut out))?;
        e += len;
    }
    Ok(())
}

/// LRN: this range's share of the `outer × c` output planes of `inner` elements, in pieces of
/// consecutive channels of one image (about [`kernel::CHUNK_BYTES`] of output), each piece's
/// window of input channels read once. `y = x / (bias + alpha / size · Σ x²)^beta` in the
/// compute type (f32 for f32, f16 and bf16, as onnxruntime computes it), the sum over the
/// channel's window in channel order, 16 values per loop iteration.
fn lrn_planes<T: Element>(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, y) = (r.ptr()?, r.ptr()?);
    let (n, c, inner, size) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?.max(1));
    let (alpha, beta, bias) = (r.f64()?, r.f64()?, r.f64()?);
    let (outer, c, inner) = super::pointwise::runs(n, c, inner)?;
    let s = std::mem::size_of::<T>();
    holds(call, (x, "X"), n, s as u64)?;
    holds(call, (y, "Y"), n, s as u64)?;
    let planes = (outer as u64)
        .checked_mul(c as u64)
        .ok_or_else(|| overflow("LRN"))?;
    let share = call.share(planes);
    if share.is_empty() || inner == 0 {
        return Ok(());
    }
    // a window wider than the channels reaches them all
    let reach = |v: u64| v.min(c as u64) as usize;
    let (before, after) = (reach((size - 1) / 2), reach(size / 2));
    let kc = <T::Compute as Real>::from_f64;
    let (k, bias) = (kc(alpha / size as f64), kc(bias));
    let expo = kc(beta);
    let per_piece = (kernel::CHUNK_BYTES / (inner * s)).max(1);
    let (mut sq, mut vals, mut out) = (vec![kc(0.0); inner], Vec::new(), Vec::new());
    // element offsets in u64 (a tensor may exceed the instance's address space)
    let offset = |o: u64, ch: usize| (o * c as u64 + ch as u64) * (inner * s) as u64;
    let mut p = share.start;
    while p < share.end {
        let (o, ch0) = (p / c as u64, (p % c as u64) as usize);
        let ch1 = (ch0 + per_piece)
            .min(c)
            .min(ch0.saturating_add((share.end - p) as usize));
        // the input channels the piece's windows reach
        let (lo, hi) = (
            ch0.saturating_sub(before),
            (ch1 - 1).saturating_add(after).min(c - 1),
        );
        let xs = Decoded::<T>::new(mem.read(x, offset(o, lo), (hi - lo + 1) * inner * s)?);
        let plane = |cc: usize| &xs[(cc - lo) * inner..][..inner];
        vals.clear();
        for ch in ch0..ch1 {
            sq.fill(kc(0.0));
            for cc in ch.saturating_sub(before)..=ch.saturating_add(after).min(c - 1) {
                lanes::zip(&mut sq, plane(cc), |q, v| q + v * v);
            }
            // x^0.75 by square roots for the exponent models use (AlexNet, GoogLeNet, ZFNet,
            // the Inceptions), 1/2 and 1 likewise — each root correctly rounded, within an ulp
            // or two of `powf`, which is a slow libm call in WebAssembly — one loop each
            let d = |q| bias + k * q;
            match beta {
                0.75 => lanes::zip(&mut sq, plane(ch), |q, v| {
                    let r = d(q).sqrt();
                    v / (r * r.sqrt())
                }),
                0.5 => lanes::zip(&mut sq, plane(ch), |q, v| v / d(q).sqrt()),
                1.0 => lanes::zip(&mut sq, plane(ch), |q, v| v / d(q)),
                _ => lanes::zip(&mut sq, plane(ch), |q, v| v / d(q).powf(expo)),
            }
            vals.extend_from_slice(&sq);
        }
        let bytes = dtype::bytes::<T>(&vals, &mut out);
        mem.write(y, offset(o, ch0), bytes)?;
        p += (ch1 - ch0) as u64;
    }
    Ok(())
}

/// Softmax, LogSoftmax or Hardmax over this range's share of the contiguous rows.
fn softmax_rows<T: Element>(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, y) = (r.ptr()?, r.ptr()?);
    let (outer, len, inner, mode) = (r.u64()?, r.u64()?, r.u64()?, r.u32()?);
    super::softmax::check_mode(mode)?;
    if inner != 1 {
        return Err(OpError::internal(format!(
            "`{}` runs contiguous rows, got inner = {inner}",
            call.entry_point
        )));
    }
    let size = std::mem::size_of::<T>() as u64;
    let row_bytes = len.checked_mul(size).ok_or_else(|| overflow("softmax"))?;
    let total = outer
        .checked_mul(row_bytes)
        .ok_or_else(|| overflow("softmax"))?;
    call.require_size(x, total, "x")?;
    call.require_size(y, total, "y")?;
    let len = len as usize;
    let mut out: Vec<u8> = Vec::new();
    kernel::chunks(call.share(outer), rows_per_chunk(row_bytes), |lo, hi| {
        let bytes = ((hi - lo) * row_bytes) as usize;
        let mut v = Decoded::<T>::new(mem.read(x, lo * row_bytes, bytes)?);
        if len > 0 {
            for row in v.chunks_exact_mut(len) {
                super::softmax::row(row, mode, super::softmax::round::<T>);
            }
        }
        mem.write(y, lo * row_bytes, dtype::bytes::<T>(&v, &mut out))
    })
}

/// The per-row arithmetic of `normalize` in a compute type: f64 scalar, or f32 in [`F32x4`]
/// lanes (f32, f16 and bf16 data; partial sums of at most [`BLOCK`] elements are added in f64).
pub trait RowMath: Real {
    /// `(mean, invstd)` of `row` for the kernel's `flags` (0 mean for the no-mean kinds).
    fn stats(row: &[Self], flags: u32, eps: f64) -> (f64, f64);
    /// `row[e] = (row[e] - mean) * invstd * s[e / ed] + b[e / ed]` (absent: 1 and 0).
    fn affine(
        row: &mut [Self],
        mean: f64,
        invstd: f64,
        s: Option<&[Self]>,
        b: Option<&[Self]>,
        ed: usize,
    );
}

/// Elements an f32 partial sum covers before it is added into the f64 total.
pub const BLOCK: usize = 1024;

/// `invstd` from the kind's total (`tot`: sum |x|, sum x², or the variance).
fn inv_of(flags: u32, tot: f64, eps: f64) -> f64 {
    if flags & (L1 | L2) != 0 {
        let norm = if flags & L1 != 0 { tot } else { tot.sqrt() };
        if norm == 0.0 { 0.0 } else { 1.0 / norm }
    } else if flags & EPS_OUTSIDE != 0 {
        1.0 / (tot.sqrt() + eps)
    } else {
        1.0 / (tot + eps).sqrt()
    }
}

fn no_mean(flags: u32) -> bool {
    flags & (NO_MEAN | L1 | L2) != 0
}

impl RowMath for f64 {
    fn stats(row: &[f64], flags: u32, eps: f64) -> (f64, f64) {
        let cnt = row.len() as f64;
        let mean = if no_mean(flags) {
            0.0
        } else {
            row.iter().sum::<f64>() / cnt
        };
        let tot = if flags & L1 != 0 {
            row.iter().map(|v| v.abs()).sum::<f64>()
        } else if flags & L2 != 0 {
            row.iter().map(|v| v * v).sum::<f64>()
        } else {
            row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cnt
        };
        (mean, inv_of(flags, tot, eps))
    }

    fn affine(
        row: &mut [f64],
        mean: f64,
        invstd: f64,
        s: Option<&[f64]>,
        b: Option<&[f64]>,
        ed: usize,
    ) {
        for (k, seg) in row.chunks_mut(ed.max(1)).enumerate() {
            let (sk, bk) = (s.map_or(1.0, |s| s[k]), b.map_or(0.0, |b| b[k]));
            for v in seg {
                *v = (*v - mean) * invstd * sk + bk;
            }
        }
    }
}

/// Sum over `row` of `f(lanes)` per group of four, plus `g(x)` over the tail, with f32 lanes
/// summed per [`BLOCK`] and the blocks in f64.
#[inline(always)]
fn lane_sum(row: &[f32], f: impl Fn(F32x4, F32x4) -> F32x4, g: impl Fn(f32) -> f32) -> f64 {
    let mut total = 0f64;
    for block in row.chunks(BLOCK) {
        let mut acc = F32x4::zero();
        let quads = block.chunks_exact(4);
        let tail: f32 = quads.remainder().iter().map(|&x| g(x)).sum();
        for q in quads {
            acc = f(acc, F32x4::load(q));
        }
        let mut l = [0f32; 4];
        acc.store(&mut l);
        total += ((l[0] + l[1]) + (l[2] + l[3])) as f64 + tail as f64;
    }
    total
}

impl RowMath for f32 {
    fn stats(row: &[f32], flags: u32, eps: f64) -> (f64, f64) {
        let cnt = row.len() as f64;
        let mean = if no_mean(flags) {
            0.0
        } else {
            lane_sum(row, |a, x| a + x, |x| x) / cnt
        };
        let tot = if flags & L1 != 0 {
            row.iter().map(|v| v.abs() as f64).sum::<f64>()
        } else if flags & L2 != 0 {
            lane_sum(row, |a, x| a.madd(x, x), |x| x * x)
        } else {
            let m = mean as f32;
            let neg = F32x4::splat(-m);
            lane_sum(
                row,
                |a, x| {
                    let d = x + neg;
                    a.madd(d, d)
                },
                |x| (x - m) * (x - m),
            ) / cnt
        };
        (mean, inv_of(flags, tot, eps))
    }

    fn affine(
        row: &mut [f32],
        mean: f64,
        invstd: f64,
        s: Option<&[f32]>,
        b: Option<&[f32]>,
        ed: usize,
    ) {
        let (m, inv) = (mean as f32, invstd as f32);
        let (neg, vinv) = (F32x4::splat(-m), F32x4::splat(inv));
        if ed <= 1 {
            let ones;
            let zeros;
            let s = match s {
                Some(s) => &s[..row.len()],
                None => {
                    ones = vec![1f32; row.len()];
                    &ones[..]
                }
            };
            let b = match b {
                Some(b) => &b[..row.len()],
                None => {
                    zeros = vec![0f32; row.len()];
                    &zeros[..]
                }
            };
            let quads = row.len() / 4 * 4;
            let (head, tail) = row.split_at_mut(quads);
            for ((x, s), b) in head
                .chunks_exact_mut(4)
                .zip(s.chunks_exact(4))
                .zip(b.chunks_exact(4))
            {
                let t = (F32x4::load(x) + neg) * vinv;
                F32x4::load(b).madd(t, F32x4::load(s)).store(x);
            }
            for ((x, &s), &b) in tail.iter_mut().zip(&s[quads..]).zip(&b[quads..]) {
                *x = (*x - m) * inv * s + b;
            }
            return;
        }
        for (k, seg) in row.chunks_mut(ed).enumerate() {
            let (sk, bk) = (s.map_or(1.0, |s| s[k]), b.map_or(0.0, |b| b[k]));
            let (vs, vb) = (F32x4::splat(sk), F32x4::splat(bk));
            let quads = seg.len() / 4 * 4;
            let (head, tail) = seg.split_at_mut(quads);
            for x in head.chunks_exact_mut(4) {
                let t = (F32x4::load(x) + neg) * vinv;
                vb.madd(t, vs).store(x);
            }
            for x in tail {
                *x = (*x - m) * inv * sk + bk;
            }
        }
    }
}

/// A `normalize` launch over this range's share of the contiguous rows.
fn normalize_rows<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    p: &RowNorm,
    stat: Dtype,
) -> Result<(), OpError>
where
    T::Compute: RowMath,
{
    let size = std::mem::size_of::<T>() as u64;
    let row_bytes = p
        .len
        .checked_mul(size)
        .ok_or_else(|| overflow("normalize"))?;
    let total = p
        .rows
        .checked_mul(row_bytes)
        .ok_or_else(|| overflow("normalize"))?;
    call.require_size(p.x, total, "x")?;
    call.require_size(p.y, total, "y")?;
    // scale/bias elements the mapping (g % gm) * ga + e / ed reaches
    let params_len = if p.rows == 0 || p.len == 0 {
        0
    } else {
        (p.rows.min(p.gm) - 1) * p.ga + (p.len - 1) / p.ed + 1
    };
    let mut vector = |b: Option<u32>, what: &str| -> Result<Option<Vec<T::Compute>>, OpError> {
        let Some(b) = b else { return Ok(None) };
        let bytes = params_len * size;
        call.require_size(b, bytes, what)?;
        let data = mem.read(b, 0, bytes as usize)?;
        let mut v = vec![T::Compute::from_f64(0.0); params_len as usize];
        decode_into::<T>(&data, 0, &mut v);
        Ok(Some(v))
    };
    let (scale, bias) = (vector(p.scale, "scale")?, vector(p.bias, "bias")?);
    let stat_size = dtype::size(stat) as u64;
    for b in [p.mean_out, p.invstd_out].into_iter().flatten() {
        call.require_size(b, p.rows * stat_size, "statistics")?;
    }

    let (len, ed, ga, gm) = (p.len as usize, p.ed as usize, p.ga as usize, p.gm as usize);
    let mut out: Vec<u8> = Vec::new();
    let (mut means, mut invstds): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
    kernel::chunks(call.share(p.rows), rows_per_chunk(row_bytes), |lo, hi| {
        let rows = (hi - lo) as usize;
        let bytes = rows * len * size as usize;
        let mut v = Decoded::<T>::new(mem.read(p.x, lo * row_bytes, bytes)?);
        means.clear();
        means.resize(rows * stat_size as usize, 0);
        invstds.clear();
        invstds.resize(rows * stat_size as usize, 0);
        for k in 0..rows {
            let row = &mut v[k * len..(k + 1) * len];
            let (mean, invstd) = RowMath::stats(row, p.flags, p.eps);
            if p.mean_out.is_some() {
                store_dyn(stat, &mut means, k, mean)?;
            }
            if p.invstd_out.is_some() {
                store_dyn(stat, &mut invstds, k, invstd)?;
            }
            let base = ((lo as usize + k) % gm) * ga;
            // (an empty row reaches no scale element: its slice may be empty)
            let s = scale.as_deref().map(|s| s.get(base..).unwrap_or_default());
            let b = bias.as_deref().map(|b| b.get(base..).unwrap_or_default());
            RowMath::affine(row, mean, invstd, s, b, ed);
        }
        mem.write(p.y, lo * row_bytes, dtype::bytes::<T>(&v, &mut out))?;
        if let Some(m) = p.mean_out {
            mem.write(m, lo * stat_size, &means)?;
        }
        if let Some(i) = p.invstd_out {
            mem.write(i, lo * stat_size, &invstds)?;
        }
        Ok(())
    })
}
