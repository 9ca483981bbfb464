//! Values: every float op against its reference, special values, integers, predicates.

use super::*;
use umd_sdk::{AttrValueExt, testing};

#[test]
fn every_float_op_matches_its_reference_in_every_float_dtype() {
    for def in ops::all().filter(|d| d.class == ops::Class::Float) {
        let (lo, hi) = domain(def.kernel);
        let xs: Vec<f64> = (0..30).map(|i| lo + (hi - lo) * i as f64 / 29.0).collect();
        let gelu = match def.kernel {
            "gelu" => vec![("approximate", AttrValueExt::Text("none".into()))],
            "gelu_tanh" => vec![("approximate", AttrValueExt::Text("tanh".into()))],
            _ => vec![],
        };
        let defaults: Vec<(&str, f64)> = def.attrs.to_vec();
        for attrs in [defaults, custom_attrs(def)] {
            let mut given = gelu.clone();
            given.extend(attrs.iter().map(|(n, v)| (*n, AttrValueExt::Float(*v))));
            let (a, b) = (
                attrs.first().map_or(0.0, |p| p.1),
                attrs.get(1).map_or(0.0, |p| p.1),
            );
            for dt in FLOATS {
                let x = held(dt, &xs);
                let req = request(def.onnx, &[2, 3, 5], dt, &given);
                let got = run1(&req, &x).unwrap();
                let t = tol(def.onnx, dt);
                for (i, (&g, &xv)) in got.iter().zip(&x).enumerate() {
                    // attributes reach the kernel as the compute type holds them
                    let (a, b) = if dt == Dtype::F64 {
                        (a, b)
                    } else {
                        (a as f32 as f64, b as f32 as f64)
                    };
                    let want = reference(def.kernel, xv, a, b);
                    let ok = if t == 0.0 {
                        same(g, held(dt, &[want])[0])
                    } else {
                        (g - want).abs() <= t * (1.0 + want.abs())
                    };
                    assert!(
                        ok,
                        "{} {:?} x[{i}]={xv} attrs {attrs:?}: got {g}, want {want}",
                        def.kernel, dt
                    );
                }
            }
        }
    }
}

#[test]
fn special_values() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    for dt in FLOATS {
        let r = |op: &str, x: &[f64]| run_op(op, dt, x, &[]);
        let check = |op: &str, got: Vec<f64>, want: &[f64]| {
            for (g, w) in got.iter().zip(want) {
                assert!(same(*g, *w), "{op} {dt:?}: got {got:?}, want {want:?}");
            }
        };
        check(
            "Relu",
            r("Relu", &[nan, -1.0, 0.0, 2.0]),
            &[nan, 0.0, 0.0, 2.0],
        );
        check(
            "Sign",
            r("Sign", &[nan, -0.0, 0.0, -3.5, 2.0, -inf]),
            &[nan, 0.0, 0.0, -1.0, 1.0, -1.0],
        );
        check(
            "Abs",
            r("Abs", &[nan, -0.0, -inf, -2.5]),
            &[nan, 0.0, inf, 2.5],
        );
        check(
            "Neg",
            r("Neg", &[nan, 0.0, inf, -2.5]),
            &[nan, -0.0, -inf, 2.5],
        );
        check(
            "Round",
            r(
                "Round",
                &[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.4, 2.6, nan, inf],
            ),
            &[0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 3.0, nan, inf],
        );
        check("Floor", r("Floor", &[-1.5, 1.5, nan]), &[-2.0, 1.0, nan]);
        check("Ceil", r("Ceil", &[-1.5, 1.5, -inf]), &[-1.0, 2.0, -inf]);
        check(
            "Sigmoid",
            r("Sigmoid", &[-1000.0, 1000.0, nan]),
            &[0.0, 1.0, nan],
        );
        check(
            "Softplus",
            r("Softplus", &[1000.0, -1000.0, nan]),
            &[1000.0, 0.0, nan],
        );
        check(
            "Mish",
            r("Mish", &[1000.0, -1000.0, 0.0]),
            &[1000.0, -0.0, 0.0],
        );
        check("Exp", r("Exp", &[-inf, nan]), &[0.0, nan]);
        check("Log", r("Log", &[0.0, -1.0]), &[-inf, nan]);
        check("Sqrt", r("Sqrt", &[-1.0, inf]), &[nan, inf]);
        check("Reciprocal", r("Reciprocal", &[0.0, -0.0]), &[inf, -inf]);
        check(
            "ThresholdedRelu",
            r("ThresholdedRelu", &[nan, 1.0, 1.5]),
            &[0.0, 0.0, 1.5],
        );
        check(
            "Shrink",
            r("Shrink", &[nan, 0.5, -0.75]),
            &[0.0, 0.0, -0.75],
        );
        check(
            "HardSigmoid",
            r("HardSigmoid", &[nan, -10.0, 10.0]),
            &[nan, 0.0, 1.0],
        );
        check("Gelu", r("Gelu", &[nan, 0.0]), &[nan, 0.0]);
        check(
            "IsNaN",
            r("IsNaN", &[nan, inf, 0.0, -1.0]),
            &[1.0, 0.0, 0.0, 0.0],
        );
        check(
            "IsInf",
            r("IsInf", &[nan, inf, -inf, 6e4]),
            &[0.0, 1.0, 1.0, 0.0],
        );
    }
}

#[test]
fn softplus_and_sigmoid_are_stable_in_f32() {
    let got = run_op("Softplus", Dtype::F32, &[100.0, -100.0, 20.0], &[]);
    assert_eq!(got[0], 100.0);
    assert!(got[1] > 0.0 && (got[1] - (-100f64).exp()).abs() < 1e-44);
    assert!((got[2] - 20.0).abs() < 1e-5);
    let got = run_op("Sigmoid", Dtype::F32, &[-100.0], &[]);
    assert!(got[0] > 0.0, "e^-100 is representable in f32: {got:?}");
}

#[test]
fn mish_on_the_onnx_test_range() {
    let xs: Vec<f64> = held(
        Dtype::F32,
        &(0..10000)
            .map(|i| -10.0 + 20.0 * i as f64 / 9999.0)
            .collect::<Vec<_>>(),
    );
    let got = run1(&request("Mish", &[10000], Dtype::F32, &[]), &xs).unwrap();
    for (g, x) in got.iter().zip(&xs) {
        let want = reference("mish", *x, 0.0, 0.0);
        assert!(
            (g - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "mish({x}) = {g}, want {want}"
        );
    }
}

#[test]
fn gelu_matches_hand_values() {
    // math.erf-based values: 0.5 x (1 + erf(x / sqrt 2))
    let got = run_op("Gelu", Dtype::F64, &[-1.0, 0.0, 1.0, 2.0], &[]);
    let want = [
        -0.158_655_253_931_457_05,
        0.0,
        0.841_344_746_068_543,
        1.954_499_736_103_642,
    ];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-14, "{got:?}");
    }
    let erf = run_op("Erf", Dtype::F64, &[0.5, -2.0, 6.0], &[]);
    let want = [0.520_499_877_813_046_5, -0.995_322_265_018_952_7, 1.0];
    for (g, w) in erf.iter().zip(want) {
        assert!((g - w).abs() < 1e-15, "{erf:?}");
    }
}

/// Integer references, wrapping into the dtype.
fn wrap(dt: Dtype, v: i128) -> f64 {
    (match dt {
        Dtype::I8 => v as i8 as i128,
        Dtype::U8 => v as u8 as i128,
        Dtype::I32 => v as i32 as i128,
        Dtype::I16 => v as i16 as i128,
        Dtype::U16 => v as u16 as i128,
        Dtype::U32 => v as u32 as i128,
        Dtype::U64 => v as u64 as i128,
        _ => v as i64 as i128,
    }) as f64
}

#[test]
fn integer_ops_wrap_like_the_cuda_template() {
    for dt in INTS {
        let xs = int_values(dt);
        type Wide = fn(i128) -> i128;
        let cases: [(&str, Wide); 5] = [
            ("Abs", |v| v.abs()),
            ("Neg", |v| -v),
            ("Sign", |v| v.signum()),
            ("Relu", |v| v.max(0)),
            ("BitwiseNot", |v| !v),
        ];
        for (op, f) in cases {
            let got = run_op(op, dt, &xs, &[]);
            let want: Vec<f64> = xs.iter().map(|x| wrap(dt, f(*x as i128))).collect();
            assert_eq!(got, want, "{op} {dt:?} on {xs:?}");
        }
    }
}

#[test]
fn i64_is_exact_beyond_f64() {
    let x = [i64::MIN, i64::MIN + 1, -3, i64::MAX];
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let run = |op| {
        let (_, out) = testing::run::<Unary>(
            &request(op, &[4], Dtype::I64, &[]),
            std::slice::from_ref(&bytes),
        )
        .unwrap();
        out[0]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
    };
    assert_eq!(run("Abs"), [i64::MIN, i64::MAX, 3, i64::MAX]);
    assert_eq!(run("Neg"), [i64::MIN, i64::MAX, 3, i64::MIN + 1]);
    assert_eq!(run("BitwiseNot"), [i64::MAX, i64::MAX - 1, 2, i64::MIN]);
}

#[test]
fn logic_and_predicates() {
    assert_eq!(
        run_op("Not", Dtype::Boolean, &[0.0, 1.0, 1.0, 0.0], &[]),
        [1.0, 0.0, 0.0, 1.0]
    );
    let x = [
        -1.2,
        f64::NAN,
        f64::INFINITY,
        2.8,
        f64::NEG_INFINITY,
        f64::INFINITY,
    ];
    for dt in FLOATS {
        for (pos, neg, want) in [
            (1, 1, [0., 0., 1., 0., 1., 1.]),
            (1, 0, [0., 0., 1., 0., 0., 1.]),
            (0, 1, [0., 0., 0., 0., 1., 0.]),
            (0, 0, [0.; 6]),
        ] {
            let attrs = [
                ("detect_positive", AttrValueExt::Int(pos)),
                ("detect_negative", AttrValueExt::Int(neg)),
            ];
            let req = request("IsInf", &[2, 3], dt, &attrs);
            let (plan, _) = testing::run::<Unary>(&req, &[enc(dt, &x)]).unwrap();
            assert_eq!(plan.outputs[0].dtype, Dtype::Boolean);
            assert_eq!(run1(&req, &x).unwrap(), want, "IsInf {dt:?} +{pos} -{neg}");
        }
        assert_eq!(run_op("IsNaN", dt, &x, &[]), [0., 1., 0., 0., 0., 0.]);
    }
}
