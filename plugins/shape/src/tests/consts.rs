//! Shape, Size, Constant, ConstantOfShape, Range, EyeLike and Trilu.

use super::*;
use umd_sdk::TensorValue;

fn tensor(shape: &[u64], dt: Dtype, values: &[f64]) -> AttrValueExt {
    AttrValueExt::Tensor(TensorValue {
        desc: TensorDesc::new("value", shape.to_vec(), dt),
        data: dtype::encode(dt, values).unwrap(),
    })
}

#[test]
fn shape_with_start_and_end() {
    let x = vec![0.; 60];
    let run = |start: Option<i64>, end: Option<i64>| {
        let mut c = case("Shape").input(&[3, 4, 5], Dtype::F32, &x);
        if let Some(s) = start {
            c = c.int("start", s);
        }
        if let Some(e) = end {
            c = c.int("end", e);
        }
        c.out()
    };
    let dims = |v: &[f64]| (vec![v.len() as u64], v.to_vec());
    assert_eq!(run(None, None), dims(&[3., 4., 5.]));
    assert_eq!(run(Some(1), None), dims(&[4., 5.]));
    assert_eq!(run(None, Some(1)), dims(&[3.]));
    assert_eq!(run(Some(-1), None), dims(&[5.]));
    assert_eq!(run(None, Some(-1)), dims(&[3., 4.]));
    assert_eq!(run(Some(1), Some(-1)), dims(&[4.]));
    assert_eq!(run(Some(1), Some(2)), dims(&[4.]));
    assert_eq!(run(Some(-10), None), dims(&[3., 4., 5.]));
    assert_eq!(run(None, Some(10)), dims(&[3., 4., 5.]));
    assert_eq!(run(Some(2), Some(1)), dims(&[]));
    let (plan, outs) = case("Shape").input(&[], Dtype::Boolean, &[1.]).run();
    assert_eq!((plan.outputs[0].shape.clone(), outs[0].len()), (vec![0], 0));
    assert_eq!(plan.outputs[0].dtype, Dtype::I64);
}

#[test]
fn size_counts_elements() {
    assert_eq!(
        case("Size").input(&[2, 3], Dtype::F32, &[0.; 6]).out(),
        (vec![], vec![6.])
    );
    assert_eq!(
        case("Size").input(&[4, 0], Dtype::I8, &[]).out(),
        (vec![], vec![0.])
    );
    assert_eq!(
        case("Size").input(&[], Dtype::F64, &[1.]).out(),
        (vec![], vec![1.])
    );
}

#[test]
fn constant_every_form() {
    let v: Vec<f64> = (0..25).map(|i| i as f64 * 0.25 - 3.0).collect();
    let got = case("Constant")
        .attr("value", tensor(&[5, 5], Dtype::F32, &v))
        .out();
    assert_eq!(got, (vec![5, 5], v.clone()));
    for dt in ALL_DTYPES {
        let v = values(7, dt);
        let (plan, outs) = case("Constant").attr("value", tensor(&[7], dt, &v)).run();
        assert_eq!(plan.outputs[0].dtype, dt);
        assert_eq!(outs[0], dtype::encode(dt, &v).unwrap());
    }
    let got = case("Constant")
        .attr("value_float", AttrValueExt::Float(1.5))
        .out();
    assert_eq!(got, (vec![], vec![1.5]));
    let got = case("Constant")
        .attr("value_floats", AttrValueExt::Floats(vec![1., 2.]))
        .out();
    assert_eq!(got, (vec![2], vec![1., 2.]));
    let got = case("Constant").int("value_int", -7).out();
    assert_eq!(got, (vec![], vec![-7.]));
    let got = case("Constant").int_list("value_ints", &[]).out();
    assert_eq!(got, (vec![0], vec![]));
    // large values take several launches that keep each other's bytes
    let big: Vec<f64> = (0..3000).map(|i| i as f64).collect();
    let (plan, outs) = case("Constant")
        .attr("value", tensor(&[3000], Dtype::I32, &big))
        .run();
    assert_eq!(plan.launches.len(), 3);
    assert_eq!(outs[0], dtype::encode(Dtype::I32, &big).unwrap());
}

#[test]
fn constant_refusals() {
    let e = case("Constant").err();
    assert!(is_attr_err(&e), "no value");
    let e = case("Constant")
        .int("value_int", 1)
        .int_list("value_ints", &[1])
        .err();
    assert!(is_attr_err(&e), "two values");
    let e = case("Constant")
        .attr("value_string", AttrValueExt::Text("a".into()))
        .err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("value_string")));
    let huge = vec![0.; 40_000];
    let e = case("Constant")
        .attr("value", tensor(&[40_000], Dtype::F64, &huge))
        .err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("initializer")));
    let bad = AttrValueExt::Tensor(TensorValue {
        desc: TensorDesc::new("v", vec![3], Dtype::F32),
        data: vec![0; 8],
    });
    assert!(is_attr_err(&case("Constant").attr("value", bad).err()));
}

#[test]
fn constant_of_shape_values_and_empty_shapes() {
    let got = case("ConstantOfShape")
        .ints(&[4, 3, 2])
        .attr("value", tensor(&[1], Dtype::F32, &[1.]))
        .out();
    assert_eq!(got, (vec![4, 3, 2], vec![1.; 24]));
    let (plan, outs) = case("ConstantOfShape")
        .ints(&[10, 6])
        .attr("value", tensor(&[1], Dtype::I32, &[0.]))
        .run();
    assert_eq!(
        (plan.outputs[0].dtype, outs[0].clone()),
        (Dtype::I32, vec![0; 240])
    );
    let got = case("ConstantOfShape")
        .ints(&[0])
        .attr("value", tensor(&[1], Dtype::I32, &[0.]))
        .out();
    assert_eq!(got, (vec![0], vec![]));
    let (plan, outs) = case("ConstantOfShape").ints(&[2]).run();
    assert_eq!(
        (plan.outputs[0].dtype, outs[0].clone()),
        (Dtype::F32, vec![0; 8]),
        "default f32 0"
    );
    for dt in ALL_DTYPES {
        let v = values(2, dt)[1];
        let got = case("ConstantOfShape")
            .ints(&[3])
            .attr("value", tensor(&[], dt, &[v]))
            .out();
        assert_eq!(got, (vec![3], vec![v; 3]), "{dt:?}");
    }
    let got = case("ConstantOfShape")
        .ints(&[])
        .attr("value", tensor(&[1], Dtype::I64, &[9.]))
        .out();
    assert_eq!(got, (vec![], vec![9.]), "an empty shape is a scalar");
    let e = case("ConstantOfShape").ints(&[-1]).err();
    assert!(is_shape_err(&e));
    let e = case("ConstantOfShape")
        .ints(&[2])
        .attr("value", tensor(&[2], Dtype::F32, &[1., 2.]))
        .err();
    assert!(is_attr_err(&e));
}

fn range(dt: Dtype, start: f64, limit: f64, delta: f64) -> Case {
    case("Range")
        .constant(&[], dt, &[start])
        .constant(&[], dt, &[limit])
        .constant(&[], dt, &[delta])
}

#[test]
fn range_lengths_and_values() {
    assert_eq!(range(Dtype::F32, 1., 5., 2.).out(), (vec![2], vec![1., 3.]));
    assert_eq!(
        range(Dtype::I32, 10., 6., -3.).out(),
        (vec![2], vec![10., 7.])
    );
    assert_eq!(range(Dtype::F16, 1., 5., 2.).out(), (vec![2], vec![1., 3.]));
    assert_eq!(
        range(Dtype::Bf16, 1., 5., 2.).out(),
        (vec![2], vec![1., 3.])
    );
    assert_eq!(range(Dtype::I64, 3., 9., 3.).out(), (vec![2], vec![3., 6.]));
    assert_eq!(
        range(Dtype::I64, 10., 4., -2.).out(),
        (vec![3], vec![10., 8., 6.])
    );
    assert_eq!(range(Dtype::I64, 0., 10., 3.).out().0, vec![4]);
    assert_eq!(range(Dtype::I32, 0., -10., -3.).out().0, vec![4]);
    assert_eq!(range(Dtype::I32, 5., 1., 1.).out(), (vec![0], vec![]));
    assert_eq!(
        range(Dtype::F64, 0., 1., 0.25).out(),
        (vec![4], vec![0., 0.25, 0.5, 0.75])
    );
    let (s, v) = range(Dtype::F32, 0., 1., 0.1).out();
    assert_eq!(s, vec![10]);
    for (i, x) in v.iter().enumerate() {
        assert!((x - i as f64 * 0.1).abs() < 1e-6);
    }
    for stash in [1, 11] {
        let got = range(Dtype::F16, 2048., 2052., 1.)
            .int("stash_type", stash)
            .out();
        assert_eq!(
            got,
            (vec![4], vec![2048., 2048., 2050., 2052.]),
            "f16 rounds to even"
        );
    }
    assert!(is_shape_err(&range(Dtype::I32, 0., 5., 0.).err()));
    assert!(is_shape_err(
        &range(Dtype::F32, 0., f64::INFINITY, 1.).err()
    ));
    assert!(matches!(
        range(Dtype::U8, 0., 5., 1.).err(),
        OpError::UnsupportedDtype(_)
    ));
    assert!(is_attr_err(
        &range(Dtype::F16, 0., 5., 1.).int("stash_type", 3).err()
    ));
    let e = case("Range")
        .constant(&[], Dtype::F32, &[0.])
        .constant(&[], Dtype::F64, &[1.])
        .constant(&[], Dtype::F32, &[1.])
        .err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
}

#[test]
fn eye_like_diagonals() {
    let eye = |rows: usize, cols: usize, k: i64| -> Vec<f64> {
        (0..rows * cols)
            .map(|i| ((i % cols) as i64 - (i / cols) as i64 == k) as u8 as f64)
            .collect()
    };
    let got = case("EyeLike").input(&[4, 4], Dtype::I32, &[5.; 16]).out();
    assert_eq!(got, (vec![4, 4], eye(4, 4, 0)));
    let (plan, outs) = case("EyeLike")
        .input(&[3, 4], Dtype::I32, &[5.; 12])
        .int("dtype", 11)
        .run();
    assert_eq!(plan.outputs[0].dtype, Dtype::F64);
    assert_eq!(dtype::decode_f64(Dtype::F64, &outs[0]), eye(3, 4, 0));
    for k in [-5, -1, 1, 3, 9] {
        for dt in ALL_DTYPES.into_iter().filter(|&d| d != Dtype::F8e8m0) {
            let got = case("EyeLike")
                .input(&[4, 5], dt, &[0.; 20])
                .int("k", k)
                .out();
            assert_eq!(got, (vec![4, 5], eye(4, 5, k)), "{dt:?} k={k}");
        }
    }
    let e = case("EyeLike")
        .input(&[2, 2], Dtype::F8e8m0, &[1.; 4])
        .err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("e8m0")));
    assert_eq!(
        case("EyeLike").input(&[0, 3], Dtype::F32, &[]).out(),
        (vec![0, 3], vec![])
    );
    assert!(is_shape_err(
        &case("EyeLike").input(&[4], Dtype::F32, &[0.; 4]).err()
    ));
    let e = case("EyeLike")
        .input(&[2, 2], Dtype::F32, &[0.; 4])
        .int("dtype", 8)
        .err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)), "STRING");
}

fn trilu_ref(shape: &[u64], x: &[f64], k: i64, upper: bool) -> Vec<f64> {
    let (rows, cols) = (
        shape[shape.len() - 2] as usize,
        shape[shape.len() - 1] as usize,
    );
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let (r, c) = ((i / cols) % rows, i % cols);
            let d = c as i64 - r as i64;
            if (upper && d >= k) || (!upper && d <= k) {
                v
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
fn trilu_both_triangles() {
    for dt in [Dtype::F32, Dtype::I64, Dtype::F16, Dtype::U8] {
        for shape in [
            &[4u64, 5][..],
            &[5, 3],
            &[3, 3],
            &[2, 3, 3],
            &[1, 5],
            &[3, 0, 5],
        ] {
            let x = values(numel(shape), dt);
            for upper in [0, 1] {
                let got = case("Trilu").input(shape, dt, &x).int("upper", upper).out();
                assert_eq!(got.1, trilu_ref(shape, &x, 0, upper == 1), "{shape:?}");
                for k in [-7, -1, 1, 2, 6, i64::MAX, i64::MIN] {
                    let got = case("Trilu")
                        .input(shape, dt, &x)
                        .ints_shaped(&[], &[k])
                        .int("upper", upper)
                        .out();
                    assert_eq!(
                        got,
                        (shape.to_vec(), trilu_ref(shape, &x, k, upper == 1)),
                        "{shape:?} k={k}"
                    );
                }
            }
        }
    }
    assert!(is_shape_err(
        &case("Trilu").input(&[3], Dtype::F32, &[0.; 3]).err()
    ));
}
