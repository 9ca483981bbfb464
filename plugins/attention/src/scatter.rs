//! TensorScatter (opset 24), the KV-cache update, as one `tensorscatter_{W}` launch of the
//! dtype-independent module [`MODULE`] (`W` = element size 1, 2, 4 or 8: it moves bytes, so it
//! serves every dtype), one thread per element of `present_cache` (grid-stride).
//!
//! The cache is viewed as `[outer, L, inner]` (`L` = `past_cache.shape[axis]`, the maximum
//! sequence length) and the update as `[outer, S, inner]`; batch `b = outer / per_batch`
//! (`per_batch` = the product of the dims between 0 and `axis`), `w = write_indices[b]` (0 when
//! absent). Element `(o, s, k)` of the result is `update[o, j, k]` with `j = s − w` (`linear`) or
//! `(s − w) mod L` (`circular`) when `0 ≤ j < S`, else `past_cache[o, s, k]`: the reference's
//! scatter, written as a gather so that every output element is written once. Linear writes
//! past the end of the cache (an error in the reference) are dropped.
//!
//! Parameters: `flags, past, update, write_indices (or null), present, n, inner, L, S, per_batch`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, CpuCall, CpuWrite, Dtype, Launch, ModuleSource, OpError, OpPlan};
use umd_sdk::{PlanRequestExt, SourceLanguage, TensorDesc, attr, cpu::Buffers, dtype, shape};

/// The module of every TensorScatter launch.
pub const MODULE: &str = "attention_scatter";
/// `mode` is `circular`.
pub const CIRCULAR: u32 = 1;
/// `write_indices` is given.
pub const INDICES: u32 = 2;
/// `write_indices` is i32 (else i64).
pub const INDICES_I32: u32 = 4;

/// Threads per block.
pub const THREADS: u32 = 256;

/// Plans TensorScatter.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["mode", "axis"])?;
    if req.slots() > 3 {
        return Err(OpError::shape(format!(
            "TensorScatter takes at most 3 inputs, got {}",
            req.slots()
        )));
    }
    let mut flags = match attr::text_or(&req.attributes, "mode", "linear")?.as_str() {
        "linear" => 0,
        "circular" => CIRCULAR,
        m => {
            return Err(OpError::InvalidAttribute(format!(
                "TensorScatter: attribute `mode` = {m:?} must be \"linear\" or \"circular\""
            )));
        }
    };
    let past = req.required(0)?;
    let update = req.required(1)?;
    let dt = past.dtype;
    if update.dtype != dt {
        return Err(OpError::dtype(format!(
            "TensorScatter: update is {} but past_cache is {}",
            dtype::name(update.dtype),
            dtype::name(dt)
        )));
    }
    let rank = past.shape.len();
    let axis = attr::int_or(&req.attributes, "axis", -2)?;
    let norm = if axis < 0 { axis + rank as i64 } else { axis };
    if norm < 1 || norm >= rank as i64 {
        return Err(OpError::InvalidAttribute(format!(
            "TensorScatter: attribute `axis` = {axis} must name a dimension after the batch \
             (rank {rank})"
        )));
    }
    let axis = norm as usize;
    let compatible = update.shape.len() == rank
        && (0..rank).all(|i| {
            if i == axis {
                update.shape[i] <= past.shape[i]
            } else {
                update.shape[i] == past.shape[i]
            }
        });
    if !compatible {
        return Err(OpError::shape(format!(
            "TensorScatter: update {:?} must match past_cache {:?} but along axis {axis}, \
             where it may be shorter",
            update.shape, past.shape
        )));
    }
    if let Some(w) = req.input(2) {
        flags |= INDICES;
        match w.dtype {
            Dtype::I64 => {}
            Dtype::I32 => flags |= INDICES_I32,
            other => {
                return Err(OpError::dtype(format!(
                    "TensorScatter: write_indices is {}; i64 and i32 are served",
                    dtype::name(other)
                )));
            }
        }
        if w.shape.len() != 1 || w.shape[0] != past.shape[0] {
            return Err(OpError::shape(format!(
                "TensorScatter: write_indices {:?} must be [batch_size] = [{}]",
                w.shape, past.shape[0]
            )));
        }
    }
    if req.outputs(1) != 1 {
        return Err(OpError::shape("TensorScatter has one output"));
    }
    let n = shape::numel(&past.shape)?;
    shape::byte_size(&past.shape, dt)?;
    let inner = shape::numel(&past.shape[axis + 1..])?;
    let per_batch = shape::numel(&past.shape[1..axis])?;
    let (l, s) = (past.shape[axis], update.shape[axis]);
    let width = dtype::size(dt);
    if ![1, 2, 4, 8].contains(&width) {
        return Err(OpError::dtype(format!(
            "TensorScatter: {} has no 1, 2, 4 or 8-byte elements",
            dtype::name(dt)
        )));
    }

    let mut p = ParamPacker::new();
    p.u32(flags)
        .ptr(req.binding(0).expect("past"), Access::Read)
        .ptr(req.binding(1).expect("update"), Access::Read);
    match req.binding(2) {
        Some(b) => p.ptr(b, Access::Read),
        None => p.u64(0),
    };
    p.ptr(req.output_binding(0), Access::Write);
    for v in [n, inner, l, s, per_batch] {
        p.u64(v);
    }
    let limits = &req.target.limits;
    let (grid, block) = umd_sdk::launch::linear(n, THREADS, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        launches: vec![Launch {
            module_id: MODULE.into(),
            entry_point: format!("tensorscatter_{width}"),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        outputs: vec![TensorDesc::new("present_cache", past.shape.clone(), dt)],
        workspace_bytes: 0,
    })
}

const KERNEL: &str = r#"
extern "C" __global__ void tensorscatter_W(unsigned int flags, const E* __restrict__ past,
    const E* __restrict__ upd, const void* __restrict__ idx, E* __restrict__ out, u64 n,
    u64 inner, u64 L, u64 S, u64 per_batch) {
  UMD_FOR(i, n) {
    u64 k = i % inner, row = i / inner, s = row % L, outer = row / L;
    long long w = 0;
    if (flags & 2u) {
      u64 b = outer / per_batch;
      w = (flags & 4u) ? (long long)((const int*)idx)[b] : ((const long long*)idx)[b];
    }
    long long j = (long long)s - w;
    if (flags & 1u) { j %= (long long)L; if (j < 0) j += (long long)L; }
    out[i] = (j >= 0 && j < (long long)S) ? upd[(outer * S + (u64)j) * inner + k] : past[i];
  }
}
"#;

/// The module [`MODULE`]: `tensorscatter_{1,2,4,8}`.
pub fn module() -> ModuleSource {
    let mut code = String::from(umd_sdk::dtype::CUDA_PRELUDE);
    code.push_str("typedef unsigned long long u64;\n");
    code.push_str(umd_sdk::cuda::HELPERS);
    let mut entry_points = Vec::new();
    for (w, e) in [
        (1, "unsigned char"),
        (2, "unsigned short"),
        (4, "unsigned int"),
        (8, "unsigned long long"),
    ] {
        code.push_str(
            &KERNEL
                .replace("tensorscatter_W", &format!("tensorscatter_{w}"))
                .replace("const E*", &format!("const {e}*"))
                .replace("E* __restrict__ out", &format!("{e}* __restrict__ out")),
        );
        entry_points.push(format!("tensorscatter_{w}"));
    }
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points,
        options: vec!["--std=c++17".into()],
    }
}

/// Runs a `tensorscatter_{W}` launch: whole rows of `inner` elements at a time.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let width: u64 = call
        .entry_point
        .strip_prefix("tensorscatter_")
        .and_then(|w| w.parse().ok())
        .filter(|w| [1, 2, 4, 8].contains(w))
        .ok_or_else(|| OpError::internal(format!("unknown entry point `{}`", call.entry_point)))?;
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (past, upd) = (r.ptr()?, r.ptr()?);
    let idx = crate::cpu::opt_ptr(&mut r, flags & INDICES != 0)?;
    let out = r.ptr()?;
    let (n, inner, l, s, per_batch) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let overflow = || OpError::internal("tensorscatter: size overflows");
    let bytes = n.checked_mul(width).ok_or_else(overflow)?;
    let mut o = bufs.output(out, bytes)?;
    if n == 0 {
        return Ok(vec![o]);
    }
    let rows = n / inner;
    let outer_n = rows / l;
    let upd_bytes = outer_n
        .checked_mul(s)
        .and_then(|v| v.checked_mul(inner))
        .and_then(|v| v.checked_mul(width))
        .ok_or_else(overflow)?;
    let pv = bufs.input(past, bytes)?;
    let uv = bufs.input(upd, upd_bytes)?;
    let batches = outer_n / per_batch.max(1);
    let w_of: Vec<i64> = match idx {
        None => vec![0; batches as usize],
        Some(b) if flags & INDICES_I32 != 0 => bufs.input(b, batches * 4)?[..batches as usize * 4]
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64)
            .collect(),
        Some(b) => bufs.input(b, batches * 8)?[..batches as usize * 8]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    };
    let row_bytes = (inner * width) as usize;
    for row in 0..rows {
        let (sq, outer) = (row % l, row / l);
        let w = w_of[(outer / per_batch) as usize];
        let mut j = (sq as i64).wrapping_sub(w);
        if flags & CIRCULAR != 0 {
            j = j.rem_euclid(l as i64);
        }
        let dst = &mut o.data[row as usize * row_bytes..(row as usize + 1) * row_bytes];
        if j >= 0 && (j as u64) < s {
            let src = (outer * s + j as u64) as usize * row_bytes;
            dst.copy_from_slice(&uv[src..src + row_bytes]);
        } else {
            let src = row as usize * row_bytes;
            dst.copy_from_slice(&pv[src..src + row_bytes]);
        }
    }
    Ok(vec![o])
}
