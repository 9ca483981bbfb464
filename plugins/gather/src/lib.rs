//! The `gather` plugin: indexing and data-layout operators.
//!
//! Ops: Gather, GatherElements, GatherND, ScatterElements (and Scatter, its opset 9–10 name),
//! ScatterND, Pad, Resize (and Upsample), DepthToSpace, SpaceToDepth, OneHot. (Trilu is the shape
//! plugin's.)
//!
//! Data movement is dispatched on element size, so every dtype is served (all 18 of ABI 1.2's
//! `dtype-ext`, the 8-bit floats included); arithmetic (Scatter reductions, linear/cubic Resize,
//! OneHot's indices) on the numeric ones (floats but f8, and every integer type). Each op family
//! has one index-mapping core: the planner ([`gather`], [`scatter`], [`pad`], [`resize`],
//! [`layout`], [`onehot`]) packs shapes as fixed arrays into the parameter block, the CPU kernel
//! ([`inplace`], on [`resize_core`]'s math for Resize; Scatter* and OneHot whole-buffer, in their
//! files) computes source offsets directly, and the CUDA kernel ([`cuda`], [`cuda_resize`]) does
//! the same per output element.
//!
//! Out-of-range indices never read or write out of bounds: Gather* write a zero element,
//! Scatter* skip the update, OneHot writes `off`.

mod common;
mod cuda;
mod cuda_resize;
mod gather;
mod inplace;
mod layout;
mod onehot;
mod pad;
mod resize;
mod resize_core;
mod scatter;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, OpSignature,
    PlanRequestExt, Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

/// Every op served, in ONNX spelling.
pub const OPS: [&str; 12] = [
    "Gather",
    "GatherElements",
    "GatherND",
    "ScatterElements",
    "Scatter",
    "ScatterND",
    "Pad",
    "Resize",
    "Upsample",
    "DepthToSpace",
    "SpaceToDepth",
    "OneHot",
];

pub struct GatherPlugin;

impl Plugin for GatherPlugin {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("gather", env!("CARGO_PKG_VERSION"), OPS.iter().copied())
    }

    fn signatures() -> Vec<OpSignature> {
        vec![
            umd_sdk::signature("Pad", &[1, 3]),
            umd_sdk::signature("Resize", &[1, 2, 3]),
            umd_sdk::signature("Upsample", &[1]),
            umd_sdk::signature("OneHot", &[1]),
        ]
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        let op = OPS
            .iter()
            .find(|o| req.op.eq_ignore_ascii_case(o))
            .ok_or_else(|| umd_sdk::unsupported_op_ext(req))?;
        if !req.domain.is_empty() && req.domain != "ai.onnx" {
            return Err(umd_sdk::unsupported_op_ext(req));
        }
        match *op {
            "Gather" => gather::plan_gather(req),
            "GatherElements" => gather::plan_elements(req),
            "GatherND" => gather::plan_nd(req),
            "ScatterElements" | "Scatter" => scatter::plan_elements(req),
            "ScatterND" => scatter::plan_nd(req),
            "Pad" => pad::plan(req),
            "Resize" | "Upsample" => resize::plan(req),
            "DepthToSpace" => layout::plan_block(req, true),
            "SpaceToDepth" => layout::plan_block(req, false),
            _ => onehot::plan(req),
        }
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        let inexact = [
            "Resize",
            "Upsample",
            "ScatterElements",
            "ScatterND",
            "Scatter",
        ];
        if !inexact.iter().any(|o| op.eq_ignore_ascii_case(o)) {
            return None;
        }
        match dt {
            Dtype::F32 => t(1e-5, 1e-5),
            Dtype::F16 => t(1e-3, 1e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-12, 1e-12),
            // f64 rounding of an interpolated value can land on the other side of .5
            _ if op.eq_ignore_ascii_case("Resize") || op.eq_ignore_ascii_case("Upsample") => {
                t(1.0, 0.0)
            }
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        cuda::module(module_id)
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        inplace::run_cpu(call)
    }

    fn run_kernel(
        call: &umd_sdk::KernelCall,
        memory: &mut dyn umd_sdk::kernel::Memory,
    ) -> Result<(), OpError> {
        inplace::run_kernel(call, memory)
    }

    fn splittable(module_id: &str, entry_point: &str) -> bool {
        inplace::splittable(module_id, entry_point)
    }

    fn self_tests() -> Vec<TestCase> {
        self_tests()
    }
}

umd_sdk::export_plugin!(GatherPlugin);

/// `run-cpu` of the launches the in-place kernels do not serve ([`inplace`]): the scatter
/// launches of ScatterElements/ScatterND and OneHot, run whole on their module and entry point.
fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let (m, e) = (call.module_id.as_str(), call.entry_point.as_str());
    let unknown = || common::unknown_entry(m, e);
    let dt_of = |s: &str| dtype::from_name(s).ok_or_else(unknown);
    if let Some(ms) = m.strip_prefix("gather_move_s") {
        let (base, size) = common::split_size(e).ok_or_else(unknown)?;
        if ms != size.to_string() {
            return Err(unknown());
        }
        match base {
            "scatter_elements" | "scatter_nd" => scatter::run_move(call, base, size),
            _ => Err(unknown()),
        }
    } else if let Some(d) = m.strip_prefix("gather_scatter_") {
        scatter::run_reduce(call, dt_of(d)?)
    } else if let Some(d) = m.strip_prefix("gather_onehot_") {
        let (_, size) = common::split_size(e).ok_or_else(unknown)?;
        onehot::run_cpu(call, dt_of(d)?, size)
    } else {
        Err(unknown())
    }
}

/// Tiny hand-checked cases the host runs at load (no constant inputs: only attribute forms).
fn self_tests() -> Vec<TestCase> {
    let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
    let a = |name: &str, value| Attribute {
        name: name.into(),
        value,
    };
    vec![
        umd_sdk::test_case_with(
            "gather rows with a negative index",
            "Gather",
            vec![
                (t(&[3, 2], Dtype::F32), vec![1., 2., 3., 4., 5., 6.]),
                (t(&[2], Dtype::I64), vec![-1., 0.]),
            ],
            vec![a("axis", AttrValue::Int(0))],
            vec![(Dtype::F32, vec![5., 6., 1., 2.])],
            0.0,
        ),
        umd_sdk::test_case_with(
            "gather elements along axis 1",
            "GatherElements",
            vec![
                (t(&[2, 2], Dtype::I32), vec![1., 2., 3., 4.]),
                (t(&[2, 2], Dtype::I32), vec![0., 0., 1., 0.]),
            ],
            vec![a("axis", AttrValue::Int(1))],
            vec![(Dtype::I32, vec![1., 1., 4., 3.])],
            0.0,
        ),
        umd_sdk::test_case_with(
            "scatter elements adds duplicates",
            "ScatterElements",
            vec![
                (t(&[1, 5], Dtype::F32), vec![1., 2., 3., 4., 5.]),
                (t(&[1, 2], Dtype::I64), vec![1., 1.]),
                (t(&[1, 2], Dtype::F32), vec![1.5, 2.5]),
            ],
            vec![
                a("axis", AttrValue::Int(1)),
                a("reduction", AttrValue::Text("add".into())),
            ],
            vec![(Dtype::F32, vec![1., 6., 3., 4., 5.])],
            0.0,
        ),
        umd_sdk::test_case_with(
            "reflect pad (attribute form)",
            "Pad",
            vec![(t(&[1, 3], Dtype::I64), vec![1., 2., 3.])],
            vec![
                a("mode", AttrValue::Text("reflect".into())),
                a("pads", AttrValue::Ints(vec![0, 2, 0, 1])),
            ],
            vec![(Dtype::I64, vec![3., 2., 1., 2., 3., 2.])],
            0.0,
        ),
        umd_sdk::test_case_with(
            "nearest upsample of bf16 (scales attribute)",
            "Upsample",
            vec![(t(&[1, 2], Dtype::Bf16), vec![1.5, -2.0])],
            vec![a("scales", AttrValue::Floats(vec![1.0, 2.0]))],
            vec![(Dtype::Bf16, vec![1.5, 1.5, -2.0, -2.0])],
            0.0,
        ),
    ]
}

#[cfg(test)]
mod tests;
