//! Conv and ConvTranspose against the naive references, on every dtype, ranks 1–3, groups,
//! strides, dilations, pads, auto_pad, bias, empty tensors; and their errors.

use super::reference::{self, Win, numel};
use super::{FLOATS, assert_close, data, int, ints, request, run, text, tol};
use umd_sdk::{AttrValueExt, Dtype, OpError};

/// One Conv case: x shape, w shape, group, window, bias.
struct Case {
    xs: Vec<usize>,
    ws: Vec<usize>,
    group: usize,
    win: Win,
    bias: bool,
}

fn u64s(v: &[usize]) -> Vec<u64> {
    v.iter().map(|&d| d as u64).collect()
}

fn attrs(c: &Case) -> Vec<(&'static str, AttrValueExt)> {
    vec![
        ("group", int(c.group as i64)),
        ("strides", ints(&c.win.s)),
        ("dilations", ints(&c.win.d)),
        ("pads", ints(&c.win.pads_attr())),
    ]
}

fn check_conv(c: &Case, dt: Dtype, seed: u64) {
    let m = c.ws[0];
    let x = data(numel(&c.xs), seed, dt);
    let w = data(numel(&c.ws), seed + 1, dt);
    let b = data(m, seed + 2, dt);
    let (xs, ws, bs) = (u64s(&c.xs), u64s(&c.ws), vec![m as u64]);
    let mut inputs: Vec<(&[u64], Dtype)> = vec![(&xs, dt), (&ws, dt)];
    let mut vals = vec![x.clone(), w.clone()];
    if c.bias {
        inputs.push((&bs, dt));
        vals.push(b.clone());
    }
    let req = request("Conv", &inputs, &attrs(c));
    let (plan, out) = run(&req, &vals).unwrap();
    let (want, shape) = reference::conv(
        &x,
        &c.xs,
        &w,
        &c.ws,
        c.bias.then_some(&b[..]),
        c.group,
        &c.win,
    );
    assert_eq!(plan.outputs[0].shape, u64s(&shape));
    let terms = (c.ws[1] * numel(&c.ws[2..])) as f64;
    assert_close(
        &out[0],
        &want,
        tol(dt) * terms.sqrt().max(1.0),
        &format!("Conv {dt:?} {:?}", c.xs),
    );
}

fn cases() -> Vec<Case> {
    vec![
        // 1-D, stride 2, dilation 2, asymmetric pads, bias
        Case {
            xs: vec![2, 3, 11],
            ws: vec![4, 3, 3],
            group: 1,
            win: Win::new(&[3]).s(&[2]).d(&[2]).pads(&[1, 2]),
            bias: true,
        },
        // 2-D, two groups of 4 output channels (the GEMM path), mixed strides and dilations
        Case {
            xs: vec![2, 4, 7, 9],
            ws: vec![8, 2, 3, 2],
            group: 2,
            win: Win::new(&[3, 2]).s(&[2, 1]).d(&[1, 2]).pads(&[1, 0, 2, 1]),
            bias: false,
        },
        // depthwise 3x3, stride 2, pads 1
        // depthwise, two images, stride 2, bias: the channel runs of `conv_depthwise`
        Case {
            xs: vec![2, 3, 9, 10],
            ws: vec![3, 1, 3, 3],
            group: 3,
            win: Win::new(&[3, 3]).s(&[2, 2]).pads(&[1, 1, 1, 1]),
            bias: true,
        },
        Case {
            xs: vec![1, 5, 8, 8],
            ws: vec![5, 1, 3, 3],
            group: 5,
            win: Win::new(&[3, 3]).s(&[2, 2]).pads(&[1, 1, 1, 1]),
            bias: true,
        },
        // three groups of 2 output channels (the direct path), stride 1 along x, dilated
        Case {
            xs: vec![1, 6, 9, 8],
            ws: vec![6, 2, 3, 3],
            group: 3,
            win: Win::new(&[3, 3]).d(&[2, 2]).pads(&[2, 1, 0, 3]),
            bias: false,
        },
        // 3-D, GEMM path
        Case {
            xs: vec![1, 2, 4, 5, 6],
            ws: vec![5, 2, 2, 3, 2],
            group: 1,
            win: Win::new(&[2, 3, 2]).s(&[1, 2, 2]).pads(&[0, 1, 1, 1, 0, 0]),
            bias: true,
        },
        // 3-D, direct path
        Case {
            xs: vec![1, 2, 4, 5, 6],
            ws: vec![3, 2, 2, 3, 2],
            group: 1,
            win: Win::new(&[2, 3, 2]).s(&[1, 2, 1]).pads(&[0, 1, 1, 1, 0, 0]),
            bias: true,
        },
        // 1x1, stride 1: the direct GEMM path
        Case {
            xs: vec![2, 5, 6, 7],
            ws: vec![9, 5, 1, 1],
            group: 1,
            win: Win::new(&[1, 1]),
            bias: true,
        },
        // regression (pytorch-converted/test_Conv1d_pad2size1): input length 1, pads 2, the
        // GEMM path; for the outer kernel taps the whole run reads padding
        Case {
            xs: vec![1, 4, 1],
            ws: vec![4, 4, 5],
            group: 1,
            win: Win::new(&[5]).pads(&[2, 2]),
            bias: true,
        },
        // the same on the direct path (fewer output channels than MR)
        Case {
            xs: vec![1, 4, 1],
            ws: vec![2, 4, 5],
            group: 1,
            win: Win::new(&[5]).pads(&[2, 2]),
            bias: true,
        },
        // one input channel and a 1x1 kernel: a GEMM of depth 1
        Case {
            xs: vec![1, 1, 5, 5],
            ws: vec![8, 1, 1, 1],
            group: 1,
            win: Win::new(&[1, 1]),
            bias: true,
        },
        // pointwise (packed straight from the input rows) over several blocks of positions
        Case {
            xs: vec![2, 3, 20, 30],
            ws: vec![5, 3, 1, 1],
            group: 1,
            win: Win::new(&[1, 1]),
            bias: false,
        },
        // deep enough to use several GEMM depth slices, wide enough for several blocks
        Case {
            xs: vec![1, 40, 13, 21],
            ws: vec![10, 40, 3, 3],
            group: 1,
            win: Win::new(&[3, 3]).pads(&[1, 1, 1, 1]),
            bias: false,
        },
    ]
}

#[test]
fn conv_matches_the_reference_on_every_dtype() {
    for (i, c) in cases().iter().enumerate() {
        for dt in FLOATS {
            check_conv(c, dt, 10 * i as u64);
        }
    }
}

#[test]
fn conv_auto_pad_equals_the_explicit_pads() {
    let x = data(2 * 7 * 8, 1, Dtype::F32);
    let w = data(3 * 2 * 3 * 4, 2, Dtype::F32);
    let (xs, ws): (&[u64], &[u64]) = (&[1, 2, 7, 8], &[3, 2, 3, 4]);
    let go = |a: &[(&str, AttrValueExt)]| {
        let (plan, out) = run(
            &request("Conv", &[(xs, Dtype::F32), (ws, Dtype::F32)], a),
            &[x.clone(), w.clone()],
        )
        .unwrap();
        (plan.outputs[0].shape.clone(), out[0].clone())
    };
    let s = ("strides", ints(&[2, 3]));
    // out = ceil(7/2)=4, ceil(8/3)=3; total pads (4-1)*2+3-7=2, (3-1)*3+4-8=2
    let upper = go(&[("auto_pad", text("SAME_UPPER")), s.clone()]);
    assert_eq!(upper, go(&[("pads", ints(&[1, 1, 1, 1])), s.clone()]));
    assert_eq!(upper.0, vec![1, 3, 4, 3]);
    let d = ("dilations", ints(&[2, 1]));
    // keff 5: total (4-1)*2+5-7 = 4 -> (2, 2); odd split in W: SAME_LOWER puts 1 more first
    let lower = go(&[
        ("auto_pad", text("SAME_LOWER")),
        ("strides", ints(&[2, 2])),
        d.clone(),
    ]);
    // W: out 4, total (4-1)*2+4-8 = 2 -> (1, 1)
    assert_eq!(
        lower,
        go(&[("pads", ints(&[2, 1, 2, 1])), ("strides", ints(&[2, 2])), d])
    );
    let s1 = ("strides", ints(&[1, 1]));
    // stride 1, k (3, 4): totals 2 and 3: SAME_LOWER (1, 2) (1 begin), SAME_UPPER (1, 1) (2 end)
    assert_eq!(
        go(&[("auto_pad", text("SAME_LOWER")), s1.clone()]),
        go(&[("pads", ints(&[1, 2, 1, 1])), s1.clone()])
    );
    assert_eq!(
        go(&[("auto_pad", text("SAME_UPPER")), s1.clone()]),
        go(&[("pads", ints(&[1, 1, 1, 2])), s1.clone()])
    );
    assert_eq!(
        go(&[("auto_pad", text("VALID")), ("pads", ints(&[5, 5, 5, 5]))]),
        go(&[])
    );
    assert_eq!(go(&[("kernel_shape", ints(&[3, 4]))]), go(&[]));
}

#[test]
fn conv_empty_tensors() {
    // batch 0
    let r = request(
        "Conv",
        &[(&[0, 2, 5, 5], Dtype::F32), (&[3, 2, 3, 3], Dtype::F32)],
        &[],
    );
    let (plan, out) = run(&r, &[vec![], data(54, 1, Dtype::F32)]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0, 3, 3, 3]);
    assert!(out[0].is_empty() && plan.launches.len() == 1);
    // no input channels: the bias alone
    let r = request(
        "Conv",
        &[
            (&[1, 0, 4], Dtype::F32),
            (&[2, 0, 3], Dtype::F32),
            (&[2], Dtype::F32),
        ],
        &[],
    );
    let (_, out) = run(&r, &[vec![], vec![], vec![1.5, -2.0]]).unwrap();
    assert_eq!(out[0], vec![1.5, 1.5, -2.0, -2.0]);
    // no output channels
    let r = request(
        "Conv",
        &[(&[1, 2, 4], Dtype::F16), (&[0, 2, 3], Dtype::F16)],
        &[],
    );
    assert_eq!(
        run(&r, &[vec![0.0; 8], vec![]]).unwrap().0.outputs[0].shape,
        vec![1, 0, 2]
    );
    // a zero-extent spatial axis with pads: all bias
    let r = request(
        "ConvTranspose",
        &[(&[1, 1, 0, 3], Dtype::F32), (&[1, 1, 2, 2], Dtype::F32)],
        &[],
    );
    let (plan, out) = run(&r, &[vec![], vec![1.0; 4]]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![1, 1, 1, 4]);
    assert_eq!(out[0], vec![0.0; 4]);
}

#[test]
fn conv_errors_name_the_problem() {
    fn f32s<'a>(shapes: &[&'a [u64]]) -> Vec<(&'a [u64], Dtype)> {
        shapes.iter().map(|s| (*s, Dtype::F32)).collect()
    }
    let plan = |op: &str, ins: Vec<(&[u64], Dtype)>, a: &[(&str, AttrValueExt)]| {
        crate::plan::plan(&request(op, &ins, a)).unwrap_err()
    };
    let x: &[u64] = &[1, 4, 5, 5];
    let w: &[u64] = &[2, 4, 3, 3];
    let attr_err = |e: OpError, what: &str| {
        assert!(
            matches!(&e, OpError::InvalidAttribute(m) if m.contains(what)),
            "{e:?}"
        )
    };
    let shape_err = |e: OpError| assert!(matches!(&e, OpError::InvalidShape(_)), "{e:?}");
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("kernel_shape", ints(&[3, 2]))]),
        "kernel_shape",
    );
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("strides", ints(&[1]))]),
        "strides",
    );
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("strides", ints(&[0, 1]))]),
        "strides",
    );
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("pads", ints(&[1, 1, -1, 1]))]),
        "pads",
    );
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("dilations", ints(&[1, 1, 1]))]),
        "dilations",
    );
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("auto_pad", text("SAME"))]),
        "auto_pad",
    );
    attr_err(plan("Conv", f32s(&[x, w]), &[("group", int(0))]), "group");
    attr_err(plan("Conv", f32s(&[x, w]), &[("alpha", int(1))]), "alpha");
    attr_err(
        plan("Conv", f32s(&[x, w]), &[("output_padding", ints(&[1, 1]))]),
        "output_padding",
    );
    attr_err(
        plan(
            "ConvTranspose",
            f32s(&[x, &[4, 2, 3, 3]]),
            &[("output_shape", ints(&[7]))],
        ),
        "output_shape",
    );
    shape_err(plan("Conv", f32s(&[x, w]), &[("group", int(3))]));
    shape_err(plan(
        "Conv",
        f32s(&[x, &[3, 2, 3, 3]]),
        &[("group", int(2))],
    ));
    shape_err(plan("Conv", f32s(&[x, w, &[3]]), &[]));
    shape_err(plan("Conv", f32s(&[&[1, 4], &[2, 4]]), &[]));
    shape_err(plan(
        "Conv",
        f32s(&[&[1, 1, 2, 2, 2, 2], &[1, 1, 1, 1, 1, 1]]),
        &[],
    ));
    shape_err(plan("Conv", f32s(&[x, &[2, 4, 3]]), &[]));
    shape_err(plan("Conv", f32s(&[x, &[2, 4, 6, 3]]), &[]));
    shape_err(plan("Conv", f32s(&[x]), &[]));
    shape_err(plan("ConvTranspose", f32s(&[x, &[3, 2, 3, 3]]), &[]));
    shape_err(plan(
        "ConvTranspose",
        f32s(&[x, &[4, 2, 3, 3]]),
        &[("group", int(3))],
    ));
    shape_err(plan(
        "ConvTranspose",
        f32s(&[x, &[4, 2, 3, 3]]),
        &[("pads", ints(&[4, 4, 4, 4]))],
    ));
    for (xt, wt) in [
        (Dtype::I32, Dtype::I32),
        (Dtype::F32, Dtype::F16),
        (Dtype::I8, Dtype::I8),
    ] {
        let e = plan("Conv", vec![(x, xt), (w, wt)], &[]);
        assert!(
            matches!(&e, OpError::UnsupportedDtype(m) if m.contains("f32")),
            "{e:?}"
        );
    }
}

/// One ConvTranspose case: x shape, w shape, group, window, output_padding, bias.
fn check_convt(
    xs: &[usize],
    ws: &[usize],
    group: usize,
    win: &Win,
    out_pad: &[i64],
    dt: Dtype,
    seed: u64,
) {
    let sr = xs.len() - 2;
    let m = ws[1] * group;
    let out: Vec<usize> = (0..sr)
        .map(|i| {
            (win.s[i] * (xs[i + 2] as i64 - 1) + out_pad[i] + (ws[i + 2] as i64 - 1) * win.d[i] + 1
                - win.pb[i]
                - win.pe[i]) as usize
        })
        .collect();
    let x = data(numel(xs), seed, dt);
    let w = data(numel(ws), seed + 1, dt);
    let b = data(m, seed + 2, dt);
    let (xs64, ws64, bs) = (u64s(xs), u64s(ws), vec![m as u64]);
    let a = vec![
        ("group", int(group as i64)),
        ("strides", ints(&win.s)),
        ("dilations", ints(&win.d)),
        ("pads", ints(&win.pads_attr())),
        ("output_padding", ints(out_pad)),
    ];
    let req = request("ConvTranspose", &[(&xs64, dt), (&ws64, dt), (&bs, dt)], &a);
    let (plan, got) = run(&req, &[x.clone(), w.clone(), b.clone()]).unwrap();
    let want = reference::conv_transpose(&x, xs, &w, ws, Some(&b), group, win, &out);
    let mut shape = vec![xs[0] as u64, m as u64];
    shape.extend(out.iter().map(|&o| o as u64));
    assert_eq!(plan.outputs[0].shape, shape);
    let terms = (xs[1] / group * numel(&ws[2..])) as f64;
    assert_close(
        &got[0],
        &want,
        tol(dt) * terms.sqrt().max(1.0),
        &format!("ConvTranspose {dt:?} {xs:?}"),
    );
}

#[test]
fn conv_transpose_matches_the_reference_on_every_dtype() {
    for dt in FLOATS {
        check_convt(
            &[2, 3, 5],
            &[3, 2, 4],
            1,
            &Win::new(&[4]).s(&[3]).d(&[2]).pads(&[2, 1]),
            &[1],
            dt,
            1,
        );
        check_convt(
            &[1, 4, 4, 5],
            &[4, 3, 3, 2],
            2,
            &Win::new(&[3, 2]).s(&[2, 3]).pads(&[1, 0, 0, 2]),
            &[1, 2],
            dt,
            2,
        );
        check_convt(
            &[2, 2, 3, 2, 4],
            &[2, 2, 2, 3, 2],
            1,
            &Win::new(&[2, 3, 2]).s(&[2, 1, 2]).d(&[1, 2, 1]),
            &[0, 0, 1],
            dt,
            3,
        );
        check_convt(
            &[1, 6, 3, 3],
            &[6, 1, 3, 3],
            6,
            &Win::new(&[3, 3]).s(&[2, 2]).pads(&[1, 1, 1, 1]),
            &[1, 1],
            dt,
            4,
        );
        // stride and dilation sharing a factor
        check_convt(
            &[1, 2, 5, 4],
            &[2, 2, 3, 3],
            1,
            &Win::new(&[3, 3]).s(&[4, 3]).d(&[2, 3]).pads(&[1, 2, 0, 1]),
            &[0, 0],
            dt,
            6,
        );
        // more input channels than one GEMM depth slice (256), and one input position
        check_convt(
            &[1, 300, 2, 3],
            &[300, 4, 2, 2],
            1,
            &Win::new(&[2, 2]).s(&[2, 1]),
            &[0, 0],
            dt,
            7,
        );
        check_convt(
            &[2, 3, 1, 1],
            &[3, 4, 2, 2],
            1,
            &Win::new(&[2, 2]),
            &[0, 0],
            dt,
            8,
        );
        // wide enough for several input blocks
        check_convt(
            &[1, 8, 30, 40],
            &[8, 3, 2, 2],
            1,
            &Win::new(&[2, 2]).s(&[2, 2]),
            &[0, 0],
            dt,
            5,
        );
    }
}

#[test]
fn conv_transpose_output_shape_and_same_padding() {
    let x = data(2 * 3 * 4, 7, Dtype::F64);
    let w = data(2 * 3 * 3 * 3, 8, Dtype::F64);
    let go = |a: &[(&str, AttrValueExt)]| {
        let r = request(
            "ConvTranspose",
            &[(&[1, 2, 3, 4], Dtype::F64), (&[2, 3, 3, 3], Dtype::F64)],
            a,
        );
        let (plan, out) = run(&r, &[x.clone(), w.clone()]).unwrap();
        (plan.outputs[0].shape.clone(), out[0].clone())
    };
    let s = ("strides", ints(&[2, 2]));
    // natural (2*2+3, 2*3+3) = (7, 9); output_shape (6, 8): total (1, 1)
    // NOTSET puts the odd pad first: pads (1, 0) per axis
    assert_eq!(
        go(&[s.clone(), ("output_shape", ints(&[6, 8]))]),
        go(&[s.clone(), ("pads", ints(&[1, 1, 0, 0]))])
    );
    // SAME_UPPER: in*s = (6, 8), the odd pad last
    let upper = go(&[s.clone(), ("auto_pad", text("SAME_UPPER"))]);
    assert_eq!(upper, go(&[s.clone(), ("pads", ints(&[0, 0, 1, 1]))]));
    assert_eq!(
        upper,
        go(&[
            s.clone(),
            ("auto_pad", text("SAME_UPPER")),
            ("output_shape", ints(&[1, 3, 6, 8]))
        ])
    );
    assert_eq!(
        go(&[s.clone(), ("auto_pad", text("SAME_LOWER"))]),
        go(&[s.clone(), ("pads", ints(&[1, 1, 0, 0]))])
    );
    // a larger output_shape extends the output with zeros at the end (total -1: pads (0, -1))
    let (shape, big) = go(&[s.clone(), ("output_shape", ints(&[8, 9]))]);
    let (_, natural) = go(std::slice::from_ref(&s));
    assert_eq!(shape, vec![1, 3, 8, 9]);
    for c in 0..3 {
        for i in 0..8 {
            for j in 0..9 {
                let want = if i < 7 {
                    natural[(c * 7 + i) * 9 + j]
                } else {
                    0.0
                };
                assert_eq!(big[(c * 8 + i) * 9 + j], want);
            }
        }
    }
    assert_eq!(
        go(&[s.clone(), ("output_padding", ints(&[1, 0]))]).0,
        vec![1, 3, 8, 9]
    );
}
