//! Native unit tests: every op on every served dtype against a naive reference written here
//! (its own numpy broadcasting by index unravelling, f64 arithmetic, ONNX semantics), on
//! contiguous, scalar, broadcast, strided and empty shapes; edge semantics (NaN, integer
//! division and modulo by zero, shifts out of range, wrapping); planning errors; the CUDA
//! sources of every op and dtype; and the broadcast machinery itself.

use super::*;
use crate::bcast::{Geometry, Mode, magic, magic_div};
use crate::ops::{ALL, ARITH, BOOL, FLOATS, INTS, NUMERIC};
use umd_sdk::dtype::{self, decode_f64, encode};
use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, AttrValueExt, Launch, shape, testing};

// ---------------------------------------------------------------- harness

type Input = (Vec<u64>, Dtype, Vec<f64>);

fn request(op: &str, inputs: &[Input], attrs: &[(&str, AttrValueExt)]) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op);
    for (i, (s, dt, _)) in inputs.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{i}"), s.clone(), *dt));
    }
    for (name, v) in attrs {
        b = b.attr(name, v.clone());
    }
    b.build(Target::cpu())
}

/// Plans and runs on the CPU kernels; the output's shape, dtype and values.
fn run(
    op: &str,
    inputs: &[Input],
    attrs: &[(&str, AttrValueExt)],
) -> Result<(OpPlan, Vec<f64>), OpError> {
    let req = request(op, inputs, attrs);
    let data: Vec<Vec<u8>> = inputs
        .iter()
        .map(|(_, dt, v)| encode(*dt, v).unwrap())
        .collect();
    let (plan, outs) = testing::run::<Elementwise>(&req, &data)?;
    let vals = decode_f64(plan.outputs[0].dtype, &outs[0]);
    Ok((plan, vals))
}

fn int(v: i64) -> AttrValueExt {
    AttrValueExt::Int(v)
}

/// A deterministic pseudo-random stream.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// What values an input takes.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Small values, some negative (u8: non-negative), floats in quarters.
    Any,
    /// As `Any` but never 0 (divisors).
    NonZero,
    /// Exponents: small non-negative.
    Exp,
    /// Shift amounts: -2..=width+1.
    Shift,
}

fn values(dt: Dtype, n: u64, rng: &mut Rng, kind: Kind) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let v = match (kind, dt) {
                (Kind::Exp, _) => rng.range(0, 3) as f64,
                (Kind::Shift, Dtype::U8) => rng.range(0, 9) as f64,
                (Kind::Shift, _) => rng.range(-2, 8 * dtype::size(dt) as i64 + 1) as f64,
                (_, Dtype::Boolean) => rng.range(0, 1) as f64,
                (_, Dtype::U8) => rng.range(0, 30) as f64,
                (_, Dtype::I8) => rng.range(-11, 11) as f64,
                (_, d) if FLOATS.contains(&d) => rng.range(-40, 40) as f64 / 4.0,
                _ => rng.range(-20, 20) as f64,
            };
            if kind == Kind::NonZero && v == 0.0 {
                3.0
            } else {
                v
            }
        })
        .collect()
}

/// Rounds `x` to `dt`: floats by encoding, integers wrapping.
fn round(dt: Dtype, x: f64) -> f64 {
    let bits = 8 * dtype::size(dt) as u32;
    match dt {
        Dtype::I8 | Dtype::I32 | Dtype::I64 | Dtype::U8 => {
            let m = 1i128 << bits;
            let mut r = (x as i128).rem_euclid(m);
            if dt != Dtype::U8 && r >= m / 2 {
                r -= m;
            }
            r as f64
        }
        Dtype::Boolean => (x != 0.0) as u8 as f64,
        _ => decode_f64(dt, &encode(dt, &[x]).unwrap())[0],
    }
}

/// The numpy broadcast index of output element `flat` in an input of shape `s`.
fn source_index(out: &[u64], s: &[u64], flat: u64) -> usize {
    let mut idx = vec![0; out.len()];
    let mut rem = flat;
    for d in (0..out.len()).rev() {
        idx[d] = rem % out[d];
        rem /= out[d];
    }
    let lead = out.len() - s.len();
    let mut at = 0;
    for (j, &dim) in s.iter().enumerate() {
        at = at * dim + if dim == 1 { 0 } else { idx[lead + j] };
    }
    at as usize
}

/// The naive reference of `op` on one element's input values (ONNX/numpy semantics in f64).
fn reference(op: &str, dt: Dtype, v: &[f64], fmod: bool, left: bool) -> f64 {
    let (x, y) = (v[0], v.get(1).copied().unwrap_or(0.0));
    let float = FLOATS.contains(&dt);
    let b = |c: bool| c as u8 as f64;
    let bits = 8.0 * dtype::size(dt) as f64;
    match op {
        "Add" => x + y,
        "Sub" => x - y,
        "Mul" => x * y,
        "Div" if float => x / y,
        "Div" => {
            if y == 0.0 {
                0.0
            } else {
                (x / y).trunc()
            }
        }
        "Mod" if !float && y == 0.0 => 0.0,
        "Mod" if fmod => x % y,
        "Mod" => x - y * (x / y).floor(),
        "Pow" => x.powf(y),
        "Max" => v.iter().copied().fold(f64::NEG_INFINITY, |a, b| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }),
        "Min" => v.iter().copied().fold(f64::INFINITY, |a, b| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }),
        "Sum" => v.iter().sum(),
        "Mean" if float => v.iter().sum::<f64>() / v.len() as f64,
        "Mean" => (v.iter().sum::<f64>() / v.len() as f64).trunc(),
        "Equal" => b(x == y),
        "Less" => b(x < y),
        "Greater" => b(x > y),
        "LessOrEqual" => b(x <= y),
        "GreaterOrEqual" => b(x >= y),
        "And" => b(x != 0.0 && y != 0.0),
        "Or" => b(x != 0.0 || y != 0.0),
        "Xor" => b((x != 0.0) != (y != 0.0)),
        "BitwiseAnd" => (x as i64 & y as i64) as f64,
        "BitwiseOr" => (x as i64 | y as i64) as f64,
        "BitwiseXor" => (x as i64 ^ y as i64) as f64,
        "BitShift" if y < 0.0 || y >= bits => {
            if !left && x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        "BitShift" if left => x * 2f64.powf(y),
        "BitShift" => (x / 2f64.powf(y)).floor(),
        "PRelu" => {
            if x > 0.0 {
                x
            } else {
                x * y
            }
        }
        "Where" => {
            if x != 0.0 {
                v[1]
            } else {
                v[2]
            }
        }
        _ => unreachable!("{op}"),
    }
}

/// Values that match within the dtype's rounding (NaN matches NaN).
fn close(dt: Dtype, got: f64, want: f64) -> bool {
    let tol = match dt {
        Dtype::F32 => 1e-6,
        Dtype::F64 => 1e-12,
        Dtype::F16 => 1e-3,
        Dtype::Bf16 => 1e-2,
        _ => 0.0,
    };
    got == want || (got.is_nan() && want.is_nan()) || (got - want).abs() <= tol * (1.0 + want.abs())
}

/// Runs `op` on inputs of `shapes` with random values and checks every element.
fn check(
    op: &str,
    dts: &[Dtype],
    shapes: &[&[u64]],
    kinds: &[Kind],
    attrs: &[(&str, AttrValueExt)],
) {
    let mut rng =
        Rng(shapes.iter().map(|s| s.len() as u64 + 7).product::<u64>() + dts.len() as u64);
    let inputs: Vec<Input> = shapes
        .iter()
        .zip(dts)
        .zip(kinds)
        .map(|((s, dt), k)| {
            let n = shape::numel(s).unwrap();
            (s.to_vec(), *dt, values(*dt, n, &mut rng, *k))
        })
        .collect();
    let (plan, got) =
        run(op, &inputs, attrs).unwrap_or_else(|e| panic!("{op} {dts:?} {shapes:?}: {e:?}"));
    let out = plan.outputs[0].shape.clone();
    let want_shape = shapes
        .iter()
        .fold(Vec::new(), |a, s| shape::broadcast(&a, s).unwrap());
    assert_eq!(out, want_shape, "{op} {shapes:?}");
    let n = shape::numel(&out).unwrap();
    assert_eq!(got.len() as u64, n);
    let out_dt = plan.outputs[0].dtype;
    let fmod = attrs
        .iter()
        .any(|(k, v)| *k == "fmod" && matches!(v, AttrValueExt::Int(1)));
    let left = attrs
        .iter()
        .any(|(k, v)| *k == "direction" && matches!(v, AttrValueExt::Text(t) if t == "LEFT"));
    for (i, g) in got.iter().enumerate() {
        let v: Vec<f64> = inputs
            .iter()
            .map(|(s, _, vals)| vals[source_index(&out, s, i as u64)])
            .collect();
        let want = round(out_dt, reference(op, dts[0], &v, fmod, left));
        assert!(
            close(out_dt, *g, want),
            "{op} {dts:?} {shapes:?} element {i}: inputs {v:?} gave {g}, want {want}"
        );
    }
}

/// Shape pairs covering contiguous, scalar, bias, outer, strided, rank-5 and empty cases.
const PAIRS: &[(&[u64], &[u64])] = &[
    (&[2, 3, 4], &[2, 3, 4]),
    (&[2, 3], &[3]),
    (&[5], &[]),
    (&[], &[4]),
    (&[4], &[1]),
    (&[3, 1], &[1, 4]),
    (&[2, 1, 4], &[3, 1]),
    (&[1, 6], &[6, 1]),
    (&[2, 1, 3, 1, 2], &[1, 2, 1, 2, 1]),
    (&[2, 0], &[0]),
    (&[0, 3], &[1, 3]),
    (&[2, 0], &[1]),
    (&[], &[]),
];

fn check_binary(op: &str, dts: &[Dtype], kinds: [Kind; 2], attrs: &[(&str, AttrValueExt)]) {
    for &dt in dts {
        for (a, b) in PAIRS {
            check(op, &[dt, dt], &[a, b], &kinds, attrs);
        }
    }
}

// ---------------------------------------------------------------- ops against the reference

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

// ---------------------------------------------------------------- planning

#[test]
fn entry_points_name_the_walk_mode() {
    let entry = |op: &str, a: &[u64], b: &[u64], dt| {
        let inputs = [(a.to_vec(), dt, vec![]), (b.to_vec(), dt, vec![])];
        plan(&request(op, &inputs, &[])).unwrap().launches[0]
            .entry_point
            .clone()
    };
    assert_eq!(entry("Add", &[2, 3], &[2, 3], Dtype::F32), "add_f32");
    assert_eq!(entry("add", &[2, 3], &[3], Dtype::F32), "add_f32_bcast");
    assert_eq!(
        entry("Add", &[1, 6], &[6], Dtype::F16),
        "add_f16",
        "size-1 dims drop"
    );
    assert_eq!(
        entry("Mul", &[7], &[], Dtype::I64),
        "mul_i64",
        "a scalar stays flat"
    );
    assert_eq!(entry("Less", &[4], &[4], Dtype::U8), "lt_u8");
    assert_eq!(
        entry("Add", &[1 << 17, 1 << 16], &[1 << 16], Dtype::I8),
        "add_i8_bcast64"
    );
    let inputs = [(vec![3], Dtype::F16, vec![]), (vec![3], Dtype::I64, vec![])];
    let p = plan(&request("Pow", &inputs, &[])).unwrap();
    assert_eq!(p.launches[0].entry_point, "pow_f16_i64");
    assert_eq!(p.launches[0].module_id, "elementwise_pow_f16");
}

#[test]
fn bad_requests_are_named() {
    let f32t = |s: &[u64]| (s.to_vec(), Dtype::F32, vec![]);
    let t = |s: &[u64], dt| (s.to_vec(), dt, vec![]);
    let err = |op: &str, ins: &[Input], attrs: &[(&str, AttrValueExt)]| {
        plan(&request(op, ins, attrs)).unwrap_err()
    };
    assert!(
        matches!(err("Add", &[f32t(&[2]), f32t(&[3])], &[]), OpError::InvalidShape(m) if m.contains("broadcast"))
    );
    let e = err("Add", &[f32t(&[2]), t(&[2], Dtype::F16)], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32 and f16")));
    let e = err("Sum", &[t(&[2], Dtype::I8)], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("Sum supports f32")));
    assert!(matches!(
        err("And", &[f32t(&[2]), f32t(&[2])], &[]),
        OpError::UnsupportedDtype(_)
    ));
    assert!(matches!(
        err("BitwiseAnd", &[f32t(&[2]), f32t(&[2])], &[]),
        OpError::UnsupportedDtype(_)
    ));
    let e = err("Where", &[f32t(&[2]), f32t(&[2]), f32t(&[2])], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("condition")));
    let e = err("Pow", &[f32t(&[2]), t(&[2], Dtype::Boolean)], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("exponent")));
    let e = err(
        "Add",
        &[f32t(&[2]), f32t(&[2])],
        &[("alpha", AttrValueExt::Float(1.0))],
    );
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("alpha")));
    let e = err("Mod", &[f32t(&[2]), f32t(&[2])], &[("fmod", int(2))]);
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("fmod")));
    let i = t(&[2], Dtype::U8);
    let e = err("BitShift", &[i.clone(), i.clone()], &[]);
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("direction")));
    let e = err(
        "BitShift",
        &[i.clone(), i],
        &[("direction", AttrValueExt::Text("UP".into()))],
    );
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("direction")));
    assert!(matches!(
        err("Add", &[f32t(&[2])], &[]),
        OpError::InvalidShape(_)
    ));
    assert!(matches!(err("Max", &[], &[]), OpError::InvalidShape(_)));
    assert!(
        matches!(err("Add", &[f32t(&[1; 9]), f32t(&[1])], &[]), OpError::InvalidShape(m) if m.contains("rank"))
    );
    assert!(matches!(
        err("Relu", &[f32t(&[2])], &[]),
        OpError::UnsupportedOp(_)
    ));
    assert!(matches!(err("Conv", &[], &[]), OpError::UnsupportedOp(_)));
    let absent = PlanRequestExt::builder("Add")
        .input(TensorDesc::new("a", vec![2], Dtype::F32))
        .absent()
        .build(Target::cpu());
    assert!(matches!(plan(&absent), Err(OpError::InvalidShape(m)) if m.contains("required")));
}

#[test]
fn describe_lists_onnx_names_and_no_unary_ops() {
    let info = Elementwise::describe();
    let names: Vec<&str> = info.ops.iter().map(|o| o.name.as_str()).collect();
    assert!(names.contains(&"GreaterOrEqual") && names.contains(&"Where"));
    assert!(!names.contains(&"Relu") && !names.contains(&"Neg"));
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    assert!(Elementwise::tolerance("Pow", Dtype::F16).is_some());
    assert!(Elementwise::tolerance("Add", Dtype::F32).is_none());
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    let cases = Elementwise::self_tests();
    assert!((3..=6).contains(&cases.len()));
    for c in cases {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: c.op.clone(),
            inputs: c.inputs.clone(),
            attributes: c.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<Elementwise>(&req, &c.input_data).unwrap();
        let dt = plan.outputs[0].dtype;
        let (got, want) = (decode_f64(dt, &outs[0]), decode_f64(dt, &c.expected[0]));
        assert!(
            got.iter().zip(&want).all(|(g, w)| close(dt, *g, *w)),
            "{}: {got:?} vs {want:?}",
            c.name
        );
    }
}

// ---------------------------------------------------------------- CUDA

/// One request per op × dtype (Pow × exponent dtype), flat and broadcast.
fn every_request() -> Vec<PlanRequestExt> {
    let mut reqs = Vec::new();
    for op in ops::ONNX_OPS {
        for &dt in op.dtypes {
            let ydts: &[Dtype] = if op.name == "Pow" { NUMERIC } else { &[dt] };
            for &ydt in ydts {
                for (a, b) in [(vec![4, 3], vec![4, 3]), (vec![4, 3], vec![3])] {
                    let mut inputs = vec![(a.clone(), dt, vec![]), (b.clone(), ydt, vec![])];
                    let attrs = match op.name {
                        "BitShift" => vec![("direction", AttrValueExt::Text("LEFT".into()))],
                        _ => vec![],
                    };
                    if op.name == "Where" {
                        inputs.insert(0, (vec![4, 1], Dtype::Boolean, vec![]));
                    }
                    if op.name == "Mean" || op.name == "Sum" {
                        inputs.push((b, dt, vec![]));
                    }
                    reqs.push(request(op.name, &inputs, &attrs));
                }
            }
        }
    }
    reqs
}

#[test]
fn cuda_sources_for_every_op_and_dtype() {
    let mut modules = std::collections::BTreeSet::new();
    for req in every_request() {
        let srcs = testing::cuda_sources::<Elementwise>(&req)
            .unwrap_or_else(|e| panic!("{} {:?}: {e:?}", req.op, req.inputs));
        for (id, src) in srcs {
            modules.insert(id);
            assert!(!src.code.contains("#include"));
        }
    }
    assert!(modules.len() >= 30, "{modules:?}");
}

#[test]
fn cuda_modules_define_every_entry_point_they_list() {
    for g in ops::GROUPS {
        for &dt in ALL {
            let id = ops::module_id(g, dt);
            match Elementwise::kernel_source(&id, &Target::cpu()) {
                Ok(src) => {
                    assert!(!src.entry_points.is_empty(), "{id}");
                    for e in &src.entry_points {
                        assert!(
                            src.code.contains(&format!("void {e}(")),
                            "{e} missing from {id}"
                        );
                        assert!(ops::Entry::parse(e).is_some(), "{e} does not parse");
                    }
                }
                Err(_) => assert!(ops::parse_module(&id).is_none(), "{id} refused"),
            }
        }
    }
    assert!(Elementwise::kernel_source("elementwise_logic_f32", &Target::cpu()).is_err());
    assert!(Elementwise::kernel_source("elementwise_f32", &Target::cpu()).is_err());
}

// ---------------------------------------------------------------- broadcast machinery

#[test]
fn geometry_drops_unit_dims_and_merges_contiguous_ones() {
    let g = Geometry::broadcast(&[4, 5, 6], &[&[4, 5, 6], &[1, 1, 6]]).unwrap();
    assert_eq!((g.rank, &g.size[..2]), (2, &[6, 20][..]));
    assert_eq!(
        (g.strides[0][..2].to_vec(), g.strides[1][..2].to_vec()),
        (vec![1, 6], vec![1, 0])
    );
    assert_eq!(g.mode(), Mode::Strided32);
    let g = Geometry::broadcast(&[1, 6], &[&[6], &[1, 6]]).unwrap();
    assert_eq!((g.rank, g.mode()), (1, Mode::Flat));
    let g = Geometry::broadcast(&[2, 0], &[&[2, 0], &[0]]).unwrap();
    assert_eq!((g.n, g.mode()), (0, Mode::Flat));
    let g = Geometry::broadcast(&[], &[&[], &[]]).unwrap();
    assert_eq!((g.n, g.rank, g.mode()), (1, 0, Mode::Flat));
}

#[test]
fn magic_division_matches_plain_division() {
    let mut rng = Rng(42);
    let mut divisors: Vec<u32> = vec![
        1,
        2,
        3,
        5,
        7,
        6,
        12,
        641,
        1 << 16,
        (1 << 31) - 1,
        1 << 31,
        (1 << 31) + 1,
        u32::MAX - 1,
        u32::MAX,
    ];
    divisors.extend((0..200).map(|_| (rng.next() as u32) >> (rng.next() % 31)));
    for d in divisors.into_iter().filter(|d| *d > 0) {
        let (m, s) = magic(d);
        let mut xs = vec![
            0,
            1,
            d - 1,
            d,
            d.wrapping_add(1),
            u32::MAX,
            u32::MAX - 1,
            u32::MAX / d * d,
            (u32::MAX / d * d).wrapping_sub(1),
        ];
        xs.extend((0..200).map(|_| (rng.next() as u32) ^ ((rng.next() as u32) << 16)));
        for x in xs {
            assert_eq!(magic_div(x, m, s), x / d, "{x} / {d}");
        }
    }
}

/// Re-packs a plan's single launch in `mode` (as a larger output would get) and runs it.
fn run_in_mode(op: &str, inputs: &[Input], mode: Mode) -> Vec<f64> {
    let req = request(op, inputs, &[]);
    let mut p = plan(&req).unwrap();
    let shapes: Vec<&[u64]> = inputs.iter().map(|(s, _, _)| &s[..]).collect();
    let out = p.outputs[0].shape.clone();
    let g = Geometry::broadcast(&out, &shapes).unwrap();
    let mut packer = ParamPacker::new();
    for i in 0..inputs.len() {
        packer.ptr(i as u32, Access::Read);
    }
    packer.ptr(inputs.len() as u32, Access::Write);
    g.pack_as(&mut packer, mode);
    let (params, relocations) = packer.finish(4096).unwrap();
    let l: &mut Launch = &mut p.launches[0];
    let base = l
        .entry_point
        .trim_end_matches("_bcast")
        .trim_end_matches("_bcast64")
        .to_string();
    l.entry_point = format!("{base}{}", mode.suffix());
    l.params = params;
    l.relocations = relocations;
    let data: Vec<Vec<u8>> = inputs
        .iter()
        .map(|(_, dt, v)| encode(*dt, v).unwrap())
        .collect();
    let outs = testing::execute(&p, &data, Elementwise::run_cpu).unwrap();
    decode_f64(p.outputs[0].dtype, &outs[0])
}

#[test]
fn every_mode_reads_the_same_parameters_on_the_cpu() {
    let a = (
        vec![2, 3, 4],
        Dtype::F32,
        (0..24).map(|v| v as f64).collect::<Vec<_>>(),
    );
    let b = (vec![3, 1], Dtype::F32, vec![100., 200., 300.]);
    let want = run_in_mode("Sub", &[a.clone(), b.clone()], Mode::Strided32);
    assert_eq!(
        run_in_mode("Sub", &[a.clone(), b.clone()], Mode::Strided64),
        want
    );
    assert_eq!(want[..5], [-100., -99., -98., -97., -196.]);
    let c = (vec![2, 1, 1], Dtype::Boolean, vec![1., 0.]);
    let w64 = run_in_mode("Where", &[c.clone(), a.clone(), b.clone()], Mode::Strided64);
    assert_eq!(w64, run_in_mode("Where", &[c, a, b], Mode::Strided32));
    assert_eq!((w64[0], w64[12]), (0., 100.));
}
