//! Whole-buffer Resize: nearest (`resize_nearest_s{S}`) and interpolating
//! (`resize_interp_{dtype}`), on the index-mapping core of [`crate::resize_core`].

use umd_sdk::cpu::Buffers;
use umd_sdk::half::{bf16, f16};
use umd_sdk::params::ParamReader;
use umd_sdk::shape::MAX_RANK;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use super::store_bits;
use crate::common::{self, by_size, copy_elem};
use crate::resize_core::{
    Pick, ResizeParams, Saturate, identity_base, level_tables, nearest_pick, nested_sum,
};

/// Runs `resize_nearest_s{size}` on the CPU.
pub fn run_nearest(call: &CpuCall, size: usize) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out) = (r.ptr()?, r.ptr()?);
    let p = ResizeParams::read(&mut r)?;
    let x = bufs.input(x, 0)?;
    let mut w = bufs.output(out, p.n * size as u64)?;
    by_size!(size, nearest_cpu(&p, x, &mut w.data))?;
    Ok(vec![w])
}

fn check_input(p: &ResizeParams, x: &[u8], size: usize) -> Result<(), OpError> {
    let rank = p.rank as usize;
    let need = umd_sdk::shape::numel(&p.idims[..rank])? * size as u64;
    if p.n > 0 && (x.len() as u64) < need {
        return Err(OpError::internal("resize: input buffer too small"));
    }
    Ok(())
}

/// Decomposes output element `o` into its coordinates.
fn coords(p: &ResizeParams, mut o: u64) -> [u64; MAX_RANK] {
    let mut c = [0u64; MAX_RANK];
    for d in (0..p.rank as usize).rev() {
        c[d] = o % p.odims[d];
        o /= p.odims[d];
    }
    c
}

fn nearest_cpu<const S: usize>(p: &ResizeParams, x: &[u8], out: &mut [u8]) -> Result<(), OpError> {
    if p.n == 0 {
        return Ok(());
    }
    check_input(p, x, S)?;
    let rank = p.rank as usize;
    let istr = common::strides(&p.idims[..rank]);
    let nlev = p.nlev as usize;
    // the pick of every output coordinate of every level
    let picks: Vec<Vec<Pick>> = (0..nlev)
        .map(|l| {
            let d = p.levaxis[l] as usize;
            (0..p.odims[d]).map(|y| nearest_pick(p, d, y)).collect()
        })
        .collect();
    for o in 0..p.n as usize {
        let c = coords(p, o as u64);
        let mut src = identity_base(p, &c, &istr);
        let mut special = None;
        for l in (0..nlev).rev() {
            let d = p.levaxis[l] as usize;
            match picks[l][c[d] as usize] {
                Pick::Index(i) => src += i * istr[d],
                Pick::Zero => {
                    special = Some(0);
                    break;
                }
                Pick::Extrapolated => {
                    special = Some(p.ev_bits);
                    break;
                }
            }
        }
        match special {
            None => copy_elem::<S>(out, o, x, src as usize),
            Some(bits) => store_bits::<S>(out, o, bits),
        }
    }
    Ok(())
}

/// Runs `resize_interp_{dt}` on the CPU.
pub fn run_interp(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    match dt {
        Dtype::F32 => interp::<f32>(call),
        Dtype::F16 => interp::<f16>(call),
        Dtype::Bf16 => interp::<bf16>(call),
        Dtype::F64 => interp::<f64>(call),
        Dtype::I32 => interp::<i32>(call),
        Dtype::I64 => interp::<i64>(call),
        Dtype::I8 => interp::<i8>(call),
        Dtype::U8 => interp::<u8>(call),
        Dtype::I16 => interp::<i16>(call),
        Dtype::U16 => interp::<u16>(call),
        Dtype::U32 => interp::<u32>(call),
        Dtype::U64 => interp::<u64>(call),
        _ => Err(common::unknown_entry(&call.module_id, &call.entry_point)),
    }
}

fn interp<T: Saturate>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let s = std::mem::size_of::<T>();
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (x, out) = (r.ptr()?, r.ptr()?);
    let p = ResizeParams::read(&mut r)?;
    let x = bufs.input(x, 0)?;
    let mut w = bufs.output(out, p.n * s as u64)?;
    if p.n == 0 {
        return Ok(vec![w]);
    }
    check_input(&p, x, s)?;
    let rank = p.rank as usize;
    let istr = common::strides(&p.idims[..rank]);
    let tables = level_tables(&p);
    let load = |i: u64| T::load(&x[i as usize * s..i as usize * s + s]).to_f64();
    let k = tables.len();
    for o in 0..p.n as usize {
        let c = coords(&p, o as u64);
        let base = identity_base(&p, &c, &istr);
        // the outermost extrapolated level hides every level inside it
        let lo = (0..k)
            .rev()
            .find(|&l| tables[l].extrapolated[c[tables[l].axis] as usize])
            .map(|l| l + 1);
        let leaf_ev = lo.is_some();
        let lo = lo.unwrap_or(0);
        let v = if lo == k {
            if leaf_ev { p.ev } else { load(base) }
        } else {
            nested_sum(&tables[lo..], &c, &istr, base, |i| {
                if leaf_ev { p.ev } else { load(i) }
            })
        };
        T::saturate(v).store(&mut w.data[o * s..o * s + s]);
    }
    Ok(vec![w])
}
