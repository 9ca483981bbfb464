//! Pools against the naive reference: MaxPool (+ Indices, storage_order, NaN), AveragePool
//! (count_include_pad), LpPool, ceil_mode, dilations, auto_pad, the global pools, i8/u8
//! MaxPool, empty tensors and errors.

use super::reference::{self, Kind, Win, numel};
use super::{FLOATS, assert_close, data, int, ints, request, run, text, tol};
use umd_sdk::{AttrValueExt, Dtype, OpError};

fn u64s(v: &[usize]) -> Vec<u64> {
    v.iter().map(|&d| d as u64).collect()
}

/// Runs one pool and compares it (and MaxPool's indices) with the reference.
fn check(
    op: &str,
    kind: Kind,
    xs: &[usize],
    win: &Win,
    ceil: bool,
    extra: &[(&str, AttrValueExt)],
    dt: Dtype,
    seed: u64,
) {
    let x = data(numel(xs), seed, dt);
    let mut a = vec![
        ("kernel_shape", ints(&win.k)),
        ("strides", ints(&win.s)),
        ("dilations", ints(&win.d)),
        ("pads", ints(&win.pads_attr())),
        ("ceil_mode", int(ceil as i64)),
    ];
    a.extend(extra.iter().cloned());
    let xs64 = u64s(xs);
    let mut req = request(op, &[(&xs64, dt)], &a);
    let indices = matches!(kind, Kind::Max);
    if indices {
        req.outputs_wanted = vec![true, true];
    }
    let (plan, got) = run(&req, std::slice::from_ref(&x)).unwrap();
    let out = win.out(&xs[2..], ceil);
    let (want, arg) = reference::pool(&x, xs, kind, win, &out);
    let mut shape = xs[..2].to_vec();
    shape.extend(&out);
    let what = format!("{op} {dt:?} {xs:?} {win:?} ceil {ceil}");
    assert_eq!(plan.outputs[0].shape, u64s(&shape), "{what}");
    assert_close(&got[0], &want, tol(dt), &what);
    if indices {
        assert_eq!(plan.outputs[1].dtype, Dtype::I64);
        let arg: Vec<f64> = arg.iter().map(|&i| i as f64).collect();
        assert_eq!(got[1], arg, "{what}: indices");
        // without Indices MaxPool takes another kernel (row by row): the same maxima
        req.outputs_wanted = vec![true, false];
        let (_, alone) = run(&req, std::slice::from_ref(&x)).unwrap();
        assert_eq!(alone[0], got[0], "{what}: without indices");
    }
}

fn windows() -> Vec<(Vec<usize>, Win, bool)> {
    vec![
        (vec![2, 3, 13], Win::new(&[3]).s(&[2]).pads(&[1, 2]), false),
        (
            vec![2, 3, 13],
            Win::new(&[3]).s(&[3]).d(&[2]).pads(&[2, 1]),
            true,
        ),
        (
            vec![1, 2, 7, 9],
            Win::new(&[3, 2]).s(&[2, 3]).pads(&[1, 1, 2, 1]),
            true,
        ),
        (
            vec![1, 2, 8, 6],
            Win::new(&[2, 3]).s(&[1, 2]).d(&[3, 1]).pads(&[0, 2, 1, 0]),
            false,
        ),
        (
            vec![1, 2, 4, 5, 6],
            Win::new(&[2, 3, 2])
                .s(&[2, 1, 3])
                .d(&[1, 2, 1])
                .pads(&[1, 0, 1, 0, 2, 1]),
            true,
        ),
        (
            vec![1, 1, 32, 32],
            Win::new(&[5, 5]).s(&[3, 3]).d(&[2, 2]),
            true,
        ),
        // rows wide enough for the row kernel's blocks of 8 whole windows, on each of its
        // constant-width arms and the generic one, with partial windows at both ends
        (vec![1, 2, 3, 41], Win::new(&[3, 3]), false),
        (
            vec![1, 2, 5, 41],
            Win::new(&[3, 3]).s(&[2, 2]).pads(&[1, 1, 1, 1]),
            true,
        ),
        (vec![1, 1, 2, 37], Win::new(&[2, 2]).s(&[2, 2]), false),
        // 3×3 stride 1 with pads (AveragePool on the 3×3 plane kernel), rows not a multiple of 4
        (
            vec![1, 3, 6, 9],
            Win::new(&[3, 3]).pads(&[1, 1, 1, 1]),
            false,
        ),
        (
            vec![1, 2, 7, 11],
            Win::new(&[3, 3]).s(&[2, 2]).pads(&[1, 0, 1, 2]),
            true,
        ),
        (vec![1, 1, 1, 60], Win::new(&[1, 7]), false),
        (
            vec![1, 1, 1, 60],
            Win::new(&[1, 4]).s(&[1, 3]).d(&[1, 2]),
            false,
        ),
        (vec![1, 1, 1, 30], Win::new(&[1, 1]).s(&[1, 3]), false),
        (vec![1, 1, 1, 25], Win::new(&[1, 6]), false),
        (
            vec![1, 1, 3, 30],
            Win::new(&[1, 3]).pads(&[0, 2, 0, 2]),
            false,
        ),
    ]
}

#[test]
fn pools_match_the_reference_on_every_dtype() {
    for (i, (xs, win, ceil)) in windows().iter().enumerate() {
        for dt in FLOATS {
            let seed = 100 + i as u64;
            check("MaxPool", Kind::Max, xs, win, *ceil, &[], dt, seed);
            for include_pad in [false, true] {
                let a = [("count_include_pad", int(include_pad as i64))];
                check(
                    "AveragePool",
                    Kind::Avg { include_pad },
                    xs,
                    win,
                    *ceil,
                    &a,
                    dt,
                    seed,
                );
            }
            for p in [1, 2, 3] {
                check(
                    "LpPool",
                    Kind::Lp(p as f64),
                    xs,
                    win,
                    *ceil,
                    &[("p", int(p))],
                    dt,
                    seed,
                );
            }
        }
    }
}

#[test]
fn maxpool_indices_in_column_major_order() {
    // 1x1x3x4, kernel 2x2 stride 2: windows at (0,0) and (0,2); col-major index h + w*H
    let x: Vec<f64> = vec![1., 9., 2., 3., 4., 5., 8., 6., 0., 0., 0., 0.];
    let a = [
        ("kernel_shape", ints(&[2, 2])),
        ("strides", ints(&[2, 2])),
        ("storage_order", int(1)),
    ];
    let mut r = request("MaxPool", &[(&[1, 1, 3, 4], Dtype::F32)], &a);
    r.outputs_wanted = vec![true, true];
    let (_, out) = run(&r, &[x]).unwrap();
    assert_eq!(out[0], vec![9., 8.]);
    // 9 at (0,1): 0 + 1*3 = 3; 8 at (1,2): 1 + 2*3 = 7
    assert_eq!(out[1], vec![3., 7.]);
    // an unwanted second output is not produced
    r.outputs_wanted = vec![true, false];
    assert_eq!(run(&r, &[vec![0.0; 12]]).unwrap().0.outputs.len(), 1);
}

#[test]
fn maxpool_propagates_nan_and_serves_bytes() {
    let a = [("kernel_shape", ints(&[2])), ("strides", ints(&[2]))];
    let r = request("MaxPool", &[(&[1, 1, 6], Dtype::F32)], &a);
    let (_, out) = run(&r, &[vec![1., f64::NAN, f64::NAN, 3., -1., -2.]]).unwrap();
    assert!(out[0][0].is_nan() && out[0][1].is_nan());
    assert_eq!(out[0][2], -1.0);
    // NaN inside the row kernel's blocks of 8 whole windows and in an edge window
    let a3 = [("kernel_shape", ints(&[3])), ("pads", ints(&[1, 1]))];
    let mut x: Vec<f64> = (0..24).map(|i| ((i * 7) % 11) as f64).collect();
    (x[0], x[12]) = (f64::NAN, f64::NAN);
    let (_, out) = run(
        &request("MaxPool", &[(&[1, 1, 24], Dtype::F32)], &a3),
        &[x.clone()],
    )
    .unwrap();
    for (o, got) in out[0].iter().enumerate() {
        let win = &x[o.saturating_sub(1)..(o + 2).min(24)];
        if win.iter().any(|v| v.is_nan()) {
            assert!(got.is_nan(), "output {o}: {got}");
        } else {
            assert_eq!(
                *got,
                win.iter().copied().fold(f64::MIN, f64::max),
                "output {o}"
            );
        }
    }
    for (dt, x, want) in [
        (
            Dtype::I8,
            vec![-128., -5., 7., 100., -1., -3.],
            vec![-5., 100., -1.],
        ),
        (
            Dtype::U8,
            vec![0., 255., 7., 1., 3., 3.],
            vec![255., 7., 3.],
        ),
    ] {
        let mut r = request("MaxPool", &[(&[1, 1, 6], dt)], &a);
        r.outputs_wanted = vec![true, true];
        let (plan, out) = run(&r, &[x]).unwrap();
        assert_eq!(
            (plan.outputs[0].dtype, plan.outputs[1].dtype),
            (dt, Dtype::I64)
        );
        assert_eq!(out[0], want);
        let (_, out) = run(
            &request("GlobalMaxPool", &[(&[1, 1, 6], dt)], &[]),
            &[vec![3., 9., 1., 0., 2., 2.]],
        )
        .unwrap();
        assert_eq!(out[0], vec![9.]);
    }
}

#[test]
fn pool_auto_pad_equals_the_explicit_pads() {
    let x = data(2 * 7 * 8, 3, Dtype::F32);
    let go = |op: &str, a: &[(&str, AttrValueExt)]| {
        let mut a = a.to_vec();
        a.push(("kernel_shape", ints(&[3, 2])));
        if op == "AveragePool" {
            a.push(("count_include_pad", int(1)));
        }
        let (plan, out) = run(
            &request(op, &[(&[1, 2, 7, 8], Dtype::F32)], &a),
            std::slice::from_ref(&x),
        )
        .unwrap();
        (plan.outputs[0].shape.clone(), out[0].clone())
    };
    for op in ["MaxPool", "AveragePool", "LpPool"] {
        let s = ("strides", ints(&[2, 3]));
        // out (4, 3): totals (4-1)*2+3-7 = 2 and (3-1)*3+2-8 = 0
        let upper = go(op, &[("auto_pad", text("SAME_UPPER")), s.clone()]);
        assert_eq!(upper, go(op, &[("pads", ints(&[1, 0, 1, 0])), s.clone()]));
        assert_eq!(upper.0, vec![1, 2, 4, 3]);
        // stride 1: totals 2 and 1: the odd one first with SAME_LOWER, last with SAME_UPPER
        assert_eq!(
            go(op, &[("auto_pad", text("SAME_LOWER"))]),
            go(op, &[("pads", ints(&[1, 1, 1, 0]))])
        );
        assert_eq!(
            go(op, &[("auto_pad", text("SAME_UPPER"))]),
            go(op, &[("pads", ints(&[1, 0, 1, 1]))])
        );
        assert_eq!(
            go(op, &[("auto_pad", text("VALID")), ("ceil_mode", int(1))]),
            go(op, &[])
        );
    }
}

#[test]
fn global_pools_reduce_every_spatial_element() {
    for dt in FLOATS {
        for xs in [
            vec![2usize, 3, 5, 4],
            vec![1, 2, 7],
            vec![1, 2, 2, 3, 2],
            vec![2, 3],
        ] {
            let x = data(numel(&xs), 9, dt);
            let xs64 = u64s(&xs);
            let plane = numel(&xs[2..]);
            let mut shape = xs64[..2].to_vec();
            shape.extend(std::iter::repeat_n(1, xs.len() - 2));
            for (op, f) in [
                (
                    "GlobalAveragePool",
                    &(|v: &[f64]| v.iter().sum::<f64>() / v.len() as f64) as &dyn Fn(&[f64]) -> f64,
                ),
                ("GlobalMaxPool", &|v: &[f64]| {
                    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                }),
                ("GlobalLpPool", &|v: &[f64]| {
                    v.iter().map(|a| a * a).sum::<f64>().sqrt()
                }),
            ] {
                let (plan, out) =
                    run(&request(op, &[(&xs64, dt)], &[]), std::slice::from_ref(&x)).unwrap();
                assert_eq!(plan.outputs[0].shape, shape, "{op}");
                let want: Vec<f64> = x.chunks(plane).map(f).collect();
                assert_close(&out[0], &want, tol(dt), &format!("{op} {dt:?} {xs:?}"));
            }
            let r = request("GlobalLpPool", &[(&xs64, dt)], &[("p", int(3))]);
            let want: Vec<f64> = x
                .chunks(plane)
                .map(|v| v.iter().map(|a| a.abs().powi(3)).sum::<f64>().cbrt())
                .collect();
            assert_close(
                &run(&r, std::slice::from_ref(&x)).unwrap().1[0],
                &want,
                tol(dt),
                "GlobalLpPool p=3",
            );
        }
    }
}

#[test]
fn pools_of_empty_tensors() {
    let k = ("kernel_shape", ints(&[2, 2]));
    for op in ["MaxPool", "AveragePool", "LpPool"] {
        let (plan, out) = run(
            &request(op, &[(&[0, 3, 4, 4], Dtype::F32)], std::slice::from_ref(&k)),
            &[vec![]],
        )
        .unwrap();
        assert_eq!(plan.outputs[0].shape, vec![0, 3, 3, 3]);
        assert!(out[0].is_empty());
    }
    let (plan, out) = run(
        &request("GlobalAveragePool", &[(&[1, 2, 0, 3], Dtype::F32)], &[]),
        &[vec![]],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![1, 2, 1, 1]);
    assert!(out[0].iter().all(|v| v.is_nan()), "mean of nothing");
}

#[test]
fn pool_errors_name_the_problem() {
    let x: &[u64] = &[1, 2, 5, 5];
    let e = |op: &str, dt: Dtype, a: &[(&str, AttrValueExt)]| {
        crate::plan::plan(&request(op, &[(x, dt)], a)).unwrap_err()
    };
    let k = ("kernel_shape", ints(&[2, 2]));
    let attr_err = |e: OpError, what: &str| {
        assert!(
            matches!(&e, OpError::InvalidAttribute(m) if m.contains(what)),
            "{e:?}"
        )
    };
    attr_err(e("MaxPool", Dtype::F32, &[]), "kernel_shape");
    attr_err(
        e("MaxPool", Dtype::F32, &[("kernel_shape", ints(&[2]))]),
        "kernel_shape",
    );
    attr_err(
        e(
            "MaxPool",
            Dtype::F32,
            &[k.clone(), ("storage_order", int(2))],
        ),
        "storage_order",
    );
    attr_err(
        e(
            "MaxPool",
            Dtype::F32,
            &[k.clone(), ("count_include_pad", int(1))],
        ),
        "count_include_pad",
    );
    attr_err(
        e(
            "AveragePool",
            Dtype::F32,
            &[k.clone(), ("count_include_pad", int(3))],
        ),
        "count_include_pad",
    );
    attr_err(
        e(
            "AveragePool",
            Dtype::F32,
            &[k.clone(), ("ceil_mode", int(-1))],
        ),
        "ceil_mode",
    );
    attr_err(e("LpPool", Dtype::F32, &[k.clone(), ("p", int(0))]), "p");
    attr_err(
        e("GlobalMaxPool", Dtype::F32, std::slice::from_ref(&k)),
        "kernel_shape",
    );
    attr_err(
        e("MaxPool", Dtype::F32, &[k.clone(), ("pads", ints(&[1, 1]))]),
        "pads",
    );
    for (op, dt) in [
        ("AveragePool", Dtype::I8),
        ("MaxPool", Dtype::I32),
        ("LpPool", Dtype::U8),
        ("GlobalAveragePool", Dtype::I64),
    ] {
        let a = if op.starts_with("Global") {
            vec![]
        } else {
            vec![k.clone()]
        };
        let err = e(op, dt, &a);
        assert!(
            matches!(&err, OpError::UnsupportedDtype(m) if m.contains("f32")),
            "{err:?}"
        );
    }
    let mut r = request("AveragePool", &[(x, Dtype::F32)], std::slice::from_ref(&k));
    r.outputs_wanted = vec![true, true];
    assert!(matches!(
        crate::plan::plan(&r),
        Err(OpError::InvalidShape(_))
    ));
    let r = request(
        "MaxPool",
        &[(&[1, 2], Dtype::F32)],
        &[("kernel_shape", ints(&[]))],
    );
    assert!(matches!(
        crate::plan::plan(&r),
        Err(OpError::InvalidShape(_))
    ));
    let r = request(
        "MaxPool",
        &[(&[1, 2, 3], Dtype::F32)],
        &[("kernel_shape", ints(&[5]))],
    );
    assert!(matches!(
        crate::plan::plan(&r),
        Err(OpError::InvalidShape(_))
    ));
}

#[test]
fn global_pools_fold_each_plane_in_row_major_order() {
    // a global pool folds its whole plane in one pass: the same order, and so the same bits,
    // as a row-by-row fold; NaN wins a max
    for shape in [&[2u64, 3, 5, 7][..], &[1, 2, 3, 4, 5], &[2, 2, 1]] {
        let planes = (shape[0] * shape[1]) as usize;
        let per = shape[2..].iter().product::<u64>() as usize;
        let mut x = data(planes * per, 11, Dtype::F32);
        x[per + per / 2] = f64::NAN; // plane 1
        let (_, avg) = run(
            &request("GlobalAveragePool", &[(shape, Dtype::F32)], &[]),
            &[x.clone()],
        )
        .unwrap();
        let (_, max) = run(
            &request("GlobalMaxPool", &[(shape, Dtype::F32)], &[]),
            &[x.clone()],
        )
        .unwrap();
        for (p, plane) in x.chunks_exact(per).enumerate() {
            let sum = plane.iter().fold(0f32, |a, &v| a + v as f32);
            let want = sum / per as f32;
            let got = avg[0][p];
            assert!(
                got == want as f64 || (got.is_nan() && want.is_nan()),
                "{shape:?} plane {p}: average {got}, want {want}"
            );
            let want = plane.iter().fold(f32::NEG_INFINITY, |a, &v| {
                let v = v as f32;
                if v > a || (v.is_nan() && !a.is_nan()) {
                    v
                } else {
                    a
                }
            });
            let got = max[0][p];
            assert!(
                got == want as f64 || (got.is_nan() && want.is_nan()),
                "{shape:?} plane {p}: max {got}, want {want}"
            );
        }
        assert!(avg[0][1].is_nan() && max[0][1].is_nan(), "NaN wins plane 1");
    }
}

#[test]
fn maxpool_rows_give_the_bits_of_the_windows_in_kernel_order() {
    // MaxPool without indices (separable for 1-D and 2-D: every input row's column maxima,
    // then the rows' maxima) against MaxPool with indices (each window in kernel order): the
    // same bits, with NaNs of distinct payloads, zeros of both signs and -inf in the input
    type Attrs = Vec<(&'static str, AttrValueExt)>;
    let geoms: [(&[u64], Attrs); 6] = [
        // empty input rows, padded to a non-empty output: every window empty
        (
            &[1, 2, 0, 3],
            vec![
                ("kernel_shape", ints(&[1, 1])),
                ("pads", ints(&[1, 0, 1, 0])),
            ],
        ),
        (
            &[1, 2, 9, 10],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            &[2, 1, 11, 12],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[0, 0, 1, 1])),
                ("ceil_mode", int(1)),
            ],
        ),
        (
            &[1, 3, 10, 9],
            vec![
                ("kernel_shape", ints(&[2, 3])),
                ("strides", ints(&[1, 2])),
                ("dilations", ints(&[2, 1])),
                ("pads", ints(&[2, 1, 0, 1])),
            ],
        ),
        (
            &[1, 2, 17],
            vec![("kernel_shape", ints(&[3])), ("strides", ints(&[2]))],
        ),
        (
            &[1, 1, 4, 4],
            vec![
                ("kernel_shape", ints(&[5, 5])),
                ("pads", ints(&[2, 2, 2, 2])),
            ],
        ),
    ];
    let specials = [
        f32::from_bits(0x7fc0_0001),
        f32::from_bits(0xffc0_0002),
        0.0,
        -0.0,
        f32::NEG_INFINITY,
    ];
    for (gi, (shape, attrs)) in geoms.iter().enumerate() {
        let n = shape.iter().product::<u64>() as usize;
        let x: Vec<f32> = data(n, 50 + gi as u64, Dtype::F32)
            .iter()
            .enumerate()
            .map(|(i, &v)| match (i * 7 + gi) % 13 {
                k @ 0..=4 => specials[k],
                _ => (v * 4.0).round() as f32 / 4.0, // ties between equal values
            })
            .collect();
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut r = request("MaxPool", &[(shape, Dtype::F32)], attrs);
        let (_, rows) =
            umd_sdk::testing::run::<crate::Conv>(&r, std::slice::from_ref(&bytes)).unwrap();
        r.outputs_wanted = vec![true, true];
        let (_, windows) = umd_sdk::testing::run::<crate::Conv>(&r, &[bytes]).unwrap();
        assert_eq!(rows[0], windows[0], "geometry {gi}: the same bits");
    }
}
