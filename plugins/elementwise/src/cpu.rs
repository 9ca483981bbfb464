//! CPU kernels: the reference implementation of every entry point of [`crate::cuda`], reading
//! the same parameter block.

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::shape::MAX_RANK;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

/// Arithmetic in a compute type, with the same semantics as the CUDA templates: i32 wraps and
/// integer division by zero gives 0.
pub trait Arith: Copy {
    fn apply(op: &str, x: Self, y: Self) -> Self;
    fn relu(x: Self) -> Self;
    fn neg(x: Self) -> Self;
}

impl Arith for f32 {
    #[inline(always)]
    fn apply(op: &str, x: f32, y: f32) -> f32 {
        match op {
            "add" => x + y,
            "sub" => x - y,
            "mul" => x * y,
            _ => x / y,
        }
    }
    fn relu(x: f32) -> f32 {
        if x > 0.0 { x } else { 0.0 }
    }
    fn neg(x: f32) -> f32 {
        -x
    }
}

impl Arith for i32 {
    #[inline(always)]
    fn apply(op: &str, x: i32, y: i32) -> i32 {
        match op {
            "add" => x.wrapping_add(y),
            "sub" => x.wrapping_sub(y),
            "mul" => x.wrapping_mul(y),
            _ if y == 0 => 0,
            _ => x.wrapping_div(y),
        }
    }
    fn relu(x: i32) -> i32 {
        x.max(0)
    }
    fn neg(x: i32) -> i32 {
        x.wrapping_neg()
    }
}

/// Runs one launch: entry points are `{op}_{dtype}` or `{op}_{dtype}_bcast`.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut parts = call.entry_point.split('_');
    let (op, dt, bcast) = (
        parts.next(),
        parts.next().and_then(dtype::from_name),
        parts.next(),
    );
    let (Some(op), Some(dt)) = (op, dt) else {
        return Err(OpError::internal(format!(
            "unknown entry point `{}`",
            call.entry_point
        )));
    };
    let bcast = bcast == Some("bcast");
    match dt {
        Dtype::F32 => run_typed::<f32>(call, op, bcast),
        Dtype::F16 => run_typed::<f16>(call, op, bcast),
        Dtype::Bf16 => run_typed::<bf16>(call, op, bcast),
        Dtype::I32 => run_typed::<i32>(call, op, bcast),
        other => Err(OpError::dtype(format!(
            "no CPU kernel for {}",
            dtype::name(other)
        ))),
    }
}

fn run_typed<T: Element>(call: &CpuCall, op: &str, bcast: bool) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Arith,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let size = std::mem::size_of::<T>() as u64;
    match op {
        "relu" | "neg" => {
            let (x, out, n) = (r.ptr()?, r.ptr()?, r.u64()?);
            let x = bufs.input(x, n * size)?;
            let mut w = bufs.output(out, n * size)?;
            let f = if op == "relu" {
                Arith::relu
            } else {
                Arith::neg
            };
            unary::<T>(x, &mut w.data, f);
            Ok(vec![w])
        }
        "add" | "sub" | "mul" | "div" => {
            let (a, b, out, n) = (r.ptr()?, r.ptr()?, r.ptr()?, r.u64()?);
            let mut w = bufs.output(out, n * size)?;
            if bcast {
                let rank = r.u32()? as usize;
                let shape = r.u64_array::<MAX_RANK>()?;
                let (sa, sb) = (r.u64_array::<MAX_RANK>()?, r.u64_array::<MAX_RANK>()?);
                if rank > MAX_RANK {
                    return Err(OpError::internal(format!("rank {rank} over {MAX_RANK}")));
                }
                let extent = |s: &[u64; MAX_RANK]| {
                    (0..rank)
                        .map(|d| (shape[d].saturating_sub(1)) * s[d])
                        .sum::<u64>()
                        + 1
                };
                let a = bufs.input(a, extent(&sa) * size)?;
                let b = bufs.input(b, extent(&sb) * size)?;
                broadcast::<T>(
                    op,
                    a,
                    b,
                    &mut w.data,
                    &shape[..rank],
                    &sa[..rank],
                    &sb[..rank],
                );
            } else {
                let (a, b) = (bufs.input(a, n * size)?, bufs.input(b, n * size)?);
                contiguous::<T>(op, a, b, &mut w.data);
            }
            Ok(vec![w])
        }
        _ => Err(OpError::internal(format!(
            "unknown entry point `{}`",
            call.entry_point
        ))),
    }
}

fn unary<T: Element>(x: &[u8], out: &mut [u8], f: fn(T::Compute) -> T::Compute) {
    let s = std::mem::size_of::<T>();
    for (o, x) in out.chunks_exact_mut(s).zip(x.chunks_exact(s)) {
        T::from_compute(f(T::load(x).to_compute())).store(o);
    }
}

fn contiguous<T: Element>(op: &str, a: &[u8], b: &[u8], out: &mut [u8])
where
    T::Compute: Arith,
{
    // One monomorphic loop per op, so the compiler vectorizes it.
    fn body<T: Element>(
        a: &[u8],
        b: &[u8],
        out: &mut [u8],
        f: impl Fn(T::Compute, T::Compute) -> T::Compute,
    ) {
        let s = std::mem::size_of::<T>();
        for ((o, x), y) in out
            .chunks_exact_mut(s)
            .zip(a.chunks_exact(s))
            .zip(b.chunks_exact(s))
        {
            T::from_compute(f(T::load(x).to_compute(), T::load(y).to_compute())).store(o);
        }
    }
    match op {
        "add" => body::<T>(a, b, out, |x, y| Arith::apply("add", x, y)),
        "sub" => body::<T>(a, b, out, |x, y| Arith::apply("sub", x, y)),
        "mul" => body::<T>(a, b, out, |x, y| Arith::apply("mul", x, y)),
        _ => body::<T>(a, b, out, |x, y| Arith::apply("div", x, y)),
    }
}

fn broadcast<T: Element>(
    op: &str,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    shape: &[u64],
    sa: &[u64],
    sb: &[u64],
) where
    T::Compute: Arith,
{
    let s = std::mem::size_of::<T>();
    let rank = shape.len();
    let mut idx = [0u64; MAX_RANK];
    let (mut oa, mut ob) = (0u64, 0u64);
    for o in out.chunks_exact_mut(s) {
        let x = T::load(&a[oa as usize * s..][..s]).to_compute();
        let y = T::load(&b[ob as usize * s..][..s]).to_compute();
        T::from_compute(Arith::apply(op, x, y)).store(o);
        // advance the multi-index, last dimension fastest
        for d in (0..rank).rev() {
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < shape[d] {
                break;
            }
            oa -= sa[d] * shape[d];
            ob -= sb[d] * shape[d];
            idx[d] = 0;
        }
    }
}
