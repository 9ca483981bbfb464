//! CUDA C: one module `recurrent_{T}` per dtype with the entry points `rnn_{T}`, `lstm_{T}`,
//! `gru_{T}` (one template body). One block per (direction, batch) pair, grid-striding over the
//! pairs; the block's threads stride over the hidden units; the time loop runs inside, with
//! `__syncthreads()` between the phases of a step. The states (h, the new h, c or GRU's z, GRU's
//! reset product) live in the workspace binding, 4 × hidden values of the compute type per pair,
//! so the hidden size is not limited by shared memory. Parameter order: [`crate::params`].

use umd_sdk::dtype::{self, CUDA_PRELUDE};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

const BODY: &str = r#"
typedef unsigned long long u64;
struct rnn_acts { u64 kind[6]; double alpha[6]; double beta[6]; };

// kinds: crate::act::NAMES order
__device__ __forceinline__ C umd_act(u64 k, C a, C b, C x) {
  switch (k) {
    case 0: return x < (C)0 ? (C)0 : x;
    case 1: return umd_tanh(x);
    case 2: return (C)1 / ((C)1 + umd_exp(-x));
    case 3: return a * x + b;
    case 4: return x < (C)0 ? a * x : x;
    case 5: return x > a ? x : (C)0;
    case 6: return a * umd_tanh(b * x);
    case 7: { C v = a * x + b; return v < (C)0 ? (C)0 : (v > (C)1 ? (C)1 : v); }
    case 8: return x < (C)0 ? a * (umd_exp(x) - (C)1) : x;
    case 9: return x / ((C)1 + (x < (C)0 ? -x : x));
    default: return x > (C)0 ? x + umd_log1p(umd_exp(-x)) : umd_log1p(umd_exp(x));
  }
}

__device__ __forceinline__ C dot_t(const T* a, const T* b, u64 n) {
  C s = (C)0;
  for (u64 k = 0; k < n; ++k) s += umd_ld(a[k]) * umd_ld(b[k]);
  return s;
}
__device__ __forceinline__ C dot_c(const T* a, const C* b, u64 n) {
  C s = (C)0;
  for (u64 k = 0; k < n; ++k) s += umd_ld(a[k]) * b[k];
  return s;
}

// CELL: 0 RNN, 1 LSTM, 2 GRU
template <int CELL>
__device__ void recurrent(const T* x, const T* w, const T* r, const T* bias, const int* seq_lens,
    const T* h0, const T* c0, const T* pp, T* y, T* yh, T* yc, C* ws,
    u64 seq, u64 batch, u64 input, u64 H, u64 dirs,
    u64 x_t, u64 x_b, u64 y_t, u64 y_d, u64 y_b, u64 s_d, u64 s_b,
    const rnn_acts& acts, double clip_d, unsigned int direction, unsigned int flags) {
  const u64 G = CELL == 0 ? 1 : (CELL == 1 ? 4 : 3);
  const u64 NA = CELL == 0 ? 1 : (CELL == 1 ? 3 : 2);
  const C clip = (C)clip_d;
  for (u64 p = blockIdx.x; p < dirs * batch; p += gridDim.x) {
    const u64 d = p / batch, bi = p % batch;
    const bool rev = direction == 1u || (direction == 2u && d == 1);
    u64 len = seq;
    if (seq_lens) {
      long long l = seq_lens[bi];
      len = l < 0 ? 0 : ((u64)l < seq ? (u64)l : seq);
    }
    C* hs = ws + p * 4 * H;
    C* hn = hs + H;
    C* cs = hn + H;
    C* aux = cs + H;
    const T* wd = w + d * G * H * input;
    const T* rd = r + d * G * H * H;
    const T* bw = bias ? bias + d * 2 * G * H : (const T*)0;
    const T* pd = pp ? pp + d * 3 * H : (const T*)0;
    const u64 so = d * s_d + bi * s_b;
    C aa[3], ab[3];
    for (u64 k = 0; k < NA; ++k) {
      aa[k] = (C)acts.alpha[d * NA + k];
      ab[k] = (C)acts.beta[d * NA + k];
    }
    for (u64 j = threadIdx.x; j < H; j += blockDim.x) {
      hs[j] = h0 ? umd_ld(h0[so + j]) : (C)0;
      cs[j] = c0 ? umd_ld(c0[so + j]) : (C)0;
    }
    __syncthreads();
#define ACT(k, v) umd_act(acts.kind[d * NA + (k)], aa[k], ab[k], (v))
#define CLAMP(v) umd_clamp((v), clip)
#define PRE_XB(gi, j, rb) pre_x(wd, bw, xt, (gi) * H + (j), input, G * H, (rb))
#define PRE_X(gi, j) PRE_XB(gi, j, true)
#define REC(gi, j, hv) dot_c(rd + ((gi) * H + (j)) * H, (hv), H)
    for (u64 s = 0; s < len; ++s) {
      const u64 t = rev ? len - 1 - s : s;
      const T* xt = x + t * x_t + bi * x_b;
      if (CELL == 0) {
        for (u64 j = threadIdx.x; j < H; j += blockDim.x)
          hn[j] = ACT(0, CLAMP(PRE_X(0, j) + REC(0, j, hs)));
      } else if (CELL == 1) {
        for (u64 j = threadIdx.x; j < H; j += blockDim.x) {
          C cp = cs[j];
          C pi = pd ? umd_ld(pd[j]) : (C)0, po = pd ? umd_ld(pd[H + j]) : (C)0,
            pf = pd ? umd_ld(pd[2 * H + j]) : (C)0;
          C ig = ACT(0, CLAMP(PRE_X(0, j) + REC(0, j, hs) + pi * cp));
          C fg = (flags & 1u) ? (C)1 - ig : ACT(0, CLAMP(PRE_X(2, j) + REC(2, j, hs) + pf * cp));
          C cg = ACT(1, CLAMP(PRE_X(3, j) + REC(3, j, hs)));
          C cn = fg * cp + ig * cg;
          C og = ACT(0, CLAMP(PRE_X(1, j) + REC(1, j, hs) + po * cn));
          hn[j] = og * ACT(2, cn);
          cs[j] = cn;
        }
      } else {
        const bool lbr = (flags & 2u) != 0;
        for (u64 j = threadIdx.x; j < H; j += blockDim.x) {
          C z = ACT(0, CLAMP(PRE_X(0, j) + REC(0, j, hs)));
          C rr = ACT(0, CLAMP(PRE_X(1, j) + REC(1, j, hs)));
          cs[j] = z;
          if (lbr) hn[j] = rr * (REC(2, j, hs) + (bw ? umd_ld(bw[G * H + 2 * H + j]) : (C)0));
          else aux[j] = rr * hs[j];
        }
        __syncthreads();
        for (u64 j = threadIdx.x; j < H; j += blockDim.x) {
          C hp = lbr ? PRE_XB(2, j, false) + hn[j] : PRE_X(2, j) + REC(2, j, aux);
          C ht = ACT(1, CLAMP(hp));
          C z = cs[j];
          hn[j] = ((C)1 - z) * ht + z * hs[j];
        }
      }
      __syncthreads();
      T* yo = y + t * y_t + d * y_d + bi * y_b;
      for (u64 j = threadIdx.x; j < H; j += blockDim.x) {
        hs[j] = hn[j];
        yo[j] = umd_st(hn[j]);
      }
      __syncthreads();
    }
#undef ACT
#undef CLAMP
#undef PRE_XB
#undef PRE_X
#undef REC
    for (u64 t = len; t < seq; ++t) {
      T* yo = y + t * y_t + d * y_d + bi * y_b;
      for (u64 j = threadIdx.x; j < H; j += blockDim.x) yo[j] = umd_st((C)0);
    }
    for (u64 j = threadIdx.x; j < H; j += blockDim.x) {
      // a sequence of length 0 has zero final states (as onnxruntime answers)
      yh[so + j] = umd_st(len ? hs[j] : (C)0);
      if (yc) yc[so + j] = umd_st(len ? cs[j] : (C)0);
    }
    __syncthreads();
  }
}
"#;

/// Helpers the body uses before its definition (pre-activation from X and clamp).
const PRE: &str = r#"
__device__ __forceinline__ C umd_clamp(C v, C clip) {
  return v < -clip ? -clip : (v > clip ? clip : v);
}
// W row `row` · x + Wb[row] (+ Rb[row] when rb): the gate's pre-activation without recurrence
__device__ __forceinline__ C pre_x(const T* wd, const T* bw, const T* xt, unsigned long long row,
    unsigned long long input, unsigned long long gh, bool rb) {
  C v = (C)0;
  for (unsigned long long k = 0; k < input; ++k) v += umd_ld(wd[row * input + k]) * umd_ld(xt[k]);
  if (bw) {
    v = v + umd_ld(bw[row]);
    if (rb) v = v + umd_ld(bw[gh + row]);
  }
  return v;
}
"#;

const ENTRY: &str = r#"
extern "C" __global__ void CELLNAME_NAME(const T* x, const T* w, const T* r, const T* bias,
    const int* seq_lens, const T* h0, const T* c0, const T* pp, T* y, T* yh, T* yc, C* ws,
    u64 seq, u64 batch, u64 input, u64 hidden, u64 dirs,
    u64 x_t, u64 x_b, u64 y_t, u64 y_d, u64 y_b, u64 s_d, u64 s_b,
    rnn_acts acts, double clip, unsigned int direction, unsigned int flags) {
  recurrent<CELLNUM>(x, w, r, bias, seq_lens, h0, c0, pp, y, yh, yc, ws, seq, batch, input, hidden,
      dirs, x_t, x_b, y_t, y_d, y_b, s_d, s_b, acts, clip, direction, flags);
}
"#;

/// The module of dtype `dt`.
pub fn module(dt: Dtype) -> ModuleSource {
    let ct = dtype::cuda_type(dt).expect("served dtypes have a CUDA type");
    let name = dtype::name(dt);
    let f = |fname: &str| {
        if dt == Dtype::F64 {
            fname.to_string()
        } else {
            format!("{fname}f")
        }
    };
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(&format!(
        "typedef {storage} T;\ntypedef {compute} C;\n\
         __device__ __forceinline__ C umd_ld(T v) {{ return {ld}; }}\n\
         __device__ __forceinline__ T umd_st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C umd_exp(C v) {{ return {exp}(v); }}\n\
         __device__ __forceinline__ C umd_tanh(C v) {{ return {tanh}(v); }}\n\
         __device__ __forceinline__ C umd_log1p(C v) {{ return {log1p}(v); }}\n",
        storage = ct.storage,
        compute = ct.compute,
        ld = ct.load.replace('X', "v"),
        st = ct.store.replace('X', "v"),
        exp = f("exp"),
        tanh = f("tanh"),
        log1p = f("log1p"),
    ));
    code.push_str(PRE);
    code.push_str(BODY);
    let mut entries = Vec::new();
    for (num, cell) in ["rnn", "lstm", "gru"].iter().enumerate() {
        code.push_str(
            &ENTRY
                .replace("CELLNAME", cell)
                .replace("CELLNUM", &num.to_string())
                .replace("NAME", name),
        );
        entries.push(format!("{cell}_{name}"));
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    }
}
