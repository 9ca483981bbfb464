//! (ABI 1.3) CPU kernels that work on the bound buffers in place, a range of blocks at a time.
//!
//! The host calls `cpu-kernel.run` with a [`KernelCall`]; the kernel reads the chunks it needs
//! and writes what it computes through a [`Memory`] — in a component, the host's `kernel-io`
//! import ([`HostMemory`]): no whole-tensor copies through `list<u8>`. When the plugin says a
//! launch is [`crate::Plugin::splittable`], the host splits the grid into block ranges and runs
//! them concurrently in separate instances, so one big op uses every core.
//!
//! [`HeapMemory`] is the same interface over buffers held in memory: it runs a kernel for an
//! ABI 1.0–1.2 `run-cpu` call ([`run_cpu_in_memory`]) and in native unit tests.
//!
//! A kernel should read in cache-sized chunks ([`CHUNK_BYTES`]) and write each result chunk as
//! soon as it is computed.

use crate::bindings::exports::umd::plugin::cpu_kernel::{BlockRange, BoundBuffer, KernelCall};
use crate::{Access, CpuBuffer, CpuCall, CpuWrite, OpError, Plugin};

/// A good size for one read or write: large enough that the per-call cost (a few µs: the host
/// call, an allocation and a copy on each side) vanishes, small enough that a chunk of three
/// operands stays in a core's 1 MiB L2. Measured: 64 KiB chunks made Add of 64 Ki f32 slower
/// in place than through `run-cpu`; 256 KiB chunks make it even (BENCHMARKS.md).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// The buffers of the launch being run.
pub trait Memory {
    /// `len` bytes of `binding` from byte `offset`.
    fn read(&mut self, binding: u32, offset: u64, len: usize) -> Result<Vec<u8>, OpError>;
    /// Stores `data` into `binding` at byte `offset`.
    fn write(&mut self, binding: u32, offset: u64, data: &[u8]) -> Result<(), OpError>;
    /// (ABI 1.7) The host's name for `binding`'s bytes when they never change while the name
    /// lives (a compiled model's table): a kernel may keep them under it ([`resident`]).
    fn resident(&mut self, _binding: u32) -> Option<u64> {
        None
    }
    /// (ABI 1.9) Whether the host reads these bindings in place for the matrix unit
    /// ([`crate::matrix::Bound`] operands): the launch's own buffers ([`HostMemory`]), not
    /// copies held in the instance (a `run-cpu` call's), whose operands are read here instead.
    fn host_reads_in_place(&self) -> bool {
        false
    }
    /// (ABI 1.9) Reads a bound operand's span for the matrix unit where no host reads it in
    /// place ([`Memory::host_reads_in_place`] false): the same bytes as [`Memory::read`], apart
    /// so that a [`Recorder`] tells the unit's reads from a kernel's own copies.
    fn read_for_unit(&mut self, binding: u32, offset: u64, len: usize) -> Result<Vec<u8>, OpError> {
        self.read(binding, offset, len)
    }
}

/// The host's buffers, through the `kernel-io` import (valid only inside `cpu-kernel.run`).
pub struct HostMemory;

/// Reads larger than [`CHUNK_BYTES`] cross into the host a chunk at a time: the host copies a
/// read's bytes through a buffer of its own, which stays warm in its heap for chunk-sized
/// calls (a multi-MiB one was a fresh mapping faulted in on every call: 5 % of ResNet-50's
/// run). A write is one call whatever its size: the host copies it straight out of the
/// instance's memory, and refuses it whole, before writing anything, when it does not fit.
impl Memory for HostMemory {
    #[cfg(target_arch = "wasm32")]
    fn read(&mut self, binding: u32, offset: u64, len: usize) -> Result<Vec<u8>, OpError> {
        use crate::bindings::umd::plugin::kernel_io::read;
        if len <= CHUNK_BYTES {
            return read(binding, offset, len as u32).map_err(OpError::internal);
        }
        let mut out = Vec::new();
        out.try_reserve_exact(len)
            .map_err(|_| OpError::internal(format!("read of {len} bytes does not fit memory")))?;
        while out.len() < len {
            let n = CHUNK_BYTES.min(len - out.len());
            let at = offset + out.len() as u64;
            let chunk = read(binding, at, n as u32)
                .map_err(|e| OpError::internal(format!("reading {len} bytes at {offset}: {e}")))?;
            if chunk.len() != n {
                return Err(OpError::internal(format!(
                    "the host returned {} of {n} bytes at {at}",
                    chunk.len()
                )));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    #[cfg(target_arch = "wasm32")]
    fn write(&mut self, binding: u32, offset: u64, data: &[u8]) -> Result<(), OpError> {
        crate::bindings::umd::plugin::kernel_io::write(binding, offset, data)
            .map_err(OpError::internal)
    }

    #[cfg(target_arch = "wasm32")]
    fn resident(&mut self, binding: u32) -> Option<u64> {
        crate::bindings::umd::plugin::kernel_io::resident(binding)
    }

    fn host_reads_in_place(&self) -> bool {
        cfg!(target_arch = "wasm32")
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn read(&mut self, _: u32, _: u64, _: usize) -> Result<Vec<u8>, OpError> {
        Err(OpError::internal(
            "HostMemory exists only inside a component",
        ))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn write(&mut self, _: u32, _: u64, _: &[u8]) -> Result<(), OpError> {
        Err(OpError::internal(
            "HostMemory exists only inside a component",
        ))
    }
}

/// Buffers held in memory, with the access each binding allows.
pub struct HeapMemory {
    buffers: Vec<HeapBuffer>,
    /// Bindings named resident ([`HeapMemory::name_resident`]).
    resident: Vec<(u32, u64)>,
}

struct HeapBuffer {
    binding: u32,
    access: Access,
    data: Vec<u8>,
    written: bool,
}

impl HeapMemory {
    /// One buffer per (binding, access, contents); a `write` binding's contents are its size in
    /// zeros.
    pub fn new(buffers: impl IntoIterator<Item = (u32, Access, Vec<u8>)>) -> Self {
        HeapMemory {
            buffers: buffers
                .into_iter()
                .map(|(binding, access, data)| HeapBuffer {
                    binding,
                    access,
                    data,
                    written: false,
                })
                .collect(),
            resident: Vec::new(),
        }
    }

    /// Names read-only `binding` resident under `name` ([`Memory::resident`]), as a device
    /// does for a frozen buffer: tests of kernels that keep what they read.
    pub fn name_resident(&mut self, binding: u32, name: u64) {
        self.resident.retain(|(b, _)| *b != binding);
        self.resident.push((binding, name));
    }

    /// The buffers of a `run-cpu` call (a `write` binding holds its size in zeros).
    pub fn from_call(call: &mut CpuCall) -> Self {
        let buffers = std::mem::take(&mut call.buffers);
        let access = |b: u32| binding_access(&call.relocations, b);
        HeapMemory::new(buffers.into_iter().map(
            |CpuBuffer {
                 binding,
                 size,
                 data,
             }| {
                let data = if data.len() as u64 == size {
                    data
                } else {
                    vec![0; size as usize]
                };
                (binding, access(binding), data)
            },
        ))
    }

    /// The buffers of a plan's bindings (`contents[i]` is binding `i`) that `launch` names,
    /// each with the access the launch gives it, and their sizes as a call lists them.
    pub fn for_launch(launch: &crate::Launch, contents: Vec<Vec<u8>>) -> (Self, Vec<BoundBuffer>) {
        let named = |b: u32| launch.relocations.iter().any(|r| r.binding == b);
        let held: Vec<(u32, Access, Vec<u8>)> = (0..)
            .zip(contents)
            .filter(|(b, _)| named(*b))
            .map(|(b, d)| (b, binding_access(&launch.relocations, b), d))
            .collect();
        let sizes = held
            .iter()
            .map(|(binding, _, d)| BoundBuffer {
                binding: *binding,
                size: d.len() as u64,
            })
            .collect();
        (HeapMemory::new(held), sizes)
    }

    /// The contents of every binding a kernel wrote, as `run-cpu` returns them.
    pub fn into_writes(self) -> Vec<CpuWrite> {
        self.buffers
            .into_iter()
            .filter(|b| b.written)
            .map(|b| CpuWrite {
                binding: b.binding,
                data: b.data,
            })
            .collect()
    }

    /// The contents of `binding`.
    pub fn contents(&self, binding: u32) -> Option<&[u8]> {
        self.buffers
            .iter()
            .find(|b| b.binding == binding)
            .map(|b| &b.data[..])
    }

    fn find(
        &mut self,
        binding: u32,
        offset: u64,
        len: usize,
    ) -> Result<(&mut HeapBuffer, std::ops::Range<usize>), OpError> {
        let b = self
            .buffers
            .iter_mut()
            .find(|b| b.binding == binding)
            .ok_or_else(|| OpError::internal(format!("binding {binding} is not bound")))?;
        let size = b.data.len();
        let range = usize::try_from(offset)
            .ok()
            .and_then(|o| Some(o..o.checked_add(len)?))
            .filter(|r| r.end <= size)
            .ok_or_else(|| {
                OpError::internal(format!(
                    "bytes {offset}..{} are outside binding {binding} of {size} bytes",
                    offset.saturating_add(len as u64)
                ))
            })?;
        Ok((b, range))
    }
}

impl Memory for HeapMemory {
    fn read(&mut self, binding: u32, offset: u64, len: usize) -> Result<Vec<u8>, OpError> {
        let (b, range) = self.find(binding, offset, len)?;
        if b.access == Access::Write {
            return Err(OpError::internal(format!(
                "binding {binding} is write-only in this launch"
            )));
        }
        Ok(b.data[range].to_vec())
    }

    fn write(&mut self, binding: u32, offset: u64, data: &[u8]) -> Result<(), OpError> {
        let (b, range) = self.find(binding, offset, data.len())?;
        if b.access == Access::Read {
            return Err(OpError::internal(format!(
                "binding {binding} is read-only in this launch"
            )));
        }
        b.data[range].copy_from_slice(data);
        b.written = true;
        Ok(())
    }

    fn resident(&mut self, binding: u32) -> Option<u64> {
        let read_only = self
            .buffers
            .iter()
            .any(|b| b.binding == binding && b.access == Access::Read);
        let name = self.resident.iter().find(|(b, _)| *b == binding)?.1;
        read_only.then_some(name)
    }
}

/// How a launch uses `binding`: the union of its relocations' accesses (read when it has none).
pub fn binding_access(relocations: &[crate::Relocation], binding: u32) -> Access {
    let mut reads = false;
    let mut writes = false;
    for r in relocations.iter().filter(|r| r.binding == binding) {
        reads |= r.access != Access::Write;
        writes |= r.access != Access::Read;
    }
    match (reads, writes) {
        (_, false) => Access::Read,
        (false, true) => Access::Write,
        (true, true) => Access::ReadWrite,
    }
}

impl KernelCall {
    /// The call running blocks `blocks` of `launch` (from a plan) over buffers `buffers`.
    pub fn for_launch(
        launch: &crate::Launch,
        buffers: &[BoundBuffer],
        blocks: std::ops::Range<u64>,
    ) -> Self {
        KernelCall {
            module_id: launch.module_id.clone(),
            entry_point: launch.entry_point.clone(),
            grid: launch.grid,
            block: launch.block,
            params: launch.params.clone(),
            relocations: launch.relocations.clone(),
            buffers: buffers.to_vec(),
            blocks: BlockRange {
                first: blocks.start,
                count: blocks.end - blocks.start,
            },
        }
    }

    /// Blocks in the whole grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.volume()
    }

    /// Whether this call runs the whole grid.
    pub fn is_whole(&self) -> bool {
        self.blocks.first == 0 && self.blocks.count == self.grid_blocks()
    }

    /// The part `lo..hi` of `0..n` items this call's blocks cover when the grid's blocks share
    /// `n` items evenly (block `b` covers `n*b/G .. n*(b+1)/G`): disjoint for distinct blocks
    /// and together exactly `0..n`.
    pub fn share(&self, n: u64) -> std::ops::Range<u64> {
        let g = self.grid_blocks().max(1) as u128;
        let at = |b: u64| (n as u128 * b.min(g as u64) as u128 / g) as u64;
        at(self.blocks.first)..at(self.blocks.first.saturating_add(self.blocks.count))
    }

    /// Size in bytes of a bound binding.
    pub fn size_of(&self, binding: u32) -> Result<u64, OpError> {
        self.buffers
            .iter()
            .find(|b| b.binding == binding)
            .map(|b| b.size)
            .ok_or_else(|| OpError::internal(format!("binding {binding} is not bound")))
    }

    /// Refuses `binding` when it holds fewer than `need` bytes (`what` names it in the error).
    pub fn require_size(&self, binding: u32, need: u64, what: &str) -> Result<(), OpError> {
        let size = self.size_of(binding)?;
        if size < need {
            return Err(OpError::internal(format!(
                "binding {binding} ({what}) holds {size} bytes, fewer than the {need} needed"
            )));
        }
        Ok(())
    }

    /// The whole-grid call of a `run-cpu` call.
    pub fn from_cpu_call(call: &CpuCall) -> Self {
        KernelCall {
            module_id: call.module_id.clone(),
            entry_point: call.entry_point.clone(),
            grid: call.grid,
            block: call.block,
            params: call.params.clone(),
            relocations: call.relocations.clone(),
            buffers: call
                .buffers
                .iter()
                .map(|b| BoundBuffer {
                    binding: b.binding,
                    size: b.size,
                })
                .collect(),
            blocks: BlockRange {
                first: 0,
                count: call.grid.volume(),
            },
        }
    }
}

/// `run-cpu` for a plugin whose kernels are written for [`Memory`]: runs the whole grid of
/// `call` on its buffers in memory and returns what the kernel wrote.
pub fn run_cpu_in_memory<P: Plugin + ?Sized>(mut call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let kcall = KernelCall::from_cpu_call(&call);
    let mut mem = HeapMemory::from_call(&mut call);
    P::run_kernel(&kcall, &mut mem)?;
    Ok(mem.into_writes())
}

/// The in-place kernel of a plugin whose CPU kernels are `run-cpu` style (the default of
/// [`crate::Plugin::run_kernel`]): reads every binding the launch reads, runs `run_cpu` on the
/// whole grid, writes back what it returns. Refuses a part of a grid.
pub fn run_via_cpu_call<P: Plugin + ?Sized>(
    call: &KernelCall,
    mem: &mut dyn Memory,
) -> Result<(), OpError> {
    let (cpu, _) = read_whole(call, mem, false)?;
    let writes = P::run_cpu(cpu)?;
    write_back(call, mem, writes)
}

pub mod resident;

/// [`run_via_cpu_call`] for a `run-cpu` style kernel `run` that reads its call by reference:
/// every binding the host names resident ([`Memory::resident`], ABI 1.7) comes from this
/// instance's [`resident`] store — read through `mem` only the first time a name is seen — and
/// goes back there after the call; the others are read whole as usual. A forest's 3 MB table
/// in a compiled model is then read once, not on every run.
pub fn run_via_cpu_call_kept(
    call: &KernelCall,
    mem: &mut dyn Memory,
    run: impl FnOnce(&CpuCall) -> Result<Vec<CpuWrite>, OpError>,
) -> Result<(), OpError> {
    let (mut cpu, kept) = read_whole(call, mem, true)?;
    let writes = run(&cpu);
    for (i, name) in kept {
        resident::keep(name, std::mem::take(&mut cpu.buffers[i].data));
    }
    write_back(call, mem, writes?)
}

/// A whole-grid launch as a `run-cpu` call: every binding it reads, read whole — with `keep`,
/// those the host names resident taken from the [`resident`] store when there (returned with
/// their index and name, to go back there) — and empty data for the bindings it only writes.
fn read_whole(
    call: &KernelCall,
    mem: &mut dyn Memory,
    keep: bool,
) -> Result<(CpuCall, Vec<(usize, u64)>), OpError> {
    if !call.is_whole() {
        return Err(OpError::internal(format!(
            "`{}` runs only as a whole grid (blocks {}+{} of {} asked)",
            call.entry_point,
            call.blocks.first,
            call.blocks.count,
            call.grid_blocks()
        )));
    }
    let mut buffers = Vec::with_capacity(call.buffers.len());
    let mut kept: Vec<(usize, u64)> = Vec::new();
    for b in &call.buffers {
        let access = binding_access(&call.relocations, b.binding);
        let len = usize::try_from(b.size)
            .map_err(|_| OpError::internal(format!("binding {} too large", b.binding)))?;
        let name = match access {
            Access::Read if keep => mem.resident(b.binding),
            _ => None,
        };
        let data = match (access, name) {
            (Access::Write, _) => Vec::new(),
            (_, Some(name)) => {
                kept.push((buffers.len(), name));
                match resident::take(name).filter(|d| d.len() == len) {
                    Some(d) => d,
                    None => mem.read(b.binding, 0, len)?,
                }
            }
            _ => mem.read(b.binding, 0, len)?,
        };
        buffers.push(CpuBuffer {
            binding: b.binding,
            size: b.size,
            data,
        });
    }
    let cpu = CpuCall {
        module_id: call.module_id.clone(),
        entry_point: call.entry_point.clone(),
        grid: call.grid,
        block: call.block,
        params: call.params.clone(),
        relocations: call.relocations.clone(),
        buffers,
    };
    Ok((cpu, kept))
}

/// Writes what a `run-cpu` call returned: each written binding whole (the 1.0–1.2 contract).
fn write_back(
    call: &KernelCall,
    mem: &mut dyn Memory,
    writes: Vec<CpuWrite>,
) -> Result<(), OpError> {
    for w in writes {
        let size = call.size_of(w.binding)?;
        if w.data.len() as u64 != size {
            return Err(OpError::internal(format!(
                "kernel returned {} bytes for binding {} of {size} bytes",
                w.data.len(),
                w.binding
            )));
        }
        mem.write(w.binding, 0, &w.data)?;
    }
    Ok(())
}

/// One access a [`Recorder`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    pub write: bool,
    /// A read for the matrix unit ([`Memory::read_for_unit`]), which a host does in place.
    pub unit: bool,
    pub binding: u32,
    /// Bytes of the binding.
    pub range: std::ops::Range<u64>,
}

/// A [`Memory`] that records every access before passing it on (tests: which bytes a block
/// range reads and writes).
pub struct Recorder<'a> {
    inner: &'a mut dyn Memory,
    pub log: Vec<Touch>,
}

impl<'a> Recorder<'a> {
    pub fn new(inner: &'a mut dyn Memory) -> Self {
        Recorder {
            inner,
            log: Vec::new(),
        }
    }

    /// The writes seen, in order.
    pub fn writes(&self) -> impl Iterator<Item = &Touch> + Clone {
        self.log.iter().filter(|t| t.write)
    }

    /// Bytes the kernel copied from `binding` in all (a byte read twice counts twice; reads for
    /// the matrix unit apart: [`Recorder::bytes_read_by_unit`]).
    pub fn bytes_read(&self, binding: u32) -> u64 {
        self.read_bytes(binding, false)
    }

    /// Bytes of `binding` read for the matrix unit (bound operands, read in place by a host).
    pub fn bytes_read_by_unit(&self, binding: u32) -> u64 {
        self.read_bytes(binding, true)
    }

    fn read_bytes(&self, binding: u32, unit: bool) -> u64 {
        self.log
            .iter()
            .filter(|t| !t.write && t.unit == unit && t.binding == binding)
            .map(|t| t.range.end - t.range.start)
            .sum()
    }

    fn touch(&mut self, (write, unit): (bool, bool), binding: u32, offset: u64, len: usize) {
        self.log.push(Touch {
            write,
            unit,
            binding,
            range: offset..offset.saturating_add(len as u64),
        });
    }
}

impl Memory for Recorder<'_> {
    fn read(&mut self, binding: u32, offset: u64, len: usize) -> Result<Vec<u8>, OpError> {
        self.touch((false, false), binding, offset, len);
        self.inner.read(binding, offset, len)
    }

    fn write(&mut self, binding: u32, offset: u64, data: &[u8]) -> Result<(), OpError> {
        self.touch((true, false), binding, offset, data.len());
        self.inner.write(binding, offset, data)
    }

    fn read_for_unit(&mut self, binding: u32, offset: u64, len: usize) -> Result<Vec<u8>, OpError> {
        self.touch((false, true), binding, offset, len);
        self.inner.read_for_unit(binding, offset, len)
    }

    fn resident(&mut self, binding: u32) -> Option<u64> {
        self.inner.resident(binding)
    }

    fn host_reads_in_place(&self) -> bool {
        self.inner.host_reads_in_place()
    }
}

/// Part `p` of `0..blocks` cut into `parts` near-equal contiguous ranges.
pub fn part(blocks: u64, parts: u64, p: u64) -> std::ops::Range<u64> {
    let parts = parts.max(1) as u128;
    let at = |i: u64| (blocks as u128 * i as u128 / parts) as u64;
    at(p)..at(p + 1)
}

/// Calls `f(lo, hi)` for consecutive pieces of `range` of at most `step` items (at least one).
pub fn chunks(
    range: std::ops::Range<u64>,
    step: u64,
    mut f: impl FnMut(u64, u64) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let step = step.max(1);
    let mut lo = range.start;
    while lo < range.end {
        let hi = range.end.min(lo.saturating_add(step));
        f(lo, hi)?;
        lo = hi;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dim3;

    fn call(grid: u32, first: u64, count: u64) -> KernelCall {
        KernelCall {
            module_id: String::new(),
            entry_point: String::new(),
            grid: Dim3::x(grid),
            block: Dim3::x(1),
            params: Vec::new(),
            relocations: Vec::new(),
            buffers: Vec::new(),
            blocks: BlockRange { first, count },
        }
    }

    #[test]
    fn shares_of_block_ranges_tile_the_items() {
        for (n, g) in [(10u64, 3u32), (0, 4), (7, 7), (5, 9), (1 << 40, 1000)] {
            let mut next = 0;
            for b in 0..g as u64 {
                let s = call(g, b, 1).share(n);
                assert_eq!(s.start, next, "n={n} g={g} b={b}");
                next = s.end;
            }
            assert_eq!(next, n);
            assert_eq!(call(g, 0, g as u64).share(n), 0..n);
        }
    }

    /// Binding 0: 8 bytes read, named 7 by the host when `named`; binding 1: 8 bytes written.
    struct Named {
        named: bool,
        reads: usize,
        out: Vec<u8>,
    }
    impl Memory for Named {
        fn read(&mut self, binding: u32, _: u64, len: usize) -> Result<Vec<u8>, OpError> {
            assert_eq!(binding, 0);
            self.reads += 1;
            Ok(vec![self.reads as u8; len])
        }
        fn write(&mut self, _: u32, _: u64, data: &[u8]) -> Result<(), OpError> {
            self.out = data.to_vec();
            Ok(())
        }
        fn resident(&mut self, binding: u32) -> Option<u64> {
            (self.named && binding == 0).then_some(7)
        }
    }

    fn kept_call() -> KernelCall {
        let mut p = crate::params::ParamPacker::new();
        p.ptr(0, Access::Read).ptr(1, Access::Write);
        let (params, relocations) = p.finish(64).unwrap();
        KernelCall {
            params,
            relocations,
            buffers: vec![
                BoundBuffer {
                    binding: 0,
                    size: 8,
                },
                BoundBuffer {
                    binding: 1,
                    size: 8,
                },
            ],
            ..call(1, 0, 1)
        }
    }

    /// Copies binding 0 to binding 1.
    fn copy(c: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        Ok(vec![CpuWrite {
            binding: 1,
            data: c.buffers[0].data.clone(),
        }])
    }

    #[test]
    fn resident_bytes_are_read_once_per_name_and_kept_across_errors() {
        let mut m = Named {
            named: true,
            reads: 0,
            out: Vec::new(),
        };
        for _ in 0..3 {
            run_via_cpu_call_kept(&kept_call(), &mut m, copy).unwrap();
            assert_eq!(
                m.out,
                vec![1; 8],
                "the first read's bytes, kept under name 7"
            );
        }
        assert_eq!(m.reads, 1);
        // a failing kernel gives the bytes back too
        let fail = |_: &CpuCall| -> Result<Vec<CpuWrite>, OpError> { Err(OpError::internal("no")) };
        assert!(run_via_cpu_call_kept(&kept_call(), &mut m, fail).is_err());
        run_via_cpu_call_kept(&kept_call(), &mut m, copy).unwrap();
        assert_eq!(m.reads, 1);
        // without a name every launch reads
        let mut plain = Named {
            named: false,
            reads: 0,
            out: Vec::new(),
        };
        for _ in 0..2 {
            run_via_cpu_call_kept(&kept_call(), &mut plain, copy).unwrap();
        }
        assert_eq!((plain.reads, plain.out), (2, vec![2; 8]));
        // the store drops the least recently used to fit, and never keeps more than it holds
        resident::keep(100, vec![0; resident::MAX_BYTES / 2]);
        resident::keep(101, vec![0; resident::MAX_BYTES / 2]);
        assert!(resident::take(7).is_none(), "evicted");
        resident::keep(102, vec![0; resident::MAX_BYTES + 1]);
        assert!(resident::take(102).is_none());
        assert!(resident::kept_bytes() <= resident::MAX_BYTES);
        assert_eq!(
            resident::take(101).map(|d| d.len()),
            Some(resident::MAX_BYTES / 2)
        );
    }

    #[test]
    fn heap_memory_enforces_access_and_bounds() {
        let mut m = HeapMemory::new([
            (0, Access::Read, vec![1, 2, 3]),
            (1, Access::Write, vec![0; 2]),
        ]);
        assert_eq!(m.read(0, 1, 2).unwrap(), vec![2, 3]);
        assert!(m.read(0, 2, 2).unwrap_err().to_string().contains("outside"));
        assert!(m.read(1, 0, 1).is_err(), "write-only");
        assert!(m.write(0, 0, &[9]).is_err(), "read-only");
        assert!(m.read(7, 0, 0).is_err(), "unbound");
        m.write(1, 1, &[5]).unwrap();
        let w = m.into_writes();
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].binding, w[0].data.clone()), (1, vec![0, 5]));
    }
}
