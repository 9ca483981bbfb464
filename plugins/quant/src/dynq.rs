//! DynamicQuantizeLinear (opset 11, f32 → uint8): two launches of module `quant_dyn_f32`.
//! `quant_dyn_f32_range` (one block) reduces min and max of x (NaN propagates), and writes
//! y_scale and y_zero_point as the reference computes them in f32; `quant_dyn_f32_apply` (one
//! thread per element) reads them back and quantizes. Parameters: range `x, scale, zp, n`;
//! apply `x, scale, zp, y, n`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, cpu, shape,
};

use crate::plan::{bad_dtype, linear_launch, max_inputs, single_block};

/// The module of the op.
pub const MODULE: &str = "quant_dyn_f32";

/// Plans DynamicQuantizeLinear.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &[])?;
    max_inputs(req, 1)?;
    let x = req.required(0)?;
    if x.dtype != Dtype::F32 {
        return Err(bad_dtype(req, "x", x.dtype, &[Dtype::F32]));
    }
    let n = shape::numel(&x.shape)?;
    shape::byte_size(&x.shape, Dtype::F32)?;
    let (y, s, z) = (
        req.output_binding(0),
        req.output_binding(1),
        req.output_binding(2),
    );
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(s, Access::Write)
        .ptr(z, Access::Write)
        .u64(n);
    let range = single_block(req, MODULE.into(), format!("{MODULE}_range"), p)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(s, Access::Read)
        .ptr(z, Access::Read)
        .ptr(y, Access::Write)
        .u64(n);
    let apply = linear_launch(req, MODULE.into(), format!("{MODULE}_apply"), n, p)?;
    Ok(OpPlan {
        outputs: vec![
            TensorDesc::new("y", x.shape.clone(), Dtype::U8),
            TensorDesc::new("y_scale", vec![], Dtype::F32),
            TensorDesc::new("y_zero_point", vec![], Dtype::U8),
        ],
        launches: vec![range, apply],
        workspace_bytes: 0,
    })
}

fn nan_min(a: f32, b: f32) -> f32 {
    if a < b || a.is_nan() { a } else { b }
}
fn nan_max(a: f32, b: f32) -> f32 {
    if a > b || a.is_nan() { a } else { b }
}

/// (scale, zero point) from the minimum and maximum of x, in f32 as the reference does.
pub fn scale_zero_point(min: f32, max: f32) -> (f32, f32) {
    let maxx = nan_max(0.0, max);
    let minx = nan_min(0.0, min);
    let scale = (if maxx == minx { 1.0 } else { maxx - minx }) / 255.0f32;
    let initial = 0.0f32 - minx / scale;
    // Python's max(qmin, min(qmax, v)): min(255, NaN) is 255, max(0, 255) = 255
    let zp = if initial.is_nan() {
        255.0
    } else {
        initial.clamp(0.0, 255.0)
    };
    (scale, zp.round_ties_even())
}

/// Runs one launch of the op on the CPU.
pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let bufs = cpu::Buffers::new(call);
    let f = |b: &[u8], i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    if call.entry_point.ends_with("_range") {
        let (xb, sb, zb, n) = (r.ptr()?, r.ptr()?, r.ptr()?, r.u64()?);
        let x = bufs.input(xb, 4 * n)?;
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for i in 0..n as usize {
            let v = f(x, i);
            lo = nan_min(lo, v);
            hi = nan_max(hi, v);
        }
        let (scale, zp) = scale_zero_point(lo, hi);
        let mut s = bufs.output(sb, 4)?;
        s.data.copy_from_slice(&scale.to_le_bytes());
        let mut z = bufs.output(zb, 1)?;
        z.data[0] = zp as u8;
        return Ok(vec![s, z]);
    }
    let (xb, sb, zb, yb, n) = (r.ptr()?, r.ptr()?, r.ptr()?, r.ptr()?, r.u64()?);
    let x = bufs.input(xb, 4 * n)?;
    let scale = f(bufs.input(sb, 4)?, 0);
    let zp = bufs.input(zb, 1)?[0] as f32;
    let mut y = bufs.output(yb, n)?;
    for (i, o) in y.data.iter_mut().enumerate() {
        let v = (f(x, i) / scale).round_ties_even() + zp;
        *o = if v.is_nan() {
            0
        } else {
            v.clamp(0.0, 255.0) as u8
        };
    }
    Ok(vec![y])
}
