//! The compute types of the CPU kernels ([`Real`]: f32 for f32/f16/bf16, f64 for f64). Both
//! convolutions multiply f32 on the device's matrix unit ([`umd_sdk::matrix`], ABI 1.8) and
//! f64 on the SDK's packed GEMM ([`umd_sdk::gemm`], whose accumulation type [`Acc`] every
//! `Real` is).

pub use super::lanes4::Plane3;
use crate::geom::Geom;
use std::ops::{Add, AddAssign, Div, Mul, Sub};
pub use umd_sdk::gemm::Acc;
pub use umd_sdk::gemm::MR;
pub use umd_sdk::stages::Stages;

/// Arithmetic the float kernels compute in.
pub trait Real:
    Acc
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
    const ONE: Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn powf(self, p: Self) -> Self;
    /// The direct convolution ([`super::conv::direct_body`]); on wasm32 the f32 one is
    /// compiled with SIMD128 so its contiguous inner loop vectorizes.
    fn conv_direct(g: &Geom, x: &[Self], w: &[Self], y: &mut [Self]) {
        super::conv::direct_body(g, x, w, y)
    }
    /// The pools' fast path for sums over whole windows `k` wide, stride `s`
    /// ([`super::lanes4::fold_windows`]): how many leading outputs it summed (none by default).
    #[inline(always)]
    fn sum_windows(_out: &mut [Self], _row: &[Self], _at: usize, _k: usize, _s: usize) -> usize {
        0
    }
    /// The direct convolution of one input plane `x` with one 3×3 kernel `w` (dilation 1,
    /// geometry `p`: stride 1 or 2 on both axes), added to the output plane `y` tap by tap
    /// in kernel order, border taps skipped — when this type has a kernel for it and the
    /// weights allow it; false (nothing done) otherwise.
    fn plane3x3(_y: &mut [Self], _x: &[Self], _w: &[Self], _p: Plane3) -> bool {
        false
    }
    /// A conv epilogue's stages (and residual) applied to a run of one channel's values in
    /// one pass, when this type has a kernel for it ([`umd_sdk::stages::apply`]); false
    /// (nothing done) otherwise.
    fn epilogue(_v: &mut [Self], _res: Option<&[Self]>, _st: &Stages<Self>) -> bool {
        false
    }
    /// `dst[t] = src[t * s]` for every element of `dst` (im2col's strided gather).
    ///
    /// # Panics
    /// When `src` holds fewer than `(dst.len() - 1) * s + 1` elements.
    #[inline(always)]
    fn gather(dst: &mut [Self], src: &[Self], s: usize) {
        let n = dst.len();
        assert!(n == 0 || src.len() > (n - 1) * s, "gather: too few inputs");
        for (o, &v) in dst.iter_mut().zip(src.iter().step_by(s)) {
            *o = v;
        }
    }
    /// Relu in place: zero where a value is below zero (NaN stays NaN, as Relu says).
    #[inline(always)]
    fn relu(v: &mut [Self]) {
        // a select, not a branch, in a plain loop (which LLVM vectorizes)
        v.iter_mut()
            .for_each(|x| *x = if *x < Self::ZERO { Self::ZERO } else { *x });
    }
}

impl Real for f64 {
    const ONE: f64 = 1.0;
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
    const ONE: f32 = 1.0;
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn powf(self, p: f32) -> f32 {
        f32::powf(self, p)
    }
    #[inline(always)]
    fn sum_windows(out: &mut [f32], row: &[f32], at: usize, k: usize, s: usize) -> usize {
        super::lanes4::fold_windows(super::lanes4::Op::Add, out, row, at, k, s)
    }
    #[inline(always)]
    fn relu(v: &mut [f32]) {
        umd_sdk::stages::relu(v)
    }
    fn epilogue(v: &mut [f32], res: Option<&[f32]>, st: &Stages<f32>) -> bool {
        umd_sdk::stages::apply(v, res, st)
    }
    fn plane3x3(y: &mut [f32], x: &[f32], w: &[f32], p: Plane3) -> bool {
        thread_local! {
            static PAD: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        // a border tap adds `w · 0`: the same sum as skipping it for finite weights only
        let Ok(w) = <&[f32; 9]>::try_from(w) else {
            return false;
        };
        if !w.iter().all(|v| v.is_finite()) {
            return false;
        }
        PAD.with_borrow_mut(|pad| {
            super::lanes4::plane3x3(y, x, w, p, pad);
            if pad.capacity() > 1 << 20 {
                *pad = Vec::new();
            }
        });
        true
    }
    #[inline(always)]
    fn gather(dst: &mut [f32], src: &[f32], s: usize) {
        if s == 2 {
            return super::lanes4::every_other(dst, src);
        }
        let n = dst.len();
        assert!(n == 0 || src.len() > (n - 1) * s, "gather: too few inputs");
        for (o, &v) in dst.iter_mut().zip(src.iter().step_by(s)) {
            *o = v;
        }
    }
    #[cfg(target_arch = "wasm32")]
    fn conv_direct(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32]) {
        // SAFETY: wasm SIMD128 is validated when the module loads; the engine the host uses
        // enables it.
        unsafe { simd::conv_direct_f32(g, x, w, y) }
    }
}

#[cfg(target_arch = "wasm32")]
mod simd {
    use crate::geom::Geom;

    /// The direct convolution compiled with SIMD128.
    ///
    /// # Safety
    /// The engine running the module must support SIMD128 (validated when it loads).
    #[target_feature(enable = "simd128")]
    pub unsafe fn conv_direct_f32(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32]) {
        crate::cpu::conv::direct_body(g, x, w, y)
    }
}
