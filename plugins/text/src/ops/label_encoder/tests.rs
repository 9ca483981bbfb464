use super::super::run;
use super::*;

fn s(shape: &[u64], v: &[&str]) -> Value {
    Value::Str(Tensor::new(
        shape.to_vec(),
        v.iter().map(|x| x.to_string()).collect(),
    ))
}

fn texts(v: &[&str]) -> Attr {
    Attr::Texts(v.iter().map(|x| x.to_string()).collect())
}

fn le(x: Value, attrs: &[(&str, Attr)]) -> Result<Vec<Value>, OpError> {
    let attrs: Vec<_> = attrs
        .iter()
        .map(|(n, a)| (n.to_string(), a.clone()))
        .collect();
    run("LabelEncoder", &[Some(x)], &attrs)
}

fn bad(r: Result<Vec<Value>, OpError>, word: &str) {
    assert!(
        matches!(&r, Err(OpError::Invalid(m)) if m.contains(word)),
        "{r:?}"
    );
}

const ABCDG: [&str; 5] = ["a", "b", "d", "c", "g"];

// Expected values: onnx/backend/test/case/node/ai_onnx_ml/label_encoder.py (all four tests).
#[test]
fn node_tests() {
    let keys = ("keys_strings", texts(&["a", "b", "c"]));
    let vals = ("values_int64s", Attr::Ints(vec![0, 1, 2]));
    let got = le(
        s(&[5], &ABCDG),
        &[keys.clone(), vals.clone(), ("default_int64", Attr::Int(42))],
    );
    assert_eq!(
        got.unwrap(),
        vec![Value::I64(Tensor::new(vec![5], vec![0, 1, 42, 2, 42]))]
    );
    let got = le(s(&[5], &ABCDG), &[keys.clone(), vals]);
    assert_eq!(
        got.unwrap(),
        vec![Value::I64(Tensor::new(vec![5], vec![0, 1, -1, 2, -1]))]
    );
    let want = vec![Value::I16(Tensor::new(vec![5], vec![0, 1, 42, 2, 42]))];
    let vals = (
        "values_tensor",
        Attr::Tensor(Value::I16(Tensor::new(vec![3], vec![0, 1, 2]))),
    );
    let def = (
        "default_tensor",
        Attr::Tensor(Value::I16(Tensor::new(vec![1], vec![42]))),
    );
    let keys_t = ("keys_tensor", Attr::Tensor(s(&[3], &["a", "b", "c"])));
    let got = le(s(&[5], &ABCDG), &[keys_t, vals.clone(), def.clone()]);
    assert_eq!(got.unwrap(), want);
    assert_eq!(le(s(&[5], &ABCDG), &[keys, vals, def]).unwrap(), want);
}

// Expected values: onnx ReferenceEvaluator (ai.onnx.ml opset 4) on the same inputs/attributes.
#[test]
fn reference_evaluator_cases() {
    let x = Value::I64(Tensor::new(vec![2, 2], vec![1, 2, 3, 2]));
    let a = [
        ("keys_int64s", Attr::Ints(vec![1, 2, 2])),
        ("values_strings", texts(&["one", "two", "deux"])),
    ];
    assert_eq!(
        le(x, &a).unwrap(),
        vec![s(&[2, 2], &["one", "deux", "_Unused", "deux"])]
    );
    let x = Value::I64(Tensor::new(vec![2], vec![1, 5]));
    let a = [
        ("keys_int64s", Attr::Ints(vec![1])),
        ("values_strings", texts(&["one"])),
        ("default_string", Attr::Text("none".into())),
    ];
    assert_eq!(le(x, &a).unwrap(), vec![s(&[2], &["one", "none"])]);
    let a = [
        ("keys_strings", texts(&["a", "b"])),
        ("values_strings", texts(&["x", "y"])),
    ];
    assert_eq!(
        le(s(&[3], &["a", "b", "z"]), &a).unwrap(),
        vec![s(&[3], &["x", "y", "_Unused"])]
    );
    let a = [
        ("keys_strings", texts(&["a", "b"])),
        ("values_floats", Attr::Floats(vec![0.25, 2.5])),
    ];
    let got = le(s(&[3], &["a", "b", "z"]), &a).unwrap();
    let Value::F32(t) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(t.data, vec![0.25, 2.5, -0.0]);
    assert!(t.data[2].is_sign_negative());
    let x = Value::F64(Tensor::new(vec![2], vec![1.5, 2.0]));
    let a = [
        (
            "keys_tensor",
            Attr::Tensor(Value::F64(Tensor::new(vec![2], vec![1.5, 3.0]))),
        ),
        ("values_tensor", Attr::Tensor(s(&[2], &["p", "q"]))),
        ("default_tensor", Attr::Tensor(s(&[1], &["?"]))),
    ];
    assert_eq!(le(x, &a).unwrap(), vec![s(&[2], &["p", "?"])]);
    let x = Value::I32(Tensor::new(vec![2], vec![7, 8]));
    let a = [
        (
            "keys_tensor",
            Attr::Tensor(Value::I32(Tensor::new(vec![1], vec![7]))),
        ),
        ("values_tensor", Attr::Tensor(s(&[1], &["seven"]))),
        ("default_tensor", Attr::Tensor(s(&[1], &["-"]))),
    ];
    assert_eq!(le(x, &a).unwrap(), vec![s(&[2], &["seven", "-"])]);
}

// Float keys: -0 matches +0 (as in the reference); NaN matches NaN per the spec text ("Float
// keys with value 'NaN' match any input 'NaN' value"), where the reference's dict misses it.
#[test]
fn float_keys() {
    let x = Value::F32(Tensor::new(vec![4], vec![0.5, f32::NAN, -0.0, 7.0]));
    let a = [
        ("keys_floats", Attr::Floats(vec![0.5, f64::NAN, 0.0])),
        ("values_strings", texts(&["half", "nan", "zero"])),
    ];
    assert_eq!(
        le(x, &a).unwrap(),
        vec![s(&[4], &["half", "nan", "zero", "_Unused"])]
    );
}

#[test]
fn numeric_to_numeric_is_unsupported() {
    let x = Value::I64(Tensor::new(vec![1], vec![1]));
    let a = [
        ("keys_int64s", Attr::Ints(vec![1])),
        ("values_floats", Attr::Floats(vec![1.0])),
    ];
    assert!(matches!(le(x, &a), Err(OpError::Unsupported(_))));
}

#[test]
fn bad_attributes() {
    let x = || s(&[1], &["a"]);
    let keys = ("keys_strings", texts(&["a", "b"]));
    let vals = ("values_int64s", Attr::Ints(vec![1, 2]));
    bad(
        le(x(), &[keys.clone(), ("values_int64s", Attr::Ints(vec![1]))]),
        "has 2 entries",
    );
    bad(le(x(), std::slice::from_ref(&vals)), "keys_strings");
    bad(le(x(), std::slice::from_ref(&keys)), "values_strings");
    bad(
        le(
            x(),
            &[
                keys.clone(),
                ("keys_int64s", Attr::Ints(vec![1, 2])),
                vals.clone(),
            ],
        ),
        "exactly one",
    );
    bad(
        le(
            x(),
            &[("keys_strings", Attr::Ints(vec![1, 2])), vals.clone()],
        ),
        "keys_strings",
    );
    bad(
        le(
            x(),
            &[
                keys.clone(),
                vals.clone(),
                ("default_int64", Attr::Text("0".into())),
            ],
        ),
        "default_int64",
    );
    let def = ("default_tensor", Attr::Tensor(s(&[1], &["x"])));
    bad(
        le(x(), &[keys.clone(), vals.clone(), def]),
        "default_tensor",
    );
    let def = (
        "default_tensor",
        Attr::Tensor(Value::I64(Tensor::new(vec![2], vec![1, 2]))),
    );
    bad(
        le(x(), &[keys.clone(), vals.clone(), def]),
        "default_tensor",
    );
    bad(
        le(
            x(),
            &[
                keys.clone(),
                vals.clone(),
                ("default_strings", texts(&["x"])),
            ],
        ),
        "default_strings",
    );
    let ints = Value::I64(Tensor::new(vec![1], vec![1]));
    bad(
        le(
            ints,
            &[keys.clone(), ("values_strings", texts(&["x", "y"]))],
        ),
        "input X is int64",
    );
    let i32s = Value::I32(Tensor::new(vec![1], vec![1]));
    let a = [
        ("keys_int64s", Attr::Ints(vec![1])),
        ("values_strings", texts(&["x"])),
    ];
    bad(le(i32s, &a), "input X is int32");
    let bools = Value::Bool(Tensor::new(vec![1], vec![true]));
    let a = [
        ("keys_tensor", Attr::Tensor(bools.clone())),
        ("values_strings", texts(&["x"])),
    ];
    bad(le(bools, &a), "bool");
    let tensor_keys = Attr::Tensor(s(&[3], &["a", "b"]));
    bad(
        le(
            x(),
            &[
                ("keys_tensor", tensor_keys),
                ("values_strings", texts(&["x", "y"])),
            ],
        ),
        "shape",
    );
}
