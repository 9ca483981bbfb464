//! The `optim` plugin: the training optimizers of domain `ai.onnx.preview.training` (opset 1):
//! Adagrad, Adam and Momentum (standard and Nesterov), one or several parameter tensors per node
//! ("_multiple"), every attribute, on f32, f16, bf16 (computed in f32) and f64 tensors with an
//! f32 or f64 learning rate `R` and an i64 step count `T`.
//!
//! The host routes ops by name and passes the node's domain in `req.domain`: a request of
//! domain `ai.onnx.preview.training` (or none said) is served, any other domain is refused.
//!
//! [`plan`] validates and packs (one launch per parameter tensor); [`cuda`] renders one module
//! per dtype holding the three kernels; [`cpu`] runs the same parameter blocks on the CPU.

mod cpu;
mod cuda;
mod plan;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

pub use plan::{DOMAIN, Kind};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 3] = ["Adagrad", "Adam", "Momentum"];
/// Dtypes of the parameter tensors.
pub const DTYPES: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

/// The module every launch of dtype `dt` lives in.
pub fn module_id(dt: Dtype) -> String {
    format!("optim_{}", dtype::name(dt))
}

pub struct OptimPlugin;

impl Plugin for OptimPlugin {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("optim", env!("CARGO_PKG_VERSION"), OPS)
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        match Kind::of(&req.op) {
            Some(kind) => plan::plan(req, kind),
            None => Err(umd_sdk::unsupported_op_ext(req)),
        }
    }

    fn tolerance(_op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        match dt {
            Dtype::F32 => t(1e-5, 1e-5),
            Dtype::F16 => t(1e-3, 1e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-12, 1e-12),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let dt = dtype::of_module(module_id, "optim_", &DTYPES)?;
        Ok(cuda::module(dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::run(&call)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |name: &str, shape: &[u64], dt| TensorDesc::new(name, shape.to_vec(), dt);
        let f = |name: &str, v: f64| Attribute {
            name: name.into(),
            value: AttrValue::Float(v),
        };
        let r = |v: f64| (t("R", &[], Dtype::F32), vec![v]);
        let step = |v: f64| (t("T", &[], Dtype::I64), vec![v]);
        let x = |name: &str, v: Vec<f64>| (t(name, &[v.len() as u64], Dtype::F32), v);
        vec![
            // g = -1, h = 3 + 1 = 4: x = 1 + 0.5 * 1 / 2 = 1.25
            umd_sdk::test_case_with(
                "adagrad step",
                "Adagrad",
                vec![
                    r(0.5),
                    step(0.),
                    x("X", vec![1.]),
                    x("G", vec![-1.]),
                    x("H", vec![3.]),
                ],
                vec![f("epsilon", 0.)],
                vec![(Dtype::F32, vec![1.25]), (Dtype::F32, vec![4.])],
                1e-6,
            ),
            // first step (T = 0): v = 0.5 * 2 + 1 * 2 = 3, x = 1 - 0.1 * 3 = 0.7
            umd_sdk::test_case_with(
                "momentum first step",
                "Momentum",
                vec![
                    r(0.1),
                    step(0.),
                    x("X", vec![1.]),
                    x("G", vec![2.]),
                    x("V", vec![2.]),
                ],
                vec![
                    f("alpha", 0.5),
                    f("beta", 0.25),
                    f("norm_coefficient", 0.),
                    Attribute {
                        name: "mode".into(),
                        value: AttrValue::Text("standard".into()),
                    },
                ],
                vec![(Dtype::F32, vec![0.7]), (Dtype::F32, vec![3.])],
                1e-6,
            ),
            // T = 0 (no bias correction): v = 0.5 * 0 + 0.5 * 2 = 1, h = 0.75 * 0 + 0.25 * 4 = 1,
            // x = 1 - 0.5 * 1 / 1 = 0.5
            umd_sdk::test_case_with(
                "adam step",
                "Adam",
                vec![
                    r(0.5),
                    step(0.),
                    x("X", vec![1.]),
                    x("G", vec![2.]),
                    x("V", vec![0.]),
                    x("H", vec![0.]),
                ],
                vec![f("alpha", 0.5), f("beta", 0.75), f("epsilon", 0.)],
                vec![
                    (Dtype::F32, vec![0.5]),
                    (Dtype::F32, vec![1.]),
                    (Dtype::F32, vec![1.]),
                ],
                1e-6,
            ),
        ]
    }
}

umd_sdk::export_plugin!(OptimPlugin);

#[cfg(test)]
mod tests;
