//! Whole-buffer Pad (`pad_s{S}`, `pad_cptr_s{S}`) and DepthToSpace/SpaceToDepth
//! (`d2s_s{S}`, `s2d_s{S}`).

use umd_sdk::cpu::Buffers;
use umd_sdk::params::ParamReader;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{CpuCall, CpuWrite, OpError};

use super::store_bits;
use crate::common::{self, by_size, copy_elem};
use crate::layout::{BlockParams, block_channel};
use crate::pad::{PadParams, map_coord};

/// Runs `pad_s{size}` or `pad_cptr_s{size}` on the CPU.
pub fn run_pad(call: &CpuCall, base: &str, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let x = r.ptr()?;
    let cval = if base == "pad_cptr" {
        Some(r.ptr()?)
    } else {
        None
    };
    let out = r.ptr()?;
    let mut prm = PadParams {
        n: r.u64()?,
        rank: r.u32()?,
        mode: r.u32()?,
        odims: r.u64_array()?,
        idims: r.u64_array()?,
        begin: r.u64_array::<MAX_RANK>()?.map(|b| b as i64),
        value_bits: 0,
    };
    match cval {
        Some(c) => {
            let b = bufs.input(c, size as u64)?;
            let mut v = [0u8; 8];
            v[..size].copy_from_slice(&b[..size]);
            prm.value_bits = u64::from_le_bytes(v);
        }
        None => prm.value_bits = r.u64()?,
    }
    if prm.rank as usize > MAX_RANK {
        return Err(OpError::internal("pad: rank over 8"));
    }
    let rank = prm.rank as usize;
    let in_n = shape::numel(&prm.idims[..rank])?;
    let x = bufs.input(x, if prm.n > 0 { in_n * size as u64 } else { 0 })?;
    let mut w = bufs.output(out, prm.n * size as u64)?;
    by_size!(size, pad_cpu(&prm, x, &mut w.data))?;
    Ok(vec![w])
}

fn pad_cpu<const S: usize>(p: &PadParams, x: &[u8], out: &mut [u8]) -> Result<(), OpError> {
    if p.n == 0 {
        return Ok(());
    }
    let rank = p.rank as usize;
    if rank == 0 {
        copy_elem::<S>(out, 0, x, 0);
        return Ok(());
    }
    let last = rank - 1;
    let istr = common::strides(&p.idims[..rank]);
    let (ow, iw) = (p.odims[last] as usize, p.idims[last]);
    // the input column of every output column of the last axis (None: the constant)
    let cols: Vec<Option<u64>> = (0..ow as u64)
        .map(|c| map_coord(p.mode, c, p.begin[last], iw))
        .collect();
    let rows = p.n as usize / ow;
    let mut coord = [0u64; MAX_RANK];
    for row in 0..rows {
        let mut base = Some(0u64);
        for d in 0..last {
            base = match (base, map_coord(p.mode, coord[d], p.begin[d], p.idims[d])) {
                (Some(b), Some(i)) => Some(b + i * istr[d]),
                _ => None,
            };
        }
        let o0 = row * ow;
        match base {
            Some(b) => {
                for (c, src) in cols.iter().enumerate() {
                    match src {
                        Some(i) => copy_elem::<S>(out, o0 + c, x, (b + i) as usize),
                        None => store_bits::<S>(out, o0 + c, p.value_bits),
                    }
                }
            }
            None => (0..ow).for_each(|c| store_bits::<S>(out, o0 + c, p.value_bits)),
        }
        for d in (0..last).rev() {
            coord[d] += 1;
            if coord[d] < p.odims[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(())
}

/// Runs `d2s_s{S}` or `s2d_s{S}` on the CPU.
pub fn run_block(call: &CpuCall, base: &str, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out) = (r.ptr()?, r.ptr()?);
    match base {
        "d2s" | "s2d" => {
            let p = BlockParams {
                n: r.u64()?,
                c: r.u64()?,
                h: r.u64()?,
                w: r.u64()?,
                b: r.u64()?,
                crd: r.u32()? != 0,
            };
            let x = bufs.input(x, p.n * size as u64)?;
            let mut w = bufs.output(out, p.n * size as u64)?;
            by_size!(size, block_cpu(&p, base == "d2s", x, &mut w.data))?;
            Ok(vec![w])
        }
        _ => Err(common::unknown_entry(&call.module_id, &call.entry_point)),
    }
}

/// Walks the shallow tensor `[N, c, h, w]` and copies between it and the deep tensor
/// `[N, c*b*b, h/b, w/b]` (to the shallow one for DepthToSpace, from it for SpaceToDepth).
fn block_cpu<const S: usize>(
    p: &BlockParams,
    to_space: bool,
    x: &[u8],
    out: &mut [u8],
) -> Result<(), OpError> {
    if p.n == 0 {
        return Ok(());
    }
    let (c, h, w, b) = (p.c, p.h, p.w, p.b);
    let (hd, wd, cd) = (h / b, w / b, c * b * b);
    let batches = p.n / (c * h * w);
    for nb in 0..batches {
        for ci in 0..c {
            for y in 0..h {
                let (hh, bh) = (y / b, y % b);
                for xx in 0..w {
                    let (ww, bw) = (xx / b, xx % b);
                    let shallow = ((nb * c + ci) * h + y) * w + xx;
                    let dc = block_channel(p.crd, ci, c, b, bh, bw);
                    let deep = ((nb * cd + dc) * hd + hh) * wd + ww;
                    if to_space {
                        copy_elem::<S>(out, shallow as usize, x, deep as usize);
                    } else {
                        copy_elem::<S>(out, deep as usize, x, shallow as usize);
                    }
                }
            }
        }
    }
    Ok(())
}
