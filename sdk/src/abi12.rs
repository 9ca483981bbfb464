//! Conversions between the ABI 1.2 types of the `planner` export (`dtype-ext`,
//! `plan-request-ext`, `op-plan-ext`…) and the 1.5 types the SDK speaks (`dtype3`…). A 1.2
//! request always has a 1.4 form; a plan with a packed sub-byte output has no 1.2 form
//! (`unsupported-dtype`): a 1.2/1.3 host cannot size it.

use crate::bindings::umd::plugin::types as t;
use crate::{OpError, Plugin};

/// The 1.2 `planner.plan` request type.
pub type Request = t::PlanRequestExt;
/// The 1.2 `planner.plan` result type.
pub type Plan = t::OpPlanExt;
/// The 1.2 element type.
pub type Dtype = t::DtypeExt;

/// The 1.4 form of a 1.2 dtype.
pub fn dtype_from(d: Dtype) -> crate::Dtype {
    use crate::Dtype as D;
    match d {
        Dtype::F32 => D::F32,
        Dtype::F16 => D::F16,
        Dtype::Bf16 => D::Bf16,
        Dtype::F64 => D::F64,
        Dtype::I32 => D::I32,
        Dtype::I64 => D::I64,
        Dtype::I8 => D::I8,
        Dtype::U8 => D::U8,
        Dtype::Boolean => D::Boolean,
        Dtype::I16 => D::I16,
        Dtype::U16 => D::U16,
        Dtype::U32 => D::U32,
        Dtype::U64 => D::U64,
        Dtype::F8e4m3fn => D::F8e4m3fn,
        Dtype::F8e4m3fnuz => D::F8e4m3fnuz,
        Dtype::F8e5m2 => D::F8e5m2,
        Dtype::F8e5m2fnuz => D::F8e5m2fnuz,
        Dtype::F8e8m0 => D::F8e8m0,
    }
}

/// The 1.2 form of a dtype; `None` for the packed types only 1.4 has.
pub fn dtype_to(d: crate::Dtype) -> Option<Dtype> {
    use crate::Dtype as D;
    Some(match d {
        D::F32 => Dtype::F32,
        D::F16 => Dtype::F16,
        D::Bf16 => Dtype::Bf16,
        D::F64 => Dtype::F64,
        D::I32 => Dtype::I32,
        D::I64 => Dtype::I64,
        D::I8 => Dtype::I8,
        D::U8 => Dtype::U8,
        D::Boolean => Dtype::Boolean,
        D::I16 => Dtype::I16,
        D::U16 => Dtype::U16,
        D::U32 => Dtype::U32,
        D::U64 => Dtype::U64,
        D::F8e4m3fn => Dtype::F8e4m3fn,
        D::F8e4m3fnuz => Dtype::F8e4m3fnuz,
        D::F8e5m2 => Dtype::F8e5m2,
        D::F8e5m2fnuz => Dtype::F8e5m2fnuz,
        D::F8e8m0 => Dtype::F8e8m0,
        D::I4 | D::U4 | D::I2 | D::U2 | D::F4e2m1 | D::String => return None,
    })
}

fn desc_from(d: t::TensorDescExt) -> crate::TensorDesc {
    crate::TensorDesc::new(d.name, d.shape, dtype_from(d.dtype))
}

fn attr_from(v: t::AttrValueExt) -> crate::AttrValueExt {
    use crate::AttrValueExt as A;
    match v {
        t::AttrValueExt::Int(x) => A::Int(x),
        t::AttrValueExt::Float(x) => A::Float(x),
        t::AttrValueExt::Text(x) => A::Text(x),
        t::AttrValueExt::Ints(x) => A::Ints(x),
        t::AttrValueExt::Floats(x) => A::Floats(x),
        t::AttrValueExt::Boolean(x) => A::Boolean(x),
        t::AttrValueExt::Texts(x) => A::Texts(x),
        t::AttrValueExt::Tensor(x) => A::Tensor(crate::TensorValue {
            desc: desc_from(x.desc),
            data: x.data,
        }),
    }
}

/// The 1.4 form of a 1.2 request.
pub fn request_from(r: Request) -> crate::PlanRequestExt {
    crate::PlanRequestExt {
        op: r.op,
        domain: r.domain,
        opset: r.opset,
        inputs: r
            .inputs
            .into_iter()
            .map(|s| {
                s.map(|s| crate::InputSlot {
                    desc: desc_from(s.desc),
                    value: s.value,
                })
            })
            .collect(),
        outputs_wanted: r.outputs_wanted,
        attributes: r
            .attributes
            .into_iter()
            .map(|a| crate::AttributeExt {
                name: a.name,
                value: attr_from(a.value),
            })
            .collect(),
        target: r.target,
    }
}

/// The 1.2 form of a plan; `unsupported-dtype` for a packed output.
pub fn plan_to(p: crate::OpPlan) -> Result<Plan, OpError> {
    let outputs = p
        .outputs
        .into_iter()
        .map(|o| {
            let dtype = dtype_to(o.dtype).ok_or_else(|| {
                OpError::UnsupportedDtype(format!(
                    "output `{}` is {}, which a 1.2/1.3 host cannot represent",
                    o.name,
                    crate::dtype::name(o.dtype)
                ))
            })?;
            Ok(t::TensorDescExt {
                name: o.name,
                shape: o.shape,
                dtype,
            })
        })
        .collect::<Result<Vec<_>, OpError>>()?;
    Ok(Plan {
        outputs,
        launches: p.launches,
        workspace_bytes: p.workspace_bytes,
    })
}

/// `planner.plan` (1.2) of plugin `P`: the request in its 1.4 form through
/// [`crate::plan_checked`], the plan back in its 1.2 form.
pub fn plan<P: Plugin + ?Sized>(r: Request) -> Result<Plan, OpError> {
    plan_to(crate::plan_checked::<P>(&request_from(r))?)
}
