//! LinearAttention (opset 27) as one `linear_{T}` launch, one thread per `(b, kv head, value
//! column m)`: each column of a head's `[d_k, d_v]` state evolves independently over the
//! sequence, so a thread keeps its column (at most [`MAX_DK`] values) and walks `t`:
//!
//! `S *= exp(decay_t)` (gated rules; per head or per key dimension), `v = beta_t · (v_t − Sᵀk_t)`
//! (delta rules; beta per head or one), `S += k_t ⊗ v`, then for every query head `h` of the
//! group (`h / (H_q / H_kv)` = the kv head) `out[b, t, h, m] = scale · q_t[h] · S[:, m]`.
//! `present_state` is the final state. Q/K/V/decay/beta are `[B, T, H * D]`-style 3-D tensors.
//!
//! Parameters: `flags, q, k, v, past (or null), decay (or null), beta (or null), out, state,
//! B, T, Hq, Hkv, dk, dv, decay_last, beta_last` (u64) and `scale` (f64).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, CpuCall, CpuWrite, OpError, OpPlan, PlanRequestExt, TensorDesc};
use umd_sdk::{attr, cpu::Buffers, dtype, dtype::Element, launch, shape};

use crate::cpu::{Real, decode, encode, opt_ptr};
use crate::{float_input, module_id, same_dtype};

pub const PAST: u32 = 1;
pub const GATED: u32 = 2;
pub const DELTA: u32 = 4;

/// Largest key head size (the state column a thread keeps).
pub const MAX_DK: u64 = 256;

fn positive(req: &PlanRequestExt, name: &str) -> Result<u64, OpError> {
    match attr::int(&req.attributes, name)? {
        v if v > 0 => Ok(v as u64),
        v => Err(OpError::InvalidAttribute(format!(
            "attribute `{name}` = {v} must be positive"
        ))),
    }
}

/// Plans LinearAttention.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    // chunk_size is a tuning hint without effect on the result
    attr::only(
        &req.attributes,
        &[
            "chunk_size",
            "kv_num_heads",
            "q_num_heads",
            "scale",
            "update_rule",
        ],
    )?;
    if req.slots() > 6 {
        return Err(OpError::shape(format!(
            "LinearAttention takes at most 6 inputs, got {}",
            req.slots()
        )));
    }
    let (q, dt) = float_input(req, 0)?;
    let (hq, hkv) = (
        positive(req, "q_num_heads")?,
        positive(req, "kv_num_heads")?,
    );
    if hq % hkv != 0 {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `q_num_heads` = {hq} must be a multiple of `kv_num_heads` = {hkv}"
        )));
    }
    let mut flags = match attr::text_or(&req.attributes, "update_rule", "gated_delta")?.as_str() {
        "linear" => 0,
        "gated" => GATED,
        "delta" => DELTA,
        "gated_delta" => GATED | DELTA,
        other => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `update_rule` = {other:?}: served are linear, gated, delta, gated_delta"
            )));
        }
    };
    let k = same_dtype(req, 1, dt)?
        .ok_or_else(|| OpError::shape("LinearAttention: key is required"))?;
    let v = same_dtype(req, 2, dt)?
        .ok_or_else(|| OpError::shape("LinearAttention: value is required"))?;
    for t in [q, k, v] {
        if t.shape.len() != 3 || t.shape[..2] != q.shape[..2] {
            return Err(OpError::shape(format!(
                "LinearAttention: query {:?}, key {:?} and value {:?} must be [B, T, H * D] alike",
                q.shape, k.shape, v.shape
            )));
        }
    }
    let (b, t) = (q.shape[0], q.shape[1]);
    if q.shape[2] % hq != 0 || k.shape[2] % hkv != 0 || v.shape[2] % hkv != 0 {
        return Err(OpError::shape(format!(
            "LinearAttention: hidden sizes {:?} are not multiples of the heads ({hq}, {hkv})",
            [q.shape[2], k.shape[2], v.shape[2]]
        )));
    }
    let (dk, dv) = (q.shape[2] / hq, v.shape[2] / hkv);
    if k.shape[2] / hkv != dk {
        return Err(OpError::shape(format!(
            "LinearAttention: query and key head sizes differ ({dk} vs {})",
            k.shape[2] / hkv
        )));
    }
    if dk > MAX_DK {
        return Err(OpError::shape(format!(
            "LinearAttention: key head size {dk} exceeds the served maximum of {MAX_DK}"
        )));
    }
    if let Some(p) = same_dtype(req, 3, dt)? {
        if p.shape != [b, hkv, dk, dv] {
            return Err(OpError::shape(format!(
                "LinearAttention: past_state {:?} must be [{b}, {hkv}, {dk}, {dv}]",
                p.shape
            )));
        }
        flags |= PAST;
    }
    let last = |slot: usize, what: &str, allowed: &[u64], on: bool| -> Result<u64, OpError> {
        let t_ = same_dtype(req, slot, dt)?;
        match (t_, on) {
            (None, false) => Ok(0),
            (None, true) => Err(OpError::shape(format!(
                "LinearAttention: this update_rule requires {what}"
            ))),
            (Some(_), false) => Err(OpError::shape(format!(
                "LinearAttention: this update_rule forbids {what}"
            ))),
            (Some(d), true) => {
                let ok =
                    d.shape.len() == 3 && d.shape[..2] == [b, t] && allowed.contains(&d.shape[2]);
                if !ok {
                    return Err(OpError::shape(format!(
                        "LinearAttention: {what} {:?} must be [{b}, {t}, one of {allowed:?}]",
                        d.shape
                    )));
                }
                Ok(d.shape[2])
            }
        }
    };
    let decay_last = last(4, "decay", &[hkv, hkv * dk], flags & GATED != 0)?;
    let beta_last = last(5, "beta", &[hkv, 1], flags & DELTA != 0)?;
    let scale = match attr::float_or(&req.attributes, "scale", 0.0)? {
        0.0 => 1.0 / (dk as f64).sqrt(),
        s => s,
    };
    // the output's element count bounds every product below
    shape::numel(&[b, t, hq, dv.max(1), dk.max(1)])?;
    let n_out = req.outputs(2);
    if n_out == 0 || n_out > 2 {
        return Err(OpError::shape(format!(
            "LinearAttention has 1 or 2 outputs, {n_out} were asked for"
        )));
    }
    let outputs = vec![
        TensorDesc::new("output", vec![b, t, hq * dv], dt),
        TensorDesc::new("present_state", vec![b, hkv, dk, dv], dt),
    ];
    for o in &outputs {
        shape::byte_size(&o.shape, dt)?;
    }
    let mut p = ParamPacker::new();
    p.u32(flags)
        .ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(2, Access::Read);
    for slot in 3..6 {
        match req.binding(slot) {
            Some(bd) => p.ptr(bd, Access::Read),
            None => p.u64(0),
        };
    }
    p.ptr(req.output_binding(0), Access::Write)
        .ptr(req.output_binding(1), Access::Write);
    for x in [b, t, hq, hkv, dk, dv, decay_last, beta_last] {
        p.u64(x);
    }
    p.f64(scale);
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(b * hkv * dv, 128, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        launches: vec![umd_sdk::Launch {
            module_id: module_id(dt),
            entry_point: format!("linear_{}", dtype::name(dt)),
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
    let (q, k, v) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let past = opt_ptr(&mut r, flags & PAST != 0)?;
    let decay = opt_ptr(&mut r, flags & GATED != 0)?;
    let beta = opt_ptr(&mut r, flags & DELTA != 0)?;
    let (out, state) = (r.ptr()?, r.ptr()?);
    let mut u = [0u64; 8];
    for x in &mut u {
        *x = r.u64()?;
    }
    let scale = T::Compute::from_f64(r.f64()?);
    let size = std::mem::size_of::<T>() as u64;
    let cnt = |dims: &[u64]| -> Result<u64, OpError> {
        dims.iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| OpError::internal("linear attention: size overflows"))
    };
    let [b, t, hq, hkv, dk, dv, dl, bl] = u;
    let qv = decode::<T>(bufs.input(q, cnt(&[b, t, hq, dk])? * size)?);
    let kv = decode::<T>(bufs.input(k, cnt(&[b, t, hkv, dk])? * size)?);
    let vv = decode::<T>(bufs.input(v, cnt(&[b, t, hkv, dv])? * size)?);
    let zero = T::Compute::ZERO;
    let opt = |p: Option<u32>, n: u64| -> Result<Vec<T::Compute>, OpError> {
        match p {
            Some(p) => Ok(decode::<T>(bufs.input(p, n * size)?)),
            None => Ok(Vec::new()),
        }
    };
    let pv = opt(past, cnt(&[b, hkv, dk, dv])?)?;
    let dcv = opt(decay, cnt(&[b, t, dl])?)?;
    let bv = opt(beta, cnt(&[b, t, bl])?)?;
    let mut ow = bufs.output(out, cnt(&[b, t, hq, dv])? * size)?;
    let mut sw = bufs.output(state, cnt(&[b, hkv, dk, dv])? * size)?;
    let [b, t, hq, hkv, dk, dv, dl, bl] = u.map(|x| x as usize);
    let group = hq / hkv.max(1);
    let (mut ov, mut sv) = (vec![zero; b * t * hq * dv], vec![zero; b * hkv * dk * dv]);
    let mut col = vec![zero; dk];
    for bi in 0..b {
        for hk in 0..hkv {
            for m in 0..dv {
                let so = (bi * hkv + hk) * dk * dv;
                for (d, c) in col.iter_mut().enumerate() {
                    *c = if past.is_some() {
                        pv[so + d * dv + m]
                    } else {
                        zero
                    };
                }
                for ti in 0..t {
                    let row = bi * t + ti;
                    let kr = &kv[(row * hkv + hk) * dk..][..dk];
                    if flags & GATED != 0 {
                        for (d, c) in col.iter_mut().enumerate() {
                            let g = if dl == hkv {
                                dcv[row * hkv + hk]
                            } else {
                                dcv[(row * hkv + hk) * dk + d]
                            };
                            *c = *c * g.exp();
                        }
                    }
                    let mut vt = vv[(row * hkv + hk) * dv + m];
                    if flags & DELTA != 0 {
                        let mut got = zero;
                        for (c, kx) in col.iter().zip(kr) {
                            got += *c * *kx;
                        }
                        let be = bv[row * bl + if bl == 1 { 0 } else { hk }];
                        vt = be * (vt - got);
                    }
                    for (c, kx) in col.iter_mut().zip(kr) {
                        *c += *kx * vt;
                    }
                    for g in 0..group {
                        let h = hk * group + g;
                        let qr = &qv[(row * hq + h) * dk..][..dk];
                        let mut o = zero;
                        for (qx, c) in qr.iter().zip(&col) {
                            o += *qx * *c;
                        }
                        ov[(row * hq + h) * dv + m] = scale * o;
                    }
                }
                for (d, c) in col.iter().enumerate() {
                    sv[so + d * dv + m] = *c;
                }
            }
        }
    }
    encode::<T>(&ov, &mut ow.data);
    encode::<T>(&sv, &mut sw.data);
    Ok(vec![ow, sw])
}
