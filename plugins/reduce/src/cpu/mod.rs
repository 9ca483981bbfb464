//! CPU kernels: decode the entry point once (`{kernel}_{dtype}[_{variant}]`), read the same
//! parameter block as the CUDA kernel, load the input in compute type, run a monomorphic
//! kernel and store the results.

mod axis;
mod num;
mod reduce;

pub use axis::topk_before;
pub use num::{Bool, Elem, Num};
pub use reduce::arg_better;

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError, dtype};

use crate::ops::Red;
use crate::view::View;
use num::{load_all, store_all};

/// Calls `$f::<E>($args)` with the element type of `$dt`.
macro_rules! by_dtype {
    ($dt:expr, $f:ident ( $($a:expr),* )) => {
        match $dt {
            Dtype::F32 => $f::<f32>($($a),*),
            Dtype::F16 => $f::<f16>($($a),*),
            Dtype::Bf16 => $f::<bf16>($($a),*),
            Dtype::F64 => $f::<f64>($($a),*),
            Dtype::I32 => $f::<i32>($($a),*),
            Dtype::I64 => $f::<i64>($($a),*),
            Dtype::I8 => $f::<i8>($($a),*),
            Dtype::U8 => $f::<u8>($($a),*),
            Dtype::Boolean => $f::<Bool>($($a),*),
            Dtype::I16 => $f::<i16>($($a),*),
            Dtype::U16 => $f::<u16>($($a),*),
            Dtype::U32 => $f::<u32>($($a),*),
            Dtype::U64 => $f::<u64>($($a),*),
            other => return Err(OpError::UnsupportedDtype(format!(
                "reduce kernels have no {} variant", dtype::name(other)
            ))),
        }
    };
}

pub mod inplace;

fn bad_entry(call: &CpuCall) -> OpError {
    OpError::internal(format!("unknown entry point `{}`", call.entry_point))
}

/// Runs one launch of this plugin.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut parts = call.entry_point.split('_');
    let (Some(kernel), Some(dt)) = (parts.next(), parts.next().and_then(dtype::from_name)) else {
        return Err(bad_entry(call));
    };
    let variant = parts.next().unwrap_or("");
    match kernel {
        "cumsum" => by_dtype!(dt, run_cumsum(call, false)),
        "cumprod" => by_dtype!(dt, run_cumsum(call, true)),
        "topk" => by_dtype!(dt, run_topk(call)),
        "argmax" => by_dtype!(dt, run_arg(call, true)),
        "argmin" => by_dtype!(dt, run_arg(call, false)),
        k => {
            let red = Red::from_kernel(k).ok_or_else(|| bad_entry(call))?;
            by_dtype!(dt, run_reduce(call, red, variant))
        }
    }
}

/// Bytes of `n` elements of `size` bytes, saturating (a short buffer is then refused).
fn bytes(n: u64, size: usize) -> u64 {
    n.saturating_mul(size as u64)
}

fn run_reduce<E: Elem>(call: &CpuCall, red: Red, variant: &str) -> Result<Vec<CpuWrite>, OpError> {
    use reduce::*;
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
fn reduce_launch<E: Elem, O: reduce::ROp<E::C>>(
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

/// `(lines, r, inner)` read from the parameter block, as `(outer, r, inner, elements)`.
fn read_axis_view(r: &mut ParamReader) -> Result<(usize, usize, usize, u64), OpError> {
    let (lines, len, inner) = (r.u64()?, r.u64()?, r.u64()?);
    let outer = lines.checked_div(inner).unwrap_or(0);
    let n = lines
        .checked_mul(len)
        .ok_or_else(|| OpError::internal("element count overflows"))?;
    Ok((outer as usize, len as usize, inner as usize, n))
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

fn run_topk<E: Elem>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, vals_b, idx_b) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (outer, len, inner, n) = read_axis_view(&mut r)?;
    let (k, largest) = (r.u64()?, r.u32()? != 0);
    if k > len as u64 {
        return Err(OpError::internal(format!(
            "k = {k} exceeds the axis length {len}"
        )));
    }
    let xs = load_all::<E>(bufs.input(x, bytes(n, E::SIZE))?, n);
    let (vals, idx) = axis::topk(&xs, outer, len, inner, k as usize, largest);
    let m = (outer * k as usize * inner) as u64;
    let mut wv = bufs.output(vals_b, bytes(m, E::SIZE))?;
    store_all::<E>(&vals, &mut wv.data);
    let mut wi = bufs.output(idx_b, bytes(m, 8))?;
    store_all::<i64>(&idx, &mut wi.data);
    Ok(vec![wv, wi])
}
