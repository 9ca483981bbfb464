//! Planning RotaryEmbedding (opset 23) as one `rotary_{T}` launch, one thread per element.
//!
//! The input is viewed as `[B, A1, A2, D]`: 4-D `[B, H, S, D]` (sequence = A2) or 3-D
//! `[B, S, H * D]` read as `[B, S, H, D]` (sequence = A1, flag [`SEQ_OUTER`]). Element `d < rd`
//! of a head (rd = `rotary_embedding_dim`, default D) pairs with its partner (`d ± rd/2`, or
//! `d ^ 1` when [`INTERLEAVED`]); with `c, s = cos/sin[row, i]` (`i` the pair index),
//! the first of a pair becomes `c·x1 − s·x2` and the second `s·x1 + c·x2`. Elements past `rd`
//! are copied. The cache row is `position_ids[b, s]` (flag [`POSITIONS`]; rows out of range give
//! NaN) or `b * S + s` for `[B, S, rd/2]` caches.
//!
//! Parameters: `flags, x, cos, sin, position_ids (or null), y, n, D, A1, A2, S, rd, rows`.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape;
use umd_sdk::{Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::{float_input, module_id, same_dtype};

pub const INTERLEAVED: u32 = 1;
pub const POSITIONS: u32 = 2;
pub const SEQ_OUTER: u32 = 4;

/// Threads per block.
pub const THREADS: u32 = 256;

/// Plans RotaryEmbedding.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(
        &req.attributes,
        &["interleaved", "rotary_embedding_dim", "num_heads"],
    )?;
    if req.slots() > 4 {
        return Err(OpError::shape(format!(
            "RotaryEmbedding takes at most 4 inputs, got {}",
            req.slots()
        )));
    }
    let a = &req.attributes;
    let (x, dt) = float_input(req, 0)?;
    let num_heads = attr::int_or(a, "num_heads", 0)?;
    if num_heads < 0 {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `num_heads` = {num_heads} must be positive"
        )));
    }
    let mut flags = 0;
    let (batch, a1, a2, d, seq) = match x.shape.len() {
        4 => {
            let [b, h, s, d] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
            (b, h, s, d, s)
        }
        3 => {
            let [b, s, hidden] = [x.shape[0], x.shape[1], x.shape[2]];
            if num_heads == 0 || hidden % num_heads as u64 != 0 {
                return Err(OpError::InvalidAttribute(format!(
                    "attribute `num_heads` = {num_heads} must be given for 3-D inputs and divide \
                     the hidden size {hidden}"
                )));
            }
            flags |= SEQ_OUTER;
            let h = num_heads as u64;
            (b, s, h, hidden / h, s)
        }
        r => {
            return Err(OpError::shape(format!(
                "RotaryEmbedding: input of rank {r}; 3-D or 4-D inputs are served"
            )));
        }
    };
    let rd = match attr::int_or(a, "rotary_embedding_dim", 0)? {
        0 => d,
        r if r > 0 && r as u64 <= d && r % 2 == 0 => r as u64,
        r => {
            return Err(OpError::InvalidAttribute(format!(
                "attribute `rotary_embedding_dim` = {r} must be even and at most the head size {d}"
            )));
        }
    };
    if rd % 2 != 0 {
        return Err(OpError::shape(format!(
            "RotaryEmbedding: the rotated size {rd} must be even"
        )));
    }
    if attr::bool_or(a, "interleaved", false)? {
        flags |= INTERLEAVED;
    }
    let cos = same_dtype(req, 1, dt)?
        .ok_or_else(|| OpError::shape("RotaryEmbedding: cos_cache is required"))?;
    let sin = same_dtype(req, 2, dt)?
        .ok_or_else(|| OpError::shape("RotaryEmbedding: sin_cache is required"))?;
    if cos.shape != sin.shape {
        return Err(OpError::shape(format!(
            "RotaryEmbedding: cos_cache {:?} and sin_cache {:?} differ",
            cos.shape, sin.shape
        )));
    }
    let half = rd / 2;
    let rows = match req.input(3) {
        Some(pos) => {
            if pos.dtype != Dtype::I64 {
                return Err(OpError::dtype(format!(
                    "RotaryEmbedding: position_ids is {}; i64 is served",
                    dtype::name(pos.dtype)
                )));
            }
            if pos.shape != [batch, seq] {
                return Err(OpError::shape(format!(
                    "RotaryEmbedding: position_ids {:?} must be [{batch}, {seq}]",
                    pos.shape
                )));
            }
            if cos.shape.len() != 2 || cos.shape[1] != half {
                return Err(OpError::shape(format!(
                    "RotaryEmbedding: with position_ids the caches must be [max_position, {half}], \
                     got {:?}",
                    cos.shape
                )));
            }
            flags |= POSITIONS;
            cos.shape[0]
        }
        None => {
            if cos.shape != [batch, seq, half] {
                return Err(OpError::shape(format!(
                    "RotaryEmbedding: without position_ids the caches must be [{batch}, {seq}, \
                     {half}], got {:?}",
                    cos.shape
                )));
            }
            batch * seq
        }
    };
    let n = shape::numel(&x.shape)?;
    let mut p = ParamPacker::new();
    p.u32(flags)
        .ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(2, Access::Read);
    match req.binding(3) {
        Some(b) => p.ptr(b, Access::Read),
        None => p.u64(0),
    };
    p.ptr(req.output_binding(0), Access::Write);
    for v in [n, d, a1, a2, seq, rd, rows] {
        p.u64(v);
    }
    let limits = &req.target.limits;
    let (grid, block) = umd_sdk::launch::linear(n, THREADS, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    if req.outputs(1) != 1 {
        return Err(OpError::shape("RotaryEmbedding has one output"));
    }
    Ok(OpPlan {
        launches: vec![Launch {
            module_id: module_id(dt),
            entry_point: format!("rotary_{}", dtype::name(dt)),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        outputs: vec![TensorDesc::new("output", x.shape.clone(), dt)],
        workspace_bytes: 0,
    })
}
