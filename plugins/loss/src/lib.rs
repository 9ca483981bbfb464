//! The `loss` plugin: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12–22) on
//! f32, f16, bf16 and f64 inputs with i32 or i64 targets: `reduction` none / sum / mean,
//! `ignore_index`, optional per-class `weight`, N-D inputs `[N, C, d1, …]` and SCE's optional
//! log_prob output. [`plan`] lays out the stages, [`cpu`] and [`cuda`] implement them.

pub mod cpu;
pub mod cuda;
pub mod plan;

use umd_sdk::kernel::{self, Memory};
use umd_sdk::{
    CpuCall, CpuWrite, Dtype, KernelCall, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin,
    PluginInfo, Target, TensorDesc, TestCase, Tolerance,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 2] = ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"];
/// Data dtypes served.
pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];
/// Target dtypes served.
pub const TARGETS: [Dtype; 2] = [Dtype::I32, Dtype::I64];

pub struct Loss;

impl Plugin for Loss {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("loss", env!("CARGO_PKG_VERSION"), OPS.iter().copied())
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        if req.op.eq_ignore_ascii_case(OPS[0]) {
            plan::plan(req, false)
        } else if req.op.eq_ignore_ascii_case(OPS[1]) {
            plan::plan(req, true)
        } else {
            Err(umd_sdk::unsupported_op_ext(req))
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
        let (t, i) = plan::parse(module_id)
            .ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`")))?;
        Ok(cuda::module(module_id, t, i))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        kernel::run_cpu_in_memory::<Self>(call)
    }

    fn run_kernel(call: &KernelCall, memory: &mut dyn Memory) -> Result<(), OpError> {
        if !call.is_whole() {
            return Err(OpError::internal("the loss kernels run whole grids only"));
        }
        cpu::run(call, memory)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |name: &str, shape: &[u64], dt| TensorDesc::new(name, shape.to_vec(), dt);
        vec![
            umd_sdk::test_case(
                "nll mean of two rows",
                "NegativeLogLikelihoodLoss",
                vec![
                    (
                        t("x", &[2, 3], Dtype::F32),
                        vec![-1., -2., -3., -4., -5., -6.],
                    ),
                    (t("t", &[2], Dtype::I64), vec![2., 0.]),
                ],
                // (3 + 4) / 2
                vec![(Dtype::F32, vec![3.5])],
                1e-6,
            ),
            umd_sdk::test_case(
                "sce mean of uniform scores",
                "SoftmaxCrossEntropyLoss",
                vec![
                    (t("x", &[2, 2], Dtype::F32), vec![1., 1., 0., 0.]),
                    (t("t", &[2], Dtype::I32), vec![0., 1.]),
                ],
                // ln 2 for every row
                vec![(Dtype::F32, vec![std::f64::consts::LN_2])],
                1e-6,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Loss);

#[cfg(test)]
mod tests;
