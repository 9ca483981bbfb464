//! Gather, GatherElements and GatherND: planning (shapes, parameter blocks). Their CPU kernels
//! are in [`crate::inplace`].
//!
//! Index semantics shared by all three: i32 or i64 indices, negative values count from the end
//! of their axis, and an index still out of range after that yields a zero element (all bytes 0)
//! instead of a read out of bounds (on the CPU and on the GPU alike).

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr};

use crate::common;

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
