//! Per-element semantics on compute types (f32 for f32/f16/bf16, f64, and every integer), the
//! CPU twin of the CUDA expressions in [`crate::cuda`]: integers wrap, integer division and
//! modulo by 0 give 0, Mod is numpy's (sign of the divisor) and Fmod C's, Max/Min propagate NaN,
//! shifts out of range give 0 (or -1 for a negative value shifted right), Pow on integers
//! multiplies.

/// Arithmetic with the CUDA templates' semantics.
pub trait Arith: Copy + PartialOrd {
    fn add(self, y: Self) -> Self;
    fn sub(self, y: Self) -> Self;
    fn mul(self, y: Self) -> Self;
    fn div(self, y: Self) -> Self;
    /// numpy `mod`: the result has the sign of the divisor.
    fn pymod(self, y: Self) -> Self;
    /// C `fmod`: the result has the sign of the dividend.
    fn fmod(self, y: Self) -> Self;
    fn max(self, y: Self) -> Self;
    fn min(self, y: Self) -> Self;
    fn prelu(self, slope: Self) -> Self;
    /// Division by an input count (Mean).
    fn divn(self, n: u64) -> Self;
}

macro_rules! float_arith {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(self, y: $t) -> $t {
                self + y
            }
            #[inline(always)]
            fn sub(self, y: $t) -> $t {
                self - y
            }
            #[inline(always)]
            fn mul(self, y: $t) -> $t {
                self * y
            }
            #[inline(always)]
            fn div(self, y: $t) -> $t {
                self / y
            }
            #[inline(always)]
            fn pymod(self, y: $t) -> $t {
                // numpy's npy_remainder: fmod, moved to the divisor's sign; zero takes its sign
                let m = self % y;
                if y == 0.0 {
                    m
                } else if m != 0.0 {
                    if (y < 0.0) != (m < 0.0) { m + y } else { m }
                } else {
                    (0.0 as $t).copysign(y)
                }
            }
            #[inline(always)]
            fn fmod(self, y: $t) -> $t {
                self % y
            }
            #[inline(always)]
            fn max(self, y: $t) -> $t {
                if self.is_nan() || self >= y { self } else { y }
            }
            #[inline(always)]
            fn min(self, y: $t) -> $t {
                if self.is_nan() || self <= y { self } else { y }
            }
            #[inline(always)]
            fn prelu(self, s: $t) -> $t {
                if self > 0.0 { self } else { self * s }
            }
            #[inline(always)]
            fn divn(self, n: u64) -> $t {
                self / n as $t
            }
        }
    };
}
float_arith!(f32);
float_arith!(f64);

macro_rules! int_arith {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(self, y: $t) -> $t {
                self.wrapping_add(y)
            }
            #[inline(always)]
            fn sub(self, y: $t) -> $t {
                self.wrapping_sub(y)
            }
            #[inline(always)]
            fn mul(self, y: $t) -> $t {
                self.wrapping_mul(y)
            }
            #[inline(always)]
            fn div(self, y: $t) -> $t {
                if y == 0 { 0 } else { self.wrapping_div(y) }
            }
            #[inline(always)]
            fn pymod(self, y: $t) -> $t {
                if y == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(y);
                #[allow(unused_comparisons)]
                let fix = r != 0 && ((r < 0) != (y < 0));
                if fix { r.wrapping_add(y) } else { r }
            }
            #[inline(always)]
            fn fmod(self, y: $t) -> $t {
                if y == 0 { 0 } else { self.wrapping_rem(y) }
            }
            #[inline(always)]
            fn max(self, y: $t) -> $t {
                if self >= y { self } else { y }
            }
            #[inline(always)]
            fn min(self, y: $t) -> $t {
                if self <= y { self } else { y }
            }
            #[inline(always)]
            fn prelu(self, s: $t) -> $t {
                if self > 0 { self } else { self.wrapping_mul(s) }
            }
            #[inline(always)]
            fn divn(self, n: u64) -> $t {
                (self as i128 / std::cmp::max(n, 1) as i128) as $t
            }
        }
    };
}
int_arith!(i32);
int_arith!(i64);
int_arith!(i8);
int_arith!(u8);
int_arith!(i16);
int_arith!(u16);
int_arith!(u32);
int_arith!(u64);

/// Bitwise ops and shifts on integers (`BITS`: width of the stored dtype).
pub trait Bits: Copy {
    fn band(self, y: Self) -> Self;
    fn bor(self, y: Self) -> Self;
    fn bxor(self, y: Self) -> Self;
    fn shl(self, y: Self) -> Self;
    fn shr(self, y: Self) -> Self;
}

macro_rules! int_bits {
    ($t:ty, $u:ty) => {
        impl Bits for $t {
            #[inline(always)]
            fn band(self, y: $t) -> $t {
                self & y
            }
            #[inline(always)]
            fn bor(self, y: $t) -> $t {
                self | y
            }
            #[inline(always)]
            fn bxor(self, y: $t) -> $t {
                self ^ y
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn shl(self, y: $t) -> $t {
                if y < 0 || y as u64 >= <$t>::BITS as u64 {
                    0
                } else {
                    ((self as $u) << y as u32) as $t
                }
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn shr(self, y: $t) -> $t {
                if y < 0 || y as u64 >= <$t>::BITS as u64 {
                    if self < 0 {
                        (0 as $t).wrapping_sub(1)
                    } else {
                        0
                    }
                } else {
                    self >> y as u32
                }
            }
        }
    };
}
int_bits!(i32, u32);
int_bits!(i64, u64);
int_bits!(i8, u8);
int_bits!(u8, u8);
int_bits!(i16, u16);
int_bits!(u16, u16);
int_bits!(u32, u32);
int_bits!(u64, u64);

/// An exponent of Pow (the compute type of any numeric dtype).
pub trait Exponent: Copy {
    /// An integer dtype (Pow multiplies).
    const INT: bool;
    /// Computed in f32 (f32, f16, bf16): a float base uses `powf`.
    const F32: bool;
    fn f64(self) -> f64;
    fn i64(self) -> i64;
}

macro_rules! exponent {
    ($t:ty, $int:expr, $f32:expr) => {
        impl Exponent for $t {
            const INT: bool = $int;
            const F32: bool = $f32;
            #[inline(always)]
            fn f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn i64(self) -> i64 {
                self as i64
            }
        }
    };
}
exponent!(f32, false, true);
exponent!(f64, false, false);
exponent!(i32, true, false);
exponent!(i64, true, false);
exponent!(i8, true, false);
exponent!(u8, true, false);
exponent!(i16, true, false);
exponent!(u16, true, false);
exponent!(u32, true, false);
exponent!(u64, true, false);

/// A base of Pow.
pub trait PowBase: Copy {
    fn pow<E: Exponent>(self, e: E) -> Self;
    /// `pow(self, 2)` and `pow(self, 3)` exactly as [`PowBase::pow`] computes them, for loops
    /// over one exponent (which then vectorize).
    fn square(self) -> Self;
    fn cube(self) -> Self;
}

/// `x^y` for the exponents models raise to most (1, 2, 0.5, -1: correctly rounded, as `pow`
/// is to within its last bit), without a call of `pow` (tens of nanoseconds in WebAssembly's
/// libm: a GELU's `x^3` was a fifth of a GPT-2 block's run); `None` for any other exponent.
#[inline(always)]
fn pow_exact(x: f64, y: f64) -> Option<f64> {
    Some(if y == 2.0 {
        x * x
    } else if y == 1.0 {
        x
    } else if y == -1.0 {
        1.0 / x
    } else if y == 0.5 {
        // pow(-0, 0.5) = +0 and pow(-inf, 0.5) = +inf, where sqrt gives -0 and NaN
        if x == 0.0 {
            0.0
        } else if x == f64::NEG_INFINITY {
            f64::INFINITY
        } else {
            x.sqrt()
        }
    } else {
        return None;
    })
}

impl PowBase for f32 {
    #[inline(always)]
    fn pow<E: Exponent>(self, e: E) -> f32 {
        let (x, y) = (self as f64, e.f64());
        // an f32's square is exact in f64, its cube and fourth power round once there (then
        // to f32: within pow's last bit)
        if let Some(v) = pow_exact(x, y) {
            v as f32
        } else if y == 3.0 {
            (x * x * x) as f32
        } else if y == 4.0 {
            let s = x * x;
            (s * s) as f32
        } else if E::F32 {
            self.powf(y as f32)
        } else {
            x.powf(y) as f32
        }
    }
    #[inline(always)]
    fn square(self) -> f32 {
        self * self
    }
    #[inline(always)]
    fn cube(self) -> f32 {
        let x = self as f64;
        (x * x * x) as f32
    }
}

impl PowBase for f64 {
    #[inline(always)]
    fn pow<E: Exponent>(self, e: E) -> f64 {
        pow_exact(self, e.f64()).unwrap_or_else(|| self.powf(e.f64()))
    }
    #[inline(always)]
    fn square(self) -> f64 {
        self * self
    }
    #[inline(always)]
    fn cube(self) -> f64 {
        self.powf(3.0)
    }
}

macro_rules! int_pow {
    ($t:ty) => {
        impl PowBase for $t {
            #[inline(always)]
            fn pow<E: Exponent>(self, e: E) -> $t {
                if E::INT {
                    ipow(self as i64, e.i64()) as $t
                } else {
                    match integral(e.f64()) {
                        Some(e) => ipow(self as i64, e) as $t,
                        None => (self as f64).powf(e.f64()) as $t,
                    }
                }
            }
            #[inline(always)]
            fn square(self) -> $t {
                ipow(self as i64, 2) as $t
            }
            #[inline(always)]
            fn cube(self) -> $t {
                ipow(self as i64, 3) as $t
            }
        }
    };
}
int_pow!(i32);
int_pow!(i64);

/// `x^e` by repeated squaring, wrapping; a negative exponent truncates `1/x^|e|` (0 unless
/// `x` is ±1).
pub fn ipow(x: i64, mut e: i64) -> i64 {
    if e < 0 {
        return match x {
            1 => 1,
            -1 => {
                if e & 1 == 1 {
                    -1
                } else {
                    1
                }
            }
            _ => 0,
        };
    }
    let (mut r, mut b) = (1i64, x);
    while e != 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}

/// An integral float exponent as an integer (an integer base then multiplies exactly; other
/// exponents use `pow` in f64, converted toward zero, saturating, NaN to 0).
pub fn integral(e: f64) -> Option<i64> {
    (e.trunc() == e && e.abs() < 9.2e18).then_some(e as i64)
}
