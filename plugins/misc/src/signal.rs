//! DFT (opset 17/19: `axis` attribute, default 1; opset 20: `axis` input 2, default -2;
//! `dft_length` input 1; `inverse`; `onesided`): a direct O(n²) transform, one thread per
//! output element, computed in f64 on every dtype (twiddles from `j·k mod L`, so large
//! indices lose nothing) as NumPy's `fft`, `ifft`, `rfft`-style one-sided output and `irfft`
//! (inverse and one-sided: Hermitian input, real output) compute it.
//!
//! On the CPU every transform runs [`crate::fft`] instead, O(n log n) at any length: in f64
//! (within f64 rounding of the exact transform, as numpy's forward `fft` of float32 data —
//! numpy 2.4's `fft` of complex64 equals its complex128 transform rounded, checked at 74
//! lengths), but a two-sided inverse of f32, f16 or bf16 data whose length has no prime factor
//! above 5 in f32 with every value formed as numpy's `ifft` of complex64 data forms it (the
//! ONNX reference's expected data carries numpy's f32 rounding, up to 1.5e-6 where the exact
//! result is 0). CUDA keeps the exact direct transform.
//!
//! STFT (opset 17): `frame_step` and `frame_length` constant inputs, `window` read by the
//! kernel, `onesided`; the same transform of each windowed frame (on the CPU the f64 one of
//! [`crate::fft`]).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, FLOATS, cuda_header, input_of, linear_launch};
use crate::fft;
use umd_sdk::Dtype;

fn one_int(req: &PlanRequestExt, i: usize, what: &str) -> Result<Option<i64>, OpError> {
    match req.ints(i)? {
        None => Ok(None),
        Some(v) if v.len() == 1 => Ok(Some(v[0])),
        Some(v) => Err(OpError::shape(format!(
            "DFT: `{what}` (input {i}) must hold one value, got {}",
            v.len()
        ))),
    }
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "inverse", "onesided"])?;
    common::at_most_inputs(req, 3)?;
    let x = input_of(req, 0, &FLOATS)?;
    let r = x.shape.len();
    if r < 2 || !matches!(x.shape[r - 1], 1 | 2) {
        return Err(OpError::shape(format!(
            "DFT: the input's last dimension must be 1 (real) or 2 (complex), got {:?}",
            x.shape
        )));
    }
    let axis = match (attr::has(&req.attributes, "axis"), one_int(req, 2, "axis")?) {
        (true, Some(_)) => {
            return Err(OpError::InvalidAttribute(
                "DFT: `axis` given both as an attribute and as input 2".into(),
            ));
        }
        (true, None) => attr::int(&req.attributes, "axis")?,
        (false, Some(a)) => a,
        (false, None) => {
            if req.opset_or(20) >= 20 {
                -2
            } else {
                1
            }
        }
    };
    let ri = r as i64;
    if axis < -ri || axis >= ri {
        return Err(OpError::InvalidAttribute(format!(
            "DFT: `axis` {axis} is out of range for rank {r}"
        )));
    }
    let axis = axis.rem_euclid(ri) as usize;
    if axis == r - 1 {
        return Err(OpError::InvalidAttribute(
            "DFT: `axis` cannot be the last (real/imaginary) dimension".into(),
        ));
    }
    let bool_attr = |n: &str| -> Result<bool, OpError> {
        match attr::int_or(&req.attributes, n, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(OpError::InvalidAttribute(format!(
                "DFT: `{n}` must be 0 or 1, got {v}"
            ))),
        }
    };
    let (inverse, onesided) = (bool_attr("inverse")?, bool_attr("onesided")?);
    let n_in = x.shape[axis];
    let len = match one_int(req, 1, "dft_length")? {
        Some(l) if l < 1 => {
            return Err(OpError::shape(format!(
                "DFT: `dft_length` must be ≥ 1, got {l}"
            )));
        }
        Some(l) => l as u64,
        None if inverse && onesided => 2 * n_in.saturating_sub(1),
        None => n_in,
    };
    let (mode, n_out, c_out) = match (inverse, onesided) {
        (false, false) => (0u32, len, 2u64),
        (false, true) => (0, len / 2 + 1, 2),
        (true, false) => (1, len, 2),
        (true, true) => (2, len, 1),
    };
    let outer = shape::numel(&x.shape[..axis])?;
    let inner = shape::numel(&x.shape[axis + 1..r - 1])?;
    let mut out_shape = x.shape.clone();
    out_shape[axis] = n_out;
    out_shape[r - 1] = c_out;
    let total = shape::numel(&out_shape[..r - 1])?;
    if total > 0 && len == 0 {
        return Err(OpError::shape("DFT: a transform of length 0".to_string()));
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(total)
        .u64(outer)
        .u64(inner)
        .u64(n_in)
        .u64(len)
        .u64(n_out)
        .u32(x.shape[r - 1] as u32)
        .u32(mode);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out_shape, x.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_dft_{name}"),
            format!("dft_{name}"),
            total,
            p,
        )?],
        workspace_bytes: 0,
    })
}

pub fn plan_stft(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["onesided"])?;
    common::at_most_inputs(req, 4)?;
    let x = input_of(req, 0, &FLOATS)?;
    let s = &x.shape;
    if s.len() != 3 || !matches!(s[2], 1 | 2) {
        return Err(OpError::shape(format!(
            "STFT: the signal must be [batch, length, 1 or 2], got {s:?}"
        )));
    }
    let step = one_int(req, 1, "frame_step")?
        .ok_or_else(|| OpError::shape("STFT: input 1 (`frame_step`) is required"))?;
    let window = match req.input(2) {
        Some(w) if w.dtype != x.dtype || w.shape.len() != 1 => {
            return Err(OpError::shape(format!(
                "STFT: the window must be 1-D of the signal's dtype, got {:?} {}",
                w.shape,
                dtype::name(w.dtype)
            )));
        }
        w => w.map(|w| w.shape[0]),
    };
    let fl = match (one_int(req, 3, "frame_length")?, window) {
        (Some(l), Some(w)) if l as u64 != w => {
            return Err(OpError::shape(format!(
                "STFT: `frame_length` {l} differs from the window's length {w}"
            )));
        }
        (Some(l), _) => l,
        (None, Some(w)) => w as i64,
        (None, None) => {
            return Err(OpError::shape("STFT: give `frame_length` or a window"));
        }
    };
    if step < 1 || fl < 1 || fl as u64 > s[1] {
        return Err(OpError::shape(format!(
            "STFT: `frame_step` ({step}) and `frame_length` ({fl}) must be ≥ 1, the frame within the signal ({})",
            s[1]
        )));
    }
    let onesided = match attr::int_or(&req.attributes, "onesided", 1)? {
        0 => false,
        1 => true,
        v => {
            return Err(OpError::InvalidAttribute(format!(
                "STFT: `onesided` must be 0 or 1, got {v}"
            )));
        }
    };
    let (fl, step) = (fl as u64, step as u64);
    let frames = 1 + (s[1] - fl) / step;
    let bins = if onesided { fl / 2 + 1 } else { fl };
    let out = vec![s[0], frames, bins, 2];
    let total = shape::numel(&out[..3])?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.binding(2).unwrap_or(0), Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(total)
        .u64(s[1])
        .u64(frames)
        .u64(bins)
        .u64(fl)
        .u64(step)
        .u32(s[2] as u32)
        .u32(window.is_some() as u32);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("output", out, x.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_dft_{name}"),
            format!("stft_{name}"),
            total,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
extern "C" __global__ void stft_NAME(const T* __restrict__ x, const T* __restrict__ win,
    T* __restrict__ y, unsigned long long total, unsigned long long len,
    unsigned long long frames, unsigned long long bins, unsigned long long fl,
    unsigned long long step, unsigned int c_in, unsigned int has_win) {
  UMD_FOR(e, total) {
    unsigned long long k = e % bins, f = (e / bins) % frames, b = e / bins / frames;
    const T* line = x + (b * len + f * step) * c_in;
    double re = 0.0, im = 0.0;
    for (unsigned long long j = 0; j < fl; ++j) {
      double w = has_win ? (double)LD(win[j]) : 1.0;
      double xr = (double)LD(line[j * c_in]) * w;
      double xi = c_in == 2 ? (double)LD(line[j * c_in + 1]) * w : 0.0;
      double s, c;
      sincospi(2.0 * (double)((j * k) % fl) / (double)fl, &s, &c);
      re += xr * c + xi * s;
      im += xi * c - xr * s;
    }
    y[e * 2] = ST((C)re);
    y[e * 2 + 1] = ST((C)im);
  }
}
extern "C" __global__ void dft_NAME(const T* __restrict__ x, T* __restrict__ y,
    unsigned long long total, unsigned long long outer, unsigned long long inner,
    unsigned long long n_in, unsigned long long L, unsigned long long n_out, unsigned int c_in,
    unsigned int mode) {
  UMD_FOR(e, total) {
    unsigned long long i = e % inner, k = (e / inner) % n_out, o = e / inner / n_out;
    const T* line = x + o * n_in * inner * c_in + i * c_in;
    double re = 0.0, im = 0.0;
    if (mode < 2) {
      double sign = mode == 0 ? -1.0 : 1.0;
      unsigned long long n = n_in < L ? n_in : L;
      for (unsigned long long j = 0; j < n; ++j) {
        double xr = (double)LD(line[j * inner * c_in]);
        double xi = c_in == 2 ? (double)LD(line[j * inner * c_in + 1]) : 0.0;
        double s, c;
        sincospi(2.0 * (double)((j * k) % L) / (double)L, &s, &c);
        s *= sign;
        re += xr * c - xi * s;
        im += xr * s + xi * c;
      }
      if (mode == 1) { re /= (double)L; im /= (double)L; }
      y[e * 2] = ST((C)re);
      y[e * 2 + 1] = ST((C)im);
    } else {
      unsigned long long nf = n_in < L / 2 + 1 ? n_in : L / 2 + 1;
      for (unsigned long long j = 0; j < L; ++j) {
        unsigned long long src = j <= L / 2 ? j : L - j;
        if (src >= nf) continue;
        double xr = (double)LD(line[src * inner * c_in]);
        double xi = c_in == 2 ? (double)LD(line[src * inner * c_in + 1]) : 0.0;
        if (j > L / 2) xi = -xi;
        double s, c;
        sincospi(2.0 * (double)((j * k) % L) / (double)L, &s, &c);
        re += xr * c - xi * s;
      }
      y[e] = ST((C)(re / (double)L));
    }
  }
}
"#;

pub fn cuda(dt: umd_sdk::Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("dft_{name}"), format!("stft_{name}")],
    ))
}

/// (sin, cos) of π·`v`, exact at the multiples of 1/2 (as CUDA's `sincospi`).
pub(crate) fn sincospi(v: f64) -> (f64, f64) {
    let twice = v * 2.0;
    if twice == twice.round() {
        return match (twice as i64).rem_euclid(4) {
            0 => (0.0, 1.0),
            1 => (1.0, 0.0),
            2 => (0.0, -1.0),
            _ => (-1.0, 0.0),
        };
    }
    (std::f64::consts::PI * v).sin_cos()
}

fn run_stft(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (xb, wb, yb) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let (total, len, frames, bins) = (c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.u64()?);
    let (fl, step, c_in, has_win) = (c.r.u64()?, c.r.u64()?, c.r.u32()? as u64, c.r.u32()? != 0);
    let bad = || OpError::internal("STFT: bad parameter block");
    let us = |v: u64| usize::try_from(v).map_err(|_| bad());
    let per_batch = frames.checked_mul(bins).ok_or_else(bad)?;
    let batch = total / per_batch.max(1);
    // every frame inside the signal, the output exactly batch × frames × bins
    let last_end = frames
        .checked_sub(1)
        .map(|f| f.checked_mul(step).and_then(|v| v.checked_add(fl)))
        .unwrap_or(Some(0));
    if fl == 0
        || !(1..=2).contains(&c_in)
        || bins > fl
        || batch.checked_mul(per_batch) != Some(total)
        || last_end.is_none_or(|end| end > len)
    {
        return Err(bad());
    }
    let n_x = [batch, len, c_in]
        .into_iter()
        .try_fold(1u64, |a, b| a.checked_mul(b))
        .ok_or_else(bad)?;
    let xs = c.read_f64(xb, n_x, dt)?;
    let win = if has_win {
        c.read_f64(wb, fl, dt)?
    } else {
        vec![1.0; us(fl)?]
    };
    let mut ys = vec![0.0; us(total.checked_mul(2).ok_or_else(bad)?)?];
    if total == 0 {
        return Ok(vec![c.write_f64(yb, &ys, dt)?]);
    }
    let (len, step, fl, c_in) = (us(len)?, us(step)?, us(fl)?, us(c_in)?);
    let (frames, bins) = (us(frames)?, us(bins)?);
    let mut plan = fft::AnyPlan::new(fl, true);
    let mut line = vec![fft::Cx::<f64>::default(); fl];
    for b in 0..batch as usize {
        for f in 0..frames {
            let base = (b * len + f * step) * c_in;
            for (j, (v, w)) in line.iter_mut().zip(&win).enumerate() {
                let at = base + j * c_in;
                let im = if c_in == 2 { xs[at + 1] } else { 0.0 };
                *v = fft::Cx {
                    r: xs[at] * w,
                    i: im * w,
                };
            }
            plan.run(&mut line, 1.0);
            let out = (b * frames + f) * bins;
            for (k, v) in line[..bins].iter().enumerate() {
                ys[(out + k) * 2] = v.r;
                ys[(out + k) * 2 + 1] = v.i;
            }
        }
    }
    Ok(vec![c.write_f64(yb, &ys, dt)?])
}

/// A DFT's lines: `outer × inner` of `n_in` input points (`c_in` values each), transformed at
/// length `len`, the first `n_out` points kept.
#[derive(Clone, Copy)]
struct Dims {
    outer: usize,
    inner: usize,
    n_in: usize,
    len: usize,
    n_out: usize,
    c_in: usize,
}

impl Dims {
    /// Input point `j` of line `(o, i)` as (re, im).
    fn at(&self, xs: &[f64], o: usize, i: usize, j: usize) -> (f64, f64) {
        let b = ((o * self.n_in + j) * self.inner + i) * self.c_in;
        (xs[b], if self.c_in == 2 { xs[b + 1] } else { 0.0 })
    }
}

/// Every line's transform ([`fft`], O(n log n)), as the module doc says: `mode` 0 forward, 1
/// inverse, 2 inverse of a one-sided spectrum (its Hermitian extension; real output).
fn transform_lines(xs: &[f64], ys: &mut [f64], d: Dims, mode: u32, dt: Dtype) {
    let len = d.len;
    if mode == 1
        && matches!(dt, Dtype::F32 | Dtype::F16 | Dtype::Bf16)
        && let Some(mut plan) = fft::Plan::<f32>::new(len)
    {
        let fct = 1.0 / len as f32;
        let mut line = vec![fft::Cx::<f32>::default(); len];
        let of = |x: f64| x as f32;
        return each_line(xs, ys, d, &mut line, of, |l| plan.run(l, false, fct));
    }
    let mut plan = fft::AnyPlan::new(len, mode == 0);
    let fct = if mode == 0 { 1.0 } else { 1.0 / len as f64 };
    let mut line = vec![fft::Cx::<f64>::default(); len];
    if mode < 2 {
        return each_line(xs, ys, d, &mut line, |x| x, |l| plan.run(l, fct));
    }
    // one-sided: point j is X_j for j <= len/2, else conj(X_{len-j}); points past n_in are 0
    let nf = d.n_in.min(len / 2 + 1);
    for o in 0..d.outer {
        for i in 0..d.inner {
            for (j, v) in line.iter_mut().enumerate() {
                let src = if j <= len / 2 { j } else { len - j };
                *v = if src < nf {
                    let (re, im) = d.at(xs, o, i, src);
                    fft::Cx {
                        r: re,
                        i: if j > len / 2 { -im } else { im },
                    }
                } else {
                    fft::Cx::default()
                };
            }
            plan.run(&mut line, fct);
            for (k, v) in line.iter().enumerate() {
                ys[(o * len + k) * d.inner + i] = v.r;
            }
        }
    }
}

/// Gathers each line (zero-padded or cut to `len`), transforms it, keeps its first `n_out`
/// points as (re, im).
fn each_line<T: fft::Float>(
    xs: &[f64],
    ys: &mut [f64],
    d: Dims,
    line: &mut [fft::Cx<T>],
    of: impl Fn(f64) -> T,
    mut run: impl FnMut(&mut [fft::Cx<T>]),
) {
    for o in 0..d.outer {
        for i in 0..d.inner {
            for (j, v) in line.iter_mut().enumerate() {
                *v = if j < d.n_in {
                    let (re, im) = d.at(xs, o, i, j);
                    fft::Cx {
                        r: of(re),
                        i: of(im),
                    }
                } else {
                    fft::Cx::default()
                };
            }
            run(line);
            for (k, v) in line[..d.n_out].iter().enumerate() {
                let e = (o * d.n_out + k) * d.inner + i;
                ys[e * 2] = v.r.into();
                ys[e * 2 + 1] = v.i.into();
            }
        }
    }
}

pub fn run_cpu(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    if call.entry_point.starts_with("stft_") {
        return run_stft(call, dt);
    }
    let mut c = common::Call::new(call);
    let (xb, yb) = (c.r.ptr()?, c.r.ptr()?);
    let (total, outer, inner) = (c.r.u64()?, c.r.u64()?, c.r.u64()?);
    let (n_in, len, n_out) = (c.r.u64()?, c.r.u64()?, c.r.u64()?);
    let (c_in, mode) = (c.r.u32()? as u64, c.r.u32()?);
    let bad = || OpError::internal("DFT: bad parameter block");
    let us = |v: u64| usize::try_from(v).map_err(|_| bad());
    let n_out_ok = if mode == 2 {
        n_out == len
    } else {
        n_out <= len
    };
    if !(1..=2).contains(&c_in)
        || mode > 2
        || (total > 0 && len == 0)
        || !n_out_ok
        || outer.checked_mul(n_out).and_then(|v| v.checked_mul(inner)) != Some(total)
    {
        return Err(bad());
    }
    let n_x = [outer, n_in, inner, c_in]
        .into_iter()
        .try_fold(1u64, |a, b| a.checked_mul(b))
        .ok_or_else(bad)?;
    let xs = c.read_f64(xb, n_x, dt)?;
    let c_out = if mode == 2 { 1 } else { 2 };
    let mut ys = vec![0.0; us(total.checked_mul(c_out).ok_or_else(bad)?)?];
    let dims = Dims {
        outer: us(outer)?,
        inner: us(inner)?,
        n_in: us(n_in)?,
        len: us(len)?,
        n_out: us(n_out)?,
        c_in: us(c_in)?,
    };
    if total > 0 {
        transform_lines(&xs, &mut ys, dims, mode, dt);
    }
    Ok(vec![c.write_f64(yb, &ys, dt)?])
}
