//! The vector unit's arithmetic: per element, the semantics the WIT states (those of the
//! bundled CUDA kernels and the SDK plugins' CPU kernels: integers wrap, integer division by 0
//! gives 0, max/min keep the first operand when it is NaN or the comparison holds); per block,
//! the loops over a [`Walk`], one monomorphic loop per (element type, operation) with rows
//! walked contiguously or with one operand a scalar specialised so they vectorize. Reads and
//! writes only the byte slices it is given.

use half::{bf16, f16};

use super::{BinaryOp, Element, MAX_RANK, Walk};

/// A compute type (f32 for f32, f16 and bf16; f64; i32; i64) with the WIT's semantics.
trait Num: Copy {
    fn add(self, y: Self) -> Self;
    fn sub(self, y: Self) -> Self;
    fn mul(self, y: Self) -> Self;
    fn div(self, y: Self) -> Self;
    fn max(self, y: Self) -> Self;
    fn min(self, y: Self) -> Self;
}

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, y: Self) -> Self { self + y }
            #[inline(always)]
            fn sub(self, y: Self) -> Self { self - y }
            #[inline(always)]
            fn mul(self, y: Self) -> Self { self * y }
            #[inline(always)]
            fn div(self, y: Self) -> Self { self / y }
            #[inline(always)]
            fn max(self, y: Self) -> Self {
                if self.is_nan() || self >= y { self } else { y }
            }
            #[inline(always)]
            fn min(self, y: Self) -> Self {
                if self.is_nan() || self <= y { self } else { y }
            }
        }
    )*};
}
float_num!(f32, f64);

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, y: Self) -> Self { self.wrapping_add(y) }
            #[inline(always)]
            fn sub(self, y: Self) -> Self { self.wrapping_sub(y) }
            #[inline(always)]
            fn mul(self, y: Self) -> Self { self.wrapping_mul(y) }
            #[inline(always)]
            fn div(self, y: Self) -> Self {
                if y == 0 { 0 } else { self.wrapping_div(y) }
            }
            #[inline(always)]
            fn max(self, y: Self) -> Self { if self >= y { self } else { y } }
            #[inline(always)]
            fn min(self, y: Self) -> Self { if self <= y { self } else { y } }
        }
    )*};
}
int_num!(i32, i64);

/// A stored element type: its size, and how it loads into and stores from its compute type.
trait Lane {
    const SIZE: usize;
    type C: Num;
    /// The element in the first `SIZE` bytes of `b` (little-endian).
    fn load(b: &[u8]) -> Self::C;
    /// Stores `c` into `out` (`SIZE` bytes), rounded to the type.
    fn store(c: Self::C, out: &mut [u8]);
}

macro_rules! plain_lane {
    ($name:ident, $t:ty, $n:literal) => {
        struct $name;
        impl Lane for $name {
            const SIZE: usize = $n;
            type C = $t;
            #[inline(always)]
            fn load(b: &[u8]) -> $t {
                <$t>::from_le_bytes(b[..$n].try_into().expect("an element's bytes"))
            }
            #[inline(always)]
            fn store(c: $t, out: &mut [u8]) {
                out.copy_from_slice(&c.to_le_bytes())
            }
        }
    };
}
plain_lane!(F32, f32, 4);
plain_lane!(F64, f64, 8);
plain_lane!(I32, i32, 4);
plain_lane!(I64, i64, 8);

macro_rules! half_lane {
    ($name:ident, $t:ty) => {
        struct $name;
        impl Lane for $name {
            const SIZE: usize = 2;
            type C = f32;
            #[inline(always)]
            fn load(b: &[u8]) -> f32 {
                <$t>::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
            }
            #[inline(always)]
            fn store(c: f32, out: &mut [u8]) {
                out.copy_from_slice(&<$t>::from_f32(c).to_bits().to_le_bytes())
            }
        }
    };
}
half_lane!(F16, f16);
half_lane!(Bf16, bf16);

/// An operation as a type, so each loop is monomorphic.
trait Op {
    fn apply<C: Num>(a: C, b: C) -> C;
}

macro_rules! ops {
    ($($name:ident => $f:ident),*) => {$(
        struct $name;
        impl Op for $name {
            #[inline(always)]
            fn apply<C: Num>(a: C, b: C) -> C { a.$f(b) }
        }
    )*};
}
ops!(Add => add, Sub => sub, Mul => mul, Div => div, Max => max, Min => min);

/// Computes elements `start .. start + dst.len() / size` of `walk` (row-major order) into
/// `dst`; `a` and `b` are the inputs' spans (element 0 of each is its first element).
///
/// # Panics
/// When an element lies outside its span (the caller checked every span: a bug).
pub(super) fn compute(
    op: BinaryOp,
    element: Element,
    walk: &Walk,
    start: usize,
    [a, b]: [&[u8]; 2],
    dst: &mut [u8],
) {
    match element {
        Element::F32 => by_op::<F32>(op, walk, start, a, b, dst),
        Element::F64 => by_op::<F64>(op, walk, start, a, b, dst),
        Element::F16 => by_op::<F16>(op, walk, start, a, b, dst),
        Element::Bf16 => by_op::<Bf16>(op, walk, start, a, b, dst),
        Element::I32 => by_op::<I32>(op, walk, start, a, b, dst),
        Element::I64 => by_op::<I64>(op, walk, start, a, b, dst),
    }
}

fn by_op<L: Lane>(op: BinaryOp, walk: &Walk, start: usize, a: &[u8], b: &[u8], dst: &mut [u8]) {
    match op {
        BinaryOp::Add => block::<L, Add>(walk, start, a, b, dst),
        BinaryOp::Sub => block::<L, Sub>(walk, start, a, b, dst),
        BinaryOp::Mul => block::<L, Mul>(walk, start, a, b, dst),
        BinaryOp::Div => block::<L, Div>(walk, start, a, b, dst),
        BinaryOp::Max => block::<L, Max>(walk, start, a, b, dst),
        BinaryOp::Min => block::<L, Min>(walk, start, a, b, dst),
    }
}

/// One block: the coordinates of `start` once, then row by row of the innermost dimension.
fn block<L: Lane, O: Op>(walk: &Walk, start: usize, a: &[u8], b: &[u8], dst: &mut [u8]) {
    let len = dst.len() / L::SIZE;
    let rank = walk.rank;
    let mut idx = [0usize; MAX_RANK];
    let mut rest = start;
    for d in 0..rank {
        idx[d] = rest % walk.size[d];
        rest /= walk.size[d];
    }
    let (sa, sb) = match rank {
        0 => (0, 0),
        _ => (walk.strides[0][0], walk.strides[1][0]),
    };
    let mut done = 0;
    while done < len {
        let inner = match rank {
            0 => 1,
            _ => walk.size[0] - idx[0],
        };
        let n = inner.min(len - done);
        let at = |i: usize| {
            (0..rank)
                .map(|d| idx[d] * walk.strides[i][d])
                .sum::<usize>()
        };
        let out = &mut dst[done * L::SIZE..(done + n) * L::SIZE];
        row::<L, O>(out, (a, at(0), sa), (b, at(1), sb));
        done += n;
        if rank > 0 {
            idx[0] += n;
            let mut d = 0;
            while d + 1 < rank && idx[d] == walk.size[d] {
                idx[d] = 0;
                d += 1;
                idx[d] += 1;
            }
        }
    }
}

/// One row of `out.len() / SIZE` elements: each input from its element `at` by `stride`.
#[inline(always)]
fn row<L: Lane, O: Op>(
    out: &mut [u8],
    (a, ai, sa): (&[u8], usize, usize),
    (b, bi, sb): (&[u8], usize, usize),
) {
    let s = L::SIZE;
    let n = out.len() / s;
    let dst = out.chunks_exact_mut(s);
    match (sa, sb) {
        (1, 1) => {
            let xs = a[ai * s..(ai + n) * s].chunks_exact(s);
            let ys = b[bi * s..(bi + n) * s].chunks_exact(s);
            for ((o, x), y) in dst.zip(xs).zip(ys) {
                L::store(O::apply(L::load(x), L::load(y)), o);
            }
        }
        (0, 1) => {
            let x = L::load(&a[ai * s..]);
            let ys = b[bi * s..(bi + n) * s].chunks_exact(s);
            for (o, y) in dst.zip(ys) {
                L::store(O::apply(x, L::load(y)), o);
            }
        }
        (1, 0) => {
            let y = L::load(&b[bi * s..]);
            let xs = a[ai * s..(ai + n) * s].chunks_exact(s);
            for (o, x) in dst.zip(xs) {
                L::store(O::apply(L::load(x), y), o);
            }
        }
        _ => {
            for (i, o) in dst.enumerate() {
                let x = L::load(&a[(ai + i * sa) * s..]);
                let y = L::load(&b[(bi + i * sb) * s..]);
                L::store(O::apply(x, y), o);
            }
        }
    }
}
