//! (ABI 1.8) The CPU device's matrix unit: the `matrix` import, f32 matrix products computed
//! natively (the `matrixmultiply` crate: AVX-512 / AVX2+FMA / NEON kernels picked at run time)
//! for a plugin's CPU kernel — the CPU counterpart of a GPU's tensor cores. WebAssembly's
//! 128-bit SIMD keeps a plugin's own GEMM near 12 G multiply-adds/s per core; this one runs at
//! the core's native rate.
//!
//! The operands are views of the kernel's memory, or (1.9, `multiply`) of a buffer bound to
//! the launch being run (readable by it, held under the buffer's read lock for the call), read
//! in place. Both views and the call's
//! work are checked before anything is read: the span of each view against its elements, the
//! results and multiply-adds against one call's limits (a host call cannot be interrupted by
//! the plugin's deadline, so its time is bounded by its work). A bound operand in a frozen
//! buffer (a compiled model's weights) against few rows of the other is multiplied from a copy
//! packed once ([`packing`], [`super::packed`]: its own kernels and bounded cache), whose size
//! is bounded like a view's span. Owns no buffer and touches no
//! device state: the product goes back to the kernel, which writes it (so a split launch's
//! blocks still write only their own bytes).

use std::cell::RefCell;

use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, Linker, WasmList};

use super::kernel_io::{self, KernelIo};
use super::packed::{self, Isa, Key, Mat, Packed};
use super::sandbox::StoreState;

/// Most multiply-adds one call may ask for (~50 ms on one core at 85 G/s): a kernel splits a
/// larger product into several calls, between which its deadline is checked.
pub const MAX_MULTIPLY_ADDS: u64 = 1 << 32;
/// Most elements an operand spans from its offset, and most results, of one call.
pub const MAX_ELEMENTS: u64 = 1 << 24;
/// Copies of misaligned operands above this many elements are not kept for the next call.
const KEEP_SCRATCH: usize = 1 << 20;
/// Most rows (or columns) of the other operand a frozen operand multiplies as a packed copy
/// ([`packed`]); past this, packing it per call costs little against the product, and
/// `matrixmultiply` runs larger products faster.
const PACKED_MAX_OTHER: usize = 256;

/// A strided view of a matrix of little-endian f32s (WIT `matrix-view`): element `(i, j)` is
/// element `offset + i * row_stride + j * col_stride` of `data`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct MatrixView {
    pub data: WasmList<u8>,
    pub offset: u64,
    #[component(name = "row-stride")]
    pub row_stride: u64,
    #[component(name = "col-stride")]
    pub col_stride: u64,
}

/// (1.9) A strided view of a matrix of little-endian f32s in a buffer bound to the running
/// launch (WIT `bound-view`), read in place.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct BoundView {
    pub binding: u32,
    pub offset: u64,
    #[component(name = "row-stride")]
    pub row_stride: u64,
    #[component(name = "col-stride")]
    pub col_stride: u64,
}

/// (1.9) Where an operand of `multiply` is (WIT `operand`).
#[derive(ComponentType, Lift)]
#[component(variant)]
pub enum Operand {
    #[component(name = "memory")]
    Memory(MatrixView),
    #[component(name = "bound")]
    Bound(BoundView),
}

/// Calls `f` with `op` checked as a `rows × cols` operand: a view of the kernel's memory, or
/// of a buffer bound to the launch (held for the call, never copied when aligned).
fn with_operand(
    store: &StoreContextMut<'_, StoreState>,
    op: &Operand,
    which: &str,
    (rows, cols): (usize, usize),
    f: &mut dyn FnMut(&View) -> Result<Vec<f32>, String>,
) -> Result<Vec<f32>, String> {
    match op {
        Operand::Memory(v) => {
            let bytes = v.data.as_le_slice(store);
            let view = View::check(
                bytes,
                (v.offset, v.row_stride, v.col_stride),
                which,
                rows,
                cols,
            )?;
            f(&view)
        }
        Operand::Bound(v) => with_bound(&store.data().io, v, which, (rows, cols), f),
    }
}

/// [`with_operand`] for a view of a buffer bound to the launch `io` runs: the view is checked
/// against the binding's size first, then only its span is read (held for the call).
fn with_bound(
    io: &KernelIo,
    v: &BoundView,
    which: &str,
    (rows, cols): (usize, usize),
    f: &mut dyn FnMut(&View) -> Result<Vec<f32>, String>,
) -> Result<Vec<f32>, String> {
    let b = kernel_io::readable(io, v.binding)?;
    let layout = (v.offset, v.row_stride, v.col_stride);
    let (first, span, rs, cs) = View::extent(layout, which, rows, cols, b.size / 4)
        .map_err(|e| format!("{e} (binding {})", v.binding))?;
    // within the binding, which lies inside its buffer: both fit usize
    let (at, len) = ((first * 4) as usize, (span * 4) as usize);
    let mut result = None;
    b.memory.with_bytes(at, len, &mut |bytes| {
        result = Some(f(&View { bytes, rs, cs }));
    });
    result.unwrap_or_else(|| Err(format!("binding {} was not read", v.binding)))
}

/// Defines `umd:plugin/matrix` in `linker` (semver-compatible: any 1.x ≥ 1.8 import binds;
/// 1.8 plugins import `multiply-f32`, 1.9 ones `multiply` too).
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("umd:plugin/matrix@1.10.0")?;
    inst.func_wrap(
        "multiply",
        |store: StoreContextMut<'_, StoreState>,
         (m, n, k, a, b): (u32, u32, u32, Operand, Operand)|
         -> wasmtime::Result<(Result<Vec<f32>, String>,)> {
            let shape = Shape {
                m: m as usize,
                n: n as usize,
                k: k as usize,
            };
            let bound = |op: &Operand| match op {
                Operand::Bound(v) => Some((v.binding, v.offset, v.row_stride, v.col_stride)),
                Operand::Memory(_) => None,
            };
            let packing = packing(&store.data().io, (bound(&a), bound(&b)), shape);
            let result = with_operand(&store, &a, "A", (shape.m, shape.k), &mut |va| {
                with_operand(&store, &b, "B", (shape.k, shape.n), &mut |vb| {
                    shape.multiply(va, vb, packing)
                })
            });
            Ok((result,))
        },
    )?;
    inst.func_wrap(
        "multiply-f32",
        |store: StoreContextMut<'_, StoreState>,
         (m, n, k, a, b): (u32, u32, u32, MatrixView, MatrixView)|
         -> wasmtime::Result<(Result<Vec<f32>, String>,)> {
            let (ab, bb) = (a.data.as_le_slice(&store), b.data.as_le_slice(&store));
            let shape = Shape {
                m: m as usize,
                n: n as usize,
                k: k as usize,
            };
            let layout = |v: &MatrixView| (v.offset, v.row_stride, v.col_stride);
            let result = View::check(ab, layout(&a), "A", shape.m, shape.k).and_then(|va| {
                let vb = View::check(bb, layout(&b), "B", shape.k, shape.n)?;
                shape.multiply(&va, &vb, None)
            });
            Ok((result,))
        },
    )?;
    Ok(())
}

/// A bound operand's binding, offset, row and column strides.
type BoundAt = (u32, u64, u64, u64);

/// (1.9) How a product multiplies a frozen operand (a compiled model's weights) as a packed
/// copy kept between calls ([`packed`]): `B` as it is, or `A` through `Cᵀ = Bᵀ · Aᵀ`; the
/// copies of one buffer kept within `budget` bytes.
#[derive(Debug, Clone, Copy)]
struct Packing {
    transposed: bool,
    key: Key,
    budget: usize,
}

/// Bytes of packed copies one frozen buffer may keep: a few times its own size (its column
/// ranges as a launch's splits ask for them, and their padding), however many views of it a
/// kernel asks for.
fn name_budget(buffer_bytes: u64) -> usize {
    usize::try_from(buffer_bytes.saturating_mul(4).saturating_add(1 << 20)).unwrap_or(usize::MAX)
}

/// The [`Packing`] of a product: a bound operand the launch only reads, frozen (its resident
/// name), against at most [`PACKED_MAX_OTHER`] rows or columns of the other and no more than
/// its own width, its packed copy (padding included) within one call's span — `B` first;
/// `None` otherwise, or without a packed kernel on this CPU.
///
/// (`a` and `b`: a bound operand's binding, offset, row and column strides.)
fn packing(io: &KernelIo, (a, b): (Option<BoundAt>, Option<BoundAt>), s: Shape) -> Option<Packing> {
    let isa = Isa::detect()?;
    // the frozen operand at least as wide as the other has rows — a narrower one is cheap to
    // pack per call, and matrixmultiply's kernels then run faster (BENCHMARKS.md) — and its
    // packed copy, padding included, no larger than one call's operand may span (a view may
    // repeat its elements with stride 0: its span alone does not bound the copy)
    let worth = |width: usize, other: usize| {
        other <= PACKED_MAX_OTHER
            && width >= other
            && Packed::len(s.k, width, isa).is_some_and(|e| e as u64 <= MAX_ELEMENTS)
    };
    // the packing of a frozen bound operand `k × width`, strides as the product reads it
    let plan = |op: Option<BoundAt>, transposed: bool, width: usize| {
        let (binding, offset, rs, cs) = op?;
        let (name, size) = kernel_io::frozen(io, binding)?;
        let (rs, cs) = if transposed { (cs, rs) } else { (rs, cs) };
        let key = Key {
            name,
            offset,
            rs,
            cs,
            k: s.k,
            n: width,
            isa,
        };
        let budget = name_budget(size);
        Some(Packing {
            transposed,
            key,
            budget,
        })
    };
    if worth(s.n, s.m)
        && let Some(p) = plan(b, false, s.n)
    {
        return Some(p);
    }
    // Aᵀ is k × m
    plan(a, true, s.m).filter(|_| worth(s.m, s.n))
}

/// A product's extents: `A` is `m × k`, `B` is `k × n`.
#[derive(Debug, Clone, Copy)]
struct Shape {
    m: usize,
    n: usize,
    k: usize,
}

/// A checked operand: the bytes of its span (from its offset), and its strides (0 along a
/// dimension of one element, whose stride is never used).
struct View<'a> {
    bytes: &'a [u8],
    rs: usize,
    cs: usize,
}

thread_local! {
    /// Per thread: A's and B's elements when their bytes are not 4-aligned in the instance's
    /// memory (the canonical ABI aligns a `list<u8>` to 1).
    static SCRATCH: RefCell<[Vec<f32>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

impl<'a> View<'a> {
    /// Checks `(offset, row stride, column stride)` as a `rows × cols` operand over `data`: its
    /// span from its offset within one call's limit and inside `data`.
    fn check(
        data: &'a [u8],
        layout: (u64, u64, u64),
        which: &str,
        rows: usize,
        cols: usize,
    ) -> Result<View<'a>, String> {
        if !data.len().is_multiple_of(4) {
            return Err(format!("{which}'s {} bytes are not whole f32s", data.len()));
        }
        let (first, span, rs, cs) = Self::extent(layout, which, rows, cols, data.len() as u64 / 4)?;
        Ok(View {
            bytes: &data[(first * 4) as usize..][..(span * 4) as usize],
            rs,
            cs,
        })
    }

    /// The elements `first .. first + span` a `rows × cols` view with `(offset, row stride,
    /// column stride)` reads, checked within one call's limit and inside `elements`; and the
    /// strides it steps by (0 along a dimension of one element, whose stride is not used nor
    /// checked). An empty view reads nothing, wherever its offset points.
    fn extent(
        (offset, row_stride, col_stride): (u64, u64, u64),
        which: &str,
        rows: usize,
        cols: usize,
        elements: u64,
    ) -> Result<(u64, u64, usize, usize), String> {
        let rs = if rows > 1 { row_stride } else { 0 };
        let cs = if cols > 1 { col_stride } else { 0 };
        let span = if rows == 0 || cols == 0 {
            return Ok((0, 0, rs as usize, cs as usize));
        } else {
            (rows as u64 - 1)
                .checked_mul(rs)
                .and_then(|r| (cols as u64 - 1).checked_mul(cs)?.checked_add(r))
                .and_then(|e| e.checked_add(1))
                .filter(|&s| s <= MAX_ELEMENTS)
                .ok_or_else(|| {
                    format!(
                        "{which} ({rows} × {cols}, strides {} and {}) spans more than {MAX_ELEMENTS} elements",
                        row_stride, col_stride
                    )
                })?
        };
        match offset.checked_add(span) {
            // strides at most MAX_ELEMENTS here (a larger one spans more)
            Some(end) if end <= elements => Ok((offset, span, rs as usize, cs as usize)),
            _ => Err(format!(
                "{which} reads elements {offset}..{} of {elements}",
                offset.saturating_add(span)
            )),
        }
    }

    /// The span's elements as f32s: in place when 4-aligned, else copied into `scratch`.
    fn elements<'s>(&'s self, scratch: &'s mut Vec<f32>) -> &'s [f32] {
        match bytemuck::try_cast_slice(self.bytes) {
            Ok(f) if cfg!(target_endian = "little") => f,
            _ => {
                scratch.clear();
                scratch.extend(
                    self.bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
                scratch
            }
        }
    }
}

impl Shape {
    /// `A · B`, row-major `m × n`, after checking the work fits one call; a frozen operand
    /// through its packed copy when `packing` says so.
    fn multiply(self, a: &View, b: &View, packing: Option<Packing>) -> Result<Vec<f32>, String> {
        let Shape { m, n, k } = self;
        let results = (m as u64) * (n as u64); // both below 2^32: no overflow
        let macs = results.saturating_mul(k as u64);
        if macs > MAX_MULTIPLY_ADDS || results > MAX_ELEMENTS {
            return Err(format!(
                "a {m} × {k} by {k} × {n} product is over one call's limit ({MAX_MULTIPLY_ADDS} multiply-adds, {MAX_ELEMENTS} results): split it"
            ));
        }
        let mut c = vec![0f32; m * n];
        if macs == 0 {
            return Ok(c);
        }
        SCRATCH.with_borrow_mut(|s| {
            let [sa, sb] = &mut *s;
            let a = Strided::new(a.elements(sa), a.rs, a.cs, m, k);
            let b = Strided::new(b.elements(sb), b.rs, b.cs, k, n);
            match packing {
                None => product(self, a, b, &mut c),
                Some(Packing {
                    transposed,
                    key,
                    budget,
                }) => {
                    // the frozen operand `p` (k × cols, packed) against `x` (rows × k)
                    let (x, rows, p, cols) = match transposed {
                        false => (a.mat(), m, b.mat(), n),
                        true => (b.transposed(), n, a.transposed(), m),
                    };
                    let pack = || Packed::pack(p, k, cols, key.isa);
                    let packed = packed::cached(key, budget, pack);
                    // transposed: (Bᵀ · Aᵀ)ᵀ stored as it is computed
                    packed::multiply(x, rows, &packed, &mut c, transposed);
                }
            }
            for v in [sa, sb] {
                if v.capacity() > KEEP_SCRATCH {
                    *v = Vec::new();
                }
            }
        });
        Ok(c)
    }
}

/// A strided matrix whose every element `(i, j)`, `i < rows`, `j < cols`, is in `data`.
struct Strided<'a> {
    data: &'a [f32],
    rs: usize,
    cs: usize,
}

impl<'a> Strided<'a> {
    /// # Panics
    /// When the view reaches outside `data` (the callers checked it: a bug).
    fn new(data: &'a [f32], rs: usize, cs: usize, rows: usize, cols: usize) -> Self {
        let last = (rows - 1) * rs + (cols - 1) * cs;
        assert!(last < data.len(), "matrix view outside its elements");
        assert!(rs <= MAX_ELEMENTS as usize && cs <= MAX_ELEMENTS as usize);
        Strided { data, rs, cs }
    }
}

impl<'a> Strided<'a> {
    fn mat(&self) -> Mat<'a> {
        Mat {
            data: self.data,
            rs: self.rs,
            cs: self.cs,
        }
    }

    fn transposed(&self) -> Mat<'a> {
        Mat {
            data: self.data,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// `c` (row-major `m × n`, overwritten) = `a · b`.
fn product(Shape { m, n, k }: Shape, a: Strided, b: Strided, c: &mut [f32]) {
    assert_eq!(c.len(), m * n);
    // SAFETY: `Strided::new` checked that every element (i, j), i < m, j < k of `a` and
    // i < k, j < n of `b` lies inside its slice and that every stride is at most
    // MAX_ELEMENTS (so each converts to isize and no offset overflows); `c` holds exactly
    // m × n elements, written at i * n + j; beta = 0, so `c`'s previous contents are not
    // read; the slices outlive the call and `c` aliases neither.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr(),
            b.rs as isize,
            b.cs as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn strided_products_match_a_naive_one_aligned_or_not() {
        // A transposed (column-major) with an offset, B row-major with a padded row stride,
        // extents that are not multiples of any kernel's tile
        let (m, n, k) = (13, 29, 37);
        let ad: Vec<f32> = (0..3 + m * k).map(|i| (i % 17) as f32 - 8.0).collect();
        let bd: Vec<f32> = (0..k * (n + 3)).map(|i| (i % 11) as f32 * 0.5).collect();
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                // small integers and halves: exact in f32 whatever the order
                want[i * n + j] = (0..k)
                    .map(|p| ad[3 + i + p * m] * bd[p * (n + 3) + j])
                    .sum();
            }
        }
        let shape = Shape { m, n, k };
        let (ab, bb) = (bytes(&ad), bytes(&bd));
        // the same bytes one byte into a buffer: misaligned for f32, copied
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&ab);
        for a_bytes in [&ab[..], &shifted[1..]] {
            let a = View {
                bytes: &a_bytes[12..],
                rs: 1,
                cs: m,
            };
            let b = View {
                bytes: &bb,
                rs: n + 3,
                cs: 1,
            };
            assert_eq!(shape.multiply(&a, &b, None).unwrap(), want);
        }
    }

    #[test]
    fn views_and_work_are_checked_before_anything_is_read() {
        let data = bytes(&[1.0; 12]);
        let check = |off, rs, cs, rows, cols| {
            View::check(&data, (off, rs, cs), "A", rows, cols)
                .map(|v| (v.bytes.len() / 4, v.rs, v.cs))
        };
        assert_eq!(check(0, 4, 1, 3, 4), Ok((12, 4, 1)));
        assert_eq!(check(2, 1, 3, 3, 2), Ok((6, 1, 3)));
        assert!(
            check(1, 4, 1, 3, 4)
                .unwrap_err()
                .contains("elements 1..13 of 12")
        );
        // a dimension of one element: its stride is never used, however large
        assert_eq!(check(0, u64::MAX, 1, 1, 12), Ok((12, 0, 1)));
        assert_eq!(check(5, 7, u64::MAX, 1, 1), Ok((1, 0, 0)));
        assert!(
            check(0, u64::MAX, 1, 2, 1)
                .unwrap_err()
                .contains("spans more")
        );
        assert!(
            check(0, 1, MAX_ELEMENTS, 1, 2)
                .unwrap_err()
                .contains("spans more")
        );
        assert!(
            check(u64::MAX, 1, 1, 1, 1)
                .unwrap_err()
                .contains("reads elements")
        );
        assert_eq!(
            check(99, 1, 1, 0, 5),
            Ok((0, 0, 1)),
            "an empty view reads nothing"
        );
        assert!(
            View::check(&data[..5], (0, 1, 1), "B", 1, 1)
                .err()
                .unwrap()
                .contains("not whole f32s")
        );
        let empty = View {
            bytes: &[],
            rs: 0,
            cs: 0,
        };
        let big = Shape {
            m: 1 << 12,
            n: 1 << 12,
            k: 1 << 12,
        };
        assert!(
            big.multiply(&empty, &empty, None)
                .unwrap_err()
                .contains("split it")
        );
        let results = Shape {
            m: 1 << 13,
            n: 1 << 12,
            k: 1,
        };
        assert!(
            results
                .multiply(&empty, &empty, None)
                .unwrap_err()
                .contains("split it")
        );
        let huge = Shape {
            m: u32::MAX as usize,
            n: u32::MAX as usize,
            k: u32::MAX as usize,
        };
        assert!(
            huge.multiply(&empty, &empty, None)
                .unwrap_err()
                .contains("split it")
        );
        let none = Shape { m: 2, n: 3, k: 0 };
        assert_eq!(none.multiply(&empty, &empty, None).unwrap(), vec![0.0; 6]);
    }

    #[test]
    fn frozen_operands_multiply_through_packed_copies_kept_by_name() {
        use crate::cmdbuf::Access;
        use crate::device::BoundMemory;
        use std::sync::Arc;
        if Isa::detect().is_none() {
            eprintln!("SKIPPED: this CPU has neither AVX2+FMA nor AVX-512F: no packed kernel");
            return;
        }
        struct Mem(Vec<u8>);
        impl crate::device::BufferMemory for Mem {
            fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
                dst.extend_from_slice(&self.0[offset..offset + len]);
            }
            fn write_from(&self, _: usize, _: &[u8]) {
                unreachable!("the matrix unit never writes a buffer")
            }
        }
        // a weight of 40 × 300 from element 3 (small integers: sums exact in any order)
        let (rows, cols) = (40usize, 300usize);
        let w: Vec<f32> = (0..3 + rows * cols).map(|i| (i % 9) as f32 - 4.0).collect();
        let name = u64::MAX - 1000; // a name no other test uses
        let bound = |binding, access, resident| BoundMemory {
            binding,
            size: w.len() as u64 * 4,
            access,
            memory: Arc::new(Mem(bytes(&w))),
            resident,
            asked: Default::default(),
            units: Default::default(),
        };
        // 0: frozen, read; 1: not frozen; 2: frozen but written by the launch
        let io: KernelIo = Some(Arc::from(vec![
            bound(0, Access::Read, Some(name)),
            bound(1, Access::Read, None),
            bound(2, Access::ReadWrite, Some(name)),
        ]));
        let other: Vec<f32> = (0..cols * 300).map(|i| (i % 5) as f32 - 2.0).collect();
        let ob = bytes(&other);
        // the weight as B (x · W: 40 deep, 300 wide) or as A (W · x: x 300 deep)
        let w_at = |binding| Some((binding, 3, cols as u64, 1));
        for (weight_is_b, m, n, k) in [(true, 7, cols, rows), (false, rows, 9, cols)] {
            let shape = Shape { m, n, k };
            let (xr, xc) = if weight_is_b { (m, k) } else { (k, n) };
            let x = View {
                bytes: &ob[..xr * xc * 4],
                rs: xc,
                cs: 1,
            };
            let view = BoundView {
                binding: 0,
                offset: 3,
                row_stride: cols as u64,
                col_stride: 1,
            };
            let run = |packing| {
                with_bound(&io, &view, "W", (rows, cols), &mut |wv| match weight_is_b {
                    true => shape.multiply(&x, wv, packing),
                    false => shape.multiply(wv, &x, packing),
                })
                .unwrap()
            };
            let plan = |binding, s| match weight_is_b {
                true => packing(&io, (None, w_at(binding)), s),
                false => packing(&io, (w_at(binding), None), s),
            };
            let p = plan(0, shape).expect("a frozen operand against few rows is packed");
            assert_eq!(p.transposed, !weight_is_b);
            assert!(plan(1, shape).is_none(), "not frozen");
            assert!(plan(2, shape).is_none(), "written by the launch");
            let want = run(None);
            assert_eq!(run(Some(p)), want, "packed");
            // kept under its key: asking again packs nothing
            let kept = packed::cached(p.key, p.budget, || panic!("packed again: not kept"));
            assert_eq!(run(Some(p)), want, "from the kept copy");
            assert!(Arc::ptr_eq(
                &kept,
                &packed::cached(p.key, p.budget, || panic!("packed again: not kept"))
            ));
            // past PACKED_MAX_OTHER rows of the other operand: matrixmultiply
            let big = match weight_is_b {
                true => Shape { m: 257, ..shape },
                false => Shape { n: 257, ..shape },
            };
            assert!(plan(0, big).is_none());
            // a frozen operand narrower than the other's rows: packed per call as before
            let narrow = match weight_is_b {
                true => Shape {
                    m: 200,
                    n: 199,
                    ..shape
                },
                false => Shape {
                    m: 199,
                    n: 200,
                    ..shape
                },
            };
            assert!(plan(0, narrow).is_none());
            // a frozen operand whose copy would outgrow one call's span (stride 0 repeats)
            let vast = match weight_is_b {
                true => Shape {
                    m: 1,
                    n: 1 << 13,
                    k: 1 << 12,
                },
                false => Shape {
                    m: 1 << 13,
                    n: 1,
                    k: 1 << 12,
                },
            };
            assert!(plan(0, vast).is_none());
            // … padding included: one column 2^24 deep pads to a tile's width
            let deep = Shape {
                m: 1,
                n: 1,
                k: 1 << 24,
            };
            assert!(plan(0, deep).is_none());
        }
        packed::forget(name);
        assert_eq!(packed::held(name), 0, "forgotten with its buffer");
    }

    #[test]
    fn bound_operands_are_read_in_place_from_readable_bindings_only() {
        use crate::cmdbuf::Access;
        use crate::device::{BoundMemory, BufferMemory};
        use std::sync::Arc;
        struct Mem(Vec<u8>);
        impl BufferMemory for Mem {
            fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
                dst.extend_from_slice(&self.0[offset..offset + len]);
            }
            fn write_from(&self, _: usize, _: &[u8]) {
                unreachable!("the matrix unit never writes a buffer")
            }
        }
        // binding 0: a 2 × 3 matrix from element 1 (row-major); binding 1: write-only
        let a = [9.0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let bound = |binding, access, data: &[f32]| BoundMemory {
            binding,
            size: data.len() as u64 * 4,
            access,
            memory: Arc::new(Mem(bytes(data))),
            resident: None,
            asked: Default::default(),
            units: Default::default(),
        };
        // binding 2: the same bytes, its size two bytes short of whole f32s
        let mut ragged = bound(2, Access::Read, &a);
        ragged.size -= 2;
        let io: KernelIo = Some(Arc::from(vec![
            bound(0, Access::Read, &a),
            bound(1, Access::Write, &a),
            ragged,
        ]));
        let b = bytes(&[1.0, 0.5, -1.0]);
        let bv = View {
            bytes: &b,
            rs: 1,
            cs: 0,
        };
        let shape = Shape { m: 2, n: 1, k: 3 };
        let view = |binding, offset| BoundView {
            binding,
            offset,
            row_stride: 3,
            col_stride: 1,
        };
        let run = |io: &KernelIo, v: &BoundView| {
            with_bound(io, v, "A", (2, 3), &mut |va| shape.multiply(va, &bv, None))
        };
        // [1 2 3; 4 5 6] · [1, 0.5, -1]
        assert_eq!(run(&io, &view(0, 1)).unwrap(), vec![-1.0, 0.5]);
        assert_eq!(
            run(&io, &view(2, 0)).unwrap(),
            vec![7.5, 0.0],
            "its 6 whole f32s"
        );
        assert!(
            run(&io, &view(2, 1))
                .unwrap_err()
                .contains("reads elements 1..7 of 6")
        );
        let err = |io: &KernelIo, v: BoundView| run(io, &v).unwrap_err();
        assert!(err(&io, view(0, 2)).contains("reads elements 2..8 of 7"));
        assert!(err(&io, view(1, 1)).contains("write-only"));
        assert!(err(&io, view(7, 0)).contains("not bound"));
        assert!(err(&None, view(0, 1)).contains("only during cpu-kernel.run"));
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn a_view_outside_its_elements_is_a_bug_caught_before_the_product() {
        Strided::new(&[0.0; 8], 4, 1, 3, 1);
    }
}
