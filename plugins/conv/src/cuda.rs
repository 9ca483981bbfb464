//! The CUDA C module `conv_{dtype}`: direct kernels, one thread per output element (grid-stride
//! loop), the rank-generic index math in registers over three spatial dimensions. Every entry
//! point takes its pointers and then `struct conv_geom` (= [`crate::geom::Geom`]) by value
//! (`conv_fused` then `double eps, unsigned flags`, Clip's two bound pointers and LeakyRelu's
//! `double alpha`).
//!
//! Float modules hold `conv`, `conv_bias`, `conv_fused` (a conv with an epilogue: `crate::fused`), `convt`, `convt_bias`, `maxpool`, `maxpool_idx`,
//! `avgpool` and `lppool`; the i8/u8 modules only the two MaxPool entries.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

/// The parameter struct, the grid-stride loop and the window arithmetic every module shares.
pub const GEOM: &str = r#"
struct conv_geom {
  long long n, c, m, group, cg, mg;
  long long in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  long long flags;
  double p;
};
#define GRID_LOOP(i, total) \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
       i += (long long)gridDim.x * blockDim.x)
/* The k in [0, n) with 0 <= start + k * step < lim. */
__device__ __forceinline__ void umd_krange(long long start, long long step, long long n,
                                           long long lim, long long* lo, long long* hi) {
  long long l = start >= 0 ? 0 : (-start + step - 1) / step;
  long long h = start >= lim ? 0 : (lim - 1 - start) / step + 1;
  if (h > n) h = n;
  if (l > h) l = h;
  *lo = l; *hi = h;
}
/* Splits output index i into (rest, oz, oy, ox). */
__device__ __forceinline__ long long umd_unravel(long long i, const conv_geom& g, long long* oz,
                                                 long long* oy, long long* ox) {
  *ox = i % g.out[2]; i /= g.out[2];
  *oy = i % g.out[1]; i /= g.out[1];
  *oz = i % g.out[0]; return i / g.out[0];
}
"#;

const COMMON: &str = r#"
/* MaxPool over one window; col-major (storage_order 1) indices on request. */
template <bool IDX>
__device__ __forceinline__ void maxpool_body(const T* __restrict__ x, T* __restrict__ y,
                                             long long* __restrict__ idx, const conv_geom& g) {
  const long long total = g.n * g.c * g.out[0] * g.out[1] * g.out[2];
  const long long in_sz = g.in[0] * g.in[1] * g.in[2];
  GRID_LOOP(i, total) {
    long long oz, oy, ox;
    const long long nc = umd_unravel(i, g, &oz, &oy, &ox);
    const long long bz = oz * g.s[0] - g.pb[0], by = oy * g.s[1] - g.pb[1],
                    bx = ox * g.s[2] - g.pb[2];
    long long z0, z1, y0, y1, x0, x1;
    umd_krange(bz, g.d[0], g.k[0], g.in[0], &z0, &z1);
    umd_krange(by, g.d[1], g.k[1], g.in[1], &y0, &y1);
    umd_krange(bx, g.d[2], g.k[2], g.in[2], &x0, &x1);
    const T* xp = x + nc * in_sz;
    ACC best = LOWEST;
    long long az = -1, ay = -1, ax = -1;
    bool have = false;
    for (long long kz = z0; kz < z1; ++kz) {
      const long long iz = bz + kz * g.d[0];
      for (long long ky = y0; ky < y1; ++ky) {
        const long long iy = by + ky * g.d[1];
        const long long row = (iz * g.in[1] + iy) * g.in[2];
        for (long long kx = x0; kx < x1; ++kx) {
          const long long ix = bx + kx * g.d[2];
          const ACC v = LD(xp[row + ix]);
          if (!have || v > best || (v != v && best == best)) {
            best = v; az = iz; ay = iy; ax = ix; have = true;
          }
        }
      }
    }
    y[i] = ST(best);
    if (IDX) {
      long long at = -1;
      if (have) {
        at = nc * in_sz + ((g.flags & 2) ? az + g.in[0] * (ay + g.in[1] * ax)
                                          : (az * g.in[1] + ay) * g.in[2] + ax);
      }
      idx[i] = at;
    }
  }
}
extern "C" __global__ void maxpool_DT(const T* __restrict__ x, T* __restrict__ y, conv_geom g) {
  maxpool_body<false>(x, y, 0, g);
}
extern "C" __global__ void maxpool_idx_DT(const T* __restrict__ x, T* __restrict__ y,
                                          long long* __restrict__ idx, conv_geom g) {
  maxpool_body<true>(x, y, idx, g);
}
"#;

const FLOAT: &str = r#"
/* The epilogue of conv_fused (flags: 1 bias, 2 BatchNormalization, 16 per-channel Mul,
   32 per-channel Add, 4 residual, 8 Relu, 64 and 128 Clip's min and max, 256 LeakyRelu), in
   the order the fused chain computes it. */
struct conv_epi {
  const T* sc; const T* bb; const T* mean; const T* var; const T* r; const T* mul;
  const T* add; double eps; unsigned flags; const T* lo; const T* hi; double alpha;
};
template <bool BIAS, bool EPI>
__device__ __forceinline__ void conv_body(const T* __restrict__ x, const T* __restrict__ w,
                                          const T* __restrict__ b, T* __restrict__ y,
                                          const conv_geom& g, const conv_epi& e) {
  const long long total = g.n * g.m * g.out[0] * g.out[1] * g.out[2];
  const long long in_sz = g.in[0] * g.in[1] * g.in[2];
  const long long ks = g.k[0] * g.k[1] * g.k[2];
  GRID_LOOP(i, total) {
    long long oz, oy, ox;
    const long long t = umd_unravel(i, g, &oz, &oy, &ox);
    const long long m = t % g.m, n = t / g.m, grp = m / g.mg;
    const long long bz = oz * g.s[0] - g.pb[0], by = oy * g.s[1] - g.pb[1],
                    bx = ox * g.s[2] - g.pb[2];
    long long z0, z1, y0, y1, x0, x1;
    umd_krange(bz, g.d[0], g.k[0], g.in[0], &z0, &z1);
    umd_krange(by, g.d[1], g.k[1], g.in[1], &y0, &y1);
    umd_krange(bx, g.d[2], g.k[2], g.in[2], &x0, &x1);
    const T* xg = x + (n * g.c + grp * g.cg) * in_sz;
    const T* wm = w + m * g.cg * ks;
    ACC acc = 0;
    for (long long c = 0; c < g.cg; ++c) {
      const T* xc = xg + c * in_sz;
      const T* wc = wm + c * ks;
      for (long long kz = z0; kz < z1; ++kz) {
        const long long iz = bz + kz * g.d[0];
        for (long long ky = y0; ky < y1; ++ky) {
          const long long row = (iz * g.in[1] + by + ky * g.d[1]) * g.in[2] + bx;
          const T* wr = wc + (kz * g.k[1] + ky) * g.k[2];
          for (long long kx = x0; kx < x1; ++kx) acc += LD(xc[row + kx * g.d[2]]) * LD(wr[kx]);
        }
      }
    }
    if (BIAS) acc += LD(b[m]);
    if (EPI) { /* values rounded to T between stages, as the chain stores them */
      if (e.flags & 1u) acc += LD(b[m]);
      if (e.flags & 2u) {
        const ACC a = (ACC)((double)LD(e.sc[m]) / sqrt((double)LD(e.var[m]) + e.eps));
        acc = (LD(ST(acc)) - LD(e.mean[m])) * a + LD(e.bb[m]);
      }
      if (e.flags & 16u) acc = LD(ST(acc)) * LD(e.mul[m]);
      if (e.flags & 32u) acc = LD(ST(acc)) + LD(e.add[m]);
      if (e.flags & 4u) acc = LD(ST(acc)) + LD(e.r[i]);
      if ((e.flags & 8u) && acc < (ACC)0) acc = (ACC)0; /* NaN stays NaN */
      if (e.flags & 256u) { /* LeakyRelu of the stored value; NaN stays NaN */
        acc = LD(ST(acc));
        if (!(acc > (ACC)0)) acc = (ACC)e.alpha * acc;
      }
      if (e.flags & 64u) { const ACC l = LD(e.lo[0]); if (acc < l) acc = l; }
      if (e.flags & 128u) { const ACC h = LD(e.hi[0]); if (acc > h) acc = h; }
    }
    y[i] = ST(acc);
  }
}
extern "C" __global__ void conv_DT(const T* __restrict__ x, const T* __restrict__ w,
                                   T* __restrict__ y, conv_geom g) {
  conv_body<false, false>(x, w, 0, y, g, conv_epi{});
}
extern "C" __global__ void conv_bias_DT(const T* __restrict__ x, const T* __restrict__ w,
                                        const T* __restrict__ b, T* __restrict__ y, conv_geom g) {
  conv_body<true, false>(x, w, b, y, g, conv_epi{});
}
extern "C" __global__ void conv_fused_DT(const T* __restrict__ x, const T* __restrict__ w,
                                         const T* __restrict__ b, const T* __restrict__ sc,
                                         const T* __restrict__ bb, const T* __restrict__ mean,
                                         const T* __restrict__ var, const T* __restrict__ r,
                                         const T* __restrict__ mul, const T* __restrict__ add,
                                         T* __restrict__ y, conv_geom g, double eps,
                                         unsigned flags, const T* __restrict__ lo,
                                         const T* __restrict__ hi, double alpha) {
  conv_body<false, true>(x, w, b, y, g,
                         conv_epi{sc, bb, mean, var, r, mul, add, eps, flags, lo, hi, alpha});
}

/* ConvTranspose as a gather: output o takes input i wherever i*s - pb + k*d == o, i.e. the taps
   k with a - k*d divisible by s (a = o + pb): a first tap k0, every ks = s/gcd(s,d) after it,
   the input index falling by is = ks*d/s per tap. */
__device__ __forceinline__ void umd_taps(long long a, long long s, long long d, long long k,
                                         long long* k0, long long* ks, long long* i0,
                                         long long* is) {
  long long x = s, y = d;
  while (y) { const long long t = x % y; x = y; y = t; }
  *ks = s / x;
  *is = *ks * d / s;
  *k0 = k;
  *i0 = -1;
  for (long long t = 0; t < *ks && t < k; ++t) {
    if ((a - t * d) % s == 0) { *k0 = t; *i0 = (a - t * d) / s; break; }
  }
}
template <bool BIAS>
__device__ __forceinline__ void convt_body(const T* __restrict__ x, const T* __restrict__ w,
                                           const T* __restrict__ b, T* __restrict__ y,
                                           const conv_geom& g) {
  const long long total = g.n * g.m * g.out[0] * g.out[1] * g.out[2];
  const long long in_sz = g.in[0] * g.in[1] * g.in[2];
  const long long ks = g.k[0] * g.k[1] * g.k[2];
  GRID_LOOP(i, total) {
    long long oz, oy, ox;
    const long long t = umd_unravel(i, g, &oz, &oy, &ox);
    const long long m = t % g.m, n = t / g.m, grp = m / g.mg, mi = m % g.mg;
    long long z0, zs, iz0, izs, y0, ys, iy0, iys, x0, xs, ix0, ixs;
    umd_taps(oz + g.pb[0], g.s[0], g.d[0], g.k[0], &z0, &zs, &iz0, &izs);
    umd_taps(oy + g.pb[1], g.s[1], g.d[1], g.k[1], &y0, &ys, &iy0, &iys);
    umd_taps(ox + g.pb[2], g.s[2], g.d[2], g.k[2], &x0, &xs, &ix0, &ixs);
    ACC acc = 0;
    for (long long c = 0; c < g.cg; ++c) {
      const long long ic = grp * g.cg + c;
      const T* xc = x + (n * g.c + ic) * in_sz;
      const T* wc = w + (ic * g.mg + mi) * ks;
      for (long long kz = z0, iz = iz0; kz < g.k[0] && iz >= 0; kz += zs, iz -= izs) {
        if (iz >= g.in[0]) continue;
        for (long long ky = y0, iy = iy0; ky < g.k[1] && iy >= 0; ky += ys, iy -= iys) {
          if (iy >= g.in[1]) continue;
          const long long row = (iz * g.in[1] + iy) * g.in[2];
          const T* wr = wc + (kz * g.k[1] + ky) * g.k[2];
          for (long long kx = x0, ix = ix0; kx < g.k[2] && ix >= 0; kx += xs, ix -= ixs) {
            if (ix < g.in[2]) acc += LD(xc[row + ix]) * LD(wr[kx]);
          }
        }
      }
    }
    if (BIAS) acc += LD(b[m]);
    y[i] = ST(acc);
  }
}
extern "C" __global__ void convt_DT(const T* __restrict__ x, const T* __restrict__ w,
                                    T* __restrict__ y, conv_geom g) {
  convt_body<false>(x, w, 0, y, g);
}
extern "C" __global__ void convt_bias_DT(const T* __restrict__ x, const T* __restrict__ w,
                                         const T* __restrict__ b, T* __restrict__ y,
                                         conv_geom g) {
  convt_body<true>(x, w, b, y, g);
}

/* AveragePool and LpPool: a sum over the window's in-bounds elements. */
template <bool LP>
__device__ __forceinline__ void sumpool_body(const T* __restrict__ x, T* __restrict__ y,
                                             const conv_geom& g) {
  const long long total = g.n * g.c * g.out[0] * g.out[1] * g.out[2];
  const long long in_sz = g.in[0] * g.in[1] * g.in[2];
  const ACC p = (ACC)g.p;
  GRID_LOOP(i, total) {
    long long oz, oy, ox;
    const long long nc = umd_unravel(i, g, &oz, &oy, &ox);
    const long long bz = oz * g.s[0] - g.pb[0], by = oy * g.s[1] - g.pb[1],
                    bx = ox * g.s[2] - g.pb[2];
    long long z0, z1, y0, y1, x0, x1;
    umd_krange(bz, g.d[0], g.k[0], g.in[0], &z0, &z1);
    umd_krange(by, g.d[1], g.k[1], g.in[1], &y0, &y1);
    umd_krange(bx, g.d[2], g.k[2], g.in[2], &x0, &x1);
    const T* xp = x + nc * in_sz;
    ACC sum = 0;
    for (long long kz = z0; kz < z1; ++kz) {
      const long long iz = bz + kz * g.d[0];
      for (long long ky = y0; ky < y1; ++ky) {
        const long long row = (iz * g.in[1] + by + ky * g.d[1]) * g.in[2] + bx;
        for (long long kx = x0; kx < x1; ++kx) {
          const ACC v = LD(xp[row + kx * g.d[2]]);
          if (LP) {
            sum += p == (ACC)1 ? FABS(v) : p == (ACC)2 ? v * v : POW(FABS(v), p);
          } else {
            sum += v;
          }
        }
      }
    }
    ACC r;
    if (LP) {
      r = p == (ACC)1 ? sum : p == (ACC)2 ? SQRT(sum) : POW(sum, (ACC)1 / p);
    } else {
      long long count = (z1 - z0) * (y1 - y0) * (x1 - x0);
      if (g.flags & 1) {
        long long a, b;
        count = 1;
        for (int d = 0; d < 3; ++d) {
          const long long o = d == 0 ? oz : d == 1 ? oy : ox;
          umd_krange(o * g.s[d], g.d[d], g.k[d], g.in[d] + g.pb[d] + g.pe[d], &a, &b);
          count *= b - a;
        }
      }
      r = sum / (ACC)count;
    }
    y[i] = ST(r);
  }
}
extern "C" __global__ void avgpool_DT(const T* __restrict__ x, T* __restrict__ y, conv_geom g) {
  sumpool_body<false>(x, y, g);
}
extern "C" __global__ void lppool_DT(const T* __restrict__ x, T* __restrict__ y, conv_geom g) {
  sumpool_body<true>(x, y, g);
}
"#;

/// Entry-point kernels of a dtype's module.
pub fn kernels(dt: Dtype) -> &'static [&'static str] {
    if matches!(dt, Dtype::I8 | Dtype::U8) {
        &["maxpool", "maxpool_idx"]
    } else {
        &[
            "conv",
            "conv_bias",
            "conv_fused",
            "convt",
            "convt_bias",
            "maxpool",
            "maxpool_idx",
            "avgpool",
            "lppool",
        ]
    }
}

/// The module `conv_{dt}`.
pub fn module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage,
        compute,
        load,
        store,
    } = dtype::cuda_type(dt).expect("every served dtype has a CUDA type");
    let name = dtype::name(dt);
    let (lowest, math) = match dt {
        Dtype::F64 => (
            "(-__longlong_as_double(0x7ff0000000000000LL))",
            "#define FABS(X) fabs(X)\n#define SQRT(X) sqrt(X)\n#define POW(X, Y) pow(X, Y)\n",
        ),
        Dtype::I8 => ("(-128)", ""),
        Dtype::U8 => ("0", ""),
        _ => (
            "(-__int_as_float(0x7f800000))",
            "#define FABS(X) fabsf(X)\n#define SQRT(X) sqrtf(X)\n#define POW(X, Y) powf(X, Y)\n",
        ),
    };
    let mut code = format!(
        "{CUDA_PRELUDE}\ntypedef {storage} T;\ntypedef {compute} ACC;\n#define LD(X) {}\n\
         #define ST(X) {}\n#define LOWEST {lowest}\n{math}",
        load.replace('X', "(X)"),
        store.replace('X', "(X)"),
    );
    code.push_str(GEOM);
    code.push_str(COMMON);
    if !math.is_empty() {
        code.push_str(FLOAT);
    }
    let code = code.replace("_DT(", &format!("_{name}("));
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: kernels(dt).iter().map(|k| format!("{k}_{name}")).collect(),
        options: vec!["--std=c++17".into()],
    }
}
