//! The arithmetic the CPU kernels compute in: [`Num`] (every numeric compute type: f32, f64 and
//! the integers, with wrapping integer semantics as the CUDA templates have), [`Real`] (f32, f64:
//! the math functions) and [`Int`] (bitwise ops). The op table's Rust bodies are written once
//! against these traits.

use std::ops::{Add, Div, Mul, Not, Sub};

/// A numeric compute type (what `Element::Compute` is for every served dtype).
pub trait Num: Copy + PartialOrd + 'static {
    const ZERO: Self;
    const ONE: Self;
    /// -1 (wrapping for unsigned types, where no op ever produces it).
    const MINUS_ONE: Self;
    /// |x|, wrapping for the most negative integer (as the CUDA template does).
    fn abs_(self) -> Self;
    /// -x, wrapping for integers.
    fn neg_(self) -> Self;
    /// From an attribute value (floats round, integers truncate and saturate).
    fn from_f64(v: f64) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const MINUS_ONE: Self = (0 as $t).wrapping_sub(1);
            #[inline(always)]
            fn abs_(self) -> Self {
                if self < 0 as $t { self.wrapping_neg() } else { self }
            }
            #[inline(always)]
            fn neg_(self) -> Self {
                self.wrapping_neg()
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
        impl Int for $t {}
    )*};
}
int_num!(i8, u8, i16, u16, i32, u32, i64, u64);

/// An integer compute type.
pub trait Int: Num + Not<Output = Self> {}

/// A float compute type: f32 (for f32, f16, bf16) or f64.
pub trait Real:
    Num + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    /// A constant (rounded to this type, as `(cT)v` is in the CUDA template).
    fn c(v: f64) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn erf(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln_1p(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    /// Round half to even (C `rint`).
    fn rint(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_inf(self) -> bool;

    /// 1 / (1 + e^-x) without overflow (`umd_sigmoid` in the CUDA template).
    #[inline(always)]
    fn sigmoid(self) -> Self {
        if self >= Self::ZERO {
            Self::ONE / (Self::ONE + (Self::ZERO - self).exp())
        } else {
            let e = self.exp();
            e / (Self::ONE + e)
        }
    }
    /// ln(1 + e^x) without overflow (`umd_softplus`).
    #[inline(always)]
    fn softplus(self) -> Self {
        if self > Self::ZERO {
            self + (Self::ZERO - self).exp().ln_1p()
        } else {
            self.exp().ln_1p()
        }
    }
    /// Clamps to [0, 1], keeping NaN (`umd_clamp01`).
    #[inline(always)]
    fn clamp01(self) -> Self {
        if self < Self::ZERO {
            Self::ZERO
        } else if self > Self::ONE {
            Self::ONE
        } else {
            self
        }
    }
}

macro_rules! real {
    ($t:ident, $erf:path, $exp:path, $tanh:path $(, sigmoid = $sigmoid:path)?) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const MINUS_ONE: Self = -1.0;
            #[inline(always)]
            fn abs_(self) -> Self {
                self.abs()
            }
            #[inline(always)]
            fn neg_(self) -> Self {
                -self
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
        impl Real for $t {
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            real!(@fns $t: ln, sqrt, sin, cos, tan, asin, acos, atan, sinh, cosh,
                  asinh, acosh, atanh, exp_m1, ln_1p, floor, ceil);
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            $(
            #[inline(always)]
            fn sigmoid(self) -> Self {
                $sigmoid(self)
            }
            )?
            #[inline(always)]
            fn rint(self) -> Self {
                self.round_ties_even()
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            #[inline(always)]
            fn is_inf(self) -> bool {
                $t::is_infinite(self)
            }
        }
    };
    (@fns $t:ident: $($f:ident),*) => {$(
        #[inline(always)]
        fn $f(self) -> Self {
            $t::$f(self)
        }
    )*};
}
// f32: the SDK's branch-free erf, exp, tanh and sigmoid (libm's are software calls in wasm)
real!(
    f32,
    umd_sdk::fmath::erf,
    umd_sdk::fmath::exp,
    umd_sdk::fmath::tanh,
    sigmoid = umd_sdk::fmath::sigmoid
);
real!(f64, libm::erf, f64::exp, f64::tanh);
