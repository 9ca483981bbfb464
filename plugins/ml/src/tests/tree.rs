//! TreeEnsemble against the official values and a recursive walk of the trees.

use super::*;

pub struct Trees {
    pub feats: Vec<i64>,
    pub modes: Vec<i64>,
    pub splits: Vec<f64>,
    pub tids: Vec<i64>,
    pub fids: Vec<i64>,
    pub tleaf: Vec<i64>,
    pub fleaf: Vec<i64>,
    pub ltargets: Vec<i64>,
    pub lweights: Vec<f64>,
    pub roots: Vec<i64>,
    pub members: Vec<f64>,
    pub missing: Vec<i64>,
    pub targets: i64,
    pub agg: i64,
    pub post: i64,
}

impl Trees {
    pub fn attrs(&self, wdt: Dtype) -> Vec<(&'static str, A)> {
        let mut v = vec![
            ("nodes_featureids", A::Ints(self.feats.clone())),
            (
                "nodes_modes",
                tensor(
                    Dtype::U8,
                    &self.modes.iter().map(|&m| m as f64).collect::<Vec<_>>(),
                ),
            ),
            ("nodes_splits", tensor(wdt, &self.splits)),
            ("nodes_truenodeids", A::Ints(self.tids.clone())),
            ("nodes_falsenodeids", A::Ints(self.fids.clone())),
            ("nodes_trueleafs", A::Ints(self.tleaf.clone())),
            ("nodes_falseleafs", A::Ints(self.fleaf.clone())),
            ("leaf_targetids", A::Ints(self.ltargets.clone())),
            ("leaf_weights", tensor(wdt, &self.lweights)),
            ("tree_roots", A::Ints(self.roots.clone())),
            ("n_targets", A::Int(self.targets)),
            ("aggregate_function", A::Int(self.agg)),
            ("post_transform", A::Int(self.post)),
        ];
        if !self.members.is_empty() {
            v.push(("membership_values", tensor(wdt, &self.members)));
        }
        if !self.missing.is_empty() {
            v.push((
                "nodes_missing_value_tracks_true",
                A::Ints(self.missing.clone()),
            ));
        }
        v
    }

    /// Recursive walk as the reference builds and predicts (members taken in build order).
    pub fn reference(
        &self,
        x: &[f64],
        nf: usize,
        maxv: f64,
        round: impl Fn(f64) -> f64,
    ) -> Vec<f64> {
        let rows = x.len() / nf;
        let nt = self.targets as usize;
        let mut out = Vec::new();
        for r in 0..rows {
            let xr = &x[r * nf..(r + 1) * nf];
            let mut members = self.members.iter().copied();
            let mut hits = Vec::new();
            for &root in &self.roots {
                let root = root as usize;
                let leaf = self.walk(root, xr, &mut members).unwrap();
                hits.push(leaf);
            }
            let init = match self.agg {
                2 => maxv,
                3 => -maxv,
                _ => 0.0,
            };
            let mut row = vec![init; nt];
            for &l in &hits {
                let (t, w) = (self.ltargets[l] as usize, self.lweights[l]);
                row[t] = match self.agg {
                    0 => round(row[t] + w / self.roots.len() as f64),
                    1 => round(row[t] + w),
                    2 => round(row[t].min(w)),
                    _ => round(row[t].max(w)),
                };
            }
            if self.post == 4 {
                // √2 · erfinv(2v − 1), erfinv by bisection on erf's series
                row.iter_mut()
                    .for_each(|v| *v = std::f64::consts::SQRT_2 * erfinv(2.0 * *v - 1.0));
            } else if self.post == 2 {
                row.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp()));
            } else if self.post == 1 || self.post == 3 {
                // SOFTMAX_ZERO (3) leaves zeros (|v| <= 1e-7) at 0, as onnxruntime
                let keep = |v: f64| self.post == 1 || v.abs() > 1e-7;
                let m = row.iter().cloned().fold(f64::MIN, f64::max);
                let s: f64 = row
                    .iter()
                    .filter(|v| keep(**v))
                    .map(|v| (v - m).exp())
                    .sum();
                row.iter_mut()
                    .for_each(|v| *v = if keep(*v) { (*v - m).exp() / s } else { 0.0 });
            }
            out.extend(row);
        }
        out
    }

    /// Builds (taking members) and walks the whole subtree of `n`, returning the leaf `x`
    /// reaches from `n`.
    pub fn walk(
        &self,
        n: usize,
        x: &[f64],
        members: &mut impl Iterator<Item = f64>,
    ) -> Option<usize> {
        let v = x[self.feats[n] as usize];
        let split = self.splits[n];
        let mut c = match self.modes[n] {
            0 => v <= split,
            1 => v < split,
            2 => v >= split,
            3 => v > split,
            4 => v == split,
            5 => v != split,
            _ => {
                let mut set = Vec::new();
                for m in members.by_ref() {
                    if m.is_nan() {
                        break;
                    }
                    set.push(m);
                }
                set.contains(&v)
            }
        };
        if !c && self.missing.get(n).is_some_and(|&m| m != 0) && v.is_nan() {
            c = true;
        }
        // build both branches in order (true first) so members are consumed as the reference does
        let t = if self.tleaf[n] != 0 {
            Some(self.tids[n] as usize)
        } else {
            self.walk(self.tids[n] as usize, x, members)
        };
        let f = if self.fleaf[n] != 0 {
            Some(self.fids[n] as usize)
        } else {
            self.walk(self.fids[n] as usize, x, members)
        };
        if c { t } else { f }
    }
}

/// erf by its Maclaurin series (|x| < 3), erfinv by bisection: a slow exact reference.
pub fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

pub fn erfinv(y: f64) -> f64 {
    let (mut lo, mut hi) = (-3.0, 3.0);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if erf(mid) < y { lo = mid } else { hi = mid }
    }
    (lo + hi) / 2.0
}

#[test]
pub fn probit_matches_the_inverse_erf() {
    for p in [0.01, 0.1, 0.3, 0.5, 0.6, 0.9, 0.99] {
        let want = std::f64::consts::SQRT_2 * erfinv(2.0 * p - 1.0);
        assert!(
            (crate::tree::probit(p) - want).abs() < 5e-3 * (1.0 + want.abs()),
            "{p}"
        );
    }
}

/// The official `test_ai_onnx_ml_tree_ensemble_single_tree` (its split 3.14 is not π).
#[allow(clippy::approx_constant)]
pub fn single_tree() -> Trees {
    Trees {
        feats: vec![0, 0, 0],
        modes: vec![0, 0, 0],
        splits: vec![3.14, 1.2, 4.2],
        tids: vec![1, 0, 1],
        fids: vec![2, 2, 3],
        tleaf: vec![0, 1, 1],
        fleaf: vec![0, 1, 1],
        ltargets: vec![0, 1, 0, 1],
        lweights: vec![5.23, 12.12, -12.23, 7.21],
        roots: vec![0],
        members: vec![],
        missing: vec![],
        targets: 2,
        agg: 1,
        post: 0,
    }
}

pub fn membership_tree() -> Trees {
    Trees {
        feats: vec![0, 0, 0],
        modes: vec![0, 6, 6],
        splits: vec![11.0, 232344.0, f64::NAN],
        tids: vec![1, 0, 1],
        fids: vec![2, 2, 3],
        tleaf: vec![0, 1, 1],
        fleaf: vec![1, 0, 1],
        ltargets: vec![0, 1, 2, 3],
        lweights: vec![1.0, 10.0, 1000.0, 100.0],
        roots: vec![0],
        members: vec![1.2, 3.7, 8.0, 9.0, f64::NAN, 12.0, 7.0, f64::NAN],
        missing: vec![],
        targets: 4,
        agg: 1,
        post: 0,
    }
}

pub fn run_trees(t: &Trees, x: &[f64], nf: u64, dt: Dtype) -> Result<Vec<f64>, OpError> {
    let rows = x.len() as u64 / nf;
    let r = req("TreeEnsemble", &[(vec![rows, nf], dt)], t.attrs(dt));
    let (plan, out) = run(&r, &[enc(dt, x)])?;
    assert_eq!(plan.outputs[0].shape, vec![rows, t.targets as u64]);
    Ok(dec(dt, &out[0]))
}

#[test]
pub fn tree_official_cases() {
    let x = [1.2, 3.4, -0.12, 1.66, 4.14, 1.77];
    let got = run_trees(&single_tree(), &x, 2, Dtype::F64).unwrap();
    let want = [5.23, 0., 5.23, 0., 0., 12.12];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{got:?}");
    }
    let x = [1.2, 3.4, -0.12, f64::NAN, 12.0, 7.0];
    let got = run_trees(&membership_tree(), &x, 1, Dtype::F32).unwrap();
    let want = [
        1., 0., 0., 0., 0., 0., 0., 100., 0., 0., 0., 100., 0., 0., 1000., 0., 0., 0., 1000., 0.,
        0., 10., 0., 0.,
    ];
    assert_eq!(got, want);
}

#[test]
pub fn tree_aggregates_posts_and_dtypes() {
    // two trees over two features, several targets
    let base = Trees {
        feats: vec![0, 1, 1, 0],
        modes: vec![0, 3, 4, 5],
        splits: vec![0.0, 0.5, -0.25, 0.75],
        tids: vec![1, 0, 3, 2],
        fids: vec![2, 1, 3, 3],
        tleaf: vec![0, 1, 0, 1],
        fleaf: vec![1, 1, 1, 1],
        ltargets: vec![0, 1, 2, 0],
        lweights: vec![0.5, -1.5, 2.25, 3.0],
        roots: vec![0, 2],
        members: vec![],
        missing: vec![0, 0, 1, 0],
        targets: 3,
        agg: 1,
        post: 0,
    };
    let mut x = data(2 * 9, 5, -1.0, 1.0);
    x[3] = f64::NAN;
    x[8] = -0.25;
    for dt in common::FLOATS {
        let xr = dec(dt, &enc(dt, &x));
        for agg in 0..4 {
            for post in 0..4 {
                let t = Trees {
                    agg,
                    post,
                    ..base_clone(&base)
                };
                let round = |v: f64| dec(dt, &enc(dt, &[v]))[0];
                let wr: Vec<f64> = t.lweights.iter().map(|&w| round(w)).collect();
                let sr: Vec<f64> = t.splits.iter().map(|&w| round(w)).collect();
                let tr = Trees {
                    lweights: wr,
                    splits: sr,
                    ..t
                };
                let want = tr.reference(&xr, 2, crate::tree::finite_max(dt), round);
                let got = run_trees(&tr, &xr, 2, dt).unwrap();
                let tol = if dt == Dtype::F64 { 1e-12 } else { 1e-2 };
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= tol * (1.0 + w.abs()),
                        "{dt:?} agg {agg} post {post}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
}

pub fn base_clone(t: &Trees) -> Trees {
    Trees {
        feats: t.feats.clone(),
        modes: t.modes.clone(),
        splits: t.splits.clone(),
        tids: t.tids.clone(),
        fids: t.fids.clone(),
        tleaf: t.tleaf.clone(),
        fleaf: t.fleaf.clone(),
        ltargets: t.ltargets.clone(),
        lweights: t.lweights.clone(),
        roots: t.roots.clone(),
        members: t.members.clone(),
        missing: t.missing.clone(),
        targets: t.targets,
        agg: t.agg,
        post: t.post,
    }
}

#[test]
pub fn tree_empty_rows_and_errors() {
    assert_eq!(
        run_trees(&single_tree(), &[], 2, Dtype::F32).unwrap(),
        Vec::<f64>::new()
    );
    // a cycle
    let mut t = single_tree();
    t.tleaf = vec![0, 0, 1];
    t.tids = vec![1, 0, 1];
    assert!(matches!(
        run_trees(&t, &[1.0, 2.0], 2, Dtype::F32),
        Err(OpError::InvalidAttribute(_))
    ));
    // feature out of range
    let mut t = single_tree();
    t.feats = vec![0, 5, 0];
    assert!(matches!(
        run_trees(&t, &[1.0, 2.0], 2, Dtype::F32),
        Err(OpError::InvalidAttribute(_))
    ));
    let t = Trees {
        post: 5,
        ..single_tree()
    };
    assert!(matches!(
        run_trees(&t, &[1.0, 2.0], 2, Dtype::F32),
        Err(OpError::InvalidAttribute(_))
    ));
    let r = req(
        "TreeEnsemble",
        &[(vec![2, 2], Dtype::I32)],
        single_tree().attrs(Dtype::F32),
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(_))
    ));
}
