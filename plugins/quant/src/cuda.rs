//! CUDA C of every module: one module per dtype combination (`quant_q_*`, `quant_dq_*`,
//! `quant_qmm_*`) with one entry point named as the module, and `quant_dyn_f32` with two.
//! Arithmetic is done in `double` with explicit rounding where the reference rounds, so the
//! results match the CPU kernels bit for bit (float `/` is IEEE-rounded: no fast-math option).

use umd_sdk::dtype::{self, CUDA_PACKED, CUDA_PRELUDE};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::elem::{CUDA_ROUND, cuda_load, cuda_load_at, cuda_storage, cuda_store, int_range};
use crate::f8;

const COMMON: &str = r#"
typedef unsigned long long u64;
struct umd_dims { u64 v[8]; };
#define UMD_GRID_STRIDE(i, n) for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; \
  i < (n); i += (u64)blockDim.x * gridDim.x)
__device__ __forceinline__ double umd_clamp(double v, double lo, double hi) {
  return v != v ? lo : fmin(fmax(v, lo), hi);
}
"#;

fn module(id: &str, entries: Vec<String>, body: String) -> ModuleSource {
    ModuleSource {
        language: SourceLanguage::CudaC,
        options: Vec::new(),
        code: format!(
            "{CUDA_PRELUDE}{CUDA_PACKED}{COMMON}{CUDA_ROUND}{}{body}",
            f8::CUDA
        ),
        entry_points: if entries.is_empty() {
            vec![id.to_string()]
        } else {
            entries
        },
    }
}

/// `quant_q_{X}_{S}_{Y}` or `quant_dq_{X}_{S}_{Y}`. A packed output (ABI 1.4) is written a byte
/// per thread: the thread computes that byte's elements in turn.
pub fn qdq(id: &str, quantize: bool, x: Dtype, s: Dtype, y: Dtype) -> ModuleSource {
    let z = if quantize { y } else { x };
    let packed_y = dtype::is_packed(y);
    let (open, close) = if packed_y {
        let b = dtype::bits(y);
        let per = 8 / b;
        (
            format!(
                "  UMD_GRID_STRIDE(j, (n * {b}ull + 7ull) / 8ull) {{\n  unsigned int byte = 0u;\n  \
                 for (unsigned int kk = 0u; kk < {per}u; ++kk) {{\n    const u64 e = j * {per}ull + kk;\n    \
                 if (e >= n) break;\n"
            ),
            "  }\n  y[j] = (unsigned char)byte;\n  }\n}\n".to_string(),
        )
    } else {
        (
            "  UMD_GRID_STRIDE(e, n) {\n".to_string(),
            "  }\n}\n".to_string(),
        )
    };
    let head = format!(
        r#"extern "C" __global__ void {id}(unsigned int flags, unsigned int prec,
    const {xt}* __restrict__ x, const {st}* __restrict__ s, const {zt}* __restrict__ zp,
    {yt}* __restrict__ y, u64 n, u64 inner, u64 len, u64 block, u64 so, u64 sa, u64 si) {{
{open}    u64 i = e % inner, t = e / inner;
    u64 k = (t / len) * so + ((t % len) / block) * sa + i * si;
    double sv = {ls};
    double xv = {lx};
    double zv = (flags & 1u) ? {lz} : 0.0;
"#,
        xt = cuda_storage(x),
        st = cuda_storage(s),
        zt = cuda_storage(z),
        yt = cuda_storage(y),
        ls = cuda_load_at(s, "s", "k"),
        lx = cuda_load_at(x, "x", "e"),
        lz = cuda_load_at(z, "zp", "k"),
    );
    let put = |code: String| {
        let b = dtype::bits(y);
        format!(
            "    byte |= ({code} & {}u) << (kk * {b}u);\n",
            (1u32 << b) - 1
        )
    };
    let body = if quantize {
        let q = "    double q = prec == 3u ? xv / sv : umd_round_to((double)((float)umd_round_to(xv, prec) / (float)umd_round_to(sv, prec)), prec);\n";
        let store = match int_range(y) {
            Some((lo, hi)) if packed_y => put(format!(
                "(unsigned int)(long long)umd_clamp(rint(q) + zv, {lo:.1}, {hi:.1})"
            )),
            Some((lo, hi)) => format!(
                "    y[e] = {};\n",
                cuda_store(y, &format!("umd_clamp(rint(q) + zv, {lo:.1}, {hi:.1})"))
            ),
            None if y == Dtype::F4e2m1 => {
                put("umd_f4_encode((double)((float)q + (float)zv))".to_string())
            }
            None => {
                let (eb, bias, fnuz) = f8::format(y);
                format!(
                    "    (void)zv;\n    y[e] = umd_f8_enc((float)q, {eb}, {bias}, {}, {:.1}, (flags & 2u) != 0u, {});\n",
                    fnuz as u32,
                    f8::max_finite(y),
                    (y == Dtype::F8e5m2) as u32
                )
            }
        };
        format!("{q}{store}")
    } else {
        format!(
            "    double dx = (double)(float)xv - zv;\n    double v = (flags & 2u) ? dx * sv : (double)((float)dx * (float)sv);\n    (void)prec;\n    y[e] = {};\n",
            cuda_store(y, "v")
        )
    };
    module(id, vec![], format!("{head}{body}{close}"))
}

/// `quant_qmm_{A}_{B}_{S}_{Y}`.
pub fn qmatmul(id: &str, [a, b, s, y]: [Dtype; 4]) -> ModuleSource {
    let (lo, hi) = int_range(y).expect("integer output");
    let code = format!(
        r#"extern "C" __global__ void {id}(unsigned int flags, unsigned int prec,
    const {at}* __restrict__ a, const {st}* __restrict__ as_, const {at}* __restrict__ azp,
    const {bt}* __restrict__ b, const {st}* __restrict__ bs, const {bt}* __restrict__ bzp,
    const {st}* __restrict__ ys, const {yt}* __restrict__ yzp, {yt}* __restrict__ y,
    u64 M, u64 K, u64 N, u64 batches, u64 rank, umd_dims dims, umd_dims astr, umd_dims bstr,
    u64 as_n, u64 bs_n) {{
  double ysv = {lys};
  double yz = (flags & 4u) ? {lyz} : 0.0;
  UMD_GRID_STRIDE(e, batches * M * N) {{
    u64 j = e % N, t = e / N;
    u64 i = t % M, bt = t / M;
    u64 ao = 0, bo = 0;
    for (int d = (int)rank - 1; d >= 0; --d) {{
      u64 idx = bt % dims.v[d]; bt /= dims.v[d];
      ao += idx * astr.v[d]; bo += idx * bstr.v[d];
    }}
    u64 ri = as_n == 1 ? 0 : i, cj = bs_n == 1 ? 0 : j;
    long long az = (flags & 1u) ? (long long)azp[ri] : 0;
    long long bz = (flags & 2u) ? (long long)bzp[cj] : 0;
    long long acc = 0;
    for (u64 kk = 0; kk < K; ++kk)
      acc += ((long long)a[ao + i * K + kk] - az) * ((long long)b[bo + kk * N + j] - bz);
    double sa = {lsa};
    double sb = {lsb};
    double mult = umd_round_to(umd_round_to(sa * sb, prec) / ysv, prec);
    double v = rint((double)acc * mult + yz);
    y[e] = {store};
  }}
}}
"#,
        at = cuda_storage(a),
        bt = cuda_storage(b),
        st = cuda_storage(s),
        yt = cuda_storage(y),
        lys = cuda_load(s, "ys[0]"),
        lyz = cuda_load(y, "yzp[0]"),
        lsa = cuda_load(s, "as_[ri]"),
        lsb = cuda_load(s, "bs[cj]"),
        store = cuda_store(y, &format!("umd_clamp(v, {lo:.1}, {hi:.1})")),
    );
    module(id, vec![], code)
}

/// `quant_dyn_f32`: entries `_range` and `_apply`.
pub fn dynamic() -> ModuleSource {
    let m = crate::dynq::MODULE;
    let code = format!(
        r#"__device__ __forceinline__ float umd_nmin(float a, float b) {{ return (a < b || a != a) ? a : b; }}
__device__ __forceinline__ float umd_nmax(float a, float b) {{ return (a > b || a != a) ? a : b; }}
extern "C" __global__ void {m}_range(const float* __restrict__ x, float* __restrict__ scale,
    unsigned char* __restrict__ zp, u64 n) {{
  __shared__ float lo[256], hi[256];
  float l = __int_as_float(0x7f800000), h = __int_as_float(0xff800000);
  for (u64 i = threadIdx.x; i < n; i += blockDim.x) {{ l = umd_nmin(l, x[i]); h = umd_nmax(h, x[i]); }}
  lo[threadIdx.x] = l; hi[threadIdx.x] = h;
  __syncthreads();
  for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {{
    if (threadIdx.x < w) {{
      lo[threadIdx.x] = umd_nmin(lo[threadIdx.x], lo[threadIdx.x + w]);
      hi[threadIdx.x] = umd_nmax(hi[threadIdx.x], hi[threadIdx.x + w]);
    }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{
    float maxx = umd_nmax(0.0f, hi[0]), minx = umd_nmin(0.0f, lo[0]);
    float s = (maxx == minx ? 1.0f : maxx - minx) / 255.0f;
    float init = 0.0f - minx / s;
    float z = init != init ? 255.0f : fminf(fmaxf(init, 0.0f), 255.0f);
    scale[0] = s;
    zp[0] = (unsigned char)rintf(z);
  }}
}}
extern "C" __global__ void {m}_apply(const float* __restrict__ x, const float* __restrict__ scale,
    const unsigned char* __restrict__ zp, unsigned char* __restrict__ y, u64 n) {{
  float s = scale[0], z = (float)zp[0];
  UMD_GRID_STRIDE(i, n) {{
    float v = rintf(x[i] / s) + z;
    y[i] = v != v ? (unsigned char)0 : (unsigned char)fminf(fmaxf(v, 0.0f), 255.0f);
  }}
}}
"#
    );
    module(m, vec![format!("{m}_range"), format!("{m}_apply")], code)
}
