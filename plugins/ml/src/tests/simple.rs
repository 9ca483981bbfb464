//! Binarizer and ArrayFeatureExtractor against naive references.

use super::*;

#[test]
fn binarizer_every_dtype_and_shape() {
    for dt in ALL {
        for shape in [vec![3, 4, 5], vec![7], vec![0, 3], vec![]] {
            let n: u64 = shape.iter().product();
            let mut x = data(n as usize, 3, -3.0, 3.0);
            if dtype::name(dt).starts_with('i') {
                x.iter_mut().for_each(|v| *v = v.round());
            }
            let x = dec(dt, &enc(dt, &x));
            let r = req(
                "Binarizer",
                &[(shape.clone(), dt)],
                vec![("threshold", A::Float(1.0))],
            );
            let (plan, out) = run(&r, &[enc(dt, &x)]).unwrap();
            assert_eq!(plan.outputs[0].shape, shape);
            let want: Vec<f64> = x.iter().map(|&v| if v > 1.0 { 1.0 } else { 0.0 }).collect();
            assert_eq!(dec(dt, &out[0]), want, "{dt:?} {shape:?}");
        }
    }
}

#[test]
fn binarizer_nan_and_default_threshold() {
    let r = req("Binarizer", &[(vec![4], Dtype::F32)], vec![]);
    let (_, out) = run(&r, &[enc(Dtype::F32, &[f64::NAN, 0.0, 1e-9, -1.0])]).unwrap();
    assert_eq!(dec(Dtype::F32, &out[0]), vec![0.0, 0.0, 1.0, 0.0]);
}

#[test]
fn binarizer_errors() {
    let r = req(
        "Binarizer",
        &[(vec![2], Dtype::F32)],
        vec![("thresh", A::Float(1.0))],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::InvalidAttribute(_))
    ));
    let r = req("Binarizer", &[(vec![2], Dtype::U8)], vec![]);
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(_))
    ));
    let mut r = req("Binarizer", &[(vec![2], Dtype::F32)], vec![]);
    r.domain = "com.example".into();
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedOp(_))
    ));
    r.domain = "ai.onnx.ml".into();
    assert!(MlPlugin::plan_ext(&r).is_ok());
    let r = req("CategoryMapper", &[(vec![2], Dtype::F32)], vec![]);
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedOp(_))
    ));
}

fn afe_ref(x: &[f64], shape: &[u64], idx: &[i64]) -> Vec<f64> {
    let c = *shape.last().unwrap() as usize;
    let outer = x
        .len()
        .checked_div(c)
        .unwrap_or(shape[..shape.len() - 1].iter().product::<u64>() as usize);
    let mut out = Vec::new();
    for o in 0..outer {
        for &i in idx {
            let i = if i < 0 { i + c as i64 } else { i };
            out.push(if i >= 0 && (i as usize) < c {
                x[o * c + i as usize]
            } else {
                0.0
            });
        }
    }
    out
}

#[test]
fn array_feature_extractor_shapes_and_dtypes() {
    for dt in [
        Dtype::F32,
        Dtype::F16,
        Dtype::F64,
        Dtype::I64,
        Dtype::U8,
        Dtype::I32,
    ] {
        for (shape, idx, ind_shape, want_shape) in [
            (vec![3u64, 4], vec![0i64, 1], vec![2u64], vec![3u64, 2]),
            (vec![5], vec![4, 0, 4], vec![3], vec![1, 3]),
            (vec![2, 3, 4], vec![3, -1, 1, 0], vec![2, 2], vec![2, 3, 4]),
            (vec![0, 4], vec![1], vec![1], vec![0, 1]),
            (vec![2, 4], vec![], vec![0], vec![2, 0]),
            (vec![2, 3], vec![7, 1], vec![1, 2], vec![2, 2]),
        ] {
            let n: u64 = shape.iter().product();
            let x: Vec<f64> = (0..n).map(|i| (i % 100) as f64).collect();
            for idt in [Dtype::I64, Dtype::I32] {
                let r = req(
                    "ArrayFeatureExtractor",
                    &[(shape.clone(), dt), (ind_shape.clone(), idt)],
                    vec![],
                );
                let idxf: Vec<f64> = idx.iter().map(|&v| v as f64).collect();
                let (plan, out) = run(&r, &[enc(dt, &x), enc(idt, &idxf)]).unwrap();
                assert_eq!(plan.outputs[0].shape, want_shape);
                assert_eq!(plan.outputs[0].dtype, dt);
                assert_eq!(
                    dec(dt, &out[0]),
                    afe_ref(&x, &shape, &idx),
                    "{dt:?} {shape:?}"
                );
            }
        }
    }
}

#[test]
fn array_feature_extractor_errors() {
    let r = req(
        "ArrayFeatureExtractor",
        &[(vec![], Dtype::F32), (vec![1], Dtype::I64)],
        vec![],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::InvalidShape(_))
    ));
    let r = req(
        "ArrayFeatureExtractor",
        &[(vec![2], Dtype::F32), (vec![1], Dtype::F32)],
        vec![],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(_))
    ));
}
