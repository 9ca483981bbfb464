//! Naive f64 references of every op, written from the ONNX definitions.

use std::collections::BTreeMap;

use super::numel;

/// Softmax family along the middle dim of `(outer, len, inner)`; mode 0/1/2.
pub fn softmax_ref(x: &[f64], (o, l, n): (usize, usize, usize), mode: u32) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for a in 0..o {
        for c in 0..n {
            let idx = |e: usize| a * l * n + e * n + c;
            if mode == 2 {
                // numpy argmax: first NaN, else first maximum
                let mut best = 0;
                for e in 0..l {
                    let (v, b) = (x[idx(e)], x[idx(best)]);
                    if !b.is_nan() && (v.is_nan() || v > b) {
                        best = e;
                    }
                }
                if l > 0 {
                    y[idx(best)] = 1.0;
                }
                continue;
            }
            let m = (0..l).map(|e| x[idx(e)]).fold(f64::NEG_INFINITY, |m, v| {
                if v.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(v)
                }
            });
            let s: f64 = (0..l).map(|e| (x[idx(e)] - m).exp()).sum();
            for e in 0..l {
                y[idx(e)] = if mode == 0 {
                    (x[idx(e)] - m).exp() / s
                } else {
                    x[idx(e)] - m - s.ln()
                };
            }
        }
    }
    y
}

/// Mean and population variance.
pub fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

/// LayerNorm over rows of `d`: (Y, Mean, InvStdDev).
pub fn layer_norm_ref(
    x: &[f64],
    d: usize,
    w: &[f64],
    b: Option<&[f64]>,
    eps: f64,
) -> [Vec<f64>; 3] {
    let rows = x.len().checked_div(d).unwrap_or(0);
    let (mut y, mut mean, mut inv) = (vec![], vec![], vec![]);
    for r in 0..rows {
        let row = &x[r * d..(r + 1) * d];
        let (m, var) = moments(row);
        let is = 1.0 / (var + eps).sqrt();
        for (j, v) in row.iter().enumerate() {
            let wj = w[j % w.len()];
            let bj = b.map_or(0.0, |b| b[j % b.len()]);
            y.push((v - m) * is * wj + bj);
        }
        mean.push(m);
        inv.push(is);
    }
    [y, mean, inv]
}

/// `(N, C, spatial)` of an `(N, C, ...)` shape.
pub fn ncs(shape: &[u64]) -> (usize, usize, usize) {
    (shape[0] as usize, shape[1] as usize, numel(&shape[2..]))
}

#[allow(clippy::needless_range_loop)]
pub fn batchnorm_ref(x: &[f64], dims: (usize, usize, usize), p: &[Vec<f64>], eps: f64) -> Vec<f64> {
    let (n, c, s) = dims;
    let mut y = vec![0.0; x.len()];
    for a in 0..n {
        for ch in 0..c {
            for k in 0..s {
                let i = (a * c + ch) * s + k;
                y[i] = p[0][ch] * (x[i] - p[2][ch]) / (p[3][ch] + eps).sqrt() + p[1][ch];
            }
        }
    }
    y
}

/// Training-mode BatchNorm: (Y, running mean, running var, batch mean, batch var).
pub fn batchnorm_train_ref(
    x: &[f64],
    (n, c, s): (usize, usize, usize),
    p: &[Vec<f64>],
    eps: f64,
    mom: f64,
) -> [Vec<f64>; 5] {
    let mut stats = (vec![], vec![]);
    for ch in 0..c {
        let vals: Vec<f64> = (0..n)
            .flat_map(|a| (0..s).map(move |k| (a * c + ch) * s + k))
            .map(|i| x[i])
            .collect();
        let (m, v) = moments(&vals);
        stats.0.push(m);
        stats.1.push(v);
    }
    let y = batchnorm_ref(
        x,
        (n, c, s),
        &[p[0].clone(), p[1].clone(), stats.0.clone(), stats.1.clone()],
        eps,
    );
    let rm = (0..c)
        .map(|i| p[2][i] * mom + stats.0[i] * (1.0 - mom))
        .collect();
    let rv = (0..c)
        .map(|i| p[3][i] * mom + stats.1[i] * (1.0 - mom))
        .collect();
    [y, rm, rv, stats.0, stats.1]
}

/// GroupNorm (InstanceNorm when groups == C) with scale/bias per channel or per group.
pub fn group_norm_ref(
    x: &[f64],
    (n, c, s): (usize, usize, usize),
    groups: usize,
    scale: &[f64],
    bias: &[f64],
    eps: f64,
) -> Vec<f64> {
    let cg = c / groups;
    let per_channel = scale.len() == c;
    let mut y = vec![0.0; x.len()];
    for a in 0..n {
        for g in 0..groups {
            let start = (a * c + g * cg) * s;
            let vals = &x[start..start + cg * s];
            let (m, v) = moments(vals);
            for (j, xv) in vals.iter().enumerate() {
                let k = if per_channel { g * cg + j / s } else { g };
                y[start + j] = (xv - m) / (v + eps).sqrt() * scale[k] + bias[k];
            }
        }
    }
    y
}

pub fn lrn_ref(
    x: &[f64],
    (n, c, s): (usize, usize, usize),
    size: usize,
    a: f64,
    b: f64,
    k: f64,
) -> Vec<f64> {
    let (c1, c2) = ((size - 1) / 2, (size - 1).div_ceil(2) + 1);
    let mut y = vec![0.0; x.len()];
    for i0 in 0..n {
        for ch in 0..c {
            for p in 0..s {
                let lo = ch.saturating_sub(c1);
                let hi = (ch + c2).min(c);
                let sq: f64 = (lo..hi).map(|cc| x[(i0 * c + cc) * s + p].powi(2)).sum();
                let i = (i0 * c + ch) * s + p;
                y[i] = x[i] / (k + a / size as f64 * sq).powf(b);
            }
        }
    }
    y
}

/// MVN over `axes` of `shape`, as ONNX defines it: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9).
pub fn mvn_ref(x: &[f64], shape: &[u64], axes: &[usize]) -> Vec<f64> {
    let strides = umd_sdk::shape::contiguous_strides(shape);
    let key = |i: usize| -> Vec<u64> {
        (0..shape.len())
            .map(|d| {
                if axes.contains(&d) {
                    0
                } else {
                    (i as u64 / strides[d]) % shape[d]
                }
            })
            .collect()
    };
    let mut acc: BTreeMap<Vec<u64>, (f64, f64, f64)> = BTreeMap::new();
    for (i, v) in x.iter().enumerate() {
        let e = acc.entry(key(i)).or_default();
        e.0 += v;
        e.1 += v * v;
        e.2 += 1.0;
    }
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            let (s, q, n) = acc[&key(i)];
            let m = s / n;
            (v - m) / ((q / n - m * m).max(0.0).sqrt() + 1e-9)
        })
        .collect()
}
