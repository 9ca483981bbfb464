//! LayerNormalization, BatchNormalization, Instance/GroupNormalization, LRN and MVN.

use super::reference::*;
use super::*;

#[test]
fn layer_norm_matches_the_reference_on_every_axis_with_statistics() {
    let shape = [2u64, 3, 4, 5];
    for dt in ALL {
        let x = round(dt, &data(120, 11));
        for axis in -4i64..4 {
            let a = if axis < 0 { axis + 4 } else { axis } as usize;
            let norm = &shape[a..];
            let d = numel(norm);
            let (w, b) = (round(dt, &data(d, 5)), round(dt, &data(d, 6)));
            let r = Req::new("LayerNormalization", &shape, dt)
                .input(norm, dt)
                .input(norm, dt)
                .attr("axis", A::Int(axis))
                .outputs(3);
            let got = r.run(&[x.clone(), w.clone(), b.clone()]).unwrap();
            let want = layer_norm_ref(&x, d, &w, Some(&b), 1e-5);
            let what = format!("LayerNorm {dt:?} axis {axis}");
            assert_close(&got[0].1, &want[0], dt, &what);
            let mut stat_shape = shape[..a].to_vec();
            stat_shape.resize(4, 1);
            for k in 1..3 {
                assert_eq!(
                    got[k].0.dtype,
                    Dtype::F32,
                    "stash_type 1 statistics are float"
                );
                assert_eq!(got[k].0.shape, stat_shape);
                assert_close(&got[k].1, &want[k], Dtype::F32.max_of(dt), &what);
            }
        }
    }
}

/// The looser of two dtypes' tolerances (statistics are computed in the data's precision).
trait MaxOf {
    fn max_of(self, other: Dtype) -> Dtype;
}
impl MaxOf for Dtype {
    fn max_of(self, other: Dtype) -> Dtype {
        if tol(other).0 > tol(self).0 {
            other
        } else {
            self
        }
    }
}

#[test]
fn layer_norm_without_bias_with_a_scalar_scale_epsilon_and_bf16_statistics() {
    let x = data(30, 2);
    let r = Req::new("LayerNormalization", &[2, 3, 5], Dtype::F32)
        .input(&[1], Dtype::F32)
        .attr("axis", A::Int(1))
        .attr("epsilon", A::Float(0.1))
        .attr("stash_type", A::Int(16))
        .outputs(2);
    let got = r.run(&[x.clone(), vec![2.5]]).unwrap();
    let want = layer_norm_ref(&x, 15, &[2.5], None, 0.1);
    assert_close(&got[0].1, &want[0], Dtype::F32, "y");
    assert_eq!(got.len(), 2, "only the outputs asked for");
    assert_eq!(got[1].0.dtype, Dtype::Bf16);
    assert_close(&got[1].1, &want[1], Dtype::Bf16, "mean");
    // an absent B slot followed by nothing, and a scale with leading 1s
    let r = Req::new("LayerNormalization", &[2, 5], Dtype::F64)
        .input(&[1, 5], Dtype::F64)
        .absent();
    let w = data(5, 9);
    let got = r.run(&[data(10, 8), w.clone()]).unwrap();
    let want = layer_norm_ref(&data(10, 8), 5, &w, None, 1e-5);
    assert_close(&got[0].1, &want[0], Dtype::F64, "f64 no bias");
}

#[test]
fn layer_norm_refuses_bad_requests() {
    let base = || Req::new("LayerNormalization", &[2, 3], Dtype::F32).input(&[3], Dtype::F32);
    let e = base().attr("axis", A::Int(2)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = base().attr("stash_type", A::Int(7)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("stash_type")));
    let e = base().attr("momentum", A::Float(0.5)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("momentum")));
    let e = Req::new("LayerNormalization", &[2, 3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = base().input(&[3], Dtype::F16).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = Req::new("LayerNormalization", &[2, 3], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("required")));
    let e = base().outputs(4).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}

fn bn_params(c: usize, dt: Dtype) -> Vec<Vec<f64>> {
    vec![
        round(dt, &data(c, 21)),
        round(dt, &data(c, 22)),
        round(dt, &data(c, 23)),
        round(dt, &positive(c, 24)),
    ]
}

#[test]
fn batch_norm_inference_matches_the_reference() {
    // the larger shapes run split by planes (the harness runs a splittable launch as three
    // ranges, last first); 70 000 f32 a plane is more than a chunk, 3 x 90 planes of 300 make
    // chunks that span planes
    let shapes: [(&[u64], &[Dtype]); 5] = [
        (&[2, 3, 4, 5], &ALL),
        (&[4, 3], &ALL),
        (&[1, 2, 7], &ALL),
        (&[3, 90, 300], &ALL),
        (&[2, 3, 70_000], &[Dtype::F32]),
    ];
    for (shape, dts) in shapes {
        for &dt in dts {
            let dims = ncs(shape);
            let x = round(dt, &data(numel(shape), 20));
            let p = bn_params(dims.1, dt);
            for eps in [None, Some(1e-2)] {
                let mut r = bn_request(shape, dt);
                if let Some(e) = eps {
                    r = r.attr("epsilon", A::Float(e));
                }
                let mut inputs = vec![x.clone()];
                inputs.extend(p.iter().cloned());
                let got = r.run(&inputs).unwrap();
                let want = batchnorm_ref(&x, dims, &p, eps.unwrap_or(1e-5));
                assert_close(&got[0].1, &want, dt, &format!("BN {shape:?} {dt:?}"));
                assert_eq!(got[0].0.shape, shape.to_vec());
            }
        }
    }
}

#[test]
fn batch_norm_training_mode_produces_running_statistics() {
    let shape = [2u64, 3, 4, 5];
    for dt in ALL {
        let dims = ncs(&shape);
        let x = round(dt, &data(120, 30));
        let p = bn_params(3, dt);
        let mut inputs = vec![x.clone()];
        inputs.extend(p.iter().cloned());
        let r = bn_request(&shape, dt)
            .attr("training_mode", A::Int(1))
            .attr("epsilon", A::Float(1e-2))
            .outputs(3);
        let got = r.run(&inputs).unwrap();
        let want = batchnorm_train_ref(&x, dims, &p, 1e-2, 0.9);
        assert_eq!(got.len(), 3);
        for k in 0..3 {
            assert_close(&got[k].1, &want[k], dt, &format!("BN train {dt:?} out {k}"));
        }
        // opset 9: training is asked for by the extra outputs; saved mean/var too
        let r = bn_request(&shape, dt)
            .opset(9)
            .attr("momentum", A::Float(0.7))
            .outputs(5);
        let got = r.run(&inputs).unwrap();
        let want = batchnorm_train_ref(&x, dims, &p, 1e-5, 0.7);
        for k in 0..5 {
            assert_close(
                &got[k].1,
                &want[k],
                dt,
                &format!("BN opset 9 {dt:?} out {k}"),
            );
        }
    }
    // training mode with only Y wanted
    let x = data(24, 3);
    let p = bn_params(3, Dtype::F32);
    let mut inputs = vec![x.clone()];
    inputs.extend(p.iter().cloned());
    let got = bn_request(&[2, 3, 4], Dtype::F32)
        .attr("training_mode", A::Int(1))
        .run(&inputs)
        .unwrap();
    let want = batchnorm_train_ref(&x, (2, 3, 4), &p, 1e-5, 0.9);
    assert_close(&got[0].1, &want[0], Dtype::F32, "Y only");
}

#[test]
fn batch_norm_refuses_bad_requests() {
    let e = bn_request(&[2, 3], Dtype::F32)
        .attr("spatial", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("spatial")));
    let e = bn_request(&[2, 3], Dtype::F32)
        .outputs(3)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("training")));
    let e = Req::new("BatchNormalization", &[2, 3], Dtype::F32)
        .input(&[3], Dtype::F32)
        .input(&[3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .input(&[3], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("[3]")));
    let mut rank1 = Req::new("BatchNormalization", &[3], Dtype::F32);
    for _ in 0..4 {
        rank1 = rank1.input(&[3], Dtype::F32);
    }
    let e = rank1.plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}

#[test]
fn instance_norm_matches_the_reference() {
    for shape in [&[2u64, 3, 4, 5][..], &[1, 2, 1, 3], &[2, 3]] {
        for dt in ALL {
            let (n, c, s) = ncs(shape);
            let x = round(dt, &data(numel(shape), 40));
            let (w, b) = (round(dt, &data(c, 41)), round(dt, &data(c, 42)));
            let got = Req::new("InstanceNormalization", shape, dt)
                .input(&[c as u64], dt)
                .input(&[c as u64], dt)
                .attr("epsilon", A::Float(1e-2))
                .run(&[x.clone(), w.clone(), b.clone()])
                .unwrap();
            let want = group_norm_ref(&x, (n, c, s), c, &w, &b, 1e-2);
            assert_close(&got[0].1, &want, dt, &format!("Instance {shape:?} {dt:?}"));
        }
    }
    // ONNX's published example
    let got = Req::new("InstanceNormalization", &[1, 2, 1, 3], Dtype::F32)
        .input(&[2], Dtype::F32)
        .input(&[2], Dtype::F32)
        .run(&[vec![-1., 0., 1., 2., 3., 4.], vec![1., 1.5], vec![0., 1.]])
        .unwrap();
    let want = [-1.2247356, 0., 1.2247356, -0.8371035, 1., 2.8371034];
    assert_close(&got[0].1, &want, Dtype::F32, "instancenorm example");
}

#[test]
fn group_norm_serves_per_channel_and_per_group_parameters() {
    let shape = [3u64, 4, 2, 2];
    for dt in ALL {
        let dims = ncs(&shape);
        let x = round(dt, &data(48, 50));
        for (opset, len) in [(21, 4usize), (18, 2), (0, 4), (0, 2)] {
            let (w, b) = (round(dt, &data(len, 51)), round(dt, &data(len, 52)));
            let got = Req::new("GroupNormalization", &shape, dt)
                .input(&[len as u64], dt)
                .input(&[len as u64], dt)
                .attr("num_groups", A::Int(2))
                .attr("epsilon", A::Float(1e-2))
                .opset(opset)
                .run(&[x.clone(), w.clone(), b.clone()])
                .unwrap();
            let want = group_norm_ref(&x, dims, 2, &w, &b, 1e-2);
            assert_close(&got[0].1, &want, dt, &format!("Group {dt:?} opset {opset}"));
        }
    }
    let r = |groups, len, opset| {
        Req::new("GroupNormalization", &shape, Dtype::F32)
            .input(&[len], Dtype::F32)
            .input(&[len], Dtype::F32)
            .attr("num_groups", A::Int(groups))
            .opset(opset)
            .plan()
    };
    assert!(
        matches!(r(3, 4, 21).unwrap_err(), OpError::InvalidAttribute(m) if m.contains("num_groups"))
    );
    assert!(matches!(
        r(0, 4, 21).unwrap_err(),
        OpError::InvalidAttribute(_)
    ));
    assert!(
        matches!(r(2, 2, 21).unwrap_err(), OpError::InvalidShape(_)),
        "opset 21 is per channel"
    );
    assert!(
        matches!(r(2, 4, 18).unwrap_err(), OpError::InvalidShape(_)),
        "opset 18 is per group"
    );
    let e = Req::new("GroupNormalization", &shape, Dtype::F32)
        .input(&[4], Dtype::F32)
        .input(&[4], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("num_groups")));
}

#[test]
fn lrn_matches_the_reference() {
    let shape = [5u64, 5, 5, 5];
    for dt in ALL {
        let x = round(dt, &data(625, 60));
        for (size, alpha, beta, bias) in [
            (3i64, Some(0.0002), Some(0.5), Some(2.0)),
            (3, None, None, None),
            (4, Some(0.1), Some(0.75), None),
            (1, Some(1.0), Some(1.0), Some(1.0)),
            // an exponent with no square-root form (powf)
            (5, Some(0.01), Some(0.6), Some(1.5)),
        ] {
            let mut r = Req::new("LRN", &shape, dt).attr("size", A::Int(size));
            for (name, v) in [("alpha", alpha), ("beta", beta), ("bias", bias)] {
                if let Some(v) = v {
                    r = r.attr(name, A::Float(v));
                }
            }
            let got = r.run(std::slice::from_ref(&x)).unwrap();
            let want = lrn_ref(
                &x,
                ncs(&shape),
                size as usize,
                alpha.unwrap_or(1e-4),
                beta.unwrap_or(0.75),
                bias.unwrap_or(1.0),
            );
            assert_close(&got[0].1, &want, dt, &format!("LRN {dt:?} size {size}"));
        }
    }
    let e = Req::new("LRN", &[1, 2], Dtype::F32)
        .attr("size", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("size")));
    let e = Req::new("LRN", &[1, 2], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("size")));
}

#[test]
fn mvn_matches_the_reference_for_served_axes() {
    for dt in ALL {
        for (shape, axes) in [
            (&[3u64, 3, 3, 1][..], None),
            (&[2, 3, 4, 5], Some(vec![2i64, 3])),
            (&[2, 3, 4], Some(vec![1])),
            (&[2, 3, 4], Some(vec![0, 1, 2])),
            (&[2, 3, 4, 5], Some(vec![0, 1])),
            (&[2, 3, 4, 5], Some(vec![-1, 0])),
        ] {
            let x = round(dt, &data(numel(shape), 70));
            let mut r = Req::new("MeanVarianceNormalization", shape, dt);
            if let Some(a) = &axes {
                r = r.attr("axes", A::Ints(a.clone()));
            }
            let got = r.run(std::slice::from_ref(&x)).unwrap();
            let axes: Vec<usize> = axes
                .unwrap_or(vec![0, 2, 3])
                .iter()
                .map(|&a| if a < 0 { a + shape.len() as i64 } else { a } as usize)
                .collect();
            let want = mvn_ref(&x, shape, &axes);
            let (a, r) = tol(dt);
            for (i, (g, w)) in got[0].1.iter().zip(&want).enumerate() {
                // MVN divides by a standard deviation: allow for its rounding
                assert!(
                    (g - w).abs() <= 4.0 * (a + r * w.abs()),
                    "MVN {shape:?} {dt:?} [{i}]: {g} vs {w}"
                );
            }
        }
    }
    let e = Req::new("MeanVarianceNormalization", &[2, 3, 4, 5], Dtype::F32)
        .attr("axes", A::Ints(vec![1, 3]))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axes")));
    let e = Req::new("MeanVarianceNormalization", &[2, 3, 4], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(
        matches!(e, OpError::InvalidAttribute(m) if m.contains("axes")),
        "default axis 3 on rank 3"
    );
}
