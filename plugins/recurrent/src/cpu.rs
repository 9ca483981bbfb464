//! The CPU kernels of `rnn_{T}`, `lstm_{T}`, `gru_{T}`: the reference of the CUDA kernels,
//! reading the same [`Block`]. Inputs are converted once to the compute type (f32, or f64 for
//! f64); then each (direction, batch) pair runs its time loop exactly as one CUDA block does
//! (same gate order, same clip and activation placement, states kept in the compute type).

use crate::act::{Real, apply};
use crate::params::{Block, Cell, INPUT_FORGET, LINEAR_BEFORE_RESET};
use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::Element;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

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
    T::Compute: Real,
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
    let (mut h, mut hn, mut cs, mut aux) = (
        vec![zero; hidden],
        vec![zero; hidden],
        vec![zero; hidden],
        vec![zero; hidden],
    );
    let dot =
        |a: &[T::Compute], b: &[T::Compute]| a.iter().zip(b).fold(zero, |s, (p, q)| s + *p * *q);
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
        let wd = &w[d * g * hidden * input..(d + 1) * g * hidden * input];
        let rd = &r[d * g * hidden * hidden..(d + 1) * g * hidden * hidden];
        for b in 0..batch {
            let len = match &lens {
                Some(l) => (l[b].max(0) as usize).min(seq),
                None => seq,
            };
            let so = d * st.s_d as usize + b * st.s_b as usize;
            for j in 0..hidden {
                h[j] = h0.as_ref().map_or(zero, |v| v[so + j]);
                cs[j] = c0.as_ref().map_or(zero, |v| v[so + j]);
            }
            for s in 0..len {
                let t = if rev { len - 1 - s } else { s };
                let xo = t * st.x_t as usize + b * st.x_b as usize;
                let xt = &x[xo..xo + input];
                // pre-activation of gate `gi` of unit `j`, without the recurrent term
                // (with the recurrence bias Rb unless `rb` is false)
                let pre_xb = |gi: usize, j: usize, rb: bool| {
                    let row = gi * hidden + j;
                    let mut v = dot(&wd[row * input..(row + 1) * input], xt);
                    if let Some(bv) = &bias {
                        let bo = d * 2 * g * hidden;
                        v = v + bv[bo + row];
                        if rb {
                            v = v + bv[bo + g * hidden + row];
                        }
                    }
                    v
                };
                let pre_x = |gi: usize, j: usize| pre_xb(gi, j, true);
                let rec = |gi: usize, j: usize, hv: &[T::Compute]| {
                    let row = gi * hidden + j;
                    dot(&rd[row * hidden..(row + 1) * hidden], hv)
                };
                match cell {
                    Cell::Rnn => {
                        for (j, v) in hn.iter_mut().enumerate() {
                            *v = act(0, clamp(pre_x(0, j) + rec(0, j, &h)));
                        }
                    }
                    Cell::Lstm => {
                        let pp = |k: usize, j: usize| {
                            peep.as_ref()
                                .map_or(zero, |p| p[d * 3 * hidden + k * hidden + j])
                        };
                        for j in 0..hidden {
                            let cp = cs[j];
                            let i = act(0, clamp(pre_x(0, j) + rec(0, j, &h) + pp(0, j) * cp));
                            let f = if blk.flags & INPUT_FORGET != 0 {
                                one - i
                            } else {
                                act(0, clamp(pre_x(2, j) + rec(2, j, &h) + pp(2, j) * cp))
                            };
                            let cg = act(1, clamp(pre_x(3, j) + rec(3, j, &h)));
                            let cn = f * cp + i * cg;
                            let o = act(0, clamp(pre_x(1, j) + rec(1, j, &h) + pp(1, j) * cn));
                            hn[j] = o * act(2, cn);
                            cs[j] = cn;
                        }
                    }
                    Cell::Gru => {
                        let lbr = blk.flags & LINEAR_BEFORE_RESET != 0;
                        let rbh = |j: usize| {
                            bias.as_ref().map_or(zero, |bv| {
                                bv[d * 2 * g * hidden + g * hidden + 2 * hidden + j]
                            })
                        };
                        for j in 0..hidden {
                            let z = act(0, clamp(pre_x(0, j) + rec(0, j, &h)));
                            let rr = act(0, clamp(pre_x(1, j) + rec(1, j, &h)));
                            cs[j] = z;
                            if lbr {
                                hn[j] = rr * (rec(2, j, &h) + rbh(j));
                            } else {
                                aux[j] = rr * h[j];
                            }
                        }
                        for j in 0..hidden {
                            // linear_before_reset: Rb_h is inside the reset product (in hn)
                            let hp = if lbr {
                                pre_xb(2, j, false) + hn[j]
                            } else {
                                pre_x(2, j) + rec(2, j, &aux)
                            };
                            let ht = act(1, clamp(hp));
                            let z = cs[j];
                            hn[j] = (one - z) * ht + z * h[j];
                        }
                    }
                }
                h.copy_from_slice(&hn);
                let yo = t * st.y_t as usize + d * st.y_d as usize + b * st.y_b as usize;
                for (j, v) in h.iter().enumerate() {
                    store(&mut y.data, yo + j, *v);
                }
            }
            for t in len..seq {
                let yo = t * st.y_t as usize + d * st.y_d as usize + b * st.y_b as usize;
                for j in 0..hidden {
                    store(&mut y.data, yo + j, zero);
                }
            }
            // a sequence of length 0 has zero final states (as onnxruntime answers)
            let fin = |v: T::Compute| if len == 0 { zero } else { v };
            for j in 0..hidden {
                store(&mut yh.data, so + j, fin(h[j]));
                if let Some(yc) = &mut yc {
                    store(&mut yc.data, so + j, fin(cs[j]));
                }
            }
        }
    }
    let mut out = vec![y, yh];
    out.extend(yc);
    out.push(ws);
    Ok(out)
}
