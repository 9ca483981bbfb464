//! CUDA C: one module `norm_{T}` per dtype holding every entry point (`softmax_{T}_rows`,
//! `softmax_{T}_cols`, `normalize_{T}_{U}` for each statistics dtype `U`, `batchnorm_{T}`,
//! `lrn_{T}`). Reductions are block-wide: warp shuffles, then one shared slot per warp.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

/// Statistics dtypes a `normalize` entry of data dtype `dt` may write (LayerNorm's stash type
/// f32 or bf16, or the data's own dtype).
pub fn stat_dtypes(dt: Dtype) -> Vec<Dtype> {
    let mut v = vec![dt];
    for s in [Dtype::F32, Dtype::Bf16] {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

/// Shared device helpers over `T` (storage) and `C` (compute).
const HELPERS: &str = r#"
typedef unsigned long long u64;
// argmax order: the first NaN wins, then the first maximum; index ~0 is "nothing yet"
__device__ __forceinline__ bool umd_beats(C a, u64 ia, C b, u64 ib) {
  if (ia == ~0ull) return false;
  if (ib == ~0ull) return true;
  if (b != b) return a != a && ia < ib;
  if (a != a) return true;
  return a > b || (a == b && ia < ib);
}
// umd_nan_max, umd_block_sum and umd_block_max: umd_sdk::cuda::HELPERS (included before this)
__device__ u64 umd_block_argmax(C v, u64 i, C* sh, u64* shi) {
  for (int o = 16; o > 0; o >>= 1) {
    C w = __shfl_down_sync(0xffffffffu, v, o);
    u64 j = __shfl_down_sync(0xffffffffu, i, o);
    if (umd_beats(w, j, v, i)) { v = w; i = j; }
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) { sh[threadIdx.x >> 5] = v; shi[threadIdx.x >> 5] = i; }
  __syncthreads();
  if (threadIdx.x < 32) {
    bool have = threadIdx.x < (blockDim.x >> 5);
    v = have ? sh[threadIdx.x] : (C)0;
    i = have ? shi[threadIdx.x] : ~0ull;
    for (int o = 16; o > 0; o >>= 1) {
      C w = __shfl_down_sync(0xffffffffu, v, o);
      u64 j = __shfl_down_sync(0xffffffffu, i, o);
      if (umd_beats(w, j, v, i)) { v = w; i = j; }
    }
    if (threadIdx.x == 0) shi[0] = i;
  }
  __syncthreads();
  return shi[0];
}
#define UMD_GRID_STRIDE(i, n) for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; \
  i < (n); i += (u64)blockDim.x * gridDim.x)
"#;

/// Softmax family (see [`crate::softmax`]).
const SOFTMAX: &str = r#"
// modes 3/4 (a half type as numpy rounds it): the term exp(x - m), each step rounded to T
__device__ C umd_sm_term(const T* xr, u64 inner, u64 e, C m) {
  return umd_rt(umd_exp(umd_rt(umd_ld(xr[e * inner]) - m)));
}
// numpy's pairwise_sum of the terms [lo, lo + n): in order below 8, 8 running sums up to 128,
// else the two halves (the first a multiple of 8); the depth is log2(n / 128)
__device__ C umd_sm_pairwise(const T* xr, u64 inner, u64 lo, u64 n, C m) {
  if (n < 8) {
    C res = (C)0;
    for (u64 i = 0; i < n; ++i) res += umd_sm_term(xr, inner, lo + i, m);
    return res;
  }
  if (n <= 128) {
    C r[8];
    for (int j = 0; j < 8; ++j) r[j] = umd_sm_term(xr, inner, lo + j, m);
    u64 i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += umd_sm_term(xr, inner, lo + i + j, m);
    C res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += umd_sm_term(xr, inner, lo + i, m);
    return res;
  }
  u64 n2 = n / 2;
  n2 -= n2 % 8;
  return umd_sm_pairwise(xr, inner, lo, n2, m) + umd_sm_pairwise(xr, inner, lo + n2, n - n2, m);
}
extern "C" __global__ void softmax_NAME_rows(const T* __restrict__ x, T* __restrict__ y,
    u64 outer, u64 len, u64 inner, unsigned int mode) {
  __shared__ C sh[32];
  __shared__ u64 shi[32];
  u64 groups = outer * inner;
  for (u64 g = blockIdx.x; g < groups; g += gridDim.x) {
    u64 base = (g / inner) * len * inner + g % inner;
    const T* xr = x + base;
    T* yr = y + base;
    if (mode == 2) {
      C bv = (C)0; u64 bi = ~0ull;
      for (u64 e = threadIdx.x; e < len; e += blockDim.x) {
        C v = umd_ld(xr[e * inner]);
        if (umd_beats(v, e, bv, bi)) { bv = v; bi = e; }
      }
      bi = umd_block_argmax(bv, bi, sh, shi);
      for (u64 e = threadIdx.x; e < len; e += blockDim.x) yr[e * inner] = umd_st(e == bi ? (C)1 : (C)0);
      continue;
    }
    C m = umd_ninf();
    for (u64 e = threadIdx.x; e < len; e += blockDim.x) m = umd_nan_max(m, umd_ld(xr[e * inner]));
    m = umd_block_max(m, sh, umd_ninf());
    if (mode >= 3) {
      // a half type with numpy's rounding points (crate::softmax): the sum in element order
      if (threadIdx.x == 0) {
        C s = (C)0;
        if (mode == 4) {
          for (u64 e = 0; e < len; ++e) s = umd_rt(s + umd_sm_term(xr, inner, e, m));
        } else {
          s = umd_sm_pairwise(xr, inner, 0, len, m);
        }
        sh[0] = umd_rt(s);
      }
      __syncthreads();
      C s = sh[0];
      for (u64 e = threadIdx.x; e < len; e += blockDim.x)
        yr[e * inner] = umd_st(umd_sm_term(xr, inner, e, m) / s);
      __syncthreads();
      continue;
    }
    C s = (C)0;
    for (u64 e = threadIdx.x; e < len; e += blockDim.x) s += umd_exp(umd_ld(xr[e * inner]) - m);
    s = umd_block_sum(s, sh);
    if (mode == 0) {
      for (u64 e = threadIdx.x; e < len; e += blockDim.x)
        yr[e * inner] = umd_st(umd_exp(umd_ld(xr[e * inner]) - m) / s);
    } else {
      C l = umd_log(s);
      for (u64 e = threadIdx.x; e < len; e += blockDim.x)
        yr[e * inner] = umd_st((umd_ld(xr[e * inner]) - m) - l);
    }
  }
}
extern "C" __global__ void softmax_NAME_cols(const T* __restrict__ x, T* __restrict__ y,
    u64 outer, u64 len, u64 inner, unsigned int mode) {
  UMD_GRID_STRIDE(g, outer * inner) {
    u64 base = (g / inner) * len * inner + g % inner;
    const T* xr = x + base;
    T* yr = y + base;
    if (mode == 2) {
      C bv = (C)0; u64 bi = ~0ull;
      for (u64 e = 0; e < len; ++e) {
        C v = umd_ld(xr[e * inner]);
        if (umd_beats(v, e, bv, bi)) { bv = v; bi = e; }
      }
      for (u64 e = 0; e < len; ++e) yr[e * inner] = umd_st(e == bi ? (C)1 : (C)0);
      continue;
    }
    C m = umd_ninf();
    for (u64 e = 0; e < len; ++e) m = umd_nan_max(m, umd_ld(xr[e * inner]));
    if (mode >= 3) {
      // strided: the plan only gives mode 4 here (numpy adds strided columns in order)
      C s = (C)0;
      for (u64 e = 0; e < len; ++e) s = umd_rt(s + umd_sm_term(xr, inner, e, m));
      s = umd_rt(s);
      for (u64 e = 0; e < len; ++e) yr[e * inner] = umd_st(umd_sm_term(xr, inner, e, m) / s);
      continue;
    }
    C s = (C)0;
    for (u64 e = 0; e < len; ++e) s += umd_exp(umd_ld(xr[e * inner]) - m);
    C l = umd_log(s);
    for (u64 e = 0; e < len; ++e) {
      C d = umd_ld(xr[e * inner]) - m;
      yr[e * inner] = umd_st(mode == 0 ? umd_exp(d) / s : d - l);
    }
  }
}
"#;

/// Moment-based normalisation (see [`crate::stats`]); `U` is the statistics' storage type.
const NORMALIZE: &str = r#"
extern "C" __global__ void normalize_NAME_UNAME(unsigned int flags, unsigned int view,
    const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ scale,
    const T* __restrict__ bias, UT* __restrict__ mean_out, UT* __restrict__ invstd_out,
    const T* __restrict__ in_mean, const T* __restrict__ in_var, T* __restrict__ rm_out,
    T* __restrict__ rv_out, T* __restrict__ saved_mean, T* __restrict__ saved_var,
    u64 outer, u64 len, u64 inner, u64 gm, u64 ga, u64 ed, double eps, double momentum) {
  __shared__ C sh[32];
  u64 groups = view == 0 ? outer * inner : len;
  u64 count = view == 0 ? len : outer * inner;
  u64 plane = len * inner;
  for (u64 g = blockIdx.x; g < groups; g += gridDim.x) {
    // element e of group g: view 0 strided along the middle dim, view 1 over (outer, inner)
    u64 rowbase = view == 0 ? (g / inner) * plane + g % inner : 0;
#define UMD_OFF(e) (view == 0 ? rowbase + (e) * inner : ((e) / inner) * plane + g * inner + (e) % inner)
    // flags 512/1024/2048: no mean (RMS, L1, L2 norms); the flags are uniform over the block
    C mean = (C)0;
    if (!(flags & 3584u)) {
      C s = (C)0;
      for (u64 e = threadIdx.x; e < count; e += blockDim.x) s += umd_ld(x[UMD_OFF(e)]);
      mean = umd_block_sum(s, sh) / (C)count;
    }
    C q = (C)0;
    for (u64 e = threadIdx.x; e < count; e += blockDim.x) {
      C d = umd_ld(x[UMD_OFF(e)]) - mean;
      q += (flags & 1024u) ? (d < (C)0 ? -d : d) : d * d;
    }
    C tot = umd_block_sum(q, sh);
    C var = (flags & 3072u) ? tot : tot / (C)count;
    C inv;
    if (flags & 1024u) inv = tot == (C)0 ? (C)0 : (C)1 / tot;
    else if (flags & 2048u) inv = tot == (C)0 ? (C)0 : (C)1 / umd_sqrt(tot);
    else inv = (flags & 256u) ? (C)1 / (umd_sqrt(var) + (C)eps) : (C)1 / umd_sqrt(var + (C)eps);
    if (threadIdx.x == 0) {
      C mom = (C)momentum;
      if (flags & 4u) mean_out[g] = umd_st_u(mean);
      if (flags & 8u) invstd_out[g] = umd_st_u(inv);
      if (flags & 16u) rm_out[g] = umd_st(umd_ld(in_mean[g]) * mom + mean * ((C)1 - mom));
      if (flags & 32u) rv_out[g] = umd_st(umd_ld(in_var[g]) * mom + var * ((C)1 - mom));
      if (flags & 64u) saved_mean[g] = umd_st(mean);
      if (flags & 128u) saved_var[g] = umd_st(var);
    }
    u64 sbase = (g % gm) * ga;
    for (u64 e = threadIdx.x; e < count; e += blockDim.x) {
      u64 o = UMD_OFF(e);
      C v = (umd_ld(x[o]) - mean) * inv;
      u64 k = sbase + e / ed;
      if (flags & 1u) v *= umd_ld(scale[k]);
      if (flags & 2u) v += umd_ld(bias[k]);
      y[o] = umd_st(v);
    }
#undef UMD_OFF
  }
}
"#;

/// Element-wise normalisations (see [`crate::pointwise`]).
const POINTWISE: &str = r#"
extern "C" __global__ void batchnorm_NAME(const T* __restrict__ x, const T* __restrict__ scale,
    const T* __restrict__ bias, const T* __restrict__ mean, const T* __restrict__ var,
    T* __restrict__ y, u64 n, u64 channels, u64 inner, double eps) {
  UMD_GRID_STRIDE(i, n) {
    u64 c = (i / inner) % channels;
    C inv = (C)1 / umd_sqrt(umd_ld(var[c]) + (C)eps);
    y[i] = umd_st(umd_ld(scale[c]) * (umd_ld(x[i]) - umd_ld(mean[c])) * inv + umd_ld(bias[c]));
  }
}
/* BatchNormalization then, as flags say, x per-channel scale (1), + per-channel shift (2),
   Relu (4): a fused chain, values rounded to T between stages as the chain stores them. */
extern "C" __global__ void batchnorm_NAME_fused(const T* __restrict__ x,
    const T* __restrict__ scale, const T* __restrict__ bias, const T* __restrict__ mean,
    const T* __restrict__ var, const T* __restrict__ mul, const T* __restrict__ add,
    T* __restrict__ y, u64 n, u64 channels, u64 inner, double eps, unsigned flags) {
  UMD_GRID_STRIDE(i, n) {
    u64 c = (i / inner) % channels;
    C inv = (C)1 / umd_sqrt(umd_ld(var[c]) + (C)eps);
    C v = umd_ld(scale[c]) * (umd_ld(x[i]) - umd_ld(mean[c])) * inv + umd_ld(bias[c]);
    if (flags & 1u) v = umd_ld(umd_st(v)) * umd_ld(mul[c]);
    if (flags & 2u) v = umd_ld(umd_st(v)) + umd_ld(add[c]);
    if ((flags & 4u) && v < (C)0) v = (C)0; /* NaN stays NaN */
    y[i] = umd_st(v);
  }
}
extern "C" __global__ void lrn_NAME(const T* __restrict__ x, T* __restrict__ y, u64 n,
    u64 channels, u64 inner, u64 size, double alpha, double beta, double bias) {
  u64 before = (size - 1) / 2, after = size / 2;
  C k = (C)(alpha / (double)size);
  UMD_GRID_STRIDE(i, n) {
    u64 c = (i / inner) % channels;
    u64 base = i - c * inner;
    u64 lo = c >= before ? c - before : 0;
    u64 hi = c + after < channels ? c + after : channels - 1;
    C sum = (C)0;
    for (u64 cc = lo; cc <= hi; ++cc) {
      C v = umd_ld(x[base + cc * inner]);
      sum += v * v;
    }
    y[i] = umd_st(umd_ld(x[i]) / umd_pow((C)bias + k * sum, (C)beta));
  }
}
"#;

/// The module `norm_{dt}`.
pub fn module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage,
        compute,
        load,
        store,
    } = dtype::cuda_type(dt).expect("norm dtypes all have a CUDA type");
    let name = dtype::name(dt);
    let double = compute == "double";
    let f = |fname: &str| {
        if double {
            fname.to_string()
        } else {
            format!("{fname}f")
        }
    };
    let ninf = if double {
        "__longlong_as_double(0xfff0000000000000ull)"
    } else {
        "__int_as_float(0xff800000)"
    };
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(&format!(
        "typedef {storage} T;\ntypedef {compute} C;\n\
         __device__ __forceinline__ C umd_ld(T v) {{ return {ld}; }}\n\
         __device__ __forceinline__ T umd_st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C umd_rt(C v) {{ return umd_ld(umd_st(v)); }}\n\
         __device__ __forceinline__ C umd_exp(C v) {{ return {exp}(v); }}\n\
         __device__ __forceinline__ C umd_log(C v) {{ return {log}(v); }}\n\
         __device__ __forceinline__ C umd_sqrt(C v) {{ return {sqrt}(v); }}\n\
         __device__ __forceinline__ C umd_pow(C a, C b) {{ return {pow}(a, b); }}\n\
         __device__ __forceinline__ C umd_ninf() {{ return {ninf}; }}\n",
        ld = load.replace('X', "v"),
        st = store.replace('X', "v"),
        exp = f("exp"),
        log = f("log"),
        sqrt = f("sqrt"),
        pow = f("pow"),
    ));
    code.push_str(umd_sdk::cuda::HELPERS);
    code.push_str(HELPERS);
    code.push_str(&SOFTMAX.replace("NAME", name));
    code.push_str(&POINTWISE.replace("NAME", name));
    let mut entries = vec![
        format!("softmax_{name}_rows"),
        format!("softmax_{name}_cols"),
        format!("batchnorm_{name}"),
        format!("batchnorm_{name}_fused"),
        format!("lrn_{name}"),
    ];
    for u in stat_dtypes(dt) {
        let ut = dtype::cuda_type(u).expect("stat dtypes have a CUDA type");
        let uname = dtype::name(u);
        // each statistics dtype gets its own store function, named after it
        code.push_str(&format!(
            "__device__ __forceinline__ {us} umd_st_{uname}(C v) {{ return {st}; }}\n",
            us = ut.storage,
            st = ut.store.replace('X', &format!("(({})(v))", ut.compute)),
        ));
        code.push_str(
            &NORMALIZE
                .replace("UNAME", uname)
                .replace("NAME", name)
                .replace("UT*", &format!("{}*", ut.storage))
                .replace("umd_st_u(", &format!("umd_st_{uname}(")),
        );
        entries.push(format!("normalize_{name}_{uname}"));
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    }
}
