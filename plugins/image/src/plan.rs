//! Planning (validation, the output's shape from the stream's header, the parameter block) and
//! the CPU kernel that decodes.
//!
//! One launch of one block, module [`MODULE`], entry point [`ENTRY`]; parameters: the stream
//! (read), the output (write), the stream's length in bytes (u64), the height and width the plan
//! saw (u64 each; the kernel refuses a stream that changed since), the pixel format
//! ([`PixelFormat::code`], u32).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc,
    attr, dtype,
};

use crate::decode::{self, PixelFormat, Refusal};

pub const MODULE: &str = "image_decoder";
pub const ENTRY: &str = "image_decode";

fn refusal(op: &str, r: Refusal) -> OpError {
    match r {
        Refusal::NotServed(m) => OpError::UnsupportedOp(format!("{op}: {m}")),
        Refusal::Invalid(m) => OpError::InvalidShape(format!("{op}: {m}")),
    }
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let op = req.op.as_str();
    if !req.target.name.eq_ignore_ascii_case("cpu") {
        return Err(OpError::UnsupportedTarget(format!(
            "{op} runs on the CPU device only (target `{}`): an image codec has no CUDA kernel",
            req.target.name
        )));
    }
    attr::only(&req.attributes, &["pixel_format"])?;
    let text = attr::text_or(&req.attributes, "pixel_format", "RGB")?;
    let pf = PixelFormat::parse(&text).ok_or_else(|| {
        OpError::InvalidAttribute(format!(
            "{op}: `pixel_format` must be \"RGB\", \"BGR\" or \"Grayscale\", got {text:?}"
        ))
    })?;
    if req.slots() != 1 {
        return Err(OpError::shape(format!(
            "{op} takes one input (encoded_stream), got {}",
            req.slots()
        )));
    }
    let x = req.required(0)?;
    if x.dtype != Dtype::U8 {
        return Err(OpError::InvalidShape(format!(
            "{op}: encoded_stream must be uint8, got {}",
            dtype::name(x.dtype)
        )));
    }
    if x.shape.len() != 1 {
        return Err(OpError::shape(format!(
            "{op}: encoded_stream must be 1-D, got shape {:?}",
            x.shape
        )));
    }
    let bytes = req.value(0).ok_or_else(|| {
        OpError::shape(format!(
            "{op}: the value of encoded_stream must be known when planning (the image's size is \
             the output's shape; the host sends streams of at most 1 MiB)"
        ))
    })?;
    if bytes.len() as u64 != x.shape[0] {
        return Err(OpError::shape(format!(
            "{op}: encoded_stream has {} elements but its value holds {} bytes",
            x.shape[0],
            bytes.len()
        )));
    }
    let h = decode::header(bytes).map_err(|r| refusal(op, r))?;
    let (height, width) = (h.height as u64, h.width as u64);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(x.shape[0])
        .u64(height)
        .u64(width)
        .u32(pf.code());
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes)?;
    Ok(OpPlan {
        outputs: vec![TensorDesc::new(
            "image",
            vec![height, width, pf.channels()],
            Dtype::U8,
        )],
        launches: vec![Launch {
            module_id: MODULE.into(),
            entry_point: ENTRY.into(),
            grid: Dim3::x(1),
            block: Dim3::x(1),
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

/// The CPU kernel: decodes the whole stream and writes the whole output.
pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    if call.module_id != MODULE || call.entry_point != ENTRY {
        return Err(OpError::internal(format!(
            "unknown kernel `{}` of module `{}`",
            call.entry_point, call.module_id
        )));
    }
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, yb) = (r.ptr()?, r.ptr()?);
    let (len, height, width) = (r.u64()?, r.u64()?, r.u64()?);
    let pf = PixelFormat::from_code(r.u32()?)
        .ok_or_else(|| OpError::internal("ImageDecoder: unknown pixel format code"))?;
    let stream = &bufs.input(xb, len)?[..len as usize];
    let (h, pixels) = decode::decode(stream, pf).map_err(|r| refusal("ImageDecoder", r))?;
    if (h.height as u64, h.width as u64) != (height, width) {
        return Err(OpError::internal(format!(
            "ImageDecoder: the stream changed since planning ({} x {} planned, {} x {} now)",
            height, width, h.height, h.width
        )));
    }
    let mut w = bufs.output(yb, pixels.len() as u64)?;
    w.data.copy_from_slice(&pixels);
    Ok(vec![w])
}
