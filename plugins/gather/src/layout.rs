//! DepthToSpace and SpaceToDepth (`blocksize`, `mode` DCR/CRD): planning (the CPU kernels are in
//! [`crate::inplace`]). Both move elements.
//!
//! The depth/space ops share one mapping ([`block_channel`]): a channel of the deep tensor is
//! `(bh * b + bw) * C + c` in DCR order and `(c * b + bh) * b + bw` in CRD order, where `C` is
//! the channel count of the shallow (spatial) tensor.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common;

/// Parameters of `d2s_s{S}` and `s2d_s{S}`, in the shallow tensor's terms: `c` channels,
/// `h`×`w` spatial size (of the shallow tensor), block `b`.
///
/// CUDA: `(const T* x, T* out, u64 n, u64 c, u64 h, u64 w, u64 b, u32 crd)`.
pub struct BlockParams {
    pub n: u64,
    pub c: u64,
    pub h: u64,
    pub w: u64,
    pub b: u64,
    pub crd: bool,
}

/// The deep channel of shallow channel `c` at block position (`bh`, `bw`).
#[inline(always)]
pub fn block_channel(crd: bool, c: u64, cs: u64, b: u64, bh: u64, bw: u64) -> u64 {
    if crd {
        (c * b + bh) * b + bw
    } else {
        (bh * b + bw) * cs + c
    }
}

/// Plans DepthToSpace or SpaceToDepth.
pub fn plan_block(req: &PlanRequestExt, to_space: bool) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["blocksize", "mode"])?;
    let op = req.op.as_str();
    let x = req.required(0)?;
    let b = attr::int(&req.attributes, "blocksize")?;
    if b < 1 {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: attribute `blocksize` = {b} must be >= 1"
        )));
    }
    let b = b as u64;
    let crd = match attr::text_or(&req.attributes, "mode", "DCR")?.as_str() {
        "DCR" => false,
        "CRD" => true,
        m => {
            return Err(OpError::InvalidAttribute(format!(
                "{op}: attribute `mode` = \"{m}\" is not DCR or CRD"
            )));
        }
    };
    let [bn, c, h, w] = x.shape[..] else {
        return Err(OpError::shape(format!(
            "{op}: input must be 4-D, got {:?}",
            x.shape
        )));
    };
    let bb = b * b;
    let (out_shape, prm) = if to_space {
        if c % bb != 0 {
            return Err(OpError::shape(format!(
                "{op}: channels {c} are not divisible by blocksize² = {bb}"
            )));
        }
        let (hs, ws) = (h.checked_mul(b), w.checked_mul(b));
        let (Some(hs), Some(ws)) = (hs, ws) else {
            return Err(OpError::shape(format!("{op}: output size overflows")));
        };
        (
            vec![bn, c / bb, hs, ws],
            BlockParams {
                n: 0,
                c: c / bb,
                h: hs,
                w: ws,
                b,
                crd,
            },
        )
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(OpError::shape(format!(
                "{op}: spatial size {h}x{w} is not divisible by blocksize {b}"
            )));
        }
        let Some(cd) = c.checked_mul(bb) else {
            return Err(OpError::shape(format!("{op}: output size overflows")));
        };
        (
            vec![bn, cd, h / b, w / b],
            BlockParams {
                n: 0,
                c,
                h,
                w,
                b,
                crd,
            },
        )
    };
    let n = common::out_numel(&out_shape, x.dtype)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(prm.c)
        .u64(prm.h)
        .u64(prm.w)
        .u64(prm.b)
        .u32(prm.crd as u32);
    let size = dtype::size(x.dtype);
    let entry = if to_space { "d2s" } else { "s2d" };
    let l = common::make_launch(
        req,
        common::move_module(size),
        common::move_entry(entry, size),
        n,
        p,
    )?;
    Ok(common::one_output(
        TensorDesc::new("output", out_shape, x.dtype),
        vec![l],
    ))
}
