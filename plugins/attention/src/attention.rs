//! Planning Attention (opsets 23, 24 and 25's window), and FlexAttention without graph
//! attributes, as one `attention_{T}` launch: one block
//! per query row `(b, h, i)` (grid-stride), which also copies its share of the present key and
//! value caches (grid-stride over their elements).
//!
//! Q, K and V are addressed through (batch, head, sequence) strides with contiguous head
//! elements, so 3-D (`[B, S, H * D]`) and 4-D (`[B, H, S, D]`) inputs take the same kernel.
//! Key `t` of the total sequence `T = P + S_kv` is `past_key[.., t, ..]` for `t < P`, else
//! `K[.., t - P, ..]`. Query head `h` reads key/value head `h / (H_q / H_kv)` (grouped-query).
//!
//! The score of query `i` and key `j`, as the ONNX reference computes it (with its rounding
//! points: the scaled Q and K, the product and the biased score are rounded to `T`):
//! `s = softcap(Σ_d (q_d·√scale)(k_d·√scale))`, `x = s + bias(b, h, i, j)`, where the bias sums
//! the mask (bool: 0 / -inf; float: its value; -inf past the mask's last dimension), the causal
//! term (`j <= i + offset`), the window terms and the padding term (`j < nonpad[b]`), each 0 or
//! -inf. `offset` is `P` with a past cache, `nonpad[b] - S_q` with `nonpad_kv_seqlen`, else 0.
//! Softmax over `j` (a row whose max is -inf subtracts 0; a zero sum divides by 1), rounded as
//! numpy does for half types ([`SOFTMAX_ROUND`], [`SEQ_SUM`]); a row whose bias is -inf
//! everywhere gets probabilities 0. `Y = Σ_j p_j (rounded to T) · v_j`.
//!
//! Parameters: `flags, mode, q, k, v, mask, past_key, past_value, nonpad, y, present_key,
//! present_value, qk` (absent pointers null), then `B, Hq, Hkv, Sq, Skv, P, Dk, Dv, mask_len`,
//! the strides `q (b, h, s), k (b, h, s), v (b, h, s), y (b, h, s), mask (b, h, i, j)` (u64),
//! `sqrt_scale, softcap` (f64) and `left, right` (i64).

use umd_sdk::params::ParamPacker;
use umd_sdk::shape;
use umd_sdk::{
    Access, Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, launch,
};

use crate::{float_input, module_id, same_dtype};

/// Flag bits of the `attention` kernel.
pub const CAUSAL: u32 = 1;
pub const MASK: u32 = 2;
pub const MASK_BOOL: u32 = 4;
pub const PAST: u32 = 8;
pub const NONPAD: u32 = 16;
pub const PRESENT_K: u32 = 32;
pub const QK_OUT: u32 = 64;
pub const WINDOW: u32 = 128;
pub const PRESENT_V: u32 = 256;
/// The softmax rounds as numpy does in the input's (half) type: `x - max`, `exp`, the sum and
/// the quotient each rounded to `T`.
pub const SOFTMAX_ROUND: u32 = 512;
/// The softmax sum is accumulated in order, each partial sum rounded to `T` (numpy's reduction
/// of an `ml_dtypes` bfloat16 array); otherwise it is summed in the compute type.
pub const SEQ_SUM: u32 = 1024;
/// The probabilities multiply V unrounded (FlexAttention); otherwise they are rounded to `T`.
pub const P_EXACT: u32 = 2048;

/// Threads per block; each thread accumulates at most [`MAX_PER_THREAD`] output elements of a
/// row, so the value head size is at most `THREADS * MAX_PER_THREAD`.
pub const THREADS: u32 = 128;
pub const MAX_PER_THREAD: u64 = 8;

/// (batch, heads, sequence, head size) and the (batch, head, sequence) element strides of a
/// 3-D `[B, S, H * D]` or 4-D `[B, H, S, D]` tensor with `heads` heads (3-D only).
fn layout(t: &TensorDesc, heads: Option<u64>, what: &str) -> Result<([u64; 4], [u64; 3]), OpError> {
    match (t.shape.len(), heads) {
        (4, _) => {
            let [b, h, s, d] = [t.shape[0], t.shape[1], t.shape[2], t.shape[3]];
            Ok(([b, h, s, d], [h * s * d, s * d, d]))
        }
        (3, Some(h)) => {
            let [b, s, hidden] = [t.shape[0], t.shape[1], t.shape[2]];
            if h == 0 || hidden % h != 0 {
                return Err(OpError::shape(format!(
                    "Attention: {what} hidden size {hidden} is not a multiple of {h} heads"
                )));
            }
            let d = hidden / h;
            Ok(([b, h, s, d], [s * hidden, d, hidden]))
        }
        (3, None) => Err(OpError::InvalidAttribute(
            "Attention: 3-D inputs need the attributes `q_num_heads` and `kv_num_heads`".into(),
        )),
        (r, _) => Err(OpError::shape(format!(
            "Attention: {what} `{}` has rank {r}; 3-D or 4-D inputs are served",
            t.name
        ))),
    }
}

/// `v` rounded to the storage precision of `dt` (the reference casts √scale to the input type).
fn round_to(dt: Dtype, v: f64) -> f64 {
    match dt {
        Dtype::F32 => v as f32 as f64,
        Dtype::F16 => half::f16::from_f64(v).to_f64(),
        Dtype::Bf16 => half::bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

fn positive_attr(req: &PlanRequestExt, name: &str) -> Result<Option<u64>, OpError> {
    if !attr::has(&req.attributes, name) {
        return Ok(None);
    }
    match attr::int(&req.attributes, name)? {
        v if v > 0 => Ok(Some(v as u64)),
        v => Err(OpError::InvalidAttribute(format!(
            "attribute `{name}` = {v} must be positive"
        ))),
    }
}

/// Plans Attention.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(
        &req.attributes,
        &[
            "is_causal",
            "kv_num_heads",
            "q_num_heads",
            "qk_matmul_output_mode",
            "scale",
            "softcap",
            "softmax_precision",
            "left_window_size",
            "right_window_size",
        ],
    )?;
    if req.slots() > 7 {
        return Err(OpError::shape(format!(
            "Attention takes at most 7 inputs, got {}",
            req.slots()
        )));
    }
    plan_with(req, false)
}

/// Plans FlexAttention (`ai.onnx.preview` opset 1) without its graph attributes: 4-D
/// attention without mask whose softmax runs in f32 (or `softmax_precision`) and whose
/// probabilities multiply V unrounded ([`P_EXACT`]); `score_mod`/`prob_mod` are refused.
pub fn plan_flex(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["scale", "softmax_precision"])?;
    if req.slots() > 3 {
        return Err(OpError::shape(format!(
            "FlexAttention takes 3 inputs, got {}",
            req.slots()
        )));
    }
    if req.input(0).is_some_and(|q| q.shape.len() != 4) {
        return Err(OpError::shape("FlexAttention: Q, K and V must be 4-D"));
    }
    if req.outputs(1) != 1 {
        return Err(OpError::shape("FlexAttention has one output"));
    }
    plan_with(req, true)
}

fn plan_with(req: &PlanRequestExt, flex: bool) -> Result<OpPlan, OpError> {
    let a = &req.attributes;
    let (q, dt) = float_input(req, 0)?;
    let k = same_dtype(req, 1, dt)?.ok_or_else(|| OpError::shape("Attention: K is required"))?;
    let v = same_dtype(req, 2, dt)?.ok_or_else(|| OpError::shape("Attention: V is required"))?;
    if k.shape.len() != q.shape.len() || v.shape.len() != q.shape.len() {
        return Err(OpError::shape(format!(
            "Attention: Q {:?}, K {:?} and V {:?} must have the same rank",
            q.shape, k.shape, v.shape
        )));
    }
    let (qh_attr, kvh_attr) = (
        positive_attr(req, "q_num_heads")?,
        positive_attr(req, "kv_num_heads")?,
    );
    let three_d = q.shape.len() == 3;
    let heads = |h: Option<u64>| if three_d { h } else { None };
    let ([batch, hq, sq, dk], qs) = layout(q, heads(qh_attr), "Q")?;
    let ([kb, hkv, skv, dk2], ks) = layout(k, heads(kvh_attr), "K")?;
    let ([vb, hv, skv2, dv], vs) = layout(v, heads(kvh_attr), "V")?;
    if kb != batch || vb != batch || hv != hkv || skv2 != skv || dk2 != dk {
        return Err(OpError::shape(format!(
            "Attention: Q {:?}, K {:?} and V {:?} disagree on batch, heads, key length or head size",
            q.shape, k.shape, v.shape
        )));
    }
    if hkv == 0 || hq % hkv != 0 {
        return Err(OpError::shape(format!(
            "Attention: {hq} query heads are not a multiple of {hkv} key/value heads"
        )));
    }
    if dv > THREADS as u64 * MAX_PER_THREAD {
        return Err(OpError::shape(format!(
            "Attention: value head size {dv} exceeds the served maximum of {}",
            THREADS as u64 * MAX_PER_THREAD
        )));
    }

    // caches
    let mut flags = 0;
    let past_key = same_dtype(req, 4, dt)?;
    let past_value = same_dtype(req, 5, dt)?;
    let past = match (past_key, past_value) {
        (None, None) => 0,
        (Some(pk), Some(pv)) => {
            let p = pk.shape.get(2).copied().unwrap_or(0);
            if pk.shape != [batch, hkv, p, dk] || pv.shape != [batch, hkv, p, dv] {
                return Err(OpError::shape(format!(
                    "Attention: past_key {:?} / past_value {:?} must be [{batch}, {hkv}, P, {dk}] / \
                     [{batch}, {hkv}, P, {dv}]",
                    pk.shape, pv.shape
                )));
            }
            flags |= PAST;
            p
        }
        _ => {
            return Err(OpError::shape(
                "Attention: past_key and past_value must be given together",
            ));
        }
    };
    let total = past
        .checked_add(skv)
        .ok_or_else(|| OpError::shape("Attention: key length overflows"))?;
    if let Some(np) = req.input(6) {
        if np.dtype != Dtype::I64 {
            return Err(OpError::dtype(format!(
                "Attention: nonpad_kv_seqlen is {}; i64 is served",
                dtype::name(np.dtype)
            )));
        }
        if np.shape != [batch] {
            return Err(OpError::shape(format!(
                "Attention: nonpad_kv_seqlen {:?} must be [{batch}]",
                np.shape
            )));
        }
        if flags & PAST != 0 {
            return Err(OpError::shape(
                "Attention: nonpad_kv_seqlen cannot be combined with past_key/past_value",
            ));
        }
        flags |= NONPAD;
    }

    // mask, broadcast (right-aligned) to [B, Hq, Sq, T]; its last dimension is padded with -inf
    let mut mask_len = 0;
    let mut ms = [0u64; 4];
    if let Some(m) = req.input(3) {
        if m.dtype == Dtype::Boolean {
            flags |= MASK_BOOL;
        } else if m.dtype != dt {
            return Err(OpError::dtype(format!(
                "Attention: attn_mask is {}; bool or the dtype of Q ({}) is served",
                dtype::name(m.dtype),
                dtype::name(dt)
            )));
        }
        let r = m.shape.len();
        if r == 0 || r > 4 {
            return Err(OpError::shape(format!(
                "Attention: attn_mask of rank {r} (1 to 4 served)"
            )));
        }
        mask_len = m.shape[r - 1];
        if mask_len > total {
            return Err(OpError::shape(format!(
                "Attention: attn_mask's last dimension {mask_len} exceeds the {total} keys"
            )));
        }
        let own = shape::contiguous_strides(&m.shape);
        let full = [batch, hq, sq];
        for (d, &want) in full.iter().enumerate() {
            // aligned dimension d of [B, Hq, Sq] is mask dimension r - 4 + d
            let Some(md) = (d + r).checked_sub(4) else {
                continue;
            };
            let got = m.shape[md];
            if got == want {
                ms[d] = if got == 1 { 0 } else { own[md] };
            } else if got != 1 {
                return Err(OpError::shape(format!(
                    "Attention: attn_mask {:?} does not broadcast to [{batch}, {hq}, {sq}, {total}]",
                    m.shape
                )));
            }
        }
        ms[3] = 1;
        flags |= MASK;
    }

    // attributes
    if attr::bool_or(a, "is_causal", false)? {
        flags |= CAUSAL;
    }
    let mode = attr::int_or(a, "qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&mode) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `qk_matmul_output_mode` = {mode} must be 0 to 3"
        )));
    }
    let precision = attr::int_or(a, "softmax_precision", 0)?;
    if !matches!(precision, 0 | 1 | 10 | 11 | 16) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `softmax_precision` = {precision} is not a float type"
        )));
    }
    // without a float/double softmax_precision the reference's softmax runs in the input type
    if flex {
        flags |= P_EXACT;
    } else if matches!(dt, Dtype::F16 | Dtype::Bf16) && !matches!(precision, 1 | 11) {
        flags |= SOFTMAX_ROUND;
        if dt == Dtype::Bf16 {
            flags |= SEQ_SUM;
        }
    }
    let softcap = attr::float_or(a, "softcap", 0.0)?;
    let scale = match attr::has(a, "scale") {
        true => attr::float_or(a, "scale", 1.0)?,
        false => 1.0 / (dk as f64).sqrt(),
    };
    let (left, right) = (
        attr::int_or(a, "left_window_size", -1)?,
        attr::int_or(a, "right_window_size", -1)?,
    );
    if left < -1 || right < -1 {
        return Err(OpError::InvalidAttribute(format!(
            "attributes `left_window_size` = {left} / `right_window_size` = {right} must be -1 or \
             non-negative"
        )));
    }
    if left >= 0 || right >= 0 {
        flags |= WINDOW;
    }

    // outputs
    let n_out = req.outputs(1);
    if n_out == 0 || n_out > 4 {
        return Err(OpError::shape(format!(
            "Attention has 1 to 4 outputs, {n_out} were asked for"
        )));
    }
    // every size below is at most an element count of Y, checked here
    let rows = shape::numel(&[batch, hq, sq])?;
    shape::numel(&[rows, dv.max(1), total.max(1)])?;
    let y_shape = if three_d {
        vec![batch, sq, hq * dv]
    } else {
        vec![batch, hq, sq, dv]
    };
    let ys = if three_d {
        [sq * hq * dv, dv, hq * dv]
    } else {
        [hq * sq * dv, sq * dv, dv]
    };
    let mut outputs = vec![TensorDesc::new("Y", y_shape.clone(), dt)];
    if n_out > 1 {
        outputs.push(TensorDesc::new(
            "present_key",
            vec![batch, hkv, total, dk],
            dt,
        ));
        flags |= PRESENT_K;
    }
    if n_out > 2 {
        outputs.push(TensorDesc::new(
            "present_value",
            vec![batch, hkv, total, dv],
            dt,
        ));
        flags |= PRESENT_V;
    }
    if n_out > 3 {
        outputs.push(TensorDesc::new(
            "qk_matmul_output",
            vec![batch, hq, sq, total],
            dt,
        ));
        flags |= QK_OUT;
    }
    for o in &outputs {
        shape::byte_size(&o.shape, dt)?;
    }

    let mut p = ParamPacker::new();
    p.u32(flags).u32(mode as u32);
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(2, Access::Read);
    for slot in 3..7 {
        match req.binding(slot) {
            Some(b) => p.ptr(b, Access::Read),
            None => p.u64(0),
        };
    }
    p.ptr(req.output_binding(0), Access::Write);
    for k in 1..4 {
        if k < n_out {
            p.ptr(req.output_binding(k), Access::Write);
        } else {
            p.u64(0);
        }
    }
    for x in [batch, hq, hkv, sq, skv, past, dk, dv, mask_len] {
        p.u64(x);
    }
    for x in qs.iter().chain(&ks).chain(&vs).chain(&ys).chain(&ms) {
        p.u64(*x);
    }
    // FlexAttention takes the square root in f32
    let sqrt_scale = if flex {
        (scale as f32).sqrt() as f64
    } else {
        scale.sqrt()
    };
    p.f64(round_to(dt, sqrt_scale))
        .f64(softcap)
        .i64(left)
        .i64(right);

    let limits = &req.target.limits;
    let grid = Dim3::x(rows.clamp(1, limits.max_grid_dims.x as u64) as u32);
    let block = Dim3::x(THREADS);
    launch::check(grid, block, 0, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        launches: vec![Launch {
            module_id: module_id(dt),
            entry_point: format!("attention_{}", dtype::name(dt)),
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
