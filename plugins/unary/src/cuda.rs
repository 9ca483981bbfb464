//! CUDA C templates: one module `unary_{dtype}` per dtype, holding an entry point
//! `{kernel}_{dtype}` for every op of the table serving that dtype, generated from the table's
//! expressions, plus the Clip kernel.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::cpu::{HI_PTR, HI_VAL, LO_PTR, LO_VAL};
use crate::ops::{self, Class};

/// Overloaded helpers the table's expressions call: float/double math wrappers, wrapping integer
/// abs/neg, and the NaN-keeping composites (the Rust twins are in [`crate::math`]).
pub const HELPERS: &str = r#"
#define UMD_F1(name, ff, fd) \
  __device__ __forceinline__ float name(float v) { return ff(v); } \
  __device__ __forceinline__ double name(double v) { return fd(v); }
UMD_F1(umd_exp, expf, exp) UMD_F1(umd_log, logf, log) UMD_F1(umd_sqrt, sqrtf, sqrt)
UMD_F1(umd_sin, sinf, sin) UMD_F1(umd_cos, cosf, cos) UMD_F1(umd_tan, tanf, tan)
UMD_F1(umd_tanh, tanhf, tanh) UMD_F1(umd_asin, asinf, asin) UMD_F1(umd_acos, acosf, acos)
UMD_F1(umd_atan, atanf, atan) UMD_F1(umd_sinh, sinhf, sinh) UMD_F1(umd_cosh, coshf, cosh)
UMD_F1(umd_asinh, asinhf, asinh) UMD_F1(umd_acosh, acoshf, acosh)
UMD_F1(umd_atanh, atanhf, atanh) UMD_F1(umd_erf, erff, erf) UMD_F1(umd_expm1, expm1f, expm1)
UMD_F1(umd_log1p, log1pf, log1p) UMD_F1(umd_floor, floorf, floor) UMD_F1(umd_ceil, ceilf, ceil)
UMD_F1(umd_rint, rintf, rint) UMD_F1(umd_abs, fabsf, fabs)
__device__ __forceinline__ int umd_abs(int v) { return v < 0 ? (int)(0u - (unsigned)v) : v; }
__device__ __forceinline__ long long umd_abs(long long v) {
  return v < 0 ? (long long)(0ull - (unsigned long long)v) : v;
}
__device__ __forceinline__ unsigned int umd_abs(unsigned int v) { return v; }
__device__ __forceinline__ unsigned long long umd_abs(unsigned long long v) { return v; }
__device__ __forceinline__ unsigned int umd_neg(unsigned int v) { return 0u - v; }
__device__ __forceinline__ unsigned long long umd_neg(unsigned long long v) { return 0ull - v; }
__device__ __forceinline__ float umd_neg(float v) { return -v; }
__device__ __forceinline__ double umd_neg(double v) { return -v; }
__device__ __forceinline__ int umd_neg(int v) { return (int)(0u - (unsigned)v); }
__device__ __forceinline__ long long umd_neg(long long v) {
  return (long long)(0ull - (unsigned long long)v);
}
__device__ __forceinline__ bool umd_isnan(float v) { return v != v; }
__device__ __forceinline__ bool umd_isnan(double v) { return v != v; }
__device__ __forceinline__ bool umd_isinf(float v) { return fabsf(v) == __int_as_float(0x7f800000); }
__device__ __forceinline__ bool umd_isinf(double v) {
  return fabs(v) == __longlong_as_double(0x7ff0000000000000LL);
}
template <typename T> __device__ __forceinline__ T umd_sigmoid(T x) {
  if (x >= (T)0) return (T)1 / ((T)1 + umd_exp(-x));
  T e = umd_exp(x); return e / ((T)1 + e);
}
template <typename T> __device__ __forceinline__ T umd_softplus(T x) {
  return x > (T)0 ? x + umd_log1p(umd_exp(-x)) : umd_log1p(umd_exp(x));
}
template <typename T> __device__ __forceinline__ T umd_clamp01(T x) {
  return x < (T)0 ? (T)0 : (x > (T)1 ? (T)1 : x);
}
#define UMD_GRID_STRIDE(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x \
  + threadIdx.x; i < (n); i += (unsigned long long)blockDim.x * gridDim.x)
"#;

/// The dtypes that have a module.
pub const MODULE_DTYPES: [Dtype; 13] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I8,
    Dtype::U8,
    Dtype::I32,
    Dtype::I64,
    Dtype::Boolean,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];

/// The module `unary_{dtype}`.
pub fn module(dt: Dtype) -> Option<ModuleSource> {
    let CudaType {
        storage: t,
        compute: c,
        load,
        store,
    } = dtype::cuda_type(dt)?;
    let name = dtype::name(dt);
    let ld = |v: &str| load.replace('X', v);
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(HELPERS);
    code.push_str(&format!("typedef {c} cT;\n"));
    let mut entries = Vec::new();
    for def in ops::all().filter(|d| d.class.dtypes().contains(&dt)) {
        let entry = format!("{}_{name}", def.kernel);
        if def.class == Class::Clip {
            code.push_str(&clip_kernel(&entry, t, &ld("X"), store));
        } else {
            let (out_t, out) = match def.class {
                Class::Pred => ("unsigned char", format!("(unsigned char)({})", def.cuda)),
                _ => (t, store.replace('X', def.cuda)),
            };
            code.push_str(&format!(
                "extern \"C\" __global__ void {entry}(const {t}* __restrict__ x_in, \
                 {out_t}* __restrict__ out, unsigned long long n, double a_d, double b_d) {{\n\
                 \x20 const cT a = (cT)a_d; const cT b = (cT)b_d; (void)a; (void)b;\n\
                 \x20 UMD_GRID_STRIDE(i, n) {{ const cT x = {lx}; out[i] = {out}; }}\n}}\n",
                lx = ld("x_in[i]"),
            ));
        }
        entries.push(entry);
    }
    Some(ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    })
}

/// Clip: min/max from the first element of their inputs or from the f64 parameters, per flags.
fn clip_kernel(entry: &str, t: &str, load: &str, store: &str) -> String {
    let ld = |v: &str| load.replace('X', v);
    format!(
        "extern \"C\" __global__ void {entry}(const {t}* __restrict__ x_in, const {t}* lo_p, \
         const {t}* hi_p, {t}* __restrict__ out, unsigned long long n, unsigned int flags, \
         double lo_d, double hi_d) {{\n\
         \x20 if (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x >= n) return;\n\
         \x20 const bool has_lo = (flags & {lo_any}u) != 0, has_hi = (flags & {hi_any}u) != 0;\n\
         \x20 const cT lo = (flags & {LO_PTR}u) ? (cT){lo} : (cT)lo_d;\n\
         \x20 const cT hi = (flags & {HI_PTR}u) ? (cT){hi} : (cT)hi_d;\n\
         \x20 UMD_GRID_STRIDE(i, n) {{\n\
         \x20   cT v = {lx};\n\
         \x20   if (has_lo && v < lo) v = lo;\n\
         \x20   if (has_hi && v > hi) v = hi;\n\
         \x20   out[i] = {sv};\n\
         \x20 }}\n}}\n",
        lo_any = LO_PTR | LO_VAL,
        hi_any = HI_PTR | HI_VAL,
        lo = ld("lo_p[0]"),
        hi = ld("hi_p[0]"),
        lx = ld("x_in[i]"),
        sv = store.replace('X', "v"),
    )
}
