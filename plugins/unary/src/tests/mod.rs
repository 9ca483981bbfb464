//! Native tests: every op and dtype through the SDK harness (plan + CPU kernels) against naive
//! f64 references written here, the special values ONNX pins down (NaN, ±0, ±inf, halves,
//! wrapping integers), every Clip form, empty tensors, errors, and the CUDA path. This file holds
//! the shared helpers and the naive references.

mod clip;
mod inplace;
mod plan;
mod values;

use super::*;
use umd_sdk::{AttrValueExt, testing};

pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
pub const INTS: [Dtype; 8] = [
    Dtype::I8,
    Dtype::U8,
    Dtype::I32,
    Dtype::I64,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];

pub fn desc(name: &str, shape: &[u64], dt: Dtype) -> TensorDesc {
    TensorDesc::new(name, shape.to_vec(), dt)
}

pub fn request(
    op: &str,
    shape: &[u64],
    dt: Dtype,
    attrs: &[(&str, AttrValueExt)],
) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op).input(desc("x", shape, dt));
    for (n, v) in attrs {
        b = b.attr(n, v.clone());
    }
    b.build(Target::cpu())
}

pub fn enc(dt: Dtype, v: &[f64]) -> Vec<u8> {
    dtype::encode(dt, v).unwrap()
}

/// Values as the dtype holds them (what the kernel actually reads).
pub fn held(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &enc(dt, v))
}

/// Runs `req` on one input of values `x`; returns the output values.
pub fn run1(req: &PlanRequestExt, x: &[f64]) -> Result<Vec<f64>, OpError> {
    let dt = req.input(0).unwrap().dtype;
    let (plan, outs) = testing::run::<Unary>(req, &[enc(dt, x)])?;
    assert_eq!(plan.outputs[0].shape, req.input(0).unwrap().shape);
    assert_eq!(plan.launches.len(), 1);
    Ok(dtype::decode_f64(plan.outputs[0].dtype, &outs[0]))
}

pub fn run_op(op: &str, dt: Dtype, x: &[f64], attrs: &[(&str, AttrValueExt)]) -> Vec<f64> {
    run1(&request(op, &[x.len() as u64], dt, attrs), x).unwrap()
}

pub fn same(got: f64, want: f64) -> bool {
    got == want || (got.is_nan() && want.is_nan())
}

/// erf by its everywhere-positive series 2/sqrt(pi) e^-x^2 sum x^(2n+1) 2^n / (1*3*...*(2n+1)).
pub fn erf_ref(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= 2.0 * x * x / (2 * n + 1) as f64;
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

/// Naive f64 formulas of every float kernel.
pub fn reference(kernel: &str, x: f64, a: f64, b: f64) -> f64 {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let sp = |v: f64| (1.0 + v.exp()).ln();
    match kernel {
        "exp" => x.exp(),
        "log" => x.ln(),
        "sqrt" => x.sqrt(),
        "reciprocal" => 1.0 / x,
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "tanh" => x.tanh(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sinh" => (x.exp() - (-x).exp()) / 2.0,
        "cosh" => (x.exp() + (-x).exp()) / 2.0,
        "asinh" => (x + (x * x + 1.0).sqrt()).ln(),
        "acosh" => (x + (x * x - 1.0).sqrt()).ln(),
        "atanh" => 0.5 * ((1.0 + x) / (1.0 - x)).ln(),
        "erf" => erf_ref(x),
        "sigmoid" => sig(x),
        "hard_sigmoid" => (a * x + b).clamp(0.0, 1.0),
        "hard_swish" => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        "leaky_relu" => {
            if x >= 0.0 {
                x
            } else {
                a * x
            }
        }
        "elu" => {
            if x > 0.0 {
                x
            } else {
                a * (x.exp() - 1.0)
            }
        }
        "selu" => b * if x > 0.0 { x } else { a * (x.exp() - 1.0) },
        "celu" => x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0),
        "thresholded_relu" => {
            if x > a {
                x
            } else {
                0.0
            }
        }
        "shrink" => {
            if x < -a {
                x + b
            } else if x > a {
                x - b
            } else {
                0.0
            }
        }
        "gelu" => 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
        "gelu_tanh" => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x.powi(3))).tanh())
        }
        "softplus" => sp(x),
        "softsign" => x / (1.0 + x.abs()),
        "mish" => x * sp(x).tanh(),
        "swish" => x * sig(a * x),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => {
            let f = x.floor();
            match x - f {
                d if d < 0.5 => f,
                d if d > 0.5 => f + 1.0,
                _ if f % 2.0 == 0.0 => f,
                _ => f + 1.0,
            }
        }
        other => panic!("no reference for {other}"),
    }
}

/// Input values inside the op's domain.
pub fn domain(kernel: &str) -> (f64, f64) {
    match kernel {
        "log" | "sqrt" => (0.01, 10.0),
        "asin" | "acos" | "atanh" => (-0.99, 0.99),
        "acosh" => (1.0, 10.0),
        "tan" => (-1.4, 1.4),
        _ => (-5.0, 5.0),
    }
}

/// Non-default attribute values for the ops that have attributes.
pub fn custom_attrs(def: &ops::OpDef) -> Vec<(&'static str, f64)> {
    def.attrs
        .iter()
        .enumerate()
        .map(|(i, (n, d))| (*n, if i == 0 { d * 0.5 + 0.1 } else { d * 1.5 }))
        .collect()
}

pub fn tol(op: &str, dt: Dtype) -> f64 {
    Unary::tolerance(op, dt).map_or(0.0, |t| t.absolute.max(t.relative))
}

/// Integer inputs including each dtype's extremes.
pub fn int_values(dt: Dtype) -> Vec<f64> {
    match dt {
        Dtype::I8 => vec![-128.0, -5.0, -1.0, 0.0, 1.0, 7.0, 127.0],
        Dtype::U8 => vec![0.0, 1.0, 7.0, 128.0, 200.0, 255.0],
        Dtype::I32 => vec![i32::MIN as f64, -5.0, 0.0, 3.0, i32::MAX as f64],
        Dtype::I16 => vec![-32768.0, -5.0, -1.0, 0.0, 1.0, 7.0, 32767.0],
        Dtype::U16 => vec![0.0, 1.0, 7.0, 40000.0, 65535.0],
        Dtype::U32 => vec![0.0, 1.0, 7.0, 3e9, u32::MAX as f64],
        Dtype::U64 => vec![0.0, 1.0, 7.0, (1u64 << 53) as f64, (1u64 << 63) as f64],
        _ => vec![-(1i64 << 53) as f64, -5.0, 0.0, 3.0, (1i64 << 53) as f64],
    }
}
