//! Planning: attribute and shape checks, output shapes, and the one launch of every op
//! (entry point `{kernel}_{dtype}` of module `conv_{dtype}`, parameters = pointers + [`Geom`]).

use crate::geom::{self, FLAG_COL_MAJOR, FLAG_COUNT_PAD, Geom, LIMIT, MAX_SPATIAL};
use umd_sdk::params::ParamPacker;
use umd_sdk::{
    Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, launch, shape,
};

/// Dtypes of Conv, ConvTranspose, AveragePool, LpPool and the global pools.
pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
/// Dtypes of MaxPool and GlobalMaxPool.
pub const MAX_DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I8,
    Dtype::U8,
];
/// Threads per block of every launch (the kernels stride over the grid).
const THREADS: u32 = 256;

/// The pooling kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    Max,
    Avg,
    Lp,
}

/// Plans one request of this plugin.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    // a chain is named by its op alone (self-test cases carry no domain)
    if req.domain == umd_sdk::fused::DOMAIN || crate::fused::OPS.contains(&req.op.as_str()) {
        return crate::fused::plan(req);
    }
    if !(req.domain.is_empty() || req.domain == "ai.onnx") {
        return Err(umd_sdk::unsupported_op_ext(req));
    }
    let op = crate::OPS
        .iter()
        .find(|o| req.op.eq_ignore_ascii_case(o))
        .ok_or_else(|| umd_sdk::unsupported_op_ext(req))?;
    match *op {
        "Conv" => conv(req, false),
        "ConvTranspose" => conv(req, true),
        "MaxPool" => pool(req, Pool::Max),
        "AveragePool" => pool(req, Pool::Avg),
        "LpPool" => pool(req, Pool::Lp),
        "GlobalMaxPool" => global(req, Pool::Max),
        "GlobalAveragePool" => global(req, Pool::Avg),
        "ConvInteger" => crate::quant::plan_conv_integer(req),
        "QLinearConv" => crate::quant::plan_qlinear_conv(req),
        "DeformConv" => crate::deform::plan(req),
        _ => global(req, Pool::Lp),
    }
}

pub(crate) fn check_dtype(
    req: &PlanRequestExt,
    t: &TensorDesc,
    served: &[Dtype],
) -> Result<Dtype, OpError> {
    if served.contains(&t.dtype) {
        return Ok(t.dtype);
    }
    let names: Vec<&str> = served.iter().map(|d| dtype::name(*d)).collect();
    Err(OpError::dtype(format!(
        "{}: input `{}` is {}; served dtypes: {}",
        req.op,
        t.name,
        dtype::name(t.dtype),
        names.join(", ")
    )))
}

/// The spatial rank of `x` (rank − 2), which must be 1..=3 (`min_rank` 2 allows 0).
pub(crate) fn spatial_rank(
    req: &PlanRequestExt,
    x: &TensorDesc,
    min_rank: usize,
) -> Result<usize, OpError> {
    let r = x.shape.len();
    if r < min_rank || (min_rank > 2 && r - 2 > MAX_SPATIAL) {
        return Err(OpError::shape(format!(
            "{}: input `{}` has shape {:?}; expected N x C x D1..Dk with 1 <= k <= {MAX_SPATIAL}",
            req.op, x.name, x.shape
        )));
    }
    Ok(r - 2)
}

pub(crate) fn flag(attrs: &[umd_sdk::AttributeExt], name: &str) -> Result<bool, OpError> {
    match attr::int_or(attrs, name, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(OpError::InvalidAttribute(format!(
            "attribute `{name}` must be 0 or 1, got {v}"
        ))),
    }
}

pub(crate) fn slots(req: &PlanRequestExt, min: usize, max: usize) -> Result<(), OpError> {
    if req.slots() < min || req.slots() > max {
        return Err(OpError::shape(format!(
            "{} takes {min}..={max} inputs, got {}",
            req.op,
            req.slots()
        )));
    }
    Ok(())
}

/// The single launch of a plan: module `conv_{dt}`, entry `{kernel}_{dt}`, over `n` outputs.
pub(crate) fn launch(
    req: &PlanRequestExt,
    dt: Dtype,
    kernel: &str,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    launch_in(
        req,
        crate::module_id(dt),
        format!("{kernel}_{}", dtype::name(dt)),
        n,
        p,
    )
}

/// A grid-stride launch of `module`'s `entry` over `n` items.
pub(crate) fn launch_in(
    req: &PlanRequestExt,
    module: String,
    entry: String,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(n, THREADS, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(Launch {
        module_id: module,
        entry_point: entry,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

pub(crate) fn binding(req: &PlanRequestExt, i: usize) -> Result<u32, OpError> {
    req.binding(i)
        .ok_or_else(|| OpError::shape(format!("{}: input {i} is required", req.op)))
}

/// Conv and ConvTranspose.
fn conv(req: &PlanRequestExt, transpose: bool) -> Result<OpPlan, OpError> {
    let (g, out_shape, dt) = conv_checked(req, transpose)?;
    let b = req.input(2);
    let total = shape::numel(&out_shape)?;
    let mut p = ParamPacker::new();
    p.ptr(binding(req, 0)?, Access::Read)
        .ptr(binding(req, 1)?, Access::Read);
    if b.is_some() {
        p.ptr(binding(req, 2)?, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write);
    g.pack(&mut p);
    let kernel = match (transpose, b.is_some()) {
        (false, false) => "conv",
        (false, true) => "conv_bias",
        (true, false) => "convt",
        (true, true) => "convt_bias",
    };
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", out_shape, dt)],
        launches: vec![launch(req, dt, kernel, total, p)?],
        workspace_bytes: 0,
    })
}

/// The checked geometry, output shape and dtype of a Conv or ConvTranspose request (inputs
/// `X`, `W`, optional `B`).
pub(crate) fn conv_checked(
    req: &PlanRequestExt,
    transpose: bool,
) -> Result<(Geom, Vec<u64>, Dtype), OpError> {
    let attrs = &req.attributes;
    let mut known = vec![
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "pads",
        "strides",
    ];
    if transpose {
        known.extend(["output_padding", "output_shape"]);
    }
    attr::only(attrs, &known)?;
    slots(req, 2, 3)?;
    let (x, w, b) = (req.required(0)?, req.required(1)?, req.input(2));
    let dt = check_dtype(req, x, &FLOATS)?;
    for t in [Some(w), b].into_iter().flatten() {
        if t.dtype != dt {
            return Err(OpError::dtype(format!(
                "{}: input `{}` is {}, `{}` is {}: they must match",
                req.op,
                t.name,
                dtype::name(t.dtype),
                x.name,
                dtype::name(dt)
            )));
        }
    }
    let (g, out_shape) = conv_geometry(req, x, w, transpose)?;
    let m = g.m;
    if let Some(b) = b
        && b.shape != [m as u64]
    {
        return Err(OpError::shape(format!(
            "{}: bias `{}` {:?} must have shape [{m}]",
            req.op, b.name, b.shape
        )));
    }
    shape::byte_size(&out_shape, dt)?;
    shape::byte_size(&w.shape, dt)?;
    Ok((g, out_shape, dt))
}

/// The geometry and output shape of a Conv-like op: `x` `[N, C, D1..Dk]` (1 <= k <= 3), `w`
/// `[M, C/group, K1..Kk]` (ConvTranspose: `[C, M/group, K..]`) and the attributes `group`,
/// `kernel_shape`, `strides`, `dilations`, `pads`, `auto_pad` (ConvTranspose also
/// `output_padding`, `output_shape`). Shared by Conv, ConvTranspose, ConvInteger, QLinearConv
/// and DeformConv.
pub fn conv_geometry(
    req: &PlanRequestExt,
    x: &TensorDesc,
    w: &TensorDesc,
    transpose: bool,
) -> Result<(Geom, Vec<u64>), OpError> {
    let attrs = &req.attributes;
    let sr = spatial_rank(req, x, 3)?;
    if w.shape.len() != sr + 2 {
        return Err(OpError::shape(format!(
            "{}: weights `{}` {:?} must have the rank of `{}` {:?}",
            req.op, w.name, w.shape, x.name, x.shape
        )));
    }
    let group = attr::int_or(attrs, "group", 1)?;
    if !(1..=LIMIT).contains(&group) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `group` must be >= 1, got {group}"
        )));
    }
    let (n, c) = (geom::dim(x.shape[0])?, geom::dim(x.shape[1])?);
    let (w0, w1) = (geom::dim(w.shape[0])?, geom::dim(w.shape[1])?);
    let kernel = w.shape[2..]
        .iter()
        .map(|&d| geom::dim(d))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(ks) = attr::ints_opt(attrs, "kernel_shape")?
        && ks != kernel
    {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `kernel_shape` {ks:?} differs from the weights' spatial shape {kernel:?}"
        )));
    }
    if let Some(k) = kernel.iter().find(|&&k| !(1..=LIMIT).contains(&k)) {
        return Err(OpError::shape(format!(
            "{}: kernel extent {k} in weights {:?} is not in 1..={LIMIT}",
            req.op, w.shape
        )));
    }
    let (cg, mg, m) = if transpose {
        if w0 != c || c % group != 0 {
            return Err(OpError::shape(format!(
                "ConvTranspose: weights {:?} need {c} input channels divisible by group {group} \
                 (input {:?})",
                w.shape, x.shape
            )));
        }
        (c / group, w1, w1 * group)
    } else {
        if w1 * group != c || w0 % group != 0 {
            return Err(OpError::shape(format!(
                "Conv: input {:?} with group {group} needs weights [M, {}, ...] with M divisible \
                 by {group}, got {:?}",
                x.shape,
                c / group,
                w.shape
            )));
        }
        (w1, w0 / group, w0)
    };
    let strides = geom::ints(attrs, "strides", sr, 1, 1)?;
    let dilations = geom::ints(attrs, "dilations", sr, 1, 1)?;
    let pads = geom::ints(attrs, "pads", 2 * sr, 0, 0)?;
    let auto = geom::auto_pad(attrs)?;
    let out_pad = if transpose {
        geom::ints(attrs, "output_padding", sr, 0, 0)?
    } else {
        vec![0; sr]
    };
    let out_shape_attr = match attr::ints_opt(attrs, "output_shape")? {
        Some(v) if v.len() == sr || v.len() == sr + 2 => {
            let v = v[v.len() - sr..].to_vec();
            if v.iter().any(|&o| !(0..=1 << 40).contains(&o)) {
                return Err(OpError::InvalidAttribute(format!(
                    "attribute `output_shape` {v:?} has a negative or huge entry"
                )));
            }
            Some(v)
        }
        Some(v) => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `output_shape` must have {sr} (or {}) entries, got {v:?}",
                sr + 2
            )));
        }
        None => None,
    };
    let mut g = Geom::neutral();
    (g.n, g.c, g.m, g.group, g.cg, g.mg) = (n, c, m, group, cg, mg);
    let mut out_shape = vec![n as u64, m as u64];
    for i in 0..sr {
        let inp = geom::dim(x.shape[i + 2])?;
        let (out, pb, pe) = if transpose {
            geom::transpose_dim(
                i,
                inp,
                kernel[i],
                strides[i],
                dilations[i],
                out_pad[i],
                (pads[i], pads[i + sr]),
                auto,
                out_shape_attr.as_ref().map(|v| v[i]),
            )?
        } else {
            geom::forward_dim(
                i,
                inp,
                kernel[i],
                strides[i],
                dilations[i],
                (pads[i], pads[i + sr]),
                auto,
                false,
            )?
        };
        g.set_dim(sr, i, inp, out, kernel[i], strides[i], dilations[i], pb, pe);
        out_shape.push(out as u64);
    }
    Ok((g, out_shape))
}

/// The entry point's kernel name and parameters of a pooling launch.
fn pool_launch(
    req: &PlanRequestExt,
    kind: Pool,
    dt: Dtype,
    g: &Geom,
    out_shape: Vec<u64>,
    indices: bool,
) -> Result<OpPlan, OpError> {
    shape::byte_size(&out_shape, Dtype::I64)?;
    let total = shape::numel(&out_shape)?;
    let mut p = ParamPacker::new();
    p.ptr(binding(req, 0)?, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
    let mut outputs = vec![TensorDesc::new("Y", out_shape.clone(), dt)];
    if indices {
        p.ptr(req.output_binding(1), Access::Write);
        outputs.push(TensorDesc::new("Indices", out_shape, Dtype::I64));
    }
    g.pack(&mut p);
    let kernel = match (kind, indices) {
        (Pool::Max, false) => "maxpool",
        (Pool::Max, true) => "maxpool_idx",
        (Pool::Avg, _) => "avgpool",
        (Pool::Lp, _) => "lppool",
    };
    Ok(OpPlan {
        outputs,
        launches: vec![launch(req, dt, kernel, total, p)?],
        workspace_bytes: 0,
    })
}

/// LpPool's `p` (a float in LpPool-1, an int since): finite and positive.
fn lp_p(attrs: &[umd_sdk::AttributeExt]) -> Result<f64, OpError> {
    let p = attr::float_or(attrs, "p", 2.0)?;
    if !(p.is_finite() && p > 0.0) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `p` must be positive, got {p}"
        )));
    }
    Ok(p)
}

/// Whether MaxPool's second output (Indices) is wanted.
fn wants_indices(req: &PlanRequestExt, kind: Pool) -> Result<bool, OpError> {
    let outputs = req.outputs(1);
    let max = if kind == Pool::Max { 2 } else { 1 };
    if outputs > max {
        return Err(OpError::shape(format!(
            "{} has at most {max} output(s), {outputs} were asked for",
            req.op
        )));
    }
    Ok(outputs == 2 && req.wants_output(1))
}

/// MaxPool, AveragePool and LpPool.
fn pool(req: &PlanRequestExt, kind: Pool) -> Result<OpPlan, OpError> {
    let attrs = &req.attributes;
    let mut known = vec![
        "auto_pad",
        "ceil_mode",
        "dilations",
        "kernel_shape",
        "pads",
        "strides",
    ];
    known.push(match kind {
        Pool::Max => "storage_order",
        Pool::Avg => "count_include_pad",
        Pool::Lp => "p",
    });
    attr::only(attrs, &known)?;
    slots(req, 1, 1)?;
    let x = req.required(0)?;
    let dt = check_dtype(
        req,
        x,
        if kind == Pool::Max {
            &MAX_DTYPES
        } else {
            &FLOATS
        },
    )?;
    let sr = spatial_rank(req, x, 3)?;
    if attr::ints_opt(attrs, "kernel_shape")?.is_none() {
        return Err(OpError::InvalidAttribute(format!(
            "{}: attribute `kernel_shape` is required",
            req.op
        )));
    }
    let kernel = geom::ints(attrs, "kernel_shape", sr, 1, 1)?;
    let strides = geom::ints(attrs, "strides", sr, 1, 1)?;
    let dilations = geom::ints(attrs, "dilations", sr, 1, 1)?;
    let pads = geom::ints(attrs, "pads", 2 * sr, 0, 0)?;
    let auto = geom::auto_pad(attrs)?;
    let ceil_mode = flag(attrs, "ceil_mode")?;
    let indices = wants_indices(req, kind)?;
    let mut g = Geom::neutral();
    let (n, c) = (geom::dim(x.shape[0])?, geom::dim(x.shape[1])?);
    (g.n, g.c, g.m, g.cg, g.mg) = (n, c, c, c, c);
    match kind {
        Pool::Max => {
            if flag(attrs, "storage_order")? {
                g.flags |= FLAG_COL_MAJOR;
            }
        }
        Pool::Avg => {
            if flag(attrs, "count_include_pad")? {
                g.flags |= FLAG_COUNT_PAD;
            }
        }
        Pool::Lp => g.p = lp_p(attrs)?,
    }
    let mut out_shape = vec![n as u64, c as u64];
    for i in 0..sr {
        let inp = geom::dim(x.shape[i + 2])?;
        let (out, pb, pe) = geom::forward_dim(
            i,
            inp,
            kernel[i],
            strides[i],
            dilations[i],
            (pads[i], pads[i + sr]),
            auto,
            ceil_mode,
        )?;
        g.set_dim(sr, i, inp, out, kernel[i], strides[i], dilations[i], pb, pe);
        out_shape.push(out as u64);
    }
    shape::byte_size(&x.shape, dt)?;
    pool_launch(req, kind, dt, &g, out_shape, indices)
}

/// GlobalMaxPool, GlobalAveragePool and GlobalLpPool: one window over every spatial element
/// (planned as a 1-D pool over the flattened spatial dimensions).
fn global(req: &PlanRequestExt, kind: Pool) -> Result<OpPlan, OpError> {
    let attrs = &req.attributes;
    attr::only(attrs, if kind == Pool::Lp { &["p"] } else { &[] })?;
    slots(req, 1, 1)?;
    let x = req.required(0)?;
    let dt = check_dtype(
        req,
        x,
        if kind == Pool::Max {
            &MAX_DTYPES
        } else {
            &FLOATS
        },
    )?;
    let sr = spatial_rank(req, x, 2)?;
    if x.shape.len() > shape::MAX_RANK {
        return Err(OpError::shape(format!(
            "{}: rank {} exceeds {}",
            req.op,
            x.shape.len(),
            shape::MAX_RANK
        )));
    }
    shape::byte_size(&x.shape, dt)?;
    let spatial = geom::dim(shape::numel(&x.shape[2..])?)?;
    let mut g = Geom::neutral();
    let (n, c) = (geom::dim(x.shape[0])?, geom::dim(x.shape[1])?);
    (g.n, g.c, g.m, g.cg, g.mg) = (n, c, c, c, c);
    g.inp[2] = spatial;
    g.k[2] = spatial.clamp(1, LIMIT);
    if spatial > LIMIT {
        return Err(OpError::shape(format!(
            "{}: {spatial} spatial elements exceed {LIMIT}",
            req.op
        )));
    }
    if kind == Pool::Lp {
        g.p = lp_p(attrs)?;
    }
    let mut out_shape = vec![n as u64, c as u64];
    out_shape.extend(std::iter::repeat_n(1, sr));
    pool_launch(req, kind, dt, &g, out_shape, false)
}
