//! Two-input elementwise string ops with NumPy broadcasting: StringConcat (string + string →
//! string) and Equal on strings (→ bool; other dtypes are another plugin's, so Unsupported).

use super::common::{
    Budget, OpResult, broadcast_for_each, check_attrs, check_value, invalid, str_input,
};
use super::{Attr, OpError, Tensor, Value};

/// StringConcat-20: `Y[i] = A[i] + B[i]` under broadcasting.
pub fn string_concat(a: &Value, b: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("StringConcat", attrs, &[])?;
    let a = str_input("StringConcat input X", a)?;
    let b = str_input("StringConcat input Y", b)?;
    let mut budget = Budget::default();
    let mut data = Vec::new();
    let shape = broadcast_for_each(&a.shape, &b.shape, |i, j| {
        let (x, y) = (&a.data[i], &b.data[j]);
        let len = x.len().saturating_add(y.len());
        budget.charge_str(len)?;
        let mut s = String::with_capacity(len);
        s.push_str(x);
        s.push_str(y);
        data.push(s);
        Ok(())
    })?;
    Ok(vec![Value::Str(Tensor::new(shape, data))])
}

/// Equal on two string tensors: bytewise equality under broadcasting.
pub fn equal(a: &Value, b: &Value, attrs: &[(String, Attr)]) -> OpResult<Vec<Value>> {
    check_attrs("Equal", attrs, &[])?;
    check_value("Equal input A", a)?;
    check_value("Equal input B", b)?;
    let (a, b) = match (a, b) {
        (Value::Str(a), Value::Str(b)) => (a, b),
        (Value::Str(_), other) | (other, Value::Str(_)) => {
            return invalid(format!(
                "Equal inputs must have one dtype: string and {}",
                other.dtype_name()
            ));
        }
        (a, _) => {
            return Err(OpError::Unsupported(format!(
                "Equal on {} is not served by the text plugin (strings only)",
                a.dtype_name()
            )));
        }
    };
    let mut budget = Budget::default();
    let mut data = Vec::new();
    let shape = broadcast_for_each(&a.shape, &b.shape, |i, j| {
        budget.charge_elems::<bool>(1)?;
        data.push(a.data[i] == b.data[j]);
        Ok(())
    })?;
    Ok(vec![Value::Bool(Tensor::new(shape, data))])
}

#[cfg(test)]
mod tests {
    use super::super::{run, s};
    use super::*;

    fn concat(a: Value, b: Value) -> Result<Vec<Value>, OpError> {
        run("StringConcat", &[Some(a), Some(b)], &[])
    }

    // Expected values: onnx/backend/test/case/node/string_concat.py (onnx 1.x node tests).
    #[test]
    fn string_concat_node_tests() {
        let cases: [(Value, Value, Value); 5] = [
            (
                s(&[2], &["abc", "def"]),
                s(&[2], &[".com", ".net"]),
                s(&[2], &["abc.com", "def.net"]),
            ),
            (
                s(&[3], &["cat", "dog", "snake"]),
                s(&[1], &["s"]),
                s(&[3], &["cats", "dogs", "snakes"]),
            ),
            (s(&[], &["cat"]), s(&[], &["s"]), s(&[], &["cats"])),
            (
                s(&[2], &["abc", ""]),
                s(&[2], &["", "abc"]),
                s(&[2], &["abc", "abc"]),
            ),
            (
                s(&[2], &["的", "中"]),
                s(&[2], &["的", "中"]),
                s(&[2], &["的的", "中中"]),
            ),
        ];
        for (a, b, want) in cases {
            assert_eq!(concat(a, b).unwrap(), vec![want]);
        }
    }

    // Expected values: numpy np.char.add broadcasting (the onnx reference evaluator's rule).
    #[test]
    fn string_concat_broadcasts_both_ways() {
        let got = concat(s(&[2, 1], &["a", "b"]), s(&[3], &["x", "y", "z"])).unwrap();
        assert_eq!(got, vec![s(&[2, 3], &["ax", "ay", "az", "bx", "by", "bz"])]);
        let got = concat(s(&[0, 1], &[]), s(&[2], &["x", "y"])).unwrap();
        assert_eq!(got, vec![s(&[0, 2], &[])]);
    }

    #[test]
    fn string_concat_refuses_bad_inputs() {
        let err = concat(s(&[2], &["a", "b"]), s(&[3], &["x", "y", "z"])).unwrap_err();
        assert!(
            matches!(&err, OpError::Invalid(m) if m.contains("broadcast")),
            "{err:?}"
        );
        let err = concat(s(&[3], &["a", "b"]), s(&[1], &["x"])).unwrap_err();
        assert!(
            matches!(&err, OpError::Invalid(m) if m.contains("input X")),
            "{err:?}"
        );
        let ints = Value::I64(Tensor::new(vec![1], vec![1]));
        let err = concat(s(&[1], &["a"]), ints).unwrap_err();
        assert!(
            matches!(&err, OpError::Invalid(m) if m.contains("input Y")),
            "{err:?}"
        );
        let err = run("StringConcat", &[Some(s(&[1], &["a"]))], &[]).unwrap_err();
        assert!(matches!(err, OpError::Invalid(_)));
        let big = "x".repeat(1 << 20);
        let a = Value::Str(Tensor::new(vec![64], vec![big; 64]));
        let err = concat(a, s(&[1], &["y"])).unwrap_err();
        assert!(
            matches!(&err, OpError::Invalid(m) if m.contains("exceed")),
            "{err:?}"
        );
        let attrs = [("axis".to_string(), Attr::Int(0))];
        let err = run(
            "StringConcat",
            &[Some(s(&[1], &["a"])), Some(s(&[1], &["b"]))],
            &attrs,
        );
        assert!(matches!(err, Err(OpError::Invalid(m)) if m.contains("axis")));
    }

    // Expected values: onnx/backend/test/case/node/equal.py (test_equal_string,
    // test_equal_string_broadcast).
    #[test]
    fn equal_node_tests() {
        let eq = |a, b| run("Equal", &[Some(a), Some(b)], &[]);
        let want = Value::Bool(Tensor::new(vec![2], vec![true, false]));
        let got = eq(
            s(&[2], &["string1", "string2"]),
            s(&[2], &["string1", "string3"]),
        );
        assert_eq!(got.unwrap(), vec![want.clone()]);
        let got = eq(s(&[2], &["string1", "string2"]), s(&[1], &["string1"]));
        assert_eq!(got.unwrap(), vec![want]);
        let got = eq(s(&[2, 1], &["a", "b"]), s(&[2], &["a", "b"])).unwrap();
        assert_eq!(
            got,
            vec![Value::Bool(Tensor::new(
                vec![2, 2],
                vec![true, false, false, true]
            ))]
        );
    }

    #[test]
    fn equal_refuses_other_dtypes() {
        let eq = |a, b| run("Equal", &[Some(a), Some(b)], &[]);
        let i = || Value::I64(Tensor::new(vec![1], vec![1]));
        assert!(matches!(eq(i(), i()), Err(OpError::Unsupported(_))));
        assert!(matches!(eq(s(&[1], &["a"]), i()), Err(OpError::Invalid(_))));
        assert!(matches!(
            eq(s(&[2], &["a", "b"]), s(&[3], &["a", "b", "c"])),
            Err(OpError::Invalid(_))
        ));
    }
}
