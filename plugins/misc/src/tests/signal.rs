//! DFT against a naive complex reference (fft, ifft, one-sided, irfft, dft_length padding and
//! truncation, the axis attribute and input forms), every float dtype.

use super::*;

type Cx = (f64, f64);

/// Naive forward/inverse DFT of `x` with length `l` (zero-padded or truncated).
fn dft_ref(x: &[Cx], l: usize, inverse: bool) -> Vec<Cx> {
    let sign = if inverse { 1.0 } else { -1.0 };
    (0..l)
        .map(|k| {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, &(a, b)) in x.iter().enumerate().take(l) {
                let ang = sign * 2.0 * std::f64::consts::PI * (j * k) as f64 / l as f64;
                re += a * ang.cos() - b * ang.sin();
                im += a * ang.sin() + b * ang.cos();
            }
            if inverse {
                (re / l as f64, im / l as f64)
            } else {
                (re, im)
            }
        })
        .collect()
}

/// Naive irfft: the Hermitian extension of the first l/2+1 values, inverse DFT, real part.
fn irfft_ref(x: &[Cx], l: usize) -> Vec<f64> {
    let full: Vec<Cx> = (0..l)
        .map(|j| {
            let (src, conj) = if j <= l / 2 {
                (j, false)
            } else {
                (l - j, true)
            };
            let v = x.get(src).copied().unwrap_or((0.0, 0.0));
            if conj { (v.0, -v.1) } else { v }
        })
        .collect();
    let mut full = full;
    full[0].1 = 0.0;
    if l.is_multiple_of(2) {
        full[l / 2].1 = 0.0;
    }
    dft_ref(&full, l, true).into_iter().map(|c| c.0).collect()
}

fn req(
    shape: &[u64],
    dt: Dtype,
    axis: Option<i64>,
    attr_axis: Option<i64>,
    len: Option<i64>,
    inverse: bool,
    onesided: bool,
) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("DFT").input(desc(shape, dt));
    match len {
        Some(l) => b = b.constant(desc(&[], Dtype::I64), &l.to_le_bytes()),
        None if axis.is_some() => b = b.absent(),
        None => {}
    }
    if let Some(a) = axis {
        b = b.constant(desc(&[], Dtype::I64), &a.to_le_bytes());
    }
    if let Some(a) = attr_axis {
        b = b.attr("axis", int(a)).opset(19);
    }
    b.attr("inverse", int(inverse as i64))
        .attr("onesided", int(onesided as i64))
        .build(target())
}

#[test]
fn dft_matches_naive() {
    // shape (outer=2, n, inner=3, c); the transform runs along axis 1
    for dt in crate::common::FLOATS {
        for (n, c) in [(5u64, 1u64), (6, 2), (1, 2), (8, 1)] {
            for len in [None, Some(4i64), Some(9)] {
                for (inverse, onesided) in
                    [(false, false), (false, true), (true, false), (true, true)]
                {
                    let shape = [2, n, 3, c];
                    let numel = (2 * n * 3 * c) as usize;
                    let x = quantize(dt, &sample(numel, n + c));
                    let r = req(&shape, dt, Some(1), None, len, inverse, onesided);
                    let what =
                        format!("{dt:?} n {n} c {c} len {len:?} inv {inverse} one {onesided}");
                    let mut inputs = vec![x.clone()];
                    if let Some(l) = len {
                        inputs.push(vec![l as f64]);
                    }
                    inputs.push(vec![1.0]);
                    let (plan, got) = run(&r, &inputs).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                    let l = len.map_or(
                        if inverse && onesided {
                            2 * (n as usize - 1)
                        } else {
                            n as usize
                        },
                        |v| v as usize,
                    );
                    if l == 0 {
                        continue;
                    }
                    let n_out = match (inverse, onesided) {
                        (false, true) => l / 2 + 1,
                        _ => l,
                    };
                    let c_out = if inverse && onesided { 1 } else { 2 };
                    assert_eq!(
                        plan.outputs[0].shape,
                        vec![2, n_out as u64, 3, c_out],
                        "{what}"
                    );
                    let mut want = vec![0.0; 2 * n_out * 3 * c_out as usize];
                    for o in 0..2 {
                        for i in 0..3 {
                            let line: Vec<Cx> = (0..n as usize)
                                .map(|j| {
                                    let b = ((o * n as usize + j) * 3 + i) * c as usize;
                                    (x[b], if c == 2 { x[b + 1] } else { 0.0 })
                                })
                                .collect();
                            let put = |k: usize, part: usize| {
                                ((o * n_out + k) * 3 + i) * c_out as usize + part
                            };
                            if inverse && onesided {
                                for (k, v) in irfft_ref(&line, l).into_iter().enumerate() {
                                    want[put(k, 0)] = v;
                                }
                            } else {
                                for (k, v) in dft_ref(&line, l, inverse)
                                    .into_iter()
                                    .take(n_out)
                                    .enumerate()
                                {
                                    want[put(k, 0)] = v.0;
                                    want[put(k, 1)] = v.1;
                                }
                            }
                        }
                    }
                    let t = match dt {
                        Dtype::F64 => 1e-10,
                        _ => tol(dt) * 4.0,
                    };
                    assert_close(&got[0], &quantize(dt, &want), t, &what);
                }
            }
        }
    }
}

#[test]
fn dft_axis_forms_and_node_values() {
    // test_dft_opset19: x = arange(100) as (1, 10, 10, 1), axis attribute 1; bin 0 sums columns.
    let x: Vec<f64> = (0..100).map(|v| v as f64).collect();
    let r = req(
        &[1, 10, 10, 1],
        Dtype::F32,
        None,
        Some(1),
        None,
        false,
        false,
    );
    let (plan, got) = run(&r, std::slice::from_ref(&x)).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![1, 10, 10, 2]);
    for col in 0..10 {
        assert_eq!(
            got[0][col * 2],
            (0..10).map(|j| (j * 10 + col) as f64).sum::<f64>()
        );
        assert_eq!(got[0][col * 2 + 1], 0.0);
    }
    // bin 5 of a real arange column: real -50, imaginary 50·cot(π/2) = 0 (within 1e-7)
    assert!((got[0][(5 * 10) * 2] + 50.0).abs() < 1e-4);
    assert!(got[0][(5 * 10) * 2 + 1].abs() < 1e-7);
    // opset 20 default axis -2 = 1 here (rank 3)
    let r = PlanRequestExt::builder("DFT")
        .input(desc(&[2, 4, 1], Dtype::F64))
        .build(target());
    let (plan, _) = run(&r, &[vec![1.0; 8]]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 4, 2]);
    let e = err(&req(
        &[1, 4, 2],
        Dtype::F32,
        Some(2),
        None,
        None,
        false,
        false,
    ));
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("last")));
    let e = err(&req(
        &[1, 4, 3],
        Dtype::F32,
        Some(1),
        None,
        None,
        false,
        false,
    ));
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = err(&req(
        &[1, 4, 2],
        Dtype::F32,
        Some(1),
        None,
        Some(0),
        false,
        false,
    ));
    assert!(matches!(e, OpError::InvalidShape(_)));
}

#[test]
fn stft_matches_naive_frames() {
    for dt in [Dtype::F32, Dtype::F64] {
        for (c, with_window, onesided) in [
            (1u64, false, true),
            (1, true, true),
            (2, true, false),
            (2, false, false),
        ] {
            let (batch, len, fl, step) = (2u64, 20u64, 6u64, 3u64);
            let x = quantize(dt, &sample((batch * len * c) as usize, c));
            let w: Vec<f64> = quantize(
                dt,
                &(0..fl).map(|j| 0.5 + 0.1 * j as f64).collect::<Vec<_>>(),
            );
            let mut b = PlanRequestExt::builder("STFT")
                .input(desc(&[batch, len, c], dt))
                .constant(desc(&[], Dtype::I64), &(step as i64).to_le_bytes());
            let mut inputs = vec![x.clone(), vec![step as f64]];
            if with_window {
                b = b.input(desc(&[fl], dt));
                inputs.push(w.clone());
            } else {
                b = b
                    .absent()
                    .constant(desc(&[], Dtype::I64), &(fl as i64).to_le_bytes());
                inputs.push(vec![fl as f64]);
            }
            let req = b.attr("onesided", int(onesided as i64)).build(target());
            let (plan, got) = run(&req, &inputs).unwrap();
            let frames = 1 + (len - fl) / step;
            let bins = if onesided { fl / 2 + 1 } else { fl };
            assert_eq!(plan.outputs[0].shape, vec![batch, frames, bins, 2]);
            let mut want = Vec::new();
            for bb in 0..batch {
                for f in 0..frames {
                    let frame: Vec<Cx> = (0..fl)
                        .map(|j| {
                            let i = ((bb * len + f * step + j) * c) as usize;
                            let wj = if with_window { w[j as usize] } else { 1.0 };
                            (x[i] * wj, if c == 2 { x[i + 1] * wj } else { 0.0 })
                        })
                        .collect();
                    for v in dft_ref(&frame, fl as usize, false)
                        .into_iter()
                        .take(bins as usize)
                    {
                        want.extend([v.0, v.1]);
                    }
                }
            }
            assert_close(
                &got[0],
                &quantize(dt, &want),
                tol(dt) * 4.0,
                &format!("{dt:?} c {c} win {with_window}"),
            );
        }
    }
}
