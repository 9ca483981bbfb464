//! CUDA C templates: one module per (kernel group, dtype), each kernel in the three walk modes
//! of [`Mode`] (flat: contiguous-or-scalar inputs, no index arithmetic; strided with 32-bit
//! magic-number division; strided with 64-bit division). The per-element expressions are the
//! twins of [`crate::scalar`].

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::bcast::Mode;
use crate::ops::{Group, KERNELS, Kernel, POW_EXPONENTS};

/// Helpers every module includes after the SDK prelude.
const HELPERS: &str = r#"
struct umd_u32x8 { unsigned int v[8]; };
struct umd_u64x8 { unsigned long long v[8]; };
#define UMD_GRID_STRIDE(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < (n); i += (unsigned long long)blockDim.x * gridDim.x)
__device__ __forceinline__ unsigned int umd_udiv(unsigned int x, unsigned int m, unsigned int s) {
    return (unsigned int)(((unsigned long long)__umulhi(x, m) + x) >> s);
}
__device__ __forceinline__ float umd_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double umd_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float umd_pymod(float a, float b) {
    float m = fmodf(a, b);
    if (b == 0.0f) return m;
    if (m != 0.0f) { if ((b < 0.0f) != (m < 0.0f)) m += b; } else m = copysignf(0.0f, b);
    return m;
}
__device__ __forceinline__ double umd_pymod(double a, double b) {
    double m = fmod(a, b);
    if (b == 0.0) return m;
    if (m != 0.0) { if ((b < 0.0) != (m < 0.0)) m += b; } else m = copysign(0.0, b);
    return m;
}
__device__ __forceinline__ long long umd_ipow(long long x, long long e) {
    if (e < 0) return x == 1 ? 1 : (x == -1 ? ((e & 1) ? -1 : 1) : 0);
    unsigned long long r = 1ull, b = (unsigned long long)x;
    while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
    return (long long)r;
}
__device__ __forceinline__ bool umd_integral(double e) {
    return trunc(e) == e && fabs(e) < 9.2e18;
}
"#;

/// Whether `dt` is an unsigned integer (bool included: it is never negative).
fn is_unsigned(dt: Dtype) -> bool {
    matches!(
        dt,
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 | Dtype::Boolean
    )
}

/// Storage of `dt` moved as bytes (Where): its CUDA type, or an unsigned integer of its size
/// for the 8-bit floats, which have no CUDA compute type.
fn raw_storage(dt: Dtype) -> &'static str {
    match dtype::cuda_type(dt) {
        Some(t) => t.storage,
        None => match dtype::size(dt) {
            1 => "unsigned char",
            2 => "unsigned short",
            4 => "unsigned int",
            _ => "unsigned long long",
        },
    }
}

/// Whether `dt` computes in a float type.
fn is_float(dt: Dtype) -> bool {
    matches!(dt, Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64)
}

/// The C expression of `kernel` on compute values `x`, `y` (`z`) of main dtype `dt`
/// (`ydt`: Pow's exponent). Integers use `UMD_C` (compute type) and `UMD_U` (its unsigned twin).
fn expr(kernel: &str, dt: Dtype, ydt: Option<Dtype>) -> String {
    let float = is_float(dt);
    let s = match (kernel, float) {
        ("add", true) => "(x + y)",
        ("sub", true) => "(x - y)",
        ("mul", true) => "(x * y)",
        ("div", true) => "(x / y)",
        ("add", false) => "(UMD_C)((UMD_U)x + (UMD_U)y)",
        ("sub", false) => "(UMD_C)((UMD_U)x - (UMD_U)y)",
        ("mul", false) => "(UMD_C)((UMD_U)x * (UMD_U)y)",
        ("div", false) => {
            "(y == 0 ? (UMD_C)0 : (UMD_M1(y) ? (UMD_C)((UMD_U)0 - (UMD_U)x) : (UMD_C)(x / y)))"
        }
        ("mod", true) => "umd_pymod(x, y)",
        ("fmod", true) => "umd_fmod(x, y)",
        ("mod", false) => "umd_imod(x, y)",
        ("fmod", false) => "((y == 0 || UMD_M1(y)) ? (UMD_C)0 : (UMD_C)(x % y))",
        ("max", true) => "((x != x || x >= y) ? x : y)",
        ("min", true) => "((x != x || x <= y) ? x : y)",
        ("max", false) => "((x >= y) ? x : y)",
        ("min", false) => "((x <= y) ? x : y)",
        ("prelu", true) => "(x > 0 ? x : x * y)",
        ("prelu", false) => "(x > 0 ? x : (UMD_C)((UMD_U)x * (UMD_U)y))",
        ("copy", _) => "x",
        ("divn", _) => "(x / (UMD_C)extra)",
        ("band", _) => "(x & y)",
        ("bor", _) => "(x | y)",
        ("bxor", _) => "(x ^ y)",
        ("shl", _) => "((UMD_NEG(y) || y >= UMD_BITS) ? (UMD_C)0 : (UMD_C)((UMD_U)x << y))",
        ("shr", _) => {
            "((UMD_NEG(y) || y >= UMD_BITS) ? (UMD_NEG(x) ? (UMD_C)-1 : (UMD_C)0) : (UMD_C)(x >> y))"
        }
        ("eq", _) => "(x == y)",
        ("lt", _) => "(x < y)",
        ("gt", _) => "(x > y)",
        ("le", _) => "(x <= y)",
        ("ge", _) => "(x >= y)",
        ("and", _) => "(x && y)",
        ("or", _) => "(x || y)",
        ("xor", _) => "(x != y)",
        ("where", _) => "(x ? y : z)",
        ("pow", _) => return pow_expr(dt, ydt.unwrap_or(dt)),
        _ => unreachable!("every kernel of the table has an expression"),
    };
    s.to_string()
}

fn pow_expr(dt: Dtype, ydt: Dtype) -> String {
    let y_f32 = matches!(ydt, Dtype::F32 | Dtype::F16 | Dtype::Bf16);
    match dt {
        Dtype::F64 => "pow(x, (double)y)".into(),
        _ if is_float(dt) && y_f32 => "powf(x, y)".into(),
        _ if is_float(dt) => "(float)pow((double)x, (double)y)".into(),
        _ if is_float(ydt) => "(umd_integral((double)y) ? (UMD_C)umd_ipow((long long)x, \
                               (long long)y) : (UMD_C)pow((double)x, (double)y))"
            .into(),
        _ => "(UMD_C)umd_ipow((long long)x, (long long)y)".into(),
    }
}

/// How a kernel reads input `k` and writes its output: (storage, compute, load, store).
fn io(kernel: &Kernel, dt: Dtype, ydt: Option<Dtype>) -> (Vec<CudaType>, CudaType) {
    let ct = |d: Dtype| dtype::cuda_type(d).expect("every dtype has a CUDA type");
    let moved = |d: Dtype| CudaType {
        storage: raw_storage(d),
        compute: raw_storage(d),
        load: "(X)",
        store: "(X)",
    };
    let ins = match kernel.group {
        Group::Where => vec![ct(Dtype::Boolean), moved(dt), moved(dt)],
        _ => kernel.input_dtypes(dt, ydt).into_iter().map(ct).collect(),
    };
    let out = match kernel.group {
        Group::Where => moved(dt),
        _ => ct(kernel.output_dtype(dt)),
    };
    (ins, out)
}

/// One kernel in one mode.
fn kernel_text(kernel: &Kernel, dt: Dtype, ydt: Option<Dtype>, mode: Mode) -> String {
    let (ins, out) = io(kernel, dt, ydt);
    let k = ins.len();
    let mut params: Vec<String> = ins
        .iter()
        .enumerate()
        .map(|(i, t)| format!("const {}* in{i}", t.storage))
        .collect();
    params.push(format!("{}* out", out.storage));
    params.push("unsigned long long n".into());
    let mut body = String::new();
    match mode {
        Mode::Flat => {
            params.push("unsigned int scalar_mask".into());
            for i in 0..k {
                body.push_str(&format!(
                    "    unsigned long long o{i} = (scalar_mask & {}u) ? 0ull : i;\n",
                    1 << i
                ));
            }
        }
        Mode::Strided32 => {
            params.push("unsigned int rank".into());
            for p in ["size", "magic", "shift"] {
                params.push(format!("umd_u32x8 {p}"));
            }
            params.extend((0..k).map(|i| format!("umd_u32x8 st{i}")));
            body.push_str("    unsigned int rem = (unsigned int)i, last = rank - 1;\n");
            body.push_str(&format!(
                "    unsigned int {};\n",
                (0..k)
                    .map(|i| format!("o{i} = 0"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            body.push_str(
                "    #pragma unroll\n    for (int d = 0; d < 8; ++d) {\n\
                 \x20     if (d < (int)last) {\n\
                 \x20       unsigned int q = umd_udiv(rem, magic.v[d], shift.v[d]);\n\
                 \x20       unsigned int j = rem - q * size.v[d]; rem = q;\n",
            );
            for i in 0..k {
                body.push_str(&format!("        o{i} += j * st{i}.v[d];\n"));
            }
            body.push_str("      } else if (d == (int)last) {\n");
            for i in 0..k {
                body.push_str(&format!("        o{i} += rem * st{i}.v[d];\n"));
            }
            body.push_str("      }\n    }\n");
        }
        Mode::Strided64 => {
            params.push("unsigned int rank".into());
            params.push("umd_u64x8 size".into());
            params.extend((0..k).map(|i| format!("umd_u64x8 st{i}")));
            body.push_str("    unsigned long long rem = i;\n    unsigned int last = rank - 1;\n");
            body.push_str(&format!(
                "    unsigned long long {};\n",
                (0..k)
                    .map(|i| format!("o{i} = 0"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            body.push_str(
                "    #pragma unroll\n    for (int d = 0; d < 8; ++d) {\n\
                 \x20     if (d < (int)last) {\n\
                 \x20       unsigned long long j = rem % size.v[d]; rem /= size.v[d];\n",
            );
            for i in 0..k {
                body.push_str(&format!("        o{i} += j * st{i}.v[d];\n"));
            }
            body.push_str("      } else if (d == (int)last) {\n");
            for i in 0..k {
                body.push_str(&format!("        o{i} += rem * st{i}.v[d];\n"));
            }
            body.push_str("      }\n    }\n");
        }
    }
    if kernel.extra {
        params.push("unsigned long long extra".into());
    }
    let vars = ["x", "y", "z"];
    for (i, t) in ins.iter().enumerate() {
        body.push_str(&format!(
            "    {} {} = {};\n",
            t.compute,
            vars[i],
            t.load.replace('X', &format!("in{i}[o{i}]"))
        ));
    }
    let value = format!("({})({})", out.compute, expr(kernel.name, dt, ydt));
    body.push_str(&format!(
        "    out[i] = {};\n",
        out.store.replace('X', &value)
    ));
    format!(
        "extern \"C\" __global__ void {}({}) {{\n  UMD_GRID_STRIDE(i, n) {{\n{body}  }}\n}}\n",
        kernel.entry(dt, ydt, mode),
        params.join(", ")
    )
}

/// The `UMD_C`/`UMD_U`/`UMD_BITS` defines and integer helpers of a module of dtype `dt`.
fn dtype_defines(dt: Dtype) -> String {
    let c = dtype::cuda_type(dt).map_or(raw_storage(dt), |t| t.compute);
    let u = match c {
        "long long" => "unsigned long long",
        "int" => "unsigned int",
        _ => c,
    };
    let mut s = format!(
        "#define UMD_C {c}\n#define UMD_U {u}\n#define UMD_BITS {}\n",
        8 * dtype::size(dt)
    );
    // Sign tests that vanish for unsigned types (no "pointless comparison" warnings).
    if is_unsigned(dt) || dtype::is_f8(dt) {
        s.push_str("#define UMD_NEG(v) false\n#define UMD_M1(v) false\n");
    } else {
        s.push_str("#define UMD_NEG(v) ((v) < 0)\n#define UMD_M1(v) ((v) == (UMD_C)-1)\n");
    }
    if !is_float(dt) {
        s.push_str(
            "__device__ __forceinline__ UMD_C umd_imod(UMD_C x, UMD_C y) {\n\
             \x20   if (y == 0 || UMD_M1(y)) return 0;\n\
             \x20   UMD_C r = x % y;\n\
             \x20   if (r != 0 && (UMD_NEG(r) != UMD_NEG(y))) r += y;\n\
             \x20   return r;\n}\n",
        );
    }
    s
}

/// The module of `group` for dtype `dt`.
pub fn module(group: Group, dt: Dtype) -> ModuleSource {
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(HELPERS);
    code.push_str(&dtype_defines(dt));
    let mut entries = Vec::new();
    for kernel in KERNELS
        .iter()
        .filter(|k| k.group == group && k.dtypes.contains(&dt))
    {
        let ydts: Vec<Option<Dtype>> = if group == Group::Pow {
            POW_EXPONENTS.iter().map(|y| Some(*y)).collect()
        } else {
            vec![None]
        };
        for ydt in ydts {
            for mode in [Mode::Flat, Mode::Strided32, Mode::Strided64] {
                code.push_str(&kernel_text(kernel, dt, ydt, mode));
                entries.push(kernel.entry(dt, ydt, mode));
            }
        }
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    }
}
