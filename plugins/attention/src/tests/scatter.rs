//! TensorScatter against the reference's scatter loop (`op_tensor_scatter.py`): linear and
//! circular modes, every axis, with and without (i64 or i32) write indices, every element
//! width, empty shapes and error cases; SwiGLU against its formula.

use super::*;

/// The reference: copy the cache, then write each update row at `w[b] + j` (mod L when
/// circular).
fn scatter_ref(
    past: &[f64],
    pshape: &[u64],
    update: &[f64],
    ushape: &[u64],
    idx: Option<&[i64]>,
    axis: usize,
    circular: bool,
) -> Vec<f64> {
    let mut out = past.to_vec();
    let outer: usize = pshape[..axis].iter().product::<u64>() as usize;
    let inner: usize = pshape[axis + 1..].iter().product::<u64>() as usize;
    let per_batch: usize = pshape[1..axis].iter().product::<u64>() as usize;
    let (l, s) = (pshape[axis] as i64, ushape[axis] as usize);
    for o in 0..outer {
        let w = idx.map_or(0, |v| v[o / per_batch]);
        for j in 0..s {
            let mut c = w + j as i64;
            if circular {
                c = c.rem_euclid(l);
            }
            for k in 0..inner {
                out[(o * l as usize + c as usize) * inner + k] = update[(o * s + j) * inner + k];
            }
        }
    }
    out
}

fn ints(n: usize, seed: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 7 + seed * 13) % 100) as f64).collect()
}

#[allow(clippy::too_many_arguments)]
fn check_scatter(
    dt: Dtype,
    pshape: &[u64],
    ushape: &[u64],
    idx: Option<(&[i64], Dtype)>,
    axis: i64,
    mode: &str,
) {
    let mut r = Req::new("TensorScatter")
        .input(pshape, dt)
        .input(ushape, dt)
        .attr("mode", A::Text(mode.into()))
        .attr("axis", A::Int(axis));
    let past = ints(numel(pshape), 1);
    let update = ints(numel(ushape), 2).iter().map(|v| v + 100.0).collect();
    let update: Vec<f64> = if dt == Dtype::Boolean {
        vec![1.0; numel(ushape)]
    } else if dt == Dtype::U8 || dt == Dtype::I8 {
        ints(numel(ushape), 2).iter().map(|v| v + 1.0).collect()
    } else {
        update
    };
    let past: Vec<f64> = if dt == Dtype::Boolean {
        vec![0.0; past.len()]
    } else {
        past
    };
    let mut vals = vec![past.clone(), update.clone()];
    if let Some((w, wdt)) = idx {
        r = r.input(&[w.len() as u64], wdt);
        vals.push(w.iter().map(|&x| x as f64).collect());
    }
    let rank = pshape.len() as i64;
    let ax = if axis < 0 { axis + rank } else { axis } as usize;
    let want = scatter_ref(
        &past,
        pshape,
        &update,
        ushape,
        idx.map(|(w, _)| w),
        ax,
        mode == "circular",
    );
    let got = r
        .run(&vals)
        .unwrap_or_else(|e| panic!("{dt:?} {pshape:?} {mode}: {e:?}"));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.shape, pshape);
    assert_eq!(got[0].0.dtype, dt);
    assert_eq!(
        got[0].1, want,
        "{dt:?} {pshape:?} {ushape:?} {mode} axis {axis}"
    );
}

const WIDTHS: [Dtype; 8] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I64,
    Dtype::I32,
    Dtype::U8,
    Dtype::Boolean,
];

#[test]
fn tensorscatter_matches_the_reference() {
    for dt in WIDTHS {
        // the ONNX cases: [B, H, L, D] along axis -2, linear and circular
        check_scatter(
            dt,
            &[2, 2, 5, 3],
            &[2, 2, 2, 3],
            Some((&[1, 2], Dtype::I64)),
            -2,
            "linear",
        );
        check_scatter(
            dt,
            &[2, 2, 5, 3],
            &[2, 2, 4, 3],
            Some((&[1, 3], Dtype::I64)),
            -2,
            "circular",
        );
        check_scatter(
            dt,
            &[3, 4, 2],
            &[3, 2, 2],
            Some((&[1, 2, 0], Dtype::I32)),
            1,
            "linear",
        );
        // no write indices: from 0
        check_scatter(dt, &[2, 6, 2], &[2, 3, 2], None, 1, "linear");
        // the last axis, a large circular index
        check_scatter(
            dt,
            &[2, 3, 4],
            &[2, 3, 3],
            Some((&[9, 2], Dtype::I64)),
            -1,
            "circular",
        );
        // the full cache replaced
        check_scatter(dt, &[1, 2, 3], &[1, 2, 3], None, -2, "circular");
        // empty: no update rows, and an empty batch
        check_scatter(
            dt,
            &[2, 4, 2],
            &[2, 0, 2],
            Some((&[1, 1], Dtype::I64)),
            1,
            "linear",
        );
        check_scatter(
            dt,
            &[0, 4, 2],
            &[0, 1, 2],
            Some((&[], Dtype::I64)),
            1,
            "linear",
        );
    }
}

#[test]
fn tensorscatter_plans_one_launch_per_width_and_refuses_bad_requests() {
    let base = || {
        Req::new("TensorScatter")
            .input(&[2, 4, 3], Dtype::F32)
            .input(&[2, 1, 3], Dtype::F32)
    };
    let plan = base().plan().unwrap();
    assert_eq!(plan.launches[0].entry_point, "tensorscatter_4");
    let e = base().attr("axis", A::Int(0)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = base().attr("axis", A::Int(3)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = base()
        .attr("mode", A::Text("ring".into()))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("mode")));
    let e = base().attr("bogus", A::Int(1)).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("bogus")));
    let e = Req::new("TensorScatter")
        .input(&[2, 4, 3], Dtype::F32)
        .input(&[2, 5, 3], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(
        matches!(e, OpError::InvalidShape(_)),
        "update longer than the cache"
    );
    let e = Req::new("TensorScatter")
        .input(&[2, 4, 3], Dtype::F32)
        .input(&[2, 1, 2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = Req::new("TensorScatter")
        .input(&[2, 4, 3], Dtype::F32)
        .input(&[2, 1, 3], Dtype::F16)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = base().input(&[3], Dtype::I64).plan().unwrap_err();
    assert!(
        matches!(e, OpError::InvalidShape(_)),
        "indices of the wrong length"
    );
    let e = base().input(&[2], Dtype::F32).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    // an absent write_indices slot is fine
    assert!(base().absent().plan().is_ok());
}

#[test]
fn tensorscatter_cuda_module_has_every_width() {
    for (dt, w) in [
        (Dtype::U8, 1),
        (Dtype::F16, 2),
        (Dtype::I32, 4),
        (Dtype::F64, 8),
    ] {
        let r = Req::new("TensorScatter")
            .input(&[2, 4, 3], dt)
            .input(&[2, 1, 3], dt)
            .input(&[2], Dtype::I64);
        let srcs = testing::cuda_sources::<AttentionPlugin>(&r.build(Target::cpu())).unwrap();
        assert_eq!(srcs.len(), 1);
        assert!(srcs[0].1.code.contains(&format!("void tensorscatter_{w}(")));
        assert!(!srcs[0].1.code.contains("#include"));
    }
}

fn swiglu_ref(a: f64, b: f64, alpha: f64) -> f64 {
    a * (1.0 / (1.0 + (-alpha * a).exp())) * b
}

#[test]
fn swiglu_matches_the_formula() {
    for dt in ALL {
        for (shape, alpha) in [
            (vec![2u64, 4], None),
            (vec![3, 1, 5], Some(0.5)),
            (vec![], Some(1.702)),
            (vec![0, 3], None),
        ] {
            let n = numel(&shape);
            let (a, b) = (round(dt, &data(n, 1)), round(dt, &data(n, 2)));
            let mut r = Req::new("SwiGLU").input(&shape, dt).input(&shape, dt);
            if let Some(al) = alpha {
                r = r.attr("alpha", A::Float(al));
            }
            let got = r.run(&[a.clone(), b.clone()]).unwrap();
            assert_eq!(got[0].0.shape, shape);
            let want: Vec<f64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| swiglu_ref(x, y, alpha.unwrap_or(1.0)))
                .collect();
            assert_close(&got[0].1, &want, dt, "SwiGLU");
        }
    }
    // the ONNX case
    let a = vec![1.0, -2.0, 3.0, 4.0, -1.0, 2.0, -3.0, 0.5];
    let b = vec![0.5, 1.0, -1.0, 2.0, 2.0, -1.0, 0.5, 1.0];
    let got = Req::new("SwiGLU")
        .input(&[2, 4], Dtype::F32)
        .input(&[2, 4], Dtype::F32)
        .run(&[a.clone(), b.clone()])
        .unwrap();
    assert!((got[0].1[0] - 0.5 * 0.7310585786300049).abs() < 1e-6);
    // NaN propagates
    let got = Req::new("SwiGLU")
        .input(&[1], Dtype::F32)
        .input(&[1], Dtype::F32)
        .run(&[vec![f64::NAN], vec![1.0]])
        .unwrap();
    assert!(got[0].1[0].is_nan());
}

#[test]
fn swiglu_refuses_bad_requests() {
    let e = Req::new("SwiGLU")
        .input(&[2, 4], Dtype::F32)
        .input(&[2, 1], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("no broadcasting")));
    let e = Req::new("SwiGLU")
        .input(&[2], Dtype::F32)
        .input(&[2], Dtype::F16)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = Req::new("SwiGLU")
        .input(&[2], Dtype::I32)
        .input(&[2], Dtype::I32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = Req::new("SwiGLU")
        .input(&[2], Dtype::F32)
        .input(&[2], Dtype::F32)
        .attr("limit", A::Float(7.0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("limit")));
    let e = Req::new("SwiGLU")
        .input(&[2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}
