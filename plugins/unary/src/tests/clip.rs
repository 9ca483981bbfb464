//! Clip in every opset form, dtype and error case.

use super::*;
use umd_sdk::{AttrValueExt, testing};

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
