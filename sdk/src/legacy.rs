//! Conversions between the ABI 1.2 types the SDK speaks (`Dtype` = `dtype-ext`,
//! `TensorDesc` = `tensor-desc-ext`, `OpPlan` = `op-plan-ext`) and the 1.0/1.1 types of the
//! `operator.plan` export and self-test cases. A 1.2 value with an element type 1.1 lacks has no
//! legacy form (`None`, or an `unsupported-dtype` error).

use crate::{Dtype, LegacyDtype, LegacyOpPlan, LegacyTensorDesc, OpError, OpPlan, TensorDesc};

/// The 1.2 form of a 1.1 dtype (always exists).
pub fn dtype_from_legacy(d: LegacyDtype) -> Dtype {
    match d {
        LegacyDtype::F32 => Dtype::F32,
        LegacyDtype::F16 => Dtype::F16,
        LegacyDtype::Bf16 => Dtype::Bf16,
        LegacyDtype::F64 => Dtype::F64,
        LegacyDtype::I32 => Dtype::I32,
        LegacyDtype::I64 => Dtype::I64,
        LegacyDtype::I8 => Dtype::I8,
        LegacyDtype::U8 => Dtype::U8,
        LegacyDtype::Boolean => Dtype::Boolean,
    }
}

/// The 1.1 form of a dtype; `None` for the element types only 1.2 has.
pub fn dtype_to_legacy(d: Dtype) -> Option<LegacyDtype> {
    Some(match d {
        Dtype::F32 => LegacyDtype::F32,
        Dtype::F16 => LegacyDtype::F16,
        Dtype::Bf16 => LegacyDtype::Bf16,
        Dtype::F64 => LegacyDtype::F64,
        Dtype::I32 => LegacyDtype::I32,
        Dtype::I64 => LegacyDtype::I64,
        Dtype::I8 => LegacyDtype::I8,
        Dtype::U8 => LegacyDtype::U8,
        Dtype::Boolean => LegacyDtype::Boolean,
        _ => return None,
    })
}

pub fn desc_from_legacy(d: &LegacyTensorDesc) -> TensorDesc {
    TensorDesc::new(d.name.clone(), d.shape.clone(), dtype_from_legacy(d.dtype))
}

pub fn desc_to_legacy(d: &TensorDesc) -> Option<LegacyTensorDesc> {
    Some(LegacyTensorDesc {
        name: d.name.clone(),
        shape: d.shape.clone(),
        dtype: dtype_to_legacy(d.dtype)?,
    })
}

/// The 1.1 form of a plan (for the `operator.plan` export).
pub fn plan_to_legacy(p: OpPlan) -> Result<LegacyOpPlan, OpError> {
    let outputs = p
        .outputs
        .iter()
        .map(|o| {
            desc_to_legacy(o).ok_or_else(|| {
                OpError::UnsupportedDtype(format!(
                    "output `{}` is {}, which a 1.0/1.1 host cannot represent",
                    o.name,
                    crate::dtype::name(o.dtype)
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LegacyOpPlan {
        outputs,
        launches: p.launches,
        workspace_bytes: p.workspace_bytes,
    })
}
