//! Reading operands from the launch's buffers: a strided 2-D block of elements ([`Block`]) in
//! one read when little lies between its elements, line by line otherwise; and the
//! overflow-checked bounds every read is first checked against.

use umd_sdk::dtype::Element;
use umd_sdk::kernel::{self, Memory};
use umd_sdk::{KernelCall, OpError};

use umd_sdk::gemm::Strided;

/// Element `(r, c)` of a block read from a binding lies at `base + r * rs + c * cs`.
pub struct Block {
    data: Vec<u8>,
    base: usize,
    pub rs: usize,
    pub cs: usize,
}

impl Block {
    #[inline(always)]
    pub fn get<T: Element>(&self, r: usize, c: usize) -> T {
        let s = std::mem::size_of::<T>();
        let at = (self.base + r * self.rs + c * self.cs) * s;
        T::load(&self.data[at..at + s])
    }

    /// Every element of the block's bytes, as `f` maps it (in the block's layout).
    pub fn decode<T: Element, A>(&self, f: impl Fn(T) -> A) -> Vec<A> {
        let s = std::mem::size_of::<T>();
        self.data[self.base * s..]
            .chunks_exact(s)
            .map(|b| f(T::load(b)))
            .collect()
    }

    /// The block's elements as `T::Compute` values (in the block's layout): its bytes viewed in
    /// place where the layouts agree (f32, f64, the integers), else decoded into `buf`.
    pub fn values<'s, T: Element>(&'s self, buf: &'s mut Vec<T::Compute>) -> &'s [T::Compute] {
        let s = std::mem::size_of::<T>();
        let bytes = &self.data[self.base * s..];
        let bytes = &bytes[..bytes.len() / s * s];
        if let Some(v) = T::view(bytes) {
            return v;
        }
        buf.clear();
        buf.extend(bytes.chunks_exact(s).map(|b| T::load(b).to_compute()));
        buf
    }

    /// `values` (from [`Block::decode`]) as a matrix.
    pub fn view<'a, A>(&self, values: &'a [A]) -> Strided<'a, A> {
        Strided {
            data: values,
            rs: self.rs,
            cs: self.cs,
        }
    }
}

/// Reads `len` bytes from `offset` in pieces of at most 16 MiB.
pub fn read_span(
    mem: &mut dyn Memory,
    binding: u32,
    offset: u64,
    len: usize,
) -> Result<Vec<u8>, OpError> {
    const PIECE: usize = 16 << 20;
    if len <= PIECE {
        return mem.read(binding, offset, len);
    }
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| OpError::internal(format!("binding {binding}: no memory for {len} bytes")))?;
    kernel::chunks(0..len as u64, PIECE as u64, |lo, hi| {
        out.extend(mem.read(binding, offset + lo, (hi - lo) as usize)?);
        Ok(())
    })?;
    Ok(out)
}

/// Reads the `rows × cols` block of `esize`-byte elements at element `origin` + `r * rs + c *
/// cs`: in one span when little lies between its elements, else line by line along the
/// contiguous direction. The caller has checked that every element lies inside the binding.
pub fn read_block(
    mem: &mut dyn Memory,
    (binding, esize): (u32, usize),
    origin: u64,
    (rows, rs): (usize, usize),
    (cols, cs): (usize, usize),
) -> Result<Block, OpError> {
    let empty = || Block {
        data: Vec::new(),
        base: 0,
        rs: 0,
        cs: 0,
    };
    if rows == 0 || cols == 0 {
        return Ok(empty());
    }
    let span = (rows - 1)
        .checked_mul(rs)
        .zip((cols - 1).checked_mul(cs))
        .and_then(|(r, c)| r.checked_add(c)?.checked_add(1))
        .filter(|s| s.checked_mul(esize).is_some())
        .ok_or_else(|| {
            OpError::internal(format!(
                "a {rows}x{cols} block of binding {binding} does not fit in memory"
            ))
        })?;
    let needed = rows * cols;
    let at = |e: u64| e * esize as u64;
    if span <= 2 * needed + kernel::CHUNK_BYTES / esize {
        let data = read_span(mem, binding, at(origin), span * esize)?;
        return Ok(Block {
            data,
            base: 0,
            rs,
            cs,
        });
    }
    // Lines along the unit stride (an element at a time when neither is).
    let (lines, ls, len, es) = if rs == 1 && cs != 1 {
        (cols, cs, rows, rs)
    } else {
        (rows, rs, cols, cs)
    };
    let line = (len - 1) * es + 1;
    let mut data = Vec::with_capacity(lines * line * esize);
    for l in 0..lines {
        data.extend(mem.read(binding, at(origin + (l * ls) as u64), line * esize)?);
    }
    Ok(if rs == 1 && cs != 1 {
        Block {
            data,
            base: 0,
            rs: es,
            cs: line,
        }
    } else {
        Block {
            data,
            base: 0,
            rs: line,
            cs: es,
        }
    })
}

/// One past the largest element offset of `dims` (count, stride) from 0; `None` on overflow.
pub fn extent(dims: &[(u64, u64)]) -> Option<u64> {
    if dims.iter().any(|&(d, _)| d == 0) {
        return Some(0);
    }
    dims.iter()
        .try_fold(1u64, |e, &(d, s)| e.checked_add((d - 1).checked_mul(s)?))
}

/// Checks that `need` elements (`None`: an overflowing count) of `esize` bytes fit in `binding`.
pub fn check_fits(
    call: &KernelCall,
    what: &str,
    (binding, esize): (u32, usize),
    need: Option<u64>,
) -> Result<(), OpError> {
    let size = call.size_of(binding)?;
    match need.and_then(|e| e.checked_mul(esize as u64)) {
        Some(bytes) if bytes <= size => Ok(()),
        Some(bytes) => Err(OpError::internal(format!(
            "binding {binding} ({what}) holds {size} bytes, the geometry reads {bytes}"
        ))),
        None => Err(OpError::internal(format!(
            "the geometry of {what} overflows 64 bits"
        ))),
    }
}
