//! Planning helpers the ops share: ONNX dtype codes, axis normalisation, optional pointers, and
//! launch construction (one thread per element, grid-stride).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, Dim3, Dtype, Launch, OpError, PlanRequestExt, dtype, launch};

/// Threads per block of the element-wise kernels.
pub const THREADS: u32 = 256;

/// The umd dtype of an ONNX `TensorProto.DataType` code; `None` for those umd lacks.
pub fn from_onnx(code: i64) -> Option<Dtype> {
    dtype::from_onnx(code).filter(|d| *d != Dtype::Boolean)
}

/// Normalises `axis` into `0..rank`; `InvalidAttribute` otherwise.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, OpError> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `axis` = {axis} is out of range for rank {rank}"
        )));
    }
    Ok(a as usize)
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

/// An `UnsupportedDtype` error naming what is served.
pub fn bad_dtype(req: &PlanRequestExt, what: &str, dt: Dtype, served: &[Dtype]) -> OpError {
    let names: Vec<_> = served.iter().map(|d| dtype::name(*d)).collect();
    OpError::dtype(format!(
        "{}: {what} is {}; served: {}",
        req.op,
        dtype::name(dt),
        names.join(", ")
    ))
}

/// Packs binding `b` as a pointer, or a null pointer when absent.
pub fn opt_ptr(p: &mut ParamPacker, b: Option<u32>) {
    match b {
        Some(b) => p.ptr(b, Access::Read),
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

/// A launch with one thread per element over `n` elements.
pub fn linear_launch(
    req: &PlanRequestExt,
    module: String,
    entry: String,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let (grid, block) = launch::linear(n, THREADS, &req.target.limits)?;
    finish(req, module, entry, grid, block, p)
}

/// A launch of one block of [`THREADS`] threads.
pub fn single_block(
    req: &PlanRequestExt,
    module: String,
    entry: String,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let (grid, block) = (Dim3::x(1), Dim3::x(THREADS));
    launch::check(grid, block, 0, &req.target.limits)?;
    finish(req, module, entry, grid, block, p)
}

fn finish(
    req: &PlanRequestExt,
    module_id: String,
    entry_point: String,
    grid: Dim3,
    block: Dim3,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes)?;
    Ok(Launch {
        module_id,
        entry_point,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}
