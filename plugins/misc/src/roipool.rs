//! MaxRoiPool (Fast R-CNN RoI max pooling): `X [N, C, H, W]`, `rois [num_rois, 5]` of
//! `(batch, x1, y1, x2, y2)`, output `[num_rois, C, ph, pw]` (`pooled_shape`). As onnxruntime
//! computes it: corners `round(v · spatial_scale)` (half away from zero), the RoI at least
//! 1 × 1, bins `floor(p · size / pooled)` to `ceil((p + 1) · size / pooled)` shifted by the
//! corner and clipped to the image, each the maximum of its cells from the compute type's
//! lowest value (a NaN cell never wins), 0 when empty. Coordinates in the compute type (f32 for
//! the halves and f32, f64 for f64); a NaN corner is 0 and corners are clamped to the i32
//! range. A batch index outside `0..N` gives zeros (onnxruntime refuses the call). One thread
//! per output element.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, FLOATS, cuda_header, input_of, linear_launch};

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["pooled_shape", "spatial_scale"])?;
    common::at_most_inputs(req, 2)?;
    let x = input_of(req, 0, &FLOATS)?;
    let rois = input_of(req, 1, &[x.dtype])?;
    let [n, ch, h, w] = x.shape[..] else {
        return Err(OpError::shape(format!(
            "MaxRoiPool: X must be [N, C, H, W], got {:?}",
            x.shape
        )));
    };
    let [nr, 5] = rois.shape[..] else {
        return Err(OpError::shape(format!(
            "MaxRoiPool: rois must be [num_rois, 5], got {:?}",
            rois.shape
        )));
    };
    let pooled = attr::ints_or(&req.attributes, "pooled_shape", &[])?;
    let [ph, pw] = pooled[..] else {
        return Err(OpError::InvalidAttribute(format!(
            "MaxRoiPool: `pooled_shape` must be [height, width], got {pooled:?}"
        )));
    };
    if ph < 1 || pw < 1 || h > i32::MAX as u64 || w > i32::MAX as u64 {
        return Err(OpError::InvalidAttribute(format!(
            "MaxRoiPool: `pooled_shape` {pooled:?} must be positive (and H, W below 2^31)"
        )));
    }
    let scale = attr::float_or(&req.attributes, "spatial_scale", 1.0)?;
    let out = vec![nr, ch, ph as u64, pw as u64];
    let total = shape::numel(&out)?;
    shape::byte_size(&out, x.dtype)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(total)
        .u64(n)
        .u64(ch)
        .u64(h)
        .u64(w)
        .u64(ph as u64)
        .u64(pw as u64)
        .f64(scale);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", out, x.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_roipool_{name}"),
            format!("max_roi_pool_{name}"),
            total,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
// a corner: rounded half away from zero, NaN as 0, clamped to the i32 range (no overflow)
__device__ long long umd_corner(C v) {
  double r = round((double)v);
  if (r != r) return 0;
  return (long long)fmin(fmax(r, -2147483648.0), 2147483647.0);
}
extern "C" __global__ void max_roi_pool_NAME(const T* __restrict__ x,
    const T* __restrict__ rois, T* __restrict__ y, unsigned long long total,
    unsigned long long N, unsigned long long CH, unsigned long long H, unsigned long long W,
    unsigned long long PH, unsigned long long PW, double scale) {
  UMD_FOR(e, total) {
    unsigned long long pw = e % PW, ph = (e / PW) % PH, c = (e / PW / PH) % CH, r = e / PW / PH / CH;
    const T* roi = rois + r * 5;
    C s = (C)scale;
    double bb = (double)LD(roi[0]);
    if (!(bb >= 0.0 && bb < (double)N)) { y[e] = ST((C)0); continue; }
    long long b = (long long)bb;
    long long x1 = umd_corner(LD(roi[1]) * s), y1 = umd_corner(LD(roi[2]) * s);
    long long x2 = umd_corner(LD(roi[3]) * s), y2 = umd_corner(LD(roi[4]) * s);
    long long rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
    C bh = (C)rh / (C)PH, bw = (C)rw / (C)PW;
    long long hs = (long long)floor((C)ph * bh) + y1, ws = (long long)floor((C)pw * bw) + x1;
    long long he = (long long)ceil((C)(ph + 1) * bh) + y1, we = (long long)ceil((C)(pw + 1) * bw) + x1;
    long long Hh = (long long)H, Ww = (long long)W;
    hs = hs < 0 ? 0 : (hs > Hh ? Hh : hs); he = he < 0 ? 0 : (he > Hh ? Hh : he);
    ws = ws < 0 ? 0 : (ws > Ww ? Ww : ws); we = we < 0 ? 0 : (we > Ww ? Ww : we);
    if (he <= hs || we <= ws) { y[e] = ST((C)0); continue; }
    const T* img = x + ((unsigned long long)b * CH + c) * H * W;
    C m = (C)UMD_LOWEST;
    for (long long i = hs; i < he; ++i)
      for (long long j = ws; j < we; ++j) { C v = LD(img[i * Ww + j]); if (v > m) m = v; }
    y[e] = ST(m);
  }
}
"#;

pub fn cuda(dt: umd_sdk::Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!(
            "{}#define UMD_LOWEST {}\n{}",
            cuda_header(dt)?,
            if dt == umd_sdk::Dtype::F64 {
                "(-1.7976931348623157e308)"
            } else {
                "(-3.402823466e38f)"
            },
            CUDA.replace("NAME", name)
        ),
        vec![format!("max_roi_pool_{name}")],
    ))
}

pub fn run_cpu(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (xb, rb, yb) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let total = c.r.u64()?;
    let (n, ch, h, w) = (c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.u64()?);
    let (ph_n, pw_n, scale) = (c.r.u64()?, c.r.u64()?, c.r.f64()?);
    let nr = total / (ch * ph_n * pw_n).max(1);
    let xs = c.read_f64(xb, n * ch * h * w, dt)?;
    let rois = c.read_f64(rb, nr * 5, dt)?;
    // the compute type's arithmetic: f64 for f64, f32 otherwise
    let r = |v: f64| common::compute_round(dt, v);
    let s = r(scale);
    let (hh, ww) = (h as i64, w as i64);
    let mut ys = Vec::with_capacity(total as usize);
    for e in 0..total {
        let (pw, ph) = (e % pw_n, (e / pw_n) % ph_n);
        let (cc, ri) = ((e / pw_n / ph_n) % ch, (e / pw_n / ph_n / ch) as usize);
        let roi = &rois[ri * 5..ri * 5 + 5];
        if !(roi[0] >= 0.0 && roi[0] < n as f64) {
            ys.push(0.0);
            continue;
        }
        let b = roi[0] as i64;
        // rounded half away from zero, NaN as 0, clamped to the i32 range
        let corner = |v: f64| {
            let c = r(v * s).round();
            if c.is_nan() {
                0
            } else {
                c.clamp(i32::MIN as f64, i32::MAX as f64) as i64
            }
        };
        let (x1, y1, x2, y2) = (
            corner(roi[1]),
            corner(roi[2]),
            corner(roi[3]),
            corner(roi[4]),
        );
        let (rh, rw) = ((y2 - y1 + 1).max(1), (x2 - x1 + 1).max(1));
        // onnxruntime's float(size) / float(pooled)
        let (bh, bw) = (
            r(r(rh as f64) / r(ph_n as f64)),
            r(r(rw as f64) / r(pw_n as f64)),
        );
        let clip = |v: i64, hi: i64| v.clamp(0, hi);
        let hs = clip(r(r(ph as f64) * bh).floor() as i64 + y1, hh);
        let he = clip(r(r((ph + 1) as f64) * bh).ceil() as i64 + y1, hh);
        let ws = clip(r(r(pw as f64) * bw).floor() as i64 + x1, ww);
        let we = clip(r(r((pw + 1) as f64) * bw).ceil() as i64 + x1, ww);
        if he <= hs || we <= ws {
            ys.push(0.0);
            continue;
        }
        let img = &xs[((b as u64 * ch + cc) * h * w) as usize..];
        // from the compute type's lowest value, as onnxruntime starts (a NaN never wins)
        let mut m = if dt == umd_sdk::Dtype::F64 {
            f64::MIN
        } else {
            f32::MIN as f64
        };
        for i in hs..he {
            for j in ws..we {
                let v = img[(i * ww + j) as usize];
                if v > m {
                    m = v;
                }
            }
        }
        ys.push(m);
    }
    Ok(vec![c.write_f64(yb, &ys, dt)?])
}
