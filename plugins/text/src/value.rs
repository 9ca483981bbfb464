//! [`ops::Value`]s to and from umd's bytes: little-endian elements, strings in the ABI 1.5
//! layout ([`umd_sdk::strings`]). The only place that knows both the SDK's dtypes and the ops'
//! value types.

use umd_sdk::{Dtype, OpError, dtype, strings};

use crate::ops::{Tensor, Value};

fn le<const N: usize, T>(bytes: &[u8], n: usize, f: impl Fn([u8; N]) -> T) -> Option<Vec<T>> {
    (bytes.len() == n.checked_mul(N)?).then(|| {
        bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().expect("N bytes")))
            .collect()
    })
}

/// The value of a tensor of `dt` and `shape` stored in `bytes` (exactly its size; strings:
/// `8 x n + text_bytes`). `unsupported-dtype` for a dtype the text ops never take.
pub fn from_bytes(dt: Dtype, shape: &[u64], bytes: &[u8]) -> Result<Value, OpError> {
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| OpError::InvalidShape(format!("shape {shape:?} overflows")))?;
    let sized = |v: Option<Value>| {
        v.ok_or_else(|| {
            OpError::InvalidShape(format!(
                "{} bytes do not hold {} {}",
                bytes.len(),
                n,
                dtype::name(dt)
            ))
        })
    };
    let shape = shape.to_vec();
    match dt {
        Dtype::String => {
            let items = strings::decode(bytes, n)?;
            Ok(Value::Str(Tensor::new(
                shape,
                items.into_iter().map(String::from).collect(),
            )))
        }
        Dtype::I64 => {
            sized(le(bytes, n, i64::from_le_bytes).map(|d| Value::I64(Tensor::new(shape, d))))
        }
        Dtype::I32 => {
            sized(le(bytes, n, i32::from_le_bytes).map(|d| Value::I32(Tensor::new(shape, d))))
        }
        Dtype::I16 => {
            sized(le(bytes, n, i16::from_le_bytes).map(|d| Value::I16(Tensor::new(shape, d))))
        }
        Dtype::F32 => {
            sized(le(bytes, n, f32::from_le_bytes).map(|d| Value::F32(Tensor::new(shape, d))))
        }
        Dtype::F64 => {
            sized(le(bytes, n, f64::from_le_bytes).map(|d| Value::F64(Tensor::new(shape, d))))
        }
        Dtype::Boolean => {
            sized(le(bytes, n, |[b]: [u8; 1]| b != 0).map(|d| Value::Bool(Tensor::new(shape, d))))
        }
        other => Err(OpError::UnsupportedDtype(format!(
            "{} tensors are not taken by the text ops",
            dtype::name(other)
        ))),
    }
}

/// A value's dtype, its text bytes (strings; 0 otherwise) and its bytes.
pub fn to_bytes(v: &Value) -> (Dtype, u64, Vec<u8>) {
    fn flat<T: Copy, const N: usize>(d: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        d.iter().flat_map(|&x| f(x)).collect()
    }
    match v {
        Value::Str(t) => (
            Dtype::String,
            strings::text_bytes(&t.data),
            strings::encode(&t.data),
        ),
        Value::I64(t) => (Dtype::I64, 0, flat(&t.data, i64::to_le_bytes)),
        Value::I32(t) => (Dtype::I32, 0, flat(&t.data, i32::to_le_bytes)),
        Value::I16(t) => (Dtype::I16, 0, flat(&t.data, i16::to_le_bytes)),
        Value::F32(t) => (Dtype::F32, 0, flat(&t.data, f32::to_le_bytes)),
        Value::F64(t) => (Dtype::F64, 0, flat(&t.data, f64::to_le_bytes)),
        Value::Bool(t) => (Dtype::Boolean, 0, t.data.iter().map(|&b| b as u8).collect()),
    }
}
