//! The broadcast machinery every op shares: the output shape of N broadcast inputs, a launch's
//! [`Geometry`] (output extents and per-input element strides, size-1 dimensions dropped and
//! mergeable dimensions coalesced, innermost first), the [`Mode`] a launch runs in (flat when
//! every input is contiguous or a scalar; strided with 32-bit magic-number division when the
//! output has < 2^32 elements; strided with 64-bit division otherwise), packing that geometry
//! into the parameter block and reading it back, and the CPU walk over it (one call per
//! contiguous output row, no division).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{OpError, TensorDesc};

/// Most tensor inputs of one launch (Where).
pub const MAX_INPUTS: usize = 3;

/// How a launch walks its output (and the entry-point suffix naming it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every input contiguous (index `i`) or a scalar (index 0): params `n, scalar_mask`.
    Flat,
    /// Strided, `n < 2^32`: params `n, rank, size[8], magic[8], shift[8], strides[k][8]` (u32).
    Strided32,
    /// Strided, any `n`: params `n, rank, size[8], strides[k][8]` (u64).
    Strided64,
}

impl Mode {
    pub fn suffix(self) -> &'static str {
        match self {
            Mode::Flat => "",
            Mode::Strided32 => "_bcast",
            Mode::Strided64 => "_bcast64",
        }
    }
}

/// The numpy broadcast of every shape in `shapes` (0 with 1 gives 0; 0 with 3 is an error).
pub fn broadcast_all<'a>(shapes: impl IntoIterator<Item = &'a [u64]>) -> Result<Vec<u64>, OpError> {
    shapes
        .into_iter()
        .try_fold(Vec::new(), |acc, s| shape::broadcast(&acc, s))
}

/// Refuses a tensor of rank over [`MAX_RANK`].
pub fn check_rank(t: &TensorDesc) -> Result<(), OpError> {
    if t.shape.len() > MAX_RANK {
        return Err(OpError::shape(format!(
            "input `{}` has rank {}, the maximum is {MAX_RANK}",
            t.name,
            t.shape.len()
        )));
    }
    Ok(())
}

/// The element walk of one launch. Dimension 0 is the innermost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Output elements.
    pub n: u64,
    /// Dimensions in use (0 when `n <= 1`).
    pub rank: usize,
    pub size: [u64; MAX_RANK],
    /// Element strides of each input, per dimension.
    pub strides: Vec<[u64; MAX_RANK]>,
}

impl Geometry {
    /// The geometry of an output of shape `out` read from inputs whose element strides over
    /// `out`'s dimensions are `strides` (0 where broadcast): size-1 dimensions are dropped and
    /// neighbours every input walks contiguously are merged.
    pub fn new(out: &[u64], strides: &[Vec<u64>]) -> Result<Geometry, OpError> {
        let n = shape::numel(out)?;
        let k = strides.len();
        let mut dims: Vec<(u64, Vec<u64>)> = Vec::new(); // outermost first
        if n > 1 {
            for (d, &size) in out.iter().enumerate() {
                if size == 1 {
                    continue;
                }
                let st: Vec<u64> = strides.iter().map(|s| s[d]).collect();
                match dims.last_mut() {
                    Some((osize, ost))
                        if ost
                            .iter()
                            .zip(&st)
                            .all(|(o, i)| Some(*o) == i.checked_mul(size)) =>
                    {
                        *osize *= size;
                        *ost = st;
                    }
                    _ => dims.push((size, st)),
                }
            }
        }
        if dims.len() > MAX_RANK {
            return Err(OpError::shape(format!(
                "rank {} exceeds the supported maximum of {MAX_RANK}",
                dims.len()
            )));
        }
        let mut g = Geometry {
            n,
            rank: dims.len(),
            size: [1; MAX_RANK],
            strides: vec![[0; MAX_RANK]; k],
        };
        for (d, (size, st)) in dims.into_iter().rev().enumerate() {
            g.size[d] = size;
            for (i, s) in st.into_iter().enumerate() {
                g.strides[i][d] = s;
            }
        }
        Ok(g)
    }

    /// The geometry of `inputs` broadcast to `out` (each input contiguous, numpy rules).
    pub fn broadcast(out: &[u64], inputs: &[&[u64]]) -> Result<Geometry, OpError> {
        let strides: Vec<Vec<u64>> = inputs
            .iter()
            .map(|s| shape::broadcast_strides(s, out))
            .collect();
        Self::new(out, &strides)
    }

    /// The mode this geometry runs in.
    pub fn mode(&self) -> Mode {
        let flat = self.rank == 0 || self.rank == 1 && self.strides.iter().all(|s| s[0] <= 1);
        if flat || self.n == 0 {
            Mode::Flat
        } else if self.n <= u32::MAX as u64 {
            Mode::Strided32
        } else {
            Mode::Strided64
        }
    }

    /// Inputs read as a scalar (stride 0) in flat mode, as a bit mask.
    fn scalar_mask(&self) -> u32 {
        self.strides
            .iter()
            .enumerate()
            .filter(|(_, s)| self.rank == 0 || s[0] == 0)
            .fold(0, |m, (i, _)| m | (1 << i))
    }

    /// Packs `n` and the fields of [`Geometry::mode`]; returns the mode.
    pub fn pack(&self, p: &mut ParamPacker) -> Mode {
        self.pack_as(p, self.mode())
    }

    /// Packs `n` and the fields of `mode` (a strided mode suits any geometry; flat only one
    /// whose [`Geometry::mode`] is flat).
    pub fn pack_as(&self, p: &mut ParamPacker, mode: Mode) -> Mode {
        p.u64(self.n);
        match mode {
            Mode::Flat => {
                p.u32(if self.n == 0 { 0 } else { self.scalar_mask() });
            }
            Mode::Strided32 => {
                p.u32(self.rank as u32);
                let divs: Vec<(u32, u32)> = self.size.iter().map(|&d| magic(d as u32)).collect();
                for &s in &self.size {
                    p.u32(s as u32);
                }
                for &(m, _) in &divs {
                    p.u32(m);
                }
                for &(_, s) in &divs {
                    p.u32(s);
                }
                for st in &self.strides {
                    for &s in st {
                        p.u32(s as u32);
                    }
                }
            }
            Mode::Strided64 => {
                p.u32(self.rank as u32);
                p.u64_array(&self.size);
                for st in &self.strides {
                    p.u64_array(st);
                }
            }
        }
        mode
    }

    /// Reads what [`Geometry::pack`] wrote for `k` inputs (CPU side), checking it is coherent.
    pub fn read(r: &mut ParamReader, mode: Mode, k: usize) -> Result<Geometry, OpError> {
        let n = r.u64()?;
        let mut g = Geometry {
            n,
            rank: 0,
            size: [1; MAX_RANK],
            strides: vec![[0; MAX_RANK]; k],
        };
        let bad = |m: String| Err(OpError::internal(m));
        match mode {
            Mode::Flat => {
                let mask = r.u32()?;
                g.rank = 1;
                g.size[0] = n;
                for (i, s) in g.strides.iter_mut().enumerate() {
                    s[0] = u64::from(mask & (1 << i) == 0);
                }
            }
            Mode::Strided32 => {
                g.rank = r.u32()? as usize;
                let mut u32s = |dst: &mut [u64; MAX_RANK]| -> Result<(), OpError> {
                    for x in dst.iter_mut() {
                        *x = r.u32()? as u64;
                    }
                    Ok(())
                };
                u32s(&mut g.size)?;
                let mut skip = [0; MAX_RANK];
                u32s(&mut skip)?; // magic numbers: the CPU walk does not divide
                u32s(&mut skip)?; // shifts
                for st in g.strides.iter_mut() {
                    u32s(st)?;
                }
            }
            Mode::Strided64 => {
                g.rank = r.u32()? as usize;
                g.size = r.u64_array()?;
                for st in g.strides.iter_mut() {
                    *st = r.u64_array()?;
                }
            }
        }
        if g.rank > MAX_RANK {
            return bad(format!("rank {} over {MAX_RANK}", g.rank));
        }
        let product = g.size[..g.rank]
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d));
        if n > 0 && product != Some(n) {
            return bad(format!(
                "extents {:?} do not make {n} elements",
                &g.size[..g.rank]
            ));
        }
        Ok(g)
    }

    /// Elements input `k` spans (one past its largest offset); 0 when the output is empty.
    pub fn extent(&self, k: usize) -> Result<u64, OpError> {
        if self.n == 0 {
            return Ok(0);
        }
        (0..self.rank)
            .try_fold(1u64, |acc, d| {
                (self.size[d] - 1)
                    .checked_mul(self.strides[k][d])
                    .and_then(|x| acc.checked_add(x))
            })
            .ok_or_else(|| OpError::internal("input extent overflows".to_string()))
    }

    /// Calls `row(offsets, steps, out_start, len)` for each innermost row of the output, in
    /// order: input `i`'s elements of the row are at `offsets[i] + j * steps[i]`, the output's
    /// at `out_start + j`, for `j < len`.
    pub fn walk<const K: usize>(&self, mut row: impl FnMut([usize; K], [usize; K], usize, usize)) {
        if self.n == 0 {
            return;
        }
        let stride = |i: usize, d: usize| self.strides.get(i).map_or(0, |s| s[d]) as usize;
        if self.rank == 0 {
            row([0; K], [0; K], 0, 1);
            return;
        }
        let len = self.size[0] as usize;
        let steps: [usize; K] = std::array::from_fn(|i| stride(i, 0));
        let mut idx = [0u64; MAX_RANK];
        let mut off = [0usize; K];
        let mut out = 0usize;
        loop {
            row(off, steps, out, len);
            out += len;
            let mut d = 1;
            loop {
                if d >= self.rank {
                    return;
                }
                idx[d] += 1;
                if idx[d] < self.size[d] {
                    for (i, o) in off.iter_mut().enumerate() {
                        *o += stride(i, d);
                    }
                    break;
                }
                for (i, o) in off.iter_mut().enumerate() {
                    *o -= stride(i, d) * (self.size[d] as usize - 1);
                }
                idx[d] = 0;
                d += 1;
            }
        }
    }
}

/// Magic number and shift dividing any `u32` by `d` (`1 <= d`): `q = (umulhi(x, m) + x) >> s`
/// with the sum taken in 64 bits (Granlund–Montgomery round-up method).
pub fn magic(d: u32) -> (u32, u32) {
    let d = d.max(1) as u64;
    let s = 64 - (d - 1).leading_zeros(); // ceil(log2 d)
    let m = ((1u64 << 32) * ((1u64 << s) - d)) / d + 1;
    (m as u32, s)
}

/// The division [`magic`] encodes, as the CUDA kernels do it.
pub fn magic_div(x: u32, m: u32, s: u32) -> u32 {
    let hi = (x as u64 * m as u64) >> 32;
    ((hi + x as u64) >> s) as u32
}
