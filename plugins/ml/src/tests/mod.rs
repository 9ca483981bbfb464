//! Native tests, one file per op group: every op planned and run on the CPU kernels against
//! naive references written here (a port of the reference's n-gram trie for TfIdfVectorizer, a
//! recursive tree walk for TreeEnsemble) and the official node tests' values; every served
//! dtype, empty tensors, error cases. Here: shared helpers, large tables, the self-tests, the
//! CUDA sources of every op × dtype (dumped to `UMD_DUMP_CUDA`) and random attributes.

pub use super::*;
pub use umd_sdk::{AttrValueExt as A, TensorValue, testing};

pub fn enc(dt: Dtype, v: &[f64]) -> Vec<u8> {
    dtype::encode(dt, v).unwrap()
}

pub fn dec(dt: Dtype, b: &[u8]) -> Vec<f64> {
    dtype::decode_f64(dt, b)
}

pub fn req(op: &str, inputs: &[(Vec<u64>, Dtype)], attrs: Vec<(&str, A)>) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op);
    for (i, (s, d)) in inputs.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{i}"), s.clone(), *d));
    }
    for (n, v) in attrs {
        b = b.attr(n, v);
    }
    b.build(Target::cpu())
}

pub fn run(r: &PlanRequestExt, inputs: &[Vec<u8>]) -> Result<(OpPlan, Vec<Vec<u8>>), OpError> {
    testing::run::<MlPlugin>(r, inputs)
}

pub fn data(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
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

pub fn tensor(dt: Dtype, v: &[f64]) -> A {
    A::Tensor(TensorValue {
        desc: TensorDesc::new("t", vec![v.len() as u64], dt),
        data: enc(dt, v),
    })
}

pub const ALL: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];

mod classic;
mod emu;
mod label;
mod simple;
mod tfidf;
mod tree;

pub use tfidf::{Tfidf, official_tfidf};
pub use tree::{Trees, membership_tree, run_trees, single_tree};

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
    for dt in crate::tfidf::DTYPES {
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
    reqs.extend(classic::classic_cases().into_iter().map(|(_, r, _)| r));
    reqs.extend(classic::forest_cases().into_iter().map(|(_, r, _)| r));
    reqs.extend(classic::svm_cases().into_iter().map(|(_, r, _)| r));
    for r in &reqs {
        let srcs = testing::cuda_sources::<MlPlugin>(r).unwrap();
        for (id, src) in srcs {
            assert!(id.starts_with("ml_"), "{id}");
            assert!(src.code.contains("extern \"C\" __global__"));
            assert!(!src.code.contains("#include"));
        }
    }
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
