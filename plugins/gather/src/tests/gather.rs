//! Gather, GatherElements and GatherND against naive references, on every dtype, i32 and i64
//! indices, negative and out-of-range indices (zero elements), empty tensors, and errors.

use super::util::*;
use umd_sdk::{Dtype, dtype};

/// numpy.take, with a zero element for an out-of-range index.
fn naive_gather(
    data: &[u8],
    shape: &[u64],
    axis: usize,
    idx: &[i64],
    ishape: &[u64],
    s: usize,
) -> Vec<u8> {
    let mut oshape = shape[..axis].to_vec();
    oshape.extend_from_slice(ishape);
    oshape.extend_from_slice(&shape[axis + 1..]);
    let mut out = vec![0u8; numel(&oshape) * s];
    for o in 0..numel(&oshape) {
        let c = unravel(o, &oshape);
        let q = ishape.len();
        let k = idx[ravel(&c[axis..axis + q], ishape)];
        let dim = shape[axis] as i64;
        let k = if k < 0 { k + dim } else { k };
        if k < 0 || k >= dim {
            continue;
        }
        let mut src: Vec<usize> = c[..axis].to_vec();
        src.push(k as usize);
        src.extend_from_slice(&c[axis + q..]);
        out[o * s..(o + 1) * s].copy_from_slice(elem(data, s, ravel(&src, shape)));
    }
    out
}

#[test]
fn gather_matches_take_on_every_dtype() {
    let mut rng = Rng::new(1);
    for (t, dt) in all_dtypes().into_iter().enumerate() {
        for trial in 0..6 {
            let rank = 1 + (trial % 3);
            let shape = rng.shape(rank, 1, 5);
            let axis = rng.range(0, rank as i64) as usize;
            let ishape = rng.shape(trial % 3, 0, 4);
            let dim = shape[axis] as i64;
            // in range, negative, and one past either end
            let idx: Vec<i64> = (0..numel(&ishape))
                .map(|_| rng.range(-dim - 1, dim + 1))
                .collect();
            let is64 = (t + trial) % 2 == 0;
            let s = dtype::size(dt);
            let x = data(&mut rng, dt, numel(&shape));
            let req = build(
                builder("Gather")
                    .input(desc("x", &shape, dt))
                    .input(desc(
                        "i",
                        &ishape,
                        if is64 { Dtype::I64 } else { Dtype::I32 },
                    ))
                    .attr(
                        "axis",
                        int(axis as i64 - if trial % 2 == 0 { rank as i64 } else { 0 }),
                    ),
            );
            let (plan, out) = run(&req, &[x.clone(), idx_bytes(&idx, is64)]).unwrap();
            let want = naive_gather(&x, &shape, axis, &idx, &ishape, s);
            assert_eq!(out[0], want, "{dt:?} {shape:?} axis {axis} idx {idx:?}");
            assert_eq!(plan.outputs[0].dtype, dt);
            cuda(&req);
        }
    }
}

#[test]
fn gather_empty_and_scalar_indices() {
    // empty indices: an empty output, still one launch
    let req = build(
        builder("Gather")
            .input(desc("x", &[3, 2], Dtype::F32))
            .input(desc("i", &[0], Dtype::I64)),
    );
    let (plan, out) = run(&req, &[enc(Dtype::F32, &[0.; 6]), vec![]]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0, 2]);
    assert_eq!(plan.launches.len(), 1);
    assert!(out[0].is_empty());
    // a scalar index drops the axis
    let req = build(
        builder("Gather")
            .input(desc("x", &[3, 2], Dtype::F32))
            .input(desc("i", &[], Dtype::I32))
            .attr("axis", int(1)),
    );
    let (plan, out) = run(
        &req,
        &[
            enc(Dtype::F32, &[1., 2., 3., 4., 5., 6.]),
            idx_bytes(&[-1], false),
        ],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![3]);
    assert_eq!(dec(Dtype::F32, &out[0]), vec![2., 4., 6.]);
    // empty data along another axis
    let req = build(
        builder("Gather")
            .input(desc("x", &[0, 4], Dtype::F32))
            .input(desc("i", &[2], Dtype::I64))
            .attr("axis", int(1)),
    );
    let (plan, _) = run(&req, &[vec![], ints(&[0, 1])]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0, 2]);
}

#[test]
fn gather_errors() {
    let x = desc("x", &[3, 2], Dtype::F32);
    let r = run(
        &build(
            builder("Gather")
                .input(x.clone())
                .input(desc("i", &[1], Dtype::I64))
                .attr("axis", int(2)),
        ),
        &[],
    );
    assert_attr_err(r, "axis");
    let r = run(
        &build(
            builder("Gather")
                .input(x.clone())
                .input(desc("i", &[1], Dtype::F32)),
        ),
        &[],
    );
    assert_dtype_err(r);
    let r = run(
        &build(
            builder("Gather")
                .input(x.clone())
                .input(desc("i", &[1], Dtype::I64))
                .attr("axes", int(0)),
        ),
        &[],
    );
    assert_attr_err(r, "axes");
    let r = run(
        &build(
            builder("Gather")
                .input(desc("x", &[], Dtype::F32))
                .input(desc("i", &[1], Dtype::I64)),
        ),
        &[],
    );
    assert_shape_err(r);
}

#[test]
fn gather_elements_matches_naive() {
    let mut rng = Rng::new(2);
    for (t, dt) in all_dtypes().into_iter().enumerate() {
        for trial in 0..4 {
            let rank = 1 + (t + trial) % 4;
            let shape = rng.shape(rank, 1, 5);
            let axis = rng.range(0, rank as i64) as usize;
            // indices may be smaller than the data in every dimension
            let ishape: Vec<u64> = shape
                .iter()
                .enumerate()
                .map(|(d, &n)| {
                    if d == axis {
                        rng.range(0, 4) as u64
                    } else {
                        rng.range(1, n as i64 + 1) as u64
                    }
                })
                .collect();
            let dim = shape[axis] as i64;
            let idx: Vec<i64> = (0..numel(&ishape))
                .map(|_| rng.range(-dim - 1, dim + 1))
                .collect();
            let s = dtype::size(dt);
            let x = data(&mut rng, dt, numel(&shape));
            let is64 = trial % 2 == 0;
            let req = build(
                builder("GatherElements")
                    .input(desc("x", &shape, dt))
                    .input(desc(
                        "i",
                        &ishape,
                        if is64 { Dtype::I64 } else { Dtype::I32 },
                    ))
                    .attr("axis", int(axis as i64)),
            );
            let (_, out) = run(&req, &[x.clone(), idx_bytes(&idx, is64)]).unwrap();
            let mut want = vec![0u8; numel(&ishape) * s];
            for (o, &k) in idx.iter().enumerate() {
                let mut c = unravel(o, &ishape);
                let k = if k < 0 { k + dim } else { k };
                if k < 0 || k >= dim {
                    continue;
                }
                c[axis] = k as usize;
                want[o * s..(o + 1) * s].copy_from_slice(elem(&x, s, ravel(&c, &shape)));
            }
            assert_eq!(out[0], want, "{dt:?} {shape:?} {ishape:?} axis {axis}");
            cuda(&req);
        }
    }
    let r = plan(&build(
        builder("GatherElements")
            .input(desc("x", &[2, 2], Dtype::F32))
            .input(desc("i", &[3, 2], Dtype::I64)),
    ));
    assert!(r.is_ok(), "indices may be longer along the axis");
    let r = run(
        &build(
            builder("GatherElements")
                .input(desc("x", &[2, 2], Dtype::F32))
                .input(desc("i", &[2, 3], Dtype::I64)),
        ),
        &[],
    );
    assert_shape_err(r);
    let r = run(
        &build(
            builder("GatherElements")
                .input(desc("x", &[2, 2], Dtype::F32))
                .input(desc("i", &[2], Dtype::I64)),
        ),
        &[],
    );
    assert_shape_err(r);
}

#[test]
fn gather_nd_matches_naive() {
    let mut rng = Rng::new(3);
    let cases: [(&[u64], &[u64], i64); 6] = [
        (&[3, 4, 2], &[5, 2], 0),
        (&[3, 4, 2], &[2, 3], 0),
        (&[2, 3, 4], &[2, 4, 1], 1),
        (&[2, 3, 4, 2], &[2, 3, 1, 1], 2),
        (&[2, 3, 4, 2], &[2, 0, 2], 1),
        (&[4], &[1], 0),
    ];
    for (t, (dshape, ishape, b)) in cases.into_iter().enumerate() {
        let dt = all_dtypes()[t % 18];
        let s = dtype::size(dt);
        let b = b as usize;
        let k = ishape[ishape.len() - 1] as usize;
        let tuples = numel(&ishape[..ishape.len() - 1]);
        let mut idx = Vec::new();
        for _ in 0..tuples {
            for j in 0..k {
                let d = dshape[b + j] as i64;
                idx.push(rng.range(-d - 1, d + 1));
            }
        }
        let x = data(&mut rng, dt, numel(dshape));
        let is64 = t % 2 == 0;
        let req = build(
            builder("GatherND")
                .input(desc("x", dshape, dt))
                .input(desc(
                    "i",
                    ishape,
                    if is64 { Dtype::I64 } else { Dtype::I32 },
                ))
                .attr("batch_dims", int(b as i64)),
        );
        let (plan, out) = run(&req, &[x.clone(), idx_bytes(&idx, is64)]).unwrap();
        let slice = numel(&dshape[b + k..]);
        let per_batch = numel(&ishape[b..ishape.len() - 1]).max(1);
        let mut want = vec![0u8; tuples * slice * s];
        'tuple: for tu in 0..tuples {
            let mut c = unravel(tu / per_batch, &dshape[..b]);
            for j in 0..k {
                let d = dshape[b + j] as i64;
                let v = idx[tu * k + j];
                let v = if v < 0 { v + d } else { v };
                if v < 0 || v >= d {
                    continue 'tuple;
                }
                c.push(v as usize);
            }
            c.extend(std::iter::repeat_n(0, dshape.len() - b - k));
            let src = ravel(&c, dshape);
            want[tu * slice * s..(tu + 1) * slice * s]
                .copy_from_slice(&x[src * s..(src + slice) * s]);
        }
        let mut oshape = ishape[..ishape.len() - 1].to_vec();
        oshape.extend_from_slice(&dshape[b + k..]);
        assert_eq!(plan.outputs[0].shape, oshape);
        assert_eq!(out[0], want, "case {t}");
        cuda(&req);
    }
    let x = desc("x", &[2, 3], Dtype::F32);
    let r = run(
        &build(
            builder("GatherND")
                .input(x.clone())
                .input(desc("i", &[2, 3], Dtype::I64)),
        ),
        &[],
    );
    assert_shape_err(r);
    let r = run(
        &build(
            builder("GatherND")
                .input(x.clone())
                .input(desc("i", &[2, 1], Dtype::I64))
                .attr("batch_dims", int(2)),
        ),
        &[],
    );
    assert_attr_err(r, "batch_dims");
    let r = run(
        &build(
            builder("GatherND")
                .input(x)
                .input(desc("i", &[3, 1], Dtype::I64))
                .attr("batch_dims", int(1)),
        ),
        &[],
    );
    assert_shape_err(r);
}
