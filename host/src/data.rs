//! Tensor data on the host side: converting between element bytes of any dtype and `f64`
//! values, for the CLI, the demo and tests. (Devices never convert; they move bytes.)

use half::{bf16, f16};

use crate::tensor::Dtype;

/// Encodes values as little-endian elements of `dtype` (rounding to nearest for the narrow
/// types, saturating for integers; strings: each value's shortest decimal text).
pub fn encode(dtype: Dtype, values: &[f64]) -> Vec<u8> {
    if dtype.is_string() {
        let texts: Vec<String> = values.iter().map(f64::to_string).collect();
        return crate::text::encode(&texts);
    }
    if dtype.is_packed() {
        return packed::encode(dtype, values);
    }
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
            Dtype::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            Dtype::U16 => out.extend_from_slice(&(v as u16).to_le_bytes()),
            Dtype::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            Dtype::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            f8 => out.push(f8::encode(v as f32, f8)),
        }
    }
    out
}

/// Decodes little-endian elements of `dtype` as values (strings: each parsed as a number, NaN when it is not
/// one; a malformed string tensor gives no values).
pub fn decode(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
    if dtype.is_string() {
        // The count is where the offsets end: 8 n + end(n - 1) is the whole buffer.
        let end = |n: usize| u64::from_le_bytes(bytes[8 * n - 8..8 * n].try_into().unwrap());
        let n = (1..=bytes.len() / 8)
            .find(|&n| ((8 * n) as u64).checked_add(end(n)) == Some(bytes.len() as u64));
        let items = n.map_or_else(Vec::new, |n| {
            crate::text::decode(bytes, n).unwrap_or_default()
        });
        return items
            .iter()
            .map(|s| {
                std::str::from_utf8(s)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(f64::NAN)
            })
            .collect();
    }
    if dtype.is_packed() {
        return packed::decode(dtype, bytes);
    }
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
            Dtype::I16 => i16::from_le_bytes(c.try_into().unwrap()) as f64,
            Dtype::U16 => u16::from_le_bytes(c.try_into().unwrap()) as f64,
            Dtype::U32 => u32::from_le_bytes(c.try_into().unwrap()) as f64,
            Dtype::U64 => u64::from_le_bytes(c.try_into().unwrap()) as f64,
            f8 => f8::decode(c[0], f8) as f64,
        })
        .collect()
}

/// The packed sub-byte types (ABI 1.4), for host-side data: integers wrap to their low bits,
/// FLOAT4E2M1 rounds to the nearest even code and saturates (the guest SDK has the twin).
mod packed {
    use crate::tensor::Dtype;

    const F4: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

    fn code(dt: Dtype, v: f64) -> u8 {
        let mask = (1u8 << dt.bits()) - 1;
        if dt != Dtype::F4e2m1 {
            return (v as i64 as u8) & mask;
        }
        if v.is_nan() {
            return 8;
        }
        let a = v.abs().min(6.0);
        let mut best = 0usize;
        for (c, &m) in F4.iter().enumerate().skip(1) {
            let (d, bd) = ((a - m).abs(), (a - F4[best]).abs());
            if d < bd || (d == bd && c % 2 == 0) {
                best = c;
            }
        }
        if v.is_sign_negative() {
            8 | best as u8
        } else {
            best as u8
        }
    }

    fn value(dt: Dtype, c: u8) -> f64 {
        match dt {
            Dtype::I4 => ((c << 4) as i8 >> 4) as f64,
            Dtype::I2 => ((c << 6) as i8 >> 6) as f64,
            Dtype::F4e2m1 => {
                let m = F4[(c & 7) as usize];
                if c & 8 != 0 { -m } else { m }
            }
            _ => c as f64,
        }
    }

    pub fn encode(dt: Dtype, values: &[f64]) -> Vec<u8> {
        let b = dt.bits() as usize;
        let per = 8 / b;
        let mut out = vec![0u8; values.len().div_ceil(per)];
        for (i, &v) in values.iter().enumerate() {
            out[i / per] |= code(dt, v) << ((i % per) * b);
        }
        out
    }

    /// Every code of `bytes` (a packed tensor's last byte may hold unused ones).
    pub fn decode(dt: Dtype, bytes: &[u8]) -> Vec<f64> {
        let b = dt.bits() as usize;
        let mask = (1u8 << b) - 1;
        (0..bytes.len() * 8 / b)
            .map(|i| value(dt, (bytes[i * b / 8] >> ((i * b) % 8)) & mask))
            .collect()
    }
}

/// The ONNX 8-bit floats, for host-side data (the SDK has the guest-side twin: the host does
/// not depend on the guest SDK).
mod f8 {
    use crate::tensor::Dtype;

    /// Decodes one element (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0).
    pub fn decode(bits: u8, dt: Dtype) -> f32 {
        if dt == Dtype::F8e8m0 {
            return if bits == 0xff {
                f32::NAN
            } else {
                2f32.powi(bits as i32 - 127)
            };
        }
        let (e_bits, bias, fnuz) = match dt {
            Dtype::F8e4m3fn => (4, 7, false),
            Dtype::F8e4m3fnuz => (4, 8, true),
            Dtype::F8e5m2 => (5, 15, false),
            _ => (5, 16, true),
        };
        let m_bits = 7 - e_bits;
        if fnuz && bits == 0x80 {
            return f32::NAN;
        }
        let sign = if bits & 0x80 != 0 { -1.0f32 } else { 1.0 };
        let e = ((bits >> m_bits) & ((1 << e_bits) - 1)) as i32;
        let f = (bits & ((1 << m_bits) - 1)) as u32;
        let e_max = (1 << e_bits) - 1;
        if !fnuz && e == e_max && (e_bits == 5 || f == (1 << m_bits) - 1) {
            return if e_bits == 5 && f == 0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            };
        }
        let frac = f as f32 / (1u32 << m_bits) as f32;
        if e == 0 {
            sign * frac * 2f32.powi(1 - bias)
        } else {
            sign * (1.0 + frac) * 2f32.powi(e - bias)
        }
    }

    /// The nearest finite code (saturating; NaN stays NaN): exact, by search.
    pub fn encode(v: f32, dt: Dtype) -> u8 {
        if v.is_nan() {
            return match dt {
                Dtype::F8e8m0 => 0xff,
                Dtype::F8e4m3fnuz | Dtype::F8e5m2fnuz => 0x80,
                _ => 0x7f,
            };
        }
        (0u8..=255)
            .filter(|&c| decode(c, dt).is_finite())
            .min_by(|&a, &b| {
                let (da, db) = ((decode(a, dt) - v).abs(), (decode(b, dt) - v).abs());
                da.total_cmp(&db).then((a & 1).cmp(&(b & 1)))
            })
            .unwrap_or(0)
    }
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
        assert_eq!(decode(Dtype::Str, &encode(Dtype::Str, &v)), v);
        for d in Dtype::ALL.into_iter().filter(|d| !d.is_string()) {
            let back = decode(d, &encode(d, &v));
            assert_eq!(back.len(), 4, "{d}");
            if d.is_float() || d == Dtype::I32 || d == Dtype::I64 {
                assert_eq!(back[0], 1.0, "{d}");
                // E8M0 holds powers of two only: 3 rounds to 2 or 4.
                if d != Dtype::F8e8m0 {
                    assert_eq!(back[3], 3.0, "{d}");
                }
            }
        }
        assert_eq!(
            decode(Dtype::Bf16, &encode(Dtype::Bf16, &[-2.5])),
            vec![-2.5]
        );
    }
}
