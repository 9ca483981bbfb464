//! Pad against a naive reference (numpy semantics per axis, cropping for negative pads), every
//! mode and dtype, every form (attributes, inputs, axes, constant by pointer), and errors.

use super::util::*;
use umd_sdk::{AttrValueExt, Dtype, dtype};

/// numpy's pad index for mode `m` of an axis of `n` (None: the constant).
fn naive_index(m: &str, i: i64, n: i64) -> Option<usize> {
    if (0..n).contains(&i) {
        return Some(i as usize);
    }
    match m {
        "edge" => Some(i.clamp(0, n - 1) as usize),
        "wrap" => Some(i.rem_euclid(n) as usize),
        "reflect" => {
            // walk the mirror one step at a time
            let mut j = i;
            while !(0..n).contains(&j) {
                if n == 1 {
                    return Some(0);
                }
                j = if j < 0 { -j } else { 2 * (n - 1) - j };
            }
            Some(j as usize)
        }
        _ => None,
    }
}

fn naive_pad(
    x: &[u8],
    shape: &[u64],
    begin: &[i64],
    end: &[i64],
    m: &str,
    value: &[u8],
    s: usize,
) -> (Vec<u64>, Vec<u8>) {
    let oshape: Vec<u64> = (0..shape.len())
        .map(|d| (shape[d] as i64 + begin[d] + end[d]) as u64)
        .collect();
    let mut out = Vec::new();
    for o in 0..numel(&oshape) {
        let c = unravel(o, &oshape);
        let src: Option<Vec<usize>> = (0..shape.len())
            .map(|d| naive_index(m, c[d] as i64 - begin[d], shape[d] as i64))
            .collect();
        match src {
            Some(src) => out.extend_from_slice(elem(x, s, ravel(&src, shape))),
            None => out.extend_from_slice(value),
        }
    }
    (oshape, out)
}

#[test]
fn pad_every_mode_dtype_and_form() {
    let mut rng = Rng::new(7);
    for (t, dt) in all_dtypes().into_iter().enumerate() {
        for (mi, m) in ["constant", "reflect", "edge", "wrap"]
            .into_iter()
            .enumerate()
        {
            let rank = 1 + (t + mi) % 3;
            let shape = rng.shape(rank, 1, 5);
            let s = dtype::size(dt);
            // pads wider than the axis, and (cropping) negative ones that keep the axis non-empty
            let mut begin: Vec<i64> = (0..rank).map(|_| rng.range(0, 7)).collect();
            let mut end: Vec<i64> = (0..rank).map(|_| rng.range(0, 7)).collect();
            if t % 2 == 1 {
                begin[0] = -(rng.range(0, shape[0] as i64));
                end[0] = -(rng.range(0, shape[0] as i64 + begin[0]));
            }
            if (t + mi) % 3 == 0 {
                end[rank - 1] = 0;
            }
            let x = data(&mut rng, dt, numel(&shape));
            let cval = data(&mut rng, dt, 1);
            let pads: Vec<i64> = begin.iter().chain(&end).copied().collect();
            // opset 11+ form with the constant through a pointer
            let req = build(
                builder("Pad")
                    .opset(19)
                    .input(desc("x", &shape, dt))
                    .constant(desc("pads", &[2 * rank as u64], Dtype::I64), &ints(&pads))
                    .input(desc("v", &[], dt))
                    .attr("mode", text(m)),
            );
            let (plan, out) = run(&req, &[x.clone(), ints(&pads), cval.clone()]).unwrap();
            let (oshape, want) = naive_pad(&x, &shape, &begin, &end, m, &cval, s);
            assert_eq!(plan.outputs[0].shape, oshape);
            assert_eq!(out[0], want, "{dt:?} {m} {shape:?} pads {pads:?}");
            cuda(&req);
            // opset 2 form: attributes, the value as a float
            if dt != Dtype::Boolean {
                let req = build(
                    builder("Pad")
                        .opset(2)
                        .input(desc("x", &shape, dt))
                        .attr("mode", text(m))
                        .attr("pads", AttrValueExt::Ints(pads.clone()))
                        .attr("value", AttrValueExt::Float(3.0)),
                );
                let (_, out) = run(&req, std::slice::from_ref(&x)).unwrap();
                let (_, want) = naive_pad(&x, &shape, &begin, &end, m, &enc(dt, &[3.0]), s);
                assert_eq!(out[0], want, "{dt:?} {m} attribute form");
                cuda(&req);
            }
        }
    }
}

#[test]
fn pad_axes_input_and_absent_value() {
    let x: Vec<f64> = (0..6).map(|v| v as f64).collect();
    let req = build(
        builder("Pad")
            .opset(18)
            .input(desc("x", &[2, 3], Dtype::F32))
            .constant(desc("pads", &[2], Dtype::I64), &ints(&[1, 2]))
            .absent()
            .constant(desc("axes", &[1], Dtype::I64), &ints(&[-1])),
    );
    let (plan, out) = run(&req, &[enc(Dtype::F32, &x), ints(&[1, 2]), ints(&[-1])]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 6]);
    assert_eq!(
        dec(Dtype::F32, &out[0]),
        vec![0., 0., 1., 2., 0., 0., 0., 3., 4., 5., 0., 0.]
    );
    cuda(&req);
    // opset 1's `paddings`
    let req = build(
        builder("Pad")
            .opset(1)
            .input(desc("x", &[3], Dtype::I32))
            .attr("paddings", AttrValueExt::Ints(vec![1, 0]))
            .attr("mode", text("edge")),
    );
    let (_, out) = run(&req, &[enc(Dtype::I32, &[7., 8., 9.])]).unwrap();
    assert_eq!(dec(Dtype::I32, &out[0]), vec![7., 7., 8., 9.]);
}

#[test]
fn pad_empty_tensors_and_errors() {
    // constant padding of an empty axis fills it
    let req = build(
        builder("Pad")
            .input(desc("x", &[0, 2], Dtype::F32))
            .constant(desc("p", &[4], Dtype::I64), &ints(&[1, 0, 1, 0])),
    );
    let (plan, out) = run(&req, &[vec![], ints(&[1, 0, 1, 0])]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 2]);
    assert_eq!(dec(Dtype::F32, &out[0]), vec![0.; 4]);
    // cropping to nothing
    let req = build(
        builder("Pad")
            .input(desc("x", &[2, 2], Dtype::F32))
            .constant(desc("p", &[4], Dtype::I64), &ints(&[0, -1, 0, -1])),
    );
    let (plan, _) = run(
        &req,
        &[enc(Dtype::F32, &[1., 2., 3., 4.]), ints(&[0, -1, 0, -1])],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 0]);
    let p = |pads: &[i64], m: &str, shape: &[u64]| {
        run(
            &build(
                builder("Pad")
                    .input(desc("x", shape, Dtype::F32))
                    .constant(desc("p", &[pads.len() as u64], Dtype::I64), &ints(pads))
                    .attr("mode", text(m)),
            ),
            &[],
        )
    };
    assert_shape_err(p(&[1, 1], "constant", &[2, 2]));
    assert_shape_err(p(&[0, -3], "constant", &[2]));
    assert_shape_err(p(&[1, 0, 0, 0], "reflect", &[0, 2]));
    assert_attr_err(p(&[1, 1], "symmetric", &[2]), "mode");
    let r = run(
        &build(
            builder("Pad")
                .input(desc("x", &[2], Dtype::F32))
                .input(desc("p", &[2], Dtype::I64)),
        ),
        &[],
    );
    assert_shape_err(r); // pads without a value
    let r = run(
        &build(builder("Pad").input(desc("x", &[2], Dtype::F32))),
        &[],
    );
    assert_attr_err(r, "pads");
}
