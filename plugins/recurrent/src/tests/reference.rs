//! The naive f64 reference of RNN, LSTM and GRU, written from the ONNX spec: per direction,
//! the whole batch at once in layout 0, transposed to the request's layout at the end.

use super::*;

impl Case {
    /// The reference outputs (Y, Y_h, [Y_c]).
    pub(super) fn reference(&self) -> Vec<Vec<f64>> {
        let (_, vals) = self.build();
        let mut it = vals.into_iter();
        let (s, bn, ni, h, nd, g) = (
            self.seq,
            self.batch,
            self.input,
            self.hidden,
            self.dirs,
            self.gates(),
        );
        let xv = it.next().unwrap();
        let wv = it.next().unwrap();
        let rv = it.next().unwrap();
        let bv = self.bias.then(|| it.next().unwrap());
        let lens: Vec<usize> = match &self.lens {
            Some(l) => {
                it.next();
                l.iter().map(|v| (*v).max(0) as usize).collect()
            }
            None => vec![s; bn],
        };
        let h0v = self.h0.then(|| it.next().unwrap());
        let c0v = (self.lstm() && self.c0).then(|| it.next().unwrap());
        let pv = (self.lstm() && self.peep).then(|| it.next().unwrap());
        // layout-0 views
        let x = |t: usize, b: usize, k: usize| {
            if self.layout == 0 {
                xv[(t * bn + b) * ni + k]
            } else {
                xv[(b * s + t) * ni + k]
            }
        };
        let st = |v: &Vec<f64>, d: usize, b: usize, j: usize| {
            if self.layout == 0 {
                v[(d * bn + b) * h + j]
            } else {
                v[(b * nd + d) * h + j]
            }
        };
        let acts = act::parse(&self.build().0.attributes, cell_of(self.op), nd).unwrap();
        let clip = self
            .attrs
            .iter()
            .find(|(n, _)| *n == "clip")
            .map_or(f64::INFINITY, |(_, v)| match v {
                A::Float(c) => *c,
                _ => unreachable!(),
            });
        let cl = |v: f64| v.clamp(-clip, clip);
        let flag = |n: &str| {
            self.attrs
                .iter()
                .any(|(k, v)| *k == n && matches!(v, A::Int(1)))
        };
        let na = cell_of(self.op).activations();
        // Y[t][d][b][j] and the final states [d][b][j]
        let mut y = vec![vec![vec![vec![0.0; h]; bn]; nd]; s];
        let mut yh = vec![vec![vec![0.0; h]; bn]; nd];
        let mut yc = vec![vec![vec![0.0; h]; bn]; nd];
        for d in 0..nd {
            let f = |k: usize, v: f64| {
                let sl = d * na + k;
                act::apply(acts.kind[sl], acts.alpha[sl], acts.beta[sl], v)
            };
            let wr = |gi: usize, j: usize, k: usize| wv[((d * g + gi) * h + j) * ni + k];
            let rr = |gi: usize, j: usize, k: usize| rv[((d * g + gi) * h + j) * h + k];
            let wb =
                |gi: usize, j: usize| bv.as_ref().map_or(0.0, |b| b[d * 2 * g * h + gi * h + j]);
            let rb = |gi: usize, j: usize| {
                bv.as_ref()
                    .map_or(0.0, |b| b[d * 2 * g * h + g * h + gi * h + j])
            };
            let rev = self.direction == "reverse" || d == 1;
            for b in 0..bn {
                let mut hs: Vec<f64> = (0..h)
                    .map(|j| h0v.as_ref().map_or(0.0, |v| st(v, d, b, j)))
                    .collect();
                let mut cs: Vec<f64> = (0..h)
                    .map(|j| c0v.as_ref().map_or(0.0, |v| st(v, d, b, j)))
                    .collect();
                let len = lens[b].min(s);
                let order: Vec<usize> = if rev {
                    (0..len).rev().collect()
                } else {
                    (0..len).collect()
                };
                for t in order {
                    let xw = |gi: usize, j: usize| {
                        (0..ni).map(|k| wr(gi, j, k) * x(t, b, k)).sum::<f64>()
                    };
                    let hr = |gi: usize, j: usize, v: &[f64]| {
                        (0..h).map(|k| rr(gi, j, k) * v[k]).sum::<f64>()
                    };
                    let gate =
                        |gi: usize, j: usize| xw(gi, j) + hr(gi, j, &hs) + wb(gi, j) + rb(gi, j);
                    let new: Vec<f64> = match self.op {
                        "RNN" => (0..h).map(|j| f(0, cl(gate(0, j)))).collect(),
                        "LSTM" => {
                            let p = |k: usize, j: usize| {
                                pv.as_ref().map_or(0.0, |p| p[d * 3 * h + k * h + j])
                            };
                            let mut out = vec![0.0; h];
                            for j in 0..h {
                                let i = f(0, cl(gate(0, j) + p(0, j) * cs[j]));
                                let fg = if flag("input_forget") {
                                    1.0 - i
                                } else {
                                    f(0, cl(gate(2, j) + p(2, j) * cs[j]))
                                };
                                let c = fg * cs[j] + i * f(1, cl(gate(3, j)));
                                let o = f(0, cl(gate(1, j) + p(1, j) * c));
                                out[j] = o * f(2, c);
                                cs[j] = c;
                            }
                            out
                        }
                        _ => {
                            let z: Vec<f64> = (0..h).map(|j| f(0, cl(gate(0, j)))).collect();
                            let r: Vec<f64> = (0..h).map(|j| f(0, cl(gate(1, j)))).collect();
                            let rh: Vec<f64> = (0..h).map(|j| r[j] * hs[j]).collect();
                            (0..h)
                                .map(|j| {
                                    let pre = if flag("linear_before_reset") {
                                        xw(2, j) + r[j] * (hr(2, j, &hs) + rb(2, j)) + wb(2, j)
                                    } else {
                                        xw(2, j) + hr(2, j, &rh) + wb(2, j) + rb(2, j)
                                    };
                                    let ht = f(1, cl(pre));
                                    (1.0 - z[j]) * ht + z[j] * hs[j]
                                })
                                .collect()
                        }
                    };
                    hs = new;
                    y[t][d][b] = hs.clone();
                }
                if len > 0 {
                    yh[d][b] = hs;
                    yc[d][b] = cs;
                }
            }
        }
        // flatten in the request's layout
        let mut yf = vec![];
        let mut hf = vec![];
        let mut cf = vec![];
        if self.layout == 0 {
            for t in &y {
                for d in t {
                    for b in d {
                        yf.extend(b);
                    }
                }
            }
            for d in 0..nd {
                for b in 0..bn {
                    hf.extend(&yh[d][b]);
                    cf.extend(&yc[d][b]);
                }
            }
        } else {
            for b in 0..bn {
                for t in &y {
                    for d in t {
                        yf.extend(&d[b]);
                    }
                }
            }
            for b in 0..bn {
                for d in 0..nd {
                    hf.extend(&yh[d][b]);
                    cf.extend(&yc[d][b]);
                }
            }
        }
        let mut out = vec![yf, hf];
        if self.lstm() {
            out.push(cf);
        }
        out
    }
}
