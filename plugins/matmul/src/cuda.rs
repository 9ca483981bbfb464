//! CUDA C: module `matmul_{T}` (entry `matmul_{T}`: MatMul and Gemm) per served dtype and
//! module `matmul_int8` (entries `matmulint_{TA}_{TB}`: MatMulInteger). One shared-memory tiled
//! kernel body: 16×16 tiles, one output element per thread, operands read through their
//! strides; batches (grid z) and row tiles (grid y) are strided over when they exceed the grid,
//! so an empty batch writes nothing and K = 0 writes the epilogue of a zero sum.

use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType};
use umd_sdk::{Dtype, ModuleSource, SourceLanguage};

use crate::{INT8, TILE};

const HEADER: &str = "typedef unsigned long long u64;\nstruct umd_dims { u64 v[8]; };\n";

/// The geometry parameters every entry ends with (see [`crate::plan`]).
const GEOMETRY: &str = "u64 M, u64 N, u64 K, u64 sam, u64 sak, u64 sbk, u64 sbn, \
                        unsigned int brank, umd_dims bshape, umd_dims sa, umd_dims sb";

/// One kernel: `params` before the geometry, accumulation type `acc`, loads of `a[ia]`/`b[ib]`
/// into it (`row`, `col` in scope), and the `epilogue` storing `acc` to `y[row * N + col]`.
fn kernel(
    entry: &str,
    params: &str,
    acc: &str,
    load_a: &str,
    load_b: &str,
    epilogue: &str,
) -> String {
    format!(
        r#"
extern "C" __global__ void {entry}({params}, {GEOMETRY}) {{
  __shared__ {acc} As[{TILE}][{TILE}];
  __shared__ {acc} Bs[{TILE}][{TILE} + 1];
  u64 batch = 1;
  for (unsigned int d = 0; d < brank; ++d) batch *= bshape.v[d];
  u64 tiles_m = (M + {TILE} - 1) / {TILE};
  u64 col = (u64)blockIdx.x * {TILE} + threadIdx.x;
  for (u64 z = blockIdx.z; z < batch; z += gridDim.z) {{
    u64 rem = z, oa = 0, ob = 0;
    for (int d = (int)brank - 1; d >= 0; --d) {{
      u64 j = rem % bshape.v[d]; rem /= bshape.v[d];
      oa += j * sa.v[d]; ob += j * sb.v[d];
    }}
    for (u64 ty = blockIdx.y; ty < tiles_m; ty += gridDim.y) {{
      u64 row = ty * {TILE} + threadIdx.y;
      {acc} acc = ({acc})0;
      for (u64 t0 = 0; t0 < K; t0 += {TILE}) {{
        u64 ka = t0 + threadIdx.x, kb = t0 + threadIdx.y;
        u64 ia = oa + row * sam + ka * sak, ib = ob + kb * sbk + col * sbn;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? ({load_a}) : ({acc})0;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? ({load_b}) : ({acc})0;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < {TILE}; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
      }}
      if (row < M && col < N) {{
        u64 iy = z * M * N + row * N + col;
        {epilogue}
      }}
    }}
  }}
}}
"#
    )
}

/// The module `matmul_{dt}` (MatMul and Gemm: `alpha * A·B + beta * C`).
pub fn module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage: t,
        compute,
        load,
        store,
    } = dtype::cuda_type(dt).expect("matmul dtypes all have a CUDA type");
    let name = dtype::name(dt);
    // integers accumulate in unsigned arithmetic (wrapping, as the CPU kernel)
    let (acc, scalar) = match dt {
        Dtype::I32 => ("unsigned int", "(unsigned int)(long long)"),
        Dtype::I64 => ("unsigned long long", "(unsigned long long)(long long)"),
        _ => (compute, ""),
    };
    let ld = |x: &str| format!("({acc})({})", load.replace('X', x));
    let st = store.replace('X', &format!("({compute})v"));
    let epilogue = format!(
        "{acc} v = alpha == 1.0 ? acc : ({acc})({scalar}alpha) * acc;\n        \
         if (flags & 1u) v += ({acc})({scalar}beta) * {lc};\n        \
         Y[iy] = {st};",
        lc = ld("Cin[row * scm + col * scn]"),
    );
    let params = format!(
        "unsigned int flags, const {t}* __restrict__ A, const {t}* __restrict__ B, \
         const {t}* __restrict__ Cin, {t}* __restrict__ Y, double alpha, double beta, u64 scm, u64 scn"
    );
    let entry = format!("matmul_{name}");
    let body = kernel(&entry, &params, acc, &ld("A[ia]"), &ld("B[ib]"), &epilogue);
    ModuleSource {
        language: SourceLanguage::CudaC,
        code: format!("{CUDA_PRELUDE}{HEADER}{body}"),
        entry_points: vec![entry],
        options: vec!["--std=c++17".into()],
    }
}

/// The module `matmul_int8` (MatMulInteger for every pair of u8/i8 operands).
pub fn int8_module() -> ModuleSource {
    let mut code = format!("{CUDA_PRELUDE}{HEADER}");
    let mut entries = Vec::new();
    for ta in INT8 {
        for tb in INT8 {
            let (sa, sb) = (
                dtype::cuda_type(ta).expect("int8").storage,
                dtype::cuda_type(tb).expect("int8").storage,
            );
            let entry = format!("matmulint_{}_{}", dtype::name(ta), dtype::name(tb));
            let params = format!(
                "unsigned int flags, const {sa}* __restrict__ A, const {sb}* __restrict__ B, \
                 const {sa}* __restrict__ azp, const {sb}* __restrict__ bzp, int* __restrict__ Y, \
                 u64 azs, u64 bzs"
            );
            let la = "(unsigned int)((int)A[ia] - ((flags & 1u) ? (int)azp[row * azs] : 0))";
            let lb = "(unsigned int)((int)B[ib] - ((flags & 2u) ? (int)bzp[col * bzs] : 0))";
            code.push_str(&kernel(
                &entry,
                &params,
                "unsigned int",
                la,
                lb,
                "Y[iy] = (int)acc;",
            ));
            entries.push(entry);
        }
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: entries,
        options: vec!["--std=c++17".into()],
    }
}
