//! Native tests: every op and dtype through the SDK harness (plan + CPU kernels) against naive
//! f64 references written here, the special values ONNX pins down (NaN, ±0, ±inf, halves,
//! wrapping integers), every Clip form, empty tensors, errors, and the CUDA path.

use super::*;
use umd_sdk::{AttrValueExt, testing};

const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
const INTS: [Dtype; 4] = [Dtype::I8, Dtype::U8, Dtype::I32, Dtype::I64];

fn desc(name: &str, shape: &[u64], dt: Dtype) -> TensorDesc {
    TensorDesc::new(name, shape.to_vec(), dt)
}

fn request(op: &str, shape: &[u64], dt: Dtype, attrs: &[(&str, AttrValueExt)]) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op).input(desc("x", shape, dt));
    for (n, v) in attrs {
        b = b.attr(n, v.clone());
    }
    b.build(Target::cpu())
}

fn enc(dt: Dtype, v: &[f64]) -> Vec<u8> {
    dtype::encode(dt, v).unwrap()
}

/// Values as the dtype holds them (what the kernel actually reads).
fn held(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &enc(dt, v))
}

/// Runs `req` on one input of values `x`; returns the output values.
fn run1(req: &PlanRequestExt, x: &[f64]) -> Result<Vec<f64>, OpError> {
    let dt = req.input(0).unwrap().dtype;
    let (plan, outs) = testing::run::<Unary>(req, &[enc(dt, x)])?;
    assert_eq!(plan.outputs[0].shape, req.input(0).unwrap().shape);
    assert_eq!(plan.launches.len(), 1);
    Ok(dtype::decode_f64(plan.outputs[0].dtype, &outs[0]))
}

fn run_op(op: &str, dt: Dtype, x: &[f64], attrs: &[(&str, AttrValueExt)]) -> Vec<f64> {
    run1(&request(op, &[x.len() as u64], dt, attrs), x).unwrap()
}

fn same(got: f64, want: f64) -> bool {
    got == want || (got.is_nan() && want.is_nan())
}

/// erf by its everywhere-positive series 2/sqrt(pi) e^-x^2 sum x^(2n+1) 2^n / (1*3*...*(2n+1)).
fn erf_ref(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= 2.0 * x * x / (2 * n + 1) as f64;
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

/// Naive f64 formulas of every float kernel.
fn reference(kernel: &str, x: f64, a: f64, b: f64) -> f64 {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let sp = |v: f64| (1.0 + v.exp()).ln();
    match kernel {
        "exp" => x.exp(),
        "log" => x.ln(),
        "sqrt" => x.sqrt(),
        "reciprocal" => 1.0 / x,
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "tanh" => x.tanh(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sinh" => (x.exp() - (-x).exp()) / 2.0,
        "cosh" => (x.exp() + (-x).exp()) / 2.0,
        "asinh" => (x + (x * x + 1.0).sqrt()).ln(),
        "acosh" => (x + (x * x - 1.0).sqrt()).ln(),
        "atanh" => 0.5 * ((1.0 + x) / (1.0 - x)).ln(),
        "erf" => erf_ref(x),
        "sigmoid" => sig(x),
        "hard_sigmoid" => (a * x + b).clamp(0.0, 1.0),
        "hard_swish" => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        "leaky_relu" => {
            if x >= 0.0 {
                x
            } else {
                a * x
            }
        }
        "elu" => {
            if x > 0.0 {
                x
            } else {
                a * (x.exp() - 1.0)
            }
        }
        "selu" => b * if x > 0.0 { x } else { a * (x.exp() - 1.0) },
        "celu" => x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0),
        "thresholded_relu" => {
            if x > a {
                x
            } else {
                0.0
            }
        }
        "gelu" => 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
        "gelu_tanh" => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x.powi(3))).tanh())
        }
        "softplus" => sp(x),
        "softsign" => x / (1.0 + x.abs()),
        "mish" => x * sp(x).tanh(),
        "swish" => x * sig(a * x),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => {
            let f = x.floor();
            match x - f {
                d if d < 0.5 => f,
                d if d > 0.5 => f + 1.0,
                _ if f % 2.0 == 0.0 => f,
                _ => f + 1.0,
            }
        }
        other => panic!("no reference for {other}"),
    }
}

/// Input values inside the op's domain.
fn domain(kernel: &str) -> (f64, f64) {
    match kernel {
        "log" | "sqrt" => (0.01, 10.0),
        "asin" | "acos" | "atanh" => (-0.99, 0.99),
        "acosh" => (1.0, 10.0),
        "tan" => (-1.4, 1.4),
        _ => (-5.0, 5.0),
    }
}

/// Non-default attribute values for the ops that have attributes.
fn custom_attrs(def: &ops::OpDef) -> Vec<(&'static str, f64)> {
    def.attrs
        .iter()
        .enumerate()
        .map(|(i, (n, d))| (*n, if i == 0 { d * 0.5 + 0.1 } else { d * 1.5 }))
        .collect()
}

fn tol(op: &str, dt: Dtype) -> f64 {
    Unary::tolerance(op, dt).map_or(0.0, |t| t.absolute.max(t.relative))
}

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
        _ => v as i64 as i128,
    }) as f64
}

fn int_values(dt: Dtype) -> Vec<f64> {
    match dt {
        Dtype::I8 => vec![-128.0, -5.0, -1.0, 0.0, 1.0, 7.0, 127.0],
        Dtype::U8 => vec![0.0, 1.0, 7.0, 128.0, 200.0, 255.0],
        Dtype::I32 => vec![i32::MIN as f64, -5.0, 0.0, 3.0, i32::MAX as f64],
        _ => vec![-(1i64 << 53) as f64, -5.0, 0.0, 3.0, (1i64 << 53) as f64],
    }
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

/// A Clip request: `min`/`max` given as (present?, value); `None` leaves the slot out entirely.
fn clip(
    dt: Dtype,
    x: &[f64],
    min: Option<Option<f64>>,
    max: Option<Option<f64>>,
    opset: u32,
    attrs: &[(&str, f64)],
) -> Result<Vec<f64>, OpError> {
    let mut b =
        PlanRequestExt::builder("Clip")
            .opset(opset)
            .input(desc("x", &[x.len() as u64], dt));
    let mut data = vec![enc(dt, x)];
    let slots = [min, max];
    let last = slots.iter().rposition(|s| s.is_some());
    for (i, s) in slots.iter().enumerate() {
        match s {
            Some(Some(v)) => {
                b = b.input(desc(if i == 0 { "min" } else { "max" }, &[], dt));
                data.push(enc(dt, &[*v]));
            }
            Some(None) if Some(i) <= last => b = b.absent(),
            _ => {}
        }
    }
    for (n, v) in attrs {
        b = b.attr(n, AttrValueExt::Float(*v));
    }
    let (plan, out) = testing::run::<Unary>(&b.build(Target::cpu()), &data)?;
    Ok(dtype::decode_f64(plan.outputs[0].dtype, &out[0]))
}

#[test]
fn clip_every_form() {
    let nan = f64::NAN;
    for dt in FLOATS {
        let c = |x: &[f64], mn, mx| clip(dt, x, mn, mx, 13, &[]).unwrap();
        assert_eq!(
            c(&[-2.0, 0.0, 2.0], Some(Some(-1.0)), Some(Some(1.0))),
            [-1.0, 0.0, 1.0]
        );
        assert_eq!(
            c(&[-6.0, 0.0, 6.0], Some(Some(-5.0)), Some(Some(5.0))),
            [-5.0, 0.0, 5.0]
        );
        assert_eq!(
            c(&[-2.0, 0.0, 6.0], Some(Some(2.0)), Some(Some(1.0))),
            [1.0, 1.0, 1.0],
            "min > max gives max"
        );
        assert_eq!(
            c(&[-2.0, 0.5, 6.0], Some(Some(0.0)), None),
            [0.0, 0.5, 6.0],
            "min only"
        );
        assert_eq!(
            c(&[-2.0, 0.5, 6.0], Some(None), Some(Some(0.0))),
            [-2.0, 0.0, 0.0],
            "absent min"
        );
        assert_eq!(
            c(&[-1.0, 0.0, f64::NEG_INFINITY], Some(None), Some(None)),
            [-1.0, 0.0, f64::NEG_INFINITY]
        );
        assert_eq!(c(&[-1.0, 0.0, 1.0], None, None), [-1.0, 0.0, 1.0], "x only");
        let got = c(&[nan, -3.0, 3.0], Some(Some(-1.0)), Some(Some(1.0)));
        assert!(got[0].is_nan() && got[1..] == [-1.0, 1.0], "{got:?}");
        // opset 6: attributes, defaulting to the float32 range
        let six = |x: &[f64], attrs: &[(&str, f64)]| clip(dt, x, None, None, 6, attrs).unwrap();
        assert_eq!(
            six(&[-2.0, 0.0, 2.0], &[("min", -1.0), ("max", 1.0)]),
            [-1.0, 0.0, 1.0]
        );
        assert_eq!(six(&[-2.0, 0.0, 2.0], &[("min", 0.5)]), [0.5, 0.5, 2.0]);
        if dt == Dtype::F32 || dt == Dtype::F64 {
            let got = six(&[f64::NEG_INFINITY, f64::INFINITY], &[]);
            assert_eq!(got, [-(f32::MAX as f64), f32::MAX as f64]);
        }
    }
    for dt in INTS {
        let x = int_values(dt);
        let (lo, hi) = (x[1], x[x.len() - 2]);
        let want: Vec<f64> = x.iter().map(|v| v.max(lo).min(hi)).collect();
        assert_eq!(
            clip(dt, &x, Some(Some(lo)), Some(Some(hi)), 13, &[]).unwrap(),
            want
        );
        let want: Vec<f64> = x.iter().map(|v| v.max(lo)).collect();
        assert_eq!(
            clip(dt, &x, Some(Some(lo)), None, 13, &[]).unwrap(),
            want,
            "{dt:?} default max"
        );
        let want: Vec<f64> = x.iter().map(|v| v.min(lo)).collect();
        assert_eq!(
            clip(dt, &x, Some(None), Some(Some(lo)), 0, &[]).unwrap(),
            want,
            "{dt:?} default min"
        );
        assert_eq!(clip(dt, &x, Some(None), Some(None), 0, &[]).unwrap(), x);
    }
}

#[test]
fn clip_errors() {
    let x = desc("x", &[3], Dtype::F32);
    let bad_dtype = PlanRequestExt::builder("Clip")
        .input(x.clone())
        .input(desc("min", &[], Dtype::F64))
        .build(Target::cpu());
    assert!(
        matches!(Unary::plan_ext(&bad_dtype), Err(OpError::UnsupportedDtype(m)) if m.contains("min"))
    );
    let bad_shape = PlanRequestExt::builder("Clip")
        .input(x.clone())
        .absent()
        .input(desc("max", &[2], Dtype::F32))
        .build(Target::cpu());
    assert!(
        matches!(Unary::plan_ext(&bad_shape), Err(OpError::InvalidShape(m)) if m.contains("max"))
    );
    let four = PlanRequestExt::builder("Clip")
        .input(x.clone())
        .absent()
        .absent()
        .input(x.clone())
        .build(Target::cpu());
    assert!(matches!(
        Unary::plan_ext(&four),
        Err(OpError::InvalidShape(_))
    ));
    let attr = request(
        "Clip",
        &[3],
        Dtype::F32,
        &[("minimum", AttrValueExt::Float(0.0))],
    );
    assert!(
        matches!(Unary::plan_ext(&attr), Err(OpError::InvalidAttribute(m)) if m.contains("minimum"))
    );
    let no_x = PlanRequestExt::builder("Clip")
        .absent()
        .build(Target::cpu());
    assert!(matches!(
        Unary::plan_ext(&no_x),
        Err(OpError::InvalidShape(_))
    ));
    assert!(matches!(
        Unary::plan_ext(&request("Clip", &[3], Dtype::Boolean, &[])),
        Err(OpError::UnsupportedDtype(_))
    ));
}

#[test]
fn empty_and_scalar_tensors() {
    for (op, dt) in [
        ("Relu", Dtype::F32),
        ("Exp", Dtype::F16),
        ("IsNaN", Dtype::Bf16),
        ("Not", Dtype::Boolean),
        ("BitwiseNot", Dtype::U8),
        ("Clip", Dtype::I32),
    ] {
        let req = request(op, &[0, 4], dt, &[]);
        let (plan, outs) = testing::run::<Unary>(&req, &[vec![]]).unwrap();
        assert_eq!(plan.outputs[0].shape, [0, 4]);
        assert_eq!(plan.launches.len(), 1);
        assert_eq!(plan.launches[0].grid.x, 1);
        assert!(outs[0].is_empty());
    }
    // empty with min/max present
    let req = PlanRequestExt::builder("Clip")
        .input(desc("x", &[0], Dtype::F32))
        .input(desc("min", &[1], Dtype::F32))
        .input(desc("max", &[], Dtype::F32))
        .build(Target::cpu());
    let (_, outs) = testing::run::<Unary>(
        &req,
        &[vec![], enc(Dtype::F32, &[0.0]), enc(Dtype::F32, &[1.0])],
    )
    .unwrap();
    assert!(outs[0].is_empty());
    let got = run1(&request("Neg", &[], Dtype::F64, &[]), &[2.5]).unwrap();
    assert_eq!(got, [-2.5]);
}

#[test]
fn launches_fit_the_limits() {
    let plan = Unary::plan_ext(&request("Exp", &[1 << 40], Dtype::F32, &[])).unwrap();
    let l = &plan.launches[0];
    assert!(l.grid.x <= i32::MAX as u32 && l.block.x == 256);
    assert!(l.params.len() <= 4096);
    assert!(Unary::plan_ext(&request("Exp", &[1 << 62, 4], Dtype::F32, &[])).is_err());
    // a 0-d output of a bool predicate on f64 input
    assert!(Unary::plan_ext(&request("IsNaN", &[1 << 61], Dtype::F64, &[])).is_err());
}

#[test]
fn bad_requests_are_named() {
    let e = |op: &str, dt, attrs: &[(&str, AttrValueExt)]| {
        Unary::plan_ext(&request(op, &[2], dt, attrs)).unwrap_err()
    };
    assert!(
        matches!(e("Exp", Dtype::I32, &[]), OpError::UnsupportedDtype(m) if m.contains("f32, f16, bf16, f64"))
    );
    assert!(
        matches!(e("Not", Dtype::F32, &[]), OpError::UnsupportedDtype(m) if m.contains("bool"))
    );
    assert!(matches!(
        e("BitwiseNot", Dtype::F32, &[]),
        OpError::UnsupportedDtype(_)
    ));
    assert!(matches!(
        e("IsNaN", Dtype::I64, &[]),
        OpError::UnsupportedDtype(_)
    ));
    assert!(matches!(
        e("Abs", Dtype::Boolean, &[]),
        OpError::UnsupportedDtype(_)
    ));
    assert!(
        matches!(e("Relu", Dtype::F32, &[("alpha", AttrValueExt::Float(1.0))]), OpError::InvalidAttribute(m) if m.contains("alpha"))
    );
    assert!(
        matches!(e("Gelu", Dtype::F32, &[("approximate", AttrValueExt::Text("fast".into()))]), OpError::InvalidAttribute(m) if m.contains("approximate"))
    );
    assert!(matches!(
        e("Gelu", Dtype::F32, &[("alpha", AttrValueExt::Float(1.0))]),
        OpError::InvalidAttribute(_)
    ));
    assert!(
        matches!(e("LeakyRelu", Dtype::F32, &[("alpha", AttrValueExt::Text("x".into()))]), OpError::InvalidAttribute(m) if m.contains("alpha"))
    );
    assert!(
        matches!(e("Selu", Dtype::F32, &[("beta", AttrValueExt::Float(1.0))]), OpError::InvalidAttribute(m) if m.contains("beta"))
    );
    assert!(matches!(
        e("Conv", Dtype::F32, &[]),
        OpError::UnsupportedOp(_)
    ));
    let two = PlanRequestExt::builder("Relu")
        .input(desc("x", &[2], Dtype::F32))
        .input(desc("y", &[2], Dtype::F32))
        .build(Target::cpu());
    assert!(matches!(
        Unary::plan_ext(&two),
        Err(OpError::InvalidShape(_))
    ));
    let none = PlanRequestExt::builder("Relu").build(Target::cpu());
    assert!(matches!(
        Unary::plan_ext(&none),
        Err(OpError::InvalidShape(_))
    ));
    let outs = PlanRequestExt::builder("Relu")
        .input(desc("x", &[2], Dtype::F32))
        .outputs_wanted(vec![true, true])
        .build(Target::cpu());
    assert!(matches!(
        Unary::plan_ext(&outs),
        Err(OpError::InvalidShape(_))
    ));
    // op names match case-insensitively
    assert!(Unary::plan_ext(&request("leakyrelu", &[2], Dtype::F32, &[])).is_ok());
}

#[test]
fn cpu_refuses_unknown_entry_points() {
    let plan = Unary::plan_ext(&request("Relu", &[2], Dtype::F32, &[])).unwrap();
    let l = plan.launches[0].clone();
    for entry in ["relu_bool", "exp_i32", "nope_f32", "relu"] {
        let call = CpuCall {
            module_id: l.module_id.clone(),
            entry_point: entry.into(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: vec![],
        };
        assert!(
            matches!(Unary::run_cpu(call), Err(OpError::Internal(_))),
            "{entry}"
        );
    }
}

#[test]
fn describe_and_tolerances() {
    let info = Unary::describe();
    let names: Vec<&str> = info.ops.iter().map(|o| o.name.as_str()).collect();
    for op in [
        "Abs",
        "Neg",
        "Exp",
        "Log",
        "Sqrt",
        "Reciprocal",
        "Sin",
        "Cos",
        "Tan",
        "Tanh",
        "Asin",
        "Acos",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
        "Sigmoid",
        "HardSigmoid",
        "HardSwish",
        "Relu",
        "LeakyRelu",
        "Elu",
        "Selu",
        "Celu",
        "ThresholdedRelu",
        "Gelu",
        "Erf",
        "Softplus",
        "Softsign",
        "Mish",
        "Clip",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Not",
        "IsNaN",
        "IsInf",
        "BitwiseNot",
        "Swish",
    ] {
        assert_eq!(names.iter().filter(|n| **n == op).count(), 1, "{op}");
    }
    assert_eq!(names.len(), 42);
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    assert_eq!(Unary::tolerance("Exp", Dtype::F16).unwrap().relative, 1e-3);
    assert!(Unary::tolerance("Relu", Dtype::F32).is_none());
    assert!(Unary::tolerance("Exp", Dtype::I32).is_none());
}

#[test]
fn self_tests_pass() {
    for case in Unary::self_tests() {
        let legacy = umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        };
        let req = PlanRequestExt::from_legacy(&legacy);
        let (plan, outs) = testing::run::<Unary>(&req, &case.input_data).unwrap();
        for ((o, got), want) in plan.outputs.iter().zip(&outs).zip(&case.expected) {
            let (g, w) = (
                dtype::decode_f64(o.dtype, got),
                dtype::decode_f64(o.dtype, want),
            );
            for (g, w) in g.iter().zip(&w) {
                assert!(
                    (g - w).abs() <= case.tolerance * (1.0 + w.abs()),
                    "{}: {g} vs {w}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn cuda_sources_for_every_op_and_dtype() {
    let mut modules = std::collections::BTreeSet::new();
    for def in ops::all() {
        for &dt in def.class.dtypes() {
            let attrs = if def.kernel == "gelu_tanh" {
                vec![("approximate", AttrValueExt::Text("tanh".into()))]
            } else {
                vec![]
            };
            let srcs = testing::cuda_sources::<Unary>(&request(def.onnx, &[7, 3], dt, &attrs))
                .unwrap_or_else(|e| panic!("{} {dt:?}: {e:?}", def.kernel));
            for (id, src) in srcs {
                assert!(id.starts_with("unary_"));
                for e in &src.entry_points {
                    assert!(
                        src.code.contains(&format!("void {e}(")),
                        "{e} missing from {id}"
                    );
                }
                assert!(!src.code.contains("#include"));
                modules.insert(id);
            }
        }
    }
    // Clip with min and max inputs
    let req = PlanRequestExt::builder("Clip")
        .input(desc("x", &[4], Dtype::I8))
        .input(desc("min", &[], Dtype::I8))
        .input(desc("max", &[], Dtype::I8))
        .build(Target::cpu());
    testing::cuda_sources::<Unary>(&req).unwrap();
    assert_eq!(modules.len(), cuda::MODULE_DTYPES.len());
    assert!(Unary::kernel_source("unary_u16", &Target::cpu()).is_err());
    assert!(Unary::kernel_source("elementwise_f32", &Target::cpu()).is_err());
}
