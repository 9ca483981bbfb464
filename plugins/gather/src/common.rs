//! Shared planning and CPU helpers: dtype and index checks, axis normalization, launches, module
//! names, the element-size dispatch of the data-movement kernels, and index decoding.
//!
//! Data-movement kernels (everything but the reductions of Scatter*, the interpolating Resize
//! modes and OneHot's index decoding) move raw elements: they are compiled and run per element
//! size (1, 2, 4, 8 bytes), not per dtype.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, dtype, launch};

/// Threads per block of every launch (all kernels are grid-stride loops).
pub const THREADS: u32 = 256;

/// Every dtype a data-movement op serves (all 18 of `dtype-ext`).
pub const ALL_DTYPES: [Dtype; 18] = dtype::ALL;

/// The numeric dtypes (arithmetic kernels: Scatter reductions, interpolating Resize, OneHot's
/// indices): every dtype but bool and the 8-bit floats.
pub const NUMERIC_DTYPES: [Dtype; 12] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::I16,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];

/// Element sizes the movement modules are built for.
pub const SIZES: [usize; 4] = [1, 2, 4, 8];

/// The movement module of an element size.
pub fn move_module(size: usize) -> String {
    format!("gather_move_s{size}")
}

/// The entry point `{base}_s{size}` of a movement module.
pub fn move_entry(base: &str, size: usize) -> String {
    format!("{base}_s{size}")
}

/// Rejects inputs above [`MAX_RANK`].
pub fn check_rank(op: &str, t: &TensorDesc) -> Result<(), OpError> {
    if t.shape.len() > MAX_RANK {
        return Err(OpError::shape(format!(
            "{op}: input `{}` has rank {}, the maximum is {MAX_RANK}",
            t.name,
            t.shape.len()
        )));
    }
    Ok(())
}

/// Normalizes an axis attribute in `[-rank, rank)` (or `[-rank-1, rank]` when `extra`).
pub fn norm_axis(op: &str, name: &str, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(OpError::InvalidAttribute(format!(
            "{op}: attribute `{name}` = {axis} is out of range for rank {rank}"
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Whether the index input in `slot` is i64 (`true`) or i32; any other dtype is refused.
pub fn index_is_i64(req: &PlanRequestExt, slot: usize) -> Result<bool, OpError> {
    let t = req.required(slot)?;
    match t.dtype {
        Dtype::I64 => Ok(true),
        Dtype::I32 => Ok(false),
        other => Err(OpError::dtype(format!(
            "{}: indices `{}` must be i32 or i64, got {}",
            req.op,
            t.name,
            dtype::name(other)
        ))),
    }
}

/// Refuses a dtype outside `served`, naming what is served.
pub fn check_dtype(op: &str, t: &TensorDesc, served: &[Dtype]) -> Result<(), OpError> {
    if served.contains(&t.dtype) {
        return Ok(());
    }
    let names: Vec<&str> = served.iter().map(|d| dtype::name(*d)).collect();
    Err(OpError::dtype(format!(
        "{op}: `{}` is {}; served dtypes: {}",
        t.name,
        dtype::name(t.dtype),
        names.join(", ")
    )))
}

/// Refuses `b` unless its dtype equals `a`'s.
pub fn same_dtype(op: &str, a: &TensorDesc, b: &TensorDesc) -> Result<(), OpError> {
    if a.dtype != b.dtype {
        return Err(OpError::dtype(format!(
            "{op}: `{}` is {} but `{}` is {}",
            b.name,
            dtype::name(b.dtype),
            a.name,
            dtype::name(a.dtype)
        )));
    }
    Ok(())
}

/// Element count of an output shape, refusing byte-size overflow.
pub fn out_numel(shape: &[u64], dt: Dtype) -> Result<u64, OpError> {
    shape::byte_size(shape, dt)?;
    shape::numel(shape)
}

/// A 1-D grid-stride launch over `n` elements.
pub fn make_launch(
    req: &PlanRequestExt,
    module_id: String,
    entry_point: String,
    n: u64,
    packer: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(n, THREADS, limits)?;
    let (params, relocations) = packer.finish(limits.max_param_bytes)?;
    Ok(Launch {
        module_id,
        entry_point,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

/// A plan with one output.
pub fn one_output(out: TensorDesc, launches: Vec<Launch>) -> OpPlan {
    OpPlan {
        outputs: vec![out],
        launches,
        workspace_bytes: 0,
    }
}

/// A shape padded to [`MAX_RANK`] with `fill` (refusing higher ranks).
pub fn dims8(v: &[u64], fill: u64) -> Result<[u64; MAX_RANK], OpError> {
    shape::padded::<MAX_RANK>(v, fill)
}

/// Normalizes index `i` into `[0, dim)` (negative counts from the end); `None` when out of range.
#[inline(always)]
pub fn norm_index(i: i64, dim: u64) -> Option<u64> {
    let j = if i < 0 { i.wrapping_add(dim as i64) } else { i };
    if j >= 0 && (j as u64) < dim {
        Some(j as u64)
    } else {
        None
    }
}

/// Decodes `n` indices of an i32 or i64 buffer.
pub fn decode_indices(bytes: &[u8], is64: bool, n: usize) -> Vec<i64> {
    if is64 {
        bytes[..n * 8]
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect()
    } else {
        bytes[..n * 4]
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64)
            .collect()
    }
}

/// Parses a movement entry point `{base}_s{size}`.
pub fn split_size(entry: &str) -> Option<(&str, usize)> {
    let (base, size) = entry.rsplit_once("_s")?;
    let size: usize = size.parse().ok()?;
    SIZES.contains(&size).then_some((base, size))
}

/// Copies element `src_i` of `src` to element `dst_i` of `dst` (elements of `S` bytes).
#[inline(always)]
pub fn copy_elem<const S: usize>(dst: &mut [u8], dst_i: usize, src: &[u8], src_i: usize) {
    dst[dst_i * S..dst_i * S + S].copy_from_slice(&src[src_i * S..src_i * S + S]);
}

/// Calls `$f::<S>($args)` for the element size `$s` (1, 2, 4 or 8).
macro_rules! by_size {
    ($s:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        match $s {
            1 => $f::<1>($($a),*),
            2 => $f::<2>($($a),*),
            4 => $f::<4>($($a),*),
            8 => $f::<8>($($a),*),
            s => Err(umd_sdk::OpError::internal(format!("no kernel for element size {s}"))),
        }
    };
}
pub(crate) use by_size;

/// An internal error for a kernel that does not exist.
pub fn unknown_entry(module: &str, entry: &str) -> OpError {
    OpError::internal(format!(
        "unknown entry point `{entry}` in module `{module}`"
    ))
}

/// Element strides of `shape` (contiguous, row-major).
pub fn strides(shape: &[u64]) -> Vec<u64> {
    shape::contiguous_strides(shape)
}
