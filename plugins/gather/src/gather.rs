//! Gather, GatherElements and GatherND: planning (shapes, parameter blocks) and the CPU kernels.
//!
//! Index semantics shared by all three: i32 or i64 indices, negative values count from the end
//! of their axis, and an index still out of range after that yields a zero element (all bytes 0)
//! instead of a read out of bounds (on the CPU and on the GPU alike).

use umd_sdk::cpu::Buffers;
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Access, CpuCall, CpuWrite, OpError, OpPlan, PlanRequestExt, TensorDesc, attr};

use crate::common::{self, by_size, copy_elem, decode_indices, norm_index};

/// Parameters of `gather_s{S}`: out[o, j, i] = data[o, idx[j], i].
///
/// CUDA: `(const T* data, const void* idx, T* out, u64 n, u64 inner, u64 nidx, u64 axis_dim,
/// u32 idx64)`.
pub struct GatherParams {
    pub n: u64,
    pub inner: u64,
    pub nidx: u64,
    pub axis_dim: u64,
    pub idx64: bool,
}

/// Parameters of `gather_elements_s{S}`: out[i] = data[i with i[axis] = idx[i]].
///
/// CUDA: `(const T* data, const void* idx, T* out, u64 n, u32 rank, u32 axis, u32 idx64,
/// umd_dims odims, umd_dims dstrides, u64 axis_dim)`.
pub struct ElementsParams {
    pub n: u64,
    pub rank: u32,
    pub axis: u32,
    pub idx64: bool,
    pub odims: [u64; MAX_RANK],
    pub dstrides: [u64; MAX_RANK],
    pub axis_dim: u64,
}

/// Parameters of `gather_nd_s{S}`: out[t, s] = data[batch(t), idx[t, 0..k], s].
///
/// CUDA: `(const T* data, const void* idx, T* out, u64 n, u64 slice, u64 k, u64 per_batch,
/// u64 batch_stride, u32 idx64, umd_dims ddims, umd_dims dstrides)`.
pub struct NdParams {
    pub n: u64,
    pub slice: u64,
    pub k: u64,
    pub per_batch: u64,
    pub batch_stride: u64,
    pub idx64: bool,
    pub ddims: [u64; MAX_RANK],
    pub dstrides: [u64; MAX_RANK],
}

fn ptrs(p: &mut ParamPacker, req: &PlanRequestExt) {
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
}

/// Plans Gather (every opset: `axis` attribute, default 0).
pub fn plan_gather(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis"])?;
    let (data, idx) = (req.required(0)?, req.required(1)?);
    let idx64 = common::index_is_i64(req, 1)?;
    let r = data.shape.len();
    if r == 0 {
        return Err(OpError::shape("Gather: data must have rank >= 1"));
    }
    let axis = common::norm_axis(
        "Gather",
        "axis",
        attr::int_or(&req.attributes, "axis", 0)?,
        r,
    )?;
    let mut out_shape = data.shape[..axis].to_vec();
    out_shape.extend_from_slice(&idx.shape);
    out_shape.extend_from_slice(&data.shape[axis + 1..]);
    let n = common::out_numel(&out_shape, data.dtype)?;
    let prm = GatherParams {
        n,
        inner: shape::numel(&data.shape[axis + 1..])?,
        nidx: shape::numel(&idx.shape)?,
        axis_dim: data.shape[axis],
        idx64,
    };
    let mut p = ParamPacker::new();
    ptrs(&mut p, req);
    p.u64(prm.n)
        .u64(prm.inner)
        .u64(prm.nidx)
        .u64(prm.axis_dim)
        .u32(prm.idx64 as u32);
    let size = umd_sdk::dtype::size(data.dtype);
    let l = common::make_launch(
        req,
        common::move_module(size),
        common::move_entry("gather", size),
        n,
        p,
    )?;
    Ok(common::one_output(
        TensorDesc::new("output", out_shape, data.dtype),
        vec![l],
    ))
}

/// Plans GatherElements (`axis`, default 0). Index dims other than `axis` may be smaller than
/// the data's.
pub fn plan_elements(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis"])?;
    let op = "GatherElements";
    let (data, idx) = (req.required(0)?, req.required(1)?);
    let idx64 = common::index_is_i64(req, 1)?;
    common::check_rank(op, data)?;
    let r = data.shape.len();
    if r == 0 || idx.shape.len() != r {
        return Err(OpError::shape(format!(
            "{op}: data {:?} and indices {:?} must have the same rank >= 1",
            data.shape, idx.shape
        )));
    }
    let axis = common::norm_axis(op, "axis", attr::int_or(&req.attributes, "axis", 0)?, r)?;
    for d in 0..r {
        if d != axis && idx.shape[d] > data.shape[d] {
            return Err(OpError::shape(format!(
                "{op}: indices {:?} exceed data {:?} in dimension {d}",
                idx.shape, data.shape
            )));
        }
    }
    let n = common::out_numel(&idx.shape, data.dtype)?;
    let prm = ElementsParams {
        n,
        rank: r as u32,
        axis: axis as u32,
        idx64,
        odims: common::dims8(&idx.shape, 1)?,
        dstrides: common::dims8(&common::strides(&data.shape), 0)?,
        axis_dim: data.shape[axis],
    };
    let mut p = ParamPacker::new();
    ptrs(&mut p, req);
    p.u64(prm.n)
        .u32(prm.rank)
        .u32(prm.axis)
        .u32(prm.idx64 as u32)
        .u64_array(&prm.odims)
        .u64_array(&prm.dstrides)
        .u64(prm.axis_dim);
    let size = umd_sdk::dtype::size(data.dtype);
    let l = common::make_launch(
        req,
        common::move_module(size),
        common::move_entry("gather_elements", size),
        n,
        p,
    )?;
    Ok(common::one_output(
        TensorDesc::new("output", idx.shape.clone(), data.dtype),
        vec![l],
    ))
}

/// Plans GatherND (`batch_dims`, default 0).
pub fn plan_nd(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["batch_dims"])?;
    let op = "GatherND";
    let (data, idx) = (req.required(0)?, req.required(1)?);
    let idx64 = common::index_is_i64(req, 1)?;
    common::check_rank(op, data)?;
    let (r, q) = (data.shape.len(), idx.shape.len());
    let b = attr::int_or(&req.attributes, "batch_dims", 0)?;
    if b < 0 || b as usize >= r.min(q) {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: attribute `batch_dims` = {b} must be in [0, min(rank(data), rank(indices)))"
        )));
    }
    let b = b as usize;
    if r == 0 || q == 0 {
        return Err(OpError::shape(format!(
            "{op}: data and indices need rank >= 1"
        )));
    }
    let k = idx.shape[q - 1];
    if k < 1 || k as usize > r - b {
        return Err(OpError::shape(format!(
            "{op}: indices' last dimension {k} must be in [1, {}]",
            r - b
        )));
    }
    let k = k as usize;
    if data.shape[..b] != idx.shape[..b] {
        return Err(OpError::shape(format!(
            "{op}: batch dimensions differ: data {:?}, indices {:?}",
            data.shape, idx.shape
        )));
    }
    let mut out_shape = idx.shape[..q - 1].to_vec();
    out_shape.extend_from_slice(&data.shape[b + k..]);
    let n = common::out_numel(&out_shape, data.dtype)?;
    let dstr = common::strides(&data.shape);
    let prm = NdParams {
        n,
        slice: shape::numel(&data.shape[b + k..])?,
        k: k as u64,
        per_batch: shape::numel(&idx.shape[b..q - 1])?,
        batch_stride: shape::numel(&data.shape[b..])?,
        idx64,
        ddims: common::dims8(&data.shape[b..b + k], 1)?,
        dstrides: common::dims8(&dstr[b..b + k], 0)?,
    };
    let mut p = ParamPacker::new();
    ptrs(&mut p, req);
    p.u64(prm.n)
        .u64(prm.slice)
        .u64(prm.k)
        .u64(prm.per_batch)
        .u64(prm.batch_stride)
        .u32(prm.idx64 as u32)
        .u64_array(&prm.ddims)
        .u64_array(&prm.dstrides);
    let size = umd_sdk::dtype::size(data.dtype);
    let l = common::make_launch(
        req,
        common::move_module(size),
        common::move_entry("gather_nd", size),
        n,
        p,
    )?;
    Ok(common::one_output(
        TensorDesc::new("output", out_shape, data.dtype),
        vec![l],
    ))
}

/// The three pointers every gather kernel starts with.
fn read_ptrs(r: &mut ParamReader) -> Result<(u32, u32, u32), OpError> {
    Ok((r.ptr()?, r.ptr()?, r.ptr()?))
}

/// Runs `gather_s{size}`, `gather_elements_s{size}` or `gather_nd_s{size}` on the CPU.
pub fn run_cpu(call: &CpuCall, base: &str, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (data, idx, out) = read_ptrs(&mut r)?;
    let data = bufs.input(data, 0)?;
    let w = match base {
        "gather" => {
            let prm = GatherParams {
                n: r.u64()?,
                inner: r.u64()?,
                nidx: r.u64()?,
                axis_dim: r.u64()?,
                idx64: r.u32()? != 0,
            };
            let isz = if prm.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, prm.nidx * isz)?;
            let mut w = bufs.output(out, prm.n * size as u64)?;
            by_size!(size, gather_cpu(&prm, data, idx, &mut w.data))?;
            w
        }
        "gather_elements" => {
            let prm = ElementsParams {
                n: r.u64()?,
                rank: r.u32()?,
                axis: r.u32()?,
                idx64: r.u32()? != 0,
                odims: r.u64_array()?,
                dstrides: r.u64_array()?,
                axis_dim: r.u64()?,
            };
            let isz = if prm.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, prm.n * isz)?;
            let mut w = bufs.output(out, prm.n * size as u64)?;
            by_size!(size, elements_cpu(&prm, data, idx, &mut w.data))?;
            w
        }
        "gather_nd" => {
            let prm = NdParams {
                n: r.u64()?,
                slice: r.u64()?,
                k: r.u64()?,
                per_batch: r.u64()?,
                batch_stride: r.u64()?,
                idx64: r.u32()? != 0,
                ddims: r.u64_array()?,
                dstrides: r.u64_array()?,
            };
            let tuples = prm.n.checked_div(prm.slice).unwrap_or(0);
            let isz = if prm.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, tuples * prm.k * isz)?;
            let mut w = bufs.output(out, prm.n * size as u64)?;
            by_size!(size, nd_cpu(&prm, data, idx, &mut w.data))?;
            w
        }
        _ => return Err(common::unknown_entry(&call.module_id, &call.entry_point)),
    };
    Ok(vec![w])
}

fn bounds(what: &str, need: u64, have: usize) -> Result<(), OpError> {
    if need > have as u64 {
        return Err(OpError::internal(format!(
            "{what}: reads {need} bytes of a {have}-byte buffer"
        )));
    }
    Ok(())
}

fn gather_cpu<const S: usize>(
    p: &GatherParams,
    data: &[u8],
    idx: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    if p.n == 0 {
        return Ok(());
    }
    let (inner, nidx) = (p.inner as usize, p.nidx as usize);
    let outer = p.n as usize / (inner * nidx);
    bounds(
        "gather",
        (outer as u64) * p.axis_dim * p.inner * S as u64,
        data.len(),
    )?;
    let idx = decode_indices(idx, p.idx64, nidx);
    let row = inner * S;
    for o in 0..outer {
        for (j, &k) in idx.iter().enumerate() {
            if let Some(k) = norm_index(k, p.axis_dim) {
                let src = (o * p.axis_dim as usize + k as usize) * row;
                let dst = (o * nidx + j) * row;
                out[dst..dst + row].copy_from_slice(&data[src..src + row]);
            }
        }
    }
    Ok(())
}

fn elements_cpu<const S: usize>(
    p: &ElementsParams,
    data: &[u8],
    idx: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    let rank = p.rank as usize;
    let axis = p.axis as usize;
    if p.n == 0 || rank == 0 || rank > MAX_RANK || axis >= rank {
        return Ok(());
    }
    let extent: u64 = (0..rank)
        .map(|d| {
            let dim = if d == axis { p.axis_dim } else { p.odims[d] };
            dim.saturating_sub(1) * p.dstrides[d]
        })
        .sum::<u64>()
        + 1;
    bounds("gather_elements", extent * S as u64, data.len())?;
    let idx = decode_indices(idx, p.idx64, p.n as usize);
    let mut coord = [0u64; MAX_RANK];
    // offset of the current coordinate in data, without the axis term
    let mut base = 0u64;
    for (i, &k) in idx.iter().enumerate() {
        if let Some(k) = norm_index(k, p.axis_dim) {
            let src = base + k * p.dstrides[axis];
            copy_elem::<S>(out, i, data, src as usize);
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
}

fn nd_cpu<const S: usize>(
    p: &NdParams,
    data: &[u8],
    idx: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    if p.n == 0 || p.slice == 0 {
        return Ok(());
    }
    let (k, slice) = (p.k as usize, p.slice as usize);
    let tuples = p.n as usize / slice;
    let batches = tuples / p.per_batch.max(1) as usize;
    bounds(
        "gather_nd",
        batches as u64 * p.batch_stride * S as u64,
        data.len(),
    )?;
    let idx = decode_indices(idx, p.idx64, tuples * k);
    let row = slice * S;
    'tuple: for t in 0..tuples {
        let mut src = (t as u64 / p.per_batch) * p.batch_stride;
        for j in 0..k {
            match norm_index(idx[t * k + j], p.ddims[j]) {
                Some(v) => src += v * p.dstrides[j],
                None => continue 'tuple,
            }
        }
        let src = src as usize * S;
        out[t * row..(t + 1) * row].copy_from_slice(&data[src..src + row]);
    }
    Ok(())
}
