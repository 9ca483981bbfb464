//! The `text` plugin: ONNX string-tensor operators (ABI 1.5 string tensors).
//!
//! The op semantics are plain Rust over owned tensors ([`ops`]: [`ops::Tensor`], [`ops::Value`],
//! [`ops::run`]), with no dependency on the umd SDK or ABI; [`value`] converts values to and
//! from umd's bytes, [`wire`] is the call record a launch carries, [`plan`] the plan and the
//! CPU kernel.
//!
//! Served ops ([`ops::OPS`]): StringNormalizer, StringConcat, StringSplit, RegexFullMatch,
//! Equal (string inputs only), ai.onnx.ml LabelEncoder (whenever the input or the values are
//! strings), ai.onnx.ml CategoryMapper and Cast with a string on either side, ai.onnx.ml
//! ArrayFeatureExtractor and Gather of strings, com.microsoft Tokenizer. CPU device only.

pub mod ops;
pub mod plan;
pub mod value;
pub mod wire;

use umd_sdk::{
    CpuCall, CpuWrite, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin, PluginInfo, Target,
};

pub struct TextPlugin;

impl Plugin for TextPlugin {
    fn describe() -> PluginInfo {
        // `cuda` is listed so a CUDA request reaches `plan` and is declined with a message that
        // says why (instead of the host's bare "not supported for target").
        umd_sdk::plugin_info(
            "text",
            env!("CARGO_PKG_VERSION"),
            ops::OPS.iter().map(|(n, _)| *n),
        )
    }

    fn serves_strings(_op: &str) -> bool {
        true
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        plan::plan(req)
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        Err(OpError::UnsupportedTarget(format!(
            "module `{module_id}`: string ops run on the CPU device only (no CUDA kernel)"
        )))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        plan::run_cpu(&call)
    }
}

umd_sdk::export_plugin!(TextPlugin);

#[cfg(test)]
mod tests;
