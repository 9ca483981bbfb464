//! Naive f64 references straight from the ONNX definitions: Conv as a sum over padded windows,
//! ConvTranspose as a scatter of every input element, pools over the windows of the padded
//! input (positions past the padded end, from `ceil_mode`, are left out).

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Spatial attributes, one entry per spatial axis.
#[derive(Clone, Debug)]
pub struct Win {
    pub k: Vec<i64>,
    pub s: Vec<i64>,
    pub d: Vec<i64>,
    pub pb: Vec<i64>,
    pub pe: Vec<i64>,
}

impl Win {
    pub fn new(k: &[i64]) -> Self {
        let r = k.len();
        Win {
            k: k.to_vec(),
            s: vec![1; r],
            d: vec![1; r],
            pb: vec![0; r],
            pe: vec![0; r],
        }
    }
    pub fn s(mut self, s: &[i64]) -> Self {
        self.s = s.to_vec();
        self
    }
    pub fn d(mut self, d: &[i64]) -> Self {
        self.d = d.to_vec();
        self
    }
    pub fn pads(mut self, p: &[i64]) -> Self {
        let r = self.k.len();
        self.pb = p[..r].to_vec();
        self.pe = p[r..].to_vec();
        self
    }
    /// The ONNX `pads` attribute value.
    pub fn pads_attr(&self) -> Vec<i64> {
        self.pb.iter().chain(&self.pe).copied().collect()
    }
    /// Output extents of a forward window over `inp` (floor, or ceil dropping a last window
    /// that starts in the end padding).
    pub fn out(&self, inp: &[usize], ceil: bool) -> Vec<usize> {
        (0..inp.len())
            .map(|i| {
                let keff = (self.k[i] - 1) * self.d[i] + 1;
                let span = inp[i] as i64 + self.pb[i] + self.pe[i] - keff;
                let mut o = if ceil {
                    (span + self.s[i] - 1).div_euclid(self.s[i]) + 1
                } else {
                    span.div_euclid(self.s[i]) + 1
                };
                if ceil && (o - 1) * self.s[i] >= inp[i] as i64 + self.pb[i] {
                    o -= 1;
                }
                o as usize
            })
            .collect()
    }
}

/// Conv of `x` (`[N, C, ..]`) with `w` (`[M, C/group, k..]`): `([N, M, out..], out shape)`.
pub fn conv(
    x: &[f64],
    xs: &[usize],
    w: &[f64],
    ws: &[usize],
    b: Option<&[f64]>,
    group: usize,
    win: &Win,
) -> (Vec<f64>, Vec<usize>) {
    let sr = xs.len() - 2;
    let out = win.out(&xs[2..], false);
    let (n, c, m) = (xs[0], xs[1], ws[0]);
    let (cg, mg, ksz) = (c / group, m / group, numel(&ws[2..]));
    let ys: Vec<usize> = [n, m].iter().chain(&out).copied().collect();
    let mut y = vec![0.0; numel(&ys)];
    for (yi, yv) in y.iter_mut().enumerate() {
        let idx = unravel(yi, &ys);
        let (nn, mm) = (idx[0], idx[1]);
        let grp = mm / mg;
        let mut acc = b.map_or(0.0, |b| b[mm]);
        for ci in 0..cg {
            'k: for ki in 0..ksz {
                let k = unravel(ki, &ws[2..]);
                let mut xi = nn * c + grp * cg + ci;
                for d in 0..sr {
                    let p = idx[2 + d] as i64 * win.s[d] - win.pb[d] + k[d] as i64 * win.d[d];
                    if p < 0 || p >= xs[2 + d] as i64 {
                        continue 'k;
                    }
                    xi = xi * xs[2 + d] + p as usize;
                }
                acc += x[xi] * w[(mm * cg + ci) * ksz + ki];
            }
        }
        *yv = acc;
    }
    (y, ys)
}

/// ConvTranspose of `x` (`[N, C, ..]`) with `w` (`[C, M/group, k..]`) into `[N, M, out..]`:
/// input `i` and kernel offset `k` land on `i*s - pb + k*d`.
pub fn conv_transpose(
    x: &[f64],
    xs: &[usize],
    w: &[f64],
    ws: &[usize],
    b: Option<&[f64]>,
    group: usize,
    win: &Win,
    out: &[usize],
) -> Vec<f64> {
    let sr = xs.len() - 2;
    let (n, c, mg) = (xs[0], xs[1], ws[1]);
    let (m, cg, ksz) = (mg * group, c / group, numel(&ws[2..]));
    let ys: Vec<usize> = [n, m].iter().chain(out).copied().collect();
    let mut y = vec![0.0; numel(&ys)];
    for (xi, &xv) in x.iter().enumerate() {
        let idx = unravel(xi, xs);
        let (nn, ci) = (idx[0], idx[1]);
        let grp = ci / cg;
        for mi in 0..mg {
            'k: for ki in 0..ksz {
                let k = unravel(ki, &ws[2..]);
                let mut yi = nn * m + grp * mg + mi;
                for d in 0..sr {
                    let o = idx[2 + d] as i64 * win.s[d] - win.pb[d] + k[d] as i64 * win.d[d];
                    if o < 0 || o >= out[d] as i64 {
                        continue 'k;
                    }
                    yi = yi * out[d] + o as usize;
                }
                y[yi] += xv * w[(ci * mg + mi) * ksz + ki];
            }
        }
    }
    if let Some(b) = b {
        let plane = numel(out);
        for (i, v) in y.iter_mut().enumerate() {
            *v += b[(i / plane) % m];
        }
    }
    y
}

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Max,
    Avg { include_pad: bool },
    Lp(f64),
}

/// A pool over `x` (`[N, C, ..]`) into `[N, C, out..]`, and MaxPool's row-major argmax (flat
/// over the whole input; -1 for an empty window).
pub fn pool(x: &[f64], xs: &[usize], kind: Kind, win: &Win, out: &[usize]) -> (Vec<f64>, Vec<i64>) {
    let sr = xs.len() - 2;
    let plane = numel(&xs[2..]);
    let ys: Vec<usize> = xs[..2].iter().chain(out).copied().collect();
    let (mut y, mut arg) = (vec![0.0; numel(&ys)], vec![-1i64; numel(&ys)]);
    for yi in 0..y.len() {
        let idx = unravel(yi, &ys);
        let nc = idx[0] * xs[1] + idx[1];
        let (mut vals, mut kept) = (Vec::new(), 0usize);
        'j: for ji in 0..numel(&win.k.iter().map(|&k| k as usize).collect::<Vec<_>>()) {
            let j = unravel(ji, &win.k.iter().map(|&k| k as usize).collect::<Vec<_>>());
            let mut flat = 0usize;
            let mut real = true;
            for d in 0..sr {
                // position in the padded input
                let p = idx[2 + d] as i64 * win.s[d] + j[d] as i64 * win.d[d];
                if p >= xs[2 + d] as i64 + win.pb[d] + win.pe[d] {
                    continue 'j;
                }
                let i = p - win.pb[d];
                real &= i >= 0 && i < xs[2 + d] as i64;
                flat = flat * xs[2 + d] + i.max(0) as usize;
            }
            kept += 1;
            if real {
                vals.push((x[nc * plane + flat], nc * plane + flat));
            }
        }
        y[yi] = match kind {
            Kind::Max => {
                let mut best: Option<(f64, usize)> = None;
                for &(v, i) in &vals {
                    match best {
                        None => best = Some((v, i)),
                        Some((b, _)) if v > b || (v.is_nan() && !b.is_nan()) => best = Some((v, i)),
                        _ => {}
                    }
                }
                arg[yi] = best.map_or(-1, |(_, i)| i as i64);
                best.map_or(f64::NEG_INFINITY, |(v, _)| v)
            }
            Kind::Avg { include_pad } => {
                let sum: f64 = vals.iter().map(|v| v.0).sum();
                sum / if include_pad { kept } else { vals.len() } as f64
            }
            Kind::Lp(p) => vals
                .iter()
                .map(|v| v.0.abs().powf(p))
                .sum::<f64>()
                .powf(1.0 / p),
        };
    }
    (y, arg)
}
