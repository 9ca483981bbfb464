//! Conv and the pools in place (ABI 1.3). Conv: a block range computes its share of the
//! `N × M` output planes; per image and group it reads and decodes the group's input planes
//! once, then, in pieces of output channels, reads those channels' weights (and bias),
//! convolves and writes the planes; ConvTranspose likewise (its weights are `[C, Mg, K]`: one
//! read per input channel). Pools: a range computes its share of the `N × C` planes, a piece of
//! input planes at a time.

use super::conv::{self, Planes};
use super::count;
use super::epilogue::Epilogue;
use super::pool::{self, MaxVal};
use super::real::{Acc, MR, Real};
use half::{bf16, f16};
use std::rc::Rc;
use umd_sdk::dtype::{self, Decoded, Element};
use umd_sdk::kernel::{self, Memory, resident};
use umd_sdk::matrix::{Bound, binds_in_place};
use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, KernelCall, OpError};

use crate::geom::Geom;

/// Output planes computed at once: about 4 MiB of f32 output.
const PLANE_BYTES: usize = 4 << 20;

/// A conv entry point's kind.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// `conv{,t}{,_bias}`
    Plain { transpose: bool, bias: bool },
    /// `conv_fused` (a conv with an epilogue, [`crate::fused`])
    Fused,
}

/// The kind and dtype of a `conv{,t}{,_bias}_{dtype}` or `conv_fused_{dtype}` entry point.
fn entry(entry_point: &str) -> Option<(Kind, Dtype)> {
    let (kernel, dt) = entry_point.rsplit_once('_')?;
    let dt = dtype::from_name(dt)
        .filter(|d| matches!(d, Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64))?;
    let plain = |transpose, bias| Some((Kind::Plain { transpose, bias }, dt));
    match kernel {
        "conv" => plain(false, false),
        "conv_bias" => plain(false, true),
        "convt" => plain(true, false),
        "convt_bias" => plain(true, true),
        "conv_fused" => Some((Kind::Fused, dt)),
        _ => None,
    }
}

/// A pooling entry point: `maxpool`, `maxpool_idx`, `avgpool`, `lppool`.
#[derive(Clone, Copy, PartialEq)]
enum Pool {
    Max { idx: bool },
    Avg,
    Lp,
}

fn pool_entry(entry_point: &str) -> Option<(Pool, Dtype)> {
    let (kernel, dt) = entry_point.rsplit_once('_')?;
    let pool = match kernel {
        "maxpool" => Pool::Max { idx: false },
        "maxpool_idx" => Pool::Max { idx: true },
        "avgpool" => Pool::Avg,
        "lppool" => Pool::Lp,
        _ => return None,
    };
    let dt = dtype::from_name(dt)?;
    let served = match dt {
        Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64 => true,
        Dtype::I8 | Dtype::U8 => matches!(pool, Pool::Max { .. }),
        _ => false,
    };
    served.then_some((pool, dt))
}

/// Whether an entry point runs as independent block ranges: every float one (and MaxPool's on
/// i8/u8).
pub fn splittable(entry_point: &str) -> bool {
    entry(entry_point).is_some() || pool_entry(entry_point).is_some()
}

/// Runs the blocks of a launch in place (an unknown entry point: through `run-cpu`, which
/// names it).
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    match (entry(&call.entry_point), pool_entry(&call.entry_point)) {
        (Some((k, Dtype::F32)), _) => conv_planes::<f32>(call, mem, k),
        (Some((k, Dtype::F16)), _) => conv_planes::<f16>(call, mem, k),
        (Some((k, Dtype::Bf16)), _) => conv_planes::<bf16>(call, mem, k),
        (Some((k, _)), _) => conv_planes::<f64>(call, mem, k),
        (None, Some((Pool::Max { idx }, dt))) => match dt {
            Dtype::F32 => max_planes::<f32>(call, mem, idx),
            Dtype::F16 => max_planes::<f16>(call, mem, idx),
            Dtype::Bf16 => max_planes::<bf16>(call, mem, idx),
            Dtype::F64 => max_planes::<f64>(call, mem, idx),
            Dtype::I8 => max_planes::<i8>(call, mem, idx),
            _ => max_planes::<u8>(call, mem, idx),
        },
        (None, Some((pool, dt))) => {
            let lp = pool == Pool::Lp;
            match dt {
                Dtype::F32 => sum_planes::<f32>(call, mem, lp),
                Dtype::F16 => sum_planes::<f16>(call, mem, lp),
                Dtype::Bf16 => sum_planes::<bf16>(call, mem, lp),
                _ => sum_planes::<f64>(call, mem, lp),
            }
        }
        // `run-cpu` runs `conv_fused` here (on memory of its own): never back there
        (None, None) if call.entry_point.starts_with("conv_fused_") => Err(OpError::internal(
            format!("unknown entry point `{}`", call.entry_point),
        )),
        (None, None) => kernel::run_via_cpu_call::<crate::Conv>(call, mem),
    }
}

/// `n` elements of `T` from element `at` of `binding`, as values (f32 viewed in place).
fn read<T: Element>(
    mem: &mut dyn Memory,
    binding: u32,
    at: usize,
    n: usize,
) -> Result<Decoded<T>, OpError> {
    let s = std::mem::size_of::<T>();
    Ok(Decoded::new(mem.read(binding, (at * s) as u64, n * s)?))
}

/// `n` weights from element `at` of `wb`: when the host names them resident (a compiled
/// model's frozen weights) and the instance's store would keep them, read and decoded on the
/// first launch only and kept ([`resident::derived`], keyed by dtype and range); else read.
fn weights<T: Element>(
    mem: &mut dyn Memory,
    wb: u32,
    at: usize,
    n: usize,
) -> Result<Rc<Decoded<T>>, OpError> {
    // what the kept values hold (f16/bf16 decoded to f32)
    let bytes = n.saturating_mul(std::mem::size_of::<T::Compute>());
    match mem
        .resident(wb)
        .filter(|&name| resident::would_keep(name, bytes))
    {
        Some(name) => {
            let key = [T::DTYPE as u64, at as u64, n as u64];
            resident::derived(name, &key, || Ok((read::<T>(mem, wb, at, n)?, bytes)))
        }
        None => Ok(Rc::new(read::<T>(mem, wb, at, n)?)),
    }
}

fn conv_planes<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    kind: Kind,
) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, wb) = (r.ptr()?, r.ptr()?);
    let (transpose, bb, fused) = match kind {
        Kind::Plain { transpose, bias } => (transpose, bias.then(|| r.ptr()).transpose()?, None),
        Kind::Fused => (
            false,
            None,
            Some(Epilogue::<T::Compute>::fused_pointers(&mut r)?),
        ),
    };
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
    let y_elems = planes.and_then(|p| p.checked_mul(out_sz));
    fits(yb, y_elems, "Y")?;
    let epi = match fused {
        Some(ptrs) => Epilogue::finish::<T>(call, mem, &mut r, ptrs, m, y_elems.unwrap_or(0))?,
        None => Epilogue::bias::<T>(call, mem, bb, m)?,
    };
    let Some(planes) = planes.filter(|_| mg > 0) else {
        return Ok(());
    };
    let direct = mg < MR;
    if <T::Compute as Acc>::UNIT && !transpose && !direct && out_sz >= 2 * MIN_TILE {
        return conv_tiles::<T>(call, mem, &g, (xb, wb, yb), &epi);
    }
    let ck = cg * ks;
    let piece = (PLANE_BYTES / (out_sz.max(1) * 4)).max(1);
    let share = call.share(planes as u64);
    if direct && mg == 1 && !transpose {
        return conv_depthwise::<T>(mem, &g, (xb, wb, yb), share, piece, &epi);
    }
    let block = conv::transpose_block::<T::Compute>(&g);
    let bound = T::DTYPE == Dtype::F32 && <T::Compute as Acc>::UNIT && binds_in_place(mem);
    // a pointwise conv's input planes stay in their buffer too: nothing to im2col
    let x_in_place = bound && !direct && !transpose && conv::pointwise(&g);
    let mut scratch = conv::Scratch::default();
    let (mut p, end) = (share.start as usize, share.end as usize);
    while p < end {
        let (img, ch) = (p / m, p % m);
        let grp = ch / mg;
        let group_end = ((grp + 1) * mg).min(ch + (end - p));
        let x_at = (img * c + grp * cg) * in_sz;
        let x = if x_in_place {
            Decoded::default()
        } else {
            read::<T>(mem, xb, x_at, cg * in_sz)?
        };
        let planes = input_planes(x_in_place, (xb, x_at, in_sz), &x);
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
            let mut y = vec![<T::Compute as Acc>::ZERO; cnt * out_sz];
            if transpose {
                // W[grp * cg + ci][at - grp * mg ..][..cnt]: [Cg, cnt, K]
                let mut w = Vec::with_capacity(cg * cnt * ks);
                for ci in 0..cg {
                    let first = ((grp * cg + ci) * mg + at - grp * mg) * ks;
                    w.extend_from_slice(&read::<T>(mem, wb, first, cnt * ks)?);
                }
                conv::conv_transpose_with(&sub, block, &x, &w, &mut y);
            } else if bound && !direct {
                // f32 weights stay in their buffer: the matrix unit reads them in place
                let ws = conv::Weights {
                    w: &[],
                    packed: &[],
                    bound: Some(Bound {
                        binding: wb,
                        offset: at * ck,
                        rs: ck,
                        cs: 1,
                    }),
                };
                let jb = conv::block_of::<T::Compute>(&sub, ck, out_sz);
                let (y, sc) = ((&mut y[..], out_sz, 0), &mut scratch);
                conv::positions(&sub, planes, ws, 0..out_sz, jb, y, sc, Some(&mut *mem))?;
            } else {
                let w = weights::<T>(mem, wb, at * ck, cnt * ck)?;
                conv::conv_with(&sub, direct, &x, &w, &mut y);
            }
            let first = (img * m + at) * out_sz;
            epi.run_rows::<T>(mem, at, &mut y, out_sz, first)?;
            let mut out = Vec::new();
            mem.write(yb, (first * s) as u64, dtype::bytes::<T>(&y, &mut out))?;
            at += cnt;
        }
        p += group_end - ch;
    }
    Ok(())
}

/// Conv of one output channel per group (depthwise convs), on the direct kernel: this
/// range's share of the `N × M` output planes in runs of up to `piece` consecutive channels of
/// one image, each run's input planes, weights, bias and output read or written in one piece
/// (one output channel at a time, a depthwise conv made a host call of each per channel).
fn conv_depthwise<T: Element>(
    mem: &mut dyn Memory,
    g: &Geom,
    (xb, wb, yb): (u32, u32, u32),
    share: std::ops::Range<u64>,
    piece: usize,
    epi: &Epilogue<T::Compute>,
) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let (in_sz, out_sz, ks) = (
        count(g.in_size())?,
        count(g.out_size())?,
        count(g.k_size())?,
    );
    let (c, m, cg) = (count(g.c)?, count(g.m)?, count(g.cg)?);
    let s = std::mem::size_of::<T>();
    let in_piece = (PLANE_BYTES / (cg * in_sz * 4).max(1)).max(1);
    let (mut p, end) = (share.start as usize, share.end as usize);
    while p < end {
        let (img, ch) = (p / m, p % m);
        // channels ch..ch + cnt of image img: groups ch.., one output channel each
        let cnt = piece.min(in_piece).min(m - ch).min(end - p);
        let x = read::<T>(mem, xb, (img * c + ch * cg) * in_sz, cnt * cg * in_sz)?;
        let w = weights::<T>(mem, wb, ch * cg * ks, cnt * cg * ks)?;
        let sub = Geom {
            n: 1,
            c: (cnt * cg) as i64,
            m: cnt as i64,
            group: cnt as i64,
            mg: 1,
            ..g.clone()
        };
        let mut y = vec![<T::Compute as Acc>::ZERO; cnt * out_sz];
        conv::conv_with(&sub, true, &x, &w, &mut y);
        let first = (img * m + ch) * out_sz;
        epi.run_rows::<T>(mem, ch, &mut y, out_sz, first)?;
        let mut out = Vec::new();
        mem.write(yb, (first * s) as u64, dtype::bytes::<T>(&y, &mut out))?;
        p += cnt;
    }
    Ok(())
}

/// Fewest output positions per tile of [`conv_tiles`].
const MIN_TILE: usize = 128;
/// Tiles a launch of [`conv_tiles`] is cut into at least (when its output has the positions):
/// enough to share among the CPU device's worker threads.
const TILES: usize = 8;

/// Conv on the matrix unit, for outputs of at least `2 * MIN_TILE` positions: a block range
/// computes its share of `groups × N × tiles` tiles of output positions, every output channel
/// of its group for its positions — im2col of only its own positions and one product with the
/// group's whole weights per block (splitting output channels instead would have every range
/// build the same im2col columns, and the matrix unit pack them, once per range). Reads each
/// (image, group)'s input planes and each group's weights once per range; writes each
/// channel's run of positions.
fn conv_tiles<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    g: &Geom,
    (xb, wb, yb): (u32, u32, u32),
    epi: &Epilogue<T::Compute>,
) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let (in_sz, out_sz, ck) = (
        count(g.in_size())?,
        count(g.out_size())?,
        count(g.cg)? * count(g.k_size())?,
    );
    let (n, c, m, cg, mg, groups) = (
        count(g.n)?,
        count(g.c)?,
        count(g.m)?,
        count(g.cg)?,
        count(g.mg)?,
        count(g.group)?,
    );
    let s = std::mem::size_of::<T>();
    let jb = conv::block_of::<T::Compute>(g, ck, out_sz);
    // enough tiles that the launch splits across worker threads (at least TILES in all),
    // none narrower than MIN_TILE nor wider than a block
    let want = TILES.div_ceil((n * groups).max(1)).min(out_sz / MIN_TILE);
    let tiles = out_sz.div_ceil(jb).max(want).max(1);
    let tile = out_sz.div_ceil(tiles);
    let tiles = out_sz.div_ceil(tile);
    let one = Geom {
        n: 1,
        group: 1,
        c: g.cg,
        m: g.mg,
        ..g.clone()
    };
    let share = call.share((n * groups * tiles) as u64);
    // f32 weights stay in their buffer: the matrix unit reads them in place (ABI 1.9)
    let bound = T::DTYPE == Dtype::F32 && binds_in_place(mem);
    // a pointwise conv's input planes stay in their buffer too: nothing to im2col
    let x_in_place = bound && conv::pointwise(g);
    let mut scratch = conv::Scratch::default();
    // the (image, group) whose planes `x` holds, the group whose weights `wg`
    let (mut x_at, mut w_at) = (None, None);
    let (mut x, mut wg) = (Decoded::<T>::default(), Rc::new(Decoded::default()));
    let mut out = Vec::new();
    for item in share.start as usize..share.end as usize {
        // group-major: a range reads each group's weights once
        let (grp, img, t) = (item / (n * tiles), item / tiles % n, item % tiles);
        let x_first = (img * c + grp * cg) * in_sz;
        if x_at != Some((img, grp)) && !x_in_place {
            drop(std::mem::take(&mut x)); // the old planes go before the new are read
            x = read::<T>(mem, xb, x_first, cg * in_sz)?;
            x_at = Some((img, grp));
        }
        let planes = input_planes(x_in_place, (xb, x_first, in_sz), &x);
        if w_at != Some(grp) {
            if !bound {
                wg = weights::<T>(mem, wb, grp * mg * ck, mg * ck)?;
            }
            w_at = Some(grp);
        }
        let range = t * tile..out_sz.min((t + 1) * tile);
        let ws = conv::Weights {
            w: &wg,
            packed: &[],
            bound: bound.then_some(Bound {
                binding: wb,
                offset: grp * mg * ck,
                rs: ck,
                cs: 1,
            }),
        };
        // blocks of the tile (one, as tiles are at most a block wide), each row of its
        // product (an output channel's run of positions) through the epilogue in place and
        // written as is
        let mut j0 = range.start;
        while j0 < range.end {
            let len = jb.min(range.end - j0);
            let prod = conv::block(
                &one,
                planes,
                ws,
                j0..j0 + len,
                &mut scratch,
                Some(&mut *mem),
            )?;
            for (mi, row) in prod.chunks_exact_mut(len).enumerate() {
                let ch = grp * mg + mi;
                let at = (img * m + ch) * out_sz + j0;
                epi.run_rows::<T>(mem, ch, row, len, at)?;
                mem.write(yb, (at * s) as u64, dtype::bytes::<T>(row, &mut out))?;
            }
            j0 += len;
        }
    }
    Ok(())
}

/// One (image, group)'s input planes for [`conv::block`]: the values read into `x`, or where
/// they lie (binding `xb`, from element `first`, `in_sz` apart) when they stay `in_place`.
fn input_planes<'x, A>(
    in_place: bool,
    (xb, first, in_sz): (u32, usize, usize),
    x: &'x [A],
) -> Planes<'x, A> {
    if !in_place {
        return Planes::Values(x);
    }
    Planes::Bound(Bound {
        binding: xb,
        offset: first,
        rs: in_sz,
        cs: 1,
    })
}

/// A pooling launch: its bindings, geometry and the share of `N × C` planes of this call, in
/// pieces of about [`PLANE_BYTES`] of input.
struct PoolPlanes {
    x: u32,
    y: u32,
    idx: Option<u32>,
    g: Geom,
    in_sz: usize,
    out_sz: usize,
}

impl PoolPlanes {
    fn read<T: Element>(call: &KernelCall, with_idx: bool) -> Result<Self, OpError> {
        let mut r = ParamReader::new(&call.params, &call.relocations);
        let (x, y) = (r.ptr()?, r.ptr()?);
        let idx = if with_idx { Some(r.ptr()?) } else { None };
        let g = Geom::read(&mut r)?;
        let (in_sz, out_sz) = (count(g.in_size())?, count(g.out_size())?);
        let planes = count(g.n)?.checked_mul(count(g.c)?);
        let s = std::mem::size_of::<T>();
        let mut need = vec![(x, in_sz, s, "X"), (y, out_sz, s, "Y")];
        need.extend(idx.map(|i| (i, out_sz, 8, "Indices")));
        for (binding, per, size, what) in need {
            let bytes = planes.and_then(|p| p.checked_mul(per)?.checked_mul(size));
            if bytes.is_none_or(|b| b as u64 > call.size_of(binding).unwrap_or(0)) {
                return Err(OpError::internal(format!(
                    "binding {binding} ({what}) is smaller than the geometry needs"
                )));
            }
        }
        Ok(PoolPlanes {
            x,
            y,
            idx,
            g,
            in_sz,
            out_sz,
        })
    }

    /// Calls `f(first plane, input planes decoded, sub-geometry of those planes)` for the
    /// pieces of this call's share.
    fn each<T: Element>(
        &self,
        call: &KernelCall,
        mem: &mut dyn Memory,
        mut f: impl FnMut(&mut dyn Memory, usize, &[T::Compute], &Geom) -> Result<(), OpError>,
    ) -> Result<(), OpError> {
        let planes = (self.g.n * self.g.c) as u64;
        let s = std::mem::size_of::<T>();
        let piece = (PLANE_BYTES / (self.in_sz.max(self.out_sz).max(1) * s)).max(1) as u64;
        kernel::chunks(call.share(planes), piece, |lo, hi| {
            let (lo, cnt) = (lo as usize, (hi - lo) as usize);
            let x = read::<T>(mem, self.x, lo * self.in_sz, cnt * self.in_sz)?;
            let sub = Geom {
                n: 1,
                c: cnt as i64,
                m: cnt as i64,
                ..self.g.clone()
            };
            f(mem, lo, &x, &sub)
        })
    }
}

fn max_planes<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    with_idx: bool,
) -> Result<(), OpError>
where
    T::Compute: MaxVal,
{
    let p = PoolPlanes::read::<T>(call, with_idx)?;
    let (s, out_sz) = (std::mem::size_of::<T>(), p.out_sz);
    let (mut y, mut bytes, mut idx) = (Vec::new(), Vec::new(), Vec::new());
    p.each::<T>(call, mem, |mem, first, x, sub| {
        let len = (sub.c as usize) * out_sz;
        y.clear();
        y.resize(len, <T::Compute as MaxVal>::LOWEST);
        idx.clear();
        idx.resize(if with_idx { len } else { 0 }, 0i64);
        if with_idx {
            let ys = &mut y;
            pool::max_indexed(sub, x, |o, v| ys[o] = v, &mut idx);
        } else {
            pool::max_rows(sub, x, &mut y);
        }
        mem.write(
            p.y,
            (first * out_sz * s) as u64,
            dtype::bytes::<T>(&y, &mut bytes),
        )?;
        if let Some(ib) = p.idx {
            // indices of the whole input tensor: these planes start `first` planes in
            let base = (first * p.in_sz) as i64;
            bytes.clear();
            bytes.extend(
                idx.iter()
                    .flat_map(|&i| (if i < 0 { i } else { i + base }).to_le_bytes()),
            );
            mem.write(ib, (first * out_sz * 8) as u64, &bytes)?;
        }
        Ok(())
    })
}

fn sum_planes<T: Element>(call: &KernelCall, mem: &mut dyn Memory, lp: bool) -> Result<(), OpError>
where
    T::Compute: Real,
{
    let p = PoolPlanes::read::<T>(call, false)?;
    let (s, out_sz) = (std::mem::size_of::<T>(), p.out_sz);
    let lp = lp.then(|| <T::Compute as Acc>::from_f64(p.g.p));
    let (mut y, mut bytes) = (Vec::new(), Vec::new());
    p.each::<T>(call, mem, |mem, first, x, sub| {
        y.clear();
        y.resize((sub.c as usize) * out_sz, <T::Compute as Acc>::ZERO);
        pool::sum(sub, x, lp, &mut y);
        mem.write(
            p.y,
            (first * out_sz * s) as u64,
            dtype::bytes::<T>(&y, &mut bytes),
        )
    })
}
