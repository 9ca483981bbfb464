//! AffineGrid (opset 20: `theta` (N, 2, 3) or (N, 3, 4), `size` a constant (N, C, H, W) or
//! (N, C, D, H, W), `align_corners`) and GridSample (opset 16 `bilinear`/`nearest`/`bicubic`,
//! opset 20+ `linear`/`nearest`/`cubic`; padding `zeros`/`border`/`reflection`;
//! `align_corners`; 2-D and 3-D), as the ONNX reference computes them.
//!
//! Spatial dimensions are padded to 3 in front (a 2-D op is a 3-D one with depth 1 whose depth
//! axis takes a single tap of weight 1). GridSample runs one thread per output element: each
//! dimension's coordinate is denormalised, rounded (nearest) or clamped/reflected (border,
//! reflection) when outside the borders, then the taps (1, 2 or 4 per dimension, Keys cubic with
//! α = -0.75) are summed, each tap index padded as the mode says.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, FLOATS, cuda_header, input_of, linear_launch};

fn bool_attr(req: &PlanRequestExt, name: &str) -> Result<bool, OpError> {
    match attr::int_or(&req.attributes, name, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(OpError::InvalidAttribute(format!(
            "{}: `{name}` must be 0 or 1, got {v}",
            req.op
        ))),
    }
}

/// Spatial extents padded to 3 in front.
fn pad3(sp: &[u64]) -> [u64; 3] {
    let mut a = [1u64; 3];
    a[3 - sp.len()..].copy_from_slice(sp);
    a
}

pub fn plan_affine(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["align_corners"])?;
    common::at_most_inputs(req, 2)?;
    let theta = input_of(req, 0, &FLOATS)?;
    let align = bool_attr(req, "align_corners")?;
    let size = req
        .ints(1)?
        .ok_or_else(|| OpError::shape("AffineGrid: input 1 (`size`) is required"))?;
    if size.len() != 4 && size.len() != 5 || size.iter().any(|v| *v < 0) {
        return Err(OpError::shape(format!(
            "AffineGrid: `size` must be (N, C, H, W) or (N, C, D, H, W) of non-negative values, got {size:?}"
        )));
    }
    let nd = size.len() - 2;
    let n = size[0] as u64;
    if theta.shape != [n, nd as u64, nd as u64 + 1] {
        return Err(OpError::shape(format!(
            "AffineGrid: `theta` must be [{n}, {nd}, {}] for `size` {size:?}, got {:?}",
            nd + 1,
            theta.shape
        )));
    }
    let sp: Vec<u64> = size[2..].iter().map(|v| *v as u64).collect();
    let mut out_shape = vec![n];
    out_shape.extend(&sp);
    out_shape.push(nd as u64);
    let points = shape::numel(&out_shape[..out_shape.len() - 1])?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(points)
        .u32(nd as u32)
        .u32(align as u32)
        .u64_array(&pad3(&sp));
    let name = dtype::name(theta.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("grid", out_shape, theta.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_grid_{name}"),
            format!("affine_grid_{name}"),
            points,
            p,
        )?],
        workspace_bytes: 0,
    })
}

pub fn plan_sample(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["mode", "padding_mode", "align_corners"])?;
    common::at_most_inputs(req, 2)?;
    let x = input_of(req, 0, &FLOATS)?;
    let grid = input_of(req, 1, &FLOATS)?;
    let mode = match attr::text_or(&req.attributes, "mode", "linear")?.as_str() {
        "nearest" => 0,
        "linear" | "bilinear" => 1,
        "cubic" | "bicubic" => 2,
        m => {
            return Err(OpError::InvalidAttribute(format!(
                "GridSample: `mode` {m:?} is not one of linear/bilinear, nearest, cubic/bicubic"
            )));
        }
    };
    let pad = match attr::text_or(&req.attributes, "padding_mode", "zeros")?.as_str() {
        "zeros" => 0,
        "border" => 1,
        "reflection" => 2,
        m => {
            return Err(OpError::InvalidAttribute(format!(
                "GridSample: `padding_mode` {m:?} is not one of zeros, border, reflection"
            )));
        }
    };
    let align = bool_attr(req, "align_corners")?;
    let r = x.shape.len();
    if !(4..=5).contains(&r) {
        return Err(OpError::shape(format!(
            "GridSample: X of rank {r} is not served (2-D and 3-D: rank 4 or 5)"
        )));
    }
    let nd = r - 2;
    let gs = &grid.shape;
    if gs.len() != r || gs[0] != x.shape[0] || gs[r - 1] != nd as u64 {
        return Err(OpError::shape(format!(
            "GridSample: grid must be [N, ..{nd} dims.., {nd}] for X {:?}, got {gs:?}",
            x.shape
        )));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let out_sp = &gs[1..r - 1];
    let mut out_shape = vec![n, c];
    out_shape.extend(out_sp);
    let total = shape::numel(&out_shape)?;
    if total > 0 && x.shape[2..].contains(&0) {
        return Err(OpError::shape(format!(
            "GridSample: cannot sample an empty image {:?}",
            x.shape
        )));
    }
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(total)
        .u64(c)
        .u32(nd as u32)
        .u32(mode)
        .u32(pad)
        .u32(align as u32)
        .u64_array(&pad3(&x.shape[2..]))
        .u64_array(&pad3(out_sp));
    let (xn, gn) = (dtype::name(x.dtype), dtype::name(grid.dtype));
    if x.dtype != grid.dtype {
        return Err(OpError::dtype(format!(
            "GridSample: X ({xn}) and grid ({gn}) of different dtypes are not served"
        )));
    }
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", out_shape, x.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_grid_{xn}"),
            format!("grid_sample_{xn}"),
            total,
            p,
        )?],
        workspace_bytes: 0,
    })
}

/// Keys cubic weights (α = -0.75) of the 4 taps at `x0 - 1 .. x0 + 2` for `t = x - x0`.
pub fn cubic(t: f64) -> [f64; 4] {
    let a = -0.75;
    let x = t.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

/// Reflects `x` by the near border until it is within `[lo, hi]` (the reference's `_gs_reflect`).
pub fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 { lo + r } else { hi - r }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 { hi - r } else { lo + r }
    } else {
        x
    }
}

const CUDA: &str = r#"
struct umd_d3 { unsigned long long v[3]; };

extern "C" __global__ void affine_grid_NAME(const T* __restrict__ theta, T* __restrict__ y,
    unsigned long long points, unsigned int nd, unsigned int align, umd_d3 sp) {
  UMD_FOR(p, points) {
    unsigned long long rem = p, idx[3];
    for (int d = 2; d >= 0; --d) { idx[d] = rem % sp.v[d]; rem /= sp.v[d]; }
    unsigned long long n = rem;
    C h[4]; /* x (innermost), y, z, 1 */
    for (unsigned int k = 0; k < nd; ++k) {
      int d = 2 - (int)k;
      C len = (C)sp.v[d], i = (C)idx[d];
      h[k] = align ? (sp.v[d] == 1 ? (C)-1 : (C)-1 + (C)2 * i / (len - (C)1))
                   : (C)-1 + ((C)2 * i + (C)1) / len;
    }
    h[nd] = (C)1;
    const T* th = theta + n * nd * (nd + 1);
    for (unsigned int k = 0; k < nd; ++k) {
      C acc = (C)0;
      for (unsigned int j = 0; j <= nd; ++j) acc += LD(th[k * (nd + 1) + j]) * h[j];
      y[p * nd + k] = ST(acc);
    }
  }
}

__device__ __forceinline__ C umd_reflect(C x, C lo, C hi) {
  C rng = hi - lo;
  if (rng <= (C)0) return lo;
  if (x < lo) {
    C dx = lo - x; C n = trunc(dx / rng); C r = dx - n * rng;
    return fmod(n, (C)2) == (C)0 ? lo + r : hi - r;
  }
  if (x > hi) {
    C dx = x - hi; C n = trunc(dx / rng); C r = dx - n * rng;
    return fmod(n, (C)2) == (C)0 ? hi - r : lo + r;
  }
  return x;
}

extern "C" __global__ void grid_sample_NAME(const T* __restrict__ x, const T* __restrict__ grid,
    T* __restrict__ y, unsigned long long total, unsigned long long channels, unsigned int nd,
    unsigned int mode, unsigned int pad, unsigned int align, umd_d3 in, umd_d3 out) {
  const C a = (C)-0.75;
  UMD_FOR(e, total) {
    unsigned long long rem = e, o[3];
    for (int d = 2; d >= 0; --d) { o[d] = rem % out.v[d]; rem /= out.v[d]; }
    unsigned long long c = rem % channels, n = rem / channels;
    unsigned long long opoint = (n * out.v[0] + o[0]) * out.v[1] * out.v[2] + o[1] * out.v[2] + o[2];
    long long base[3]; int taps[3]; C w[3][4];
    for (int d = 0; d < 3; ++d) {
      if (d < 3 - (int)nd) { base[d] = 0; taps[d] = 1; w[d][0] = (C)1; continue; }
      C len = (C)in.v[d];
      C g = LD(grid[opoint * nd + (2 - d)]);
      C v = align ? (g + (C)1) / (C)2 * (len - (C)1) : ((g + (C)1) * len - (C)1) / (C)2;
      if (mode == 0) v = rint(v);
      C lo = align ? (C)0 : (C)-0.5, hi = align ? len - (C)1 : len - (C)0.5;
      if (v < lo || v > hi) {
        if (pad == 1) v = v < (C)0 ? (C)0 : (v > len - (C)1 ? len - (C)1 : v);
        else if (pad == 2) v = umd_reflect(v, lo, hi);
      }
      if (mode == 0) { base[d] = (long long)v; taps[d] = 1; w[d][0] = (C)1; }
      else {
        C f = floor(v); C t = v - f;
        if (mode == 1) { base[d] = (long long)f; taps[d] = 2; w[d][0] = (C)1 - t; w[d][1] = t; }
        else {
          base[d] = (long long)f - 1; taps[d] = 4;
          C s = t < (C)0 ? -t : t;
          w[d][0] = ((a * (s + (C)1) - (C)5 * a) * (s + (C)1) + (C)8 * a) * (s + (C)1) - (C)4 * a;
          w[d][1] = ((a + (C)2) * s - (a + (C)3)) * s * s + (C)1;
          w[d][2] = ((a + (C)2) * ((C)1 - s) - (a + (C)3)) * ((C)1 - s) * ((C)1 - s) + (C)1;
          w[d][3] = ((a * ((C)2 - s) - (C)5 * a) * ((C)2 - s) + (C)8 * a) * ((C)2 - s) - (C)4 * a;
        }
      }
    }
    const T* img = x + (n * channels + c) * in.v[0] * in.v[1] * in.v[2];
    C acc = (C)0;
    for (int i0 = 0; i0 < taps[0]; ++i0)
    for (int i1 = 0; i1 < taps[1]; ++i1)
    for (int i2 = 0; i2 < taps[2]; ++i2) {
      long long idx[3] = {base[0] + i0, base[1] + i1, base[2] + i2};
      bool ok = true;
      for (int d = 0; d < 3; ++d) {
        long long len = (long long)in.v[d];
        if (idx[d] >= 0 && idx[d] < len) continue;
        if (pad == 0) { ok = false; break; }
        if (pad == 1) idx[d] = idx[d] < 0 ? 0 : len - 1;
        else {
          C lo = align ? (C)0 : (C)-0.5, hi = align ? (C)(len - 1) : (C)len - (C)0.5;
          long long r = (long long)umd_reflect((C)idx[d], lo, hi);
          idx[d] = r < 0 ? 0 : (r >= len ? len - 1 : r);
        }
      }
      if (!ok) continue;
      C px = LD(img[(idx[0] * (long long)in.v[1] + idx[1]) * (long long)in.v[2] + idx[2]]);
      acc += w[0][i0] * w[1][i1] * w[2][i2] * px;
    }
    y[e] = ST(acc);
  }
}
"#;

pub fn cuda(dt: umd_sdk::Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("affine_grid_{name}"), format!("grid_sample_{name}")],
    ))
}

pub fn run_cpu(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    if call.entry_point.starts_with("affine_grid_") {
        run_affine(call, dt)
    } else {
        run_sample(call, dt)
    }
}

fn run_affine(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (th, y) = (c.r.ptr()?, c.r.ptr()?);
    let (points, nd, align) = (c.r.u64()?, c.r.u32()? as usize, c.r.u32()? != 0);
    let sp = c.r.u64_array::<3>()?;
    if !(2..=3).contains(&nd) {
        return Err(OpError::internal("AffineGrid: bad parameter block"));
    }
    let per = shape::numel(&sp)?;
    let n = points.checked_div(per).unwrap_or(0);
    let theta = c.read_f64(th, n * (nd * (nd + 1)) as u64, dt)?;
    let r = |v: f64| common::compute_round(dt, v);
    let mut out = Vec::with_capacity(points as usize * nd);
    for p in 0..points {
        let (mut rem, mut idx) = (p, [0u64; 3]);
        for d in (0..3).rev() {
            idx[d] = rem % sp[d];
            rem /= sp[d];
        }
        let mut h = [0.0f64; 4];
        for (k, hk) in h.iter_mut().enumerate().take(nd) {
            let d = 2 - k;
            let (len, i) = (sp[d] as f64, idx[d] as f64);
            *hk = r(if align {
                if sp[d] == 1 {
                    -1.0
                } else {
                    -1.0 + r(r(2.0 * i) / r(len - 1.0))
                }
            } else {
                -1.0 + r(r(2.0 * i + 1.0) / len)
            });
        }
        h[nd] = 1.0;
        let t = &theta[rem as usize * nd * (nd + 1)..];
        for k in 0..nd {
            let mut acc = 0.0;
            for j in 0..=nd {
                acc = r(acc + r(t[k * (nd + 1) + j] * h[j]));
            }
            out.push(acc);
        }
    }
    Ok(vec![c.write_f64(y, &out, dt)?])
}

fn run_sample(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (xb, gb, yb) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let (total, channels) = (c.r.u64()?, c.r.u64()?);
    let (nd, mode, pad, align) = (c.r.u32()? as usize, c.r.u32()?, c.r.u32()?, c.r.u32()? != 0);
    let (inn, out) = (c.r.u64_array::<3>()?, c.r.u64_array::<3>()?);
    if !(1..=3).contains(&nd) || mode > 2 || pad > 2 {
        return Err(OpError::internal("GridSample: bad parameter block"));
    }
    let (in_pts, out_pts) = (shape::numel(&inn)?, shape::numel(&out)?);
    let nc = total.checked_div(out_pts).unwrap_or(0);
    let n = nc.checked_div(channels).unwrap_or(0);
    let xs = c.read_f64(xb, nc * in_pts, dt)?;
    let gs = c.read_f64(gb, n * out_pts * nd as u64, dt)?;
    let r = |v: f64| common::compute_round(dt, v);
    let mut ys = Vec::with_capacity(total as usize);
    for e in 0..total {
        let (mut rem, mut o) = (e, [0u64; 3]);
        for d in (0..3).rev() {
            o[d] = rem % out[d];
            rem /= out[d];
        }
        let (ch, b) = (rem % channels, rem / channels);
        let opoint = (b * out[0] + o[0]) * out[1] * out[2] + o[1] * out[2] + o[2];
        let mut base = [0i64; 3];
        let mut taps = [1usize; 3];
        let mut w = [[1.0f64, 0.0, 0.0, 0.0]; 3];
        for d in 3 - nd..3 {
            let len = inn[d] as f64;
            let g = gs[(opoint * nd as u64 + (2 - d) as u64) as usize];
            let mut v = r(if align {
                r(r(g + 1.0) / 2.0) * (len - 1.0)
            } else {
                r(r(r(g + 1.0) * len) - 1.0) / 2.0
            });
            if mode == 0 {
                v = v.round_ties_even();
            }
            let (lo, hi) = if align {
                (0.0, len - 1.0)
            } else {
                (-0.5, len - 0.5)
            };
            if v < lo || v > hi {
                if pad == 1 {
                    v = v.clamp(0.0, len - 1.0);
                } else if pad == 2 {
                    v = r(reflect(v, lo, hi));
                }
            }
            if mode == 0 {
                base[d] = v as i64;
            } else {
                let f = v.floor();
                let t = r(v - f);
                if mode == 1 {
                    base[d] = f as i64;
                    taps[d] = 2;
                    w[d] = [r(1.0 - t), t, 0.0, 0.0];
                } else {
                    base[d] = f as i64 - 1;
                    taps[d] = 4;
                    w[d] = cubic(t).map(r);
                }
            }
        }
        let img = &xs[((b * channels + ch) * in_pts) as usize..];
        let mut acc = 0.0;
        for i0 in 0..taps[0] {
            for i1 in 0..taps[1] {
                for i2 in 0..taps[2] {
                    let mut idx = [
                        base[0] + i0 as i64,
                        base[1] + i1 as i64,
                        base[2] + i2 as i64,
                    ];
                    let mut ok = true;
                    for d in 0..3 {
                        let len = inn[d] as i64;
                        if (0..len).contains(&idx[d]) {
                            continue;
                        }
                        match pad {
                            0 => ok = false,
                            1 => idx[d] = idx[d].clamp(0, len - 1),
                            _ => {
                                let (lo, hi) = if align {
                                    (0.0, (len - 1) as f64)
                                } else {
                                    (-0.5, len as f64 - 0.5)
                                };
                                idx[d] = (reflect(idx[d] as f64, lo, hi) as i64).clamp(0, len - 1);
                            }
                        }
                    }
                    if !ok {
                        continue;
                    }
                    let px =
                        img[((idx[0] * inn[1] as i64 + idx[1]) * inn[2] as i64 + idx[2]) as usize];
                    acc = r(acc + r(r(r(w[0][i0] * w[1][i1]) * w[2][i2]) * px));
                }
            }
        }
        ys.push(acc);
    }
    Ok(vec![c.write_f64(yb, &ys, dt)?])
}
