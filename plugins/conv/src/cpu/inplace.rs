//! Conv in place (ABI 1.3): a block range computes its share of the `N × M` output planes.
//! Per image and group it reads and decodes the group's input planes once, then, in pieces of
//! output channels, reads those channels' weights (and bias), convolves and writes the planes.
//! ConvTranspose and the pools run whole (through `run-cpu`).

use super::gemm::{MR, Real};
use super::{conv, count};
use half::{bf16, f16};
use umd_sdk::dtype::{self, Element};
use umd_sdk::kernel::{self, Memory};
use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, KernelCall, OpError};

use crate::geom::Geom;

/// Output planes computed at once: about 4 MiB of f32 output.
const PLANE_BYTES: usize = 4 << 20;

/// `(bias, dtype)` of a `conv_{dtype}` / `conv_bias_{dtype}` entry point.
fn entry(entry_point: &str) -> Option<(bool, Dtype)> {
    let (kernel, dt) = entry_point.rsplit_once('_')?;
    let dt = dtype::from_name(dt)
        .filter(|d| matches!(d, Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64))?;
    match kernel {
        "conv" => Some((false, dt)),
        "conv_bias" => Some((true, dt)),
        _ => None,
    }
}

/// Whether an entry point runs as independent block ranges: Conv's.
pub fn splittable(entry_point: &str) -> bool {
    entry(entry_point).is_some()
}

/// Runs the blocks of a launch: Conv in place, every other entry whole through `run-cpu`.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    match entry(&call.entry_point) {
        Some((bias, Dtype::F32)) => conv_planes::<f32>(call, mem, bias),
        Some((bias, Dtype::F16)) => conv_planes::<f16>(call, mem, bias),
        Some((bias, Dtype::Bf16)) => conv_planes::<bf16>(call, mem, bias),
        Some((bias, _)) => conv_planes::<f64>(call, mem, bias),
        None => kernel::run_via_cpu_call::<crate::Conv>(call, mem),
    }
}

/// `n` elements of `T` from element `at` of `binding`, decoded.
fn read<T: Element>(
    mem: &mut dyn Memory,
    binding: u32,
    at: usize,
    n: usize,
) -> Result<Vec<T::Compute>, OpError> {
    let s = std::mem::size_of::<T>();
    let bytes = mem.read(binding, (at * s) as u64, n * s)?;
    Ok(bytes
        .chunks_exact(s)
        .map(|b| T::load(b).to_compute())
        .collect())
}

fn conv_planes<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    bias: bool,
) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, wb) = (r.ptr()?, r.ptr()?);
    let bb = if bias { Some(r.ptr()?) } else { None };
    let yb = r.ptr()?;
    let g = Geom::read(&mut r)?;
    let (in_sz, out_sz, ks) = (
        count(g.in_size())?,
        count(g.out_size())?,
        count(g.k_size())?,
    );
    let (n, c, m, cg, mg) = (
        count(g.n)?,
        count(g.c)?,
        count(g.m)?,
        count(g.cg)?,
        count(g.mg)?,
    );
    let s = std::mem::size_of::<T>();
    // every element the launch touches lies inside its binding
    let fits = |binding: u32, elems: Option<usize>, what: &str| -> Result<(), OpError> {
        let bytes = elems.and_then(|e| e.checked_mul(s)).map(|b| b as u64);
        if bytes.is_some_and(|b| b <= call.size_of(binding).unwrap_or(0)) {
            return Ok(());
        }
        Err(OpError::internal(format!(
            "binding {binding} ({what}) is smaller than the geometry needs"
        )))
    };
    let planes = n.checked_mul(m);
    fits(xb, n.checked_mul(c).and_then(|v| v.checked_mul(in_sz)), "X")?;
    fits(wb, m.checked_mul(cg).and_then(|v| v.checked_mul(ks)), "W")?;
    fits(yb, planes.and_then(|p| p.checked_mul(out_sz)), "Y")?;
    if let Some(bb) = bb {
        fits(bb, Some(m), "B")?;
    }
    let Some(planes) = planes.filter(|_| mg > 0) else {
        return Ok(());
    };
    let direct = mg < MR;
    let ck = cg * ks;
    let piece = (PLANE_BYTES / (out_sz.max(1) * 4)).max(1);
    let share = call.share(planes as u64);
    let (mut p, end) = (share.start as usize, share.end as usize);
    while p < end {
        let (img, ch) = (p / m, p % m);
        let grp = ch / mg;
        let group_end = ((grp + 1) * mg).min(ch + (end - p));
        let x = read::<T>(mem, xb, (img * c + grp * cg) * in_sz, cg * in_sz)?;
        let mut at = ch;
        while at < group_end {
            let cnt = piece.min(group_end - at);
            let sub = Geom {
                n: 1,
                c: g.cg,
                m: cnt as i64,
                group: 1,
                mg: cnt as i64,
                ..g.clone()
            };
            let w = read::<T>(mem, wb, at * ck, cnt * ck)?;
            let mut y = vec![<T::Compute as Real>::ZERO; cnt * out_sz];
            conv::conv_with(&sub, direct, &x, &w, &mut y);
            if let Some(bb) = bb {
                conv::add_bias(&mut y, &read::<T>(mem, bb, at, cnt)?, out_sz);
            }
            let mut out = vec![0; y.len() * s];
            for (o, &v) in out.chunks_exact_mut(s).zip(&y) {
                T::from_compute(v).store(o);
            }
            mem.write(yb, ((img * m + at) * out_sz * s) as u64, &out)?;
            at += cnt;
        }
        p += group_end - ch;
    }
    Ok(())
}
