//! RotaryEmbedding against [`super::reference::rotary_ref`].

use super::reference::*;
use super::*;

#[test]
fn rotary_matches_the_reference_in_every_form() {
    let (b, h, s, d) = (2usize, 3usize, 4usize, 8usize);
    for dt in ALL {
        let x = round(dt, &data(b * h * s * d, 1));
        for rd in [0usize, 4, 8] {
            let rdv = if rd == 0 { d } else { rd };
            let half = rdv / 2;
            for interleaved in [false, true] {
                for with_pos in [false, true] {
                    for three_d in [false, true] {
                        let rows = if with_pos { 20 } else { b * s };
                        let cos = round(dt, &data(rows * half, 2));
                        let sin = round(dt, &data(rows * half, 3));
                        let pos: Vec<i64> = (0..b * s).map(|i| ((i * 7) % 20) as i64).collect();
                        let mut r = Req::new("RotaryEmbedding");
                        let xin = if three_d {
                            r = r
                                .input(&[b as u64, s as u64, (h * d) as u64], dt)
                                .attr("num_heads", A::Int(h as i64));
                            to_3d(&x, b, h, s, d)
                        } else {
                            r = r.input(&[b as u64, h as u64, s as u64, d as u64], dt);
                            x.clone()
                        };
                        let cs: Vec<u64> = if with_pos {
                            vec![rows as u64, half as u64]
                        } else {
                            vec![b as u64, s as u64, half as u64]
                        };
                        r = r.input(&cs, dt).input(&cs, dt);
                        let mut vals = vec![xin, cos.clone(), sin.clone()];
                        if with_pos {
                            r = r.input(&[b as u64, s as u64], Dtype::I64);
                            vals.push(pos.iter().map(|&p| p as f64).collect());
                        }
                        if interleaved {
                            r = r.attr("interleaved", A::Int(1));
                        }
                        if rd > 0 {
                            r = r.attr("rotary_embedding_dim", A::Int(rd as i64));
                        }
                        let what = format!(
                            "{dt:?} rd {rd} interleaved {interleaved} pos {with_pos} 3d {three_d}"
                        );
                        let got = r.run(&vals).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                        let want = rotary_ref(
                            &x,
                            [b, h, s, d],
                            &cos,
                            &sin,
                            with_pos.then_some(&pos[..]),
                            rdv,
                            interleaved,
                        );
                        let want = if three_d {
                            to_3d(&want, b, h, s, d)
                        } else {
                            want
                        };
                        assert_close(&got[0].1, &want, dt, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn rotary_out_of_range_positions_give_nan_and_empty_inputs_work() {
    let r = Req::new("RotaryEmbedding")
        .input(&[1, 1, 2, 2], Dtype::F32)
        .input(&[2, 1], Dtype::F32)
        .input(&[2, 1], Dtype::F32)
        .input(&[1, 2], Dtype::I64);
    let got = r
        .run(&[
            vec![1., 2., 3., 4.],
            vec![1., 1.],
            vec![0., 0.],
            vec![1., 5.],
        ])
        .unwrap();
    assert_eq!(&got[0].1[..2], &[1., 2.]);
    assert!(got[0].1[2..].iter().all(|v| v.is_nan()));
    let got = Req::new("RotaryEmbedding")
        .input(&[0, 2, 3, 4], Dtype::F32)
        .input(&[0, 3, 2], Dtype::F32)
        .input(&[0, 3, 2], Dtype::F32)
        .run(&[vec![], vec![], vec![]])
        .unwrap();
    assert!(got[0].1.is_empty());
}

#[test]
fn rotary_refuses_bad_caches_and_attributes() {
    let f = Dtype::F32;
    let base = || Req::new("RotaryEmbedding").input(&[2, 3, 4, 8], f);
    let e = base()
        .input(&[2, 4, 3], f)
        .input(&[2, 4, 3], f)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    let e = base()
        .input(&[2, 4, 4], f)
        .input(&[2, 4, 4], f)
        .attr("rotary_embedding_dim", A::Int(3))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)), "{e:?}");
    let e = base()
        .input(&[9, 4], f)
        .input(&[9, 4], f)
        .input(&[2, 4], Dtype::I32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)), "{e:?}");
    let e = Req::new("RotaryEmbedding")
        .input(&[2, 4, 24], f)
        .input(&[2, 4, 4], f)
        .input(&[2, 4, 4], f)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("num_heads")));
    let e = base()
        .input(&[2, 4, 4], f)
        .input(&[2, 4, 3], f)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)), "{e:?}");
    assert!(
        base()
            .input(&[2, 4, 4], f)
            .input(&[2, 4, 4], f)
            .plan()
            .is_ok()
    );
}
