//! Planning helpers shared by every op group: launch construction, axis normalization, ONNX
//! dtype numbers, input checks and checked size arithmetic.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape;
use umd_sdk::{Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, dtype, launch};

/// Threads per block of every launch.
pub const THREADS: u32 = 256;

/// Every dtype umd knows (data movement serves them all).
pub const ALL_DTYPES: [Dtype; 18] = dtype::ALL;

/// Every dtype, the packed ones (ABI 1.4) last: Cast's sources and targets.
pub const CAST_DTYPES: [Dtype; 23] = {
    let mut all = [Dtype::F32; 23];
    let mut i = 0;
    while i < 18 {
        all[i] = dtype::ALL[i];
        i += 1;
    }
    while i < 23 {
        all[i] = dtype::PACKED[i - 18];
        i += 1;
    }
    all
};

/// A launch of `entry` in `module` over `n` work items (grid-stride loops in the kernels).
pub fn make_launch(
    req: &PlanRequestExt,
    module: &str,
    entry: String,
    n: u64,
    packer: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(n, THREADS, limits)?;
    let (params, relocations) = packer.finish(limits.max_param_bytes)?;
    Ok(Launch {
        module_id: module.into(),
        entry_point: entry,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

/// A plan with the given outputs and launches and no workspace.
pub fn plan(outputs: Vec<TensorDesc>, launches: Vec<Launch>) -> OpPlan {
    OpPlan {
        outputs,
        launches,
        workspace_bytes: 0,
    }
}

/// An output description named after the op.
pub fn out(req: &PlanRequestExt, shape: Vec<u64>, dt: Dtype) -> TensorDesc {
    TensorDesc::new(format!("{}_out", req.op.to_ascii_lowercase()), shape, dt)
}

/// Normalizes an ONNX axis in `[-rank, rank)`.
pub fn norm_axis(
    req: &PlanRequestExt,
    what: &str,
    axis: i64,
    rank: usize,
) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(OpError::InvalidAttribute(format!(
            "{}: {what} {axis} is out of range for rank {rank}",
            req.op
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Normalizes a list of axes, refusing duplicates.
pub fn norm_axes(
    req: &PlanRequestExt,
    what: &str,
    axes: &[i64],
    rank: usize,
) -> Result<Vec<usize>, OpError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = norm_axis(req, what, a, rank)?;
        if out.contains(&a) {
            return Err(OpError::InvalidAttribute(format!(
                "{}: {what} {axes:?} name axis {a} twice",
                req.op
            )));
        }
        out.push(a);
    }
    Ok(out)
}

/// The umd dtype of an ONNX `TensorProto.DataType` number (STRING is the text plugin's: casts
/// to and from strings are not served here).
pub fn onnx_dtype(code: i64) -> Option<Dtype> {
    dtype::from_onnx(code).filter(|&d| d != Dtype::String)
}

/// The error for an ONNX dtype number umd has no dtype for.
pub fn unknown_onnx_dtype(req: &PlanRequestExt, attr: &str, code: i64) -> OpError {
    OpError::UnsupportedDtype(format!(
        "{}: attribute `{attr}` = {code} is not a served dtype (served: {})",
        req.op,
        dtype::onnx_codes_served()
    ))
}

/// Refuses a request with more than `max` input slots or fewer than `min` present-or-absent.
pub fn arity(req: &PlanRequestExt, min: usize, max: usize) -> Result<(), OpError> {
    let n = req.slots();
    if n < min || n > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(OpError::shape(format!(
            "{} takes {want} input(s), got {n}",
            req.op
        )));
    }
    Ok(())
}

/// Element count and byte size of `shape` in `dt`, refusing overflow.
pub fn numel_checked(shape: &[u64], dt: Dtype) -> Result<u64, OpError> {
    shape::byte_size(shape, dt)?;
    shape::numel(shape)
}

/// A non-negative dimension from an ONNX shape value.
pub fn dim(req: &PlanRequestExt, what: &str, v: i64) -> Result<u64, OpError> {
    u64::try_from(v)
        .map_err(|_| OpError::shape(format!("{}: {what} has a negative dimension {v}", req.op)))
}

/// `dtype::name` for messages.
pub fn dt_name(dt: Dtype) -> &'static str {
    dtype::name(dt)
}

/// The constant integer value of input slot `i`, or an error naming it when it has none.
pub fn required_ints(req: &PlanRequestExt, i: usize, what: &str) -> Result<Vec<i64>, OpError> {
    req.ints(i)?
        .ok_or_else(|| OpError::shape(format!("{}: input {i} (`{what}`) is required", req.op)))
}
