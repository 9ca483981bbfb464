//! The `quant` plugin: QuantizeLinear and DequantizeLinear (per tensor, per axis, blocked;
//! integer and float8 quantized types), DynamicQuantizeLinear and QLinearMatMul, each with a
//! CPU kernel and a CUDA C kernel reading the same parameter block.
//!
//! [`qdq`], [`dynq`] and [`qmatmul`] plan the ops and hold their CPU kernels; [`cuda`] renders
//! the modules; [`elem`] is the dtype-generic element access both sides share and [`f8`] the
//! 8-bit float encoder.

pub mod cuda;
pub mod dynq;
pub mod elem;
pub mod f8;
pub mod plan;
pub mod qdq;
pub mod qmatmul;

use umd_sdk::{
    CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, Plugin, PluginInfo,
    Target, TensorDesc, TestCase, Tolerance,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 4] = [
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearMatMul",
];

pub struct Quant;

impl Plugin for Quant {
    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("quant", env!("CARGO_PKG_VERSION"), OPS.iter().copied())
    }

    /// Q/DQ quantize to and dequantize from the packed types (INT4, UINT4, INT2, UINT2,
    /// FLOAT4E2M1; ABI 1.4).
    fn serves_packed(op: &str) -> bool {
        op.eq_ignore_ascii_case("QuantizeLinear") || op.eq_ignore_ascii_case("DequantizeLinear")
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        let op = OPS
            .iter()
            .find(|o| req.op.eq_ignore_ascii_case(o))
            .ok_or_else(|| umd_sdk::unsupported_op_ext(req))?;
        match *op {
            "QuantizeLinear" => qdq::plan(req, true),
            "DequantizeLinear" => qdq::plan(req, false),
            "DynamicQuantizeLinear" => dynq::plan(req),
            _ => qmatmul::plan(req),
        }
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        // DequantizeLinear is one rounded multiply; the others produce exact integers (a
        // rounding tie may differ by one step only through a different scale).
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        if !op.eq_ignore_ascii_case("DequantizeLinear")
            && !op.eq_ignore_ascii_case("DynamicQuantizeLinear")
        {
            return t(0.0, 0.0);
        }
        match dt {
            Dtype::F32 => t(1e-6, 1e-6),
            Dtype::F16 => t(1e-3, 1e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            _ => t(0.0, 0.0),
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        if module_id == dynq::MODULE {
            return Ok(cuda::dynamic());
        }
        if let Some((q, x, s, y)) = qdq::parse(module_id) {
            return Ok(cuda::qdq(module_id, q, x, s, y));
        }
        if let Some(d) = qmatmul::parse(module_id) {
            return Ok(cuda::qmatmul(module_id, d));
        }
        Err(OpError::internal(format!("unknown module `{module_id}`")))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        let id = call.module_id.as_str();
        if id == dynq::MODULE {
            return dynq::run_cpu(&call);
        }
        if call.entry_point != id {
            return Err(OpError::internal(format!(
                "unknown entry point `{}` of `{id}`",
                call.entry_point
            )));
        }
        if let Some(d) = qdq::parse(id) {
            return qdq::run_cpu(&call, d);
        }
        if let Some(d) = qmatmul::parse(id) {
            return qmatmul::run_cpu(&call, d);
        }
        Err(OpError::internal(format!("unknown module `{id}`")))
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |name: &str, shape: &[u64], dt| TensorDesc::new(name, shape.to_vec(), dt);
        let attr = |name: &str, value| umd_sdk::Attribute {
            name: name.into(),
            value,
        };
        use umd_sdk::AttrValue::Int;
        vec![
            umd_sdk::test_case(
                "quantize to uint8 with saturation and ties to even",
                "QuantizeLinear",
                vec![
                    (
                        t("x", &[6], Dtype::F32),
                        vec![0., 3., 5., 1000., -254., -1000.],
                    ),
                    (t("s", &[], Dtype::F32), vec![2.]),
                    (t("z", &[], Dtype::U8), vec![128.]),
                ],
                // 1.5 -> 2, 2.5 -> 2 (half to even)
                vec![(Dtype::U8, vec![128., 130., 130., 255., 1., 0.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "dequantize int8 per axis 0",
                "DequantizeLinear",
                vec![
                    (t("x", &[2, 2], Dtype::I8), vec![-3., 4., 10., -128.]),
                    (t("s", &[2], Dtype::F32), vec![0.5, 2.]),
                    (t("z", &[2], Dtype::I8), vec![1., -2.]),
                ],
                vec![attr("axis", Int(0))],
                vec![(Dtype::F32, vec![-2., 1.5, 24., -252.])],
                0.0,
            ),
            umd_sdk::test_case(
                "dynamic quantization of a small vector",
                "DynamicQuantizeLinear",
                vec![(t("x", &[3], Dtype::F32), vec![0., 255., -255.])],
                // scale 510/255 = 2, zero point 127.5 -> 128 (ties to even)
                vec![
                    (Dtype::U8, vec![128., 255., 0.]),
                    (Dtype::F32, vec![2.]),
                    (Dtype::U8, vec![128.]),
                ],
                1e-6,
            ),
            umd_sdk::test_case(
                "qlinear matmul 1x2 by 2x1",
                "QLinearMatMul",
                vec![
                    (t("a", &[1, 2], Dtype::U8), vec![10., 20.]),
                    (t("as", &[], Dtype::F32), vec![0.5]),
                    (t("az", &[], Dtype::U8), vec![0.]),
                    (t("b", &[2, 1], Dtype::U8), vec![3., 4.]),
                    (t("bs", &[], Dtype::F32), vec![1.]),
                    (t("bz", &[], Dtype::U8), vec![2.]),
                    (t("ys", &[], Dtype::F32), vec![2.]),
                    (t("yz", &[], Dtype::U8), vec![1.]),
                ],
                // (10*1 + 20*2) * 0.5 / 2 + 1 = 13.5 -> 14
                vec![(Dtype::U8, vec![14.])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Quant);

#[cfg(test)]
mod emu;
#[cfg(test)]
mod tests;
