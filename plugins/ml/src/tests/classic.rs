//! The classic ONNX-ML ops (Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer,
//! LinearRegressor, LinearClassifier) against naive references written here, on every input
//! dtype; their refusals. (Against onnxruntime: clients/python/tests/test_models.py.)

use super::*;
use umd_sdk::attr;

const INPUTS: [Dtype; 4] = [Dtype::F32, Dtype::F64, Dtype::I64, Dtype::I32];

fn floats(v: &[f64]) -> A {
    A::Floats(v.to_vec())
}

/// Values of `dt` (integers for the integer dtypes).
fn values(dt: Dtype, n: usize, seed: u64) -> Vec<f64> {
    let v = data(n, seed, -3.0, 3.0);
    let v: Vec<f64> = if matches!(dt, Dtype::I64 | Dtype::I32) {
        v.iter().map(|x| x.round()).collect()
    } else {
        v
    };
    dec(dt, &enc(dt, &v))
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0) || (g.is_nan() && w.is_nan()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

/// Requests of every new op × input dtype with their inputs (also the CUDA vectors' cases).
pub fn classic_cases() -> Vec<(String, PlanRequestExt, Vec<Vec<u8>>)> {
    let mut cases = Vec::new();
    for dt in INPUTS {
        let x = enc(dt, &values(dt, 12, 1));
        let shape = vec![(vec![3, 4], dt)];
        cases.push((
            format!("scaler-{dt:?}"),
            req(
                "Scaler",
                &shape,
                vec![
                    ("offset", floats(&[0.5, -1.0, 0.0, 2.0])),
                    ("scale", floats(&[2.0])),
                ],
            ),
            vec![x.clone()],
        ));
        for norm in ["MAX", "L1", "L2"] {
            cases.push((
                format!("normalizer-{norm}-{dt:?}"),
                req("Normalizer", &shape, vec![("norm", A::Text(norm.into()))]),
                vec![x.clone()],
            ));
        }
        let imputer = if matches!(dt, Dtype::F32 | Dtype::F64) {
            vec![
                ("imputed_value_floats", floats(&[9.0, 8.0, 7.0, 6.0])),
                ("replaced_value_float", A::Float(f64::NAN)),
            ]
        } else {
            vec![
                ("imputed_value_int64s", A::Ints(vec![99])),
                ("replaced_value_int64", A::Int(1)),
            ]
        };
        let mut xi = values(dt, 12, 1);
        if matches!(dt, Dtype::F32 | Dtype::F64) {
            xi[2] = f64::NAN;
            xi[7] = f64::NAN;
        }
        cases.push((
            format!("imputer-{dt:?}"),
            req("Imputer", &shape, imputer),
            vec![enc(dt, &xi)],
        ));
        cases.push((
            format!("onehot-{dt:?}"),
            req(
                "OneHotEncoder",
                &shape,
                vec![("cats_int64s", A::Ints(vec![-2, 0, 1, 3]))],
            ),
            vec![x.clone()],
        ));
        cases.push((
            format!("fv-{dt:?}"),
            req(
                "FeatureVectorizer",
                &[(vec![3, 4], dt), (vec![3, 2], Dtype::F32)],
                vec![("inputdimensions", A::Ints(vec![3, 4]))],
            ),
            vec![x.clone(), enc(Dtype::F32, &data(6, 5, -1.0, 1.0))],
        ));
        cases.push((
            format!("linreg-{dt:?}"),
            req(
                "LinearRegressor",
                &shape,
                vec![
                    ("coefficients", floats(&data(8, 2, -1.0, 1.0))),
                    ("intercepts", floats(&[0.5, -0.5])),
                    ("targets", A::Int(2)),
                    ("post_transform", A::Text("LOGISTIC".into())),
                ],
            ),
            vec![x.clone()],
        ));
        for (labels, k, post) in [
            (vec![10, 20, 30], 3, "SOFTMAX"),
            (vec![10, 20, 30], 3, "SOFTMAX_ZERO"),
            (vec![4, 5], 1, "LOGISTIC"),
            (vec![4, 5], 1, "NONE"),
            (vec![], 1, "PROBIT"),
        ] {
            let mut a = vec![
                ("coefficients", floats(&data(4 * k, 3, -0.2, 0.2))),
                ("intercepts", floats(&data(k, 4, 0.4, 0.6))),
                ("post_transform", A::Text(post.into())),
            ];
            if !labels.is_empty() {
                a.push(("classlabels_ints", A::Ints(labels)));
            }
            cases.push((
                format!("lincls-{k}-{post}-{dt:?}"),
                req("LinearClassifier", &shape, a),
                vec![x.clone()],
            ));
        }
    }
    cases
}

/// The naive result of one case (outputs as f64).
fn reference(r: &PlanRequestExt, x: &[f64], x2: &[f64]) -> Vec<Vec<f64>> {
    let a = &r.attributes;
    let fl = |n: &str| attr::floats_or(a, n, &[]).unwrap();
    let c = 4usize;
    let rows = x.len() / c;
    let f32r = |v: f64| v as f32 as f64;
    match r.op.as_str() {
        "Scaler" => {
            let (o, s) = (fl("offset"), fl("scale"));
            let pick = |t: &[f64], k: usize| t[if t.len() == 1 { 0 } else { k }];
            vec![
                x.iter()
                    .enumerate()
                    .map(|(i, &v)| f32r((v - pick(&o, i % c)) * pick(&s, i % c)))
                    .collect(),
            ]
        }
        "Normalizer" => {
            let norm = attr::text_or(a, "norm", "MAX").unwrap();
            let mut y = Vec::new();
            for row in x.chunks(c) {
                let d = match norm.as_str() {
                    "MAX" => row.iter().cloned().fold(f64::MIN, f64::max),
                    "L1" => row.iter().map(|v| v.abs()).sum(),
                    _ => row.iter().map(|v| v * v).sum::<f64>().sqrt(),
                };
                y.extend(row.iter().map(|&v| if d != 0.0 { v / d } else { v }));
            }
            vec![y]
        }
        "Imputer" => {
            let fills = if attr::has(a, "imputed_value_floats") {
                fl("imputed_value_floats")
            } else {
                let v = attr::ints_or(a, "imputed_value_int64s", &[]).unwrap();
                v.iter().map(|&i| i as f64).collect()
            };
            let rep = attr::float_or(a, "replaced_value_float", 0.0).unwrap();
            let rep_int = attr::int_or(a, "replaced_value_int64", 0).unwrap() as f64;
            let floats = attr::has(a, "imputed_value_floats");
            vec![
                x.iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let hit = if !floats {
                            v == rep_int
                        } else if rep.is_nan() {
                            v.is_nan()
                        } else {
                            v == rep
                        };
                        if hit {
                            fills[if fills.len() == 1 { 0 } else { i % c }]
                        } else {
                            v
                        }
                    })
                    .collect(),
            ]
        }
        "OneHotEncoder" => {
            let cats = attr::ints_or(a, "cats_int64s", &[]).unwrap();
            let mut y = Vec::new();
            for &v in x {
                y.extend(cats.iter().map(|&k| ((v as i64) == k) as i64 as f64));
            }
            vec![y]
        }
        "FeatureVectorizer" => {
            let mut y = Vec::new();
            for rr in 0..rows {
                y.extend(&x[rr * c..rr * c + 3]);
                y.extend(&x2[rr * 2..rr * 2 + 2]);
                y.extend([0.0, 0.0]);
            }
            vec![y]
        }
        _ => {
            let coef = fl("coefficients");
            let icpt = fl("intercepts");
            let k = icpt.len();
            let labels = attr::ints_or(a, "classlabels_ints", &[]).unwrap();
            let post = attr::text_or(a, "post_transform", "NONE").unwrap();
            let code = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]
                .iter()
                .position(|p| *p == post)
                .unwrap() as u32;
            let second = r.op == "LinearClassifier" && k == 1 && labels.len() == 2;
            let (mut ys, mut zs) = (Vec::new(), Vec::new());
            for row in x.chunks(c) {
                let mut s: Vec<f32> = (0..k)
                    .map(|t| {
                        (icpt[t] + (0..c).map(|j| coef[t * c + j] * row[j]).sum::<f64>()) as f32
                    })
                    .collect();
                let best = (0..k).fold(0, |b, t| if s[t] > s[b] { t } else { b });
                ys.push(if k == 1 {
                    let pos = s[0] > 0.0;
                    match labels.len() {
                        2 => labels[pos as usize] as f64,
                        _ => pos as i64 as f64,
                    }
                } else {
                    labels.get(best).copied().unwrap_or(0) as f64
                });
                if k >= 2 {
                    crate::linear::post(&mut s, code);
                } else if code == 4 {
                    s[0] = crate::linear::probit_f32(s[0]);
                } else if second {
                    let v = s[0] as f64;
                    s = if code == 2 {
                        vec![
                            (1.0 / (1.0 + v.exp())) as f32,
                            (1.0 / (1.0 + (-v).exp())) as f32,
                        ]
                    } else {
                        vec![(1.0 - v) as f32, v as f32]
                    };
                }
                zs.extend(s.iter().map(|&v| v as f64));
            }
            if r.op == "LinearClassifier" {
                vec![ys, zs]
            } else {
                vec![zs]
            }
        }
    }
}

#[test]
fn every_op_and_input_dtype_against_naive_references() {
    for (name, r, inputs) in classic_cases() {
        let x = dec(r.input(0).unwrap().dtype, &inputs[0]);
        let x2 = inputs
            .get(1)
            .map(|b| dec(Dtype::F32, b))
            .unwrap_or_default();
        let (plan, out) = run(&r, &inputs).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let want = reference(&r, &x, &x2);
        assert_eq!(out.len(), want.len(), "{name}");
        for (k, (o, w)) in out.iter().zip(&want).enumerate() {
            let got = dec(plan.outputs[k].dtype, o);
            close(&got, w, &format!("{name} output {k}"));
        }
    }
}

#[test]
fn shapes_of_rank_one_inputs_and_classifier_outputs() {
    let r = req(
        "LinearClassifier",
        &[(vec![4], Dtype::F32)],
        vec![
            ("coefficients", floats(&[1.0, 0.0, 0.0, 0.0])),
            ("intercepts", floats(&[0.0])),
            ("classlabels_ints", A::Ints(vec![7, 8])),
        ],
    );
    let (plan, out) = run(&r, &[enc(Dtype::F32, &[-2.0, 1.0, 1.0, 1.0])]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![1]);
    assert_eq!(plan.outputs[1].shape, vec![1, 2]);
    assert_eq!(dec(Dtype::I64, &out[0]), vec![7.0]);
    assert_eq!(dec(Dtype::F32, &out[1]), vec![3.0, -2.0]);
    let r = req(
        "OneHotEncoder",
        &[(vec![2, 1, 3], Dtype::I64)],
        vec![("cats_int64s", A::Ints(vec![1, 2]))],
    );
    let plan = MlPlugin::plan_ext(&r).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 1, 3, 2]);
    // empty batches plan and run
    let r = req(
        "Scaler",
        &[(vec![0, 3], Dtype::F32)],
        vec![("scale", floats(&[2.0]))],
    );
    let (_, out) = run(&r, &[vec![]]).unwrap();
    assert!(out[0].is_empty());
}

#[test]
fn bad_attributes_shapes_and_dtypes_are_refused_by_name() {
    let x = [(vec![2, 3], Dtype::F32)];
    let refuse = |r: PlanRequestExt, what: &str| match MlPlugin::plan_ext(&r) {
        Err(e) => assert!(format!("{e:?}").contains(what), "{e:?} lacks {what:?}"),
        Ok(_) => panic!("{} planned; expected an error about {what}", r.op),
    };
    refuse(
        req("Scaler", &x, vec![("offset", floats(&[1.0, 2.0]))]),
        "`offset` has 2 values",
    );
    refuse(
        req("Normalizer", &x, vec![("norm", A::Text("L3".into()))]),
        "`norm`",
    );
    refuse(
        req("Imputer", &x, vec![]),
        "`imputed_value_floats` is required",
    );
    refuse(
        req(
            "LinearRegressor",
            &x,
            vec![("coefficients", floats(&[1.0]))],
        ),
        "`coefficients` has 1 values",
    );
    refuse(
        req(
            "LinearRegressor",
            &x,
            vec![
                ("coefficients", floats(&[1.0; 3])),
                ("post_transform", A::Text("SIGMOID".into())),
            ],
        ),
        "`post_transform`",
    );
    refuse(
        req(
            "LinearClassifier",
            &x,
            vec![
                ("coefficients", floats(&[1.0; 6])),
                ("intercepts", floats(&[0.0, 0.0])),
                ("classlabels_ints", A::Ints(vec![1])),
            ],
        ),
        "1 `classlabels_ints` for 2 classes",
    );
    let strings = req(
        "LinearClassifier",
        &x,
        vec![
            ("coefficients", floats(&[1.0; 3])),
            ("intercepts", floats(&[0.0])),
            (
                "classlabels_strings",
                A::Texts(vec!["a".into(), "b".into()]),
            ),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&strings),
        Err(OpError::UnsupportedDtype(m)) if m.contains("computed when planning, from X's value")
    ));
    refuse(
        req("Normalizer", &[(vec![1, 2, 3], Dtype::F32)], vec![]),
        "X must be [N, C] or [C]",
    );
    assert!(matches!(
        MlPlugin::plan_ext(&req("Normalizer", &[(vec![2], Dtype::F16)], vec![])),
        Err(OpError::UnsupportedDtype(_))
    ));
    refuse(
        req(
            "FeatureVectorizer",
            &[(vec![2, 3], Dtype::F32), (vec![3, 3], Dtype::F32)],
            vec![("inputdimensions", A::Ints(vec![3, 3]))],
        ),
        "input 1 has 3 rows",
    );
    refuse(
        req(
            "FeatureVectorizer",
            &x,
            vec![("inputdimensions", A::Ints(vec![3, 3]))],
        ),
        "`inputdimensions`",
    );
    // an unknown category with zeros = 0 fails the call, naming the value
    let r = req(
        "OneHotEncoder",
        &[(vec![2], Dtype::I64)],
        vec![("cats_int64s", A::Ints(vec![1])), ("zeros", A::Int(0))],
    );
    let e = run(&r, &[enc(Dtype::I64, &[1.0, 5.0])]).unwrap_err();
    assert!(format!("{e:?}").contains("value 5"), "{e:?}");
}

/// Two trees: tree 0 `x0 <= 0.5` (NaN goes true) → leaf A, else `x1 < 0` → leaf B or C; tree 1
/// is one leaf D. Weights: A (0, 1), B (1, 2) and (0, −1), C (1, 3), D (0, 0.5).
fn forest_attrs(weights_prefix: &str, ids: [i64; 5]) -> Vec<(&'static str, A)> {
    let pre =
        |s: &str| -> &'static str { Box::leak(format!("{weights_prefix}_{s}").into_boxed_str()) };
    vec![
        ("nodes_treeids", A::Ints(vec![0, 0, 0, 0, 0, 1])),
        ("nodes_nodeids", A::Ints(vec![0, 1, 2, 3, 4, 0])),
        ("nodes_featureids", A::Ints(vec![0, 0, 1, 0, 0, 0])),
        ("nodes_values", floats(&[0.5, 0.0, 0.0, 0.0, 0.0, 0.0])),
        (
            "nodes_modes",
            A::Texts(
                ["BRANCH_LEQ", "LEAF", "BRANCH_LT", "LEAF", "LEAF", "LEAF"]
                    .map(String::from)
                    .to_vec(),
            ),
        ),
        ("nodes_truenodeids", A::Ints(vec![1, 0, 3, 0, 0, 0])),
        ("nodes_falsenodeids", A::Ints(vec![2, 0, 4, 0, 0, 0])),
        (
            "nodes_missing_value_tracks_true",
            A::Ints(vec![1, 0, 0, 0, 0, 0]),
        ),
        (pre("treeids"), A::Ints(vec![0, 0, 0, 0, 1])),
        (pre("nodeids"), A::Ints(vec![1, 3, 3, 4, 0])),
        (pre("ids"), A::Ints(ids.to_vec())),
        (pre("weights"), floats(&[1.0, 2.0, -1.0, 3.0, 0.5])),
    ]
}

const FOREST_X: [f64; 8] = [0.2, 5.0, 0.9, -1.0, f64::NAN, 1.0, 0.9, 1.0];

fn forest_run(
    op: &str,
    dt: Dtype,
    mut attrs: Vec<(&'static str, A)>,
    extra: Vec<(&'static str, A)>,
) -> Vec<Vec<f64>> {
    attrs.extend(extra);
    let r = req(op, &[(vec![4, 2], dt)], attrs);
    let (plan, out) = run(&r, &[enc(dt, &FOREST_X)]).unwrap_or_else(|e| panic!("{e:?}"));
    out.iter()
        .zip(&plan.outputs)
        .map(|(o, d)| dec(d.dtype, o))
        .collect()
}

#[test]
fn tree_ensemble_regressor_aggregates_as_onnxruntime_does() {
    let reg = || forest_attrs("target", [0, 1, 0, 1, 0]);
    let base = || {
        vec![
            ("n_targets", A::Int(2)),
            ("base_values", floats(&[10.0, 20.0])),
        ]
    };
    for dt in [Dtype::F32, Dtype::F64] {
        let with = |agg: &str| {
            let mut e = base();
            e.push(("aggregate_function", A::Text(agg.into())));
            forest_run("TreeEnsembleRegressor", dt, reg(), e).remove(0)
        };
        // rows: leaf A + D; B + D; NaN → A + D; C + D. Target 1 unreached reads 0.
        assert_eq!(
            with("SUM"),
            vec![11.5, 0.0, 9.5, 22.0, 11.5, 0.0, 10.5, 23.0],
            "{dt:?}"
        );
        assert_eq!(
            with("AVERAGE"),
            vec![10.75, 0.0, 9.75, 21.0, 10.75, 0.0, 10.25, 21.5]
        );
        assert_eq!(
            with("MIN"),
            vec![10.5, 0.0, 9.0, 22.0, 10.5, 0.0, 10.5, 23.0]
        );
        assert_eq!(
            with("MAX"),
            vec![11.0, 0.0, 10.5, 22.0, 11.0, 0.0, 10.5, 23.0]
        );
    }
    // one target: its base value is added even where no leaf reached it
    let one = forest_run(
        "TreeEnsembleRegressor",
        Dtype::F32,
        forest_attrs("target", [0, 0, 0, 0, 0]),
        vec![("base_values", floats(&[1.0]))],
    );
    assert_eq!(one[0], vec![2.5, 2.5, 2.5, 4.5]);
}

#[test]
fn tree_ensemble_classifier_labels_and_binary_rules() {
    let labels = |v: &[i64]| ("classlabels_int64s", A::Ints(v.to_vec()));
    // three classes: the label of the largest score a leaf reached (class 2 never is)
    let out = forest_run(
        "TreeEnsembleClassifier",
        Dtype::F32,
        forest_attrs("class", [0, 1, 0, 1, 0]),
        vec![labels(&[7, 8, 9])],
    );
    assert_eq!(out[0], vec![7.0, 8.0, 7.0, 8.0]);
    assert_eq!(
        out[1],
        vec![1.5, 0.0, 0.0, -0.5, 2.0, 0.0, 1.5, 0.0, 0.0, 0.5, 3.0, 0.0]
    );
    // binary case (one class id), weights not all positive: the label by s > 0; weights on
    // class 1 leave class 0 unreached (it reads 0), weights on class 0 alone give [-s, s]
    let binary = |id: i64| {
        forest_run(
            "TreeEnsembleClassifier",
            Dtype::F64,
            forest_attrs("class", [id; 5]),
            vec![labels(&[3, 9])],
        )
    };
    // s per row: 1.5, 2 - 1 + 0.5 = 1.5, 1.5, 3.5
    let out = binary(1);
    assert_eq!(out[0], vec![9.0, 9.0, 9.0, 9.0]);
    assert_eq!(out[1], vec![0.0, 1.5, 0.0, 1.5, 0.0, 1.5, 0.0, 3.5]);
    let out = binary(0);
    assert_eq!(out[0], vec![9.0, 9.0, 9.0, 9.0]);
    assert_eq!(out[1], vec![-1.5, 1.5, -1.5, 1.5, -1.5, 1.5, -3.5, 3.5]);
    // refusals: string labels without X's value (status 2), a weight on a branch, a missing child
    let mut bad = forest_attrs("class", [0, 1, 0, 1, 0]);
    bad.push((
        "classlabels_strings",
        A::Texts(vec!["a".into(), "b".into()]),
    ));
    let r = req("TreeEnsembleClassifier", &[(vec![4, 2], Dtype::F32)], bad);
    assert!(matches!(
        MlPlugin::plan_ext(&r),
        Err(OpError::UnsupportedDtype(m)) if m.contains("computed when planning, from X's value")
    ));
    let mut on_branch = forest_attrs("target", [0, 0, 0, 0, 0]);
    on_branch[9] = ("target_nodeids", A::Ints(vec![2, 3, 3, 4, 0]));
    let r = req(
        "TreeEnsembleRegressor",
        &[(vec![4, 2], Dtype::F32)],
        on_branch,
    );
    let e = MlPlugin::plan_ext(&r).unwrap_err();
    assert!(format!("{e:?}").contains("not a LEAF"), "{e:?}");
    let mut orphan = forest_attrs("target", [0, 0, 0, 0, 0]);
    orphan[5] = ("nodes_truenodeids", A::Ints(vec![7, 0, 3, 0, 0, 0]));
    let r = req("TreeEnsembleRegressor", &[(vec![4, 2], Dtype::F32)], orphan);
    let e = MlPlugin::plan_ext(&r).unwrap_err();
    assert!(
        format!("{e:?}").contains("(0, 7) is a child but does not exist"),
        "{e:?}"
    );
    // a cycle (node 2's false child is the root) ends at the step bound, no hang
    let mut cycle = forest_attrs("target", [0, 0, 0, 0, 0]);
    cycle[6] = ("nodes_falsenodeids", A::Ints(vec![2, 0, 0, 0, 0, 0]));
    let r = req("TreeEnsembleRegressor", &[(vec![4, 2], Dtype::F32)], cycle);
    run(&r, &[enc(Dtype::F32, &FOREST_X)]).unwrap();
}

/// The forests' cases for the CUDA vectors and sources: every input dtype, both ops.
pub fn forest_cases() -> Vec<(String, PlanRequestExt, Vec<Vec<u8>>)> {
    let mut cases = Vec::new();
    for dt in INPUTS {
        let x = enc(
            dt,
            &FOREST_X.map(|v| {
                if dt == Dtype::I64 || dt == Dtype::I32 {
                    if v.is_nan() { 0.0 } else { v.round() }
                } else {
                    v
                }
            }),
        );
        for agg in ["SUM", "AVERAGE", "MIN", "MAX"] {
            let mut a = forest_attrs("target", [0, 1, 0, 1, 0]);
            a.extend([
                ("n_targets", A::Int(2)),
                ("aggregate_function", A::Text(agg.into())),
                ("base_values", floats(&[10.0, 20.0])),
                ("post_transform", A::Text("SOFTMAX".into())),
            ]);
            cases.push((
                format!("forest-{agg}-{dt:?}"),
                req("TreeEnsembleRegressor", &[(vec![4, 2], dt)], a),
                vec![x.clone()],
            ));
        }
        for (ids, labels, post) in [
            ([0, 1, 0, 1, 0], vec![7, 8, 9], "SOFTMAX"),
            ([1, 1, 1, 1, 1], vec![3, 9], "LOGISTIC"),
            ([0, 1, 0, 1, 0], vec![3, 9], "NONE"),
        ] {
            let mut a = forest_attrs("class", ids);
            a.extend([
                ("classlabels_int64s", A::Ints(labels.clone())),
                ("post_transform", A::Text(post.into())),
            ]);
            cases.push((
                format!("forest-cls-{}-{post}-{dt:?}", labels.len()),
                req("TreeEnsembleClassifier", &[(vec![4, 2], dt)], a),
                vec![x.clone()],
            ));
        }
    }
    cases
}

fn svm_req(op: &str, dt: Dtype, attrs: Vec<(&'static str, A)>) -> PlanRequestExt {
    req(op, &[(vec![3, 2], dt)], attrs)
}

const SVM_X: [f64; 6] = [1.0, 0.0, 0.0, 1.0, -1.0, -1.0];

/// SVMs small enough to check by hand, and the cases for the CUDA vectors.
pub fn svm_cases() -> Vec<(String, PlanRequestExt, Vec<Vec<u8>>)> {
    let mut cases = Vec::new();
    for dt in INPUTS {
        let x = enc(dt, &SVM_X);
        for kernel in ["LINEAR", "POLY", "RBF", "SIGMOID"] {
            let base = || {
                vec![
                    ("kernel_type", A::Text(kernel.into())),
                    ("kernel_params", floats(&[0.5, 1.0, 2.0])),
                ]
            };
            let mut r = base();
            r.extend([
                ("n_supports", A::Int(2)),
                ("support_vectors", floats(&[1.0, 0.0, 0.0, 1.0])),
                ("coefficients", floats(&[2.0, -1.0])),
                ("rho", floats(&[0.5])),
            ]);
            cases.push((
                format!("svr-{kernel}-{}", dtype::name(dt)),
                svm_req("SVMRegressor", dt, r),
                vec![x.clone()],
            ));
            for proba in [false, true] {
                let mut c = base();
                c.extend([
                    ("vectors_per_class", A::Ints(vec![1, 1, 1])),
                    ("support_vectors", floats(&[1.0, 0.0, 0.0, 1.0, -1.0, -1.0])),
                    ("coefficients", floats(&[1.0, 1.0, -1.0, 1.0, -1.0, -1.0])),
                    ("rho", floats(&[0.0, 0.1, -0.1])),
                    ("classlabels_ints", A::Ints(vec![5, 6, 7])),
                ]);
                if proba {
                    c.push(("prob_a", floats(&[-2.0, -1.5, -1.0])));
                    c.push(("prob_b", floats(&[0.1, 0.0, -0.1])));
                }
                cases.push((
                    format!("svc-{kernel}-{proba}-{}", dtype::name(dt)),
                    svm_req("SVMClassifier", dt, c),
                    vec![x.clone()],
                ));
            }
        }
        let linear = vec![
            ("coefficients", floats(&[1.0, 0.0, 0.0, 1.0])),
            ("rho", floats(&[0.25])),
            ("classlabels_ints", A::Ints(vec![3, 4])),
            ("post_transform", A::Text("LOGISTIC".into())),
        ];
        cases.push((
            format!("svc-linear-{}", dtype::name(dt)),
            svm_req("SVMClassifier", dt, linear),
            vec![x.clone()],
        ));
    }
    cases
}

#[test]
fn svms_by_hand_and_their_refusals() {
    let by_name = |name: &str| {
        let (_, r, x) = svm_cases().into_iter().find(|c| c.0 == name).unwrap();
        let (plan, out) = run(&r, &x).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        out.iter()
            .zip(&plan.outputs)
            .map(|(o, d)| dec(d.dtype, o))
            .collect::<Vec<_>>()
    };
    // LINEAR regressor: 2 (x·[1,0]) − (x·[0,1]) + 0.5
    assert_eq!(by_name("svr-LINEAR-f32")[0], vec![2.5, -0.5, -0.5]);
    // RBF regressor with γ 0.5: row 0 is support vector 0 (K = 1) and √2 from vector 1
    let rbf = by_name("svr-RBF-f64")[0].clone();
    let want0 = 2.0 - (-0.5f64 * 2.0).exp() + 0.5;
    assert!((rbf[0] - want0).abs() < 1e-6, "{rbf:?}");
    // three classes one-vs-one with LINEAR kernels: K(x, sv) = x·sv
    // row 0 (x = [1, 0]): K = [1, 0, -1]; pairs (0,1) = coef[0][0]·1 + coef[0][1]·0 + 0 = 1 → 0;
    // (0,2) = coef[1][0]·1 + coef[0][2]·(−1) + 0.1 = 1 + 1 + 0.1 → 0; (1,2) = coef[1][1]·0 +
    // coef[1][2]·(−1) − 0.1 = 0.9 → 1: votes [2, 1, 0], label 5
    let svc = by_name("svc-LINEAR-false-f32");
    assert_eq!(svc[0][0], 5.0);
    close(&svc[1][..3], &[1.0, 2.1, 0.9], "pairwise decisions");
    // probabilities sum to 1 per row
    let p = by_name("svc-RBF-true-f32")[1].clone();
    for row in p.chunks(3) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5, "{row:?}");
    }
    // refusals
    let refuse = |op: &str, attrs: Vec<(&'static str, A)>, what: &str| match MlPlugin::plan_ext(
        &svm_req(op, Dtype::F32, attrs),
    ) {
        Err(e) => assert!(format!("{e:?}").contains(what), "{e:?} lacks {what:?}"),
        Ok(_) => panic!("{op} planned"),
    };
    refuse(
        "SVMRegressor",
        vec![
            ("n_supports", A::Int(2)),
            ("support_vectors", floats(&[1.0, 0.0, 0.0])),
            ("coefficients", floats(&[1.0, 1.0])),
            ("rho", floats(&[0.0])),
        ],
        "`support_vectors` has 3 values",
    );
    refuse(
        "SVMClassifier",
        vec![
            ("coefficients", floats(&[1.0; 4])),
            ("rho", floats(&[0.0])),
            ("classlabels_ints", A::Ints((0..33).collect())),
        ],
        "33 `classlabels_ints`",
    );
    refuse(
        "SVMClassifier",
        vec![
            ("kernel_type", A::Text("CUBIC".into())),
            ("coefficients", floats(&[1.0; 4])),
            ("rho", floats(&[0.0])),
            ("classlabels_ints", A::Ints(vec![1, 2])),
        ],
        "`kernel_type`",
    );
    let strings = svm_req(
        "SVMClassifier",
        Dtype::F32,
        vec![
            ("coefficients", floats(&[1.0; 4])),
            ("rho", floats(&[0.0])),
            (
                "classlabels_strings",
                A::Texts(vec!["a".into(), "b".into()]),
            ),
        ],
    );
    assert!(matches!(
        MlPlugin::plan_ext(&strings),
        Err(OpError::UnsupportedDtype(m)) if m.contains("computed when planning, from X's value")
    ));
}

/// String class labels: planned on X's value, they are the int64 run's labels by index (and
/// the scores the int64 run's); on CUDA, or without the value, they are refused.
#[test]
fn string_class_labels_follow_the_integer_run() {
    let x = values(Dtype::F32, 12, 5);
    let xb = enc(Dtype::F32, &x);
    let attrs = |labels: A, name: &'static str| {
        vec![
            (
                "coefficients",
                floats(&[
                    0.5, -1.0, 0.25, 1.0, 0.0, -0.5, 2.0, 0.1, -0.3, 0.7, 0.2, -1.5,
                ]),
            ),
            ("intercepts", floats(&[0.1, -0.2, 0.05])),
            ("post_transform", A::Text("SOFTMAX".into())),
            (name, labels),
        ]
    };
    let ints = req(
        "LinearClassifier",
        &[(vec![3, 4], Dtype::F32)],
        attrs(A::Ints(vec![0, 1, 2]), "classlabels_ints"),
    );
    let (_, want) = run(&ints, std::slice::from_ref(&xb)).unwrap();
    let names = ["zero", "", "two and more"];
    let mut strs = req(
        "LinearClassifier",
        &[(vec![3, 4], Dtype::F32)],
        attrs(
            A::Texts(names.iter().map(|s| s.to_string()).collect()),
            "classlabels_strings",
        ),
    );
    strs.inputs[0].as_mut().unwrap().value = Some(xb.clone());
    let (plan, got) = run(&strs, &[xb]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::String);
    let labels = umd_sdk::strings::decode(&got[0], 3).unwrap();
    let idx: Vec<usize> = want[0]
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as usize)
        .collect();
    assert_eq!(labels, idx.iter().map(|&i| names[i]).collect::<Vec<_>>());
    assert_eq!(got[1], want[1], "scores");
    strs.target = testing::cuda_target("sm_90");
    assert!(matches!(
        MlPlugin::plan_ext(&strs),
        Err(OpError::UnsupportedTarget(m)) if m.contains("CPU device only")
    ));
}

/// Runs `plan` on `x` through the in-place kernels, every launch whole, with the workspace
/// (the last binding) named resident under `name` where a launch only reads it; returns the
/// outputs and the workspace bytes the launches read.
fn run_named(plan: &OpPlan, x: &[u8], name: u64) -> (Vec<Vec<u8>>, u64) {
    use umd_sdk::kernel::{HeapMemory, Recorder};
    let mut bufs = vec![x.to_vec()];
    for o in &plan.outputs {
        bufs.push(vec![0xAB; o.byte_size().unwrap() as usize]);
    }
    bufs.push(vec![0; plan.workspace_bytes as usize]);
    let ws = bufs.len() as u32 - 1;
    let mut ws_read = 0;
    for l in &plan.launches {
        let (mut mem, sizes) = HeapMemory::for_launch(l, bufs.clone());
        mem.name_resident(ws, name);
        let call = umd_sdk::KernelCall::for_launch(l, &sizes, 0..l.grid.volume());
        let mut spy = Recorder::new(&mut mem);
        MlPlugin::run_kernel(&call, &mut spy).unwrap();
        ws_read += spy.bytes_read(ws);
        for b in &sizes {
            bufs[b.binding as usize] = mem.contents(b.binding).unwrap().to_vec();
        }
    }
    (bufs[1..1 + plan.outputs.len()].to_vec(), ws_read)
}

#[test]
fn forests_and_svms_split_by_rows_and_keep_their_decoded_table() {
    // Every forest and SVM case on 1000 rows (a grid of 4 blocks), cut unevenly (last range
    // first) and whole, against `run-cpu` whole; NaN inputs where the dtype has them.
    let rows = 1000u64;
    let mut name = 500;
    for (what, mut r, _) in forest_cases().into_iter().chain(svm_cases()) {
        let slot = r.inputs[0].as_mut().unwrap();
        let (dt, nf) = (slot.desc.dtype, *slot.desc.shape.last().unwrap());
        slot.desc.shape = vec![rows, nf];
        let mut xv = data((rows * nf) as usize, 7, -2.0, 6.0);
        for (i, v) in xv.iter_mut().enumerate() {
            if matches!(dt, Dtype::I32 | Dtype::I64) {
                *v = v.round();
            } else if i % 37 == 0 {
                *v = f64::NAN;
            }
        }
        let x = enc(dt, &xv);
        let plan = umd_sdk::plan_checked::<MlPlugin>(&r).unwrap();
        let l = plan.launches.last().unwrap();
        assert!(MlPlugin::splittable(&l.module_id, &l.entry_point), "{what}");
        assert!(l.grid.volume() >= 4, "{what}: {:?}", l.grid);
        let want = testing::execute(&plan, std::slice::from_ref(&x), MlPlugin::run_cpu).unwrap();
        let cut = testing::execute_kernels_cut::<MlPlugin>(
            &plan,
            std::slice::from_ref(&x),
            &[0.1, 0.5, 0.77],
            0xAB,
        )
        .unwrap();
        assert_eq!(cut, want, "{what}: split");
        // named resident: the table is read by the first launch of a name only
        name += 1;
        let (first, read) = run_named(&plan, &x, name);
        assert_eq!(first, want, "{what}: resident");
        assert!(read > 0, "{what}");
        let (again, read) = run_named(&plan, &x, name);
        assert_eq!(again, want, "{what}: resident, again");
        assert_eq!(read, 0, "{what}: table read again");
    }
}
