//! Native unit tests. This file: the harness (plan and run on the CPU kernels) and a naive
//! reference written independently of the plugin (its own numpy broadcasting by index
//! unravelling, f64 arithmetic, ONNX semantics). [`ops`]: every op on every served dtype against
//! it, and edge semantics; [`planning`]: plans, errors, CUDA sources, the broadcast machinery;
//! [`emu`]: vectors for running the CUDA kernels on the host (`tools/cuda_emu.py`).

mod emu;
mod inplace;
mod ops;
mod planning;

use super::*;
use crate::ops::FLOATS;
use umd_sdk::dtype::{self, decode_f64, encode};
use umd_sdk::{AttrValueExt, shape, testing};

// ---------------------------------------------------------------- harness

pub type Input = (Vec<u64>, Dtype, Vec<f64>);

pub fn request(op: &str, inputs: &[Input], attrs: &[(&str, AttrValueExt)]) -> PlanRequestExt {
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
pub fn run(
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

pub fn int(v: i64) -> AttrValueExt {
    AttrValueExt::Int(v)
}

/// A deterministic pseudo-random stream.
pub struct Rng(u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// What values an input takes.
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// Small values, some negative (unsigned: non-negative), floats in quarters.
    Any,
    /// As `Any` but never 0 (divisors).
    NonZero,
    /// Exponents: small non-negative.
    Exp,
    /// Shift amounts: -2..=width+1.
    Shift,
}

pub fn values(dt: Dtype, n: u64, rng: &mut Rng, kind: Kind) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let v = match (kind, dt) {
                (Kind::Exp, _) => rng.range(0, 3) as f64,
                (Kind::Shift, d) if unsigned(d) => {
                    rng.range(0, 8 * dtype::size(dt) as i64 + 1) as f64
                }
                (Kind::Shift, _) => rng.range(-2, 8 * dtype::size(dt) as i64 + 1) as f64,
                (_, Dtype::Boolean) => rng.range(0, 1) as f64,
                (_, d) if unsigned(d) => rng.range(0, 30) as f64,
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

/// An unsigned integer dtype.
pub fn unsigned(dt: Dtype) -> bool {
    matches!(dt, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64)
}

/// An integer dtype (not bool).
pub fn integer(dt: Dtype) -> bool {
    unsigned(dt) || matches!(dt, Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64)
}

/// Rounds `x` to `dt`: floats by encoding, integers wrapping.
pub fn round(dt: Dtype, x: f64) -> f64 {
    let bits = 8 * dtype::size(dt) as u32;
    match dt {
        d if integer(d) => {
            let m = 1i128 << bits;
            let mut r = (x as i128).rem_euclid(m);
            if !unsigned(dt) && r >= m / 2 {
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
pub fn close(dt: Dtype, got: f64, want: f64) -> bool {
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
pub fn check(
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
pub const PAIRS: &[(&[u64], &[u64])] = &[
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

pub fn check_binary(op: &str, dts: &[Dtype], kinds: [Kind; 2], attrs: &[(&str, AttrValueExt)]) {
    for &dt in dts {
        for (a, b) in PAIRS {
            check(op, &[dt, dt], &[a, b], &kinds, attrs);
        }
    }
}
