//! Cast and CastLike: every pair of dtypes against a reference written on f64 values, the
//! rounding corner cases, and the ONNX dtype numbers.

use super::*;
use half::{bf16, f16};

pub fn onnx_code(dt: Dtype) -> i64 {
    umd_sdk::dtype::to_onnx(dt)
}

fn is_float(dt: Dtype) -> bool {
    umd_sdk::request::is_float(dt) || dtype::is_f8(dt)
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
        Dtype::I16 => vec![0., 1., -1., 255., 256., -129., 32767., -32768., 2049.],
        Dtype::U16 => vec![0., 1., 255., 256., 32768., 65535., 2049., 4097.],
        Dtype::U32 => vec![0., 1., 65536., 16777217., 4294967295., 2147483648.],
        Dtype::U64 => vec![
            0.,
            1.,
            4294967296. + 5.,
            2f64.powi(63),
            2f64.powi(64) - 2048.,
            16777217.,
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

/// The ONNX (ml_dtypes) conversion of `v` to an E4M3/E5M2 type, by search over the codes:
/// clamp when saturating, round to nearest with ties to the even code, overflow past max + ulp/2.
fn f8_reference(v: f64, dt: Dtype, sat: bool) -> u8 {
    let fnuz = matches!(dt, Dtype::F8e4m3fnuz | Dtype::F8e5m2fnuz);
    let (max_code, nan) = match dt {
        Dtype::F8e4m3fn => (0x7e, 0x7f),
        Dtype::F8e5m2 => (0x7b, 0x7e),
        _ => (0x7f, 0x80),
    };
    if v.is_nan() {
        return nan;
    }
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    let value = |c: u8| dtype::f8_to_f32(c, dt) as f64;
    let max = value(max_code);
    let mut a = v.abs();
    if sat {
        a = a.min(max);
    }
    let beyond = 2.0 * max - value(max_code - 1); // the code after max, were it finite
    let overflow = match dt {
        Dtype::F8e5m2 => 0x7c | sign,
        _ if fnuz => nan,
        _ => nan | sign,
    };
    if a > beyond {
        return overflow;
    }
    let mut best = (0u16, f64::INFINITY);
    for c in 0..=max_code as u16 + 1 {
        let x = if c == max_code as u16 + 1 {
            beyond
        } else {
            value(c as u8)
        };
        let d = (x - a).abs();
        if d < best.1 || (d == best.1 && c % 2 == 0) {
            best = (c, d);
        }
    }
    match best.0 {
        c if c == max_code as u16 + 1 => overflow,
        0 if fnuz => 0,
        c => c as u8 | sign,
    }
}

/// `onnx.numpy_helper.to_float8e8m0` of `v` (through f32), written on exponents.
fn e8m0_reference(v: f64, sat: bool, round: &str) -> u8 {
    let x = v as f32;
    if !x.is_finite() {
        return 0xff;
    }
    let a = x.abs() as f64;
    if a == 0.0 {
        return 0;
    }
    let tiny = 2f64.powi(-126);
    let (code, m) = if a < tiny {
        (0i32, a / tiny) // subnormal: "mantissa" in [0, 1)
    } else {
        let e = a.log2().floor() as i32;
        let e = if 2f64.powi(e) > a {
            e - 1
        } else if 2f64.powi(e + 1) <= a {
            e + 1
        } else {
            e
        };
        (e + 127, a / 2f64.powi(e))
    };
    let up = match round {
        "up" => m != 1.0 && !(code == 0 && m == 0.0),
        "down" => false,
        _ if code == 0 => m > 0.5,
        _ => m >= 1.5,
    };
    let up = up && !(sat && code == 0xfe);
    (code + up as i32) as u8
}

/// The reference conversion of the exact value `v` of a `from` element to `to`.
fn reference(from: Dtype, to: Dtype, v: f64) -> Vec<u8> {
    let int_range = |t: Dtype| -> (i128, i128) {
        match t {
            Dtype::I8 => (i8::MIN as i128, i8::MAX as i128),
            Dtype::U8 => (0, u8::MAX as i128),
            Dtype::I16 => (i16::MIN as i128, i16::MAX as i128),
            Dtype::U16 => (0, u16::MAX as i128),
            Dtype::I32 => (i32::MIN as i128, i32::MAX as i128),
            Dtype::U32 => (0, u32::MAX as i128),
            Dtype::U64 => (0, u64::MAX as i128),
            _ => (i64::MIN as i128, i64::MAX as i128),
        }
    };
    let int_bytes = |t: Dtype, w: i128| -> Vec<u8> {
        match t {
            Dtype::I64 => (w as i64).to_le_bytes().to_vec(),
            Dtype::U64 => (w as u64).to_le_bytes().to_vec(),
            Dtype::I32 => (w as i32).to_le_bytes().to_vec(),
            Dtype::U32 => (w as u32).to_le_bytes().to_vec(),
            Dtype::I16 => (w as i16).to_le_bytes().to_vec(),
            Dtype::U16 => (w as u16).to_le_bytes().to_vec(),
            Dtype::I8 => vec![w as i8 as u8],
            _ => vec![w as u8],
        }
    };
    match to {
        Dtype::Boolean => vec![(v != 0.0) as u8],
        Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
        Dtype::F64 => v.to_le_bytes().to_vec(),
        Dtype::F16 => f16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        Dtype::Bf16 => bf16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        Dtype::F8e8m0 => vec![e8m0_reference(v, true, "up")],
        f8 if dtype::is_f8(f8) => vec![f8_reference(v, f8, true)],
        int if is_float(from) => {
            // truncate toward zero, saturate, NaN -> 0 (`f64 as i128` is all three)
            let (lo, hi) = int_range(int);
            int_bytes(int, (v as i128).clamp(lo, hi))
        }
        int => int_bytes(int, v as i128), // exact: integer sources
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
                let want = if from == to {
                    dtype::encode(to, &[v]).unwrap() // a copy
                } else {
                    reference(from, to, v)
                };
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
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("24 FLOAT8E8M0")));
    let e = case("Cast")
        .input(&[2], Dtype::F32, &[1., 2.])
        .int("to", 14)
        .err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("16 BFLOAT16, 17")));
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

/// Every 8-bit float type, for the sweeps below.
const F8S: [Dtype; 4] = [
    Dtype::F8e4m3fn,
    Dtype::F8e4m3fnuz,
    Dtype::F8e5m2,
    Dtype::F8e5m2fnuz,
];

/// f32 values around every f8 code and tie: every code's value, the midpoints between codes
/// (exact ties), a hair either side of them, both signs, and the out-of-range ones.
fn f8_sweep(dt: Dtype) -> Vec<f32> {
    let mut xs = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        1e30,
    ];
    let vals: Vec<f32> = (0u8..=0x7f)
        .map(|c| dtype::f8_to_f32(c, dt))
        .filter(|x| x.is_finite())
        .collect();
    for w in vals.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        xs.extend([w[0], mid, mid.next_up(), mid.next_down()]);
    }
    let top = *vals.last().unwrap();
    xs.extend([top * 1.03, top * 1.0625, top * 1.07, top * 1.2, top * 4.0]);
    let neg: Vec<f32> = xs.iter().map(|x| -x).collect();
    xs.extend(neg);
    xs
}

#[test]
fn fast_f8_encoders_match_the_reference_at_every_tie() {
    for dt in F8S {
        let fmt = crate::f8::fmt(dt).unwrap();
        for x in f8_sweep(dt) {
            for sat in [true, false] {
                let got = crate::f8::encode(x, fmt, sat);
                let want = f8_reference(x as f64, dt, sat);
                assert!(
                    got == want || (x.is_nan() && dtype::f8_to_f32(got, dt).is_nan()),
                    "{dt:?} {x:e} sat={sat}: got {got:#x}, want {want:#x}"
                );
            }
        }
        for code in 0u8..=255 {
            let (got, want) = (crate::f8::decode(code, fmt), dtype::f8_to_f32(code, dt));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{dt:?} decode {code:#x}: {got} vs {want}"
            );
        }
    }
    for code in 0u8..=255 {
        let (got, want) = (
            crate::f8::decode_e8m0(code),
            dtype::f8_to_f32(code, Dtype::F8e8m0),
        );
        assert!(got == want || (got.is_nan() && want.is_nan()), "{code}");
    }
}

#[test]
fn e8m0_round_modes_and_saturation() {
    use crate::f8::Round;
    let mut xs = vec![
        0.0f32, -0.0, 1.0, 1.5, 1.4999, 1.75, 3.0, 0.124, -6.0, 1e-40, 3e-39,
    ];
    xs.extend([
        f32::MAX,
        2f32.powi(127),
        1.5 * 2f32.powi(127),
        f32::INFINITY,
        f32::NAN,
    ]);
    for x in xs {
        for (round, name) in [
            (Round::Up, "up"),
            (Round::Down, "down"),
            (Round::Nearest, "nearest"),
        ] {
            for sat in [true, false] {
                assert_eq!(
                    crate::f8::encode_e8m0(x, sat, round),
                    e8m0_reference(x as f64, sat, name),
                    "{x:e} {name} sat={sat}"
                );
            }
        }
    }
    // through the op: round_mode and saturate attributes
    let run = |v: &[f64], sat: i64, mode: &str| {
        let (_, outs) = case("Cast")
            .input(&[v.len() as u64], Dtype::F32, v)
            .int("to", 24)
            .int("saturate", sat)
            .attr("round_mode", AttrValueExt::Text(mode.into()))
            .run();
        outs[0].clone()
    };
    assert_eq!(run(&[1.5, 3.0, 0.124], 1, "up"), vec![128, 129, 124]);
    assert_eq!(run(&[1.5, 3.0, 0.124], 1, "down"), vec![127, 128, 123]);
    assert_eq!(run(&[1.5, 1.25, 0.124], 1, "nearest"), vec![128, 127, 124]);
    assert_eq!(run(&[f32::MAX as f64], 1, "up"), vec![254]);
    assert_eq!(run(&[f32::MAX as f64], 0, "up"), vec![255]);
    let e = case("Cast")
        .input(&[1], Dtype::F32, &[1.0])
        .int("to", 24)
        .attr("round_mode", AttrValueExt::Text("sideways".into()))
        .err();
    assert!(is_attr_err(&e));
    let e = case("Cast")
        .input(&[1], Dtype::F32, &[1.0])
        .int("to", 17)
        .int("saturate", 2)
        .err();
    assert!(is_attr_err(&e));
}

#[test]
fn f8_saturation_through_the_op() {
    let run = |from: Dtype, to: i64, sat: i64, v: &[f64]| {
        let (_, outs) = case("Cast")
            .input(&[v.len() as u64], from, v)
            .int("to", to)
            .int("saturate", sat)
            .run();
        outs[0].clone()
    };
    let v = [1e6, -1e6, f64::INFINITY, 450.0, 465.0, -1e-7];
    // E4M3FN: max 448 (0x7e); NaN 0x7f
    assert_eq!(
        run(Dtype::F32, 17, 1, &v),
        vec![0x7e, 0xfe, 0x7e, 0x7e, 0x7e, 0x80]
    );
    assert_eq!(
        run(Dtype::F32, 17, 0, &v),
        vec![0x7f, 0xff, 0x7f, 0x7e, 0x7f, 0x80]
    );
    // E5M2: non-saturating overflow is inf; E5M2FNUZ: NaN 0x80, no -0
    assert_eq!(run(Dtype::F64, 19, 0, &v[..3]), vec![0x7c, 0xfc, 0x7c]);
    assert_eq!(run(Dtype::F16, 20, 0, &[65504.0, -1e-7]), vec![0x80, 0x00]);
    assert_eq!(run(Dtype::I64, 18, 1, &[-1000.0, 3.0]), vec![0xff, 0x4c]);
    // f8 -> integers and back
    let (_, outs) = case("Cast")
        .input(&[3], Dtype::F8e4m3fn, &[-2.5, 448.0, 0.75])
        .int("to", 5)
        .run();
    assert_eq!(dtype::decode_f64(Dtype::I16, &outs[0]), vec![-2., 448., 0.]);
}

#[test]
fn wide_integers_round_once() {
    // 2^60 + 2^52 + 1 is just above a bf16 tie: one rounding goes up, a rounding through f64
    // would tie to even
    let v: i64 = (1 << 60) + (1 << 52) + 1;
    let (_, outs) = case("Cast")
        .input_bytes(&[1], Dtype::I64, v.to_le_bytes().to_vec())
        .int("to", 16)
        .run();
    assert_eq!(u16::from_le_bytes(outs[0][..2].try_into().unwrap()), 0x5d81);
    let (_, outs) = case("Cast")
        .input_bytes(&[1], Dtype::U64, u64::MAX.to_le_bytes().to_vec())
        .int("to", 7)
        .run();
    assert_eq!(outs[0], (-1i64).to_le_bytes().to_vec(), "u64 -> i64 wraps");
}

/// Casts to and from the packed types (ABI 1.4), against values ml_dtypes 0.5 gives (ONNX's
/// reference casts): floats truncate to i64 then wrap (NaN, inf, beyond i64 → 0); FLOAT4E2M1
/// rounds to nearest even code and saturates.
#[test]
fn packed_casts_match_ml_dtypes() {
    let src = [
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -9.,
        16.,
        17.,
        1e10,
        -1e10,
        2.7,
        -2.7,
    ];
    for (to, want) in [
        (Dtype::I4, [0., 0., 0., 7., 0., 1., 0., 0., 2., -2.]),
        (Dtype::U4, [0., 0., 0., 7., 0., 1., 0., 0., 2., 14.]),
        (Dtype::I2, [0., 0., 0., -1., 0., 1., 0., 0., -2., -2.]),
        (Dtype::U2, [0., 0., 0., 3., 0., 1., 0., 0., 2., 2.]),
    ] {
        for from in [Dtype::F32, Dtype::F16, Dtype::F64] {
            let (plan, outs) = case("Cast")
                .input(&[10], from, &src)
                .int("to", onnx_code(to))
                .run();
            assert_eq!(plan.outputs[0].dtype, to);
            assert_eq!(outs[0].len() as u64, dtype::byte_len(to, 10).unwrap());
            let got = dtype::decode_f64(to, &outs[0]);
            // f16 cannot hold 1e10 (inf) nor 17 exactly... it can; only the big ones differ.
            let skip = |i: usize| from == Dtype::F16 && (i == 6 || i == 7);
            for i in (0..10).filter(|&i| !skip(i)) {
                assert_eq!(got[i], want[i], "{from:?} {} -> {to:?}", src[i]);
            }
        }
    }
    let f4 = [
        f64::NAN,
        f64::INFINITY,
        -0.,
        5.,
        -5.,
        0.25,
        0.75,
        1e-7,
        1e6,
        -3.5,
    ];
    let (_, outs) = case("Cast")
        .input(&[10], Dtype::F32, &f4)
        .int("to", onnx_code(Dtype::F4e2m1))
        .run();
    let codes: Vec<u8> = (0..10)
        .map(|i| dtype::packed_code(&outs[0], Dtype::F4e2m1, i))
        .collect();
    assert_eq!(codes, [8, 7, 8, 6, 14, 0, 2, 0, 7, 14]);
    // Packed sources: every code of each type, an odd count (a half-used last byte).
    for from in dtype::PACKED {
        let n = 1usize << dtype::bits(from);
        let values: Vec<f64> = (0..n as u8)
            .map(|c| dtype::packed_value(c, from) as f64)
            .collect();
        let odd = &values[..n - 1];
        for to in [Dtype::F32, Dtype::F64, Dtype::I8, Dtype::I64, Dtype::F16] {
            let got = case("Cast")
                .input(&[odd.len() as u64], from, odd)
                .int("to", onnx_code(to))
                .out();
            let want: Vec<f64> = odd
                .iter()
                .map(|&v| {
                    if to == Dtype::I8 || to == Dtype::I64 {
                        v.trunc()
                    } else {
                        v
                    }
                })
                .collect();
            assert_eq!(got, (vec![odd.len() as u64], want), "{from:?} -> {to:?}");
        }
    }
    // Packed to packed: INT4 -1 is UINT4 15; UINT4 15 is INT2 -1 (low bits).
    let got = case("Cast")
        .input(&[3], Dtype::I4, &[-1., 7., -8.])
        .int("to", onnx_code(Dtype::U4))
        .out();
    assert_eq!(got.1, vec![15., 7., 8.]);
    let got = case("Cast")
        .input(&[2], Dtype::U4, &[15., 6.])
        .int("to", onnx_code(Dtype::I2))
        .out();
    assert_eq!(got.1, vec![-1., -2.]);
    // Views move the packed bytes; ops that do not serve packed types decline them.
    let got = case("Reshape")
        .input(&[5], Dtype::I4, &[1., -2., 3., -4., 5.])
        .ints(&[5, 1])
        .out();
    assert_eq!(got, (vec![5, 1], vec![1., -2., 3., -4., 5.]));
    let e = case("Transpose").input(&[2, 3], Dtype::I4, &[0.; 6]).err();
    assert!(
        matches!(&e, OpError::UnsupportedDtype(m) if m.contains("i4") && m.contains("Transpose")),
        "{e:?}"
    );
}
