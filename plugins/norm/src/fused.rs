//! BatchNormalization with an epilogue, served as fused ops ([`umd_sdk::fused`]): inference
//! BatchNormalization, then optionally a per-channel `Mul` and a per-channel `Add` (a scale and
//! a shift of shape `[C, 1, …]` or `[1, C, 1, …]`), then optionally Relu — a pre-activation
//! block (DenseNet's BatchNormalization → Mul → Add → Relu before each conv) in one pass over
//! memory (`batchnorm_{T}_fused`). Values are rounded to f16/bf16 between stages, as the chain
//! stores them. What the chain would compute otherwise is declined: the host then runs the
//! nodes.

use umd_sdk::fused::{self, declined, per_channel};
use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::plan::linear_launch;

/// The chains served, longest first.
pub const OPS: [&str; 3] = [
    "BatchNormalization.Mul.Add.Relu",
    "BatchNormalization.Mul.Add",
    "BatchNormalization.Relu",
];

/// Epilogue flags of `batchnorm_{T}_fused` (its last parameter).
pub const MUL: u32 = 1;
pub const ADD: u32 = 2;
pub const RELU: u32 = 4;

/// Plans a fused request: stage 0 exactly as BatchNormalization alone (inference), then each
/// epilogue stage checked.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    if !OPS.iter().any(|o| o.eq_ignore_ascii_case(&req.op)) {
        return Err(umd_sdk::unsupported_op_ext(req));
    }
    let stages = fused::split(req)?;
    let bn = stages[0].request(req);
    // BatchNormalization's own checks; only its inference form (one element-wise launch)
    let alone = crate::stats::plan_batch_norm(&bn)?;
    let inference = alone.launches.len() == 1
        && alone.launches[0].entry_point.starts_with("batchnorm_")
        && bn.slots() == 5;
    if !inference || req.outputs(1) != 1 {
        return Err(declined(req, "only inference with one output is fused"));
    }
    let x = bn.required(0)?;
    let dt = x.dtype;
    let mut flags = 0;
    let mut ptrs = [0u32; 2]; // Mul's, Add's (X where absent: never read)
    let mut phase = 0;
    for s in &stages[1..] {
        let others = s.others(req)?;
        let (at, bit) = match s.op.as_str() {
            "Mul" => (1, MUL),
            "Add" => (2, ADD),
            "Relu" => (3, RELU),
            other => return Err(declined(req, format!("no epilogue for {other}"))),
        };
        if at <= phase {
            return Err(declined(req, format!("{} out of order", s.op)));
        }
        phase = at;
        flags |= bit;
        attr::only(&s.attributes, &[])?;
        if bit == RELU {
            if !others.is_empty() {
                return Err(declined(req, "Relu takes one input"));
            }
            continue;
        }
        match &others[..] {
            [t] if t.dtype == dt && per_channel(t, &x.shape) => {}
            _ => {
                return Err(declined(
                    req,
                    format!("{} must take one value per channel", s.op),
                ));
            }
        }
        let slot = s
            .other_slot()
            .ok_or_else(|| declined(req, "not a binary stage"))?;
        ptrs[usize::from(bit == ADD)] = req
            .binding(slot)
            .ok_or_else(|| declined(req, "an absent input"))?;
    }
    let c = x.shape[1];
    let n = shape::numel(&x.shape)?;
    let inner = shape::numel(&x.shape[2..])?;
    let eps = attr::float_or(&bn.attributes, "epsilon", 1e-5)?;
    let mut p = ParamPacker::new();
    for slot in 0..5 {
        p.ptr(slot, Access::Read);
    }
    for b in ptrs {
        p.ptr(b, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(c)
        .u64(inner)
        .f64(eps)
        .u32(flags);
    let entry = format!("batchnorm_{}_fused", dtype::name(dt));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", x.shape.clone(), dt)],
        launches: vec![linear_launch(req, dt, entry, n, p)?],
        workspace_bytes: 0,
    })
}
