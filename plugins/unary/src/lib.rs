//! The `unary` plugin: element-wise unary ops (output shape = input shape), one contiguous
//! launch each.
//!
//! - math on f32, f16, bf16 (computing in f32) and f64: Exp, Log, Sqrt, Reciprocal, Sin, Cos, Tan,
//!   Tanh, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Erf, Sigmoid, HardSigmoid,
//!   HardSwish, LeakyRelu, Elu, Selu, Celu, ThresholdedRelu, Shrink, Gelu (exact and tanh), Softplus,
//!   Softsign, Mish, Swish, Floor, Ceil, Round (half to even);
//! - Abs, Neg, Sign, Relu and Clip also on every integer: i8, u8, i16, u16, i32, u32, i64, u64
//!   (wrapping; Neg on unsigned wraps as numpy's does);
//! - BitwiseNot on the integers, Not on bool, IsNaN and IsInf (floats in, bool out).
//!
//! [`ops`] is the table every part reads; [`plan`] validates and packs; [`cuda`] generates one
//! module per dtype from the table's C expressions; [`cpu`] runs the table's Rust bodies in place, a share of the elements per block range.

mod cpu;
mod cuda;
mod math;
mod ops;
mod plan;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

pub struct Unary;

impl Plugin for Unary {
    fn describe() -> PluginInfo {
        // Several definitions may serve one ONNX op (per opset): each op once, in order.
        let mut ops: Vec<&str> = Vec::new();
        for def in ops::all() {
            if !ops.contains(&def.onnx) {
                ops.push(def.onnx);
            }
        }
        umd_sdk::plugin_info("unary", env!("CARGO_PKG_VERSION"), ops)
    }

    fn plan_ext(request: &PlanRequestExt) -> Result<OpPlan, OpError> {
        plan::plan(request)
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let approx = ops::all().any(|d| d.approx && d.onnx.eq_ignore_ascii_case(op));
        let t = |v: f64| Tolerance {
            absolute: v,
            relative: v,
        };
        match dt {
            _ if !approx => None,
            Dtype::F32 => Some(t(1e-5)),
            Dtype::F16 => Some(t(1e-3)),
            Dtype::Bf16 => Some(t(1e-2)),
            Dtype::F64 => Some(t(1e-12)),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let dt = dtype::of_module(module_id, "unary_", &cuda::MODULE_DTYPES)?;
        cuda::module(dt).ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`")))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        umd_sdk::kernel::run_cpu_in_memory::<Self>(call)
    }

    fn run_kernel(
        call: &umd_sdk::KernelCall,
        memory: &mut dyn umd_sdk::kernel::Memory,
    ) -> Result<(), OpError> {
        cpu::run_kernel(call, memory)
    }

    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        cpu::splittable(entry_point)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |dt| TensorDesc::new("x", vec![4], dt);
        let attr = |name: &str, value| Attribute {
            name: name.into(),
            value,
        };
        vec![
            umd_sdk::test_case(
                "sigmoid f32",
                "Sigmoid",
                vec![(t(Dtype::F32), vec![-1.0, 0.0, 1.0, -100.0])],
                vec![(Dtype::F32, vec![0.268_941_42, 0.5, 0.731_058_6, 0.0])],
                1e-6,
            ),
            umd_sdk::test_case_with(
                "gelu tanh f16",
                "Gelu",
                vec![(t(Dtype::F16), vec![-1.0, 0.0, 1.0, 2.0])],
                vec![attr("approximate", AttrValue::Text("tanh".into()))],
                vec![(Dtype::F16, vec![-0.158_808, 0.0, 0.841_192, 1.954_598])],
                2e-3,
            ),
            umd_sdk::test_case(
                "round half to even f64",
                "Round",
                vec![(t(Dtype::F64), vec![0.5, 1.5, 2.5, -2.5])],
                vec![(Dtype::F64, vec![0.0, 2.0, 2.0, -2.0])],
                0.0,
            ),
            umd_sdk::test_case(
                "abs i8 wraps",
                "Abs",
                vec![(t(Dtype::I8), vec![-128.0, -3.0, 0.0, 7.0])],
                vec![(Dtype::I8, vec![-128.0, 3.0, 0.0, 7.0])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "isinf negative only bf16",
                "IsInf",
                vec![(
                    t(Dtype::Bf16),
                    vec![f64::INFINITY, f64::NEG_INFINITY, 1.0, -2.0],
                )],
                vec![attr("detect_positive", AttrValue::Int(0))],
                vec![(Dtype::Boolean, vec![0.0, 1.0, 0.0, 0.0])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "leaky relu bf16",
                "LeakyRelu",
                vec![(t(Dtype::Bf16), vec![-2.0, -0.5, 0.0, 3.0])],
                vec![attr("alpha", AttrValue::Float(0.5))],
                vec![(Dtype::Bf16, vec![-1.0, -0.25, 0.0, 3.0])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Unary);

#[cfg(test)]
mod tests;
