//! The compute types of the CPU kernels ([`Num`]: f32, f64 and wrapping integers, with the same
//! semantics as the CUDA helpers `umd_add`, `umd_maxn`, …) and the element types they are
//! loaded from ([`Elem`]: every served dtype, bool included, with its value bounds).

use half::{bf16, f16};
use umd_sdk::dtype::Element;

/// Arithmetic of a compute type. Integers wrap; their sqrt/log/exp go through f64 and truncate.
pub trait Num: Copy + PartialOrd + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_inf(self) -> bool;
    fn sqrt(self) -> Self;
    fn ln(self) -> Self;
    fn exp(self) -> Self;
    /// `self / n` (Mean): NaN for floats when n = 0, 0 for integers.
    fn div_count(self, n: u64) -> Self;
    /// The bits of the value, widened to 64 (a partial in a split reduction's workspace).
    fn to_bits64(self) -> u64;
    fn from_bits64(b: u64) -> Self;

    /// NaN-propagating maximum.
    #[inline(always)]
    fn max_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() { self } else { o }
        } else if self > o {
            self
        } else {
            o
        }
    }
    /// NaN-propagating minimum.
    #[inline(always)]
    fn min_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() { self } else { o }
        } else if self < o {
            self
        } else {
            o
        }
    }
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn is_inf(self) -> bool {
                <$t>::is_infinite(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn div_count(self, n: u64) -> Self {
                self / n as $t
            }
            fn to_bits64(self) -> u64 {
                self.to_bits() as u64
            }
            fn from_bits64(b: u64) -> Self {
                <$t>::from_bits(b as _)
            }
        }
    };
}
float_num!(f32);
float_num!(f64);

macro_rules! int_num {
    ($t:ty, $abs:expr) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $abs(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
            #[inline(always)]
            fn is_inf(self) -> bool {
                false
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                if self <= 0 {
                    0
                } else {
                    (self as f64).sqrt() as $t
                }
            }
            #[inline(always)]
            fn ln(self) -> Self {
                (self as f64).ln() as $t
            }
            #[inline(always)]
            fn exp(self) -> Self {
                (self as f64).exp() as $t
            }
            #[inline(always)]
            fn div_count(self, n: u64) -> Self {
                if n == 0 {
                    0
                } else {
                    (self as i128 / n as i128) as $t
                }
            }
            fn to_bits64(self) -> u64 {
                self as i64 as u64
            }
            fn from_bits64(b: u64) -> Self {
                b as $t
            }
        }
    };
}
int_num!(i32, i32::wrapping_abs);
int_num!(i64, i64::wrapping_abs);
int_num!(i8, i8::wrapping_abs);
int_num!(u8, std::convert::identity);
int_num!(u32, std::convert::identity);
int_num!(u64, std::convert::identity);

/// A stored element type: how it loads into and stores from its compute type, and the lowest
/// and highest values of the dtype (ReduceMax/ReduceMin of an empty set).
pub trait Elem: Copy + 'static {
    type C: Num;
    const SIZE: usize;
    const LOWEST: Self::C;
    const HIGHEST: Self::C;
    fn load(b: &[u8]) -> Self::C;
    fn store(v: Self::C, out: &mut [u8]);
}

macro_rules! sdk_elem {
    ($t:ty, $c:ty, $lo:expr, $hi:expr) => {
        impl Elem for $t {
            type C = $c;
            const SIZE: usize = std::mem::size_of::<$t>();
            const LOWEST: $c = $lo;
            const HIGHEST: $c = $hi;
            #[inline(always)]
            fn load(b: &[u8]) -> $c {
                <$t as Element>::load(b).to_compute()
            }
            #[inline(always)]
            fn store(v: $c, out: &mut [u8]) {
                <$t as Element>::from_compute(v).store(out)
            }
        }
    };
}
sdk_elem!(f32, f32, f32::NEG_INFINITY, f32::INFINITY);
sdk_elem!(f16, f32, f32::NEG_INFINITY, f32::INFINITY);
sdk_elem!(bf16, f32, f32::NEG_INFINITY, f32::INFINITY);
sdk_elem!(f64, f64, f64::NEG_INFINITY, f64::INFINITY);
sdk_elem!(i32, i32, i32::MIN, i32::MAX);
sdk_elem!(i64, i64, i64::MIN, i64::MAX);
sdk_elem!(i8, i8, i8::MIN, i8::MAX);
sdk_elem!(u8, u8, u8::MIN, u8::MAX);
sdk_elem!(u32, u32, u32::MIN, u32::MAX);
sdk_elem!(u64, u64, u64::MIN, u64::MAX);

/// The 16-bit integers compute in 32 bits (as their CUDA compute types `int` and
/// `unsigned int`) and truncate on store.
macro_rules! narrow_elem {
    ($t:ty, $c:ty) => {
        impl Elem for $t {
            type C = $c;
            const SIZE: usize = std::mem::size_of::<$t>();
            const LOWEST: $c = <$t>::MIN as $c;
            const HIGHEST: $c = <$t>::MAX as $c;
            #[inline(always)]
            fn load(b: &[u8]) -> $c {
                <$t as Element>::load(b) as $c
            }
            #[inline(always)]
            fn store(v: $c, out: &mut [u8]) {
                (v as $t).store(out)
            }
        }
    };
}
narrow_elem!(i16, i32);
narrow_elem!(u16, u32);

/// An ONNX bool (one byte, non-zero is true), computed as 0/1.
#[derive(Clone, Copy, Debug)]
pub struct Bool;

impl Elem for Bool {
    type C = u8;
    const SIZE: usize = 1;
    const LOWEST: u8 = 0;
    const HIGHEST: u8 = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> u8 {
        (b[0] != 0) as u8
    }
    #[inline(always)]
    fn store(v: u8, out: &mut [u8]) {
        out[0] = (v != 0) as u8;
    }
}

/// The first `n` elements of `bytes` in compute type.
pub fn load_all<E: Elem>(bytes: &[u8], n: u64) -> Vec<E::C> {
    bytes[..n as usize * E::SIZE]
        .chunks_exact(E::SIZE)
        .map(E::load)
        .collect()
}

/// Stores compute values as elements of `E` into `out` (which holds exactly `vals.len()`).
pub fn store_all<E: Elem>(vals: &[E::C], out: &mut [u8]) {
    for (o, v) in out.chunks_exact_mut(E::SIZE).zip(vals) {
        E::store(*v, o);
    }
}
