//! Pad (every opset): planning (the CPU kernel is in [`crate::inplace`]).
//!
//! Forms: opset 1 (`paddings`, `value` attributes), 2–10 (`pads`, `value` attributes), 11+ (`pads`
//! input 1, a plan-time constant; optional `constant_value` input 2, read by the kernel through
//! a pointer; opset 18+ optional `axes` input 3, a constant). Modes `constant`, `reflect` (numpy:
//! mirror without repeating the edge, periodic for pads wider than the axis), `edge` and `wrap`.
//! Negative pads crop. The output coordinate maps to the input per axis
//! ([`map_coord`], mirrored in the CUDA kernel); `constant` writes the value where it falls out.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common;

/// Pad modes, by their kernel code.
pub const MODES: [&str; 4] = ["constant", "reflect", "edge", "wrap"];

/// Parameters of `pad_s{S}` and `pad_cptr_s{S}` (the latter reads the constant through a
/// pointer after `x` and has no `value_bits`).
///
/// CUDA: `(const T* x, [const T* cval,] T* out, u64 n, u32 rank, u32 mode, umd_dims odims,
/// umd_dims idims, umd_dims begin (i64 bits), [u64 value_bits])`.
pub struct PadParams {
    pub n: u64,
    pub rank: u32,
    pub mode: u32,
    pub odims: [u64; MAX_RANK],
    pub idims: [u64; MAX_RANK],
    pub begin: [i64; MAX_RANK],
    pub value_bits: u64,
}

/// Maps output coordinate `c` to an input coordinate of an axis of `n` elements whose padding
/// starts with `begin`; `None` means the constant.
#[inline(always)]
pub fn map_coord(mode: u32, c: u64, begin: i64, n: u64) -> Option<u64> {
    let i = c as i64 - begin;
    let n = n as i64;
    if i >= 0 && i < n {
        return Some(i as u64);
    }
    match mode {
        1 => {
            if n == 1 {
                return Some(0);
            }
            let p = 2 * (n - 1);
            let m = i.rem_euclid(p);
            Some(if m < n { m } else { p - m } as u64)
        }
        2 => Some(i.clamp(0, n - 1) as u64),
        3 => Some(i.rem_euclid(n) as u64),
        _ => None,
    }
}

/// Plans Pad in any of its forms.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["mode", "pads", "paddings", "value"])?;
    let x = req.required(0)?;
    common::check_rank("Pad", x)?;
    let r = x.shape.len();
    let mode_name = attr::text_or(&req.attributes, "mode", "constant")?;
    let mode = MODES.iter().position(|m| *m == mode_name).ok_or_else(|| {
        OpError::InvalidAttribute(format!(
            "Pad: attribute `mode` = \"{mode_name}\" is not one of constant, reflect, edge, wrap"
        ))
    })? as u32;
    let (pads, axes) = if req.input(1).is_some() {
        let pads = req.ints(1)?.unwrap_or_default();
        let axes = match req.ints(3)? {
            Some(a) => a
                .iter()
                .map(|&a| common::norm_axis("Pad", "axes", a, r).map_err(as_shape))
                .collect::<Result<Vec<_>, _>>()?,
            None => (0..r).collect(),
        };
        (pads, axes)
    } else {
        let pads = attr::ints_opt(&req.attributes, "pads")?
            .or(attr::ints_opt(&req.attributes, "paddings")?)
            .ok_or_else(|| OpError::InvalidAttribute("Pad: `pads` is required".into()))?;
        (pads, (0..r).collect())
    };
    if pads.len() != 2 * axes.len() {
        return Err(OpError::shape(format!(
            "Pad: {} pads for {} axes (need 2 per axis)",
            pads.len(),
            axes.len()
        )));
    }
    let mut begin = vec![0i64; r];
    let mut end = vec![0i64; r];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
        end[a] = pads[axes.len() + i];
    }
    let mut out_shape = Vec::with_capacity(r);
    for d in 0..r {
        let o = x.shape[d] as i128 + begin[d] as i128 + end[d] as i128;
        if o < 0 || o > u64::MAX as i128 {
            return Err(OpError::shape(format!(
                "Pad: dimension {d} of {} padded by ({}, {}) is invalid",
                x.shape[d], begin[d], end[d]
            )));
        }
        out_shape.push(o as u64);
    }
    let n = common::out_numel(&out_shape, x.dtype)?;
    if let Some(d) = (0..r).find(|&d| mode != 0 && n > 0 && x.shape[d] == 0) {
        return Err(OpError::shape(format!(
            "Pad: mode `{mode_name}` cannot pad the empty dimension {d}"
        )));
    }
    let cval = req.binding(2);
    let value_bits = if cval.is_some() {
        0
    } else {
        let v = attr::float_or(&req.attributes, "value", 0.0)?;
        encode_bits(x.dtype, v)
    };
    let mut bg = [0i64; MAX_RANK];
    bg[..r].copy_from_slice(&begin);
    let prm = PadParams {
        n,
        rank: r as u32,
        mode,
        odims: common::dims8(&out_shape, 1)?,
        idims: common::dims8(&x.shape, 1)?,
        begin: bg,
        value_bits,
    };
    if let Some(c) = req.input(2) {
        common::same_dtype("Pad", x, c)?;
        if shape::numel(&c.shape)? != 1 {
            return Err(OpError::shape(format!(
                "Pad: constant_value must hold one element, has shape {:?}",
                c.shape
            )));
        }
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read);
    if let Some(c) = cval {
        p.ptr(c, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write)
        .u64(prm.n)
        .u32(prm.rank)
        .u32(prm.mode)
        .u64_array(&prm.odims)
        .u64_array(&prm.idims)
        .u64_array(&prm.begin.map(|b| b as u64));
    if cval.is_none() {
        p.u64(prm.value_bits);
    }
    let size = dtype::size(x.dtype);
    let base = if cval.is_some() { "pad_cptr" } else { "pad" };
    let l = common::make_launch(
        req,
        common::move_module(size),
        common::move_entry(base, size),
        n,
        p,
    )?;
    Ok(common::one_output(
        TensorDesc::new("output", out_shape, x.dtype),
        vec![l],
    ))
}

fn as_shape(e: OpError) -> OpError {
    match e {
        OpError::InvalidAttribute(m) => OpError::InvalidShape(m),
        e => e,
    }
}

/// The bits of `v` as one element of `dt` (integers truncate, as numpy's assignment does).
pub fn encode_bits(dt: Dtype, v: f64) -> u64 {
    let bytes = dtype::encode(dt, &[v]).unwrap_or_default();
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(&bytes);
    u64::from_le_bytes(b)
}
