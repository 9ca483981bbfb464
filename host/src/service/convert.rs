//! Protocol messages ↔ host types, and host errors → protocol status codes.

use super::proto;
use crate::error::{Error, RequestError, status};
use crate::target::Target;
use crate::tensor::{AttrValue, TensorDesc};
use crate::translate::{OpRequest, Translation};

/// A protocol tensor description as a host one: dtype spellings parsed, negative dims refused.
pub fn tensor_from_proto(t: &proto::TensorDesc) -> Result<TensorDesc, RequestError> {
    let shape = t
        .shape
        .iter()
        .map(|&d| {
            u64::try_from(d).map_err(|_| {
                RequestError::Shape(format!(
                    "tensor `{}` has negative dimension {d} in {:?}",
                    t.name, t.shape
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let desc = TensorDesc::new(t.name.clone(), shape, t.dtype.parse()?);
    desc.validate()?;
    Ok(desc)
}

/// A host tensor description for the wire (dims beyond i32 are saturated; such outputs are
/// refused by the request limits before they get here in practice).
pub fn tensor_to_proto(t: &TensorDesc) -> proto::TensorDesc {
    proto::TensorDesc {
        name: t.name.clone(),
        shape: t
            .shape
            .iter()
            .map(|&d| i32::try_from(d).unwrap_or(i32::MAX))
            .collect(),
        dtype: t.dtype.name().to_string(),
    }
}

/// A protocol request as a host request. Attributes are sorted by name (a map has no order) and
/// parsed into typed values.
pub fn request_from_proto(r: &proto::TranslateRequest) -> Result<OpRequest, RequestError> {
    let inputs = r
        .inputs
        .iter()
        .map(tensor_from_proto)
        .collect::<Result<Vec<_>, _>>()?;
    let mut attributes: Vec<(String, AttrValue)> = r
        .attributes
        .iter()
        .map(|(k, v)| (k.clone(), AttrValue::parse(v)))
        .collect();
    attributes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut req = OpRequest::new(r.op_type.clone(), inputs);
    req.attributes = attributes;
    if !r.target.is_empty() {
        req.target = Some(Target::parse(&r.target)?);
    }
    Ok(req)
}

/// The response for a translation.
pub fn translation_response(t: &Translation, request_id: i64) -> proto::TranslateResponse {
    proto::TranslateResponse {
        status: status::OK,
        command_buffer: t.bytes.to_vec(),
        kernel_name: t.kernel_name.clone(),
        msg: String::new(),
        request_id,
        outputs: t.outputs.iter().map(tensor_to_proto).collect(),
        plugin: t.plugin.clone(),
    }
}

/// The response for an error: its status code and readable message.
pub fn error_response(e: &Error, request_id: i64) -> proto::TranslateResponse {
    proto::TranslateResponse {
        status: e.status(),
        msg: e.to_string(),
        request_id,
        ..Default::default()
    }
}
