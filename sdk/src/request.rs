//! (ABI 1.2) Reading an ONNX-complete [`PlanRequestExt`]: input slots (absent, present, with a
//! constant value), their binding indices, the outputs wanted, opset, and conversions from and to
//! the 1.0/1.1 [`PlanRequest`].
//!
//! Bindings are numbered over the *present* inputs, then the outputs, then the workspace; an
//! absent optional input takes no binding. [`PlanRequestExt::binding`] and
//! [`PlanRequestExt::output_binding`] do that arithmetic.
//!
//! ```
//! use umd_sdk::{Dtype, PlanRequestExt, Target, TensorDesc};
//! let x = TensorDesc::new("x", vec![2, 3], Dtype::F32);
//! let shape = TensorDesc::new("shape", vec![1], Dtype::I64);
//! let req = PlanRequestExt::builder("Reshape")
//!     .input(x)
//!     .absent()
//!     .constant(shape, &(-1i64).to_le_bytes())
//!     .build(Target::cpu());
//! assert_eq!(req.binding(2), Some(1), "the absent slot takes no binding");
//! assert_eq!(req.ints(2).unwrap(), Some(vec![-1]));
//! assert_eq!(req.output_binding(0), 2);
//! ```

use crate::{
    AttrValue, AttrValueExt, Attribute, AttributeExt, Dtype, InputSlot, OpError, PlanRequest,
    PlanRequestExt, Target, TensorDesc, dtype,
};

impl PlanRequestExt {
    /// A request builder (for tests and for plugins that plan sub-ops).
    pub fn builder(op: &str) -> RequestBuilder {
        RequestBuilder {
            req: PlanRequestExt {
                op: op.into(),
                domain: String::new(),
                opset: 0,
                inputs: Vec::new(),
                outputs_wanted: Vec::new(),
                attributes: Vec::new(),
                target: Target::cpu(),
            },
        }
    }

    /// Number of input slots (present or absent).
    pub fn slots(&self) -> usize {
        self.inputs.len()
    }

    /// The description of input slot `i`; `None` when absent or past the end.
    pub fn input(&self, i: usize) -> Option<&TensorDesc> {
        self.inputs.get(i)?.as_ref().map(|s| &s.desc)
    }

    /// Input slot `i`, which must be present: an error naming the op otherwise.
    pub fn required(&self, i: usize) -> Result<&TensorDesc, OpError> {
        self.input(i)
            .ok_or_else(|| OpError::InvalidShape(format!("{}: input {i} is required", self.op)))
    }

    /// The present inputs, in order (their binding order).
    pub fn present(&self) -> impl Iterator<Item = &TensorDesc> {
        self.inputs.iter().flatten().map(|s| &s.desc)
    }

    /// Binding index of input slot `i`; `None` when absent.
    pub fn binding(&self, i: usize) -> Option<u32> {
        self.inputs.get(i)?.as_ref()?;
        Some(self.inputs[..i].iter().flatten().count() as u32)
    }

    /// Binding index of output `k` (after every present input).
    pub fn output_binding(&self, k: usize) -> u32 {
        (self.inputs.iter().flatten().count() + k) as u32
    }

    /// Number of outputs the caller expects; `default` when it did not say.
    pub fn outputs(&self, default: usize) -> usize {
        if self.outputs_wanted.is_empty() {
            default
        } else {
            self.outputs_wanted.len()
        }
    }

    /// Whether output `k` is wanted (every default output is wanted when the caller did not say).
    pub fn wants_output(&self, k: usize) -> bool {
        self.outputs_wanted
            .get(k)
            .copied()
            .unwrap_or(self.outputs_wanted.is_empty())
    }

    /// The opset of the request, or `newest` when the caller did not say.
    pub fn opset_or(&self, newest: u32) -> u32 {
        if self.opset == 0 { newest } else { self.opset }
    }

    /// The constant value of input slot `i`, when the host sent it.
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        self.inputs.get(i)?.as_ref()?.value.as_deref()
    }

    /// The value of integer input slot `i` as i64s: `Ok(None)` when absent, an error when present
    /// without a value or of a non-integer dtype.
    pub fn ints(&self, i: usize) -> Result<Option<Vec<i64>>, OpError> {
        let Some(desc) = self.input(i) else {
            return Ok(None);
        };
        let bytes = self.value(i).ok_or_else(|| self.needs_value(i, desc))?;
        dtype::decode_ints(desc.dtype, bytes)
            .map(Some)
            .ok_or_else(|| {
                OpError::UnsupportedDtype(format!(
                    "{}: input {i} (`{}`) must be an integer tensor, got {}",
                    self.op,
                    desc.name,
                    dtype::name(desc.dtype)
                ))
            })
    }

    /// The value of input slot `i` as f64s (any numeric dtype); `Ok(None)` when absent.
    pub fn floats(&self, i: usize) -> Result<Option<Vec<f64>>, OpError> {
        let Some(desc) = self.input(i) else {
            return Ok(None);
        };
        let bytes = self.value(i).ok_or_else(|| self.needs_value(i, desc))?;
        Ok(Some(dtype::decode_f64(desc.dtype, bytes)))
    }

    fn needs_value(&self, i: usize, desc: &TensorDesc) -> OpError {
        OpError::InvalidShape(format!(
            "{}: the value of input {i} (`{}`) must be known when planning (send it as a constant input)",
            self.op, desc.name
        ))
    }

    /// The 1.0/1.1 form of this request; `None` when it uses something only 1.2 can say (an
    /// absent input, a constant value, a tensor or string-list attribute).
    pub fn to_legacy(&self) -> Option<PlanRequest> {
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for slot in &self.inputs {
            match slot {
                Some(InputSlot { desc, value: None }) => {
                    inputs.push(crate::legacy::desc_to_legacy(desc)?)
                }
                _ => return None,
            }
        }
        let attributes = self
            .attributes
            .iter()
            .map(|a| {
                let value = match &a.value {
                    AttrValueExt::Int(v) => AttrValue::Int(*v),
                    AttrValueExt::Float(v) => AttrValue::Float(*v),
                    AttrValueExt::Text(v) => AttrValue::Text(v.clone()),
                    AttrValueExt::Ints(v) => AttrValue::Ints(v.clone()),
                    AttrValueExt::Floats(v) => AttrValue::Floats(v.clone()),
                    AttrValueExt::Boolean(v) => AttrValue::Boolean(*v),
                    AttrValueExt::Texts(_) | AttrValueExt::Tensor(_) => return None,
                };
                Some(Attribute {
                    name: a.name.clone(),
                    value,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PlanRequest {
            op: self.op.clone(),
            inputs,
            attributes,
            target: self.target.clone(),
        })
    }

    /// The 1.2 form of a 1.0/1.1 request: every input present without a value, opset unsaid.
    pub fn from_legacy(req: &PlanRequest) -> PlanRequestExt {
        PlanRequestExt {
            op: req.op.clone(),
            domain: String::new(),
            opset: 0,
            inputs: req
                .inputs
                .iter()
                .map(|d| {
                    Some(InputSlot {
                        desc: crate::legacy::desc_from_legacy(d),
                        value: None,
                    })
                })
                .collect(),
            outputs_wanted: Vec::new(),
            attributes: req
                .attributes
                .iter()
                .map(|a| AttributeExt {
                    name: a.name.clone(),
                    value: match &a.value {
                        AttrValue::Int(v) => AttrValueExt::Int(*v),
                        AttrValue::Float(v) => AttrValueExt::Float(*v),
                        AttrValue::Text(v) => AttrValueExt::Text(v.clone()),
                        AttrValue::Ints(v) => AttrValueExt::Ints(v.clone()),
                        AttrValue::Floats(v) => AttrValueExt::Floats(v.clone()),
                        AttrValue::Boolean(v) => AttrValueExt::Boolean(*v),
                    },
                })
                .collect(),
            target: req.target.clone(),
        }
    }
}

/// Builds a [`PlanRequestExt`] slot by slot.
pub struct RequestBuilder {
    req: PlanRequestExt,
}

impl RequestBuilder {
    /// A present input without a value.
    pub fn input(mut self, desc: TensorDesc) -> Self {
        self.req.inputs.push(Some(InputSlot { desc, value: None }));
        self
    }
    /// A present input with its value.
    pub fn constant(mut self, desc: TensorDesc, value: &[u8]) -> Self {
        self.req.inputs.push(Some(InputSlot {
            desc,
            value: Some(value.to_vec()),
        }));
        self
    }
    /// An absent optional input.
    pub fn absent(mut self) -> Self {
        self.req.inputs.push(None);
        self
    }
    pub fn attr(mut self, name: &str, value: AttrValueExt) -> Self {
        self.req.attributes.push(AttributeExt {
            name: name.into(),
            value,
        });
        self
    }
    pub fn opset(mut self, opset: u32) -> Self {
        self.req.opset = opset;
        self
    }
    pub fn outputs_wanted(mut self, wanted: Vec<bool>) -> Self {
        self.req.outputs_wanted = wanted;
        self
    }
    pub fn build(mut self, target: Target) -> PlanRequestExt {
        self.req.target = target;
        self.req
    }
}

/// Whether `dt` is one of the float dtypes (f32, f16, bf16, f64).
pub fn is_float(dt: Dtype) -> bool {
    matches!(dt, Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_round_trip_and_refusal() {
        let x = TensorDesc::new("x", vec![4], Dtype::F32);
        let req = PlanRequestExt::builder("Relu")
            .input(x.clone())
            .attr("alpha", AttrValueExt::Float(0.5))
            .build(Target::cpu());
        let legacy = req.to_legacy().expect("representable");
        assert_eq!(
            format!("{:?}", PlanRequestExt::from_legacy(&legacy)),
            format!("{req:?}")
        );
        let with_value = PlanRequestExt::builder("Reshape")
            .input(x.clone())
            .constant(
                TensorDesc::new("s", vec![1], Dtype::I64),
                &4i64.to_le_bytes(),
            )
            .build(Target::cpu());
        assert!(with_value.to_legacy().is_none());
        let absent = PlanRequestExt::builder("Clip")
            .input(x)
            .absent()
            .build(Target::cpu());
        assert!(absent.to_legacy().is_none());
        assert_eq!(absent.binding(1), None);
        assert!(absent.required(1).is_err());
    }

    #[test]
    fn values_need_integer_dtypes_and_presence() {
        let req = PlanRequestExt::builder("Slice")
            .input(TensorDesc::new("x", vec![4], Dtype::F32))
            .input(TensorDesc::new("starts", vec![1], Dtype::I64))
            .constant(
                TensorDesc::new("f", vec![1], Dtype::F32),
                &1.5f32.to_le_bytes(),
            )
            .build(Target::cpu());
        let e = req.ints(1).unwrap_err();
        assert!(matches!(e, OpError::InvalidShape(m) if m.contains("must be known")));
        assert!(req.ints(2).is_err(), "f32 is not an integer tensor");
        assert_eq!(req.floats(2).unwrap(), Some(vec![1.5]));
        assert_eq!(req.ints(5).unwrap(), None);
    }
}
