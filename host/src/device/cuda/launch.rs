//! Preparing one launch, as pure functions: the parameter block with each relocation patched to
//! its buffer's device address, and the checks of a launch against the kernel it runs.
//!
//! Owns no state and calls no driver; the command buffer's own validation (block, grid, shared
//! memory and parameter sizes against the device's limits) happens before.

use crate::cmdbuf::{LaunchCmd, Relocation};

/// `params` with each relocation's 8 bytes replaced by the device address of its binding
/// (`addrs[binding]`, little-endian). The relocations must be validated: inside the block and
/// naming a binding of `addrs` (`CommandBuffer::validate` checks both).
pub fn patch_params(params: &[u8], relocs: &[Relocation], addrs: &[u64]) -> Vec<u8> {
    let mut out = params.to_vec();
    for r in relocs {
        let at = r.offset as usize;
        out[at..at + 8].copy_from_slice(&addrs[r.binding as usize].to_le_bytes());
    }
    out
}

/// Checks `launch` against its kernel: threads per block within the kernel's own limit (which
/// its register use can make lower than the device's), and static plus dynamic shared memory
/// within the device's per-block limit.
pub fn check_kernel(
    launch: &LaunchCmd,
    kernel_max_threads: u32,
    static_shared: u32,
    max_shared: u32,
) -> Result<(), String> {
    let threads = launch.block.volume();
    if threads > kernel_max_threads as u64 {
        return Err(format!(
            "block {} has {threads} threads, kernel `{}` allows at most {kernel_max_threads} on this device",
            launch.block, launch.entry_point
        ));
    }
    let shared = static_shared as u64 + launch.shared_memory as u64;
    if shared > max_shared as u64 {
        return Err(format!(
            "{} bytes of dynamic shared memory plus the kernel's {static_shared} static bytes \
             exceed the device's {max_shared} per block",
            launch.shared_memory
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdbuf::{Access, ModuleRef};
    use crate::target::Dim3;

    fn reloc(offset: u32, binding: u32) -> Relocation {
        Relocation {
            offset,
            binding,
            access: Access::Read,
        }
    }

    #[test]
    fn relocations_get_little_endian_addresses() {
        let params: Vec<u8> = (0..32).collect();
        let addrs = [0x1122_3344_5566_7788, 0xdead_beef_0000_0000, 7];
        let out = patch_params(&params, &[reloc(8, 1), reloc(24, 0)], &addrs);
        assert_eq!(out.len(), 32);
        assert_eq!(&out[..8], &params[..8], "untouched");
        assert_eq!(&out[8..16], &0xdead_beef_0000_0000u64.to_le_bytes());
        assert_eq!(&out[16..24], &params[16..24], "untouched");
        assert_eq!(
            out[24..32],
            [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        assert_eq!(
            &params[8..16],
            &[8, 9, 10, 11, 12, 13, 14, 15],
            "input unchanged"
        );
    }

    #[test]
    fn no_relocations_is_a_copy_and_bindings_may_repeat() {
        let params = vec![5u8; 16];
        assert_eq!(patch_params(&params, &[], &[]), params);
        let out = patch_params(&params, &[reloc(0, 0), reloc(8, 0)], &[42]);
        assert_eq!(&out[..8], &out[8..]);
        assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), 42);
    }

    fn launch(block: Dim3, shared_memory: u32) -> LaunchCmd {
        LaunchCmd {
            module: ModuleRef {
                plugin: "p@1".into(),
                id: "m".into(),
                hash: [0; 32],
            },
            entry_point: "k".into(),
            grid: Dim3::new(1, 1, 1),
            block,
            shared_memory,
            params: vec![],
            relocations: vec![],
        }
    }

    #[test]
    fn kernel_limits() {
        let l = launch(Dim3::new(256, 2, 1), 1024);
        assert_eq!(check_kernel(&l, 512, 0, 48 << 10), Ok(()));
        let e = check_kernel(&l, 384, 0, 48 << 10).unwrap_err();
        assert!(
            e.contains("512 threads") && e.contains("at most 384"),
            "{e}"
        );
        assert_eq!(check_kernel(&l, 1024, (48 << 10) - 1024, 48 << 10), Ok(()));
        let e = check_kernel(&l, 1024, (48 << 10) - 1023, 48 << 10).unwrap_err();
        assert!(e.contains("exceed the device's 49152"), "{e}");
    }
}
