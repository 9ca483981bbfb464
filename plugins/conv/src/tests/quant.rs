//! ConvInteger and QLinearConv against the naive f64 convolution of `reference` (zero points
//! subtracted first, as the ONNX reference does), every x/w/y dtype pair, per-tensor and
//! per-channel weight parameters, groups, strides, dilations, padding, 1-D and 3-D; error cases;
//! the CUDA module's entry points.

use super::reference::{self, Win, numel};
use super::{int, ints, request, run};
use crate::Conv;
use umd_sdk::{Dtype, OpError, PlanRequestExt, TensorDesc, testing};

const QT: [Dtype; 2] = [Dtype::U8, Dtype::I8];

/// Deterministic integers of `dt`'s range.
fn qdata(n: usize, seed: usize, dt: Dtype) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let v = ((i * 97 + seed * 31 + 13) % 256) as f64;
            if dt == Dtype::I8 { v - 128.0 } else { v }
        })
        .collect()
}

struct Case {
    xs: Vec<usize>,
    ws: Vec<usize>,
    group: usize,
    win: Win,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            xs: vec![1, 1, 5, 5],
            ws: vec![2, 1, 3, 3],
            group: 1,
            win: Win::new(&[3, 3]).pads(&[1, 1, 1, 1]),
        },
        Case {
            xs: vec![2, 4, 7, 6],
            ws: vec![6, 2, 3, 2],
            group: 2,
            win: Win::new(&[3, 2]).s(&[2, 1]).d(&[1, 2]).pads(&[1, 0, 2, 1]),
        },
        Case {
            xs: vec![1, 3, 9],
            ws: vec![4, 3, 3],
            group: 1,
            win: Win::new(&[3]).s(&[2]).pads(&[2, 1]),
        },
        Case {
            xs: vec![1, 2, 3, 4, 4],
            ws: vec![2, 2, 2, 2, 2],
            group: 1,
            win: Win::new(&[2, 2, 2]),
        },
        Case {
            xs: vec![0, 2, 3, 3],
            ws: vec![2, 2, 1, 1],
            group: 1,
            win: Win::new(&[1, 1]),
        },
    ]
}

fn u64s(v: &[usize]) -> Vec<u64> {
    v.iter().map(|&x| x as u64).collect()
}

fn attrs(c: &Case) -> Vec<(&'static str, umd_sdk::AttrValueExt)> {
    vec![
        ("group", int(c.group as i64)),
        ("strides", ints(&c.win.s)),
        ("dilations", ints(&c.win.d)),
        ("pads", ints(&c.win.pads_attr())),
    ]
}

#[test]
fn conv_integer_matches_naive() {
    for c in cases() {
        let m = c.ws[0];
        for xt in QT {
            for wt in QT {
                for per_channel in [false, true] {
                    let x = qdata(numel(&c.xs), 1, xt);
                    let w = qdata(numel(&c.ws), 2, wt);
                    let xz = qdata(1, 3, xt);
                    let wz = qdata(if per_channel { m } else { 1 }, 4, wt);
                    let wzs: &[u64] = if per_channel { &[m as u64] } else { &[] };
                    let wzs = wzs.to_vec();
                    let req = request(
                        "ConvInteger",
                        &[
                            (&u64s(&c.xs), xt),
                            (&u64s(&c.ws), wt),
                            (&[], xt),
                            (&wzs, wt),
                        ],
                        &attrs(&c),
                    );
                    let (plan, out) =
                        run(&req, &[x.clone(), w.clone(), xz.clone(), wz.clone()]).unwrap();
                    let xd: Vec<f64> = x.iter().map(|v| v - xz[0]).collect();
                    let per = numel(&c.ws[1..]);
                    let wd: Vec<f64> = w
                        .iter()
                        .enumerate()
                        .map(|(i, v)| v - wz[if per_channel { i / per } else { 0 }])
                        .collect();
                    let (want, shape) =
                        reference::conv(&xd, &c.xs, &wd, &c.ws, None, c.group, &c.win);
                    assert_eq!(plan.outputs[0].shape, u64s(&shape));
                    assert_eq!(plan.outputs[0].dtype, Dtype::I32);
                    assert_eq!(out[0], want, "{:?} {xt:?} {wt:?} {per_channel}", c.xs);
                }
            }
        }
    }
}

#[test]
fn conv_integer_without_zero_points() {
    let c = &cases()[1];
    let (x, w) = (
        qdata(numel(&c.xs), 5, Dtype::U8),
        qdata(numel(&c.ws), 6, Dtype::I8),
    );
    let req = request(
        "ConvInteger",
        &[(&u64s(&c.xs), Dtype::U8), (&u64s(&c.ws), Dtype::I8)],
        &attrs(c),
    );
    let (_, out) = run(&req, &[x.clone(), w.clone()]).unwrap();
    let (want, _) = reference::conv(&x, &c.xs, &w, &c.ws, None, c.group, &c.win);
    assert_eq!(out[0], want);
}

/// QLinearConv's requantization as the ONNX reference computes it.
fn requant(acc: f64, mult: f32, yz: f64, yt: Dtype) -> f64 {
    let (lo, hi) = if yt == Dtype::I8 {
        (-128.0, 127.0)
    } else {
        (0.0, 255.0)
    };
    (acc * mult as f64 + yz).clamp(lo, hi).round_ties_even()
}

#[test]
fn qlinear_conv_matches_naive() {
    for c in cases() {
        let m = c.ws[0];
        for (xt, wt, yt) in [
            (Dtype::U8, Dtype::U8, Dtype::U8),
            (Dtype::U8, Dtype::I8, Dtype::I8),
            (Dtype::I8, Dtype::I8, Dtype::I8),
            (Dtype::I8, Dtype::U8, Dtype::U8),
        ] {
            for (per_channel, bias) in [(false, false), (true, true), (false, true)] {
                let x = qdata(numel(&c.xs), 1, xt);
                let w = qdata(numel(&c.ws), 2, wt);
                let nw = if per_channel { m } else { 1 };
                let chan: Vec<u64> = if per_channel { vec![m as u64] } else { vec![] };
                let xz = qdata(1, 3, xt);
                let wz = qdata(nw, 4, wt);
                let yz = qdata(1, 7, yt);
                let xs = vec![0.0123f32 as f64];
                let ws: Vec<f64> = (0..nw)
                    .map(|i| (0.002 + 0.001 * i as f64) as f32 as f64)
                    .collect();
                let ys = vec![0.37f32 as f64];
                let b: Vec<f64> = (0..m).map(|i| i as f64 * 1000.0 - 1500.0).collect();
                let mut inputs: Vec<(&[u64], Dtype)> = vec![
                    (&[], Dtype::F32),
                    (&[], xt),
                    (&chan, Dtype::F32),
                    (&chan, wt),
                    (&[], Dtype::F32),
                    (&[], yt),
                ];
                let (xsh, wsh, bsh) = (u64s(&c.xs), u64s(&c.ws), vec![m as u64]);
                inputs.insert(0, (&xsh, xt));
                inputs.insert(3, (&wsh, wt));
                let mut vals = vec![
                    x.clone(),
                    xs.clone(),
                    xz.clone(),
                    w.clone(),
                    ws.clone(),
                    wz.clone(),
                    ys.clone(),
                    yz.clone(),
                ];
                if bias {
                    inputs.push((&bsh, Dtype::I32));
                    vals.push(b.clone());
                }
                let req = request("QLinearConv", &inputs, &attrs(&c));
                let (plan, out) = run(&req, &vals).unwrap();
                let xd: Vec<f64> = x.iter().map(|v| v - xz[0]).collect();
                let per = numel(&c.ws[1..]);
                let wd: Vec<f64> = w
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v - wz[if per_channel { i / per } else { 0 }])
                    .collect();
                let (acc, shape) = reference::conv(
                    &xd,
                    &c.xs,
                    &wd,
                    &c.ws,
                    bias.then_some(&b[..]),
                    c.group,
                    &c.win,
                );
                let osz = numel(&shape[2..]);
                let want: Vec<f64> = acc
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        let ch = i.checked_div(osz).unwrap_or(0) % m;
                        let mult = xs[0] as f32 * ws[if per_channel { ch } else { 0 }] as f32
                            / ys[0] as f32;
                        requant(*a, mult, yz[0], yt)
                    })
                    .collect();
                assert_eq!(plan.outputs[0].shape, u64s(&shape));
                assert_eq!(plan.outputs[0].dtype, yt);
                assert_eq!(
                    out[0], want,
                    "{:?} {xt:?} {wt:?} {per_channel} {bias}",
                    c.xs
                );
            }
        }
    }
}

#[test]
fn quantized_errors() {
    let ok_x: (&[u64], Dtype) = (&[1, 1, 3, 3], Dtype::U8);
    let ok_w: (&[u64], Dtype) = (&[2, 1, 2, 2], Dtype::U8);
    let plan = |r: PlanRequestExt| <Conv as umd_sdk::Plugin>::plan_ext(&r);
    // f32 data is not ConvInteger's
    let e = plan(request(
        "ConvInteger",
        &[(&[1, 1, 3, 3], Dtype::F32), ok_w],
        &[],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)), "{e:?}");
    // a zero point of another dtype than its tensor
    let e = plan(request("ConvInteger", &[ok_x, ok_w, (&[], Dtype::I8)], &[])).unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)), "{e:?}");
    // a w_zero_point of neither 1 nor M values
    let e = plan(request(
        "ConvInteger",
        &[ok_x, ok_w, (&[], Dtype::U8), (&[3], Dtype::U8)],
        &[],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    // an unknown attribute
    let e = plan(request("ConvInteger", &[ok_x, ok_w], &[("alpha", int(1))])).unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)), "{e:?}");
    // QLinearConv: x_scale per channel, bias of the wrong dtype
    let f: (&[u64], Dtype) = (&[], Dtype::F32);
    let z: (&[u64], Dtype) = (&[], Dtype::U8);
    let e = plan(request(
        "QLinearConv",
        &[ok_x, (&[2], Dtype::F32), z, ok_w, f, z, f, z],
        &[],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    let e = plan(request(
        "QLinearConv",
        &[ok_x, f, z, ok_w, f, z, f, z, (&[2], Dtype::F32)],
        &[],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    // an absent y_zero_point: the output takes x's dtype
    let r = PlanRequestExt::builder("QLinearConv")
        .input(TensorDesc::new("x", vec![1, 1, 3, 3], Dtype::I8))
        .input(TensorDesc::new("xs", vec![], Dtype::F32))
        .input(TensorDesc::new("xz", vec![], Dtype::I8))
        .input(TensorDesc::new("w", vec![2, 1, 2, 2], Dtype::U8))
        .input(TensorDesc::new("ws", vec![], Dtype::F32))
        .absent()
        .input(TensorDesc::new("ys", vec![], Dtype::F32))
        .absent()
        .build(umd_sdk::Target::cpu());
    assert_eq!(plan(r).unwrap().outputs[0].dtype, Dtype::I8);
}

#[test]
fn quantized_cuda_module_has_every_entry_point() {
    let mut seen = std::collections::BTreeSet::new();
    for xt in QT {
        for wt in QT {
            let req = request(
                "ConvInteger",
                &[(&[1, 1, 3, 3], xt), (&[2, 1, 2, 2], wt)],
                &[],
            );
            for yt in QT {
                let f: (&[u64], Dtype) = (&[], Dtype::F32);
                let q = request(
                    "QLinearConv",
                    &[
                        (&[1, 1, 3, 3], xt),
                        f,
                        (&[], xt),
                        (&[2, 1, 2, 2], wt),
                        (&[2], Dtype::F32),
                        (&[2], wt),
                        f,
                        (&[], yt),
                        (&[2], Dtype::I32),
                    ],
                    &[],
                );
                for r in [&req, &q] {
                    let srcs = testing::cuda_sources::<Conv>(r).unwrap();
                    let (id, src) = &srcs[0];
                    assert_eq!(id, crate::quant::MODULE);
                    assert!(!src.code.contains("#include"));
                    let plan = <Conv as umd_sdk::Plugin>::plan_ext(r).unwrap();
                    let e = &plan.launches[0].entry_point;
                    assert!(src.entry_points.contains(e), "{e}");
                    assert!(src.code.contains(&format!("void {e}(")), "{e} defined");
                    seen.insert(e.clone());
                }
            }
        }
    }
    assert_eq!(seen.len(), 12);
}
