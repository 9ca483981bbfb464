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

/// A stored element type: its storage (a plain little-endian value) and how it converts to and
/// from its compute type.
trait Lane {
    type S: bytemuck::Pod;
    type C: Num;
    fn load(s: Self::S) -> Self::C;
    /// `c` rounded to the type.
    fn store(c: Self::C) -> Self::S;
    /// The element stored little-endian in `b` (any alignment).
    fn decode(b: &[u8]) -> Self::S;
}

macro_rules! plain_lane {
    ($name:ident, $t:ty) => {
        struct $name;
        impl Lane for $name {
            type S = $t;
            type C = $t;
            #[inline(always)]
            fn load(s: $t) -> $t {
                s
            }
            #[inline(always)]
            fn store(c: $t) -> $t {
                c
            }
            fn decode(b: &[u8]) -> $t {
                <$t>::from_le_bytes(b.try_into().expect("an element's bytes"))
            }
        }
    };
}
plain_lane!(F32, f32);
plain_lane!(F64, f64);
plain_lane!(I32, i32);
plain_lane!(I64, i64);

macro_rules! half_lane {
    ($name:ident, $t:ty) => {
        struct $name;
        impl Lane for $name {
            type S = u16;
            type C = f32;
            #[inline(always)]
            fn load(s: u16) -> f32 {
                <$t>::from_bits(s).to_f32()
            }
            #[inline(always)]
            fn store(c: f32) -> u16 {
                <$t>::from_f32(c).to_bits()
            }
            fn decode(b: &[u8]) -> u16 {
                u16::from_le_bytes(b.try_into().expect("an element's bytes"))
            }
        }
    };
}
half_lane!(F16, f16);
half_lane!(Bf16, bf16);

/// `bytes` as elements: in place when aligned on a little-endian host, else decoded into
/// `copy` (never for the CPU device's buffers, whose segments are allocated aligned).
fn elements<'a, L: Lane>(bytes: &'a [u8], copy: &'a mut Vec<L::S>) -> &'a [L::S] {
    match bytemuck::try_cast_slice(bytes) {
        Ok(v) if cfg!(target_endian = "little") => v,
        _ => {
            let size = std::mem::size_of::<L::S>();
            *copy = bytes.chunks_exact(size).map(L::decode).collect();
            copy
        }
    }
}

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
/// `dst`, little-endian; `a` and `b` are the inputs' spans (element 0 of each is its first
/// element). `false` (nothing written) when `dst` is not aligned to the element's storage.
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
) -> bool {
    match element {
        Element::F32 => by_op::<F32>(op, walk, start, a, b, dst),
        Element::F64 => by_op::<F64>(op, walk, start, a, b, dst),
        Element::F16 => by_op::<F16>(op, walk, start, a, b, dst),
        Element::Bf16 => by_op::<Bf16>(op, walk, start, a, b, dst),
        Element::I32 => by_op::<I32>(op, walk, start, a, b, dst),
        Element::I64 => by_op::<I64>(op, walk, start, a, b, dst),
    }
}

fn by_op<L: Lane>(
    op: BinaryOp,
    walk: &Walk,
    start: usize,
    a: &[u8],
    b: &[u8],
    dst: &mut [u8],
) -> bool {
    let Ok(dst) = bytemuck::try_cast_slice_mut::<u8, L::S>(dst) else {
        return false;
    };
    if !cfg!(target_endian = "little") {
        return false;
    }
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    let (a, b) = (elements::<L>(a, &mut ca), elements::<L>(b, &mut cb));
    match op {
        BinaryOp::Add => block::<L, Add>(walk, start, a, b, dst),
        BinaryOp::Sub => block::<L, Sub>(walk, start, a, b, dst),
        BinaryOp::Mul => block::<L, Mul>(walk, start, a, b, dst),
        BinaryOp::Div => block::<L, Div>(walk, start, a, b, dst),
        BinaryOp::Max => block::<L, Max>(walk, start, a, b, dst),
        BinaryOp::Min => block::<L, Min>(walk, start, a, b, dst),
    }
    true
}

/// One block: the coordinates of `start` once, then row by row of the innermost dimension.
fn block<L: Lane, O: Op>(walk: &Walk, start: usize, a: &[L::S], b: &[L::S], dst: &mut [L::S]) {
    let len = dst.len();
    let rank = walk.rank;
    let mut idx = [0usize; MAX_RANK];
    let mut rest = start;
    for (i, &size) in idx.iter_mut().zip(&walk.size).take(rank) {
        *i = rest % size;
        rest /= size;
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
        row::<L, O>(&mut dst[done..done + n], (a, at(0), sa), (b, at(1), sb));
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

/// One row of `out.len()` elements: each input from its element `at` by `stride`.
#[inline(always)]
fn row<L: Lane, O: Op>(
    out: &mut [L::S],
    (a, ai, sa): (&[L::S], usize, usize),
    (b, bi, sb): (&[L::S], usize, usize),
) {
    let n = out.len();
    let f = |x: L::S, y: L::S| L::store(O::apply(L::load(x), L::load(y)));
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in out.iter_mut().zip(&a[ai..ai + n]).zip(&b[bi..bi + n]) {
                *o = f(x, y);
            }
        }
        (0, 1) => {
            let x = a[ai];
            for (o, &y) in out.iter_mut().zip(&b[bi..bi + n]) {
                *o = f(x, y);
            }
        }
        (1, 0) => {
            let y = b[bi];
            for (o, &x) in out.iter_mut().zip(&a[ai..ai + n]) {
                *o = f(x, y);
            }
        }
        _ => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f(a[ai + i * sa], b[bi + i * sb]);
            }
        }
    }
}
