//! Every op on every served dtype against the naive reference, and edge semantics (NaN,
//! integer division and modulo by zero, wrapping, shifts out of range, float Mod, Mean).

use super::*;
use crate::ops::{ALL, ARITH, BOOL, FLOATS, INTS, NUMERIC};
use umd_sdk::dtype::{decode_f64, encode};
use umd_sdk::{Access, AttrValueExt, shape, testing};

#[test]
fn arithmetic_on_every_dtype_and_shape() {
    use Kind::*;
    for op in ["Add", "Sub", "Mul"] {
        check_binary(op, NUMERIC, [Any, Any], &[]);
    }
    check_binary("Div", NUMERIC, [Any, NonZero], &[]);
    check_binary("Mod", NUMERIC, [Any, NonZero], &[]);
    check_binary("Mod", NUMERIC, [Any, NonZero], &[("fmod", int(1))]);
    check_binary("Mod", FLOATS, [Any, NonZero], &[("fmod", int(0))]);
    // PRelu broadcasts the slope to X only
    for &dt in ARITH {
        for (a, b) in PAIRS
            .iter()
            .filter(|(a, b)| shape::broadcast(a, b).is_ok_and(|o| o == *a))
        {
            check("PRelu", &[dt, dt], &[a, b], &[Any, Any], &[]);
        }
    }
    let e = run(
        "PRelu",
        &[
            (vec![], Dtype::F32, vec![1.]),
            (vec![4], Dtype::F32, vec![0.; 4]),
        ],
        &[],
    );
    assert!(matches!(e, Err(OpError::InvalidShape(_))));
}

#[test]
fn pow_with_every_exponent_dtype() {
    for &x in ARITH {
        for &y in NUMERIC {
            for (a, b) in &PAIRS[..6] {
                let xk = if FLOATS.contains(&x) {
                    Kind::Any
                } else {
                    Kind::NonZero
                };
                check("Pow", &[x, y], &[a, b], &[xk, Kind::Exp], &[]);
            }
        }
    }
    // float exponents on float bases
    let x = (vec![3], Dtype::F32, vec![4.0, 2.0, 0.25]);
    let y = (vec![3], Dtype::F32, vec![0.5, -1.0, 1.5]);
    let (_, got) = run("Pow", &[x, y], &[]).unwrap();
    assert_eq!(got, vec![2.0, 0.5, 0.125]);
    // the exponents computed without `pow` (1, 2, 3, 4, 0.5, -1) agree with the correctly
    // rounded power, special values included (pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf)
    let bases = [
        0.0,
        -0.0,
        1.5,
        -2.75,
        3.1e-20,
        -7.7e18,
        1.0e30,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.1,
        -0.3,
        1.0e-40,
    ];
    for e in [1.0, 2.0, 3.0, 4.0, 0.5, -1.0] {
        for dt in [Dtype::F32, Dtype::F64] {
            let n = bases.len() as u64;
            let x = (vec![n], dt, bases.to_vec());
            let y = (vec![1], dt, vec![e]);
            let (_, got) = run("Pow", &[x, y], &[]).unwrap();
            for (&b, &g) in bases.iter().zip(&got) {
                let want = if dt == Dtype::F32 {
                    (b as f32 as f64).powf(e) as f32 as f64
                } else {
                    b.powf(e)
                };
                let same = g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan());
                // (f64's 3 and 4 take `powf` as before; f32's round once in f64, then to
                // f32 — as the reference here does: the same bits or within an ulp)
                let close = (g - want).abs() <= want.abs() * 2.3e-16;
                assert!(same || close, "{dt:?} {b}^{e}: got {g}, want {want}");
            }
        }
    }
    // an integer base with a fractional float exponent truncates
    let x = (vec![2], Dtype::I64, vec![2.0, 10.0]);
    let y = (vec![2], Dtype::F32, vec![0.5, -1.0]);
    assert_eq!(run("Pow", &[x, y], &[]).unwrap().1, vec![1.0, 0.0]);
}

#[test]
fn comparisons_and_logic() {
    for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"] {
        check_binary(op, NUMERIC, [Kind::Any, Kind::Any], &[]);
    }
    check_binary("Equal", BOOL, [Kind::Any, Kind::Any], &[]);
    for op in ["And", "Or", "Xor"] {
        check_binary(op, BOOL, [Kind::Any, Kind::Any], &[]);
    }
}

#[test]
fn bitwise_and_shifts() {
    for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"] {
        check_binary(op, INTS, [Kind::Any, Kind::Any], &[]);
    }
    for dir in ["LEFT", "RIGHT"] {
        let attrs = [("direction", AttrValueExt::Text(dir.into()))];
        for &dt in INTS {
            for (a, b) in PAIRS {
                check(
                    "BitShift",
                    &[dt, dt],
                    &[a, b],
                    &[Kind::Any, Kind::Shift],
                    &attrs,
                );
            }
        }
    }
}

#[test]
fn variadic_ops_fold_every_input() {
    let sets: &[&[&[u64]]] = &[
        &[&[2, 3]],
        &[&[2, 3], &[3]],
        &[&[4], &[2, 1], &[], &[3, 1, 1]],
        &[&[2, 0], &[0], &[1]],
        &[&[3], &[3], &[3], &[3], &[3]],
    ];
    for op in ["Sum", "Mean", "Max", "Min"] {
        let dts = if op == "Sum" || op == "Mean" {
            ARITH
        } else {
            NUMERIC
        };
        for &dt in dts {
            for shapes in sets {
                let k = vec![dt; shapes.len()];
                check(op, &k, shapes, &vec![Kind::Any; shapes.len()], &[]);
            }
        }
    }
}

#[test]
fn where_broadcasts_three_ways_on_every_dtype() {
    let sets: &[[&[u64]; 3]] = &[
        [&[2, 3], &[2, 3], &[2, 3]],
        [&[2, 1], &[3], &[]],
        [&[], &[2, 2], &[2, 1]],
        [&[3, 1, 2], &[1, 4, 1], &[2]],
        [&[0, 2], &[2], &[1]],
    ];
    for &dt in ALL {
        for s in sets {
            check("Where", &[Dtype::Boolean, dt, dt], s, &[Kind::Any; 3], &[]);
        }
    }
}

// ---------------------------------------------------------------- edge semantics

#[test]
fn nan_propagates_through_max_min_and_compares_false() {
    let nan = f64::NAN;
    let a = (vec![4], Dtype::F32, vec![nan, 1.0, nan, 2.0]);
    let b = (vec![4], Dtype::F32, vec![1.0, nan, nan, 3.0]);
    for (op, want) in [("Max", [nan, nan, nan, 3.0]), ("Min", [nan, nan, nan, 2.0])] {
        let got = run(op, &[a.clone(), b.clone()], &[]).unwrap().1;
        assert!(
            got.iter().zip(want).all(|(g, w)| close(Dtype::F32, *g, w)),
            "{op}: {got:?}"
        );
    }
    for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"] {
        let got = run(op, &[a.clone(), b.clone()], &[]).unwrap().1;
        assert_eq!(&got[..3], &[0.0; 3], "{op} with NaN is false");
    }
    let got = run("Max", &[(vec![2], Dtype::F16, vec![nan, 1.0])], &[])
        .unwrap()
        .1;
    assert!(got[0].is_nan() && got[1] == 1.0, "one input is a copy");
}

#[test]
fn integer_edges_wrap_and_divide_by_zero_to_zero() {
    let i32s = |v: &[i64]| {
        (
            vec![v.len() as u64],
            Dtype::I32,
            v.iter().map(|x| *x as f64).collect::<Vec<_>>(),
        )
    };
    let min = i32::MIN as i64;
    let (_, got) = run("Div", &[i32s(&[7, min, 5, -7]), i32s(&[2, -1, 0, 2])], &[]).unwrap();
    assert_eq!(
        got,
        vec![3.0, min as f64, 0.0, -3.0],
        "truncates; MIN/-1 wraps"
    );
    let (_, got) = run("Add", &[i32s(&[i32::MAX as i64]), i32s(&[1])], &[]).unwrap();
    assert_eq!(got, vec![min as f64]);
    let (_, got) = run(
        "Mod",
        &[
            i32s(&[-4, 7, 5, 4, -7, 8, 3]),
            i32s(&[2, -3, 8, -2, 3, 5, 0]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(
        got,
        vec![0., -2., 5., 0., 2., 3., 0.],
        "ONNX test_mod_mixed_sign"
    );
    let fmod = [("fmod", int(1))];
    let (_, got) = run(
        "Mod",
        &[
            i32s(&[-4, 7, 5, 4, -7, 8, min]),
            i32s(&[2, -3, 8, -2, 3, 5, -1]),
        ],
        &fmod,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![0., 1., 5., 0., -1., 3., 0.],
        "ONNX test_mod_int64_fmod"
    );
    let (_, got) = run(
        "Pow",
        &[i32s(&[2, -3, 7, 1, -1, 2]), i32s(&[10, 3, 0, -5, -3, 31])],
        &[],
    )
    .unwrap();
    assert_eq!(
        got,
        vec![1024., -27., 1., 1., -1., min as f64],
        "2^31 wraps"
    );
    let u8s = |v: &[f64]| (vec![v.len() as u64], Dtype::U8, v.to_vec());
    let (_, got) = run("Sub", &[u8s(&[3.]), u8s(&[5.])], &[]).unwrap();
    assert_eq!(got, vec![254.0]);
}

#[test]
fn float_mod_follows_numpy_edge_cases() {
    // ONNX test_mod_float_edge_cases_fmod_0
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let x = vec![
        0.0, -0.0, 0.0, -0.0, -3.0, 3.0, -1.0, 1.0, inf, -inf, 1.0, 1.0, nan, 1.0,
    ];
    let y = vec![
        -2.0, 2.0, 2.0, -2.0, inf, inf, -inf, -inf, 2.0, 2.0, 0.0, -0.0, 2.0, nan,
    ];
    for dt in [Dtype::F32, Dtype::F16, Dtype::F64] {
        let n = x.len() as u64;
        let req = request(
            "Mod",
            &[(vec![n], dt, x.clone()), (vec![n], dt, y.clone())],
            &[],
        );
        let data = [encode(dt, &x).unwrap(), encode(dt, &y).unwrap()];
        let (_, outs) = testing::run::<Elementwise>(&req, &data).unwrap();
        let got = decode_f64(dt, &outs[0]);
        let signs: Vec<bool> = got[..4].iter().map(|v| v.is_sign_negative()).collect();
        assert_eq!(
            signs,
            [true, false, false, true],
            "{dt:?}: zero takes the divisor's sign"
        );
        assert_eq!(&got[4..8], &[inf, 3.0, -1.0, -inf], "{dt:?}");
        assert!(got[8..].iter().all(|v| v.is_nan()), "{dt:?}: {got:?}");
    }
    // ONNX test_mod_mixed_sign_float32 (fmod=1)
    let x = (vec![6], Dtype::F32, vec![-4.3, 7.2, 5.0, 4.3, -7.2, 8.0]);
    let y = (vec![6], Dtype::F32, vec![2.1, -3.4, 8.0, -2.1, 3.4, 5.0]);
    let (_, got) = run("Mod", &[x, y], &[("fmod", int(1))]).unwrap();
    let want = [-0.10000038, 0.39999962, 5., 0.10000038, -0.39999962, 3.];
    assert!(
        got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-6),
        "{got:?}"
    );
}

#[test]
fn shifts_follow_the_onnx_reference() {
    let i8s = |v: &[f64]| (vec![v.len() as u64], Dtype::I8, v.to_vec());
    let left = [("direction", AttrValueExt::Text("LEFT".into()))];
    let right = [("direction", AttrValueExt::Text("RIGHT".into()))];
    let (_, got) = run(
        "BitShift",
        &[i8s(&[1., -1., 64., 5.]), i8s(&[8., 1., 1., -1.])],
        &left,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![0., -2., -128., 0.],
        "width and negative shifts give 0; overflow wraps"
    );
    let (_, got) = run(
        "BitShift",
        &[i8s(&[-16., 16., -1., 5.]), i8s(&[2., 9., 9., -2.])],
        &right,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![-4., 0., -1., 0.],
        "arithmetic; out of range gives the sign"
    );
    let u8s = |v: &[f64]| (vec![v.len() as u64], Dtype::U8, v.to_vec());
    let (_, got) = run(
        "BitShift",
        &[u8s(&[16., 4., 1.]), u8s(&[1., 2., 3.])],
        &left,
    )
    .unwrap();
    assert_eq!(got, vec![32., 16., 8.], "ONNX test_bitshift_left_uint8");
}

#[test]
fn mean_rounds_like_numpy() {
    let i = |v: &[f64]| (vec![v.len() as u64], Dtype::I32, v.to_vec());
    let (plan, got) = run(
        "Mean",
        &[i(&[1., -7., 5.]), i(&[2., 2., 5.]), i(&[0., 0., 6.])],
        &[],
    )
    .unwrap();
    assert_eq!(got, vec![1., -1., 5.], "integer Mean truncates toward zero");
    assert_eq!(plan.launches.len(), 3, "add, add in place, divide");
    assert_eq!(plan.launches[1].relocations[0].access, Access::ReadWrite);
    assert_eq!(plan.launches[2].entry_point, "divn_i32");
}

#[test]
fn legacy_broadcast_attributes_align_b_at_axis() {
    let a = (
        vec![2, 3, 2],
        Dtype::F32,
        (0..12).map(|v| v as f64).collect(),
    );
    let b = (vec![3], Dtype::F32, vec![100., 200., 300.]);
    let (plan, got) = run(
        "Add",
        &[a.clone(), b.clone()],
        &[("broadcast", int(1)), ("axis", int(1))],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 3, 2]);
    assert_eq!(got[..6], [100., 101., 202., 203., 304., 305.]);
    let e = run(
        "Add",
        &[a.clone(), b.clone()],
        &[("broadcast", int(1)), ("axis", int(3))],
    )
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("axis")));
    let e = run(
        "Add",
        &[a.clone(), b.clone()],
        &[("broadcast", int(1)), ("axis", int(2))],
    )
    .unwrap_err();
    assert!(
        matches!(e, OpError::InvalidShape(_)),
        "B [3] at axis 2 of [2, 3, 2]"
    );
    let (_, got) = run(
        "Add",
        &[a.clone(), b.clone()],
        &[("broadcast", int(1)), ("axis", int(-2))],
    )
    .unwrap();
    assert_eq!(got[..2], [100., 101.]);
    let e = run("Add", &[a, b], &[("broadcast", int(0))]).unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}

#[test]
fn prelu_accepts_a_channel_slope() {
    let x = (
        vec![2, 3, 2],
        Dtype::F32,
        (0..12).map(|v| v as f64 - 6.0).collect(),
    );
    let slope = (vec![3], Dtype::F32, vec![0.5, 0.25, 2.0]);
    let (_, got) = run("PRelu", &[x, slope], &[]).unwrap();
    assert_eq!(
        got,
        vec![-3., -2.5, -1., -0.75, -4., -2., 0., 1., 2., 3., 4., 5.]
    );
}

#[test]
fn empty_tensors_plan_one_launch_and_write_nothing() {
    let (plan, got) = run(
        "Add",
        &[
            (vec![2, 0], Dtype::F32, vec![]),
            (vec![0], Dtype::F32, vec![]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 0]);
    assert_eq!(plan.launches.len(), 1);
    assert_eq!(plan.launches[0].grid.x, 1);
    assert!(got.is_empty());
    let e = run(
        "Add",
        &[
            (vec![0], Dtype::F32, vec![]),
            (vec![3], Dtype::F32, vec![0.; 3]),
        ],
        &[],
    );
    assert!(
        matches!(e, Err(OpError::InvalidShape(_))),
        "0 vs 3 is an error"
    );
}

/// Runs binary `op` on raw little-endian integers of `dt` (exact beyond f64) and decodes the
/// output as u64 bits (sign-extended through i64 for signed dtypes).
fn run_bits(op: &str, dt: Dtype, x: &[u64], y: &[u64], attrs: &[(&str, AttrValueExt)]) -> Vec<u64> {
    let s = dtype::size(dt);
    let enc = |v: &[u64]| -> Vec<u8> {
        v.iter()
            .flat_map(|e| e.to_le_bytes()[..s].to_vec())
            .collect()
    };
    let ins = [
        (vec![x.len() as u64], dt, vec![]),
        (vec![y.len() as u64], dt, vec![]),
    ];
    let req = request(op, &ins, attrs);
    let (plan, outs) = testing::run::<Elementwise>(&req, &[enc(x), enc(y)]).unwrap();
    let os = dtype::size(plan.outputs[0].dtype);
    outs[0]
        .chunks_exact(os)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..os].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

#[test]
fn unsigned_and_i16_edges() {
    let fmod = [("fmod", int(1))];
    let dir = |d: &str| [("direction", AttrValueExt::Text(d.into()))];
    for (dt, max) in [(Dtype::U32, u32::MAX as u64), (Dtype::U64, u64::MAX)] {
        // a divisor of all ones is not -1 for unsigned types
        let x = [7, max, 5, max - 1];
        let y = [max, max, 0, 2];
        assert_eq!(
            run_bits("Div", dt, &x, &y, &[]),
            [0, 1, 0, (max - 1) / 2],
            "{dt:?}"
        );
        assert_eq!(run_bits("Mod", dt, &x, &y, &[]), [7, 0, 0, 0], "{dt:?}");
        assert_eq!(run_bits("Mod", dt, &x, &y, &fmod), [7, 0, 0, 0], "{dt:?}");
        assert_eq!(run_bits("Sub", dt, &[3], &[5], &[]), [max - 1], "wraps");
        assert_eq!(run_bits("Mul", dt, &[max], &[max], &[]), [1], "wraps");
        assert_eq!(run_bits("Max", dt, &[max, 0], &[1, 1], &[]), [max, 1]);
        assert_eq!(run_bits("Less", dt, &[max, 0], &[1, 1], &[]), [0, 1]);
        let bits = 8 * dtype::size(dt) as u64;
        let sh = [1, 3, bits - 1, bits, bits + 1];
        let ones = [max; 5];
        assert_eq!(
            run_bits("BitShift", dt, &ones, &sh, &dir("RIGHT")),
            [max >> 1, max >> 3, 1, 0, 0],
            "{dt:?} right: no sign fill"
        );
        assert_eq!(
            run_bits("BitShift", dt, &[1; 5], &sh, &dir("LEFT")),
            [2, 8, 1 << (bits - 1), 0, 0],
            "{dt:?} left"
        );
        assert_eq!(run_bits("BitwiseXor", dt, &[max], &[1], &[]), [max - 1]);
    }
    let i16s = |v: &[i64]| v.iter().map(|x| *x as u64).collect::<Vec<_>>();
    let sx = |v: Vec<u64>| v.iter().map(|x| *x as i16 as i64).collect::<Vec<_>>();
    let got = run_bits(
        "Div",
        Dtype::I16,
        &i16s(&[-32768, 7, -7]),
        &i16s(&[-1, 0, 2]),
        &[],
    );
    assert_eq!(sx(got), [-32768, 0, -3], "MIN/-1 wraps, /0 is 0, truncates");
    let got = run_bits("Add", Dtype::I16, &i16s(&[32767]), &i16s(&[1]), &[]);
    assert_eq!(sx(got), [-32768]);
    // ONNX test_mod_mixed_sign_int16
    let got = run_bits(
        "Mod",
        Dtype::I16,
        &i16s(&[-4, 7, 5, 4, -7, 8]),
        &i16s(&[2, -3, 8, -2, 3, 5]),
        &[],
    );
    assert_eq!(sx(got), [0, -2, 5, 0, 2, 3]);
    let got = run_bits(
        "BitShift",
        Dtype::I16,
        &i16s(&[-8, 1]),
        &i16s(&[1, 15]),
        &dir("RIGHT"),
    );
    assert_eq!(sx(got), [-4, 0]);
    // ONNX test_pow_types_float32_uint64 / _uint32
    for ydt in [Dtype::U64, Dtype::U32] {
        let x = (vec![3], Dtype::F32, vec![1., 2., 3.]);
        let y = (vec![3], ydt, vec![4., 5., 6.]);
        assert_eq!(run("Pow", &[x, y], &[]).unwrap().1, vec![1., 32., 729.]);
    }
}
