//! ArgMax and ArgMin against a numpy-semantics reference (first index of the extreme, NaN as
//! the extreme, `select_last_index` as numpy on the flipped axis).

use super::*;
use crate::ops::ORDERED;

/// Reference: output shape and indices.
fn reference(
    is_max: bool,
    shape: &[u64],
    axis: usize,
    keepdims: bool,
    last: bool,
    x: &[f64],
) -> (Vec<u64>, Vec<f64>) {
    let r = shape[axis] as usize;
    let mut kshape = shape.to_vec();
    kshape[axis] = 1;
    let n_out: u64 = kshape.iter().product();
    let mut out = Vec::new();
    for o in 0..n_out as usize {
        let base = unravel(o, &kshape);
        let vals: Vec<f64> = (0..r)
            .map(|j| {
                let mut idx = base.clone();
                idx[axis] = j;
                x[ravel(&idx, shape)]
            })
            .collect();
        let order: Vec<usize> = if last {
            (0..r).rev().collect()
        } else {
            (0..r).collect()
        };
        let mut best = order[0];
        for &j in &order {
            let (v, b) = (vals[j], vals[best]);
            if b.is_nan() {
                break;
            }
            if v.is_nan() || (is_max && v > b) || (!is_max && v < b) {
                best = j;
            }
        }
        out.push(best as f64);
    }
    let mut oshape = shape.to_vec();
    if keepdims {
        oshape[axis] = 1;
    } else {
        oshape.remove(axis);
    }
    (oshape, out)
}

#[test]
fn every_dtype_axis_and_flag_matches_numpy() {
    let shapes: &[&[u64]] = &[&[2, 2], &[3, 4, 5], &[4, 300], &[300, 3], &[1, 6, 1], &[7]];
    for op in ["ArgMax", "ArgMin"] {
        for dt in ORDERED {
            for (si, shape) in shapes.iter().enumerate() {
                for axis in -(shape.len() as i64)..shape.len() as i64 {
                    for (keepdims, last) in
                        [(true, false), (false, true), (false, false), (true, true)]
                    {
                        let n = shape.iter().product::<u64>() as usize;
                        // few distinct values: many ties
                        let x = sample(dt, n, si as u64 + 5, 3.0, 1.0);
                        let req = builder(op, shape, dt)
                            .attr("axis", int(axis))
                            .attr("keepdims", int(keepdims as i64))
                            .attr("select_last_index", int(last as i64))
                            .build(target());
                        let what = format!(
                            "{op} {} {shape:?} axis {axis} keep {keepdims} last {last}",
                            dtype::name(dt)
                        );
                        let (plan, outs) =
                            run(&req, &x).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                        let a = if axis < 0 {
                            axis + shape.len() as i64
                        } else {
                            axis
                        } as usize;
                        let (oshape, want) =
                            reference(op == "ArgMax", shape, a, keepdims, last, &x);
                        assert_eq!(plan.outputs[0].shape, oshape, "{what}");
                        assert_eq!(plan.outputs[0].dtype, Dtype::I64, "{what}");
                        assert_eq!(outs[0], want, "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn nan_is_the_extreme_for_both() {
    let x = [1.0, f64::NAN, 5.0, f64::NAN, -2.0];
    for (op, last, want) in [
        ("ArgMax", false, 1.0),
        ("ArgMin", false, 1.0),
        ("ArgMax", true, 3.0),
        ("ArgMin", true, 3.0),
    ] {
        for dt in [Dtype::F32, Dtype::F16, Dtype::F64] {
            let req = builder(op, &[5], dt)
                .attr("select_last_index", int(last as i64))
                .build(target());
            assert_eq!(run(&req, &x).unwrap().1[0], vec![want], "{op} last {last}");
        }
    }
}

#[test]
fn default_axis_is_zero_and_empty_outputs_work() {
    let req = builder("ArgMax", &[2, 2], Dtype::F32).build(target());
    let (p, o) = run(&req, &[2., 2., 3., 10.]).unwrap();
    assert_eq!(
        (p.outputs[0].shape.clone(), o[0].clone()),
        (vec![1, 2], vec![1., 1.])
    );
    // no outputs at all: still one launch
    let req = builder("ArgMin", &[0, 3], Dtype::F32)
        .attr("axis", int(1))
        .build(target());
    let (p, o) = run(&req, &[]).unwrap();
    assert_eq!(
        (p.outputs[0].shape.clone(), o[0].len(), p.launches.len()),
        (vec![0, 1], 0, 1)
    );
}
