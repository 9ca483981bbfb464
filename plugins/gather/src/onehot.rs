//! OneHot (opsets 9, 11, 28): planning and the CPU kernel.
//!
//! `depth` (input 1) is a plan-time constant of any numeric dtype (a non-integer depth gives
//! `ceil(depth)` classes, as numpy's `arange` does); `values` (input 2, `[off, on]`) is read by the
//! kernel through a pointer and may be of any dtype (the output's). Indices may be of any
//! numeric dtype: each is compared as an f64 with the class number after adding `depth` to a
//! negative one (opset 11+; opset 9 leaves negative indices unmatched). Unmatched indices give
//! rows of `off`. The output element is a copy of `on` or `off` (ONNX's reference computes
//! `hit * (on - off) + off`, which equals it unless that arithmetic rounds).
//!
//! Modules `gather_onehot_{index dtype}`, entries `onehot_s{value size}`.

use umd_sdk::cpu::Buffers;
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape;
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype,
};

use crate::common::{self, by_size, copy_elem};

/// Parameters of `onehot_s{S}`: out[o, d, i] = (idx[o, i] (wrapped) == d) ? on : off.
///
/// CUDA: `(const I* idx, const T* values, T* out, u64 n, u64 depth, u64 inner, double depth_f,
/// u32 wrap)`.
pub struct OneHotParams {
    pub n: u64,
    pub depth: u64,
    pub inner: u64,
    pub depth_f: f64,
    pub wrap: bool,
}

/// Plans OneHot.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis"])?;
    let (idx, _, values) = (req.required(0)?, req.required(1)?, req.required(2)?);
    common::check_dtype("OneHot", idx, &common::NUMERIC_DTYPES)?;
    let depth_f = match req.floats(1)? {
        Some(v) if v.len() == 1 => v[0],
        _ => return Err(OpError::shape("OneHot: depth must hold exactly one value")),
    };
    if depth_f.is_nan() || depth_f < 0.0 || depth_f > (1u64 << 53) as f64 {
        return Err(OpError::shape(format!(
            "OneHot: depth {depth_f} is invalid"
        )));
    }
    let depth = depth_f.ceil() as u64;
    if shape::numel(&values.shape)? != 2 {
        return Err(OpError::shape(format!(
            "OneHot: values must hold 2 elements (off, on), has shape {:?}",
            values.shape
        )));
    }
    let r = idx.shape.len();
    let axis = attr::int_or(&req.attributes, "axis", -1)?;
    let axis = common::norm_axis("OneHot", "axis", axis, r + 1)?;
    let mut out_shape = idx.shape[..axis].to_vec();
    out_shape.push(depth);
    out_shape.extend_from_slice(&idx.shape[axis..]);
    let n = common::out_numel(&out_shape, values.dtype)?;
    let prm = OneHotParams {
        n,
        depth,
        inner: shape::numel(&idx.shape[axis..])?,
        depth_f,
        wrap: req.opset == 0 || req.opset >= 11,
    };
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.binding(2).unwrap_or(2), Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(prm.n)
        .u64(prm.depth)
        .u64(prm.inner)
        .f64(prm.depth_f)
        .u32(prm.wrap as u32);
    let size = dtype::size(values.dtype);
    let l = common::make_launch(
        req,
        format!("gather_onehot_{}", dtype::name(idx.dtype)),
        common::move_entry("onehot", size),
        n,
        p,
    )?;
    Ok(common::one_output(
        TensorDesc::new("output", out_shape, values.dtype),
        vec![l],
    ))
}

/// Runs `onehot_s{size}` with indices of dtype `idx_dt` on the CPU.
pub fn run_cpu(call: &CpuCall, idx_dt: Dtype, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (idx, values, out) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let p = OneHotParams {
        n: r.u64()?,
        depth: r.u64()?,
        inner: r.u64()?,
        depth_f: r.f64()?,
        wrap: r.u32()? != 0,
    };
    let count = p.n.checked_div(p.depth).unwrap_or(0);
    let isz = dtype::size(idx_dt) as u64;
    let idx = dtype::decode_f64(idx_dt, bufs.input(idx, count * isz)?);
    let values = bufs.input(values, 2 * size as u64)?;
    let mut w = bufs.output(out, p.n * size as u64)?;
    by_size!(size, onehot_cpu(&p, &idx, values, &mut w.data))?;
    Ok(vec![w])
}

fn onehot_cpu<const S: usize>(
    p: &OneHotParams,
    idx: &[f64],
    values: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    if p.n == 0 {
        return Ok(());
    }
    let (depth, inner) = (p.depth as usize, p.inner as usize);
    let outer = p.n as usize / (depth * inner);
    for o in 0..outer {
        for d in 0..depth {
            let row = (o * depth + d) * inner;
            for i in 0..inner {
                let mut v = idx[o * inner + i];
                if p.wrap && v < 0.0 {
                    v += p.depth_f;
                }
                copy_elem::<S>(out, row + i, values, (v == d as f64) as usize);
            }
        }
    }
    Ok(())
}
