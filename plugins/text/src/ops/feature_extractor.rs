//! Picking string elements by index: ai.onnx.ml ArrayFeatureExtractor (the elements of X's
//! last axis at the given indices — what skl2onnx writes to turn a classifier's argmax into its
//! string class label; output shape: X's leading dims, `[1]` for a 1-D X, then the index count)
//! and Gather (numpy `take`). Numbers are the ml and gather plugins'.

use super::common::{Budget, OpResult, check_attrs, invalid};
use super::{Attr, OpError, Tensor, Value};

pub fn array_feature_extractor(
    x: &Value,
    y: &Value,
    attrs: &[(String, Attr)],
) -> OpResult<Vec<Value>> {
    check_attrs("ArrayFeatureExtractor", attrs, &[])?;
    let Value::Str(x) = x else {
        return Err(OpError::Unsupported(format!(
            "ArrayFeatureExtractor: X is {}; the text plugin serves strings",
            x.dtype_name()
        )));
    };
    let indices: Vec<i64> = match y {
        Value::I64(t) => t.data.clone(),
        Value::I32(t) => t.data.iter().map(|&i| i as i64).collect(),
        other => {
            return invalid(format!(
                "ArrayFeatureExtractor: Y (indices) must be int64 or int32, not {}",
                other.dtype_name()
            ));
        }
    };
    let Some((&c, outer_dims)) = x.shape.split_last() else {
        return invalid("ArrayFeatureExtractor: X must have rank 1 or more");
    };
    if let Some(i) = indices.iter().find(|&&i| i < 0 || i as u64 >= c) {
        return invalid(format!(
            "ArrayFeatureExtractor: index {i} is out of range for a last axis of {c}"
        ));
    }
    let outer: u64 = outer_dims.iter().product();
    let mut shape = if outer_dims.is_empty() {
        vec![1]
    } else {
        outer_dims.to_vec()
    };
    shape.push(indices.len() as u64);
    let mut budget = Budget::default();
    let mut out = Vec::new();
    if shape.contains(&0) {
        return Ok(vec![Value::Str(Tensor::new(shape, out))]);
    }
    for r in 0..outer as usize {
        for &i in &indices {
            let s = &x.data[r * c as usize + i as usize];
            budget.charge(s.len() + std::mem::size_of::<String>())?;
            out.push(s.clone());
        }
    }
    Ok(vec![Value::Str(Tensor::new(shape, out))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::s;

    #[test]
    fn picks_the_last_axis() {
        let x = s(&[2, 3], &["a", "b", "c", "d", "e", "f"]);
        let y = Value::I64(Tensor::new(vec![2], vec![2, 0]));
        let out = array_feature_extractor(&x, &y, &[]).unwrap();
        assert_eq!(out, vec![s(&[2, 2], &["c", "a", "f", "d"])]);
        let one = s(&[3], &["x", "y", "z"]);
        let y = Value::I32(Tensor::new(vec![1], vec![1]));
        assert_eq!(
            array_feature_extractor(&one, &y, &[]).unwrap(),
            vec![s(&[1, 1], &["y"])]
        );
        let bad = Value::I64(Tensor::new(vec![1], vec![3]));
        let e = array_feature_extractor(&one, &bad, &[]).unwrap_err();
        assert!(format!("{e}").contains("index 3 is out of range"), "{e}");
    }
}

/// Gather on strings (numpy `take` along `axis`, negative indices counting from the end): what
/// skl2onnx's ColumnTransformer writes to pick a string column. Numbers are the gather plugin's.
pub fn gather(x: &Value, y: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("Gather", attrs, &["axis"])?;
    let Value::Str(x) = x else {
        return Err(OpError::Unsupported(format!(
            "Gather: data is {}; the text plugin serves strings",
            x.dtype_name()
        )));
    };
    let (ishape, indices): (&[u64], Vec<i64>) = match y {
        Value::I64(t) => (&t.shape, t.data.clone()),
        Value::I32(t) => (&t.shape, t.data.iter().map(|&i| i as i64).collect()),
        other => {
            return invalid(format!(
                "Gather: indices must be int64 or int32, not {}",
                other.dtype_name()
            ));
        }
    };
    let rank = x.shape.len() as i64;
    let axis = match super::common::attr(attrs, "axis") {
        None => 0,
        Some(Attr::Int(a)) => *a,
        Some(other) => return invalid(format!("Gather: `axis` must be an int, got {other:?}")),
    };
    if rank == 0 || !(-rank..rank).contains(&axis) {
        return invalid(format!(
            "Gather: axis {axis} is out of range for rank {rank}"
        ));
    }
    let axis = axis.rem_euclid(rank) as usize;
    let d = x.shape[axis];
    let outer: u64 = x.shape[..axis].iter().product();
    let inner: u64 = x.shape[axis + 1..].iter().product();
    let picked = indices
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + d as i64 } else { i };
            if (0..d as i64).contains(&j) {
                Ok(j as u64)
            } else {
                invalid(format!(
                    "Gather: index {i} is out of range for a dimension of {d}"
                ))
            }
        })
        .collect::<OpResult<Vec<u64>>>()?;
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(ishape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    let mut budget = Budget::default();
    let mut out = Vec::new();
    if shape.contains(&0) {
        return Ok(vec![Value::Str(Tensor::new(shape, out))]);
    }
    for o in 0..outer {
        for &j in &picked {
            for i in 0..inner {
                let s = &x.data[((o * d + j) * inner + i) as usize];
                budget.charge(s.len() + std::mem::size_of::<String>())?;
                out.push(s.clone());
            }
        }
    }
    Ok(vec![Value::Str(Tensor::new(shape, out))])
}

#[cfg(test)]
mod gather_tests {
    use super::*;
    use crate::ops::s;

    #[test]
    fn gathers_any_axis() {
        let x = s(&[2, 3], &["a", "b", "c", "d", "e", "f"]);
        let cols = Value::I64(Tensor::new(vec![1], vec![-1]));
        let axis1 = [("axis".to_string(), Attr::Int(1))];
        assert_eq!(
            gather(&x, &cols, &axis1).unwrap(),
            vec![s(&[2, 1], &["c", "f"])]
        );
        let rows = Value::I32(Tensor::new(vec![], vec![1]));
        assert_eq!(
            gather(&x, &rows, &[]).unwrap(),
            vec![s(&[3], &["d", "e", "f"])]
        );
        let e = gather(&x, &Value::I64(Tensor::new(vec![1], vec![2])), &[]).unwrap_err();
        assert!(format!("{e}").contains("index 2 is out of range"), "{e}");
    }
}
