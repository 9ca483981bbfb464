//! The conversions every older `planner` export needs, written once: [`older_planner!`]
//! generates, for one older ABI's request and plan types, the dtype conversions both ways, the
//! request in the SDK's (latest) form, the plan back in the older form — refusing, with
//! `unsupported-dtype`, an output dtype the older host cannot represent — and `plan` itself.
//! [`crate::abi12`] (the 1.2 `planner`) and [`crate::abi14`] (the 1.4 `planner2`) are its uses.

/// See the module doc. `shared` lists the dtype cases both forms have (same names), `newer`
/// the SDK's cases the older form lacks; `host` names the hosts in the refusal.
macro_rules! older_planner {
    (
        request: $req:ident, plan: $plan:ident, dtype: $dt:ident, desc: $desc:ident,
        attr: $attr:ident, host: $host:literal,
        shared: [$($c:ident),* $(,)?], newer: [$($n:ident),* $(,)?] $(,)?
    ) => {
        use crate::bindings::umd::plugin::types as t;
        use crate::{OpError, Plugin};

        /// The older `plan` request type.
        pub type Request = t::$req;
        /// The older `plan` result type.
        pub type Plan = t::$plan;
        /// The older element type.
        pub type Dtype = t::$dt;

        /// The SDK's form of an older dtype.
        pub fn dtype_from(d: Dtype) -> crate::Dtype {
            match d {
                $(Dtype::$c => crate::Dtype::$c,)*
            }
        }

        /// The older form of a dtype; `None` for the ones only later ABIs have.
        pub fn dtype_to(d: crate::Dtype) -> Option<Dtype> {
            match d {
                $(crate::Dtype::$c => Some(Dtype::$c),)*
                $(crate::Dtype::$n)|* => None,
            }
        }

        fn desc_from(d: t::$desc) -> crate::TensorDesc {
            crate::TensorDesc::new(d.name, d.shape, dtype_from(d.dtype))
        }

        fn attr_from(v: t::$attr) -> crate::AttrValueExt {
            use crate::AttrValueExt as A;
            match v {
                t::$attr::Int(x) => A::Int(x),
                t::$attr::Float(x) => A::Float(x),
                t::$attr::Text(x) => A::Text(x),
                t::$attr::Ints(x) => A::Ints(x),
                t::$attr::Floats(x) => A::Floats(x),
                t::$attr::Boolean(x) => A::Boolean(x),
                t::$attr::Texts(x) => A::Texts(x),
                t::$attr::Tensor(x) => A::Tensor(crate::TensorValue {
                    desc: desc_from(x.desc),
                    data: x.data,
                }),
            }
        }

        /// The SDK's form of an older request (always exists).
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

        /// The older form of a plan; `unsupported-dtype` for an output the older host cannot
        /// size.
        pub fn plan_to(p: crate::OpPlan) -> Result<Plan, OpError> {
            let outputs = p
                .outputs
                .into_iter()
                .map(|o| {
                    let dtype = dtype_to(o.dtype).ok_or_else(|| {
                        OpError::UnsupportedDtype(format!(
                            concat!("output `{}` is {}, which a ", $host, " host cannot represent"),
                            o.name,
                            crate::dtype::name(o.dtype)
                        ))
                    })?;
                    Ok(t::$desc {
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

        /// `plan` of plugin `P` through the older export: the request in the SDK's form
        /// through [`crate::plan_checked`], the plan back in the older form.
        pub fn plan<P: Plugin + ?Sized>(r: Request) -> Result<Plan, OpError> {
            plan_to(crate::plan_checked::<P>(&request_from(r))?)
        }
    };
}
pub(crate) use older_planner;
