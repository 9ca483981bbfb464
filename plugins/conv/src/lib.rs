//! The `conv` plugin: Conv, ConvTranspose (1-D, 2-D, 3-D, groups, dilations, auto_pad,
//! output_padding / output_shape), MaxPool (with Indices), AveragePool, LpPool and the global
//! pools, on f32, f16, bf16 (computing in f32) and f64; MaxPool also on i8 and u8.
//!
//! [`plan`] checks attributes and shapes and packs one launch per op (pointers then a
//! [`geom::Geom`]); [`cuda`] renders the module `conv_{dtype}` (direct kernels, one thread per
//! output element); [`cpu`] runs the same entry points on the CPU (Conv as im2col + a blocked
//! GEMM, ConvTranspose as GEMM + col2im, pools window by window). [`quant`]: ConvInteger and
//! QLinearConv (u8/i8) on the same geometry; [`deform`]: DeformConv (2-D).

pub mod cpu;
pub mod cuda;
pub mod deform;
pub mod fused;
pub mod geom;
pub mod plan;
pub mod quant;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, OpSignature,
    PlanRequestExt, Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

/// The ops this plugin serves (ONNX spelling).
pub const OPS: [&str; 11] = [
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "LpPool",
    "GlobalMaxPool",
    "GlobalAveragePool",
    "GlobalLpPool",
    "ConvInteger",
    "QLinearConv",
    "DeformConv",
];

/// The module holding every entry point of `dt`.
pub fn module_id(dt: Dtype) -> String {
    format!("conv_{}", dtype::name(dt))
}

pub struct Conv;

impl Plugin for Conv {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info(
            "conv",
            env!("CARGO_PKG_VERSION"),
            OPS.iter().chain(&fused::OPS).copied(),
        )
    }

    fn plan_ext(request: &PlanRequestExt) -> Result<OpPlan, OpError> {
        plan::plan(request)
    }

    fn signatures() -> Vec<OpSignature> {
        umd_sdk::fused::signatures(&fused::OPS)
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let is = |names: &[&str]| names.iter().any(|n| op.eq_ignore_ascii_case(n));
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        if is(&["Conv", "ConvTranspose", "DeformConv"]) || fused::OPS.iter().any(|f| is(&[f])) {
            match dt {
                Dtype::F32 => t(1e-4, 1e-4),
                Dtype::F16 => t(2e-2, 2e-2),
                Dtype::Bf16 => t(5e-2, 5e-2),
                Dtype::F64 => t(1e-10, 1e-10),
                _ => None,
            }
        } else if is(&["AveragePool", "GlobalAveragePool", "LpPool", "GlobalLpPool"]) {
            match dt {
                // absolute 1e-4: the ONNX node test averagepool_2d_ceil_last_window_starts_on_pad
                // gives its expected values rounded to 4 decimals
                Dtype::F32 => t(1e-4, 1e-4),
                Dtype::F16 => t(2e-3, 2e-3),
                Dtype::Bf16 => t(1e-2, 1e-2),
                Dtype::F64 => t(1e-12, 1e-12),
                _ => None,
            }
        } else {
            None
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        if module_id == quant::MODULE {
            return Ok(quant::module());
        }
        if let Some(dt) = deform::module_dtype(module_id) {
            return Ok(deform::module(dt));
        }
        let dt = dtype::of_module(module_id, "conv_", &plan::MAX_DTYPES)?;
        Ok(cuda::module(dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        if call.entry_point.starts_with("conv_fused_")
            && cpu::inplace::splittable(&call.entry_point)
        {
            return umd_sdk::kernel::run_cpu_in_memory::<Conv>(call);
        }
        if quant::is_entry(&call.entry_point) {
            return quant::run_cpu(&call);
        }
        if let Some(dt) = deform::module_dtype(&call.module_id) {
            return deform::run_cpu(&call, dt);
        }
        cpu::run(&call)
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
        let ints = |name: &str, v: &[i64]| Attribute {
            name: name.into(),
            value: AttrValue::Ints(v.to_vec()),
        };
        let nine: Vec<f64> = (0..9).map(f64::from).collect();
        vec![
            umd_sdk::test_case(
                "conv 3x3 by 2x2 ones",
                "Conv",
                vec![
                    (t(&[1, 1, 3, 3], Dtype::F32), nine.clone()),
                    (t(&[1, 1, 2, 2], Dtype::F32), vec![1.0; 4]),
                ],
                vec![(Dtype::F32, vec![8., 12., 20., 24.])],
                1e-6,
            ),
            umd_sdk::test_case(
                "convtranspose 1-D, two output channels",
                "ConvTranspose",
                vec![
                    (t(&[1, 1, 3], Dtype::F32), vec![0., 1., 2.]),
                    (t(&[1, 2, 3], Dtype::F32), vec![1.0; 6]),
                ],
                vec![(Dtype::F32, vec![0., 1., 3., 3., 2., 0., 1., 3., 3., 2.])],
                1e-6,
            ),
            umd_sdk::test_case_with(
                "maxpool 2x2 stride 2",
                "MaxPool",
                vec![(
                    t(&[1, 1, 4, 4], Dtype::F32),
                    (1..=16).map(f64::from).collect(),
                )],
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
                vec![(Dtype::F32, vec![6., 8., 14., 16.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "averagepool 3x3 pads 1 excludes the padding",
                "AveragePool",
                vec![(
                    t(&[1, 1, 3, 3], Dtype::F32),
                    (1..=9).map(f64::from).collect(),
                )],
                vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
                vec![(Dtype::F32, vec![3., 3.5, 4., 4.5, 5., 5.5, 6., 6.5, 7.])],
                1e-6,
            ),
            // the fused chain: conv [8, 12, 20, 24] → BN (scale 2, B 1, mean 10, var 3, ε 1:
            // y - 9) → + [0, -5, 0, 0] → Relu
            umd_sdk::test_case_with(
                "conv, batchnormalization, add and relu fused",
                "Conv.BatchNormalization.Add.Relu",
                vec![
                    (t(&[1, 1, 3, 3], Dtype::F32), nine.clone()),
                    (t(&[1, 1, 2, 2], Dtype::F32), vec![1.0; 4]),
                    (t(&[1], Dtype::F32), vec![2.0]),
                    (t(&[1], Dtype::F32), vec![1.0]),
                    (t(&[1], Dtype::F32), vec![10.0]),
                    (t(&[1], Dtype::F32), vec![3.0]),
                    (t(&[1, 1, 2, 2], Dtype::F32), vec![0., -5., 0., 0.]),
                ],
                [
                    ("0.inputs", 2),
                    ("1.inputs", 4),
                    ("1.link", 0),
                    ("2.inputs", 1),
                ]
                .into_iter()
                .chain([("2.link", 0), ("3.inputs", 0), ("3.link", 0)])
                .map(|(n, v)| Attribute {
                    name: n.into(),
                    value: AttrValue::Int(v),
                })
                .chain([Attribute {
                    name: "1.epsilon".into(),
                    value: AttrValue::Float(1.0),
                }])
                .collect(),
                vec![(Dtype::F32, vec![0., 0., 11., 15.])],
                1e-6,
            ),
            // conv [8, 12, 20, 24] → BN (y - 9) → × 2 → + [-3] → Relu: [0, 3, 19, 27]
            umd_sdk::test_case_with(
                "conv, batchnormalization, per-channel mul and add and relu fused",
                "Conv.BatchNormalization.Mul.Add.Relu",
                vec![
                    (t(&[1, 1, 3, 3], Dtype::F32), nine.clone()),
                    (t(&[1, 1, 2, 2], Dtype::F32), vec![1.0; 4]),
                    (t(&[1], Dtype::F32), vec![2.0]),
                    (t(&[1], Dtype::F32), vec![1.0]),
                    (t(&[1], Dtype::F32), vec![10.0]),
                    (t(&[1], Dtype::F32), vec![3.0]),
                    (t(&[1, 1, 1], Dtype::F32), vec![2.0]),
                    (t(&[1, 1, 1, 1], Dtype::F32), vec![-3.0]),
                ],
                [
                    ("0.inputs", 2),
                    ("1.inputs", 4),
                    ("1.link", 0),
                    ("2.inputs", 1),
                ]
                .into_iter()
                .chain([("2.link", 0), ("3.inputs", 1), ("3.link", 1)])
                .chain([("4.inputs", 0), ("4.link", 0)])
                .map(|(n, v)| Attribute {
                    name: n.into(),
                    value: AttrValue::Int(v),
                })
                .chain([Attribute {
                    name: "1.epsilon".into(),
                    value: AttrValue::Float(1.0),
                }])
                .collect(),
                vec![(Dtype::F32, vec![0., 3., 19., 27.])],
                1e-6,
            ),
            // conv [8, 12, 20, 24] → BN (y - 9) → Clip(0, 6) (ReLU6): [0, 3, 6, 6]
            umd_sdk::test_case_with(
                "conv, batchnormalization and clip fused",
                "Conv.BatchNormalization.Clip",
                vec![
                    (t(&[1, 1, 3, 3], Dtype::F32), nine.clone()),
                    (t(&[1, 1, 2, 2], Dtype::F32), vec![1.0; 4]),
                    (t(&[1], Dtype::F32), vec![2.0]),
                    (t(&[1], Dtype::F32), vec![1.0]),
                    (t(&[1], Dtype::F32), vec![10.0]),
                    (t(&[1], Dtype::F32), vec![3.0]),
                    (t(&[], Dtype::F32), vec![0.0]),
                    (t(&[], Dtype::F32), vec![6.0]),
                ],
                [
                    ("0.inputs", 2),
                    ("1.inputs", 4),
                    ("1.link", 0),
                    ("2.inputs", 2),
                    ("2.link", 0),
                ]
                .into_iter()
                .map(|(n, v)| Attribute {
                    name: n.into(),
                    value: AttrValue::Int(v),
                })
                .chain([Attribute {
                    name: "1.epsilon".into(),
                    value: AttrValue::Float(1.0),
                }])
                .collect(),
                vec![(Dtype::F32, vec![0., 3., 6., 6.])],
                1e-6,
            ),
            umd_sdk::test_case(
                "convinteger u8 with zero points",
                "ConvInteger",
                vec![
                    (
                        t(&[1, 1, 3, 3], Dtype::U8),
                        (2..11).map(f64::from).collect(),
                    ),
                    (t(&[1, 1, 2, 2], Dtype::U8), vec![2.0; 4]),
                    (t(&[], Dtype::U8), vec![1.0]),
                    (t(&[1], Dtype::U8), vec![1.0]),
                ],
                vec![(Dtype::I32, vec![12., 16., 24., 28.])],
                0.0,
            ),
            umd_sdk::test_case(
                "globalaveragepool f16",
                "GlobalAveragePool",
                vec![(
                    t(&[1, 2, 2, 2], Dtype::F16),
                    vec![1., 2., 3., 4., -1., -1., 0., 0.],
                )],
                vec![(Dtype::F16, vec![2.5, -0.5])],
                1e-3,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Conv);

#[cfg(test)]
mod tests;
