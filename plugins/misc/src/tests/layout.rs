//! CenterCropPad and ReverseSequence against naive references, every element size.

use super::*;

fn unravel(mut i: usize, shape: &[u64]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d] as usize;
        i /= shape[d] as usize;
    }
    idx
}

fn ravel(idx: &[usize], shape: &[u64]) -> usize {
    idx.iter()
        .zip(shape)
        .fold(0, |acc, (i, d)| acc * *d as usize + i)
}

#[test]
fn center_crop_pad_matches_naive() {
    type Case<'a> = (&'a [u64], &'a [i64], Option<&'a [i64]>);
    let cases: &[Case] = &[
        (&[20, 10, 3], &[10, 7, 3], None),
        (&[10, 7, 3], &[20, 10, 3], None),
        (&[20, 8, 3], &[10, 10, 3], None),
        (&[20, 8, 3], &[10, 9], Some(&[0, 1])),
        (&[3, 20, 8], &[10, 9], Some(&[-2, -1])),
        (&[5, 0], &[3], Some(&[0])),
        (&[4], &[0], None),
    ];
    for dt in [Dtype::F32, Dtype::U8, Dtype::F16, Dtype::I64] {
        for (shape, sizes, axes) in cases {
            let bytes: Vec<u8> = sizes.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut b = PlanRequestExt::builder("CenterCropPad")
                .input(desc(shape, dt))
                .constant(desc(&[sizes.len() as u64], Dtype::I64), &bytes);
            if let Some(a) = axes {
                b = b.attr("axes", AttrValueExt::Ints(a.to_vec()));
            }
            let req = b.build(target());
            let n: usize = shape.iter().product::<u64>() as usize;
            let x: Vec<f64> = (0..n).map(|v| (v % 100 + 1) as f64).collect();
            let (plan, got) = run(
                &req,
                &[x.clone(), sizes.iter().map(|v| *v as f64).collect()],
            )
            .unwrap();
            let r = shape.len();
            let ax: Vec<usize> = axes.map_or((0..r).collect(), |a| {
                a.iter().map(|v| v.rem_euclid(r as i64) as usize).collect()
            });
            let mut out = shape.to_vec();
            for (a, s) in ax.iter().zip(sizes.iter()) {
                out[*a] = *s as u64;
            }
            assert_eq!(plan.outputs[0].shape, out);
            let want: Vec<f64> = (0..out.iter().product::<u64>() as usize)
                .map(|e| {
                    let o = unravel(e, &out);
                    let mut i = Vec::new();
                    for d in 0..r {
                        let (dim, s) = (shape[d] as i64, out[d] as i64);
                        let v = o[d] as i64
                            + if s <= dim {
                                (dim - s) / 2
                            } else {
                                -((s - dim) / 2)
                            };
                        if v < 0 || v >= dim {
                            return 0.0;
                        }
                        i.push(v as usize);
                    }
                    x[ravel(&i, shape)]
                })
                .collect();
            assert_eq!(got[0], want, "{shape:?} {sizes:?}");
        }
    }
    // test_center_crop_pad_crop_and_pad: [20, 8, 3] -> [10, 10, 3]: rows 5..15, columns padded 1 each side
    let e = err(&PlanRequestExt::builder("CenterCropPad")
        .input(desc(&[2, 3], Dtype::F32))
        .constant(desc(&[1], Dtype::I64), &3i64.to_le_bytes())
        .build(target()));
    assert!(matches!(e, OpError::InvalidShape(_)));
}

#[test]
fn reverse_sequence_matches_naive() {
    for dt in [Dtype::F32, Dtype::Boolean, Dtype::I16, Dtype::F64] {
        for (batch, time) in [(1i64, 0i64), (0, 1)] {
            let shape: [u64; 3] = if batch == 1 { [4, 3, 2] } else { [3, 4, 2] };
            let lens = [4i64, 0, 2];
            let n = 24;
            let x: Vec<f64> = (0..n)
                .map(|v| {
                    if dt == Dtype::Boolean {
                        (v % 2) as f64
                    } else {
                        v as f64
                    }
                })
                .collect();
            let req = PlanRequestExt::builder("ReverseSequence")
                .input(desc(&shape, dt))
                .input(desc(&[3], Dtype::I64))
                .attr("batch_axis", int(batch))
                .attr("time_axis", int(time))
                .build(target());
            let (_, got) =
                run(&req, &[x.clone(), lens.iter().map(|v| *v as f64).collect()]).unwrap();
            let want: Vec<f64> = (0..n)
                .map(|e| {
                    let mut i = unravel(e, &shape);
                    let (t, b) = (i[time as usize], i[batch as usize]);
                    let l = lens[b] as usize;
                    if t < l {
                        i[time as usize] = l - 1 - t;
                    }
                    x[ravel(&i, &shape)]
                })
                .collect();
            assert_eq!(got[0], want, "{dt:?} batch {batch}");
        }
    }
    let req = PlanRequestExt::builder("ReverseSequence")
        .input(desc(&[4, 3], Dtype::F32))
        .input(desc(&[3], Dtype::I64))
        .attr("batch_axis", int(1))
        .attr("time_axis", int(1))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(_)));
    let req = PlanRequestExt::builder("ReverseSequence")
        .input(desc(&[4, 3], Dtype::F32))
        .input(desc(&[4], Dtype::I64))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(_)));
}

#[test]
fn compress_matches_naive() {
    let x: Vec<f64> = (0..24).map(|v| v as f64).collect();
    let shape = [2u64, 3, 4];
    let cases: &[(Option<i64>, &[u8])] = &[
        (None, &[0, 1, 1]),
        (Some(0), &[0, 1]),
        (Some(1), &[1, 0, 1]),
        (Some(-1), &[1, 0, 0, 1]),
        (Some(2), &[0, 1]),
        (Some(1), &[0, 0, 0]),
        (None, &[1; 24]),
    ];
    for dt in [Dtype::F32, Dtype::Bf16, Dtype::I64, Dtype::U8] {
        for (axis, cond) in cases {
            let mut b = PlanRequestExt::builder("Compress")
                .input(desc(&shape, dt))
                .constant(desc(&[cond.len() as u64], Dtype::Boolean), cond);
            if let Some(a) = axis {
                b = b.attr("axis", int(*a));
            }
            let req = b.build(target());
            let cf: Vec<f64> = cond.iter().map(|v| *v as f64).collect();
            let (plan, got) = run(&req, &[x.clone(), cf]).unwrap();
            let want: Vec<f64> = match axis {
                None => x
                    .iter()
                    .zip(cond.iter())
                    .filter(|(_, c)| **c != 0)
                    .map(|(v, _)| *v)
                    .collect(),
                Some(a) => {
                    let a = a.rem_euclid(3) as usize;
                    (0..24)
                        .filter(|e| {
                            let i = unravel(*e, &shape)[a];
                            cond.get(i).is_some_and(|c| *c != 0)
                        })
                        .map(|e| x[e])
                        .collect()
                }
            };
            assert_eq!(
                plan.outputs[0].shape.iter().product::<u64>() as usize,
                want.len()
            );
            assert_eq!(got[0], quantize(dt, &want), "{axis:?} {cond:?}");
        }
    }
    let req = PlanRequestExt::builder("Compress")
        .input(desc(&shape, Dtype::F32))
        .input(desc(&[2], Dtype::Boolean))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(m) if m.contains("must be known")));
}

#[test]
fn max_unpool_node_values() {
    for dt in [Dtype::F32, Dtype::F16, Dtype::I64, Dtype::U8] {
        let base = || {
            PlanRequestExt::builder("MaxUnpool")
                .input(desc(&[1, 1, 2, 2], dt))
                .input(desc(&[1, 1, 2, 2], Dtype::I64))
        };
        let attrs = |b: umd_sdk::request::RequestBuilder| {
            b.attr("kernel_shape", AttrValueExt::Ints(vec![2, 2]))
                .attr("strides", AttrValueExt::Ints(vec![2, 2]))
                .build(target())
        };
        let ind = vec![5.0, 7.0, 13.0, 15.0];
        let (plan, got) = run(&attrs(base()), &[vec![1.0, 2.0, 3.0, 4.0], ind.clone()]).unwrap();
        assert_eq!(plan.outputs[0].shape, vec![1, 1, 4, 4]);
        let mut want = vec![0.0; 16];
        for (i, v) in [(5, 1.0), (7, 2.0), (13, 3.0), (15, 4.0)] {
            want[i] = v;
        }
        assert_eq!(got[0], want);
        let shape: Vec<u8> = [1i64, 1, 5, 5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let req = attrs(base().constant(desc(&[4], Dtype::I64), &shape));
        let (plan, got) = run(
            &req,
            &[
                vec![5.0, 6.0, 7.0, 8.0],
                ind.clone(),
                vec![1.0, 1.0, 5.0, 5.0],
            ],
        )
        .unwrap();
        assert_eq!(plan.outputs[0].shape, vec![1, 1, 5, 5]);
        let mut want = vec![0.0; 25];
        for (i, v) in [(6, 5.0), (8, 6.0), (16, 7.0), (18, 8.0)] {
            want[i] = v;
        }
        assert_eq!(got[0], want);
    }
    let req = PlanRequestExt::builder("MaxUnpool")
        .input(desc(&[1, 1, 2, 2], Dtype::F32))
        .input(desc(&[1, 1, 2, 2], Dtype::I64))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(m) if m.contains("kernel_shape")));
}
