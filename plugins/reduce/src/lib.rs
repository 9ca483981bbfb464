//! The `reduce` plugin: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
//! ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMax, ArgMin, CumSum, CumProd and TopK.
//!
//! Every reduction runs one kernel family over a [`view::View`] (kept × reduced dimensions after
//! merging), parametrised by an op table (init, map, combine, finalize): [`plan`] builds the view
//! and the launch, [`cuda`] renders the modules, [`cpu`] runs the same parameter block on the CPU.
//! Halves accumulate in f32, f64 in f64, integers wrap in their own width.

pub mod cpu;
pub mod cuda;
pub mod ops;
pub mod plan;
pub mod view;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, OpSignature,
    PlanRequestExt, Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, signature,
};

use ops::{ARG_OPS, REDUCE_OPS};

pub struct Reduce;

/// Every op name this plugin serves, in ONNX spelling.
pub fn op_names() -> Vec<&'static str> {
    REDUCE_OPS
        .iter()
        .map(|(n, _, _)| *n)
        .chain(ARG_OPS.iter().map(|(n, _)| *n))
        .chain(["CumSum", "CumProd", "TopK"])
        .collect()
}

impl Plugin for Reduce {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("reduce", env!("CARGO_PKG_VERSION"), op_names())
    }

    fn plan_ext(request: &PlanRequestExt) -> Result<OpPlan, OpError> {
        plan::plan(request)
    }

    fn signatures() -> Vec<OpSignature> {
        // Reduce* axes (input 1, newer opsets), CumSum/CumProd axis, TopK k.
        REDUCE_OPS
            .iter()
            .map(|(n, _, _)| *n)
            .chain(["CumSum", "CumProd", "TopK"])
            .map(|n| signature(n, &[1]))
            .collect()
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let arithmetic = REDUCE_OPS
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(op))
            .map(|(_, r, _)| r.arithmetic())
            .unwrap_or(op.eq_ignore_ascii_case("CumSum") || op.eq_ignore_ascii_case("CumProd"));
        if !arithmetic {
            return None;
        }
        // Sums of many terms round differently with the summation order (and the ONNX
        // reference accumulates halves in their own precision).
        let t = |a: f64| {
            Some(Tolerance {
                absolute: a,
                relative: a,
            })
        };
        match dt {
            Dtype::F32 => t(1e-4),
            Dtype::F16 => t(2e-2),
            Dtype::Bf16 => t(5e-2),
            Dtype::F64 => t(1e-10),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        cuda::module(module_id)
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::inplace::run_cpu(call)
    }

    fn run_kernel(
        call: &umd_sdk::KernelCall,
        memory: &mut dyn umd_sdk::kernel::Memory,
    ) -> Result<(), OpError> {
        cpu::inplace::run_kernel(call, memory)
    }

    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        cpu::inplace::splittable(entry_point)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        let a = |name: &str, value| Attribute {
            name: name.into(),
            value,
        };
        let x23 = vec![1., 2., 3., 4., 5., 6.];
        vec![
            umd_sdk::test_case_with(
                "sum over axis 1 (attribute form)",
                "ReduceSum",
                vec![(t(&[2, 3], Dtype::F32), x23.clone())],
                vec![
                    a("axes", AttrValue::Ints(vec![1])),
                    a("keepdims", AttrValue::Int(0)),
                ],
                vec![(Dtype::F32, vec![6., 15.])],
                1e-6,
            ),
            umd_sdk::test_case_with(
                "mean over axis 0 in f16",
                "ReduceMean",
                vec![(t(&[2, 3], Dtype::F16), x23.clone())],
                vec![a("axes", AttrValue::Ints(vec![-2]))],
                vec![(Dtype::F16, vec![2.5, 3.5, 4.5])],
                1e-3,
            ),
            umd_sdk::test_case(
                "max of everything propagates NaN",
                "ReduceMax",
                vec![(t(&[3], Dtype::F32), vec![1., f64::NAN, 3.])],
                vec![(Dtype::F32, vec![f64::NAN])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "argmin, last of ties",
                "ArgMin",
                vec![(t(&[2, 3], Dtype::I32), vec![4., 1., 1., 0., 9., 0.])],
                vec![
                    a("axis", AttrValue::Int(1)),
                    a("select_last_index", AttrValue::Int(1)),
                ],
                vec![(Dtype::I64, vec![2., 2.])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Reduce);

#[cfg(test)]
mod tests;
