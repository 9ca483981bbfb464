//! LabelEncoder between numeric types, defaults, tensors, errors.

use super::*;

#[test]
fn label_encoder_numeric_maps() {
    // int64 -> float (opset 2 attributes)
    let r = req(
        "LabelEncoder",
        &[(vec![5], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1, 2, 3, 2])),
            ("values_floats", A::Floats(vec![0.5, 1.5, 2.5, 9.0])),
            ("default_float", A::Float(-7.0)),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::I64, &[1., 2., 4., 3., -1.])]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::F32);
    assert_eq!(dec(Dtype::F32, &out[0]), vec![0.5, 9.0, -7.0, 2.5, -7.0]);
    // float -> int64, default -1, NaN key
    let r = req(
        "LabelEncoder",
        &[(vec![2, 2], Dtype::F32)],
        vec![
            ("keys_floats", A::Floats(vec![0.5, f64::NAN])),
            ("values_int64s", A::Ints(vec![10, 20])),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::F32, &[0.5, f64::NAN, 1.0, 0.5])]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::I64);
    assert_eq!(dec(Dtype::I64, &out[0]), vec![10., 20., -1., 10.]);
    // tensors: i32 keys -> f64 values, default tensor; float default -0.0 without one
    for xdt in [Dtype::I32, Dtype::I64] {
        let r = req(
            "LabelEncoder",
            &[(vec![3], xdt)],
            vec![
                ("keys_tensor", tensor(Dtype::I32, &[4., 5.])),
                ("values_tensor", tensor(Dtype::F64, &[0.25, 0.75])),
                ("default_tensor", tensor(Dtype::F64, &[3.5])),
            ],
        );
        let (plan, out) = run(&r, &[enc(xdt, &[5., 4., 6.])]).unwrap();
        assert_eq!(plan.outputs[0].dtype, Dtype::F64);
        assert_eq!(dec(Dtype::F64, &out[0]), vec![0.75, 0.25, 3.5]);
    }
    let r = req(
        "LabelEncoder",
        &[(vec![2], Dtype::F64)],
        vec![
            ("keys_tensor", tensor(Dtype::F64, &[1.0])),
            ("values_tensor", tensor(Dtype::I32, &[7.])),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::F64, &[1.0, 2.0])]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::I32);
    assert_eq!(dec(Dtype::I32, &out[0]), vec![7., -1.]);
    // empty
    let r = req(
        "LabelEncoder",
        &[(vec![0], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("values_int64s", A::Ints(vec![2])),
        ],
    );
    assert_eq!(run(&r, &[vec![]]).unwrap().1[0], Vec::<u8>::new());
}

#[test]
fn label_encoder_errors() {
    let strings = req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_strings", A::Texts(vec!["a".into()])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&strings),
        Err(OpError::UnsupportedDtype(_))
    ));
    let mismatch = req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1, 2])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&mismatch),
        Err(OpError::InvalidAttribute(_))
    ));
    let two = req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("keys_floats", A::Floats(vec![1.0])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&two),
        Err(OpError::InvalidAttribute(_))
    ));
    let kinds = req(
        "LabelEncoder",
        &[(vec![2], Dtype::F32)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&kinds),
        Err(OpError::UnsupportedDtype(_))
    ));
}
