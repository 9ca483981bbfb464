//! DepthToSpace, SpaceToDepth and OneHot against naive references.

use super::util::*;
use umd_sdk::{Dtype, dtype};

/// numpy's reshape/transpose definition of DepthToSpace.
fn naive_d2s(x: &[u8], shape: &[u64], b: usize, crd: bool, s: usize) -> Vec<u8> {
    let (n, c, h, w) = (
        shape[0] as usize,
        shape[1] as usize,
        shape[2] as usize,
        shape[3] as usize,
    );
    let co = c / (b * b);
    let mut out = vec![0u8; x.len()];
    for ni in 0..n {
        for ci in 0..co {
            for y in 0..h * b {
                for xx in 0..w * b {
                    let (hh, bh, ww, bw) = (y / b, y % b, xx / b, xx % b);
                    let ic = if crd {
                        ci * b * b + bh * b + bw
                    } else {
                        bh * b * co + bw * co + ci
                    };
                    let src = ((ni * c + ic) * h + hh) * w + ww;
                    let dst = ((ni * co + ci) * h * b + y) * w * b + xx;
                    out[dst * s..(dst + 1) * s].copy_from_slice(elem(x, s, src));
                }
            }
        }
    }
    out
}

#[test]
fn depth_space_round_trip_on_every_dtype() {
    let mut rng = Rng::new(8);
    for (t, dt) in all_dtypes().into_iter().enumerate() {
        for crd in [false, true] {
            let b = 1 + t % 3;
            let shape = [2, (b * b * (1 + t % 2)) as u64, 2, 3];
            let s = dtype::size(dt);
            let x = data(&mut rng, dt, numel(&shape));
            let mode = if crd { "CRD" } else { "DCR" };
            let req = build(
                builder("DepthToSpace")
                    .input(desc("x", &shape, dt))
                    .attr("blocksize", int(b as i64))
                    .attr("mode", text(mode)),
            );
            let (plan, out) = run(&req, std::slice::from_ref(&x)).unwrap();
            assert_eq!(
                out[0],
                naive_d2s(&x, &shape, b, crd, s),
                "{dt:?} {mode} b={b}"
            );
            cuda(&req);
            let req = build(
                builder("SpaceToDepth")
                    .input(plan.outputs[0].clone())
                    .attr("blocksize", int(b as i64))
                    .attr("mode", text(mode)),
            );
            let (plan2, back) = run(&req, &[out[0].clone()]).unwrap();
            assert_eq!(plan2.outputs[0].shape, shape.to_vec());
            assert_eq!(back[0], x, "SpaceToDepth inverts DepthToSpace ({mode})");
            cuda(&req);
        }
    }
    let d = desc("x", &[1, 8, 2, 3], Dtype::F32);
    let r = run(
        &build(
            builder("DepthToSpace")
                .input(d.clone())
                .attr("blocksize", int(3)),
        ),
        &[],
    );
    assert_shape_err(r);
    let r = run(
        &build(
            builder("SpaceToDepth")
                .input(d.clone())
                .attr("blocksize", int(2)),
        ),
        &[],
    );
    assert_shape_err(r);
    let r = run(
        &build(
            builder("DepthToSpace")
                .input(d.clone())
                .attr("blocksize", int(2))
                .attr("mode", text("XYZ")),
        ),
        &[],
    );
    assert_attr_err(r, "mode");
    let r = run(&build(builder("DepthToSpace").input(d)), &[]);
    assert_attr_err(r, "blocksize");
    let r = run(
        &build(
            builder("DepthToSpace")
                .input(desc("x", &[8, 2, 3], Dtype::F32))
                .attr("blocksize", int(2)),
        ),
        &[],
    );
    assert_shape_err(r);
}

#[test]
fn onehot_matches_naive() {
    let mut rng = Rng::new(10);
    for (t, idt) in [
        Dtype::I64,
        Dtype::I32,
        Dtype::F32,
        Dtype::I8,
        Dtype::U8,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I16,
        Dtype::U16,
        Dtype::U32,
        Dtype::U64,
    ]
    .into_iter()
    .enumerate()
    {
        let vdt = all_dtypes()[(t * 5) % 18];
        let s = dtype::size(vdt);
        let shape = rng.shape(1 + t % 3, 1, 4);
        let r = shape.len() as i64;
        let depth = 4i64;
        let idx: Vec<f64> = (0..numel(&shape))
            .map(|_| {
                let v = rng.range(-5, 6) as f64;
                if matches!(idt, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64) {
                    v.abs()
                } else {
                    v
                }
            })
            .collect();
        let axis = rng.range(-r - 1, r + 1);
        let vals = data(&mut rng, vdt, 2);
        let opset = if t % 3 == 0 { 9 } else { 11 };
        let req = build(
            builder("OneHot")
                .opset(opset)
                .input(desc("i", &shape, idt))
                .constant(desc("d", &[1], Dtype::I64), &ints(&[depth]))
                .input(desc("v", &[2], vdt))
                .attr("axis", int(axis)),
        );
        let (plan, out) = run(&req, &[enc(idt, &idx), ints(&[depth]), vals.clone()]).unwrap();
        let ax = if axis < 0 { axis + r + 1 } else { axis } as usize;
        let mut oshape = shape[..ax].to_vec();
        oshape.push(depth as u64);
        oshape.extend_from_slice(&shape[ax..]);
        assert_eq!(plan.outputs[0].shape, oshape);
        let mut want = Vec::new();
        for o in 0..numel(&oshape) {
            let mut c = unravel(o, &oshape);
            let d = c.remove(ax) as f64;
            let mut v = idx[ravel(&c, &shape)];
            if opset >= 11 && v < 0.0 {
                v += depth as f64;
            }
            want.extend_from_slice(elem(&vals, s, (v == d) as usize));
        }
        assert_eq!(out[0], want, "{idt:?} -> {vdt:?} axis {axis} opset {opset}");
        cuda(&req);
    }
    // a float depth counts ceil(depth) classes
    let req = build(
        builder("OneHot")
            .input(desc("i", &[2], Dtype::I64))
            .constant(desc("d", &[], Dtype::F32), &enc(Dtype::F32, &[2.5]))
            .input(desc("v", &[2], Dtype::F32)),
    );
    let (plan, out) = run(
        &req,
        &[
            ints(&[2, -1]),
            enc(Dtype::F32, &[2.5]),
            enc(Dtype::F32, &[0., 1.]),
        ],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 3]);
    assert_eq!(
        dec(Dtype::F32, &out[0]),
        vec![0., 0., 1., 0., 0., 0.],
        "-1 + 2.5 matches no class"
    );
    let r = run(
        &build(
            builder("OneHot")
                .input(desc("i", &[2], Dtype::I64))
                .input(desc("d", &[], Dtype::I64))
                .input(desc("v", &[2], Dtype::F32)),
        ),
        &[],
    );
    assert_shape_err(r); // depth unknown at plan time
    let r = run(
        &build(
            builder("OneHot")
                .input(desc("i", &[2], Dtype::Boolean))
                .constant(desc("d", &[], Dtype::I64), &ints(&[3]))
                .input(desc("v", &[2], Dtype::F32)),
        ),
        &[],
    );
    assert_dtype_err(r);
    let r = run(
        &build(
            builder("OneHot")
                .input(desc("i", &[2], Dtype::I64))
                .constant(desc("d", &[], Dtype::I64), &ints(&[3]))
                .input(desc("v", &[3], Dtype::F32)),
        ),
        &[],
    );
    assert_shape_err(r);
    let r = run(
        &build(
            builder("OneHot")
                .input(desc("i", &[2], Dtype::I64))
                .constant(desc("d", &[], Dtype::I64), &ints(&[3]))
                .input(desc("v", &[2], Dtype::F32))
                .attr("axis", int(2)),
        ),
        &[],
    );
    assert_attr_err(r, "axis");
}
