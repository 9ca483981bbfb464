//! ai.onnx.ml CategoryMapper: strings to int64 through `cats_strings` → `cats_int64s` (unknown:
//! `default_int64`, -1), or int64 to strings the other way (unknown: `default_string`,
//! "_Unused"). The two lists pair up element by element; it is a [`super::label_encoder`] with
//! its keys and values named differently, and runs as one (a repeated category: the last wins).

use super::common::{OpResult, attr, check_attrs, invalid};
use super::{Attr, OpError, Value};

const ATTRS: &[&str] = &[
    "cats_int64s",
    "cats_strings",
    "default_int64",
    "default_string",
];

pub fn category_mapper(x: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("CategoryMapper", attrs, ATTRS)?;
    let strings = match attr(attrs, "cats_strings") {
        Some(Attr::Texts(v)) => v.clone(),
        None => Vec::new(),
        Some(other) => {
            return invalid(format!(
                "attribute \"cats_strings\" must be strings, got {other:?}"
            ));
        }
    };
    let ints = match attr(attrs, "cats_int64s") {
        Some(Attr::Ints(v)) => v.clone(),
        None => Vec::new(),
        Some(other) => {
            return invalid(format!(
                "attribute \"cats_int64s\" must be ints, got {other:?}"
            ));
        }
    };
    if strings.len() != ints.len() {
        return invalid(format!(
            "CategoryMapper: {} `cats_strings` but {} `cats_int64s` (they pair up)",
            strings.len(),
            ints.len()
        ));
    }
    let default_int = attr(attrs, "default_int64")
        .cloned()
        .unwrap_or(Attr::Int(-1));
    let default_string = attr(attrs, "default_string")
        .cloned()
        .unwrap_or(Attr::Text("_Unused".into()));
    let as_label_encoder: Vec<(String, Attr)> = match x {
        Value::Str(_) => vec![
            ("keys_strings".into(), Attr::Texts(strings)),
            ("values_int64s".into(), Attr::Ints(ints)),
            ("default_int64".into(), default_int),
        ],
        Value::I64(_) => vec![
            ("keys_int64s".into(), Attr::Ints(ints)),
            ("values_strings".into(), Attr::Texts(strings)),
            ("default_string".into(), default_string),
        ],
        other => {
            return Err(OpError::Unsupported(format!(
                "CategoryMapper: X is {}; string or int64 inputs are served",
                other.dtype_name()
            )));
        }
    };
    super::label_encoder::label_encoder(x, &as_label_encoder)
}

#[cfg(test)]
mod tests {
    use super::super::Tensor;
    use super::*;

    fn attrs(extra: &[(&str, Attr)]) -> Vec<(String, Attr)> {
        let mut a = vec![
            (
                "cats_strings".to_string(),
                Attr::Texts(vec!["cat".into(), "dog".into(), "eel".into()]),
            ),
            ("cats_int64s".to_string(), Attr::Ints(vec![1, 2, 3])),
        ];
        a.extend(extra.iter().map(|(n, v)| (n.to_string(), v.clone())));
        a
    }

    #[test]
    fn maps_both_ways_with_defaults() {
        let x = Value::Str(Tensor::new(
            vec![2, 2],
            ["dog", "cow", "cat", "eel"].map(String::from).to_vec(),
        ));
        assert_eq!(
            category_mapper(&x, &attrs(&[])).unwrap(),
            vec![Value::I64(Tensor::new(vec![2, 2], vec![2, -1, 1, 3]))]
        );
        let got = category_mapper(&x, &attrs(&[("default_int64", Attr::Int(0))])).unwrap();
        assert_eq!(
            got,
            vec![Value::I64(Tensor::new(vec![2, 2], vec![2, 0, 1, 3]))]
        );
        let x = Value::I64(Tensor::new(vec![3], vec![3, 9, 1]));
        assert_eq!(
            category_mapper(&x, &attrs(&[])).unwrap(),
            vec![Value::Str(Tensor::new(
                vec![3],
                ["eel", "_Unused", "cat"].map(String::from).to_vec()
            ))]
        );
    }

    #[test]
    fn refusals_name_the_problem() {
        let x = Value::Str(Tensor::new(vec![1], vec!["a".into()]));
        let mut a = attrs(&[]);
        a[1].1 = Attr::Ints(vec![1, 2]);
        assert!(format!("{:?}", category_mapper(&x, &a).unwrap_err()).contains("pair up"));
        let f = Value::F32(Tensor::new(vec![1], vec![1.0]));
        assert!(matches!(
            category_mapper(&f, &attrs(&[])),
            Err(OpError::Unsupported(_))
        ));
        let a = attrs(&[("mode", Attr::Int(1))]);
        assert!(
            format!("{:?}", category_mapper(&x, &a).unwrap_err()).contains("unknown attribute")
        );
    }
}
