//! The activation functions of the recurrent ops (`activations`, `activation_alpha`,
//! `activation_beta`): their names and kind numbers (shared with the CUDA `umd_act`), the ONNX
//! defaults of alpha and beta, how the attribute lists are read, and the CPU evaluation.

use crate::params::{Acts, Cell, MAX_ACTS};
use umd_sdk::{AttrValueExt, AttributeExt, OpError, attr};

/// Activation names in kind order (kind = index), as the ONNX spec spells them.
pub const NAMES: [&str; 11] = [
    "Relu",
    "Tanh",
    "Sigmoid",
    "Affine",
    "LeakyRelu",
    "ThresholdedRelu",
    "ScaledTanh",
    "HardSigmoid",
    "Elu",
    "Softsign",
    "Softplus",
];

const TANH: u64 = 1;
const SIGMOID: u64 = 2;

/// (uses alpha, uses beta, default alpha, default beta) of kind `k`.
fn params_of(k: u64) -> (bool, bool, f64, f64) {
    match k {
        3 => (true, true, 1.0, 0.0),   // Affine
        4 => (true, false, 0.01, 0.0), // LeakyRelu
        5 => (true, false, 1.0, 0.0),  // ThresholdedRelu
        6 => (true, true, 1.0, 1.0),   // ScaledTanh
        7 => (true, true, 0.2, 0.5),   // HardSigmoid
        8 => (true, false, 1.0, 0.0),  // Elu
        _ => (false, false, 0.0, 0.0), // no parameter
    }
}

/// The activations of a request: `activations` (names, case-insensitive; one list per direction,
/// or one list shared by both directions of a bidirectional op) with `activation_alpha` and
/// `activation_beta` consumed in order by the activations that take them (as onnxruntime reads
/// them); defaults per cell (RNN: Tanh; LSTM: Sigmoid, Tanh, Tanh; GRU: Sigmoid, Tanh).
pub fn parse(attrs: &[AttributeExt], cell: Cell, dirs: usize) -> Result<Acts, OpError> {
    let per = cell.activations();
    let default: Vec<u64> = match cell {
        Cell::Rnn => vec![TANH],
        Cell::Lstm => vec![SIGMOID, TANH, TANH],
        Cell::Gru => vec![SIGMOID, TANH],
    };
    let names = match attrs.iter().find(|a| a.name == "activations") {
        None => None,
        Some(a) => match &a.value {
            AttrValueExt::Texts(v) => Some(v.clone()),
            AttrValueExt::Text(v) => Some(vec![v.clone()]),
            other => {
                return Err(OpError::InvalidAttribute(format!(
                    "attribute `activations` must be a list of strings, got {other:?}"
                )));
            }
        },
    };
    let mut kinds: Vec<u64> = match names {
        None => default.repeat(dirs),
        Some(names) => names
            .iter()
            .map(|n| {
                NAMES
                    .iter()
                    .position(|k| k.eq_ignore_ascii_case(n))
                    .map(|k| k as u64)
                    .ok_or_else(|| {
                        OpError::InvalidAttribute(format!(
                            "activations: `{n}` is not supported (served: {NAMES:?})"
                        ))
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    if kinds.len() == per && dirs == 2 {
        kinds = kinds.repeat(2);
    }
    if kinds.len() != per * dirs {
        return Err(OpError::InvalidAttribute(format!(
            "activations: {} given, {} expected ({per} per direction, {dirs} direction(s))",
            kinds.len(),
            per * dirs
        )));
    }
    let alphas = attr::floats_or(attrs, "activation_alpha", &[])?;
    let betas = attr::floats_or(attrs, "activation_beta", &[])?;
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    let mut acts = Acts::default();
    debug_assert!(kinds.len() <= MAX_ACTS);
    for (s, &k) in kinds.iter().enumerate() {
        let (ua, ub, da, db) = params_of(k);
        acts.kind[s] = k;
        acts.alpha[s] = if ua {
            ai.next().copied().unwrap_or(da)
        } else {
            da
        };
        acts.beta[s] = if ub {
            bi.next().copied().unwrap_or(db)
        } else {
            db
        };
    }
    if ai.next().is_some() || bi.next().is_some() {
        return Err(OpError::InvalidAttribute(format!(
            "activation_alpha/activation_beta: more values ({} / {}) than the activations {kinds:?} take",
            alphas.len(),
            betas.len()
        )));
    }
    Ok(acts)
}

/// Arithmetic the CPU kernels compute in (f32 for f32/f16/bf16, f64 for f64).
pub trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn ln_1p(self) -> Self;
    fn abs(self) -> Self;
}

macro_rules! real {
    ($t:ty, $exp:path, $tanh:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
        }
    };
}
// f32: the SDK's exp and tanh (libm's are software calls in wasm)
real!(f32, umd_sdk::fmath::exp, umd_sdk::fmath::tanh);
real!(f64, f64::exp, f64::tanh);

/// Activation `kind` with `alpha`, `beta` at `x` (NaN propagates as numpy does; the CUDA
/// `umd_act` is the same case by case).
#[inline(always)]
pub fn apply<C: Real>(kind: u64, a: C, b: C, x: C) -> C {
    let (zero, one) = (C::ZERO, C::ONE);
    match kind {
        0 => {
            if x < zero {
                zero
            } else {
                x
            }
        }
        1 => x.tanh(),
        2 => one / (one + (-x).exp()),
        3 => a * x + b,
        4 => {
            if x < zero {
                a * x
            } else {
                x
            }
        }
        5 => {
            if x > a {
                x
            } else {
                zero
            }
        }
        6 => a * (b * x).tanh(),
        7 => {
            let v = a * x + b;
            if v < zero {
                zero
            } else if v > one {
                one
            } else {
                v
            }
        }
        8 => {
            if x < zero {
                a * (x.exp() - one)
            } else {
                x
            }
        }
        9 => x / (one + x.abs()),
        _ => {
            if x > zero {
                x + (-x).exp().ln_1p()
            } else {
                x.exp().ln_1p()
            }
        }
    }
}
