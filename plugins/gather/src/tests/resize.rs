//! Resize and Upsample: the legacy forms, element-exact nearest on every dtype, the f64 → dtype
//! store (numpy's saturate_cast) checked against an f64 run, empty tensors and errors. The
//! coordinate math itself is checked against ONNX's reference by the replayed fixture.

use super::util::*;
use umd_sdk::{AttrValueExt, Dtype, PlanRequestExt, dtype};

use crate::common::NUMERIC_DTYPES;

fn f32s(v: &[f64]) -> Vec<u8> {
    enc(Dtype::F32, v)
}

fn resize(
    x: (&[u64], Dtype),
    scales: Option<&[f64]>,
    sizes: Option<&[i64]>,
    attrs: &[(&str, AttrValueExt)],
) -> PlanRequestExt {
    let mut b = builder("Resize")
        .opset(19)
        .input(desc("x", x.0, x.1))
        .absent();
    b = match scales {
        Some(s) => b.constant(desc("scales", &[s.len() as u64], Dtype::F32), &f32s(s)),
        None => b.absent(),
    };
    if let Some(s) = sizes {
        b = b.constant(desc("sizes", &[s.len() as u64], Dtype::I64), &ints(s));
    }
    for (k, v) in attrs {
        b = b.attr(k, v.clone());
    }
    build(b)
}

/// The data inputs of a request built by [`resize`] (constants are bound too).
fn inputs(req: &PlanRequestExt, x: Vec<u8>) -> Vec<Vec<u8>> {
    let mut v = vec![x];
    for i in 1..req.slots() {
        if let Some(b) = req.value(i) {
            v.push(b.to_vec());
        }
    }
    v
}

#[test]
fn legacy_forms_are_asymmetric() {
    // Resize-10: X, scales; nearest floors
    let req = build(
        builder("Resize")
            .opset(10)
            .input(desc("x", &[1, 3], Dtype::F32))
            .constant(desc("s", &[2], Dtype::F32), &f32s(&[1., 2.])),
    );
    let (plan, out) = run(&req, &inputs(&req, f32s(&[1., 2., 3.]))).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![1, 6]);
    assert_eq!(dec(Dtype::F32, &out[0]), vec![1., 1., 2., 2., 3., 3.]);
    // Upsample-9 linear: x = y / 2, the last tap clamped
    let req = build(
        builder("Upsample")
            .opset(9)
            .input(desc("x", &[1, 2], Dtype::F32))
            .constant(desc("s", &[2], Dtype::F32), &f32s(&[1., 2.]))
            .attr("mode", text("linear")),
    );
    let (_, out) = run(&req, &inputs(&req, f32s(&[2., 4.]))).unwrap();
    assert_eq!(dec(Dtype::F32, &out[0]), vec![2., 3., 4., 4.]);
    // Upsample-7: scales attribute
    let req = build(
        builder("Upsample")
            .opset(7)
            .input(desc("x", &[2], Dtype::I64))
            .attr("scales", AttrValueExt::Floats(vec![1.5])),
    );
    let (_, out) = run(&req, &[ints(&[5, 6])]).unwrap();
    assert_eq!(dec(Dtype::I64, &out[0]), vec![5., 5., 6.]);
    cuda(&req);
}

#[test]
fn nearest_copies_elements_of_every_dtype() {
    let mut rng = Rng::new(11);
    for dt in all_dtypes() {
        let s = dtype::size(dt);
        let x = data(&mut rng, dt, 6);
        // half_pixel, round_prefer_floor: 2x3 -> 3x2
        let req = resize((&[2, 3], dt), None, Some(&[3, 2]), &[]);
        let (_, out) = run(&req, &inputs(&req, x.clone())).unwrap();
        // rows: x = (y + .5) * 2/3 - .5 -> -1/6, .5, 7/6 -> 0, 0, 1; cols: (y+.5)*1.5-.5 -> .25, 1.75 -> 0, 2
        let want: Vec<u8> = [0, 2, 0, 2, 3, 5]
            .iter()
            .flat_map(|&i| elem(&x, s, i).to_vec())
            .collect();
        assert_eq!(out[0], want, "{dt:?}");
        cuda(&req);
    }
    // NaN and infinities are copied as they are
    let req = resize((&[2], Dtype::F32), Some(&[2.0]), None, &[]);
    let (_, out) = run(&req, &inputs(&req, f32s(&[f64::NAN, f64::INFINITY]))).unwrap();
    let got = dec(Dtype::F32, &out[0]);
    assert!(
        got[0].is_nan() && got[1].is_nan() && got[2] == f64::INFINITY && got[3] == f64::INFINITY
    );
}

#[test]
fn every_dtype_stores_the_f64_result_as_numpy_does() {
    let mut rng = Rng::new(12);
    let modes: [(&str, &str); 4] = [
        ("linear", "half_pixel"),
        ("cubic", "align_corners"),
        ("cubic", "half_pixel"),
        ("linear", "pytorch_half_pixel"),
    ];
    for (mode, cmode) in modes {
        let shape = [1, 2, 3, 4];
        // integers in [0, 127] are exact in every dtype; cubic overshoots clip i8 at 127
        let vals: Vec<f64> = (0..numel(&shape))
            .map(|_| rng.range(0, 128) as f64)
            .collect();
        let attrs = [
            ("mode", text(mode)),
            ("coordinate_transformation_mode", text(cmode)),
        ];
        let sizes = [1, 2, 7, 9];
        let reference = resize((&shape, Dtype::F64), None, Some(&sizes), &attrs);
        let (_, r) = run(&reference, &inputs(&reference, enc(Dtype::F64, &vals))).unwrap();
        let r = dec(Dtype::F64, &r[0]);
        for dt in NUMERIC_DTYPES {
            let v = vals.clone();
            let req = resize((&shape, dt), None, Some(&sizes), &attrs);
            let (_, out) = run(&req, &inputs(&req, enc(dt, &v))).unwrap();
            let got = dec(dt, &out[0]);
            for (i, (g, w)) in got.iter().zip(&r).enumerate() {
                let w = *w;
                let want = match dt {
                    Dtype::F32 => w as f32 as f64,
                    Dtype::F64 => w,
                    Dtype::F16 => umd_sdk::half::f16::from_f64(w).to_f64(),
                    Dtype::Bf16 => umd_sdk::half::bf16::from_f32(w as f32).to_f64(),
                    Dtype::I8 => w.round_ties_even().clamp(-128.0, 127.0),
                    Dtype::U8 => w.round_ties_even().clamp(0.0, 255.0),
                    Dtype::I16 => w.round_ties_even().clamp(-32768.0, 32767.0),
                    Dtype::U16 | Dtype::U32 | Dtype::U64 => w.round_ties_even().max(0.0),
                    _ => w.round_ties_even(),
                };
                assert_eq!(*g, want, "{mode} {cmode} {dt:?} element {i}");
            }
            cuda(&req);
        }
    }
}

#[test]
fn identity_and_empty_resizes() {
    let x = f32s(&[1., f64::NAN, 3., 4.]);
    let req = resize(
        (&[2, 2], Dtype::F32),
        Some(&[1., 1.]),
        None,
        &[("mode", text("cubic"))],
    );
    let (_, out) = run(&req, &inputs(&req, x.clone())).unwrap();
    assert_eq!(
        out[0], x,
        "identity axes are skipped, as the reference skips them"
    );
    let req = resize(
        (&[2, 2], Dtype::F32),
        None,
        Some(&[0, 2]),
        &[("mode", text("linear"))],
    );
    let (plan, out) = run(&req, &inputs(&req, x.clone())).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0, 2]);
    assert_eq!(plan.launches.len(), 1);
    assert!(out[0].is_empty());
    let req = resize(
        (&[0, 2], Dtype::F32),
        Some(&[2., 2.]),
        None,
        &[("mode", text("linear"))],
    );
    let (plan, _) = run(&req, &inputs(&req, vec![])).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0, 4]);
}

#[test]
fn resize_errors() {
    let x = (&[1u64, 4][..], Dtype::F32);
    let e = |req: PlanRequestExt| plan(&req).map(|p| (p, vec![]));
    assert_attr_err(
        e(resize(x, Some(&[1., 0.5]), None, &[("antialias", int(1))])),
        "antialias",
    );
    assert_attr_err(
        e(resize(x, Some(&[1., 0.5]), None, &[("mode", text("area"))])),
        "mode",
    );
    assert_attr_err(
        e(resize(
            x,
            Some(&[1., 0.5]),
            None,
            &[("coordinate_transformation_mode", text("xy"))],
        )),
        "coordinate",
    );
    assert_attr_err(
        e(resize(
            x,
            Some(&[1., 0.5]),
            None,
            &[("nearest_mode", text("up"))],
        )),
        "nearest_mode",
    );
    assert_attr_err(
        e(resize(
            x,
            Some(&[1., 0.5]),
            None,
            &[("keep_aspect_ratio_policy", text("fit"))],
        )),
        "keep_aspect",
    );
    assert_attr_err(
        e(resize(
            x,
            Some(&[0.5]),
            None,
            &[("axes", AttrValueExt::Ints(vec![1, -1]))],
        )),
        "axes",
    );
    assert_attr_err(
        e(resize(x, Some(&[0.5]), None, &[("axis", int(1))])),
        "axis",
    );
    assert_shape_err(e(resize(x, Some(&[1., 0.5]), Some(&[1, 2]), &[])));
    assert_shape_err(e(resize(x, None, None, &[])));
    assert_shape_err(e(resize(x, Some(&[0.5]), None, &[])));
    assert_shape_err(e(resize(x, Some(&[1., 0.]), None, &[])));
    assert_shape_err(e(resize(x, None, Some(&[1, -2]), &[])));
    assert_shape_err(e(resize(
        x,
        Some(&[1., 2.]),
        None,
        &[("coordinate_transformation_mode", text("tf_crop_and_resize"))],
    )));
    assert_shape_err(e(resize((&[0, 4], Dtype::F32), None, Some(&[2, 4]), &[])));
    assert_dtype_err(e(resize(
        (&[1, 4], Dtype::Boolean),
        Some(&[1., 2.]),
        None,
        &[("mode", text("linear"))],
    )));
    // the 8-bit floats: nearest only (data movement); interpolation names the served dtypes
    for (dt, mode) in [(Dtype::F8e4m3fn, "linear"), (Dtype::F8e5m2, "cubic")] {
        match e(resize(
            (&[1, 4], dt),
            Some(&[1., 2.]),
            None,
            &[("mode", text(mode))],
        )) {
            Err(umd_sdk::OpError::UnsupportedDtype(m)) => {
                assert!(m.contains("u64") && m.contains("bf16"), "{m}")
            }
            r => panic!("{dt:?} {mode}: {:?}", r.map(|_| ())),
        }
    }
    // scales whose value is not known when planning
    let req = build(
        builder("Resize")
            .input(desc("x", &[1, 4], Dtype::F32))
            .absent()
            .input(desc("s", &[2], Dtype::F32)),
    );
    assert_shape_err(e(req));
    // antialiased downscaling too strong for one thread per output element
    assert_shape_err(e(resize(
        (&[1, 1, 1 << 20, 1 << 20], Dtype::F32),
        Some(&[1., 1., 1e-5, 1e-5]),
        None,
        &[("mode", text("linear")), ("antialias", int(1))],
    )));
}

#[test]
fn opset_11_forms() {
    // X, roi (empty), scales (empty), sizes; tf_half_pixel_for_nn: x = (y + .5) / scale
    let req = build(
        builder("Resize")
            .opset(11)
            .input(desc("x", &[1, 2], Dtype::F32))
            .constant(desc("roi", &[0], Dtype::F32), &[])
            .constant(desc("scales", &[0], Dtype::F32), &[])
            .constant(desc("sizes", &[2], Dtype::I64), &ints(&[1, 4]))
            .attr(
                "coordinate_transformation_mode",
                text("tf_half_pixel_for_nn"),
            ),
    );
    let (plan, out) = run(&req, &inputs(&req, f32s(&[7., 9.]))).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![1, 4]);
    // .25 .75 1.25 1.75 round (prefer floor) to 0 1 1 2, the last clamped to 1
    assert_eq!(dec(Dtype::F32, &out[0]), vec![7., 9., 9., 9.]);
    cuda(&req);
    // an unsaid opset with two inputs is Resize-10's (X, scales)
    let req = build(
        builder("Resize")
            .input(desc("x", &[2], Dtype::F32))
            .constant(desc("s", &[1], Dtype::F32), &f32s(&[2.])),
    );
    let (_, out) = run(&req, &inputs(&req, f32s(&[1., 2.]))).unwrap();
    assert_eq!(dec(Dtype::F32, &out[0]), vec![1., 1., 2., 2.]);
}
