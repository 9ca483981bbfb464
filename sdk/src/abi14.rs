//! Conversions between the ABI 1.4 types of the `planner2` export (`dtype2`, `plan-request2`,
//! `op-plan2`…) and the 1.5 types the SDK speaks (`dtype3`…). A 1.4 request always has a 1.5
//! form (no strings, every `text-bytes` 0); a plan with a string output has no 1.4 form
//! (`unsupported-dtype`): a 1.4 host cannot size it.

use crate::bindings::umd::plugin::types as t;
use crate::{OpError, Plugin};

/// The 1.4 `planner2.plan` request type.
pub type Request = t::PlanRequest2;
/// The 1.4 `planner2.plan` result type.
pub type Plan = t::OpPlan2;
/// The 1.4 element type.
pub type Dtype = t::Dtype2;

/// One list of the cases `dtype2` and `dtype3` share (same names), both ways.
macro_rules! shared {
    ($($c:ident),*) => {
        /// The 1.5 form of a 1.4 dtype.
        pub fn dtype_from(d: Dtype) -> crate::Dtype {
            match d {
                $(Dtype::$c => crate::Dtype::$c,)*
            }
        }

        /// The 1.4 form of a dtype; `None` for strings, which only 1.5 has.
        pub fn dtype_to(d: crate::Dtype) -> Option<Dtype> {
            match d {
                $(crate::Dtype::$c => Some(Dtype::$c),)*
                crate::Dtype::String => None,
            }
        }
    };
}

shared!(
    F32, F16, Bf16, F64, I32, I64, I8, U8, Boolean, I16, U16, U32, U64, F8e4m3fn, F8e4m3fnuz,
    F8e5m2, F8e5m2fnuz, F8e8m0, I4, U4, I2, U2, F4e2m1
);

fn desc_from(d: t::TensorDesc2) -> crate::TensorDesc {
    crate::TensorDesc::new(d.name, d.shape, dtype_from(d.dtype))
}

fn attr_from(v: t::AttrValue2) -> crate::AttrValueExt {
    use crate::AttrValueExt as A;
    match v {
        t::AttrValue2::Int(x) => A::Int(x),
        t::AttrValue2::Float(x) => A::Float(x),
        t::AttrValue2::Text(x) => A::Text(x),
        t::AttrValue2::Ints(x) => A::Ints(x),
        t::AttrValue2::Floats(x) => A::Floats(x),
        t::AttrValue2::Boolean(x) => A::Boolean(x),
        t::AttrValue2::Texts(x) => A::Texts(x),
        t::AttrValue2::Tensor(x) => A::Tensor(crate::TensorValue {
            desc: desc_from(x.desc),
            data: x.data,
        }),
    }
}

/// The 1.5 form of a 1.4 request.
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

/// The 1.4 form of a plan; `unsupported-dtype` for a string output.
pub fn plan_to(p: crate::OpPlan) -> Result<Plan, OpError> {
    let outputs = p
        .outputs
        .into_iter()
        .map(|o| {
            let dtype = dtype_to(o.dtype).ok_or_else(|| {
                OpError::UnsupportedDtype(format!(
                    "output `{}` is a string tensor, which a 1.4 host cannot represent",
                    o.name
                ))
            })?;
            Ok(t::TensorDesc2 {
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

/// `planner2.plan` (1.4) of plugin `P`: the request in its 1.5 form through
/// [`crate::plan_checked`], the plan back in its 1.4 form.
pub fn plan<P: Plugin + ?Sized>(r: Request) -> Result<Plan, OpError> {
    plan_to(crate::plan_checked::<P>(&request_from(r))?)
}
