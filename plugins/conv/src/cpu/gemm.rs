//! The compute types of the CPU kernels ([`Real`]: f32 for f32/f16/bf16, f64 for f64) and the
//! blocked GEMM both convolutions run on: `C += A·B` with a 4×8 register micro-kernel over
//! 256-deep slices of the shared dimension. On wasm32 the f32 path is compiled with SIMD128
//! (the micro-kernel with explicit `f32x4` intrinsics).

use crate::geom::Geom;
use std::ops::{Add, AddAssign, Div, Mul, Sub};

/// Arithmetic the float kernels compute in.
pub trait Real:
    Copy
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + AddAssign
    + Send
    + Sync
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn powf(self, p: Self) -> Self;
    /// The direct convolution ([`super::conv::direct_body`]); on wasm32 the f32 one is
    /// compiled with SIMD128 so its contiguous inner loop vectorizes.
    fn conv_direct(g: &Geom, x: &[Self], w: &[Self], y: &mut [Self]) {
        super::conv::direct_body(g, x, w, y)
    }
    /// `c[r*ldc + j] += Σ_k a[r*lda + k] * b[k*ldb + j]` for `r < rows`, `j < cols`,
    /// `k < depth`.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        rows: usize,
        cols: usize,
        depth: usize,
        a: &[Self],
        lda: usize,
        b: &[Self],
        ldb: usize,
        c: &mut [Self],
        ldc: usize,
    ) {
        gemm_body(
            rows,
            cols,
            depth,
            a,
            lda,
            b,
            ldb,
            c,
            ldc,
            micro_generic::<Self>,
        )
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn powf(self, p: f64) -> f64 {
        f64::powf(self, p)
    }
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn powf(self, p: f32) -> f32 {
        f32::powf(self, p)
    }
    #[cfg(target_arch = "wasm32")]
    fn gemm(
        rows: usize,
        cols: usize,
        depth: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        c: &mut [f32],
        ldc: usize,
    ) {
        // SAFETY: wasm SIMD128 is validated when the module loads; the engine the host uses
        // enables it.
        unsafe { simd::gemm_f32(rows, cols, depth, a, lda, b, ldb, c, ldc) }
    }
    #[cfg(target_arch = "wasm32")]
    fn conv_direct(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32]) {
        // SAFETY: as for `gemm`.
        unsafe { simd::conv_direct_f32(g, x, w, y) }
    }
}

/// Row block and column block of the micro-kernel, and the depth slice.
pub const MR: usize = 4;
pub const NR: usize = 8;
const KC: usize = 256;

/// The blocked driver: depth slices of [`KC`], 4-row blocks, 8-column micro tiles; rows and
/// columns left over take plain loops (contiguous over columns).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gemm_body<A: Real>(
    rows: usize,
    cols: usize,
    depth: usize,
    a: &[A],
    lda: usize,
    b: &[A],
    ldb: usize,
    c: &mut [A],
    ldc: usize,
    micro: impl Fn(usize, &[A], usize, &[A], usize, &mut [A], usize),
) {
    if rows == 0 || cols == 0 {
        return;
    }
    let full_rows = rows / MR * MR;
    let full_cols = cols / NR * NR;
    let mut k0 = 0;
    while k0 < depth {
        let kc = KC.min(depth - k0);
        // column strips outside, row blocks inside: a strip of B (kc × NR) stays in L1
        for r in (0..full_rows).step_by(MR) {
            for j in (0..full_cols).step_by(NR) {
                micro(
                    kc,
                    &a[r * lda + k0..],
                    lda,
                    &b[k0 * ldb + j..],
                    ldb,
                    &mut c[r * ldc + j..],
                    ldc,
                );
            }
        }
        if full_cols < cols {
            for rr in 0..full_rows {
                axpy_rows(
                    kc,
                    &a[rr * lda + k0..],
                    &b[k0 * ldb + full_cols..],
                    ldb,
                    &mut c[rr * ldc + full_cols..],
                    cols - full_cols,
                );
            }
        }
        for rr in full_rows..rows {
            axpy_rows(
                kc,
                &a[rr * lda + k0..],
                &b[k0 * ldb..],
                ldb,
                &mut c[rr * ldc..],
                cols,
            );
        }
        k0 += kc;
    }
}

/// One row of C: `c[j] += Σ_k a[k] * b[k*ldb + j]` for `j < cols`.
#[inline(always)]
fn axpy_rows<A: Real>(kc: usize, a: &[A], b: &[A], ldb: usize, c: &mut [A], cols: usize) {
    let c = &mut c[..cols];
    for (k, &w) in a[..kc].iter().enumerate() {
        let brow = &b[k * ldb..k * ldb + cols];
        for (o, &v) in c.iter_mut().zip(brow) {
            *o += w * v;
        }
    }
}

/// The 4×8 micro-kernel in plain Rust (accumulators in an array the compiler keeps in
/// registers).
#[inline(always)]
fn micro_generic<A: Real>(
    kc: usize,
    a: &[A],
    lda: usize,
    b: &[A],
    ldb: usize,
    c: &mut [A],
    ldc: usize,
) {
    let mut acc = [[A::ZERO; NR]; MR];
    for (r, row) in acc.iter_mut().enumerate() {
        row.copy_from_slice(&c[r * ldc..r * ldc + NR]);
    }
    let (a0, a1, a2, a3) = (
        &a[..kc],
        &a[lda..lda + kc],
        &a[2 * lda..2 * lda + kc],
        &a[3 * lda..3 * lda + kc],
    );
    for k in 0..kc {
        let bb: &[A; NR] = b[k * ldb..k * ldb + NR].try_into().expect("NR columns");
        let w = [a0[k], a1[k], a2[k], a3[k]];
        for r in 0..MR {
            for t in 0..NR {
                acc[r][t] += w[r] * bb[t];
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        c[r * ldc..r * ldc + NR].copy_from_slice(row);
    }
}

#[cfg(target_arch = "wasm32")]
mod simd {
    use super::*;
    use core::arch::wasm32::*;

    /// The driver compiled with SIMD128 (its plain loops vectorize too).
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "simd128")]
    pub unsafe fn gemm_f32(
        rows: usize,
        cols: usize,
        depth: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        c: &mut [f32],
        ldc: usize,
    ) {
        gemm_body(
            rows,
            cols,
            depth,
            a,
            lda,
            b,
            ldb,
            c,
            ldc,
            |kc, a, lda, b, ldb, c, ldc| {
                // SAFETY: SIMD128 is enabled here as in the caller.
                unsafe { micro_f32(kc, a, lda, b, ldb, c, ldc) }
            },
        )
    }

    /// The direct convolution compiled with SIMD128.
    #[target_feature(enable = "simd128")]
    pub unsafe fn conv_direct_f32(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32]) {
        crate::cpu::conv::direct_body(g, x, w, y)
    }

    /// The 4×8 micro-kernel on `f32x4` vectors: 8 accumulators, 2 B vectors, 4 splats.
    #[target_feature(enable = "simd128")]
    unsafe fn micro_f32(
        kc: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        c: &mut [f32],
        ldc: usize,
    ) {
        // SAFETY: the slices are bounds-checked to 4 lanes; v128 loads and stores need no
        // alignment.
        let load = |s: &[f32]| -> v128 { unsafe { v128_load(s[..4].as_ptr() as *const v128) } };
        let mut acc = [f32x4_splat(0.0); 2 * MR];
        for r in 0..MR {
            acc[2 * r] = load(&c[r * ldc..]);
            acc[2 * r + 1] = load(&c[r * ldc + 4..]);
        }
        let (a0, a1, a2, a3) = (
            &a[..kc],
            &a[lda..lda + kc],
            &a[2 * lda..2 * lda + kc],
            &a[3 * lda..3 * lda + kc],
        );
        for k in 0..kc {
            let bb = &b[k * ldb..k * ldb + NR];
            let (b0, b1) = (load(bb), load(&bb[4..]));
            let w = [a0[k], a1[k], a2[k], a3[k]];
            for r in 0..MR {
                let s = f32x4_splat(w[r]);
                acc[2 * r] = f32x4_add(acc[2 * r], f32x4_mul(s, b0));
                acc[2 * r + 1] = f32x4_add(acc[2 * r + 1], f32x4_mul(s, b1));
            }
        }
        for r in 0..MR {
            for h in 0..2 {
                let out = &mut c[r * ldc + 4 * h..r * ldc + 4 * h + 4];
                let v = acc[2 * r + h];
                out.copy_from_slice(&[
                    f32x4_extract_lane::<0>(v),
                    f32x4_extract_lane::<1>(v),
                    f32x4_extract_lane::<2>(v),
                    f32x4_extract_lane::<3>(v),
                ]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_matches_a_naive_product() {
        for &(rows, cols, depth) in &[(1, 1, 1), (4, 8, 3), (7, 19, 300), (9, 16, 257), (3, 5, 0)] {
            let (lda, ldb, ldc) = (depth + 2, cols + 3, cols + 1);
            let a: Vec<f64> = (0..rows * lda)
                .map(|i| ((i * 7) % 11) as f64 - 5.0)
                .collect();
            let b: Vec<f64> = (0..depth.max(1) * ldb)
                .map(|i| ((i * 5) % 13) as f64 - 6.0)
                .collect();
            let mut c: Vec<f64> = (0..rows * ldc).map(|i| i as f64).collect();
            let mut want = c.clone();
            for r in 0..rows {
                for j in 0..cols {
                    for k in 0..depth {
                        want[r * ldc + j] += a[r * lda + k] * b[k * ldb + j];
                    }
                }
            }
            f64::gemm(rows, cols, depth, &a, lda, &b, ldb, &mut c, ldc);
            assert_eq!(c, want, "{rows}x{cols}x{depth}");
            let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
            let mut c32: Vec<f32> = (0..rows * ldc).map(|i| i as f32).collect();
            f32::gemm(rows, cols, depth, &a32, lda, &b32, ldb, &mut c32, ldc);
            assert!(
                c32.iter()
                    .zip(&want)
                    .all(|(x, y)| (*x as f64 - y).abs() < 1e-3)
            );
        }
    }
}
