//! DeformConv (opset 19), 2-D: `X` `[N, C, H, W]`, `W` `[M, C/group, kH, kW]`, `offset`
//! `[N, offset_group·kH·kW·2, oH, oW]`, optional `B` `[M]` and `mask`
//! `[N, offset_group·kH·kW, oH, oW]`; attributes `dilations`, `group`, `kernel_shape`,
//! `offset_group`, `pads`, `strides` (the geometry is [`crate::plan::conv_geometry`]'s).
//!
//! Kernel tap `(ky, kx)` of output `(oy, ox)` samples input channel `c` (offset group
//! `c / (C / offset_group)`) at `(oy·sH - pad_top + ky·dH + Δh, ox·sW - pad_left + kx·dW + Δw)`
//! by bilinear interpolation, corners outside the image reading 0 (GridSample with
//! `align_corners=1` and zero padding, as `onnx/reference/ops/op_deform_conv.py` samples), times
//! the mask, times the weight. Entry point `deform_{dtype}` (bias and mask as flags) of module
//! `conv_deform_{dtype}`; the CUDA kernel computes in f32 (f64 for f64), one thread per output
//! element; the CPU kernel in f64.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    SourceLanguage, TensorDesc, attr, dtype, shape,
};

use crate::geom::Geom;
use crate::plan::{FLOATS, binding, check_dtype, conv_geometry, launch_in, slots};

/// The module of `dt`'s entry points.
pub fn module_id(dt: Dtype) -> String {
    format!("conv_deform_{}", dtype::name(dt))
}

/// The dtype of a `conv_deform_{dtype}` module.
pub fn module_dtype(module_id: &str) -> Option<Dtype> {
    let dt = dtype::from_name(module_id.strip_prefix("conv_deform_")?)?;
    FLOATS.contains(&dt).then_some(dt)
}

const FLAG_BIAS: u32 = 1;
const FLAG_MASK: u32 = 2;

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(
        &req.attributes,
        &[
            "dilations",
            "group",
            "kernel_shape",
            "offset_group",
            "pads",
            "strides",
        ],
    )?;
    slots(req, 3, 5)?;
    let (x, w, off) = (req.required(0)?, req.required(1)?, req.required(2)?);
    let (b, mask) = (req.input(3), req.input(4));
    let dt = check_dtype(req, x, &FLOATS)?;
    for t in [Some(w), Some(off), b, mask].into_iter().flatten() {
        if t.dtype != dt {
            return Err(OpError::dtype(format!(
                "DeformConv: input `{}` is {}, `{}` is {}: they must match",
                t.name,
                dtype::name(t.dtype),
                x.name,
                dtype::name(dt)
            )));
        }
    }
    if x.shape.len() != 4 {
        return Err(OpError::shape(format!(
            "DeformConv: only 2-D inputs [N, C, H, W] are served (the ONNX reference defines \
             no other), got {:?}",
            x.shape
        )));
    }
    let (g, out_shape) = conv_geometry(req, x, w, false)?;
    let og = attr::int_or(&req.attributes, "offset_group", 1)?;
    if og < 1 || g.c % og != 0 {
        return Err(OpError::InvalidAttribute(format!(
            "DeformConv: `offset_group` {og} must be >= 1 and divide the {} input channels",
            g.c
        )));
    }
    let taps = (og * g.k_size()) as u64;
    let (n, oh, ow) = (out_shape[0], out_shape[2], out_shape[3]);
    let want_off = [n, taps * 2, oh, ow];
    if off.shape != want_off {
        return Err(OpError::shape(format!(
            "DeformConv: `offset` {:?} must be {want_off:?} (N, offset_group·kH·kW·2, output \
             extents)",
            off.shape
        )));
    }
    if let Some(mk) = mask
        && mk.shape != [n, taps, oh, ow]
    {
        return Err(OpError::shape(format!(
            "DeformConv: `mask` {:?} must be {:?}",
            mk.shape,
            [n, taps, oh, ow]
        )));
    }
    if let Some(b) = b
        && b.shape != [g.m as u64]
    {
        return Err(OpError::shape(format!(
            "DeformConv: bias `B` {:?} must be [{}]",
            b.shape, g.m
        )));
    }
    shape::byte_size(&out_shape, dt)?;
    let total = shape::numel(&out_shape)?;
    let xb = binding(req, 0)?;
    let mut flags = 0;
    if b.is_some() {
        flags |= FLAG_BIAS;
    }
    if mask.is_some() {
        flags |= FLAG_MASK;
    }
    let mut p = ParamPacker::new();
    p.ptr(xb, Access::Read)
        .ptr(binding(req, 1)?, Access::Read)
        .ptr(binding(req, 2)?, Access::Read)
        .ptr(req.binding(3).unwrap_or(xb), Access::Read)
        .ptr(req.binding(4).unwrap_or(xb), Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u32(flags)
        .u32(0)
        .i64(og);
    g.pack(&mut p);
    let entry = format!("deform_{}", dtype::name(dt));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", out_shape, dt)],
        launches: vec![launch_in(req, module_id(dt), entry, total, p)?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
/* x (one H x W plane) at (h, w), bilinear, corners outside reading 0 */
__device__ __forceinline__ ACC deform_sample(const T* __restrict__ x, long long H, long long W,
                                             ACC h, ACC w) {
  const ACC hf = FLOOR(h), wf = FLOOR(w);
  const ACC lh = h - hf, lw = w - wf;
  if (!(hf > (ACC)-2 && hf < (ACC)H && wf > (ACC)-2 && wf < (ACC)W)) return (ACC)0;
  const long long h0 = (long long)hf, w0 = (long long)wf;
  ACC v = 0;
  for (int dy = 0; dy < 2; ++dy) {
    const long long yy = h0 + dy;
    if (yy < 0 || yy >= H) continue;
    const ACC wy = dy ? lh : (ACC)1 - lh;
    for (int dx = 0; dx < 2; ++dx) {
      const long long xx = w0 + dx;
      if (xx < 0 || xx >= W) continue;
      const ACC wx = dx ? lw : (ACC)1 - lw;
      v += wy * wx * LD(x[yy * W + xx]);
    }
  }
  return v;
}
extern "C" __global__ void deform_DT(const T* __restrict__ x, const T* __restrict__ w,
    const T* __restrict__ off, const T* __restrict__ b, const T* __restrict__ mask,
    T* __restrict__ y, unsigned int flags, unsigned int pad, long long og, conv_geom g) {
  const long long H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const long long KH = g.k[1], KW = g.k[2], taps = KH * KW;
  const long long total = g.n * g.m * OH * OW;
  const long long c_per_og = g.c / og;
  GRID_LOOP(i, total) {
    const long long ox = i % OW, oy = (i / OW) % OH, m = (i / (OW * OH)) % g.m,
                    n = i / (OW * OH * g.m);
    const long long grp = m / g.mg;
    const long long pix = oy * OW + ox, plane = OH * OW;
    ACC acc = 0;
    for (long long c = 0; c < g.cg; ++c) {
      const long long ic = grp * g.cg + c, o = ic / c_per_og;
      const T* xc = x + (n * g.c + ic) * H * W;
      const T* wc = w + (m * g.cg + c) * taps;
      for (long long ky = 0; ky < KH; ++ky)
        for (long long kx = 0; kx < KW; ++kx) {
          const long long t = (o * KH + ky) * KW + kx;
          const T* op = off + ((n * og * taps + t) * 2) * plane + pix;
          const ACC h = (ACC)(oy * g.s[1] - g.pb[1] + ky * g.d[1]) + LD(op[0]);
          const ACC ww = (ACC)(ox * g.s[2] - g.pb[2] + kx * g.d[2]) + LD(op[plane]);
          ACC v = deform_sample(xc, H, W, h, ww);
          if (flags & 2) v *= LD(mask[(n * og * taps + t) * plane + pix]);
          acc += v * LD(wc[ky * KW + kx]);
        }
    }
    if (flags & 1) acc += LD(b[m]);
    y[i] = ST(acc);
  }
}
"#;

/// The module `conv_deform_{dt}`.
pub fn module(dt: Dtype) -> ModuleSource {
    let ct = dtype::cuda_type(dt).expect("every float dtype has a CUDA type");
    let name = dtype::name(dt);
    let floor = if dt == Dtype::F64 { "floor" } else { "floorf" };
    let code = format!(
        "{}\ntypedef {} T;\ntypedef {} ACC;\n#define LD(X) {}\n#define ST(X) {}\n\
         #define FLOOR(X) {floor}(X)\n{}{}",
        umd_sdk::dtype::CUDA_PRELUDE,
        ct.storage,
        ct.compute,
        ct.load.replace('X', "(X)"),
        ct.store.replace('X', "(X)"),
        crate::cuda::GEOM,
        CUDA.replace("_DT(", &format!("_{name}(")),
    );
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: vec![format!("deform_{name}")],
        options: vec!["--std=c++17".into()],
    }
}

/// Bilinear sample of the plane `x` (`h` × `w`) at `(py, px)`, corners outside reading 0.
fn sample(x: &[f64], h: usize, w: usize, py: f64, px: f64) -> f64 {
    let (yf, xf) = (py.floor(), px.floor());
    if !(yf > -2.0 && yf < h as f64 && xf > -2.0 && xf < w as f64) {
        return 0.0;
    }
    let (ly, lx) = (py - yf, px - xf);
    let (y0, x0) = (yf as i64, xf as i64);
    let mut v = 0.0;
    for (dy, wy) in [(0, 1.0 - ly), (1, ly)] {
        let yy = y0 + dy;
        if yy < 0 || yy >= h as i64 {
            continue;
        }
        for (dx, wx) in [(0, 1.0 - lx), (1, lx)] {
            let xx = x0 + dx;
            if xx < 0 || xx >= w as i64 {
                continue;
            }
            v += wy * wx * x[yy as usize * w + xx as usize];
        }
    }
    v
}

/// Runs `deform_{dtype}` on the CPU (in f64).
pub fn run_cpu(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let mut ptrs = [0u32; 6];
    for p in ptrs.iter_mut() {
        *p = r.ptr()?;
    }
    let flags = r.u32()?;
    r.u32()?;
    let og = r.i64()?;
    let g = Geom::read(&mut r)?;
    let us = |v: i64| v as usize;
    let (n, c, m, cg, mg) = (us(g.n), us(g.c), us(g.m), us(g.cg), us(g.mg));
    let (h, w, oh, ow) = (us(g.inp[1]), us(g.inp[2]), us(g.out[1]), us(g.out[2]));
    let (kh, kw) = (us(g.k[1]), us(g.k[2]));
    if og < 1 || c % og as usize != 0 {
        return Err(OpError::internal("DeformConv: bad offset_group"));
    }
    let og = og as usize;
    let taps = kh * kw;
    let plane = oh * ow;
    let read = |b: u32, len: usize| -> Result<Vec<f64>, OpError> {
        let size = dtype::size(dt);
        let data = bufs.input(b, (len * size) as u64)?;
        Ok(dtype::decode_f64(dt, &data[..len * size]))
    };
    let x = read(ptrs[0], n * c * h * w)?;
    let wt = read(ptrs[1], m * cg * taps)?;
    let off = read(ptrs[2], n * og * taps * 2 * plane)?;
    let bias = if flags & FLAG_BIAS != 0 {
        Some(read(ptrs[3], m)?)
    } else {
        None
    };
    let mask = if flags & FLAG_MASK != 0 {
        Some(read(ptrs[4], n * og * taps * plane)?)
    } else {
        None
    };
    let c_per_og = c / og;
    let mut y = vec![0.0; n * m * plane];
    for (i, yv) in y.iter_mut().enumerate() {
        let (pix, nm) = (i % plane, i / plane);
        let (oy, ox, mm, nn) = (pix / ow, pix % ow, nm % m, nm / m);
        let grp = mm / mg;
        let mut acc = 0.0;
        for ci in 0..cg {
            let ic = grp * cg + ci;
            let o = ic / c_per_og;
            let xc = &x[(nn * c + ic) * h * w..][..h * w];
            for ky in 0..kh {
                for kx in 0..kw {
                    let t = (o * kh + ky) * kw + kx;
                    let at = (nn * og * taps + t) * 2 * plane + pix;
                    let py = (oy as i64 * g.s[1] - g.pb[1] + ky as i64 * g.d[1]) as f64 + off[at];
                    let px = (ox as i64 * g.s[2] - g.pb[2] + kx as i64 * g.d[2]) as f64
                        + off[at + plane];
                    let mut v = sample(xc, h, w, py, px);
                    if let Some(mk) = &mask {
                        v *= mk[(nn * og * taps + t) * plane + pix];
                    }
                    acc += v * wt[((mm * cg + ci) * kh + ky) * kw + kx];
                }
            }
        }
        *yv = acc + bias.as_ref().map_or(0.0, |b| b[mm]);
    }
    let size = dtype::size(dt);
    let mut out = bufs.output(ptrs[5], (y.len() * size) as u64)?;
    let enc = dtype::encode(dt, &y).ok_or_else(|| OpError::internal("encode"))?;
    out.data.copy_from_slice(&enc);
    Ok(vec![out])
}
