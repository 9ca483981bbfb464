//! (ABI 1.8) The CPU device's matrix unit from a kernel: [`multiply_f32`] hands an f32 product
//! to the host, which computes it natively (AVX-512, AVX2 and FMA…: several times what
//! WebAssembly's 128-bit SIMD reaches, [`crate::gemm`]), split into calls within the host's
//! per-call limits. Outside a component (native unit tests) the same product runs on
//! [`crate::gemm`], so a kernel has one code path.

use crate::OpError;

/// Most multiply-adds, results, and elements an operand spans, in one host call (the WIT's
/// `multiply-f32` limits).
const MAX_MULTIPLY_ADDS: u64 = 1 << 32;
const MAX_ELEMENTS: u64 = 1 << 24;

/// Where an operand's elements are.
#[derive(Debug, Clone, Copy)]
pub enum Elements<'a> {
    /// In the kernel's memory.
    Inline(&'a [f32]),
    /// In the buffer bound to the running launch as this binding (in place, little-endian).
    Bound(u32),
}

/// Element `(i, j)` is element `offset + i * rs + j * cs` of `data`.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub data: Elements<'a>,
    pub offset: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> From<crate::gemm::Strided<'a, f32>> for View<'a> {
    fn from(s: crate::gemm::Strided<'a, f32>) -> Self {
        View {
            data: Elements::Inline(s.data),
            offset: 0,
            rs: s.rs,
            cs: s.cs,
        }
    }
}

impl<'a> View<'a> {
    /// A row-major matrix in memory, rows `rs` apart.
    pub fn rows(data: &'a [f32], rs: usize) -> Self {
        View {
            data: Elements::Inline(data),
            offset: 0,
            rs,
            cs: 1,
        }
    }

    /// The view of rows `r0..` and columns `c0..` of this one.
    fn at(self, r0: usize, c0: usize) -> Self {
        View {
            offset: self.offset + r0 * self.rs + c0 * self.cs,
            ..self
        }
    }

    /// Elements a `rows × cols` view spans from its offset.
    fn span(&self, rows: usize, cols: usize) -> u64 {
        if rows == 0 || cols == 0 {
            return 0;
        }
        ((rows - 1) as u64)
            .saturating_mul(self.rs as u64)
            .saturating_add(((cols - 1) as u64).saturating_mul(self.cs as u64))
            .saturating_add(1)
    }
}

/// `a · b` for `a` of `m × k` and `b` of `k × n`: `m × n` f32s, row-major. Sums are f32 in an
/// order the host picks. A product beyond one call's limits is split by rows and columns.
pub fn multiply_f32(m: usize, n: usize, k: usize, a: View, b: View) -> Result<Vec<f32>, OpError> {
    split((MAX_ELEMENTS, MAX_MULTIPLY_ADDS), (m, n, k), a, b)
}

/// [`multiply_f32`] in calls of at most `max_elements` per operand span and result and
/// `max_macs` multiply-adds.
fn split(
    (max_elements, max_macs): (u64, u64),
    (m, n, k): (usize, usize, usize),
    a: View,
    b: View,
) -> Result<Vec<f32>, OpError> {
    let mut c = vec![0f32; m * n];
    if m == 0 || n == 0 || k == 0 {
        return Ok(c);
    }
    // columns per call: B's span and one row of results fit
    let mut cn = n;
    while cn > 1 && (b.span(k, cn) > max_elements || cn as u64 * k as u64 > max_macs) {
        cn = cn.div_ceil(2);
    }
    // rows per call: A's span, the results and the work fit
    let mut rn = m;
    while rn > 1
        && (a.span(rn, k) > max_elements
            || (rn * cn) as u64 > max_elements
            || (rn * cn) as u64 * k as u64 > max_macs)
    {
        rn = rn.div_ceil(2);
    }
    for r0 in (0..m).step_by(rn) {
        let rows = rn.min(m - r0);
        for c0 in (0..n).step_by(cn) {
            let cols = cn.min(n - c0);
            let part = call(rows, cols, k, a.at(r0, 0), b.at(0, c0))?;
            for (i, row) in part.chunks_exact(cols).enumerate() {
                c[(r0 + i) * n + c0..][..cols].copy_from_slice(row);
            }
        }
    }
    Ok(c)
}

/// One host call (a product within its limits; one row or column over them is refused by the
/// host with its reason).
#[cfg(target_arch = "wasm32")]
fn call(m: usize, n: usize, k: usize, a: View, b: View) -> Result<Vec<f32>, OpError> {
    use crate::bindings::umd::plugin::matrix;
    let (wa, wb) = (wit_view(a), wit_view(b));
    let c = matrix::multiply_f32(m as u32, n as u32, k as u32, wa, wb)
        .map_err(|e| OpError::internal(format!("the matrix unit refused {m}×{k}·{k}×{n}: {e}")))?;
    if c.len() != m * n {
        return Err(OpError::internal(format!(
            "the matrix unit returned {} elements for {m}×{n}",
            c.len()
        )));
    }
    Ok(c)
}

/// The WIT form of a view: inline elements as their little-endian bytes, in place.
#[cfg(target_arch = "wasm32")]
fn wit_view(v: View<'_>) -> crate::bindings::umd::plugin::matrix::MatrixView<'_> {
    use crate::bindings::umd::plugin::matrix::{Elements as E, MatrixView};
    MatrixView {
        data: match v.data {
            Elements::Inline(d) => E::Inline(bytemuck::cast_slice(d)),
            Elements::Bound(b) => E::Bound(b),
        },
        offset: v.offset as u64,
        row_stride: v.rs as u64,
        col_stride: v.cs as u64,
    }
}

/// Outside a component: the SDK's own GEMM on operands in memory.
#[cfg(not(target_arch = "wasm32"))]
fn call(m: usize, n: usize, k: usize, a: View, b: View) -> Result<Vec<f32>, OpError> {
    use crate::gemm::{self, PackedB, Strided};
    let (Elements::Inline(ad), Elements::Inline(bd)) = (a.data, b.data) else {
        return Err(OpError::internal(
            "a bound operand needs the host's matrix unit (inside a component)",
        ));
    };
    let mut apack = Vec::new();
    gemm::pack_a(
        m,
        k,
        Strided {
            data: &ad[a.offset..],
            rs: a.rs,
            cs: a.cs,
        },
        &mut apack,
    );
    let pb = PackedB::pack(
        k,
        0..n,
        Strided {
            data: &bd[b.offset..],
            rs: b.rs,
            cs: b.cs,
        },
    )
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
        // A transposed (column-major, offset 2), B row-major with padded rows
        let ad: Vec<f32> = (0..2 + m * k)
            .map(|i| (i % 13) as f32 * 0.25 - 1.0)
            .collect();
        let bd: Vec<f32> = (0..k * (n + 5)).map(|i| (i % 7) as f32 - 3.0).collect();
        let a = View {
            data: Elements::Inline(&ad),
            offset: 2,
            rs: 1,
            cs: m,
        };
        let b = View {
            data: Elements::Inline(&bd),
            offset: 0,
            rs: n + 5,
            cs: 1,
        };
        let whole = multiply_f32(m, n, k, a, b).unwrap();
        for (i, row) in whole.chunks_exact(n).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let want: f32 = (0..k)
                    .map(|p| ad[2 + i + p * m] * bd[p * (n + 5) + j])
                    .sum();
                assert!((v - want).abs() <= 1e-5, "({i}, {j}): {v} vs {want}");
            }
        }
        // results, spans and work over the limits: split by rows and by columns
        for limits in [(64, 1 << 20), (1 << 20, 200), (40, 150)] {
            assert_eq!(split(limits, (m, n, k), a, b).unwrap(), whole, "{limits:?}");
        }
        assert_eq!(multiply_f32(0, 3, 2, a, b).unwrap(), Vec::<f32>::new());
        assert_eq!(multiply_f32(2, 3, 0, a, b).unwrap(), vec![0.0; 6]);
        // a bound operand needs the host
        let bound = View {
            data: Elements::Bound(0),
            ..a
        };
        assert!(multiply_f32(2, 2, 2, bound, b).is_err());
    }
}
