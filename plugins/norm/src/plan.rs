//! Planning helpers every op of the plugin shares: dtype and shape checks, axis normalisation,
//! optional pointers in a parameter block, and launch construction for the two kernel shapes
//! (one block per group, one thread per element).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Access, Dim3, Dtype, Launch, OpError, PlanRequestExt, TensorDesc, dtype, launch};

use crate::DTYPES;

/// Threads per block of the element-wise kernels.
pub const THREADS: u32 = 256;

/// The dtype of input `slot` (which must be present), checked to be a served float dtype.
pub fn float_input(req: &PlanRequestExt, slot: usize) -> Result<(&TensorDesc, Dtype), OpError> {
    let x = req.required(slot)?;
    if !DTYPES.contains(&x.dtype) {
        return Err(OpError::dtype(format!(
            "{}: input `{}` is {}; served dtypes are f32, f16, bf16 and f64",
            req.op,
            x.name,
            dtype::name(x.dtype)
        )));
    }
    if x.shape.len() > MAX_RANK {
        return Err(OpError::shape(format!(
            "{}: input `{}` has rank {}, the maximum is {MAX_RANK}",
            req.op,
            x.name,
            x.shape.len()
        )));
    }
    shape::byte_size(&x.shape, x.dtype)?;
    Ok((x, x.dtype))
}

/// Input `slot` when present, checked to have dtype `dt`.
pub fn same_dtype(
    req: &PlanRequestExt,
    slot: usize,
    dt: Dtype,
) -> Result<Option<&TensorDesc>, OpError> {
    let Some(t) = req.input(slot) else {
        return Ok(None);
    };
    if t.dtype != dt {
        return Err(OpError::dtype(format!(
            "{}: input `{}` is {} but the data is {} (inputs of one float dtype are served)",
            req.op,
            t.name,
            dtype::name(t.dtype),
            dtype::name(dt)
        )));
    }
    Ok(Some(t))
}

/// A required per-channel (or per-group) parameter input: present, of dtype `dt`, `len` elements.
pub fn vector_input<'a>(
    req: &'a PlanRequestExt,
    slot: usize,
    dt: Dtype,
    len: u64,
    what: &str,
) -> Result<&'a TensorDesc, OpError> {
    let t = same_dtype(req, slot, dt)?
        .ok_or_else(|| OpError::shape(format!("{}: input {slot} ({what}) is required", req.op)))?;
    if shape::numel(&t.shape)? != len || t.shape.len() > 1 {
        return Err(OpError::shape(format!(
            "{}: input `{}` ({what}) has shape {:?}, expected [{len}]",
            req.op, t.name, t.shape
        )));
    }
    Ok(t)
}

/// Refuses more input slots than `max`.
pub fn max_inputs(req: &PlanRequestExt, max: usize) -> Result<(), OpError> {
    if req.slots() > max {
        return Err(OpError::shape(format!(
            "{} takes at most {max} inputs, got {}",
            req.op,
            req.slots()
        )));
    }
    Ok(())
}

/// Normalises `axis` into `0..rank` (ONNX accepts `-rank..rank`); `InvalidAttribute` otherwise.
pub fn norm_axis(axis: i64, rank: usize, name: &str) -> Result<usize, OpError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `{name}` = {axis} is out of range for rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// Product of `dims` (overflow already excluded by the caller's `byte_size` check).
pub fn prod(dims: &[u64]) -> u64 {
    dims.iter().product()
}

/// Packs binding `b` as a pointer, or a null pointer when absent.
pub fn opt_ptr(p: &mut ParamPacker, b: Option<u32>, access: Access) {
    match b {
        Some(b) => p.ptr(b, access),
        None => p.u64(0),
    };
}

/// Reads a pointer packed by [`opt_ptr`]: `present` says which of the two it was.
pub fn read_opt_ptr(r: &mut ParamReader, present: bool) -> Result<Option<u32>, OpError> {
    if present {
        r.ptr().map(Some)
    } else {
        r.u64().map(|_| None)
    }
}

/// The module every launch of dtype `dt` lives in.
pub fn module_id(dt: Dtype) -> String {
    format!("norm_{}", dtype::name(dt))
}

fn finish(
    req: &PlanRequestExt,
    dt: Dtype,
    entry: String,
    (grid, block): (Dim3, Dim3),
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes)?;
    Ok(Launch {
        module_id: module_id(dt),
        entry_point: entry,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

/// A launch with one thread per element over `n` elements (grid-stride).
pub fn linear_launch(
    req: &PlanRequestExt,
    dt: Dtype,
    entry: String,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let shape = launch::linear(n, THREADS, &req.target.limits)?;
    finish(req, dt, entry, shape, p)
}

/// A launch with one block per group (grid-stride over `groups`), its threads sized to the
/// `per_group` elements each block reduces: a power of two from 32 to 1024.
pub fn group_launch(
    req: &PlanRequestExt,
    dt: Dtype,
    entry: String,
    groups: u64,
    per_group: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let max = limits
        .max_threads_per_block
        .min(limits.max_block_dims.x)
        .min(1024);
    // a power of two of at least a warp (the block reductions assume whole warps)
    let cap = 1u64 << (63 - (max.max(32) as u64).leading_zeros());
    let threads = per_group.min(1024).next_power_of_two().clamp(32, cap) as u32;
    let grid = groups.clamp(1, limits.max_grid_dims.x as u64) as u32;
    let (grid, block) = (Dim3::x(grid), Dim3::x(threads));
    launch::check(grid, block, 0, limits)?;
    finish(req, dt, entry, (grid, block), p)
}
