//! The `ml` plugin: the ONNX-ML ops of domain `ai.onnx.ml` — Binarizer, ArrayFeatureExtractor,
//! TreeEnsemble (opset 5), LabelEncoder (numeric keys and values), LinearRegressor,
//! LinearClassifier, Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer,
//! TreeEnsembleRegressor, TreeEnsembleClassifier (opsets 1–3), SVMRegressor, SVMClassifier — and
//! TfIdfVectorizer of the default domain (integer tokens). A request of another domain is
//! refused.
//!
//! - [`simple`]: Binarizer, ArrayFeatureExtractor;
//! - [`linear`]: LinearRegressor, LinearClassifier; [`prep`]: Scaler, Normalizer, Imputer,
//!   OneHotEncoder, FeatureVectorizer; [`forest`]: TreeEnsembleRegressor,
//!   TreeEnsembleClassifier; [`svm`]: SVMRegressor, SVMClassifier;
//! - [`tfidf`]: TfIdfVectorizer; [`tree`]: TreeEnsemble; [`label`]: LabelEncoder;
//! - [`string_labels`]: the classifiers' string class labels (CPU, computed when planning);
//! - [`blob`]: attribute tables copied into the workspace before the op's launch;
//! - [`common`]: domain checks, launches, CUDA heads, the CPU element trait.
//!
//! Module ids: `ml_binarizer_{T}`, `ml_afe`, `ml_tfidf`, `ml_tree_{T}`, `ml_label`, `ml_blob`,
//! `ml_linear_{T}`, `ml_prep_{T}`, `ml_forest_{T}`, `ml_svm_{T}`.

pub mod blob;
pub mod common;
pub mod forest;
mod forest_cpu;
pub mod label;
pub mod linear;
pub mod prep;
mod rows;
pub mod simple;
pub mod string_labels;
pub mod svm;
mod svm_cpu;
pub mod tfidf;
pub mod tree;

use umd_sdk::{
    AttrValue, Attribute, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    Plugin, PluginInfo, Target, TensorDesc, TestCase, Tolerance, dtype,
};

/// Every op this plugin serves, in ONNX spelling.
pub const OPS: [&str; 16] = [
    "Binarizer",
    "ArrayFeatureExtractor",
    "TfIdfVectorizer",
    "TreeEnsemble",
    "LabelEncoder",
    "LinearRegressor",
    "LinearClassifier",
    "Scaler",
    "Normalizer",
    "Imputer",
    "OneHotEncoder",
    "FeatureVectorizer",
    "TreeEnsembleRegressor",
    "TreeEnsembleClassifier",
    "SVMRegressor",
    "SVMClassifier",
];

pub struct MlPlugin;

fn unknown_module(id: &str) -> OpError {
    OpError::internal(format!("unknown module `{id}`"))
}

impl Plugin for MlPlugin {
    /// OneHotEncoder's `cats_strings` categorize string tensors, TfIdfVectorizer's
    /// `pool_strings` count string tokens; the classifiers' string class labels make string
    /// outputs ([`string_labels`]). (The other ops refuse a string input by
    /// its dtype.)
    fn serves_strings(op: &str) -> bool {
        [
            "OneHotEncoder",
            "LinearClassifier",
            "SVMClassifier",
            "TreeEnsembleClassifier",
            "TfIdfVectorizer",
        ]
        .iter()
        .any(|o| o.eq_ignore_ascii_case(op))
    }

    /// The `fill_words` launches writing a plan's table (trees, label maps, n-gram pools).
    fn setup_launches(req: &PlanRequestExt, plan: &OpPlan) -> u32 {
        blob::setup_launches(req, plan)
    }

    fn describe() -> PluginInfo {
        umd_sdk::plugin_info("ml", env!("CARGO_PKG_VERSION"), OPS)
    }

    fn plan_ext(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
        let is = |n: &str| req.op.eq_ignore_ascii_case(n);
        if is("Binarizer") {
            simple::plan_binarizer(req)
        } else if is("ArrayFeatureExtractor") {
            simple::plan_afe(req)
        } else if is("TfIdfVectorizer") {
            tfidf::plan(req)
        } else if is("TreeEnsemble") {
            tree::plan(req)
        } else if is("LabelEncoder") {
            label::plan(req)
        } else if is("LinearRegressor") {
            linear::plan_regressor(req)
        } else if is("LinearClassifier") {
            linear::plan_classifier(req)
        } else if is("Scaler") {
            prep::plan_scaler(req)
        } else if is("Normalizer") {
            prep::plan_normalizer(req)
        } else if is("Imputer") {
            prep::plan_imputer(req)
        } else if is("OneHotEncoder") {
            prep::plan_onehot(req)
        } else if is("FeatureVectorizer") {
            prep::plan_feature_vectorizer(req)
        } else if is("TreeEnsembleRegressor") {
            forest::plan_regressor(req)
        } else if is("TreeEnsembleClassifier") {
            forest::plan_classifier(req)
        } else if is("SVMRegressor") {
            svm::plan_regressor(req)
        } else if is("SVMClassifier") {
            svm::plan_classifier(req)
        } else {
            Err(umd_sdk::unsupported_op_ext(req))
        }
    }

    fn tolerance(op: &str, dt: Dtype) -> Option<Tolerance> {
        let t = |absolute, relative| Some(Tolerance { absolute, relative });
        if !op.eq_ignore_ascii_case("TreeEnsemble") {
            return None;
        }
        match dt {
            Dtype::F32 => t(1e-5, 1e-5),
            Dtype::F16 => t(1e-3, 1e-3),
            Dtype::Bf16 => t(1e-2, 1e-2),
            Dtype::F64 => t(1e-12, 1e-12),
            _ => None,
        }
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        if module_id == blob::MODULE {
            return Ok(blob::cuda());
        }
        if module_id == "ml_afe" {
            return Ok(simple::cuda_afe());
        }
        if module_id == "ml_tfidf" {
            return Ok(tfidf::cuda());
        }
        if module_id == "ml_label" {
            return Ok(label::cuda());
        }
        if let Some(name) = module_id.strip_prefix("ml_binarizer_") {
            let dt = dtype::from_name(name)
                .filter(|d| simple::BINARIZER_DTYPES.contains(d))
                .ok_or_else(|| unknown_module(module_id))?;
            return Ok(simple::cuda_binarizer(dt));
        }
        if let Some(name) = module_id.strip_prefix("ml_tree_") {
            let dt = dtype::from_name(name)
                .filter(|d| common::FLOATS.contains(d))
                .ok_or_else(|| unknown_module(module_id))?;
            return Ok(tree::cuda(dt));
        }
        let input_dtype = |prefix: &str| {
            module_id
                .strip_prefix(prefix)
                .and_then(dtype::from_name)
                .filter(|d| prep::INPUTS.contains(d))
        };
        if let Some(dt) = input_dtype("ml_linear_") {
            return Ok(linear::cuda(dt));
        }
        if let Some(dt) = input_dtype("ml_svm_") {
            return Ok(svm::cuda(dt));
        }
        if let Some(dt) = input_dtype("ml_forest_") {
            return Ok(forest::cuda(dt));
        }
        if let Some(dt) = input_dtype("ml_prep_") {
            return Ok(prep::cuda(dt));
        }
        Err(unknown_module(module_id))
    }

    /// `fill_words` writes its chunk in place; every other kernel runs as a `run-cpu` call
    /// whose tables, when the host names them resident (a compiled model's workspace after
    /// its setup launches, ABI 1.7), this instance keeps between launches.
    fn run_kernel(
        call: &umd_sdk::KernelCall,
        memory: &mut dyn umd_sdk::kernel::Memory,
    ) -> Result<(), OpError> {
        if call.entry_point == "fill_words" && call.is_whole() {
            return blob::run_in_place(call, memory);
        }
        let (params, relocs, e) = (&call.params, &call.relocations, &call.entry_point);
        if let Some((dt, cls)) = scorer_entry("forest", e) {
            let s = forest_cpu::Forest::read(params, relocs, dt, cls)?;
            return rows::run_in_place(call, memory, &s);
        }
        if let Some((dt, cls)) = scorer_entry("svm", e) {
            return rows::run_in_place(call, memory, &svm_cpu::Svm::read(params, relocs, dt, cls)?);
        }
        if let Some((dt, cls)) = scorer_entry("linear", e) {
            return rows::run_in_place(
                call,
                memory,
                &linear::Linear::read(params, relocs, dt, cls)?,
            );
        }
        umd_sdk::kernel::run_via_cpu_call_kept(call, memory, run_cpu_ref)
    }

    /// The tree ensembles, SVMs and linear models score each row on its own: their launches
    /// split by rows.
    fn splittable(_module_id: &str, entry_point: &str) -> bool {
        ["forest", "svm", "linear"]
            .iter()
            .any(|f| scorer_entry(f, entry_point).is_some())
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        run_cpu_ref(&call)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |name: &str, shape: &[u64], dt| TensorDesc::new(name, shape.to_vec(), dt);
        let ints = |name: &str, v: &[i64]| Attribute {
            name: name.into(),
            value: AttrValue::Ints(v.to_vec()),
        };
        let floats = |name: &str, v: &[f64]| Attribute {
            name: name.into(),
            value: AttrValue::Floats(v.to_vec()),
        };
        vec![
            umd_sdk::test_case_with(
                "binarizer",
                "Binarizer",
                vec![(t("X", &[4], Dtype::F32), vec![-1.0, 0.5, 1.0, 2.0])],
                vec![Attribute {
                    name: "threshold".into(),
                    value: AttrValue::Float(0.5),
                }],
                vec![(Dtype::F32, vec![0.0, 0.0, 1.0, 1.0])],
                0.0,
            ),
            umd_sdk::test_case(
                "array feature extractor",
                "ArrayFeatureExtractor",
                vec![
                    (t("X", &[2, 3], Dtype::F32), vec![1., 2., 3., 4., 5., 6.]),
                    (t("Y", &[2], Dtype::I64), vec![2., 0.]),
                ],
                vec![(Dtype::F32, vec![3., 1., 6., 4.])],
                0.0,
            ),
            // bigrams (2,3) and (3,4) in [2,3,4,2,3]: TF 2 and 1
            umd_sdk::test_case_with(
                "tfidf bigrams",
                "TfIdfVectorizer",
                vec![(t("X", &[5], Dtype::I64), vec![2., 3., 4., 2., 3.])],
                vec![
                    ints("min_gram_length", &[2]).single(),
                    ints("max_gram_length", &[2]).single(),
                    ints("max_skip_count", &[0]).single(),
                    Attribute {
                        name: "mode".into(),
                        value: AttrValue::Text("TF".into()),
                    },
                    ints("ngram_counts", &[0, 0]),
                    ints("ngram_indexes", &[0, 1]),
                    ints("pool_int64s", &[2, 3, 3, 4]),
                ],
                vec![(Dtype::F32, vec![2., 1.])],
                0.0,
            ),
            // one split x0 <= 0.5: leaf 0 (target 0, 2.0) or leaf 1 (target 1, -1.0)
            umd_sdk::test_case_with(
                "tree ensemble split",
                "TreeEnsemble",
                vec![(t("X", &[2, 1], Dtype::F32), vec![0.25, 0.75])],
                vec![
                    ints("n_targets", &[2]).single(),
                    ints("tree_roots", &[0]),
                    ints("nodes_featureids", &[0]),
                    ints("nodes_modes", &[0]),
                    floats("nodes_splits", &[0.5]),
                    ints("nodes_truenodeids", &[0]),
                    ints("nodes_falsenodeids", &[1]),
                    ints("nodes_trueleafs", &[1]),
                    ints("nodes_falseleafs", &[1]),
                    ints("leaf_targetids", &[0, 1]),
                    floats("leaf_weights", &[2.0, -1.0]),
                ],
                vec![(Dtype::F32, vec![2., 0., 0., -1.])],
                0.0,
            ),
            // the classic ONNX-ML ops (so `umd check` and the kernel gate reach their modules)
            umd_sdk::test_case_with(
                "linear regressor",
                "LinearRegressor",
                vec![(t("X", &[2, 2], Dtype::F32), vec![1., 2., 3., 4.])],
                vec![
                    floats("coefficients", &[1.0, -1.0]),
                    floats("intercepts", &[0.5]),
                ],
                vec![(Dtype::F32, vec![-0.5, -0.5])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "linear classifier",
                "LinearClassifier",
                vec![(t("X", &[2, 2], Dtype::F32), vec![2., 0., 0., 2.])],
                vec![
                    floats("coefficients", &[1.0, 0.0, 0.0, 1.0]),
                    floats("intercepts", &[0.0, 0.0]),
                    ints("classlabels_ints", &[3, 4]),
                ],
                vec![
                    (Dtype::I64, vec![3., 4.]),
                    (Dtype::F32, vec![2., 0., 0., 2.]),
                ],
                0.0,
            ),
            umd_sdk::test_case_with(
                "scaler",
                "Scaler",
                vec![(t("X", &[3], Dtype::F32), vec![1., 2., 3.])],
                vec![floats("offset", &[1.0]), floats("scale", &[2.0])],
                vec![(Dtype::F32, vec![0., 2., 4.])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "svm regressor, linear",
                "SVMRegressor",
                vec![(t("X", &[1, 2], Dtype::F32), vec![1., 1.])],
                vec![floats("coefficients", &[1.0, 2.0]), floats("rho", &[0.5])],
                vec![(Dtype::F32, vec![3.5])],
                0.0,
            ),
            umd_sdk::test_case_with(
                "svm classifier, one against one",
                "SVMClassifier",
                vec![(t("X", &[2, 2], Dtype::F32), vec![1., 0., 0., 1.])],
                vec![
                    ints("vectors_per_class", &[1, 1]),
                    floats("support_vectors", &[1.0, 0.0, 0.0, 1.0]),
                    floats("coefficients", &[1.0, -1.0]),
                    floats("rho", &[0.0]),
                    ints("classlabels_ints", &[7, 8]),
                ],
                // d = K(x, sv0) − K(x, sv1): 1 then −1; votes pick 7 then 8; scores [−d, d]
                vec![
                    (Dtype::I64, vec![7., 8.]),
                    (Dtype::F32, vec![-1., 1., 1., -1.]),
                ],
                0.0,
            ),
            umd_sdk::test_case_with(
                "label encoder int to int",
                "LabelEncoder",
                vec![(t("X", &[3], Dtype::I64), vec![7., 8., 9.])],
                vec![
                    ints("keys_int64s", &[7, 9]),
                    ints("values_int64s", &[70, 90]),
                ],
                vec![(Dtype::I64, vec![70., -1., 90.])],
                0.0,
            ),
        ]
    }
}

/// `Ints([v])` as `Int(v)` (self-test attribute spelling).
trait Single {
    fn single(self) -> Self;
}

impl Single for Attribute {
    fn single(self) -> Self {
        match self.value {
            AttrValue::Ints(v) if v.len() == 1 => Attribute {
                name: self.name,
                value: AttrValue::Int(v[0]),
            },
            _ => self,
        }
    }
}

/// The CPU kernels by entry point (a `run-cpu` call, read by reference).
/// `(X's dtype, classifier)` of the entry point of a model family's scorer
/// (`{family}_{T}`, `{family}_cls_{T}`).
fn scorer_entry(family: &str, entry: &str) -> Option<(Dtype, bool)> {
    let rest = entry.strip_prefix(family)?.strip_prefix('_')?;
    let (rest, classifier) = match rest.strip_prefix("cls_") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let dt = dtype::from_name(rest).filter(|d| prep::INPUTS.contains(d))?;
    Some((dt, classifier))
}

/// `run-cpu` of a row scorer's entry point (tree ensembles, SVMs, linear models), if it is one.
fn run_scorer(call: &CpuCall) -> Option<Result<Vec<CpuWrite>, OpError>> {
    let (p, r, e) = (&call.params, &call.relocations, &call.entry_point);
    if let Some((dt, c)) = scorer_entry("forest", e) {
        return Some(forest_cpu::Forest::read(p, r, dt, c).and_then(|s| rows::run_cpu(call, &s)));
    }
    if let Some((dt, c)) = scorer_entry("svm", e) {
        return Some(svm_cpu::Svm::read(p, r, dt, c).and_then(|s| rows::run_cpu(call, &s)));
    }
    let (dt, c) = scorer_entry("linear", e)?;
    Some(linear::Linear::read(p, r, dt, c).and_then(|s| rows::run_cpu(call, &s)))
}

fn run_cpu_ref(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let e = call.entry_point.as_str();
    let suffix_dt = |prefix: &str| {
        e.strip_prefix(prefix)
            .and_then(dtype::from_name)
            .ok_or_else(|| OpError::internal(format!("unknown entry point `{e}`")))
    };
    if e == "fill_words" {
        blob::run_cpu(call)
    } else if e == string_labels::COPY_ENTRY {
        string_labels::run_cpu(call)
    } else if e == "onehot_string" {
        prep::run_cpu(call, "onehot", Dtype::String)
    } else if e.starts_with("afe_") {
        simple::run_afe(call)
    } else if e.starts_with("binarizer_") {
        simple::run_binarizer(call, suffix_dt("binarizer_")?)
    } else if e == "tfidf_string" {
        tfidf::run_cpu(call, Dtype::String)
    } else if e.starts_with("tfidf_") {
        tfidf::run_cpu(call, suffix_dt("tfidf_")?)
    } else if e.starts_with("tree_") {
        tree::run_cpu(call, suffix_dt("tree_")?)
    } else if e.starts_with("label_") {
        label::run_cpu(call)
    } else if let Some(r) = run_scorer(call) {
        r
    } else if let Some((kind, dt)) = e
        .split_once('_')
        .filter(|(k, _)| ["scaler", "normalizer", "imputer", "onehot", "fv"].contains(k))
    {
        let dt = dtype::from_name(dt)
            .ok_or_else(|| OpError::internal(format!("unknown entry point `{e}`")))?;
        prep::run_cpu(call, kind, dt)
    } else {
        Err(OpError::internal(format!("unknown entry point `{e}`")))
    }
}

umd_sdk::export_plugin!(MlPlugin);

#[cfg(test)]
mod tests;
