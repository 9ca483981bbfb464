//! CPU kernels: decode the entry point once (`{kernel}_{dtype}[_{variant}]`), read the same
//! parameter block as the CUDA kernel and run a monomorphic kernel in compute type. The
//! reductions, ArgMax/ArgMin and CumSum/CumProd run in place, a block range at a time
//! ([`inplace`], on `reduce`'s op tables and folds and `axis`'s scan); TopK runs whole
//! ([`run`]: the whole input loaded, `axis`'s selection, the results stored).

pub(crate) mod axis;
mod num;
pub(crate) mod reduce;

pub use axis::topk_before;
pub use num::{Bool, Elem, Num};
pub(crate) use num::{load_all, store_all};
pub use reduce::arg_better;

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError, dtype};

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
#[cfg(test)]
pub(crate) use by_dtype;

pub mod inplace;

fn bad_entry(call: &CpuCall) -> OpError {
    OpError::internal(format!("unknown entry point `{}`", call.entry_point))
}

/// `run-cpu` of the launches the in-place kernels ([`inplace`]) do not serve: TopK, run whole
/// (any other entry point is unknown here).
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut parts = call.entry_point.split('_');
    match (parts.next(), parts.next().and_then(dtype::from_name)) {
        (Some("topk"), Some(dt)) => by_dtype!(dt, run_topk(call)),
        _ => Err(bad_entry(call)),
    }
}

/// Bytes of `n` elements of `size` bytes, saturating (a short buffer is then refused).
pub(crate) fn bytes(n: u64, size: usize) -> u64 {
    n.saturating_mul(size as u64)
}

/// `(lines, r, inner)` read from the parameter block, as `(outer, r, inner, elements)`.
pub(crate) fn read_axis_view(r: &mut ParamReader) -> Result<(usize, usize, usize, u64), OpError> {
    let (lines, len, inner) = (r.u64()?, r.u64()?, r.u64()?);
    let outer = lines.checked_div(inner).unwrap_or(0);
    let n = lines
        .checked_mul(len)
        .ok_or_else(|| OpError::internal("element count overflows"))?;
    Ok((outer as usize, len as usize, inner as usize, n))
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
