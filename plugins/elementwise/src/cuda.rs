//! CUDA C templates: one module per dtype holding every entry point of the plugin.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::{BINARY, UNARY};

/// The C expression of a binary op on compute values `x`, `y` (i32 wraps, i32 x/0 is 0).
fn binary_expr(kernel: &str, int: bool) -> &'static str {
    match (kernel, int) {
        ("add", false) => "x + y",
        ("sub", false) => "x - y",
        ("mul", false) => "x * y",
        ("div", false) => "x / y",
        ("add", true) => "(int)((unsigned)x + (unsigned)y)",
        ("sub", true) => "(int)((unsigned)x - (unsigned)y)",
        ("mul", true) => "(int)((unsigned)x * (unsigned)y)",
        _ => "(y == 0 ? 0 : (y == -1 ? (int)(0u - (unsigned)x) : x / y))",
    }
}

fn unary_expr(kernel: &str, int: bool) -> &'static str {
    match (kernel, int) {
        ("relu", _) => "(x > 0 ? x : 0)",
        (_, true) => "(int)(0u - (unsigned)x)",
        _ => "-x",
    }
}

/// The module `elementwise_{dtype}`.
pub fn module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage: t,
        compute: c,
        load,
        store,
    } = dtype::cuda_type(dt).expect("elementwise dtypes all have a CUDA type");
    let name = dtype::name(dt);
    let int = dt == Dtype::I32;
    let ld = |v: &str| load.replace('X', v);
    let st = |v: &str| store.replace('X', v);
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(
        "struct umd_dims { unsigned long long v[8]; };\n\
         #define UMD_GRID_STRIDE(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
         i < (n); i += (unsigned long long)blockDim.x * gridDim.x)\n",
    );
    let mut entries = Vec::new();
    for (_, k) in BINARY {
        let e = binary_expr(k, int);
        code.push_str(&format!(
            "extern \"C\" __global__ void {k}_{name}(const {t}* __restrict__ a, const {t}* __restrict__ b, \
             {t}* __restrict__ out, unsigned long long n) {{\n\
             UMD_GRID_STRIDE(i, n) {{ {c} x = {la}; {c} y = {lb}; out[i] = {so}; }}\n}}\n",
            la = ld("a[i]"),
            lb = ld("b[i]"),
            so = st(e),
        ));
        code.push_str(&format!(
            "extern \"C\" __global__ void {k}_{name}_bcast(const {t}* __restrict__ a, const {t}* __restrict__ b, \
             {t}* __restrict__ out, unsigned long long n, unsigned int rank, umd_dims shape, umd_dims sa, umd_dims sb) {{\n\
             UMD_GRID_STRIDE(i, n) {{\n\
               unsigned long long rem = i, ia = 0, ib = 0;\n\
               for (int d = (int)rank - 1; d >= 0; --d) {{\n\
                 unsigned long long j = rem % shape.v[d]; rem /= shape.v[d];\n\
                 ia += j * sa.v[d]; ib += j * sb.v[d];\n\
               }}\n\
               {c} x = {la}; {c} y = {lb}; out[i] = {so};\n\
             }}\n}}\n",
            la = ld("a[ia]"),
            lb = ld("b[ib]"),
            so = st(e),
        ));
        entries.push(format!("{k}_{name}"));
        entries.push(format!("{k}_{name}_bcast"));
    }
    for (_, k) in UNARY {
        code.push_str(&format!(
            "extern \"C\" __global__ void {k}_{name}(const {t}* __restrict__ x_in, {t}* __restrict__ out, \
             unsigned long long n) {{\n\
             UMD_GRID_STRIDE(i, n) {{ {c} x = {lx}; out[i] = {so}; }}\n}}\n",
            lx = ld("x_in[i]"),
            so = st(unary_expr(k, int)),
        ));
        entries.push(format!("{k}_{name}"));
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    }
}
