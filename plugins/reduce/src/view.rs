//! The reduction view shared by the planner, the CUDA kernels and the CPU kernels: an input
//! tensor seen as kept dimensions (one output element per kept index, row-major) and reduced
//! dimensions (combined into that element), each with its input element strides. Size-1
//! dimensions are dropped and adjacent dimensions of the same kind merged, so the common cases
//! become `(outer, R, inner)` with at most two kept and one reduced dimension.
//!
//! [`View::pack`] writes the view into a parameter block and [`View::read`] reads it back, so the
//! field order lives in one place.

use umd_sdk::OpError;
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};

/// Kept and reduced dimensions of a contiguous input.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct View {
    /// Number of output elements (product of the kept extents).
    pub n_out: u64,
    /// Number of elements combined into each output (product of the reduced extents).
    pub r: u64,
    pub kshape: Vec<u64>,
    pub kstride: Vec<u64>,
    pub rshape: Vec<u64>,
    pub rstride: Vec<u64>,
}

impl View {
    /// The view of a contiguous tensor of `shape` reducing the dimensions where `reduced` is
    /// true.
    pub fn new(shape: &[u64], reduced: &[bool]) -> Result<View, OpError> {
        debug_assert_eq!(shape.len(), reduced.len());
        let strides = shape::contiguous_strides(shape);
        let mut v = View::default();
        // The kind of the last dimension pushed (merging needs adjacency among kept dims).
        let mut last: Option<bool> = None;
        for d in 0..shape.len() {
            if shape[d] == 1 {
                continue;
            }
            let (dims, st) = if reduced[d] {
                (&mut v.rshape, &mut v.rstride)
            } else {
                (&mut v.kshape, &mut v.kstride)
            };
            if last == Some(reduced[d]) {
                // Adjacent (only size-1 dims between) and contiguous: merge.
                let i = dims.len() - 1;
                dims[i] *= shape[d];
                st[i] = strides[d];
            } else {
                dims.push(shape[d]);
                st.push(strides[d]);
            }
            last = Some(reduced[d]);
        }
        v.n_out = shape::numel(&v.kshape)?;
        v.r = shape::numel(&v.rshape)?;
        Ok(v)
    }

    /// One past the largest input element index the view reads (0 when it reads nothing).
    pub fn extent(&self) -> u64 {
        if self.n_out == 0 || self.r == 0 {
            return 0;
        }
        let span = |s: &[u64], st: &[u64]| {
            s.iter()
                .zip(st)
                .map(|(n, st)| (n - 1).saturating_mul(*st))
                .fold(0u64, u64::saturating_add)
        };
        span(&self.kshape, &self.kstride)
            .saturating_add(span(&self.rshape, &self.rstride))
            .saturating_add(1)
    }

    /// Packs `n_out, r, krank, rrank, kshape, kstride, rshape, rstride` (CUDA:
    /// `unsigned long long, unsigned long long, unsigned int, unsigned int, umd_dims ×4`).
    pub fn pack(&self, p: &mut ParamPacker) -> Result<(), OpError> {
        p.u64(self.n_out)
            .u64(self.r)
            .u32(self.kshape.len() as u32)
            .u32(self.rshape.len() as u32)
            .u64_array(&shape::padded::<MAX_RANK>(&self.kshape, 1)?)
            .u64_array(&shape::padded::<MAX_RANK>(&self.kstride, 0)?)
            .u64_array(&shape::padded::<MAX_RANK>(&self.rshape, 1)?)
            .u64_array(&shape::padded::<MAX_RANK>(&self.rstride, 0)?);
        Ok(())
    }

    /// Reads what [`View::pack`] wrote, checking it is consistent.
    pub fn read(r: &mut ParamReader) -> Result<View, OpError> {
        let (n_out, red) = (r.u64()?, r.u64()?);
        let (krank, rrank) = (r.u32()? as usize, r.u32()? as usize);
        let (ks, kst, rs, rst) = (
            r.u64_array::<MAX_RANK>()?,
            r.u64_array::<MAX_RANK>()?,
            r.u64_array::<MAX_RANK>()?,
            r.u64_array::<MAX_RANK>()?,
        );
        if krank > MAX_RANK || rrank > MAX_RANK {
            return Err(OpError::internal(format!(
                "view ranks {krank}/{rrank} exceed {MAX_RANK}"
            )));
        }
        let v = View {
            n_out,
            r: red,
            kshape: ks[..krank].to_vec(),
            kstride: kst[..krank].to_vec(),
            rshape: rs[..rrank].to_vec(),
            rstride: rst[..rrank].to_vec(),
        };
        if shape::numel(&v.kshape)? != n_out || shape::numel(&v.rshape)? != red {
            return Err(OpError::internal("view counts disagree with its extents"));
        }
        Ok(v)
    }
}

/// Walks the offsets of a strided multi-index in row-major order (last dimension fastest)
/// without divisions.
pub struct Odometer<'a> {
    shape: &'a [u64],
    stride: &'a [u64],
    idx: [u64; MAX_RANK],
    /// The current offset.
    pub off: u64,
}

impl<'a> Odometer<'a> {
    pub fn new(shape: &'a [u64], stride: &'a [u64]) -> Self {
        Odometer {
            shape,
            stride,
            idx: [0; MAX_RANK],
            off: 0,
        }
    }

    /// An odometer standing at the `start`-th index (row-major).
    pub fn at(shape: &'a [u64], stride: &'a [u64], start: u64) -> Self {
        let mut o = Odometer::new(shape, stride);
        let mut rem = start;
        for d in (0..shape.len()).rev() {
            o.idx[d] = rem % shape[d].max(1);
            rem /= shape[d].max(1);
            o.off += o.idx[d] * stride[d];
        }
        o
    }

    /// Steps to the next index (wrapping to the start after the last).
    #[inline]
    pub fn step(&mut self) {
        for d in (0..self.shape.len()).rev() {
            self.idx[d] += 1;
            self.off += self.stride[d];
            if self.idx[d] < self.shape[d] {
                return;
            }
            self.off -= self.stride[d] * self.shape[d];
            self.idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_drops_unit_dims() {
        // [2, 3, 4] reducing 1: outer 2, R 3, inner 4
        let v = View::new(&[2, 3, 4], &[false, true, false]).unwrap();
        assert_eq!(
            (v.kshape.clone(), v.kstride.clone()),
            (vec![2, 4], vec![12, 1])
        );
        assert_eq!((v.rshape.clone(), v.rstride.clone()), (vec![3], vec![4]));
        assert_eq!((v.n_out, v.r, v.extent()), (8, 3, 24));
        // [2, 1, 3, 4] reducing 2 and 3 (merged over nothing), the unit dim dropped
        let v = View::new(&[2, 1, 3, 4], &[false, true, true, true]).unwrap();
        assert_eq!((v.rshape.clone(), v.rstride.clone()), (vec![12], vec![1]));
        // kept dims separated by a unit reduced dim merge
        let v = View::new(&[2, 1, 3], &[false, true, false]).unwrap();
        assert_eq!((v.kshape.clone(), v.kstride.clone()), (vec![6], vec![1]));
        assert_eq!((v.r, v.rshape.len()), (1, 0));
        // scalar
        let v = View::new(&[], &[]).unwrap();
        assert_eq!((v.n_out, v.r, v.extent()), (1, 1, 1));
        // empty reduced set of values
        let v = View::new(&[2, 0, 4], &[false, true, false]).unwrap();
        assert_eq!((v.n_out, v.r, v.extent()), (8, 0, 0));
    }

    #[test]
    fn odometer_walks_row_major() {
        let (s, st) = ([2u64, 3], [10u64, 1]);
        let mut o = Odometer::new(&s, &st);
        let mut seen = vec![];
        for _ in 0..7 {
            seen.push(o.off);
            o.step();
        }
        assert_eq!(seen, vec![0, 1, 2, 10, 11, 12, 0]);
        let mut o = Odometer::at(&s, &st, 4);
        assert_eq!(o.off, 11);
        o.step();
        assert_eq!(o.off, 12);
    }
}
