//! Shape helpers: overflow-checked element counts, numpy broadcasting and element strides.
//!
//! ```
//! use umd_sdk::shape::{broadcast, broadcast_strides};
//! let out = broadcast(&[4, 1, 3], &[5, 1]).unwrap();
//! assert_eq!(out, vec![4, 5, 3]);
//! assert_eq!(broadcast_strides(&[5, 1], &out), vec![0, 1, 0]);
//! ```

use crate::{Dtype, OpError, dtype};

/// Highest tensor rank the bundled kernels handle (dims beyond it are refused, not truncated).
pub const MAX_RANK: usize = 8;

/// Number of elements of `shape` (1 for a scalar), refusing overflow.
pub fn numel(shape: &[u64]) -> Result<u64, OpError> {
    shape.iter().try_fold(1u64, |acc, &d| {
        acc.checked_mul(d).ok_or_else(|| {
            OpError::shape(format!("element count of shape {shape:?} overflows u64"))
        })
    })
}

/// Bytes of a tensor of `shape` and `dt` (packed types round up to whole bytes), refusing
/// overflow.
pub fn byte_size(shape: &[u64], dt: Dtype) -> Result<u64, OpError> {
    dtype::byte_len(dt, numel(shape)?)
        .ok_or_else(|| OpError::shape(format!("byte size of shape {shape:?} overflows u64")))
}

/// The numpy broadcast of two shapes.
pub fn broadcast(a: &[u64], b: &[u64]) -> Result<Vec<u64>, OpError> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() {
            1
        } else {
            a[i - (rank - a.len())]
        };
        let db = if i < rank - b.len() {
            1
        } else {
            b[i - (rank - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(OpError::shape(format!(
                    "shapes {a:?} and {b:?} cannot be broadcast (dimension {i}: {da} vs {db})"
                )));
            }
        };
    }
    Ok(out)
}

/// Row-major element strides of a contiguous tensor.
pub fn contiguous_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Element strides of a contiguous tensor of shape `input` read as the broadcast shape `out`:
/// one stride per output dimension, 0 where the input is broadcast.
pub fn broadcast_strides(input: &[u64], out: &[u64]) -> Vec<u64> {
    let own = contiguous_strides(input);
    let lead = out.len() - input.len();
    (0..out.len())
        .map(|i| {
            if i < lead || input[i - lead] == 1 && out[i] != 1 {
                0
            } else {
                own[i - lead]
            }
        })
        .collect()
}

/// Pads a shape-like vector to [`MAX_RANK`] entries (for fixed-size kernel parameter arrays).
pub fn padded<const N: usize>(v: &[u64], fill: u64) -> Result<[u64; N], OpError> {
    if v.len() > N {
        return Err(OpError::shape(format!(
            "rank {} exceeds the supported maximum of {N}",
            v.len()
        )));
    }
    let mut out = [fill; N];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast(&[], &[3]).unwrap(), vec![3]);
        assert_eq!(broadcast(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
        assert_eq!(broadcast(&[0, 1], &[1, 5]).unwrap(), vec![0, 5]);
        let e = broadcast(&[2, 3], &[4]).unwrap_err();
        assert!(matches!(e, OpError::InvalidShape(m) if m.contains("3 vs 4")));
    }

    #[test]
    fn counts_refuse_overflow() {
        assert_eq!(numel(&[]).unwrap(), 1);
        assert_eq!(numel(&[2, 0, 7]).unwrap(), 0);
        assert!(numel(&[1 << 40, 1 << 40]).is_err());
        assert!(byte_size(&[1 << 62], Dtype::F32).is_err());
        assert_eq!(byte_size(&[3, 5], Dtype::F16).unwrap(), 30);
    }

    #[test]
    fn strides() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
        assert_eq!(broadcast_strides(&[2, 3, 4], &[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(padded::<4>(&[5, 6], 1).unwrap(), [5, 6, 1, 1]);
        assert!(padded::<2>(&[1, 2, 3], 1).is_err());
    }

    proptest::proptest! {
        #[test]
        fn broadcast_strides_address_the_right_element(a in proptest::collection::vec(1u64..4, 0..4),
                                                        extra in proptest::collection::vec(1u64..4, 0..3)) {
            // out = extra ++ a with some of a's dims set to 1 in the input
            let input: Vec<u64> = a.iter().enumerate().map(|(i, &d)| if i % 2 == 0 { 1 } else { d }).collect();
            let out: Vec<u64> = extra.iter().chain(a.iter()).copied().collect();
            let out = broadcast(&input, &out).unwrap();
            let s = broadcast_strides(&input, &out);
            let n = numel(&out).unwrap();
            let in_strides = contiguous_strides(&input);
            for flat in 0..n {
                // unravel flat over out, map to input index by numpy rules
                let mut rem = flat; let mut via_strides = 0; let mut idx = vec![0; out.len()];
                for d in (0..out.len()).rev() { idx[d] = rem % out[d]; rem /= out[d]; via_strides += idx[d] * s[d]; }
                let lead = out.len() - input.len();
                let direct: u64 = (0..input.len()).map(|j| if input[j] == 1 { 0 } else { idx[j + lead] * in_strides[j] }).sum();
                proptest::prop_assert_eq!(via_strides, direct);
            }
        }
    }
}
