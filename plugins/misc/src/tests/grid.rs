//! GridSample and AffineGrid against the ONNX node-test values (hand-checked there) and
//! properties (identity grids reproduce the input, 2-D and 3-D agree).

use super::*;

const X: [f64; 6] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
const GRID_PAD: [f64; 16] = [
    -10.0, -10.0, -5.0, -5.0, -0.2, -0.2, 10.0, 10.0, 10.0, 10.0, -0.2, -0.2, 5.0, 5.0, 10.0, 10.0,
];
const GRID_MODE: [f64; 16] = [
    -1.0, -1.0, -0.5, -0.5, -0.2, -0.2, 0.0, 0.0, 0.0, 0.0, -0.2, -0.2, 0.5, 0.5, 1.0, 1.0,
];

fn sample_req(xs: &[u64], gs: &[u64], dt: Dtype, attrs: &[(&str, AttrValueExt)]) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("GridSample")
        .input(desc(xs, dt))
        .input(desc(gs, dt));
    for (n, v) in attrs {
        b = b.attr(n, v.clone());
    }
    b.build(target())
}

#[test]
fn gridsample_node_test_values() {
    type Case<'a> = (&'a [(&'a str, AttrValueExt)], &'a [f64; 16], [f64; 8]);
    let cases: &[Case] = &[
        (&[], &GRID_PAD, [0.0, 0.0, 1.7, 0.0, 0.0, 1.7, 0.0, 0.0]),
        (
            &[("padding_mode", text("border"))],
            &GRID_PAD,
            [0.0, 0.0, 1.7, 5.0, 5.0, 1.7, 5.0, 5.0],
        ),
        (
            &[("padding_mode", text("reflection"))],
            &GRID_PAD,
            [2.5, 0.0, 1.7, 2.5, 2.5, 1.7, 5.0, 2.5],
        ),
        (
            &[("mode", text("linear"))],
            &GRID_MODE,
            [0.0, 0.5, 1.7, 2.5, 2.5, 1.7, 4.5, 1.25],
        ),
        (
            &[("mode", text("bilinear"))],
            &GRID_MODE,
            [0.0, 0.5, 1.7, 2.5, 2.5, 1.7, 4.5, 1.25],
        ),
        (
            &[("mode", text("linear")), ("align_corners", int(1))],
            &GRID_MODE,
            [0.0, 1.25, 2.0, 2.5, 2.5, 2.0, 3.75, 5.0],
        ),
        (
            &[("mode", text("nearest"))],
            &GRID_MODE,
            [0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 5.0, 0.0],
        ),
        (
            &[("mode", text("cubic"))],
            &GRID_MODE,
            [
                -0.1406, 0.3828, 1.7556, 2.9688, 2.9688, 1.7556, 5.1445, 1.3906,
            ],
        ),
        (
            &[("mode", text("bicubic"))],
            &GRID_MODE,
            [
                -0.1406, 0.3828, 1.7556, 2.9688, 2.9688, 1.7556, 5.1445, 1.3906,
            ],
        ),
    ];
    for dt in crate::common::FLOATS {
        for (attrs, grid, want) in cases {
            let req = sample_req(&[1, 1, 3, 2], &[1, 2, 4, 2], dt, attrs);
            let what = format!("{attrs:?} {dt:?}");
            let (plan, got) = run(&req, &[X.to_vec(), grid.to_vec()]).unwrap();
            assert_eq!(plan.outputs[0].shape, vec![1, 1, 2, 4]);
            let t = match dt {
                Dtype::F32 | Dtype::F64 => 1e-4, // the node test's values are rounded
                Dtype::F16 => 5e-3,
                _ => 3e-2,
            };
            assert_close(&got[0], want, t, &what);
        }
    }
}

/// The identity grid (AffineGrid of the identity theta) samples the input back, in every mode,
/// padding and alignment, 2-D and 3-D, several batches and channels.
#[test]
fn identity_grid_reproduces_the_input() {
    for sp in [&[3u64, 4][..], &[2, 3, 4]] {
        let nd = sp.len();
        let (n, c) = (2u64, 3u64);
        let mut theta = Vec::new();
        for _ in 0..n {
            for k in 0..nd {
                for j in 0..=nd {
                    theta.push(if j == k { 1.0 } else { 0.0 });
                }
            }
        }
        let mut size = vec![n as i64, c as i64];
        size.extend(sp.iter().map(|v| *v as i64));
        let size_bytes: Vec<u8> = size.iter().flat_map(|v| v.to_le_bytes()).collect();
        for align in [0, 1] {
            let req = PlanRequestExt::builder("AffineGrid")
                .input(desc(&[n, nd as u64, nd as u64 + 1], Dtype::F64))
                .constant(desc(&[size.len() as u64], Dtype::I64), &size_bytes)
                .attr("align_corners", int(align))
                .build(target());
            let (plan, g) = run(
                &req,
                &[theta.clone(), size.iter().map(|v| *v as f64).collect()],
            )
            .unwrap();
            let mut gshape = vec![n];
            gshape.extend(sp);
            gshape.push(nd as u64);
            assert_eq!(plan.outputs[0].shape, gshape);
            let mut xs_shape = vec![n, c];
            xs_shape.extend(sp);
            let numel = xs_shape.iter().product::<u64>() as usize;
            let x = sample(numel, 11);
            for mode in ["nearest", "linear", "cubic"] {
                for pad in ["zeros", "border", "reflection"] {
                    let req = sample_req(
                        &xs_shape,
                        &gshape,
                        Dtype::F64,
                        &[
                            ("mode", text(mode)),
                            ("padding_mode", text(pad)),
                            ("align_corners", int(align)),
                        ],
                    );
                    let what = format!("{sp:?} {mode} {pad} align {align}");
                    let (_, y) = run(&req, &[x.clone(), g[0].clone()]).unwrap();
                    assert_close(&y[0], &x, 1e-9, &what);
                }
            }
        }
    }
}

#[test]
fn affine_grid_node_values() {
    // theta [[1, 0, 0.5], [0, 2, 0]] over H=2, W=3, align_corners=0:
    // x = -1 + (2i + 1)/3 (+0.5), y = 2 * (-1 + (2j + 1)/2)
    let theta = vec![1.0, 0.0, 0.5, 0.0, 2.0, 0.0];
    let size: Vec<u8> = [1i64, 1, 2, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let req = PlanRequestExt::builder("AffineGrid")
        .input(desc(&[1, 2, 3], Dtype::F32))
        .constant(desc(&[4], Dtype::I64), &size)
        .build(target());
    let (_, g) = run(&req, &[theta, vec![1.0, 1.0, 2.0, 3.0]]).unwrap();
    let mut want = Vec::new();
    for j in 0..2 {
        for i in 0..3 {
            want.push(-1.0 + (2.0 * i as f64 + 1.0) / 3.0 + 0.5);
            want.push(2.0 * (-1.0 + (2.0 * j as f64 + 1.0) / 2.0));
        }
    }
    assert_close(&g[0], &want, 1e-6, "affine 2-D");
}

#[test]
fn grid_errors_and_empty() {
    let e = err(&sample_req(
        &[1, 1, 3, 2],
        &[1, 2, 4, 2],
        Dtype::F32,
        &[("mode", text("area"))],
    ));
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("mode")));
    let e = err(&sample_req(&[1, 1, 3, 2], &[1, 2, 4, 3], Dtype::F32, &[]));
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = err(&sample_req(&[1, 1, 3], &[1, 2, 1], Dtype::F32, &[]));
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = err(&sample_req(&[1, 1, 3, 2], &[1, 2, 4, 2], Dtype::I32, &[]));
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let (plan, y) = run(
        &sample_req(&[0, 2, 3, 2], &[0, 2, 4, 2], Dtype::F32, &[]),
        &[vec![], vec![]],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0, 2, 2, 4]);
    assert!(y[0].is_empty());
    let size: Vec<u8> = [1i64, 1, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let req = PlanRequestExt::builder("AffineGrid")
        .input(desc(&[1, 2, 3], Dtype::F32))
        .constant(desc(&[3], Dtype::I64), &size)
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(_)));
}

fn roi_req(dt: Dtype, nr: u64, attrs: &[(&str, AttrValueExt)]) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("RoiAlign")
        .input(desc(&[2, 1, 6, 8], dt))
        .input(desc(&[nr, 4], dt))
        .input(desc(&[nr], Dtype::I64));
    for (n, v) in attrs {
        b = b.attr(n, v.clone());
    }
    b.build(target())
}

/// Bilinear sampling of a linear image is exact: the average over a bin's samples of the
/// image `x + 10·y + 100·batch` is that function at the mean sample position.
#[test]
fn roi_align_on_a_linear_image() {
    let x: Vec<f64> = (0..96)
        .map(|i| (i % 8) as f64 + 10.0 * ((i / 8) % 6) as f64 + 100.0 * (i / 48) as f64)
        .collect();
    let rois = vec![1.0, 1.0, 5.0, 4.0, 0.5, 2.0, 6.5, 5.0];
    for dt in [Dtype::F32, Dtype::F64] {
        for half in [false, true] {
            let ctm = if half {
                "half_pixel"
            } else {
                "output_half_pixel"
            };
            let attrs = [
                ("output_height", int(2)),
                ("output_width", int(3)),
                ("sampling_ratio", int(2)),
                ("coordinate_transformation_mode", text(ctm)),
            ];
            let (plan, got) = run(
                &roi_req(dt, 2, &attrs),
                &[x.clone(), rois.clone(), vec![0.0, 1.0]],
            )
            .unwrap();
            assert_eq!(plan.outputs[0].shape, vec![2, 1, 2, 3]);
            let off = if half { 0.5 } else { 0.0 };
            for r in 0..2 {
                let (sw, sh) = (rois[r * 4] - off, rois[r * 4 + 1] - off);
                let (rw, rh) = (rois[r * 4 + 2] - off - sw, rois[r * 4 + 3] - off - sh);
                for ph in 0..2 {
                    for pw in 0..3 {
                        let (bh, bw) = (rh / 2.0, rw / 3.0);
                        let mut s = 0.0;
                        for iy in 0..2 {
                            for ix in 0..2 {
                                let yy = (sh + ph as f64 * bh + (iy as f64 + 0.5) * bh / 2.0)
                                    .clamp(0.0, 5.0);
                                let xx = (sw + pw as f64 * bw + (ix as f64 + 0.5) * bw / 2.0)
                                    .clamp(0.0, 7.0);
                                s += xx + 10.0 * yy + 100.0 * r as f64;
                            }
                        }
                        let g = got[0][r * 6 + ph * 3 + pw];
                        assert!(
                            (g - s / 4.0).abs() < 1e-4,
                            "{dt:?} {ctm} roi {r} ({ph},{pw}): {g} vs {}",
                            s / 4.0
                        );
                    }
                }
            }
        }
    }
    let e = err(&roi_req(Dtype::F32, 1, &[("mode", text("median"))]));
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("mode")));
    let (_, got) = run(
        &roi_req(
            Dtype::F32,
            1,
            &[("mode", text("max")), ("sampling_ratio", int(1))],
        ),
        &[vec![2.0; 96], vec![2.0, 2.0, 3.0, 3.0], vec![0.0]],
    )
    .unwrap();
    // one sample at the bin centre (2.0, 2.0) in half_pixel: corner weights 1, 0, 0, 0
    assert_eq!(got[0], vec![2.0]);
}
