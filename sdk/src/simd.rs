//! Four `f32` lanes ([`F32x4`]: `+`, `-`, `*`, [`F32x4::madd`], NaN-aware [`F32x4::max_nan`],
//! [`F32x4::relu`], loads, stores, splats, lane broadcasts and shuffles) for hand-written CPU micro-kernels: `wasm32` SIMD128 (`v128`)
//! when the plugin is compiled with `+simd128` (as `umd-sdk-build` does), plain `[f32; 4]`
//! arithmetic otherwise (native unit tests; LLVM vectorizes it to SSE/NEON).
//!
//! [`F32x4::madd`] is `mul` + `add`, or one `f32x4.relaxed_madd` when a plugin is compiled with
//! `+relaxed-simd` too (Wasmtime then emits an FMA where the host has one; results may differ
//! from `mul` + `add` in the last bit). `umd-sdk-build` does not enable it: under Wasmtime 48–50
//! on x86-64 the FMA form's register copies cost what the fusion saves (a 4×8 f32 GEMM tile
//! ran at the same speed both ways).
//!
//! ```
//! use umd_sdk::simd::F32x4;
//! let mut acc = F32x4::zero();
//! acc = acc.madd(F32x4::splat(2.0), F32x4::load(&[1.0, 2.0, 3.0, 4.0]));
//! let mut out = [0.0; 4];
//! acc.store(&mut out);
//! assert_eq!(out, [2.0, 4.0, 6.0, 8.0]);
//! ```

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use core::arch::wasm32::*;

/// Four `f32` lanes.
#[derive(Clone, Copy, Debug)]
pub struct F32x4(
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))] v128,
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))] [f32; 4],
);

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl F32x4 {
    /// All lanes zero.
    #[inline(always)]
    pub fn zero() -> Self {
        F32x4(f32x4_splat(0.0))
    }

    /// `x` in every lane.
    #[inline(always)]
    pub fn splat(x: f32) -> Self {
        F32x4(f32x4_splat(x))
    }

    /// The first four elements of `s` (panics when `s` is shorter).
    #[inline(always)]
    pub fn load(s: &[f32]) -> Self {
        let s = &s[..4];
        // SAFETY: `s` holds 4 f32 (16 bytes, checked above); `v128.load` takes any alignment.
        F32x4(unsafe { v128_load(s.as_ptr() as *const v128) })
    }

    /// Stores the lanes into the first four elements of `out` (panics when it is shorter).
    #[inline(always)]
    pub fn store(self, out: &mut [f32]) {
        let out = &mut out[..4];
        // SAFETY: `out` holds 4 f32 (16 bytes, checked above); `v128.store` takes any alignment.
        unsafe { v128_store(out.as_mut_ptr() as *mut v128, self.0) }
    }

    /// The 4×4 matrix whose rows are `m` transposed: lane `j` of row `i` becomes lane `i` of
    /// row `j` (eight shuffles).
    #[inline(always)]
    pub fn transpose4(m: [Self; 4]) -> [Self; 4] {
        let [a, b, c, d] = m.map(|v| v.0);
        let (ab_lo, ab_hi) = (
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        );
        let (cd_lo, cd_hi) = (
            i32x4_shuffle::<0, 4, 1, 5>(c, d),
            i32x4_shuffle::<2, 6, 3, 7>(c, d),
        );
        [
            F32x4(i32x4_shuffle::<0, 1, 4, 5>(ab_lo, cd_lo)),
            F32x4(i32x4_shuffle::<2, 3, 6, 7>(ab_lo, cd_lo)),
            F32x4(i32x4_shuffle::<0, 1, 4, 5>(ab_hi, cd_hi)),
            F32x4(i32x4_shuffle::<2, 3, 6, 7>(ab_hi, cd_hi)),
        ]
    }

    /// Lane `L` of `self` in every lane (one `pshufd`: cheaper than a scalar load and splat).
    #[inline(always)]
    pub fn broadcast<const L: usize>(self) -> Self {
        F32x4(i32x4_shuffle::<L, L, L, L>(self.0, self.0))
    }

    /// Lane-wise `self + a * b`.
    #[inline(always)]
    pub fn madd(self, a: Self, b: Self) -> Self {
        #[cfg(target_feature = "relaxed-simd")]
        return F32x4(f32x4_relaxed_madd(a.0, b.0, self.0));
        #[cfg(not(target_feature = "relaxed-simd"))]
        return F32x4(f32x4_add(self.0, f32x4_mul(a.0, b.0)));
    }

    /// Lane-wise `max(self, v)` in fold order: `v` where it is greater than `self`, or where it
    /// is NaN and `self` is not; else `self` (the first NaN of a fold wins; of equal values,
    /// the first).
    #[inline(always)]
    pub fn max_nan(self, v: Self) -> Self {
        let take = v128_or(
            f32x4_gt(v.0, self.0),
            v128_and(f32x4_ne(v.0, v.0), f32x4_eq(self.0, self.0)),
        );
        F32x4(v128_bitselect(v.0, self.0, take))
    }

    /// Lane-wise Relu: `0` where a lane is below zero, else the lane (NaN and `-0` stay).
    #[inline(always)]
    pub fn relu(self) -> Self {
        // pmax(a, b) is `a < b ? b : a`
        F32x4(f32x4_pmax(self.0, f32x4_splat(0.0)))
    }

    /// The even lanes of `self` then `next` (`[a0, a2, b0, b2]`) and the odd ones
    /// (`[a1, a3, b1, b3]`): eight consecutive values split by parity.
    #[inline(always)]
    pub fn deinterleave(self, next: Self) -> (Self, Self) {
        (
            F32x4(i32x4_shuffle::<0, 2, 4, 6>(self.0, next.0)),
            F32x4(i32x4_shuffle::<1, 3, 5, 7>(self.0, next.0)),
        )
    }

    /// The lanes one further along: `[a1, a2, a3, b0]` of `self` then `next`.
    #[inline(always)]
    pub fn shift1(self, next: Self) -> Self {
        F32x4(i32x4_shuffle::<1, 2, 3, 4>(self.0, next.0))
    }

    /// The lanes two further along: `[a2, a3, b0, b1]` of `self` then `next`.
    #[inline(always)]
    pub fn shift2(self, next: Self) -> Self {
        F32x4(i32x4_shuffle::<2, 3, 4, 5>(self.0, next.0))
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl std::ops::Add for F32x4 {
    type Output = Self;
    /// Lane-wise sum.
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        F32x4(f32x4_add(self.0, o.0))
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl std::ops::Sub for F32x4 {
    type Output = Self;
    /// Lane-wise difference.
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        F32x4(f32x4_sub(self.0, o.0))
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl std::ops::Mul for F32x4 {
    type Output = Self;
    /// Lane-wise product.
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        F32x4(f32x4_mul(self.0, o.0))
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
impl F32x4 {
    /// All lanes zero.
    #[inline(always)]
    pub fn zero() -> Self {
        F32x4([0.0; 4])
    }

    /// `x` in every lane.
    #[inline(always)]
    pub fn splat(x: f32) -> Self {
        F32x4([x; 4])
    }

    /// The first four elements of `s` (panics when `s` is shorter).
    #[inline(always)]
    pub fn load(s: &[f32]) -> Self {
        F32x4([s[0], s[1], s[2], s[3]])
    }

    /// Stores the lanes into the first four elements of `out` (panics when it is shorter).
    #[inline(always)]
    pub fn store(self, out: &mut [f32]) {
        out[..4].copy_from_slice(&self.0);
    }

    /// The 4×4 matrix whose rows are `m` transposed: lane `j` of row `i` becomes lane `i` of
    /// row `j` (eight shuffles).
    #[inline(always)]
    pub fn transpose4(m: [Self; 4]) -> [Self; 4] {
        std::array::from_fn(|j| F32x4(std::array::from_fn(|i| m[i].0[j])))
    }

    /// Lane `L` of `self` in every lane (one `pshufd`: cheaper than a scalar load and splat).
    #[inline(always)]
    pub fn broadcast<const L: usize>(self) -> Self {
        F32x4([self.0[L]; 4])
    }

    /// Lane-wise `self + a * b`.
    #[inline(always)]
    pub fn madd(self, a: Self, b: Self) -> Self {
        F32x4(std::array::from_fn(|l| self.0[l] + a.0[l] * b.0[l]))
    }

    /// Lane-wise `max(self, v)` in fold order: `v` where it is greater than `self`, or where it
    /// is NaN and `self` is not; else `self` (the first NaN of a fold wins; of equal values,
    /// the first).
    #[inline(always)]
    pub fn max_nan(self, v: Self) -> Self {
        F32x4(std::array::from_fn(|l| {
            let (a, b) = (self.0[l], v.0[l]);
            if b > a || (b.is_nan() && !a.is_nan()) {
                b
            } else {
                a
            }
        }))
    }

    /// Lane-wise Relu: `0` where a lane is below zero, else the lane (NaN and `-0` stay).
    #[inline(always)]
    pub fn relu(self) -> Self {
        F32x4(self.0.map(|x| if x < 0.0 { 0.0 } else { x }))
    }

    /// The even lanes of `self` then `next` (`[a0, a2, b0, b2]`) and the odd ones
    /// (`[a1, a3, b1, b3]`): eight consecutive values split by parity.
    #[inline(always)]
    pub fn deinterleave(self, next: Self) -> (Self, Self) {
        let (a, b) = (self.0, next.0);
        (
            F32x4([a[0], a[2], b[0], b[2]]),
            F32x4([a[1], a[3], b[1], b[3]]),
        )
    }

    /// The lanes one further along: `[a1, a2, a3, b0]` of `self` then `next`.
    #[inline(always)]
    pub fn shift1(self, next: Self) -> Self {
        let (a, b) = (self.0, next.0);
        F32x4([a[1], a[2], a[3], b[0]])
    }

    /// The lanes two further along: `[a2, a3, b0, b1]` of `self` then `next`.
    #[inline(always)]
    pub fn shift2(self, next: Self) -> Self {
        let (a, b) = (self.0, next.0);
        F32x4([a[2], a[3], b[0], b[1]])
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
impl std::ops::Add for F32x4 {
    type Output = Self;
    /// Lane-wise sum.
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        F32x4(std::array::from_fn(|l| self.0[l] + o.0[l]))
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
impl std::ops::Sub for F32x4 {
    type Output = Self;
    /// Lane-wise difference.
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        F32x4(std::array::from_fn(|l| self.0[l] - o.0[l]))
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
impl std::ops::Mul for F32x4 {
    type Output = Self;
    /// Lane-wise product.
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        F32x4(std::array::from_fn(|l| self.0[l] * o.0[l]))
    }
}

#[cfg(test)]
mod tests {
    use super::F32x4;

    #[test]
    fn lanes_compute_independently() {
        let a = F32x4::load(&[1.0, -2.0, 3.5, 0.0, 99.0]);
        let b = F32x4::splat(2.0);
        let mut out = [0.0; 5];
        F32x4::splat(1.0).madd(a, b).store(&mut out);
        assert_eq!(out, [3.0, -3.0, 8.0, 1.0, 0.0]);
        ((a + b) * b).store(&mut out[1..]);
        assert_eq!(out, [3.0, 6.0, 0.0, 11.0, 4.0]);
        (a - b).store(&mut out);
        assert_eq!(&out[..4], &[-1.0, -4.0, 1.5, -2.0]);
        F32x4::zero().store(&mut out);
        assert_eq!(&out[..4], &[0.0; 4]);
        a.broadcast::<2>().store(&mut out);
        assert_eq!(&out[..4], &[3.5; 4]);
    }

    #[test]
    fn max_nan_relu_and_shuffles_per_lane() {
        let nan = f32::NAN;
        let a = F32x4::load(&[1.0, nan, 2.0, -0.0]);
        let b = F32x4::load(&[1.0, 5.0, nan, 0.0]);
        let mut out = [0.0f32; 4];
        a.max_nan(b).store(&mut out);
        // equal: the first; NaN first: kept; NaN later: taken; -0 vs 0: not greater, kept
        assert_eq!(out[0].to_bits(), 1.0f32.to_bits());
        assert!(out[1].is_nan() && out[2].is_nan());
        assert_eq!(out[3].to_bits(), (-0.0f32).to_bits());
        F32x4::load(&[-1.0, nan, -0.0, 3.0]).relu().store(&mut out);
        assert_eq!(out[0], 0.0);
        assert!(out[1].is_nan());
        assert_eq!(out[2].to_bits(), (-0.0f32).to_bits());
        assert_eq!(out[3], 3.0);
        let (x, y) = (
            F32x4::load(&[0.0, 1.0, 2.0, 3.0]),
            F32x4::load(&[4.0, 5.0, 6.0, 7.0]),
        );
        let (e, o) = x.deinterleave(y);
        e.store(&mut out);
        assert_eq!(out, [0.0, 2.0, 4.0, 6.0]);
        o.store(&mut out);
        assert_eq!(out, [1.0, 3.0, 5.0, 7.0]);
        x.shift1(y).store(&mut out);
        assert_eq!(out, [1.0, 2.0, 3.0, 4.0]);
        x.shift2(y).store(&mut out);
        assert_eq!(out, [2.0, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn transpose4_swaps_rows_and_lanes() {
        let rows: [F32x4; 4] =
            std::array::from_fn(|i| F32x4::load(&[0, 1, 2, 3].map(|j| (10 * i + j) as f32)));
        let t = F32x4::transpose4(rows);
        let mut out = [0.0; 4];
        for (j, r) in t.iter().enumerate() {
            r.store(&mut out);
            assert_eq!(out, [0, 1, 2, 3].map(|i| (10 * i + j) as f32), "row {j}");
        }
    }
}
