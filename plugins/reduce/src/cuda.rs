//! CUDA C modules, one per (group, dtype): `reduce_{dt}` (every `Reduce*` op and
//! ArgMax/ArgMin, each as `_rows` and `_cols`, the reduce ops but LogSumExp also as
//! `_split1`/`_split2`), `reduce_cumsum_{dt}` (CumSum and CumProd) and `reduce_topk_{dt}`.
//!
//! A module starts with the dtype's typedefs (`T` storage, `C` compute), load/store macros and
//! bounds, then shared C++ helpers overloaded on the compute type (so one text serves every
//! dtype), then the kernels. Reductions are templates over an op struct (init, map, comb, fin),
//! the CUDA twin of [`crate::cpu`]'s `ROp` table.

use umd_sdk::dtype::{self, CUDA_PRELUDE};
use umd_sdk::{Dtype, ModuleSource, OpError, SourceLanguage};

use crate::ops::{ARG_OPS, NUMERIC, ORDERED, REDUCE_OPS, Red};
use crate::plan::BLOCK;

/// Which module a module id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Reduce,
    CumSum,
    TopK,
}

/// Parses a module id of this plugin.
pub fn parse_module(id: &str) -> Option<(Group, Dtype)> {
    let rest = id.strip_prefix("reduce_")?;
    let (group, dt) = match rest.split_once('_') {
        Some(("cumsum", dt)) => (Group::CumSum, dt),
        Some(("topk", dt)) => (Group::TopK, dt),
        Some(_) => return None,
        None => (Group::Reduce, rest),
    };
    let dt = dtype::from_name(dt)?;
    let served = match group {
        Group::Reduce => REDUCE_OPS.iter().any(|(_, r, _)| r.dtypes().contains(&dt)),
        Group::CumSum => NUMERIC.contains(&dt),
        Group::TopK => ORDERED.contains(&dt),
    };
    served.then_some((group, dt))
}

/// The source of module `id`.
pub fn module(id: &str) -> Result<ModuleSource, OpError> {
    let (group, dt) =
        parse_module(id).ok_or_else(|| OpError::internal(format!("unknown module `{id}`")))?;
    let name = dtype::name(dt);
    let mut code = header(dt);
    let mut entries = Vec::new();
    match group {
        Group::Reduce => {
            code.push_str(REDUCE_TEMPLATES);
            code.push_str(SPLIT_TEMPLATES);
            for (_, red, k) in REDUCE_OPS {
                if !red.dtypes().contains(&dt) {
                    continue;
                }
                let op = format!("Op_{k}");
                for variant in ["rows", "cols"] {
                    let e = format!("{k}_{name}_{variant}");
                    code.push_str(&format!(
                        "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {e}(const T* __restrict__ x, \
                         T* __restrict__ out, {VIEW_PARAMS}) {{ umd_{variant}<{op}>(x, out, {VIEW_ARGS}); }}\n"
                    ));
                    entries.push(e);
                }
                if red != Red::LogSumExp {
                    let (e1, e2) = (format!("{k}_{name}_split1"), format!("{k}_{name}_split2"));
                    code.push_str(&format!(
                        "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {e1}(const T* __restrict__ x, \
                         C* __restrict__ ws, {VIEW_PARAMS}, unsigned long long S, unsigned long long chunk) {{ \
                         umd_split1<{op}>(x, ws, {VIEW_ARGS}, S, chunk); }}\n\
                         extern \"C\" __global__ void __launch_bounds__({BLOCK}) {e2}(const C* __restrict__ ws, \
                         T* __restrict__ out, unsigned long long n_out, unsigned long long R, unsigned long long S) {{ \
                         umd_split2<{op}>(ws, out, n_out, R, S); }}\n"
                    ));
                    entries.extend([e1, e2]);
                }
            }
            if ORDERED.contains(&dt) {
                code.push_str(ARG_TEMPLATES);
                for (_, k) in ARG_OPS {
                    let is_max = k == "argmax";
                    for variant in ["rows", "cols"] {
                        let e = format!("{k}_{name}_{variant}");
                        code.push_str(&format!(
                            "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {e}(const T* __restrict__ x, \
                             long long* __restrict__ out, {VIEW_PARAMS}, unsigned int last) {{ \
                             umd_arg_{variant}<{is_max}>(x, out, {VIEW_ARGS}, last != 0); }}\n"
                        ));
                        entries.push(e);
                    }
                }
            }
        }
        Group::CumSum => {
            for (k, op, id) in [
                ("cumsum", "umd_add", "(C)0"),
                ("cumprod", "umd_mul", "(C)1"),
            ] {
                code.push_str(
                    &CUMSUM
                        .replace("cumsum_NAME", &format!("{k}_{name}"))
                        .replace("umd_add", op)
                        .replace("(C)0", id),
                );
                entries.push(format!("{k}_{name}"));
                entries.push(format!("{k}_{name}_rows"));
            }
        }
        Group::TopK => {
            code.push_str(&TOPK.replace("NAME", name));
            entries.push(format!("topk_{name}"));
        }
    }
    Ok(ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    })
}

/// The view parameters of every reduce kernel (see [`crate::view::View::pack`]).
const VIEW_PARAMS: &str = "unsigned long long n_out, unsigned long long R, unsigned int krank, \
    unsigned int rrank, umd_dims ks, umd_dims kst, umd_dims rs, umd_dims rst";
const VIEW_ARGS: &str = "n_out, R, krank, rrank, ks, kst, rs, rst";

/// Typedefs, load/store macros and bounds of `dt`, then the shared helpers.
fn header(dt: Dtype) -> String {
    let ct = dtype::cuda_type(dt).expect("every served dtype has a CUDA type");
    let (lo, hi) = match dt {
        Dtype::F32 | Dtype::F16 | Dtype::Bf16 => (
            "(-__int_as_float(0x7f800000))",
            "__int_as_float(0x7f800000)",
        ),
        Dtype::F64 => (
            "(-__longlong_as_double(0x7ff0000000000000LL))",
            "__longlong_as_double(0x7ff0000000000000LL)",
        ),
        Dtype::I32 => ("(-2147483647 - 1)", "2147483647"),
        Dtype::I64 => ("(-9223372036854775807LL - 1)", "9223372036854775807LL"),
        Dtype::I8 => ("(-128)", "127"),
        Dtype::U8 => ("0", "255"),
        Dtype::Boolean => ("0", "1"),
        Dtype::I16 => ("(-32768)", "32767"),
        Dtype::U16 => ("0u", "65535u"),
        Dtype::U32 => ("0u", "4294967295u"),
        Dtype::U64 => ("0ull", "18446744073709551615ull"),
        other => unreachable!("no reduce module for {}", dtype::name(other)),
    };
    format!(
        "{CUDA_PRELUDE}\ntypedef {storage} T;\ntypedef {compute} C;\n\
         #define LD(v) {load}\n#define ST(v) {store}\n\
         #define UMD_LOWEST ((C){lo})\n#define UMD_HIGHEST ((C){hi})\n#define UMD_BLOCK {BLOCK}\n{HELPERS}",
        storage = ct.storage,
        compute = ct.compute,
        load = ct.load.replace('X', "(v)"),
        store = ct.store.replace('X', "(v)"),
    )
}

/// Arithmetic overloaded on the compute types (float, double, int, long long, unsigned int,
/// unsigned long long): integers wrap
/// (computed unsigned), their sqrt/log/exp go through double; NaN-propagating max/min.
const HELPERS: &str = r#"
struct umd_dims { unsigned long long v[8]; };
__device__ __forceinline__ bool umd_isnan(float a) { return a != a; }
__device__ __forceinline__ bool umd_isnan(double a) { return a != a; }
__device__ __forceinline__ bool umd_isnan(int) { return false; }
__device__ __forceinline__ bool umd_isnan(long long) { return false; }
__device__ __forceinline__ bool umd_isnan(unsigned int) { return false; }
__device__ __forceinline__ bool umd_isnan(unsigned long long) { return false; }
__device__ __forceinline__ bool umd_isinf(float a) { return fabsf(a) == __int_as_float(0x7f800000); }
__device__ __forceinline__ bool umd_isinf(double a) { return fabs(a) == __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ bool umd_isinf(int) { return false; }
__device__ __forceinline__ bool umd_isinf(long long) { return false; }
__device__ __forceinline__ bool umd_isinf(unsigned int) { return false; }
__device__ __forceinline__ bool umd_isinf(unsigned long long) { return false; }
__device__ __forceinline__ float umd_add(float a, float b) { return a + b; }
__device__ __forceinline__ double umd_add(double a, double b) { return a + b; }
__device__ __forceinline__ int umd_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ long long umd_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ unsigned int umd_add(unsigned int a, unsigned int b) { return a + b; }
__device__ __forceinline__ unsigned long long umd_add(unsigned long long a, unsigned long long b) { return a + b; }
__device__ __forceinline__ float umd_sub(float a, float b) { return a - b; }
__device__ __forceinline__ double umd_sub(double a, double b) { return a - b; }
__device__ __forceinline__ int umd_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ long long umd_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ unsigned int umd_sub(unsigned int a, unsigned int b) { return a - b; }
__device__ __forceinline__ unsigned long long umd_sub(unsigned long long a, unsigned long long b) { return a - b; }
__device__ __forceinline__ float umd_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double umd_mul(double a, double b) { return a * b; }
__device__ __forceinline__ int umd_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ long long umd_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ unsigned int umd_mul(unsigned int a, unsigned int b) { return a * b; }
__device__ __forceinline__ unsigned long long umd_mul(unsigned long long a, unsigned long long b) { return a * b; }
__device__ __forceinline__ float umd_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double umd_abs(double a) { return fabs(a); }
__device__ __forceinline__ int umd_abs(int a) { return a < 0 ? (int)(0u - (unsigned)a) : a; }
__device__ __forceinline__ long long umd_abs(long long a) { return a < 0 ? (long long)(0ull - (unsigned long long)a) : a; }
__device__ __forceinline__ unsigned int umd_abs(unsigned int a) { return a; }
__device__ __forceinline__ unsigned long long umd_abs(unsigned long long a) { return a; }
__device__ __forceinline__ float umd_sqrt(float a) { return sqrtf(a); }
__device__ __forceinline__ double umd_sqrt(double a) { return sqrt(a); }
__device__ __forceinline__ int umd_sqrt(int a) { return a <= 0 ? 0 : (int)sqrt((double)a); }
__device__ __forceinline__ long long umd_sqrt(long long a) { return a <= 0 ? 0 : (long long)sqrt((double)a); }
__device__ __forceinline__ unsigned int umd_sqrt(unsigned int a) { return (unsigned int)sqrt((double)a); }
__device__ __forceinline__ unsigned long long umd_sqrt(unsigned long long a) { return (unsigned long long)sqrt((double)a); }
__device__ __forceinline__ float umd_log(float a) { return logf(a); }
__device__ __forceinline__ double umd_log(double a) { return log(a); }
__device__ __forceinline__ int umd_log(int a) { return (int)log((double)a); }
__device__ __forceinline__ long long umd_log(long long a) { return (long long)log((double)a); }
__device__ __forceinline__ unsigned int umd_log(unsigned int a) { return (unsigned int)log((double)a); }
__device__ __forceinline__ unsigned long long umd_log(unsigned long long a) { return (unsigned long long)log((double)a); }
__device__ __forceinline__ float umd_exp(float a) { return expf(a); }
__device__ __forceinline__ double umd_exp(double a) { return exp(a); }
__device__ __forceinline__ int umd_exp(int a) { return (int)exp((double)a); }
__device__ __forceinline__ long long umd_exp(long long a) { return (long long)exp((double)a); }
__device__ __forceinline__ unsigned int umd_exp(unsigned int a) { return (unsigned int)exp((double)a); }
__device__ __forceinline__ unsigned long long umd_exp(unsigned long long a) { return (unsigned long long)exp((double)a); }
__device__ __forceinline__ float umd_divn(float a, unsigned long long n) { return a / (float)n; }
__device__ __forceinline__ double umd_divn(double a, unsigned long long n) { return a / (double)n; }
__device__ __forceinline__ int umd_divn(int a, unsigned long long n) { return n == 0 ? 0 : (int)((long long)a / (long long)n); }
__device__ __forceinline__ long long umd_divn(long long a, unsigned long long n) { return n == 0 ? 0 : (n > 9223372036854775807ull ? 0 : a / (long long)n); }
__device__ __forceinline__ unsigned int umd_divn(unsigned int a, unsigned long long n) { return n == 0 ? 0u : (unsigned int)((unsigned long long)a / n); }
__device__ __forceinline__ unsigned long long umd_divn(unsigned long long a, unsigned long long n) { return n == 0 ? 0ull : a / n; }
__device__ __forceinline__ C umd_maxn(C a, C b) {
  if (umd_isnan(a)) return a;
  if (umd_isnan(b)) return b;
  return a > b ? a : b;
}
__device__ __forceinline__ C umd_minn(C a, C b) {
  if (umd_isnan(a)) return a;
  if (umd_isnan(b)) return b;
  return a < b ? a : b;
}
/* Offset of output element o over the kept dims, and of reduced index r over the reduced dims. */
__device__ __forceinline__ unsigned long long umd_koff(unsigned long long o, unsigned int rank,
    const umd_dims& s, const umd_dims& st) {
  unsigned long long off = 0;
  for (int d = (int)rank - 1; d >= 0; --d) { off += (o % s.v[d]) * st.v[d]; o /= s.v[d]; }
  return off;
}
__device__ __forceinline__ unsigned long long umd_roff(unsigned long long r, unsigned int rank,
    const umd_dims& s, const umd_dims& st) {
  if (rank == 1) return r * st.v[0];
  return umd_koff(r, rank, s, st);
}
"#;

/// The op table and the two reduction kernels (block per output, thread per output).
const REDUCE_TEMPLATES: &str = r#"
#define UMD_OP(NAME, TWO, INIT, MAP, COMB, FIN) struct NAME { \
  static const bool two = TWO; \
  static __device__ __forceinline__ C init() { return INIT; } \
  static __device__ __forceinline__ C map(C x, C s) { return MAP; } \
  static __device__ __forceinline__ C comb(C a, C b) { return COMB; } \
  static __device__ __forceinline__ C fin(C a, unsigned long long n, C s) { return FIN; } };
UMD_OP(Op_sum, false, (C)0, x, umd_add(a, b), a)
UMD_OP(Op_mean, false, (C)0, x, umd_add(a, b), umd_divn(a, n))
UMD_OP(Op_max, false, UMD_LOWEST, x, umd_maxn(a, b), a)
UMD_OP(Op_min, false, UMD_HIGHEST, x, umd_minn(a, b), a)
UMD_OP(Op_prod, false, (C)1, x, umd_mul(a, b), a)
UMD_OP(Op_l1, false, (C)0, umd_abs(x), umd_add(a, b), a)
UMD_OP(Op_l2, false, (C)0, umd_mul(x, x), umd_add(a, b), umd_sqrt(a))
UMD_OP(Op_sumsq, false, (C)0, umd_mul(x, x), umd_add(a, b), a)
UMD_OP(Op_logsum, false, (C)0, x, umd_add(a, b), umd_log(a))
UMD_OP(Op_lse, true, (C)0, umd_exp(umd_sub(x, s)), umd_add(a, b), umd_add(umd_log(a), s))

/* LogSumExp shift: the max, or 0 when infinite (as onnxruntime). */
__device__ __forceinline__ C umd_shift(C m) { return umd_isinf(m) ? (C)0 : m; }

/* Tree reduction over a power-of-two block; every thread gets the result. */
template <class Op> __device__ __forceinline__ C umd_block_reduce(C v, C* sm) {
  unsigned int t = threadIdx.x;
  sm[t] = v;
  __syncthreads();
  for (unsigned int s = blockDim.x >> 1; s > 0; s >>= 1) {
    if (t < s) sm[t] = Op::comb(sm[t], sm[t + s]);
    __syncthreads();
  }
  C r = sm[0];
  __syncthreads();
  return r;
}

/* One block per output element (grid-stride over outputs). */
template <class Op> __device__ __forceinline__ void umd_rows(const T* __restrict__ x,
    T* __restrict__ out, unsigned long long n_out, unsigned long long R, unsigned int krank,
    unsigned int rrank, const umd_dims& ks, const umd_dims& kst, const umd_dims& rs,
    const umd_dims& rst) {
  __shared__ C sm[UMD_BLOCK];
  for (unsigned long long o = blockIdx.x; o < n_out; o += gridDim.x) {
    const T* base = x + umd_koff(o, krank, ks, kst);
    C shift = (C)0;
    if (Op::two) {
      C m = UMD_LOWEST;
      for (unsigned long long r = threadIdx.x; r < R; r += blockDim.x)
        m = umd_maxn(m, LD(base[umd_roff(r, rrank, rs, rst)]));
      shift = umd_shift(umd_block_reduce<Op_max>(m, sm));
    }
    C acc = Op::init();
    for (unsigned long long r = threadIdx.x; r < R; r += blockDim.x)
      acc = Op::comb(acc, Op::map(LD(base[umd_roff(r, rrank, rs, rst)]), shift));
    acc = umd_block_reduce<Op>(acc, sm);
    if (threadIdx.x == 0) out[o] = ST(Op::fin(acc, R, shift));
  }
}

/* One thread per output element. */
template <class Op> __device__ __forceinline__ void umd_cols(const T* __restrict__ x,
    T* __restrict__ out, unsigned long long n_out, unsigned long long R, unsigned int krank,
    unsigned int rrank, const umd_dims& ks, const umd_dims& kst, const umd_dims& rs,
    const umd_dims& rst) {
  for (unsigned long long o = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       o < n_out; o += (unsigned long long)blockDim.x * gridDim.x) {
    const T* base = x + umd_koff(o, krank, ks, kst);
    C shift = (C)0;
    if (Op::two) {
      C m = UMD_LOWEST;
      for (unsigned long long r = 0; r < R; ++r) m = umd_maxn(m, LD(base[umd_roff(r, rrank, rs, rst)]));
      shift = umd_shift(m);
    }
    C acc = Op::init();
    for (unsigned long long r = 0; r < R; ++r)
      acc = Op::comb(acc, Op::map(LD(base[umd_roff(r, rrank, rs, rst)]), shift));
    out[o] = ST(Op::fin(acc, R, shift));
  }
}
"#;

/// Split reductions: one block per (output, chunk) writes a partial to the workspace, then one
/// thread per output combines its partials and finalizes.
const SPLIT_TEMPLATES: &str = r#"
template <class Op> __device__ __forceinline__ void umd_split1(const T* __restrict__ x,
    C* __restrict__ ws, unsigned long long n_out, unsigned long long R, unsigned int krank,
    unsigned int rrank, const umd_dims& ks, const umd_dims& kst, const umd_dims& rs,
    const umd_dims& rst, unsigned long long S, unsigned long long chunk) {
  __shared__ C sm[UMD_BLOCK];
  for (unsigned long long b = blockIdx.x; b < n_out * S; b += gridDim.x) {
    unsigned long long o = b / S, r0 = (b % S) * chunk;
    unsigned long long r1 = r0 + chunk < R ? r0 + chunk : R;
    const T* base = x + umd_koff(o, krank, ks, kst);
    C acc = Op::init();
    for (unsigned long long r = r0 + threadIdx.x; r < r1; r += blockDim.x)
      acc = Op::comb(acc, Op::map(LD(base[umd_roff(r, rrank, rs, rst)]), (C)0));
    acc = umd_block_reduce<Op>(acc, sm);
    if (threadIdx.x == 0) ws[b] = acc;
  }
}

template <class Op> __device__ __forceinline__ void umd_split2(const C* __restrict__ ws,
    T* __restrict__ out, unsigned long long n_out, unsigned long long R, unsigned long long S) {
  for (unsigned long long o = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       o < n_out; o += (unsigned long long)blockDim.x * gridDim.x) {
    C acc = Op::init();
    for (unsigned long long s = 0; s < S; ++s) acc = Op::comb(acc, ws[o * S + s]);
    out[o] = ST(Op::fin(acc, R, (C)0));
  }
}
"#;

/// ArgMax/ArgMin: (value, index) pairs under a total order, so the block reduction is exact.
const ARG_TEMPLATES: &str = r#"
/* Whether (av, ai) wins over (bv, bi): NaN first (numpy), then the larger (smaller) value,
   then the first (last) index; index -1 is "nothing yet". */
__device__ __forceinline__ bool umd_arg_better(C av, long long ai, C bv, long long bi,
    bool is_max, bool last) {
  if (bi < 0) return true;
  if (ai < 0) return false;
  bool an = umd_isnan(av), bn = umd_isnan(bv);
  if (an != bn) return an;
  if (!an && av != bv) return is_max ? (av > bv) : (av < bv);
  return last ? (ai > bi) : (ai < bi);
}

template <bool IS_MAX> __device__ __forceinline__ void umd_arg_rows(const T* __restrict__ x,
    long long* __restrict__ out, unsigned long long n_out, unsigned long long R,
    unsigned int krank, unsigned int rrank, const umd_dims& ks, const umd_dims& kst,
    const umd_dims& rs, const umd_dims& rst, bool last) {
  __shared__ C sv[UMD_BLOCK];
  __shared__ long long si[UMD_BLOCK];
  unsigned int t = threadIdx.x;
  for (unsigned long long o = blockIdx.x; o < n_out; o += gridDim.x) {
    const T* base = x + umd_koff(o, krank, ks, kst);
    C bv = (C)0;
    long long bi = -1;
    for (unsigned long long r = t; r < R; r += blockDim.x) {
      C v = LD(base[umd_roff(r, rrank, rs, rst)]);
      if (umd_arg_better(v, (long long)r, bv, bi, IS_MAX, last)) { bv = v; bi = (long long)r; }
    }
    sv[t] = bv; si[t] = bi;
    __syncthreads();
    for (unsigned int s = blockDim.x >> 1; s > 0; s >>= 1) {
      if (t < s && umd_arg_better(sv[t + s], si[t + s], sv[t], si[t], IS_MAX, last)) {
        sv[t] = sv[t + s]; si[t] = si[t + s];
      }
      __syncthreads();
    }
    if (t == 0) out[o] = si[0] < 0 ? 0 : si[0];
    __syncthreads();
  }
}

template <bool IS_MAX> __device__ __forceinline__ void umd_arg_cols(const T* __restrict__ x,
    long long* __restrict__ out, unsigned long long n_out, unsigned long long R,
    unsigned int krank, unsigned int rrank, const umd_dims& ks, const umd_dims& kst,
    const umd_dims& rs, const umd_dims& rst, bool last) {
  for (unsigned long long o = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       o < n_out; o += (unsigned long long)blockDim.x * gridDim.x) {
    const T* base = x + umd_koff(o, krank, ks, kst);
    C bv = (C)0;
    long long bi = -1;
    for (unsigned long long r = 0; r < R; ++r) {
      C v = LD(base[umd_roff(r, rrank, rs, rst)]);
      if (umd_arg_better(v, (long long)r, bv, bi, IS_MAX, last)) { bv = v; bi = (long long)r; }
    }
    out[o] = bi < 0 ? 0 : bi;
  }
}
"#;

/// CumSum (and CumProd, the same text with `umd_mul` and identity 1: `cumprod_{dt}`):
/// `cumsum_{dt}` runs one thread per line (coalesced across lines when `inner` > 1);
/// `cumsum_{dt}_rows` one block per line, scanning chunks of `blockDim` elements with a
/// shared-memory (Hillis-Steele) scan plus a running carry, for few long lines.
const CUMSUM: &str = r#"
extern "C" __global__ void cumsum_NAME(const T* __restrict__ x, T* __restrict__ y,
    unsigned long long lines, unsigned long long R, unsigned long long inner,
    unsigned int exclusive, unsigned int reverse) {
  for (unsigned long long l = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       l < lines; l += (unsigned long long)blockDim.x * gridDim.x) {
    unsigned long long base = (l / inner) * R * inner + l % inner;
    C acc = (C)0;
    for (unsigned long long t = 0; t < R; ++t) {
      unsigned long long off = base + (reverse ? R - 1 - t : t) * inner;
      C v = LD(x[off]);
      if (exclusive) { y[off] = ST(acc); acc = umd_add(acc, v); }
      else { acc = umd_add(acc, v); y[off] = ST(acc); }
    }
  }
}

extern "C" __global__ void __launch_bounds__(UMD_BLOCK) cumsum_NAME_rows(const T* __restrict__ x,
    T* __restrict__ y, unsigned long long lines, unsigned long long R, unsigned long long inner,
    unsigned int exclusive, unsigned int reverse) {
  __shared__ C s[UMD_BLOCK];
  unsigned int t = threadIdx.x;
  for (unsigned long long l = blockIdx.x; l < lines; l += gridDim.x) {
    unsigned long long base = (l / inner) * R * inner + l % inner;
    C carry = (C)0;
    for (unsigned long long c0 = 0; c0 < R; c0 += blockDim.x) {
      unsigned long long p = c0 + t;
      unsigned long long off = base + (reverse ? R - 1 - p : p) * inner;
      C v = p < R ? LD(x[off]) : (C)0;
      s[t] = v;
      __syncthreads();
      for (unsigned int d = 1; d < blockDim.x; d <<= 1) {
        C add = t >= d ? s[t - d] : (C)0;
        __syncthreads();
        s[t] = umd_add(s[t], add);
        __syncthreads();
      }
      C prefix = exclusive ? (t == 0 ? (C)0 : s[t - 1]) : s[t];
      C total = s[blockDim.x - 1];
      if (p < R) y[off] = ST(umd_add(carry, prefix));
      carry = umd_add(carry, total);
      __syncthreads();
    }
  }
}
"#;

/// TopK: one block per line; each element's rank is the number of elements before it in the
/// total order (NaN largest, ties by lower index), counted against tiles of the line staged in
/// shared memory (a chunk stops once none of its candidates can be in the top k); ranks below
/// k are written in place, so the output comes out sorted.
const TOPK: &str = r#"
__device__ __forceinline__ bool umd_topk_before(C av, unsigned long long ai, C bv,
    unsigned long long bi, bool largest) {
  bool an = umd_isnan(av), bn = umd_isnan(bv);
  if (an != bn) return largest ? an : bn;
  if (!an && av != bv) return largest ? (av > bv) : (av < bv);
  return ai < bi;
}

extern "C" __global__ void __launch_bounds__(UMD_BLOCK) topk_NAME(const T* __restrict__ x,
    T* __restrict__ vals, long long* __restrict__ idx, unsigned long long lines,
    unsigned long long R, unsigned long long inner, unsigned long long k, unsigned int largest) {
  __shared__ C tile[UMD_BLOCK];
  if (k == 0) return;
  unsigned int t = threadIdx.x;
  for (unsigned long long l = blockIdx.x; l < lines; l += gridDim.x) {
    unsigned long long o = l / inner, i = l % inner;
    const T* line = x + o * R * inner + i;
    unsigned long long obase = o * k * inner + i;
    for (unsigned long long c0 = 0; c0 < R; c0 += blockDim.x) {
      unsigned long long a = c0 + t;
      bool have = a < R;
      C av = have ? LD(line[a * inner]) : (C)0;
      unsigned long long rank = 0;
      for (unsigned long long t0 = 0; t0 < R; t0 += blockDim.x) {
        if (t0 + t < R) tile[t] = LD(line[(t0 + t) * inner]);
        __syncthreads();
        unsigned long long cnt = R - t0 < blockDim.x ? R - t0 : blockDim.x;
        if (have && rank < k)
          for (unsigned long long j = 0; j < cnt; ++j)
            rank += umd_topk_before(tile[j], t0 + j, av, a, largest != 0);
        /* stop scanning once no candidate of the chunk can still be in the top k */
        if (!__syncthreads_or(have && rank < k)) break;
      }
      if (have && rank < k) {
        vals[obase + rank * inner] = line[a * inner];
        idx[obase + rank * inner] = (long long)a;
      }
    }
  }
}
"#;
