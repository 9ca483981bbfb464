//! MelWeightMatrix (opset 17): the inputs `num_mel_bins`, `dft_length`, `sample_rate`,
//! `lower_edge_hertz`, `upper_edge_hertz` are values needed when planning; `output_datatype`
//! (default float). Output `[dft_length / 2 + 1, num_mel_bins]`.
//!
//! The plan computes the mel edges as the ONNX reference does (`2595 · log1p(hz / 700)`, in
//! f32 for f32 inputs, divided by `ln 10` in f64); each thread computes its element's three
//! triangle points `floor((dft_length + 1) · 700 · expm1(mel / 2595 · ln 10) / sample_rate)` in
//! f64 (CUDA and CPU alike) and the triangle's value there.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common::{self, FLOATS, at_most_inputs, cuda_header, linear_launch};
use crate::window::OUT;

/// The value needed of input `i` (`what`), a one-element tensor.
fn scalar(req: &PlanRequestExt, i: usize, what: &str) -> Result<f64, OpError> {
    match req.floats(i)? {
        Some(v) if v.len() == 1 => Ok(v[0]),
        Some(_) => Err(OpError::shape(format!(
            "MelWeightMatrix: `{what}` must be a scalar"
        ))),
        None => Err(OpError::shape(format!(
            "MelWeightMatrix: input {i} (`{what}`) is required"
        ))),
    }
}

/// `2595 · log1p(hz / 700) / ln 10` as the reference computes it for an input of `dt`.
pub fn mel(hz: f64, dt: Dtype) -> f64 {
    let m = if dt == Dtype::F64 {
        2595.0 * (hz / 700.0).ln_1p()
    } else {
        (2595f32 * (hz as f32 / 700f32).ln_1p()) as f64
    };
    m / std::f64::consts::LN_10
}

/// Triangle point `k`.
pub fn point(k: u64, low: f64, step: f64, dft1: f64, sr: f64) -> i64 {
    let f = 700.0 * ((k as f64 * step + low) / 2595.0 * std::f64::consts::LN_10).exp_m1();
    (dft1 * f / sr).floor() as i64
}

/// The weight at spectrogram bin `j` of mel bin `i`.
pub fn weight(j: i64, i: u64, low: f64, step: f64, dft1: f64, sr: f64) -> f64 {
    let (l, c, h) = (
        point(i, low, step, dft1, sr),
        point(i + 1, low, step, dft1, sr),
        point(i + 2, low, step, dft1, sr),
    );
    if h > c && j >= c && j < h {
        (h - j) as f64 / (h - c) as f64
    } else if c == l {
        if j == c { 1.0 } else { 0.0 }
    } else if j >= l && j <= c {
        (j - l) as f64 / (c - l) as f64
    } else {
        0.0
    }
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["output_datatype"])?;
    at_most_inputs(req, 5)?;
    let bins = scalar(req, 0, "num_mel_bins")?;
    let dft = scalar(req, 1, "dft_length")?;
    let sr = scalar(req, 2, "sample_rate")?;
    let lo = scalar(req, 3, "lower_edge_hertz")?;
    let hi = scalar(req, 4, "upper_edge_hertz")?;
    for i in 0..3 {
        let d = req.required(i)?.dtype;
        if !matches!(d, Dtype::I32 | Dtype::I64) {
            return Err(OpError::dtype(format!(
                "MelWeightMatrix: input {i} is {}; i32 and i64 are served",
                dtype::name(d)
            )));
        }
    }
    let hz_dt = req.required(3)?.dtype;
    for i in 3..5 {
        let d = req.required(i)?.dtype;
        if !FLOATS.contains(&d) {
            return Err(OpError::dtype(format!(
                "MelWeightMatrix: input {i} is {}; {} are served",
                dtype::name(d),
                common::names(&FLOATS)
            )));
        }
    }
    if bins < 0.0 || dft < 0.0 || sr <= 0.0 {
        return Err(OpError::shape(format!(
            "MelWeightMatrix: num_mel_bins {bins} and dft_length {dft} must be ≥ 0, sample_rate \
             {sr} positive"
        )));
    }
    let odt_n = attr::int_or(&req.attributes, "output_datatype", 1)?;
    let odt = common::onnx_dtype(odt_n)
        .filter(|d| OUT.contains(d))
        .ok_or_else(|| {
            OpError::InvalidAttribute(format!(
                "MelWeightMatrix: `output_datatype` = {odt_n} is not served (served: {})",
                common::names(&OUT)
            ))
        })?;
    let (nmel, nspec) = (bins as u64, dft as u64 / 2 + 1);
    let shape = vec![nspec, nmel];
    let n = umd_sdk::shape::numel(&shape)?;
    umd_sdk::shape::byte_size(&shape, odt)?;
    let low = mel(lo, hz_dt);
    let step = (mel(hi, req.required(4)?.dtype) - low) / (nmel + 2) as f64;
    let mut p = ParamPacker::new();
    p.ptr(req.output_binding(0), Access::Write)
        .u64(nmel)
        .u64(n)
        .f64(low)
        .f64(step)
        .f64(dft + 1.0)
        .f64(sr);
    let name = dtype::name(odt);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("output", shape, odt)],
        launches: vec![linear_launch(
            req,
            format!("misc_mel_{name}"),
            format!("mel_{name}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
__device__ long long umd_mel_point(unsigned long long k, double low, double step, double dft1,
    double sr) {
  double f = 700.0 * expm1(((double)k * step + low) / 2595.0 * 2.302585092994046);
  return (long long)floor(dft1 * f / sr);
}
extern "C" __global__ void mel_NAME(T* __restrict__ y, unsigned long long nmel,
    unsigned long long n, double low, double step, double dft1, double sr) {
  UMD_FOR(e, n) {
    long long j = (long long)(e / nmel);
    unsigned long long i = e % nmel;
    long long l = umd_mel_point(i, low, step, dft1, sr);
    long long c = umd_mel_point(i + 1, low, step, dft1, sr);
    long long h = umd_mel_point(i + 2, low, step, dft1, sr);
    double v = 0.0;
    if (h > c && j >= c && j < h) v = (double)(h - j) / (double)(h - c);
    else if (c == l) v = j == c ? 1.0 : 0.0;
    else if (j >= l && j <= c) v = (double)(j - l) / (double)(c - l);
    y[e] = ST((C)v);
  }
}
"#;

pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("mel_{name}")],
    ))
}

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (y, nmel, n) = (c.r.ptr()?, c.r.u64()?, c.r.u64()?);
    let (low, step, dft1, sr) = (c.r.f64()?, c.r.f64()?, c.r.f64()?, c.r.f64()?);
    let vals: Vec<f64> = (0..n)
        .map(|e| {
            let v = weight((e / nmel) as i64, e % nmel, low, step, dft1, sr);
            if FLOATS.contains(&dt) { v } else { v.trunc() }
        })
        .collect();
    Ok(vec![c.write_f64(y, &vals, dt)?])
}
