//! CUDA C of module `loss_{T}_{I}`: entries `_lsm`, `_nll`, `_red` (see [`crate::plan`]).
//! The log-softmax computes in f32 (f64 for f64); losses, weights and sums in f64.

use umd_sdk::dtype::{self, CUDA_PRELUDE};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

const TEMPLATE: &str = r#"
typedef unsigned long long u64;
#define UMD_GRID_STRIDE(i, n) for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; \
  i < (n); i += (u64)blockDim.x * gridDim.x)
__device__ __forceinline__ C umd_ld(T v) { return (C)($LOAD); }
__device__ __forceinline__ T umd_st(double v) { return $STORE; }

extern "C" __global__ void $ID_lsm(const T* __restrict__ x, unsigned char* lp_base, u64 lp_off,
    u64 N, u64 NC, u64 D) {
  T* lp = (T*)(lp_base + lp_off);
  UMD_GRID_STRIDE(r, N * D) {
    u64 n = r / D, d = r % D;
    const T* xr = x + n * NC * D + d;
    T* lr = lp + n * NC * D + d;
    C m = -(C)__int_as_float(0x7f800000);
    for (u64 c = 0; c < NC; ++c) { C v = umd_ld(xr[c * D]); m = (v > m || v != v) ? v : m; }
    C s = (C)0;
    for (u64 c = 0; c < NC; ++c) s += $EXP(umd_ld(xr[c * D]) - m);
    C l = $LOG(s);
    for (u64 c = 0; c < NC; ++c) lr[c * D] = umd_st((double)((umd_ld(xr[c * D]) - m) - l));
  }
}

extern "C" __global__ void $ID_nll(unsigned int flags, const unsigned char* x_base, u64 x_off,
    const I* __restrict__ target, const T* __restrict__ weight, unsigned char* out_base,
    u64 out_off, long long ii, u64 N, u64 NC, u64 D) {
  const T* x = (const T*)(x_base + x_off);
  u64 rows = N * D;
  UMD_GRID_STRIDE(r, rows) {
    long long t = (long long)target[r];
    double w, l;
    if ((flags & 2u) && t == ii) { w = 0.0; l = 0.0; }
    else if (t < 0 || t >= (long long)NC) { w = __longlong_as_double(0x7ff8000000000000ll); l = w; }
    else {
      w = (flags & 1u) ? (double)umd_ld(weight[t]) : 1.0;
      l = -w * (double)umd_ld(x[((r / D) * NC + (u64)t) * D + r % D]);
    }
    if (flags & 4u) {
      double* ws = (double*)(out_base + out_off);
      ws[r] = l; ws[rows + r] = w;
    } else {
      ((T*)(out_base + out_off))[r] = umd_st(l);
    }
  }
}

extern "C" __global__ void $ID_red(const unsigned char* ws_base, u64 ws_off, T* y, u64 count,
    unsigned int mean) {
  __shared__ double sl[256], sw[256];
  const double* v = (const double*)(ws_base + ws_off);
  double l = 0.0, w = 0.0;
  for (u64 i = threadIdx.x; i < count; i += blockDim.x) { l += v[i]; w += v[count + i]; }
  sl[threadIdx.x] = l; sw[threadIdx.x] = w;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) { sl[threadIdx.x] += sl[threadIdx.x + k]; sw[threadIdx.x] += sw[threadIdx.x + k]; }
    __syncthreads();
  }
  if (threadIdx.x == 0) y[0] = umd_st(mean ? sl[0] / sw[0] : sl[0]);
}
"#;

/// The module of data dtype `t` and target dtype `i`.
pub fn module(id: &str, t: Dtype, i: Dtype) -> ModuleSource {
    let ct = dtype::cuda_type(t).expect("float dtype");
    let (c, exp, log) = if t == Dtype::F64 {
        ("double", "exp", "log")
    } else {
        ("float", "expf", "logf")
    };
    let store = match t {
        Dtype::F16 => "umd_f2h((float)v)",
        Dtype::Bf16 => "umd_f2b((float)v)",
        Dtype::F32 => "(float)v",
        _ => "v",
    };
    let code = TEMPLATE
        .replace("$ID", id)
        .replace("$LOAD", &ct.load.replace('X', "v"))
        .replace("$STORE", store)
        .replace("$EXP", exp)
        .replace("$LOG", log);
    let types = format!(
        "typedef {} T;\ntypedef {c} C;\ntypedef {} I;\n",
        ct.storage,
        dtype::cuda_type(i).expect("integer dtype").storage
    );
    ModuleSource {
        language: SourceLanguage::CudaC,
        options: Vec::new(),
        code: format!("{CUDA_PRELUDE}{types}{code}"),
        entry_points: ["lsm", "nll", "red"]
            .iter()
            .map(|s| format!("{id}_{s}"))
            .collect(),
    }
}
