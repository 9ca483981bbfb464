//! The `run-cpu` kernels as they were before the in-place ones (commit 8179d11, whole buffers,
//! one thread), kept as the reference the in-place kernels must match byte for byte.

use half::{bf16, f16};
use umd_sdk::params::ParamReader;
use umd_sdk::{Access, CpuCall, CpuWrite, Dtype, OpError, dtype};

use crate::cast::{convert_bytes, f64_to_f32_odd};
use crate::consts::FILL_CHUNK;
use crate::copy::KMAX;

/// What a launch runs, decoded from its entry point.
enum Kernel {
    Gather(usize),
    Fill,
    Splat(usize),
    Eye(usize),
    Trilu(usize),
    Range(Dtype),
    Cast(Dtype, Dtype),
}

fn decode(entry: &str) -> Option<Kernel> {
    let size = |s: &str| s.parse::<usize>().ok().filter(|s| [1, 2, 4, 8].contains(s));
    if entry == "fill_bytes" {
        return Some(Kernel::Fill);
    }
    if let Some(rest) = entry.strip_prefix("cast_") {
        let (a, b) = rest.split_once('_')?;
        return Some(Kernel::Cast(dtype::from_name(a)?, dtype::from_name(b)?));
    }
    if let Some(dt) = entry.strip_prefix("range_") {
        return Some(Kernel::Range(dtype::from_name(dt)?));
    }
    let (kind, bytes) = entry.split_once("_b")?;
    let s = size(bytes)?;
    Some(match kind {
        "gather" => Kernel::Gather(s),
        "splat" => Kernel::Splat(s),
        "eye" => Kernel::Eye(s),
        "trilu" => Kernel::Trilu(s),
        _ => return None,
    })
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let kernel = decode(&call.entry_point)
        .ok_or_else(|| OpError::internal(format!("unknown entry point `{}`", call.entry_point)))?;
    match kernel {
        Kernel::Gather(s) => gather(call, s),
        Kernel::Fill => fill(call),
        Kernel::Splat(s) => splat(call, s),
        Kernel::Eye(s) => eye(call, s),
        Kernel::Trilu(s) => trilu(call, s),
        Kernel::Range(dt) => range(call, dt),
        Kernel::Cast(a, b) => cast(call, a, b),
    }
}

/// The contents of read binding `b`, checked to hold `n` elements of `elem` bytes.
pub fn read_input(call: &CpuCall, b: u32, n: u64, elem: usize) -> Result<&[u8], OpError> {
    let buf = call
        .buffers
        .iter()
        .find(|x| x.binding == b)
        .ok_or_else(|| OpError::internal(format!("binding {b} is not bound")))?;
    let need = n
        .checked_mul(elem as u64)
        .filter(|&need| need <= buf.data.len() as u64)
        .ok_or_else(|| {
            OpError::internal(format!(
                "binding {b} holds {} bytes, the kernel reads {n} elements of {elem}",
                buf.data.len()
            ))
        })?;
    Ok(&buf.data[..need as usize])
}

/// The whole buffer of written binding `b`: its current contents when the launch reads it too
/// (`ReadWrite`), zeros otherwise.
pub fn written_buffer(call: &CpuCall, b: u32) -> Result<CpuWrite, OpError> {
    let buf = call
        .buffers
        .iter()
        .find(|x| x.binding == b)
        .ok_or_else(|| OpError::internal(format!("binding {b} is not bound")))?;
    let rw = call
        .relocations
        .iter()
        .any(|r| r.binding == b && r.access == Access::ReadWrite);
    let data = if rw && buf.data.len() as u64 == buf.size {
        buf.data.clone()
    } else {
        vec![0; buf.size as usize]
    };
    Ok(CpuWrite { binding: b, data })
}

fn too_small(what: &str) -> OpError {
    OpError::internal(format!(
        "{what}: a buffer is smaller than the parameters address"
    ))
}

/// Lowest and highest element offsets a strided walk touches (`None` when empty).
fn extent(shape: &[u64], strides: &[i64], base: i64) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (base as i128, base as i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let span = (n as i128 - 1) * s as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    Some((lo, hi))
}

fn gather(call: &CpuCall, elem: usize) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst, n, rank) = (r.ptr()?, r.ptr()?, r.u64()?, r.u32()? as usize);
    let shape = r.u64_array::<KMAX>()?;
    let (ss, ds) = (r.u64_array::<KMAX>()?, r.u64_array::<KMAX>()?);
    let (sb, db) = (r.i64()?, r.i64()?);
    if rank == 0
        || rank > KMAX
        || shape[..rank]
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            != Some(n)
    {
        return Err(OpError::internal(format!(
            "gather: bad iteration space (rank {rank}, n {n})"
        )));
    }
    let shape = &shape[..rank];
    let ss: Vec<i64> = ss[..rank].iter().map(|&v| v as i64).collect();
    let ds: Vec<i64> = ds[..rank].iter().map(|&v| v as i64).collect();
    let mut w = written_buffer(call, dst)?;
    let Some((slo, shi)) = extent(shape, &ss, sb) else {
        return Ok(vec![w]);
    };
    let (dlo, dhi) = extent(shape, &ds, db).expect("same shape");
    let input = call
        .buffers
        .iter()
        .find(|b| b.binding == src)
        .map(|b| &b.data[..]);
    let input = input.ok_or_else(|| OpError::internal(format!("binding {src} is not bound")))?;
    let fits = |lo: i128, hi: i128, len: usize| lo >= 0 && (hi + 1) * elem as i128 <= len as i128;
    if !fits(slo, shi, input.len()) || !fits(dlo, dhi, w.data.len()) {
        return Err(too_small("gather"));
    }
    let walk = Walk {
        shape,
        ss: &ss,
        ds: &ds,
        sb,
        db,
    };
    match elem {
        1 => walk.run::<1>(input, &mut w.data),
        2 => walk.run::<2>(input, &mut w.data),
        4 => walk.run::<4>(input, &mut w.data),
        _ => walk.run::<8>(input, &mut w.data),
    }
    Ok(vec![w])
}

/// A validated strided walk (every offset it visits is inside both buffers).
struct Walk<'a> {
    shape: &'a [u64],
    ss: &'a [i64],
    ds: &'a [i64],
    sb: i64,
    db: i64,
}

impl Walk<'_> {
    fn run<const S: usize>(&self, src: &[u8], dst: &mut [u8]) {
        let rank = self.shape.len();
        let inner = self.shape[rank - 1] as usize;
        let (si, di) = (self.ss[rank - 1], self.ds[rank - 1]);
        let outer: u64 = self.shape[..rank - 1].iter().product();
        let mut idx = [0u64; KMAX];
        let (mut so, mut dof) = (self.sb, self.db);
        for _ in 0..outer {
            if si == 1 && di == 1 {
                let (s, d) = (so as usize * S, dof as usize * S);
                dst[d..d + inner * S].copy_from_slice(&src[s..s + inner * S]);
            } else {
                let (mut s, mut d) = (so, dof);
                for _ in 0..inner {
                    let (a, b) = (s as usize * S, d as usize * S);
                    dst[b..b + S].copy_from_slice(&src[a..a + S]);
                    s += si;
                    d += di;
                }
            }
            for k in (0..rank - 1).rev() {
                idx[k] += 1;
                so = so.wrapping_add(self.ss[k]);
                dof = dof.wrapping_add(self.ds[k]);
                if idx[k] < self.shape[k] {
                    break;
                }
                so = so.wrapping_sub(self.ss[k].wrapping_mul(self.shape[k] as i64));
                dof = dof.wrapping_sub(self.ds[k].wrapping_mul(self.shape[k] as i64));
                idx[k] = 0;
            }
        }
    }
}

fn fill(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, offset, nbytes) = (r.ptr()?, r.u64()?, r.u64()?);
    let blob = r.u64_array::<{ FILL_CHUNK / 8 }>()?;
    let mut w = written_buffer(call, dst)?;
    if nbytes as usize > FILL_CHUNK {
        return Err(OpError::internal(format!(
            "fill_bytes: {nbytes} bytes exceed the blob"
        )));
    }
    let bytes: Vec<u8> = blob
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .take(nbytes as usize)
        .collect();
    let window = (offset as usize)
        .checked_add(bytes.len())
        .and_then(|end| w.data.get_mut(offset as usize..end))
        .ok_or_else(|| too_small("fill_bytes"))?;
    window.copy_from_slice(&bytes);
    Ok(vec![w])
}

/// The output buffer and the window of its first `n` elements of `elem` bytes.
fn first_n(call: &CpuCall, dst: u32, n: u64, elem: usize, what: &str) -> Result<CpuWrite, OpError> {
    let w = written_buffer(call, dst)?;
    match n.checked_mul(elem as u64) {
        Some(b) if b <= w.data.len() as u64 => Ok(w),
        _ => Err(too_small(what)),
    }
}

fn splat(call: &CpuCall, elem: usize) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, n, bits) = (r.ptr()?, r.u64()?, r.u64()?);
    let mut w = first_n(call, dst, n, elem, "splat")?;
    let value = &bits.to_le_bytes()[..elem];
    for o in w.data[..n as usize * elem].chunks_exact_mut(elem) {
        o.copy_from_slice(value);
    }
    Ok(vec![w])
}

fn eye(call: &CpuCall, elem: usize) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, rows, cols, k, one) = (r.ptr()?, r.u64()?, r.u64()?, r.i64()?, r.u64()?);
    let n = rows.checked_mul(cols).ok_or_else(|| too_small("eye"))?;
    let mut w = first_n(call, dst, n, elem, "eye")?;
    let one = &one.to_le_bytes()[..elem];
    for (i, o) in w.data[..n as usize * elem]
        .chunks_exact_mut(elem)
        .enumerate()
    {
        let (row, col) = (i as u64 / cols, i as u64 % cols);
        if col as i64 - row as i64 == k {
            o.copy_from_slice(one);
        } else {
            o.fill(0);
        }
    }
    Ok(vec![w])
}

fn trilu(call: &CpuCall, elem: usize) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst, n) = (r.ptr()?, r.ptr()?, r.u64()?);
    let (rows, cols, k, upper) = (r.u64()?, r.u64()?, r.i64()?, r.u32()? != 0);
    let mut w = first_n(call, dst, n, elem, "trilu")?;
    let input = read_input(call, src, n, elem)?;
    if n > 0 && (rows == 0 || cols == 0) {
        return Err(too_small("trilu"));
    }
    let rows_cols = rows.saturating_mul(cols);
    for (i, (o, x)) in w.data[..n as usize * elem]
        .chunks_exact_mut(elem)
        .zip(input.chunks_exact(elem))
        .enumerate()
    {
        let i = i as u64;
        let (row, col) = ((i % rows_cols) / cols, i % cols);
        let diff = col as i64 - row as i64;
        if (upper && diff >= k) || (!upper && diff <= k) {
            o.copy_from_slice(x);
        } else {
            o.fill(0);
        }
    }
    Ok(vec![w])
}

fn range(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (dst, n, start, delta) = (r.ptr()?, r.u64()?, r.f64()?, r.f64()?);
    let (istart, idelta, wide) = (r.i64()?, r.i64()?, r.u32()? != 0);
    let elem = dtype::size(dt);
    let mut w = first_n(call, dst, n, elem, "range")?;
    let out = w.data[..n as usize * elem].chunks_exact_mut(elem);
    let (fs, fd) = (start as f32, delta as f32);
    let f32_at = |i: usize| fs + (i as u64 as f32) * fd;
    let f64_at = |i: usize| start + (i as u64 as f64) * delta;
    match dt {
        Dtype::F32 => out
            .enumerate()
            .for_each(|(i, o)| o.copy_from_slice(&(f64_at(i) as f32).to_le_bytes())),
        Dtype::F64 => out
            .enumerate()
            .for_each(|(i, o)| o.copy_from_slice(&f64_at(i).to_le_bytes())),
        Dtype::F16 | Dtype::Bf16 => out.enumerate().for_each(|(i, o)| {
            let v = if wide {
                f64_to_f32_odd(f64_at(i))
            } else {
                f32_at(i)
            };
            let bits = if dt == Dtype::F16 {
                f16::from_f32(v).to_bits()
            } else {
                bf16::from_f32(v).to_bits()
            };
            o.copy_from_slice(&bits.to_le_bytes());
        }),
        Dtype::I64 => out.enumerate().for_each(|(i, o)| {
            o.copy_from_slice(
                &istart
                    .wrapping_add((i as i64).wrapping_mul(idelta))
                    .to_le_bytes(),
            )
        }),
        Dtype::I32 => out.enumerate().for_each(|(i, o)| {
            let v = istart.wrapping_add((i as i64).wrapping_mul(idelta)) as i32;
            o.copy_from_slice(&v.to_le_bytes())
        }),
        Dtype::I16 => out.enumerate().for_each(|(i, o)| {
            let v = istart.wrapping_add((i as i64).wrapping_mul(idelta)) as i16;
            o.copy_from_slice(&v.to_le_bytes())
        }),
        other => {
            return Err(OpError::internal(format!(
                "no range kernel for {}",
                dtype::name(other)
            )));
        }
    }
    Ok(vec![w])
}

/// The CPU kernel `cast_{from}_{to}(src, dst, n, mode)`.
fn cast(call: &CpuCall, from: Dtype, to: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (src, dst, n, mode) = (r.ptr()?, r.ptr()?, r.u64()?, r.u32()?);
    let bytes_of = |dt| {
        umd_sdk::dtype::byte_len(dt, n)
            .ok_or_else(|| OpError::internal(format!("{n} elements overflow")))
    };
    let input = read_input(call, src, bytes_of(from)?, 1)?;
    let mut w = written_buffer(call, dst)?;
    let bytes = bytes_of(to)? as usize;
    let out = w.data.get_mut(..bytes).ok_or_else(|| {
        OpError::internal(format!(
            "cast output binding {dst} is smaller than {bytes} bytes"
        ))
    })?;
    if umd_sdk::dtype::is_packed(from) || umd_sdk::dtype::is_packed(to) {
        crate::packed::convert(from, to, mode, n as usize, input, out);
    } else {
        convert_bytes(from, to, mode, input, out);
    }
    Ok(vec![w])
}
