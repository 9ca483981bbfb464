//! The `attention` plugin: Attention (opsets 23–25: 3-D and 4-D Q/K/V, grouped-query heads,
//! `scale`, `is_causal`, boolean or additive `attn_mask`, past/present key-value caches,
//! `softcap`, `qk_matmul_output_mode` 0–3, `softmax_precision`, `nonpad_kv_seqlen`, and the
//! opset-25 sliding window), FlexAttention (`ai.onnx.preview`; with `score_mod`/`prob_mod` as an expansion, [`flex`]),
//! RotaryEmbedding (opset 23), and the opset-27 LinearAttention
//! (linear, gated, delta and gated-delta recurrences), CausalConvWithState and the opset-28
//! SwiGLU on f32, f16, bf16 (computed in f32) and f64; and TensorScatter (opset 24, the KV-cache
//! update) on every dtype.
//!
//! [`attention`], [`rotary`], [`linear`], [`conv`] and [`swiglu`] plan the ops (one launch
//! each); [`cuda`] renders one module per dtype holding every float kernel; [`cpu`] (and the CPU
//! halves of [`linear`], [`conv`] and [`swiglu`]) runs the same parameter blocks on the CPU.
//! [`scatter`] (TensorScatter) moves bytes: its own dtype-independent module, plan and CPU kernel.

mod attention;
mod conv;
mod cpu;
mod cuda;
mod flex;
mod linear;
mod rotary;
mod scatter;
mod swiglu;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 7] = [
    "Attention",
    "FlexAttention",
    "RotaryEmbedding",
    "LinearAttention",
    "CausalConvWithState",
    "TensorScatter",
    "SwiGLU",
];
/// Dtypes every op serves.
pub const DTYPES: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

/// The module every launch of dtype `dt` lives in.
pub fn module_id(dt: Dtype) -> String {
    format!("attention_{}", dtype::name(dt))
}

/// The dtype of input `slot` (which must be present), checked to be a served float dtype.
pub fn float_input(req: &PlanRequestExt, slot: usize) -> Result<(&TensorDesc, Dtype), OpError> {
    let x = req.required(slot)?;
    if !DTYPES.contains(&x.dtype) {
        return Err(OpError::dtype(format!(
            "{}: input `{}` is {}; served dtypes are f32, f16, bf16 and f64",
            req.op,
            x.name,
            dtype::name(x.dtype)
        )));
    }
    umd_sdk::shape::byte_size(&x.shape, x.dtype)?;
    Ok((x, x.dtype))
}

/// Input `slot` when present, checked to have dtype `dt`.
pub fn same_dtype(
    req: &PlanRequestExt,
    slot: usize,
    dt: Dtype,
) -> Result<Option<&TensorDesc>, OpError> {
    let Some(t) = req.input(slot) else {
        return Ok(None);
    };
    if t.dtype != dt {
        return Err(OpError::dtype(format!(
            "{}: input `{}` is {} but the data is {} (inputs of one float dtype are served)",
            req.op,
            t.name,
            dtype::name(t.dtype),
            dtype::name(dt)
        )));
    }
    Ok(Some(t))
}

pub struct AttentionPlugin;

impl Plugin for AttentionPlugin {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("attention", env!("CARGO_PKG_VERSION"), OPS.iter().copied())
    }

    fn expand(req: &umd_sdk::ExpandRequest) -> Result<umd_sdk::Expansion, OpError> {
        if req.op.eq_ignore_ascii_case("FlexAttention") {
            flex::expand(req)
        } else {
            Err(OpError::UnsupportedOp(format!(
                "{}: only FlexAttention is expanded by this plugin",
                req.op
            )))
        }
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        if req.op.eq_ignore_ascii_case("Attention") {
            attention::plan(req)
        } else if req.op.eq_ignore_ascii_case("FlexAttention") {
            attention::plan_flex(req)
        } else if req.op.eq_ignore_ascii_case("RotaryEmbedding") {
            rotary::plan(req)
        } else if req.op.eq_ignore_ascii_case("LinearAttention") {
            linear::plan(req)
        } else if req.op.eq_ignore_ascii_case("CausalConvWithState") {
            conv::plan(req)
        } else if req.op.eq_ignore_ascii_case("TensorScatter") {
            scatter::plan(req)
        } else if req.op.eq_ignore_ascii_case("SwiGLU") {
            swiglu::plan(req)
        } else {
            Err(umd_sdk::unsupported_op_ext(req))
        }
    }

    fn tolerance(_op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        match dt {
            Dtype::F32 => t(1e-5, 1e-4),
            Dtype::F16 => t(2e-3, 2e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-9, 1e-9),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        if module_id == scatter::MODULE {
            return Ok(scatter::module());
        }
        let dt = dtype::of_module(module_id, "attention_", &DTYPES)?;
        Ok(cuda::module(dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        if call.module_id == scatter::MODULE {
            return scatter::run(&call);
        }
        cpu::run(&call)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |name: &str, shape: &[u64]| TensorDesc::new(name, shape.to_vec(), Dtype::F32);
        let attr = |name: &str, value| Attribute {
            name: name.into(),
            value,
        };
        vec![
            // one query, two keys with scores 0 and 1 (scale 1): p = (1, e) / (1 + e)
            umd_sdk::test_case_with(
                "attention over two keys",
                "Attention",
                vec![
                    (t("Q", &[1, 1, 1, 2]), vec![1., 0.]),
                    (t("K", &[1, 1, 2, 2]), vec![0., 1., 1., 0.]),
                    (t("V", &[1, 1, 2, 1]), vec![10., 20.]),
                ],
                vec![attr("scale", AttrValue::Float(1.0))],
                vec![(Dtype::F32, vec![10. + 10. * 0.7310585786300049])],
                1e-5,
            ),
            // causal: the first query sees only the first key
            umd_sdk::test_case_with(
                "causal attention",
                "Attention",
                vec![
                    (t("Q", &[1, 1, 2, 1]), vec![1., 1.]),
                    (t("K", &[1, 1, 2, 1]), vec![0., 0.]),
                    (t("V", &[1, 1, 2, 1]), vec![2., 4.]),
                ],
                vec![attr("is_causal", AttrValue::Int(1))],
                vec![(Dtype::F32, vec![2., 3.])],
                1e-6,
            ),
            // the state after each step: 1·3 = 3, then 3 + 2·4 = 11 (q = 1, scale 1)
            umd_sdk::test_case_with(
                "linear attention over two steps",
                "LinearAttention",
                vec![
                    (t("q", &[1, 2, 1]), vec![1., 1.]),
                    (t("k", &[1, 2, 1]), vec![1., 2.]),
                    (t("v", &[1, 2, 1]), vec![3., 4.]),
                ],
                vec![
                    attr("q_num_heads", AttrValue::Int(1)),
                    attr("kv_num_heads", AttrValue::Int(1)),
                    attr("scale", AttrValue::Float(1.0)),
                    attr("update_rule", AttrValue::Text("linear".into())),
                ],
                vec![(Dtype::F32, vec![3., 11.]), (Dtype::F32, vec![11.])],
                1e-6,
            ),
            // padded [0, 1, 2, 3] under the taps (1, 10); the state keeps the last input
            umd_sdk::test_case(
                "causal depthwise convolution",
                "CausalConvWithState",
                vec![
                    (t("x", &[1, 1, 3]), vec![1., 2., 3.]),
                    (t("w", &[1, 1, 2]), vec![1., 10.]),
                ],
                vec![(Dtype::F32, vec![10., 21., 32.]), (Dtype::F32, vec![3.])],
                1e-6,
            ),
            // cos 0 / sin 1 rotates (x1, x2) to (-x2, x1)
            umd_sdk::test_case_with(
                "rotary embedding by a quarter turn",
                "RotaryEmbedding",
                vec![
                    (t("x", &[1, 1, 1, 4]), vec![1., 2., 3., 4.]),
                    (t("cos", &[1, 1, 2]), vec![0., 1.]),
                    (t("sin", &[1, 1, 2]), vec![1., 0.]),
                ],
                vec![],
                vec![(Dtype::F32, vec![-3., 2., 1., 4.])],
                1e-6,
            ),
            // no write indices: the update lands at position 0 of the sequence axis (-2)
            umd_sdk::test_case(
                "tensorscatter at the start of the cache",
                "TensorScatter",
                vec![
                    (t("past_cache", &[1, 3, 2]), vec![1., 2., 3., 4., 5., 6.]),
                    (t("update", &[1, 1, 2]), vec![10., 20.]),
                ],
                vec![(Dtype::F32, vec![10., 20., 3., 4., 5., 6.])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(AttentionPlugin);

#[cfg(test)]
mod tests;
