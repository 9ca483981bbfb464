//! CUDA C modules of the plugin, one thread per output (or update) element, grid-stride loops:
//!
//! - `gather_move_s{1,2,4,8}`: every data-movement kernel for one element size (gather,
//!   gather_elements, gather_nd, copy, scatter with reduction none, pad, depth/space,
//!   nearest resize);
//! - `gather_scatter_{dtype}`: ScatterElements/ScatterND reductions (atomic read-modify-write:
//!   native atomicAdd where CUDA has it, else a compare-and-swap loop, on the enclosing 32-bit
//!   word for 1- and 2-byte elements);
//! - `gather_resize_{dtype}`: interpolating Resize (`cuda_resize.rs`);
//! - `gather_onehot_{index dtype}`: OneHot, one entry per value size.
//!
//! The kernel signatures mirror the parameter structs documented next to each planner.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, OpError, SourceLanguage};

use crate::common::{self, NUMERIC_DTYPES, SIZES};
use crate::cuda_resize;
use crate::scatter::REDUCTIONS;

const HEADER: &str = r#"
struct umd_dims { unsigned long long v[8]; };
struct umd_f64s { double v[8]; };
#define UMD_LOOP(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
  i < (n); i += (unsigned long long)blockDim.x * gridDim.x)
__device__ __forceinline__ long long umd_index(const void* p, unsigned long long i, unsigned int idx64) {
  return idx64 ? ((const long long*)p)[i] : (long long)((const int*)p)[i];
}
/* Normalizes index k of an axis of dim elements (negative counts from the end). */
__device__ __forceinline__ bool umd_norm(long long k, unsigned long long dim, unsigned long long* out) {
  if (k < 0) k += (long long)dim;
  if (k < 0 || (unsigned long long)k >= dim) return false;
  *out = (unsigned long long)k;
  return true;
}
"#;

/// Gather kernels and the scatter loops (`$APPLY(p, v)` lands update `v` at `p`).
const GATHER: &str = r#"
extern "C" __global__ void gather_s$S(const T* __restrict__ data, const void* __restrict__ idx,
    T* __restrict__ out, unsigned long long n, unsigned long long inner, unsigned long long nidx,
    unsigned long long axis_dim, unsigned int idx64) {
  UMD_LOOP(o, n) {
    unsigned long long i = o % inner, t = o / inner, j = t % nidx, outer = t / nidx, k;
    T v = 0;
    if (umd_norm(umd_index(idx, j, idx64), axis_dim, &k)) v = data[(outer * axis_dim + k) * inner + i];
    out[o] = v;
  }
}
extern "C" __global__ void gather_elements_s$S(const T* __restrict__ data, const void* __restrict__ idx,
    T* __restrict__ out, unsigned long long n, unsigned int rank, unsigned int axis, unsigned int idx64,
    umd_dims odims, umd_dims dstrides, unsigned long long axis_dim) {
  UMD_LOOP(o, n) {
    unsigned long long rem = o, src = 0, k;
    for (int d = (int)rank - 1; d >= 0; --d) {
      unsigned long long c = rem % odims.v[d]; rem /= odims.v[d];
      if (d != (int)axis) src += c * dstrides.v[d];
    }
    T v = 0;
    if (umd_norm(umd_index(idx, o, idx64), axis_dim, &k)) v = data[src + k * dstrides.v[axis]];
    out[o] = v;
  }
}
extern "C" __global__ void gather_nd_s$S(const T* __restrict__ data, const void* __restrict__ idx,
    T* __restrict__ out, unsigned long long n, unsigned long long slice, unsigned long long k,
    unsigned long long per_batch, unsigned long long batch_stride, unsigned int idx64,
    umd_dims ddims, umd_dims dstrides) {
  UMD_LOOP(o, n) {
    unsigned long long s = o % slice, t = o / slice;
    unsigned long long src = (t / per_batch) * batch_stride + s;
    bool ok = true;
    for (unsigned long long j = 0; j < k; ++j) {
      unsigned long long v;
      if (!umd_norm(umd_index(idx, t * k + j, idx64), ddims.v[j], &v)) { ok = false; break; }
      src += v * dstrides.v[j];
    }
    out[o] = ok ? data[src] : (T)0;
  }
}
"#;

const SCATTER: &str = r#"
extern "C" __global__ void scatter_elements_$NAME(const void* __restrict__ idx, const T* __restrict__ upd,
    T* out, unsigned long long n, unsigned int rank, unsigned int axis, unsigned int idx64,
    umd_dims idims, umd_dims ostrides, unsigned long long axis_dim) {
  UMD_LOOP(u, n) {
    unsigned long long rem = u, dst = 0, k;
    for (int d = (int)rank - 1; d >= 0; --d) {
      unsigned long long c = rem % idims.v[d]; rem /= idims.v[d];
      if (d != (int)axis) dst += c * ostrides.v[d];
    }
    if (umd_norm(umd_index(idx, u, idx64), axis_dim, &k)) $APPLY(out + dst + k * ostrides.v[axis], upd[u]);
  }
}
extern "C" __global__ void scatter_nd_$NAME(const void* __restrict__ idx, const T* __restrict__ upd,
    T* out, unsigned long long n, unsigned long long slice, unsigned long long k, unsigned int idx64,
    umd_dims odims, umd_dims ostrides) {
  UMD_LOOP(u, n) {
    unsigned long long s = u % slice, t = u / slice, dst = s;
    bool ok = true;
    for (unsigned long long j = 0; j < k; ++j) {
      unsigned long long v;
      if (!umd_norm(umd_index(idx, t * k + j, idx64), odims.v[j], &v)) { ok = false; break; }
      dst += v * ostrides.v[j];
    }
    if (ok) $APPLY(out + dst, upd[u]);
  }
}
"#;

const MOVE: &str = r#"
extern "C" __global__ void copy_s$S(const T* __restrict__ src, T* __restrict__ out, unsigned long long n) {
  UMD_LOOP(o, n) out[o] = src[o];
}
/* Pad: the input coordinate of output coordinate c, false where the constant goes. */
__device__ __forceinline__ bool umd_pad_map(unsigned int mode, unsigned long long c, long long begin,
    unsigned long long n, unsigned long long* out) {
  long long i = (long long)c - begin, nn = (long long)n;
  if (i >= 0 && i < nn) { *out = (unsigned long long)i; return true; }
  if (mode == 1) {
    if (nn == 1) { *out = 0; return true; }
    long long p = 2 * (nn - 1), m = i % p;
    if (m < 0) m += p;
    *out = (unsigned long long)(m < nn ? m : p - m);
    return true;
  }
  if (mode == 2) { *out = i < 0 ? 0ull : (unsigned long long)(nn - 1); return true; }
  if (mode == 3) { long long m = i % nn; if (m < 0) m += nn; *out = (unsigned long long)m; return true; }
  return false;
}
#define UMD_PAD_BODY(VALUE) \
  UMD_LOOP(o, n) { \
    unsigned long long rem = o, src = 0, stride = 1; bool in = true; \
    for (int d = (int)rank - 1; d >= 0; --d) { \
      unsigned long long c = rem % odims.v[d], i = 0; rem /= odims.v[d]; \
      if (!umd_pad_map(mode, c, (long long)begin.v[d], idims.v[d], &i)) in = false; \
      src += i * stride; stride *= idims.v[d]; \
    } \
    out[o] = in ? x[src] : (VALUE); \
  }
extern "C" __global__ void pad_s$S(const T* __restrict__ x, T* __restrict__ out, unsigned long long n,
    unsigned int rank, unsigned int mode, umd_dims odims, umd_dims idims, umd_dims begin,
    unsigned long long value_bits) {
  UMD_PAD_BODY((T)value_bits)
}
extern "C" __global__ void pad_cptr_s$S(const T* __restrict__ x, const T* __restrict__ cval,
    T* __restrict__ out, unsigned long long n, unsigned int rank, unsigned int mode, umd_dims odims,
    umd_dims idims, umd_dims begin) {
  UMD_PAD_BODY(cval[0])
}
/* DepthToSpace: out is the shallow tensor [N, c, h, w]. */
extern "C" __global__ void d2s_s$S(const T* __restrict__ x, T* __restrict__ out, unsigned long long n,
    unsigned long long c, unsigned long long h, unsigned long long w, unsigned long long b, unsigned int crd) {
  UMD_LOOP(o, n) {
    unsigned long long xx = o % w, t = o / w, y = t % h; t /= h;
    unsigned long long ci = t % c, nb = t / c;
    unsigned long long bh = y % b, hh = y / b, bw = xx % b, ww = xx / b;
    unsigned long long dc = crd ? (ci * b + bh) * b + bw : (bh * b + bw) * c + ci;
    unsigned long long hd = h / b, wd = w / b, cd = c * b * b;
    out[o] = x[((nb * cd + dc) * hd + hh) * wd + ww];
  }
}
/* SpaceToDepth: x is the shallow tensor [N, c, h, w], out the deep one. */
extern "C" __global__ void s2d_s$S(const T* __restrict__ x, T* __restrict__ out, unsigned long long n,
    unsigned long long c, unsigned long long h, unsigned long long w, unsigned long long b, unsigned int crd) {
  UMD_LOOP(o, n) {
    unsigned long long hd = h / b, wd = w / b, cd = c * b * b;
    unsigned long long ww = o % wd, t = o / wd, hh = t % hd; t /= hd;
    unsigned long long dc = t % cd, nb = t / cd, ci, bh, bw;
    if (crd) { ci = dc / (b * b); bh = (dc / b) % b; bw = dc % b; }
    else { ci = dc % c; unsigned long long q = dc / c; bh = q / b; bw = q % b; }
    out[o] = x[((nb * c + ci) * h + hh * b + bh) * w + ww * b + bw];
  }
}
"#;

const ONEHOT: &str = r#"
extern "C" __global__ void onehot_s$S(const I* __restrict__ idx, const T$S* __restrict__ values,
    T$S* __restrict__ out, unsigned long long n, unsigned long long depth, unsigned long long inner,
    double depth_f, unsigned int wrap) {
  UMD_LOOP(o, n) {
    unsigned long long i = o % inner, t = o / inner, d = t % depth, outer = t / depth;
    double v = umd_idx(idx[outer * inner + i]);
    if (wrap && v < 0.0) v += depth_f;
    out[o] = values[v == (double)d ? 1 : 0];
  }
}
"#;

/// The unsigned storage type of an element size.
fn word(size: usize) -> &'static str {
    match size {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        _ => "unsigned long long",
    }
}

fn source(code: String, entry_points: Vec<String>) -> ModuleSource {
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points,
        options: vec!["--std=c++17".into(), "--fmad=false".into()],
    }
}

fn header() -> String {
    format!("{CUDA_PRELUDE}{HEADER}")
}

/// The module `gather_move_s{size}`.
pub fn move_module(size: usize) -> ModuleSource {
    let s = size.to_string();
    let body = format!(
        "typedef {} T;\n{GATHER}{}{MOVE}{}{}",
        word(size),
        SCATTER
            .replace("$NAME", "s$S")
            .replace("$APPLY", "UMD_STORE"),
        cuda_resize::DEVICE,
        cuda_resize::NEAREST,
    )
    .replace("$S", &s);
    let code = format!("{}#define UMD_STORE(p, v) (*(p) = (v))\n{body}", header());
    let entries = [
        "gather",
        "gather_elements",
        "gather_nd",
        "scatter_elements",
        "scatter_nd",
        "copy",
        "pad",
        "pad_cptr",
        "d2s",
        "s2d",
        "resize_nearest",
    ]
    .iter()
    .map(|b| common::move_entry(b, size))
    .collect();
    source(code, entries)
}

/// The C expression of reduction `red` on compute values `a` (current) and `b` (update).
fn reduce_expr(dt: Dtype, red: &str) -> String {
    let float = matches!(dt, Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::Bf16);
    let wrap = |op: &str| match dt {
        Dtype::I32 => format!("(int)((unsigned int)a {op} (unsigned int)b)"),
        Dtype::I64 => format!("(long long)((unsigned long long)a {op} (unsigned long long)b)"),
        _ => format!("a {op} b"),
    };
    match (red, float) {
        ("add", _) => wrap("+"),
        ("mul", _) => wrap("*"),
        ("max", true) => "(a != a || b != b) ? a + b : (a >= b ? a : b)".into(),
        ("min", true) => "(a != a || b != b) ? a + b : (a <= b ? a : b)".into(),
        ("max", false) => "a >= b ? a : b".into(),
        _ => "a <= b ? a : b".into(),
    }
}

/// `umd_rmw_{red}(T* p, T u)`: an atomic `*p = red(*p, u)`.
fn rmw_fn(dt: Dtype, red: &str) -> String {
    let CudaType {
        storage: t,
        compute: c,
        load,
        store,
    } = dtype::cuda_type(dt).expect("numeric dtype");
    let ld = |v: &str| load.replace('X', v);
    let op = reduce_expr(dt, red);
    let nv = format!(
        "{c} a = {}, b = {}; {t} nv = {};",
        ld("cur"),
        ld("u"),
        store.replace('X', &format!("({op})"))
    );
    let native = match (dt, red) {
        (Dtype::F32 | Dtype::F64 | Dtype::I32 | Dtype::U32 | Dtype::U64, "add") => {
            Some("atomicAdd(p, u);".to_string())
        }
        (Dtype::I64, "add") => {
            Some("atomicAdd((unsigned long long*)p, (unsigned long long)u);".to_string())
        }
        _ => None,
    };
    let body = if let Some(n) = native {
        n
    } else {
        match dtype::size(dt) {
            4 | 8 => {
                let (w, from, to) = match dt {
                    Dtype::F32 => (
                        "unsigned int",
                        "__uint_as_float(assumed)",
                        "__float_as_uint(nv)",
                    ),
                    Dtype::F64 => (
                        "unsigned long long",
                        "__longlong_as_double((long long)assumed)",
                        "(unsigned long long)__double_as_longlong(nv)",
                    ),
                    Dtype::I32 => ("unsigned int", "(int)assumed", "(unsigned int)nv"),
                    Dtype::U32 => ("unsigned int", "assumed", "nv"),
                    Dtype::U64 => ("unsigned long long", "assumed", "nv"),
                    _ => (
                        "unsigned long long",
                        "(long long)assumed",
                        "(unsigned long long)nv",
                    ),
                };
                format!(
                    "{w}* w = ({w}*)p; {w} old = *w, assumed;\n  \
                     do {{ assumed = old; {t} cur = {from}; {nv} old = atomicCAS(w, assumed, {to}); }} \
                     while (assumed != old);"
                )
            }
            size => {
                let (mask, bits) = if size == 2 {
                    ("0xffffu", "(unsigned int)nv")
                } else {
                    ("0xffu", "(unsigned int)(unsigned char)nv")
                };
                format!(
                    "unsigned long long ad = (unsigned long long)p;\n  \
                     unsigned int* w = (unsigned int*)(ad & ~3ull); unsigned int sh = (unsigned int)(ad & 3ull) * 8u;\n  \
                     unsigned int old = *w, assumed;\n  \
                     do {{ assumed = old; {t} cur = ({t})((assumed >> sh) & {mask}); {nv}\n    \
                     unsigned int repl = (assumed & ~({mask} << sh)) | (({bits} & {mask}) << sh);\n    \
                     old = atomicCAS(w, assumed, repl); }} while (assumed != old);"
                )
            }
        }
    };
    format!("__device__ __forceinline__ void umd_rmw_{red}({t}* p, {t} u) {{\n  {body}\n}}\n")
}

/// The module `gather_scatter_{dt}`.
pub fn scatter_module(dt: Dtype) -> ModuleSource {
    let t = dtype::cuda_type(dt).expect("numeric dtype").storage;
    let name = dtype::name(dt);
    let mut code = format!("{}typedef {t} T;\n", header());
    let mut entries = Vec::new();
    for red in REDUCTIONS {
        code.push_str(&rmw_fn(dt, red));
        code.push_str(
            &SCATTER
                .replace("$NAME", &format!("{red}_{name}"))
                .replace("$APPLY", &format!("umd_rmw_{red}")),
        );
        entries.push(format!("scatter_elements_{red}_{name}"));
        entries.push(format!("scatter_nd_{red}_{name}"));
    }
    source(code, entries)
}

/// The module `gather_onehot_{idx}`.
pub fn onehot_module(idx: Dtype) -> ModuleSource {
    let CudaType { storage, load, .. } = dtype::cuda_type(idx).expect("numeric dtype");
    let mut code = format!(
        "{}typedef {storage} I;\n__device__ __forceinline__ double umd_idx(I v) {{ return (double)({}); }}\n",
        header(),
        load.replace('X', "v")
    );
    let mut entries = Vec::new();
    for s in SIZES {
        code.push_str(&format!("typedef {} T{s};\n", word(s)));
        code.push_str(&ONEHOT.replace("$S", &s.to_string()));
        entries.push(common::move_entry("onehot", s));
    }
    source(code, entries)
}

/// The module `gather_resize_{dt}`.
pub fn resize_module(dt: Dtype) -> ModuleSource {
    let (body, entry) = cuda_resize::interp_module(dt);
    source(format!("{}{body}", header()), vec![entry])
}

/// The source of a module id this plugin's plans name.
pub fn module(id: &str) -> Result<ModuleSource, OpError> {
    let unknown = || OpError::internal(format!("unknown module `{id}`"));
    let numeric = |s: &str| {
        dtype::from_name(s)
            .filter(|d| NUMERIC_DTYPES.contains(d))
            .ok_or_else(unknown)
    };
    if let Some(s) = id.strip_prefix("gather_move_s") {
        let size: usize = s.parse().map_err(|_| unknown())?;
        if !SIZES.contains(&size) {
            return Err(unknown());
        }
        Ok(move_module(size))
    } else if let Some(d) = id.strip_prefix("gather_scatter_") {
        Ok(scatter_module(numeric(d)?))
    } else if let Some(d) = id.strip_prefix("gather_resize_") {
        Ok(resize_module(numeric(d)?))
    } else if let Some(d) = id.strip_prefix("gather_onehot_") {
        Ok(onehot_module(numeric(d)?))
    } else {
        Err(unknown())
    }
}
