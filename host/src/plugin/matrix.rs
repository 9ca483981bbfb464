//! (ABI 1.8) The CPU device's matrix unit: the `matrix` import, f32 matrix products computed
//! natively (the `matrixmultiply` crate: AVX-512 / AVX2+FMA / NEON kernels picked at run time)
//! for a plugin's CPU kernel — the CPU counterpart of a GPU's tensor cores. WebAssembly's
//! 128-bit SIMD keeps a plugin's own GEMM near 12 G multiply-adds/s per core; this one runs at
//! the core's native rate.
//!
//! Operands come with the call (little-endian f32 bytes) or name a buffer bound to the running
//! launch (through [`super::kernel_io`]'s checks: binding, read access, range). Everything is
//! validated before any memory is read; the work of one call is bounded
//! ([`MAX_MULTIPLY_ADDS`]) because a host call cannot be interrupted by the plugin's deadline.
//! Owns no buffer and touches no device state: a product is returned to the kernel, which
//! writes it (so a split launch's blocks still write only their own bytes).

use std::cell::RefCell;

use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, Linker, WasmList};

use super::kernel_io::{KernelIo, MAX_READ_BYTES};
use super::sandbox::StoreState;

/// Most multiply-adds one call may ask for (~50 ms on one core at 85 G/s): a kernel splits a
/// larger product into several calls, between which its deadline is checked.
pub const MAX_MULTIPLY_ADDS: u64 = 1 << 32;
/// Most elements of one operand's span or of a product (64 MiB of f32, as for a read).
pub const MAX_ELEMENTS: u64 = MAX_READ_BYTES as u64 / 4;

/// Where a matrix's elements are (WIT `elements`).
#[derive(ComponentType, Lift)]
#[component(variant)]
pub enum Elements {
    #[component(name = "inline")]
    Inline(WasmList<u8>),
    #[component(name = "bound")]
    Bound(u32),
}

/// A strided view of a matrix (WIT `matrix-view`): element `(i, j)` is element
/// `offset + i * row_stride + j * col_stride` of `data`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct MatrixView {
    pub data: Elements,
    pub offset: u64,
    #[component(name = "row-stride")]
    pub row_stride: u64,
    #[component(name = "col-stride")]
    pub col_stride: u64,
}

/// Defines `umd:plugin/matrix` in `linker` (semver-compatible: any 1.x ≥ 1.8 import binds).
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("umd:plugin/matrix@1.8.0")?;
    inst.func_wrap(
        "multiply-f32",
        |store: StoreContextMut<'_, StoreState>,
         (m, n, k, a, b): (u32, u32, u32, MatrixView, MatrixView)|
         -> wasmtime::Result<(Result<Vec<f32>, String>,)> {
            let io = store.data().io.clone();
            let shape = Shape { m, n, k };
            let result = operand(&store, &io, &a, "A", m, k).and_then(|a| {
                let b = operand(&store, &io, &b, "B", k, n)?;
                shape.multiply(&a, &b)
            });
            Ok((result,))
        },
    )?;
    Ok(())
}

/// A product's extents: `A` is `m × k`, `B` is `k × n`.
#[derive(Debug, Clone, Copy)]
struct Shape {
    m: u32,
    n: u32,
    k: u32,
}

/// One operand ready to multiply: its elements (borrowed from the instance or copied out of a
/// bound buffer) and where element `(0, 0)` is, with its strides.
struct Operand<'a> {
    data: Data<'a>,
    offset: usize,
    rs: usize,
    cs: usize,
}

enum Data<'a> {
    Bytes(&'a [u8]),
    /// Copied out of a bound buffer into this thread's scratch (the first for A, the second
    /// for B).
    Scratch,
}

thread_local! {
    /// Per worker thread: A's and B's elements read from bound buffers, and both operands as
    /// aligned f32s (reused: a multi-MiB allocation per call would be faulted in every time).
    static SCRATCH: RefCell<[Vec<f32>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// The number of elements a view of `rows × cols` spans from its offset (0 when empty), or
/// why it is refused.
fn span(v: &MatrixView, which: &str, rows: u32, cols: u32) -> Result<u64, String> {
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    let last = (rows as u64 - 1)
        .checked_mul(v.row_stride)
        .and_then(|r| (cols as u64 - 1).checked_mul(v.col_stride)?.checked_add(r))
        .and_then(|e| e.checked_add(1))
        .filter(|&s| s <= MAX_ELEMENTS)
        .ok_or_else(|| {
            format!(
                "{which} ({rows} × {cols}, strides {} and {}) spans more than {MAX_ELEMENTS} elements",
                v.row_stride, v.col_stride
            )
        })?;
    Ok(last)
}

/// Checks `v` as a `rows × cols` operand and makes its elements available.
fn operand<'a>(
    store: &'a StoreContextMut<'_, StoreState>,
    io: &KernelIo,
    v: &MatrixView,
    which: &str,
    rows: u32,
    cols: u32,
) -> Result<Operand<'a>, String> {
    let span = span(v, which, rows, cols)?;
    let end = v
        .offset
        .checked_add(span)
        .ok_or_else(|| format!("{which}'s offset {} overflows", v.offset))?;
    let view = |data| Operand {
        data,
        offset: v.offset as usize,
        rs: v.row_stride as usize,
        cs: v.col_stride as usize,
    };
    match &v.data {
        Elements::Inline(list) => {
            let bytes = list.as_le_slice(store);
            if bytes.len() % 4 != 0 || end > (bytes.len() / 4) as u64 {
                return Err(format!(
                    "{which} needs elements up to {end} but {} bytes were passed",
                    bytes.len()
                ));
            }
            Ok(view(Data::Bytes(bytes)))
        }
        Elements::Bound(binding) => {
            // The covering range, read through kernel-io's checks (binding, access, range).
            let len = (span * 4) as u32;
            let bytes = super::kernel_io::read(io, *binding, v.offset.saturating_mul(4), len)
                .map_err(|e| format!("{which}: {e}"))?;
            let slot = usize::from(which != "A");
            SCRATCH.with_borrow_mut(|s| {
                let dst = &mut s[slot];
                dst.clear();
                dst.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
            });
            Ok(Operand {
                data: Data::Scratch,
                offset: 0,
                rs: v.row_stride as usize,
                cs: v.col_stride as usize,
            })
        }
    }
}

impl Shape {
    /// `A · B`, row-major `m × n`, after checking the work fits one call.
    fn multiply(self, a: &Operand, b: &Operand) -> Result<Vec<f32>, String> {
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        let macs = self.m as u64 * self.n as u64 * self.k as u64;
        if macs > MAX_MULTIPLY_ADDS || (m * n) as u64 > MAX_ELEMENTS {
            return Err(format!(
                "a {m} × {k} by {k} × {n} product is over one call's limit ({MAX_MULTIPLY_ADDS} multiply-adds, {MAX_ELEMENTS} results): split it"
            ));
        }
        let mut c = vec![0f32; m * n];
        if m == 0 || n == 0 || k == 0 {
            return Ok(c);
        }
        SCRATCH.with_borrow_mut(|s| {
            let [sa, sb] = &mut *s;
            let a_el = elements(a, sa);
            let b_el = elements(b, sb);
            product(
                (m, n, k),
                Strided::new(a_el, a.offset, a.rs, a.cs, m, k),
                Strided::new(b_el, b.offset, b.rs, b.cs, k, n),
                &mut c,
            );
        });
        Ok(c)
    }
}

/// An operand's elements as aligned f32s: bytes passed with the call are reinterpreted in
/// place when aligned, else copied into `scratch`.
fn elements<'s>(op: &'s Operand, scratch: &'s mut Vec<f32>) -> &'s [f32] {
    match op.data {
        Data::Scratch => scratch,
        Data::Bytes(bytes) => match bytemuck::try_cast_slice(bytes) {
            Ok(f) if cfg!(target_endian = "little") => f,
            _ => {
                scratch.clear();
                scratch.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
                scratch
            }
        },
    }
}

/// A checked strided matrix: every element `(i, j)` with `i < rows`, `j < cols` is in `data`.
struct Strided<'a> {
    data: &'a [f32],
    rs: usize,
    cs: usize,
}

impl<'a> Strided<'a> {
    /// # Panics
    /// When the view reaches outside `data` (the callers checked it: a bug).
    fn new(data: &'a [f32], offset: usize, rs: usize, cs: usize, rows: usize, cols: usize) -> Self {
        let last = offset + (rows - 1) * rs + (cols - 1) * cs;
        assert!(last < data.len(), "matrix view outside its elements");
        Strided {
            data: &data[offset..],
            rs,
            cs,
        }
    }
}

/// `c` (row-major `m × n`, overwritten) = `a · b`.
fn product((m, n, k): (usize, usize, usize), a: Strided, b: Strided, c: &mut [f32]) {
    assert_eq!(c.len(), m * n);
    let stride = |s: usize| isize::try_from(s).expect("a stride within MAX_ELEMENTS");
    // SAFETY: `Strided::new` checked that every element (i, j), i < m, j < k of `a` and
    // i < k, j < n of `b` lies inside its slice; `c` holds exactly m × n elements written at
    // (i * n + j); strides are below MAX_ELEMENTS, so no offset overflows; beta = 0, so `c`'s
    // previous contents are not read; the slices outlive the call and `c` aliases neither.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            stride(a.rs),
            stride(a.cs),
            b.data.as_ptr(),
            stride(b.rs),
            stride(b.cs),
            0.0,
            c.as_mut_ptr(),
            stride(n),
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive reference product.
    fn naive(m: usize, n: usize, k: usize, a: &Strided, b: &Strided) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0f64;
                for p in 0..k {
                    s += a.data[i * a.rs + p * a.cs] as f64 * b.data[p * b.rs + j * b.cs] as f64;
                }
                c[i * n + j] = s as f32;
            }
        }
        c
    }

    #[test]
    fn strided_products_match_a_naive_one() {
        // A transposed (column-major) with an offset, B row-major with a padded row stride,
        // extents that are not multiples of any kernel's tile.
        let (m, n, k) = (13, 29, 37);
        let a_data: Vec<f32> = (0..3 + m * k).map(|i| (i % 17) as f32 - 8.0).collect();
        let b_data: Vec<f32> = (0..k * (n + 3)).map(|i| (i % 11) as f32 * 0.5).collect();
        let a = Strided::new(&a_data, 3, 1, m, m, k);
        let b = Strided::new(&b_data, 0, n + 3, 1, k, n);
        let mut c = vec![f32::NAN; m * n];
        product(
            (m, n, k),
            Strided::new(&a_data, 3, 1, m, m, k),
            Strided::new(&b_data, 0, n + 3, 1, k, n),
            &mut c,
        );
        assert_eq!(c, naive(m, n, k, &a, &b), "small integers: exact in f32");
    }

    #[test]
    fn spans_are_checked_without_overflow() {
        let view = |rs, cs| MatrixView {
            data: Elements::Bound(0),
            offset: 0,
            row_stride: rs,
            col_stride: cs,
        };
        assert_eq!(span(&view(10, 1), "A", 3, 10).unwrap(), 30);
        assert_eq!(span(&view(1, 3), "A", 3, 2).unwrap(), 6);
        assert_eq!(span(&view(5, 5), "A", 0, 7).unwrap(), 0);
        assert!(
            span(&view(u64::MAX, 1), "A", 3, 1)
                .unwrap_err()
                .contains("spans more")
        );
        assert!(span(&view(1, MAX_ELEMENTS), "B", 1, 2).is_err());
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn a_view_outside_its_elements_is_a_bug_caught_before_the_product() {
        Strided::new(&[0.0; 8], 1, 4, 1, 2, 4);
    }
}
