//! RoiAlign (opset 10 and 16): `rois` and `batch_indices` read by the kernel; attributes
//! `coordinate_transformation_mode` (`half_pixel`, the opset-16 default, or `output_half_pixel`,
//! opset 10's behaviour), `mode` (`avg`/`max`, max as the reference takes it: the largest of the
//! four weighted corners, then the largest over samples), `output_height`, `output_width`,
//! `sampling_ratio` (0: adaptive, `ceil(roi extent / output extent)`), `spatial_scale`. One
//! thread per output element; coordinates and weights in f64 as the reference computes them.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, FLOATS, cuda_header, input_of, linear_launch};

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(
        &req.attributes,
        &[
            "coordinate_transformation_mode",
            "mode",
            "output_height",
            "output_width",
            "sampling_ratio",
            "spatial_scale",
        ],
    )?;
    common::at_most_inputs(req, 3)?;
    let x = input_of(req, 0, &FLOATS)?;
    let rois = input_of(req, 1, &[x.dtype])?;
    let bi = input_of(req, 2, &[Dtype::I64])?;
    if x.shape.len() != 4 {
        return Err(OpError::shape(format!(
            "RoiAlign: X must be [N, C, H, W], got {:?}",
            x.shape
        )));
    }
    let nr = bi.shape.first().copied().unwrap_or(0);
    if rois.shape != [nr, 4] || bi.shape.len() != 1 {
        return Err(OpError::shape(format!(
            "RoiAlign: rois must be [num_rois, 4] and batch_indices [num_rois], got {:?} and {:?}",
            rois.shape, bi.shape
        )));
    }
    let default_ctm = if req.opset_or(16) >= 16 {
        "half_pixel"
    } else {
        "output_half_pixel"
    };
    let half = match attr::text_or(
        &req.attributes,
        "coordinate_transformation_mode",
        default_ctm,
    )?
    .as_str()
    {
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => {
            return Err(OpError::InvalidAttribute(format!(
                "RoiAlign: `coordinate_transformation_mode` {m:?} is not half_pixel or output_half_pixel"
            )));
        }
    };
    let max = match attr::text_or(&req.attributes, "mode", "avg")?
        .to_ascii_lowercase()
        .as_str()
    {
        "avg" => false,
        "max" => true,
        m => {
            return Err(OpError::InvalidAttribute(format!(
                "RoiAlign: `mode` {m:?} is not avg or max"
            )));
        }
    };
    let oh = attr::int_or(&req.attributes, "output_height", 1)?;
    let ow = attr::int_or(&req.attributes, "output_width", 1)?;
    let sr = attr::int_or(&req.attributes, "sampling_ratio", 0)?;
    if oh < 1 || ow < 1 || sr < 0 {
        return Err(OpError::InvalidAttribute(format!(
            "RoiAlign: `output_height` ({oh}) and `output_width` ({ow}) must be ≥ 1, `sampling_ratio` ({sr}) ≥ 0"
        )));
    }
    let scale = attr::float_or(&req.attributes, "spatial_scale", 1.0)?;
    let out = vec![nr, x.shape[1], oh as u64, ow as u64];
    let total = shape::numel(&out)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(2, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(total)
        .u64(x.shape[0])
        .u64(x.shape[1])
        .u64(x.shape[2])
        .u64(x.shape[3])
        .u64(oh as u64)
        .u64(ow as u64)
        .u64(sr as u64)
        .f64(scale)
        .u32(half as u32)
        .u32(max as u32);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", out, x.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_roi_{name}"),
            format!("roi_align_{name}"),
            total,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
extern "C" __global__ void roi_align_NAME(const T* __restrict__ x, const T* __restrict__ rois,
    const long long* __restrict__ bidx, T* __restrict__ y, unsigned long long total,
    unsigned long long N, unsigned long long CH, unsigned long long H, unsigned long long W,
    unsigned long long PH, unsigned long long PW, unsigned long long sr, double scale,
    unsigned int half, unsigned int is_max) {
  UMD_FOR(e, total) {
    unsigned long long pw = e % PW, ph = (e / PW) % PH, c = (e / PW / PH) % CH, n = e / PW / PH / CH;
    double off = half ? 0.5 : 0.0;
    double sw = (double)LD(rois[n * 4]) * scale - off, sh = (double)LD(rois[n * 4 + 1]) * scale - off;
    double ew = (double)LD(rois[n * 4 + 2]) * scale - off, eh = (double)LD(rois[n * 4 + 3]) * scale - off;
    double rw = ew - sw, rh = eh - sh;
    if (!half) { rw = rw > 1.0 ? rw : 1.0; rh = rh > 1.0 ? rh : 1.0; }
    double bh = rh / (double)PH, bw = rw / (double)PW;
    long long gh = sr > 0 ? (long long)sr : (long long)ceil(rh / (double)PH);
    long long gw = sr > 0 ? (long long)sr : (long long)ceil(rw / (double)PW);
    double count = (double)(gh * gw > 1 ? gh * gw : 1);
    long long b = bidx[n];
    if (b < 0 || (unsigned long long)b >= N) { y[e] = ST((C)0); continue; }
    const T* img = x + ((unsigned long long)b * CH + c) * H * W;
    double acc = 0.0; bool first = true;
    for (long long iy = 0; iy < gh; ++iy) {
      double yy = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
      for (long long ix = 0; ix < gw; ++ix) {
        double xx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
        double v1 = 0, v2 = 0, v3 = 0, v4 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0;
        if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
          double yv = yy > 0 ? yy : 0, xv = xx > 0 ? xx : 0;
          long long yl = (long long)yv, xl = (long long)xv, yh, xh;
          if (yl >= (long long)H - 1) { yh = yl = (long long)H - 1; yv = (double)yl; } else yh = yl + 1;
          if (xl >= (long long)W - 1) { xh = xl = (long long)W - 1; xv = (double)xl; } else xh = xl + 1;
          double ly = yv - (double)yl, lx = xv - (double)xl, hy = 1.0 - ly, hx = 1.0 - lx;
          w1 = hy * hx; w2 = hy * lx; w3 = ly * hx; w4 = ly * lx;
          v1 = (double)LD(img[yl * W + xl]); v2 = (double)LD(img[yl * W + xh]);
          v3 = (double)LD(img[yh * W + xl]); v4 = (double)LD(img[yh * W + xh]);
        }
        if (is_max) {
          double m = w1 * v1; m = fmax(m, w2 * v2); m = fmax(m, w3 * v3); m = fmax(m, w4 * v4);
          acc = first ? m : fmax(acc, m);
          first = false;
        } else {
          acc += w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
        }
      }
    }
    if (!is_max) acc /= count;
    y[e] = ST((C)acc);
  }
}
"#;

pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("roi_align_{name}")],
    ))
}

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (xb, rb, bb, yb) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let total = c.r.u64()?;
    let (n, ch, h, w) = (c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.u64()?);
    let (ph_n, pw_n, sr, scale) = (c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.f64()?);
    let (half, is_max) = (c.r.u32()? != 0, c.r.u32()? != 0);
    let nr = total / (ch * ph_n * pw_n).max(1);
    let xs = c.read_f64(xb, n * ch * h * w, dt)?;
    let rois = c.read_f64(rb, nr * 4, dt)?;
    let bidx = dtype::decode_ints(Dtype::I64, &c.bufs.input(bb, nr * 8)?[..nr as usize * 8])
        .unwrap_or_default();
    let (hf, wf) = (h as f64, w as f64);
    let mut ys = Vec::with_capacity(total as usize);
    for e in 0..total {
        let (pw, ph) = (e % pw_n, (e / pw_n) % ph_n);
        let (cc, r) = ((e / pw_n / ph_n) % ch, (e / pw_n / ph_n / ch) as usize);
        let off = if half { 0.5 } else { 0.0 };
        let (sw, sh) = (rois[r * 4] * scale - off, rois[r * 4 + 1] * scale - off);
        let (ew, eh) = (rois[r * 4 + 2] * scale - off, rois[r * 4 + 3] * scale - off);
        let (mut rw, mut rh) = (ew - sw, eh - sh);
        if !half {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / ph_n as f64, rw / pw_n as f64);
        let gh = if sr > 0 {
            sr as i64
        } else {
            (rh / ph_n as f64).ceil() as i64
        };
        let gw = if sr > 0 {
            sr as i64
        } else {
            (rw / pw_n as f64).ceil() as i64
        };
        let count = (gh * gw).max(1) as f64;
        let b = bidx[r];
        if b < 0 || b as u64 >= n {
            ys.push(0.0);
            continue;
        }
        let img = &xs[((b as u64 * ch + cc) * h * w) as usize..];
        let (mut acc, mut first) = (0.0f64, true);
        for iy in 0..gh {
            let yy = sh + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
            for ix in 0..gw {
                let xx = sw + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                let (mut v, mut wt) = ([0.0f64; 4], [0.0f64; 4]);
                if !(yy < -1.0 || yy > hf || xx < -1.0 || xx > wf) {
                    let (mut yv, mut xv) = (yy.max(0.0), xx.max(0.0));
                    let (mut yl, mut xl) = (yv as i64, xv as i64);
                    let yh = if yl >= h as i64 - 1 {
                        yl = h as i64 - 1;
                        yv = yl as f64;
                        yl
                    } else {
                        yl + 1
                    };
                    let xh = if xl >= w as i64 - 1 {
                        xl = w as i64 - 1;
                        xv = xl as f64;
                        xl
                    } else {
                        xl + 1
                    };
                    let (ly, lx) = (yv - yl as f64, xv - xl as f64);
                    let (hy, hx) = (1.0 - ly, 1.0 - lx);
                    wt = [hy * hx, hy * lx, ly * hx, ly * lx];
                    let at = |yi: i64, xi: i64| img[(yi * w as i64 + xi) as usize];
                    v = [at(yl, xl), at(yl, xh), at(yh, xl), at(yh, xh)];
                }
                if is_max {
                    let m = (0..4)
                        .map(|k| wt[k] * v[k])
                        .fold(f64::NEG_INFINITY, f64::max);
                    acc = if first { m } else { acc.max(m) };
                    first = false;
                } else {
                    acc += (0..4).map(|k| wt[k] * v[k]).sum::<f64>();
                }
            }
        }
        ys.push(if is_max { acc } else { acc / count });
    }
    Ok(vec![c.write_f64(yb, &ys, dt)?])
}
