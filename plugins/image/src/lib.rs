//! The `image` plugin: ONNX `ImageDecoder` (ai.onnx opset 20) — an encoded image stream (uint8,
//! 1-D) decoded to uint8 pixels `[H, W, 3]` (`pixel_format` "RGB", the default, or "BGR") or
//! `[H, W, 1]` ("Grayscale").
//!
//! - Formats: PNG, JPEG (baseline and progressive), BMP, TIFF, WebP, PNM (PBM/PGM/PPM/PAM),
//!   decoded by the pure-Rust `image` crate; JPEG 2000 (JP2 and bare codestreams) by the
//!   pure-Rust `hayro-jpeg2000` (gray or RGB, with or without alpha; CMYK and ICC refused).
//! - The output's shape is the image's size, so the plan needs the stream's *value*: the
//!   signature declares input 0 constant and the host sends it (at most 1 MiB, the host's bound
//!   on values read at plan time). The plan reads only the header; images over
//!   [`decode::MAX_PIXELS`] pixels (64 Mi) or [`decode::MAX_DECODED_BYTES`] decoded bytes
//!   (256 MiB) are refused.
//! - The kernel runs on the CPU device only (a codec has no CUDA kernel): a plan for a CUDA
//!   target is declined with `unsupported-target`, so the host answers status 2 and the kernel
//!   gate counts it as declined.
//! - Results are Pillow's (the ONNX reference), conversions included ([`decode`]). JPEG: the
//!   `image` crate's decoder (zune-jpeg) rounds its IDCT and chroma upsampling differently from
//!   Pillow's libjpeg-turbo (pixels off by up to 2), so baseline Huffman JPEGs — gray, or YCbCr
//!   with 4:4:4, 4:2:2 or 4:2:0 chroma, what Pillow and most cameras write — are decoded by
//!   [`jpeg`] with libjpeg-turbo's default arithmetic (islow IDCT, fancy upsampling, its colour
//!   tables), bit-exact; progressive, arithmetic-coded, 12-bit, CMYK/Adobe and other sampling
//!   layouts fall back to zune-jpeg and may differ by 1–2.

pub mod decode;
pub mod jpeg;
pub mod plan;

use umd_sdk::{
    CpuCall, CpuWrite, ModuleSource, OpError, OpPlan, OpSignature, PlanRequestExt, Plugin,
    PluginInfo, Target, signature,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 1] = ["ImageDecoder"];

pub struct ImagePlugin;

impl Plugin for ImagePlugin {
    fn describe() -> PluginInfo {
        // `cuda` is listed so a CUDA request reaches `plan` and is declined with a message that
        // says why (instead of the host's bare "not supported for target").
        umd_sdk::plugin_info("image", env!("CARGO_PKG_VERSION"), OPS)
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        if req.op.eq_ignore_ascii_case("ImageDecoder") {
            plan::plan(req)
        } else {
            Err(umd_sdk::unsupported_op_ext(req))
        }
    }

    fn signatures() -> Vec<OpSignature> {
        // the stream itself: its header is the output's shape
        vec![signature("ImageDecoder", &[0])]
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        Err(OpError::UnsupportedTarget(format!(
            "module `{module_id}`: ImageDecoder runs on the CPU device only (no CUDA kernel)"
        )))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        plan::run_cpu(&call)
    }
}

umd_sdk::export_plugin!(ImagePlugin);

#[cfg(test)]
mod tests;
