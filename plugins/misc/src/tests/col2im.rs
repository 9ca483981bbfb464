//! Col2Im against a naive scatter (every column entry added to its image position).

use super::*;

#[allow(clippy::too_many_arguments)]
fn scatter(
    x: &[f64],
    n: usize,
    c: usize,
    image: &[i64],
    block: &[i64],
    st: &[i64],
    pads: &[i64],
    dil: &[i64],
) -> Vec<f64> {
    let nd = image.len();
    let nb: Vec<i64> = (0..nd)
        .map(|d| (image[d] + pads[d] + pads[d + nd] - dil[d] * (block[d] - 1) - 1) / st[d] + 1)
        .collect();
    let k: i64 = block.iter().product();
    let l: i64 = nb.iter().product();
    let pix: i64 = image.iter().product();
    let mut y = vec![0.0; n * c * pix as usize];
    for b in 0..n {
        for ch in 0..c {
            for kk in 0..k {
                for blk in 0..l {
                    let (mut kr, mut br, mut p, mut ok) = (kk, blk, 0i64, true);
                    let mut kd = vec![0; nd];
                    let mut bd = vec![0; nd];
                    for d in (0..nd).rev() {
                        kd[d] = kr % block[d];
                        kr /= block[d];
                        bd[d] = br % nb[d];
                        br /= nb[d];
                    }
                    for d in 0..nd {
                        let pos = bd[d] * st[d] - pads[d] + kd[d] * dil[d];
                        ok &= pos >= 0 && pos < image[d];
                        p = p * image[d] + pos;
                    }
                    if ok {
                        let xi =
                            ((b * c + ch) * k as usize + kk as usize) * l as usize + blk as usize;
                        y[(b * c + ch) * pix as usize + p as usize] += x[xi];
                    }
                }
            }
        }
    }
    y
}

#[test]
fn col2im_matches_naive() {
    type Case<'a> = (&'a [i64], &'a [i64], &'a [i64], &'a [i64], &'a [i64]);
    let cases: &[Case] = &[
        (&[5, 5], &[1, 5], &[1, 1], &[0, 0, 0, 0], &[1, 1]),
        (&[5, 5], &[3, 3], &[2, 2], &[0, 0, 0, 0], &[1, 1]),
        (&[5, 5], &[1, 5], &[1, 1], &[0, 1, 0, 1], &[1, 1]),
        (&[6, 6], &[2, 2], &[1, 1], &[0, 0, 0, 0], &[1, 5]),
        (
            &[3, 4, 5],
            &[1, 1, 5],
            &[1, 1, 1],
            &[0, 0, 0, 0, 0, 0],
            &[1, 1, 1],
        ),
        (&[7], &[3], &[2], &[1, 2], &[2]),
    ];
    for dt in crate::common::FLOATS {
        for (image, block, st, pads, dil) in cases {
            let nd = image.len();
            let nb: Vec<i64> = (0..nd)
                .map(|d| {
                    (image[d] + pads[d] + pads[d + nd] - dil[d] * (block[d] - 1) - 1) / st[d] + 1
                })
                .collect();
            let (n, c) = (2usize, 2usize);
            let k: i64 = block.iter().product();
            let l: i64 = nb.iter().product();
            let xs = [n as u64, (c as i64 * k) as u64, l as u64];
            let x = quantize(dt, &sample(xs.iter().product::<u64>() as usize, 5));
            let enc_i = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            let req = PlanRequestExt::builder("Col2Im")
                .input(desc(&xs, dt))
                .constant(desc(&[nd as u64], Dtype::I64), &enc_i(image))
                .constant(desc(&[nd as u64], Dtype::I64), &enc_i(block))
                .attr("strides", AttrValueExt::Ints(st.to_vec()))
                .attr("pads", AttrValueExt::Ints(pads.to_vec()))
                .attr("dilations", AttrValueExt::Ints(dil.to_vec()))
                .build(target());
            let to_f = |v: &[i64]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
            let what = format!("{dt:?} {image:?} {block:?}");
            let (plan, got) = run(&req, &[x.clone(), to_f(image), to_f(block)])
                .unwrap_or_else(|e| panic!("{what}: {e:?}"));
            let mut out = vec![n as u64, c as u64];
            out.extend(image.iter().map(|v| *v as u64));
            assert_eq!(plan.outputs[0].shape, out);
            let want = scatter(&x, n, c, image, block, st, pads, dil);
            assert_close(&got[0], &quantize(dt, &want), tol(dt) * 4.0, &what);
        }
    }
    let enc_i = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let req = PlanRequestExt::builder("Col2Im")
        .input(desc(&[1, 5, 5], Dtype::F32))
        .constant(desc(&[2], Dtype::I64), &enc_i(&[5, 5]))
        .constant(desc(&[2], Dtype::I64), &enc_i(&[1, 5]))
        .attr("strides", AttrValueExt::Ints(vec![0, 1]))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(m) if m.contains("strides")));
    let req = PlanRequestExt::builder("Col2Im")
        .input(desc(&[1, 5, 4], Dtype::F32))
        .constant(desc(&[2], Dtype::I64), &enc_i(&[5, 5]))
        .constant(desc(&[2], Dtype::I64), &enc_i(&[1, 5]))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(_)));
}

#[test]
fn det_matches_cofactor_expansion() {
    fn cof(a: &[f64], m: usize) -> f64 {
        if m == 1 {
            return a[0];
        }
        (0..m)
            .map(|j| {
                let minor: Vec<f64> = (1..m)
                    .flat_map(|i| (0..m).filter(move |c| *c != j).map(move |c| (i, c)))
                    .map(|(i, c)| a[i * m + c])
                    .collect();
                let s = if j % 2 == 0 { 1.0 } else { -1.0 };
                s * a[j] * cof(&minor, m - 1)
            })
            .sum()
    }
    for dt in crate::common::FLOATS {
        for shape in [
            &[2u64, 2][..],
            &[3, 2, 2],
            &[2, 4, 4],
            &[1, 1],
            &[0, 3, 3],
            &[3, 3],
        ] {
            let r = shape.len();
            let m = shape[r - 1] as usize;
            let batch: usize = shape[..r - 2].iter().product::<u64>() as usize;
            let mut x = quantize(dt, &sample(batch * m * m, m as u64));
            if shape == [3, 3] {
                x = vec![1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 0.0, 1.0, 1.0]; // singular
            }
            let req = PlanRequestExt::builder("Det")
                .input(desc(shape, dt))
                .build(target());
            let (plan, got) = run(&req, &[x.clone()]).unwrap();
            assert_eq!(plan.outputs[0].shape, shape[..r - 2].to_vec());
            let want: Vec<f64> = (0..batch)
                .map(|b| cof(&x[b * m * m..(b + 1) * m * m], m))
                .collect();
            assert_close(
                &got[0],
                &quantize(dt, &want),
                tol(dt) * 4.0,
                &format!("{dt:?} {shape:?}"),
            );
        }
    }
    let req = PlanRequestExt::builder("Det")
        .input(desc(&[2, 3], Dtype::F32))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(_)));
}
