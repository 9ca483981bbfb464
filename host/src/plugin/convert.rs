//! Conversions between the host's types and the WIT types of `umd:plugin@1.x`.
//! The only place that knows both; everything else speaks host types.

use super::bindings::wit;
use crate::cmdbuf::{Access, Relocation};
use crate::target::{Dim3, Target, TargetLimits};
use crate::tensor::{AttrValue, Dtype, TensorDesc};

/// The 1.0/1.1 form of a dtype; `None` for the element types only 1.2 has.
pub fn dtype_to_wit(d: Dtype) -> Option<wit::Dtype> {
    Some(match d {
        Dtype::F32 => wit::Dtype::F32,
        Dtype::F16 => wit::Dtype::F16,
        Dtype::Bf16 => wit::Dtype::Bf16,
        Dtype::F64 => wit::Dtype::F64,
        Dtype::I32 => wit::Dtype::I32,
        Dtype::I64 => wit::Dtype::I64,
        Dtype::I8 => wit::Dtype::I8,
        Dtype::U8 => wit::Dtype::U8,
        Dtype::Bool => wit::Dtype::Boolean,
        _ => return None,
    })
}

pub fn dtype_from_wit(d: wit::Dtype) -> Dtype {
    match d {
        wit::Dtype::F32 => Dtype::F32,
        wit::Dtype::F16 => Dtype::F16,
        wit::Dtype::Bf16 => Dtype::Bf16,
        wit::Dtype::F64 => Dtype::F64,
        wit::Dtype::I32 => Dtype::I32,
        wit::Dtype::I64 => Dtype::I64,
        wit::Dtype::I8 => Dtype::I8,
        wit::Dtype::U8 => Dtype::U8,
        wit::Dtype::Boolean => Dtype::Bool,
    }
}

/// The host dtypes with their 1.2 (`dtype-ext`), 1.4 (`dtype2`) and 1.5 (`dtype3`) cases, which
/// share names: one list generates the conversions both ways; the packed types (after `packed:`)
/// only 1.4 and 1.5 have, strings (after `string:`) only 1.5.
macro_rules! dtype_cases {
    ([$($host:ident => $wit:ident,)*] packed: [$($phost:ident => $pwit:ident,)*]
     string: [$($shost:ident => $swit:ident,)*]) => {
        /// The 1.2 form of a dtype; `None` for the packed types and strings.
        pub fn dtype_to_wit_ext(d: Dtype) -> Option<wit::DtypeExt> {
            match d {
                $(Dtype::$host => Some(wit::DtypeExt::$wit),)*
                $(Dtype::$phost)|* $(| Dtype::$shost)* => None,
            }
        }

        pub fn dtype_from_wit_ext(d: wit::DtypeExt) -> Dtype {
            match d {
                $(wit::DtypeExt::$wit => Dtype::$host,)*
            }
        }

        /// The 1.4 form of a dtype; `None` for strings.
        pub fn dtype_to_wit2(d: Dtype) -> Option<wit::Dtype2> {
            match d {
                $(Dtype::$host => Some(wit::Dtype2::$wit),)*
                $(Dtype::$phost => Some(wit::Dtype2::$pwit),)*
                $(Dtype::$shost)|* => None,
            }
        }

        pub fn dtype_from_wit2(d: wit::Dtype2) -> Dtype {
            match d {
                $(wit::Dtype2::$wit => Dtype::$host,)*
                $(wit::Dtype2::$pwit => Dtype::$phost,)*
            }
        }

        /// The 1.5 form of a dtype (every host dtype has one).
        pub fn dtype_to_wit3(d: Dtype) -> wit::Dtype3 {
            match d {
                $(Dtype::$host => wit::Dtype3::$wit,)*
                $(Dtype::$phost => wit::Dtype3::$pwit,)*
                $(Dtype::$shost => wit::Dtype3::$swit,)*
            }
        }

        pub fn dtype_from_wit3(d: wit::Dtype3) -> Dtype {
            match d {
                $(wit::Dtype3::$wit => Dtype::$host,)*
                $(wit::Dtype3::$pwit => Dtype::$phost,)*
                $(wit::Dtype3::$swit => Dtype::$shost,)*
            }
        }
    };
}

dtype_cases! {
    [F32 => F32,
    F16 => F16,
    Bf16 => Bf16,
    F64 => F64,
    I32 => I32,
    I64 => I64,
    I8 => I8,
    U8 => U8,
    Bool => Boolean,
    I16 => I16,
    U16 => U16,
    U32 => U32,
    U64 => U64,
    F8e4m3fn => F8e4m3fn,
    F8e4m3fnuz => F8e4m3fnuz,
    F8e5m2 => F8e5m2,
    F8e5m2fnuz => F8e5m2fnuz,
    F8e8m0 => F8e8m0,]
    packed: [
    I4 => I4,
    U4 => U4,
    I2 => I2,
    U2 => U2,
    F4e2m1 => F4e2m1,]
    string: [
    Str => String,]
}

/// The 1.0/1.1 form of a description; `None` for a dtype only 1.2 has.
pub fn tensor_to_wit(t: &TensorDesc) -> Option<wit::TensorDesc> {
    Some(wit::TensorDesc {
        name: t.name.clone(),
        shape: t.shape.clone(),
        dtype: dtype_to_wit(t.dtype)?,
    })
}

pub fn tensor_from_wit(t: wit::TensorDesc) -> TensorDesc {
    TensorDesc::new(t.name, t.shape, dtype_from_wit(t.dtype))
}

/// The 1.2 form of a description; `None` for a packed dtype only 1.4 has.
pub fn tensor_to_wit_ext(t: &TensorDesc) -> Option<wit::TensorDescExt> {
    Some(wit::TensorDescExt {
        name: t.name.clone(),
        shape: t.shape.clone(),
        dtype: dtype_to_wit_ext(t.dtype)?,
    })
}

pub fn tensor_from_wit_ext(t: wit::TensorDescExt) -> TensorDesc {
    TensorDesc::new(t.name, t.shape, dtype_from_wit_ext(t.dtype))
}

/// The 1.4 form of a description; `None` for a string tensor only 1.5 has.
pub fn tensor_to_wit2(t: &TensorDesc) -> Option<wit::TensorDesc2> {
    Some(wit::TensorDesc2 {
        name: t.name.clone(),
        shape: t.shape.clone(),
        dtype: dtype_to_wit2(t.dtype)?,
    })
}

pub fn tensor_from_wit2(t: wit::TensorDesc2) -> TensorDesc {
    TensorDesc::new(t.name, t.shape, dtype_from_wit2(t.dtype))
}

pub fn tensor_to_wit3(t: &TensorDesc) -> wit::TensorDesc3 {
    wit::TensorDesc3 {
        name: t.name.clone(),
        shape: t.shape.clone(),
        dtype: dtype_to_wit3(t.dtype),
        text_bytes: t.text_bytes,
    }
}

/// The host form of a 1.5 description (its `text-bytes` as given: validation refuses it on a
/// non-string tensor).
pub fn tensor_from_wit3(t: wit::TensorDesc3) -> TensorDesc {
    TensorDesc {
        text_bytes: t.text_bytes,
        ..TensorDesc::new(t.name, t.shape, dtype_from_wit3(t.dtype))
    }
}

/// The 1.0/1.1 form of an attribute; `None` for values only 1.2 can carry (texts, tensors).
pub fn attr_to_wit(name: &str, v: &AttrValue) -> Option<wit::Attribute> {
    Some(wit::Attribute {
        name: name.to_string(),
        value: match v {
            AttrValue::Int(x) => wit::AttrValue::Int(*x),
            AttrValue::Float(x) => wit::AttrValue::Float(*x),
            AttrValue::Text(x) => wit::AttrValue::Text(x.clone()),
            AttrValue::Ints(x) => wit::AttrValue::Ints(x.clone()),
            AttrValue::Floats(x) => wit::AttrValue::Floats(x.clone()),
            AttrValue::Bool(x) => wit::AttrValue::Boolean(*x),
            AttrValue::Texts(_) | AttrValue::Tensor(..) => return None,
        },
    })
}

/// An attribute in the form of one ABI (1.2 and later: texts and tensors carried), `None` where
/// its tensor's description has no form there (`$desc` answers `None`).
macro_rules! attr_to {
    ($(#[$doc:meta])* $name:ident -> $attr:ident, $val:ident, $tensor:ident, $desc:expr) => {
        $(#[$doc])*
        pub fn $name(name: &str, v: &AttrValue) -> Option<wit::$attr> {
            Some(wit::$attr {
                name: name.to_string(),
                value: match v {
                    AttrValue::Int(x) => wit::$val::Int(*x),
                    AttrValue::Float(x) => wit::$val::Float(*x),
                    AttrValue::Text(x) => wit::$val::Text(x.clone()),
                    AttrValue::Ints(x) => wit::$val::Ints(x.clone()),
                    AttrValue::Floats(x) => wit::$val::Floats(x.clone()),
                    AttrValue::Bool(x) => wit::$val::Boolean(*x),
                    AttrValue::Texts(x) => wit::$val::Texts(x.clone()),
                    AttrValue::Tensor(d, data) => wit::$val::Tensor(wit::$tensor {
                        desc: ($desc)(d)?,
                        data: data.clone(),
                    }),
                },
            })
        }
    };
}

attr_to!(
    /// The 1.2 form of an attribute; `None` for a tensor of a packed dtype.
    attr_to_wit_ext -> AttributeExt, AttrValueExt, TensorValue, tensor_to_wit_ext
);
attr_to!(
    /// The 1.4 form of an attribute; `None` for a string tensor.
    attr_to_wit2 -> Attribute2, AttrValue2, TensorValue2, tensor_to_wit2
);
attr_to!(
    attr_to_wit3_or_none -> Attribute3, AttrValue3, TensorValue3,
    |d: &TensorDesc| Some(tensor_to_wit3(d))
);

/// The 1.5 form of an attribute (every attribute has one).
pub fn attr_to_wit3(name: &str, v: &AttrValue) -> wit::Attribute3 {
    attr_to_wit3_or_none(name, v).expect("every description has a 1.5 form")
}

pub fn dim3_to_wit(d: Dim3) -> wit::Dim3 {
    wit::Dim3 {
        x: d.x,
        y: d.y,
        z: d.z,
    }
}

pub fn dim3_from_wit(d: wit::Dim3) -> Dim3 {
    Dim3::new(d.x, d.y, d.z)
}

fn limits_to_wit(l: &TargetLimits) -> wit::TargetLimits {
    wit::TargetLimits {
        max_threads_per_block: l.max_threads_per_block,
        max_block_dims: dim3_to_wit(l.max_block_dims),
        max_grid_dims: dim3_to_wit(l.max_grid_dims),
        max_shared_memory: l.max_shared_memory,
        warp_size: l.warp_size,
        sm_count: l.sm_count,
        max_param_bytes: l.max_param_bytes,
    }
}

pub fn target_to_wit(t: &Target) -> wit::Target {
    wit::Target {
        name: t.name.clone(),
        arch: t.arch.clone(),
        limits: limits_to_wit(&t.limits),
    }
}

pub fn access_to_wit(a: Access) -> wit::Access {
    match a {
        Access::Read => wit::Access::Read,
        Access::Write => wit::Access::Write,
        Access::ReadWrite => wit::Access::ReadWrite,
    }
}

pub fn relocation_from_wit(r: &wit::Relocation) -> Relocation {
    Relocation {
        offset: r.offset,
        binding: r.binding,
        access: match r.access {
            wit::Access::Read => Access::Read,
            wit::Access::Write => Access::Write,
            wit::Access::ReadWrite => Access::ReadWrite,
        },
    }
}

pub fn relocation_to_wit(r: &Relocation) -> wit::Relocation {
    wit::Relocation {
        offset: r.offset,
        binding: r.binding,
        access: access_to_wit(r.access),
    }
}

/// What a plugin's `op-error` means to the host.
pub enum Declined {
    /// The plugin does not serve this (op, dtype, target): try the next candidate.
    Unsupported(String),
    /// The request is invalid by the plugin's judgement.
    Invalid(String),
    /// The plugin failed.
    Internal(String),
}

pub fn op_error(e: wit::OpError) -> Declined {
    use wit::OpError::*;
    match e {
        UnsupportedOp(m) | UnsupportedDtype(m) | UnsupportedTarget(m) => Declined::Unsupported(m),
        InvalidShape(m) | InvalidAttribute(m) => Declined::Invalid(m),
        Internal(m) => Declined::Internal(m),
    }
}
