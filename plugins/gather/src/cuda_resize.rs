//! CUDA C of Resize: the device copy of [`crate::resize_core`]'s coordinate math (operation for
//! operation, in double; modules are compiled with `--fmad=false` so no multiply-add is fused),
//! the nearest kernel (movement modules) and the interpolating kernel (`gather_resize_{dtype}`).

use umd_sdk::Dtype;
use umd_sdk::dtype::{self, CudaType};

/// Device functions shared by both Resize kernels (needs `umd_dims`, `umd_f64s`).
pub const DEVICE: &str = r#"
__device__ double umd_x_ori(unsigned int cmode, unsigned long long y, double s,
    unsigned long long in_w, unsigned long long out_w_int, double roi_d, double roi_b, double roi_half) {
  double yf = (double)y, w = (double)in_w, ow = s * w;
  switch (cmode) {
    case 1: return yf / s;
    case 2: return ow == 1.0 ? 0.0 : yf * (w - 1.0) / (ow - 1.0);
    case 3: return ow == 1.0 ? -0.5 : (yf + 0.5) / s - 0.5;
    case 4: { double x = ow == 1.0 ? roi_half : yf * roi_d * (w - 1.0) / (ow - 1.0); return x + roi_b; }
    case 5: {
      double adjustment = (double)out_w_int / ow;
      double center = w / 2.0;
      double offset = center * (1.0 - adjustment);
      return offset + (yf + 0.5) / s - 0.5;
    }
    case 6: return (yf + 0.5) / s;
    default: return (yf + 0.5) / s - 0.5;
  }
}
__device__ long long umd_window(double x, long long n, double* ratio) {
  double xi = floor(x);
  *ratio = (x == xi) ? 1.0 : x - xi;
  long long pad = (n + 1) / 2;
  double xp = x + (double)pad;
  double pf = floor(xp);
  double frac = xp - pf;
  long long off;
  if (n % 2 == 0) off = (frac == 0.0) ? -(n / 2) : -(n / 2) + 1;
  else { long long base = -((n - 1) / 2); off = (frac <= 0.5) ? base : base + 1; }
  return (long long)pf + off - pad;
}
__device__ long long umd_aa_start(double support, double scale) {
  double s = scale < 1.0 ? scale : 1.0;
  return (long long)(floor(-support / s) + 1.0);
}
__device__ double umd_coeff(unsigned int kind, unsigned int nmode, unsigned int aa, double a,
    double scale, double r, unsigned long long j) {
  if (kind == 0) {
    bool hit1;
    if (r == 1.0) hit1 = true;
    else if (nmode == 1) hit1 = r >= 0.5;
    else if (nmode == 2) hit1 = false;
    else if (nmode == 3) hit1 = true;
    else hit1 = r > 0.5;
    return ((j == 1) == hit1) ? 1.0 : 0.0;
  }
  if (kind == 1 && !aa) return j == 0 ? 1.0 - r : r;
  if (kind == 2 && !aa) {
    if (j == 0) return ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a;
    if (j == 1) return ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0;
    if (j == 2) return ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0;
    double q = (1.0 - r) + 1.0;
    return ((a * q - 5.0 * a) * q + 8.0 * a) * q - 4.0 * a;
  }
  double s = scale < 1.0 ? scale : 1.0;
  if (kind == 1) {
    double i = (double)(umd_aa_start(1.0, scale) + (long long)j);
    double x = (i - r) * s;
    double c = 1.0 - fabs(x);
    return c < 0.0 ? 0.0 : (c > 1.0 ? 1.0 : c);
  }
  double i = (double)(umd_aa_start(2.0, scale) + (long long)j);
  double x = fabs(s * (i - r));
  double x2 = x * x, x3 = x * (x * x);
  if (x <= 1.0) return (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0;
  if (x < 2.0) return a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a;
  return 0.0;
}
/* One level of the interpolation at one output coordinate. */
struct umd_level {
  long long start; double ratio, scale, norm_aa, norm_ex; unsigned long long n, w, stride;
};
__device__ double umd_weight_raw(const umd_level& L, unsigned int kind, unsigned int aa, double a,
    unsigned long long j) {
  double c = umd_coeff(kind, 0, aa, a, L.scale, L.ratio, j);
  if (aa) c = c / L.norm_aa;
  return c;
}
__device__ double umd_weight_in(const umd_level& L, unsigned int kind, unsigned int aa, double a,
    unsigned long long j) {
  long long i = L.start + (long long)j;
  if (i < 0 || i >= (long long)L.w) return 0.0;
  return umd_weight_raw(L, kind, aa, a, j);
}
/* numpy's pairwise add.reduce of the inside weights j in [from, from + n). */
__device__ double umd_np_sum(const umd_level& L, unsigned int kind, unsigned int aa, double a,
    unsigned long long from, unsigned long long n) {
  if (n < 8) {
    double s = 0.0;
    for (unsigned long long j = 0; j < n; ++j) s += umd_weight_in(L, kind, aa, a, from + j);
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = umd_weight_in(L, kind, aa, a, from + k);
    unsigned long long i = 8;
    for (; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; ++k) r[k] += umd_weight_in(L, kind, aa, a, from + i + k);
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += umd_weight_in(L, kind, aa, a, from + i);
    return s;
  }
  unsigned long long half = n / 2 - (n / 2) % 8;
  return umd_np_sum(L, kind, aa, a, from, half) + umd_np_sum(L, kind, aa, a, from + half, n - half);
}
__device__ double umd_weight(const umd_level& L, unsigned int kind, unsigned int aa,
    unsigned int exclude, double a, unsigned long long j) {
  if (!exclude) return umd_weight_raw(L, kind, aa, a, j);
  return umd_weight_in(L, kind, aa, a, j) / L.norm_ex;
}
__device__ __forceinline__ unsigned long long umd_clamp_idx(long long i, unsigned long long w) {
  return i < 0 ? 0ull : ((unsigned long long)i >= w ? w - 1 : (unsigned long long)i);
}
#define UMD_RESIZE_PARAMS unsigned long long n, unsigned int rank, unsigned int nlev, \
  unsigned int cmode, unsigned int kind, unsigned int nmode, unsigned int exclude, unsigned int aa, \
  umd_dims odims, umd_dims idims, umd_dims levaxis, umd_dims taps, umd_f64s scale, umd_f64s roi_d, \
  umd_f64s roi_b, umd_f64s roi_half, double cubic_a, double ev, unsigned long long ev_bits
/* Output coordinates c, input strides istr and the offset of the axes not resized. */
#define UMD_RESIZE_PROLOGUE \
  unsigned long long c[8], istr[8], base = 0; \
  { unsigned long long rem = o, s = 1; \
    for (int d = (int)rank - 1; d >= 0; --d) { \
      c[d] = rem % odims.v[d]; rem /= odims.v[d]; istr[d] = s; s *= idims.v[d]; } \
    for (int d = 0; d < (int)rank; ++d) { bool lev = false; \
      for (unsigned int l = 0; l < nlev; ++l) lev = lev || levaxis.v[l] == (unsigned long long)d; \
      if (!lev) base += c[d] * istr[d]; } }
#define UMD_X_ORI(d) umd_x_ori(cmode, c[d], scale.v[d], idims.v[d], odims.v[d], roi_d.v[d], \
  roi_b.v[d], roi_half.v[d])
"#;

/// The nearest kernel of a movement module (`T` is the element's storage type).
pub const NEAREST: &str = r#"
extern "C" __global__ void resize_nearest_s$S(const T* __restrict__ x, T* __restrict__ out,
    UMD_RESIZE_PARAMS) {
  UMD_LOOP(o, n) {
    UMD_RESIZE_PROLOGUE
    unsigned long long src = base;
    int special = 0;
    for (int l = (int)nlev - 1; l >= 0; --l) {
      unsigned int d = (unsigned int)levaxis.v[l];
      unsigned long long w = idims.v[d];
      double xo = UMD_X_ORI(d);
      if (cmode == 4 && (xo < 0.0 || xo > (double)w - 1.0)) { special = 2; break; }
      double r;
      long long st = umd_window(xo, 2, &r);
      long long i = st + (long long)umd_coeff(0, nmode, 0, 0.0, scale.v[d], r, 1);
      if (exclude && (i < 0 || i >= (long long)w)) { special = 1; break; }
      src += umd_clamp_idx(i, w) * istr[d];
    }
    out[o] = special == 0 ? x[src] : (special == 1 ? (T)0 : (T)ev_bits);
  }
}
"#;

const INTERP: &str = r#"
extern "C" __global__ void resize_interp_$NAME(const $T* __restrict__ x, $T* __restrict__ out,
    UMD_RESIZE_PARAMS) {
  UMD_LOOP(o, n) {
    UMD_RESIZE_PROLOGUE
    umd_level L[8];
    bool leaf_ev = false;
    unsigned int lo = 0;
    for (unsigned int l = 0; l < nlev; ++l) {
      unsigned int d = (unsigned int)levaxis.v[l];
      umd_level& v = L[l];
      v.w = idims.v[d]; v.n = taps.v[d]; v.scale = scale.v[d]; v.stride = istr[d];
      double xo = UMD_X_ORI(d);
      if (cmode == 4 && (xo < 0.0 || xo > (double)v.w - 1.0)) { leaf_ev = true; lo = l + 1; }
      v.start = umd_window(xo, (long long)v.n, &v.ratio);
      v.norm_aa = 1.0; v.norm_ex = 1.0;
      if (aa) {
        double s = 0.0;
        for (unsigned long long j = 0; j < v.n; ++j) s += umd_coeff(kind, 0, aa, cubic_a, v.scale, v.ratio, j);
        v.norm_aa = s;
      }
      if (exclude) {
        double s = umd_np_sum(v, kind, aa, cubic_a, 0, v.n);
        v.norm_ex = s == 0.0 ? 1.0 : s;
      }
    }
    double result;
    if (lo == nlev) {
      result = leaf_ev ? ev : umd_ld(x[base]);
    } else {
      unsigned long long j[8], offs[8];
      double acc[8];
      for (unsigned int l = lo; l < nlev; ++l) {
        j[l] = 0; acc[l] = 0.0; offs[l] = umd_clamp_idx(L[l].start, L[l].w) * L[l].stride;
      }
      for (;;) {
        unsigned long long src = base;
        for (unsigned int l = lo; l < nlev; ++l) src += offs[l];
        double leaf = leaf_ev ? ev : umd_ld(x[src]);
        acc[lo] += leaf * umd_weight(L[lo], kind, aa, exclude, cubic_a, j[lo]);
        unsigned int l = lo;
        bool done = false;
        for (;;) {
          j[l] += 1;
          if (j[l] < L[l].n) { offs[l] = umd_clamp_idx(L[l].start + (long long)j[l], L[l].w) * L[l].stride; break; }
          if (l == nlev - 1) { done = true; break; }
          j[l] = 0;
          offs[l] = umd_clamp_idx(L[l].start, L[l].w) * L[l].stride;
          acc[l + 1] += acc[l] * umd_weight(L[l + 1], kind, aa, exclude, cubic_a, j[l + 1]);
          acc[l] = 0.0;
          l += 1;
        }
        if (done) { result = acc[nlev - 1]; break; }
      }
    }
    out[o] = umd_st(result);
  }
}
"#;

/// `umd_ld` (element → double) and `umd_st` (double → element, numpy's saturate_cast).
fn conversions(dt: Dtype) -> String {
    let CudaType {
        storage: t, load, ..
    } = dtype::cuda_type(dt).expect("numeric dtype");
    let ld = format!(
        "__device__ __forceinline__ double umd_ld({t} v) {{ return (double)({}); }}\n",
        load.replace('X', "v")
    );
    let clip = |m: &str| format!("double m = {m}; v = v < -m ? -m : (v > m ? m : v);");
    let int = |lo: &str, hi: &str| {
        format!("v = rint(v); v = v < {lo} ? {lo} : (v > {hi} ? {hi} : v); return ({t})v;")
    };
    let body = match dt {
        Dtype::F32 => format!("{} return (float)v;", clip("3.4028234663852886e38")),
        Dtype::F64 => format!("{} return v;", clip("1.7976931348623157e308")),
        Dtype::F16 => format!(
            "{} umd_half h; asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h) : \"d\"(v)); return h;",
            clip("65504.0")
        ),
        Dtype::Bf16 => format!(
            "{} return umd_f2b((float)v);",
            clip("3.3895313892515355e38")
        ),
        Dtype::I32 => int("-2147483648.0", "2147483647.0"),
        Dtype::I64 => int("-9223372036854775808.0", "9223372036854775807.0"),
        Dtype::I8 => int("-128.0", "127.0"),
        Dtype::I16 => int("-32768.0", "32767.0"),
        Dtype::U16 => int("0.0", "65535.0"),
        Dtype::U32 => int("0.0", "4294967295.0"),
        // 2^64 as a double: the PTX conversion saturates it to the largest u64
        Dtype::U64 => int("0.0", "18446744073709551615.0"),
        _ => int("0.0", "255.0"),
    };
    format!("{ld}__device__ __forceinline__ {t} umd_st(double v) {{ {body} }}\n")
}

/// The body of module `gather_resize_{dt}` (after the shared header) and its entry point.
pub fn interp_module(dt: Dtype) -> (String, String) {
    let t = dtype::cuda_type(dt).expect("numeric dtype").storage;
    let name = dtype::name(dt);
    let code = format!(
        "{DEVICE}{}{}",
        conversions(dt),
        INTERP.replace("$NAME", name).replace("$T", t)
    );
    (code, format!("resize_interp_{name}"))
}
