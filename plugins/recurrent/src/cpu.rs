//! The CPU kernels of `rnn_{T}`, `lstm_{T}`, `gru_{T}`, reading the [`Block`] the CUDA kernels
//! read. Inputs are converted once to the compute type (f32, or f64 for f64). Per direction the
//! input products `x · Wᵀ` of every step are one product (on the device's matrix unit for f32,
//! ABI 1.8; one step's rows at a time past [`MAX_INPUT_PRODUCTS`]), `Rᵀ` is packed once, and
//! each step multiplies every batch row's state by it (the SDK's packed GEMM) before the gates
//! (same gate order, clip and activation placement as the CUDA kernel; sums in another order,
//! so within rounding of it). Rows past their `sequence_lens` are computed with the rest but
//! never used.

use crate::act::{Real, apply};
use crate::params::{Block, Cell, INPUT_FORGET, LINEAR_BEFORE_RESET};
use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::Element;
use umd_sdk::gemm::{self, PackedB, Strided, Work};
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

/// Most input-product elements (`seq × batch × gates × hidden`) computed for every step at
/// once (one product on the matrix unit); past it, one step's rows at a time.
const MAX_INPUT_PRODUCTS: usize = 1 << 22;

#[cfg(test)]
thread_local! {
    /// (Tests: [`MAX_INPUT_PRODUCTS`] for this thread, so that every case runs both ways.)
    pub static INPUT_PRODUCTS_LIMIT: std::cell::Cell<usize> =
        const { std::cell::Cell::new(MAX_INPUT_PRODUCTS) };
}

fn input_products_limit() -> usize {
    #[cfg(test)]
    return INPUT_PRODUCTS_LIMIT.with(|l| l.get());
    #[cfg(not(test))]
    MAX_INPUT_PRODUCTS
}

pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let (cell, dt) = decode(&call.entry_point)?;
    let blk = Block::read(&call.params, &call.relocations)?;
    match dt {
        Dtype::F32 => run_typed::<f32>(call, &blk, cell),
        Dtype::F16 => run_typed::<f16>(call, &blk, cell),
        Dtype::Bf16 => run_typed::<bf16>(call, &blk, cell),
        _ => run_typed::<f64>(call, &blk, cell),
    }
}

/// `{cell}_{dtype}` → (cell, dtype).
fn decode(entry: &str) -> Result<(Cell, Dtype), OpError> {
    let bad = || OpError::internal(format!("unknown entry point `{entry}`"));
    let (c, d) = entry.split_once('_').ok_or_else(bad)?;
    let cell = [Cell::Rnn, Cell::Lstm, Cell::Gru]
        .into_iter()
        .find(|k| k.name() == c)
        .ok_or_else(bad)?;
    let dt = umd_sdk::dtype::from_name(d)
        .filter(|d| crate::DTYPES.contains(d))
        .ok_or_else(bad)?;
    Ok((cell, dt))
}

fn usize_of(v: u64) -> Result<usize, OpError> {
    usize::try_from(v).map_err(|_| OpError::internal(format!("size {v} overflows")))
}

/// Every element of binding `b` (`n` elements) in the compute type.
fn load<T: Element>(bufs: &Buffers, b: u32, n: usize) -> Result<Vec<T::Compute>, OpError> {
    let s = std::mem::size_of::<T>();
    let bytes = bufs.input(b, (n * s) as u64)?;
    Ok(bytes[..n * s]
        .chunks_exact(s)
        .map(|c| T::load(c).to_compute())
        .collect())
}

fn run_typed<T: Element>(call: &CpuCall, blk: &Block, cell: Cell) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real + gemm::Acc,
{
    let bufs = Buffers::new(call);
    let (seq, batch, input, hidden, dirs) = (
        usize_of(blk.seq)?,
        usize_of(blk.batch)?,
        usize_of(blk.input)?,
        usize_of(blk.hidden)?,
        usize_of(blk.dirs)?,
    );
    let g = cell.gates() as usize;
    let es = std::mem::size_of::<T>();
    let state_n = dirs * batch * hidden;
    let y_n = seq * state_n;
    let bind = &blk.bind;
    let x = load::<T>(&bufs, bind.x, seq * batch * input)?;
    let w = load::<T>(&bufs, bind.w, dirs * g * hidden * input)?;
    let r = load::<T>(&bufs, bind.r, dirs * g * hidden * hidden)?;
    let opt = |b: Option<u32>, n: usize| b.map(|b| load::<T>(&bufs, b, n)).transpose();
    let bias = opt(bind.b, dirs * 2 * g * hidden)?;
    let h0 = opt(bind.h0, state_n)?;
    let c0 = opt(bind.c0, state_n)?;
    let peep = opt(bind.p, dirs * 3 * hidden)?;
    let lens: Option<Vec<i32>> = bind
        .seq_lens
        .map(|b| {
            bufs.input(b, (batch * 4) as u64).map(|v| {
                v[..batch * 4]
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect()
            })
        })
        .transpose()?;
    let mut y = bufs.output(bind.y, (y_n * es) as u64)?;
    let mut yh = bufs.output(bind.yh, (state_n * es) as u64)?;
    let mut yc = bind
        .yc
        .map(|b| bufs.output(b, (state_n * es) as u64))
        .transpose()?;
    let ws_size = call
        .buffers
        .iter()
        .find(|b| b.binding == bind.ws)
        .map_or(0, |b| b.size);
    let ws = bufs.output(bind.ws, ws_size)?;

    let c = |v: f64| T::Compute::from_f64(v);
    let clip = c(blk.clip);
    let clamp = |v: T::Compute| {
        if v < -clip {
            -clip
        } else if v > clip {
            clip
        } else {
            v
        }
    };
    let st = &blk.st;
    let store = |buf: &mut [u8], i: usize, v: T::Compute| {
        T::from_compute(v).store(&mut buf[i * es..i * es + es]);
    };
    let zero = T::Compute::ZERO;
    let one = T::Compute::ONE;
    let gh = g * hidden;
    let lbr = cell == Cell::Gru && blk.flags & LINEAR_BEFORE_RESET != 0;
    let len_of = |b: usize| match &lens {
        Some(l) => (l[b].max(0) as usize).min(seq),
        None => seq,
    };
    // x's rows in (t, b) order, contiguous: the input products of every step at once when
    // they fit, else one step's rows at a time
    let all_steps = seq * batch * gh <= input_products_limit();
    let x_row = |t: usize, b: usize| {
        let xo = t * st.x_t as usize + b * st.x_b as usize;
        &x[xo..xo + input]
    };
    let mut xrows = Vec::new();
    let (mut xw, mut hr, mut hr2) = (Vec::new(), Vec::new(), Vec::new());
    let (mut work, mut apack) = (Work::default(), Vec::new());
    let (mut h, mut hn, mut cs, mut aux) = (
        vec![zero; batch * hidden],
        vec![zero; batch * hidden],
        vec![zero; batch * hidden],
        vec![zero; batch * hidden],
    );
    for d in 0..dirs {
        let rev = blk.direction == 1 || (blk.direction == 2 && d == 1);
        let na = cell.activations();
        let act = |k: usize, v: T::Compute| {
            let s = d * na + k;
            apply(
                blk.acts.kind[s],
                c(blk.acts.alpha[s]),
                c(blk.acts.beta[s]),
                v,
            )
        };
        let wd = &w[d * gh * input..(d + 1) * gh * input];
        let rd = &r[d * gh * hidden..(d + 1) * gh * hidden];
        // Wᵀ (input × gh) and Rᵀ (hidden × gh) as views of W and R; Rᵀ packed once
        let wt = Strided {
            data: wd,
            rs: 1,
            cs: input,
        };
        let packed = |data: &[T::Compute], cols: usize| {
            let view = Strided {
                data,
                rs: 1,
                cs: hidden,
            };
            PackedB::pack(hidden, 0..cols, view)
                .ok_or_else(|| OpError::internal("the packed recurrence weights do not fit memory"))
        };
        let rp = packed(rd, gh)?;
        // GRU without linear_before_reset: gate h's recurrence multiplies (r ⊙ h), later
        let rp2 = if cell == Cell::Gru && !lbr {
            Some(packed(&rd[2 * hidden * hidden..], hidden)?)
        } else {
            None
        };
        // the biases added to the input products: Wb + Rb, but Wb alone for GRU's gate h
        // under linear_before_reset (its Rb is inside the reset product)
        let bo = d * 2 * gh;
        let bx: Vec<T::Compute> = (0..gh)
            .map(|row| match &bias {
                Some(bv) if lbr && row >= 2 * hidden => bv[bo + row],
                Some(bv) => bv[bo + row] + bv[bo + gh + row],
                None => zero,
            })
            .collect();
        let rbh = |j: usize| {
            bias.as_ref()
                .map_or(zero, |bv| bv[bo + gh + 2 * hidden + j])
        };
        let pp = |k: usize, j: usize| {
            peep.as_ref()
                .map_or(zero, |p| p[d * 3 * hidden + k * hidden + j])
        };
        if all_steps {
            xrows.clear();
            for t in 0..seq {
                for b in 0..batch {
                    xrows.extend_from_slice(x_row(t, b));
                }
            }
            let xa = Strided {
                data: &xrows,
                rs: input,
                cs: 1,
            };
            gemm::product((seq * batch, gh, input), xa, None, wt, &mut work, &mut xw);
        }
        for b in 0..batch {
            let so = d * st.s_d as usize + b * st.s_b as usize;
            for j in 0..hidden {
                h[b * hidden + j] = h0.as_ref().map_or(zero, |v| v[so + j]);
                cs[b * hidden + j] = c0.as_ref().map_or(zero, |v| v[so + j]);
            }
        }
        let step_of = |b: usize, s: usize| {
            let len = len_of(b);
            (s < len).then(|| if rev { len - 1 - s } else { s })
        };
        for s in 0..seq {
            if (0..batch).all(|b| step_of(b, s).is_none()) {
                break;
            }
            // this step's input rows (rows past their sequence: zeros, unused)
            if !all_steps {
                xrows.clear();
                for b in 0..batch {
                    match step_of(b, s) {
                        Some(t) => xrows.extend_from_slice(x_row(t, b)),
                        None => xrows.resize(xrows.len() + input, zero),
                    }
                }
                let xa = Strided {
                    data: &xrows,
                    rs: input,
                    cs: 1,
                };
                gemm::product((batch, gh, input), xa, None, wt, &mut work, &mut xw);
            }
            // the recurrence of every row: h · Rᵀ
            let hv = Strided {
                data: &h,
                rs: hidden,
                cs: 1,
            };
            gemm::pack_a(batch, hidden, hv, &mut apack);
            gemm::multiply(batch, &apack, &rp, rp.columns(&(0..gh)), &mut hr);
            let xw_row = |b: usize, t: usize| {
                let row = if all_steps { t * batch + b } else { b };
                &xw[row * gh..(row + 1) * gh]
            };
            for b in 0..batch {
                let Some(t) = step_of(b, s) else { continue };
                let (xr, rr_) = (xw_row(b, t), &hr[b * gh..(b + 1) * gh]);
                let pre = |gi: usize, j: usize| {
                    let row = gi * hidden + j;
                    xr[row] + bx[row] + rr_[row]
                };
                let hb = b * hidden;
                match cell {
                    Cell::Rnn => {
                        for j in 0..hidden {
                            hn[hb + j] = act(0, clamp(pre(0, j)));
                        }
                    }
                    Cell::Lstm => {
                        for j in 0..hidden {
                            let cp = cs[hb + j];
                            let i = act(0, clamp(pre(0, j) + pp(0, j) * cp));
                            let f = if blk.flags & INPUT_FORGET != 0 {
                                one - i
                            } else {
                                act(0, clamp(pre(2, j) + pp(2, j) * cp))
                            };
                            let cg = act(1, clamp(pre(3, j)));
                            let cn = f * cp + i * cg;
                            let o = act(0, clamp(pre(1, j) + pp(1, j) * cn));
                            hn[hb + j] = o * act(2, cn);
                            cs[hb + j] = cn;
                        }
                    }
                    Cell::Gru => {
                        for j in 0..hidden {
                            let z = act(0, clamp(pre(0, j)));
                            let rr = act(0, clamp(pre(1, j)));
                            cs[hb + j] = z;
                            if lbr {
                                // Rb_h inside the reset product
                                let row = 2 * hidden + j;
                                hn[hb + j] = rr * (rr_[row] + rbh(j));
                            } else {
                                aux[hb + j] = rr * h[hb + j];
                            }
                        }
                    }
                }
            }
            if cell == Cell::Gru {
                // gate h: (r ⊙ h) · R_hᵀ without linear_before_reset
                if let Some(rp2) = &rp2 {
                    let av = Strided {
                        data: &aux,
                        rs: hidden,
                        cs: 1,
                    };
                    gemm::pack_a(batch, hidden, av, &mut apack);
                    gemm::multiply(batch, &apack, rp2, rp2.columns(&(0..hidden)), &mut hr2);
                }
                for b in 0..batch {
                    let Some(t) = step_of(b, s) else { continue };
                    let xr = xw_row(b, t);
                    let hb = b * hidden;
                    for j in 0..hidden {
                        let row = 2 * hidden + j;
                        let hp = if lbr {
                            xr[row] + bx[row] + hn[hb + j]
                        } else {
                            xr[row] + bx[row] + hr2[hb + j]
                        };
                        let ht = act(1, clamp(hp));
                        let z = cs[hb + j];
                        hn[hb + j] = (one - z) * ht + z * h[hb + j];
                    }
                }
            }
            for b in 0..batch {
                let Some(t) = step_of(b, s) else { continue };
                let hb = b * hidden;
                h[hb..hb + hidden].copy_from_slice(&hn[hb..hb + hidden]);
                let yo = t * st.y_t as usize + d * st.y_d as usize + b * st.y_b as usize;
                for (j, v) in h[hb..hb + hidden].iter().enumerate() {
                    store(&mut y.data, yo + j, *v);
                }
            }
        }
        for b in 0..batch {
            let len = len_of(b);
            for t in len..seq {
                let yo = t * st.y_t as usize + d * st.y_d as usize + b * st.y_b as usize;
                for j in 0..hidden {
                    store(&mut y.data, yo + j, zero);
                }
            }
            // a sequence of length 0 has zero final states (as onnxruntime answers)
            let fin = |v: T::Compute| if len == 0 { zero } else { v };
            let so = d * st.s_d as usize + b * st.s_b as usize;
            for j in 0..hidden {
                store(&mut yh.data, so + j, fin(h[b * hidden + j]));
                if let Some(yc) = &mut yc {
                    store(&mut yc.data, so + j, fin(cs[b * hidden + j]));
                }
            }
        }
    }
    let mut out = vec![y, yh];
    out.extend(yc);
    out.push(ws);
    Ok(out)
}
