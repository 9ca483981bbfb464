//! The `misc` plugin: the remaining common ONNX ops that fit no other family.
//!
//! - [`copy`]: Dropout (inference; training mode as the ONNX reference draws it, [`mt`]) and
//!   BitCast, byte copies on every dtype;
//! - [`layout`]: CenterCropPad, ReverseSequence, Compress, MaxUnpool (index maps, every dtype);
//! - [`window`]: HannWindow, HammingWindow, BlackmanWindow; [`mel`]: MelWeightMatrix;
//!   [`signal`]: DFT, STFT;
//! - [`einsum`]: Einsum, one loop nest over every label;
//! - [`col2im`]: Col2Im; [`det`]: Det; [`unique`]: Unique, NonZero (value-shaped outputs);
//! - [`nms`]: NonMaxSuppression (value-shaped output);
//! - [`grid`]: AffineGrid and GridSample (2-D and 3-D); [`roi`]: RoiAlign; [`roipool`]:
//!   MaxRoiPool;
//! - [`random`]: RandomUniform, RandomNormal and their `Like` forms, Bernoulli, Multinomial.
//!
//! Module ids are `misc_copy` and `misc_{family}_{dtype}`; entry points name their dtype, so the
//! CPU kernel is chosen once per launch.

pub mod col2im;
pub mod common;
pub mod copy;
pub mod det;
pub mod einsum;
pub mod fft;
pub mod grid;
pub mod layout;
pub mod mel;
pub mod mt;
pub mod nms;
pub mod random;
pub mod roi;
pub mod roipool;
pub mod signal;
pub mod unique;
pub mod window;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, OpSignature,
    PlanRequestExt, Plugin, PluginInfo, SourceLanguage, Target, TensorDesc, TestCase, Tolerance,
    signature,
};

pub struct Misc;

/// Every op this plugin serves, in ONNX spelling.
pub fn op_names() -> Vec<&'static str> {
    let mut v = vec![
        "Dropout",
        "BitCast",
        "Einsum",
        "AffineGrid",
        "GridSample",
        "DFT",
        "CenterCropPad",
        "ReverseSequence",
        "Col2Im",
        "Compress",
        "Det",
        "Unique",
        "NonZero",
        "MaxUnpool",
        "RoiAlign",
        "STFT",
        "NonMaxSuppression",
        "MelWeightMatrix",
        "RandomUniform",
        "RandomNormal",
        "RandomUniformLike",
        "RandomNormalLike",
        "Bernoulli",
        "Multinomial",
        "MaxRoiPool",
    ];
    v.extend(window::OPS.iter().map(|(n, _)| *n));
    v
}

impl Plugin for Misc {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("misc", env!("CARGO_PKG_VERSION"), op_names())
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        let op = req.op.as_str();
        let is = |n: &str| op.eq_ignore_ascii_case(n);
        if is("Dropout") {
            copy::plan_dropout(req)
        } else if is("BitCast") {
            copy::plan_bitcast(req)
        } else if is("Einsum") {
            einsum::plan(req)
        } else if is("AffineGrid") {
            grid::plan_affine(req)
        } else if is("GridSample") {
            grid::plan_sample(req)
        } else if is("CenterCropPad") {
            layout::plan_center_crop_pad(req)
        } else if is("ReverseSequence") {
            layout::plan_reverse_sequence(req)
        } else if is("Unique") {
            unique::plan_unique(req)
        } else if is("NonMaxSuppression") {
            nms::plan(req)
        } else if is("NonZero") {
            unique::plan_nonzero(req)
        } else if is("STFT") {
            signal::plan_stft(req)
        } else if is("RoiAlign") {
            roi::plan(req)
        } else if is("MaxRoiPool") {
            roipool::plan(req)
        } else if is("MaxUnpool") {
            layout::plan_max_unpool(req)
        } else if is("Det") {
            det::plan(req)
        } else if is("Compress") {
            layout::plan_compress(req)
        } else if is("Col2Im") {
            col2im::plan(req)
        } else if is("MelWeightMatrix") {
            mel::plan(req)
        } else if is("DFT") {
            signal::plan(req)
        } else if op.starts_with("Random") || is("Bernoulli") || is("Multinomial") {
            random::plan(req)
        } else if let Some((_, k)) = window::OPS.iter().find(|(n, _)| is(n)) {
            window::plan(req, *k)
        } else {
            Err(umd_sdk::unsupported_op_ext(req))
        }
    }

    fn signatures() -> Vec<OpSignature> {
        // Dropout: ratio and training_mode shape the plan (training mode only); the windows'
        // size; AffineGrid's size; DFT's dft_length and axis.
        let mut v = vec![
            signature("Dropout", &[1, 2]),
            signature("AffineGrid", &[1]),
            signature("DFT", &[1, 2]),
            signature("STFT", &[1, 3]),
            signature("CenterCropPad", &[1]),
            signature("Col2Im", &[1, 2]),
            // the condition's count of true values is the output's extent
            signature("Compress", &[1]),
            // the data itself: the unique / non-zero count is the output's extent
            signature("Unique", &[0]),
            signature("NonZero", &[0]),
            // boxes and scores: the selected count is the output's extent
            signature("NonMaxSuppression", &[0, 1, 2, 3, 4]),
            signature("MaxUnpool", &[2]),
            // every input: they size the output and its triangles
            signature("MelWeightMatrix", &[0, 1, 2, 3, 4]),
        ];
        v.extend(window::OPS.iter().map(|(n, _)| signature(n, &[0])));
        v
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let is = |n: &str| op.eq_ignore_ascii_case(n);
        if !(is("Einsum")
            || is("AffineGrid")
            || is("GridSample")
            || is("DFT")
            || is("Col2Im")
            || is("Det")
            || is("RoiAlign")
            || is("STFT")
            || is("MelWeightMatrix")
            || op.ends_with("Window"))
        {
            return None;
        }
        let t = |a: f64| {
            Some(Tolerance {
                absolute: a,
                relative: a,
            })
        };
        match dt {
            Dtype::F32 => t(1e-4),
            Dtype::F16 => t(1e-2),
            Dtype::Bf16 => t(2e-2),
            Dtype::F64 => t(1e-10),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let unknown = || OpError::internal(format!("unknown module `{module_id}`"));
        let (family, dt) = common::parse_module(module_id).ok_or_else(unknown)?;
        let (code, entry_points) = match (family, dt) {
            ("copy", None) => copy::cuda(),
            ("dropout", Some(dt)) if common::FLOATS.contains(&dt) => mt::cuda(dt)?,
            ("window", Some(dt)) if window::OUT.contains(&dt) => window::cuda(dt)?,
            ("mel", Some(dt)) if window::OUT.contains(&dt) => mel::cuda(dt)?,
            ("einsum", Some(dt)) if einsum::DTYPES.contains(&dt) => einsum::cuda(dt)?,
            ("grid", Some(dt)) if common::FLOATS.contains(&dt) => grid::cuda(dt)?,
            ("dft", Some(dt)) if common::FLOATS.contains(&dt) => signal::cuda(dt)?,
            ("col2im", Some(dt)) if common::FLOATS.contains(&dt) => col2im::cuda(dt)?,
            ("det", Some(dt)) if common::FLOATS.contains(&dt) => det::cuda(dt)?,
            ("roi", Some(dt)) if common::FLOATS.contains(&dt) => roi::cuda(dt)?,
            ("roipool", Some(dt)) if common::FLOATS.contains(&dt) => roipool::cuda(dt)?,
            ("unique", Some(dt)) if unique::DTYPES.contains(&dt) => unique::cuda(dt)?,
            ("nms", Some(dt)) if common::FLOATS.contains(&dt) => nms::cuda(dt)?,
            ("random", Some(dt)) if common::FLOATS.contains(&dt) => random::cuda(dt)?,
            _ => return Err(unknown()),
        };
        Ok(ModuleSource {
            language: SourceLanguage::CudaC,
            code,
            entry_points,
            // no fused multiply-adds: the CPU kernels round each product
            options: vec!["--std=c++17".into(), "--fmad=false".into()],
        })
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        let unknown = || OpError::internal(format!("unknown module `{}`", call.module_id));
        let (family, dt) = common::parse_module(&call.module_id).ok_or_else(unknown)?;
        match (family, dt) {
            ("copy", None) => copy::run_cpu(&call),
            ("dropout", Some(dt)) => mt::run_cpu(&call, dt),
            ("window", Some(dt)) => window::run_cpu(&call, dt),
            ("mel", Some(dt)) => mel::run_cpu(&call, dt),
            ("einsum", Some(dt)) => einsum::run_cpu(&call, dt),
            ("grid", Some(dt)) => grid::run_cpu(&call, dt),
            ("dft", Some(dt)) => signal::run_cpu(&call, dt),
            ("col2im", Some(dt)) => col2im::run_cpu(&call, dt),
            ("det", Some(dt)) => det::run_cpu(&call, dt),
            ("roi", Some(dt)) => roi::run_cpu(&call, dt),
            ("roipool", Some(dt)) => roipool::run_cpu(&call, dt),
            ("unique", Some(dt)) => unique::run_cpu(&call, dt),
            ("nms", Some(dt)) => nms::run_cpu(&call, dt),
            ("random", Some(dt)) => random::run_cpu(&call, dt),
            _ => Err(unknown()),
        }
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        let a = |name: &str, value| Attribute {
            name: name.into(),
            value,
        };
        vec![
            umd_sdk::test_case(
                "dropout in inference is the identity",
                "Dropout",
                vec![(t(&[3], Dtype::F32), vec![1., -2., 3.])],
                vec![(Dtype::F32, vec![1., -2., 3.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "bitcast f32 to i32",
                "BitCast",
                vec![(t(&[2], Dtype::F32), vec![1.0, -0.0])],
                vec![a("to", AttrValue::Int(6))],
                vec![(Dtype::I32, vec![1_065_353_216.0, -2_147_483_648.0])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "max roi pool, one bin",
                "MaxRoiPool",
                vec![
                    (t(&[1, 1, 2, 2], Dtype::F32), vec![1., 2., 3., 4.]),
                    (t(&[1, 5], Dtype::F32), vec![0., 0., 0., 1., 1.]),
                ],
                vec![a("pooled_shape", AttrValue::Ints(vec![1, 1]))],
                vec![(Dtype::F32, vec![4.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "einsum matmul",
                "Einsum",
                vec![
                    (t(&[2, 2], Dtype::F32), vec![1., 2., 3., 4.]),
                    (t(&[2, 2], Dtype::F32), vec![5., 6., 7., 8.]),
                ],
                vec![a("equation", AttrValue::Text("ij,jk->ik".into()))],
                vec![(Dtype::F32, vec![19., 22., 43., 50.])],
                1e-6,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Misc);

#[cfg(test)]
mod tests;
