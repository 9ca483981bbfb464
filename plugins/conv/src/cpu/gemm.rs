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
            |k0, kc, full_rows, full_cols, c| {
                for r in (0..full_rows).step_by(MR) {
                    for j in (0..full_cols).step_by(NR) {
                        micro_generic::<Self>(
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
            },
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

/// The blocked driver: depth slices of [`KC`]; per slice `blocks(k0, kc, full_rows,
/// full_cols, c)` runs the 4-row × 8-column micro tiles, and the rows and columns left over
/// take plain loops (contiguous over columns).
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
    mut blocks: impl FnMut(usize, usize, usize, usize, &mut [A]),
) {
    if rows == 0 || cols == 0 {
        return;
    }
    let full_rows = rows / MR * MR;
    let full_cols = cols / NR * NR;
    let mut k0 = 0;
    while k0 < depth {
        let kc = KC.min(depth - k0);
        blocks(k0, kc, full_rows, full_cols, c);
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
    use umd_sdk::simd::F32x4;

    /// The driver compiled with SIMD128 (its plain loops vectorize too): per depth slice, A's
    /// full 4-row panels are packed interleaved (`panel[k * MR + r]`), so the micro-kernel
    /// takes the 4 A values of a step in one load.
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
        let mut apack: Vec<f32> = Vec::new();
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
            |k0, kc, full_rows, full_cols, c| {
                apack.clear();
                apack.resize(full_rows * kc, 0.0);
                for (p, panel) in apack.chunks_exact_mut(MR * kc).enumerate() {
                    for r in 0..MR {
                        let row = &a[(p * MR + r) * lda + k0..][..kc];
                        for (step, &v) in panel.chunks_exact_mut(MR).zip(row) {
                            step[r] = v;
                        }
                    }
                }
                for (p, panel) in apack.chunks_exact(MR * kc).enumerate() {
                    for j in (0..full_cols).step_by(NR) {
                        micro_f32(
                            panel,
                            &b[k0 * ldb + j..],
                            ldb,
                            &mut c[p * MR * ldc + j..],
                            ldc,
                        );
                    }
                }
            },
        )
    }

    /// The direct convolution compiled with SIMD128.
    #[target_feature(enable = "simd128")]
    pub unsafe fn conv_direct_f32(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32]) {
        crate::cpu::conv::direct_body(g, x, w, y)
    }

    /// The 4×8 micro-kernel over a packed A panel (`kc` steps of 4 values) and 8 columns of B
    /// (`ldb` apart): 8 accumulators, 2 B vectors, the 4 A values broadcast from one load. Not
    /// inlined, its loop unrolled 4 steps: Wasmtime checks for an epoch interruption at each
    /// loop header and Cranelift keeps the accumulators on the stack across that check, so
    /// the unrolled body pays it once per 4 steps (as matmul's kernel does).
    #[inline(never)]
    fn micro_f32(ap: &[f32], b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
        let mut t = [F32x4::zero(); 2 * MR];
        for r in 0..MR {
            t[2 * r] = F32x4::load(&c[r * ldc..]);
            t[2 * r + 1] = F32x4::load(&c[r * ldc + 4..]);
        }
        let step = |t: &mut [F32x4; 2 * MR], av: &[f32], bv: &[f32]| {
            let a = F32x4::load(av);
            let (b0, b1) = (F32x4::load(bv), F32x4::load(&bv[4..]));
            let s = [
                a.broadcast::<0>(),
                a.broadcast::<1>(),
                a.broadcast::<2>(),
                a.broadcast::<3>(),
            ];
            for r in 0..MR {
                t[2 * r] = t[2 * r].madd(s[r], b0);
                t[2 * r + 1] = t[2 * r + 1].madd(s[r], b1);
            }
        };
        let (quads, rest) = ap.as_chunks::<{ 4 * MR }>();
        let mut k = 0;
        for q in quads {
            step(&mut t, &q[..MR], &b[k * ldb..]);
            step(&mut t, &q[MR..2 * MR], &b[(k + 1) * ldb..]);
            step(&mut t, &q[2 * MR..3 * MR], &b[(k + 2) * ldb..]);
            step(&mut t, &q[3 * MR..], &b[(k + 3) * ldb..]);
            k += 4;
        }
        for av in rest.chunks_exact(MR) {
            step(&mut t, av, &b[k * ldb..]);
            k += 1;
        }
        for r in 0..MR {
            t[2 * r].store(&mut c[r * ldc..]);
            t[2 * r + 1].store(&mut c[r * ldc + 4..]);
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
