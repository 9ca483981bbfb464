//! (ABI 1.10) The CPU device's vector unit from a kernel: element-wise arithmetic of tensors in
//! the launch's bound buffers, computed by the host natively and written in place, so none of
//! their bytes crosses into the instance (through `kernel-io` every byte read or written is
//! copied across the component boundary).
//!
//! [`binary`] computes a walk on the unit when the kernel's [`Memory`] is the launch's own
//! buffers ([`Memory::host_reads_in_place`]) and answers `false` otherwise (a `run-cpu` call's
//! copies, a native unit test): the kernel then computes it itself, with the semantics the WIT
//! states for the unit (integers wrap, integer division by 0 gives 0, max/min keep a NaN first
//! operand). A walk over one call's limit is split into calls within it ([`split`], tested
//! natively), between which the plugin's deadline is checked.
//!
//! ```
//! use umd_sdk::vector::{Element, split};
//! use umd_sdk::Dtype;
//! assert_eq!(Element::of(Dtype::F16), Some(Element::F16));
//! assert_eq!(Element::of(Dtype::U8), None);
//! // a 3 × 4 walk, at most 8 elements per call: two calls of 2 rows and 1 row
//! let mut calls = Vec::new();
//! split(&[3, 4], [&[4, 1], &[0, 1]], [0, 0], 0, 8, &mut |shape, [a, b], out| {
//!     calls.push((shape.to_vec(), a, b, out));
//!     Ok(())
//! })
//! .unwrap();
//! assert_eq!(calls, [(vec![2, 4], 0, 0, 0), (vec![1, 4], 8, 0, 8)]);
//! ```

use crate::kernel::Memory;
use crate::{Dtype, OpError};

/// Most elements one call of the unit computes (the host refuses more).
pub const MAX_ELEMENTS: u64 = 1 << 24;
/// Most dimensions of a walk.
pub const MAX_RANK: usize = 8;

/// The unit's element types: `f16` and `bf16` compute in f32, rounded to nearest even.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    F32,
    F64,
    F16,
    Bf16,
    I32,
    I64,
}

impl Element {
    /// The unit's type for `dt`, if it has one.
    pub fn of(dt: Dtype) -> Option<Element> {
        Some(match dt {
            Dtype::F32 => Element::F32,
            Dtype::F64 => Element::F64,
            Dtype::F16 => Element::F16,
            Dtype::Bf16 => Element::Bf16,
            Dtype::I32 => Element::I32,
            Dtype::I64 => Element::I64,
            _ => return None,
        })
    }
}

/// The unit's operations, `a op b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

/// An input: binding, first element, and element strides over the walk (outermost first; 0
/// broadcasts).
#[derive(Debug, Clone, Copy)]
pub struct Operand<'a> {
    pub binding: u32,
    pub offset: u64,
    pub strides: &'a [u64],
}

/// Computes `out[i] = a[i] op b[i]` over `shape` (outermost first; the output dense from
/// element `out.1` of binding `out.0`) on the host's vector unit when `mem` is the launch's own
/// buffers; `Ok(false)` when it is not (the caller computes the walk itself). An error is the
/// host's refusal (a binding, access or span the kernel got wrong).
pub fn binary(
    mem: &dyn Memory,
    op: BinaryOp,
    element: Element,
    shape: &[u64],
    a: Operand,
    b: Operand,
    out: (u32, u64),
) -> Result<bool, OpError> {
    if !mem.host_reads_in_place() {
        return Ok(false);
    }
    if shape.len() > MAX_RANK || a.strides.len() != shape.len() || b.strides.len() != shape.len() {
        return Err(OpError::internal(format!(
            "a vector-unit walk of {} dimensions with {} and {} strides",
            shape.len(),
            a.strides.len(),
            b.strides.len()
        )));
    }
    split(
        shape,
        [a.strides, b.strides],
        [a.offset, b.offset],
        out.1,
        MAX_ELEMENTS,
        &mut |shape, [ao, bo], oo| {
            call(
                op,
                element,
                shape,
                Operand { offset: ao, ..a },
                Operand { offset: bo, ..b },
                (out.0, oo),
            )
        },
    )
    .map(|()| true)
}

/// What [`split`] hands each walk to: its shape, its inputs' first elements, its output's.
pub type Visit<'a> = dyn FnMut(&[u64], [u64; 2], u64) -> Result<(), OpError> + 'a;

/// Cuts a walk of `shape` (outermost first) into walks of at most `limit` elements, each
/// handed to `f` with its shape, its inputs' first elements and its output's first element:
/// runs of whole outermost indices where an index's walk fits, else each index's walk cut
/// the same way. Walks keep the inputs' strides (a sub-walk's shape is a suffix of `shape`
/// with its first extent reduced).
pub fn split(
    shape: &[u64],
    strides: [&[u64]; 2],
    offsets: [u64; 2],
    out: u64,
    limit: u64,
    f: &mut Visit,
) -> Result<(), OpError> {
    let overflow = || OpError::internal(format!("a vector-unit walk of shape {shape:?} overflows"));
    let n = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(overflow)?;
    if n <= limit.max(1) || shape.is_empty() {
        return if n == 0 {
            Ok(())
        } else {
            f(shape, offsets, out)
        };
    }
    let inner = n / shape[0]; // shape[0] > 0: n > 0
    let step = |i: u64, s: &[u64]| i.checked_mul(s[0]).ok_or_else(overflow);
    if inner <= limit {
        let rows = (limit / inner.max(1)).max(1);
        let mut sub = shape.to_vec();
        let mut i = 0;
        while i < shape[0] {
            let r = rows.min(shape[0] - i);
            sub[0] = r;
            let at = [
                offsets[0] + step(i, strides[0])?,
                offsets[1] + step(i, strides[1])?,
            ];
            f(&sub, at, out + i * inner)?;
            i += r;
        }
        return Ok(());
    }
    for i in 0..shape[0] {
        let at = [
            offsets[0] + step(i, strides[0])?,
            offsets[1] + step(i, strides[1])?,
        ];
        split(
            &shape[1..],
            [&strides[0][1..], &strides[1][1..]],
            at,
            out + i * inner,
            limit,
            f,
        )?;
    }
    Ok(())
}

/// One call of the host's unit.
#[cfg(target_arch = "wasm32")]
fn call(
    op: BinaryOp,
    element: Element,
    shape: &[u64],
    a: Operand,
    b: Operand,
    out: (u32, u64),
) -> Result<(), OpError> {
    use crate::bindings::umd::plugin::vector as v;
    let op = match op {
        BinaryOp::Add => v::BinaryOp::Add,
        BinaryOp::Sub => v::BinaryOp::Sub,
        BinaryOp::Mul => v::BinaryOp::Mul,
        BinaryOp::Div => v::BinaryOp::Div,
        BinaryOp::Max => v::BinaryOp::Max,
        BinaryOp::Min => v::BinaryOp::Min,
    };
    let element = match element {
        Element::F32 => v::Element::F32,
        Element::F64 => v::Element::F64,
        Element::F16 => v::Element::F16,
        Element::Bf16 => v::Element::Bf16,
        Element::I32 => v::Element::I32,
        Element::I64 => v::Element::I64,
    };
    fn operand(o: Operand<'_>) -> v::Operand<'_> {
        v::Operand {
            binding: o.binding,
            offset: o.offset,
            strides: o.strides,
        }
    }
    let dst = v::Destination {
        binding: out.0,
        offset: out.1,
    };
    v::binary(op, element, shape, operand(a), operand(b), dst)
        .map_err(|e| OpError::internal(format!("vector unit: {e}")))
}

/// Outside a component no memory reads in place, so [`binary`] never gets here.
#[cfg(not(target_arch = "wasm32"))]
fn call(
    _: BinaryOp,
    _: Element,
    _: &[u64],
    _: Operand,
    _: Operand,
    _: (u32, u64),
) -> Result<(), OpError> {
    Err(OpError::internal(
        "the vector unit is the host's: there is none outside a component",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element a split visits, as (output index, a index, b index), in order.
    fn visits(shape: &[u64], sa: &[u64], sb: &[u64], limit: u64) -> (Vec<[u64; 3]>, u64) {
        let mut got = Vec::new();
        let mut calls = 0;
        split(shape, [sa, sb], [5, 7], 11, limit, &mut |s, [a, b], o| {
            let n: u64 = s.iter().product();
            assert!(n <= limit.max(1) && n > 0, "{s:?} over {limit}");
            assert!(s.len() <= shape.len());
            calls += 1;
            let (ra, rb) = (&sa[sa.len() - s.len()..], &sb[sb.len() - s.len()..]);
            let mut idx = vec![0u64; s.len()];
            for k in 0..n {
                let dot = |st: &[u64]| idx.iter().zip(st).map(|(i, s)| i * s).sum::<u64>();
                got.push([o + k, a + dot(ra), b + dot(rb)]);
                for d in (0..s.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < s[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
            Ok(())
        })
        .unwrap();
        (got, calls)
    }

    #[test]
    fn splits_visit_every_element_once_in_order() {
        let (shape, sa, sb) = ([3u64, 5, 7], [35u64, 7, 1], [0u64, 1, 0]);
        let (whole, calls) = visits(&shape, &sa, &sb, 1000);
        assert_eq!((whole.len(), calls), (105, 1));
        for (i, v) in whole.iter().enumerate() {
            assert_eq!(v[0], 11 + i as u64);
        }
        // rows of the outermost dimension; within an index; single elements
        for (limit, want_calls) in [(70, 2), (35, 3), (20, 9), (7, 15), (3, 45), (1, 105)] {
            let (got, calls) = visits(&shape, &sa, &sb, limit);
            assert_eq!(got, whole, "limit {limit}");
            assert_eq!(calls, want_calls, "limit {limit}");
        }
        // empty walks make no call
        assert_eq!(visits(&[4, 0, 2], &[0, 0, 1], &[2, 2, 1], 3).1, 0);
        assert_eq!(visits(&[], &[], &[], 3).1, 1);
    }

    #[test]
    fn memory_that_is_not_the_hosts_computes_in_the_kernel() {
        struct Copies;
        impl Memory for Copies {
            fn read(&mut self, _: u32, _: u64, _: usize) -> Result<Vec<u8>, OpError> {
                unreachable!()
            }
            fn write(&mut self, _: u32, _: u64, _: &[u8]) -> Result<(), OpError> {
                unreachable!()
            }
        }
        let op = Operand {
            binding: 0,
            offset: 0,
            strides: &[1],
        };
        let r = binary(&Copies, BinaryOp::Add, Element::F32, &[4], op, op, (1, 0));
        assert!(!r.unwrap());
    }
}
