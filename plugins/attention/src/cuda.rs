//! CUDA C: one module `attention_{T}` per dtype with the entry points `attention_{T}` (one
//! block per query row, see [`crate::attention`]) and `rotary_{T}` (one thread per element, see
//! [`crate::rotary`]), `causalconv_{T}` and `linear_{T}` (one thread per output element /
//! state column, see [`crate::conv`], [`crate::linear`]) and `swiglu_{T}` ([`crate::swiglu`]). Reductions over a row are block-wide (warp shuffles, then one shared slot
//! per warp); the probabilities of up to a block's worth of keys are staged in shared memory
//! while each thread accumulates its share of the output row.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::attention::{MAX_PER_THREAD, THREADS};
use crate::linear::MAX_DK;

const HELPERS: &str = r#"
typedef unsigned long long u64;
typedef long long i64;
// umd_nan_max, umd_block_sum and umd_block_max: umd_sdk::cuda::HELPERS (included before this)
"#;

const ATTENTION: &str = r#"
struct umd_row {
  const T* q; const T* k; const T* v; const void* mask; const T* pk; const T* pv;
  u64 b, h, i, hk, Hkv, P, Dk, Dv, mlen, kb, kh, ks, vb, vh, vs, mb, mh, mq, mj;
  unsigned int flags; C ss, softcap; i64 off, left, right, nonpad;
};
__device__ __forceinline__ const T* umd_key(const umd_row& r, u64 t) {
  return t < r.P ? r.pk + ((r.b * r.Hkv + r.hk) * r.P + t) * r.Dk
                 : r.k + r.b * r.kb + r.hk * r.kh + (t - r.P) * r.ks;
}
__device__ __forceinline__ const T* umd_value(const umd_row& r, u64 t) {
  return t < r.P ? r.pv + ((r.b * r.Hkv + r.hk) * r.P + t) * r.Dv
                 : r.v + r.b * r.vb + r.hk * r.vh + (t - r.P) * r.vs;
}
// the additive bias of key j (mask + causal + window + padding terms, each 0 or -inf but the mask)
__device__ C umd_bias(const umd_row& r, u64 j) {
  C bias = (C)0;
  if (r.flags & 2u) {
    if (j < r.mlen) {
      u64 mi = r.b * r.mb + r.h * r.mh + r.i * r.mq + j * r.mj;
      bias = (r.flags & 4u) ? (((const unsigned char*)r.mask)[mi] ? (C)0 : umd_ninf())
                            : umd_ld(((const T*)r.mask)[mi]);
    } else {
      bias = umd_ninf();
    }
  }
  i64 pos = (i64)r.i + r.off;
  if (r.flags & 1u) bias += (i64)j <= pos ? (C)0 : umd_ninf();
  if (r.flags & 128u) {
    i64 diff = pos - (i64)j;
    bool ok = (r.left < 0 || diff <= r.left) && (r.right < 0 || -diff <= r.right);
    bias += ok ? (C)0 : umd_ninf();
  }
  if (r.flags & 16u) bias += (i64)j < r.nonpad ? (C)0 : umd_ninf();
  return bias;
}
// exp(x - safe), rounded to T after each step when `rnd`
__device__ __forceinline__ C umd_sexp(C x, C safe, bool rnd) {
  return rnd ? umd_rnd(umd_exp(umd_rnd(x - safe))) : umd_exp(x - safe);
}
// the score of key j after softcap (`raw`) and with the bias (returned), rounded as the reference
__device__ C umd_score(const umd_row& r, u64 j, C* raw, C* bias) {
  const T* kr = umd_key(r, j);
  C acc = (C)0;
  for (u64 d = 0; d < r.Dk; ++d) acc += umd_rnd(umd_ld(r.q[d]) * r.ss) * umd_rnd(umd_ld(kr[d]) * r.ss);
  acc = umd_rnd(acc);
  if (r.softcap > (C)0) acc = umd_rnd(r.softcap * umd_tanh(acc / r.softcap));
  *raw = acc;
  *bias = umd_bias(r, j);
  return umd_rnd(acc + *bias);
}
extern "C" __global__ void attention_NAME(unsigned int flags, unsigned int mode,
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
    const void* __restrict__ mask, const T* __restrict__ pk, const T* __restrict__ pv,
    const i64* __restrict__ nonpad, T* __restrict__ y, T* __restrict__ prk,
    T* __restrict__ prv, T* __restrict__ qk,
    u64 B, u64 Hq, u64 Hkv, u64 Sq, u64 Skv, u64 P, u64 Dk, u64 Dv, u64 mlen,
    u64 qb, u64 qh, u64 qs, u64 kb, u64 kh, u64 ks, u64 vb, u64 vh, u64 vs,
    u64 yb, u64 yh, u64 ys, u64 mb, u64 mh, u64 mq, u64 mj,
    double sscale, double softcap, i64 left, i64 right) {
  __shared__ C sh[32];
  __shared__ C pch[THREADS];
  u64 T_ = P + Skv;
  u64 stride = (u64)blockDim.x * gridDim.x;
  u64 first = blockIdx.x * (u64)blockDim.x + threadIdx.x;
  // the present caches: past rows then the new ones, [B, Hkv, T, D]
  if (flags & 32u) {
    for (u64 e = first; e < B * Hkv * T_ * Dk; e += stride) {
      u64 d = e % Dk, rr = e / Dk, t = rr % T_, bh = rr / T_, hk = bh % Hkv, b = bh / Hkv;
      prk[e] = t < P ? pk[(bh * P + t) * Dk + d] : k[b * kb + hk * kh + (t - P) * ks + d];
    }
  }
  if (flags & 256u) {
    for (u64 e = first; e < B * Hkv * T_ * Dv; e += stride) {
      u64 d = e % Dv, rr = e / Dv, t = rr % T_, bh = rr / T_, hk = bh % Hkv, b = bh / Hkv;
      prv[e] = t < P ? pv[(bh * P + t) * Dv + d] : v[b * vb + hk * vh + (t - P) * vs + d];
    }
  }
  umd_row r;
  r.k = k; r.v = v; r.mask = mask; r.pk = pk; r.pv = pv; r.Hkv = Hkv; r.P = P; r.Dk = Dk;
  r.Dv = Dv; r.mlen = mlen; r.kb = kb; r.kh = kh; r.ks = ks; r.vb = vb; r.vh = vh; r.vs = vs;
  r.mb = mb; r.mh = mh; r.mq = mq; r.mj = mj; r.flags = flags; r.ss = (C)sscale;
  r.softcap = (C)softcap; r.left = left; r.right = right;
  u64 rep = Hq / Hkv;
  for (u64 row = blockIdx.x; row < B * Hq * Sq; row += gridDim.x) {
    r.i = row % Sq;
    u64 bh = row / Sq;
    r.h = bh % Hq;
    r.b = bh / Hq;
    r.hk = r.h / rep;
    r.q = q + r.b * qb + r.h * qh + r.i * qs;
    r.nonpad = (flags & 16u) ? nonpad[r.b] : 0;
    r.off = (flags & 8u) ? (i64)P : ((flags & 16u) ? r.nonpad - (i64)Sq : 0);
    // pass 1: the maxima of the scores and of the bias
    C xm = umd_ninf(), bm = umd_ninf(), raw, bias;
    for (u64 j = threadIdx.x; j < T_; j += blockDim.x) {
      C x = umd_score(r, j, &raw, &bias);
      xm = umd_nan_max(xm, x);
      bm = umd_nan_max(bm, bias);
    }
    xm = umd_block_max(xm, sh, umd_ninf());
    bm = umd_block_max(bm, sh, umd_ninf());
    bool masked = bm == umd_ninf();
    C safe = xm == umd_ninf() ? (C)0 : xm;
    // pass 2: the sum of the exponentials, in key order (a chunk at a time, by thread 0)
    bool rnd = (flags & 512u) != 0, seq = (flags & 1024u) != 0;
    C s = (C)0;
    for (u64 j0 = 0; j0 < T_; j0 += blockDim.x) {
      u64 j = j0 + threadIdx.x;
      if (j < T_) pch[threadIdx.x] = umd_sexp(umd_score(r, j, &raw, &bias), safe, rnd);
      __syncthreads();
      if (threadIdx.x == 0) {
        u64 n = T_ - j0 < blockDim.x ? T_ - j0 : blockDim.x;
        for (u64 jj = 0; jj < n; ++jj) s = seq ? umd_rnd(s + pch[jj]) : s + pch[jj];
        sh[0] = rnd ? umd_rnd(s) : s;
      }
      __syncthreads();
    }
    s = T_ > 0 ? sh[0] : (C)0;
    __syncthreads();
    if (s == (C)0) s = (C)1;
    // pass 3: probabilities a chunk of keys at a time, then each thread's output elements
    C acc[MAXR];
    for (int m = 0; m < MAXR; ++m) acc[m] = (C)0;
    for (u64 j0 = 0; j0 < T_; j0 += blockDim.x) {
      u64 j = j0 + threadIdx.x;
      if (j < T_) {
        C x = umd_score(r, j, &raw, &bias);
        C p = umd_sexp(x, safe, rnd) / s;
        p = masked ? (C)0 : (rnd ? umd_rnd(p) : p);
        if (flags & 64u) qk[row * T_ + j] = umd_st(mode == 3u ? p : (mode == 2u ? x : raw));
        pch[threadIdx.x] = (flags & 2048u) ? p : umd_rnd(p);
      }
      __syncthreads();
      u64 n = T_ - j0 < blockDim.x ? T_ - j0 : blockDim.x;
      for (int m = 0; m < MAXR; ++m) {
        u64 d = threadIdx.x + (u64)m * blockDim.x;
        if (d < Dv) {
          for (u64 jj = 0; jj < n; ++jj) acc[m] += pch[jj] * umd_ld(umd_value(r, j0 + jj)[d]);
        }
      }
      __syncthreads();
    }
    T* yr = y + r.b * yb + r.h * yh + r.i * ys;
    for (int m = 0; m < MAXR; ++m) {
      u64 d = threadIdx.x + (u64)m * blockDim.x;
      if (d < Dv) yr[d] = umd_st(acc[m]);
    }
  }
}
"#;

const ROTARY: &str = r#"
extern "C" __global__ void rotary_NAME(unsigned int flags, const T* __restrict__ x,
    const T* __restrict__ cosc, const T* __restrict__ sinc, const i64* __restrict__ pos,
    T* __restrict__ y, u64 n, u64 D, u64 A1, u64 A2, u64 S, u64 rd, u64 rows) {
  u64 half = rd / 2;
  for (u64 o = blockIdx.x * (u64)blockDim.x + threadIdx.x; o < n; o += (u64)blockDim.x * gridDim.x) {
    u64 d = o % D, rr = o / D, a2 = rr % A2, r1 = rr / A2, a1 = r1 % A1, b = r1 / A1;
    if (d >= rd) { y[o] = x[o]; continue; }
    u64 s = (flags & 4u) ? a1 : a2;
    u64 row = b * S + s;
    bool ok = true;
    if (flags & 2u) {
      i64 p = pos[row];
      ok = p >= 0 && (u64)p < rows;
      row = ok ? (u64)p : 0;
    }
    u64 i, d1, d2;
    bool second;
    if (flags & 1u) { i = d / 2; d1 = d & ~1ull; d2 = d1 + 1; second = (d & 1ull) != 0; }
    else { i = d < half ? d : d - half; d1 = i; d2 = i + half; second = d >= half; }
    if (!ok) { y[o] = umd_st(umd_nan()); continue; }
    C c = umd_ld(cosc[row * half + i]), sn = umd_ld(sinc[row * half + i]);
    C x1 = umd_ld(x[o - d + d1]), x2 = umd_ld(x[o - d + d2]);
    y[o] = umd_st(second ? sn * x1 + c * x2 : c * x1 - sn * x2);
  }
}
"#;

const STATE: &str = r#"
extern "C" __global__ void causalconv_NAME(unsigned int flags, const T* __restrict__ x,
    const T* __restrict__ w, const T* __restrict__ bias, const T* __restrict__ past,
    T* __restrict__ y, T* __restrict__ state, u64 B, u64 Cc, u64 L, u64 K) {
  u64 n = B * Cc * L, ns = B * Cc * (K - 1);
  for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < n + ns; e += (u64)blockDim.x * gridDim.x) {
    // padded[bc, p]: the past state (zeros without one) then the input
#define UMD_PAD(bc, p) ((p) < K - 1 ? ((flags & 2u) ? umd_ld(past[(bc) * (K - 1) + (p)]) : (C)0) \
                                    : umd_ld(x[(bc) * L + (p) - (K - 1)]))
    if (e < n) {
      u64 t = e % L, bc = e / L, c = bc % Cc;
      C acc = (C)0;
      for (u64 j = 0; j < K; ++j) acc += umd_ld(w[c * K + j]) * UMD_PAD(bc, t + j);
      C v = umd_rnd(acc + ((flags & 1u) ? umd_ld(bias[c]) : (C)0));
      if (flags & 4u) v = v * ((C)1 / ((C)1 + umd_exp(-v)));
      y[e] = umd_st(v);
    } else {
      u64 s = e - n, p = s % (K - 1), bc = s / (K - 1);
      state[s] = umd_st(UMD_PAD(bc, L + p));
    }
#undef UMD_PAD
  }
}
extern "C" __global__ void linear_NAME(unsigned int flags, const T* __restrict__ q,
    const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ past,
    const T* __restrict__ decay, const T* __restrict__ beta, T* __restrict__ out,
    T* __restrict__ state, u64 B, u64 Tn, u64 Hq, u64 Hkv, u64 dk, u64 dv, u64 dl, u64 bl,
    double scale) {
  C col[MAXDK];
  u64 group = Hq / Hkv;
  for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < B * Hkv * dv; e += (u64)blockDim.x * gridDim.x) {
    u64 m = e % dv, bh = e / dv, hk = bh % Hkv, b = bh / Hkv;
    u64 so = bh * dk * dv;
    for (u64 d = 0; d < dk; ++d) col[d] = (flags & 1u) ? umd_ld(past[so + d * dv + m]) : (C)0;
    for (u64 t = 0; t < Tn; ++t) {
      u64 row = b * Tn + t;
      const T* kr = k + (row * Hkv + hk) * dk;
      if (flags & 2u) {
        for (u64 d = 0; d < dk; ++d)
          col[d] = col[d] * umd_exp(umd_ld(dl == Hkv ? decay[row * Hkv + hk] : decay[(row * Hkv + hk) * dk + d]));
      }
      C vt = umd_ld(v[(row * Hkv + hk) * dv + m]);
      if (flags & 4u) {
        C got = (C)0;
        for (u64 d = 0; d < dk; ++d) got += col[d] * umd_ld(kr[d]);
        vt = umd_ld(beta[row * bl + (bl == 1 ? 0 : hk)]) * (vt - got);
      }
      for (u64 d = 0; d < dk; ++d) col[d] += umd_ld(kr[d]) * vt;
      for (u64 g = 0; g < group; ++g) {
        u64 h = hk * group + g;
        const T* qr = q + (row * Hq + h) * dk;
        C o = (C)0;
        for (u64 d = 0; d < dk; ++d) o += umd_ld(qr[d]) * col[d];
        out[(row * Hq + h) * dv + m] = umd_st((C)scale * o);
      }
    }
    for (u64 d = 0; d < dk; ++d) state[so + d * dv + m] = umd_st(col[d]);
  }
}
"#;

/// The module `attention_{dt}`.
pub fn module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage,
        compute,
        load,
        store,
    } = dtype::cuda_type(dt).expect("served dtypes have a CUDA type");
    let name = dtype::name(dt);
    let double = compute == "double";
    let f = |fname: &str| {
        if double {
            fname.to_string()
        } else {
            format!("{fname}f")
        }
    };
    let (ninf, nan) = if double {
        (
            "__longlong_as_double(0xfff0000000000000ull)",
            "__longlong_as_double(0x7ff8000000000000ull)",
        )
    } else {
        ("__int_as_float(0xff800000)", "__int_as_float(0x7fc00000)")
    };
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(&format!(
        "typedef {storage} T;\ntypedef {compute} C;\n#define THREADS {THREADS}\n#define MAXR {MAX_PER_THREAD}\n#define MAXDK {MAX_DK}\n\
         __device__ __forceinline__ C umd_ld(T v) {{ return {ld}; }}\n\
         __device__ __forceinline__ T umd_st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C umd_rnd(C v) {{ return umd_ld(umd_st(v)); }}\n\
         __device__ __forceinline__ C umd_exp(C v) {{ return {exp}(v); }}\n\
         __device__ __forceinline__ C umd_tanh(C v) {{ return {tanh}(v); }}\n\
         __device__ __forceinline__ C umd_ninf() {{ return {ninf}; }}\n\
         __device__ __forceinline__ C umd_nan() {{ return {nan}; }}\n",
        ld = load.replace('X', "v"),
        st = store.replace('X', "v"),
        exp = f("exp"),
        tanh = f("tanh"),
    ));
    code.push_str(umd_sdk::cuda::HELPERS);
    code.push_str(HELPERS);
    code.push_str(&ATTENTION.replace("NAME", name));
    code.push_str(&ROTARY.replace("NAME", name));
    code.push_str(&STATE.replace("NAME", name));
    code.push_str(&crate::swiglu::KERNEL.replace("NAME", name));
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: vec![
            format!("attention_{name}"),
            format!("rotary_{name}"),
            format!("causalconv_{name}"),
            format!("linear_{name}"),
            format!("swiglu_{name}"),
        ],
        options: vec!["--std=c++17".into()],
    }
}
