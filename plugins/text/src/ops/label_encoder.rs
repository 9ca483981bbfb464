//! ai.onnx.ml LabelEncoder (opsets 2 to 4): map each input element through parallel
//! `keys_*` / `values_*` lists, `default_*` where the key is absent.
//!
//! Served whenever the input or the values are strings (string→string, string→number,
//! number→string, numbers being int64, int32, int16, float and double); number→number is
//! another plugin's (Unsupported). Exactly one `keys_*` and one `values_*` must be set, of equal
//! length, and the keys' dtype must be the input's (`keys_int64s` int64, `keys_floats` float,
//! `keys_tensor` its own). A repeated key maps to its last value; float keys compare by value,
//! every NaN matching every NaN and -0 matching +0 (onnxruntime and the reference's dict).
//! The default is `default_tensor` when given (one element of the values' dtype), else
//! `default_string` / `default_int64` / `default_float` for string / int64 / float values, else
//! the schema defaults: "_Unused", -1, -0.0.

use std::collections::HashMap;

use super::common::invalid;
use super::common::{
    Budget, OpResult, attr, attr_float, attr_int, attr_tensor, attr_text, check_attrs, check_value,
};
use super::{Attr, OpError, Tensor, Value};

const ATTRS: &[&str] = &[
    "keys_strings",
    "keys_int64s",
    "keys_floats",
    "keys_tensor",
    "values_strings",
    "values_int64s",
    "values_floats",
    "values_tensor",
    "default_string",
    "default_int64",
    "default_float",
    "default_tensor",
];

/// A hashable lookup key: integers widened to i64, floats by normalized bit pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    S(&'a str),
    I(i64),
    F(u64),
}

fn float_key(x: f64) -> Key<'static> {
    if x.is_nan() {
        Key::F(u64::MAX)
    } else if x == 0.0 {
        Key::F(0) // Both zeros.
    } else {
        Key::F(x.to_bits())
    }
}

/// The lookup keys of every element of `v` (f32 widened exactly to f64).
fn keys_of<'a>(what: &str, v: &'a Value) -> OpResult<Vec<Key<'a>>> {
    check_value(what, v)?;
    Ok(match v {
        Value::Str(t) => t.data.iter().map(|s| Key::S(s)).collect(),
        Value::I64(t) => t.data.iter().map(|&x| Key::I(x)).collect(),
        Value::I32(t) => t.data.iter().map(|&x| Key::I(x.into())).collect(),
        Value::I16(t) => t.data.iter().map(|&x| Key::I(x.into())).collect(),
        Value::F32(t) => t.data.iter().map(|&x| float_key(x.into())).collect(),
        Value::F64(t) => t.data.iter().map(|&x| float_key(x)).collect(),
        Value::Bool(_) => return invalid(format!("{what} must not be bool")),
    })
}

fn vec1<T>(data: Vec<T>) -> Tensor<T> {
    Tensor::new(vec![data.len() as u64], data)
}

/// The one `{prefix}_*` attribute set, as a 1-D value, and its name.
fn pick(attrs: &[(String, Attr)], prefix: &str) -> OpResult<(String, Value)> {
    let names = ["strings", "int64s", "floats", "tensor"].map(|s| format!("{prefix}_{s}"));
    let set: Vec<&String> = names.iter().filter(|n| attr(attrs, n).is_some()).collect();
    let [name] = set[..] else {
        return invalid(format!(
            "LabelEncoder: exactly one of {names:?} must be set, got {set:?}"
        ));
    };
    let wrong = |want: &str| invalid(format!("attribute {name:?} must be {want}"));
    let value = match (name.rsplit('_').next(), attr(attrs, name)) {
        (Some("strings"), Some(Attr::Texts(v))) => Value::Str(vec1(v.clone())),
        (Some("int64s"), Some(Attr::Ints(v))) => Value::I64(vec1(v.clone())),
        (Some("floats"), Some(Attr::Floats(v))) => {
            Value::F32(vec1(v.iter().map(|&x| x as f32).collect()))
        }
        (Some("tensor"), Some(Attr::Tensor(v))) => v.clone(),
        (Some("strings"), _) => return wrong("a list of strings"),
        (Some("int64s"), _) => return wrong("a list of ints"),
        (Some("floats"), _) => return wrong("a list of floats"),
        _ => return wrong("a tensor"),
    };
    Ok((name.clone(), value))
}

/// The default output element, as a one-element value of the values' dtype.
fn default_for(attrs: &[(String, Attr)], values: &Value) -> OpResult<Value> {
    if let Some(d) = attr_tensor(attrs, "default_tensor")? {
        check_value("attribute \"default_tensor\"", d)?;
        if d.len() != 1 || d.dtype_name() != values.dtype_name() {
            return invalid(format!(
                "attribute \"default_tensor\" must hold one {} (the values' dtype), got {} {}",
                values.dtype_name(),
                d.len(),
                d.dtype_name()
            ));
        }
        return Ok(d.clone());
    }
    let int = attr_int(attrs, "default_int64")?.copied().unwrap_or(-1);
    let float = attr_float(attrs, "default_float")?.copied().unwrap_or(-0.0);
    Ok(match values {
        Value::Str(_) => {
            let s = attr_text(attrs, "default_string")?.cloned();
            Value::Str(vec1(vec![s.unwrap_or_else(|| "_Unused".to_string())]))
        }
        Value::I64(_) => Value::I64(vec1(vec![int])),
        Value::I32(_) => Value::I32(vec1(vec![-1])),
        Value::I16(_) => Value::I16(vec1(vec![-1])),
        Value::F32(_) => Value::F32(vec1(vec![float as f32])),
        Value::F64(_) => Value::F64(vec1(vec![-0.0])),
        Value::Bool(_) => return invalid("LabelEncoder values must not be bool"),
    })
}

/// Builds the output: element `i` is `values[idx[i]]`, or the default where `idx[i]` is None.
fn gather(
    values: &Value,
    default: &Value,
    idx: &[Option<usize>],
    shape: &[u64],
) -> OpResult<Value> {
    let mut budget = Budget::default();
    macro_rules! numeric {
        ($($v:ident: $t:ty),*) => {
            match (values, default) {
                (Value::Str(v), Value::Str(d)) => {
                    let mut data = Vec::with_capacity(idx.len());
                    for i in idx {
                        let s = i.map_or(&d.data[0], |i| &v.data[i]);
                        budget.charge_str(s.len())?;
                        data.push(s.clone());
                    }
                    Value::Str(Tensor::new(shape.to_vec(), data))
                }
                $((Value::$v(v), Value::$v(d)) => {
                    budget.charge_elems::<$t>(idx.len())?;
                    let data = idx.iter().map(|i| i.map_or(d.data[0], |i| v.data[i])).collect();
                    Value::$v(Tensor::new(shape.to_vec(), data))
                })*
                _ => return invalid("LabelEncoder: the default's dtype is not the values' dtype"),
            }
        };
    }
    Ok(numeric!(I64: i64, I32: i32, I16: i16, F32: f32, F64: f64))
}

/// LabelEncoder on input `x`.
pub fn label_encoder(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("LabelEncoder", attrs, ATTRS)?;
    let (keys_name, keys) = pick(attrs, "keys")?;
    let (values_name, values) = pick(attrs, "values")?;
    let key_list = keys_of(&format!("attribute {keys_name:?}"), &keys)?;
    check_value(&format!("attribute {values_name:?}"), &values)?;
    if key_list.len() != values.len() {
        return invalid(format!(
            "LabelEncoder: {keys_name:?} has {} entries but {values_name:?} has {}",
            key_list.len(),
            values.len()
        ));
    }
    if keys.dtype_name() != x.dtype_name() {
        return invalid(format!(
            "LabelEncoder: input X is {} but {keys_name:?} holds {}",
            x.dtype_name(),
            keys.dtype_name()
        ));
    }
    let input = keys_of("LabelEncoder input X", x)?;
    let default = default_for(attrs, &values)?;
    if !matches!(x, Value::Str(_)) && !matches!(values, Value::Str(_)) {
        return Err(OpError::Unsupported(format!(
            "LabelEncoder from {} to {} (the text plugin serves string inputs or string values)",
            x.dtype_name(),
            values.dtype_name()
        )));
    }
    // Later keys overwrite earlier ones: the last of a repeated key wins.
    let map: HashMap<Key, usize> = key_list
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    let idx: Vec<Option<usize>> = input.iter().map(|k| map.get(k).copied()).collect();
    Ok(vec![gather(&values, &default, &idx, x.shape())?])
}

#[cfg(test)]
mod tests;
