//! Naive f64 references, written from the ONNX definitions (`op_attention.py`,
//! `op_rotary_embedding.py`) on logical 4-D `[B, H, S, D]` arrays.

/// One Attention problem in 4-D form.
#[derive(Clone, Default)]
pub struct Attn {
    /// (B, Hq, Hkv, Sq, Skv, P, Dk, Dv)
    pub dims: [usize; 8],
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    /// (shape, values, boolean)
    pub mask: Option<(Vec<usize>, Vec<f64>, bool)>,
    pub past_k: Vec<f64>,
    pub past_v: Vec<f64>,
    pub nonpad: Option<Vec<i64>>,
    pub scale: Option<f64>,
    pub causal: bool,
    pub softcap: f64,
    pub mode: u32,
    pub window: (i64, i64),
}

/// (Y [B, Hq, Sq, Dv], present_key, present_value, qk_matmul_output).
pub fn attention_ref(a: &Attn) -> [Vec<f64>; 4] {
    let [b_n, hq, hkv, sq, skv, p, dk, dv] = a.dims;
    let t_n = p + skv;
    // present caches: concatenation along the sequence
    let cat = |past: &[f64], new: &[f64], d: usize| {
        let mut out = vec![];
        for b in 0..b_n {
            for h in 0..hkv {
                for t in 0..t_n {
                    for e in 0..d {
                        out.push(if t < p {
                            past[((b * hkv + h) * p + t) * d + e]
                        } else {
                            new[((b * hkv + h) * skv + t - p) * d + e]
                        });
                    }
                }
            }
        }
        out
    };
    let (pk, pv) = (cat(&a.past_k, &a.k, dk), cat(&a.past_v, &a.v, dv));
    let scale = a.scale.unwrap_or(1.0 / (dk as f64).sqrt());
    let ninf = f64::NEG_INFINITY;
    let (mut y, mut qk) = (
        vec![0.0; b_n * hq * sq * dv],
        vec![0.0; b_n * hq * sq * t_n],
    );
    for b in 0..b_n {
        for h in 0..hq {
            let hk = h / (hq / hkv);
            for i in 0..sq {
                let offset = if p > 0 {
                    p as i64
                } else if let Some(n) = &a.nonpad {
                    n[b] - sq as i64
                } else {
                    0
                };
                let mut bias = vec![0.0; t_n];
                let mut raw = vec![0.0; t_n];
                for (j, bj) in bias.iter_mut().enumerate() {
                    if let Some((shape, vals, boolean)) = &a.mask {
                        // right-aligned broadcast of the padded mask to [B, Hq, Sq, T]
                        let r = shape.len();
                        let idx4 = [b, h, i, j];
                        let mlen = shape[r - 1];
                        *bj = if j >= mlen {
                            ninf
                        } else {
                            let mut flat = 0;
                            for (d, &s) in shape.iter().enumerate() {
                                let full = idx4[4 - r + d];
                                flat = flat * s + if s == 1 { 0 } else { full };
                            }
                            let m = vals[flat];
                            if *boolean {
                                if m != 0.0 { 0.0 } else { ninf }
                            } else {
                                m
                            }
                        };
                    }
                    let pos = i as i64 + offset;
                    if a.causal && j as i64 > pos {
                        *bj += ninf;
                    }
                    let (l, rgt) = a.window;
                    let diff = pos - j as i64;
                    if (l >= 0 && diff > l) || (rgt >= 0 && -diff > rgt) {
                        *bj += ninf;
                    }
                    if let Some(n) = &a.nonpad
                        && j as i64 >= n[b]
                    {
                        *bj += ninf;
                    }
                    let mut s = 0.0;
                    for e in 0..dk {
                        s += a.q[((b * hq + h) * sq + i) * dk + e]
                            * pk[((b * hkv + hk) * t_n + j) * dk + e]
                            * scale;
                    }
                    if a.softcap > 0.0 {
                        s = a.softcap * (s / a.softcap).tanh();
                    }
                    raw[j] = s;
                }
                let x: Vec<f64> = raw.iter().zip(&bias).map(|(s, b)| s + b).collect();
                let m = x.iter().cloned().fold(ninf, f64::max);
                let safe = if m == ninf { 0.0 } else { m };
                let e: Vec<f64> = x.iter().map(|v| (v - safe).exp()).collect();
                let mut sum: f64 = e.iter().sum();
                if sum == 0.0 {
                    sum = 1.0;
                }
                let all_masked = bias.iter().all(|&v| v == ninf);
                let probs: Vec<f64> = e
                    .iter()
                    .map(|v| if all_masked { 0.0 } else { v / sum })
                    .collect();
                let row = (b * hq + h) * sq + i;
                for j in 0..t_n {
                    qk[row * t_n + j] = match a.mode {
                        3 => probs[j],
                        2 => x[j],
                        _ => raw[j],
                    };
                    for e in 0..dv {
                        y[row * dv + e] += probs[j] * pv[((b * hkv + hk) * t_n + j) * dv + e];
                    }
                }
            }
        }
    }
    [y, pk, pv, qk]
}

/// `[B, H, S, D]` → `[B, S, H * D]`.
pub fn to_3d(x: &[f64], b: usize, h: usize, s: usize, d: usize) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for bi in 0..b {
        for hi in 0..h {
            for si in 0..s {
                for e in 0..d {
                    out[((bi * s + si) * h + hi) * d + e] = x[((bi * h + hi) * s + si) * d + e];
                }
            }
        }
    }
    out
}

/// RotaryEmbedding of a 4-D `[B, H, S, D]` input; `cos`/`sin` are `[rows, rd/2]` read at
/// `pos[b][s]`, or `[B, S, rd/2]` without positions.
pub fn rotary_ref(
    x: &[f64],
    [b_n, h_n, s_n, d]: [usize; 4],
    cos: &[f64],
    sin: &[f64],
    pos: Option<&[i64]>,
    rd: usize,
    interleaved: bool,
) -> Vec<f64> {
    let half = rd / 2;
    let mut y = x.to_vec();
    for b in 0..b_n {
        for h in 0..h_n {
            for s in 0..s_n {
                let base = ((b * h_n + h) * s_n + s) * d;
                let row = pos.map_or(b * s_n + s, |p| p[b * s_n + s] as usize);
                for i in 0..half {
                    let (c, sn) = (cos[row * half + i], sin[row * half + i]);
                    let (a1, a2) = if interleaved {
                        (base + 2 * i, base + 2 * i + 1)
                    } else {
                        (base + i, base + i + half)
                    };
                    let (x1, x2) = (x[a1], x[a2]);
                    y[a1] = c * x1 - sn * x2;
                    y[a2] = sn * x1 + c * x2;
                }
            }
        }
    }
    y
}

/// CausalConvWithState on `[B, C, L]` with weight `[C, 1, K]`: (output, present_state).
pub fn causal_conv_ref(
    x: &[f64],
    [b, c, l, k]: [usize; 4],
    w: &[f64],
    bias: Option<&[f64]>,
    past: Option<&[f64]>,
    silu: bool,
) -> [Vec<f64>; 2] {
    let (mut y, mut state) = (vec![], vec![]);
    for bi in 0..b {
        for ch in 0..c {
            let bc = bi * c + ch;
            let mut padded: Vec<f64> = match past {
                Some(p) => p[bc * (k - 1)..(bc + 1) * (k - 1)].to_vec(),
                None => vec![0.0; k - 1],
            };
            padded.extend_from_slice(&x[bc * l..(bc + 1) * l]);
            for t in 0..l {
                let mut v: f64 = (0..k).map(|j| w[ch * k + j] * padded[t + j]).sum();
                v += bias.map_or(0.0, |b| b[ch]);
                y.push(if silu { v / (1.0 + (-v).exp()) } else { v });
            }
            state.extend_from_slice(&padded[l..]);
        }
    }
    [y, state]
}

/// LinearAttention on 3-D `[B, T, H * D]` inputs (`decay` per head when its last dim is
/// `hkv`, else per key dim; `beta` per head or one): (output, present_state).
#[allow(clippy::too_many_arguments)]
pub fn linear_attention_ref(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    [b, t, hq, hkv, dk, dv]: [usize; 6],
    past: Option<&[f64]>,
    decay: Option<(&[f64], usize)>,
    beta: Option<(&[f64], usize)>,
    scale: f64,
) -> [Vec<f64>; 2] {
    let mut out = vec![0.0; b * t * hq * dv];
    let mut state: Vec<f64> = past.map_or(vec![0.0; b * hkv * dk * dv], |p| p.to_vec());
    for bi in 0..b {
        for ti in 0..t {
            let row = bi * t + ti;
            for h in 0..hkv {
                let s = &mut state[(bi * hkv + h) * dk * dv..][..dk * dv];
                let kt = &k[(row * hkv + h) * dk..][..dk];
                if let Some((g, last)) = decay {
                    for d in 0..dk {
                        let gv = if last == hkv {
                            g[row * hkv + h]
                        } else {
                            g[(row * hkv + h) * dk + d]
                        };
                        for m in 0..dv {
                            s[d * dv + m] *= gv.exp();
                        }
                    }
                }
                let mut vt: Vec<f64> = v[(row * hkv + h) * dv..][..dv].to_vec();
                if let Some((be, last)) = beta {
                    let bv = be[row * last + if last == 1 { 0 } else { h }];
                    for (m, x) in vt.iter_mut().enumerate() {
                        let got: f64 = (0..dk).map(|d| s[d * dv + m] * kt[d]).sum();
                        *x = bv * (*x - got);
                    }
                }
                for d in 0..dk {
                    for m in 0..dv {
                        s[d * dv + m] += kt[d] * vt[m];
                    }
                }
            }
            for h in 0..hq {
                let hk = h / (hq / hkv);
                let s = &state[(bi * hkv + hk) * dk * dv..][..dk * dv];
                let qt = &q[(row * hq + h) * dk..][..dk];
                for m in 0..dv {
                    let o: f64 = (0..dk).map(|d| qt[d] * s[d * dv + m]).sum();
                    out[(row * hq + h) * dv + m] = scale * o;
                }
            }
        }
    }
    [out, state]
}
