//! DeformConv against naive references: zero offsets are a Conv; integer offsets (per offset
//! group) a direct Conv reading shifted taps; a half-pixel offset the mean of two of those; a
//! constant mask scales; on every dtype, with groups, strides, dilations, pads and bias; errors;
//! the CUDA module of every dtype.

use super::reference::{self, Win, numel};
use super::{FLOATS, assert_close, data, int, ints, request, run, tol};
use crate::Conv;
use umd_sdk::{Dtype, OpError, testing};

struct Case {
    xs: Vec<usize>,
    ws: Vec<usize>,
    group: usize,
    og: usize,
    win: Win,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            xs: vec![1, 1, 3, 3],
            ws: vec![1, 1, 2, 2],
            group: 1,
            og: 1,
            win: Win::new(&[2, 2]).pads(&[1, 1, 1, 1]),
        },
        Case {
            xs: vec![2, 4, 6, 5],
            ws: vec![6, 2, 3, 2],
            group: 2,
            og: 2,
            win: Win::new(&[3, 2]).s(&[2, 1]).d(&[1, 2]).pads(&[1, 0, 2, 1]),
        },
        Case {
            xs: vec![1, 4, 5, 5],
            ws: vec![2, 4, 2, 2],
            group: 1,
            og: 4,
            win: Win::new(&[2, 2]),
        },
    ]
}

fn u64s(v: &[usize]) -> Vec<u64> {
    v.iter().map(|&d| d as u64).collect()
}

/// A Conv whose taps read channel `c` at `(h + dy, w + dx)`, the shift of its offset group
/// `c / (C / og)` (zero outside the image): a deformable conv with integer offsets, directly.
fn shifted_conv(c: &Case, x: &[f64], w: &[f64], shifts: &[(i64, i64)]) -> Vec<f64> {
    let (n, ch, h, wd) = (c.xs[0], c.xs[1], c.xs[2] as i64, c.xs[3] as i64);
    let (m, cg, kh, kw) = (c.ws[0], c.ws[1], c.ws[2], c.ws[3]);
    let out = c.win.out(&c.xs[2..], false);
    let mg = m / c.group;
    let mut y = Vec::new();
    for nn in 0..n {
        for mm in 0..m {
            for oy in 0..out[0] as i64 {
                for ox in 0..out[1] as i64 {
                    let mut acc = 0.0;
                    for ci in 0..cg {
                        let ic = (mm / mg) * cg + ci;
                        let (dy, dx) = shifts[ic / (ch / c.og)];
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let py =
                                    oy * c.win.s[0] - c.win.pb[0] + ky as i64 * c.win.d[0] + dy;
                                let px =
                                    ox * c.win.s[1] - c.win.pb[1] + kx as i64 * c.win.d[1] + dx;
                                if py < 0 || py >= h || px < 0 || px >= wd {
                                    continue;
                                }
                                let xv = x[((nn * ch + ic) * h as usize + py as usize)
                                    * wd as usize
                                    + px as usize];
                                acc += xv * w[((mm * cg + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    y.push(acc);
                }
            }
        }
    }
    y
}

/// Runs DeformConv with offsets `(dy, dx)` per offset group (every tap and position), an
/// optional constant mask and bias.
fn deform(
    c: &Case,
    dt: Dtype,
    x: &[f64],
    w: &[f64],
    offs: &[(f64, f64)],
    mask: Option<f64>,
    b: Option<&[f64]>,
) -> (Vec<u64>, Vec<f64>) {
    let m = c.ws[0];
    let taps = numel(&c.ws[2..]);
    let out = c.win.out(&c.xs[2..], false);
    let plane = numel(&out);
    let n = c.xs[0];
    let mut off = Vec::with_capacity(n * c.og * taps * 2 * plane);
    for _ in 0..n {
        for o in offs.iter().take(c.og) {
            for _ in 0..taps {
                off.extend(std::iter::repeat_n(o.0, plane));
                off.extend(std::iter::repeat_n(o.1, plane));
            }
        }
    }
    let offs_shape = vec![
        n as u64,
        (c.og * taps * 2) as u64,
        out[0] as u64,
        out[1] as u64,
    ];
    let mask_shape = vec![n as u64, (c.og * taps) as u64, out[0] as u64, out[1] as u64];
    let (xs, ws, bs) = (u64s(&c.xs), u64s(&c.ws), vec![m as u64]);
    let mut inputs: Vec<(&[u64], Dtype)> = vec![(&xs, dt), (&ws, dt), (&offs_shape, dt)];
    let mut vals = vec![x.to_vec(), w.to_vec(), off];
    let mut builder_absent_bias = false;
    if let Some(b) = b {
        inputs.push((&bs, dt));
        vals.push(b.to_vec());
    } else if mask.is_some() {
        builder_absent_bias = true;
    }
    if let Some(mv) = mask {
        inputs.push((&mask_shape, dt));
        vals.push(vec![mv; n * c.og * taps * plane]);
    }
    let mut req = request(
        "DeformConv",
        &inputs,
        &[
            ("group", int(c.group as i64)),
            ("offset_group", int(c.og as i64)),
            ("strides", ints(&c.win.s)),
            ("dilations", ints(&c.win.d)),
            ("pads", ints(&c.win.pads_attr())),
            (
                "kernel_shape",
                ints(&c.ws[2..].iter().map(|&k| k as i64).collect::<Vec<_>>()),
            ),
        ],
    );
    if builder_absent_bias {
        req.inputs.insert(3, None);
    }
    let (plan, outs) = run(&req, &vals).unwrap_or_else(|e| panic!("{e:?}"));
    (plan.outputs[0].shape.clone(), outs[0].clone())
}

#[test]
fn zero_integer_and_half_offsets() {
    for (ci, c) in cases().iter().enumerate() {
        for dt in FLOATS {
            let x = data(numel(&c.xs), 10 + ci as u64, dt);
            let w = data(numel(&c.ws), 20 + ci as u64, dt);
            let b = data(c.ws[0], 30, dt);
            let conv = |x: &[f64], b: Option<&[f64]>| {
                reference::conv(x, &c.xs, &w, &c.ws, b, c.group, &c.win)
            };
            let t = tol(dt) * (c.ws[1] * numel(&c.ws[2..])) as f64;
            // zero offsets, with bias: a Conv
            let (shape, got) = deform(c, dt, &x, &w, &[(0.0, 0.0); 4], None, Some(&b));
            let (want, ws) = conv(&x, Some(&b));
            assert_eq!(shape, u64s(&ws));
            assert_close(&got, &want, t, &format!("zero offsets {ci} {dt:?}"));
            // integer offsets per offset group
            let shifts = [(1, 0), (0, -1), (-2, 1), (1, 1)];
            let offs: Vec<(f64, f64)> = shifts.iter().map(|&(a, b)| (a as f64, b as f64)).collect();
            let (_, got) = deform(c, dt, &x, &w, &offs, None, None);
            let want = shifted_conv(c, &x, &w, &shifts);
            assert_close(&got, &want, t, &format!("integer offsets {ci} {dt:?}"));
            // half a pixel down, mask 0.5: a quarter of (conv(x) + conv(x one row down))
            let (_, got) = deform(c, dt, &x, &w, &[(0.5, 0.0); 4], Some(0.5), None);
            let a = shifted_conv(c, &x, &w, &[(0, 0); 4]);
            let d = shifted_conv(c, &x, &w, &[(1, 0); 4]);
            let want: Vec<f64> = a.iter().zip(&d).map(|(p, q)| 0.25 * (p + q)).collect();
            assert_close(&got, &want, t, &format!("half offsets {ci} {dt:?}"));
        }
    }
}

#[test]
fn deform_errors() {
    let f = Dtype::F32;
    let plan = |r| <Conv as umd_sdk::Plugin>::plan_ext(&r);
    let x: (&[u64], Dtype) = (&[1, 2, 4, 4], f);
    let w: (&[u64], Dtype) = (&[1, 2, 2, 2], f);
    // offsets of the wrong channel count
    let e = plan(request("DeformConv", &[x, w, (&[1, 4, 3, 3], f)], &[])).unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    // offset_group not dividing C
    let e = plan(request(
        "DeformConv",
        &[x, w, (&[1, 24, 3, 3], f)],
        &[("offset_group", int(3))],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)), "{e:?}");
    // auto_pad is not a DeformConv attribute
    let e = plan(request(
        "DeformConv",
        &[x, w, (&[1, 8, 3, 3], f)],
        &[("auto_pad", super::text("VALID"))],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)), "{e:?}");
    // 1-D input
    let e = plan(request(
        "DeformConv",
        &[(&[1, 2, 4], f), (&[1, 2, 2], f), (&[1, 4, 3], f)],
        &[],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    // mixed dtypes
    let e = plan(request(
        "DeformConv",
        &[x, (&[1, 2, 2, 2], Dtype::F64), (&[1, 8, 3, 3], f)],
        &[],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)), "{e:?}");
    // ok
    assert_eq!(
        plan(request("DeformConv", &[x, w, (&[1, 8, 3, 3], f)], &[]))
            .unwrap()
            .outputs[0]
            .shape,
        [1, 1, 3, 3]
    );
}

#[test]
fn deform_cuda_module_of_every_dtype() {
    for dt in FLOATS {
        let r = request(
            "DeformConv",
            &[
                (&[1, 2, 4, 4], dt),
                (&[2, 2, 2, 2], dt),
                (&[1, 8, 3, 3], dt),
                (&[2], dt),
                (&[1, 4, 3, 3], dt),
            ],
            &[],
        );
        let srcs = testing::cuda_sources::<Conv>(&r).unwrap();
        let (id, src) = &srcs[0];
        assert_eq!(id, &crate::deform::module_id(dt));
        assert!(!src.code.contains("#include"));
        for e in &src.entry_points {
            assert!(src.code.contains(&format!("void {e}(")), "{e} defined");
        }
    }
}
