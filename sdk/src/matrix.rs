//! (ABI 1.8) The CPU device's matrix unit from a kernel: [`multiply_f32`] hands an f32 product
//! of matrices in the kernel's memory to the host, which computes it natively (AVX-512, AVX2
//! and FMA…: several times what WebAssembly's 128-bit SIMD reaches, [`crate::gemm`]), split
//! into calls within the host's per-call limits. (ABI 1.9) [`multiply`] takes operands that
//! may also be [`Bound`]: a matrix in a buffer bound to the launch, which the host reads in
//! place — a weight never copied into the kernel's memory (where the kernel's [`Memory`] is
//! the launch's buffers; else, as in a `run-cpu` call, the operand is read through it first).
//! Outside a component (native unit tests) each call runs on [`crate::gemm`] under the same
//! limits, so a kernel has one code path.

use crate::OpError;
use crate::gemm::Strided;
use crate::kernel::Memory;

/// Most multiply-adds of one host call (the WIT's `multiply-f32` limits).
pub const MAX_MULTIPLY_ADDS: u64 = 1 << 32;
/// Most results of one host call, and most elements an operand spans from its offset.
pub const MAX_ELEMENTS: u64 = 1 << 24;

/// (1.9) An f32 matrix in a buffer bound to the launch being run: element `(i, j)` is element
/// `offset + i * rs + j * cs` of binding `binding` (counted in f32s from its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub binding: u32,
    pub offset: usize,
    pub rs: usize,
    pub cs: usize,
}

/// Whether a kernel running on `mem` should hand its operands [`Bound`]: where the host reads
/// them in place (a launch's own buffers); not in a `run-cpu` call, whose copies would have to
/// be read span by span for every product instead of once. Natively (unit tests) always, the
/// spans read through [`Memory::read_for_unit`], so the bound paths are tested.
pub fn binds_in_place(mem: &dyn Memory) -> bool {
    mem.host_reads_in_place() || cfg!(not(target_arch = "wasm32"))
}

/// Where an operand of [`multiply`] is: the kernel's memory, or a bound buffer. (Generic so
/// that kernels generic over [`crate::gemm::Acc`] can name one; the matrix unit takes f32.)
#[derive(Clone, Copy)]
pub enum Operand<'a, A = f32> {
    Memory(Strided<'a, A>),
    Bound(Bound),
}

impl<'a, A: Copy> Operand<'a, A> {
    fn strides(&self) -> (usize, usize) {
        match self {
            Operand::Memory(v) => (v.rs, v.cs),
            Operand::Bound(b) => (b.rs, b.cs),
        }
    }

    /// Elements from the operand's start spanned by a `rows × cols` view (saturating: a span
    /// over the limits is never sent).
    fn span(&self, rows: usize, cols: usize) -> u64 {
        if rows == 0 || cols == 0 {
            return 0;
        }
        let (rs, cs) = self.strides();
        let step = |n: usize, s: usize| {
            if n > 1 {
                (n as u64 - 1).saturating_mul(s as u64)
            } else {
                0
            }
        };
        step(rows, rs)
            .saturating_add(step(cols, cs))
            .saturating_add(1)
    }

    /// The operand from element `(r0, c0)` on.
    pub fn at(&self, r0: usize, c0: usize) -> Operand<'a, A> {
        let (rs, cs) = self.strides();
        // saturating: a view this far out is refused by the span checks, never wrapped back in
        let skip = if r0 > 0 { r0.saturating_mul(rs) } else { 0 }.saturating_add(if c0 > 0 {
            c0.saturating_mul(cs)
        } else {
            0
        });
        match *self {
            Operand::Memory(v) => Operand::Memory(Strided {
                data: &v.data[skip.min(v.data.len())..],
                ..v
            }),
            Operand::Bound(b) => Operand::Bound(Bound {
                offset: b.offset.saturating_add(skip),
                ..b
            }),
        }
    }
}

/// Whether a `rows × depth` by `depth × cols` product of `a` and `b` is within one call's
/// limits (most elements per operand span and result, most multiply-adds).
fn within(
    (max_elements, max_macs): (u64, u64),
    a: &Operand,
    b: &Operand,
    (rows, cols, depth): (usize, usize, usize),
) -> bool {
    let results = (rows as u64).saturating_mul(cols as u64);
    a.span(rows, depth) <= max_elements
        && b.span(depth, cols) <= max_elements
        && results <= max_elements
        && results.saturating_mul(depth as u64) <= max_macs
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
    split(
        (MAX_ELEMENTS, MAX_MULTIPLY_ADDS),
        (m, n, k),
        Operand::Memory(a),
        Operand::Memory(b),
        None,
    )
}

/// (1.9) [`multiply_f32`] with operands in the kernel's memory or in buffers bound to the
/// launch ([`Bound`], read by the host in place; read through `mem` outside a component).
pub fn multiply(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    mem: &mut dyn Memory,
) -> Result<Vec<f32>, OpError> {
    split(
        (MAX_ELEMENTS, MAX_MULTIPLY_ADDS),
        (m, n, k),
        a,
        b,
        Some(mem),
    )
}

/// A product in calls of at most `max_elements` per operand span and result, and `max_macs`
/// multiply-adds.
fn split(
    (max_elements, max_macs): (u64, u64),
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    mut mem: Option<&mut dyn Memory>,
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
        return call((m, n, k), a, b, mem);
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
                let (pa, pb) = (a.at(r0, k0), b.at(k0, c0));
                let reborrowed: Option<&mut dyn Memory> = match &mut mem {
                    Some(m) => Some(&mut **m),
                    None => None,
                };
                let part = call((rows, cols, depth), pa, pb, reborrowed)?;
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

/// One call of the matrix unit (a product within its limits). A bound operand goes to the
/// host as it is when `mem` is the launch's buffers, which the host reads in place; else (a
/// `run-cpu` call's memory, or native tests) its span is read through `mem` here and sent as
/// memory.
fn call(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    mut mem: Option<&mut dyn Memory>,
) -> Result<Vec<f32>, OpError> {
    if !within((MAX_ELEMENTS, MAX_MULTIPLY_ADDS), &a, &b, (m, n, k)) {
        return Err(OpError::internal(format!(
            "the matrix unit refuses {m}×{k}·{k}×{n}: over one call's limits"
        )));
    }
    let in_place = mem.as_deref().is_some_and(|m| m.host_reads_in_place());
    let memory_only = matches!((a, b), (Operand::Memory(_), Operand::Memory(_)));
    if in_place || memory_only {
        return unit((m, n, k), a, b);
    }
    let mut read = |op: Operand, rows: usize, cols: usize| -> Result<Option<Vec<f32>>, OpError> {
        let Operand::Bound(bv) = op else {
            return Ok(None);
        };
        let mem = mem
            .as_deref_mut()
            .ok_or_else(|| OpError::internal("a bound operand without the launch's memory"))?;
        let span = op.span(rows, cols) as usize;
        let bytes = mem.read_for_unit(bv.binding, bv.offset as u64 * 4, span * 4)?;
        Ok(Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ))
    };
    let (av, bv) = (read(a, m, k)?, read(b, k, n)?);
    /// A bound operand as its values read here; a memory operand as it is.
    fn local<'v>(op: Operand<'v>, values: &'v Option<Vec<f32>>) -> Option<Operand<'v>> {
        match (op, values) {
            (Operand::Bound(b), Some(v)) => Some(Operand::Memory(Strided {
                data: v,
                rs: b.rs,
                cs: b.cs,
            })),
            (Operand::Memory(s), None) => Some(Operand::Memory(s)),
            _ => None,
        }
    }
    let (Some(la), Some(lb)) = (local(a, &av), local(b, &bv)) else {
        return Err(OpError::internal("an operand was not read"));
    };
    unit((m, n, k), la, lb)
}

/// The host's matrix unit: `multiply-f32` when both operands are in the kernel's memory (what
/// a 1.8 host has), `multiply` (1.9) otherwise.
#[cfg(target_arch = "wasm32")]
fn unit((m, n, k): (usize, usize, usize), a: Operand, b: Operand) -> Result<Vec<f32>, OpError> {
    use crate::bindings::umd::plugin::matrix::{self, BoundView, MatrixView};
    fn view(v: Strided<'_, f32>) -> MatrixView<'_> {
        MatrixView {
            data: bytemuck::cast_slice(v.data),
            offset: 0,
            row_stride: v.rs as u64,
            col_stride: v.cs as u64,
        }
    }
    fn wit(op: Operand<'_>) -> matrix::Operand<'_> {
        match op {
            Operand::Memory(v) => matrix::Operand::Memory(view(v)),
            Operand::Bound(b) => matrix::Operand::Bound(BoundView {
                binding: b.binding,
                offset: b.offset as u64,
                row_stride: b.rs as u64,
                col_stride: b.cs as u64,
            }),
        }
    }
    let c = match (a, b) {
        (Operand::Memory(a), Operand::Memory(b)) => {
            matrix::multiply_f32(m as u32, n as u32, k as u32, view(a), view(b))
        }
        (a, b) => matrix::multiply(m as u32, n as u32, k as u32, wit(a), wit(b)),
    }
    .map_err(|e| OpError::internal(format!("the matrix unit refused {m}×{k}·{k}×{n}: {e}")))?;
    if c.len() != m * n {
        return Err(OpError::internal(format!(
            "the matrix unit returned {} elements for {m}×{n}",
            c.len()
        )));
    }
    Ok(c)
}

/// Outside a component: the SDK's own GEMM, refusing what the host would refuse (operands in
/// memory only: nothing reads a binding in place here).
#[cfg(not(target_arch = "wasm32"))]
fn unit((m, n, k): (usize, usize, usize), a: Operand, b: Operand) -> Result<Vec<f32>, OpError> {
    use crate::gemm::{self, PackedB};
    let refused = || OpError::internal(format!("the matrix unit refuses {m}×{k}·{k}×{n}"));
    let (Operand::Memory(av), Operand::Memory(bv)) = (a, b) else {
        return Err(refused());
    };
    if a.span(m, k) > av.data.len() as u64 || b.span(k, n) > bv.data.len() as u64 {
        return Err(refused());
    }
    let mut apack = Vec::new();
    gemm::pack_a(m, k, av, &mut apack);
    let pb = PackedB::pack(k, 0..n, bv)
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
            let (oa, ob) = (Operand::Memory(a), Operand::Memory(b));
            assert_eq!(
                split(limits, (m, n, k), oa, ob, None).unwrap(),
                whole,
                "{limits:?}"
            );
        }
        // A bound to the launch (binding 3, from element 2), split or not: the same bits
        let mut mem = crate::kernel::HeapMemory::new([(
            3,
            crate::Access::Read,
            ad.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )]);
        let bound = Operand::Bound(Bound {
            binding: 3,
            offset: 2,
            rs: 1,
            cs: m,
        });
        let ob = Operand::Memory(b);
        assert_eq!(multiply((m, n, k), bound, ob, &mut mem).unwrap(), whole);
        for limits in [(64, 1 << 20), (30, 3), (8, 1 << 20)] {
            let got = split(limits, (m, n, k), bound, ob, Some(&mut mem)).unwrap();
            assert_eq!(got, whole, "bound, {limits:?}");
        }
        // a bound view past its buffer, or an unbound binding, is refused
        let past = Operand::Bound(Bound {
            binding: 3,
            offset: 3,
            rs: 1,
            cs: m,
        });
        assert!(multiply((m, n, k), past, ob, &mut mem).is_err());
        let unbound = Operand::Bound(Bound {
            binding: 4,
            offset: 0,
            rs: 1,
            cs: m,
        });
        assert!(multiply((m, n, k), unbound, ob, &mut mem).is_err());
        assert_eq!(multiply_f32(0, 3, 2, a, b).unwrap(), Vec::<f32>::new());
        assert_eq!(multiply_f32(2, 3, 0, a, b).unwrap(), vec![0.0; 6]);
        // a view reaching past its elements is refused, not read
        assert!(multiply_f32(m, n + 6, k, a, b).is_err());
    }
}
