//! TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml 1–3: the tree ensembles that
//! scikit-learn, LightGBM and XGBoost converters write) on f32, f64, i64 and i32 inputs
//! `X [N, F]` (or `[F]`): scores `[N, E]` in f32 and the classifier's int64 labels `[N]`, as
//! onnxruntime computes them.
//!
//! Nodes are named by `(tree id, node id)`; each tree starts at its smallest node id; modes
//! BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ and LEAF; thresholds and
//! weights as given (f32 lists, or f64 in their `_as_tensor` forms), compared with the input in
//! f64, weights summed in f32; a NaN input takes the true branch where
//! `nodes_missing_value_tracks_true` says so. A leaf may carry several (target or class, weight)
//! pairs. Then onnxruntime's aggregators:
//! - regressor, SUM / AVERAGE (÷ trees) / MIN / MAX per target (MIN/MAX over the leaves that
//!   reached it), plus `base_values` (one per target, or with one target one value); a single
//!   target takes only PROBIT, several every `post_transform`, and with several a target no
//!   leaf reached reads 0 whatever its base value (onnxruntime's `has_score`);
//! - classifier with more than two classes: base values added, the label the class of the first
//!   largest score among the classes some leaf reached, every `post_transform`;
//! - classifier with two classes: onnxruntime's binary rules — weights on one class id only is
//!   the *binary case*: its score `s` decides the label (`> 0.5` when every weight is ≥ 0, else
//!   `> 0`) and the scores become `[1 − s, s]` (`[σ(−s), σ(s)]` / `[−s, s]` with mixed weights);
//!   with weights on both classes the label is 1 when the second class's score is > 0, else 0
//!   (onnxruntime's labels, whatever `classlabels_int64s` says), each score transformed.
//!
//! String class labels are refused (status 2). Module `ml_forest_{T}`, one thread per row; the
//! flattened trees travel in the workspace as a [`Blob`].

use umd_sdk::{AttrValueExt, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, attr, dtype};

use crate::blob::Blob;
use crate::common::{self, Scorer, bad, scorer_plan};
use crate::prep::rows_of;

/// Words of one node record: feature, mode, threshold, true, false, missing-tracks-true.
pub(crate) const NODE_WORDS: usize = 6;
/// Most nodes of one ensemble (the blob's own limit applies too).
const MAX_NODES: usize = 1 << 18;
/// Most targets or classes (the CUDA kernel keeps a bit per output of which leaves reached).
pub const MAX_OUTPUTS: i64 = 4096;

fn find<'a>(req: &'a PlanRequestExt, name: &str) -> Option<&'a AttrValueExt> {
    req.attributes
        .iter()
        .find(|a| a.name == name)
        .map(|a| &a.value)
}

/// A float list given as `name` (floats) or `name_as_tensor`.
fn floats(req: &PlanRequestExt, name: &str) -> Result<Vec<f64>, OpError> {
    match find(req, &format!("{name}_as_tensor")) {
        Some(AttrValueExt::Tensor(t)) => Ok(dtype::decode_f64(t.desc.dtype, &t.data)),
        Some(_) => Err(bad(req, format!("`{name}_as_tensor` must be a tensor"))),
        None => attr::floats_or(&req.attributes, name, &[]),
    }
}

fn ints(req: &PlanRequestExt, name: &str) -> Result<Vec<i64>, OpError> {
    attr::ints_or(&req.attributes, name, &[])
}

/// The mode code of an ONNX-ML node mode string (LEAF is 6).
fn mode_code(req: &PlanRequestExt, m: &str) -> Result<i64, OpError> {
    [
        "BRANCH_LEQ",
        "BRANCH_LT",
        "BRANCH_GTE",
        "BRANCH_GT",
        "BRANCH_EQ",
        "BRANCH_NEQ",
        "LEAF",
    ]
    .iter()
    .position(|x| *x == m)
    .map(|p| p as i64)
    .ok_or_else(|| {
        bad(
            req,
            format!("node mode {m:?} is not one of BRANCH_* or LEAF"),
        )
    })
}

/// The aggregate function code: 0 AVERAGE, 1 SUM, 2 MIN, 3 MAX.
fn agg_code(req: &PlanRequestExt) -> Result<u32, OpError> {
    common::choice(
        req,
        "aggregate_function",
        "SUM",
        &["AVERAGE", "SUM", "MIN", "MAX"],
    )
}

const COMMON_ATTRS: [&str; 13] = [
    "base_values",
    "base_values_as_tensor",
    "nodes_falsenodeids",
    "nodes_featureids",
    "nodes_hitrates",
    "nodes_hitrates_as_tensor",
    "nodes_missing_value_tracks_true",
    "nodes_modes",
    "nodes_nodeids",
    "nodes_treeids",
    "nodes_truenodeids",
    "nodes_values",
    "nodes_values_as_tensor",
];

pub fn plan_regressor(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let mut known = COMMON_ATTRS.to_vec();
    known.extend([
        "aggregate_function",
        "n_targets",
        "post_transform",
        "target_ids",
        "target_nodeids",
        "target_treeids",
        "target_weights",
        "target_weights_as_tensor",
    ]);
    attr::only(&req.attributes, &known)?;
    let n = attr::int_or(&req.attributes, "n_targets", 1)?;
    if !(1..=MAX_OUTPUTS).contains(&n) {
        return Err(bad(
            req,
            format!("`n_targets` = {n} must be in 1..={MAX_OUTPUTS}"),
        ));
    }
    let leaves = Leaves {
        trees: ints(req, "target_treeids")?,
        nodes: ints(req, "target_nodeids")?,
        ids: ints(req, "target_ids")?,
        weights: floats(req, "target_weights")?,
        what: "target",
    };
    plan(req, n as u64, leaves, agg_code(req)?, None)
}

pub fn plan_classifier(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let mut known = COMMON_ATTRS.to_vec();
    known.extend([
        "class_ids",
        "class_nodeids",
        "class_treeids",
        "class_weights",
        "class_weights_as_tensor",
        "classlabels_int64s",
        "classlabels_strings",
        "post_transform",
    ]);
    attr::only(&req.attributes, &known)?;
    if crate::string_labels::wanted(req) {
        return crate::string_labels::plan(req, "classlabels_int64s");
    }
    let labels = ints(req, "classlabels_int64s")?;
    if labels.len() < 2 || labels.len() as i64 > MAX_OUTPUTS {
        return Err(bad(
            req,
            format!(
                "{} `classlabels_int64s`; 2..={MAX_OUTPUTS} classes are served",
                labels.len()
            ),
        ));
    }
    let leaves = Leaves {
        trees: ints(req, "class_treeids")?,
        nodes: ints(req, "class_nodeids")?,
        ids: ints(req, "class_ids")?,
        weights: floats(req, "class_weights")?,
        what: "class",
    };
    plan(req, labels.len() as u64, leaves, 1, Some(labels))
}

/// The (tree, node, id, weight) lists that attach weights to leaves.
struct Leaves {
    trees: Vec<i64>,
    nodes: Vec<i64>,
    ids: Vec<i64>,
    weights: Vec<f64>,
    what: &'static str,
}

fn plan(
    req: &PlanRequestExt,
    e: u64,
    leaves: Leaves,
    agg: u32,
    labels: Option<Vec<i64>>,
) -> Result<OpPlan, OpError> {
    let post = crate::linear::post_code(req)?;
    let (x, rows, nf) = rows_of(req, 1)?;
    let tids = ints(req, "nodes_treeids")?;
    let nids = ints(req, "nodes_nodeids")?;
    let feats = ints(req, "nodes_featureids")?;
    let values = floats(req, "nodes_values")?;
    let trues = ints(req, "nodes_truenodeids")?;
    let falses = ints(req, "nodes_falsenodeids")?;
    let missing = ints(req, "nodes_missing_value_tracks_true")?;
    let modes = match find(req, "nodes_modes") {
        Some(AttrValueExt::Texts(v)) => v
            .iter()
            .map(|m| mode_code(req, m))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(bad(req, "`nodes_modes` (strings) is required".into())),
    };
    let nn = tids.len();
    if nn == 0 || nn > MAX_NODES {
        return Err(bad(req, format!("{nn} nodes; 1..={MAX_NODES} are served")));
    }
    for (name, len) in [
        ("nodes_nodeids", nids.len()),
        ("nodes_featureids", feats.len()),
        ("nodes_modes", modes.len()),
        ("nodes_truenodeids", trues.len()),
        ("nodes_falsenodeids", falses.len()),
    ] {
        if len != nn {
            return Err(bad(
                req,
                format!("`{name}` has {len} entries, `nodes_treeids` {nn}"),
            ));
        }
    }
    if values.len() != nn || (!missing.is_empty() && missing.len() != nn) {
        return Err(bad(
            req,
            format!("`nodes_values` and `nodes_missing_value_tracks_true` need {nn} entries"),
        ));
    }
    let nw = leaves.trees.len();
    if leaves.nodes.len() != nw || leaves.ids.len() != nw || leaves.weights.len() != nw {
        return Err(bad(
            req,
            format!(
                "the {0}_treeids, {0}_nodeids, {0}_ids and {0}_weights lists differ in length",
                leaves.what
            ),
        ));
    }
    if let Some(i) = leaves.ids.iter().find(|&&i| i < 0 || i as u64 >= e) {
        return Err(bad(req, format!("{} id {i} is not below {e}", leaves.what)));
    }
    let base = floats(req, "base_values")?;
    if !base.is_empty() && base.len() as u64 != e && base.len() != 1 {
        return Err(bad(
            req,
            format!("`base_values` has {} values; none, 1 or {e}", base.len()),
        ));
    }

    // node index by (tree, node id); each tree's root is its smallest node id
    let mut by_id = std::collections::HashMap::with_capacity(nn);
    for i in 0..nn {
        if by_id.insert((tids[i], nids[i]), i).is_some() {
            return Err(bad(
                req,
                format!("node ({}, {}) is defined twice", tids[i], nids[i]),
            ));
        }
        if modes[i] != 6 && (feats[i] < 0 || feats[i] as u64 >= nf) {
            return Err(bad(
                req,
                format!("feature id {} is not below F = {nf}", feats[i]),
            ));
        }
    }
    let mut roots: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
    for i in 0..nn {
        let r = roots.entry(tids[i]).or_insert(i);
        if nids[i] < nids[*r] {
            *r = i;
        }
    }
    // leaf number of each leaf node, and its (id, weight) pairs in the order given
    let mut leaf_of = vec![usize::MAX; nn];
    let mut pairs: Vec<Vec<(i64, f64)>> = Vec::new();
    for i in 0..nn {
        if modes[i] == 6 {
            leaf_of[i] = pairs.len();
            pairs.push(Vec::new());
        }
    }
    for k in 0..nw {
        let at = by_id
            .get(&(leaves.trees[k], leaves.nodes[k]))
            .copied()
            .ok_or_else(|| {
                bad(
                    req,
                    format!(
                        "a {} weight names node ({}, {}), which does not exist",
                        leaves.what, leaves.trees[k], leaves.nodes[k]
                    ),
                )
            })?;
        if leaf_of[at] == usize::MAX {
            return Err(bad(
                req,
                format!(
                    "a {} weight names node ({}, {}), which is not a LEAF",
                    leaves.what, leaves.trees[k], leaves.nodes[k]
                ),
            ));
        }
        pairs[leaf_of[at]].push((leaves.ids[k], leaves.weights[k]));
    }
    let child = |tree: i64, id: i64| -> Result<i64, OpError> {
        let c = by_id.get(&(tree, id)).copied().ok_or_else(|| {
            bad(
                req,
                format!("node ({tree}, {id}) is a child but does not exist"),
            )
        })?;
        Ok(if leaf_of[c] != usize::MAX {
            -(leaf_of[c] as i64 + 1)
        } else {
            c as i64
        })
    };
    let enc = |i: usize| -> i64 {
        if leaf_of[i] != usize::MAX {
            -(leaf_of[i] as i64 + 1)
        } else {
            i as i64
        }
    };

    let mut blob = Blob::default();
    for &r in roots.values() {
        blob.i64(enc(r));
    }
    let nodes_off = blob.len();
    for i in 0..nn {
        let leaf = modes[i] == 6;
        blob.i64(if leaf { 0 } else { feats[i] });
        blob.i64(modes[i]);
        blob.f64(values[i]);
        blob.i64(if leaf { 0 } else { child(tids[i], trues[i])? });
        blob.i64(if leaf { 0 } else { child(tids[i], falses[i])? });
        blob.i64(missing.get(i).is_some_and(|&m| m != 0) as i64);
    }
    let leaves_off = blob.len();
    let pairs_off = leaves_off + 2 * pairs.len() as u64;
    let mut at = pairs_off;
    for p in &pairs {
        blob.i64(at as i64);
        blob.i64(p.len() as i64);
        at += 2 * p.len() as u64;
    }
    for (id, w) in pairs.iter().flatten() {
        blob.i64(*id);
        blob.f64(*w);
    }
    let base_off = blob.len();
    for &b in &base {
        blob.f64(b);
    }
    let labels_off = blob.len();
    let classifier = labels.is_some();
    let binary = classifier && e == 2 && {
        let mut ids = leaves.ids.clone();
        ids.sort_unstable();
        ids.dedup();
        ids.len() == 1
    };
    let positive = leaves.weights.iter().all(|&w| w >= 0.0);
    for &l in labels.iter().flatten() {
        blob.i64(l);
    }
    let scorer = Scorer {
        family: "forest",
        classifier,
        rows,
        features: nf,
        width: e,
    };
    scorer_plan(req, x, scorer, &blob, |p| {
        p.u64(e)
            .u64(roots.len() as u64)
            .u64(nodes_off)
            .u64(leaves_off)
            .u64(base_off)
            .u64(base.len() as u64)
            .u64(labels_off)
            .u64(nn as u64 + 1)
            .u32(agg)
            .u32(post)
            .u32(binary as u32)
            .u32(positive as u32);
    })
}

/// The launch's parameters after the pointers.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) rows: usize,
    pub(crate) nf: usize,
    pub(crate) e: usize,
    pub(crate) trees: usize,
    pub(crate) nodes: usize,
    pub(crate) leaves: usize,
    pub(crate) base: usize,
    pub(crate) nbase: usize,
    pub(crate) labels: usize,
    pub(crate) max_steps: u64,
    pub(crate) agg: u32,
    pub(crate) post: u32,
    pub(crate) binary: bool,
    pub(crate) positive: bool,
}

/// onnxruntime's finalization of one row: `s`/`has` the aggregated scores (width `e`, room for
/// two), `base` the base values; writes the row's scores into `s` and returns the label
/// (classifier). Mirrored by the CUDA kernel's `umd_forest_finish`.
pub(crate) fn finish(
    s: &mut [f32],
    has: &mut [bool],
    sh: &Shape,
    base: &[f32],
    label: &dyn Fn(usize) -> i64,
    classifier: bool,
) -> i64 {
    let e = sh.e;
    let trees = sh.trees as f32;
    if !classifier {
        if e == 1 {
            let origin = if base.len() == 1 { base[0] } else { 0.0 };
            s[0] = match sh.agg {
                0 => s[0] / trees + origin,
                1 => s[0] + origin,
                _ if has[0] => s[0] + origin,
                _ => origin,
            };
            if sh.post == 4 {
                s[0] = crate::linear::probit_f32(s[0]);
            }
        } else {
            let use_base = base.len() == e;
            for j in 0..e {
                let b = if use_base { base[j] } else { 0.0 };
                s[j] = match sh.agg {
                    0 => s[j] / trees + b,
                    1 => s[j] + b,
                    _ => b + if has[j] { s[j] } else { 0.0 },
                };
                // onnxruntime reads a score no leaf reached as 0, base value or not
                if !has[j] {
                    s[j] = 0.0;
                }
            }
            crate::linear::post(&mut s[..e], sh.post);
        }
        return 0;
    }
    if e > 2 {
        for k in 0..base.len().min(e) {
            if has[k] {
                s[k] += base[k];
            } else {
                s[k] = base[k];
                has[k] = true;
            }
        }
        let mut best: Option<usize> = None;
        for k in 0..e {
            if has[k] && best.is_none_or(|b| s[k] > s[b]) {
                best = Some(k);
            }
        }
        crate::linear::post(&mut s[..e], sh.post);
        return label(best.unwrap_or(0));
    }
    // two classes
    let mut add: i32 = -1;
    let mut width = 2;
    match base.len() {
        2 => {
            if has[1] {
                s[1] = base[1] + s[0];
                s[0] = -s[1];
            } else {
                s[1] += base[1];
                s[0] += base[0];
            }
        }
        1 => {
            s[0] += base[0];
            if !has[1] {
                width = 1;
            }
        }
        _ => {
            add = 3;
            if !has[1] {
                width = 1;
            }
        }
    }
    let pos = if width == 2 && has[1] {
        s[1]
    } else if has[0] {
        s[0]
    } else {
        0.0
    };
    let l = if sh.binary {
        let (win, a) = if sh.positive {
            (pos > 0.5, if pos > 0.5 { 0 } else { 1 })
        } else {
            (pos > 0.0, if pos > 0.0 { 2 } else { 3 })
        };
        add = a;
        label(win as usize)
    } else {
        (pos > 0.0) as i64
    };
    // a score no leaf reached (and no base value marked) reads as 0
    for k in 0..2 {
        if !has[k] {
            s[k] = 0.0;
        }
    }
    if width == 2 {
        crate::linear::post(&mut s[..2], sh.post);
    } else if sh.post == 4 {
        s[0] = crate::linear::probit_f32(s[0]);
        s[1] = 0.0;
    } else {
        let v = s[0];
        match add {
            0 | 1 => {
                s[0] = 1.0 - v;
                s[1] = v;
            }
            2 | 3 if sh.post == 2 => {
                s[0] = -v;
                s[1] = v;
                crate::linear::post(&mut s[..2], 2);
            }
            2 | 3 => {
                s[0] = -v;
                s[1] = v;
            }
            _ => s[1] = 0.0,
        }
    }
    l
}

const KERNEL: &str = r#"
#define UMD_HAS(i) ((hb[(i) >> 6] >> ((i) & 63)) & 1ull)
#define UMD_SET(i) (hb[(i) >> 6] |= 1ull << ((i) & 63))
__device__ __forceinline__ double umd_fw(const u64* t, u64 i) {
  return __longlong_as_double((long long)t[i]);
}
__device__ long long umd_forest_row(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ s, bool classifier, u64 r, u64 nf, u64 e, u64 trees, u64 nodes,
    u64 leaves, u64 base, u64 nbase, u64 labels, u64 max_steps, unsigned int agg,
    unsigned int post, unsigned int binary, unsigned int positive) {
  float sc[2];
  bool hs[2];
  // scores live in the output row `s` (width e <= 4096); which outputs a leaf reached, in bits
  unsigned long long hb[64];
  for (u64 k = 0; k < 64; k++) hb[k] = 0;
  for (u64 k = 0; k < e; k++) s[k] = 0.0f;
  for (u64 t = 0; t < trees; t++) {
    long long c = (long long)tab[t];
    for (u64 st = 0; c >= 0 && st < max_steps; st++) {
      const u64* nd = tab + nodes + 6 * (u64)c;
      double v = ld_T(x[r * nf + nd[0]]);
      double split = umd_fw(nd, 2);
      bool go;
      switch ((int)nd[1]) {
        case 0: go = v <= split; break;
        case 1: go = v < split; break;
        case 2: go = v >= split; break;
        case 3: go = v > split; break;
        case 4: go = v == split; break;
        default: go = v != split;
      }
      if (v != v && nd[5]) go = true;
      c = (long long)(go ? nd[3] : nd[4]);
    }
    if (c >= 0) continue;
    u64 l = leaves + 2 * (u64)(-(c + 1));
    u64 start = tab[l], count = tab[l + 1];
    for (u64 k = 0; k < count; k++) {
      u64 id = tab[start + 2 * k];
      float wt = (float)umd_fw(tab, start + 2 * k + 1);
      bool h = UMD_HAS(id);
      if (agg <= 1) s[id] += wt;
      else if (agg == 2) { if (!h || wt < s[id]) s[id] = wt; }
      else { if (!h || wt > s[id]) s[id] = wt; }
      UMD_SET(id);
    }
  }
  float ntrees = (float)trees;
  if (!classifier) {
    if (e == 1) {
      float origin = nbase == 1 ? (float)umd_fw(tab, base) : 0.0f;
      if (agg == 0) s[0] = s[0] / ntrees + origin;
      else if (agg == 1) s[0] = s[0] + origin;
      else s[0] = UMD_HAS(0) ? s[0] + origin : origin;
      if (post == 4) umd_post(s, 1, 4);
    } else {
      for (u64 j = 0; j < e; j++) {
        float b = nbase == e ? (float)umd_fw(tab, base + j) : 0.0f;
        bool h = UMD_HAS(j);
        if (agg == 0) s[j] = s[j] / ntrees + b;
        else if (agg == 1) s[j] = s[j] + b;
        else s[j] = b + (h ? s[j] : 0.0f);
        if (!h) s[j] = 0.0f;
      }
      umd_post(s, e, post);
    }
    return 0;
  }
  if (e > 2) {
    for (u64 k = 0; k < nbase && k < e; k++) {
      float b = (float)umd_fw(tab, base + k);
      if (UMD_HAS(k)) s[k] += b; else { s[k] = b; UMD_SET(k); }
    }
    long long best = -1;
    for (u64 k = 0; k < e; k++) {
      bool h = UMD_HAS(k);
      if (h && (best < 0 || s[k] > s[best])) best = (long long)k;
    }
    umd_post(s, e, post);
    return ((const long long*)tab)[labels + (best < 0 ? 0 : best)];
  }
  sc[0] = s[0]; sc[1] = s[1]; hs[0] = UMD_HAS(0); hs[1] = UMD_HAS(1);
  int add = -1, width = 2;
  if (nbase == 2) {
    if (hs[1]) { sc[1] = (float)umd_fw(tab, base + 1) + sc[0]; sc[0] = -sc[1]; }
    else { sc[1] += (float)umd_fw(tab, base + 1); sc[0] += (float)umd_fw(tab, base); }
  } else if (nbase == 1) {
    sc[0] += (float)umd_fw(tab, base);
    if (!hs[1]) width = 1;
  } else {
    add = 3;
    if (!hs[1]) width = 1;
  }
  float pos = (width == 2 && hs[1]) ? sc[1] : (hs[0] ? sc[0] : 0.0f);
  if (!hs[0]) sc[0] = 0.0f;
  if (!hs[1]) sc[1] = 0.0f;
  long long lab;
  const long long* lt = (const long long*)tab + labels;
  if (binary) {
    bool win = positive ? pos > 0.5f : pos > 0.0f;
    add = positive ? (win ? 0 : 1) : (win ? 2 : 3);
    lab = lt[win ? 1 : 0];
  } else {
    lab = pos > 0.0f ? 1 : 0;
  }
  if (width == 2) {
    umd_post(sc, 2, post);
  } else if (post == 4) {
    umd_post(sc, 1, 4);
    sc[1] = 0.0f;
  } else {
    float v = sc[0];
    if (add == 0 || add == 1) { sc[0] = 1.0f - v; sc[1] = v; }
    else if ((add == 2 || add == 3) && post == 2) {
      sc[0] = -v; sc[1] = v; umd_post(sc, 2, 2);
    } else if (add == 2 || add == 3) { sc[0] = -v; sc[1] = v; }
    else sc[1] = 0.0f;
  }
  s[0] = sc[0]; s[1] = sc[1];
  return lab;
}
extern "C" __global__ void forest_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ z, u64 rows, u64 nf, u64 e, u64 trees, u64 nodes, u64 leaves, u64 base,
    u64 nbase, u64 labels, u64 max_steps, unsigned int agg, unsigned int post,
    unsigned int binary, unsigned int positive) {
  UMD_FOR(r, rows) umd_forest_row(x, tab, z + r * e, false, r, nf, e, trees, nodes, leaves,
      base, nbase, labels, max_steps, agg, post, binary, positive);
}
extern "C" __global__ void forest_cls_NAME(const T* __restrict__ x,
    const u64* __restrict__ tab, float* __restrict__ z, long long* __restrict__ y, u64 rows,
    u64 nf, u64 e, u64 trees, u64 nodes, u64 leaves, u64 base, u64 nbase, u64 labels,
    u64 max_steps, unsigned int agg, unsigned int post, unsigned int binary,
    unsigned int positive) {
  UMD_FOR(r, rows) y[r] = umd_forest_row(x, tab, z + r * e, true, r, nf, e, trees, nodes,
      leaves, base, nbase, labels, max_steps, agg, post, binary, positive);
}
"#;

pub fn cuda(dt: Dtype) -> ModuleSource {
    let mut code = common::cuda_head(&[("T", dt)]);
    code.push_str(crate::linear::POST_CUDA);
    let name = dtype::name(dt);
    code.push_str(&KERNEL.replace("NAME", name));
    crate::simple::module(
        code,
        vec![format!("forest_{name}"), format!("forest_cls_{name}")],
    )
}
