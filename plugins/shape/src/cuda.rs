//! CUDA C modules: `shape_move` (byte-moving kernels by element size: strided gather, fill from
//! parameters, splat, eye, trilu), `shape_range` (Range per dtype) and `shape_cast_{from}` (one
//! entry per target dtype). [`crate::cpu`] and [`crate::cast`] are the same kernels on the CPU.

use umd_sdk::dtype::{self, CUDA_PRELUDE};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::common::CAST_DTYPES;
use crate::consts::{FILL_CHUNK, RANGE_DTYPES};
use crate::copy::KMAX;
use crate::packed;

/// Element sizes the byte-moving kernels are instantiated for, with their storage types.
const SIZES: [(usize, &str); 4] = [
    (1, "unsigned char"),
    (2, "unsigned short"),
    (4, "unsigned int"),
    (8, "unsigned long long"),
];

/// Helpers every module of this plugin includes (after the SDK prelude).
fn header() -> String {
    format!(
        "{CUDA_PRELUDE}
struct umd_dims16 {{ unsigned long long v[{KMAX}]; }};
struct umd_sdims16 {{ long long v[{KMAX}]; }};
#define UMD_GRID_STRIDE(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
 i < (n); i += (unsigned long long)blockDim.x * gridDim.x)
// f64 -> f32 rounded to odd: a later round-to-nearest-even to f16/bf16 then rounds once.
__device__ __forceinline__ float umd_d2f_odd(double d) {{
    float f; asm(\"cvt.rz.f32.f64 %0, %1;\" : \"=f\"(f) : \"d\"(d));
    if (d == d && (double)f != d) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}}
"
    )
}

fn source(code: String, entry_points: Vec<String>) -> ModuleSource {
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points,
        options: vec!["--std=c++17".into()],
    }
}

/// The module `shape_move`.
pub fn move_module() -> ModuleSource {
    let mut code = header();
    code.push_str(&format!(
        "template <typename T, typename I>
__device__ __forceinline__ void umd_gather(const T* __restrict__ src, T* __restrict__ dst, I n,
    unsigned int rank, const umd_dims16& shape, const umd_sdims16& ss, const umd_sdims16& ds,
    long long sb, long long db) {{
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += step) {{
        I rem = i; long long so = sb, dof = db;
        for (int d = (int)rank - 1; d > 0; --d) {{
            const I ext = (I)shape.v[d]; const I j = rem % ext; rem /= ext;
            so += (long long)j * ss.v[d]; dof += (long long)j * ds.v[d];
        }}
        so += (long long)rem * ss.v[0]; dof += (long long)rem * ds.v[0];
        dst[dof] = src[so];
    }}
}}
struct umd_blob {{ unsigned long long v[{words}]; }};
extern \"C\" __global__ void fill_bytes(unsigned char* __restrict__ dst, unsigned long long offset,
    unsigned long long nbytes, umd_blob blob) {{
    UMD_GRID_STRIDE(i, nbytes) {{ dst[offset + i] = (unsigned char)(blob.v[i >> 3] >> ((i & 7) * 8)); }}
}}
",
        words = FILL_CHUNK / 8
    ));
    let mut entries = vec!["fill_bytes".to_string()];
    for (s, t) in SIZES {
        code.push_str(&format!(
            "extern \"C\" __global__ void gather_b{s}(const {t}* __restrict__ src, {t}* __restrict__ dst,
    unsigned long long n, unsigned int rank, umd_dims16 shape, umd_sdims16 ss, umd_sdims16 ds,
    long long sb, long long db) {{
    if (n <= 0x7fffffffULL) umd_gather<{t}, unsigned int>(src, dst, (unsigned int)n, rank, shape, ss, ds, sb, db);
    else umd_gather<{t}, unsigned long long>(src, dst, n, rank, shape, ss, ds, sb, db);
}}
extern \"C\" __global__ void splat_b{s}({t}* __restrict__ dst, unsigned long long n, unsigned long long bits) {{
    const {t} v = ({t})bits;
    UMD_GRID_STRIDE(i, n) {{ dst[i] = v; }}
}}
extern \"C\" __global__ void eye_b{s}({t}* __restrict__ dst, unsigned long long rows, unsigned long long cols,
    long long k, unsigned long long one) {{
    UMD_GRID_STRIDE(i, rows * cols) {{
        const unsigned long long r = i / cols, c = i - r * cols;
        dst[i] = ((long long)c - (long long)r == k) ? ({t})one : ({t})0;
    }}
}}
extern \"C\" __global__ void trilu_b{s}(const {t}* __restrict__ src, {t}* __restrict__ dst,
    unsigned long long n, unsigned long long rows, unsigned long long cols, long long k, unsigned int upper) {{
    UMD_GRID_STRIDE(i, n) {{
        const unsigned long long q = i / cols, c = i - q * cols, r = q % rows;
        const long long diff = (long long)c - (long long)r;
        const bool keep = upper ? diff >= k : diff <= k;
        dst[i] = keep ? src[i] : ({t})0;
    }}
}}
"
        ));
        for kind in ["gather", "splat", "eye", "trilu"] {
            entries.push(format!("{kind}_b{s}"));
        }
    }
    source(code, entries)
}

/// The module `shape_range`: `range_{dt}(dst, n, start, delta, istart, idelta, wide)`. Floats
/// compute `start + i·delta` in f64 and round (as the ONNX reference does for f32 and f64);
/// f16/bf16 compute in f32, or in f64 when `wide` (`stash_type`); no FMA contraction, as the
/// CPU kernel.
pub fn range_module() -> ModuleSource {
    let mut code = header();
    let mut entries = Vec::new();
    for dt in RANGE_DTYPES {
        let name = dtype::name(dt);
        let t = dtype::cuda_type(dt)
            .expect("every dtype has a CUDA type")
            .storage;
        let f32_at = "__fadd_rn(fs, __fmul_rn((float)i, fd))";
        let f64_at = "__dadd_rn(start, __dmul_rn((double)i, delta))";
        let int_at = "(long long)((unsigned long long)istart + i * (unsigned long long)idelta)";
        let value = match dt {
            Dtype::F32 => format!("(float){f64_at}"),
            Dtype::F64 => f64_at.to_string(),
            Dtype::F16 => format!("umd_f2h(wide ? umd_d2f_odd({f64_at}) : {f32_at})"),
            Dtype::Bf16 => format!("umd_f2b(wide ? umd_d2f_odd({f64_at}) : {f32_at})"),
            Dtype::I32 => format!("(int){int_at}"),
            Dtype::I16 => format!("(short){int_at}"),
            _ => int_at.to_string(),
        };
        code.push_str(&format!(
            "extern \"C\" __global__ void range_{name}({t}* __restrict__ dst, unsigned long long n,
    double start, double delta, long long istart, long long idelta, unsigned int wide) {{
    const float fs = (float)start, fd = (float)delta;
    UMD_GRID_STRIDE(i, n) {{ dst[i] = {value}; }}
}}
"
        ));
        entries.push(format!("range_{name}"));
    }
    source(code, entries)
}

/// How a source dtype is loaded for casting: into a float (`f`, exact: f32, f16, bf16 and the
/// 8-bit floats), a double (`d`), a long long (`v`) or an unsigned long long (`v`, u64).
#[derive(Clone, Copy, PartialEq)]
enum Class {
    Float,
    Double,
    Int,
    UInt,
}

fn class(dt: Dtype) -> Class {
    match dt {
        Dtype::F64 => Class::Double,
        Dtype::U64 => Class::UInt,
        dt if dt == Dtype::F32 || dt == Dtype::F16 || dt == Dtype::Bf16 || dtype::is_f8(dt) => {
            Class::Float
        }
        _ => Class::Int,
    }
}

/// The CUDA storage type of `dt` (bytes for the 8-bit floats).
fn storage(dt: Dtype) -> &'static str {
    dtype::cuda_type(dt).map_or("unsigned char", |t| t.storage)
}

fn load_expr(dt: Dtype) -> String {
    match dt {
        Dtype::F32 => "const float f = src[i];".into(),
        Dtype::F16 => "const float f = umd_h2f(src[i]);".into(),
        Dtype::Bf16 => "const float f = umd_b2f(src[i]);".into(),
        Dtype::F64 => "const double d = src[i];".into(),
        Dtype::U64 => "const unsigned long long v = src[i];".into(),
        Dtype::Boolean => "const long long v = (long long)(src[i] != 0);".into(),
        f8 if dtype::is_f8(f8) => {
            format!("const float f = {};", crate::f8::cuda_decode(f8, "src[i]"))
        }
        _ => "const long long v = (long long)src[i];".into(),
    }
}

/// The C expression converting the loaded value to `to` (see `crate::cast` for the rules).
fn convert_expr(from: Class, to: Dtype) -> String {
    let (x, as_double, odd, rne) = match from {
        Class::Float => ("f", "(double)f", "f", "f"),
        Class::Double => ("d", "d", "umd_d2f_odd(d)", "(float)d"),
        Class::Int => ("v", "(double)v", "umd_ll2f_odd(v)", "(float)v"),
        Class::UInt => ("v", "(double)v", "umd_ull2f_odd(v)", "(float)v"),
    };
    let int = |name: &str| {
        if matches!(from, Class::Int | Class::UInt) {
            format!("({})v", storage(to))
        } else {
            format!("umd_sat_{name}({as_double})")
        }
    };
    match to {
        Dtype::F32 => rne.into(),
        Dtype::F64 => as_double.into(),
        Dtype::F16 => format!("umd_f2h({odd})"),
        Dtype::Bf16 => format!("umd_f2b({odd})"),
        Dtype::Boolean => format!("(unsigned char)({x} != 0)"),
        Dtype::F8e8m0 => crate::f8::cuda_encode(to, rne),
        f8 if dtype::is_f8(f8) => crate::f8::cuda_encode(f8, odd),
        other => int(dtype::name(other)),
    }
}

const SATURATE: &str = "
// float -> integer: truncate toward zero, saturate, NaN -> 0
#define UMD_SAT(name, T, lo, hi) __device__ __forceinline__ T umd_sat_##name(double d) { \
    if (d != d) return (T)0; if (d >= (hi)) return (T)(hi); if (d <= (lo)) return (T)(lo); return (T)d; }
UMD_SAT(i8, signed char, -128.0, 127.0)
UMD_SAT(u8, unsigned char, 0.0, 255.0)
UMD_SAT(i16, short, -32768.0, 32767.0)
UMD_SAT(u16, unsigned short, 0.0, 65535.0)
UMD_SAT(i32, int, -2147483648.0, 2147483647.0)
UMD_SAT(u32, unsigned int, 0.0, 4294967295.0)
__device__ __forceinline__ long long umd_sat_i64(double d) {
    if (d != d) return 0;
    if (d >= 9223372036854775808.0) return 0x7fffffffffffffffLL;
    if (d <= -9223372036854775808.0) return -0x7fffffffffffffffLL - 1;
    return (long long)d;
}
__device__ __forceinline__ unsigned long long umd_sat_u64(double d) {
    if (d != d || d <= 0.0) return 0;
    if (d >= 18446744073709551616.0) return 0xffffffffffffffffULL;
    return (unsigned long long)d;
}
// integer -> f32 rounded to odd (exact when it fits)
__device__ __forceinline__ float umd_ll2f_odd(long long v) {
    float f; asm(\"cvt.rz.f32.s64 %0, %1;\" : \"=f\"(f) : \"l\"(v));
    if ((long long)f != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
__device__ __forceinline__ float umd_ull2f_odd(unsigned long long v) {
    float f; asm(\"cvt.rz.f32.u64 %0, %1;\" : \"=f\"(f) : \"l\"(v));
    if ((unsigned long long)f != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
";

/// The module `shape_cast_{from}`: `cast_{from}_{to}(src, dst, n, mode)` for every other dtype
/// (`mode`: bit 0 saturate, bits 1-2 the E8M0 rounding; see [`crate::cast`]).
pub fn cast_module(from: Dtype) -> ModuleSource {
    let mut code = header();
    code.push_str(SATURATE);
    code.push_str(crate::f8::CUDA);
    code.push_str(dtype::CUDA_PACKED);
    let mut entries = Vec::new();
    let a = storage(from);
    // What a source element loads as, and under which name.
    let (load, class, value) = if dtype::is_packed(from) {
        let float = packed::loads_float(from);
        (
            packed::cuda_load(from, "i"),
            if float { Class::Float } else { Class::Int },
            if float { "f" } else { "v" },
        )
    } else {
        let class = class(from);
        let value = match class {
            Class::Float => "f",
            Class::Double => "d",
            Class::Int | Class::UInt => "v",
        };
        (load_expr(from), class, value)
    };
    for to in CAST_DTYPES.into_iter().filter(|&t| t != from) {
        let b = storage(to);
        let entry = format!("cast_{}_{}", dtype::name(from), dtype::name(to));
        let body = if dtype::is_packed(to) {
            packed::cuda_store_body(to, &load, value)
        } else {
            format!(
                "UMD_GRID_STRIDE(i, n) {{ {load} dst[i] = {conv}; }}",
                conv = convert_expr(class, to)
            )
        };
        code.push_str(&format!(
            "extern \"C\" __global__ void {entry}(const {a}* __restrict__ src, {b}* __restrict__ dst,
    unsigned long long n, unsigned int mode) {{
    {body}
}}
"
        ));
        entries.push(entry);
    }
    source(code, entries)
}
