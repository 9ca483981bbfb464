//! Native tests of MatMul, Gemm and MatMulInteger: planning, the blocked CPU kernel against a
//! naive reference (every dtype, shapes crossing every block edge, transposes, broadcasts,
//! empty dimensions), error cases, and the CUDA sources of every dtype.

mod emu;
mod inplace;
mod onnx;

use super::*;
use umd_sdk::{AttrValueExt as A, CpuBuffer, PlanRequestExt, testing};

/// Deterministic values in [-2, 2) (integers: in -8..8).
fn data(n: usize, seed: u64, dt: Dtype) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005) ^ 0x9e3779b97f4a7c15;
    let v = (0..n).map(|_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
    });
    let v: Vec<f64> = if umd_sdk::request::is_float(dt) {
        v.collect()
    } else {
        v.map(|x| (x * 4.0).floor()).collect()
    };
    dtype::decode_f64(dt, &dtype::encode(dt, &v).unwrap())
}

struct Req {
    op: &'static str,
    inputs: Vec<Option<(Vec<u64>, Dtype)>>,
    attrs: Vec<(&'static str, A)>,
}

impl Req {
    fn new(op: &'static str) -> Self {
        Req {
            op,
            inputs: vec![],
            attrs: vec![],
        }
    }
    fn input(mut self, shape: &[u64], dt: Dtype) -> Self {
        self.inputs.push(Some((shape.to_vec(), dt)));
        self
    }
    fn absent(mut self) -> Self {
        self.inputs.push(None);
        self
    }
    fn attr(mut self, name: &'static str, v: A) -> Self {
        self.attrs.push((name, v));
        self
    }
    fn build(&self) -> PlanRequestExt {
        let mut b = PlanRequestExt::builder(self.op);
        for (i, s) in self.inputs.iter().enumerate() {
            b = match s {
                Some((shape, dt)) => b.input(TensorDesc::new(format!("in{i}"), shape.clone(), *dt)),
                None => b.absent(),
            };
        }
        for (n, v) in &self.attrs {
            b = b.attr(n, v.clone());
        }
        b.build(Target::cpu())
    }
    fn plan(&self) -> Result<OpPlan, OpError> {
        MatMul::plan_ext(&self.build())
    }
    fn run(&self, values: &[Vec<f64>]) -> Result<(TensorDesc, Vec<f64>), OpError> {
        let bytes: Vec<Vec<u8>> = self
            .inputs
            .iter()
            .flatten()
            .zip(values)
            .map(|((_, dt), v)| dtype::encode(*dt, v).unwrap())
            .collect();
        let (plan, outs) = testing::run::<MatMul>(&self.build(), &bytes)?;
        let d = plan.outputs[0].clone();
        let v = dtype::decode_f64(d.dtype, &outs[0]);
        Ok((d, v))
    }
}

/// Naive `Y[z] = opA(A[z]) · opB(B[z])` on dense row-major `(batch, rows, cols)` operands with
/// batch index maps; returns values and the sums of |products| (error scale).
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[f64],
    b: &[f64],
    (m, n, k): (usize, usize, usize),
    (ta, tb): (bool, bool),
    batches: &[(usize, usize)],
) -> (Vec<f64>, Vec<f64>) {
    let (mut y, mut mag) = (vec![], vec![]);
    for &(za, zb) in batches {
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut g) = (0.0, 0.0);
                for kk in 0..k {
                    let av = if ta {
                        a[za * m * k + kk * m + i]
                    } else {
                        a[za * m * k + i * k + kk]
                    };
                    let bv = if tb {
                        b[zb * k * n + j * k + kk]
                    } else {
                        b[zb * k * n + kk * n + j]
                    };
                    s += av * bv;
                    g += (av * bv).abs();
                }
                y.push(s);
                mag.push(g);
            }
        }
    }
    (y, mag)
}

fn assert_close(got: &[f64], want: &[f64], mag: &[f64], dt: Dtype, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let t = match dt {
        Dtype::F32 => 1e-5,
        Dtype::F16 => 2e-3,
        Dtype::Bf16 => 1.6e-2,
        Dtype::F64 => 1e-12,
        _ => 0.0,
    };
    for (i, ((g, w), m)) in got.iter().zip(want).zip(mag).enumerate() {
        assert!(
            (g - w).abs() <= t * (1.0 + m) || (g.is_nan() && w.is_nan()),
            "{what} [{i}]: got {g}, want {w}"
        );
    }
}

// ---------------------------------------------------------------- MatMul

#[test]
fn shapes_follow_numpy_matmul() {
    let out = |a: &[u64], b: &[u64]| {
        Req::new("MatMul")
            .input(a, Dtype::F32)
            .input(b, Dtype::F32)
            .plan()
            .map(|p| p.outputs[0].shape.clone())
    };
    assert_eq!(out(&[2, 3], &[3, 4]).unwrap(), vec![2, 4]);
    assert_eq!(out(&[5, 1, 2, 3], &[4, 3, 7]).unwrap(), vec![5, 4, 2, 7]);
    assert_eq!(out(&[3], &[3, 4]).unwrap(), vec![4]);
    assert_eq!(out(&[2, 3], &[3]).unwrap(), vec![2]);
    assert_eq!(out(&[3], &[3]).unwrap(), Vec::<u64>::new());
    let e = out(&[2, 3], &[4, 5]).unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("K=3") && m.contains("K=4")));
    assert!(out(&[2, 2, 3], &[3, 3, 4]).is_err(), "batch 2 vs 3");
}

#[test]
fn matmul_matches_the_reference_on_every_dtype_and_block_edge() {
    let dtypes = DTYPES;
    for dt in dtypes {
        for (m, n, k) in [
            (1, 1, 1),
            (3, 4, 5),
            (5, 300, 270),
            (9, 17, 513),
            (33, 8, 2),
        ] {
            let (a, b) = (data(m * k, 1, dt), data(k * n, 2, dt));
            let (_, got) = Req::new("MatMul")
                .input(&[m as u64, k as u64], dt)
                .input(&[k as u64, n as u64], dt)
                .run(&[a.clone(), b.clone()])
                .unwrap();
            let (want, mag) = reference(&a, &b, (m, n, k), (false, false), &[(0, 0)]);
            assert_close(&got, &want, &mag, dt, &format!("{dt:?} {m}x{n}x{k}"));
        }
    }
}

#[test]
fn matmul_broadcasts_batches_and_vectors() {
    // ONNX's test_matmul_bcast: [3, 1, 3, 4] @ [1, 2, 4, 2] -> [3, 2, 3, 2]
    for dt in [Dtype::F32, Dtype::I32] {
        let (a, b) = (data(36, 3, dt), data(16, 4, dt));
        let (d, got) = Req::new("MatMul")
            .input(&[3, 1, 3, 4], dt)
            .input(&[1, 2, 4, 2], dt)
            .run(&[a.clone(), b.clone()])
            .unwrap();
        assert_eq!(d.shape, vec![3, 2, 3, 2]);
        let batches: Vec<_> = (0..3).flat_map(|x| (0..2).map(move |y| (x, y))).collect();
        let (want, mag) = reference(&a, &b, (3, 2, 4), (false, false), &batches);
        assert_close(&got, &want, &mag, dt, "bcast");
    }
    // 1-D on either side: [4] @ [2, 4, 1] -> [2, 1]; [1, 2, 4, 3] @ [3] -> [1, 2, 4]
    let (a, b) = (data(4, 5, Dtype::F64), data(8, 6, Dtype::F64));
    let (d, got) = Req::new("MatMul")
        .input(&[4], Dtype::F64)
        .input(&[2, 4, 1], Dtype::F64)
        .run(&[a.clone(), b.clone()])
        .unwrap();
    assert_eq!(d.shape, vec![2, 1]);
    let (want, mag) = reference(&a, &b, (1, 1, 4), (false, false), &[(0, 0), (0, 1)]);
    assert_close(&got, &want, &mag, Dtype::F64, "1d_3d");
    let (a, b) = (data(24, 7, Dtype::F64), data(3, 8, Dtype::F64));
    let (d, got) = Req::new("MatMul")
        .input(&[1, 2, 4, 3], Dtype::F64)
        .input(&[3], Dtype::F64)
        .run(&[a.clone(), b.clone()])
        .unwrap();
    assert_eq!(d.shape, vec![1, 2, 4]);
    let (want, mag) = reference(&a, &b, (4, 1, 3), (false, false), &[(0, 0), (1, 0)]);
    assert_close(&got, &want, &mag, Dtype::F64, "4d_1d");
}

#[test]
fn cpu_kernel_multiplies_with_batch_broadcast() {
    // a: [2, 1, 2] (two batches), b: [2, 1] shared: out [2, 1, 1]
    let p = Req::new("MatMul")
        .input(&[2, 1, 2], Dtype::F32)
        .input(&[2, 1], Dtype::F32)
        .plan()
        .unwrap();
    let l = &p.launches[0];
    assert_eq!((l.grid.z, l.block.x), (2, TILE));
    let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let buffer = |binding, size, data| CpuBuffer {
        binding,
        size,
        data,
    };
    let call = CpuCall {
        module_id: l.module_id.clone(),
        entry_point: l.entry_point.clone(),
        grid: l.grid,
        block: l.block,
        params: l.params.clone(),
        relocations: l.relocations.clone(),
        buffers: vec![
            buffer(0, 16, f(&[1., 2., 3., 4.])),
            buffer(1, 8, f(&[10., 100.])),
            buffer(2, 8, vec![]),
        ],
    };
    let out = MatMul::run_cpu(call).unwrap();
    assert_eq!(out[0].data, f(&[210., 430.]));
}

#[test]
fn integers_wrap_and_nan_propagates() {
    let (_, got) = Req::new("MatMul")
        .input(&[1, 2], Dtype::I32)
        .input(&[2, 1], Dtype::I32)
        .run(&[vec![i32::MAX as f64, 1.0], vec![2.0, 3.0]])
        .unwrap();
    assert_eq!(got, vec![(i32::MAX as i64 * 2 + 3) as i32 as f64]);
    let (_, got) = Req::new("MatMul")
        .input(&[2, 2], Dtype::F32)
        .input(&[2, 2], Dtype::F32)
        .run(&[vec![f64::NAN, 1., 1., 1.], vec![1., 2., 3., 4.]])
        .unwrap();
    assert!(got[0].is_nan() && got[1].is_nan());
    assert_eq!(&got[2..], &[4., 6.]);
}

/// (a, b, output shape, expected values)
type Case<'a> = (&'a [u64], &'a [u64], &'a [u64], Vec<f64>);

#[test]
fn empty_dimensions_write_nothing_or_zeros() {
    // (a, b, output shape, expected values)
    let cases: [Case; 5] = [
        (&[0, 2, 3], &[3, 4], &[0, 2, 4], vec![]),
        (&[2, 0, 3], &[2, 3, 4], &[2, 0, 4], vec![]),
        (&[2, 3], &[3, 0], &[2, 0], vec![]),
        (&[2, 0], &[0, 3], &[2, 3], vec![0.; 6]),
        (&[0, 2, 0], &[0, 5], &[0, 2, 5], vec![]),
    ];
    for dt in DTYPES {
        for (a, b, out, want) in &cases {
            let na = a.iter().product::<u64>() as usize;
            let nb = b.iter().product::<u64>() as usize;
            let r = Req::new("MatMul").input(a, dt).input(b, dt);
            let plan = r.plan().unwrap();
            assert_eq!(plan.launches.len(), 1);
            let (d, got) = r.run(&[vec![1.0; na], vec![1.0; nb]]).unwrap();
            assert_eq!(&d.shape, out);
            assert_eq!(&got, want, "{dt:?} {a:?} @ {b:?}");
        }
    }
    // Gemm with K = 0: beta * C
    let (_, got) = Req::new("Gemm")
        .input(&[2, 0], Dtype::F32)
        .input(&[0, 3], Dtype::F32)
        .input(&[3], Dtype::F32)
        .attr("beta", A::Float(2.0))
        .run(&[vec![], vec![], vec![1., 2., 3.]])
        .unwrap();
    assert_eq!(got, vec![2., 4., 6., 2., 4., 6.]);
}

#[test]
fn large_batches_and_rows_are_strided_over_not_refused() {
    let p = Req::new("MatMul")
        .input(&[70_000, 1, 2], Dtype::F32)
        .input(&[2, 1], Dtype::F32)
        .plan()
        .unwrap();
    assert_eq!(p.launches[0].grid.z, 65535);
    let p = Req::new("MatMul")
        .input(&[2_000_000, 2], Dtype::F32)
        .input(&[2, 1], Dtype::F32)
        .plan()
        .unwrap();
    assert_eq!(p.launches[0].grid.y, 65535);
    // the CPU kernel covers every batch regardless of the grid
    let (_, got) = Req::new("MatMul")
        .input(&[70_000, 1, 1], Dtype::F32)
        .input(&[1, 1], Dtype::F32)
        .run(&[vec![1.0; 70_000], vec![3.0]])
        .unwrap();
    assert!(got.len() == 70_000 && got.iter().all(|&v| v == 3.0));
}

// ---------------------------------------------------------------- Gemm

#[test]
fn gemm_matches_the_reference_for_every_attribute_and_bias_shape() {
    let (m, n, k) = (5usize, 11usize, 9usize);
    for dt in DTYPES {
        let float = umd_sdk::request::is_float(dt);
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (alpha, beta) = if float { (0.25, 0.35) } else { (2.0, -3.0) };
            for c_shape in [
                None,
                Some(vec![]),
                Some(vec![n as u64]),
                Some(vec![1, n as u64]),
                Some(vec![m as u64, 1]),
                Some(vec![m as u64, n as u64]),
            ] {
                let a_shape = if ta { [k, m] } else { [m, k] }.map(|d| d as u64);
                let b_shape = if tb { [n, k] } else { [k, n] }.map(|d| d as u64);
                let (a, b) = (data(m * k, 11, dt), data(k * n, 12, dt));
                let mut r = Req::new("Gemm")
                    .input(&a_shape, dt)
                    .input(&b_shape, dt)
                    .attr("transA", A::Int(ta as i64))
                    .attr("transB", A::Int(tb as i64))
                    .attr("alpha", A::Float(alpha))
                    .attr("beta", A::Float(beta));
                let mut values = vec![a.clone(), b.clone()];
                let mut c = None;
                if let Some(cs) = &c_shape {
                    r = r.input(cs, dt);
                    let cv = data(cs.iter().product::<u64>() as usize, 13, dt);
                    values.push(cv.clone());
                    c = Some((cs.clone(), cv));
                }
                let (d, got) = r.run(&values).unwrap();
                assert_eq!(d.shape, vec![m as u64, n as u64]);
                let (prod, mag) = reference(&a, &b, (m, n, k), (ta, tb), &[(0, 0)]);
                let want: Vec<f64> = (0..m * n)
                    .map(|idx| {
                        let (i, j) = (idx / n, idx % n);
                        let cv = c.as_ref().map_or(0.0, |(cs, cv)| match cs.len() {
                            0 => cv[0],
                            1 => cv[j],
                            _ => {
                                cv[if cs[0] == 1 { 0 } else { i } * cs[1] as usize
                                    + if cs[1] == 1 { 0 } else { j }]
                            }
                        });
                        alpha * prod[idx] + beta * cv
                    })
                    .collect();
                let mag: Vec<f64> = mag.iter().map(|g| g * alpha + 4.0).collect();
                assert_close(
                    &got,
                    &want,
                    &mag,
                    dt,
                    &format!("Gemm {dt:?} {ta} {tb} C {c_shape:?}"),
                );
            }
        }
    }
}

#[test]
fn gemm_defaults_and_beta_zero_ignore_c() {
    // default_no_bias via an absent slot; beta = 0 does not read C (a NaN C stays out)
    let (a, b) = (data(6, 1, Dtype::F32), data(12, 2, Dtype::F32));
    let (want, mag) = reference(&a, &b, (2, 4, 3), (false, false), &[(0, 0)]);
    let (_, got) = Req::new("Gemm")
        .input(&[2, 3], Dtype::F32)
        .input(&[3, 4], Dtype::F32)
        .absent()
        .run(&[a.clone(), b.clone()])
        .unwrap();
    assert_close(&got, &want, &mag, Dtype::F32, "absent C");
    let (_, got) = Req::new("Gemm")
        .input(&[2, 3], Dtype::F32)
        .input(&[3, 4], Dtype::F32)
        .input(&[2, 4], Dtype::F32)
        .attr("beta", A::Float(0.0))
        .run(&[a, b, vec![f64::NAN; 8]])
        .unwrap();
    assert_close(&got, &want, &mag, Dtype::F32, "beta 0");
}

#[test]
fn gemm_refuses_bad_requests() {
    let base = |a: &[u64], b: &[u64], c: &[u64]| {
        Req::new("Gemm")
            .input(a, Dtype::F32)
            .input(b, Dtype::F32)
            .input(c, Dtype::F32)
    };
    let e = base(&[2, 3], &[3, 4], &[3]).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("broadcast")));
    let e = base(&[2, 3], &[3, 4], &[4])
        .attr("broadcast", A::Int(0))
        .plan()
        .unwrap_err();
    assert!(
        matches!(e, OpError::InvalidShape(_)),
        "broadcast = 0 needs C of [M, N]"
    );
    assert!(
        base(&[2, 3], &[3, 4], &[4])
            .attr("broadcast", A::Int(1))
            .plan()
            .is_ok()
    );
    let e = base(&[1, 2, 3], &[3, 4], &[4]).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("matrices")));
    let e = base(&[2, 3], &[4, 3], &[4]).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("inner")));
    let e = base(&[2, 3], &[3, 4], &[4])
        .attr("gamma", A::Float(1.0))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("gamma")));
    let e = Req::new("Gemm")
        .input(&[2, 3], Dtype::I32)
        .input(&[3, 4], Dtype::I32)
        .attr("alpha", A::Float(0.5))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("alpha")));
    let e = Req::new("Gemm")
        .input(&[2, 3], Dtype::F32)
        .input(&[3, 4], Dtype::F32)
        .input(&[4], Dtype::F16)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
}

// ---------------------------------------------------------------- MatMulInteger

#[test]
fn matmul_integer_matches_onnx_and_every_operand_pairing() {
    let a = vec![11., 7., 3., 10., 6., 2., 9., 5., 1., 8., 4., 0.];
    let b = vec![1., 4., 2., 5., 3., 6.];
    let (d, got) = Req::new("MatMulInteger")
        .input(&[4, 3], Dtype::U8)
        .input(&[3, 2], Dtype::U8)
        .input(&[1], Dtype::U8)
        .input(&[1], Dtype::U8)
        .run(&[a, b, vec![12.], vec![0.]])
        .unwrap();
    assert_eq!(d.dtype, Dtype::I32);
    assert_eq!(got, vec![-38., -83., -44., -98., -50., -113., -56., -128.]);
    let (m, n, k) = (5, 19, 300);
    for ta in INT8 {
        for tb in INT8 {
            let draw = |len: usize, seed: u64, dt: Dtype| -> Vec<f64> {
                data(len, seed, Dtype::I64)
                    .into_iter()
                    .map(|v| if dt == Dtype::U8 { v + 8.0 } else { v * 15.0 })
                    .collect()
            };
            let (a, b) = (draw(m * k, 1, ta), draw(k * n, 2, tb));
            let (za, zb) = (draw(m, 3, ta), draw(1, 4, tb));
            let (_, got) = Req::new("MatMulInteger")
                .input(&[m as u64, k as u64], ta)
                .input(&[k as u64, n as u64], tb)
                .input(&[m as u64], ta)
                .input(&[], tb)
                .run(&[a.clone(), b.clone(), za.clone(), zb.clone()])
                .unwrap();
            let a0: Vec<f64> = (0..m * k).map(|i| a[i] - za[i / k]).collect();
            let b0: Vec<f64> = b.iter().map(|v| v - zb[0]).collect();
            let (want, _) = reference(&a0, &b0, (m, n, k), (false, false), &[(0, 0)]);
            assert_eq!(got, want, "{ta:?} x {tb:?}");
            // without zero points, batched with a per-column zero point absent
            let (_, got) = Req::new("MatMulInteger")
                .input(&[1, m as u64, k as u64], ta)
                .input(&[k as u64, n as u64], tb)
                .run(&[a.clone(), b.clone()])
                .unwrap();
            let (want, _) = reference(&a, &b, (m, n, k), (false, false), &[(0, 0)]);
            assert_eq!(got, want, "{ta:?} x {tb:?} no zero points");
        }
    }
    // per-column zero point of B, with A's slot absent
    let (_, got) = Req::new("MatMulInteger")
        .input(&[1, 2], Dtype::I8)
        .input(&[2, 2], Dtype::I8)
        .absent()
        .input(&[2], Dtype::I8)
        .run(&[vec![1., 2.], vec![3., 4., 5., 6.], vec![1., -1.]])
        .unwrap();
    assert_eq!(got, vec![2. + 8., 5. + 14.]);
}

#[test]
fn matmul_integer_refuses_bad_requests() {
    let e = Req::new("MatMulInteger")
        .input(&[2, 3], Dtype::I32)
        .input(&[3, 2], Dtype::U8)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("u8 and i8")));
    let e = Req::new("MatMulInteger")
        .input(&[2, 3], Dtype::U8)
        .input(&[3, 2], Dtype::U8)
        .input(&[1], Dtype::I8)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = Req::new("MatMulInteger")
        .input(&[2, 3], Dtype::U8)
        .input(&[3, 2], Dtype::U8)
        .input(&[3], Dtype::U8)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("per row")));
}

// ---------------------------------------------------------------- shared

#[test]
fn bad_requests_are_named() {
    let e = Req::new("MatMul")
        .input(&[2, 2], Dtype::F32)
        .input(&[2, 2], Dtype::F16)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32 and f16")));
    let e = Req::new("MatMul")
        .input(&[2, 2], Dtype::U8)
        .input(&[2, 2], Dtype::U8)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("i64")));
    let e = Req::new("MatMul")
        .input(&[2, 2], Dtype::F32)
        .input(&[2, 2], Dtype::F32)
        .attr("transA", A::Int(1))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("transA")));
    let e = Req::new("MatMul")
        .input(&[2, 2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = Req::new("Conv")
        .input(&[2, 2], Dtype::F32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedOp(_)));
    assert!(
        Req::new("matmul")
            .input(&[2], Dtype::F32)
            .input(&[2], Dtype::F32)
            .plan()
            .is_ok()
    );
}

#[test]
fn cuda_source_defines_its_entry_point() {
    let src = MatMul::kernel_source("matmul_f16", &Target::cpu()).unwrap();
    assert!(src.code.contains("void matmul_f16("));
    assert!(src.code.contains("umd_h2f(A["));
    let src = MatMul::kernel_source("matmul_int8", &Target::cpu()).unwrap();
    for e in &src.entry_points {
        assert!(src.code.contains(&format!("void {e}(")));
    }
    assert!(MatMul::kernel_source("matmul_u8", &Target::cpu()).is_err());
}

#[test]
fn cuda_sources_are_produced_for_every_dtype() {
    for dt in DTYPES {
        for r in [
            Req::new("MatMul").input(&[2, 4, 8], dt).input(&[8, 3], dt),
            Req::new("Gemm")
                .input(&[8, 4], dt)
                .input(&[3, 8], dt)
                .input(&[3], dt)
                .attr("transA", A::Int(1))
                .attr("transB", A::Int(1)),
        ] {
            let srcs = testing::cuda_sources::<MatMul>(&r.build()).unwrap();
            assert_eq!(srcs.len(), 1);
        }
    }
    for (ta, tb) in [(Dtype::U8, Dtype::I8), (Dtype::I8, Dtype::I8)] {
        let r = Req::new("MatMulInteger")
            .input(&[4, 8], ta)
            .input(&[8, 3], tb)
            .input(&[4], ta)
            .input(&[3], tb);
        assert_eq!(
            testing::cuda_sources::<MatMul>(&r.build()).unwrap().len(),
            1
        );
    }
}

#[test]
fn self_tests_pass_and_describe_lists_every_op() {
    for case in MatMul::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<MatMul>(&req, &case.input_data).unwrap();
        for ((o, want), d) in outs.iter().zip(&case.expected).zip(&plan.outputs) {
            let (g, w) = (
                dtype::decode_f64(d.dtype, o),
                dtype::decode_f64(d.dtype, want),
            );
            assert_eq!(g.len(), w.len());
            for (g, w) in g.iter().zip(&w) {
                assert!((g - w).abs() <= case.tolerance, "{}: {g} vs {w}", case.name);
            }
        }
    }
    assert_eq!(MatMul::describe().ops.len(), 3);
    assert_eq!(
        MatMul::tolerance("MatMul", Dtype::I32).unwrap().absolute,
        0.0
    );
}

#[test]
#[ignore = "timing, run with --release --ignored --nocapture"]
fn timing_f32_512_and_1024() {
    use umd_sdk::kernel::{HeapMemory, binding_access};
    use umd_sdk::{BlockRange, BoundBuffer, KernelCall};
    for n in [512u64, 1024] {
        let plan = Req::new("MatMul")
            .input(&[n, n], Dtype::F32)
            .input(&[n, n], Dtype::F32)
            .plan()
            .unwrap();
        let l = &plan.launches[0];
        let v = dtype::encode(Dtype::F32, &data((n * n) as usize, 1, Dtype::F32)).unwrap();
        let mut mem =
            HeapMemory::new((0..3).map(|b| (b, binding_access(&l.relocations, b), v.clone())));
        let call = KernelCall {
            module_id: l.module_id.clone(),
            entry_point: l.entry_point.clone(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: (0..3)
                .map(|binding| BoundBuffer {
                    binding,
                    size: v.len() as u64,
                })
                .collect(),
            blocks: BlockRange {
                first: 0,
                count: l.grid.volume(),
            },
        };
        let iters = if n == 512 { 10 } else { 3 };
        MatMul::run_kernel(&call, &mut mem).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..iters {
            MatMul::run_kernel(&call, &mut mem).unwrap();
        }
        let s = t.elapsed().as_secs_f64() / iters as f64;
        eprintln!(
            "{n}^3 f32, one thread, in place: {:.1} ms, {:.2} GFLOP/s",
            s * 1e3,
            2.0 * (n * n * n) as f64 / s / 1e9
        );
        // one of 16 ranges, as one of 16 workers runs it (B read and packed whole)
        let mut part = call.clone();
        part.blocks.count = l.grid.volume() / 16;
        let t = std::time::Instant::now();
        for _ in 0..iters {
            MatMul::run_kernel(&part, &mut mem).unwrap();
        }
        let s16 = t.elapsed().as_secs_f64() / iters as f64;
        eprintln!(
            "  one range of 16: {:.2} ms ({:.1}x the even share of the whole)",
            s16 * 1e3,
            s16 * 16.0 / s
        );
    }
}
