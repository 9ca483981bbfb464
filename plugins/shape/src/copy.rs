//! The strided copy ("gather by strides") every data-movement op plans into: an iteration space
//! (`shape`), signed element strides and base offsets for the source and the destination.
//! Transpose, Slice (negative steps included), Expand, Tile, Concat/Split windows and plain
//! copies are all one [`StridedCopy`]. Before packing, dims of extent 1 are dropped, dims that
//! are contiguous in both buffers are merged, and a copy whose innermost run is contiguous on
//! both sides is widened to 2/4/8-byte elements.

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Launch, OpError, PlanRequestExt};

use crate::common::make_launch;

/// Highest rank of the gather kernel's iteration space (after simplification).
pub const KMAX: usize = 16;

/// The module holding every byte-moving kernel.
pub const MOVE_MODULE: &str = "shape_move";

/// One strided copy: for every index `j` of `shape`, `dst[dst_base + j·dst] = src[src_base +
/// j·src]`, in elements of `elem` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StridedCopy {
    pub shape: Vec<u64>,
    pub src: Vec<i64>,
    pub dst: Vec<i64>,
    pub src_base: i64,
    pub dst_base: i64,
    pub elem: usize,
}

/// Row-major element strides of a contiguous tensor, as i64 (refusing overflow).
pub fn strides(shape: &[u64]) -> Result<Vec<i64>, OpError> {
    let mut out = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for d in (0..shape.len()).rev() {
        out[d] = acc;
        acc = i64::try_from(shape[d])
            .ok()
            .and_then(|v| acc.checked_mul(v.max(1)))
            .ok_or_else(|| OpError::shape(format!("shape {shape:?} is too large to address")))?;
    }
    Ok(out)
}

impl StridedCopy {
    /// A copy of `shape` reading `src` strides, writing a contiguous destination.
    pub fn gather(
        shape: Vec<u64>,
        src: Vec<i64>,
        src_base: i64,
        elem: usize,
    ) -> Result<Self, OpError> {
        let dst = strides(&shape)?;
        Ok(StridedCopy {
            shape,
            src,
            dst,
            src_base,
            dst_base: 0,
            elem,
        })
    }

    /// A contiguous copy of `n` elements.
    pub fn plain(n: u64, elem: usize) -> Self {
        StridedCopy {
            shape: vec![n],
            src: vec![1],
            dst: vec![1],
            src_base: 0,
            dst_base: 0,
            elem,
        }
    }

    /// Number of elements copied.
    pub fn count(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Drops unit dims, merges dims contiguous in both buffers, widens the element.
    pub fn simplify(&mut self) {
        if self.shape.contains(&0) {
            *self = StridedCopy {
                shape: vec![0],
                src: vec![1],
                dst: vec![1],
                src_base: 0,
                dst_base: 0,
                elem: self.elem,
            };
            return;
        }
        let (mut shape, mut src, mut dst) = (Vec::new(), Vec::new(), Vec::new());
        for d in 0..self.shape.len() {
            if self.shape[d] == 1 {
                continue;
            }
            if let Some(last) = shape.len().checked_sub(1) {
                let ext = self.shape[d] as i128;
                // the previous (outer) dim steps exactly over this whole dim in both buffers
                if src[last] as i128 == self.src[d] as i128 * ext
                    && dst[last] as i128 == self.dst[d] as i128 * ext
                {
                    shape[last] *= self.shape[d];
                    src[last] = self.src[d];
                    dst[last] = self.dst[d];
                    continue;
                }
            }
            shape.push(self.shape[d]);
            src.push(self.src[d]);
            dst.push(self.dst[d]);
        }
        if shape.is_empty() {
            (shape, src, dst) = (vec![1], vec![1], vec![1]);
        }
        (self.shape, self.src, self.dst) = (shape, src, dst);
        self.widen();
    }

    fn widen(&mut self) {
        let last = self.shape.len() - 1;
        if self.src[last] != 1 || self.dst[last] != 1 {
            return;
        }
        for w in [8usize, 4, 2] {
            if w <= self.elem || w % self.elem != 0 {
                continue;
            }
            let k = (w / self.elem) as i64;
            let fits = self.shape[last].is_multiple_of(k as u64)
                && self.src[..last].iter().all(|s| s % k == 0)
                && self.dst[..last].iter().all(|s| s % k == 0)
                && self.src_base % k == 0
                && self.dst_base % k == 0;
            if fits {
                self.shape[last] /= k as u64;
                for s in self.src[..last]
                    .iter_mut()
                    .chain(self.dst[..last].iter_mut())
                {
                    *s /= k;
                }
                self.src_base /= k;
                self.dst_base /= k;
                self.elem = w;
                return;
            }
        }
    }

    /// Simplifies and packs the copy as a launch of `gather_b{elem}` from binding `src` to
    /// binding `dst` (`Write`, or `ReadWrite` when earlier launches wrote other parts of it).
    pub fn launch(
        mut self,
        req: &PlanRequestExt,
        src: u32,
        dst: u32,
        dst_access: Access,
    ) -> Result<Launch, OpError> {
        self.simplify();
        let rank = self.shape.len();
        if rank > KMAX {
            return Err(OpError::shape(format!(
                "{}: the copy needs {rank} dimensions after merging contiguous ones; the kernel \
                 handles {KMAX}",
                req.op
            )));
        }
        let n = self.count();
        let pad = |v: &[u64]| {
            let mut a = [0u64; KMAX];
            a[..v.len()].copy_from_slice(v);
            a
        };
        let bits = |v: &[i64]| v.iter().map(|&s| s as u64).collect::<Vec<_>>();
        let mut p = ParamPacker::new();
        p.ptr(src, Access::Read)
            .ptr(dst, dst_access)
            .u64(n)
            .u32(rank as u32)
            .u64_array(&pad(&self.shape))
            .u64_array(&pad(&bits(&self.src)))
            .u64_array(&pad(&bits(&self.dst)))
            .i64(self.src_base)
            .i64(self.dst_base);
        make_launch(req, MOVE_MODULE, format!("gather_b{}", self.elem), n, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_copies_collapse_and_widen() {
        let mut c = StridedCopy::gather(vec![2, 3, 4], strides(&[2, 3, 4]).unwrap(), 0, 4).unwrap();
        c.simplify();
        assert_eq!((c.shape.clone(), c.elem), (vec![12], 8));
        let mut t = StridedCopy::gather(vec![4, 3], vec![1, 4], 0, 2).unwrap();
        t.simplify();
        assert_eq!(t.shape, vec![4, 3], "a transpose does not merge");
        assert_eq!(t.elem, 2);
        let mut r = StridedCopy::gather(vec![1, 5], vec![7, -1], 4, 1).unwrap();
        r.simplify();
        assert_eq!(
            (r.shape.clone(), r.src.clone(), r.elem),
            (vec![5], vec![-1], 1)
        );
        let mut e = StridedCopy::gather(vec![3, 0], vec![1, 1], 9, 8).unwrap();
        e.simplify();
        assert_eq!((e.count(), e.src_base), (0, 0));
    }
}
