//! Tensor data on the host side: converting between element bytes of any dtype and `f64`
//! values, for the CLI, the demo and tests. (Devices never convert; they move bytes.)

use half::{bf16, f16};

use crate::tensor::Dtype;

/// Encodes values as little-endian elements of `dtype` (rounding to nearest for the narrow
/// types, saturating for integers).
pub fn encode(dtype: Dtype, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size());
    for &v in values {
        match dtype {
            Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            Dtype::F64 => out.extend_from_slice(&v.to_le_bytes()),
            Dtype::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
            Dtype::Bf16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
            Dtype::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            Dtype::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            Dtype::I8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
            Dtype::U8 => out.push(v as u8),
            Dtype::Bool => out.push((v != 0.0) as u8),
        }
    }
    out
}

/// Decodes little-endian elements of `dtype` into values.
pub fn decode(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
    let n = dtype.size();
    bytes
        .chunks_exact(n)
        .map(|c| match dtype {
            Dtype::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
            Dtype::F64 => f64::from_le_bytes(c.try_into().unwrap()),
            Dtype::F16 => f16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            Dtype::Bf16 => bf16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            Dtype::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
            Dtype::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
            Dtype::I8 => c[0] as i8 as f64,
            Dtype::U8 | Dtype::Bool => c[0] as f64,
        })
        .collect()
}

/// Deterministic pseudo-random values in [-1, 1) (integers in [-8, 8)) for `n` elements.
pub fn random(dtype: Dtype, n: usize, seed: u64) -> Vec<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            if dtype.is_float() {
                rng.random_range(-1.0..1.0)
            } else {
                rng.random_range(-8i32..8) as f64
            }
        })
        .collect()
}

/// How far one output is from the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Largest error over the elements (`inf` where one side is NaN or infinite and the other
    /// is not the same).
    pub max_error: f64,
    /// The first element over `tolerance`: (index, got, want).
    pub first_bad: Option<(usize, f64, f64)>,
}

/// Compares two outputs of `dtype` element by element. Equal values (infinities of one sign
/// included) and NaN against NaN count as exact.
pub fn compare(
    dtype: Dtype,
    got: &[u8],
    want: &[u8],
    tolerance: f64,
) -> Result<Difference, String> {
    let (got, want) = (decode(dtype, got), decode(dtype, want));
    if got.len() != want.len() {
        return Err(format!(
            "{} elements, the reference has {}",
            got.len(),
            want.len()
        ));
    }
    let mut d = Difference {
        max_error: 0.0,
        first_bad: None,
    };
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let err = if g == w || (g.is_nan() && w.is_nan()) {
            0.0
        } else {
            let e = (g - w).abs() / (1.0 + w.abs());
            if e.is_nan() { f64::INFINITY } else { e }
        };
        d.max_error = d.max_error.max(err);
        if err > tolerance && d.first_bad.is_none() {
            d.first_bad = Some((i, g, w));
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let v = [1.0, -2.5, 0.0, 3.0];
        for d in Dtype::ALL {
            let back = decode(d, &encode(d, &v));
            assert_eq!(back.len(), 4, "{d}");
            if d.is_float() || d == Dtype::I32 || d == Dtype::I64 {
                assert_eq!(back[0], 1.0, "{d}");
                assert_eq!(back[3], 3.0, "{d}");
            }
        }
        assert_eq!(
            decode(Dtype::Bf16, &encode(Dtype::Bf16, &[-2.5])),
            vec![-2.5]
        );
    }
}
