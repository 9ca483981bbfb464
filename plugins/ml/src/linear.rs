//! LinearRegressor and LinearClassifier (ai.onnx.ml 1): `scores = X · coefficientsᵀ +
//! intercepts` for `X [N, C]` (or `[C]`, one row) of f32, f64, i64 or i32, scores in f32, and
//! the classifier's labels (int64 class labels). What onnxruntime (the reference users compare
//! against) does, it does here:
//! - `post_transform` (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT) applies to rows of two or
//!   more scores; a single score only takes PROBIT;
//! - a classifier with one score column and two class labels is binary: its label is
//!   `classlabels[1]` when the raw score is > 0, else `classlabels[0]` (1 / 0 without two
//!   labels), and its scores become `[1 − s, s]`, with LOGISTIC `[σ(−s), σ(s)]` (onnxruntime
//!   1.32 writes PROBIT's single transformed score unpaired there; umd writes `[probit(s), 0]`,
//!   not a pair either: use NONE or LOGISTIC for binary models);
//! - with several columns the label is the class of the first largest raw score.
//!
//! String class labels (`classlabels_strings`) are refused (status 2): string outputs are not
//! served by this plugin. Module `ml_linear_{T}`, one thread per row; the coefficients,
//! intercepts and labels travel in the workspace as a [`Blob`].

use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, attr, dtype};

use crate::blob::Blob;
use crate::common::{self, Scorer, Val, bad, get, put, scorer_plan};
use crate::prep::rows_of;
use crate::rows;

/// Most coefficients one model may carry (the blob's limit is checked too).
const MAX_COEFFICIENTS: usize = 1 << 18;

/// The `post_transform` code of an ONNX-ML string: 0 NONE, 1 SOFTMAX, 2 LOGISTIC,
/// 3 SOFTMAX_ZERO, 4 PROBIT.
pub fn post_code(req: &PlanRequestExt) -> Result<u32, OpError> {
    common::choice(
        req,
        "post_transform",
        "NONE",
        &["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"],
    )
}

pub fn plan_regressor(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(
        a,
        &["coefficients", "intercepts", "post_transform", "targets"],
    )?;
    let targets = attr::int_or(a, "targets", 1)?;
    if !(1..=1 << 16).contains(&targets) {
        return Err(bad(
            req,
            format!("`targets` = {targets} must be in 1..=65536"),
        ));
    }
    plan(req, targets as u64, None)
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
            "intercepts",
            "multi_class",
            "post_transform",
        ],
    )?;
    if crate::string_labels::wanted(req) {
        // onnxruntime 1.32 refuses a single score column without exactly two string labels
        let n = common::strings(req, "classlabels_strings")?.len();
        if attr::floats_or(a, "intercepts", &[])?.len() == 1 && n != 2 {
            return Err(bad(
                req,
                format!("one score column takes exactly 2 `classlabels_strings`, not {n}"),
            ));
        }
        return crate::string_labels::plan(req, "classlabels_ints");
    }
    let labels = attr::ints_or(a, "classlabels_ints", &[])?;
    let intercepts = attr::floats_or(a, "intercepts", &[])?;
    let classes = intercepts.len() as u64;
    if classes == 0 {
        return Err(bad(req, "`intercepts` (one per class) is required".into()));
    }
    if classes > 1 && labels.len() as u64 != classes {
        return Err(bad(
            req,
            format!(
                "{} `classlabels_ints` for {classes} classes (one per intercept)",
                labels.len()
            ),
        ));
    }
    plan(req, classes, Some(labels))
}

/// The plan of either op: `e` score columns; `labels` for the classifier.
fn plan(req: &PlanRequestExt, e: u64, labels: Option<Vec<i64>>) -> Result<OpPlan, OpError> {
    let a = &req.attributes;
    let post = post_code(req)?;
    let coef = attr::floats_or(a, "coefficients", &[])?;
    let icpt = attr::floats_or(a, "intercepts", &[])?;
    let (x, rows, c) = rows_of(req, 1)?;
    if coef.len() > MAX_COEFFICIENTS || coef.len() as u64 != e * c {
        return Err(bad(
            req,
            format!(
                "`coefficients` has {} values; {e} × {c} (outputs × features of X) expected, \
                 at most {MAX_COEFFICIENTS}",
                coef.len()
            ),
        ));
    }
    if !icpt.is_empty() && icpt.len() as u64 != e {
        return Err(bad(
            req,
            format!("`intercepts` has {} values, {e} expected", icpt.len()),
        ));
    }
    let nlabels = labels.as_ref().map_or(0, |l| l.len());
    // binary: one score column, two labels: scores [1 - s, s]
    let second = labels.is_some() && e == 1 && nlabels == 2;
    let width = if second { 2 } else { e };
    let mut blob = Blob::default();
    for &v in &coef {
        blob.f64(v);
    }
    for t in 0..e as usize {
        blob.f64(icpt.get(t).copied().unwrap_or(0.0));
    }
    for &l in labels.iter().flatten() {
        blob.i64(l);
    }
    let scorer = Scorer {
        family: "linear",
        classifier: labels.is_some(),
        rows,
        features: c,
        width,
    };
    scorer_plan(req, x, scorer, &blob, |p| {
        p.u64(e).u32(post);
        if labels.is_some() {
            p.u32(nlabels as u32).u32(second as u32);
        }
    })
}

/// The CUDA C of onnxruntime's score transforms on a row of f32 scores (`umd_post`), shared
/// with the tree ensembles' classifier.
pub const POST_CUDA: &str = r#"
__device__ void umd_post(float* s, u64 n, unsigned int post) {
  if (post == 1 || post == 3) {
    float mx = -3.402823466e38f, sum = 0.0f;
    for (u64 t = 0; t < n; t++) if (s[t] > mx) mx = s[t];
    for (u64 t = 0; t < n; t++) {
      if (post == 1 || s[t] > 1e-7f || s[t] < -1e-7f) { s[t] = expf(s[t] - mx); sum += s[t]; }
      else s[t] = s[t] * expf(-mx);
    }
    for (u64 t = 0; t < n; t++) s[t] = s[t] / sum;
  } else if (post == 2) {
    for (u64 t = 0; t < n; t++) {
      float v = 1.0f / (1.0f + expf(-fabsf(s[t])));
      s[t] = s[t] < 0.0f ? 1.0f - v : v;
    }
  } else if (post == 4) {
    for (u64 t = 0; t < n; t++) {
      float x = 2.0f * s[t] - 1.0f, sgn = x < 0.0f ? -1.0f : 1.0f;
      float l = logf((1.0f - x) * (1.0f + x));
      float a = 2.0f / (3.14159f * 0.147f) + 0.5f * l, b = 1.0f / 0.147f * l;
      s[t] = 1.41421356f * sgn * sqrtf(-a + sqrtf(a * a - b));
    }
  }
}
"#;

const KERNEL: &str = r#"
__device__ void umd_linear_row(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ z, long long* __restrict__ y, u64 r, u64 c, u64 e, unsigned int post,
    unsigned int nlabels, unsigned int second) {
  u64 w = second ? 2 : e;
  float* s = z + r * w;
  for (u64 t = 0; t < e; t++) {
    double acc = __longlong_as_double((long long)tab[e * c + t]);
    for (u64 k = 0; k < c; k++)
      acc += __longlong_as_double((long long)tab[t * c + k]) * ld_T(x[r * c + k]);
    s[t] = (float)acc;
  }
  if (y) {
    const long long* lab = (const long long*)(tab + e * c + e);
    if (e == 1) {
      y[r] = s[0] > 0.0f ? (nlabels == 2 ? lab[1] : 1) : (nlabels == 2 ? lab[0] : 0);
    } else {
      u64 best = 0;
      for (u64 t = 1; t < e; t++) if (s[t] > s[best]) best = t;
      y[r] = lab[best];
    }
  }
  if (e >= 2) umd_post(s, e, post);
  else if (post == 4) umd_post(s, 1, 4);
  else if (second && post == 2) { s[1] = s[0]; s[0] = -s[0]; umd_post(s, 2, 2); }
  else if (second) { s[1] = s[0]; s[0] = 1.0f - s[1]; }
}
extern "C" __global__ void linear_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ z, u64 rows, u64 c, u64 e, unsigned int post) {
  UMD_FOR(r, rows) umd_linear_row(x, tab, z, 0, r, c, e, post, 0, 0);
}
extern "C" __global__ void linear_cls_NAME(const T* __restrict__ x,
    const u64* __restrict__ tab, float* __restrict__ z, long long* __restrict__ y, u64 rows,
    u64 c, u64 e, unsigned int post, unsigned int nlabels, unsigned int second) {
  UMD_FOR(r, rows) umd_linear_row(x, tab, z, y, r, c, e, post, nlabels, second);
}
"#;

pub fn cuda(dt: Dtype) -> ModuleSource {
    let mut code = common::cuda_head(&[("T", dt)]);
    code.push_str(POST_CUDA);
    let name = dtype::name(dt);
    code.push_str(&KERNEL.replace("NAME", name));
    crate::simple::module(
        code,
        vec![format!("linear_{name}"), format!("linear_cls_{name}")],
    )
}
/// onnxruntime's score transforms on a row of f32 scores (see [`POST_CUDA`]).
pub fn post(s: &mut [f32], post: u32) {
    match post {
        1 | 3 => {
            let keep = |v: f32| post == 1 || !(-1e-7..=1e-7).contains(&v);
            let mx = s.iter().fold(-f32::MAX, |m, &v| if v > m { v } else { m });
            let mut sum = 0f32;
            for v in s.iter_mut() {
                if keep(*v) {
                    *v = (*v - mx).exp();
                    sum += *v;
                } else {
                    *v *= (-mx).exp();
                }
            }
            for v in s.iter_mut() {
                *v /= sum;
            }
        }
        2 => {
            for v in s.iter_mut() {
                let l = 1.0 / (1.0 + (-v.abs()).exp());
                *v = if *v < 0.0 { 1.0 - l } else { l };
            }
        }
        4 => {
            for v in s.iter_mut() {
                *v = probit_f32(*v);
            }
        }
        _ => {}
    }
}

/// PROBIT as onnxruntime's linear models compute it: [`crate::tree::probit`]'s formula in f32
/// (whose cancellation near 0.5 onnxruntime's results carry).
#[allow(clippy::approx_constant, clippy::excessive_precision)] // onnxruntime's spelling
pub fn probit_f32(v: f32) -> f32 {
    let x = 2.0 * v - 1.0;
    let sgn = if x < 0.0 { -1.0 } else { 1.0 };
    let l = ((1.0 - x) * (1.0 + x)).ln();
    let a = 2.0 / (3.14159f32 * 0.147) + 0.5 * l;
    let b = 1.0 / 0.147f32 * l;
    1.41421356f32 * sgn * (-a + (a * a - b).sqrt()).sqrt()
}

/// One launch's bindings and parameters.
struct Params {
    xb: u32,
    tb: u32,
    zb: u32,
    yb: Option<u32>,
    rows: usize,
    /// Features (columns of X) and targets (rows of the coefficients).
    c: usize,
    e: usize,
    post: u32,
    nlabels: u32,
    /// One score column written as two (the binary classifier).
    second: bool,
}

impl Params {
    fn read(
        call_params: &[u8],
        relocs: &[umd_sdk::Relocation],
        classifier: bool,
    ) -> Result<Params, OpError> {
        let mut r = ParamReader::new(call_params, relocs);
        let (xb, tb, zb) = (r.ptr()?, r.ptr()?, r.ptr()?);
        let yb = if classifier { Some(r.ptr()?) } else { None };
        let (rows, c, e) = (r.u64()? as usize, r.u64()? as usize, r.u64()? as usize);
        let post = r.u32()?;
        let (nlabels, second) = if classifier {
            (r.u32()?, r.u32()? != 0)
        } else {
            (0, false)
        };
        Ok(Params {
            xb,
            tb,
            zb,
            yb,
            rows,
            c,
            e,
            post,
            nlabels,
            second,
        })
    }

    /// Score columns written per row.
    fn width(&self) -> usize {
        if self.second { 2 } else { self.e }
    }

    /// Words of the table: coefficients, intercepts, labels.
    fn words(&self) -> Option<usize> {
        self.e
            .checked_mul(self.c)?
            .checked_add(self.e)?
            .checked_add(self.nlabels as usize)
    }
}

/// Scores `rows` rows of `x` into `z` (rows of [`Params::width`] f32) and, for a classifier,
/// the labels into `y`; `tab` holds [`Params::words`] words.
fn score<T: Val>(
    p: &Params,
    tab: &[f64],
    rows: usize,
    x: &[u8],
    z: &mut [u8],
    mut y: Option<&mut [u8]>,
) -> Result<(), OpError> {
    let (c, e, w, nlabels, second, post_t) = (p.c, p.e, p.width(), p.nlabels, p.second, p.post);
    let (coef, rest) = tab.split_at(e * c);
    let intercepts = &rest[..e];
    let label = |i: usize| rest[e + i].to_bits() as i64;
    let mut s = vec![0f32; w];
    let mut xr = vec![0f64; c];
    for row in 0..rows {
        for (k, v) in xr.iter_mut().enumerate() {
            *v = get::<T>(x, row * c + k).to_f64();
        }
        for (t, st) in s.iter_mut().enumerate().take(e) {
            let mut acc = intercepts[t];
            for (a, b) in coef[t * c..][..c].iter().zip(&xr) {
                acc += a * b;
            }
            *st = acc as f32;
        }
        if let Some(y) = y.as_deref_mut() {
            let l = if e == 1 {
                match (s[0] > 0.0, nlabels == 2) {
                    (true, true) => label(1),
                    (false, true) => label(0),
                    (true, false) => 1,
                    (false, false) => 0,
                }
            } else {
                let mut best = 0;
                for t in 1..e {
                    if s[t] > s[best] {
                        best = t;
                    }
                }
                label(best)
            };
            put::<i64>(y, row, l);
        }
        if e >= 2 {
            post(&mut s, post_t);
        } else if post_t == 4 {
            post(&mut s[..1], 4);
        } else if second && post_t == 2 {
            s[1] = s[0];
            s[0] = -s[0];
            post(&mut s, 2);
        } else if second {
            s[1] = s[0];
            s[0] = 1.0 - s[1];
        }
        for (t, &v) in s.iter().enumerate() {
            put::<f32>(z, row * w + t, v);
        }
    }
    Ok(())
}

/// Tells a decoded linear table apart from other values kept under the same name.
const KEY: u64 = 0x6c69_6e65_6172;

/// A linear model's launch: its parameters and X's dtype.
pub struct Linear {
    dt: Dtype,
    p: Params,
}

impl Linear {
    pub fn read(
        params: &[u8],
        relocations: &[umd_sdk::Relocation],
        dt: Dtype,
        classifier: bool,
    ) -> Result<Linear, OpError> {
        Ok(Linear {
            dt,
            p: Params::read(params, relocations, classifier)?,
        })
    }
}

impl rows::Scorer for Linear {
    type Table = Vec<f64>;

    fn launch(&self) -> Result<rows::RowLaunch, OpError> {
        let p = &self.p;
        let too_large = || OpError::internal("linear: launch too large");
        // what `score` indexes: two score columns only from one, a label per class
        if p.second && p.e != 1 {
            return Err(OpError::internal(
                "linear: two score columns from more than one",
            ));
        }
        if p.yb.is_some() && p.e != 1 && (p.nlabels as usize) < p.e {
            return Err(OpError::internal("linear: fewer labels than classes"));
        }
        let xrow =
            p.c.checked_mul(rows::elem(self.dt)?)
                .ok_or_else(too_large)?;
        let zrow = p.width().checked_mul(4).ok_or_else(too_large)?;
        let tbytes = p
            .words()
            .and_then(|w| w.checked_mul(8))
            .ok_or_else(too_large)?;
        let mut outputs = vec![(p.zb, zrow)];
        outputs.extend(p.yb.map(|b| (b, 8)));
        Ok(rows::RowLaunch {
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

    fn score(&self, t: &Vec<f64>, n: usize, x: &[u8], outs: &mut [Vec<u8>]) -> Result<(), OpError> {
        let (z, y) = rows::scores_and_labels(outs);
        let p = &self.p;
        crate::by_dtype!(
            self.dt,
            score,
            OpError::internal("linear: unknown dtype"),
            p,
            t,
            n,
            x,
            z,
            y
        )
    }
}
