//! The `norm` plugin: Softmax, LogSoftmax, Hardmax, LayerNormalization, BatchNormalization
//! (inference and training mode), InstanceNormalization, GroupNormalization, LRN and
//! MeanVarianceNormalization, RMSNormalization and LpNormalization on f32, f16, bf16 (computed in f32 on the GPU) and f64.
//!
//! Every op is planned over one of a few views of its input (see [`plan`]): an axis view
//! `(outer, len, inner)` whose groups are the `outer * inner` strided rows of `len` elements
//! (Softmax family, LayerNorm, Instance/GroupNorm), a channel view whose groups are the `len`
//! channels over `outer * inner` elements each (BatchNorm training, MVN over N and spatial axes),
//! or an element-wise pass (BatchNorm inference, LRN). [`softmax`], [`stats`] and [`pointwise`]
//! plan the ops; [`cuda`] renders one module per dtype; [`cpu`] runs the same parameter blocks.

mod cpu;
mod cuda;
pub mod fused;
mod plan;
mod pointwise;
mod softmax;
mod stats;

use umd_sdk::kernel::Memory;
use umd_sdk::{
    CpuCall, CpuWrite, Dtype, KernelCall, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin,
    PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 11] = [
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "LayerNormalization",
    "BatchNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "LRN",
    "MeanVarianceNormalization",
    "RMSNormalization",
    "LpNormalization",
];
/// Dtypes every op serves.
pub const DTYPES: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

pub struct Norm;

impl Plugin for Norm {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info(
            "norm",
            env!("CARGO_PKG_VERSION"),
            OPS.iter().chain(&fused::OPS).copied(),
        )
    }

    fn signatures() -> Vec<umd_sdk::OpSignature> {
        umd_sdk::fused::signatures(&fused::OPS)
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        // a chain is named by its op alone (self-test cases carry no domain)
        if req.domain == umd_sdk::fused::DOMAIN || fused::OPS.contains(&req.op.as_str()) {
            return fused::plan(req);
        }
        let op = OPS
            .iter()
            .find(|o| req.op.eq_ignore_ascii_case(o))
            .ok_or_else(|| umd_sdk::unsupported_op_ext(req))?;
        match *op {
            "Softmax" | "LogSoftmax" | "Hardmax" => softmax::plan(req, op),
            "LayerNormalization" => stats::plan_layer_norm(req),
            "InstanceNormalization" => stats::plan_instance_norm(req),
            "GroupNormalization" => stats::plan_group_norm(req),
            "MeanVarianceNormalization" => stats::plan_mvn(req),
            "RMSNormalization" => stats::plan_rms_norm(req),
            "LpNormalization" => stats::plan_lp_norm(req),
            "BatchNormalization" => stats::plan_batch_norm(req),
            _ => pointwise::plan_lrn(req),
        }
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        if op.eq_ignore_ascii_case("Hardmax") {
            return t(0.0, 0.0);
        }
        match dt {
            Dtype::F32 => t(1e-5, 1e-4),
            Dtype::F16 => t(2e-3, 2e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-9, 1e-9),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let dt = dtype::of_module(module_id, "norm_", &DTYPES)?;
        Ok(cuda::module(dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::inplace::run_cpu(call)
    }

    fn run_kernel(call: &KernelCall, memory: &mut dyn Memory) -> Result<(), OpError> {
        cpu::inplace::run_kernel(call, memory)
    }

    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        cpu::inplace::splittable(entry_point)
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
                "softmax of a row",
                "Softmax",
                vec![(t(&[1, 3], Dtype::F32), vec![-1., 0., 1.])],
                vec![(Dtype::F32, vec![0.09003057, 0.24472847, 0.66524096])],
                1e-6,
            ),
            umd_sdk::test_case_with(
                "hardmax along axis 0 in f16",
                "Hardmax",
                vec![(t(&[2, 2], Dtype::F16), vec![1., 5., 3., 2.])],
                vec![attr("axis", Int(0))],
                vec![(Dtype::F16, vec![0., 1., 1., 0.])],
                0.0,
            ),
            umd_sdk::test_case(
                "layer norm of two rows",
                "LayerNormalization",
                vec![
                    (t(&[2, 2], Dtype::F32), vec![1., 3., 2., 2.]),
                    (t(&[2], Dtype::F32), vec![2., 1.]),
                    (t(&[2], Dtype::F32), vec![0., 10.]),
                ],
                // row 0: mean 2, var 1 -> (-1, 1)/sqrt(1+1e-5); row 1: var 0 -> the bias
                vec![(Dtype::F32, vec![-1.99999, 10.999995, 0., 10.])],
                1e-5,
            ),
            umd_sdk::test_case(
                "batch norm inference",
                "BatchNormalization",
                vec![
                    (t(&[1, 2, 2], Dtype::F32), vec![1., 2., 3., 4.]),
                    (t(&[2], Dtype::F32), vec![1., 2.]),
                    (t(&[2], Dtype::F32), vec![0., 1.]),
                    (t(&[2], Dtype::F32), vec![1., 3.]),
                    (t(&[2], Dtype::F32), vec![4., 1.]),
                ],
                // c0: (x-1)/sqrt(4+1e-5); c1: 2(x-3)/sqrt(1+1e-5)+1
                vec![(Dtype::F32, vec![0., 0.49999937, 1., 2.99999])],
                1e-5,
            ),
            // the chain: the batch norm above, × [2, -1] per channel, + [-0.5, 0.5], Relu
            umd_sdk::test_case_with(
                "batch norm, mul, add and relu fused",
                "BatchNormalization.Mul.Add.Relu",
                vec![
                    (t(&[1, 2, 2], Dtype::F32), vec![1., 2., 3., 4.]),
                    (t(&[2], Dtype::F32), vec![1., 2.]),
                    (t(&[2], Dtype::F32), vec![0., 1.]),
                    (t(&[2], Dtype::F32), vec![1., 3.]),
                    (t(&[2], Dtype::F32), vec![4., 1.]),
                    (t(&[2, 1], Dtype::F32), vec![2., -1.]),
                    (t(&[1, 2, 1], Dtype::F32), vec![-0.5, 0.5]),
                ],
                [
                    ("0.inputs", 5),
                    ("1.inputs", 1),
                    ("1.link", 0),
                    ("2.inputs", 1),
                ]
                .into_iter()
                .chain([("2.link", 1), ("3.inputs", 0), ("3.link", 0)])
                .map(|(n, v)| attr(n, Int(v)))
                .collect(),
                vec![(Dtype::F32, vec![0., 0.49999874, 0., 0.])],
                1e-5,
            ),
            umd_sdk::test_case(
                "rms norm of a row",
                "RMSNormalization",
                vec![
                    (t(&[1, 2], Dtype::F32), vec![3., 4.]),
                    (t(&[2], Dtype::F32), vec![1., 2.]),
                ],
                // mean of squares 12.5: (3, 4) / sqrt(12.5 + 1e-5) * (1, 2)
                vec![(Dtype::F32, vec![0.8485278, 2.2627408])],
                1e-6,
            ),
            umd_sdk::test_case(
                "l2 norm of a row",
                "LpNormalization",
                vec![(t(&[1, 2], Dtype::F32), vec![3., 4.])],
                vec![(Dtype::F32, vec![0.6, 0.8])],
                1e-6,
            ),
            umd_sdk::test_case_with(
                "lrn across three channels",
                "LRN",
                vec![(t(&[1, 3, 1, 1], Dtype::F32), vec![1., 2., 3.])],
                vec![
                    attr("size", Int(3)),
                    attr("alpha", Float(3.0)),
                    attr("beta", Float(1.0)),
                ],
                // window sums of squares 5, 14, 13; y = x / (1 + 3/3 * sum)
                vec![(Dtype::F32, vec![1. / 6., 2. / 15., 3. / 14.])],
                1e-6,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Norm);

#[cfg(test)]
mod tests;
