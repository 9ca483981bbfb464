//! Planning NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as up to three launches of
//! module `loss_{T}_{I}` (T the data dtype, I the target's):
//!
//! 1. `_lsm` (SCE only): log-softmax over C of x viewed as `[N, C, D]`, one thread per `(n, d)`,
//!    into the log_prob output (when asked for) or the workspace.
//!    Parameters: `x, lp, lp_off, N, C, D`.
//! 2. `_nll`: per `(n, d)` the weight `w` (weight[t] or 1; 0 where t = ignore_index) and the loss
//!    `-w · x[n, t, d]`: written as T to the output (`reduction = none`), or as two f64 arrays
//!    (losses, then weights) to the workspace. A target outside `[0, C)` that is not ignored
//!    gives NaN. Parameters: `flags (bit 0 weight, 1 ignore_index, 2 to workspace), x, x_off,
//!    target, weight (or 0), out, out_off, ignore_index, N, C, D`.
//! 3. `_red` (sum, mean): one block sums both arrays; mean divides the losses' sum by the
//!    weights' sum. Parameters: `ws, ws_off, y, count, mean`.
//!
//! Pointers into the workspace carry a byte offset (`*_off`): the workspace holds the
//! log-probabilities (SCE without the log_prob output) then the two f64 arrays.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, launch,
};

use crate::{FLOATS, TARGETS};

/// Threads per block.
pub const THREADS: u32 = 256;

/// The module of data dtype `t` and target dtype `i`.
pub fn module_id(t: Dtype, i: Dtype) -> String {
    format!("loss_{}_{}", dtype::name(t), dtype::name(i))
}

/// Parses [`module_id`].
pub fn parse(id: &str) -> Option<(Dtype, Dtype)> {
    let mut it = id.strip_prefix("loss_")?.split('_');
    let t = dtype::from_name(it.next()?)?;
    let i = dtype::from_name(it.next()?)?;
    (it.next().is_none() && FLOATS.contains(&t) && TARGETS.contains(&i)).then_some((t, i))
}

/// Plans NegativeLogLikelihoodLoss (`sce` false) or SoftmaxCrossEntropyLoss.
pub fn plan(req: &PlanRequestExt, sce: bool) -> Result<OpPlan, OpError> {
    let attrs = &req.attributes;
    attr::only(attrs, &["reduction", "ignore_index"])?;
    if req.slots() > 3 {
        return Err(OpError::shape(format!(
            "{} takes at most 3 inputs, got {}",
            req.op,
            req.slots()
        )));
    }
    let reduction = attr::text_or(attrs, "reduction", "mean")?;
    let reduce = match reduction.as_str() {
        "none" => None,
        "sum" => Some(false),
        "mean" => Some(true),
        other => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `reduction` = {other:?}: none, sum or mean"
            )));
        }
    };
    let ignore = attr::has(attrs, "ignore_index")
        .then(|| attr::int(attrs, "ignore_index"))
        .transpose()?;
    let x = req.required(0)?;
    let t = req.required(1)?;
    let dt = x.dtype;
    if !FLOATS.contains(&dt) {
        return Err(OpError::dtype(format!(
            "{}: the input is {}; served: f32, f16, bf16, f64",
            req.op,
            dtype::name(dt)
        )));
    }
    if !TARGETS.contains(&t.dtype) {
        return Err(OpError::dtype(format!(
            "{}: the target is {}; served: i32, i64",
            req.op,
            dtype::name(t.dtype)
        )));
    }
    let rank = x.shape.len();
    if !(2..=MAX_RANK).contains(&rank) {
        return Err(OpError::shape(format!(
            "{}: the input has rank {rank}; ranks 2 to {MAX_RANK} ([N, C, d1, ...]) are served",
            req.op
        )));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let d = shape::numel(&x.shape[2..])?;
    shape::byte_size(&x.shape, Dtype::F64)?;
    let mut want_t = vec![n];
    want_t.extend_from_slice(&x.shape[2..]);
    if t.shape != want_t {
        return Err(OpError::shape(format!(
            "{}: the target has shape {:?}, expected {want_t:?} for input {:?}",
            req.op, t.shape, x.shape
        )));
    }
    if let Some(w) = req.input(2) {
        if w.dtype != dt {
            return Err(OpError::dtype(format!(
                "{}: the weight is {}, the input {}",
                req.op,
                dtype::name(w.dtype),
                dtype::name(dt)
            )));
        }
        if w.shape != [c] {
            return Err(OpError::shape(format!(
                "{}: the weight has shape {:?}, expected [{c}]",
                req.op, w.shape
            )));
        }
    }
    let outputs = req.outputs(1);
    if outputs == 0 || outputs > if sce { 2 } else { 1 } {
        return Err(OpError::shape(format!(
            "{}: {outputs} outputs asked for",
            req.op
        )));
    }
    let log_prob_out = sce && outputs == 2;
    let rows = n * d;
    let lp_bytes = if sce && !log_prob_out {
        shape::byte_size(&x.shape, dt)?.next_multiple_of(8)
    } else {
        0
    };
    let ws_bytes = lp_bytes + if reduce.is_some() { 16 * rows } else { 0 };
    let ws_needed = lp_bytes > 0 || reduce.is_some();
    let ws = req.output_binding(outputs);
    let id = module_id(dt, t.dtype);
    let mut launches = Vec::new();
    // where the log-probabilities are: (binding, byte offset)
    let (lp_b, lp_off) = if !sce {
        (0, 0)
    } else if log_prob_out {
        (req.output_binding(1), 0)
    } else {
        (ws, 0)
    };
    if sce {
        let mut p = ParamPacker::new();
        p.ptr(0, Access::Read)
            .ptr(lp_b, Access::Write)
            .u64(lp_off)
            .u64(n)
            .u64(c)
            .u64(d);
        launches.push(linear(req, &id, "lsm", rows, p)?);
    }
    let flags = req.input(2).is_some() as u32
        | (ignore.is_some() as u32) << 1
        | (reduce.is_some() as u32) << 2;
    let (out_b, out_off) = if reduce.is_some() {
        (ws, lp_bytes)
    } else {
        (req.output_binding(0), 0)
    };
    let mut p = ParamPacker::new();
    p.u32(flags)
        .ptr(lp_b, Access::Read)
        .u64(lp_off)
        .ptr(req.binding(1).expect("target present"), Access::Read);
    match req.binding(2) {
        Some(b) => p.ptr(b, Access::Read),
        None => p.u64(0),
    };
    p.ptr(out_b, Access::Write)
        .u64(out_off)
        .i64(ignore.unwrap_or(0))
        .u64(n)
        .u64(c)
        .u64(d);
    launches.push(linear(req, &id, "nll", rows, p)?);
    if let Some(mean) = reduce {
        let mut p = ParamPacker::new();
        p.ptr(ws, Access::Read)
            .u64(lp_bytes)
            .ptr(req.output_binding(0), Access::Write)
            .u64(rows)
            .u32(mean as u32);
        let (grid, block) = (Dim3::x(1), Dim3::x(THREADS));
        launch::check(grid, block, 0, &req.target.limits)?;
        launches.push(finish(req, &id, "red", grid, block, p)?);
    }
    let loss_shape = if reduce.is_some() { vec![] } else { want_t };
    let mut outs = vec![TensorDesc::new("loss", loss_shape, dt)];
    if log_prob_out {
        outs.push(TensorDesc::new("log_prob", x.shape.clone(), dt));
    }
    Ok(OpPlan {
        outputs: outs,
        launches,
        workspace_bytes: if ws_needed { ws_bytes.max(8) } else { 0 },
    })
}

fn linear(
    req: &PlanRequestExt,
    id: &str,
    stage: &str,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let (grid, block) = launch::linear(n, THREADS, &req.target.limits)?;
    finish(req, id, stage, grid, block, p)
}

fn finish(
    req: &PlanRequestExt,
    id: &str,
    stage: &str,
    grid: Dim3,
    block: Dim3,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes)?;
    Ok(Launch {
        module_id: id.to_string(),
        entry_point: format!("{id}_{stage}"),
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}
