//! The whole-buffer (`run-cpu`, ABI 1.0–1.2) kernels of the data-movement launches, as they
//! ran before the in-place ones ([`crate::inplace`]) replaced them: kept here, test-only, as the
//! oracle the in-place kernels must match byte for byte (`tests/inplace.rs`). Each computes the
//! whole output of one launch from whole input buffers, one element after the other.
//!
//! [`run_cpu`] dispatches as the plugin's `run-cpu` once did: `copy`, Gather, GatherElements,
//! GatherND, Pad, DepthToSpace/SpaceToDepth and Resize here; the scatter launches and OneHot
//! (still whole-buffer in production) through `crate::run_cpu`.

mod gather;
mod moves;
mod resize;

use umd_sdk::cpu::Buffers;
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, OpError, dtype};

use crate::common;

/// Runs one launch whole, on the kernel of its module and entry point.
pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let (m, e) = (call.module_id.as_str(), call.entry_point.as_str());
    let unknown = || common::unknown_entry(m, e);
    if let Some(ms) = m.strip_prefix("gather_move_s") {
        let (base, size) = common::split_size(e).ok_or_else(unknown)?;
        if ms != size.to_string() {
            return Err(unknown());
        }
        match base {
            "gather" | "gather_elements" | "gather_nd" => gather::run_cpu(call, base, size),
            "copy" => copy_cpu(call, size),
            "pad" | "pad_cptr" => moves::run_pad(call, base, size),
            "d2s" | "s2d" => moves::run_block(call, base, size),
            "resize_nearest" => resize::run_nearest(call, size),
            _ => crate::run_cpu(call),
        }
    } else if let Some(d) = m.strip_prefix("gather_resize_") {
        resize::run_interp(call, dtype::from_name(d).ok_or_else(unknown)?)
    } else {
        crate::run_cpu(call)
    }
}

/// `copy_s{S}`: `(const T* src, T* out, u64 n)`.
fn copy_cpu(call: &CpuCall, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, out, n) = (r.ptr()?, r.ptr()?, r.u64()?);
    let bytes = n * size as u64;
    let src = bufs.input(src, bytes)?;
    let mut w = bufs.output(out, bytes)?;
    w.data.copy_from_slice(&src[..bytes as usize]);
    Ok(vec![w])
}

/// Stores the `S` low bytes of `bits` as element `i` of `dst`.
#[inline(always)]
pub fn store_bits<const S: usize>(dst: &mut [u8], i: usize, bits: u64) {
    dst[i * S..i * S + S].copy_from_slice(&bits.to_le_bytes()[..S]);
}
