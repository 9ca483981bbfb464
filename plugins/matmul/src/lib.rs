//! The `matmul` plugin: MatMul (numpy semantics: 1-D, 2-D and batched with broadcast batch
//! dimensions) and Gemm (`transA`, `transB`, `alpha`, `beta`, optional C broadcast to (M, N))
//! on f32, f16, bf16 (accumulating in f32), f64, i32 and i64 (wrapping); MatMulInteger on u8/i8
//! with optional per-tensor or per-row/column zero points, into i32.
//!
//! [`plan`] maps all three onto one strided, batched product; [`cuda`] holds the shared-memory
//! tiled GPU kernel; [`cpu`] runs a launch in place, a share of the output tiles per block range
//! ([`product`]), reading operands through [`block`] and multiplying with the packed GEMM of
//! [`gemm`] (explicit SIMD128 for f32) or on the device's matrix unit ([`operand`]: f32
//! operands bound, read by the host in place, ABI 1.9).

mod block;
mod cpu;
mod cuda;
mod operand;
mod plan;
mod product;
mod stream;

use umd_sdk::kernel::Memory;
use umd_sdk::{
    CpuCall, CpuWrite, Dtype, KernelCall, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin,
    PluginInfo, Target, TensorDesc, TestCase, Tolerance, TuningHint, dtype,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 3] = ["MatMul", "Gemm", "MatMulInteger"];
/// Dtypes MatMul and Gemm serve.
pub const DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];
/// Operand dtypes of MatMulInteger.
pub const INT8: [Dtype; 2] = [Dtype::U8, Dtype::I8];
/// Tile edge of the CUDA kernel (threads per block: TILE×TILE).
pub const TILE: u32 = 16;

pub struct MatMul;

impl Plugin for MatMul {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("matmul", env!("CARGO_PKG_VERSION"), OPS.iter().copied())
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        plan::plan(req)
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        if op.eq_ignore_ascii_case("MatMulInteger") {
            return t(0.0, 0.0);
        }
        // sums of K products: the CPU and GPU orders differ
        match dt {
            Dtype::F32 => t(1e-4, 1e-4),
            Dtype::F16 => t(1e-2, 1e-2),
            Dtype::Bf16 => t(4e-2, 2e-2),
            Dtype::F64 => t(1e-10, 1e-10),
            Dtype::I32 | Dtype::I64 => t(0.0, 0.0),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        if module_id == "matmul_int8" {
            return Ok(cuda::int8_module());
        }
        let dt = dtype::of_module(module_id, "matmul_", &DTYPES)?;
        Ok(cuda::module(dt))
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        let attr = |name: &str, value| umd_sdk::Attribute {
            name: name.into(),
            value,
        };
        use umd_sdk::AttrValue::{Float, Int};
        vec![
            umd_sdk::test_case(
                "2x3 @ 3x2",
                "MatMul",
                vec![
                    (t(&[2, 3], Dtype::F32), vec![1., 2., 3., 4., 5., 6.]),
                    (t(&[3, 2], Dtype::F32), vec![1., 0., 0., 1., 1., 1.]),
                ],
                vec![(Dtype::F32, vec![4., 5., 10., 11.])],
                1e-6,
            ),
            umd_sdk::test_case(
                "batched f16 with a shared right operand",
                "MatMul",
                vec![
                    (t(&[2, 1, 2], Dtype::F16), vec![1., 2., 3., 4.]),
                    (t(&[2, 1], Dtype::F16), vec![0.5, 0.25]),
                ],
                vec![(Dtype::F16, vec![1.0, 2.5])],
                1e-3,
            ),
            umd_sdk::test_case_with(
                "gemm transB with a bias row",
                "Gemm",
                vec![
                    (t(&[2, 2], Dtype::F32), vec![1., 2., 3., 4.]),
                    (t(&[3, 2], Dtype::F32), vec![1., 0., 0., 1., 1., 1.]),
                    (t(&[1, 3], Dtype::F32), vec![10., 20., 30.]),
                ],
                vec![attr("transB", Int(1)), attr("alpha", Float(2.0))],
                // A·Bᵀ = [[1, 2, 3], [3, 4, 7]]
                vec![(Dtype::F32, vec![12., 24., 36., 16., 28., 44.])],
                1e-6,
            ),
            umd_sdk::test_case(
                "integer matmul in i64",
                "MatMul",
                vec![
                    (t(&[1, 2], Dtype::I64), vec![3., -4.]),
                    (t(&[2, 2], Dtype::I64), vec![5., 6., 7., 8.]),
                ],
                vec![(Dtype::I64, vec![-13., -14.])],
                0.0,
            ),
        ]
    }

    fn tuning_hints() -> Vec<TuningHint> {
        vec![TuningHint {
            op: "MatMul".into(),
            key: "tile".into(),
            value: TILE.to_string(),
        }]
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        umd_sdk::kernel::run_cpu_in_memory::<Self>(call)
    }

    fn run_kernel(call: &KernelCall, memory: &mut dyn Memory) -> Result<(), OpError> {
        cpu::run_kernel(call, memory)
    }

    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        cpu::splittable(entry_point)
    }
}

umd_sdk::export_plugin!(MatMul);

#[cfg(test)]
mod tests;
