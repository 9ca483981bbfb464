//! TfIdfVectorizer against the official values and a port of the reference's n-gram trie.

use super::*;
use std::collections::HashMap;

/// A port of the reference's n-gram trie (`op_tfidf_vectorizer.py`).
#[derive(Default)]
struct Trie {
    id: usize,
    leaves: Option<HashMap<i64, Trie>>,
}

pub struct Tfidf {
    pub min: i64,
    pub max: i64,
    pub skip: i64,
    pub mode: &'static str,
    pub counts: Vec<i64>,
    pub indexes: Vec<i64>,
    pub pool: Vec<i64>,
    pub weights: Vec<f64>,
}

impl Tfidf {
    pub fn attrs(&self) -> Vec<(&'static str, A)> {
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

    pub fn reference(&self, x: &[i64], rows: usize) -> Vec<f64> {
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

pub fn official_tfidf(min: i64, skip: i64) -> Tfidf {
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

pub fn run_tfidf(t: &Tfidf, x: &[i64], shape: &[u64], dt: Dtype) -> (Vec<u64>, Vec<f64>) {
    let r = req("TfIdfVectorizer", &[(shape.to_vec(), dt)], t.attrs());
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let (plan, out) = run(&r, &[enc(dt, &xf)]).unwrap();
    (plan.outputs[0].shape.clone(), dec(Dtype::F32, &out[0]))
}

#[test]
pub fn tfidf_official_cases() {
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
pub fn tfidf_against_the_trie_reference() {
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
pub fn tfidf_repeated_ngram_and_empty_input() {
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
pub fn tfidf_errors() {
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
