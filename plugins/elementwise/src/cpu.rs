//! CPU kernels: the reference implementation of every entry point of [`crate::cuda`], reading
//! the same parameter block. The entry point is decoded once; each (kernel, dtype) then runs a
//! monomorphic loop over the rows [`Geometry::walk`] yields, with contiguous and
//! scalar-broadcast rows specialised so they vectorize.

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, KernelCall, OpError};

use crate::bcast::{Geometry, Mode};
use crate::ops::Entry;
use crate::scalar::{Arith, Bits, Exponent, PowBase};

/// A value a kernel loads and stores: every dtype, bools as [`Flag`], moved bytes as [`Raw`].
pub trait Val: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, out: &mut [u8]);
}

macro_rules! element_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t as Element>::load(b)
            }
            #[inline(always)]
            fn store(self, out: &mut [u8]) {
                <$t as Element>::store(self, out)
            }
        }
    )*};
}
element_val!(f32, f64, f16, bf16, i32, i64, i8, u8, i16, u16, u32, u64);

/// A bool element (any nonzero byte is true; true is stored as 1).
#[derive(Clone, Copy)]
pub struct Flag(pub bool);

impl Val for Flag {
    const SIZE: usize = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Flag(b[0] != 0)
    }
    #[inline(always)]
    fn store(self, out: &mut [u8]) {
        out[0] = self.0 as u8;
    }
}

/// `N` bytes moved as they are (Where).
#[derive(Clone, Copy)]
pub struct Raw<const N: usize>([u8; N]);

impl<const N: usize> Val for Raw<N> {
    const SIZE: usize = N;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Raw(b.try_into().expect("element-sized slice"))
    }
    #[inline(always)]
    fn store(self, out: &mut [u8]) {
        out.copy_from_slice(&self.0)
    }
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let e = Entry::parse(&call.entry_point)
        .ok_or_else(|| OpError::internal(format!("unknown entry point `{}`", call.entry_point)))?;
    let k = e.kernel;
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let bindings = (0..k.arity)
        .map(|_| r.ptr())
        .collect::<Result<Vec<_>, _>>()?;
    let out_binding = r.ptr()?;
    let g = Geometry::read(&mut r, e.mode, k.arity)?;
    let extra = if k.extra { r.u64()? } else { 0 };
    let bufs = Buffers::new(call);
    let dts = k.input_dtypes(e.dt, e.ydt);
    let mut ins = Vec::with_capacity(bindings.len());
    for (i, (&b, &dt)) in bindings.iter().zip(&dts).enumerate() {
        ins.push(bufs.input(b, g.extent(i)? * dtype::size(dt) as u64)?);
    }
    let out_size = g.n.checked_mul(dtype::size(k.output_dtype(e.dt)) as u64);
    let mut w = bufs.output(out_binding, out_size.unwrap_or(u64::MAX))?;
    dispatch(&e, &g, &ins, &mut w.data, extra)?;
    Ok(vec![w])
}

/// Whether an entry point runs as independent block ranges (ABI 1.3): every entry — a block
/// range computes its own share of the output (flat: of its elements; strided: of its
/// outermost rows).
pub fn splittable(entry_point: &str) -> bool {
    Entry::parse(entry_point).is_some()
}

/// Bytes of one outermost output row (or of the input extent it reads) past which a strided
/// launch runs whole through [`run`] instead of row by row (a row is read into one buffer).
const MAX_ROW_BYTES: u64 = 16 << 20;

/// Runs the blocks of a launch in place (ABI 1.3), in cache-sized chunks: each chunk of every
/// input is read, computed and written at once. A flat entry's share is a range of elements; a
/// strided (broadcast) entry's is a range of outermost output rows, each input read over the
/// extent those rows touch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let e = Entry::parse(&call.entry_point)
        .ok_or_else(|| OpError::internal(format!("unknown entry point `{}`", call.entry_point)))?;
    let k = e.kernel;
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let bindings = (0..k.arity)
        .map(|_| r.ptr())
        .collect::<Result<Vec<_>, _>>()?;
    let out_binding = r.ptr()?;
    let g = Geometry::read(&mut r, e.mode, k.arity)?;
    let extra = if k.extra { r.u64()? } else { 0 };
    let in_sizes: Vec<u64> = k
        .input_dtypes(e.dt, e.ydt)
        .iter()
        .map(|&dt| dtype::size(dt) as u64)
        .collect();
    let osz = dtype::size(k.output_dtype(e.dt)) as u64;
    for (i, (&b, &sz)) in bindings.iter().zip(&in_sizes).enumerate() {
        let need = g.extent(i)?.checked_mul(sz);
        if need.is_none_or(|n| n > call.size_of(b).unwrap_or(0)) {
            return Err(OpError::internal(format!(
                "binding {b} is smaller than input {i} of {} elements",
                g.extent(i)?
            )));
        }
    }
    if g.n
        .checked_mul(osz)
        .is_none_or(|n| n > call.size_of(out_binding).unwrap_or(0))
    {
        return Err(OpError::internal(format!(
            "binding {out_binding} is smaller than the output of {} elements",
            g.n
        )));
    }
    if on_vector_unit(call, mem, &e, &g, &bindings, out_binding)? {
        return Ok(());
    }
    let widest = in_sizes.iter().copied().fold(osz, Ord::max);
    let op = Operands {
        e: &e,
        bindings: &bindings,
        out_binding,
        in_sizes: &in_sizes,
        osz,
        extra,
    };
    if e.mode == Mode::Flat {
        let step = Ord::max(kernel::CHUNK_BYTES as u64 / widest, 1);
        return kernel::chunks(call.share(g.n), step, |lo, hi| {
            op.run_rows(mem, &g, 0, lo, hi, |i| {
                // A scalar input (stride 0) is its one element; the others are contiguous.
                if g.strides[i][0] == 0 { 1 } else { hi - lo }
            })
        });
    }
    // Strided: shares of the outermost dimension; an input is read from its first element
    // under the share to the last one the share's rows touch.
    let outer = g.rank - 1;
    let rows = g.size[outer];
    let row_elems = g.n / Ord::max(rows, 1);
    let mut one_row = g.clone();
    one_row.size[outer] = 1;
    one_row.n = row_elems;
    let inner: Vec<u64> = (0..k.arity)
        .map(|i| one_row.extent(i))
        .collect::<Result<_, _>>()?;
    let too_wide = row_elems.saturating_mul(widest) > MAX_ROW_BYTES
        || inner
            .iter()
            .zip(&in_sizes)
            .any(|(&x, &sz)| x.saturating_mul(sz) > MAX_ROW_BYTES);
    if too_wide {
        return kernel::run_via_cpu_call::<crate::Elementwise>(call, mem);
    }
    let step = Ord::max(
        kernel::CHUNK_BYTES as u64 / Ord::max(row_elems * widest, 1),
        1,
    );
    kernel::chunks(call.share(rows), step, |a, b| {
        op.run_rows(mem, &g, outer, a, b, |i| {
            (b - a - 1) * g.strides[i][outer] + inner[i]
        })
    })
}

/// (ABI 1.10) Runs the launch's share on the host's vector unit when it has the kernel and
/// dtype (add, sub, mul, div, max, min on f32, f64, f16, bf16, i32, i64: the same semantics as
/// [`crate::scalar`]) and `mem` is the launch's own buffers: no byte of the operands enters the
/// instance. `false`: the caller computes it.
fn on_vector_unit(
    call: &KernelCall,
    mem: &dyn Memory,
    e: &Entry,
    g: &Geometry,
    bindings: &[u32],
    out: u32,
) -> Result<bool, OpError> {
    use umd_sdk::vector::{self, BinaryOp, Element, Operand};
    let op = match e.kernel.name {
        "add" => BinaryOp::Add,
        "sub" => BinaryOp::Sub,
        "mul" => BinaryOp::Mul,
        "div" => BinaryOp::Div,
        "max" => BinaryOp::Max,
        "min" => BinaryOp::Min,
        _ => return Ok(false),
    };
    let Some(element) = Element::of(e.dt) else {
        return Ok(false);
    };
    if !mem.host_reads_in_place() {
        return Ok(false);
    }
    // the share: elements of a flat launch, outermost rows of a strided one (as below)
    let rank = Ord::max(g.rank, 1);
    let outer = rank - 1;
    let share = call.share(if g.rank == 0 { g.n } else { g.size[outer] });
    let rows = share.end - share.start;
    // outermost first, the share's rows in the outer dimension (on the stack: this runs on
    // every launch)
    let mut shape = [0u64; umd_sdk::shape::MAX_RANK];
    let mut strides = [[0u64; umd_sdk::shape::MAX_RANK]; 2];
    for (j, d) in (0..rank).rev().enumerate() {
        shape[j] = g.size[d];
        strides[0][j] = g.strides[0][d];
        strides[1][j] = g.strides[1][d];
    }
    shape[0] = rows;
    let row_elems = g.n / Ord::max(g.size[outer], 1);
    let operand = |i: usize| Operand {
        binding: bindings[i],
        offset: share.start * strides[i][0],
        strides: &strides[i][..rank],
    };
    let dst = (out, share.start * row_elems);
    vector::binary(
        mem,
        op,
        element,
        &shape[..rank],
        operand(0),
        operand(1),
        dst,
    )
}

/// One launch's decoded operands, for running it a share at a time.
struct Operands<'a> {
    e: &'a Entry,
    bindings: &'a [u32],
    out_binding: u32,
    in_sizes: &'a [u64],
    osz: u64,
    extra: u64,
}

impl Operands<'_> {
    /// Computes indices `a..b` of dimension `dim` (the outermost one of `g`, or the only one of
    /// a flat launch): reads each input `i` from its element `a × stride` for `len(i)`
    /// elements, runs the kernel on the sub-geometry and writes the output's rows.
    fn run_rows(
        &self,
        mem: &mut dyn Memory,
        g: &Geometry,
        dim: usize,
        a: u64,
        b: u64,
        len: impl Fn(usize) -> u64,
    ) -> Result<(), OpError> {
        let mut sub = g.clone();
        let per_index = g.n / Ord::max(g.size[dim], 1);
        sub.size[dim] = b - a;
        sub.n = (b - a) * per_index;
        let mut ins = Vec::with_capacity(self.bindings.len());
        for (i, (&binding, &sz)) in self.bindings.iter().zip(self.in_sizes).enumerate() {
            let first = a * g.strides[i][dim];
            ins.push(mem.read(binding, first * sz, (len(i) * sz) as usize)?);
        }
        let refs: Vec<&[u8]> = ins.iter().map(|v| &v[..]).collect();
        let mut out = vec![0; (sub.n * self.osz) as usize];
        dispatch(self.e, &sub, &refs, &mut out, self.extra)?;
        mem.write(self.out_binding, a * per_index * self.osz, &out)
    }
}

/// Runs `body` with `$T` the Rust type of `$dt`, for the dtypes listed (`Dtype case => type`);
/// any other dtype has no kernel.
macro_rules! typed {
    ($dt:expr, |$T:ident| $body:expr, [$($d:ident => $t:ty),* $(,)?]) => {
        match $dt {
            $(Dtype::$d => {
                type $T = $t;
                $body
            })*
            other => return Err(no_kernel(other)),
        }
    };
}

/// [`typed!`] over the numeric dtypes.
macro_rules! numeric {
    ($dt:expr, |$T:ident| $body:expr) => {
        typed!($dt, |$T| $body, [
            F32 => f32, F16 => f16, Bf16 => bf16, F64 => f64, I32 => i32, I64 => i64,
            I8 => i8, U8 => u8, I16 => i16, U16 => u16, U32 => u32, U64 => u64,
        ])
    };
}

/// [`typed!`] over the integer dtypes.
macro_rules! ints {
    ($dt:expr, |$T:ident| $body:expr) => {
        typed!($dt, |$T| $body, [
            I32 => i32, I64 => i64, I8 => i8, U8 => u8, I16 => i16, U16 => u16, U32 => u32,
            U64 => u64,
        ])
    };
}

/// [`typed!`] over Pow's base dtypes.
macro_rules! pow_bases {
    ($dt:expr, |$T:ident| $body:expr) => {
        typed!($dt, |$T| $body, [
            F32 => f32, F16 => f16, Bf16 => bf16, F64 => f64, I32 => i32, I64 => i64,
        ])
    };
}

fn no_kernel(dt: Dtype) -> OpError {
    OpError::internal(format!("no CPU kernel for {}", dtype::name(dt)))
}

fn dispatch(
    e: &Entry,
    g: &Geometry,
    ins: &[&[u8]],
    out: &mut [u8],
    extra: u64,
) -> Result<(), OpError> {
    let (dt, a, b) = (e.dt, ins[0], ins.get(1).copied().unwrap_or(&[]));
    match e.kernel.name {
        "add" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::add)),
        "sub" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::sub)),
        "mul" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::mul)),
        "div" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::div)),
        "mod" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::pymod)),
        "fmod" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::fmod)),
        "max" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::max)),
        "min" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::min)),
        "prelu" => numeric!(dt, |T| arith::<T>(g, a, b, out, Arith::prelu)),
        "copy" => numeric!(dt, |T| map1::<T, T>(g, a, out, |x| x)),
        "divn" => numeric!(dt, |T| map1::<T, T>(g, a, out, |x: T| {
            T::from_compute(x.to_compute().divn(extra))
        })),
        "band" => ints!(dt, |T| map2::<false, T, T, T>(g, a, b, out, Bits::band)),
        "bor" => ints!(dt, |T| map2::<false, T, T, T>(g, a, b, out, Bits::bor)),
        "bxor" => ints!(dt, |T| map2::<false, T, T, T>(g, a, b, out, Bits::bxor)),
        "shl" => ints!(dt, |T| map2::<false, T, T, T>(g, a, b, out, Bits::shl)),
        "shr" => ints!(dt, |T| map2::<false, T, T, T>(g, a, b, out, Bits::shr)),
        "eq" if dt == Dtype::Boolean => {
            map2::<false, Flag, Flag, Flag>(g, a, b, out, |x, y| Flag(x.0 == y.0))
        }
        "eq" => numeric!(dt, |T| compare::<T>(g, a, b, out, |x, y| x == y)),
        "lt" => numeric!(dt, |T| compare::<T>(g, a, b, out, |x, y| x < y)),
        "gt" => numeric!(dt, |T| compare::<T>(g, a, b, out, |x, y| x > y)),
        "le" => numeric!(dt, |T| compare::<T>(g, a, b, out, |x, y| x <= y)),
        "ge" => numeric!(dt, |T| compare::<T>(g, a, b, out, |x, y| x >= y)),
        "and" => map2::<false, Flag, Flag, Flag>(g, a, b, out, |x, y| Flag(x.0 && y.0)),
        "or" => map2::<false, Flag, Flag, Flag>(g, a, b, out, |x, y| Flag(x.0 || y.0)),
        "xor" => map2::<false, Flag, Flag, Flag>(g, a, b, out, |x, y| Flag(x.0 != y.0)),
        "pow" => {
            let ydt = e.ydt.unwrap_or(dt);
            pow_bases!(dt, |X| numeric!(ydt, |Y| pow::<X, Y>(g, a, b, out)))
        }
        "where" => {
            let (x, y) = (b, ins[2]);
            match dtype::size(dt) {
                1 => select::<Raw<1>>(g, a, x, y, out),
                2 => select::<Raw<2>>(g, a, x, y, out),
                4 => select::<Raw<4>>(g, a, x, y, out),
                _ => select::<Raw<8>>(g, a, x, y, out),
            }
        }
        other => {
            return Err(OpError::internal(format!("no CPU kernel `{other}`")));
        }
    }
    Ok(())
}

fn arith<T: Element + Val>(
    g: &Geometry,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    f: impl Fn(T::Compute, T::Compute) -> T::Compute,
) {
    map2::<true, T, T, T>(g, a, b, out, |x: T, y: T| {
        T::from_compute(f(x.to_compute(), y.to_compute()))
    })
}

fn compare<T: Element + Val>(
    g: &Geometry,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    f: impl Fn(T::Compute, T::Compute) -> bool,
) {
    map2::<false, T, T, Flag>(g, a, b, out, |x: T, y: T| {
        Flag(f(x.to_compute(), y.to_compute()))
    })
}

fn pow<X: Element + Val, Y: Element + Val>(g: &Geometry, a: &[u8], b: &[u8], out: &mut [u8])
where
    X::Compute: PowBase,
    Y::Compute: Exponent,
{
    // one exponent for every element (a GELU's x^3): a loop of its own, which vectorizes
    if b.len() == Y::SIZE {
        let y = Exponent::f64(<Y as Element>::load(b).to_compute());
        let c = |x: X| x.to_compute();
        if y == 2.0 {
            return map2::<true, X, Y, X>(g, a, b, out, |x, _| X::from_compute(c(x).square()));
        }
        if y == 3.0 {
            return map2::<true, X, Y, X>(g, a, b, out, |x, _| X::from_compute(c(x).cube()));
        }
    }
    map2::<false, X, Y, X>(g, a, b, out, |x: X, y: Y| {
        X::from_compute(x.to_compute().pow(y.to_compute()))
    })
}

fn select<T: Val>(g: &Geometry, c: &[u8], x: &[u8], y: &[u8], out: &mut [u8]) {
    map3::<Flag, T, T, T>(g, c, x, y, out, |c, x, y| if c.0 { x } else { y })
}

#[inline(always)]
fn at<V: Val>(data: &[u8], i: usize) -> V {
    V::load(&data[i * V::SIZE..][..V::SIZE])
}

/// One input: `out = f(a)` over the geometry.
fn map1<A: Val, O: Val>(g: &Geometry, a: &[u8], out: &mut [u8], f: impl Fn(A) -> O) {
    g.walk::<1>(|[ia], [sa], o, len| {
        let out = &mut out[o * O::SIZE..(o + len) * O::SIZE];
        if sa == 1 {
            let a = &a[ia * A::SIZE..(ia + len) * A::SIZE];
            for (o, x) in out.chunks_exact_mut(O::SIZE).zip(a.chunks_exact(A::SIZE)) {
                f(A::load(x)).store(o);
            }
        } else {
            for (j, o) in out.chunks_exact_mut(O::SIZE).enumerate() {
                f(at(a, ia + j * sa)).store(o);
            }
        }
    });
}

/// Two inputs: `out = f(a, b)`. With `FAST` (arithmetic: the hot ops), contiguous and scalar
/// rows get their own loops so they vectorize; otherwise one strided loop (less code: Pow,
/// comparisons, bitwise and logic ops have ~120 instantiations between them).
fn map2<const FAST: bool, A: Val, B: Val, O: Val>(
    g: &Geometry,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    f: impl Fn(A, B) -> O,
) {
    g.walk::<2>(|[ia, ib], steps, o, len| {
        let out = &mut out[o * O::SIZE..(o + len) * O::SIZE];
        let outs = out.chunks_exact_mut(O::SIZE);
        match steps {
            [1, 1] if FAST => {
                let a = &a[ia * A::SIZE..(ia + len) * A::SIZE];
                let b = &b[ib * B::SIZE..(ib + len) * B::SIZE];
                for ((o, x), y) in outs
                    .zip(a.chunks_exact(A::SIZE))
                    .zip(b.chunks_exact(B::SIZE))
                {
                    f(A::load(x), B::load(y)).store(o);
                }
            }
            [1, 0] if FAST => {
                let (a, y) = (&a[ia * A::SIZE..(ia + len) * A::SIZE], at::<B>(b, ib));
                for (o, x) in outs.zip(a.chunks_exact(A::SIZE)) {
                    f(A::load(x), y).store(o);
                }
            }
            [0, 1] if FAST => {
                let (x, b) = (at::<A>(a, ia), &b[ib * B::SIZE..(ib + len) * B::SIZE]);
                for (o, y) in outs.zip(b.chunks_exact(B::SIZE)) {
                    f(x, B::load(y)).store(o);
                }
            }
            [sa, sb] => {
                for (j, o) in outs.enumerate() {
                    f(at(a, ia + j * sa), at(b, ib + j * sb)).store(o);
                }
            }
        }
    });
}

/// Three inputs: `out = f(a, b, c)`.
fn map3<A: Val, B: Val, C: Val, O: Val>(
    g: &Geometry,
    a: &[u8],
    b: &[u8],
    c: &[u8],
    out: &mut [u8],
    f: impl Fn(A, B, C) -> O,
) {
    g.walk::<3>(|[ia, ib, ic], [sa, sb, sc], o, len| {
        let out = &mut out[o * O::SIZE..(o + len) * O::SIZE];
        for (j, o) in out.chunks_exact_mut(O::SIZE).enumerate() {
            f(at(a, ia + j * sa), at(b, ib + j * sb), at(c, ic + j * sc)).store(o);
        }
    });
}
