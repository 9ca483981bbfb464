//! Whole-buffer Gather, GatherElements and GatherND (`gather*_s{S}`).

use umd_sdk::cpu::Buffers;
use umd_sdk::params::ParamReader;
use umd_sdk::shape::MAX_RANK;
use umd_sdk::{CpuCall, CpuWrite, OpError};

use crate::common::{self, by_size, copy_elem, decode_indices, norm_index};
use crate::gather::{ElementsParams, GatherParams, NdParams};

/// The three pointers every gather kernel starts with.
fn read_ptrs(r: &mut ParamReader) -> Result<(u32, u32, u32), OpError> {
    Ok((r.ptr()?, r.ptr()?, r.ptr()?))
}

/// Runs `gather_s{size}`, `gather_elements_s{size}` or `gather_nd_s{size}` on the CPU.
pub fn run_cpu(call: &CpuCall, base: &str, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (data, idx, out) = read_ptrs(&mut r)?;
    let data = bufs.input(data, 0)?;
    let w = match base {
        "gather" => {
            let prm = GatherParams {
                n: r.u64()?,
                inner: r.u64()?,
                nidx: r.u64()?,
                axis_dim: r.u64()?,
                idx64: r.u32()? != 0,
            };
            let isz = if prm.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, prm.nidx * isz)?;
            let mut w = bufs.output(out, prm.n * size as u64)?;
            by_size!(size, gather_cpu(&prm, data, idx, &mut w.data))?;
            w
        }
        "gather_elements" => {
            let prm = ElementsParams {
                n: r.u64()?,
                rank: r.u32()?,
                axis: r.u32()?,
                idx64: r.u32()? != 0,
                odims: r.u64_array()?,
                dstrides: r.u64_array()?,
                axis_dim: r.u64()?,
            };
            let isz = if prm.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, prm.n * isz)?;
            let mut w = bufs.output(out, prm.n * size as u64)?;
            by_size!(size, elements_cpu(&prm, data, idx, &mut w.data))?;
            w
        }
        "gather_nd" => {
            let prm = NdParams {
                n: r.u64()?,
                slice: r.u64()?,
                k: r.u64()?,
                per_batch: r.u64()?,
                batch_stride: r.u64()?,
                idx64: r.u32()? != 0,
                ddims: r.u64_array()?,
                dstrides: r.u64_array()?,
            };
            let tuples = prm.n.checked_div(prm.slice).unwrap_or(0);
            let isz = if prm.idx64 { 8 } else { 4 };
            let idx = bufs.input(idx, tuples * prm.k * isz)?;
            let mut w = bufs.output(out, prm.n * size as u64)?;
            by_size!(size, nd_cpu(&prm, data, idx, &mut w.data))?;
            w
        }
        _ => return Err(common::unknown_entry(&call.module_id, &call.entry_point)),
    };
    Ok(vec![w])
}

fn bounds(what: &str, need: u64, have: usize) -> Result<(), OpError> {
    if need > have as u64 {
        return Err(OpError::internal(format!(
            "{what}: reads {need} bytes of a {have}-byte buffer"
        )));
    }
    Ok(())
}

fn gather_cpu<const S: usize>(
    p: &GatherParams,
    data: &[u8],
    idx: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    if p.n == 0 {
        return Ok(());
    }
    let (inner, nidx) = (p.inner as usize, p.nidx as usize);
    let outer = p.n as usize / (inner * nidx);
    bounds(
        "gather",
        (outer as u64) * p.axis_dim * p.inner * S as u64,
        data.len(),
    )?;
    let idx = decode_indices(idx, p.idx64, nidx);
    let row = inner * S;
    for o in 0..outer {
        for (j, &k) in idx.iter().enumerate() {
            if let Some(k) = norm_index(k, p.axis_dim) {
                let src = (o * p.axis_dim as usize + k as usize) * row;
                let dst = (o * nidx + j) * row;
                out[dst..dst + row].copy_from_slice(&data[src..src + row]);
            }
        }
    }
    Ok(())
}

fn elements_cpu<const S: usize>(
    p: &ElementsParams,
    data: &[u8],
    idx: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    let rank = p.rank as usize;
    let axis = p.axis as usize;
    if p.n == 0 || rank == 0 || rank > MAX_RANK || axis >= rank {
        return Ok(());
    }
    let extent: u64 = (0..rank)
        .map(|d| {
            let dim = if d == axis { p.axis_dim } else { p.odims[d] };
            dim.saturating_sub(1) * p.dstrides[d]
        })
        .sum::<u64>()
        + 1;
    bounds("gather_elements", extent * S as u64, data.len())?;
    let idx = decode_indices(idx, p.idx64, p.n as usize);
    let mut coord = [0u64; MAX_RANK];
    // offset of the current coordinate in data, without the axis term
    let mut base = 0u64;
    for (i, &k) in idx.iter().enumerate() {
        if let Some(k) = norm_index(k, p.axis_dim) {
            let src = base + k * p.dstrides[axis];
            copy_elem::<S>(out, i, data, src as usize);
        }
        for d in (0..rank).rev() {
            coord[d] += 1;
            if d != axis {
                base += p.dstrides[d];
            }
            if coord[d] < p.odims[d] {
                break;
            }
            if d != axis {
                base -= p.dstrides[d] * coord[d];
            }
            coord[d] = 0;
        }
    }
    Ok(())
}

fn nd_cpu<const S: usize>(
    p: &NdParams,
    data: &[u8],
    idx: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    if p.n == 0 || p.slice == 0 {
        return Ok(());
    }
    let (k, slice) = (p.k as usize, p.slice as usize);
    let tuples = p.n as usize / slice;
    let batches = tuples / p.per_batch.max(1) as usize;
    bounds(
        "gather_nd",
        batches as u64 * p.batch_stride * S as u64,
        data.len(),
    )?;
    let idx = decode_indices(idx, p.idx64, tuples * k);
    let row = slice * S;
    'tuple: for t in 0..tuples {
        let mut src = (t as u64 / p.per_batch) * p.batch_stride;
        for j in 0..k {
            match norm_index(idx[t * k + j], p.ddims[j]) {
                Some(v) => src += v * p.dstrides[j],
                None => continue 'tuple,
            }
        }
        let src = src as usize * S;
        out[t * row..(t + 1) * row].copy_from_slice(&data[src..src + row]);
    }
    Ok(())
}
