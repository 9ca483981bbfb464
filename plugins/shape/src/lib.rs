//! The `shape` plugin: ONNX data-movement and shape ops on every umd dtype.
//!
//! Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Expand, Identity, Tile, Concat, Split and
//! Slice plan into one strided-copy kernel ([`copy`]) dispatched on element size; Shape, Size,
//! Constant and ConstantOfShape write values known when planning ([`consts`]); Range, EyeLike,
//! Trilu and Cast/CastLike have their own kernels. Files: [`common`] (planning helpers),
//! [`layout`], [`window`], [`consts`], [`tri`], [`cast`] (planning per op group), [`f8`] (8-bit float conversions), [`packed`] (casts of the
//! packed sub-byte types), [`cuda`] (CUDA
//! C modules), [`cpu`] (the same kernels on the CPU).

pub mod cast;

pub mod common;
pub mod consts;
pub mod copy;
pub mod cpu;
pub mod cuda;
pub mod f8;
pub mod layout;
pub mod packed;
pub mod tri;
pub mod window;

/// The ops that take or produce the packed sub-byte dtypes of ABI 1.4.
/// The views, which move a string tensor (ABI 1.5) as its bytes ([`layout::plain_copy`]).
const STRING_OPS: [&str; 5] = ["Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"];

const PACKED_OPS: [&str; 7] = [
    "Cast",
    "CastLike",
    "Identity",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
];

use umd_sdk::kernel::Memory;
use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, KernelCall, ModuleSource, OpError, OpPlan,
    OpSignature, PlanRequestExt, Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance,
    dtype,
};

type Planner = fn(&PlanRequestExt) -> Result<OpPlan, OpError>;

/// Every op, in ONNX spelling, with its planner and the inputs whose values it needs.
pub const OPS: [(&str, Planner, &[u32]); 20] = [
    ("Transpose", layout::transpose, &[]),
    ("Reshape", layout::reshape, &[1]),
    ("Flatten", layout::flatten, &[]),
    ("Squeeze", layout::squeeze, &[1]),
    ("Unsqueeze", layout::unsqueeze, &[1]),
    ("Expand", layout::expand, &[1]),
    ("Identity", layout::identity, &[]),
    ("Tile", layout::tile, &[1]),
    ("Cast", cast::cast, &[]),
    ("CastLike", cast::cast_like, &[]),
    ("ConstantOfShape", consts::constant_of_shape, &[0]),
    ("Constant", consts::constant, &[]),
    ("Range", consts::range, &[0, 1, 2]),
    ("Shape", consts::shape_op, &[]),
    ("Size", consts::size, &[]),
    ("Concat", window::concat, &[]),
    ("Split", window::split, &[1]),
    ("Slice", window::slice, &[1, 2, 3, 4]),
    ("EyeLike", tri::eye_like, &[]),
    ("Trilu", tri::trilu, &[1]),
];

pub struct Shape;

impl Plugin for Shape {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info(
            "shape",
            env!("CARGO_PKG_VERSION"),
            OPS.iter().map(|(name, _, _)| *name),
        )
    }

    /// Cast/CastLike convert to and from the packed types; the views (Identity, Reshape,
    /// Flatten, Squeeze, Unsqueeze) copy their bytes.
    fn serves_packed(op: &str) -> bool {
        PACKED_OPS.iter().any(|o| op.eq_ignore_ascii_case(o))
    }

    fn serves_strings(op: &str) -> bool {
        STRING_OPS.iter().any(|o| op.eq_ignore_ascii_case(o))
    }

    fn signatures() -> Vec<OpSignature> {
        OPS.iter()
            .filter(|(_, _, c)| !c.is_empty())
            .map(|(name, _, c)| umd_sdk::signature(name, c))
            .collect()
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        if !req.domain.is_empty() && req.domain != "ai.onnx" {
            return Err(umd_sdk::unsupported_op_ext(req));
        }
        match OPS
            .iter()
            .find(|(name, _, _)| req.op.eq_ignore_ascii_case(name))
        {
            Some((_, planner, _)) => planner(req),
            None => Err(umd_sdk::unsupported_op_ext(req)),
        }
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        // Moving bytes is exact. Range's floats may differ from numpy's arange by rounding;
        // Cast keeps the host's default (float -> integer out of range is not defined by ONNX).
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        if ["Cast", "CastLike"]
            .iter()
            .any(|c| op.eq_ignore_ascii_case(c))
        {
            return None;
        }
        if !op.eq_ignore_ascii_case("Range") {
            return t(0.0, 0.0);
        }
        match dt {
            Dtype::F32 => t(1e-6, 1e-6),
            Dtype::F16 => t(1e-3, 1e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-12, 1e-12),
            _ => t(0.0, 0.0),
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        match module_id {
            copy::MOVE_MODULE => Ok(cuda::move_module()),
            consts::RANGE_MODULE => Ok(cuda::range_module()),
            _ => module_id
                .strip_prefix("shape_cast_")
                .and_then(dtype::from_name)
                .map(cuda::cast_module)
                .ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`"))),
        }
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::run_cpu(call)
    }

    fn run_kernel(call: &KernelCall, memory: &mut dyn Memory) -> Result<(), OpError> {
        cpu::run_kernel(call, memory)
    }

    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        cpu::splittable(entry_point)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        let a = |name: &str, value| Attribute {
            name: name.into(),
            value,
        };
        vec![
            umd_sdk::test_case(
                "transpose 2x3",
                "Transpose",
                vec![(t(&[2, 3], Dtype::F32), vec![1., 2., 3., 4., 5., 6.])],
                vec![(Dtype::F32, vec![1., 4., 2., 5., 3., 6.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "concat i64 on axis 1 with an empty input",
                "Concat",
                vec![
                    (t(&[2, 1], Dtype::I64), vec![1., 2.]),
                    (t(&[2, 0], Dtype::I64), vec![]),
                    (t(&[2, 2], Dtype::I64), vec![3., 4., 5., 6.]),
                ],
                vec![a("axis", AttrValue::Int(-1))],
                vec![(Dtype::I64, vec![1., 3., 4., 2., 5., 6.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "cast f32 to i32 truncates toward zero",
                "Cast",
                vec![(t(&[4], Dtype::F32), vec![1.7, -1.7, 0.0, 3.0])],
                vec![a("to", AttrValue::Int(6))],
                vec![(Dtype::I32, vec![1., -1., 0., 3.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "split bf16 into 2 (num_outputs)",
                "Split",
                vec![(t(&[2, 2], Dtype::Bf16), vec![0.5, 1.5, 2.5, 3.5])],
                vec![a("num_outputs", AttrValue::Int(2))],
                vec![(Dtype::Bf16, vec![0.5, 1.5]), (Dtype::Bf16, vec![2.5, 3.5])],
                0.0,
            ),
            umd_sdk::test_case(
                "castlike f16 to u8",
                "CastLike",
                vec![
                    (t(&[3], Dtype::F16), vec![2.5, 255.0, 0.0]),
                    (t(&[1], Dtype::U8), vec![0.]),
                ],
                vec![(Dtype::U8, vec![2., 255., 0.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "constant value_ints",
                "Constant",
                vec![],
                vec![a("value_ints", AttrValue::Ints(vec![3, -1, 4]))],
                vec![(Dtype::I64, vec![3., -1., 4.])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Shape);

#[cfg(test)]
mod tests;
