//! SVMRegressor and SVMClassifier (ai.onnx.ml 1: the support vector machines scikit-learn
//! converters write for SVR/SVC/LinearSVC) on f32, f64, i64 and i32 inputs `X [N, F]` (or
//! `[F]`), as onnxruntime computes them: X read as f32, kernels LINEAR (`x·v`), POLY
//! (`(γ x·v + c0)^degree`), RBF (`exp(−γ |x − v|²)`) and SIGMOID (`tanh(γ x·v + c0)`) from
//! `kernel_params [γ, c0, degree]`, each kernel value rounded to f32.
//!
//! - Regressor: `Σ coefficients[v] · K(x, sv_v) + rho[0]` over `n_supports` support vectors, or
//!   without support vectors `x · coefficients + rho[0]`; `one_class` maps the result to ±1.
//!   Output `[N, 1]` f32 (`post_transform` is ignored, as onnxruntime does).
//! - Classifier with support vectors (`vectors_per_class`): one-vs-one. For classes `i < j`,
//!   `d = Σ_i coef[j−1][v]·K + Σ_j coef[i][v]·K + rho[pair]` (in f64, stored as f32), a vote for
//!   `i` when `d > 0` else `j`; the label is the class with most votes (the first on a tie).
//!   With `prob_a`/`prob_b`, the pairwise Platt probabilities are coupled into class
//!   probabilities (libsvm's `multiclass_probability`, as onnxruntime iterates it) and those
//!   are the scores; without, the scores are the pairwise `d` (two classes: `[−d, d]`, with
//!   LOGISTIC `[1 − σ(d), σ(d)]`, with another `post_transform` `[1 − d, d]`).
//! - Classifier without support vectors (liblinear): `x · coefficients[c] + rho[0]` per class,
//!   the label the first largest; with two classes onnxruntime's rule (`classlabels[1]` when
//!   the largest score is ≥ 0.5 with all coefficients ≥ 0, or > 0 otherwise).
//! - `post_transform` on two or more scores as for the other ONNX-ML ops.
//!
//! String labels are refused (status 2); at most 32 classes and 2^16 support vectors. Module
//! `ml_svm_{T}`, one thread per row; the model travels in the workspace as a [`Blob`].

use umd_sdk::{Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, attr, dtype};

use crate::blob::Blob;
use crate::common::{self, Scorer, bad, scorer_plan};
use crate::prep::rows_of;

/// Most classes of an SVMClassifier (the CUDA kernel keeps the coupling matrix per thread).
pub const MAX_CLASSES: usize = 32;
/// Most support vectors.
pub const MAX_VECTORS: u64 = 1 << 16;

/// The kernel code: 0 LINEAR, 1 POLY, 2 RBF, 3 SIGMOID.
fn kernel_code(req: &PlanRequestExt) -> Result<u32, OpError> {
    common::choice(
        req,
        "kernel_type",
        "LINEAR",
        &["LINEAR", "POLY", "RBF", "SIGMOID"],
    )
}

/// What both ops share: the kernel, its parameters and the support vectors.
struct Common {
    kernel: u32,
    params: [f64; 3],
    vectors: Vec<f64>,
    coef: Vec<f64>,
    rho: Vec<f64>,
}

fn common(req: &PlanRequestExt) -> Result<Common, OpError> {
    let a = &req.attributes;
    let kp = attr::floats_or(a, "kernel_params", &[])?;
    let params = match kp[..] {
        [] => [0.0; 3],
        [g, c, d] => [g, c, d],
        _ => {
            return Err(bad(
                req,
                format!(
                    "`kernel_params` has {} values; [gamma, coef0, degree]",
                    kp.len()
                ),
            ));
        }
    };
    let c = Common {
        kernel: kernel_code(req)?,
        params,
        vectors: attr::floats_or(a, "support_vectors", &[])?,
        coef: attr::floats_or(a, "coefficients", &[])?,
        rho: attr::floats_or(a, "rho", &[])?,
    };
    if c.coef.is_empty() || c.rho.is_empty() {
        return Err(bad(req, "`coefficients` and `rho` are required".into()));
    }
    Ok(c)
}

pub fn plan_regressor(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(
        a,
        &[
            "coefficients",
            "kernel_params",
            "kernel_type",
            "n_supports",
            "one_class",
            "post_transform",
            "rho",
            "support_vectors",
        ],
    )?;
    crate::linear::post_code(req)?;
    let c = common(req)?;
    let (x, rows, nf) = rows_of(req, 1)?;
    let nv = attr::int_or(a, "n_supports", 0)?;
    if nv < 0 || nv as u64 > MAX_VECTORS {
        return Err(bad(
            req,
            format!("`n_supports` = {nv} must be in 0..={MAX_VECTORS}"),
        ));
    }
    let nv = nv as u64;
    let (kernel, expect_coef) = if nv > 0 {
        if c.vectors.len() as u64 != nv * nf {
            return Err(bad(
                req,
                format!(
                    "`support_vectors` has {} values; {nv} vectors × {nf} features of X",
                    c.vectors.len()
                ),
            ));
        }
        (c.kernel, nv)
    } else {
        (0, nf)
    };
    if c.coef.len() as u64 != expect_coef {
        return Err(bad(
            req,
            format!(
                "`coefficients` has {} values, {expect_coef} expected",
                c.coef.len()
            ),
        ));
    }
    let one_class = attr::int_or(a, "one_class", 0)? != 0;
    let mut blob = Blob::default();
    c.vectors.iter().for_each(|&v| blob.f64(v));
    let coef_off = blob.len();
    c.coef.iter().for_each(|&v| blob.f64(v));
    let rho_off = blob.len();
    blob.f64(c.rho[0]);
    let scorer = Scorer {
        family: "svm",
        classifier: false,
        rows,
        features: nf,
        width: 1,
    };
    scorer_plan(req, x, scorer, &blob, |p| {
        p.u64(nv)
            .u64(coef_off)
            .u64(rho_off)
            .u32(kernel)
            .f64(c.params[0])
            .f64(c.params[1])
            .f64(c.params[2])
            .u32(one_class as u32);
    })
}

pub fn plan_classifier(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(
        a,
        &[
            "classlabels_ints",
            "classlabels_strings",
            "coefficients",
            "kernel_params",
            "kernel_type",
            "post_transform",
            "prob_a",
            "prob_b",
            "rho",
            "support_vectors",
            "vectors_per_class",
        ],
    )?;
    if crate::string_labels::wanted(req) {
        return crate::string_labels::plan(req, "classlabels_ints");
    }
    let post = crate::linear::post_code(req)?;
    let c = common(req)?;
    let (x, rows, nf) = rows_of(req, 1)?;
    let labels = attr::ints_or(a, "classlabels_ints", &[])?;
    let k = labels.len();
    if k == 0 || k > MAX_CLASSES {
        return Err(bad(
            req,
            format!("{k} `classlabels_ints`; 1..={MAX_CLASSES} classes are served"),
        ));
    }
    let per_class = attr::ints_or(a, "vectors_per_class", &[])?;
    // counts summed checked: a wrapped sum would pass every size check below
    let nv = per_class
        .iter()
        .try_fold(0i64, |sum, &v| {
            (0..=MAX_VECTORS as i64)
                .contains(&v)
                .then(|| sum.checked_add(v))
                .flatten()
        })
        .filter(|&n| n as u64 <= MAX_VECTORS)
        .ok_or_else(|| {
            bad(
                req,
                format!(
                    "`vectors_per_class` {per_class:?}: counts ≥ 0, {MAX_VECTORS} vectors at most"
                ),
            )
        })?;
    let svc = nv > 0;
    let pairs = k * (k - 1) / 2;
    let (pa, pb) = (
        attr::floats_or(a, "prob_a", &[])?,
        attr::floats_or(a, "prob_b", &[])?,
    );
    if pa.len() != pb.len() {
        return Err(bad(req, "`prob_a` and `prob_b` differ in length".into()));
    }
    let proba = !pa.is_empty();
    if svc {
        if per_class.len() != k || per_class.iter().any(|&v| v < 0) || nv as u64 > MAX_VECTORS {
            return Err(bad(
                req,
                format!(
                    "`vectors_per_class` {per_class:?} must give each of the {k} classes a \
                     count, {MAX_VECTORS} vectors at most"
                ),
            ));
        }
        let nv = nv as u64;
        if c.vectors.len() as u64 != nv * nf {
            return Err(bad(
                req,
                format!(
                    "`support_vectors` has {} values; {nv} vectors × {nf} features of X",
                    c.vectors.len()
                ),
            ));
        }
        if (c.coef.len() as u64) < (k as u64 - 1) * nv || c.rho.len() < pairs {
            return Err(bad(
                req,
                format!(
                    "{} `coefficients` and {} `rho` for {k} classes and {nv} vectors: at least \
                     {} and {pairs} expected",
                    c.coef.len(),
                    c.rho.len(),
                    (k as u64 - 1) * nv
                ),
            ));
        }
        if proba && pa.len() < pairs {
            return Err(bad(
                req,
                format!("`prob_a` has {} values, {pairs} expected", pa.len()),
            ));
        }
    } else if c.coef.len() as u64 != k as u64 * nf {
        return Err(bad(
            req,
            format!(
                "`coefficients` has {} values; {k} classes × {nf} features expected",
                c.coef.len()
            ),
        ));
    }
    let width = if svc && !proba {
        if k > 2 { pairs } else { 2 }
    } else {
        k
    };
    let positive = c.coef.iter().all(|&v| v >= 0.0);
    let mut blob = Blob::default();
    c.vectors.iter().for_each(|&v| blob.f64(v));
    let coef_off = blob.len();
    c.coef.iter().for_each(|&v| blob.f64(v));
    let rho_off = blob.len();
    c.rho.iter().for_each(|&v| blob.f64(v));
    let prob_off = blob.len();
    pa.iter().chain(&pb).for_each(|&v| blob.f64(v));
    let class_off = blob.len();
    let mut start = 0;
    for &n in per_class.iter().take(if svc { k } else { 0 }) {
        blob.i64(start);
        blob.i64(n);
        start += n;
    }
    let labels_off = blob.len();
    labels.iter().for_each(|&l| blob.i64(l));
    let scorer = Scorer {
        family: "svm",
        classifier: true,
        rows,
        features: nf,
        width: width as u64,
    };
    scorer_plan(req, x, scorer, &blob, |p| {
        p.u64(nv as u64)
            .u64(coef_off)
            .u64(rho_off)
            .u32(if svc { c.kernel } else { 0 })
            .f64(c.params[0])
            .f64(c.params[1])
            .f64(c.params[2])
            .u64(k as u64)
            .u64(width as u64)
            .u64(prob_off)
            .u64(pa.len() as u64)
            .u64(class_off)
            .u64(labels_off)
            .u32(post)
            .u32(positive as u32);
    })
}

const KERNEL: &str = r#"
__device__ __forceinline__ double umd_sw(const u64* t, u64 i) {
  return __longlong_as_double((long long)t[i]);
}
__device__ float umd_kernel(unsigned int kind, double g, double c0, double deg,
    const T* __restrict__ x, const u64* __restrict__ tab, u64 v0, u64 nf) {
  double acc = 0.0;
  for (u64 f = 0; f < nf; f++) {
    double xv = (double)(float)ld_T(x[f]), vv = umd_sw(tab, v0 + f);
    acc += kind == 2 ? (xv - vv) * (xv - vv) : xv * vv;
  }
  if (kind == 2) return (float)exp(-g * acc);
  if (kind == 1) return (float)pow(g * acc + c0, deg);
  if (kind == 3) return (float)tanh(g * acc + c0);
  return (float)acc;
}
extern "C" __global__ void svm_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ z, u64 rows, u64 nf, u64 nv, u64 coef, u64 rho, unsigned int kind,
    double g, double c0, double deg, unsigned int one_class) {
  UMD_FOR(r, rows) {
    const T* xr = x + r * nf;
    float s;
    if (nv > 0) {
      double acc = 0.0;
      for (u64 v = 0; v < nv; v++)
        acc += umd_sw(tab, coef + v) * (double)umd_kernel(kind, g, c0, deg, xr, tab, v * nf, nf);
      s = (float)(acc + umd_sw(tab, rho));
    } else {
      s = (float)((double)umd_kernel(0, g, c0, deg, xr, tab, coef, nf) + umd_sw(tab, rho));
    }
    z[r] = one_class ? (s > 0.0f ? 1.0f : -1.0f) : s;
  }
}
extern "C" __global__ void svm_cls_NAME(const T* __restrict__ x,
    const u64* __restrict__ tab, float* __restrict__ z, long long* __restrict__ y, u64 rows,
    u64 nf, u64 nv, u64 coef, u64 rho, unsigned int kind, double g, double c0, double deg,
    u64 k, u64 width, u64 prob, u64 nprob, u64 cls, u64 labels, unsigned int post,
    unsigned int positive) {
  UMD_FOR(r, rows) {
    const T* xr = x + r * nf;
    float s[32 * 31 / 2 + 2];
    unsigned int votes[32];
    u64 pairs = k * (k - 1) / 2;
    for (u64 c = 0; c < pairs + 2; c++) s[c] = 0.0f;
    u64 maxclass = 0;
    float max_weight = 0.0f;
    bool svc = nv > 0, proba = nprob > 0;
    if (svc) {
      for (u64 c = 0; c < k; c++) votes[c] = 0;
      u64 idx = 0;
      for (u64 i = 0; i < k; i++) {
        for (u64 j = i + 1; j < k; j++) {
          u64 si = tab[cls + 2 * i], ni = tab[cls + 2 * i + 1];
          u64 sj = tab[cls + 2 * j], nj = tab[cls + 2 * j + 1];
          double sum = 0.0;
          for (u64 m = 0; m < ni; m++)
            sum += (double)(float)umd_sw(tab, coef + (j - 1) * nv + si + m)
                 * (double)umd_kernel(kind, g, c0, deg, xr, tab, (si + m) * nf, nf);
          for (u64 m = 0; m < nj; m++)
            sum += (double)(float)umd_sw(tab, coef + i * nv + sj + m)
                 * (double)umd_kernel(kind, g, c0, deg, xr, tab, (sj + m) * nf, nf);
          sum += (double)(float)umd_sw(tab, rho + idx);
          s[idx] = (float)sum;
          votes[sum > 0.0 ? i : j]++;
          idx++;
        }
      }
      if (proba) {
        float q[32 * 32], qp[32], p[32], rr[32 * 32];
        idx = 0;
        for (u64 i = 0; i < k; i++) {
          for (u64 j = i + 1; j < k; j++) {
            float a = (float)umd_sw(tab, prob + idx), b = (float)umd_sw(tab, prob + nprob + idx);
            float t = s[idx] * a + b;
            float l = 1.0f / (1.0f + expf(-fabsf(t)));
            l = t < 0.0f ? 1.0f - l : l;
            float v = fminf(fmaxf(1.0f - l, 1e-7f), 1.0f - 1e-7f);
            rr[i * k + j] = v;
            rr[j * k + i] = 1.0f - v;
            idx++;
          }
        }
        float eps = 0.005f / (float)k;
        for (u64 i = 0; i < k; i++) {
          p[i] = 1.0f / (float)k;
          q[i * k + i] = 0.0f;
          for (u64 j = 0; j < i; j++) {
            q[i * k + i] += rr[j * k + i] * rr[j * k + i];
            q[i * k + j] = q[j * k + i];
          }
          for (u64 j = i + 1; j < k; j++) {
            q[i * k + i] += rr[j * k + i] * rr[j * k + i];
            q[i * k + j] = -rr[j * k + i] * rr[i * k + j];
          }
        }
        for (int loop = 0; loop < 100; loop++) {
          float pqp = 0.0f;
          for (u64 i = 0; i < k; i++) {
            qp[i] = 0.0f;
            for (u64 j = 0; j < k; j++) qp[i] += q[i * k + j] * p[j];
            pqp += p[i] * qp[i];
          }
          float max_error = 0.0f;
          for (u64 i = 0; i < k; i++) max_error = fmaxf(max_error, fabsf(qp[i] - pqp));
          if (max_error < eps) break;
          for (u64 i = 0; i < k; i++) {
            float diff = (-qp[i] + pqp) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0f * qp[i])) / (1.0f + diff) / (1.0f + diff);
            for (u64 j = 0; j < k; j++) {
              qp[j] = (qp[j] + diff * q[i * k + j]) / (1.0f + diff);
              p[j] /= (1.0f + diff);
            }
          }
        }
        for (u64 c = 0; c < k; c++) s[c] = p[c];
      }
      for (u64 c = 1; c < k; c++) if (votes[c] > votes[maxclass]) maxclass = c;
    } else {
      for (u64 c = 0; c < k; c++)
        s[c] = (float)((double)umd_kernel(0, g, c0, deg, xr, tab, coef + c * nf, nf)
                       + umd_sw(tab, rho));
      for (u64 c = 1; c < k; c++) if (s[c] > s[maxclass]) maxclass = c;
      max_weight = s[maxclass];
    }
    const long long* lab = (const long long*)tab + labels;
    if (k == 2 && !proba && ((positive && max_weight >= 0.5f) || (max_weight > 0.0f && !positive)))
      y[r] = lab[1];
    else
      y[r] = lab[maxclass];
    u64 n = (svc && !proba) ? pairs : k;
    if (n > 1) umd_post(s, n, post);
    else if (post == 4) umd_post(s, 1, 4);
    else if (svc && !proba && k <= 2) {
      float v = s[0];
      if (post == 2) umd_post(&v, 1, 2);
      s[0] = post == 0 ? -v : 1.0f - v;
      s[1] = v;
    }
    for (u64 c = 0; c < width; c++) z[r * width + c] = s[c];
  }
}
"#;

pub fn cuda(dt: Dtype) -> ModuleSource {
    let mut code = common::cuda_head(&[("T", dt)]);
    code.push_str(crate::linear::POST_CUDA);
    let name = dtype::name(dt);
    code.push_str(&KERNEL.replace("NAME", name));
    crate::simple::module(code, vec![format!("svm_{name}"), format!("svm_cls_{name}")])
}
