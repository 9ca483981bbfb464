//! The window functions against hand-computed values and an independent formula.

use super::*;

fn window(op: &str, size: i64, periodic: Option<i64>, odt: Option<i64>) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op).constant(desc(&[], Dtype::I64), &size.to_le_bytes());
    if let Some(p) = periodic {
        b = b.attr("periodic", int(p));
    }
    if let Some(d) = odt {
        b = b.attr("output_datatype", int(d));
    }
    b.build(target())
}

fn values(req: &PlanRequestExt, size: i64) -> (OpPlan, Vec<f64>) {
    let (plan, outs) = run(req, &[vec![size as f64]]).unwrap();
    (plan, outs[0].clone())
}

#[test]
fn hand_computed_windows() {
    let h = 4.0 / 46.0;
    let cases: &[(&str, i64, i64, &[f64])] = &[
        ("HannWindow", 4, 1, &[0.0, 0.5, 1.0, 0.5]),
        ("HannWindow", 5, 0, &[0.0, 0.5, 1.0, 0.5, 0.0]),
        ("HammingWindow", 3, 0, &[h, 1.0, h]),
        ("HammingWindow", 2, 1, &[h, 1.0]),
        ("BlackmanWindow", 4, 1, &[0.0, 0.34, 1.0, 0.34]),
        ("BlackmanWindow", 3, 0, &[0.0, 1.0, 0.0]),
    ];
    for (op, size, periodic, want) in cases {
        for dt in [Dtype::F32, Dtype::F64, Dtype::F16, Dtype::Bf16] {
            let n = (1..=24)
                .find(|n| crate::common::onnx_dtype(*n) == Some(dt))
                .unwrap();
            let (plan, got) = values(&window(op, *size, Some(*periodic), Some(n)), *size);
            assert_eq!(plan.outputs[0].shape, vec![*size as u64]);
            assert_eq!(plan.outputs[0].dtype, dt);
            assert_close(&got, &quantize(dt, want), tol(dt).max(1e-15), op);
        }
    }
}

#[test]
fn defaults_empty_and_long_windows() {
    let (plan, got) = values(&window("HannWindow", 10, None, None), 10);
    assert_eq!(plan.outputs[0].dtype, Dtype::F32);
    for (i, g) in got.iter().enumerate() {
        let want = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / 10.0).cos();
        assert!((g - want).abs() < 1e-6, "{i}: {g} vs {want}");
    }
    let (plan, got) = values(&window("BlackmanWindow", 0, None, None), 0);
    assert_eq!(plan.outputs[0].shape, vec![0]);
    assert!(got.is_empty());
    let (_, got) = values(&window("HammingWindow", 1000, Some(0), Some(11)), 1000);
    assert!((got[0] - 4.0 / 46.0).abs() < 1e-12 && (got[999] - 4.0 / 46.0).abs() < 1e-12);
}

#[test]
fn window_errors() {
    let e = err(&window("HannWindow", -1, None, None));
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = err(&window("HannWindow", 3, Some(2), None));
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("periodic")));
    let e = err(&window("HannWindow", 3, None, Some(8)));
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("output_datatype")));
    let req = PlanRequestExt::builder("HannWindow")
        .input(desc(&[], Dtype::I64))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(m) if m.contains("must be known")));
}
