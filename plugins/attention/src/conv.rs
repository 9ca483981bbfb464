//! CausalConvWithState (opset 27) as one `causalconv_{T}` launch, one thread per element of
//! the output and of the present state (grid-stride over both).
//!
//! The input `[B, C, L]` is left-padded with `past_state [B, C, K-1]` (zeros when absent) into
//! `padded [B, C, L + K - 1]`; `output[b, c, t] = Σ_w weight[c, 0, w] · padded[b, c, t + w] +
//! bias[c]` (rounded to `T`), then `x · sigmoid(x)` for `activation` `silu`/`swish`;
//! `present_state` is the last `K - 1` positions of `padded`.
//!
//! Parameters: `flags, x, weight, bias (or null), past (or null), y, state, B, C, L, K`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, CpuCall, CpuWrite, OpError, OpPlan, PlanRequestExt, TensorDesc};
use umd_sdk::{attr, cpu::Buffers, dtype, dtype::Element, launch, shape};

use crate::cpu::{Real, decode, encode, rnd};
use crate::{float_input, module_id, same_dtype};

pub const BIAS: u32 = 1;
pub const PAST: u32 = 2;
pub const SILU: u32 = 4;

/// Plans CausalConvWithState.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["activation"])?;
    if req.slots() > 4 {
        return Err(OpError::shape(format!(
            "CausalConvWithState takes at most 4 inputs, got {}",
            req.slots()
        )));
    }
    let (x, dt) = float_input(req, 0)?;
    let mut flags = match attr::text_or(&req.attributes, "activation", "none")?.as_str() {
        "none" => 0,
        "silu" | "swish" => SILU,
        other => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `activation` = {other:?}: served are none, silu and swish"
            )));
        }
    };
    if x.shape.len() != 3 {
        return Err(OpError::shape(format!(
            "CausalConvWithState: input {:?} must be [B, C, L]",
            x.shape
        )));
    }
    let (b, c, l) = (x.shape[0], x.shape[1], x.shape[2]);
    let w = same_dtype(req, 1, dt)?
        .ok_or_else(|| OpError::shape("CausalConvWithState: weight is required"))?;
    if w.shape.len() != 3 || w.shape[0] != c || w.shape[1] != 1 || w.shape[2] == 0 {
        return Err(OpError::shape(format!(
            "CausalConvWithState: weight {:?} must be [{c}, 1, K] with K >= 1",
            w.shape
        )));
    }
    let k = w.shape[2];
    if let Some(bias) = same_dtype(req, 2, dt)? {
        if bias.shape != [c] {
            return Err(OpError::shape(format!(
                "CausalConvWithState: bias {:?} must be [{c}]",
                bias.shape
            )));
        }
        flags |= BIAS;
    }
    if let Some(past) = same_dtype(req, 3, dt)? {
        if past.shape != [b, c, k - 1] {
            return Err(OpError::shape(format!(
                "CausalConvWithState: past_state {:?} must be [{b}, {c}, {}]",
                past.shape,
                k - 1
            )));
        }
        flags |= PAST;
    }
    let n_out = req.outputs(2);
    if n_out == 0 || n_out > 2 {
        return Err(OpError::shape(format!(
            "CausalConvWithState has 1 or 2 outputs, {n_out} were asked for"
        )));
    }
    let outputs = vec![
        TensorDesc::new("output", x.shape.clone(), dt),
        TensorDesc::new("present_state", vec![b, c, k - 1], dt),
    ];
    let n = shape::numel(&x.shape)?
        .checked_add(shape::numel(&outputs[1].shape)?)
        .ok_or_else(|| OpError::shape("CausalConvWithState: element count overflows"))?;
    let mut p = ParamPacker::new();
    p.u32(flags).ptr(0, Access::Read).ptr(1, Access::Read);
    for slot in [2, 3] {
        match req.binding(slot) {
            Some(bd) => p.ptr(bd, Access::Read),
            None => p.u64(0),
        };
    }
    // the present state is always written (an unwanted output is allocated and dropped)
    p.ptr(req.output_binding(0), Access::Write)
        .ptr(req.output_binding(1), Access::Write);
    for v in [b, c, l, k] {
        p.u64(v);
    }
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(n, 256, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        launches: vec![umd_sdk::Launch {
            module_id: module_id(dt),
            entry_point: format!("causalconv_{}", dtype::name(dt)),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        outputs,
        workspace_bytes: 0,
    })
}

/// The CPU kernel.
pub fn run<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (x, w) = (r.ptr()?, r.ptr()?);
    let bias = crate::cpu::opt_ptr(&mut r, flags & BIAS != 0)?;
    let past = crate::cpu::opt_ptr(&mut r, flags & PAST != 0)?;
    let (y, state) = (r.ptr()?, r.ptr()?);
    let (b, c, l, k) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let size = std::mem::size_of::<T>() as u64;
    let overflow = || OpError::internal("causalconv: size overflows");
    let n = b
        .checked_mul(c)
        .and_then(|v| v.checked_mul(l))
        .ok_or_else(overflow)?;
    let ns = b
        .checked_mul(c)
        .and_then(|v| v.checked_mul(k - 1))
        .ok_or_else(overflow)?;
    let xv = decode::<T>(bufs.input(x, n * size)?);
    let wv = decode::<T>(bufs.input(w, c * k * size)?);
    let bv = match bias {
        Some(bd) => decode::<T>(bufs.input(bd, c * size)?),
        None => vec![T::Compute::ZERO; c as usize],
    };
    let pv = match past {
        Some(pd) => decode::<T>(bufs.input(pd, ns * size)?),
        None => vec![T::Compute::ZERO; ns as usize],
    };
    let (mut yo, mut so) = (bufs.output(y, n * size)?, bufs.output(state, ns * size)?);
    let (c, l, k) = (c as usize, l as usize, k as usize);
    let (mut yv, mut sv) = (
        vec![T::Compute::ZERO; n as usize],
        Vec::with_capacity(ns as usize),
    );
    for bc in 0..b as usize * c {
        let ch = bc % c;
        let padded = |p: usize| {
            if p < k - 1 {
                pv[bc * (k - 1) + p]
            } else {
                xv[bc * l + p - (k - 1)]
            }
        };
        for t in 0..l {
            let mut acc = T::Compute::ZERO;
            for j in 0..k {
                acc += wv[ch * k + j] * padded(t + j);
            }
            let v = rnd::<T>(acc + bv[ch]);
            yv[bc * l + t] = if flags & SILU != 0 {
                v * (T::Compute::ONE / (T::Compute::ONE + (T::Compute::ZERO - v).exp()))
            } else {
                v
            };
        }
        sv.extend((l..l + k - 1).map(padded));
    }
    encode::<T>(&yv, &mut yo.data);
    encode::<T>(&sv, &mut so.data);
    Ok(vec![yo, so])
}
