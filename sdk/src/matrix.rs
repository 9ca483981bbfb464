//! (ABI 1.8) The CPU device's matrix unit from a kernel: [`multiply_f32`] hands an f32 product
//! of matrices in the kernel's memory to the host, which computes it natively (AVX-512, AVX2
//! and FMA…: several times what WebAssembly's 128-bit SIMD reaches, [`crate::gemm`]), split
//! into calls within the host's per-call limits. Outside a component (native unit tests) each
//! call runs on [`crate::gemm`] under the same limits, so a kernel has one code path.

use crate::OpError;
use crate::gemm::Strided;

/// Most multiply-adds of one host call (the WIT's `multiply-f32` limits).
pub const MAX_MULTIPLY_ADDS: u64 = 1 << 32;
/// Most results of one host call, and most elements an operand spans from its offset.
pub const MAX_ELEMENTS: u64 = 1 << 24;

/// Elements `offset..` of `data` spanned by a `rows × cols` view with strides `rs`, `cs`
/// (saturating: a span over the limits is never sent).
fn span(v: &Strided<f32>, rows: usize, cols: usize) -> u64 {
    if rows == 0 || cols == 0 {
        return 0;
    }
    let step = |n: usize, s: usize| {
        if n > 1 {
            (n as u64 - 1).saturating_mul(s as u64)
        } else {
            0
        }
    };
    step(rows, v.rs)
        .saturating_add(step(cols, v.cs))
        .saturating_add(1)
}

/// Whether a `rows × depth` by `depth × cols` product of views `a` and `b` is within one
/// call's limits (most elements per operand span and result, most multiply-adds).
fn within(
    (max_elements, max_macs): (u64, u64),
    a: &Strided<f32>,
    b: &Strided<f32>,
    (rows, cols, depth): (usize, usize, usize),
) -> bool {
    let results = (rows as u64).saturating_mul(cols as u64);
    span(a, rows, depth) <= max_elements
        && span(b, depth, cols) <= max_elements
        && results <= max_elements
        && results.saturating_mul(depth as u64) <= max_macs
}

/// The view from element `(r0, c0)` of `v` on.
fn at<'a>(v: &Strided<'a, f32>, r0: usize, c0: usize) -> Strided<'a, f32> {
    let skip = if r0 > 0 { r0 * v.rs } else { 0 } + if c0 > 0 { c0 * v.cs } else { 0 };
    Strided {
        data: &v.data[skip.min(v.data.len())..],
        ..*v
    }
}

/// `a · b` for `a` of `m × k` and `b` of `k × n` (element `(i, j)` of a view at
/// `data[i * rs + j * cs]`): `m × n` f32s, row-major. Sums are f32 in an order the host picks.
/// A product beyond one call's limits is split by rows, columns and depth (partial sums
/// added here).
pub fn multiply_f32(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<f32>,
    b: Strided<f32>,
) -> Result<Vec<f32>, OpError> {
    split((MAX_ELEMENTS, MAX_MULTIPLY_ADDS), (m, n, k), a, b)
}

/// [`multiply_f32`] in calls of at most `max_elements` per operand span and result, and
/// `max_macs` multiply-adds.
fn split(
    (max_elements, max_macs): (u64, u64),
    (m, n, k): (usize, usize, usize),
    a: Strided<f32>,
    b: Strided<f32>,
) -> Result<Vec<f32>, OpError> {
    let results = m
        .checked_mul(n)
        .filter(|&r| {
            [m, n, k].iter().all(|&d| d <= u32::MAX as usize) && r <= isize::MAX as usize / 4
        })
        .ok_or_else(|| {
            OpError::internal(format!("a {m} × {k} by {k} × {n} product is too large"))
        })?;
    if results == 0 || k == 0 {
        return Ok(vec![0f32; results]);
    }
    let fits = |rows, cols, depth| within((max_elements, max_macs), &a, &b, (rows, cols, depth));
    if fits(m, n, k) {
        return call(m, n, k, a, b);
    }
    // depth first (one element's sum must fit), then columns, then rows
    let mut kc = k;
    while kc > 1 && !fits(1, 1, kc) {
        kc = kc.div_ceil(2);
    }
    let mut cn = n;
    while cn > 1 && !fits(1, cn, kc) {
        cn = cn.div_ceil(2);
    }
    let mut rn = m;
    while rn > 1 && !fits(rn, cn, kc) {
        rn = rn.div_ceil(2);
    }
    let mut c = vec![0f32; results];
    for r0 in (0..m).step_by(rn) {
        let rows = rn.min(m - r0);
        for c0 in (0..n).step_by(cn) {
            let cols = cn.min(n - c0);
            for k0 in (0..k).step_by(kc) {
                let depth = kc.min(k - k0);
                let part = call(rows, cols, depth, at(&a, r0, k0), at(&b, k0, c0))?;
                for (i, row) in part.chunks_exact(cols).enumerate() {
                    let out = &mut c[(r0 + i) * n + c0..][..cols];
                    if k0 == 0 {
                        out.copy_from_slice(row);
                    } else {
                        out.iter_mut().zip(row).for_each(|(o, v)| *o += v);
                    }
                }
            }
        }
    }
    Ok(c)
}

/// One host call (a product within its limits).
#[cfg(target_arch = "wasm32")]
fn call(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<f32>,
    b: Strided<f32>,
) -> Result<Vec<f32>, OpError> {
    use crate::bindings::umd::plugin::matrix::{self, MatrixView};
    fn wit(v: Strided<'_, f32>) -> MatrixView<'_> {
        MatrixView {
            data: bytemuck::cast_slice(v.data),
            offset: 0,
            row_stride: v.rs as u64,
            col_stride: v.cs as u64,
        }
    }
    let c = matrix::multiply_f32(m as u32, n as u32, k as u32, wit(a), wit(b))
        .map_err(|e| OpError::internal(format!("the matrix unit refused {m}×{k}·{k}×{n}: {e}")))?;
    if c.len() != m * n {
        return Err(OpError::internal(format!(
            "the matrix unit returned {} elements for {m}×{n}",
            c.len()
        )));
    }
    Ok(c)
}

/// Outside a component: the SDK's own GEMM, refusing what the host would refuse.
#[cfg(not(target_arch = "wasm32"))]
fn call(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<f32>,
    b: Strided<f32>,
) -> Result<Vec<f32>, OpError> {
    use crate::gemm::{self, PackedB};
    let over = !within((MAX_ELEMENTS, MAX_MULTIPLY_ADDS), &a, &b, (m, n, k));
    if over || span(&a, m, k) > a.data.len() as u64 || span(&b, k, n) > b.data.len() as u64 {
        return Err(OpError::internal(format!(
            "the matrix unit refuses {m}×{k}·{k}×{n}"
        )));
    }
    let mut apack = Vec::new();
    gemm::pack_a(m, k, a, &mut apack);
    let pb = PackedB::pack(k, 0..n, b)
        .ok_or_else(|| OpError::internal("the packed operand does not fit memory"))?;
    let mut c = Vec::new();
    gemm::multiply(m, &apack, &pb, 0..n, &mut c);
    Ok(c)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn a_product_split_to_fit_the_limits_equals_the_whole() {
        let (m, n, k) = (13, 29, 7);
        // A transposed (column-major, from element 2), B row-major with padded rows; small
        // integers and quarters: sums exact in any order, so every split gives the same bits
        let ad: Vec<f32> = (0..2 + m * k)
            .map(|i| (i % 13) as f32 * 0.25 - 1.0)
            .collect();
        let bd: Vec<f32> = (0..k * (n + 5)).map(|i| (i % 7) as f32 - 3.0).collect();
        let a = Strided {
            data: &ad[2..],
            rs: 1,
            cs: m,
        };
        let b = Strided {
            data: &bd,
            rs: n + 5,
            cs: 1,
        };
        let whole = multiply_f32(m, n, k, a, b).unwrap();
        for (i, row) in whole.chunks_exact(n).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let want: f32 = (0..k)
                    .map(|p| ad[2 + i + p * m] * bd[p * (n + 5) + j])
                    .sum();
                assert_eq!(v, want, "({i}, {j})");
            }
        }
        // spans, results and work over the limits: split by rows, columns and depth
        for limits in [
            (64, 1 << 20),
            (1 << 20, 200),
            (40, 150),
            (30, 3),
            (8, 1 << 20),
        ] {
            assert_eq!(split(limits, (m, n, k), a, b).unwrap(), whole, "{limits:?}");
        }
        assert_eq!(multiply_f32(0, 3, 2, a, b).unwrap(), Vec::<f32>::new());
        assert_eq!(multiply_f32(2, 3, 0, a, b).unwrap(), vec![0.0; 6]);
        // a view reaching past its elements is refused, not read
        assert!(multiply_f32(m, n + 6, k, a, b).is_err());
    }
}
