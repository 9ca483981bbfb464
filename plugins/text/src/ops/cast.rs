//! Cast-6..24 to and from STRING (`to` = 8), as the ONNX spec says: a string is parsed as a
//! plain or scientific number ("3.14", "1e-5", "1E8"), with "INF"/"+INF", "-INF" and "NaN"
//! matched case-insensitively; to an integer type a string holding a float is truncated toward
//! zero ("100.5" → 100), saturating at the type's range; a numeric value becomes its plain
//! decimal text (Rust's shortest round-trip form, never an exponent: "314.15926", "1e-5" →
//! "0.00001"; infinities and NaN as "INF", "-INF", "NaN"). A string that is not a number is
//! Invalid (the spec leaves it undefined). Served: strings to and from f32, f64, i64, i32, i16
//! and strings to strings; anything else (bool, other widths) is Unsupported, as is a Cast
//! without a string on either side (the shape plugin serves those).

use super::common::{Budget, OpResult, attr_int, check_attrs, invalid};
use super::{Attr, OpError, Tensor, Value};

/// ONNX `TensorProto.DataType` numbers this cast serves.
const FLOAT: i64 = 1;
const INT16: i64 = 5;
const INT32: i64 = 6;
const INT64: i64 = 7;
const STRING: i64 = 8;
const DOUBLE: i64 = 11;

fn parse_f64(s: &str) -> OpResult<f64> {
    let t = s.trim();
    let special = match t.to_ascii_uppercase().as_str() {
        "INF" | "+INF" | "INFINITY" | "+INFINITY" => Some(f64::INFINITY),
        "-INF" | "-INFINITY" => Some(f64::NEG_INFINITY),
        "NAN" | "+NAN" | "-NAN" => Some(f64::NAN),
        _ => None,
    };
    match special {
        Some(v) => Ok(v),
        None => t
            .parse::<f64>()
            .or_else(|_| invalid(format!("Cast: {s:?} is not a number"))),
    }
}

/// An integer from its text: exact when it is one, else the number truncated toward zero,
/// saturating at `[min, max]` (NaN is Invalid).
fn parse_int(s: &str, min: i64, max: i64) -> OpResult<i64> {
    if let Ok(v) = s.trim().parse::<i64>() {
        return Ok(v.clamp(min, max));
    }
    let f = parse_f64(s)?;
    if f.is_nan() {
        return invalid(format!("Cast: {s:?} is not an integer"));
    }
    Ok((f.trunc().clamp(min as f64, max as f64)) as i64)
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "INF".into() } else { "-INF".into() }
    } else {
        v.to_string()
    }
}

fn float32_text(v: f32) -> String {
    if v.is_finite() {
        v.to_string() // the shortest text that reads back as this f32
    } else {
        float_text(v as f64)
    }
}

/// Cast with a string on at least one side.
pub fn cast(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("Cast", attrs, &["to", "saturate", "round_mode"])?;
    let to = *attr_int(attrs, "to")?
        .ok_or_else(|| OpError::Invalid("Cast: attribute \"to\" is required".into()))?;
    let mut budget = Budget::default();
    let out = match (x, to) {
        (Value::Str(t), STRING) => {
            t.data.iter().try_for_each(|s| budget.charge_str(s.len()))?;
            Value::Str(t.clone())
        }
        (Value::Str(t), _) => from_strings(t, to, &mut budget)?,
        (v, STRING) => Value::Str(Tensor::new(v.shape().to_vec(), to_strings(v, &mut budget)?)),
        _ => {
            return Err(OpError::Unsupported(format!(
                "Cast from {} to type {to}: no string on either side",
                x.dtype_name()
            )));
        }
    };
    Ok(vec![out])
}

fn from_strings(t: &Tensor<String>, to: i64, budget: &mut Budget) -> OpResult<Value> {
    let shape = t.shape.clone();
    let n = t.data.len();
    Ok(match to {
        FLOAT => {
            budget.charge_elems::<f32>(n)?;
            let d = t.data.iter().map(|s| parse_f64(s).map(|v| v as f32));
            Value::F32(Tensor::new(shape, d.collect::<OpResult<_>>()?))
        }
        DOUBLE => {
            budget.charge_elems::<f64>(n)?;
            Value::F64(Tensor::new(
                shape,
                t.data
                    .iter()
                    .map(|s| parse_f64(s))
                    .collect::<OpResult<_>>()?,
            ))
        }
        INT64 => {
            budget.charge_elems::<i64>(n)?;
            let d = t.data.iter().map(|s| parse_int(s, i64::MIN, i64::MAX));
            Value::I64(Tensor::new(shape, d.collect::<OpResult<_>>()?))
        }
        INT32 => {
            budget.charge_elems::<i32>(n)?;
            let d = t
                .data
                .iter()
                .map(|s| parse_int(s, i32::MIN as i64, i32::MAX as i64).map(|v| v as i32));
            Value::I32(Tensor::new(shape, d.collect::<OpResult<_>>()?))
        }
        INT16 => {
            budget.charge_elems::<i16>(n)?;
            let d = t
                .data
                .iter()
                .map(|s| parse_int(s, i16::MIN as i64, i16::MAX as i64).map(|v| v as i16));
            Value::I16(Tensor::new(shape, d.collect::<OpResult<_>>()?))
        }
        other => {
            return Err(OpError::Unsupported(format!(
                "Cast from string to type {other} is not served (float, double, int64, int32, \
                 int16, string are)"
            )));
        }
    })
}

fn to_strings(v: &Value, budget: &mut Budget) -> OpResult<Vec<String>> {
    let texts: Vec<String> = match v {
        Value::F32(t) => t.data.iter().map(|&x| float32_text(x)).collect(),
        Value::F64(t) => t.data.iter().map(|&x| float_text(x)).collect(),
        Value::I64(t) => t.data.iter().map(i64::to_string).collect(),
        Value::I32(t) => t.data.iter().map(i32::to_string).collect(),
        Value::I16(t) => t.data.iter().map(i16::to_string).collect(),
        other => {
            return Err(OpError::Unsupported(format!(
                "Cast from {} to string is not served",
                other.dtype_name()
            )));
        }
    };
    texts.iter().try_for_each(|s| budget.charge_str(s.len()))?;
    Ok(texts)
}

#[cfg(test)]
mod tests {
    use super::super::{run, s};
    use super::*;

    fn to(code: i64) -> Vec<(String, Attr)> {
        vec![("to".into(), Attr::Int(code))]
    }

    #[test]
    fn strings_to_numbers_as_the_spec_says() {
        let x = s(&[6], &["2.75", "1e-5", "1E8", "+inf", "-INF", "NaN"]);
        let Value::F32(y) = &run("Cast", &[Some(x.clone())], &to(FLOAT)).unwrap()[0] else {
            panic!("f32 out")
        };
        assert_eq!(&y.data[..3], &[2.75f32, 1e-5, 1e8]);
        assert_eq!((y.data[3], y.data[4]), (f32::INFINITY, f32::NEG_INFINITY));
        assert!(y.data[5].is_nan());
        let ints = s(&[4], &["100.5", "-7", " 42 ", "-2.9"]);
        let Value::I64(y) = &run("Cast", &[Some(ints.clone())], &to(INT64)).unwrap()[0] else {
            panic!("i64 out")
        };
        assert_eq!(y.data, vec![100, -7, 42, -2]);
        let Value::I16(y) = &run("Cast", &[Some(s(&[1], &["70000"]))], &to(INT16)).unwrap()[0]
        else {
            panic!("i16 out")
        };
        assert_eq!(y.data, vec![i16::MAX], "saturates");
        let e = run("Cast", &[Some(s(&[1], &["Hello"]))], &to(DOUBLE)).unwrap_err();
        assert!(matches!(e, OpError::Invalid(m) if m.contains("\"Hello\" is not a number")));
    }

    #[test]
    fn numbers_to_plain_text_and_back() {
        let x = Value::F32(Tensor::new(
            vec![5],
            vec![314.15926, 1e-5, -0.0, f32::INFINITY, 0.1],
        ));
        let out = run("Cast", &[Some(x)], &to(STRING)).unwrap();
        let Value::Str(t) = &out[0] else {
            panic!("strings out")
        };
        assert_eq!(t.data, vec!["314.15927", "0.00001", "-0", "INF", "0.1"]);
        let back = run("Cast", &[Some(out[0].clone())], &to(FLOAT)).unwrap();
        let Value::F32(b) = &back[0] else {
            panic!("f32 out")
        };
        assert_eq!(b.data[4], 0.1f32, "the shortest text reads back exactly");
        let i = Value::I64(Tensor::new(vec![2], vec![-12, 9_000_000_000]));
        let Value::Str(t) = &run("Cast", &[Some(i)], &to(STRING)).unwrap()[0] else {
            panic!("strings out")
        };
        assert_eq!(t.data, vec!["-12", "9000000000"]);
    }

    #[test]
    fn what_has_no_string_side_is_another_plugins() {
        let x = Value::F32(Tensor::new(vec![1], vec![1.0]));
        assert!(matches!(
            run("Cast", &[Some(x)], &to(INT64)),
            Err(OpError::Unsupported(_))
        ));
        let b = Value::Bool(Tensor::new(vec![1], vec![true]));
        assert!(matches!(
            run("Cast", &[Some(b)], &to(STRING)),
            Err(OpError::Unsupported(_))
        ));
        let e = run("Cast", &[Some(s(&[1], &["1"]))], &[]).unwrap_err();
        assert!(matches!(e, OpError::Invalid(m) if m.contains("\"to\" is required")));
    }
}
