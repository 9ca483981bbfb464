//! (ABI 1.10) The CPU device's vector unit: the `vector` import, element-wise arithmetic that
//! the host computes natively on buffers bound to the running launch and writes in place — the
//! CPU counterpart of a GPU kernel's loads and stores. Through `kernel-io` every byte a kernel
//! reads or writes crosses the component boundary as a copy; here none does.
//!
//! A call is checked whole before any byte is read or written: the bindings and their access,
//! the rank, the element count against one call's limit (a host call cannot be interrupted by
//! the plugin's deadline, so its time is bounded by its work), every operand's span and the
//! output against their bindings. It then runs block by block ([`Direct`]): straight into the
//! output when the output's storage (a CPU segment) can be held writable at once — an input in
//! that storage sliced from it (it must not overlap the output), one elsewhere read in place
//! if its storage is free — else into aligned scratch under the inputs' read locks, stored
//! after. No lock is waited for while another is held (launches whose buffers share segments
//! cannot deadlock), and a split launch's worker that finds the output held computes its block
//! through scratch meanwhile. Owns no buffer and no device state; the semantics per element
//! are those of the bundled CUDA kernels (the WIT says them), [`lanes`] computes them.

mod lanes;

use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, Linker, WasmList};

use super::kernel_io::{self, KernelIo};
use super::sandbox::StoreState;
use crate::device::BoundMemory;

/// Most elements one call computes (~20 ms for f32 at memory speed): a kernel splits a larger
/// walk into several calls, between which its deadline is checked.
pub const MAX_ELEMENTS: u64 = 1 << 24;
/// Most dimensions of a walk.
pub const MAX_RANK: usize = 8;
/// Bytes of results computed per block into scratch before they are stored (stays in the L1
/// cache).
const BLOCK_BYTES: usize = 16 << 10;
/// Bytes of results computed per block straight into the output: few lock round trips, yet a
/// split launch's other worker waits for the output's storage no longer than this takes.
const DIRECT_BLOCK_BYTES: usize = 256 << 10;

/// Elements computed by every vector unit of the process.
static COMPUTED: AtomicU64 = AtomicU64::new(0);

/// Elements the vector units of this process have computed so far (ABI 1.10 plugins' calls
/// of `vector.binary`): how much element-wise work ran natively instead of in an instance.
pub fn elements_computed() -> u64 {
    COMPUTED.load(Ordering::Relaxed)
}

/// Element types (WIT `element`).
#[allow(dead_code, reason = "constructed by the component model's lift")]
#[derive(ComponentType, Lift, Clone, Copy, Debug, PartialEq, Eq)]
#[component(enum)]
#[repr(u8)]
pub enum Element {
    #[component(name = "f32")]
    F32,
    #[component(name = "f64")]
    F64,
    #[component(name = "f16")]
    F16,
    #[component(name = "bf16")]
    Bf16,
    #[component(name = "i32")]
    I32,
    #[component(name = "i64")]
    I64,
}

impl Element {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Element::F16 | Element::Bf16 => 2,
            Element::F32 | Element::I32 => 4,
            Element::F64 | Element::I64 => 8,
        }
    }
}

/// Operations (WIT `binary-op`).
#[allow(dead_code, reason = "constructed by the component model's lift")]
#[derive(ComponentType, Lift, Clone, Copy, Debug, PartialEq, Eq)]
#[component(enum)]
#[repr(u8)]
pub enum BinaryOp {
    #[component(name = "add")]
    Add,
    #[component(name = "sub")]
    Sub,
    #[component(name = "mul")]
    Mul,
    #[component(name = "div")]
    Div,
    #[component(name = "max")]
    Max,
    #[component(name = "min")]
    Min,
}

/// An input (WIT `operand`).
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct Operand {
    pub binding: u32,
    pub offset: u64,
    pub strides: WasmList<u64>,
}

/// The output (WIT `destination`).
#[derive(ComponentType, Lift, Clone, Copy)]
#[component(record)]
pub struct Destination {
    pub binding: u32,
    pub offset: u64,
}

/// Defines `umd:plugin/vector` in `linker` (semver-compatible: any 1.x ≥ 1.10 import binds).
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("umd:plugin/vector@1.10.0")?;
    inst.func_wrap(
        "binary",
        |store: StoreContextMut<'_, StoreState>,
         (op, element, shape, a, b, out): (
            BinaryOp,
            Element,
            WasmList<u64>,
            Operand,
            Operand,
            Destination,
        )|
         -> wasmtime::Result<(Result<(), String>,)> {
            let shape = shape.as_le_slice(&store);
            let a_strides = a.strides.as_le_slice(&store);
            let b_strides = b.strides.as_le_slice(&store);
            let call = Call {
                op,
                element,
                shape,
                a: (a.binding, a.offset, a_strides),
                b: (b.binding, b.offset, b_strides),
                out,
            };
            Ok((call.run(&store.data().io),))
        },
    )?;
    Ok(())
}

/// An input as the plugin gave it: binding, offset and strides in elements, outermost first.
pub(crate) type Input<'a> = (u32, u64, &'a [u64]);

/// One `binary` call as the plugin made it.
pub(crate) struct Call<'a> {
    pub op: BinaryOp,
    pub element: Element,
    /// Outermost first.
    pub shape: &'a [u64],
    pub a: Input<'a>,
    pub b: Input<'a>,
    pub out: Destination,
}

/// A walk as it runs: dimensions of one element dropped, neighbours both inputs walk
/// contiguously merged, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Walk {
    pub n: usize,
    pub rank: usize,
    pub size: [usize; MAX_RANK],
    /// Per input, its element strides, relative to the first element it reads.
    pub strides: [[usize; MAX_RANK]; 2],
}

/// A checked input: its bound buffer and the bytes it spans.
struct Span<'a> {
    memory: &'a BoundMemory,
    at: usize,
    len: usize,
}

impl Call<'_> {
    /// Checks the call, then computes and stores every element.
    pub fn run(&self, io: &KernelIo) -> Result<(), String> {
        let (walk, [a, b], out) = self.check(io)?;
        // the launch's kernel uses the unit: its launches run in place however small
        out.units.store(true, Ordering::Relaxed);
        let es = self.element.size();
        if walk.n == 0 {
            return Ok(());
        }
        let block = (BLOCK_BYTES / es).max(1);
        let direct_block = (DIRECT_BLOCK_BYTES / es).max(1);
        let o0 = out_at(self.out, es);
        let direct = Direct::plan([&a, &b], out, o0, walk.n * es);
        // allocated when a block first goes through it
        let mut scratch: Vec<u64> = Vec::new();
        let mut start = 0;
        while start < walk.n {
            if let Some(d) = &direct {
                let len = direct_block.min(walk.n - start);
                let (lo, hi) = (o0 + start * es, o0 + (start + len) * es);
                if d.block(self, &walk, start, [&a, &b], out, (lo, hi)) {
                    start += len;
                    continue;
                }
            }
            // into aligned scratch under the inputs' read locks, then stored
            let len = block.min(walk.n - start);
            if scratch.is_empty() {
                scratch = vec![0u64; (block * es).div_ceil(8)];
            }
            let dst = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut scratch)[..len * es];
            let mut done = false;
            a.memory.memory.with_bytes(a.at, a.len, &mut |ab| {
                b.memory.memory.with_bytes(b.at, b.len, &mut |bb| {
                    done = lanes::compute(self.op, self.element, &walk, start, [ab, bb], dst);
                })
            });
            if !done {
                return Err("the vector unit needs a little-endian host".into());
            }
            out.memory.write_from(o0 + start * es, dst);
            start += len;
        }
        COMPUTED.fetch_add(walk.n as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Everything a call may be refused for, before anything is read: its walk, its inputs'
    /// spans and its output's binding.
    fn check<'io>(
        &self,
        io: &'io KernelIo,
    ) -> Result<(Walk, [Span<'io>; 2], &'io BoundMemory), String> {
        let rank = self.shape.len();
        if rank > MAX_RANK {
            return Err(format!("a walk of {rank} dimensions; at most {MAX_RANK}"));
        }
        for (which, (_, _, strides)) in [("a", self.a), ("b", self.b)] {
            if strides.len() != rank {
                return Err(format!(
                    "{which} has {} strides for a walk of {rank} dimensions",
                    strides.len()
                ));
            }
        }
        let n = self
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| {
                format!(
                    "a walk of shape {:?} is over one call's {MAX_ELEMENTS} elements: split it",
                    self.shape
                )
            })?;
        let es = self.element.size() as u64;
        let mut spans = Vec::with_capacity(2);
        for (which, (binding, offset, strides)) in [("a", self.a), ("b", self.b)] {
            let memory = kernel_io::readable(io, binding)?;
            let last = last_element(self.shape, strides, n)
                .ok_or_else(|| format!("{which}'s strides {strides:?} overflow"))?;
            let elements = memory.size / es;
            // elements `offset ..= offset + last`, none when the walk is empty
            let span = match last {
                None => 0,
                Some(last) => match offset.checked_add(last).filter(|&e| e < elements) {
                    Some(_) => last + 1,
                    None => {
                        return Err(format!(
                            "{which} reads elements {offset}..={} of binding {binding}, which holds {elements}",
                            offset.saturating_add(last)
                        ));
                    }
                },
            };
            // inside the binding, which lies inside its buffer: both fit usize
            spans.push(Span {
                memory,
                at: if span == 0 { 0 } else { (offset * es) as usize },
                len: (span * es) as usize,
            });
        }
        let out = kernel_io::writable(io, self.out.binding)?;
        let elements = out.size / es;
        if self
            .out
            .offset
            .checked_add(n)
            .is_none_or(|end| end > elements)
        {
            return Err(format!(
                "the output's elements {}..{} are outside binding {}, which holds {elements}",
                self.out.offset,
                self.out.offset.saturating_add(n),
                self.out.binding
            ));
        }
        let walk = Walk::new(self.shape, [self.a.2, self.b.2], n as usize);
        let [a, b]: [Span; 2] = spans.try_into().unwrap_or_else(|_| unreachable!());
        Ok((walk, [a, b], out))
    }
}

/// How blocks are computed straight into the output, when its memory has a storage
/// ([`crate::device::BufferMemory::placement`]): the output's storage held writable for the
/// block (only if free: never waiting while holding anything), an input in that same storage
/// sliced from it (it must lie wholly outside the output), an input elsewhere read in place if
/// its storage is free. A block that cannot is computed through scratch instead, so blocks of a
/// split launch on other workers go on computing meanwhile.
struct Direct {
    /// The output's first byte in its storage, less its first byte in its binding.
    base: usize,
    /// Per input, its first byte in the output's storage when it lives there.
    shared: [Option<usize>; 2],
}

impl Direct {
    fn plan(inputs: [&Span; 2], out: &BoundMemory, o0: usize, bytes: usize) -> Option<Direct> {
        let (id, base) = out.memory.placement()?;
        let (first, last) = (base + o0, base + o0 + bytes);
        let mut shared = [None; 2];
        for (i, s) in inputs.into_iter().enumerate() {
            if let Some((sid, off)) = s.memory.memory.placement()
                && sid == id
            {
                let p = off + s.at;
                if p < last && p + s.len > first {
                    return None; // overlaps the output: through scratch, block by block
                }
                shared[i] = Some(p);
            }
        }
        Some(Direct { base, shared })
    }

    /// Computes the block writing bytes `lo .. hi` of the output's binding straight into it;
    /// `false` (nothing written) when a lock it needs is taken.
    fn block(
        &self,
        call: &Call,
        walk: &Walk,
        start: usize,
        inputs: [&Span; 2],
        out: &BoundMemory,
        (lo, hi): (usize, usize),
    ) -> bool {
        let (lo, hi) = (self.base + lo, self.base + hi);
        let mut done = false;
        let held = out.memory.try_with_storage_mut(&mut |storage| {
            let (left, rest) = storage.split_at_mut(lo);
            let (dst, right) = rest.split_at_mut(hi - lo);
            let (left, right) = (&*left, &*right);
            // an input: a slice of this storage (wholly before or after the output), or read
            // in place from its own if that is free
            let input = |i: usize, k: &mut dyn FnMut(&[u8])| -> bool {
                let s = inputs[i];
                match self.shared[i] {
                    Some(p) if p + s.len <= lo => k(&left[p..p + s.len]),
                    Some(p) => k(&right[p - hi..p - hi + s.len]),
                    None => return s.memory.memory.try_with_bytes(s.at, s.len, k),
                }
                true
            };
            input(0, &mut |ab| {
                input(1, &mut |bb| {
                    done = lanes::compute(call.op, call.element, walk, start, [ab, bb], dst);
                });
            });
        });
        held && done
    }
}

/// The output's first byte in its binding (checked inside it by [`Call::check`]).
fn out_at(out: Destination, es: usize) -> usize {
    out.offset as usize * es
}

/// The last element (relative to the offset) a walk of `n` elements reads with `strides`:
/// `Some(None)` for an empty walk, `None` when it overflows. The stride of a dimension of one
/// element is not used.
fn last_element(shape: &[u64], strides: &[u64], n: u64) -> Option<Option<u64>> {
    if n == 0 {
        return Some(None);
    }
    shape
        .iter()
        .zip(strides)
        .filter(|(d, _)| **d > 1)
        .try_fold(0u64, |acc, (&d, &s)| {
            (d - 1).checked_mul(s)?.checked_add(acc)
        })
        .map(Some)
}

impl Walk {
    /// The walk of a checked call: `shape` outermost first, `strides` per input.
    pub fn new(shape: &[u64], strides: [&[u64]; 2], n: usize) -> Walk {
        let mut w = Walk {
            n,
            rank: 0,
            size: [1; MAX_RANK],
            strides: [[0; MAX_RANK]; 2],
        };
        if n <= 1 {
            return w;
        }
        // innermost first; checked by the caller: every stride used fits its span
        for d in (0..shape.len()).rev() {
            let size = shape[d] as usize;
            if size == 1 {
                continue;
            }
            let st = [strides[0][d] as usize, strides[1][d] as usize];
            let merge = w.rank > 0 && {
                let r = w.rank - 1;
                (0..2).all(|i| st[i] == w.strides[i][r] * w.size[r])
            };
            if merge {
                w.size[w.rank - 1] *= size;
            } else {
                w.size[w.rank] = size;
                w.strides[0][w.rank] = st[0];
                w.strides[1][w.rank] = st[1];
                w.rank += 1;
            }
        }
        w
    }
}

#[cfg(test)]
mod tests;
