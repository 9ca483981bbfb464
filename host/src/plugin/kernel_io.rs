//! (ABI 1.3) In-place CPU kernels: the `kernel-io` import a kernel reads and writes its bound
//! buffers through, and where a plugin's `cpu-kernel` export is.
//!
//! During a `cpu-kernel.run` call the instance's store holds the launch's [`BoundMemory`] list;
//! `read` and `write` check the binding, its access and the range against the binding's size
//! before touching memory, and answer an error string otherwise (outside a call every access
//! fails). Owns no buffer: the device hands the memory in and takes it back when the call ends.

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Component, ComponentExportIndex, Linker, WasmList};

use super::sandbox::StoreState;
use crate::device::BoundMemory;

/// Largest `read` of one call: a kernel reads in chunks.
pub const MAX_READ_BYTES: u32 = 64 << 20;

/// The buffers of the launch a store is running (none between calls).
pub type KernelIo = Option<Arc<[BoundMemory]>>;

/// Defines `umd:plugin/kernel-io` in `linker` (semver-compatible: any 1.x ≥ 1.3 import binds;
/// 1.3–1.6 plugins import `read` and `write`, 1.7 ones `resident` too).
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("umd:plugin/kernel-io@1.10.0")?;
    inst.func_wrap(
        "read",
        |store: StoreContextMut<'_, StoreState>,
         (binding, offset, len): (u32, u64, u32)|
         -> wasmtime::Result<(Result<Vec<u8>, String>,)> {
            Ok((read(&store.data().io, binding, offset, len),))
        },
    )?;
    inst.func_wrap(
        "write",
        |store: StoreContextMut<'_, StoreState>,
         (binding, offset, data): (u32, u64, WasmList<u8>)|
         -> wasmtime::Result<(Result<(), String>,)> {
            let io = store.data().io.clone();
            let bytes = data.as_le_slice(&store);
            Ok((write(&io, binding, offset, bytes),))
        },
    )?;
    inst.func_wrap(
        "resident",
        |store: StoreContextMut<'_, StoreState>,
         (binding,): (u32,)|
         -> wasmtime::Result<(Option<u64>,)> { Ok((resident(&store.data().io, binding),)) },
    )?;
    Ok(())
}

/// (1.7) The resident name of `binding` — bound read-only to this launch and frozen by its
/// device ([`crate::device::Device::freeze`]) — or `None`.
fn resident(io: &KernelIo, binding: u32) -> Option<u64> {
    let b = find(io, binding).ok()?;
    b.asked.store(true, std::sync::atomic::Ordering::Relaxed);
    frozen_name(b)
}

/// The resident name of a binding the launch only reads, when its buffer is frozen.
fn frozen_name(b: &BoundMemory) -> Option<u64> {
    b.resident
        .filter(|_| b.access == crate::cmdbuf::Access::Read)
}

/// (1.9) The resident name and size in bytes of `binding` when the launch only reads it and
/// it is frozen — for the host's own use (the matrix unit's packed copies): unlike
/// [`resident`], not a kernel asking to keep the bytes.
pub(super) fn frozen(io: &KernelIo, binding: u32) -> Option<(u64, u64)> {
    let b = find(io, binding).ok()?;
    frozen_name(b).map(|name| (name, b.size))
}

/// The buffer bound to the running launch as `binding`.
fn find(io: &KernelIo, binding: u32) -> Result<&BoundMemory, String> {
    io.as_deref()
        .ok_or("kernel-io and bound operands are usable only during cpu-kernel.run")?
        .iter()
        .find(|b| b.binding == binding)
        .ok_or_else(|| format!("binding {binding} is not bound to this launch"))
}

/// The bound buffer `binding` and the byte range `offset .. offset + len` of it, checked.
fn locate(
    io: &KernelIo,
    binding: u32,
    offset: u64,
    len: u64,
) -> Result<(&BoundMemory, usize), String> {
    let b = find(io, binding)?;
    match offset.checked_add(len) {
        Some(end) if end <= b.size => Ok((b, offset as usize)),
        _ => Err(format!(
            "bytes {offset}..{} are outside binding {binding} of {} bytes",
            offset.saturating_add(len),
            b.size
        )),
    }
}

pub(super) fn read(io: &KernelIo, binding: u32, offset: u64, len: u32) -> Result<Vec<u8>, String> {
    if len > MAX_READ_BYTES {
        return Err(format!(
            "read of {len} bytes; at most {MAX_READ_BYTES} per call (read in chunks)"
        ));
    }
    let (b, at) = locate(io, binding, offset, len as u64)?;
    reads(b)?;
    let mut out = Vec::with_capacity(len as usize);
    b.memory.read_into(at, len as usize, &mut out);
    Ok(out)
}

/// (1.9) The buffer bound to the running launch as `binding`, when the launch reads it (the
/// matrix unit's `bound` operands); an error names why not.
pub(super) fn readable(io: &KernelIo, binding: u32) -> Result<&BoundMemory, String> {
    reads(find(io, binding)?)
}

/// `b`, when the launch reads it; an error names why not.
fn reads(b: &BoundMemory) -> Result<&BoundMemory, String> {
    match b.access.reads() {
        true => Ok(b),
        false => Err(format!(
            "binding {} is write-only in this launch",
            b.binding
        )),
    }
}

/// `b`, when the launch writes it; an error names why not.
fn writes(b: &BoundMemory) -> Result<&BoundMemory, String> {
    match b.access.writes() {
        true => Ok(b),
        false => Err(format!("binding {} is read-only in this launch", b.binding)),
    }
}

/// (1.10) The buffer bound to the running launch as `binding`, when the launch writes it (the
/// vector unit's destination); an error names why not.
pub(super) fn writable(io: &KernelIo, binding: u32) -> Result<&BoundMemory, String> {
    writes(find(io, binding)?)
}

fn write(io: &KernelIo, binding: u32, offset: u64, data: &[u8]) -> Result<(), String> {
    let (b, at) = locate(io, binding, offset, data.len() as u64)?;
    writes(b)?.memory.write_from(at, data);
    Ok(())
}

/// Where the `cpu-kernel` functions are in a component.
#[derive(Debug, Clone, Copy)]
pub struct Exports {
    pub splittable: ComponentExportIndex,
    pub run: ComponentExportIndex,
}

impl Exports {
    /// The `cpu-kernel` export of a plugin built for ABI `abi`, if it has one (1.3 and later).
    pub fn find(component: &Component, abi: &semver::Version) -> Option<Exports> {
        let iface = component.get_export_index(None, &*format!("umd:plugin/cpu-kernel@{abi}"))?;
        Some(Exports {
            splittable: component.get_export_index(Some(&iface), "splittable")?,
            run: component.get_export_index(Some(&iface), "run")?,
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cmdbuf::Access;
    use crate::device::BufferMemory;
    use parking_lot::Mutex;

    /// A buffer's bytes for tests of the host's imports (shared with the vector unit's).
    pub(in crate::plugin) struct Mem(pub Mutex<Vec<u8>>);
    impl BufferMemory for Mem {
        fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
            dst.extend_from_slice(&self.0.lock()[offset..offset + len]);
        }
        fn write_from(&self, offset: usize, src: &[u8]) {
            self.0.lock()[offset..offset + src.len()].copy_from_slice(src);
        }
    }

    fn io() -> (KernelIo, Arc<Mem>) {
        let mem = Arc::new(Mem(Mutex::new((0..16).collect())));
        let bound = |binding, size, access| BoundMemory {
            binding,
            size,
            access,
            memory: mem.clone(),
            resident: (binding != 1).then_some(40 + binding as u64),
            asked: Default::default(),
            units: Default::default(),
        };
        // Binding 0 reads the first 8 bytes; binding 1 writes; binding 2 both.
        let list: Arc<[BoundMemory]> = vec![
            bound(0, 8, Access::Read),
            bound(1, 16, Access::Write),
            bound(2, 16, Access::ReadWrite),
        ]
        .into();
        (Some(list), mem)
    }

    #[test]
    fn reads_and_writes_are_checked_before_memory_is_touched() {
        let (io, mem) = io();
        assert_eq!(read(&io, 0, 2, 3).unwrap(), vec![2, 3, 4]);
        // The binding's size in the command buffer bounds it, not the buffer's.
        assert!(
            read(&io, 0, 6, 4)
                .unwrap_err()
                .contains("outside binding 0 of 8")
        );
        assert!(read(&io, 0, u64::MAX, 2).unwrap_err().contains("outside"));
        assert!(read(&io, 1, 0, 1).unwrap_err().contains("write-only"));
        assert!(write(&io, 0, 0, &[9]).unwrap_err().contains("read-only"));
        assert!(read(&io, 7, 0, 1).unwrap_err().contains("not bound"));
        assert!(
            read(&io, 2, 0, MAX_READ_BYTES + 1)
                .unwrap_err()
                .contains("chunks")
        );
        assert!(read(&None, 0, 0, 1).unwrap_err().contains("only during"));
        write(&io, 2, 14, &[7, 7]).unwrap();
        assert!(write(&io, 2, 15, &[7, 7]).is_err());
        assert_eq!(&mem.0.lock()[12..], &[12, 13, 7, 7]);
        // a resident name only for a binding the launch only reads
        assert_eq!(resident(&io, 0), Some(40));
        assert_eq!(resident(&io, 1), None);
        assert_eq!(resident(&io, 2), None, "binding 2 is written too");
        assert_eq!(resident(&io, 7), None);
        assert_eq!(resident(&None, 0), None);
    }
}
