//! CUDA C helpers for plugin kernels, as source text to put after [`crate::dtype::CUDA_PRELUDE`]
//! in a module (NVRTC has no include path): a grid-stride loop, NaN-propagating block-wide
//! reductions, and 16-byte vector access. Templates over the compute type, so one text serves
//! every dtype. Owns no kernel; the bundled norm and attention plugins use the reductions and
//! the misc plugin the loop, so CI's kernel gate compiles these for every architecture it checks.
//!
//! ```
//! let module = format!(
//!     "{}{}extern \"C\" __global__ void twice(const float* x, float* y, unsigned long long n) {{\n\
//!      UMD_FOR(i, n) y[i] = 2.0f * x[i];\n}}\n",
//!     umd_sdk::dtype::CUDA_PRELUDE,
//!     umd_sdk::cuda::HELPERS,
//! );
//! assert!(module.contains("UMD_FOR(i, n)"));
//! ```

/// The helpers:
/// - `UMD_FOR(i, n)`: `for` over `unsigned long long i` in `0..n`, grid-stride (any grid size);
/// - `umd_nan_max(a, b)`: the larger, NaN if either is (numpy's `max`);
/// - `umd_block_sum(v, sh)`, `umd_block_max(v, sh, lowest)`: every thread of the block gets the
///   sum / NaN-propagating maximum of the block's `v` (`lowest`: the identity, e.g. -inf);
///   `blockDim.x` a multiple of 32, at most 1024; `sh` shared memory of at least 32 elements;
///   `sh` may be reused as soon as the call returns;
/// - `umd_aligned16(p)`, `umd_load_f32x4(p)`, `umd_store_f32x4(p, v)`: 16-byte loads and stores
///   of four `float`s where `p` is 16-byte aligned (check before taking the vector path).
pub const HELPERS: &str = r#"
#define UMD_FOR(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x \
  + threadIdx.x; i < (n); i += (unsigned long long)blockDim.x * gridDim.x)
template <typename C> __device__ __forceinline__ C umd_nan_max(C a, C b) {
  return (a > b || a != a) ? a : b;
}
template <typename C> __device__ C umd_block_sum(C v, C* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : (C)0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) sh[0] = v;
  }
  __syncthreads();
  C r = sh[0];
  __syncthreads();
  return r;
}
template <typename C> __device__ C umd_block_max(C v, C* sh, C lowest) {
  for (int o = 16; o > 0; o >>= 1) v = umd_nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : lowest;
    for (int o = 16; o > 0; o >>= 1) v = umd_nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) sh[0] = v;
  }
  __syncthreads();
  C r = sh[0];
  __syncthreads();
  return r;
}
__device__ __forceinline__ bool umd_aligned16(const void* p) {
  return ((unsigned long long)p & 15ull) == 0;
}
__device__ __forceinline__ float4 umd_load_f32x4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ void umd_store_f32x4(float* p, float4 v) {
  *reinterpret_cast<float4*>(p) = v;
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_have_no_includes_and_define_what_they_document() {
        assert!(!HELPERS.contains("#include"), "NVRTC has no include path");
        for name in [
            "UMD_FOR",
            "umd_nan_max",
            "umd_block_sum",
            "umd_block_max",
            "umd_aligned16",
            "umd_load_f32x4",
            "umd_store_f32x4",
        ] {
            assert!(HELPERS.contains(name), "{name}");
        }
    }
}
