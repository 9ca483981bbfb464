//! Planning the moment-based normalisations on the `normalize_{T}_{U}` kernel: one block per
//! group computes the group's mean and (population) variance, then writes
//! `y = (x - mean) * invstd * scale[s] + bias[s]`, and optionally per-group statistics.
//!
//! Groups come from one of two views of the input as `(outer, len, inner)`:
//! [`VIEW_AXIS`]: `outer * inner` groups of `len` elements with stride `inner` (LayerNorm,
//! InstanceNorm, GroupNorm, MVN over a block of axes); [`VIEW_CHANNEL`]: `len` groups (channels)
//! of `outer * inner` elements (BatchNorm training, MVN keeping a block of axes).
//! The scale/bias index of element `e` of group `g` is `(g % gm) * ga + e / ed`.
//!
//! Parameters: `flags, view, x, y, scale, bias, mean_out, invstd_out, in_mean, in_var,
//! run_mean_out, run_var_out, saved_mean, saved_var` (absent pointers are null), then
//! `outer, len, inner, gm, ga, ed` (u64) and `eps, momentum` (f64).

use umd_sdk::params::ParamPacker;
use umd_sdk::shape;
use umd_sdk::{Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::plan::{
    float_input, group_launch, max_inputs, norm_axis, opt_ptr, prod, same_dtype, vector_input,
};
use crate::pointwise;

/// Flag bits of the `normalize` kernel.
pub const SCALE: u32 = 1;
pub const BIAS: u32 = 2;
pub const MEAN_OUT: u32 = 4;
pub const INVSTD_OUT: u32 = 8;
/// Reads `in_mean`, writes `in_mean * momentum + mean * (1 - momentum)`.
pub const RUN_MEAN: u32 = 16;
/// Reads `in_var`, writes `in_var * momentum + var * (1 - momentum)`.
pub const RUN_VAR: u32 = 32;
pub const SAVED_MEAN: u32 = 64;
pub const SAVED_VAR: u32 = 128;
/// `invstd = 1 / (sqrt(var) + eps)` (MVN) instead of `1 / sqrt(var + eps)`.
pub const EPS_OUTSIDE: u32 = 256;
/// No mean subtraction: `var` is the mean of squares (RMSNormalization).
pub const NO_MEAN: u32 = 512;
/// Lp norms (LpNormalization), no mean: `y = x / sum|x|` (L1) or `x / sqrt(sum x²)` (L2), 0
/// where the norm is 0.
pub const L1: u32 = 1024;
pub const L2: u32 = 2048;

/// Groups are strided rows along the middle dimension.
pub const VIEW_AXIS: u32 = 0;
/// Groups are the middle dimension's entries (channels).
pub const VIEW_CHANNEL: u32 = 1;

/// One `normalize` launch, described.
#[derive(Debug, Clone)]
pub struct Normalize {
    pub view: u32,
    pub outer: u64,
    pub len: u64,
    pub inner: u64,
    pub eps: f64,
    pub momentum: f64,
    pub eps_outside: bool,
    /// [`NO_MEAN`], [`L1`] or [`L2`] (0: moments).
    pub kind: u32,
    /// Scale and bias bindings and their index mapping `(g % gm) * ga + e / ed`.
    pub scale: Option<u32>,
    pub bias: Option<u32>,
    pub gm: u64,
    pub ga: u64,
    pub ed: u64,
    /// Mean and InvStdDev outputs, of dtype `stat_dtype`.
    pub mean_out: Option<u32>,
    pub invstd_out: Option<u32>,
    pub stat_dtype: Option<Dtype>,
    /// (input, output) bindings of the running mean and variance.
    pub run_mean: Option<(u32, u32)>,
    pub run_var: Option<(u32, u32)>,
    pub saved_mean: Option<u32>,
    pub saved_var: Option<u32>,
}

impl Normalize {
    pub fn new(view: u32, (outer, len, inner): (u64, u64, u64), eps: f64) -> Self {
        Normalize {
            view,
            outer,
            len,
            inner,
            eps,
            momentum: 0.0,
            eps_outside: false,
            kind: 0,
            scale: None,
            bias: None,
            gm: 1,
            ga: 0,
            ed: 1,
            mean_out: None,
            invstd_out: None,
            stat_dtype: None,
            run_mean: None,
            run_var: None,
            saved_mean: None,
            saved_var: None,
        }
    }

    /// Number of groups and elements per group.
    pub fn groups_and_count(&self) -> (u64, u64) {
        match self.view {
            VIEW_AXIS => (self.outer * self.inner, self.len),
            _ => (self.len, self.outer * self.inner),
        }
    }

    fn flags(&self) -> u32 {
        let bit = |on: bool, b: u32| if on { b } else { 0 };
        bit(self.scale.is_some(), SCALE)
            | bit(self.bias.is_some(), BIAS)
            | bit(self.mean_out.is_some(), MEAN_OUT)
            | bit(self.invstd_out.is_some(), INVSTD_OUT)
            | bit(self.run_mean.is_some(), RUN_MEAN)
            | bit(self.run_var.is_some(), RUN_VAR)
            | bit(self.saved_mean.is_some(), SAVED_MEAN)
            | bit(self.saved_var.is_some(), SAVED_VAR)
            | bit(self.eps_outside, EPS_OUTSIDE)
            | self.kind
    }

    /// The launch reading input binding 0 and writing output 0 of `req`.
    pub fn launch(&self, req: &PlanRequestExt, dt: Dtype) -> Result<Launch, OpError> {
        let mut p = ParamPacker::new();
        p.u32(self.flags())
            .u32(self.view)
            .ptr(0, Access::Read)
            .ptr(req.output_binding(0), Access::Write);
        opt_ptr(&mut p, self.scale, Access::Read);
        opt_ptr(&mut p, self.bias, Access::Read);
        opt_ptr(&mut p, self.mean_out, Access::Write);
        opt_ptr(&mut p, self.invstd_out, Access::Write);
        opt_ptr(&mut p, self.run_mean.map(|r| r.0), Access::Read);
        opt_ptr(&mut p, self.run_var.map(|r| r.0), Access::Read);
        opt_ptr(&mut p, self.run_mean.map(|r| r.1), Access::Write);
        opt_ptr(&mut p, self.run_var.map(|r| r.1), Access::Write);
        opt_ptr(&mut p, self.saved_mean, Access::Write);
        opt_ptr(&mut p, self.saved_var, Access::Write);
        p.u64(self.outer)
            .u64(self.len)
            .u64(self.inner)
            .u64(self.gm.max(1))
            .u64(self.ga)
            .u64(self.ed.max(1))
            .f64(self.eps)
            .f64(self.momentum);
        let (groups, count) = self.groups_and_count();
        let entry = format!(
            "normalize_{}_{}",
            dtype::name(dt),
            dtype::name(self.stat_dtype.unwrap_or(dt))
        );
        group_launch(req, dt, entry, groups, count, p)
    }
}

/// The number of outputs the caller wants, at least 1 and at most `max`.
fn output_count(req: &PlanRequestExt, max: usize) -> Result<usize, OpError> {
    let n = req.outputs(1);
    if n == 0 || n > max {
        return Err(OpError::shape(format!(
            "{} has 1 to {max} outputs, {n} were asked for",
            req.op
        )));
    }
    Ok(n)
}

fn epsilon(req: &PlanRequestExt, default: f64) -> Result<f64, OpError> {
    attr::float_or(&req.attributes, "epsilon", default)
}

/// Trailing shape without leading 1s (for "broadcastable to the normalized shape" checks).
fn strip_ones(s: &[u64]) -> &[u64] {
    let lead = s.iter().take_while(|&&d| d == 1).count();
    &s[lead..]
}

/// The Scale (slot 1, required) and optional B (slot 2) of LayerNormalization or
/// RMSNormalization over rows of the `normalized` shape: either of that shape (leading 1s
/// aside) or one element, both alike.
fn affine_over_rows(
    req: &PlanRequestExt,
    dt: Dtype,
    normalized: &[u64],
    n: &mut Normalize,
) -> Result<(), OpError> {
    let len = prod(normalized);
    let rank = req.required(0)?.shape.len();
    for (slot, what) in [(1, "Scale"), (2, "B")] {
        let Some(t) = same_dtype(req, slot, dt)? else {
            if slot == 1 {
                return Err(OpError::shape(format!(
                    "{}: input 1 (Scale) is required",
                    req.op
                )));
            }
            continue;
        };
        let count = shape::numel(&t.shape)?;
        let fits = t.shape.len() <= rank
            && (count == 1 || (count == len && strip_ones(&t.shape) == strip_ones(normalized)));
        if !fits {
            return Err(OpError::shape(format!(
                "{}: {what} `{}` of shape {:?} is not broadcastable to the \
                 normalized shape {normalized:?} (served: that shape or one element)",
                req.op, t.name, t.shape
            )));
        }
        // the scale and bias must agree on their index mapping: both full or both scalar
        let ed = if count == len { 1 } else { len.max(1) };
        if slot == 1 {
            n.ed = ed;
            n.scale = req.binding(1);
        } else if ed != n.ed {
            return Err(OpError::shape(format!(
                "{}: Scale and B must have the same shape (B is {:?})",
                req.op, t.shape
            )));
        } else {
            n.bias = req.binding(2);
        }
    }
    Ok(())
}

/// RMSNormalization (opset 23): `axis`, `epsilon`, `stash_type` (1: statistics in float, as
/// the kernels compute anyway); `Y = X / sqrt(mean(X²) + epsilon) * Scale` over the axes from
/// `axis` on.
pub fn plan_rms_norm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "epsilon", "stash_type"])?;
    max_inputs(req, 2)?;
    let (x, dt) = float_input(req, 0)?;
    let rank = x.shape.len();
    let axis = norm_axis(attr::int_or(&req.attributes, "axis", -1)?, rank, "axis")?;
    let stash = attr::int_or(&req.attributes, "stash_type", 1)?;
    if !matches!(stash, 1 | 10 | 11 | 16) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `stash_type` = {stash} is not a float type"
        )));
    }
    let (outer, len) = (prod(&x.shape[..axis]), prod(&x.shape[axis..]));
    let mut n = Normalize::new(VIEW_AXIS, (outer, len, 1), epsilon(req, 1e-5)?);
    n.kind = NO_MEAN;
    affine_over_rows(req, dt, &x.shape[axis..], &mut n)?;
    single_output(req, x, &n)
}

/// LpNormalization: `axis` (default -1), `p` (1 or 2, default 2); `y = x / ||x||_p` along the
/// axis, 0 where the norm is 0.
pub fn plan_lp_norm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "p"])?;
    max_inputs(req, 1)?;
    let (x, _) = float_input(req, 0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return Err(OpError::shape("LpNormalization: the input needs rank >= 1"));
    }
    let axis = norm_axis(attr::int_or(&req.attributes, "axis", -1)?, rank, "axis")?;
    let kind = match attr::int_or(&req.attributes, "p", 2)? {
        1 => L1,
        2 => L2,
        p => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `p` = {p}: LpNormalization takes 1 or 2"
            )));
        }
    };
    let dims = (
        prod(&x.shape[..axis]),
        x.shape[axis],
        prod(&x.shape[axis + 1..]),
    );
    let mut n = Normalize::new(VIEW_AXIS, dims, 0.0);
    n.kind = kind;
    single_output(req, x, &n)
}

/// LayerNormalization (opset 17): `axis`, `epsilon`, `stash_type`; outputs Y, Mean, InvStdDev.
pub fn plan_layer_norm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "epsilon", "stash_type"])?;
    max_inputs(req, 3)?;
    let (x, dt) = float_input(req, 0)?;
    let rank = x.shape.len();
    let axis = norm_axis(attr::int_or(&req.attributes, "axis", -1)?, rank, "axis")?;
    let stat_dtype = match attr::int_or(&req.attributes, "stash_type", 1)? {
        1 => Dtype::F32,
        16 => Dtype::Bf16,
        other => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `stash_type` = {other}: served are 1 (float) and 16 (bfloat16)"
            )));
        }
    };
    let (outer, len) = (prod(&x.shape[..axis]), prod(&x.shape[axis..]));
    let normalized = &x.shape[axis..];
    let mut n = Normalize::new(VIEW_AXIS, (outer, len, 1), epsilon(req, 1e-5)?);
    affine_over_rows(req, dt, normalized, &mut n)?;
    let outputs = output_count(req, 3)?;
    let mut stat_shape = x.shape[..axis].to_vec();
    stat_shape.resize(rank, 1);
    n.stat_dtype = Some(stat_dtype);
    let mut descs = vec![TensorDesc::new("Y", x.shape.clone(), dt)];
    if outputs > 1 {
        n.mean_out = Some(req.output_binding(1));
        descs.push(TensorDesc::new("Mean", stat_shape.clone(), stat_dtype));
    }
    if outputs > 2 {
        n.invstd_out = Some(req.output_binding(2));
        descs.push(TensorDesc::new("InvStdDev", stat_shape, stat_dtype));
    }
    Ok(OpPlan {
        launches: vec![n.launch(req, dt)?],
        outputs: descs,
        workspace_bytes: 0,
    })
}

/// `(N, C, spatial)` of an `(N, C, D1, …)` input of rank ≥ 2.
fn nc_spatial(req: &PlanRequestExt, x: &TensorDesc) -> Result<(u64, u64, u64), OpError> {
    if x.shape.len() < 2 {
        return Err(OpError::shape(format!(
            "{}: input `{}` of shape {:?} needs rank >= 2 (N, C, ...)",
            req.op, x.name, x.shape
        )));
    }
    Ok((x.shape[0], x.shape[1], prod(&x.shape[2..])))
}

fn single_output(req: &PlanRequestExt, x: &TensorDesc, n: &Normalize) -> Result<OpPlan, OpError> {
    output_count(req, 1)?;
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), x.dtype)],
        launches: vec![n.launch(req, x.dtype)?],
        workspace_bytes: 0,
    })
}

/// InstanceNormalization: per (n, c) over the spatial dims; `epsilon`.
pub fn plan_instance_norm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    // consumed_inputs (opset 1) is a legacy optimisation hint without effect on the result
    attr::only(&req.attributes, &["epsilon", "consumed_inputs"])?;
    max_inputs(req, 3)?;
    let (x, dt) = float_input(req, 0)?;
    let (batch, c, s) = nc_spatial(req, x)?;
    vector_input(req, 1, dt, c, "scale")?;
    vector_input(req, 2, dt, c, "B")?;
    let mut n = Normalize::new(VIEW_AXIS, (batch * c, s, 1), epsilon(req, 1e-5)?);
    (n.scale, n.bias) = (req.binding(1), req.binding(2));
    (n.gm, n.ga, n.ed) = (c, 1, s);
    single_output(req, x, &n)
}

/// GroupNormalization: `num_groups`, `epsilon`, `stash_type`; scale and bias per channel
/// (opset 21) or per group (opset 18); an unsaid opset takes whichever the shapes say.
pub fn plan_group_norm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["epsilon", "num_groups", "stash_type"])?;
    max_inputs(req, 3)?;
    let (x, dt) = float_input(req, 0)?;
    let (batch, c, s) = nc_spatial(req, x)?;
    let groups = attr::int(&req.attributes, "num_groups")?;
    if groups <= 0 || c % groups as u64 != 0 {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `num_groups` = {groups} must be positive and divide the {c} channels"
        )));
    }
    let stash = attr::int_or(&req.attributes, "stash_type", 1)?;
    if !matches!(stash, 1 | 10 | 11 | 16) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `stash_type` = {stash} is not a float type"
        )));
    }
    let g = groups as u64;
    let per_channel = match req.opset {
        0 => req
            .input(1)
            .map(|t| shape::numel(&t.shape).map(|n| n == c))
            .transpose()?
            .unwrap_or(true),
        o => o >= 21,
    };
    let want = if per_channel { c } else { g };
    vector_input(req, 1, dt, want, "scale")?;
    vector_input(req, 2, dt, want, "bias")?;
    let cg = c / g;
    let mut n = Normalize::new(VIEW_AXIS, (batch * g, cg * s, 1), epsilon(req, 1e-5)?);
    (n.scale, n.bias) = (req.binding(1), req.binding(2));
    (n.gm, n.ga, n.ed) = if per_channel {
        (g, cg, s)
    } else {
        (g, 1, cg * s)
    };
    single_output(req, x, &n)
}

/// MeanVarianceNormalization: `axes` (default [0, 2, 3]); `y = (x - mean) / (std + 1e-9)`.
/// Served when the reduced axes, or the kept ones, are consecutive.
pub fn plan_mvn(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axes"])?;
    max_inputs(req, 1)?;
    let (x, _) = float_input(req, 0)?;
    let rank = x.shape.len();
    let mut reduced = vec![false; rank];
    for a in attr::ints_or(&req.attributes, "axes", &[0, 2, 3])? {
        let a = norm_axis(a, rank, "axes")?;
        if std::mem::replace(&mut reduced[a], true) {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `axes` names axis {a} twice"
            )));
        }
    }
    // the consecutive block [a, b) where `reduced[i] == want`, if that set is one block
    let block = |want: bool| -> Option<(usize, usize)> {
        let idx: Vec<usize> = (0..rank).filter(|&i| reduced[i] == want).collect();
        match (idx.first(), idx.last()) {
            (None, _) | (_, None) => Some((rank, rank)),
            (Some(&a), Some(&b)) => (b - a + 1 == idx.len()).then_some((a, b + 1)),
        }
    };
    let dims = |(a, b): (usize, usize)| {
        (
            prod(&x.shape[..a]),
            prod(&x.shape[a..b]),
            prod(&x.shape[b..]),
        )
    };
    let mut n = if let Some(ab) = block(true) {
        Normalize::new(VIEW_AXIS, dims(ab), 1e-9)
    } else if let Some(ab) = block(false) {
        Normalize::new(VIEW_CHANNEL, dims(ab), 1e-9)
    } else {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `axes`: served are axes whose reduced or kept dimensions are consecutive, \
             got {reduced:?} for rank {rank}"
        )));
    };
    n.eps_outside = true;
    single_output(req, x, &n)
}

/// BatchNormalization: inference mode (element-wise, see [`pointwise`]) or training mode (batch
/// statistics per channel; running mean/var outputs with `momentum`; opset < 14 also saved
/// mean/var). Training: `training_mode = 1` (opset ≥ 14), or a wanted second output (opset < 14).
pub fn plan_batch_norm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    // is_test/consumed_inputs (opset ≤ 6) are superseded by the outputs asked for
    attr::only(
        &req.attributes,
        &[
            "epsilon",
            "momentum",
            "training_mode",
            "spatial",
            "is_test",
            "consumed_inputs",
        ],
    )?;
    if attr::int_or(&req.attributes, "spatial", 1)? != 1 {
        return Err(OpError::InvalidAttribute(
            "attribute `spatial` = 0 (per-activation statistics) is not served".into(),
        ));
    }
    max_inputs(req, 5)?;
    let (x, dt) = float_input(req, 0)?;
    let (batch, c, s) = nc_spatial(req, x)?;
    for (slot, what) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
        vector_input(req, slot, dt, c, what)?;
    }
    let eps = epsilon(req, 1e-5)?;
    let opset = req.opset_or(15);
    let extra_wanted = (1..req.outputs(1)).any(|k| req.wants_output(k));
    let training = if opset >= 14 {
        attr::bool_or(&req.attributes, "training_mode", false)?
    } else {
        extra_wanted
    };
    if !training {
        if extra_wanted {
            return Err(OpError::InvalidAttribute(
                "BatchNormalization: running_mean/running_var are outputs of training_mode = 1 only"
                    .into(),
            ));
        }
        return pointwise::plan_batch_norm_inference(req, x, (batch, c, s), eps);
    }
    let max_out = if opset >= 14 { 3 } else { 5 };
    let outputs = output_count(req, max_out)?;
    let mut n = Normalize::new(VIEW_CHANNEL, (batch, c, s), eps);
    n.momentum = attr::float_or(&req.attributes, "momentum", 0.9)?;
    (n.scale, n.bias) = (req.binding(1), req.binding(2));
    (n.gm, n.ga, n.ed) = (c, 1, batch * s);
    let out = |k: usize| (outputs > k).then(|| req.output_binding(k));
    n.run_mean = out(1).map(|o| (req.binding(3).unwrap_or(0), o));
    n.run_var = out(2).map(|o| (req.binding(4).unwrap_or(0), o));
    (n.saved_mean, n.saved_var) = (out(3), out(4));
    let names = [
        "Y",
        "running_mean",
        "running_var",
        "saved_mean",
        "saved_var",
    ];
    let outputs = (0..outputs)
        .map(|k| {
            let shape = if k == 0 { x.shape.clone() } else { vec![c] };
            TensorDesc::new(names[k], shape, dt)
        })
        .collect();
    Ok(OpPlan {
        outputs,
        launches: vec![n.launch(req, dt)?],
        workspace_bytes: 0,
    })
}
