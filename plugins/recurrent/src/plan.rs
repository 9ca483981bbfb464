//! Planning RNN, LSTM and GRU (opsets 1/3/7/14/22 forms): attribute checks, shape inference of
//! Y, Y_h (and LSTM's Y_c), the strides of `layout` 0/1, and the single launch: one block per
//! (direction, batch) pair (grid-stride over pairs), hidden units across the block's threads,
//! the time loop inside. Every output is always produced (a plan may produce unwanted outputs).

use crate::params::{Bindings, Block, Cell, INPUT_FORGET, LINEAR_BEFORE_RESET, Strides};
use crate::{DTYPES, act};
use umd_sdk::{
    Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape,
};

/// Threads per block: the hidden units round up to a warp multiple, at most this many.
const MAX_THREADS: u64 = 256;
/// Blocks at most (the kernels stride over the (direction, batch) pairs).
const MAX_BLOCKS: u64 = 65535;
/// Workspace values per (direction, batch) pair and hidden unit: h, new h, c (or GRU's z), aux.
pub const WS_PER_UNIT: u64 = 4;

pub fn plan(req: &PlanRequestExt, cell: Cell) -> Result<OpPlan, OpError> {
    let op = &req.op;
    let attrs = &req.attributes;
    let mut known = vec![
        "activation_alpha",
        "activation_beta",
        "activations",
        "clip",
        "direction",
        "hidden_size",
        "layout",
        // opset 1 (LSTM, GRU) and 3 (GRU): Y is always produced here, so it changes nothing
        "output_sequence",
    ];
    match cell {
        Cell::Lstm => known.push("input_forget"),
        Cell::Gru => known.push("linear_before_reset"),
        Cell::Rnn => {}
    }
    attr::only(attrs, &known)?;
    let direction = match attr::text_or(attrs, "direction", "forward")?.as_str() {
        "forward" => 0u32,
        "reverse" => 1,
        "bidirectional" => 2,
        other => {
            return Err(OpError::InvalidAttribute(format!(
                "{op}: direction `{other}` (forward, reverse or bidirectional)"
            )));
        }
    };
    let dirs: u64 = if direction == 2 { 2 } else { 1 };
    let layout = attr::int_or(attrs, "layout", 0)?;
    if layout != 0 && layout != 1 {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: layout {layout} (0 or 1)"
        )));
    }
    let clip = match attr::has(attrs, "clip") {
        false => f64::INFINITY,
        true => {
            let c = attr::float_or(attrs, "clip", 0.0)?;
            if c.is_nan() || c < 0.0 {
                return Err(OpError::InvalidAttribute(format!(
                    "{op}: clip {c} (a threshold >= 0)"
                )));
            }
            c
        }
    };
    let mut flags = 0;
    if cell == Cell::Lstm && attr::int_or(attrs, "input_forget", 0)? != 0 {
        flags |= INPUT_FORGET;
    }
    if cell == Cell::Gru && attr::int_or(attrs, "linear_before_reset", 0)? != 0 {
        flags |= LINEAR_BEFORE_RESET;
    }
    let acts = act::parse(attrs, cell, dirs as usize)?;

    // Inputs: X, W, R, B, sequence_lens, initial_h (LSTM: initial_c, P).
    let slots = if cell == Cell::Lstm { 8 } else { 6 };
    if req.slots() < 3 || req.slots() > slots {
        return Err(OpError::shape(format!(
            "{op} takes 3 to {slots} inputs, got {}",
            req.slots()
        )));
    }
    let x = req.required(0)?;
    let w = req.required(1)?;
    let r = req.required(2)?;
    let dt = x.dtype;
    if !DTYPES.contains(&dt) {
        return Err(OpError::dtype(format!(
            "{op}: {} is not served (f32, f16, bf16, f64)",
            dtype::name(dt)
        )));
    }
    let dims = |d: &TensorDesc, rank: usize, what: &str| -> Result<(), OpError> {
        if d.shape.len() != rank {
            return Err(OpError::shape(format!(
                "{op}: {what} must have rank {rank}, got shape {:?}",
                d.shape
            )));
        }
        Ok(())
    };
    dims(x, 3, "X")?;
    dims(w, 3, "W")?;
    dims(r, 3, "R")?;
    let (seq, batch) = if layout == 0 {
        (x.shape[0], x.shape[1])
    } else {
        (x.shape[1], x.shape[0])
    };
    let input = x.shape[2];
    let g = cell.gates();
    let hidden = r.shape[2];
    if attr::has(attrs, "hidden_size") && attr::int(attrs, "hidden_size")? != hidden as i64 {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: hidden_size {} does not match R's shape {:?}",
            attr::int(attrs, "hidden_size")?,
            r.shape
        )));
    }
    let gh = hidden
        .checked_mul(g)
        .ok_or_else(|| OpError::shape(format!("{op}: hidden size {hidden} overflows")))?;
    let expect = |d: &TensorDesc, want: &[u64], what: &str| -> Result<(), OpError> {
        if d.dtype != dt {
            return Err(OpError::dtype(format!(
                "{op}: {what} is {}, X is {} (they must match)",
                dtype::name(d.dtype),
                dtype::name(dt)
            )));
        }
        if d.shape != want {
            return Err(OpError::shape(format!(
                "{op}: {what} must have shape {want:?}, got {:?}",
                d.shape
            )));
        }
        Ok(())
    };
    expect(w, &[dirs, gh, input], "W")?;
    expect(r, &[dirs, gh, hidden], "R")?;
    let state: Vec<u64> = if layout == 0 {
        vec![dirs, batch, hidden]
    } else {
        vec![batch, dirs, hidden]
    };
    if let Some(b) = req.input(3) {
        expect(b, &[dirs, 2 * gh], "B")?;
    }
    if let Some(s) = req.input(4) {
        if s.dtype != Dtype::I32 {
            return Err(OpError::dtype(format!(
                "{op}: sequence_lens must be i32, got {}",
                dtype::name(s.dtype)
            )));
        }
        if s.shape != [batch] {
            return Err(OpError::shape(format!(
                "{op}: sequence_lens must have shape [{batch}], got {:?}",
                s.shape
            )));
        }
    }
    if let Some(h) = req.input(5) {
        expect(h, &state, "initial_h")?;
    }
    if let Some(c) = req.input(6) {
        expect(c, &state, "initial_c")?;
    }
    if let Some(p) = req.input(7) {
        expect(p, &[dirs, 3 * hidden], "P")?;
    }
    let n_out = if cell == Cell::Lstm { 3 } else { 2 };
    if req.outputs(n_out) > n_out {
        return Err(OpError::shape(format!(
            "{op} has at most {n_out} outputs, {} were asked for",
            req.outputs(n_out)
        )));
    }

    let y_shape = if layout == 0 {
        vec![seq, dirs, batch, hidden]
    } else {
        vec![batch, seq, dirs, hidden]
    };
    shape::numel(&y_shape)?;
    let mut outputs = vec![
        TensorDesc::new("Y", y_shape, dt),
        TensorDesc::new("Y_h", state.clone(), dt),
    ];
    if cell == Cell::Lstm {
        outputs.push(TensorDesc::new("Y_c", state, dt));
    }
    let pairs = dirs * batch;
    let cdt = if dt == Dtype::F64 { 8 } else { 4 };
    let ws = shape::numel(&[pairs, hidden, WS_PER_UNIT, cdt])?.max(16);
    let st = if layout == 0 {
        Strides {
            x_t: batch * input,
            x_b: input,
            y_t: dirs * batch * hidden,
            y_d: batch * hidden,
            y_b: hidden,
            s_d: batch * hidden,
            s_b: hidden,
        }
    } else {
        Strides {
            x_t: input,
            x_b: seq * input,
            y_t: dirs * hidden,
            y_d: hidden,
            y_b: seq * dirs * hidden,
            s_d: hidden,
            s_b: dirs * hidden,
        }
    };
    let out = |k: usize| req.output_binding(k);
    let block = Block {
        bind: Bindings {
            x: req.binding(0).expect("X is present"),
            w: req.binding(1).expect("W is present"),
            r: req.binding(2).expect("R is present"),
            b: req.binding(3),
            seq_lens: req.binding(4),
            h0: req.binding(5),
            c0: req.binding(6),
            p: req.binding(7),
            y: out(0),
            yh: out(1),
            yc: (cell == Cell::Lstm).then(|| out(2)),
            ws: out(n_out),
        },
        seq,
        batch,
        input,
        hidden,
        dirs,
        st,
        acts,
        clip,
        direction,
        flags,
    };
    let (params, relocations) = block.pack(req.target.limits.max_param_bytes)?;
    let threads = (hidden.div_ceil(32) * 32).clamp(32, MAX_THREADS) as u32;
    let grid = pairs.clamp(1, MAX_BLOCKS) as u32;
    let (grid, block_dim) = (Dim3::x(grid), Dim3::x(threads));
    umd_sdk::launch::check(grid, block_dim, 0, &req.target.limits)?;
    let name = dtype::name(dt);
    Ok(OpPlan {
        outputs,
        launches: vec![Launch {
            module_id: format!("recurrent_{name}"),
            entry_point: format!("{}_{name}", cell.name()),
            grid,
            block: block_dim,
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: ws,
    })
}
