//! Softmax, LogSoftmax and Hardmax.

use super::reference::*;
use super::*;

/// The (outer, len, inner) view the test expects, from the ONNX definitions.
fn softmax_view(shape: &[u64], axis: i64, opset: u32) -> (usize, usize, usize) {
    let r = shape.len() as i64;
    let a = (if axis < 0 { axis + r } else { axis }) as usize;
    if opset < 13 {
        (numel(&shape[..a]), numel(&shape[a..]), 1)
    } else {
        (
            numel(&shape[..a]),
            shape[a] as usize,
            numel(&shape[a + 1..]),
        )
    }
}

#[test]
fn softmax_family_matches_the_reference_on_every_axis_opset_and_dtype() {
    let shape = [3u64, 4, 5];
    for (op, mode) in [("Softmax", 0), ("LogSoftmax", 1), ("Hardmax", 2)] {
        for dt in ALL {
            let x = round(dt, &data(60, 7));
            for opset in [11, 13] {
                for axis in [None, Some(0), Some(1), Some(2), Some(-1), Some(-2)] {
                    let mut r = Req::new(op, &shape, dt).opset(opset);
                    if let Some(a) = axis {
                        r = r.attr("axis", A::Int(a));
                    }
                    let default = if opset < 13 { 1 } else { -1 };
                    let view = softmax_view(&shape, axis.unwrap_or(default), opset);
                    let got = r.run(std::slice::from_ref(&x)).unwrap();
                    assert_eq!(got[0].0.shape, shape.to_vec());
                    let want = softmax_ref(&x, view, mode);
                    let what = format!("{op} {dt:?} opset {opset} axis {axis:?}");
                    assert_close(&got[0].1, &want, dt, &what);
                }
            }
        }
    }
}

#[test]
fn softmax_matches_onnx_published_values() {
    let r = Req::new("Softmax", &[1, 3], Dtype::F32);
    let got = r.run(&[vec![-1., 0., 1.]]).unwrap();
    assert_close(
        &got[0].1,
        &[0.09003057, 0.24472847, 0.66524096],
        Dtype::F32,
        "example",
    );
    let r = Req::new("LogSoftmax", &[1, 3], Dtype::F32);
    let got = r.run(&[vec![-1., 0., 1.]]).unwrap();
    assert_close(
        &got[0].1,
        &[-2.4076061, -1.4076061, -0.40760612],
        Dtype::F32,
        "log",
    );
    // large numbers: the max subtraction keeps them finite
    let x = vec![0., 1., 2., 3., 10000., 10001., 10002., 10003.];
    let want = [0.032058604, 0.08714432, 0.23688284, 0.6439143];
    let got = Req::new("Softmax", &[2, 4], Dtype::F32).run(&[x]).unwrap();
    assert_close(&got[0].1[..4], &want, Dtype::F32, "large 0");
    assert_close(&got[0].1[4..], &want, Dtype::F32, "large 1");
}

#[test]
fn softmax_opsets_differ_in_what_a_row_is() {
    let x = data(60, 3);
    let r = |opset| {
        Req::new("Softmax", &[3, 4, 5], Dtype::F32)
            .opset(opset)
            .attr("axis", A::Int(1))
            .run(std::slice::from_ref(&x))
            .unwrap()
            .remove(0)
            .1
    };
    let (old, new) = (r(11), r(13));
    for b in 0..3 {
        let s: f64 = old[b * 20..(b + 1) * 20].iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "opset 11: one row of 20 per batch");
        for k in 0..5 {
            let s: f64 = (0..4).map(|j| new[b * 20 + j * 5 + k]).sum();
            assert!((s - 1.0).abs() < 1e-5, "opset 13: rows along axis 1");
        }
    }
    // opset 1 (unsaid axis means 1) and an axis equal to the rank (one-element rows)
    let got = Req::new("Softmax", &[2, 3], Dtype::F32)
        .opset(1)
        .attr("axis", A::Int(2))
        .run(&[data(6, 1)])
        .unwrap();
    assert_eq!(got[0].1, vec![1.0; 6]);
}

#[test]
fn softmax_propagates_nan_and_hardmax_picks_the_first_nan_or_maximum() {
    let nan = f64::NAN;
    for dt in ALL {
        let x = vec![1., nan, 2., 3., 3., 1.];
        let got = Req::new("Softmax", &[2, 3], dt)
            .run(std::slice::from_ref(&x))
            .unwrap();
        assert!(got[0].1[..3].iter().all(|v| v.is_nan()), "{dt:?}");
        assert!(got[0].1[3..].iter().all(|v| !v.is_nan()), "{dt:?}");
        let got = Req::new("Hardmax", &[2, 3], dt).run(&[x]).unwrap();
        assert_eq!(got[0].1, vec![0., 1., 0., 1., 0., 0.], "{dt:?}");
        // strided columns: ties and NaN along axis 0
        let x = vec![1., 5., nan, 1., 5., 2.];
        let got = Req::new("Hardmax", &[2, 3], dt)
            .attr("axis", A::Int(0))
            .run(&[x])
            .unwrap();
        assert_eq!(got[0].1, vec![1., 1., 1., 0., 0., 0.], "{dt:?}");
    }
}

#[test]
fn softmax_strided_and_row_kernels_are_chosen_by_layout() {
    let plan = |axis| {
        Req::new("Softmax", &[4, 8], Dtype::F32)
            .attr("axis", A::Int(axis))
            .plan()
            .unwrap()
    };
    assert_eq!(plan(1).launches[0].entry_point, "softmax_f32_rows");
    assert_eq!(plan(0).launches[0].entry_point, "softmax_f32_cols");
    let rows = plan(1);
    assert_eq!((rows.launches[0].grid.x, rows.launches[0].block.x), (4, 32));
}

/// numpy's `pairwise_sum` in f32, written from its C source (`loops_utils.h.src`): recursive
/// halves down to blocks of 128, 8 accumulators within a block.
fn numpy_pairwise(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        let mut res = 0f32;
        for &x in a {
            res += x;
        }
        res
    } else if n <= 128 {
        let mut r = [0f32; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let n2 = n / 2 - (n / 2) % 8;
        numpy_pairwise(&a[..n2]) + numpy_pairwise(&a[n2..])
    }
}

/// numpy's Softmax in a half type, step by step with the `half` crate: `x - max`, `exp` and the
/// quotient rounded to the type, the sum rounded once (`per_add` false) or after every addition.
fn numpy_half_softmax(row: &[f64], dt: Dtype, per_add: bool) -> Vec<f64> {
    let r = |v: f32| match dt {
        Dtype::F16 => half::f16::from_f32(v).to_f32(),
        _ => half::bf16::from_f32(v).to_f32(),
    };
    let m = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x as f32));
    let e: Vec<f32> = row.iter().map(|&x| r(r(x as f32 - m).exp())).collect();
    let s = if per_add {
        e.iter().fold(0f32, |s, &t| r(s + t))
    } else {
        numpy_pairwise(&e)
    };
    let s = r(s);
    e.iter().map(|&t| r(t / s) as f64).collect()
}

#[test]
fn half_softmax_rounds_where_the_onnx_reference_rounds() {
    // rows of 24 (contiguous: f16 sums in f32, bf16 per addition) and columns (axis 0: both
    // per addition), against the step-by-step reference, bit for bit
    let (rows, len) = (8usize, 300usize);
    for dt in [Dtype::F16, Dtype::Bf16] {
        let x = round(
            dt,
            &data(rows * len, 11)
                .iter()
                .map(|v| v * 4.0)
                .collect::<Vec<_>>(),
        );
        let got = Req::new("Softmax", &[rows as u64, len as u64], dt)
            .run(std::slice::from_ref(&x))
            .unwrap();
        let mut differs = 0;
        for i in 0..rows {
            let row = &x[i * len..(i + 1) * len];
            let want = numpy_half_softmax(row, dt, dt == Dtype::Bf16);
            assert_eq!(got[0].1[i * len..(i + 1) * len], want[..], "{dt:?} row {i}");
            // rounding once (the f32 softmax stored) differs somewhere: the points matter
            let once = softmax_ref(row, (1, len, 1), 0);
            differs += want
                .iter()
                .zip(round(dt, &once))
                .filter(|(a, b)| **a != *b)
                .count();
        }
        assert!(
            differs > 0,
            "{dt:?}: the test data cannot tell the rounding points apart"
        );
        let got = Req::new("Softmax", &[len as u64, rows as u64], dt)
            .attr("axis", A::Int(0))
            .run(std::slice::from_ref(&x))
            .unwrap();
        for c in 0..rows {
            let col: Vec<f64> = (0..len).map(|e| x[e * rows + c]).collect();
            let want = numpy_half_softmax(&col, dt, true);
            let have: Vec<f64> = (0..len).map(|e| got[0].1[e * rows + c]).collect();
            assert_eq!(have, want, "{dt:?} column {c}");
        }
    }
    // f32 keeps one rounding: no change there
    let x = data(24, 3);
    let got = Req::new("Softmax", &[1, 24], Dtype::F32)
        .run(std::slice::from_ref(&x))
        .unwrap();
    assert_close(
        &got[0].1,
        &softmax_ref(&x, (1, 24, 1), 0),
        Dtype::F32,
        "f32",
    );
}
