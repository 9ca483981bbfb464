//! CenterCropPad (opset 18: `shape` a constant input, `axes` attribute), ReverseSequence
//! (opset 10: `sequence_lens` read by the kernel, `batch_axis`, `time_axis`) and Compress
//! (`condition` a constant input: its count of true values is the output's extent; the kernel
//! reads the condition itself): index maps that move bytes, on every dtype, dispatched on
//! element size (entries of [`crate::copy::MODULE`]); MaxUnpool (a zero fill, then a scatter).

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common::{self, at_most_inputs, check_rank, linear_launch};
use crate::copy::MODULE;

fn norm_axis(op: &str, a: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: axis {a} is out of range for rank {rank}"
        )));
    }
    Ok(a.rem_euclid(r) as usize)
}

fn dims8(v: &[u64]) -> [u64; MAX_RANK] {
    let mut a = [1u64; MAX_RANK];
    a[..v.len()].copy_from_slice(v);
    a
}

pub fn plan_center_crop_pad(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axes"])?;
    at_most_inputs(req, 2)?;
    let x = req.required(0)?;
    let r = x.shape.len();
    check_rank(&req.op, &x.shape)?;
    let sizes = req
        .ints(1)?
        .ok_or_else(|| OpError::shape("CenterCropPad: input 1 (`shape`) is required"))?;
    let axes = match attr::ints_opt(&req.attributes, "axes")? {
        Some(a) => a
            .iter()
            .map(|v| norm_axis(&req.op, *v, r))
            .collect::<Result<Vec<_>, _>>()?,
        None => (0..r).collect(),
    };
    if sizes.len() != axes.len() {
        return Err(OpError::shape(format!(
            "CenterCropPad: `shape` has {} values for {} axes",
            sizes.len(),
            axes.len()
        )));
    }
    let mut out = x.shape.clone();
    let mut offs = [0i64; MAX_RANK];
    for (i, (&a, &s)) in axes.iter().zip(&sizes).enumerate() {
        if axes[..i].contains(&a) {
            return Err(OpError::InvalidAttribute(format!(
                "CenterCropPad: axis {a} repeats"
            )));
        }
        if s < 0 {
            return Err(OpError::shape(format!("CenterCropPad: negative size {s}")));
        }
        let dim = x.shape[a] as i64;
        out[a] = s as u64;
        // crop: the input starts (dim - s) / 2 in; pad: the output starts (s - dim) / 2 in
        offs[a] = if s <= dim {
            (dim - s) / 2
        } else {
            -((s - dim) / 2)
        };
    }
    let n = shape::numel(&out)?;
    let size = dtype::size(x.dtype);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u32(r as u32)
        .u64_array(&dims8(&out))
        .u64_array(&dims8(&x.shape))
        .u64_array(&offs.map(|v| v as u64));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out, x.dtype)],
        launches: vec![linear_launch(
            req,
            MODULE.into(),
            format!("crop_pad_{size}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

pub fn plan_reverse_sequence(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["batch_axis", "time_axis"])?;
    at_most_inputs(req, 2)?;
    let x = req.required(0)?;
    let lens = common::input_of(req, 1, &[Dtype::I64])?;
    let r = x.shape.len();
    if r < 2 {
        return Err(OpError::shape(format!(
            "ReverseSequence: the input must have rank ≥ 2, got {:?}",
            x.shape
        )));
    }
    let batch = attr::int_or(&req.attributes, "batch_axis", 1)?;
    let time = attr::int_or(&req.attributes, "time_axis", 0)?;
    if !matches!((batch, time), (0, 1) | (1, 0)) {
        return Err(OpError::InvalidAttribute(format!(
            "ReverseSequence: (`batch_axis`, `time_axis`) must be (1, 0) or (0, 1), got ({batch}, {time})"
        )));
    }
    let (b, t) = (batch as usize, time as usize);
    if lens.shape != [x.shape[b]] {
        return Err(OpError::shape(format!(
            "ReverseSequence: `sequence_lens` must be [{}], got {:?}",
            x.shape[b], lens.shape
        )));
    }
    let strides = shape::contiguous_strides(&x.shape);
    let n = shape::numel(&x.shape)?;
    let size = dtype::size(x.dtype);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(x.shape[t])
        .u64(strides[t])
        .u64(x.shape[b])
        .u64(strides[b]);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), x.dtype)],
        launches: vec![linear_launch(
            req,
            MODULE.into(),
            format!("reverse_seq_{size}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

pub fn plan_compress(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis"])?;
    at_most_inputs(req, 2)?;
    let x = req.required(0)?;
    check_rank(&req.op, &x.shape)?;
    let cond_desc = common::input_of(req, 1, &[Dtype::Boolean])?;
    if cond_desc.shape.len() != 1 {
        return Err(OpError::shape(format!(
            "Compress: `condition` must be 1-D, got {:?}",
            cond_desc.shape
        )));
    }
    let cond = req
        .ints(1)?
        .ok_or_else(|| OpError::shape("Compress: input 1 (`condition`) is required"))?;
    let (outer, dim, inner, mut out) = match attr::ints_opt(&req.attributes, "axis")? {
        None => (1, shape::numel(&x.shape)?, 1, vec![0]),
        Some(a) if a.len() == 1 => {
            let a = norm_axis(&req.op, a[0], x.shape.len())?;
            (
                shape::numel(&x.shape[..a])?,
                x.shape[a],
                shape::numel(&x.shape[a + 1..])?,
                x.shape.clone(),
            )
        }
        Some(_) => {
            return Err(OpError::InvalidAttribute(
                "Compress: `axis` must be one int".into(),
            ));
        }
    };
    let axis_pos = match attr::ints_opt(&req.attributes, "axis")? {
        None => 0,
        Some(a) => norm_axis(&req.op, a[0], x.shape.len())?,
    };
    let used = (cond.len() as u64).min(dim);
    let kept = cond[..used as usize].iter().filter(|v| **v != 0).count() as u64;
    out[axis_pos] = kept;
    let n = shape::numel(&out)?;
    let size = dtype::size(x.dtype);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(outer)
        .u64(dim)
        .u64(kept)
        .u64(inner)
        .u64(used);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out, x.dtype)],
        launches: vec![linear_launch(
            req,
            MODULE.into(),
            format!("compress_{size}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

/// MaxUnpool (opset 11): `kernel_shape`, `strides`, `pads`, `output_shape` (a constant input,
/// 3rd). The output is zeroed, then each value goes to its index (into the flattened inferred
/// shape), placed in the top-left corner of `output_shape` when that is larger. Duplicate
/// indices: the CPU keeps the last value (as the reference); on CUDA one of them wins.
pub fn plan_max_unpool(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["kernel_shape", "strides", "pads"])?;
    at_most_inputs(req, 3)?;
    let x = req.required(0)?;
    let ind = common::input_of(req, 1, &[Dtype::I64])?;
    check_rank(&req.op, &x.shape)?;
    let r = x.shape.len();
    if r < 3 || ind.shape != x.shape {
        return Err(OpError::shape(format!(
            "MaxUnpool: X (rank ≥ 3) and I must have one shape, got {:?} and {:?}",
            x.shape, ind.shape
        )));
    }
    let nd = r - 2;
    let kernel = attr::ints_or(&req.attributes, "kernel_shape", &[])?;
    let strides = attr::ints_or(&req.attributes, "strides", &vec![1; nd])?;
    let pads = attr::ints_or(&req.attributes, "pads", &vec![0; 2 * nd])?;
    if kernel.len() != nd || strides.len() != nd || pads.len() != 2 * nd {
        return Err(OpError::InvalidAttribute(format!(
            "MaxUnpool: `kernel_shape` ({kernel:?}, required), `strides` ({strides:?}) and `pads` ({pads:?}) must match {nd} spatial dims"
        )));
    }
    let mut inferred = x.shape.clone();
    for d in 0..nd {
        let v = (x.shape[d + 2] as i64 - 1) * strides[d] - pads[d] - pads[d + nd] + kernel[d];
        if v < 0 {
            return Err(OpError::shape(format!(
                "MaxUnpool: negative output extent {v}"
            )));
        }
        inferred[d + 2] = v as u64;
    }
    let out = match req.ints(2)? {
        None => inferred.clone(),
        Some(v) => {
            if v.len() != r || v.iter().zip(&inferred).any(|(o, i)| *o < *i as i64) {
                return Err(OpError::shape(format!(
                    "MaxUnpool: `output_shape` {v:?} must hold the inferred shape {inferred:?}"
                )));
            }
            v.iter().map(|d| *d as u64).collect()
        }
    };
    let (n_in, n_out) = (shape::numel(&x.shape)?, shape::numel(&out)?);
    let size = dtype::size(x.dtype);
    let y = req.output_binding(0);
    let mut z = ParamPacker::new();
    z.ptr(y, Access::Write).u64(n_out);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(y, Access::ReadWrite)
        .u64(n_in)
        .u32(r as u32)
        .u64_array(&dims8(&inferred))
        .u64_array(&dims8(&out));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("output", out, x.dtype)],
        launches: vec![
            linear_launch(req, MODULE.into(), format!("zero_{size}"), n_out, z)?,
            linear_launch(req, MODULE.into(), format!("unpool_{size}"), n_in, p)?,
        ],
        workspace_bytes: 0,
    })
}

/// CUDA templates (instantiated per element size in [`crate::copy::cuda`]).
pub const CUDA: &str = r#"
struct umd_d8 { unsigned long long v[8]; };
template <typename U>
__device__ void umd_crop_pad(const U* x, U* y, unsigned long long n, unsigned int rank,
    const umd_d8& out, const umd_d8& in, const umd_d8& off) {
  UMD_FOR(e, n) {
    unsigned long long rem = e, src = 0, mul = 1;
    bool ok = true;
    for (int d = (int)rank - 1; d >= 0; --d) {
      long long i = (long long)(rem % out.v[d]) + (long long)off.v[d];
      rem /= out.v[d];
      if (i < 0 || i >= (long long)in.v[d]) ok = false;
      src += (unsigned long long)i * mul;
      mul *= in.v[d];
    }
    y[e] = ok ? x[src] : (U)0;
  }
}
template <typename U>
__device__ void umd_reverse_seq(const U* x, const long long* lens, U* y, unsigned long long n,
    unsigned long long T, unsigned long long ts, unsigned long long B, unsigned long long bs) {
  UMD_FOR(e, n) {
    unsigned long long t = (e / ts) % T, b = (e / bs) % B;
    long long len = lens[b];
    len = len < 0 ? 0 : (len > (long long)T ? (long long)T : len);
    unsigned long long src = e;
    if ((long long)t < len) src = e - t * ts + (unsigned long long)(len - 1 - (long long)t) * ts;
    y[e] = x[src];
  }
}
template <typename U>
__device__ void umd_unpool(const U* x, const long long* ind, U* y, unsigned long long n,
    unsigned int rank, const umd_d8& inf, const umd_d8& out) {
  unsigned long long total = 1;
  for (unsigned int d = 0; d < rank; ++d) total *= inf.v[d];
  UMD_FOR(e, n) {
    long long i = ind[e];
    if (i < 0 || (unsigned long long)i >= total) continue;
    unsigned long long rem = (unsigned long long)i, dst = 0, mul = 1;
    for (int d = (int)rank - 1; d >= 0; --d) {
      dst += (rem % inf.v[d]) * mul;
      rem /= inf.v[d];
      mul *= out.v[d];
    }
    y[dst] = x[e];
  }
}
template <typename U>
__device__ void umd_compress(const U* x, const unsigned char* cond, U* y, unsigned long long n,
    unsigned long long dim, unsigned long long kept, unsigned long long inner,
    unsigned long long used) {
  UMD_FOR(e, n) {
    unsigned long long i = e % inner, j = (e / inner) % kept, o = e / inner / kept;
    unsigned long long src = 0, seen = 0;
    for (unsigned long long t = 0; t < used; ++t)
      if (cond[t]) { if (seen == j) { src = t; break; } ++seen; }
    y[e] = x[(o * dim + src) * inner + i];
  }
}
"#;

/// The entry points of one element type `t` of `size` bytes.
pub fn cuda_entries(size: usize, t: &str) -> (String, Vec<String>) {
    (
        format!(
            "extern \"C\" __global__ void crop_pad_{size}(const {t}* __restrict__ x, {t}* __restrict__ y, \
             unsigned long long n, unsigned int rank, umd_d8 out, umd_d8 in, umd_d8 off) \
             {{ umd_crop_pad<{t}>(x, y, n, rank, out, in, off); }}\n\
             extern \"C\" __global__ void reverse_seq_{size}(const {t}* __restrict__ x, \
             const long long* __restrict__ lens, {t}* __restrict__ y, unsigned long long n, \
             unsigned long long T, unsigned long long ts, unsigned long long B, unsigned long long bs) \
             {{ umd_reverse_seq<{t}>(x, lens, y, n, T, ts, B, bs); }}\n\
             extern \"C\" __global__ void compress_{size}(const {t}* __restrict__ x, \
             const unsigned char* __restrict__ cond, {t}* __restrict__ y, unsigned long long n, \
             unsigned long long outer, unsigned long long dim, unsigned long long kept, \
             unsigned long long inner, unsigned long long used) \
             {{ (void)outer; umd_compress<{t}>(x, cond, y, n, dim, kept, inner, used); }}\n\
             extern \"C\" __global__ void zero_{size}({t}* __restrict__ y, unsigned long long n) \
             {{ UMD_FOR(i, n) y[i] = ({t})0; }}\n\
             extern \"C\" __global__ void unpool_{size}(const {t}* __restrict__ x, \
             const long long* __restrict__ ind, {t}* __restrict__ y, unsigned long long n, \
             unsigned int rank, umd_d8 inf, umd_d8 out) \
             {{ umd_unpool<{t}>(x, ind, y, n, rank, inf, out); }}\n"
        ),
        vec![
            format!("crop_pad_{size}"),
            format!("reverse_seq_{size}"),
            format!("compress_{size}"),
            format!("zero_{size}"),
            format!("unpool_{size}"),
        ],
    )
}

/// CPU twins (`size` bytes per element).
pub fn run_cpu(
    call: &umd_sdk::CpuCall,
    kernel: &str,
    size: usize,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let bytes = |n: u64| {
        n.checked_mul(size as u64)
            .ok_or_else(|| OpError::internal("size overflows"))
    };
    if kernel == "crop_pad" {
        let (x, y, n, rank) = (c.r.ptr()?, c.r.ptr()?, c.r.u64()?, c.r.u32()? as usize);
        let (out, inn, off) = (
            c.r.u64_array::<MAX_RANK>()?,
            c.r.u64_array::<MAX_RANK>()?,
            c.r.u64_array::<MAX_RANK>()?,
        );
        if rank > MAX_RANK {
            return Err(OpError::internal("CenterCropPad: bad parameter block"));
        }
        let src = c.bufs.input(x, bytes(shape::numel(&inn[..rank])?)?)?;
        let mut w = c.bufs.output(y, bytes(n)?)?;
        for e in 0..n {
            let (mut rem, mut s, mut mul, mut ok) = (e, 0u64, 1u64, true);
            for d in (0..rank).rev() {
                let i = (rem % out[d]) as i64 + off[d] as i64;
                rem /= out[d];
                ok &= i >= 0 && i < inn[d] as i64;
                s = s.wrapping_add((i as u64).wrapping_mul(mul));
                mul *= inn[d];
            }
            if ok {
                let (d0, s0) = (e as usize * size, s as usize * size);
                w.data[d0..d0 + size].copy_from_slice(&src[s0..s0 + size]);
            }
        }
        return Ok(vec![w]);
    }
    if kernel == "zero" {
        let (y, n) = (c.r.ptr()?, c.r.u64()?);
        return Ok(vec![c.bufs.output(y, bytes(n)?)?]);
    }
    if kernel == "unpool" {
        let (x, ib, y) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
        let (n, rank) = (c.r.u64()?, c.r.u32()? as usize);
        let (inf, out) = (c.r.u64_array::<MAX_RANK>()?, c.r.u64_array::<MAX_RANK>()?);
        if rank > MAX_RANK {
            return Err(OpError::internal("MaxUnpool: bad parameter block"));
        }
        let ind = dtype::decode_ints(Dtype::I64, &c.bufs.input(ib, n * 8)?[..n as usize * 8])
            .unwrap_or_default();
        let src = c.bufs.input(x, bytes(n)?)?;
        let n_out = shape::numel(&out[..rank])?;
        let mut w = c.bufs.output(y, bytes(n_out)?)?;
        w.data
            .copy_from_slice(&c.bufs.input(y, bytes(n_out)?)?[..bytes(n_out)? as usize]);
        let total = shape::numel(&inf[..rank])?;
        for (e, &i) in ind.iter().enumerate() {
            if i < 0 || i as u64 >= total {
                continue;
            }
            let (mut rem, mut dst, mut mul) = (i as u64, 0u64, 1u64);
            for d in (0..rank).rev() {
                dst += (rem % inf[d]) * mul;
                rem /= inf[d];
                mul *= out[d];
            }
            let (d0, s0) = (dst as usize * size, e * size);
            w.data[d0..d0 + size].copy_from_slice(&src[s0..s0 + size]);
        }
        return Ok(vec![w]);
    }
    if kernel == "compress" {
        let (x, cb, y) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
        let (n, outer, dim, kept, inner, used) = (
            c.r.u64()?,
            c.r.u64()?,
            c.r.u64()?,
            c.r.u64()?,
            c.r.u64()?,
            c.r.u64()?,
        );
        let cond = c.bufs.input(cb, used)?;
        let picked: Vec<u64> = (0..used).filter(|t| cond[*t as usize] != 0).collect();
        if picked.len() as u64 != kept {
            return Err(OpError::internal(
                "Compress: the condition changed since planning",
            ));
        }
        let src = c.bufs.input(x, bytes(outer * dim * inner)?)?;
        let mut w = c.bufs.output(y, bytes(n)?)?;
        let mut e = 0usize;
        for o in 0..outer {
            for &t in &picked {
                let s0 = ((o * dim + t) * inner) as usize * size;
                let len = inner as usize * size;
                w.data[e..e + len].copy_from_slice(&src[s0..s0 + len]);
                e += len;
            }
        }
        return Ok(vec![w]);
    }
    let (x, l, y) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let (n, t_len, ts, b_len, bs) = (c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.u64()?);
    let lens = dtype::decode_ints(Dtype::I64, c.bufs.input(l, b_len * 8)?).unwrap_or_default();
    let src = c.bufs.input(x, bytes(n)?)?;
    let mut w = c.bufs.output(y, bytes(n)?)?;
    for e in 0..n {
        let (t, b) = ((e / ts) % t_len, (e / bs) % b_len);
        let len = lens[b as usize].clamp(0, t_len as i64) as u64;
        let s = if t < len {
            e - t * ts + (len - 1 - t) * ts
        } else {
            e
        };
        let (d0, s0) = (e as usize * size, s as usize * size);
        w.data[d0..d0 + size].copy_from_slice(&src[s0..s0 + size]);
    }
    Ok(vec![w])
}
