//! ScatterElements / Scatter / ScatterND against a sequential naive reference, every reduction
//! on float and integer dtypes (wrapping), duplicates, out-of-range indices (skipped), empty
//! updates, the two-launch plan, and errors.

use super::util::*;
use crate::common::NUMERIC_DTYPES;
use umd_sdk::{Dtype, dtype};

/// Applies `red` in f64 for floats, wrapping i64 arithmetic narrowed for integers.
fn reduce(dt: Dtype, red: &str, a: f64, b: f64) -> f64 {
    let float = matches!(dt, Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::Bf16);
    let v = match red {
        "add" => a + b,
        "mul" => a * b,
        "max" if a.is_nan() || b.is_nan() => f64::NAN,
        "min" if a.is_nan() || b.is_nan() => f64::NAN,
        "max" => a.max(b),
        "min" => a.min(b),
        _ => b,
    };
    if float {
        // round to the dtype after every update, as the kernels do
        dec(dt, &enc(dt, &[v]))[0]
    } else {
        let w = v as i64 as i128;
        match dt {
            Dtype::I8 => w as i8 as f64,
            Dtype::U8 => w as u8 as f64,
            Dtype::I32 => w as i32 as f64,
            Dtype::I16 => w as i16 as f64,
            Dtype::U16 => w as u16 as f64,
            Dtype::U32 => w as u32 as f64,
            Dtype::U64 => w as u64 as f64,
            _ => v,
        }
    }
}

fn small_values(rng: &mut Rng, dt: Dtype, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let v = rng.range(-6, 7) as f64;
            if matches!(dt, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64) {
                v.abs()
            } else if matches!(dt, Dtype::F32 | Dtype::F64) {
                v / 4.0
            } else {
                v
            }
        })
        .collect()
}

#[test]
fn scatter_elements_every_reduction() {
    let mut rng = Rng::new(4);
    for dt in NUMERIC_DTYPES {
        for red in ["none", "add", "mul", "max", "min"] {
            let rank = rng.range(1, 4) as usize;
            let shape = rng.shape(rank, 1, 5);
            let axis = rng.range(0, rank as i64) as usize;
            let ishape: Vec<u64> = shape
                .iter()
                .enumerate()
                .map(|(d, &n)| {
                    if d == axis {
                        rng.range(0, 6) as u64
                    } else {
                        rng.range(1, n as i64 + 1) as u64
                    }
                })
                .collect();
            let dim = shape[axis] as i64;
            let idx: Vec<i64> = (0..numel(&ishape))
                .map(|_| rng.range(-dim - 1, dim + 1))
                .collect();
            let x = small_values(&mut rng, dt, numel(&shape));
            let u = small_values(&mut rng, dt, numel(&ishape));
            let req = build(
                builder("ScatterElements")
                    .input(desc("x", &shape, dt))
                    .input(desc("i", &ishape, Dtype::I64))
                    .input(desc("u", &ishape, dt))
                    .attr("axis", int(axis as i64))
                    .attr("reduction", text(red)),
            );
            let (plan, out) = run(&req, &[enc(dt, &x), ints(&idx), enc(dt, &u)]).unwrap();
            assert_eq!(plan.launches.len(), 2, "copy, then scatter");
            let mut want = x.clone();
            for (o, &k) in idx.iter().enumerate() {
                let mut c = unravel(o, &ishape);
                let k = if k < 0 { k + dim } else { k };
                if k < 0 || k >= dim {
                    continue;
                }
                c[axis] = k as usize;
                let at = ravel(&c, &shape);
                want[at] = reduce(dt, red, want[at], u[o]);
            }
            let got = dec(dt, &out[0]);
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "{dt:?} {red} {shape:?}: got {got:?} want {want:?}"
                );
            }
            cuda(&req);
        }
    }
}

#[test]
fn scatter_nd_every_reduction() {
    let mut rng = Rng::new(5);
    let shapes: [(&[u64], &[u64]); 4] = [
        (&[4, 3, 2], &[3, 1]),
        (&[4, 3], &[5, 2]),
        (&[2, 2, 3], &[2, 2, 2]),
        (&[3], &[0, 1]),
    ];
    for dt in NUMERIC_DTYPES {
        for red in ["none", "add", "mul", "max", "min"] {
            for (dshape, ishape) in shapes {
                let k = ishape[ishape.len() - 1] as usize;
                let tuples = numel(&ishape[..ishape.len() - 1]);
                let mut ushape = ishape[..ishape.len() - 1].to_vec();
                ushape.extend_from_slice(&dshape[k..]);
                let mut idx = Vec::new();
                for _ in 0..tuples {
                    for &d in &dshape[..k] {
                        idx.push(rng.range(-(d as i64) - 1, d as i64 + 1));
                    }
                }
                let x = small_values(&mut rng, dt, numel(dshape));
                let u = small_values(&mut rng, dt, numel(&ushape));
                let req = build(
                    builder("ScatterND")
                        .input(desc("x", dshape, dt))
                        .input(desc("i", ishape, Dtype::I64))
                        .input(desc("u", &ushape, dt))
                        .attr("reduction", text(red)),
                );
                let (_, out) = run(&req, &[enc(dt, &x), ints(&idx), enc(dt, &u)]).unwrap();
                let slice = numel(&dshape[k..]);
                let mut want = x.clone();
                'tuple: for t in 0..tuples {
                    let mut c = Vec::new();
                    for j in 0..k {
                        let d = dshape[j] as i64;
                        let v = idx[t * k + j];
                        let v = if v < 0 { v + d } else { v };
                        if v < 0 || v >= d {
                            continue 'tuple;
                        }
                        c.push(v as usize);
                    }
                    c.extend(std::iter::repeat_n(0, dshape.len() - k));
                    let at = ravel(&c, dshape);
                    for e in 0..slice {
                        want[at + e] = reduce(dt, red, want[at + e], u[t * slice + e]);
                    }
                }
                assert_eq!(
                    dec(dt, &out[0]),
                    want,
                    "{dt:?} {red} {dshape:?} {ishape:?} idx {idx:?}"
                );
                cuda(&req);
            }
        }
    }
}

#[test]
fn scatter_moves_every_dtype_and_legacy_name() {
    let mut rng = Rng::new(6);
    for dt in all_dtypes() {
        let s = dtype::size(dt);
        let x = data(&mut rng, dt, 6);
        let u = data(&mut rng, dt, 2);
        let req = build(
            builder("Scatter")
                .opset(9)
                .input(desc("x", &[2, 3], dt))
                .input(desc("i", &[1, 2], Dtype::I32))
                .input(desc("u", &[1, 2], dt))
                .attr("axis", int(-1)),
        );
        let (_, out) = run(&req, &[x.clone(), idx_bytes(&[2, -3], false), u.clone()]).unwrap();
        let mut want = x.clone();
        want[2 * s..3 * s].copy_from_slice(elem(&u, s, 0));
        want[0..s].copy_from_slice(elem(&u, s, 1));
        assert_eq!(out[0], want, "{dt:?}");
        cuda(&req);
    }
}

#[test]
fn scatter_duplicates_apply_in_order_on_the_cpu() {
    let req = build(
        builder("ScatterND")
            .input(desc("x", &[3], Dtype::F32))
            .input(desc("i", &[3, 1], Dtype::I64))
            .input(desc("u", &[3], Dtype::F32)),
    );
    let (_, out) = run(
        &req,
        &[
            enc(Dtype::F32, &[0., 0., 0.]),
            ints(&[1, 1, -2]),
            enc(Dtype::F32, &[5., 6., 7.]),
        ],
    )
    .unwrap();
    assert_eq!(
        dec(Dtype::F32, &out[0]),
        vec![0., 7., 0.],
        "last write wins"
    );
}

#[test]
fn scatter_empty_and_errors() {
    let x = desc("x", &[2, 3], Dtype::F32);
    let req = build(
        builder("ScatterElements")
            .input(x.clone())
            .input(desc("i", &[2, 0], Dtype::I64))
            .input(desc("u", &[2, 0], Dtype::F32))
            .attr("axis", int(1)),
    );
    let (plan, out) = run(
        &req,
        &[enc(Dtype::F32, &[1., 2., 3., 4., 5., 6.]), vec![], vec![]],
    )
    .unwrap();
    assert_eq!(
        plan.launches[1].grid.x, 1,
        "an empty scatter still launches"
    );
    assert_eq!(dec(Dtype::F32, &out[0]), vec![1., 2., 3., 4., 5., 6.]);
    let r = run(
        &build(
            builder("ScatterElements")
                .input(x.clone())
                .input(desc("i", &[1, 2], Dtype::I64))
                .input(desc("u", &[1, 2], Dtype::F32))
                .attr("reduction", text("mean")),
        ),
        &[],
    );
    assert_attr_err(r, "reduction");
    let r = run(
        &build(
            builder("Scatter")
                .input(x.clone())
                .input(desc("i", &[1, 2], Dtype::I64))
                .input(desc("u", &[1, 2], Dtype::F32))
                .attr("reduction", text("add")),
        ),
        &[],
    );
    assert_attr_err(r, "reduction");
    let b = desc("x", &[2, 3], Dtype::Boolean);
    let r = run(
        &build(
            builder("ScatterND")
                .input(b.clone())
                .input(desc("i", &[1, 1], Dtype::I64))
                .input(desc("u", &[1, 3], Dtype::Boolean))
                .attr("reduction", text("add")),
        ),
        &[],
    );
    assert_dtype_err(r);
    let f8 = desc("x", &[2, 3], Dtype::F8e4m3fnuz);
    let r = run(
        &build(
            builder("ScatterElements")
                .input(f8.clone())
                .input(desc("i", &[1, 1], Dtype::I64))
                .input(desc("u", &[1, 1], Dtype::F8e4m3fnuz))
                .attr("reduction", text("max")),
        ),
        &[],
    );
    assert_dtype_err(r);
    let r = run(
        &build(
            builder("ScatterND")
                .input(x.clone())
                .input(desc("i", &[1, 1], Dtype::I64))
                .input(desc("u", &[1, 2], Dtype::F32)),
        ),
        &[],
    );
    assert_shape_err(r);
    let r = run(
        &build(
            builder("ScatterElements")
                .input(x.clone())
                .input(desc("i", &[1, 2], Dtype::I64))
                .input(desc("u", &[1, 2], Dtype::F16)),
        ),
        &[],
    );
    assert_dtype_err(r);
    let r = run(
        &build(
            builder("ScatterElements")
                .input(x)
                .input(desc("i", &[1, 2], Dtype::I64))
                .input(desc("u", &[2, 1], Dtype::F32)),
        ),
        &[],
    );
    assert_shape_err(r);
}
