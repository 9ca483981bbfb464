//! Planning the element-wise normalisations (one thread per element, channel `c = (i / inner) % C`):
//!
//! `batchnorm_{T}` (BatchNormalization inference): `x, scale, bias, mean, var, y, n, C, inner,
//! eps`: `y = scale[c] * (x - mean[c]) / sqrt(var[c] + eps) + bias[c]`.
//!
//! `lrn_{T}` (LRN): `x, y, n, C, inner, size, alpha, beta, bias`:
//! `y = x / (bias + alpha / size * sum of x² over channels [c - ⌊(size-1)/2⌋, c + ⌈(size-1)/2⌉])^beta`.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::plan::{float_input, linear_launch, max_inputs, prod};

/// BatchNormalization in inference mode (inputs already checked by the caller).
pub fn plan_batch_norm_inference(
    req: &PlanRequestExt,
    x: &TensorDesc,
    (_, c, s): (u64, u64, u64),
    eps: f64,
) -> Result<OpPlan, OpError> {
    let dt = x.dtype;
    let n = shape::numel(&x.shape)?;
    let mut p = ParamPacker::new();
    for slot in 0..5 {
        p.ptr(slot, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(c)
        .u64(s)
        .f64(eps);
    let entry = format!("batchnorm_{}", dtype::name(dt));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", x.shape.clone(), dt)],
        launches: vec![linear_launch(req, dt, entry, n, p)?],
        workspace_bytes: 0,
    })
}

/// LRN: `size` (required, ≥ 1), `alpha` (1e-4), `beta` (0.75), `bias` (1.0) over an
/// `(N, C, …)` input.
pub fn plan_lrn(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["size", "alpha", "beta", "bias"])?;
    max_inputs(req, 1)?;
    let (x, dt) = float_input(req, 0)?;
    if x.shape.len() < 2 {
        return Err(OpError::shape(format!(
            "LRN: input `{}` of shape {:?} needs rank >= 2 (N, C, ...)",
            x.name, x.shape
        )));
    }
    let size = attr::int(&req.attributes, "size")?;
    if size < 1 {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `size` = {size} must be at least 1"
        )));
    }
    let alpha = attr::float_or(&req.attributes, "alpha", 1e-4)?;
    let beta = attr::float_or(&req.attributes, "beta", 0.75)?;
    let bias = attr::float_or(&req.attributes, "bias", 1.0)?;
    let n = shape::numel(&x.shape)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(x.shape[1])
        .u64(prod(&x.shape[2..]))
        .u64(size as u64)
        .f64(alpha)
        .f64(beta)
        .f64(bias);
    let entry = format!("lrn_{}", dtype::name(dt));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), dt)],
        launches: vec![linear_launch(req, dt, entry, n, p)?],
        workspace_bytes: 0,
    })
}
