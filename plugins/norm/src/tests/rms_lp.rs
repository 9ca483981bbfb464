//! RMSNormalization and LpNormalization against naive f64 references.

use super::*;

/// RMSNorm over rows of `d` elements with a scale of `d` elements (or one).
fn rms_ref(x: &[f64], d: usize, w: &[f64], eps: f64) -> Vec<f64> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
        let inv = 1.0 / (ms + eps).sqrt();
        for (j, v) in row.iter().enumerate() {
            y.push(v * inv * w[j % w.len()]);
        }
    }
    y
}

/// Lp norm along the middle dim of `(outer, len, inner)`; 0 where the norm is 0.
fn lp_ref(x: &[f64], (o, l, n): (usize, usize, usize), p: u32) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for a in 0..o {
        for c in 0..n {
            let idx = |e: usize| a * l * n + e * n + c;
            let norm = if p == 1 {
                (0..l).map(|e| x[idx(e)].abs()).sum::<f64>()
            } else {
                (0..l).map(|e| x[idx(e)] * x[idx(e)]).sum::<f64>().sqrt()
            };
            for e in 0..l {
                y[idx(e)] = if norm == 0.0 { 0.0 } else { x[idx(e)] / norm };
            }
        }
    }
    y
}

#[test]
fn rms_norm_matches_the_reference_on_every_axis() {
    let shape = [2u64, 3, 4, 5];
    for dt in ALL {
        let x = round(dt, &data(120, 21));
        for axis in -4i64..4 {
            let a = if axis < 0 { axis + 4 } else { axis } as usize;
            let norm = &shape[a..];
            let d = numel(norm);
            let w = round(dt, &data(d, 7));
            for eps in [None, Some(0.1)] {
                let mut r = Req::new("RMSNormalization", &shape, dt)
                    .input(norm, dt)
                    .attr("axis", A::Int(axis))
                    .opset(23);
                if let Some(e) = eps {
                    r = r.attr("epsilon", A::Float(e));
                }
                let got = r.run(&[x.clone(), w.clone()]).unwrap();
                assert_eq!(got.len(), 1);
                let want = rms_ref(&x, d, &w, eps.unwrap_or(1e-5));
                assert_close(&got[0].1, &want, dt, &format!("RMSNorm {dt:?} axis {axis}"));
            }
        }
    }
}

#[test]
fn rms_norm_default_axis_scalar_and_leading_one_scales() {
    let x = data(24, 3);
    for w_shape in [&[1u64][..], &[1, 4], &[4]] {
        let w = data(numel(w_shape), 4);
        let got = Req::new("RMSNormalization", &[2, 3, 4], Dtype::F32)
            .input(w_shape, Dtype::F32)
            .run(&[x.clone(), w.clone()])
            .unwrap();
        assert_close(&got[0].1, &rms_ref(&x, 4, &w, 1e-5), Dtype::F32, "rms");
    }
    // empty rows and an empty batch
    for shape in [&[0u64, 4][..], &[3, 0]] {
        let got = Req::new("RMSNormalization", shape, Dtype::F32)
            .input(&shape[1..], Dtype::F32)
            .run(&[vec![], vec![0.0; numel(&shape[1..])]])
            .unwrap();
        assert!(got[0].1.is_empty());
    }
}

#[test]
fn rms_norm_refuses_bad_scales_and_attributes() {
    let e = Req::new("RMSNormalization", &[2, 3, 4], Dtype::F32)
        .input(&[3], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("broadcastable")));
    let e = Req::new("RMSNormalization", &[2, 4], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("Scale")));
    let e = Req::new("RMSNormalization", &[2, 4], Dtype::F32)
        .input(&[4], Dtype::F32)
        .attr("axis", A::Int(2))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = Req::new("RMSNormalization", &[2, 4], Dtype::F32)
        .input(&[4], Dtype::F32)
        .attr("stash_type", A::Int(7))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("stash_type")));
    let e = Req::new("RMSNormalization", &[2, 4], Dtype::F32)
        .input(&[4], Dtype::F16)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
}

#[test]
fn lp_norm_matches_the_reference_for_p1_p2_and_every_axis() {
    let shape = [2u64, 3, 4];
    for dt in ALL {
        let mut x = round(dt, &data(24, 9));
        // a zero line along axis 0 (elements 0 and 12): its norm is 0, the output 0
        x[0] = 0.0;
        x[12] = 0.0;
        for p in [1u32, 2] {
            for axis in -3i64..3 {
                let a = if axis < 0 { axis + 3 } else { axis } as usize;
                let dims = (
                    numel(&shape[..a]),
                    shape[a] as usize,
                    numel(&shape[a + 1..]),
                );
                let got = Req::new("LpNormalization", &shape, dt)
                    .attr("axis", A::Int(axis))
                    .attr("p", A::Int(p as i64))
                    .run(std::slice::from_ref(&x))
                    .unwrap();
                let want = lp_ref(&x, dims, p);
                assert_close(&got[0].1, &want, dt, &format!("Lp{p} {dt:?} axis {axis}"));
            }
        }
    }
    // ONNX's published l2 default case
    let x = vec![1., 2., 2., 3., 4., 0., 0., 5., 5., 6., 8., 0.];
    let got = Req::new("LpNormalization", &[2, 2, 3], Dtype::F32)
        .run(std::slice::from_ref(&x))
        .unwrap();
    let want = [
        1. / 3.,
        2. / 3.,
        2. / 3.,
        0.6,
        0.8,
        0.,
        0.,
        0.70710677,
        0.70710677,
        0.6,
        0.8,
        0.,
    ];
    assert_close(&got[0].1, &want, Dtype::F32, "lp default");
}

#[test]
fn lp_norm_refuses_other_p_and_scalars() {
    let e = Req::new("LpNormalization", &[2, 3], Dtype::F32)
        .attr("p", A::Int(3))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("`p`")));
    let e = Req::new("LpNormalization", &[], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let got = Req::new("LpNormalization", &[0, 3], Dtype::F32)
        .run(&[vec![]])
        .unwrap();
    assert!(got[0].1.is_empty());
}
