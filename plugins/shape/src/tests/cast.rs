//! Cast and CastLike: every pair of dtypes against a reference written on f64 values, the
//! rounding corner cases, and the ONNX dtype numbers.

use super::*;
use half::{bf16, f16};

fn onnx_code(dt: Dtype) -> i64 {
    match dt {
        Dtype::F32 => 1,
        Dtype::U8 => 2,
        Dtype::I8 => 3,
        Dtype::I32 => 6,
        Dtype::I64 => 7,
        Dtype::Boolean => 9,
        Dtype::F16 => 10,
        Dtype::F64 => 11,
        Dtype::Bf16 => 16,
    }
}

fn is_float(dt: Dtype) -> bool {
    umd_sdk::request::is_float(dt)
}

/// Source values of `dt`, as the exact f64 each element holds.
fn sources(dt: Dtype) -> Vec<f64> {
    let v: Vec<f64> = match dt {
        Dtype::Boolean => vec![0., 1., 1., 0.],
        Dtype::U8 => vec![0., 1., 127., 128., 200., 255.],
        Dtype::I8 => vec![0., 1., -1., 127., -128., -100., 55.],
        Dtype::I32 => vec![
            0.,
            1.,
            -1.,
            127.,
            128.,
            255.,
            256.,
            -129.,
            300.,
            -70000.,
            16777217.,
            i32::MAX as f64,
            i32::MIN as f64,
        ],
        Dtype::I64 => vec![
            0.,
            -1.,
            300.,
            -300.,
            65535.,
            1099511627777.,
            -1099511627776.,
            4294967296. + 5.,
            -(2f64.powi(53)),
        ],
        _ => vec![
            0.,
            -0.,
            0.47892547,
            -1.7,
            2.5,
            -2.5,
            300.,
            -300.,
            65519.,
            1e10,
            -1e10,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-8,
            127.9,
            -128.9,
            255.5,
        ],
    };
    dtype::decode_f64(dt, &dtype::encode(dt, &v).unwrap())
}

/// The reference conversion of the exact value `v` of a `from` element to `to`.
fn reference(from: Dtype, to: Dtype, v: f64) -> Vec<u8> {
    let int_range = |t: Dtype| match t {
        Dtype::I8 => (i8::MIN as f64, i8::MAX as f64),
        Dtype::U8 => (0.0, 255.0),
        Dtype::I32 => (i32::MIN as f64, i32::MAX as f64),
        _ => (i64::MIN as f64, i64::MAX as f64),
    };
    match to {
        Dtype::Boolean => vec![(v != 0.0) as u8],
        Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
        Dtype::F64 => v.to_le_bytes().to_vec(),
        Dtype::F16 => f16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        Dtype::Bf16 => bf16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        int if is_float(from) => {
            let (lo, hi) = int_range(int);
            let t = if v.is_nan() {
                0.0
            } else {
                v.trunc().clamp(lo, hi)
            };
            match int {
                Dtype::I64 => (t as i64).to_le_bytes().to_vec(),
                Dtype::I32 => (t as i32).to_le_bytes().to_vec(),
                Dtype::I8 => vec![t as i8 as u8],
                _ => vec![t as u8],
            }
        }
        int => {
            let w = v as i64; // exact: integer sources
            match int {
                Dtype::I64 => w.to_le_bytes().to_vec(),
                Dtype::I32 => (w as i32).to_le_bytes().to_vec(),
                Dtype::I8 => vec![w as i8 as u8],
                _ => vec![w as u8],
            }
        }
    }
}

fn same_bits(dt: Dtype, got: &[u8], want: &[u8]) -> bool {
    // NaN payloads may differ; every NaN is the same NaN here
    let nan = |b: &[u8]| dtype::decode_f64(dt, b)[0].is_nan();
    got == want || (is_float(dt) && nan(got) && nan(want))
}

#[test]
fn every_pair_matches_the_reference() {
    for from in ALL_DTYPES {
        let src = sources(from);
        for to in ALL_DTYPES {
            let (plan, outs) = case("Cast")
                .input(&[src.len() as u64], from, &src)
                .int("to", onnx_code(to))
                .run();
            assert_eq!(plan.outputs[0].dtype, to);
            let size = dtype::size(to);
            for (i, &v) in src.iter().enumerate() {
                let got = &outs[0][i * size..(i + 1) * size];
                let want = reference(from, to, v);
                assert!(
                    same_bits(to, got, &want),
                    "{from:?} {v} -> {to:?}: got {got:?}, want {want:?}"
                );
            }
        }
    }
}

#[test]
fn hand_checked_values() {
    let cast = |from, v: &[f64], to| {
        case("Cast")
            .input(&[v.len() as u64], from, v)
            .int("to", onnx_code(to))
            .out()
            .1
    };
    assert_eq!(
        cast(Dtype::F32, &[300., -1.7, -300., 1.99], Dtype::I8),
        vec![127., -1., -128., 1.]
    );
    assert_eq!(cast(Dtype::I32, &[300., -129.], Dtype::I8), vec![44., 127.]);
    assert_eq!(cast(Dtype::I64, &[-1., 256.], Dtype::U8), vec![255., 0.]);
    assert_eq!(
        cast(Dtype::F32, &[f64::NAN, 0., -0., 0.1], Dtype::Boolean),
        vec![1., 0., 0., 1.]
    );
    assert_eq!(
        cast(Dtype::F32, &[-5., 255.9, 256.], Dtype::U8),
        vec![0., 255., 255.]
    );
    assert_eq!(cast(Dtype::Boolean, &[1., 0.], Dtype::Bf16), vec![1., 0.]);
    assert_eq!(
        cast(Dtype::F64, &[1e300, -1e300], Dtype::F16),
        vec![f64::INFINITY, f64::NEG_INFINITY]
    );
    assert_eq!(cast(Dtype::F16, &[65504.], Dtype::Bf16), vec![65536.]);
}

#[test]
fn f64_to_half_types_round_once() {
    let cast_bits = |v: f64, to| {
        let (_, outs) = case("Cast")
            .input(&[1], Dtype::F64, &[v])
            .int("to", onnx_code(to))
            .run();
        u16::from_le_bytes(outs[0][..2].try_into().unwrap())
    };
    // just above the tie between 1 and the next value: a double rounding through f32 would tie
    // to even (1.0); one rounding goes up
    assert_eq!(
        cast_bits(1.0 + 2f64.powi(-11) + 2f64.powi(-40), Dtype::F16),
        0x3C01
    );
    assert_eq!(
        cast_bits(1.0 + 2f64.powi(-8) + 2f64.powi(-40), Dtype::Bf16),
        0x3F81
    );
    // exact ties still go to even
    assert_eq!(cast_bits(1.0 + 2f64.powi(-11), Dtype::F16), 0x3C00);
    assert_eq!(cast_bits(1.0 + 3.0 * 2f64.powi(-8), Dtype::Bf16), 0x3F82);
    // below the smallest f32 subnormal: signed zero
    assert_eq!(cast_bits(-1e-50, Dtype::F16), 0x8000);
    assert_eq!(cast_bits(f64::MAX, Dtype::Bf16), 0x7F80);
    assert_eq!(crate::cast::f64_to_f32_odd(3.0e38 * 10.0), f32::MAX);
}

#[test]
fn cast_like_and_errors() {
    let got = case("CastLike")
        .input(&[3], Dtype::F32, &[1.5, -2.5, 3.0])
        .input(&[0], Dtype::I64, &[])
        .out();
    assert_eq!(got, (vec![3], vec![1., -2., 3.]));
    let (plan, _) = case("Cast")
        .input(&[2], Dtype::F16, &[1., 2.])
        .int("to", 10)
        .int("saturate", 0)
        .run();
    assert_eq!(
        plan.launches[0].entry_point, "gather_b4",
        "same dtype: a plain copy"
    );
    let e = case("Cast")
        .input(&[2], Dtype::F32, &[1., 2.])
        .int("to", 8)
        .err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("16 BFLOAT16")));
    assert!(is_attr_err(
        &case("Cast").input(&[2], Dtype::F32, &[1., 2.]).err()
    ));
    let e = case("Cast")
        .input(&[2], Dtype::F32, &[1., 2.])
        .int("to", 1)
        .int("axis", 0)
        .err();
    assert!(is_attr_err(&e));
    let got = case("Cast")
        .input(&[0, 2], Dtype::F64, &[])
        .int("to", 7)
        .out();
    assert_eq!(got, (vec![0, 2], vec![]));
}
