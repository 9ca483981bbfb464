//! Planning: request checks, output shapes and the packed parameters of every op.
//!
//! Reduce ops and ArgMax/ArgMin are planned over a [`View`] and launched either as one block
//! per output (`_rows`: a block reduction, for long or contiguous reductions) or one thread per
//! output (`_cols`: coalesced when the reduced dimension is outer to a contiguous kept one); a
//! long reduction with too few outputs to fill the device is split across blocks (`_split1`
//! into a workspace of partials, `_split2` combining them).
//! CumSum, CumProd and TopK work along one axis, seen as `(outer, R, inner)`.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, launch,
};

use crate::ops::{self, ARG_OPS, NUMERIC, ORDERED, REDUCE_OPS, Red};
use crate::view::View;

/// Threads per block of the block-per-output kernels (their shared arrays have this size).
pub const BLOCK: u32 = 256;
/// Threads per block of the thread-per-output kernels.
const THREADS: u32 = 256;

/// Plans any op of this plugin.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let op = req.op.as_str();
    if let Some((_, red, _)) = REDUCE_OPS
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(op))
    {
        plan_reduce(req, *red)
    } else if let Some((_, k)) = ARG_OPS.iter().find(|(n, _)| n.eq_ignore_ascii_case(op)) {
        plan_arg(req, k)
    } else if op.eq_ignore_ascii_case("CumSum") {
        plan_cumsum(req, "cumsum")
    } else if op.eq_ignore_ascii_case("CumProd") {
        plan_cumsum(req, "cumprod")
    } else if op.eq_ignore_ascii_case("TopK") {
        plan_topk(req)
    } else {
        Err(umd_sdk::unsupported_op_ext(req))
    }
}

/// Input 0 with its dtype checked against `served` and its rank against [`MAX_RANK`].
fn data_input<'a>(req: &'a PlanRequestExt, served: &[Dtype]) -> Result<&'a TensorDesc, OpError> {
    let x = req.required(0)?;
    if !served.contains(&x.dtype) {
        return Err(OpError::dtype(format!(
            "{} serves {}, not {}",
            req.op,
            ops::dtype_list(served),
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
    Ok(x)
}

/// Refuses input slots past `max` (present or absent).
fn at_most_inputs(req: &PlanRequestExt, max: usize) -> Result<(), OpError> {
    if req.slots() > max {
        return Err(OpError::shape(format!(
            "{} takes at most {max} input(s), got {}",
            req.op,
            req.slots()
        )));
    }
    Ok(())
}

/// `axis` normalised against `rank` (negative counts from the end).
fn norm_axis(op: &str, what: &str, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: `{what}` {axis} is out of range for rank {rank}"
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// An int attribute read as ONNX does for flags (any non-zero value is true).
fn flag(req: &PlanRequestExt, name: &str, default: bool) -> Result<bool, OpError> {
    Ok(attr::int_or(&req.attributes, name, default as i64)? != 0)
}

/// The reduced-dimension mask of a `Reduce*` request: axes from input 1 (newer opsets) or the
/// `axes` attribute (older ones); empty axes reduce everything unless `noop_with_empty_axes`.
fn reduce_mask(req: &PlanRequestExt, rank: usize) -> Result<Vec<bool>, OpError> {
    let from_attr = attr::ints_opt(&req.attributes, "axes")?;
    let from_input = req.ints(1)?;
    let axes = match (from_input, from_attr) {
        (Some(_), Some(_)) => {
            return Err(OpError::InvalidAttribute(format!(
                "{}: `axes` is given both as an attribute and as input 1",
                req.op
            )));
        }
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => Vec::new(),
    };
    if axes.is_empty() {
        let noop = flag(req, "noop_with_empty_axes", false)?;
        return Ok(vec![!noop; rank]);
    }
    let mut mask = vec![false; rank];
    for a in axes {
        let d = norm_axis(&req.op, "axes", a, rank)?;
        if mask[d] {
            return Err(OpError::InvalidAttribute(format!(
                "{}: `axes` names dimension {d} twice",
                req.op
            )));
        }
        mask[d] = true;
    }
    Ok(mask)
}

/// Output shape of a reduction: reduced dims dropped or kept as 1.
fn reduced_shape(shape: &[u64], mask: &[bool], keepdims: bool) -> Vec<u64> {
    shape
        .iter()
        .zip(mask)
        .filter_map(|(&d, &m)| match (m, keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Whether a view is reduced by one block per output rather than one thread per output.
fn use_rows(v: &View) -> bool {
    let contiguous = v.rshape.len() == 1 && v.rstride[0] == 1;
    v.r >= 32 && (contiguous || v.n_out < 8192)
}

/// The launch of a view-based kernel `{kernel}_{dt}_{rows|cols}` in module `reduce_{dt}`.
fn view_launch(
    req: &PlanRequestExt,
    kernel: &str,
    dt: Dtype,
    v: &View,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let rows = use_rows(v);
    let (grid, block) = if rows {
        let threads = v.r.next_power_of_two().clamp(32, BLOCK as u64) as u32;
        let blocks = v.n_out.clamp(1, limits.max_grid_dims.x as u64) as u32;
        let (g, b) = (umd_sdk::Dim3::x(blocks), umd_sdk::Dim3::x(threads));
        launch::check(g, b, 0, limits)?;
        (g, b)
    } else {
        launch::linear(v.n_out, THREADS, limits)?
    };
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    let name = dtype::name(dt);
    Ok(Launch {
        module_id: format!("reduce_{name}"),
        entry_point: format!("{kernel}_{name}_{}", if rows { "rows" } else { "cols" }),
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

/// Reductions at least this long with few outputs are split across blocks.
const SPLIT_MIN_R: u64 = 8192;
/// The shortest chunk of a split reduction.
const SPLIT_MIN_CHUNK: u64 = 2048;

/// `(chunks, chunk length)` when a reduction has too few outputs to fill the device and is
/// long enough to split: each chunk is reduced by one block into a partial (in the workspace),
/// then the partials are combined and finalized. LogSumExp (two passes) is never split.
fn split_of(req: &PlanRequestExt, red: Red, v: &View) -> Option<(u64, u64)> {
    let wanted = (4 * req.target.limits.sm_count as u64).max(8);
    if red == Red::LogSumExp || v.r < SPLIT_MIN_R || v.n_out == 0 || v.n_out * 2 > wanted {
        return None;
    }
    let s = wanted.div_ceil(v.n_out).min(v.r.div_ceil(SPLIT_MIN_CHUNK));
    let chunk = v.r.div_ceil(s.max(1));
    let s = v.r.div_ceil(chunk);
    (s >= 2).then_some((s, chunk))
}

/// The two launches of a split reduction (`_split1`: partials, `_split2`: combine) and the
/// workspace they need (8 bytes per partial, whatever the compute type).
fn split_launches(
    req: &PlanRequestExt,
    kernel: &str,
    dt: Dtype,
    v: &View,
    (s, chunk): (u64, u64),
) -> Result<(Vec<Launch>, u64), OpError> {
    let limits = &req.target.limits;
    let (out, ws) = (req.output_binding(0), req.output_binding(1));
    let partials = shape::numel(&[v.n_out, s])?;
    let name = dtype::name(dt);
    let launch = |variant: &str, grid, block, p: ParamPacker| -> Result<Launch, OpError> {
        launch::check(grid, block, 0, limits)?;
        let (params, relocations) = p.finish(limits.max_param_bytes)?;
        Ok(Launch {
            module_id: format!("reduce_{name}"),
            entry_point: format!("{kernel}_{name}_{variant}"),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        })
    };
    let mut p1 = ParamPacker::new();
    p1.ptr(0, Access::Read).ptr(ws, Access::Write);
    v.pack(&mut p1)?;
    p1.u64(s).u64(chunk);
    let grid1 = umd_sdk::Dim3::x(partials.min(limits.max_grid_dims.x as u64) as u32);
    let mut p2 = ParamPacker::new();
    p2.ptr(ws, Access::Read)
        .ptr(out, Access::Write)
        .u64(v.n_out)
        .u64(v.r)
        .u64(s);
    let (grid2, block2) = launch::linear(v.n_out, THREADS, limits)?;
    Ok((
        vec![
            launch("split1", grid1, umd_sdk::Dim3::x(BLOCK), p1)?,
            launch("split2", grid2, block2, p2)?,
        ],
        partials * 8,
    ))
}

fn plan_reduce(req: &PlanRequestExt, red: Red) -> Result<OpPlan, OpError> {
    attr::only(
        &req.attributes,
        &["axes", "keepdims", "noop_with_empty_axes"],
    )?;
    at_most_inputs(req, 2)?;
    let x = data_input(req, red.dtypes())?;
    let keepdims = flag(req, "keepdims", true)?;
    let mask = reduce_mask(req, x.shape.len())?;
    let out_shape = reduced_shape(&x.shape, &mask, keepdims);
    let v = View::new(&x.shape, &mask)?;
    let outputs = vec![TensorDesc::new("reduced", out_shape, x.dtype)];
    if let Some(split) = split_of(req, red, &v) {
        let (launches, workspace_bytes) = split_launches(req, red.kernel(), x.dtype, &v, split)?;
        return Ok(OpPlan {
            outputs,
            launches,
            workspace_bytes,
        });
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
    v.pack(&mut p)?;
    Ok(OpPlan {
        outputs,
        launches: vec![view_launch(req, red.kernel(), x.dtype, &v, p)?],
        workspace_bytes: 0,
    })
}

fn plan_arg(req: &PlanRequestExt, kernel: &str) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "keepdims", "select_last_index"])?;
    at_most_inputs(req, 1)?;
    let x = data_input(req, &ORDERED)?;
    let axis = norm_axis(
        &req.op,
        "axis",
        attr::int_or(&req.attributes, "axis", 0)?,
        x.shape.len(),
    )?;
    let keepdims = flag(req, "keepdims", true)?;
    let last = flag(req, "select_last_index", false)?;
    let mut mask = vec![false; x.shape.len()];
    mask[axis] = true;
    let out_shape = reduced_shape(&x.shape, &mask, keepdims);
    let v = View::new(&x.shape, &mask)?;
    if v.r == 0 && v.n_out > 0 {
        return Err(OpError::shape(format!(
            "{}: axis {axis} of `{}` {:?} is empty: there is no index to return",
            req.op, x.name, x.shape
        )));
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
    v.pack(&mut p)?;
    p.u32(last as u32);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("reduced", out_shape, Dtype::I64)],
        launches: vec![view_launch(req, kernel, x.dtype, &v, p)?],
        workspace_bytes: 0,
    })
}

/// `(outer, R, inner)` of `shape` around `axis`.
fn around(shape: &[u64], axis: usize) -> Result<(u64, u64, u64), OpError> {
    Ok((
        shape::numel(&shape[..axis])?,
        shape[axis],
        shape::numel(&shape[axis + 1..])?,
    ))
}

/// The single integer value of constant input `i` (a scalar or a 1-element tensor).
fn scalar_input(req: &PlanRequestExt, i: usize, what: &str) -> Result<Option<i64>, OpError> {
    match req.ints(i)? {
        None => Ok(None),
        Some(v) if v.len() == 1 => Ok(Some(v[0])),
        Some(v) => Err(OpError::shape(format!(
            "{}: `{what}` (input {i}) must hold one value, got {}",
            req.op,
            v.len()
        ))),
    }
}

/// CumSum and CumProd (`kernel` = `cumsum` / `cumprod`): one module, one scan with `+` or `×`.
fn plan_cumsum(req: &PlanRequestExt, kernel: &str) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["exclusive", "reverse"])?;
    at_most_inputs(req, 2)?;
    let x = data_input(req, &NUMERIC)?;
    let axis = scalar_input(req, 1, "axis")?
        .ok_or_else(|| OpError::shape(format!("{}: input 1 (`axis`) is required", req.op)))?;
    let axis = norm_axis(&req.op, "axis", axis, x.shape.len())?;
    let (exclusive, reverse) = (flag(req, "exclusive", false)?, flag(req, "reverse", false)?);
    let (outer, r, inner) = around(&x.shape, axis)?;
    let lines = shape::numel(&[outer, inner])?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(lines)
        .u64(r)
        .u64(inner)
        .u32(exclusive as u32)
        .u32(reverse as u32);
    let limits = &req.target.limits;
    // Few long lines: one block per line (a block scan); otherwise one thread per line.
    let rows = r >= 256 && lines < 8192;
    let (grid, block) = if rows {
        let (g, b) = (
            umd_sdk::Dim3::x(lines.clamp(1, limits.max_grid_dims.x as u64) as u32),
            umd_sdk::Dim3::x(BLOCK),
        );
        launch::check(g, b, 0, limits)?;
        (g, b)
    } else {
        launch::linear(lines, THREADS, limits)?
    };
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), x.dtype)],
        launches: vec![Launch {
            module_id: format!("reduce_cumsum_{name}"),
            entry_point: format!("{kernel}_{name}{}", if rows { "_rows" } else { "" }),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

fn plan_topk(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "largest", "sorted", "k"])?;
    at_most_inputs(req, 2)?;
    let x = data_input(req, &ORDERED)?;
    let k = match (scalar_input(req, 1, "K")?, attr::has(&req.attributes, "k")) {
        (Some(_), true) => {
            return Err(OpError::InvalidAttribute(
                "TopK: `k` is given both as an attribute and as input 1".into(),
            ));
        }
        (Some(k), false) => k,
        (None, true) => attr::int(&req.attributes, "k")?,
        (None, false) => return Err(OpError::shape("TopK: input 1 (`K`) is required")),
    };
    let axis = attr::int_or(&req.attributes, "axis", -1)?;
    let axis = norm_axis(&req.op, "axis", axis, x.shape.len())?;
    let largest = flag(req, "largest", true)?;
    // `sorted` = 0 leaves the order unspecified: the sorted order is conformant.
    flag(req, "sorted", true)?;
    let (outer, r, inner) = around(&x.shape, axis)?;
    if k < 0 || k as u64 > r {
        return Err(OpError::shape(format!(
            "TopK: k = {k} is outside [0, {r}] (axis {axis} of `{}` {:?})",
            x.name, x.shape
        )));
    }
    let k = k as u64;
    let mut out_shape = x.shape.clone();
    out_shape[axis] = k;
    let lines = shape::numel(&[outer, inner])?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .ptr(req.output_binding(1), Access::Write)
        .u64(lines)
        .u64(r)
        .u64(inner)
        .u64(k)
        .u32(largest as u32);
    let limits = &req.target.limits;
    let threads = r.next_power_of_two().clamp(32, BLOCK as u64) as u32;
    let lines_in_grid = if k == 0 { 0 } else { lines };
    let grid = umd_sdk::Dim3::x(lines_in_grid.clamp(1, limits.max_grid_dims.x as u64) as u32);
    let block = umd_sdk::Dim3::x(threads);
    launch::check(grid, block, 0, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![
            TensorDesc::new("values", out_shape.clone(), x.dtype),
            TensorDesc::new("indices", out_shape, Dtype::I64),
        ],
        launches: vec![Launch {
            module_id: format!("reduce_topk_{name}"),
            entry_point: format!("topk_{name}"),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}
