//! Conv with an epilogue, served as fused ops ([`umd_sdk::fused`]): Conv, then optionally
//! BatchNormalization (inference), a per-channel `Mul` and a per-channel `Add` (a scale and a
//! shift of shape `[M, 1, …]` or `[1, M, 1, …]`: a normalization written out, as in DenseNet),
//! a residual `Add`/`Sum` of a tensor of the output's shape, and Relu, LeakyRelu or Clip
//! (ReLU6: its `min`/`max` inputs read at run time), in that order —
//! computed on each output value before it is stored
//! (`conv_fused_{dtype}`), so a ResNet block's normalization, skip connection and activation
//! cost no pass over memory of their own. A request this cannot compute exactly as the chain
//! would (broadcasting residuals, training-mode normalization, statistics of other dtypes…)
//! is declined; the host then runs the chain's nodes one by one.

use umd_sdk::fused::{self, Stage, declined, per_channel};
use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, shape};

use crate::plan::{self, binding};

/// The chains served, longest first (the host offers the longest that matches).
pub const OPS: [&str; 16] = [
    "Conv.BatchNormalization.Mul.Add.Relu",
    "Conv.BatchNormalization.Add.Relu",
    "Conv.BatchNormalization.Add.Clip",
    "Conv.BatchNormalization.Sum.Relu",
    "Conv.BatchNormalization.Relu",
    "Conv.BatchNormalization.Clip",
    "Conv.BatchNormalization.LeakyRelu",
    "Conv.Add.Relu",
    "Conv.Sum.Relu",
    "Conv.BatchNormalization.Add",
    "Conv.BatchNormalization.Mul.Add",
    "Conv.Mul.Add.Relu",
    "Conv.BatchNormalization",
    "Conv.Relu",
    "Conv.Clip",
    "Conv.LeakyRelu",
];

/// Epilogue flags of `conv_fused` (the `u32` after `ε`; Clip's two bound pointers and
/// LeakyRelu's `alpha` follow).
pub const BIAS: u32 = 1;
pub const NORM: u32 = 2;
pub const RESIDUAL: u32 = 4;
pub const RELU: u32 = 8;
pub const SCALE: u32 = 16;
pub const SHIFT: u32 = 32;
/// Clip's lower and upper bound (its `min` and `max` inputs, one element each, read at run
/// time: the two pointers after the flags).
pub const CLIP_LO: u32 = 64;
pub const CLIP_HI: u32 = 128;
/// LeakyRelu (its `alpha`: the f64 after Clip's pointers).
pub const LEAKY: u32 = 256;

/// Plans a fused request: stage 0 exactly as a Conv alone, then each epilogue stage checked.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    if !OPS.iter().any(|o| o.eq_ignore_ascii_case(&req.op)) {
        return Err(umd_sdk::unsupported_op_ext(req));
    }
    let stages = fused::split(req)?;
    let conv = stages[0].request(req);
    let (g, out_shape, dt) = plan::conv_checked(&conv, false)?;
    if req.outputs(1) != 1 {
        return Err(declined(
            req,
            "only the last stage's first output can be produced",
        ));
    }
    let m = g.m as u64;
    let x = binding(req, 0)?;
    let mut flags = 0;
    // bias, scale, B, mean, var, residual, Mul's scale, Add's shift (x where absent: never read)
    let mut ptrs = [x; 8];
    let mut eps = 0.0;
    // Clip's bounds (x where absent: never read), LeakyRelu's slope
    let mut bounds = [x; 2];
    let mut alpha = 0.0;
    if conv.input(2).is_some() {
        flags |= BIAS;
        ptrs[0] = binding(req, 2)?;
    }
    // stages in their one order: normalization, scale, shift, residual, activation
    let mut phase = 0;
    for s in &stages[1..] {
        if s.op == "Clip" {
            // an activation (the last stage): bounds from its optional `min` and `max` inputs
            if phase >= 5 || s.link != Some(0) || s.slots.len() > 3 {
                return Err(declined(req, "Clip out of order"));
            }
            phase = 5;
            if !s.attributes.is_empty() {
                return Err(declined(req, "Clip's opset-6 attributes"));
            }
            for (k, bit) in [(1, CLIP_LO), (2, CLIP_HI)] {
                let Some(t) = s.slots.get(k).copied().flatten().and_then(|k| req.input(k)) else {
                    continue;
                };
                if t.dtype != dt || shape::numel(&t.shape)? != 1 {
                    return Err(declined(
                        req,
                        "a Clip bound that is not one value of the dtype",
                    ));
                }
                flags |= bit;
                bounds[k - 1] = binding(req, slot(s, k))?;
            }
            continue;
        }
        if s.op == "LeakyRelu" {
            if phase >= 5 || s.slots.len() != 1 {
                return Err(declined(req, "LeakyRelu out of order"));
            }
            phase = 5;
            attr::only(&s.attributes, &["alpha"])?;
            alpha = attr::float_or(&s.attributes, "alpha", 0.01)?;
            flags |= LEAKY;
            continue;
        }
        let others = s.others(req)?;
        let channelwise = matches!(&others[..], [t] if per_channel(t, &out_shape));
        let (at, bit) = match s.op.as_str() {
            "BatchNormalization" => (1, NORM),
            "Mul" if channelwise => (2, SCALE),
            "Add" | "Sum" if channelwise => (3, SHIFT),
            "Add" | "Sum" => (4, RESIDUAL),
            "Relu" => (5, RELU),
            other => return Err(declined(req, format!("no epilogue for {other} here"))),
        };
        if at <= phase {
            return Err(declined(req, format!("{} out of order", s.op)));
        }
        phase = at;
        flags |= bit;
        let same_dtype = |t: &TensorDesc| -> Result<(), OpError> {
            if t.dtype != dt {
                return Err(declined(req, format!("`{}` is not {dt:?}", t.name)));
            }
            Ok(())
        };
        match bit {
            NORM => {
                attr::only(
                    &s.attributes,
                    &["epsilon", "momentum", "training_mode", "spatial"],
                )?;
                if plan::flag(&s.attributes, "training_mode")?
                    || attr::int_or(&s.attributes, "spatial", 1)? != 1
                {
                    return Err(declined(req, "training-mode or per-activation statistics"));
                }
                eps = attr::float_or(&s.attributes, "epsilon", 1e-5)?;
                if s.link != Some(0) || others.len() != 4 {
                    return Err(declined(req, "BatchNormalization must read the conv as X"));
                }
                for (k, t) in others.iter().enumerate() {
                    same_dtype(t)?;
                    if t.shape != [m] {
                        return Err(declined(req, format!("`{}` is not [{m}]", t.name)));
                    }
                    ptrs[1 + k] = binding(req, slot(s, k + 1))?;
                }
            }
            RESIDUAL => {
                attr::only(&s.attributes, &[])?;
                let [r] = others[..] else {
                    return Err(declined(req, "the residual must be one other input"));
                };
                same_dtype(r)?;
                if r.shape != out_shape {
                    return Err(declined(req, "the residual must have the output's shape"));
                }
                ptrs[5] = binding(req, other(s)?)?;
            }
            SCALE | SHIFT => {
                attr::only(&s.attributes, &[])?;
                same_dtype(others[0])?;
                let at = if bit == SCALE { 6 } else { 7 };
                ptrs[at] = binding(req, other(s)?)?;
            }
            _ => {
                attr::only(&s.attributes, &[])?;
                if !others.is_empty() {
                    return Err(declined(req, "Relu takes one input"));
                }
            }
        }
    }
    let total = shape::numel(&out_shape)?;
    let mut p = ParamPacker::new();
    p.ptr(x, Access::Read).ptr(binding(req, 1)?, Access::Read);
    for b in ptrs {
        p.ptr(b, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write);
    g.pack(&mut p);
    p.f64(eps).u32(flags);
    p.ptr(bounds[0], Access::Read).ptr(bounds[1], Access::Read);
    p.f64(alpha);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", out_shape, dt)],
        launches: vec![plan::launch(req, dt, "conv_fused", total, p)?],
        workspace_bytes: 0,
    })
}

/// The request slot of input `k` of stage `s` (never its linked input).
fn slot(s: &Stage, k: usize) -> usize {
    s.slots[k].expect("not the linked input")
}

/// The request slot of binary stage `s`'s other input.
fn other(s: &Stage) -> Result<usize, OpError> {
    s.other_slot()
        .ok_or_else(|| OpError::internal(format!("{} is not a binary stage", s.op)))
}
