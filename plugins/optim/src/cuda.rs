//! CUDA C: one module `optim_{T}` per dtype with the entry points `adagrad_{T}`, `adam_{T}` and
//! `momentum_{T}`, all of the parameter block of [`crate::plan`], one thread per element
//! (grid-stride). `R` (f32 or f64, flag 1) and `T` (i64) are read through their pointers; the
//! learning-rate scalar is computed in double, the update in the compute type `C`.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

const KERNELS: &str = r#"
typedef unsigned long long u64;
__device__ __forceinline__ double umd_r(unsigned int flags, const void* r) {
  return (flags & 1u) ? *(const double*)r : (double)*(const float*)r;
}
extern "C" __global__ void adagrad_NAME(PARAMS) {
  double rv = umd_r(flags, r);
  long long tv = *t;
  C lr = (C)(rv / (1.0 + (double)tv * c0)), eps = (C)c1, norm = (C)c2;
  UMD_FOR(i, n) {
    C xv = umd_ld(x[i]), h = umd_ld(s1[i]);
    C gr = norm * xv + umd_ld(g[i]);
    C h2 = h + gr * gr;
    xo[i] = umd_st(xv - lr * gr / (umd_sqrt(h2) + eps));
    s1o[i] = umd_st(h2);
  }
}
extern "C" __global__ void adam_NAME(PARAMS) {
  double rv = umd_r(flags, r);
  long long tv = *t;
  if (tv > 0) rv = rv * sqrt(1.0 - pow(c1, (double)tv)) / (1.0 - pow(c0, (double)tv));
  C lr = (C)rv, one = (C)1, alpha = (C)c0, beta = (C)c1, eps = (C)c2, norm = (C)c3, post = (C)c4;
  UMD_FOR(i, n) {
    C xv = umd_ld(x[i]), v = umd_ld(s1[i]), h = umd_ld(s2[i]);
    C gr = norm * xv + umd_ld(g[i]);
    C v2 = alpha * v + (one - alpha) * gr;
    C h2 = beta * h + (one - beta) * (gr * gr);
    C x2 = xv - lr * (v2 / (umd_sqrt(h2) + eps));
    xo[i] = umd_st((one - post) * x2);
    s1o[i] = umd_st(v2);
    s2o[i] = umd_st(h2);
  }
}
extern "C" __global__ void momentum_NAME(PARAMS) {
  C lr = (C)umd_r(flags, r);
  long long tv = *t;
  C alpha = (C)c0, beta = (C)(tv > 0 ? c1 : 1.0), norm = (C)c2;
  bool nesterov = (flags & 2u) != 0;
  UMD_FOR(i, n) {
    C xv = umd_ld(x[i]), v = umd_ld(s1[i]);
    C gr = norm * xv + umd_ld(g[i]);
    C v2 = alpha * v + beta * gr;
    xo[i] = umd_st(nesterov ? xv - lr * (gr + alpha * v2) : xv - lr * v2);
    s1o[i] = umd_st(v2);
  }
}
"#;

/// The parameter list every kernel shares (spelled out in each, for readers and tools that do
/// not run the preprocessor).
const PARAMS: &str = "unsigned int flags, const void* __restrict__ r,
    const long long* __restrict__ t, const T* __restrict__ x, const T* __restrict__ g,
    const T* __restrict__ s1, const T* __restrict__ s2, T* __restrict__ xo,
    T* __restrict__ s1o, T* __restrict__ s2o, u64 n, double c0, double c1, double c2,
    double c3, double c4";

/// The module `optim_{dt}`.
pub fn module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage,
        compute,
        load,
        store,
    } = dtype::cuda_type(dt).expect("served dtypes have a CUDA type");
    let name = dtype::name(dt);
    let sqrt = if compute == "double" { "sqrt" } else { "sqrtf" };
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(&format!(
        "typedef {storage} T;\ntypedef {compute} C;\n\
         __device__ __forceinline__ C umd_ld(T v) {{ return {ld}; }}\n\
         __device__ __forceinline__ T umd_st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C umd_sqrt(C v) {{ return {sqrt}(v); }}\n",
        ld = load.replace('X', "v"),
        st = store.replace('X', "v"),
    ));
    code.push_str(umd_sdk::cuda::HELPERS);
    code.push_str(&KERNELS.replace("NAME", name).replace("PARAMS", PARAMS));
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: ["adagrad", "adam", "momentum"]
            .iter()
            .map(|k| format!("{k}_{name}"))
            .collect(),
        options: vec!["--std=c++17".into()],
    }
}
