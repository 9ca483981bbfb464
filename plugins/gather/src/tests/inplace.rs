//! The in-place (ABI 1.3) kernels against the whole-buffer kernels ([`super::oracle`], the
//! `run-cpu` kernels before the in-place ones): every converted entry point run whole and as
//! 2 or 3 uneven block ranges (last first, on outputs prefilled with 0xAB) must give the same
//! bytes — every element size, i32 and i64 indices (negative and out of range), empty and odd
//! shapes, and sizes that take several chunks, row reads and span reads.

use super::oracle;
use super::util::*;
use umd_sdk::testing;
use umd_sdk::{Dtype, PlanRequestExt, Plugin};

use crate::GatherPlugin;

/// Whole-buffer kernels vs in place (whole, 2 and 3 uneven ranges) vs `run-cpu`; returns the
/// entry points planned.
fn check(req: &PlanRequestExt, inputs: &[Vec<u8>]) -> Vec<String> {
    let plan = umd_sdk::plan_checked::<GatherPlugin>(req).unwrap();
    let want = testing::execute(&plan, inputs, |c| oracle::run_cpu(&c)).unwrap();
    let what = format!(
        "{} {:?}",
        req.op,
        req.present()
            .map(|d| (&d.shape, d.dtype))
            .collect::<Vec<_>>()
    );
    for cuts in [&[][..], &[0.37][..], &[0.09, 0.61][..], &[0.5, 0.5001][..]] {
        // splittable launches cut at `cuts`, the others whole; outputs start as 0xAB
        let got = testing::execute_kernels_cut::<GatherPlugin>(&plan, inputs, cuts, 0xAB).unwrap();
        assert!(got == want, "{what}: in place with cuts {cuts:?} differs");
    }
    let via = testing::execute(&plan, inputs, GatherPlugin::run_cpu).unwrap();
    assert!(via == want, "{what}: run-cpu differs");
    plan.launches
        .iter()
        .map(|l| l.entry_point.clone())
        .collect()
}

/// One dtype per element size.
const SIZED: [Dtype; 4] = [Dtype::U8, Dtype::F16, Dtype::F32, Dtype::I64];

/// Indices in `[-dim - 2, dim + 2)`: negative ones and a few out of range.
fn some_indices(rng: &mut Rng, n: usize, dim: u64) -> Vec<i64> {
    let d = dim as i64;
    (0..n).map(|_| rng.range(-d - 2, d + 2)).collect()
}

#[test]
fn gather_in_place_matches() {
    let mut rng = Rng::new(11);
    let cases: &[(&[u64], i64, &[u64])] = &[
        (&[30, 200], 0, &[7]),        // rows of 800 B (f32): read row by row
        (&[5, 6, 7], 1, &[2, 3]),     // short rows: from a span
        (&[1000], 0, &[3000]),        // scalars
        (&[3, 4], 1, &[]),            // a scalar index
        (&[4, 5], 0, &[0]),           // no indices
        (&[0, 5], 1, &[2]),           // empty data
        (&[2, 3000, 100], 1, &[700]), // chunks across outers, span reads
        (&[4, 50, 300], 1, &[123]),   // chunks across outers, row reads
    ];
    for (k, (shape, axis, ishape)) in cases.iter().enumerate() {
        for dt in SIZED {
            let big = numel(shape) > 100_000;
            if big && dt != Dtype::F32 && dt != Dtype::F16 {
                continue;
            }
            let is64 = k % 2 == 0;
            let dim = shape[(*axis as usize + shape.len()) % shape.len()];
            let idx = some_indices(&mut rng, numel(ishape), dim);
            let idt = if is64 { Dtype::I64 } else { Dtype::I32 };
            let req = build(
                builder("Gather")
                    .input(desc("data", shape, dt))
                    .input(desc("idx", ishape, idt))
                    .attr("axis", int(*axis)),
            );
            check(
                &req,
                &[data(&mut rng, dt, numel(shape)), idx_bytes(&idx, is64)],
            );
        }
    }
}

#[test]
fn gather_elements_and_nd_in_place_match() {
    let mut rng = Rng::new(12);
    let cases: &[(&[u64], i64, &[u64])] = &[
        (&[4, 5, 6], 0, &[3, 5, 4]),
        (&[4, 5, 6], 1, &[4, 7, 6]),
        (&[4, 5, 6], 2, &[2, 3, 9]),
        (&[9], 0, &[4]),
        (&[3, 0], 0, &[2, 0]),
        (&[300, 500], 1, &[300, 400]),
        (&[300, 500], 0, &[200, 500]),
    ];
    for (k, (shape, axis, ishape)) in cases.iter().enumerate() {
        for dt in SIZED {
            let is64 = k % 2 == 1;
            let idx = some_indices(&mut rng, numel(ishape), shape[*axis as usize]);
            let idt = if is64 { Dtype::I64 } else { Dtype::I32 };
            let req = build(
                builder("GatherElements")
                    .input(desc("data", shape, dt))
                    .input(desc("idx", ishape, idt))
                    .attr("axis", int(*axis)),
            );
            check(
                &req,
                &[data(&mut rng, dt, numel(shape)), idx_bytes(&idx, is64)],
            );
        }
    }
    // (data, indices, batch_dims)
    let nd: &[(&[u64], &[u64], i64)] = &[
        (&[5, 6, 7], &[4, 2], 0),
        (&[5, 6, 7], &[3, 3], 0),
        (&[3, 4, 5], &[3, 2, 1], 1),
        (&[2, 3, 4, 5], &[2, 3, 6, 1], 2),
        (&[50, 200], &[30, 1], 0),        // rows of 800 B (f32)
        (&[8, 300, 90], &[8, 200, 1], 1), // several chunks, span reads per batch
        (&[4, 5], &[0, 2], 0),
    ];
    for (k, (shape, ishape, b)) in nd.iter().enumerate() {
        for dt in SIZED {
            let is64 = k % 2 == 0;
            let q = ishape.len();
            let kk = ishape[q - 1] as usize;
            let tuples = numel(&ishape[..q - 1]);
            let idx: Vec<i64> = (0..tuples * kk)
                .map(|i| {
                    let dim = shape[*b as usize + i % kk] as i64;
                    rng.range(-dim - 1, dim + 1)
                })
                .collect();
            let idt = if is64 { Dtype::I64 } else { Dtype::I32 };
            let req = build(
                builder("GatherND")
                    .input(desc("data", shape, dt))
                    .input(desc("idx", ishape, idt))
                    .attr("batch_dims", int(*b)),
            );
            check(
                &req,
                &[data(&mut rng, dt, numel(shape)), idx_bytes(&idx, is64)],
            );
        }
    }
}

#[test]
fn pad_and_block_moves_in_place_match() {
    let mut rng = Rng::new(13);
    let pads: &[(&[u64], &[i64])] = &[
        (&[3, 5, 7], &[1, 0, 2, 2, 3, 1]),
        (&[3, 5, 7], &[0, -1, 3, 1, 2, -2]),
        (&[4], &[5, 6]),
        (&[300, 700], &[7, 30, 5, 1]),
        (&[2, 0, 3], &[0, 1, 0, 0, 1, 0]),
        (&[], &[]),
    ];
    for (k, (shape, p)) in pads.iter().enumerate() {
        for mode in ["constant", "reflect", "edge", "wrap"] {
            for dt in SIZED {
                if shape.contains(&0) && mode != "constant" {
                    continue;
                }
                let x = data(&mut rng, dt, numel(shape));
                let mut b = builder("Pad")
                    .opset(19)
                    .input(desc("x", shape, dt))
                    .constant(desc("pads", &[p.len() as u64], Dtype::I64), &ints(p));
                let mut inputs = vec![x, ints(p)];
                if k % 2 == 0 && mode == "constant" {
                    // the constant value as an input (pad_cptr)
                    let v = data(&mut rng, dt, 1);
                    b = b.input(desc("value", &[], dt));
                    inputs.push(v);
                }
                let req = build(b.attr("mode", text(mode)));
                check(&req, &inputs);
            }
        }
    }
    let blocks: &[(&str, &[u64], i64)] = &[
        ("DepthToSpace", &[2, 8, 3, 5], 2),
        ("SpaceToDepth", &[2, 3, 6, 4], 2),
        ("DepthToSpace", &[1, 16, 128, 130], 4),
        ("SpaceToDepth", &[1, 3, 256, 256], 4),
        ("DepthToSpace", &[0, 4, 2, 2], 2),
    ];
    for (op, shape, bs) in blocks {
        for mode in ["DCR", "CRD"] {
            for dt in SIZED {
                if numel(shape) > 100_000 && dt != Dtype::F32 {
                    continue;
                }
                let req = build(
                    builder(op)
                        .input(desc("x", shape, dt))
                        .attr("blocksize", int(*bs))
                        .attr("mode", text(mode)),
                );
                check(&req, &[data(&mut rng, dt, numel(shape))]);
            }
        }
    }
}

/// Resize of `shape` by `scales` with attributes, on random data.
fn resize_case(rng: &mut Rng, shape: &[u64], dt: Dtype, scales: &[f64], attrs: &[(&str, &str)]) {
    let sc = enc(Dtype::F32, scales);
    let mut b = builder("Resize")
        .opset(19)
        .input(desc("x", shape, dt))
        .absent()
        .constant(desc("scales", &[scales.len() as u64], Dtype::F32), &sc);
    for (k, v) in attrs {
        b = match v.parse::<i64>() {
            Ok(i) => b.attr(k, int(i)),
            Err(_) => b.attr(k, text(v)),
        };
    }
    let req = build(b);
    let x = if umd_sdk::request::is_float(dt) {
        let v: Vec<f64> = (0..numel(shape))
            .map(|_| rng.range(-500, 500) as f64 / 8.0)
            .collect();
        enc(dt, &v)
    } else {
        data(rng, dt, numel(shape))
    };
    check(&req, &[x, sc]);
}

/// A Resize case: shape, scales, attributes.
type Case<'a> = (&'a [u64], &'a [f64], &'a [(&'a str, &'a str)]);

#[test]
fn resize_in_place_matches() {
    let mut rng = Rng::new(14);
    let nearest: &[Case] = &[
        (&[2, 3, 5, 7], &[1.0, 1.0, 2.0, 1.5], &[]),
        (
            &[2, 3, 5, 7],
            &[1.0, 2.0, 0.5, 3.0],
            &[("nearest_mode", "ceil")],
        ),
        (
            &[3, 4, 6],
            &[1.0, 1.7, 0.6],
            &[
                ("coordinate_transformation_mode", "asymmetric"),
                ("nearest_mode", "floor"),
            ],
        ),
        (&[2, 4, 64, 64], &[1.0, 1.0, 2.0, 2.0], &[]),
        (
            &[5],
            &[2.5],
            &[("coordinate_transformation_mode", "align_corners")],
        ),
        (&[0, 3, 4], &[1.0, 2.0, 2.0], &[]),
    ];
    for (shape, scales, attrs) in nearest {
        for dt in SIZED {
            if numel(shape) > 10_000 && dt != Dtype::F32 {
                continue;
            }
            resize_case(&mut rng, shape, dt, scales, attrs);
        }
    }
    let interp: &[Case] = &[
        (&[1, 2, 9, 7], &[1.0, 1.0, 1.7, 0.6], &[("mode", "linear")]),
        (&[1, 2, 9, 7], &[1.0, 1.0, 2.0, 2.0], &[("mode", "cubic")]),
        (
            &[2, 12, 10],
            &[1.0, 0.4, 0.5],
            &[("mode", "linear"), ("antialias", "1")],
        ),
        (
            &[2, 6, 5],
            &[1.0, 1.5, 2.0],
            &[("mode", "cubic"), ("exclude_outside", "1")],
        ),
        (
            &[2, 3, 100, 100],
            &[1.0, 1.0, 1.5, 1.5],
            &[("mode", "linear")],
        ),
    ];
    for (shape, scales, attrs) in interp {
        for dt in [Dtype::F32, Dtype::F16, Dtype::U8, Dtype::I64] {
            if numel(shape) > 10_000 && dt != Dtype::F32 {
                continue;
            }
            resize_case(&mut rng, shape, dt, scales, attrs);
        }
    }
}

#[test]
fn tf_crop_and_resize_in_place_matches() {
    let mut rng = Rng::new(15);
    for mode in ["nearest", "linear"] {
        let shape = [2u64, 5, 6];
        let roi = enc(Dtype::F32, &[0.0, -0.3, 0.2, 1.0, 1.2, 0.9]);
        let sc = enc(Dtype::F32, &[1.0, 1.8, 1.4]);
        let req = build(
            builder("Resize")
                .opset(19)
                .input(desc("x", &shape, Dtype::F32))
                .constant(desc("roi", &[6], Dtype::F32), &roi)
                .constant(desc("scales", &[3], Dtype::F32), &sc)
                .attr("mode", text(mode))
                .attr("coordinate_transformation_mode", text("tf_crop_and_resize"))
                .attr("extrapolation_value", umd_sdk::AttrValueExt::Float(-7.5)),
        );
        let x = enc(
            Dtype::F32,
            &(0..60).map(|i| i as f64 * 0.5).collect::<Vec<_>>(),
        );
        let _ = &mut rng;
        check(&req, &[x, roi, sc]);
    }
}

#[test]
fn scatter_copies_in_place_and_scatters_whole() {
    let mut rng = Rng::new(16);
    let shape = [200u64, 300];
    for red in ["none", "add"] {
        let idx: Vec<i64> = (0..50 * 300).map(|_| rng.range(-200, 200)).collect();
        let req = build(
            builder("ScatterElements")
                .opset(18)
                .input(desc("data", &shape, Dtype::F32))
                .input(desc("idx", &[50, 300], Dtype::I64))
                .input(desc("upd", &[50, 300], Dtype::F32))
                .attr("axis", int(0))
                .attr("reduction", text(red)),
        );
        let entries = check(
            &req,
            &[
                enc(Dtype::F32, &vec![1.5; 60_000]),
                idx_bytes(&idx, true),
                enc(Dtype::F32, &vec![2.0; 15_000]),
            ],
        );
        assert!(entries[0].starts_with("copy_"), "{entries:?}");
    }
}
