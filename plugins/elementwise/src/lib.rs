//! The `elementwise` plugin: the binary, variadic and logic operators of ONNX with numpy
//! multidirectional broadcasting — Add, Sub, Mul, Div, Mod, Pow, Max, Min, Sum, Mean, Equal,
//! Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, BitShift, BitwiseAnd/Or/Xor,
//! PRelu and Where.
//!
//! Everything is table-driven: [`ops`] lists the kernels and the ONNX ops; [`plan`] checks a
//! request and emits launches; [`bcast`] is the broadcast machinery every op shares (output
//! shape, coalesced per-input strides, the walk mode, its parameters, the CPU walk); [`cuda`]
//! renders one module per (kernel group, dtype); [`cpu`] runs the same kernels on the CPU with
//! the per-element semantics of [`scalar`], reading the very parameter block the GPU gets.

pub mod bcast;
mod cpu;
mod cuda;
pub mod ops;
mod plan;
pub mod scalar;

pub use plan::plan;

use umd_sdk::kernel::Memory;
use umd_sdk::{
    CpuCall, CpuWrite, Dtype, KernelCall, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin,
    PluginInfo, Target, TensorDesc, TestCase, Tolerance,
};

pub struct Elementwise;

impl Plugin for Elementwise {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info(
            "elementwise",
            env!("CARGO_PKG_VERSION"),
            ops::ONNX_OPS.iter().map(|op| op.name),
        )
    }

    fn plan_ext(request: &PlanRequestExt) -> Result<OpPlan, OpError> {
        plan(request)
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        // Only Pow is transcendental; everything else is exact (halves round once, as here).
        if !op.eq_ignore_ascii_case("Pow") {
            return None;
        }
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
        let (group, dt) = ops::parse_module(module_id)
            .ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`")))?;
        Ok(cuda::module(group, dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::run(&call)
    }

    fn run_kernel(call: &KernelCall, memory: &mut dyn Memory) -> Result<(), OpError> {
        cpu::run_kernel(call, memory)
    }

    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        cpu::splittable(entry_point)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        vec![
            umd_sdk::test_case(
                "bias broadcast",
                "Add",
                vec![
                    (t(&[2, 3], Dtype::F32), vec![1., 2., 3., 4., 5., 6.]),
                    (t(&[3], Dtype::F32), vec![10., 20., 30.]),
                ],
                vec![(Dtype::F32, vec![11., 22., 33., 14., 25., 36.])],
                0.0,
            ),
            umd_sdk::test_case(
                "integer division by zero is 0",
                "Div",
                vec![
                    (t(&[3], Dtype::I32), vec![7., -7., 5.]),
                    (t(&[3], Dtype::I32), vec![2., 2., 0.]),
                ],
                vec![(Dtype::I32, vec![3., -3., 0.])],
                0.0,
            ),
            umd_sdk::test_case(
                "Mod takes the divisor's sign",
                "Mod",
                vec![
                    (t(&[3], Dtype::I32), vec![-4., 7., 5.]),
                    (t(&[3], Dtype::I32), vec![3., -3., -2.]),
                ],
                vec![(Dtype::I32, vec![2., -2., -1.])],
                0.0,
            ),
            umd_sdk::test_case(
                "Max of three propagates NaN",
                "Max",
                vec![
                    (t(&[3], Dtype::F32), vec![1., f64::NAN, 3.]),
                    (t(&[3], Dtype::F32), vec![2., 0., -1.]),
                    (t(&[], Dtype::F32), vec![2.5]),
                ],
                vec![(Dtype::F32, vec![2.5, f64::NAN, 3.])],
                0.0,
            ),
            umd_sdk::test_case(
                "Less against a scalar gives bool",
                "Less",
                vec![
                    (t(&[3], Dtype::I64), vec![-1., 2., 5.]),
                    (t(&[], Dtype::I64), vec![2.]),
                ],
                vec![(Dtype::Boolean, vec![1., 0., 0.])],
                0.0,
            ),
            umd_sdk::test_case(
                "Where broadcasts three ways",
                "Where",
                vec![
                    (t(&[2, 1], Dtype::Boolean), vec![1., 0.]),
                    (t(&[3], Dtype::F16), vec![1., 2., 3.]),
                    (t(&[], Dtype::F16), vec![-1.]),
                ],
                vec![(Dtype::F16, vec![1., 2., 3., -1., -1., -1.])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Elementwise);

#[cfg(test)]
mod tests;
