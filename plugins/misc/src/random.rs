//! The random ops: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli
//! and Multinomial. With a `seed`, each draws what the ONNX reference evaluator draws:
//! NumPy's legacy `RandomState(seed)` ([`Mt`]) — `rand` (53-bit doubles), `randn` (the polar
//! method, a cached second value), `binomial(1, p)` (the inversion NumPy runs for one trial, one
//! draw each) — then cast to the output dtype and scaled in it (`x * (high − low) + low`,
//! `x * scale + mean`). Multinomial (not in the reference) samples as NumPy's
//! `multinomial(1, softmax(x))` does, class by class with binomial trials. The stream is
//! sequential: one launch thread (a generator op is for correctness, not speed).
//!
//! Without a `seed` ONNX asks for an automatic one: the CPU kernel takes a new seed for every
//! call from a counter it keeps (so runs differ), the CUDA kernel from the SM clock. The host
//! never folds these ops (graph/compile.rs).
//!
//! Module `misc_random_{T}`, `T` the generated dtype (uniform, normal) or the input's
//! (Bernoulli, Multinomial); the output of Bernoulli and Multinomial is any dtype of
//! [`OUT`], chosen by a code in the parameters.

use std::sync::atomic::{AtomicU32, Ordering};

use umd_sdk::params::ParamPacker;
use umd_sdk::{
    Access, Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype,
};

use crate::common::{self, FLOATS, cuda_header};
use crate::mt::Mt;

/// Output dtypes of Bernoulli and Multinomial (by their index in this list in the kernels).
pub const OUT: [Dtype; 13] = [
    Dtype::F32,
    Dtype::F64,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::I8,
    Dtype::I16,
    Dtype::I32,
    Dtype::I64,
    Dtype::U8,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
    Dtype::Boolean,
];

/// Most Bernoulli trials one Multinomial launch runs (batch × samples × classes).
pub const MAX_TRIALS: u64 = 1 << 26;

/// Generator kinds.
const UNIFORM: u32 = 0;
const NORMAL: u32 = 1;
const BERNOULLI: u32 = 2;
const MULTINOMIAL: u32 = 3;

fn bad(req: &PlanRequestExt, msg: String) -> OpError {
    OpError::InvalidAttribute(format!("{}: {msg}", req.op))
}

/// `(seeded, seed)` of the `seed` attribute (a float in ONNX; NumPy takes `int(seed)`).
fn seed(req: &PlanRequestExt) -> Result<(bool, u32), OpError> {
    if !attr::has(&req.attributes, "seed") {
        return Ok((false, 0));
    }
    let s = attr::float_or(&req.attributes, "seed", 0.0)?;
    if s.is_nan() {
        return Ok((false, 0)); // the reference: a NaN seed is no seed
    }
    let t = s.trunc(); // the reference's int(seed)
    if !(0.0..4_294_967_296.0).contains(&t) {
        return Err(bad(
            req,
            format!("`seed` = {s} must be in [0, 2^32) for the reference's generator"),
        ));
    }
    Ok((true, t as u32))
}

/// The ONNX `dtype` attribute as one of `allowed`, or `default`.
fn out_dtype(req: &PlanRequestExt, default: Dtype, allowed: &[Dtype]) -> Result<Dtype, OpError> {
    let dt = match attr::int_or(&req.attributes, "dtype", 0)? {
        0 => default,
        n => common::onnx_dtype(n)
            .ok_or_else(|| bad(req, format!("`dtype` = {n} is not an ONNX tensor type")))?,
    };
    if !allowed.contains(&dt) {
        return Err(OpError::dtype(format!(
            "{}: output dtype {} is not served; {} are",
            req.op,
            dtype::name(dt),
            common::names(allowed)
        )));
    }
    Ok(dt)
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let op = req.op.as_str();
    let is = |n: &str| op.eq_ignore_ascii_case(n);
    let like = op.ends_with("Like") || op.ends_with("like");
    let (kind, known): (u32, &[&str]) = if is("RandomUniform") || is("RandomUniformLike") {
        (UNIFORM, &["dtype", "high", "low", "seed", "shape"])
    } else if is("RandomNormal") || is("RandomNormalLike") {
        (NORMAL, &["dtype", "mean", "scale", "seed", "shape"])
    } else if is("Bernoulli") {
        (BERNOULLI, &["dtype", "seed"])
    } else {
        (MULTINOMIAL, &["dtype", "sample_size", "seed"])
    };
    attr::only(&req.attributes, known)?;
    if like && attr::has(&req.attributes, "shape") {
        return Err(bad(
            req,
            "takes its shape from its input, not a `shape` attribute".into(),
        ));
    }
    let (seeded, seed) = seed(req)?;
    let a = &req.attributes;
    let (x_dt, in_shape) = if kind == UNIFORM || kind == NORMAL {
        if like {
            common::at_most_inputs(req, 1)?;
            let x = req.required(0)?;
            (Some(x.dtype), x.shape.clone())
        } else {
            common::at_most_inputs(req, 0)?;
            let shape = attr::ints_or(a, "shape", &[])?;
            if !attr::has(a, "shape") || shape.iter().any(|&d| d < 0) {
                return Err(bad(
                    req,
                    format!("`shape` {shape:?} must be given, every dim ≥ 0"),
                ));
            }
            (None, shape.iter().map(|&d| d as u64).collect())
        }
    } else {
        common::at_most_inputs(req, 1)?;
        let x = req.required(0)?;
        if !FLOATS.contains(&x.dtype) {
            return Err(OpError::dtype(format!(
                "{}: input is {}; {} are served",
                req.op,
                dtype::name(x.dtype),
                common::names(&FLOATS)
            )));
        }
        (Some(x.dtype), x.shape.clone())
    };
    let (module_dt, out_dt, shape, extra) = match kind {
        UNIFORM | NORMAL => {
            let default = match x_dt {
                Some(d) if FLOATS.contains(&d) => d,
                _ => Dtype::F32,
            };
            let dt = out_dtype(req, default, &FLOATS)?;
            // float attributes: the reference scales by f32 scalars (high − low in f32)
            let f = |n: &str, d: f64| attr::float_or(a, n, d).map(|v| v as f32);
            let (p1, p2) = if kind == UNIFORM {
                let (hi, lo) = (f("high", 1.0)?, f("low", 0.0)?);
                ((hi - lo) as f64, lo as f64)
            } else {
                (f("scale", 1.0)? as f64, f("mean", 0.0)? as f64)
            };
            (dt, dt, in_shape, (p1, p2, 0u64, 0u64))
        }
        BERNOULLI => {
            let x = x_dt.unwrap_or(Dtype::F32);
            (x, out_dtype(req, x, &OUT)?, in_shape, (0.0, 0.0, 0, 0))
        }
        _ => {
            let x = x_dt.unwrap_or(Dtype::F32);
            let [b, c] = in_shape[..] else {
                return Err(OpError::shape(format!(
                    "Multinomial: input must be [batch, classes], got {in_shape:?}"
                )));
            };
            let s = attr::int_or(a, "sample_size", 1)?;
            if s < 1 {
                return Err(bad(req, format!("`sample_size` = {s} must be ≥ 1")));
            }
            let dt = out_dtype(req, Dtype::I32, &[Dtype::I32, Dtype::I64])?;
            // one thread runs every trial: bounded
            let trials = b
                .checked_mul(s as u64)
                .and_then(|t| t.checked_mul(c.max(1)));
            if trials.is_none_or(|t| t > MAX_TRIALS) {
                return Err(OpError::InvalidAttribute(format!(
                    "Multinomial: {b} × {s} samples of {c} classes, more than {MAX_TRIALS} trials"
                )));
            }
            (x, dt, vec![b, s as u64], (0.0, 0.0, c, s as u64))
        }
    };
    let n = umd_sdk::shape::numel(&shape)?;
    umd_sdk::shape::byte_size(&shape, out_dt)?;
    let code = OUT.iter().position(|d| *d == out_dt).unwrap_or(0) as u32;
    let mut p = ParamPacker::new();
    let has_input = kind >= BERNOULLI;
    if has_input {
        p.ptr(0, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u32(kind)
        .u32(code)
        .f64(extra.0)
        .f64(extra.1)
        .u64(extra.2)
        .u64(extra.3)
        .u32(seeded as u32)
        .u32(seed);
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes)?;
    let name = dtype::name(module_dt);
    let entry = if has_input { "random_in" } else { "random" };
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("output", shape, out_dt)],
        launches: vec![Launch {
            module_id: format!("misc_random_{name}"),
            entry_point: format!("{entry}_{name}"),
            grid: Dim3::x(1),
            block: Dim3::x(1),
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

/// NumPy's legacy generator state beyond MT19937: the cached second normal value.
struct Gen {
    mt: Mt,
    gauss: Option<f64>,
}

impl Gen {
    /// `legacy_gauss`: the polar method, the second value kept for the next call.
    fn gauss(&mut self) -> f64 {
        if let Some(g) = self.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.mt.next_f64() - 1.0;
            let x2 = 2.0 * self.mt.next_f64() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }

    /// `binomial(1, p)` as NumPy's legacy `RandomState` runs it for one trial: one draw
    /// whatever `p` (0 and 1 included), compared through `exp(log(·))` as its inversion does.
    fn bernoulli(&mut self, p: f64) -> bool {
        let u = self.mt.next_f64();
        if p <= 0.5 {
            u > (1.0 - p).ln().exp()
        } else {
            u <= (1.0 - (1.0 - p)).ln().exp()
        }
    }
}

/// Seeds of unseeded CPU calls: a new one per call.
static UNSEEDED: AtomicU32 = AtomicU32::new(0x9e37_79b9);

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let has_input = call.entry_point.starts_with("random_in_");
    let x = if has_input { Some(c.r.ptr()?) } else { None };
    let y = c.r.ptr()?;
    let (n, kind, code) = (c.r.u64()?, c.r.u32()?, c.r.u32()? as usize);
    let (p1, p2, classes, samples) = (c.r.f64()?, c.r.f64()?, c.r.u64()?, c.r.u64()?);
    let (seeded, seed) = (c.r.u32()? != 0, c.r.u32()?);
    let seed = if seeded {
        seed
    } else {
        UNSEEDED.fetch_add(0x6d2b_79f5, Ordering::Relaxed)
    };
    let mut g = Gen {
        mt: Mt::new(seed),
        gauss: None,
    };
    let out_dt = *OUT
        .get(code)
        .ok_or_else(|| OpError::internal("random: output code"))?;
    // the dtype's rounding of a double (NumPy's astype: one rounding, no stop at f32)
    let r = |v: f64| match dt {
        Dtype::F64 => v,
        Dtype::F16 => half::f16::from_f64(v).to_f64(),
        Dtype::Bf16 => half::bf16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    };
    let n = n as usize;
    let mut out = vec![0f64; n];
    match kind {
        UNIFORM | NORMAL => {
            // x.astype(T); x *= f32 factor; x += f32 offset: each in T's compute type (f32
            // for the halves and f32, f64 for f64), rounded to T
            let c = |v: f64| common::compute_round(dt, v);
            for o in out.iter_mut() {
                let v = if kind == UNIFORM {
                    g.mt.next_f64()
                } else {
                    g.gauss()
                };
                *o = r(c(r(c(r(v) * p1)) + p2));
            }
        }
        BERNOULLI => {
            let p = c.read_f64(x.unwrap_or(0), n as u64, dt)?;
            for (o, &pi) in out.iter_mut().zip(&p) {
                *o = g.bernoulli(pi) as u8 as f64;
            }
        }
        _ => {
            let (classes, samples) = (classes as usize, samples as usize);
            let rows = n.checked_div(samples).unwrap_or(0);
            let logits = c.read_f64(x.unwrap_or(0), (rows * classes) as u64, dt)?;
            for b in 0..rows {
                let row = &logits[b * classes..(b + 1) * classes];
                let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = row.iter().map(|&v| r((v - mx).exp())).collect();
                let sum: f64 = e.iter().sum();
                let p: Vec<f64> = e.iter().map(|&v| v / sum).collect();
                for s in 0..samples {
                    out[b * samples + s] = sample(&mut g, &p) as f64;
                }
            }
        }
    }
    Ok(vec![c.write_f64(y, &out, out_dt)?])
}

/// One draw of `multinomial(1, p)`: the first class whose trial succeeds, class by class on
/// what remains (the last class if none does).
fn sample(g: &mut Gen, p: &[f64]) -> usize {
    let mut left = 1.0;
    for (j, &pj) in p.iter().enumerate().take(p.len().saturating_sub(1)) {
        let q = (pj / left).clamp(0.0, 1.0);
        // NumPy's multinomial skips a class of probability 0 without a draw
        if q > 0.0 && g.bernoulli(q) {
            return j;
        }
        left -= pj;
    }
    p.len().saturating_sub(1)
}

const CUDA: &str = r#"
struct umd_gen { unsigned int key[624]; int pos; int has_gauss; double gauss; };
__device__ double umd_gen_double(umd_gen* g) {
  double a = (double)(umd_mt_next(g->key, &g->pos) >> 5);
  double b = (double)(umd_mt_next(g->key, &g->pos) >> 6);
  return (a * 67108864.0 + b) / 9007199254740992.0;
}
__device__ void umd_gen_seed(umd_gen* g, unsigned int seeded, unsigned int seed) {
  unsigned int s = seeded ? seed : (unsigned int)clock64() * 2654435761u;
  for (int i = 0; i < 624; ++i) { g->key[i] = s; s = 1812433253u * (s ^ (s >> 30)) + (unsigned int)(i + 1); }
  g->pos = 624;
  g->has_gauss = 0;
}
__device__ double umd_gen_gauss(umd_gen* g) {
  if (g->has_gauss) { g->has_gauss = 0; return g->gauss; }
  for (;;) {
    double x1 = 2.0 * umd_gen_double(g) - 1.0, x2 = 2.0 * umd_gen_double(g) - 1.0;
    double r2 = x1 * x1 + x2 * x2;
    if (r2 < 1.0 && r2 != 0.0) {
      double f = sqrt(-2.0 * log(r2) / r2);
      g->gauss = f * x1; g->has_gauss = 1;
      return f * x2;
    }
  }
}
__device__ bool umd_gen_bernoulli(umd_gen* g, double p) {
  double u = umd_gen_double(g);
  if (p <= 0.5) return u > exp(log(1.0 - p));
  return u <= exp(log(1.0 - (1.0 - p)));
}
// a double rounded once to T (NumPy's astype): for the halves through f32 rounded to odd, which
// then rounds to T as the double would
__device__ double umd_round(double v) {
  if (sizeof(T) == 2) {
    float f = (float)v;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
    if ((double)f != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return (double)LD(ST(f));
  }
  return (double)LD(ST((C)v));
}
// T's compute type's rounding (f32 for the halves and f32, f64 for f64)
__device__ double umd_c(double v) { return (double)(C)v; }
extern "C" __global__ void random_NAME(T* __restrict__ y, unsigned long long n,
    unsigned int kind, unsigned int code, double p1, double p2, unsigned long long classes,
    unsigned long long samples, unsigned int seeded, unsigned int seed) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  umd_gen g;
  umd_gen_seed(&g, seeded, seed);
  for (unsigned long long i = 0; i < n; ++i) {
    double v = kind == 0 ? umd_gen_double(&g) : umd_gen_gauss(&g);
    y[i] = ST((C)umd_round(umd_c(umd_round(umd_c(umd_round(v) * p1)) + p2)));
  }
}
extern "C" __global__ void random_in_NAME(const T* __restrict__ x, void* __restrict__ y,
    unsigned long long n, unsigned int kind, unsigned int code, double p1, double p2,
    unsigned long long classes, unsigned long long samples, unsigned int seeded,
    unsigned int seed) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  umd_gen g;
  umd_gen_seed(&g, seeded, seed);
  if (kind == 2) {
    for (unsigned long long i = 0; i < n; ++i)
      umd_store(y, i, code, umd_gen_bernoulli(&g, (double)LD(x[i])) ? 1.0 : 0.0);
    return;
  }
  unsigned long long rows = samples ? n / samples : 0;
  for (unsigned long long b = 0; b < rows; ++b) {
    const T* row = x + b * classes;
    double mx = __longlong_as_double(0xfff0000000000000ll), sum = 0.0;
    for (unsigned long long j = 0; j < classes; ++j) mx = fmax(mx, (double)LD(row[j]));
    for (unsigned long long j = 0; j < classes; ++j) sum += umd_round(exp((double)LD(row[j]) - mx));
    for (unsigned long long s = 0; s < samples; ++s) {
      double left = 1.0;
      unsigned long long pick = classes ? classes - 1 : 0;
      for (unsigned long long j = 0; j + 1 < classes; ++j) {
        double pj = umd_round(exp((double)LD(row[j]) - mx)) / sum;
        double q = fmin(fmax(pj / left, 0.0), 1.0);
        if (q > 0.0 && umd_gen_bernoulli(&g, q)) { pick = j; break; }
        left -= pj;
      }
      umd_store(y, b * samples + s, code, (double)pick);
    }
  }
}
"#;

/// `umd_store(out, i, code, v)`: element `i` of `out` as [`OUT`]`[code]`.
fn cuda_store() -> Result<String, OpError> {
    let mut s = String::from(
        "__device__ void umd_store(void* out, unsigned long long i, unsigned int code, double v) {\n  switch (code) {\n",
    );
    for (k, dt) in OUT.iter().enumerate() {
        let ct = dtype::cuda_type(*dt)
            .ok_or_else(|| OpError::internal(format!("no CUDA type for {}", dtype::name(*dt))))?;
        let store = ct.store.replace('X', &format!("(({})v)", ct.compute));
        s.push_str(&format!(
            "    case {k}: (({}*)out)[i] = {store}; break;\n",
            ct.storage
        ));
    }
    s.push_str("  }\n}\n");
    Ok(s)
}

/// CUDA source of the random module of `dt`.
pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!(
            "{}{}{}{}",
            cuda_header(dt)?,
            crate::mt::CUDA_MT,
            cuda_store()?,
            CUDA.replace("NAME", name)
        ),
        vec![format!("random_{name}"), format!("random_in_{name}")],
    ))
}
