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
        text_bytes: t.text_bytes,
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
    for (k, v) in &r.typed_attributes {
        if r.attributes.contains_key(k) {
            return Err(RequestError::Attribute(format!(
                "attribute `{:.64}` is given both as a string and typed",
                k
            )));
        }
        attributes.push((k.clone(), attr_from_proto(k, v)?));
    }
    attributes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut req = OpRequest::new(r.op_type.clone(), inputs);
    req.attributes = attributes;
    if !r.target.is_empty() {
        req.target = Some(Target::parse(&r.target)?);
    }
    req.domain = r.domain.clone();
    req.opset = r.opset;
    req.absent = r.absent_inputs.clone();
    req.values = r
        .constant_inputs
        .iter()
        .map(|c| (c.index, c.data.clone()))
        .collect();
    req.values.sort_by_key(|(i, _)| *i);
    if req.values.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(RequestError::Other(
            "a constant input index appears twice".into(),
        ));
    }
    // A string input's text size is its value's (checked against the offsets when planned).
    for (i, v) in &req.values {
        if let Some(d) = req.inputs.get_mut(*i as usize) {
            *d = d.clone().sized(v.len() as u64)?;
        }
    }
    req.outputs_wanted = r.outputs_wanted.clone();
    Ok(req)
}

/// A protocol attribute value as a host one.
fn attr_from_proto(name: &str, v: &proto::AttributeValue) -> Result<AttrValue, RequestError> {
    use proto::attribute_value::Value;
    Ok(match &v.value {
        Some(Value::I(x)) => AttrValue::Int(*x),
        Some(Value::F(x)) => AttrValue::Float(*x),
        Some(Value::S(x)) => AttrValue::Text(x.clone()),
        Some(Value::Ints(x)) => AttrValue::Ints(x.values.clone()),
        Some(Value::Floats(x)) => AttrValue::Floats(x.values.clone()),
        Some(Value::B(x)) => AttrValue::Bool(*x),
        Some(Value::Strings(x)) => AttrValue::Texts(x.values.clone()),
        Some(Value::Tensor(t)) => {
            let desc = t.desc.as_ref().ok_or_else(|| {
                RequestError::Attribute(format!("tensor attribute `{name:.64}` has no description"))
            })?;
            AttrValue::Tensor(
                tensor_from_proto(desc)?.sized(t.data.len() as u64)?,
                t.data.clone(),
            )
        }
        None => {
            return Err(RequestError::Attribute(format!(
                "attribute `{name:.64}` has no value"
            )));
        }
    })
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
        seal: super::seal::seal(&t.bytes),
    }
}

/// Longest error message sent to a client: messages may quote what the client sent.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// An error's message, cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
pub fn message(e: &Error) -> String {
    let mut m = e.to_string();
    if m.len() > MAX_MESSAGE_BYTES {
        let mut n = MAX_MESSAGE_BYTES;
        while !m.is_char_boundary(n) {
            n -= 1;
        }
        m.truncate(n);
        m.push('…');
    }
    m
}

/// The response for an error: its status code and readable message.
pub fn error_response(e: &Error, request_id: i64) -> proto::TranslateResponse {
    proto::TranslateResponse {
        status: e.status(),
        msg: message(e),
        request_id,
        ..Default::default()
    }
}
