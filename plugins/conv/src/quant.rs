//! ConvInteger (opset 10) and QLinearConv (opset 10): integer convolutions of u8/i8 inputs and
//! weights, with every Conv attribute (the geometry is [`crate::plan::conv_geometry`]'s).
//!
//! - ConvInteger: `y = Σ (x - x_zero_point)·(w - w_zero_point)` in i32; `x_zero_point` a
//!   scalar, `w_zero_point` a scalar or one per output channel; both optional.
//! - QLinearConv: the same sum plus the optional i32 bias, then
//!   `y = saturate(round_half_even(acc · (x_scale·w_scale / y_scale) + y_zero_point))` as
//!   `onnx/reference/ops/op_qlinear_conv.py` computes it (the scale product in f32, the rest in
//!   f64); `w_scale`/`w_zero_point` per tensor or per output channel; the output dtype is
//!   `y_zero_point`'s (u8/i8), or `x`'s when it is absent.
//!
//! The zero points, scales and bias are data read by the kernels (no plan-time values). One
//! CUDA module `conv_quant` holds every (x, w[, y]) dtype combination; entry points are
//! `convinteger_{x}_{w}` and `qlinearconv_{x}_{w}_{y}`. The padding contributes nothing (it is
//! `x_zero_point` before the subtraction, as in the reference).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt,
    SourceLanguage, TensorDesc, attr, dtype, shape,
};

use crate::cpu::conv as cpu_conv;
use crate::geom::Geom;
use crate::plan::{binding, check_dtype, conv_geometry, launch_in, slots};

/// The quantized dtypes of x, w and y.
pub const QTYPES: [Dtype; 2] = [Dtype::U8, Dtype::I8];
/// The module of every quantized entry point.
pub const MODULE: &str = "conv_quant";

/// Conv attributes (ConvInteger and QLinearConv take all of them).
const CONV_ATTRS: [&str; 6] = [
    "auto_pad",
    "dilations",
    "group",
    "kernel_shape",
    "pads",
    "strides",
];

/// Flag bits of the parameter block.
const HAS_XZP: u32 = 1;
const HAS_WZP: u32 = 2;
const HAS_YZP: u32 = 4;
const HAS_BIAS: u32 = 8;

/// Optional input `i` of dtype `dts`, with `per` elements (or 1 when `scalar_ok`); its step
/// per output channel (0: one value for every channel).
fn side_input<'a>(
    req: &'a PlanRequestExt,
    i: usize,
    what: &str,
    dts: &[Dtype],
    m: u64,
    per_channel: bool,
) -> Result<Option<(&'a TensorDesc, i64)>, OpError> {
    let Some(t) = req.input(i) else {
        return Ok(None);
    };
    if !dts.contains(&t.dtype) {
        let names: Vec<&str> = dts.iter().map(|d| dtype::name(*d)).collect();
        return Err(OpError::dtype(format!(
            "{}: `{what}` (input {i}) is {}; it must be {}",
            req.op,
            dtype::name(t.dtype),
            names.join(" or ")
        )));
    }
    let n = shape::numel(&t.shape)?;
    let step = if n == 1 && t.shape.len() <= 1 {
        0
    } else if per_channel && n == m && t.shape.len() == 1 {
        1
    } else {
        return Err(OpError::shape(format!(
            "{}: `{what}` (input {i}) {:?} must be a scalar{}",
            req.op,
            t.shape,
            if per_channel {
                format!(" or have one value per output channel ([{m}])")
            } else {
                String::new()
            }
        )));
    };
    Ok(Some((t, step)))
}

fn ptr_or(req: &PlanRequestExt, i: usize, fallback: u32) -> u32 {
    req.binding(i).unwrap_or(fallback)
}

/// ConvInteger: `x`, `w`, optional `x_zero_point`, `w_zero_point`.
pub fn plan_conv_integer(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &CONV_ATTRS)?;
    slots(req, 2, 4)?;
    let (x, w) = (req.required(0)?, req.required(1)?);
    let (xt, wt) = (check_dtype(req, x, &QTYPES)?, check_dtype(req, w, &QTYPES)?);
    let (g, out_shape) = conv_geometry(req, x, w, false)?;
    let m = g.m as u64;
    let xzp = side_input(req, 2, "x_zero_point", &[xt], m, false)?;
    let wzp = side_input(req, 3, "w_zero_point", &[wt], m, true)?;
    shape::byte_size(&out_shape, Dtype::I32)?;
    let total = shape::numel(&out_shape)?;
    let (xb, wb) = (binding(req, 0)?, binding(req, 1)?);
    let mut flags = 0;
    if xzp.is_some() {
        flags |= HAS_XZP;
    }
    if wzp.is_some() {
        flags |= HAS_WZP;
    }
    let mut p = ParamPacker::new();
    p.ptr(xb, Access::Read)
        .ptr(wb, Access::Read)
        .ptr(ptr_or(req, 2, xb), Access::Read)
        .ptr(ptr_or(req, 3, wb), Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u32(flags)
        .u32(0)
        .i64(wzp.map_or(0, |(_, s)| s));
    g.pack(&mut p);
    let entry = format!("convinteger_{}_{}", dtype::name(xt), dtype::name(wt));
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out_shape, Dtype::I32)],
        launches: vec![launch_in(req, MODULE.into(), entry, total, p)?],
        workspace_bytes: 0,
    })
}

/// QLinearConv: `x`, `x_scale`, `x_zero_point`, `w`, `w_scale`, `w_zero_point`, `y_scale`,
/// `y_zero_point`, optional `B`.
pub fn plan_qlinear_conv(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &CONV_ATTRS)?;
    slots(req, 7, 9)?;
    let (x, w) = (req.required(0)?, req.required(3)?);
    let (xt, wt) = (check_dtype(req, x, &QTYPES)?, check_dtype(req, w, &QTYPES)?);
    let (g, out_shape) = conv_geometry(req, x, w, false)?;
    let m = g.m as u64;
    let f32s = [Dtype::F32];
    fn need<'a>(
        v: Option<(&'a TensorDesc, i64)>,
        i: usize,
        what: &str,
    ) -> Result<(&'a TensorDesc, i64), OpError> {
        v.ok_or_else(|| OpError::shape(format!("QLinearConv: `{what}` (input {i}) is required")))
    }
    need(
        side_input(req, 1, "x_scale", &f32s, m, false)?,
        1,
        "x_scale",
    )?;
    let xzp = side_input(req, 2, "x_zero_point", &[xt], m, false)?;
    let (_, ws_step) = need(side_input(req, 4, "w_scale", &f32s, m, true)?, 4, "w_scale")?;
    let wzp = side_input(req, 5, "w_zero_point", &[wt], m, true)?;
    need(
        side_input(req, 6, "y_scale", &f32s, m, false)?,
        6,
        "y_scale",
    )?;
    let yzp = side_input(req, 7, "y_zero_point", &QTYPES, m, false)?;
    let yt = yzp.map_or(xt, |(t, _)| t.dtype);
    let bias = req.input(8);
    if let Some(b) = bias
        && (b.dtype != Dtype::I32 || b.shape != [m])
    {
        return Err(OpError::shape(format!(
            "QLinearConv: bias `B` must be i32 [{m}], got {} {:?}",
            dtype::name(b.dtype),
            b.shape
        )));
    }
    shape::byte_size(&out_shape, yt)?;
    let total = shape::numel(&out_shape)?;
    let xb = binding(req, 0)?;
    let mut flags = 0;
    for (present, bit) in [
        (xzp.is_some(), HAS_XZP),
        (wzp.is_some(), HAS_WZP),
        (yzp.is_some(), HAS_YZP),
        (bias.is_some(), HAS_BIAS),
    ] {
        if present {
            flags |= bit;
        }
    }
    let mut p = ParamPacker::new();
    p.ptr(xb, Access::Read)
        .ptr(binding(req, 1)?, Access::Read)
        .ptr(ptr_or(req, 2, xb), Access::Read)
        .ptr(binding(req, 3)?, Access::Read)
        .ptr(binding(req, 4)?, Access::Read)
        .ptr(ptr_or(req, 5, xb), Access::Read)
        .ptr(binding(req, 6)?, Access::Read)
        .ptr(ptr_or(req, 7, xb), Access::Read)
        .ptr(ptr_or(req, 8, xb), Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u32(flags)
        .u32(0)
        .i64(wzp.map_or(0, |(_, s)| s))
        .i64(ws_step);
    g.pack(&mut p);
    let entry = format!(
        "qlinearconv_{}_{}_{}",
        dtype::name(xt),
        dtype::name(wt),
        dtype::name(yt)
    );
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out_shape, yt)],
        launches: vec![launch_in(req, MODULE.into(), entry, total, p)?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
/* acc = sum over the window of (x - xz) * (w - wz): output i's channel m. */
template <typename X, typename W>
__device__ __forceinline__ long long qconv_dot(const X* __restrict__ x, const W* __restrict__ w,
    int xz, const W* __restrict__ wzp, long long wz_step, bool has_wz, const conv_geom& g,
    long long i, long long* m_out) {
  const long long in_sz = g.in[0] * g.in[1] * g.in[2];
  const long long ks = g.k[0] * g.k[1] * g.k[2];
  long long oz, oy, ox;
  const long long t = umd_unravel(i, g, &oz, &oy, &ox);
  const long long m = t % g.m, n = t / g.m, grp = m / g.mg;
  *m_out = m;
  const int wz = has_wz ? (int)wzp[m * wz_step] : 0;
  const long long bz = oz * g.s[0] - g.pb[0], by = oy * g.s[1] - g.pb[1],
                  bx = ox * g.s[2] - g.pb[2];
  long long z0, z1, y0, y1, x0, x1;
  umd_krange(bz, g.d[0], g.k[0], g.in[0], &z0, &z1);
  umd_krange(by, g.d[1], g.k[1], g.in[1], &y0, &y1);
  umd_krange(bx, g.d[2], g.k[2], g.in[2], &x0, &x1);
  const X* xg = x + (n * g.c + grp * g.cg) * in_sz;
  const W* wm = w + m * g.cg * ks;
  long long acc = 0;
  for (long long c = 0; c < g.cg; ++c) {
    const X* xc = xg + c * in_sz;
    const W* wc = wm + c * ks;
    for (long long kz = z0; kz < z1; ++kz) {
      const long long iz = bz + kz * g.d[0];
      for (long long ky = y0; ky < y1; ++ky) {
        const long long row = (iz * g.in[1] + by + ky * g.d[1]) * g.in[2] + bx;
        const W* wr = wc + (kz * g.k[1] + ky) * g.k[2];
        for (long long kx = x0; kx < x1; ++kx)
          acc += (long long)((int)xc[row + kx * g.d[2]] - xz) * (long long)((int)wr[kx] - wz);
      }
    }
  }
  return acc;
}
template <typename X, typename W>
__device__ __forceinline__ void convinteger_body(const X* __restrict__ x, const W* __restrict__ w,
    const X* __restrict__ xzp, const W* __restrict__ wzp, int* __restrict__ y, unsigned int flags,
    long long wz_step, const conv_geom& g) {
  const long long total = g.n * g.m * g.out[0] * g.out[1] * g.out[2];
  const int xz = (flags & 1) ? (int)xzp[0] : 0;
  GRID_LOOP(i, total) {
    long long m;
    const long long acc = qconv_dot(x, w, xz, wzp, wz_step, (flags & 2) != 0, g, i, &m);
    y[i] = (int)(unsigned int)(unsigned long long)acc;
  }
}
template <typename X, typename W, typename Y>
__device__ __forceinline__ void qlinearconv_body(const X* __restrict__ x,
    const float* __restrict__ xs, const X* __restrict__ xzp, const W* __restrict__ w,
    const float* __restrict__ ws, const W* __restrict__ wzp, const float* __restrict__ ys,
    const Y* __restrict__ yzp, const int* __restrict__ bias, Y* __restrict__ y,
    unsigned int flags, long long wz_step, long long ws_step, double lo, double hi,
    const conv_geom& g) {
  const long long total = g.n * g.m * g.out[0] * g.out[1] * g.out[2];
  const int xz = (flags & 1) ? (int)xzp[0] : 0;
  const double yz = (flags & 4) ? (double)yzp[0] : 0.0;
  GRID_LOOP(i, total) {
    long long m;
    long long acc = qconv_dot(x, w, xz, wzp, wz_step, (flags & 2) != 0, g, i, &m);
    if (flags & 8) acc += bias[m];
    const int res = (int)(unsigned int)(unsigned long long)acc;
    const float mult = __fdiv_rn(__fmul_rn(xs[0], ws[m * ws_step]), ys[0]);
    double r = __dadd_rn(__dmul_rn((double)res, (double)mult), yz);
    r = r < lo ? lo : (r > hi ? hi : r);
    y[i] = (Y)(int)rint(r);
  }
}
"#;

/// The CUDA type of a quantized dtype.
fn ctype(dt: Dtype) -> &'static str {
    if dt == Dtype::I8 {
        "signed char"
    } else {
        "unsigned char"
    }
}

/// Saturation bounds of a quantized dtype.
fn bounds(dt: Dtype) -> (f64, f64) {
    if dt == Dtype::I8 {
        (-128.0, 127.0)
    } else {
        (0.0, 255.0)
    }
}

/// The module `conv_quant`: the shared geometry helpers, the bodies, and one entry point per
/// dtype combination.
pub fn module() -> ModuleSource {
    let mut code = format!(
        "{}{}{CUDA}",
        umd_sdk::dtype::CUDA_PRELUDE,
        crate::cuda::GEOM
    );
    let mut entry_points = Vec::new();
    for xt in QTYPES {
        for wt in QTYPES {
            let (xn, wn, xc, wc) = (dtype::name(xt), dtype::name(wt), ctype(xt), ctype(wt));
            let e = format!("convinteger_{xn}_{wn}");
            code.push_str(&format!(
                "extern \"C\" __global__ void {e}(const {xc}* x, const {wc}* w, const {xc}* xzp, \
                 const {wc}* wzp, int* y, unsigned int flags, unsigned int pad, \
                 long long wz_step, conv_geom g) {{\n  convinteger_body(x, w, xzp, wzp, y, flags, \
                 wz_step, g);\n}}\n"
            ));
            entry_points.push(e);
            for yt in QTYPES {
                let (yn, yc) = (dtype::name(yt), ctype(yt));
                let (lo, hi) = bounds(yt);
                let e = format!("qlinearconv_{xn}_{wn}_{yn}");
                code.push_str(&format!(
                    "extern \"C\" __global__ void {e}(const {xc}* x, const float* xs, \
                     const {xc}* xzp, const {wc}* w, const float* ws, const {wc}* wzp, \
                     const float* ys, const {yc}* yzp, const int* bias, {yc}* y, \
                     unsigned int flags, unsigned int pad, long long wz_step, long long ws_step, \
                     conv_geom g) {{\n  qlinearconv_body(x, xs, xzp, w, ws, wzp, ys, yzp, bias, \
                     y, flags, wz_step, ws_step, {lo:.1}, {hi:.1}, g);\n}}\n"
                ));
                entry_points.push(e);
            }
        }
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points,
        options: vec!["--std=c++17".into()],
    }
}

/// The dtypes named by a `convinteger_{x}_{w}` / `qlinearconv_{x}_{w}_{y}` entry point.
fn entry_dtypes(entry: &str) -> Option<(bool, Vec<Dtype>)> {
    let (ql, rest) = if let Some(r) = entry.strip_prefix("qlinearconv_") {
        (true, r)
    } else {
        (false, entry.strip_prefix("convinteger_")?)
    };
    let dts: Option<Vec<Dtype>> = rest.split('_').map(dtype::from_name).collect();
    let dts = dts?;
    (dts.len() == if ql { 3 } else { 2 } && dts.iter().all(|d| QTYPES.contains(d)))
        .then_some((ql, dts))
}

/// Whether `entry` is one of this file's entry points.
pub fn is_entry(entry: &str) -> bool {
    entry_dtypes(entry).is_some()
}

/// `n` integer values of dtype `dt` from binding `b`.
fn ints(bufs: &umd_sdk::cpu::Buffers, b: u32, n: usize, dt: Dtype) -> Result<Vec<i64>, OpError> {
    let size = dtype::size(dt);
    let data = bufs.input(b, (n * size) as u64)?;
    dtype::decode_ints(dt, &data[..n * size]).ok_or_else(|| OpError::internal("not integers"))
}

/// `n` f32 values from binding `b`.
fn f32s(bufs: &umd_sdk::cpu::Buffers, b: u32, n: usize) -> Result<Vec<f32>, OpError> {
    let data = bufs.input(b, (n * 4) as u64)?;
    Ok(data[..n * 4]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The integer sums of every output (bias not added), computed exactly in f64 with the
/// plugin's float convolution: `x - xz` and `w - wz` are at most 255 in magnitude, so every
/// product and partial sum is an integer below 2^53.
fn sums(g: &Geom, x: &[i64], xz: i64, w: &[i64], wz: &[i64], wz_step: usize) -> Vec<f64> {
    let xs: Vec<f64> = x.iter().map(|v| (v - xz) as f64).collect();
    let per = (g.cg * g.k_size()) as usize;
    let ws: Vec<f64> = w
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let m = i.checked_div(per).unwrap_or(0);
            (v - wz.get(m * wz_step).copied().unwrap_or(0)) as f64
        })
        .collect();
    let mut y = vec![0.0; (g.n * g.m * g.out_size()) as usize];
    cpu_conv::conv(g, &xs, &ws, &mut y);
    y
}

/// Runs `convinteger_*` and `qlinearconv_*` on the CPU.
pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let (ql, dts) = entry_dtypes(&call.entry_point)
        .ok_or_else(|| OpError::internal(format!("unknown entry `{}`", call.entry_point)))?;
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xt, wt) = (dts[0], dts[1]);
    let mut ptrs = Vec::new();
    for _ in 0..if ql { 10 } else { 5 } {
        ptrs.push(r.ptr()?);
    }
    let flags = r.u32()?;
    r.u32()?;
    let wz_step = r.i64()? as usize;
    let ws_step = if ql { r.i64()? as usize } else { 0 };
    let g = Geom::read(&mut r)?;
    let m = g.m as usize;
    let x_len = (g.n * g.c * g.in_size()) as usize;
    let w_len = (g.m * g.cg * g.k_size()) as usize;
    let out_len = (g.n * g.m * g.out_size()) as usize;
    let out_sz = g.out_size() as usize;
    // (x, xzp, w, wzp) binding positions
    let (px, pxz, pw, pwz) = if ql { (0, 2, 3, 5) } else { (0, 2, 1, 3) };
    let x = ints(&bufs, ptrs[px], x_len, xt)?;
    let w = ints(&bufs, ptrs[pw], w_len, wt)?;
    let xz = if flags & HAS_XZP != 0 {
        ints(&bufs, ptrs[pxz], 1, xt)?[0]
    } else {
        0
    };
    let wz = if flags & HAS_WZP != 0 {
        ints(&bufs, ptrs[pwz], if wz_step == 0 { 1 } else { m }, wt)?
    } else {
        vec![0]
    };
    let acc = sums(&g, &x, xz, &w, &wz, wz_step);
    let wrap = |v: i64| v as i32;
    if !ql {
        let mut out = bufs.output(ptrs[4], (out_len * 4) as u64)?;
        for (o, v) in out.data.chunks_exact_mut(4).zip(&acc) {
            o.copy_from_slice(&wrap(*v as i64).to_le_bytes());
        }
        return Ok(vec![out]);
    }
    let yt = dts[2];
    let xs = f32s(&bufs, ptrs[1], 1)?[0];
    let ws = f32s(&bufs, ptrs[4], if ws_step == 0 { 1 } else { m })?;
    let ys = f32s(&bufs, ptrs[6], 1)?[0];
    let yz = if flags & HAS_YZP != 0 {
        ints(&bufs, ptrs[7], 1, yt)?[0] as f64
    } else {
        0.0
    };
    let bias = if flags & HAS_BIAS != 0 {
        ints(&bufs, ptrs[8], m, Dtype::I32)?
    } else {
        vec![0; m]
    };
    let (lo, hi) = bounds(yt);
    let mut out = bufs.output(ptrs[9], out_len as u64)?;
    for (i, (o, v)) in out.data.iter_mut().zip(&acc).enumerate() {
        let ch = i.checked_div(out_sz).unwrap_or(0) % m;
        let res = wrap(*v as i64 + bias[ch]);
        let mult = xs * ws[ch * ws_step] / ys;
        let r = (res as f64 * mult as f64 + yz)
            .clamp(lo, hi)
            .round_ties_even();
        *o = if yt == Dtype::I8 {
            (r as i8) as u8
        } else {
            r as u8
        };
    }
    Ok(vec![out])
}
