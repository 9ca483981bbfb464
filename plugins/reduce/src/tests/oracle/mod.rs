//! The whole-buffer (`run-cpu`, ABI 1.0–1.2) kernels of the reductions, ArgMax/ArgMin and
//! CumSum/CumProd, as they ran before the in-place ones ([`crate::cpu::inplace`]) replaced
//! them: kept here, test-only, as the oracle the in-place kernels must match byte for byte
//! (`tests/inplace.rs`). Each loads the whole input in compute type, computes every output of
//! the launch and stores them.
//!
//! [`run`] dispatches as the plugin's `run-cpu` once did: the reductions (`_rows`, `_cols`,
//! `_split1`, `_split2`), ArgMax/ArgMin and CumSum/CumProd here; TopK (still whole-buffer in
//! production) and unknown entry points through [`crate::cpu::run`].

mod reduce;

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError, dtype};

use crate::cpu::reduce::{L1, L2, LogSum, LogSumExp, Max, Mean, Min, Prod, ROp, Sum, SumSquare};
use crate::cpu::{Bool, Elem, Num, axis, by_dtype, bytes, load_all, read_axis_view, store_all};
use crate::ops::Red;
use crate::view::View;

/// Runs one launch whole, on the kernel of its entry point.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut parts = call.entry_point.split('_');
    let (Some(kernel), Some(dt)) = (parts.next(), parts.next().and_then(dtype::from_name)) else {
        return crate::cpu::run(call);
    };
    let variant = parts.next().unwrap_or("");
    match kernel {
        "cumsum" => by_dtype!(dt, run_cumsum(call, false)),
        "cumprod" => by_dtype!(dt, run_cumsum(call, true)),
        "argmax" => by_dtype!(dt, run_arg(call, true)),
        "argmin" => by_dtype!(dt, run_arg(call, false)),
        k => match Red::from_kernel(k) {
            Some(red) => by_dtype!(dt, run_reduce(call, red, variant)),
            None => crate::cpu::run(call),
        },
    }
}

fn run_reduce<E: Elem>(call: &CpuCall, red: Red, variant: &str) -> Result<Vec<CpuWrite>, OpError> {
    match red {
        Red::Sum => reduce_launch::<E, Sum>(call, variant),
        Red::Mean => reduce_launch::<E, Mean>(call, variant),
        Red::Max => reduce_launch::<E, Max>(call, variant),
        Red::Min => reduce_launch::<E, Min>(call, variant),
        Red::Prod => reduce_launch::<E, Prod>(call, variant),
        Red::L1 => reduce_launch::<E, L1>(call, variant),
        Red::L2 => reduce_launch::<E, L2>(call, variant),
        Red::SumSquare => reduce_launch::<E, SumSquare>(call, variant),
        Red::LogSum => reduce_launch::<E, LogSum>(call, variant),
        Red::LogSumExp => reduce_launch::<E, LogSumExp>(call, variant),
    }
}

/// One launch of reduction `O`: whole (`rows`, `cols`), or a split's partials (`split1`, into
/// the workspace as 8-byte bit patterns) or their combination (`split2`).
fn reduce_launch<E: Elem, O: ROp<E::C>>(
    call: &CpuCall,
    variant: &str,
) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (lo, hi) = (E::LOWEST, E::HIGHEST);
    if variant == "split2" {
        let (ws, out) = (r.ptr()?, r.ptr()?);
        let (n_out, len, s) = (r.u64()?, r.u64()?, r.u64()?);
        if s == 0 {
            return Err(OpError::internal("a split reduction of 0 chunks"));
        }
        let parts = n_out.saturating_mul(s);
        let ws = bufs.input(ws, bytes(parts, 8))?;
        let init = O::init(lo, hi);
        let vals: Vec<E::C> = ws[..parts as usize * 8]
            .chunks_exact(s as usize * 8)
            .map(|c| {
                let acc = c.chunks_exact(8).fold(init, |a, b| {
                    O::comb(
                        a,
                        E::C::from_bits64(u64::from_le_bytes(b.try_into().expect("8 bytes"))),
                    )
                });
                O::fin(acc, len, <E::C as Num>::ZERO)
            })
            .collect();
        let mut w = bufs.output(out, bytes(n_out, E::SIZE))?;
        store_all::<E>(&vals, &mut w.data);
        return Ok(vec![w]);
    }
    let (x, out) = (r.ptr()?, r.ptr()?);
    let v = View::read(&mut r)?;
    let ext = v.extent();
    let xs = load_all::<E>(bufs.input(x, bytes(ext, E::SIZE))?, ext);
    if variant == "split1" {
        let (s, chunk) = (r.u64()?, r.u64()?);
        let parts = reduce::partials::<E::C, O>(&xs, &v, s, chunk, lo, hi);
        let mut w = bufs.output(out, bytes(parts.len() as u64, 8))?;
        for (o, p) in w.data.chunks_exact_mut(8).zip(parts) {
            o.copy_from_slice(&p.to_bits64().to_le_bytes());
        }
        return Ok(vec![w]);
    }
    let vals = reduce::reduce::<E::C, O>(&xs, &v, lo, hi);
    let mut w = bufs.output(out, bytes(v.n_out, E::SIZE))?;
    store_all::<E>(&vals, &mut w.data);
    Ok(vec![w])
}

fn run_arg<E: Elem>(call: &CpuCall, is_max: bool) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out) = (r.ptr()?, r.ptr()?);
    let v = View::read(&mut r)?;
    let last = r.u32()? != 0;
    let ext = v.extent();
    let xs = load_all::<E>(bufs.input(x, bytes(ext, E::SIZE))?, ext);
    let idx = reduce::arg(&xs, &v, is_max, last);
    let mut w = bufs.output(out, bytes(v.n_out, 8))?;
    store_all::<i64>(&idx, &mut w.data);
    Ok(vec![w])
}

fn run_cumsum<E: Elem>(call: &CpuCall, prod: bool) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, y) = (r.ptr()?, r.ptr()?);
    let (outer, len, inner, n) = read_axis_view(&mut r)?;
    let (exclusive, reverse) = (r.u32()? != 0, r.u32()? != 0);
    let xs = load_all::<E>(bufs.input(x, bytes(n, E::SIZE))?, n);
    let ys = axis::cumsum(&xs, outer, len, inner, (exclusive, reverse, prod));
    let mut w = bufs.output(y, bytes(n, E::SIZE))?;
    store_all::<E>(&ys, &mut w.data);
    Ok(vec![w])
}
