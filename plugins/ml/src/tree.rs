//! TreeEnsemble (ai.onnx.ml opset 5) on f32, f16, bf16 and f64 inputs `X [N, F]`; output
//! `[N, n_targets]` of X's dtype. Every attribute: node modes LEQ, LT, GTE, GT, EQ, NEQ and
//! BRANCH_MEMBER (sets from `membership_values`), missing values tracking true, aggregate
//! functions AVERAGE, SUM, MIN and MAX, post transforms NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO
//! and PROBIT (onnxruntime's closed-form inverse erf, [`probit`]); `nodes_hitrates` is accepted
//! and ignored. (The ONNX reference ignores `post_transform`; onnxruntime applies it.)
//!
//! The plan flattens the trees as the reference builds them (depth first from each root, true
//! branch first; each set-membership node visited takes the next NaN-terminated group of
//! `membership_values`) into a [`Blob`] table: roots (encoded children), node records of
//! [`NODE_WORDS`] words `feature, mode, split, true, false, member start, member end,
//! missing-tracks-true` (a child `>= 0` is a node record, `-(l + 1)` leaf `l`), leaf records
//! `target, weight` and the member values. One thread per row walks every tree and aggregates
//! into its output row (stored in X's dtype after each step, as numpy does), then transforms it.
//!
//! Where the reference and onnxruntime (1.32) differ:
//! - a root whose two branches are one leaf is walked like any node (onnxruntime); the reference
//!   takes the leaf numbered like the root node, which agrees only when the numbers coincide;
//! - a target no leaf reaches under MIN / MAX keeps the initial ±`finfo(dtype).max`
//!   (reference); onnxruntime writes 0;
//! - `post_transform` follows the ONNX numbering (1 SOFTMAX, 2 LOGISTIC); onnxruntime reads 1 as
//!   LOGISTIC and 2 as SOFTMAX. The reference ignores `post_transform`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, AttrValueExt, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    TensorDesc, attr, dtype,
};

use crate::blob::Blob;
use crate::common::{self, FLOATS, Val, dtype_error, get, launch, put, word};

/// Words of one node record.
pub const NODE_WORDS: u64 = 8;
/// Most node records the flattened trees may have.
pub const MAX_RECORDS: usize = 1 << 18;
/// Member mode.
pub const MEMBER: i64 = 6;

fn bad(msg: String) -> OpError {
    OpError::InvalidAttribute(format!("TreeEnsemble: {msg}"))
}

fn find<'a>(req: &'a PlanRequestExt, name: &str) -> Option<&'a AttrValueExt> {
    req.attributes
        .iter()
        .find(|a| a.name == name)
        .map(|a| &a.value)
}

/// A float-list attribute given as a tensor (or a float list).
fn floats_attr(req: &PlanRequestExt, name: &str) -> Result<Option<Vec<f64>>, OpError> {
    match find(req, name) {
        Some(AttrValueExt::Tensor(t)) => Ok(Some(dtype::decode_f64(t.desc.dtype, &t.data))),
        Some(_) => attr::floats_or(&req.attributes, name, &[]).map(Some),
        None => Ok(None),
    }
}

/// An int-list attribute given as a list (or an integer tensor).
fn ints_attr(req: &PlanRequestExt, name: &str) -> Result<Option<Vec<i64>>, OpError> {
    match find(req, name) {
        Some(AttrValueExt::Tensor(t)) => dtype::decode_ints(t.desc.dtype, &t.data)
            .map(Some)
            .ok_or_else(|| bad(format!("`{name}` must be an integer tensor"))),
        _ => attr::ints_opt(&req.attributes, name),
    }
}

/// PROBIT: `√2 · erfinv(2v − 1)` with onnxruntime's closed-form inverse erf (Winitzki's
/// approximation, `a = 0.147`), in f64; the CUDA kernel spells the same formula.
#[allow(clippy::approx_constant)] // onnxruntime's constants, kept as it spells them
pub fn probit(v: f64) -> f64 {
    let x = 2.0 * v - 1.0;
    let sgn = if x < 0.0 { -1.0 } else { 1.0 };
    let l = ((1.0 - x) * (1.0 + x)).ln();
    let a = 2.0 / (3.14159 * 0.147) + 0.5 * l;
    let b = l / 0.147;
    1.41421356 * sgn * (-a + (a * a - b).sqrt()).sqrt()
}

/// The largest finite value of a float dtype (numpy's `finfo(dt).max`).
pub fn finite_max(dt: Dtype) -> f64 {
    match dt {
        Dtype::F16 => 65504.0,
        Dtype::Bf16 => half::bf16::MAX.to_f64(),
        Dtype::F64 => f64::MAX,
        _ => f32::MAX as f64,
    }
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(
        a,
        &[
            "aggregate_function",
            "leaf_targetids",
            "leaf_weights",
            "membership_values",
            "n_targets",
            "nodes_falseleafs",
            "nodes_falsenodeids",
            "nodes_featureids",
            "nodes_hitrates",
            "nodes_missing_value_tracks_true",
            "nodes_modes",
            "nodes_splits",
            "nodes_trueleafs",
            "nodes_truenodeids",
            "post_transform",
            "tree_roots",
        ],
    )?;
    let req_ints = |n: &str| ints_attr(req, n)?.ok_or_else(|| bad(format!("`{n}` is required")));
    let agg = attr::int_or(a, "aggregate_function", 1)?;
    let post = attr::int_or(a, "post_transform", 0)?;
    if !(0..=3).contains(&agg) {
        return Err(bad(format!(
            "`aggregate_function` = {agg} must be 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX)"
        )));
    }
    if !(0..=4).contains(&post) {
        return Err(bad(format!(
            "`post_transform` = {post} must be 0 (NONE), 1 (SOFTMAX), 2 (LOGISTIC), \
             3 (SOFTMAX_ZERO) or 4 (PROBIT)"
        )));
    }
    let targets = attr::int(a, "n_targets").map_err(|_| bad("`n_targets` is required".into()))?;
    if targets < 1 {
        return Err(bad(format!("`n_targets` = {targets} must be positive")));
    }
    let feats = req_ints("nodes_featureids")?;
    let modes = req_ints("nodes_modes")?;
    let splits = floats_attr(req, "nodes_splits")?
        .ok_or_else(|| bad("`nodes_splits` is required".into()))?;
    let tids = req_ints("nodes_truenodeids")?;
    let fids = req_ints("nodes_falsenodeids")?;
    let tleaf = req_ints("nodes_trueleafs")?;
    let fleaf = req_ints("nodes_falseleafs")?;
    let missing = ints_attr(req, "nodes_missing_value_tracks_true")?;
    let ltargets = req_ints("leaf_targetids")?;
    let lweights = floats_attr(req, "leaf_weights")?
        .ok_or_else(|| bad("`leaf_weights` is required".into()))?;
    let roots = req_ints("tree_roots")?;
    let members = floats_attr(req, "membership_values")?.unwrap_or_default();
    let nn = feats.len();
    for (name, len) in [
        ("nodes_modes", modes.len()),
        ("nodes_splits", splits.len()),
        ("nodes_truenodeids", tids.len()),
        ("nodes_falsenodeids", fids.len()),
        ("nodes_trueleafs", tleaf.len()),
        ("nodes_falseleafs", fleaf.len()),
    ] {
        if len != nn {
            return Err(bad(format!(
                "`{name}` has {len} entries, `nodes_featureids` {nn}"
            )));
        }
    }
    if missing.as_ref().is_some_and(|m| m.len() != nn) {
        return Err(bad(format!(
            "`nodes_missing_value_tracks_true` must have {nn} entries"
        )));
    }
    let nl = ltargets.len();
    if lweights.len() != nl {
        return Err(bad(format!(
            "`leaf_weights` has {} entries, `leaf_targetids` {nl}",
            lweights.len()
        )));
    }
    if let Some(t) = ltargets.iter().find(|&&t| t < 0 || t >= targets) {
        return Err(bad(format!(
            "leaf target {t} is not below `n_targets` {targets}"
        )));
    }
    if let Some(m) = modes.iter().find(|&&m| !(0..=MEMBER).contains(&m)) {
        return Err(bad(format!("node mode {m} is not one of 0..=6")));
    }

    if req.slots() != 1 {
        return Err(OpError::shape("TreeEnsemble: takes one input X"));
    }
    let x = req.required(0)?;
    if !FLOATS.contains(&x.dtype) {
        return Err(dtype_error(req, "X", x.dtype, &FLOATS));
    }
    let [rows, nf] = x.shape[..] else {
        return Err(OpError::shape(format!(
            "TreeEnsemble: X must be [N, F], got {:?}",
            x.shape
        )));
    };
    if let Some(f) = feats.iter().find(|&&f| f < 0 || f as u64 >= nf) {
        return Err(bad(format!("feature id {f} is not below F = {nf}")));
    }

    // flatten: records of (node index, true child, false child, member range)
    let leaf = |l: i64| -> Result<i64, OpError> {
        if l < 0 || l as usize >= nl {
            Err(bad(format!("leaf id {l} is not below {nl} leaves")))
        } else {
            Ok(-(l + 1))
        }
    };
    let node_ok = |n: i64| -> Result<usize, OpError> {
        if n < 0 || n as usize >= nn {
            Err(bad(format!("node id {n} is not below {nn} nodes")))
        } else {
            Ok(n as usize)
        }
    };
    struct Rec {
        node: usize,
        t: i64,
        f: i64,
        mem: (usize, usize),
    }
    let mut recs: Vec<Rec> = Vec::new();
    let mut member_at = 0usize;
    let mut root_enc = Vec::with_capacity(roots.len());
    // stack of (node index, parent record and side to patch)
    let mut stack: Vec<(usize, Option<(usize, bool)>)> = Vec::new();
    for &r in &roots {
        let r = node_ok(r)?;
        root_enc.push(recs.len() as i64);
        stack.push((r, None));
        while let Some((n, parent)) = stack.pop() {
            if recs.len() >= MAX_RECORDS {
                return Err(bad(format!(
                    "the trees (followed from their roots) have more than {MAX_RECORDS} nodes, \
                     or a cycle"
                )));
            }
            let me = recs.len();
            if let Some((p, side)) = parent {
                if side {
                    recs[p].t = me as i64;
                } else {
                    recs[p].f = me as i64;
                }
            }
            let mut mem = (0, 0);
            if modes[n] == MEMBER {
                let start = member_at;
                while member_at < members.len() && !members[member_at].is_nan() {
                    member_at += 1;
                }
                mem = (start, member_at);
                member_at = (member_at + 1).min(members.len());
            }
            let mut rec = Rec {
                node: n,
                t: 0,
                f: 0,
                mem,
            };
            // false first on the stack: the true branch is built (and takes members) first
            if fleaf[n] != 0 {
                rec.f = leaf(fids[n])?;
            } else {
                stack.push((node_ok(fids[n])?, Some((me, false))));
            }
            if tleaf[n] != 0 {
                rec.t = leaf(tids[n])?;
            } else {
                stack.push((node_ok(tids[n])?, Some((me, true))));
            }
            recs.push(rec);
        }
    }

    let mut blob = Blob::default();
    for &e in &root_enc {
        blob.i64(e);
    }
    let nodes_off = blob.len();
    let leaves_off = nodes_off + NODE_WORDS * recs.len() as u64;
    let members_off = leaves_off + 2 * nl as u64;
    for r in &recs {
        let n = r.node;
        blob.i64(feats[n]);
        blob.i64(modes[n]);
        blob.f64(splits[n]);
        blob.i64(r.t);
        blob.i64(r.f);
        blob.i64((members_off + r.mem.0 as u64) as i64);
        blob.i64((members_off + r.mem.1 as u64) as i64);
        blob.i64(missing.as_ref().map_or(0, |m| (m[n] != 0) as i64));
    }
    for l in 0..nl {
        blob.i64(ltargets[l]);
        blob.f64(lweights[l]);
    }
    for &m in &members {
        blob.f64(m);
    }
    let shape = vec![rows, targets as u64];
    umd_sdk::shape::byte_size(&shape, x.dtype)?;
    let init = match agg {
        2 => finite_max(x.dtype),
        3 => -finite_max(x.dtype),
        _ => 0.0,
    };
    let ws = req.output_binding(1);
    let mut launches = blob.launches(req, ws)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(ws, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(rows)
        .u64(nf)
        .u64(targets as u64)
        .u64(roots.len() as u64)
        .u64(nodes_off)
        .u64(leaves_off)
        .u64(recs.len() as u64 + 1)
        .f64(init)
        .u32(agg as u32)
        .u32(post as u32);
    let name = dtype::name(x.dtype);
    launches.push(launch(
        req,
        format!("ml_tree_{name}"),
        format!("tree_{name}"),
        rows,
        p,
    )?);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", shape, x.dtype)],
        launches,
        workspace_bytes: blob.bytes(),
    })
}

const KERNEL: &str = r#"
__device__ __forceinline__ double umd_w(const u64* t, u64 i) {
  return __longlong_as_double((long long)t[i]);
}
extern "C" __global__ void tree_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    T* __restrict__ y, u64 rows, u64 nf, u64 nt, u64 trees, u64 nodes, u64 leaves,
    u64 max_steps, double init, unsigned int agg, unsigned int post) {
  UMD_FOR(r, rows) {
    T* out = y + r * nt;
    const T* xr = x + r * nf;
    for (u64 t = 0; t < nt; t++) out[t] = st_T(init);
    for (u64 k = 0; k < trees; k++) {
      long long e = (long long)tab[k];
      for (u64 s = 0; e >= 0 && s < max_steps; s++) {
        const u64* nd = tab + nodes + 8 * (u64)e;
        double v = ld_T(xr[nd[0]]);
        double split = umd_w(nd, 2);
        bool c;
        switch ((int)nd[1]) {
          case 0: c = v <= split; break;
          case 1: c = v < split; break;
          case 2: c = v >= split; break;
          case 3: c = v > split; break;
          case 4: c = v == split; break;
          case 5: c = v != split; break;
          default: {
            c = false;
            for (u64 m = nd[5]; m < nd[6]; m++) c = c || v == umd_w(tab, m);
          }
        }
        if (!c && nd[7] && v != v) c = true;
        e = (long long)(c ? nd[3] : nd[4]);
      }
      if (e >= 0) continue;
      u64 l = leaves + 2 * (u64)(-(e + 1));
      u64 tid = tab[l];
      double w = umd_w(tab, l + 1), cur = ld_T(out[tid]);
      if (agg == 0) out[tid] = st_T(cur + w / (double)trees);
      else if (agg == 1) out[tid] = st_T(cur + w);
      else if (agg == 2) { if (w < cur) out[tid] = st_T(w); }
      else { if (w > cur) out[tid] = st_T(w); }
    }
    if (post == 1 || post == 3) {
      double mx = -1.7976931348623157e308, sum = 0.0;
      for (u64 t = 0; t < nt; t++) { double v = ld_T(out[t]); if (v > mx) mx = v; }
      for (u64 t = 0; t < nt; t++) {
        double v = ld_T(out[t]);
        if (post == 1 || v > 1e-7 || v < -1e-7) sum += exp(v - mx);
      }
      for (u64 t = 0; t < nt; t++) {
        double v = ld_T(out[t]);
        out[t] = st_T((post == 1 || v > 1e-7 || v < -1e-7) ? exp(v - mx) / sum : 0.0);
      }
    } else if (post == 2) {
      for (u64 t = 0; t < nt; t++) out[t] = st_T(1.0 / (1.0 + exp(-ld_T(out[t]))));
    } else if (post == 4) {
      for (u64 t = 0; t < nt; t++) {
        double x = 2.0 * ld_T(out[t]) - 1.0, sgn = x < 0.0 ? -1.0 : 1.0;
        double l = log((1.0 - x) * (1.0 + x));
        double a = 2.0 / (3.14159 * 0.147) + 0.5 * l, b = l / 0.147;
        out[t] = st_T(1.41421356 * sgn * sqrt(-a + sqrt(a * a - b)));
      }
    }
  }
}
"#;

pub fn cuda(dt: Dtype) -> ModuleSource {
    let mut code = common::cuda_head(&[("T", dt)]);
    let name = dtype::name(dt);
    code.push_str(&KERNEL.replace("NAME", name));
    crate::simple::module(code, vec![format!("tree_{name}")])
}

fn tree<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (rows, nf, nt, trees) = (
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
    );
    let (nodes, leaves, max_steps) = (r.u64()? as usize, r.u64()? as usize, r.u64()?);
    let init = r.f64()?;
    let (agg, post) = (r.u32()?, r.u32()?);
    let size = std::mem::size_of::<T>();
    let x = bufs.input(xb, (rows * nf * size) as u64)?;
    let tab = bufs.input(tb, 8 * leaves as u64)?;
    let mut y = bufs.output(yb, (rows * nt * size) as u64)?;
    let w = |i: usize| f64::from_bits(word(tab, i));
    let round = |v: f64| T::from_f64(v).to_f64();
    let mut out = vec![0f64; nt];
    for r in 0..rows {
        out.fill(round(init));
        for k in 0..trees {
            let mut e = word(tab, k) as i64;
            let mut s = 0;
            while e >= 0 && s < max_steps {
                let nd = nodes + 8 * e as usize;
                let v = get::<T>(x, r * nf + word(tab, nd) as usize).to_f64();
                let split = w(nd + 2);
                let mut c = match word(tab, nd + 1) {
                    0 => v <= split,
                    1 => v < split,
                    2 => v >= split,
                    3 => v > split,
                    4 => v == split,
                    5 => v != split,
                    _ => (word(tab, nd + 5)..word(tab, nd + 6)).any(|m| v == w(m as usize)),
                };
                if !c && word(tab, nd + 7) != 0 && v.is_nan() {
                    c = true;
                }
                e = word(tab, nd + if c { 3 } else { 4 }) as i64;
                s += 1;
            }
            if e >= 0 {
                continue;
            }
            let l = leaves + 2 * (-(e + 1)) as usize;
            let tid = word(tab, l) as usize;
            let (wt, cur) = (w(l + 1), out[tid]);
            out[tid] = match agg {
                0 => round(cur + wt / trees as f64),
                1 => round(cur + wt),
                2 if wt < cur => round(wt),
                3 if wt > cur => round(wt),
                _ => cur,
            };
        }
        match post {
            1 | 3 => {
                let keep = |v: f64| post == 1 || !(-1e-7..=1e-7).contains(&v);
                let mx = out
                    .iter()
                    .fold(-f64::MAX, |m, &v| if v > m { v } else { m });
                let sum: f64 = out
                    .iter()
                    .filter(|&&v| keep(v))
                    .map(|&v| (v - mx).exp())
                    .sum();
                for v in out.iter_mut() {
                    *v = if keep(*v) { (*v - mx).exp() / sum } else { 0.0 };
                }
            }
            2 => {
                for v in out.iter_mut() {
                    *v = 1.0 / (1.0 + (-*v).exp());
                }
            }
            4 => {
                for v in out.iter_mut() {
                    *v = probit(*v);
                }
            }
            _ => {}
        }
        for (t, &v) in out.iter().enumerate() {
            put(&mut y.data, r * nt + t, T::from_f64(v));
        }
    }
    Ok(vec![y])
}

pub fn run_cpu(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    crate::by_dtype!(dt, tree, OpError::internal("tree: unknown dtype"), call)
}
