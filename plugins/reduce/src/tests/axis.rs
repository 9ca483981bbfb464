//! CumSum, CumProd and TopK against naive references (ONNX node-test semantics).

use super::*;
use crate::ops::{NUMERIC, ORDERED};

fn cumsum_ref(
    shape: &[u64],
    axis: usize,
    (exclusive, reverse, prod): (bool, bool, bool),
    x: &[f64],
) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for (flat, out) in y.iter_mut().enumerate() {
        let idx = unravel(flat, shape);
        let r = shape[axis] as usize;
        let range: Vec<usize> = match (reverse, exclusive) {
            (false, false) => (0..=idx[axis]).collect(),
            (false, true) => (0..idx[axis]).collect(),
            (true, false) => (idx[axis]..r).collect(),
            (true, true) => (idx[axis] + 1..r).collect(),
        };
        let terms = range.into_iter().map(|j| {
            let mut k = idx.clone();
            k[axis] = j;
            x[ravel(&k, shape)]
        });
        *out = if prod { terms.product() } else { terms.sum() };
    }
    y
}

#[test]
fn cumsum_every_dtype_axis_and_flag() {
    cum_every_dtype_axis_and_flag("CumSum");
}

#[test]
fn cumprod_every_dtype_axis_and_flag() {
    cum_every_dtype_axis_and_flag("CumProd");
}

fn cum_every_dtype_axis_and_flag(op: &str) {
    let prod = op == "CumProd";
    let shapes: &[&[u64]] = &[&[5], &[2, 3], &[3, 4, 5], &[2, 0, 3], &[1, 70], &[2, 600]];
    for dt in NUMERIC {
        for shape in shapes {
            for axis in -(shape.len() as i64)..shape.len() as i64 {
                for (exclusive, reverse) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let n = shape.iter().product::<u64>() as usize;
                    let step = if umd_sdk::request::is_float(dt) {
                        0.25
                    } else {
                        1.0
                    };
                    let mut x = sample(dt, n, 9, 6.0, step);
                    if prod {
                        // factors of 1 with a few 2, -1 and 0: products stay exact and in range
                        let signed = !dtype::name(dt).starts_with('u');
                        for (i, v) in x.iter_mut().enumerate() {
                            *v = match i % 97 {
                                3 | 40 | 60 => 2.0,
                                11 | 50 if signed => -1.0,
                                17 if shape.len() > 1 => 0.0,
                                _ => 1.0,
                            };
                        }
                    }
                    let scalar_axis = axis % 2 == 0; // both the 0-d and the [1] forms
                    let req = with_ints(builder(op, shape, dt), &[axis], scalar_axis)
                        .attr("exclusive", int(exclusive as i64))
                        .attr("reverse", int(reverse as i64))
                        .build(target());
                    let what = format!(
                        "{op} {} {shape:?} axis {axis} excl {exclusive} rev {reverse}",
                        dtype::name(dt)
                    );
                    let (plan, outs) = run(&req, &x).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                    let a = if axis < 0 {
                        axis + shape.len() as i64
                    } else {
                        axis
                    } as usize;
                    assert_eq!(plan.outputs[0].shape, shape.to_vec());
                    let want = quantize(dt, &cumsum_ref(shape, a, (exclusive, reverse, prod), &x));
                    assert_close(&outs[0], &want, tol(dt), &what);
                }
            }
        }
    }
}

#[test]
fn cumsum_node_test_values() {
    // test_cumsum_1d_reverse_exclusive
    let req = with_ints(builder("CumSum", &[5], Dtype::F64), &[0], true)
        .attr("reverse", int(1))
        .attr("exclusive", int(1))
        .build(target());
    assert_eq!(
        run(&req, &[1., 2., 3., 4., 5.]).unwrap().1[0],
        vec![14., 12., 9., 5., 0.]
    );
}

#[test]
fn cumprod_node_test_values() {
    // test_cumprod_1d_reverse_exclusive and test_cumprod_2d_int32 (axis 0)
    let req = with_ints(builder("CumProd", &[5], Dtype::F64), &[0], true)
        .attr("reverse", int(1))
        .attr("exclusive", int(1))
        .build(target());
    assert_eq!(
        run(&req, &[1., 2., 3., 4., 5.]).unwrap().1[0],
        vec![120., 60., 20., 5., 1.]
    );
    let req = with_ints(builder("CumProd", &[2, 3], Dtype::I32), &[0], false).build(target());
    let out = run(&req, &[1., 2., 3., 4., 5., 6.]).unwrap().1[0].clone();
    assert_eq!(out, vec![1., 2., 3., 4., 10., 18.]);
}

/// Reference TopK: a stable sort of each line by (NaN largest, value), ties by lower index.
fn topk_ref(
    shape: &[u64],
    axis: usize,
    k: usize,
    largest: bool,
    x: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let mut oshape = shape.to_vec();
    oshape[axis] = k as u64;
    let n: u64 = oshape.iter().product();
    let (mut vals, mut idx) = (vec![0.0; n as usize], vec![0.0; n as usize]);
    let mut lshape = shape.to_vec();
    lshape[axis] = 1;
    for l in 0..lshape.iter().product::<u64>() as usize {
        let base = unravel(l, &lshape);
        let at = |j: usize| {
            let mut i = base.clone();
            i[axis] = j;
            i
        };
        let mut order: Vec<usize> = (0..shape[axis] as usize).collect();
        let key = |j: &usize| x[ravel(&at(*j), shape)];
        order.sort_by(|a, b| {
            let (va, vb) = (key(a), key(b));
            let o = match (va.is_nan(), vb.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                _ => va.partial_cmp(&vb).unwrap(),
            };
            if largest { o.reverse() } else { o }
        });
        for (j, src) in order.into_iter().take(k).enumerate() {
            let o = ravel(&at(j), &oshape);
            vals[o] = x[ravel(&at(src), shape)];
            idx[o] = src as f64;
        }
    }
    (vals, idx)
}

#[test]
fn topk_every_dtype_axis_and_k() {
    let shapes: &[&[u64]] = &[&[4], &[3, 4], &[2, 5, 3], &[3, 300], &[2, 0, 3]];
    for dt in ORDERED {
        for (si, shape) in shapes.iter().enumerate() {
            for axis in -(shape.len() as i64)..shape.len() as i64 {
                let a = if axis < 0 {
                    axis + shape.len() as i64
                } else {
                    axis
                } as usize;
                let r = shape[a] as usize;
                for k in [0, 1, r / 2, r].into_iter().filter(|k| *k <= r) {
                    for largest in [true, false] {
                        let n = shape.iter().product::<u64>() as usize;
                        let x = sample(dt, n, si as u64, 4.0, 1.0);
                        let req = with_ints(builder("TopK", shape, dt), &[k as i64], false)
                            .attr("axis", int(axis))
                            .attr("largest", int(largest as i64))
                            .build(target());
                        let what = format!(
                            "TopK {} {shape:?} axis {axis} k {k} largest {largest}",
                            dtype::name(dt)
                        );
                        let (plan, outs) =
                            run(&req, &x).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                        let mut oshape = shape.to_vec();
                        oshape[a] = k as u64;
                        assert_eq!(plan.outputs[0].shape, oshape, "{what}");
                        assert_eq!(plan.outputs[1].dtype, Dtype::I64, "{what}");
                        let (v, i) = topk_ref(shape, a, k, largest, &x);
                        assert_eq!(outs[0], v, "{what}: values");
                        assert_eq!(outs[1], i, "{what}: indices");
                    }
                }
            }
        }
    }
}

#[test]
fn topk_node_tests_ties_and_nan() {
    // test_top_k_same_values_2d
    let req = with_ints(builder("TopK", &[3, 4], Dtype::I64), &[3], false)
        .attr("axis", int(1))
        .build(target());
    let (_, o) = run(&req, &[0., 0., 0., 0., 1., 1., 1., 1., 2., 2., 1., 1.]).unwrap();
    assert_eq!(o[0], vec![0., 0., 0., 1., 1., 1., 2., 2., 1.]);
    assert_eq!(o[1], vec![0., 1., 2., 0., 1., 2., 0., 1., 2.]);
    // NaN is the largest value
    let x = [1.0, f64::NAN, 3.0, f64::NAN];
    let req = with_ints(builder("TopK", &[4], Dtype::F32), &[3], false).build(target());
    let (_, o) = run(&req, &x).unwrap();
    assert_close(&o[0], &[f64::NAN, f64::NAN, 3.0], 0.0, "largest");
    assert_eq!(o[1], vec![1., 3., 2.]);
    let req = with_ints(builder("TopK", &[4], Dtype::F32), &[3], false)
        .attr("largest", int(0))
        .build(target());
    let (_, o) = run(&req, &x).unwrap();
    assert_close(&o[0], &[1.0, 3.0, f64::NAN], 0.0, "smallest");
    assert_eq!(o[1], vec![0., 2., 1.]);
    // TopK-1: k as an attribute
    let req = builder("TopK", &[4], Dtype::F32)
        .opset(1)
        .attr("k", int(2))
        .build(target());
    assert_eq!(run(&req, &[1., 4., 2., 3.]).unwrap().1[1], vec![1., 3.]);
}
