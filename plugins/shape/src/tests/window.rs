//! Slice, Concat and Split against naive references (the ONNX node-test cases and more).

use super::*;

/// The indices python's `range(*slice(start, end, step).indices(dim))` visits.
fn slice_indices(dim: usize, start: i64, end: i64, step: i64) -> Vec<usize> {
    let d = dim as i128;
    let norm = |v: i64, lo: i128, hi: i128| {
        let mut v = v as i128;
        if v < 0 {
            v += d;
        }
        v.max(lo).min(hi)
    };
    let mut out = Vec::new();
    if step > 0 {
        let (mut i, e) = (norm(start, 0, d), norm(end, 0, d));
        while i < e {
            out.push(i as usize);
            i += step as i128;
        }
    } else {
        let (mut i, e) = (norm(start, -1, d - 1), norm(end, -1, d - 1));
        while i > e {
            out.push(i as usize);
            i += step as i128;
        }
    }
    out
}

fn slice_ref(
    shape: &[u64],
    x: &[f64],
    starts: &[i64],
    ends: &[i64],
    axes: &[usize],
    steps: &[i64],
) -> (Vec<u64>, Vec<f64>) {
    let mut picks: Vec<Vec<usize>> = shape.iter().map(|&d| (0..d as usize).collect()).collect();
    for k in 0..starts.len() {
        picks[axes[k]] = slice_indices(shape[axes[k]] as usize, starts[k], ends[k], steps[k]);
    }
    let out: Vec<u64> = picks.iter().map(|p| p.len() as u64).collect();
    let y = gather_ref(&out, x, |o| {
        let idx: Vec<usize> = o.iter().enumerate().map(|(d, &i)| picks[d][i]).collect();
        ravel(&idx, shape)
    });
    (out, y)
}

fn slice_case(shape: &[u64], x: &[f64], s: &[i64], e: &[i64], a: &[i64], st: &[i64]) -> Case {
    case("Slice")
        .input(shape, Dtype::F32, x)
        .ints(s)
        .ints(e)
        .ints(a)
        .ints(st)
}

#[test]
fn slice_onnx_cases() {
    let shape = [20u64, 10, 5];
    let x = values(1000, Dtype::F32);
    let full = |s: &[i64], e: &[i64], a: &[i64], st: &[i64]| {
        let axes: Vec<usize> = a
            .iter()
            .map(|&v| if v < 0 { v + 3 } else { v } as usize)
            .collect();
        let got = slice_case(&shape, &x, s, e, a, st).out();
        assert_eq!(
            got,
            slice_ref(&shape, &x, s, e, &axes, st),
            "{s:?} {e:?} {a:?} {st:?}"
        );
        got.0
    };
    assert_eq!(full(&[0, 0], &[3, 10], &[0, 1], &[1, 1]), vec![3, 10, 5]);
    assert_eq!(full(&[0], &[-1], &[1], &[1]), vec![20, 9, 5]);
    assert_eq!(full(&[1000], &[1000], &[1], &[1]), vec![20, 0, 5]);
    assert_eq!(full(&[1], &[1000], &[1], &[1]), vec![20, 9, 5]);
    assert_eq!(
        full(&[20, 10, 4], &[0, 0, 1], &[0, 1, 2], &[-1, -3, -2]),
        vec![19, 3, 2]
    );
    assert_eq!(
        full(&[0, 0, 3], &[20, 10, 4], &[0, -2, -1], &[1, 1, 1]),
        vec![20, 10, 1]
    );
    assert_eq!(
        full(&[i64::MAX, 1], &[i64::MIN, i64::MAX], &[0, 2], &[-1, 2]),
        vec![20, 10, 2],
        "INT64 sentinels reverse a whole dim"
    );
    assert_eq!(full(&[-100], &[100], &[1], &[i64::MAX]), vec![20, 1, 5]);
    // default axes, default steps
    let got = case("Slice")
        .input(&shape, Dtype::F32, &x)
        .ints(&[0, 0, 3])
        .ints(&[20, 10, 4])
        .out();
    assert_eq!(got.0, vec![20, 10, 1]);
    let got = case("Slice")
        .input(&shape, Dtype::F32, &x)
        .ints(&[0, 0, 3])
        .ints(&[20, 10, 4])
        .absent()
        .ints(&[1, 1, -1])
        .out();
    assert_eq!(got.0, vec![20, 10, 0], "absent axes, explicit steps");
}

#[test]
fn slice_attribute_form_and_i32_indices() {
    let x = values(12, Dtype::I64);
    let got = case("Slice")
        .input(&[3, 4], Dtype::I64, &x)
        .int_list("starts", &[1, 0])
        .int_list("ends", &[3, -1])
        .opset(1)
        .out();
    assert_eq!(
        got,
        slice_ref(&[3, 4], &x, &[1, 0], &[3, -1], &[0, 1], &[1, 1])
    );
    let got = case("Slice")
        .input(&[3, 4], Dtype::I64, &x)
        .constant(&[1], Dtype::I32, &[-1.])
        .constant(&[1], Dtype::I32, &[-5.])
        .constant(&[1], Dtype::I32, &[1.])
        .constant(&[1], Dtype::I32, &[-2.])
        .out();
    assert_eq!(got, slice_ref(&[3, 4], &x, &[-1], &[-5], &[1], &[-2]));
}

#[test]
fn slice_errors() {
    let x = values(12, Dtype::F32);
    let e = slice_case(&[3, 4], &x, &[0], &[2], &[0], &[0]).err();
    assert!(is_shape_err(&e), "zero step");
    let e = slice_case(&[3, 4], &x, &[0], &[2], &[2], &[1]).err();
    assert!(is_attr_err(&e), "axis out of range");
    let e = case("Slice")
        .input(&[3, 4], Dtype::F32, &x)
        .ints(&[0, 1])
        .ints(&[1])
        .err();
    assert!(is_shape_err(&e), "length mismatch");
    let e = case("Slice")
        .input(&[3, 4], Dtype::F32, &x)
        .ints(&[0])
        .err();
    assert!(is_shape_err(&e), "ends required");
}

proptest::proptest! {
    #[test]
    fn random_slices_match_python(
        shape in proptest::collection::vec(0u64..6, 1..4),
        raw in proptest::collection::vec((-8i64..8, -8i64..8, 1i64..4, proptest::bool::ANY), 1..4),
    ) {
        let r = shape.len();
        let k = raw.len().min(r);
        let axes: Vec<i64> = (0..k as i64).rev().collect();
        let starts: Vec<i64> = raw[..k].iter().map(|t| t.0).collect();
        let ends: Vec<i64> = raw[..k].iter().map(|t| t.1).collect();
        let steps: Vec<i64> = raw[..k].iter().map(|t| if t.3 { -t.2 } else { t.2 }).collect();
        let x = values(numel(&shape), Dtype::F32);
        let ax: Vec<usize> = axes.iter().map(|&a| a as usize).collect();
        let got = slice_case(&shape, &x, &starts, &ends, &axes, &steps).out();
        proptest::prop_assert_eq!(got, slice_ref(&shape, &x, &starts, &ends, &ax, &steps));
    }
}

fn concat_ref(shapes: &[Vec<u64>], xs: &[Vec<f64>], axis: usize) -> (Vec<u64>, Vec<f64>) {
    let mut out = shapes[0].clone();
    out[axis] = shapes.iter().map(|s| s[axis]).sum();
    let y = (0..numel(&out))
        .map(|i| {
            let mut idx = unravel(i, &out);
            let mut k = 0;
            while idx[axis] >= shapes[k][axis] as usize {
                idx[axis] -= shapes[k][axis] as usize;
                k += 1;
            }
            xs[k][ravel(&idx, &shapes[k])]
        })
        .collect();
    (out, y)
}

#[test]
fn concat_every_axis_dtype_and_empty_inputs() {
    let sets: [Vec<Vec<u64>>; 4] = [
        vec![vec![2], vec![3]],
        vec![vec![2, 2], vec![2, 2], vec![2, 2]],
        vec![vec![2, 2, 2], vec![2, 2, 2]],
        vec![vec![2, 0, 3], vec![2, 0, 3]],
    ];
    for dt in ALL_DTYPES {
        for shapes in &sets {
            let r = shapes[0].len();
            for axis in -(r as i64)..r as i64 {
                let a = if axis < 0 { axis + r as i64 } else { axis } as usize;
                // vary the extent along the axis, including an empty input
                let shapes: Vec<Vec<u64>> = shapes
                    .iter()
                    .enumerate()
                    .map(|(k, s)| {
                        let mut s = s.clone();
                        s[a] = [s[a], 0, s[a] + 1][k % 3];
                        s
                    })
                    .collect();
                let xs: Vec<Vec<f64>> = shapes
                    .iter()
                    .enumerate()
                    .map(|(k, s)| values(numel(s) + k, dt)[k..].to_vec())
                    .collect();
                let mut c = case("Concat").int("axis", axis);
                for (s, x) in shapes.iter().zip(&xs) {
                    c = c.input(s, dt, x);
                }
                assert_eq!(
                    c.out(),
                    concat_ref(&shapes, &xs, a),
                    "{dt:?} {shapes:?} axis {axis}"
                );
            }
        }
    }
}

#[test]
fn concat_errors() {
    let c = |s2: &[u64], dt2| {
        case("Concat")
            .int("axis", 0)
            .input(&[2, 2], Dtype::F32, &[0.; 4])
            .input(s2, dt2, &vec![0.; numel(s2)])
    };
    assert!(is_shape_err(&c(&[2, 3], Dtype::F32).err()));
    assert!(matches!(
        c(&[2, 2], Dtype::F16).err(),
        OpError::UnsupportedDtype(_)
    ));
    assert!(
        is_attr_err(&case("Concat").input(&[2], Dtype::F32, &[0.; 2]).err()),
        "axis required"
    );
    let e = case("Concat")
        .input(&[2], Dtype::F32, &[0.; 2])
        .int("axis", 1)
        .err();
    assert!(is_attr_err(&e));
    let e = case("Concat")
        .input(&[], Dtype::F32, &[0.])
        .int("axis", 0)
        .err();
    assert!(is_shape_err(&e), "scalars cannot be concatenated");
}

/// Every output of a Split run, with shapes.
fn split_outs(c: &Case) -> Vec<(Vec<u64>, Vec<f64>)> {
    let (plan, outs) = c.run();
    plan.outputs
        .iter()
        .zip(outs)
        .map(|(o, b)| (o.shape.clone(), dtype::decode_f64(o.dtype, &b)))
        .collect()
}

#[test]
fn split_every_form() {
    let x: Vec<f64> = (1..=6).map(|v| v as f64).collect();
    let got = split_outs(
        &case("Split")
            .input(&[6], Dtype::F32, &x)
            .int("axis", 0)
            .wanted(3),
    );
    assert_eq!(
        got,
        vec![
            (vec![2], vec![1., 2.]),
            (vec![2], vec![3., 4.]),
            (vec![2], vec![5., 6.])
        ]
    );
    let got = split_outs(&case("Split").input(&[6], Dtype::F32, &x).ints(&[2, 4]));
    assert_eq!(
        got,
        vec![(vec![2], vec![1., 2.]), (vec![4], vec![3., 4., 5., 6.])]
    );
    let got = split_outs(
        &case("Split")
            .input(&[6], Dtype::F32, &x)
            .int_list("split", &[1, 5])
            .opset(11),
    );
    assert_eq!(got[0], (vec![1], vec![1.]));
    let x2: Vec<f64> = (1..=12).map(|v| v as f64).collect();
    let got = split_outs(
        &case("Split")
            .input(&[2, 6], Dtype::I32, &x2)
            .int("axis", 1)
            .wanted(2),
    );
    assert_eq!(
        got,
        vec![
            (vec![2, 3], vec![1., 2., 3., 7., 8., 9.]),
            (vec![2, 3], vec![4., 5., 6., 10., 11., 12.])
        ]
    );
    let got = split_outs(
        &case("Split")
            .input(&[2, 6], Dtype::I32, &x2)
            .int("axis", -1)
            .ints(&[2, 4]),
    );
    assert_eq!(
        got[1],
        (vec![2, 4], vec![3., 4., 5., 6., 9., 10., 11., 12.])
    );
    // opset 18: num_outputs, uneven
    let x7: Vec<f64> = (1..=7).map(|v| v as f64).collect();
    let got = split_outs(
        &case("Split")
            .input(&[7], Dtype::F32, &x7)
            .int("num_outputs", 4),
    );
    let shapes: Vec<u64> = got.iter().map(|o| o.0[0]).collect();
    assert_eq!(shapes, vec![2, 2, 2, 1]);
    assert_eq!(got[3].1, vec![7.]);
    let x16: Vec<f64> = (1..=16).map(|v| v as f64).collect();
    let got = split_outs(
        &case("Split")
            .input(&[2, 8], Dtype::F16, &x16)
            .int("axis", 1)
            .int("num_outputs", 3),
    );
    assert_eq!(got[2], (vec![2, 2], vec![7., 8., 15., 16.]));
    // zero-size splits
    let got = split_outs(&case("Split").input(&[0], Dtype::F32, &[]).ints(&[0, 0, 0]));
    assert_eq!(got, vec![(vec![0], vec![]); 3]);
    let got = split_outs(
        &case("Split")
            .input(&[3], Dtype::U8, &[1., 2., 3.])
            .ints(&[0, 3, 0]),
    );
    assert_eq!(got[1], (vec![3], vec![1., 2., 3.]));
}

#[test]
fn split_errors() {
    let x = [1., 2., 3., 4., 5.];
    let e = case("Split")
        .input(&[5], Dtype::F32, &x)
        .ints(&[2, 2])
        .err();
    assert!(is_shape_err(&e), "does not sum");
    let e = case("Split").input(&[5], Dtype::F32, &x).err();
    assert!(is_attr_err(&e), "no way to know the count");
    let e = case("Split")
        .input(&[5], Dtype::F32, &x)
        .int("num_outputs", 4)
        .err();
    assert!(
        is_shape_err(&e),
        "5 into 4 chunks of 2 leaves a negative last"
    );
    let e = case("Split")
        .input(&[5], Dtype::F32, &x)
        .ints(&[2, 3])
        .wanted(3)
        .err();
    assert!(is_shape_err(&e), "more outputs wanted than made");
    let e = case("Split")
        .input(&[5], Dtype::F32, &x)
        .ints(&[-1, 6])
        .err();
    assert!(is_shape_err(&e));
}
