//! Native tests: every op on the CPU kernels against naive references written here (index
//! unravelling, numpy's semantics in f64 with its rounding points), attribute forms, errors, the
//! 8-bit float encoder against the SDK's exhaustive one, and the CUDA sources of every module.

use super::*;
use umd_sdk::dtype::{decode_f64, encode};
use umd_sdk::{AttrValueExt, dtype, testing};

type Input = (Vec<u64>, Dtype, Vec<f64>);
/// Each output's dtype, shape and values.
type Outputs = Vec<(Dtype, Vec<u64>, Vec<f64>)>;

fn request(op: &str, inputs: &[Option<Input>], attrs: &[(&str, i64)]) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op).opset(25);
    for (i, inp) in inputs.iter().enumerate() {
        b = match inp {
            Some((s, dt, _)) => b.input(TensorDesc::new(format!("in{i}"), s.clone(), *dt)),
            None => b.absent(),
        };
    }
    for (name, v) in attrs {
        b = b.attr(name, AttrValueExt::Int(*v));
    }
    b.build(Target::cpu())
}

fn run(op: &str, inputs: &[Option<Input>], attrs: &[(&str, i64)]) -> Result<Outputs, OpError> {
    let req = request(op, inputs, attrs);
    let data: Vec<Vec<u8>> = inputs
        .iter()
        .flatten()
        .map(|(_, dt, v)| encode(*dt, v).unwrap())
        .collect();
    let (plan, outs) = testing::run::<Quant>(&req, &data)?;
    // the CUDA path plans and renders too
    testing::cuda_sources::<Quant>(&req)?;
    Ok(plan
        .outputs
        .iter()
        .zip(outs)
        .map(|(d, b)| {
            let mut v = decode_f64(d.dtype, &b);
            v.truncate(d.shape.iter().product::<u64>() as usize); // packed: unused last codes
            (d.dtype, d.shape.clone(), v)
        })
        .collect())
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fn assert_values(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            same(*g, *w),
            "{what}: element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

fn unravel(shape: &[u64], mut flat: u64) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

/// The scale (and zero point) element of x element `flat`: numpy's reshape_input by index.
fn scale_at(x: &[u64], s: &[u64], axis: usize, block: u64, flat: u64) -> usize {
    if s.iter().product::<u64>() == 1 {
        return 0;
    }
    let idx = unravel(x, flat);
    if block == 0 {
        return idx[axis] as usize;
    }
    let mut at = 0;
    for d in 0..x.len() {
        let i = if d == axis { idx[d] / block } else { idx[d] };
        at = at * s[d] + i;
    }
    at as usize
}

fn rnd(dt: Dtype, v: f64) -> f64 {
    decode_f64(dt, &encode(dt, &[v]).unwrap())[0]
}

/// Reference QuantizeLinear (saturating).
fn ref_q(
    x: &Input,
    s: &Input,
    zp: Option<&Input>,
    y: Dtype,
    (axis, block): (usize, u64),
    prec: Dtype,
) -> Vec<f64> {
    (0..x.2.len())
        .map(|e| {
            let k = scale_at(&x.0, &s.0, axis, block, e as u64);
            let q = if prec == Dtype::F64 {
                x.2[e] / s.2[k]
            } else {
                rnd(
                    prec,
                    (rnd(prec, x.2[e]) as f32 / rnd(prec, s.2[k]) as f32) as f64,
                )
            };
            match crate::elem::int_range(y) {
                Some((lo, hi)) => {
                    let v = q.round_ties_even() + zp.map_or(0.0, |z| z.2[k]);
                    if v.is_nan() { lo } else { v.clamp(lo, hi) }
                }
                None if y == Dtype::F4e2m1 => {
                    let zv = zp.map_or(0.0, |z| z.2[k]);
                    rnd(y, (q as f32 + zv as f32) as f64)
                }
                None => umd_sdk::dtype::f8_to_f32(umd_sdk::dtype::f32_to_f8(q as f32, y, true), y)
                    as f64,
            }
        })
        .collect()
}

fn values(rng: &mut Rng, n: u64, lo: f64, hi: f64, int: bool) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let v = rng.range(lo, hi);
            if int {
                v.round()
            } else {
                (v * 8.0).round() / 8.0
            }
        })
        .collect()
}

#[test]
fn f8_encoder_matches_the_sdk_reference() {
    let mut rng = Rng(7);
    for dt in [
        Dtype::F8e4m3fn,
        Dtype::F8e4m3fnuz,
        Dtype::F8e5m2,
        Dtype::F8e5m2fnuz,
    ] {
        let mut vals: Vec<f32> = vec![
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-9,
            1e9,
            464.0,
            480.0,
            241.0,
            61440.0,
        ];
        for code in 0u8..=255 {
            let v = f8::decode(code, dt);
            let w = f8::decode(code.wrapping_add(1), dt);
            vals.push(v);
            if v.is_finite() && w.is_finite() {
                vals.push((v + w) / 2.0); // ties
                vals.push(v * 0.75 + w * 0.25);
            }
        }
        for _ in 0..2000 {
            vals.push((rng.range(-1.0, 1.0) * 2f64.powf(rng.range(-20.0, 18.0))) as f32);
        }
        // An infinite input saturates (as ml_dtypes does).
        assert_eq!(
            f8::decode(f8::encode(f32::INFINITY, dt, true), dt) as f64,
            f8::max_finite(dt)
        );
        for &v in vals.iter() {
            for sat in [true, false] {
                let got = f8::decode(f8::encode(v, dt, sat), dt);
                let want = f8::decode(umd_sdk::dtype::f32_to_f8(v, dt, sat), dt);
                assert!(
                    got == want || (got.is_nan() && want.is_nan()),
                    "{dt:?} {v} sat {sat}: {got} vs {want}"
                );
            }
        }
        // without saturation, as ml_dtypes: round to nearest even first, then overflow
        let ml = [
            (Dtype::F8e4m3fn, 464.0, 0x7e),
            (Dtype::F8e4m3fn, -464.0, 0xfe),
            (Dtype::F8e4m3fnuz, 250.0, 0x80),
            (Dtype::F8e5m2, 61440.0, 0x7c),
            (Dtype::F8e5m2, 60000.0, 0x7b),
            (Dtype::F8e5m2fnuz, 61440.0, 0x80),
        ];
        for (d, v, code) in ml {
            if d == dt {
                assert_eq!(f8::encode(v, d, false), code, "{d:?} {v}");
            }
        }
        // the sign of a value rounding to zero is kept (ml_dtypes), except in fnuz formats
        let neg = f8::encode(-1e-12, dt, true);
        assert_eq!(neg, if f8::format(dt).2 { 0 } else { 0x80 });
    }
}

#[test]
fn quantize_per_tensor_axis_and_blocked_every_dtype() {
    let mut rng = Rng(1);
    let shapes: [(Vec<u64>, usize, u64, Vec<u64>); 6] = [
        (vec![6], 0, 0, vec![]),
        (vec![2, 3, 4], 1, 0, vec![3]),
        (vec![2, 3, 4], 2, 0, vec![4]),
        (vec![3, 5], 1, 2, vec![3, 3]), // remainder block
        (vec![4, 2, 3], 0, 3, vec![2, 2, 3]),
        (vec![0, 3], 1, 0, vec![3]), // empty
    ];
    for x_dt in crate::qdq::Q_X {
        for s_dt in [Dtype::F32, Dtype::F16, Dtype::Bf16] {
            for y_dt in crate::qdq::QUANTIZED {
                for (shape, axis, block, s_shape) in &shapes {
                    let n: u64 = shape.iter().product();
                    let sn: u64 = s_shape.iter().product();
                    let xv = values(&mut rng, n, -300.0, 300.0, x_dt == Dtype::I32);
                    let x = (
                        shape.clone(),
                        x_dt,
                        xv.iter().map(|v| rnd(x_dt, *v)).collect(),
                    );
                    let s = (
                        s_shape.clone(),
                        s_dt,
                        (0..sn)
                            .map(|_| rnd(s_dt, [0.5, 2.0, 3.0, 0.7][(rng.next() * 4.0) as usize]))
                            .collect(),
                    );
                    let z_vals = if dtype::is_f8(y_dt) || y_dt == Dtype::F4e2m1 {
                        vec![0.0; sn as usize]
                    } else {
                        let (lo, hi) = crate::elem::int_range(y_dt).unwrap();
                        values(&mut rng, sn, lo.max(-20.0), hi.min(20.0), true)
                    };
                    let z = (s_shape.clone(), y_dt, z_vals);
                    let attrs = [("axis", *axis as i64), ("block_size", *block as i64)];
                    let got = run(
                        "QuantizeLinear",
                        &[Some(x.clone()), Some(s.clone()), Some(z.clone())],
                        &attrs,
                    )
                    .unwrap();
                    assert_eq!(got[0].0, y_dt);
                    assert_eq!(&got[0].1, shape);
                    let want = ref_q(&x, &s, Some(&z), y_dt, (*axis, *block), s_dt);
                    assert_values(
                        &got[0].2,
                        &want,
                        &format!("Q {x_dt:?} {s_dt:?} {y_dt:?} {shape:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn quantize_attributes_output_dtype_saturate_precision() {
    let x = (vec![5], Dtype::F32, vec![0.0, 1.0, 2.0, 1e6, -200.0]);
    let s = (vec![], Dtype::F32, vec![2.0]);
    // no zero point: uint8 by default
    let got = run("QuantizeLinear", &[Some(x.clone()), Some(s.clone())], &[]).unwrap();
    assert_eq!(got[0].0, Dtype::U8);
    assert_values(&got[0].2, &[0.0, 0.0, 1.0, 255.0, 0.0], "default u8");
    // output_dtype int16 (ONNX 5)
    let got = run(
        "QuantizeLinear",
        &[Some(x.clone()), Some(s.clone())],
        &[("output_dtype", 5)],
    )
    .unwrap();
    assert_eq!(got[0].0, Dtype::I16);
    assert_values(&got[0].2, &[0.0, 0.0, 1.0, 32767.0, -100.0], "i16");
    // float8 without saturation: e4m3fn overflow is NaN, e5m2's inf
    for (code, dt, big) in [
        (17, Dtype::F8e4m3fn, f64::NAN),
        (19, Dtype::F8e5m2, f64::INFINITY),
    ] {
        let got = run(
            "QuantizeLinear",
            &[Some(x.clone()), Some(s.clone())],
            &[("output_dtype", code), ("saturate", 0)],
        )
        .unwrap();
        assert_eq!(got[0].0, dt);
        assert_values(&got[0].2[3..4], &[big], "no saturation");
        let got = run(
            "QuantizeLinear",
            &[Some(x.clone()), Some(s.clone())],
            &[("output_dtype", code)],
        )
        .unwrap();
        assert_values(&got[0].2[3..4], &[f8::max_finite(dt)], "saturation");
    }
    // precision float16 (ONNX 10): 1/3 rounds in f16 before the rounding to an integer
    let x = (vec![2], Dtype::F32, vec![2049.0, 1.0]);
    let s = (vec![], Dtype::F32, vec![1.0]);
    let z = (vec![], Dtype::I16, vec![0.0]);
    let got = run(
        "QuantizeLinear",
        &[Some(x.clone()), Some(s.clone()), Some(z.clone())],
        &[("precision", 10)],
    )
    .unwrap();
    assert_values(&got[0].2, &[2048.0, 1.0], "f16 precision");
    let got = run("QuantizeLinear", &[Some(x), Some(s), Some(z)], &[]).unwrap();
    assert_values(&got[0].2, &[2049.0, 1.0], "f32 precision");
}

#[test]
fn dequantize_every_dtype_and_layout() {
    let mut rng = Rng(2);
    let shapes: [(Vec<u64>, usize, u64, Vec<u64>); 5] = [
        (vec![6], 0, 0, vec![1]),
        (vec![2, 3, 4], 1, 0, vec![3]),
        (vec![3, 5], 1, 2, vec![3, 3]),
        (vec![1, 4, 3, 2], 1, 2, vec![1, 2, 3, 2]),
        (vec![2, 0], 0, 0, vec![2]),
    ];
    let mut xs = crate::qdq::QUANTIZED.to_vec();
    xs.push(Dtype::I32);
    for x_dt in xs {
        for s_dt in [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F8e8m0] {
            for y_code in [0i64, 1, 10, 16] {
                for (shape, axis, block, s_shape) in &shapes {
                    let n: u64 = shape.iter().product();
                    let sn: u64 = s_shape.iter().product();
                    let f8x = dtype::is_f8(x_dt) || x_dt == Dtype::F4e2m1;
                    let xv: Vec<f64> = if f8x {
                        values(&mut rng, n, -50.0, 50.0, false)
                            .iter()
                            .map(|v| rnd(x_dt, *v))
                            .collect()
                    } else {
                        let (lo, hi) = crate::elem::int_range(x_dt).unwrap();
                        values(&mut rng, n, lo.max(-1000.0), hi.min(1000.0), true)
                    };
                    let zv: Vec<f64> = if f8x {
                        vec![0.0; sn as usize]
                    } else {
                        let hi = crate::elem::int_range(x_dt).unwrap().1;
                        (0..sn).map(|i| ((i % 3) as f64).min(hi)).collect()
                    };
                    let sv: Vec<f64> = (0..sn).map(|i| [0.5, 2.0, 0.25][i as usize % 3]).collect();
                    let x = (shape.clone(), x_dt, xv);
                    let s = (s_shape.clone(), s_dt, sv);
                    let z = (s_shape.clone(), x_dt, zv);
                    let mut attrs = vec![("axis", *axis as i64), ("block_size", *block as i64)];
                    if y_code != 0 {
                        attrs.push(("output_dtype", y_code));
                    }
                    let y_dt = crate::plan::from_onnx(y_code).unwrap_or(s_dt);
                    let res = run(
                        "DequantizeLinear",
                        &[Some(x.clone()), Some(s.clone()), Some(z.clone())],
                        &attrs,
                    );
                    if y_dt == Dtype::F8e8m0 {
                        assert!(matches!(res, Err(OpError::UnsupportedDtype(_))), "{res:?}");
                        continue;
                    }
                    let got = res.unwrap();
                    assert_eq!(got[0].0, y_dt);
                    let want: Vec<f64> = (0..n as usize)
                        .map(|e| {
                            let k = scale_at(shape, s_shape, *axis, *block, e as u64);
                            let dx = x.2[e] - z.2[k];
                            let v = if x_dt == Dtype::I32 {
                                dx * s.2[k]
                            } else {
                                (dx as f32 * s.2[k] as f32) as f64
                            };
                            rnd(y_dt, v)
                        })
                        .collect();
                    assert_values(
                        &got[0].2,
                        &want,
                        &format!("DQ {x_dt:?} {s_dt:?} {y_dt:?} {shape:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn onnx_examples() {
    // test_dequantizelinear_e4m3fn_float16 and test_quantizelinear_e4m3fn
    let x = (vec![5], Dtype::F8e4m3fn, vec![0.0, 0.5, 1.0, 448.0, -104.0]);
    let got = run(
        "DequantizeLinear",
        &[Some(x), Some((vec![], Dtype::F16, vec![2.0]))],
        &[("axis", 0)],
    )
    .unwrap();
    assert_eq!(got[0].0, Dtype::F16);
    assert_values(&got[0].2, &[0.0, 1.0, 2.0, 896.0, -208.0], "dq e4m3fn");
    let x = (vec![5], Dtype::F32, vec![0.0, 1.0, 2.0, 100000.0, 200.0]);
    let z = (vec![1], Dtype::F8e4m3fn, vec![0.0]);
    let got = run(
        "QuantizeLinear",
        &[Some(x), Some((vec![], Dtype::F32, vec![2.0])), Some(z)],
        &[],
    )
    .unwrap();
    assert_values(&got[0].2, &[0.0, 0.5, 1.0, 448.0, 96.0], "q e4m3fn");
    // test_quantizelinear_int16
    let x = (
        vec![8],
        Dtype::F32,
        vec![0.0, -514.0, 2.9, -2.9, 65022.0, -66046.0, 65023.0, -66047.0],
    );
    let z = (vec![], Dtype::I16, vec![256.0]);
    let got = run(
        "QuantizeLinear",
        &[Some(x), Some((vec![], Dtype::F32, vec![2.0])), Some(z)],
        &[],
    )
    .unwrap();
    assert_values(
        &got[0].2,
        &[
            256.0, -1.0, 257.0, 255.0, 32767.0, -32767.0, 32767.0, -32768.0,
        ],
        "q i16",
    );
}

#[test]
fn dynamic_quantize_linear_as_the_reference() {
    for xv in [
        vec![0.0, 2.0, -3.0, -2.5, 1.34, 0.5],
        vec![-1.0, -2.1, -1.3, -2.5, -3.34, -4.0],
        vec![
            1.0, 2.1, 1.3, 2.5, 3.34, 4.0, 1.5, 2.6, 3.9, 4.0, 3.0, 2.345,
        ],
        vec![],
        vec![5.0, 5.0],
    ] {
        let n = xv.len() as u64;
        let got = run(
            "DynamicQuantizeLinear",
            &[Some((vec![n], Dtype::F32, xv.clone()))],
            &[],
        )
        .unwrap();
        let x32: Vec<f32> = xv.iter().map(|v| *v as f32).collect();
        let maxx = x32.iter().copied().fold(0f32, f32::max);
        let minx = x32.iter().copied().fold(0f32, f32::min);
        let scale = (if maxx == minx { 1.0 } else { maxx - minx }) / 255.0f32;
        let zp = (0.0f32 - minx / scale).clamp(0.0, 255.0).round_ties_even();
        let y: Vec<f64> = x32
            .iter()
            .map(|v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as f64)
            .collect();
        assert_values(&got[0].2, &y, "y");
        assert_values(&got[1].2, &[scale as f64], "scale");
        assert_values(&got[2].2, &[zp as f64], "zero point");
        assert_eq!(got[1].1, Vec::<u64>::new());
    }
}

#[test]
fn qlinear_matmul_against_a_naive_reference() {
    let mut rng = Rng(3);
    let cases: [(Vec<u64>, Vec<u64>, bool); 6] = [
        (vec![2, 4], vec![4, 3], false),
        (vec![2, 2, 4], vec![2, 4, 3], false),
        (vec![3, 1, 2, 5], vec![4, 5, 2], true),
        (vec![4], vec![4, 3], false),
        (vec![2, 4], vec![4], true),
        (vec![0, 4], vec![4, 3], false),
    ];
    for a_dt in [Dtype::I8, Dtype::U8] {
        for b_dt in [Dtype::I8, Dtype::U8] {
            for s_dt in [Dtype::F32, Dtype::F16, Dtype::Bf16] {
                for (ash, bsh, per) in &cases {
                    let (m, k) = if ash.len() == 1 {
                        (1, ash[0])
                    } else {
                        (ash[ash.len() - 2], ash[ash.len() - 1])
                    };
                    let n = if bsh.len() == 1 {
                        1
                    } else {
                        bsh[bsh.len() - 1]
                    };
                    let ints = |dt: Dtype, c: u64, rng: &mut Rng| -> Vec<f64> {
                        let (lo, hi) = crate::elem::int_range(dt).unwrap();
                        values(rng, c, lo, hi, true)
                    };
                    let a = (
                        ash.clone(),
                        a_dt,
                        ints(a_dt, ash.iter().product(), &mut rng),
                    );
                    let b = (
                        bsh.clone(),
                        b_dt,
                        ints(b_dt, bsh.iter().product(), &mut rng),
                    );
                    let (am, bn) = if *per { (m, n) } else { (1, 1) };
                    let sc = |c: u64, rng: &mut Rng| -> Vec<f64> {
                        (0..c).map(|_| rnd(s_dt, rng.range(0.001, 0.05))).collect()
                    };
                    let a_s = (vec![am], s_dt, sc(am, &mut rng));
                    let b_s = (vec![bn], s_dt, sc(bn, &mut rng));
                    let a_z = (
                        vec![am],
                        a_dt,
                        ints(a_dt, am, &mut rng)
                            .iter()
                            .map(|v| (v / 8.0).round())
                            .collect(),
                    );
                    let b_z = (
                        vec![bn],
                        b_dt,
                        ints(b_dt, bn, &mut rng)
                            .iter()
                            .map(|v| (v / 8.0).round())
                            .collect(),
                    );
                    let y_s = (vec![1], s_dt, vec![rnd(s_dt, 0.02)]);
                    let y_dt = if a_dt == b_dt { Dtype::U8 } else { Dtype::I8 };
                    let y_z = (
                        vec![1],
                        y_dt,
                        vec![if y_dt == Dtype::U8 { 128.0 } else { -3.0 }],
                    );
                    let ins = [
                        Some(a.clone()),
                        Some(a_s.clone()),
                        Some(a_z.clone()),
                        Some(b.clone()),
                        Some(b_s.clone()),
                        Some(b_z.clone()),
                        Some(y_s.clone()),
                        Some(y_z.clone()),
                    ];
                    let got = run("QLinearMatMul", &ins, &[]).unwrap();
                    // naive: numpy matmul semantics over the broadcast batch
                    let (a2, b2) = (
                        if ash.len() == 1 {
                            vec![1, k]
                        } else {
                            ash.clone()
                        },
                        if bsh.len() == 1 {
                            vec![k, 1]
                        } else {
                            bsh.clone()
                        },
                    );
                    let batch = umd_sdk::shape::broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2])
                        .unwrap();
                    let nb: u64 = batch.iter().product();
                    let (lo, hi) = crate::elem::int_range(y_dt).unwrap();
                    let mut want = vec![];
                    for bt in 0..nb {
                        let idx = unravel(&batch, bt);
                        let off = |sh: &[u64]| -> u64 {
                            let bs = &sh[..sh.len() - 2];
                            let lead = batch.len() - bs.len();
                            let mut at = 0;
                            for (j, &dim) in bs.iter().enumerate() {
                                at = at * dim + if dim == 1 { 0 } else { idx[lead + j] };
                            }
                            at * sh[sh.len() - 2] * sh[sh.len() - 1]
                        };
                        let (ao, bo) = (off(&a2), off(&b2));
                        for i in 0..m {
                            for j in 0..n {
                                let ri = if *per { i as usize } else { 0 };
                                let cj = if *per { j as usize } else { 0 };
                                let mut acc = 0f64;
                                for kk in 0..k {
                                    acc += (a.2[(ao + i * k + kk) as usize] - a_z.2[ri])
                                        * (b.2[(bo + kk * n + j) as usize] - b_z.2[cj]);
                                }
                                let mult = rnd(s_dt, rnd(s_dt, a_s.2[ri] * b_s.2[cj]) / y_s.2[0]);
                                want.push((acc * mult + y_z.2[0]).round_ties_even().clamp(lo, hi));
                            }
                        }
                    }
                    assert_values(
                        &got[0].2,
                        &want,
                        &format!("QMM {a_dt:?} {b_dt:?} {s_dt:?} {ash:?} {bsh:?}"),
                    );
                    let mut shape = batch.clone();
                    if ash.len() > 1 {
                        shape.push(m);
                    }
                    if bsh.len() > 1 {
                        shape.push(n);
                    }
                    assert_eq!(got[0].1, shape);
                }
            }
        }
    }
}

#[test]
fn qlinear_matmul_without_zero_points() {
    let a = (vec![1, 2], Dtype::I8, vec![-3.0, 5.0]);
    let b = (vec![2, 1], Dtype::I8, vec![2.0, 1.0]);
    let s = |v| Some((vec![], Dtype::F32, vec![v]));
    let got = run(
        "QLinearMatMul",
        &[Some(a), s(1.0), None, Some(b), s(1.0), None, s(0.5), None],
        &[],
    )
    .unwrap();
    assert_eq!(got[0].0, Dtype::I8);
    assert_values(&got[0].2, &[-2.0], "no zero points");
}

#[test]
fn errors_name_what_is_wrong() {
    let x = Some((vec![2, 3], Dtype::F32, vec![0.0; 6]));
    let s3 = Some((vec![3], Dtype::F32, vec![1.0; 3]));
    let err = |r: Result<Outputs, OpError>| r.unwrap_err();
    assert!(
        matches!(err(run("QuantizeLinear", &[x.clone(), s3.clone()], &[("axis", 5)])), OpError::InvalidAttribute(m) if m.contains("axis"))
    );
    assert!(matches!(
        err(run(
            "QuantizeLinear",
            &[x.clone(), s3.clone()],
            &[("axis", 0)]
        )),
        OpError::InvalidShape(_)
    ));
    assert!(
        matches!(err(run("QuantizeLinear", &[x.clone(), s3.clone()], &[("axis", 1), ("block_size", 2)])), OpError::InvalidShape(m) if m.contains("block"))
    );
    assert!(
        matches!(err(run("QuantizeLinear", &[x.clone(), s3.clone()], &[("axis", 1), ("bogus", 2)])), OpError::InvalidAttribute(m) if m.contains("bogus"))
    );
    assert!(matches!(
        err(run(
            "QuantizeLinear",
            &[x.clone(), s3.clone()],
            &[("output_dtype", 14)]
        )),
        OpError::UnsupportedDtype(_)
    ));
    assert!(matches!(
        err(run(
            "QuantizeLinear",
            &[x.clone(), s3.clone()],
            &[("output_dtype", 1)]
        )),
        OpError::UnsupportedDtype(_)
    ));
    let zi8 = Some((vec![3], Dtype::I8, vec![0.0; 3]));
    assert!(
        matches!(err(run("QuantizeLinear", &[x.clone(), s3.clone(), zi8], &[("output_dtype", 2)])), OpError::InvalidAttribute(m) if m.contains("output_dtype"))
    );
    assert!(matches!(
        err(run("DequantizeLinear", &[x.clone(), s3.clone()], &[])),
        OpError::UnsupportedDtype(_)
    ));
    let xi = Some((vec![2, 3], Dtype::I8, vec![0.0; 6]));
    let zu = Some((vec![3], Dtype::U8, vec![0.0; 3]));
    assert!(matches!(
        err(run("DequantizeLinear", &[xi.clone(), s3.clone(), zu], &[])),
        OpError::UnsupportedDtype(_)
    ));
    assert!(matches!(
        err(run(
            "DynamicQuantizeLinear",
            &[Some((vec![2], Dtype::F16, vec![0.0; 2]))],
            &[]
        )),
        OpError::UnsupportedDtype(_)
    ));
    let s1 = Some((vec![], Dtype::F32, vec![1.0]));
    let b = Some((vec![4, 2], Dtype::I8, vec![0.0; 8]));
    assert!(matches!(
        err(run(
            "QLinearMatMul",
            &[
                xi.clone(),
                s1.clone(),
                None,
                b,
                s1.clone(),
                None,
                s1.clone(),
                None
            ],
            &[]
        )),
        OpError::InvalidShape(_)
    ));
    assert!(matches!(
        Quant::plan_ext(&request("Nope", &[], &[])),
        Err(OpError::UnsupportedOp(_))
    ));
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    for case in Quant::self_tests() {
        let mut b = PlanRequestExt::builder(&case.op);
        for d in &case.inputs {
            b = b.input(umd_sdk::legacy::desc_from_legacy(d));
        }
        for a in &case.attributes {
            let v = match &a.value {
                umd_sdk::AttrValue::Int(v) => AttrValueExt::Int(*v),
                other => panic!("{other:?}"),
            };
            b = b.attr(&a.name, v);
        }
        let req = b.build(Target::cpu());
        let (plan, outs) = testing::run::<Quant>(&req, &case.input_data).unwrap();
        for ((o, got), want) in plan.outputs.iter().zip(outs).zip(&case.expected) {
            let (g, w) = (decode_f64(o.dtype, &got), decode_f64(o.dtype, want));
            for (g, w) in g.iter().zip(&w) {
                assert!(
                    (g - w).abs() / (1.0 + w.abs()) <= case.tolerance.max(0.0) + 1e-12,
                    "{}: {g} vs {w}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn cuda_modules_define_their_entry_points() {
    let mut ids = vec![crate::dynq::MODULE.to_string()];
    for x in crate::qdq::Q_X {
        for s in crate::qdq::SCALES {
            for y in crate::qdq::QUANTIZED {
                ids.push(crate::qdq::module_id(true, x, s, y));
            }
        }
    }
    for y in crate::qdq::DQ_Y {
        ids.push(crate::qdq::module_id(false, Dtype::I32, Dtype::F32, y));
        for x in crate::qdq::QUANTIZED {
            ids.push(crate::qdq::module_id(false, x, Dtype::F16, y));
        }
    }
    for a in crate::qmatmul::INTS {
        for s in crate::qmatmul::SCALES {
            ids.push(crate::qmatmul::module_id(a, Dtype::U8, s, a));
        }
    }
    for id in ids {
        let src =
            Quant::kernel_source(&id, &Target::cpu()).unwrap_or_else(|e| panic!("{id}: {e:?}"));
        assert!(!src.code.contains("#include"));
        for e in &src.entry_points {
            assert!(
                src.code.contains(&format!("void {e}(")),
                "{e} missing from {id}"
            );
        }
        if let Ok(dir) = std::env::var("UMD_DUMP_CUDA") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                std::path::Path::new(&dir).join(format!("{id}.cu")),
                &src.code,
            )
            .unwrap();
        }
    }
    assert!(Quant::kernel_source("quant_q_f32_f32_f32", &Target::cpu()).is_err());
}

#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    let mut rng = Rng(11);
    let mut add = |name: String, op: &str, inputs: &[Option<Input>], attrs: &[(&str, i64)]| {
        let req = request(op, inputs, attrs);
        let data: Vec<Vec<u8>> = inputs
            .iter()
            .flatten()
            .map(|(_, dt, v)| encode(*dt, v).unwrap())
            .collect();
        crate::emu::dump_plan::<Quant>(&mut out, &dir, &name, &req, &data, |_| "u8");
    };
    // values with ties, out-of-range, NaN and infinities
    let mut xv: Vec<f64> = values(&mut rng, 600, -700.0, 700.0, false);
    xv.extend([
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.5,
        1.5,
        2.5,
        -0.5,
        -2.5,
        1e-9,
        -1e-9,
    ]);
    let n = xv.len() as u64;
    for x_dt in crate::qdq::Q_X {
        let xs: Vec<f64> = xv.iter().map(|v| rnd(x_dt, *v)).collect();
        for s_dt in crate::qdq::SCALES {
            for y_dt in crate::qdq::QUANTIZED {
                let sv = rnd(s_dt, if s_dt == Dtype::I32 { 3.0 } else { 0.5 });
                let zp = if dtype::is_f8(y_dt) {
                    0.0
                } else if y_dt == Dtype::U8 || y_dt == Dtype::U16 {
                    7.0
                } else {
                    -3.0
                };
                let x = (vec![n], x_dt, xs.clone());
                for sat in [0, 1] {
                    add(
                        format!("Q-{x_dt:?}-{s_dt:?}-{y_dt:?}-sat{sat}"),
                        "QuantizeLinear",
                        &[
                            Some(x.clone()),
                            Some((vec![], s_dt, vec![sv])),
                            Some((vec![], y_dt, vec![zp])),
                        ],
                        &[("saturate", sat)],
                    );
                }
            }
        }
        // per axis and blocked, precision attribute
        let x = (vec![5, 4, 30], x_dt, xs[..600].to_vec());
        let s = (vec![4], Dtype::F32, vec![0.5, 2.0, 0.3, 7.0]);
        let z = (vec![4], Dtype::I8, vec![1.0, -2.0, 0.0, 5.0]);
        add(
            format!("Q-axis-{x_dt:?}"),
            "QuantizeLinear",
            &[Some(x.clone()), Some(s), Some(z)],
            &[("precision", 10)],
        );
        let sb: Vec<f64> = (0..5 * 4 * 4).map(|i| 0.25 + (i % 7) as f64).collect();
        let s = (
            vec![5, 4, 4],
            Dtype::Bf16,
            sb.iter().map(|v| rnd(Dtype::Bf16, *v)).collect(),
        );
        let z = (
            vec![5, 4, 4],
            Dtype::U16,
            (0..80).map(|i| (i * 3) as f64).collect(),
        );
        add(
            format!("Q-blocked-{x_dt:?}"),
            "QuantizeLinear",
            &[Some(x), Some(s), Some(z)],
            &[("axis", -1), ("block_size", 8)],
        );
    }
    let mut dq_x = crate::qdq::QUANTIZED.to_vec();
    dq_x.push(Dtype::I32);
    for x_dt in dq_x {
        let xs: Vec<f64> = (0..300)
            .map(|i| rnd(x_dt, (i as f64 - 150.0) * 0.75))
            .collect();
        for s_dt in crate::qdq::SCALES {
            for y_code in [0, 1, 10, 16, 11] {
                if matches!(s_dt, Dtype::F8e8m0 | Dtype::I32) && y_code == 0 {
                    continue;
                }
                let x = (vec![3, 100], x_dt, xs.clone());
                let s = (
                    vec![3],
                    s_dt,
                    vec![rnd(s_dt, 0.5), rnd(s_dt, 4.0), rnd(s_dt, 0.125)],
                );
                let z = (
                    vec![3],
                    x_dt,
                    if dtype::is_f8(x_dt) {
                        vec![0.0; 3]
                    } else {
                        vec![1.0, 0.0, 3.0]
                    },
                );
                add(
                    format!("DQ-{x_dt:?}-{s_dt:?}-{y_code}"),
                    "DequantizeLinear",
                    &[Some(x), Some(s), Some(z)],
                    &[("axis", 0), ("output_dtype", y_code)],
                );
            }
        }
    }
    for xv in [
        values(&mut rng, 700, -3.0, 5.0, false),
        vec![],
        vec![f64::NAN, 1.0],
    ] {
        let n = xv.len() as u64;
        add(
            format!("DynQ-{n}"),
            "DynamicQuantizeLinear",
            &[Some((vec![n], Dtype::F32, xv))],
            &[],
        );
    }
    for a_dt in crate::qmatmul::INTS {
        for s_dt in crate::qmatmul::SCALES {
            let (lo, hi) = crate::elem::int_range(a_dt).unwrap();
            let a = (vec![2, 1, 7, 9], a_dt, values(&mut rng, 126, lo, hi, true));
            let b = (
                vec![3, 9, 5],
                Dtype::U8,
                values(&mut rng, 135, 0.0, 255.0, true),
            );
            let sc = |v: &[f64]| {
                Some((
                    vec![v.len() as u64],
                    s_dt,
                    v.iter().map(|x| rnd(s_dt, *x)).collect::<Vec<_>>(),
                ))
            };
            let a_s = sc(&[0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07]);
            let a_z = Some((vec![7], a_dt, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]));
            let b_s = sc(&[0.02]);
            let b_z = Some((vec![1], Dtype::U8, vec![128.0]));
            let ins = [
                Some(a.clone()),
                a_s,
                a_z,
                Some(b),
                b_s,
                b_z,
                sc(&[0.1]),
                Some((vec![], a_dt, vec![3.0])),
            ];
            add(format!("QMM-{a_dt:?}-{s_dt:?}"), "QLinearMatMul", &ins, &[]);
        }
    }
    std::fs::write(format!("{dir}/quant.cases"), out).unwrap();
}
