//! The support vector machines' CPU kernel (`svm_{T}`, `svm_cls_{T}`): the table
//! ([`crate::svm`]'s blob of f64 words: support vectors, coefficients, rho, Platt pairs, class
//! ranges, labels) decoded once into f64 — in a compiled model kept by the instance under the
//! table's resident name (ABI 1.7) — then every row scored on its own, so a launch splits by
//! rows across the host's worker threads (in place, ABI 1.3).
//!
//! Owns the CPU arithmetic only (as onnxruntime computes it: see `svm.rs`'s module doc).

use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, OpError};

use crate::common::{Val, get, put};
use crate::rows::{self, RowLaunch, Scorer, elem};

/// Tells a decoded SVM table apart from other values kept under the same name.
const KEY: u64 = 0x73_766d;

/// A classifier's parameters after the regressor's.
struct Classes {
    k: usize,
    width: usize,
    prob: usize,
    nprob: usize,
    class: usize,
    labels: usize,
    post: u32,
    positive: bool,
}

/// One launch's bindings and parameters.
struct Params {
    xb: u32,
    tb: u32,
    zb: u32,
    yb: Option<u32>,
    rows: usize,
    nf: usize,
    nv: usize,
    coef: usize,
    rho: usize,
    kind: u32,
    kp: [f64; 3],
    one_class: bool,
    cls: Option<Classes>,
}

impl Params {
    fn read(
        params: &[u8],
        relocations: &[umd_sdk::Relocation],
        classifier: bool,
    ) -> Result<Params, OpError> {
        let mut r = ParamReader::new(params, relocations);
        let (xb, tb, zb) = (r.ptr()?, r.ptr()?, r.ptr()?);
        let yb = if classifier { Some(r.ptr()?) } else { None };
        let (rows, nf, nv) = (r.u64()? as usize, r.u64()? as usize, r.u64()? as usize);
        let (coef, rho) = (r.u64()? as usize, r.u64()? as usize);
        let kind = r.u32()?;
        let kp = [r.f64()?, r.f64()?, r.f64()?];
        let (one_class, cls) = if classifier {
            let mut u = || r.u64().map(|v| v as usize);
            let (k, width, prob, nprob, class, labels) = (u()?, u()?, u()?, u()?, u()?, u()?);
            let (post, positive) = (r.u32()?, r.u32()? != 0);
            if k == 0 || k > crate::svm::MAX_CLASSES {
                return Err(OpError::internal(format!("svm: {k} classes")));
            }
            let cls = Classes {
                k,
                width,
                prob,
                nprob,
                class,
                labels,
                post,
                positive,
            };
            (false, Some(cls))
        } else {
            (r.u32()? != 0, None)
        };
        Ok(Params {
            xb,
            tb,
            zb,
            yb,
            rows,
            nf,
            nv,
            coef,
            rho,
            kind,
            kp,
            one_class,
            cls,
        })
    }

    /// Bytes of the table the launch reads: up to rho (regressor) or the labels (classifier),
    /// its last words.
    fn table_bytes(&self) -> Option<usize> {
        match &self.cls {
            Some(c) => c.labels.checked_add(c.k)?.checked_mul(8),
            None => self.rho.checked_add(1)?.checked_mul(8),
        }
    }

    /// Bytes of the scores of `rows` rows.
    fn z_bytes(&self, rows: usize) -> Option<usize> {
        let width = self.cls.as_ref().map_or(1, |c| c.width);
        rows.checked_mul(width)?.checked_mul(4)
    }
}

/// One kernel value, rounded to f32 as onnxruntime stores it.
fn kernel_value(kind: u32, p: [f64; 3], x: &[f32], v: &[f64]) -> f32 {
    if kind == 2 {
        let d: f64 = x.iter().zip(v).map(|(&a, &b)| (a as f64 - b).powi(2)).sum();
        return (-p[0] * d).exp() as f32;
    }
    let dot: f64 = x.iter().zip(v).map(|(&a, &b)| a as f64 * b).sum();
    (match kind {
        1 => (p[0] * dot + p[1]).powf(p[2]),
        3 => (p[0] * dot + p[1]).tanh(),
        _ => dot,
    }) as f32
}

/// libsvm's pairwise coupling as onnxruntime runs it (f32, at most 100 rounds): `r` the
/// `k × k` pairwise probabilities, `p` the class probabilities out.
pub fn couple(k: usize, r: &[f32], p: &mut [f32]) {
    let mut q = vec![0f32; k * k];
    let mut qp = vec![0f32; k];
    let eps = 0.005f32 / k as f32;
    for i in 0..k {
        p[i] = 1.0 / k as f32;
        for j in 0..i {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = q[j * k + i];
        }
        for j in i + 1..k {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    for _ in 0..100 {
        let mut pqp = 0f32;
        for i in 0..k {
            qp[i] = 0.0;
            for j in 0..k {
                qp[i] += q[i * k + j] * p[j];
            }
            pqp += p[i] * qp[i];
        }
        let max_error = (0..k).fold(0f32, |m, i| m.max((qp[i] - pqp).abs()));
        if max_error < eps {
            break;
        }
        for i in 0..k {
            let diff = (-qp[i] + pqp) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0 * qp[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[i * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
}

fn logistic(v: f32) -> f32 {
    let l = 1.0 / (1.0 + (-v.abs()).exp());
    if v < 0.0 { 1.0 - l } else { l }
}

/// Scores `rows` rows of `x` (`p.nf` elements of `T` each) into `z` and, for a classifier,
/// the labels into `y`. A table too short for its parameters traps (a plan's table never is).
fn score<T: Val>(
    p: &Params,
    tab: &[f64],
    rows: usize,
    x: &[u8],
    z: &mut [u8],
    mut y: Option<&mut [u8]>,
) -> Result<(), OpError> {
    let (nf, nv, coef, rho, kind, kp) = (p.nf, p.nv, p.coef, p.rho, p.kind, p.kp);
    let w = |i: usize| tab[i];
    let xrow = |row: usize| -> Vec<f32> {
        (0..nf)
            .map(|f| get::<T>(x, row * nf + f).to_f64() as f32)
            .collect()
    };
    let Some(c) = &p.cls else {
        for row in 0..rows {
            let xr = xrow(row);
            let s = if nv > 0 {
                let mut acc = 0f64;
                for v in 0..nv {
                    let kv = kernel_value(kind, kp, &xr, &tab[v * nf..][..nf]);
                    acc += w(coef + v) * kv as f64;
                }
                (acc + w(rho)) as f32
            } else {
                (kernel_value(0, kp, &xr, &tab[coef..][..nf]) as f64 + w(rho)) as f32
            };
            let s = if p.one_class {
                if s > 0.0 { 1.0 } else { -1.0 }
            } else {
                s
            };
            put::<f32>(z, row, s);
        }
        return Ok(());
    };
    let (k, width, prob, nprob, class, labels, post, positive) = (
        c.k, c.width, c.prob, c.nprob, c.class, c.labels, c.post, c.positive,
    );
    let word = |i: usize| tab[i].to_bits();
    let svc = nv > 0;
    let proba = nprob > 0;
    let pairs = k * (k - 1) / 2;
    let mut kv = vec![0f32; nv];
    let mut s = vec![0f32; width.max(k).max(pairs).max(2)];
    let mut votes = vec![0u32; k];
    let mut r2 = vec![0f32; k * k];
    for row in 0..rows {
        let xr = xrow(row);
        s.fill(0.0);
        let (maxclass, max_weight) = if svc {
            for (v, kvv) in kv.iter_mut().enumerate() {
                *kvv = kernel_value(kind, kp, &xr, &tab[v * nf..][..nf]);
            }
            votes.fill(0);
            let mut idx = 0;
            let mut d = vec![0f32; pairs];
            for i in 0..k {
                for j in i + 1..k {
                    let (si, ni) = (
                        word(class + 2 * i) as usize,
                        word(class + 2 * i + 1) as usize,
                    );
                    let (sj, nj) = (
                        word(class + 2 * j) as usize,
                        word(class + 2 * j + 1) as usize,
                    );
                    let mut sum = 0f64;
                    for m in 0..ni {
                        sum += w(coef + (j - 1) * nv + si + m) as f32 as f64 * kv[si + m] as f64;
                    }
                    for m in 0..nj {
                        sum += w(coef + i * nv + sj + m) as f32 as f64 * kv[sj + m] as f64;
                    }
                    sum += w(rho + idx) as f32 as f64;
                    d[idx] = sum as f32;
                    votes[if sum > 0.0 { i } else { j }] += 1;
                    idx += 1;
                }
            }
            if proba {
                idx = 0;
                for i in 0..k {
                    for j in i + 1..k {
                        let (a, b) = (w(prob + idx) as f32, w(prob + nprob + idx) as f32);
                        let v = (1.0 - logistic(d[idx] * a + b)).clamp(1e-7, 1.0 - 1e-7);
                        r2[i * k + j] = v;
                        r2[j * k + i] = 1.0 - v;
                        idx += 1;
                    }
                }
                couple(k, &r2, &mut s[..k]);
            } else {
                s[..pairs].copy_from_slice(&d);
            }
            let best = (0..k).fold(0, |b, c| if votes[c] > votes[b] { c } else { b });
            (best, 0f32)
        } else {
            for (c, sc) in s.iter_mut().enumerate().take(k) {
                *sc =
                    (kernel_value(0, kp, &xr, &tab[coef + c * nf..][..nf]) as f64 + w(rho)) as f32;
            }
            let best = (0..k).fold(0, |b, c| if s[c] > s[b] { c } else { b });
            (best, s[best])
        };
        let label = |c: usize| word(labels + c) as i64;
        let l = if k == 2 && !proba {
            if (positive && max_weight >= 0.5) || (max_weight > 0.0 && !positive) {
                label(1)
            } else {
                label(maxclass)
            }
        } else {
            label(maxclass)
        };
        if let Some(y) = y.as_deref_mut() {
            put::<i64>(y, row, l);
        }
        let n = if svc && !proba { pairs } else { k };
        if n > 1 {
            crate::linear::post(&mut s[..n], post);
        } else if post == 4 {
            s[0] = crate::linear::probit_f32(s[0]);
        } else if svc && !proba && k <= 2 {
            // onnxruntime (1.32): NONE [-d, d]; LOGISTIC [1 - σ(d), σ(d)]; others [1 - d, d]
            let v = s[0];
            let v = if post == 2 { logistic(v) } else { v };
            s[0] = if post == 0 { -v } else { 1.0 - v };
            s[1] = v;
        }
        for (c, &v) in s.iter().enumerate().take(width) {
            put::<f32>(z, row * width + c, v);
        }
    }
    Ok(())
}

/// An SVM launch: its parameters and X's dtype.
pub struct Svm {
    dt: Dtype,
    p: Params,
}

impl Svm {
    pub fn read(
        params: &[u8],
        relocations: &[umd_sdk::Relocation],
        dt: Dtype,
        classifier: bool,
    ) -> Result<Svm, OpError> {
        Ok(Svm {
            dt,
            p: Params::read(params, relocations, classifier)?,
        })
    }
}

impl Scorer for Svm {
    type Table = Vec<f64>;

    fn launch(&self) -> Result<RowLaunch, OpError> {
        let p = &self.p;
        let too_large = || OpError::internal("svm: launch too large");
        let xrow = p.nf.checked_mul(elem(self.dt)?).ok_or_else(too_large)?;
        let zrow = p.z_bytes(1).ok_or_else(too_large)?;
        let tbytes = p.table_bytes().ok_or_else(too_large)?;
        let mut outputs = vec![(p.zb, zrow)];
        outputs.extend(p.yb.map(|b| (b, 8)));
        Ok(RowLaunch {
            rows: p.rows,
            x: (p.xb, xrow),
            table: (p.tb, tbytes),
            outputs,
            key: vec![KEY, tbytes as u64],
        })
    }

    fn decode(&self, bytes: &[u8]) -> Result<(Vec<f64>, usize), OpError> {
        Ok((rows::words_f64(bytes), bytes.len()))
    }

    fn score(
        &self,
        t: &Vec<f64>,
        rows: usize,
        x: &[u8],
        outs: &mut [Vec<u8>],
    ) -> Result<(), OpError> {
        let (z, y) = rows::scores_and_labels(outs);
        let p = &self.p;
        crate::by_dtype!(
            self.dt,
            score,
            OpError::internal("svm: unknown dtype"),
            p,
            t,
            rows,
            x,
            z,
            y
        )
    }
}
