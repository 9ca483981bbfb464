//! Typed attribute getters with precise errors (`attribute `alpha` must be a float, got text "x"`).
//!
//! ```
//! use umd_sdk::{attr, AttrValueExt, AttributeExt};
//! let attrs = vec![AttributeExt { name: "alpha".into(), value: AttrValueExt::Float(0.1) }];
//! assert_eq!(attr::float_or(&attrs, "alpha", 0.01).unwrap(), 0.1);
//! assert_eq!(attr::int_or(&attrs, "axis", -1).unwrap(), -1);
//! assert!(attr::int(&attrs, "alpha").is_err());
//! ```

use crate::{AttrValueExt as AttrValue, AttributeExt as Attribute, OpError, TensorValue};

fn find<'a>(attrs: &'a [Attribute], name: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|a| a.name == name).map(|a| &a.value)
}

fn wrong(name: &str, want: &str, got: &AttrValue) -> OpError {
    OpError::InvalidAttribute(format!("attribute `{name}` must be {want}, got {got:?}"))
}

fn missing(name: &str) -> OpError {
    OpError::InvalidAttribute(format!("attribute `{name}` is required"))
}

/// A required integer attribute.
pub fn int(attrs: &[Attribute], name: &str) -> Result<i64, OpError> {
    match find(attrs, name) {
        Some(AttrValue::Int(v)) => Ok(*v),
        Some(other) => Err(wrong(name, "an int", other)),
        None => Err(missing(name)),
    }
}

/// An integer attribute with a default.
pub fn int_or(attrs: &[Attribute], name: &str, default: i64) -> Result<i64, OpError> {
    match find(attrs, name) {
        None => Ok(default),
        Some(_) => int(attrs, name),
    }
}

/// A float attribute with a default (an int is accepted and widened).
pub fn float_or(attrs: &[Attribute], name: &str, default: f64) -> Result<f64, OpError> {
    match find(attrs, name) {
        None => Ok(default),
        Some(AttrValue::Float(v)) => Ok(*v),
        Some(AttrValue::Int(v)) => Ok(*v as f64),
        Some(other) => Err(wrong(name, "a float", other)),
    }
}

/// A boolean attribute with a default (ints 0/1 accepted, as ONNX spells booleans).
pub fn bool_or(attrs: &[Attribute], name: &str, default: bool) -> Result<bool, OpError> {
    match find(attrs, name) {
        None => Ok(default),
        Some(AttrValue::Boolean(v)) => Ok(*v),
        Some(AttrValue::Int(0)) => Ok(false),
        Some(AttrValue::Int(1)) => Ok(true),
        Some(other) => Err(wrong(name, "a bool (or 0/1)", other)),
    }
}

/// An int-list attribute with a default.
pub fn ints_or(attrs: &[Attribute], name: &str, default: &[i64]) -> Result<Vec<i64>, OpError> {
    match find(attrs, name) {
        None => Ok(default.to_vec()),
        Some(AttrValue::Ints(v)) => Ok(v.clone()),
        Some(other) => Err(wrong(name, "a list of ints", other)),
    }
}

/// A text attribute with a default.
pub fn text_or(attrs: &[Attribute], name: &str, default: &str) -> Result<String, OpError> {
    match find(attrs, name) {
        None => Ok(default.to_string()),
        Some(AttrValue::Text(v)) => Ok(v.clone()),
        Some(other) => Err(wrong(name, "text", other)),
    }
}

/// A float-list attribute with a default (ints accepted and widened).
pub fn floats_or(attrs: &[Attribute], name: &str, default: &[f64]) -> Result<Vec<f64>, OpError> {
    match find(attrs, name) {
        None => Ok(default.to_vec()),
        Some(AttrValue::Floats(v)) => Ok(v.clone()),
        Some(AttrValue::Ints(v)) => Ok(v.iter().map(|x| *x as f64).collect()),
        Some(other) => Err(wrong(name, "a list of floats", other)),
    }
}

/// An optional int-list attribute (`None` when not given).
pub fn ints_opt(attrs: &[Attribute], name: &str) -> Result<Option<Vec<i64>>, OpError> {
    match find(attrs, name) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v.clone())),
        Some(AttrValue::Int(v)) => Ok(Some(vec![*v])),
        Some(other) => Err(wrong(name, "a list of ints", other)),
    }
}

/// An optional tensor attribute (`None` when not given).
pub fn tensor_opt<'a>(
    attrs: &'a [Attribute],
    name: &str,
) -> Result<Option<&'a TensorValue>, OpError> {
    match find(attrs, name) {
        None => Ok(None),
        Some(AttrValue::Tensor(t)) => Ok(Some(t)),
        Some(other) => Err(wrong(name, "a tensor", other)),
    }
}

/// Whether attribute `name` is given.
pub fn has(attrs: &[Attribute], name: &str) -> bool {
    find(attrs, name).is_some()
}

/// Refuses attributes not in `known` (a typo should not be silently ignored).
pub fn only(attrs: &[Attribute], known: &[&str]) -> Result<(), OpError> {
    match attrs.iter().find(|a| !known.contains(&a.name.as_str())) {
        Some(a) => Err(OpError::InvalidAttribute(format!(
            "unknown attribute `{}` (accepted: {known:?})",
            a.name
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(name: &str, value: AttrValue) -> Attribute {
        Attribute {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn getters_name_what_is_wrong() {
        let attrs = vec![
            a("k", AttrValue::Text("x".into())),
            a("b", AttrValue::Int(1)),
        ];
        let e = int(&attrs, "k").unwrap_err();
        assert!(matches!(&e, OpError::InvalidAttribute(m) if m.contains("`k` must be an int")));
        assert!(
            matches!(int(&attrs, "z").unwrap_err(), OpError::InvalidAttribute(m) if m.contains("required"))
        );
        assert!(bool_or(&attrs, "b", false).unwrap());
        assert_eq!(float_or(&attrs, "b", 0.0).unwrap(), 1.0);
        assert_eq!(text_or(&attrs, "k", "").unwrap(), "x");
        assert!(ints_or(&attrs, "k", &[]).is_err());
        assert!(only(&attrs, &["k"]).is_err());
        assert!(only(&attrs, &["k", "b"]).is_ok());
    }
}
