//! The `recurrent` plugin: RNN, LSTM and GRU (ONNX opsets 1–22 forms) on f32, f16, bf16
//! (computed in f32) and f64: directions forward/reverse/bidirectional, `layout` 0/1,
//! `sequence_lens`, initial states, LSTM peepholes and `input_forget`, GRU
//! `linear_before_reset`, `clip`, and the eleven activation functions the ONNX spec lists.
//!
//! [`plan`] checks a request and packs one launch ([`params`] is the parameter block); [`cuda`]
//! renders one module per dtype (a block per (direction, batch) pair, the time loop inside);
//! [`cpu`] runs the same blocks; [`act`] owns the activation functions.

mod act;
mod cpu;
mod cuda;
mod params;
mod plan;

use params::Cell;
use umd_sdk::{
    CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin, PluginInfo,
    Target, TensorDesc, TestCase, Tolerance, dtype,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 3] = ["RNN", "LSTM", "GRU"];
/// Dtypes every op serves.
pub const DTYPES: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

pub struct Recurrent;

impl Plugin for Recurrent {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("recurrent", env!("CARGO_PKG_VERSION"), OPS.iter().copied())
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        let cell = if req.op.eq_ignore_ascii_case("RNN") {
            Cell::Rnn
        } else if req.op.eq_ignore_ascii_case("LSTM") {
            Cell::Lstm
        } else if req.op.eq_ignore_ascii_case("GRU") {
            Cell::Gru
        } else {
            return Err(umd_sdk::unsupported_op_ext(req));
        };
        plan::plan(req, cell)
    }

    fn tolerance(_op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        match dt {
            Dtype::F32 => t(1e-5, 1e-4),
            Dtype::F16 => t(2e-3, 2e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-9, 1e-9),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let dt = dtype::of_module(module_id, "recurrent_", &DTYPES)?;
        Ok(cuda::module(dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::run(&call)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |name: &str, shape: &[u64]| TensorDesc::new(name, shape.to_vec(), Dtype::F32);
        let (sig, tanh) = (|x: f64| 1.0 / (1.0 + (-x).exp()), f64::tanh);
        // LSTM, one step from zero states: gates (i, o, f, c) = W x = (.5, .25, 1, -.5)
        let c = sig(0.5) * tanh(-0.5);
        let h = sig(0.25) * tanh(c);
        // GRU, one step from h = 0: (z, r, h~) = (sig(1), sig(2), tanh(-2)); h = (1 - z) h~
        let g = (1.0 - sig(1.0)) * tanh(-2.0);
        vec![
            umd_sdk::test_case(
                "rnn, two steps",
                "RNN",
                vec![
                    (t("X", &[2, 1, 1]), vec![1., 2.]),
                    (t("W", &[1, 1, 1]), vec![0.5]),
                    (t("R", &[1, 1, 1]), vec![1.]),
                ],
                // h1 = tanh(.5), h2 = tanh(1 + h1)
                vec![
                    (Dtype::F32, vec![0.46211716, 0.89806301]),
                    (Dtype::F32, vec![0.89806301]),
                ],
                1e-6,
            ),
            umd_sdk::test_case(
                "lstm, one step",
                "LSTM",
                vec![
                    (t("X", &[1, 1, 1]), vec![1.]),
                    (t("W", &[1, 4, 1]), vec![0.5, 0.25, 1., -0.5]),
                    (t("R", &[1, 4, 1]), vec![0.; 4]),
                ],
                vec![
                    (Dtype::F32, vec![h]),
                    (Dtype::F32, vec![h]),
                    (Dtype::F32, vec![c]),
                ],
                1e-6,
            ),
            umd_sdk::test_case(
                "gru, one step",
                "GRU",
                vec![
                    (t("X", &[1, 1, 1]), vec![2.]),
                    (t("W", &[1, 3, 1]), vec![0.5, 1., -1.]),
                    (t("R", &[1, 3, 1]), vec![0.; 3]),
                ],
                vec![(Dtype::F32, vec![g]), (Dtype::F32, vec![g])],
                1e-6,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Recurrent);

#[cfg(test)]
mod tests;
