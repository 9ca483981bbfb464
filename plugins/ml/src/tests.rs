//! Native tests: every op planned and run on the CPU kernels against naive references written
//! here (a port of the reference's n-gram trie for TfIdfVectorizer, a recursive tree walk for
//! TreeEnsemble) and the official node tests' values; every served dtype, empty tensors, error
//! cases, the self-tests, and the CUDA sources of every op × dtype (dumped to `UMD_DUMP_CUDA`).

use std::collections::HashMap;

use super::*;
use umd_sdk::{AttrValueExt as A, TensorValue, testing};

fn enc(dt: Dtype, v: &[f64]) -> Vec<u8> {
    dtype::encode(dt, v).unwrap()
}

fn dec(dt: Dtype, b: &[u8]) -> Vec<f64> {
    dtype::decode_f64(dt, b)
}

fn req(op: &str, inputs: &[(Vec<u64>, Dtype)], attrs: Vec<(&str, A)>) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op);
    for (i, (s, d)) in inputs.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{i}"), s.clone(), *d));
    }
    for (n, v) in attrs {
        b = b.attr(n, v);
    }
    b.build(Target::cpu())
}

fn run(r: &PlanRequestExt, inputs: &[Vec<u8>]) -> Result<(OpPlan, Vec<Vec<u8>>), OpError> {
    testing::run::<MlPlugin>(r, inputs)
}

fn data(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + ((s >> 11) as f64 / (1u64 << 53) as f64) * (hi - lo)
        })
        .collect()
}

fn tensor(dt: Dtype, v: &[f64]) -> A {
    A::Tensor(TensorValue {
        desc: TensorDesc::new("t", vec![v.len() as u64], dt),
        data: enc(dt, v),
    })
}

const ALL: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];

// ---------------------------------------------------------------- Binarizer

#[test]
fn binarizer_every_dtype_and_shape() {
    for dt in ALL {
        for shape in [vec![3, 4, 5], vec![7], vec![0, 3], vec![]] {
            let n: u64 = shape.iter().product();
            let mut x = data(n as usize, 3, -3.0, 3.0);
            if dtype::name(dt).starts_with('i') {
                x.iter_mut().for_each(|v| *v = v.round());
            }
            let x = dec(dt, &enc(dt, &x));
            let r = req(
                "Binarizer",
                &[(shape.clone(), dt)],
                vec![("threshold", A::Float(1.0))],
            );
            let (plan, out) = run(&r, &[enc(dt, &x)]).unwrap();
            assert_eq!(plan.outputs[0].shape, shape);
            let want: Vec<f64> = x.iter().map(|&v| if v > 1.0 { 1.0 } else { 0.0 }).collect();
            assert_eq!(dec(dt, &out[0]), want, "{dt:?} {shape:?}");
        }
    }
}

#[test]
fn binarizer_nan_and_default_threshold() {
    let r = req("Binarizer", &[(vec![4], Dtype::F32)], vec![]);
    let (_, out) = run(&r, &[enc(Dtype::F32, &[f64::NAN, 0.0, 1e-9, -1.0])]).unwrap();
    assert_eq!(dec(Dtype::F32, &out[0]), vec![0.0, 0.0, 1.0, 0.0]);
}

#[test]
fn binarizer_errors() {
    let r = req(
        "Binarizer",
        &[(vec![2], Dtype::F32)],
        vec![("thresh", A::Float(1.0))],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::InvalidAttribute(_))
    ));
    let r = req("Binarizer", &[(vec![2], Dtype::U8)], vec![]);
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(_))
    ));
    let mut r = req("Binarizer", &[(vec![2], Dtype::F32)], vec![]);
    r.domain = "com.example".into();
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedOp(_))
    ));
    r.domain = "ai.onnx.ml".into();
    assert!(MlPlugin::plan_ext(&r).is_ok());
    let r = req("Scaler", &[(vec![2], Dtype::F32)], vec![]);
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedOp(_))
    ));
}

// ---------------------------------------------------------------- ArrayFeatureExtractor

fn afe_ref(x: &[f64], shape: &[u64], idx: &[i64]) -> Vec<f64> {
    let c = *shape.last().unwrap() as usize;
    let outer = x
        .len()
        .checked_div(c)
        .unwrap_or(shape[..shape.len() - 1].iter().product::<u64>() as usize);
    let mut out = Vec::new();
    for o in 0..outer {
        for &i in idx {
            let i = if i < 0 { i + c as i64 } else { i };
            out.push(if i >= 0 && (i as usize) < c {
                x[o * c + i as usize]
            } else {
                0.0
            });
        }
    }
    out
}

#[test]
fn array_feature_extractor_shapes_and_dtypes() {
    for dt in [
        Dtype::F32,
        Dtype::F16,
        Dtype::F64,
        Dtype::I64,
        Dtype::U8,
        Dtype::I32,
    ] {
        for (shape, idx, ind_shape, want_shape) in [
            (vec![3u64, 4], vec![0i64, 1], vec![2u64], vec![3u64, 2]),
            (vec![5], vec![4, 0, 4], vec![3], vec![1, 3]),
            (vec![2, 3, 4], vec![3, -1, 1, 0], vec![2, 2], vec![2, 3, 4]),
            (vec![0, 4], vec![1], vec![1], vec![0, 1]),
            (vec![2, 4], vec![], vec![0], vec![2, 0]),
            (vec![2, 3], vec![7, 1], vec![1, 2], vec![2, 2]),
        ] {
            let n: u64 = shape.iter().product();
            let x: Vec<f64> = (0..n).map(|i| (i % 100) as f64).collect();
            for idt in [Dtype::I64, Dtype::I32] {
                let r = req(
                    "ArrayFeatureExtractor",
                    &[(shape.clone(), dt), (ind_shape.clone(), idt)],
                    vec![],
                );
                let idxf: Vec<f64> = idx.iter().map(|&v| v as f64).collect();
                let (plan, out) = run(&r, &[enc(dt, &x), enc(idt, &idxf)]).unwrap();
                assert_eq!(plan.outputs[0].shape, want_shape);
                assert_eq!(plan.outputs[0].dtype, dt);
                assert_eq!(
                    dec(dt, &out[0]),
                    afe_ref(&x, &shape, &idx),
                    "{dt:?} {shape:?}"
                );
            }
        }
    }
}

#[test]
fn array_feature_extractor_errors() {
    let r = req(
        "ArrayFeatureExtractor",
        &[(vec![], Dtype::F32), (vec![1], Dtype::I64)],
        vec![],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::InvalidShape(_))
    ));
    let r = req(
        "ArrayFeatureExtractor",
        &[(vec![2], Dtype::F32), (vec![1], Dtype::F32)],
        vec![],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(_))
    ));
}

// ---------------------------------------------------------------- TfIdfVectorizer

/// A port of the reference's n-gram trie (`op_tfidf_vectorizer.py`).
#[derive(Default)]
struct Trie {
    id: usize,
    leaves: Option<HashMap<i64, Trie>>,
}

struct Tfidf {
    min: i64,
    max: i64,
    skip: i64,
    mode: &'static str,
    counts: Vec<i64>,
    indexes: Vec<i64>,
    pool: Vec<i64>,
    weights: Vec<f64>,
}

impl Tfidf {
    fn attrs(&self) -> Vec<(&'static str, A)> {
        let mut v = vec![
            ("min_gram_length", A::Int(self.min)),
            ("max_gram_length", A::Int(self.max)),
            ("max_skip_count", A::Int(self.skip)),
            ("mode", A::Text(self.mode.into())),
            ("ngram_counts", A::Ints(self.counts.clone())),
            ("ngram_indexes", A::Ints(self.indexes.clone())),
            ("pool_int64s", A::Ints(self.pool.clone())),
        ];
        if !self.weights.is_empty() {
            v.push(("weights", A::Floats(self.weights.clone())));
        }
        v
    }

    fn reference(&self, x: &[i64], rows: usize) -> Vec<f64> {
        let mut root = Trie {
            id: 0,
            leaves: Some(HashMap::new()),
        };
        let mut id = 1;
        for (i, &start) in self.counts.iter().enumerate() {
            let size = i + 1;
            let end = self
                .counts
                .get(i + 1)
                .copied()
                .unwrap_or(self.pool.len() as i64);
            let grams = (end - start) as usize / size;
            if (size as i64) < self.min || size as i64 > self.max {
                id += grams;
                continue;
            }
            for g in 0..grams {
                let mut m = &mut root;
                for k in 0..size {
                    let v = self.pool[start as usize + g * size + k];
                    let p = m
                        .leaves
                        .get_or_insert_with(HashMap::new)
                        .entry(v)
                        .or_default();
                    if k + 1 == size {
                        p.id = id;
                        id += 1;
                    }
                    m = p;
                }
            }
        }
        let outs = *self.indexes.iter().max().unwrap() as usize + 1;
        let c = x.len() / rows.max(1);
        let mut freq = vec![0i64; rows * outs];
        for r in 0..rows {
            let row = &x[r * c..(r + 1) * c];
            let mut start_size = self.min as usize;
            for d in 1..=(self.skip as usize + 1) {
                for s in 0..c {
                    if s + d * (start_size - 1) >= c {
                        break;
                    }
                    let mut m = &root;
                    let (mut item, mut size) = (s, 1);
                    while m.leaves.as_ref().is_some_and(|l| !l.is_empty())
                        && size <= self.max as usize
                        && item < c
                    {
                        let Some(next) = m.leaves.as_ref().unwrap().get(&row[item]) else {
                            break;
                        };
                        if size >= start_size && next.id != 0 {
                            freq[r * outs + self.indexes[next.id - 1] as usize] += 1;
                        }
                        m = next;
                        size += 1;
                        item += d;
                    }
                }
                if start_size == 1 {
                    start_size = 2;
                    if start_size > self.max as usize {
                        break;
                    }
                }
            }
        }
        // weights by n-gram, each to its output (as the spec and onnxruntime)
        let mut by_out: Vec<Option<f64>> = vec![None; outs];
        for (id, &w) in self.weights.iter().enumerate() {
            by_out[self.indexes[id] as usize] = Some(w);
        }
        freq.iter()
            .enumerate()
            .map(|(p, &f)| {
                let w = if self.weights.is_empty() {
                    None
                } else {
                    Some(by_out[p % outs].unwrap_or(1.0))
                };
                let v = match (self.mode, w) {
                    ("TF", _) => f as f64,
                    ("IDF", Some(w)) => {
                        if f > 0 {
                            w
                        } else {
                            0.0
                        }
                    }
                    ("IDF", None) => (f > 0) as i64 as f64,
                    (_, Some(w)) => w * f as f64,
                    (_, None) => f as f64,
                };
                v as f32 as f64
            })
            .collect()
    }
}

fn official_tfidf(min: i64, skip: i64) -> Tfidf {
    Tfidf {
        min,
        max: 2,
        skip,
        mode: "TF",
        counts: vec![0, 4],
        indexes: (0..7).collect(),
        pool: vec![2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
        weights: vec![],
    }
}

fn run_tfidf(t: &Tfidf, x: &[i64], shape: &[u64], dt: Dtype) -> (Vec<u64>, Vec<f64>) {
    let r = req("TfIdfVectorizer", &[(shape.to_vec(), dt)], t.attrs());
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let (plan, out) = run(&r, &[enc(dt, &xf)]).unwrap();
    (plan.outputs[0].shape.clone(), dec(Dtype::F32, &out[0]))
}

#[test]
fn tfidf_official_cases() {
    let x = [1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8];
    for (min, skip, want) in [
        (2, 0, vec![0., 0., 0., 0., 1., 1., 1.]),
        (2, 5, vec![0., 0., 0., 0., 1., 3., 1.]),
        (1, 5, vec![0., 3., 1., 0., 1., 3., 1.]),
    ] {
        let t = official_tfidf(min, skip);
        let (shape, got) = run_tfidf(&t, &x, &[12], Dtype::I32);
        assert_eq!(shape, vec![7]);
        assert_eq!(got, want, "min {min} skip {skip}");
        let (shape, got) = run_tfidf(&t, &x, &[2, 6], Dtype::I64);
        assert_eq!(shape, vec![2, 7]);
        assert_eq!(got, t.reference(&x, 2));
    }
    // an empty unigram level
    let t = Tfidf {
        counts: vec![0, 0],
        indexes: vec![0, 1, 2],
        pool: vec![5, 6, 7, 8, 6, 7],
        ..official_tfidf(2, 0)
    };
    assert_eq!(run_tfidf(&t, &x, &[12], Dtype::I32).1, vec![1., 1., 1.]);
}

#[test]
fn tfidf_against_the_trie_reference() {
    let mut seed = 1;
    for mode in ["TF", "IDF", "TFIDF"] {
        for (min, max, skip) in [(1, 1, 0), (1, 2, 2), (2, 3, 1), (1, 3, 3), (3, 3, 0)] {
            for weighted in [false, true] {
                seed += 1;
                let pool: Vec<i64> = data(3 + 4 + 6, seed, 0.0, 4.0)
                    .iter()
                    .map(|v| v.floor() as i64)
                    .collect();
                let t = Tfidf {
                    min,
                    max,
                    skip,
                    mode,
                    counts: vec![0, 3, 7],
                    indexes: vec![0, 2, 1, 3, 5, 4, 6, 8, 7],
                    pool,
                    weights: if weighted {
                        data(9, seed + 100, 0.5, 2.0)
                    } else {
                        vec![]
                    },
                };
                let x: Vec<i64> = data(3 * 9, seed + 7, 0.0, 4.0)
                    .iter()
                    .map(|v| v.floor() as i64)
                    .collect();
                let (_, got) = run_tfidf(&t, &x, &[3, 9], Dtype::I64);
                assert_eq!(
                    got,
                    t.reference(&x, 3),
                    "{mode} {min} {max} {skip} {weighted}"
                );
                let (_, got) = run_tfidf(&t, &x[..9], &[9], Dtype::I32);
                assert_eq!(got, t.reference(&x[..9], 1));
            }
        }
    }
}

#[test]
fn tfidf_repeated_ngram_and_empty_input() {
    // the bigram (1, 2) twice: it counts into the output of its last occurrence only
    let t = Tfidf {
        min: 2,
        max: 2,
        skip: 0,
        mode: "TF",
        counts: vec![0, 0],
        indexes: vec![0, 1],
        pool: vec![1, 2, 1, 2],
        weights: vec![],
    };
    let x = [1, 2, 3, 1, 2];
    assert_eq!(run_tfidf(&t, &x, &[5], Dtype::I64).1, vec![0., 2.]);
    assert_eq!(t.reference(&x, 1), vec![0., 2.]);
    let (shape, got) = run_tfidf(&t, &[], &[0], Dtype::I64);
    assert_eq!((shape, got), (vec![2], vec![0., 0.]));
    let (shape, got) = run_tfidf(&t, &[], &[0, 4], Dtype::I32);
    assert_eq!((shape, got), (vec![0, 2], vec![]));
}

#[test]
fn tfidf_errors() {
    let t = official_tfidf(2, 0);
    let mut attrs = t.attrs();
    attrs.retain(|(n, _)| *n != "mode");
    let r = req("TfIdfVectorizer", &[(vec![4], Dtype::I64)], attrs);
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::InvalidAttribute(_))
    ));
    let mut attrs = t.attrs();
    attrs.push(("pool_strings", A::Texts(vec!["a".into()])));
    let r = req("TfIdfVectorizer", &[(vec![4], Dtype::I64)], attrs);
    assert!(MlPlugin::plan_ext(&r).is_err());
    let r = req("TfIdfVectorizer", &[(vec![4], Dtype::F32)], t.attrs());
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(_))
    ));
    for bad in [vec![0, -1], vec![0, 1 << 40]] {
        let t = Tfidf {
            indexes: bad,
            counts: vec![0],
            pool: vec![1, 2],
            ..official_tfidf(1, 0)
        };
        let r = req("TfIdfVectorizer", &[(vec![4], Dtype::I64)], t.attrs());
        assert!(matches!(
            MlPlugin::plan_ext(&r),
            Err(OpError::InvalidAttribute(_))
        ));
    }
    let r = req("TfIdfVectorizer", &[(vec![2, 2, 2], Dtype::I64)], t.attrs());
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::InvalidShape(_))
    ));
    let mut r = req("TfIdfVectorizer", &[(vec![4], Dtype::I64)], t.attrs());
    r.domain = "ai.onnx.ml".into();
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedOp(_))
    ));
}

// ---------------------------------------------------------------- TreeEnsemble

struct Trees {
    feats: Vec<i64>,
    modes: Vec<i64>,
    splits: Vec<f64>,
    tids: Vec<i64>,
    fids: Vec<i64>,
    tleaf: Vec<i64>,
    fleaf: Vec<i64>,
    ltargets: Vec<i64>,
    lweights: Vec<f64>,
    roots: Vec<i64>,
    members: Vec<f64>,
    missing: Vec<i64>,
    targets: i64,
    agg: i64,
    post: i64,
}

impl Trees {
    fn attrs(&self, wdt: Dtype) -> Vec<(&'static str, A)> {
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
    fn reference(&self, x: &[f64], nf: usize, maxv: f64, round: impl Fn(f64) -> f64) -> Vec<f64> {
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
    fn walk(&self, n: usize, x: &[f64], members: &mut impl Iterator<Item = f64>) -> Option<usize> {
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
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn erfinv(y: f64) -> f64 {
    let (mut lo, mut hi) = (-3.0, 3.0);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if erf(mid) < y { lo = mid } else { hi = mid }
    }
    (lo + hi) / 2.0
}

#[test]
fn probit_matches_the_inverse_erf() {
    for p in [0.01, 0.1, 0.3, 0.5, 0.6, 0.9, 0.99] {
        let want = std::f64::consts::SQRT_2 * erfinv(2.0 * p - 1.0);
        assert!(
            (tree::probit(p) - want).abs() < 5e-3 * (1.0 + want.abs()),
            "{p}"
        );
    }
}

/// The official `test_ai_onnx_ml_tree_ensemble_single_tree` (its split 3.14 is not π).
#[allow(clippy::approx_constant)]
fn single_tree() -> Trees {
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

fn membership_tree() -> Trees {
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

fn run_trees(t: &Trees, x: &[f64], nf: u64, dt: Dtype) -> Result<Vec<f64>, OpError> {
    let rows = x.len() as u64 / nf;
    let r = req("TreeEnsemble", &[(vec![rows, nf], dt)], t.attrs(dt));
    let (plan, out) = run(&r, &[enc(dt, x)])?;
    assert_eq!(plan.outputs[0].shape, vec![rows, t.targets as u64]);
    Ok(dec(dt, &out[0]))
}

#[test]
fn tree_official_cases() {
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
fn tree_aggregates_posts_and_dtypes() {
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
                let want = tr.reference(&xr, 2, tree::finite_max(dt), round);
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

fn base_clone(t: &Trees) -> Trees {
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
fn tree_empty_rows_and_errors() {
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

// ---------------------------------------------------------------- LabelEncoder

#[test]
fn label_encoder_numeric_maps() {
    // int64 -> float (opset 2 attributes)
    let r = req(
        "LabelEncoder",
        &[(vec![5], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1, 2, 3, 2])),
            ("values_floats", A::Floats(vec![0.5, 1.5, 2.5, 9.0])),
            ("default_float", A::Float(-7.0)),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::I64, &[1., 2., 4., 3., -1.])]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::F32);
    assert_eq!(dec(Dtype::F32, &out[0]), vec![0.5, 9.0, -7.0, 2.5, -7.0]);
    // float -> int64, default -1, NaN key
    let r = req(
        "LabelEncoder",
        &[(vec![2, 2], Dtype::F32)],
        vec![
            ("keys_floats", A::Floats(vec![0.5, f64::NAN])),
            ("values_int64s", A::Ints(vec![10, 20])),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::F32, &[0.5, f64::NAN, 1.0, 0.5])]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::I64);
    assert_eq!(dec(Dtype::I64, &out[0]), vec![10., 20., -1., 10.]);
    // tensors: i32 keys -> f64 values, default tensor; float default -0.0 without one
    for xdt in [Dtype::I32, Dtype::I64] {
        let r = req(
            "LabelEncoder",
            &[(vec![3], xdt)],
            vec![
                ("keys_tensor", tensor(Dtype::I32, &[4., 5.])),
                ("values_tensor", tensor(Dtype::F64, &[0.25, 0.75])),
                ("default_tensor", tensor(Dtype::F64, &[3.5])),
            ],
        );
        let (plan, out) = run(&r, &[enc(xdt, &[5., 4., 6.])]).unwrap();
        assert_eq!(plan.outputs[0].dtype, Dtype::F64);
        assert_eq!(dec(Dtype::F64, &out[0]), vec![0.75, 0.25, 3.5]);
    }
    let r = req(
        "LabelEncoder",
        &[(vec![2], Dtype::F64)],
        vec![
            ("keys_tensor", tensor(Dtype::F64, &[1.0])),
            ("values_tensor", tensor(Dtype::I32, &[7.])),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::F64, &[1.0, 2.0])]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::I32);
    assert_eq!(dec(Dtype::I32, &out[0]), vec![7., -1.]);
    // empty
    let r = req(
        "LabelEncoder",
        &[(vec![0], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("values_int64s", A::Ints(vec![2])),
        ],
    );
    assert_eq!(run(&r, &[vec![]]).unwrap().1[0], Vec::<u8>::new());
}

#[test]
fn label_encoder_errors() {
    let strings = req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_strings", A::Texts(vec!["a".into()])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&strings),
        Err(OpError::UnsupportedDtype(_))
    ));
    let mismatch = req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1, 2])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&mismatch),
        Err(OpError::InvalidAttribute(_))
    ));
    let two = req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("keys_floats", A::Floats(vec![1.0])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&two),
        Err(OpError::InvalidAttribute(_))
    ));
    let kinds = req(
        "LabelEncoder",
        &[(vec![2], Dtype::F32)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("values_int64s", A::Ints(vec![1])),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&kinds),
        Err(OpError::UnsupportedDtype(_))
    ));
}

// ---------------------------------------------------------------- blob, self-tests, CUDA

#[test]
fn large_tables_span_several_fill_launches() {
    // 2000 keys: 4001 words, 9 fill launches
    let keys: Vec<i64> = (0..2000).map(|k| k * 3).collect();
    let vals: Vec<i64> = (0..2000).map(|k| -k).collect();
    let r = req(
        "LabelEncoder",
        &[(vec![4], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(keys)),
            ("values_int64s", A::Ints(vals)),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::I64, &[0., 3., 5997., 4.])]).unwrap();
    assert_eq!(plan.launches.len(), 10);
    assert_eq!(dec(Dtype::I64, &out[0]), vec![0., -1., -1999., -1.]);
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    for case in MlPlugin::self_tests() {
        let mut b = PlanRequestExt::builder(&case.op);
        for d in &case.inputs {
            b = b.input(umd_sdk::legacy::desc_from_legacy(d));
        }
        for a in &case.attributes {
            let v = match &a.value {
                AttrValue::Int(v) => A::Int(*v),
                AttrValue::Float(v) => A::Float(*v),
                AttrValue::Text(v) => A::Text(v.clone()),
                AttrValue::Ints(v) => A::Ints(v.clone()),
                AttrValue::Floats(v) => A::Floats(v.clone()),
                other => panic!("{other:?}"),
            };
            b = b.attr(&a.name, v);
        }
        let (_, out) = run(&b.build(Target::cpu()), &case.input_data).unwrap();
        assert_eq!(out, case.expected, "{}", case.name);
    }
}

#[test]
fn cuda_sources_of_every_op_and_dtype() {
    let mut reqs = Vec::new();
    for dt in ALL {
        reqs.push(req("Binarizer", &[(vec![4], dt)], vec![]));
    }
    reqs.push(req(
        "ArrayFeatureExtractor",
        &[(vec![2, 3], Dtype::F32), (vec![1], Dtype::I64)],
        vec![],
    ));
    for dt in tfidf::DTYPES {
        reqs.push(req(
            "TfIdfVectorizer",
            &[(vec![2, 5], dt)],
            official_tfidf(1, 2).attrs(),
        ));
    }
    for dt in common::FLOATS {
        reqs.push(req(
            "TreeEnsemble",
            &[(vec![3, 1], dt)],
            membership_tree().attrs(dt),
        ));
    }
    reqs.push(req(
        "LabelEncoder",
        &[(vec![2], Dtype::I64)],
        vec![
            ("keys_int64s", A::Ints(vec![1])),
            ("values_floats", A::Floats(vec![1.0])),
        ],
    ));
    for r in &reqs {
        let srcs = testing::cuda_sources::<MlPlugin>(r).unwrap();
        for (id, src) in srcs {
            assert!(id.starts_with("ml_"), "{id}");
            assert!(src.code.contains("extern \"C\" __global__"));
            assert!(!src.code.contains("#include"));
        }
    }
}

// ---------------------------------------------------------------- CUDA emulation vectors

/// Appends a case per launch of `req`'s plan (for `cuda:sm_90`) to `out`, each with the buffers
/// as the CPU kernels left them before it (the workspace table included) and the CPU kernels'
/// results after it; writes the modules to `dir`. Launches that read and write one binding
/// (`fill_words` past its first chunk) are skipped: the emulator fills written buffers.
fn dump_plan(out: &mut String, dir: &str, name: &str, req: &PlanRequestExt, inputs: &[Vec<u8>]) {
    use std::fmt::Write as _;
    use umd_sdk::{CpuBuffer, CpuCall};
    let hex = |b: &[u8]| {
        if b.is_empty() {
            "-".to_string()
        } else {
            b.iter().map(|x| format!("{x:02x}")).collect()
        }
    };
    let mut req = req.clone();
    req.target = testing::cuda_target("sm_90");
    let plan = MlPlugin::plan_ext(&req).unwrap();
    let mut bufs: Vec<Vec<u8>> = inputs.to_vec();
    let mut dts: Vec<Dtype> = req.present().map(|d| d.dtype).collect();
    for o in &plan.outputs {
        bufs.push(vec![
            0;
            umd_sdk::shape::byte_size(&o.shape, o.dtype).unwrap()
                as usize
        ]);
        dts.push(o.dtype);
    }
    bufs.push(vec![0; plan.workspace_bytes as usize]);
    dts.push(Dtype::U8);
    for (k, l) in plan.launches.iter().enumerate() {
        let src = MlPlugin::kernel_source(&l.module_id, &req.target).unwrap();
        std::fs::write(format!("{dir}/{}.cu", l.module_id), &src.code).unwrap();
        let call = CpuCall {
            module_id: l.module_id.clone(),
            entry_point: l.entry_point.clone(),
            grid: l.grid,
            block: l.block,
            params: l.params.clone(),
            relocations: l.relocations.clone(),
            buffers: l
                .relocations
                .iter()
                .map(|r| CpuBuffer {
                    binding: r.binding,
                    size: bufs[r.binding as usize].len() as u64,
                    data: if r.access == umd_sdk::Access::Write {
                        vec![]
                    } else {
                        bufs[r.binding as usize].clone()
                    },
                })
                .collect(),
        };
        let before = bufs.clone();
        for w in MlPlugin::run_cpu(call).unwrap() {
            bufs[w.binding as usize] = w.data;
        }
        if l.relocations
            .iter()
            .any(|r| r.access == umd_sdk::Access::ReadWrite)
        {
            continue;
        }
        let _ = writeln!(
            out,
            "case {name}-{k}\nmodule {}\nentry {}\ngrid {} {} {}\nblock {} {} {}\nparams {}",
            l.module_id,
            l.entry_point,
            l.grid.x,
            l.grid.y,
            l.grid.z,
            l.block.x,
            l.block.y,
            l.block.z,
            hex(&l.params)
        );
        for r in &l.relocations {
            let _ = writeln!(out, "reloc {} {}", r.offset, r.binding);
        }
        for r in &l.relocations {
            let b = r.binding as usize;
            if r.access == umd_sdk::Access::Read {
                let _ = writeln!(out, "in {b} {}", hex(&before[b]));
            } else {
                let _ = writeln!(out, "out {b} {}", bufs[b].len());
                let _ = writeln!(out, "expect {b} {} {}", dtype::name(dts[b]), hex(&bufs[b]));
            }
        }
        out.push_str("end\n");
    }
}

/// Vectors for `plugins/norm/tools/cuda_emu.py` (runs the CUDA modules as C++ on the host):
/// when `UMD_DUMP_VECTORS` names a directory, every op × dtype goes to `ml.cases`.
#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for dt in ALL {
        let x: Vec<f64> = data(300, 2, -3.0, 3.0).iter().map(|v| v.round()).collect();
        let r = req(
            "Binarizer",
            &[(vec![300], dt)],
            vec![("threshold", A::Float(0.5))],
        );
        dump_plan(
            &mut out,
            &dir,
            &format!("binarizer-{dt:?}"),
            &r,
            &[enc(dt, &x)],
        );
    }
    for dt in [Dtype::U8, Dtype::F16, Dtype::F32, Dtype::I64] {
        let x: Vec<f64> = (0..60).map(|i| (i % 50) as f64).collect();
        for idt in [Dtype::I32, Dtype::I64] {
            let r = req(
                "ArrayFeatureExtractor",
                &[(vec![3, 4, 5], dt), (vec![4], idt)],
                vec![],
            );
            let ind = enc(idt, &[4., -1., 0., 9.]);
            dump_plan(
                &mut out,
                &dir,
                &format!("afe-{dt:?}-{idt:?}"),
                &r,
                &[enc(dt, &x), ind],
            );
        }
    }
    for mode in ["TF", "IDF", "TFIDF"] {
        for dt in tfidf::DTYPES {
            let t = Tfidf {
                mode,
                weights: if mode == "TF" {
                    vec![]
                } else {
                    data(7, 3, 0.5, 2.0)
                },
                ..official_tfidf(1, 3)
            };
            let x = [1., 1., 3., 3., 3., 7., 8., 6., 7., 5., 6., 8.];
            let r = req("TfIdfVectorizer", &[(vec![2, 6], dt)], t.attrs());
            dump_plan(
                &mut out,
                &dir,
                &format!("tfidf-{mode}-{dt:?}"),
                &r,
                &[enc(dt, &x)],
            );
        }
    }
    for dt in common::FLOATS {
        let x = [1.2, 3.4, -0.12, f64::NAN, 12.0, 7.0];
        let r = req(
            "TreeEnsemble",
            &[(vec![6, 1], dt)],
            membership_tree().attrs(dt),
        );
        dump_plan(
            &mut out,
            &dir,
            &format!("tree-member-{dt:?}"),
            &r,
            &[enc(dt, &x)],
        );
        for agg in 0..4 {
            for post in 0..5 {
                let t = Trees {
                    agg,
                    post,
                    ..single_tree()
                };
                let x = [1.2, 3.4, -0.12, 1.66, 4.14, 1.77];
                let r = req("TreeEnsemble", &[(vec![3, 2], dt)], t.attrs(dt));
                let name = format!("tree-{agg}-{post}-{dt:?}");
                dump_plan(&mut out, &dir, &name, &r, &[enc(dt, &x)]);
            }
        }
    }
    for xd in label::DTYPES {
        for yd in label::DTYPES {
            let tdt = |d: Dtype| {
                if d == Dtype::I32 || d == Dtype::I64 {
                    d
                } else {
                    Dtype::F64
                }
            };
            let r = req(
                "LabelEncoder",
                &[(vec![5], xd)],
                vec![
                    ("keys_tensor", tensor(tdt(xd), &[1., 2., 3., 2.])),
                    ("values_tensor", tensor(yd, &[10., 20., 30., 40.])),
                    ("default_tensor", tensor(yd, &[-5.])),
                ],
            );
            let x = enc(xd, &[2., 1., 7., 3., 0.]);
            dump_plan(&mut out, &dir, &format!("label-{xd:?}-{yd:?}"), &r, &[x]);
        }
    }
    std::fs::write(format!("{dir}/ml.cases"), out).unwrap();
}

/// Random (often invalid) tree and n-gram attributes: planning answers or refuses, never
/// panics, and every accepted plan runs.
#[test]
fn random_attributes_never_panic() {
    let ri = |n: usize, seed: u64, lo: f64, hi: f64| -> Vec<i64> {
        data(n, seed, lo, hi)
            .iter()
            .map(|v| v.floor() as i64)
            .collect()
    };
    let mut accepted = (0, 0);
    for seed in 0..300u64 {
        let nn = (seed % 6) as usize + 1;
        let nl = (seed % 4) as usize + 1;
        let t = Trees {
            feats: ri(nn, seed, -0.2, 2.2),
            modes: ri(nn, seed + 1, 0.0, 7.0),
            splits: data(nn, seed + 2, -1.0, 1.0),
            tids: ri(nn, seed + 3, -0.3, nn as f64 + 0.5),
            fids: ri(nn, seed + 4, -0.3, nn as f64 + 0.5),
            tleaf: ri(nn, seed + 5, 0.0, 2.0),
            fleaf: ri(nn, seed + 6, 0.0, 2.0),
            ltargets: ri(nl, seed + 7, -0.2, 3.0),
            lweights: data(nl, seed + 8, -1.0, 1.0),
            roots: ri(1 + (seed % 2) as usize, seed + 9, -0.2, nn as f64),
            members: if seed % 3 == 0 {
                vec![0.5, f64::NAN, -0.5]
            } else {
                vec![]
            },
            missing: if seed % 2 == 0 {
                ri(nn, seed + 10, 0.0, 2.0)
            } else {
                vec![]
            },
            targets: 3,
            agg: (seed % 5) as i64,
            post: (seed % 4) as i64,
        };
        match run_trees(&t, &data(6, seed, -1.0, 1.0), 2, Dtype::F32) {
            Ok(_) => accepted.0 += 1,
            Err(e) => assert!(!matches!(e, OpError::Internal(_)), "{e:?}"),
        }
        let counts = ri((seed % 3) as usize + 1, seed + 11, -1.0, 8.0);
        let tf = Tfidf {
            min: (seed % 3) as i64,
            max: (seed % 4) as i64,
            skip: (seed % 3) as i64 - 1,
            mode: ["TF", "IDF", "TFIDF", "X"][(seed % 4) as usize],
            counts,
            indexes: ri((seed % 9) as usize + 1, seed + 12, -0.2, 9.0),
            pool: ri((seed % 10) as usize, seed + 13, 0.0, 3.0),
            weights: if seed % 2 == 0 {
                vec![]
            } else {
                data(9, seed, 0.0, 1.0)
            },
        };
        let r = req("TfIdfVectorizer", &[(vec![2, 5], Dtype::I64)], tf.attrs());
        let x = enc(
            Dtype::I64,
            &data(10, seed, 0.0, 3.0)
                .iter()
                .map(|v| v.floor())
                .collect::<Vec<_>>(),
        );
        match run(&r, &[x]) {
            Ok(_) => accepted.1 += 1,
            Err(e) => assert!(!matches!(e, OpError::Internal(_)), "{e:?}"),
        }
    }
    assert!(accepted.0 > 5 && accepted.1 > 5, "{accepted:?}");
}
