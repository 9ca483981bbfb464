//! What the CPU device learns from a kernel's in-place runs that makes even its small launches
//! better run in place — one table per fact: a kernel that asked for a resident name
//! (`kernel-io.resident`, ABI 1.7) on a launch reading a frozen buffer may keep those bytes (or
//! values derived from them) between launches; a kernel that computed on the device's vector
//! unit (ABI 1.10) copies nothing in place. A kernel seen to do
//! neither gets small launches in one `run-cpu` call, the cheaper way for them. Keyed by module
//! build and entry point (a kernel's code does not change within a build); bounded.
//!
//! Owns only the table; never runs anything.

use parking_lot::Mutex;

use crate::cmdbuf::LaunchCmd;
use crate::memo::Memo;

/// Kernels remembered (forgotten all at once past this).
const MAX_KERNELS: usize = 4096;

pub struct Keepers {
    /// Per module build and entry point.
    kernels: Mutex<Memo<[u8; 32], bool>>,
}

impl Default for Keepers {
    fn default() -> Self {
        Keepers {
            kernels: Mutex::new(Memo::new(MAX_KERNELS)),
        }
    }
}

impl Keepers {
    /// Whether `launch`'s kernel may keep frozen bytes it reads: `true` until its first launch
    /// reading a frozen buffer ran in place without asking for a resident name, and for good
    /// once one asked (a launch with nothing to do may not ask: it must not undo that).
    pub fn keeps(&self, launch: &LaunchCmd) -> bool {
        let kernels = self.kernels.lock();
        kernels
            .get(&launch.module.hash, &launch.entry_point)
            .copied()
            .unwrap_or(true)
    }

    /// Records whether `launch`, run in place on a frozen buffer, asked for a resident name.
    pub fn record(&self, launch: &LaunchCmd, asked: bool) {
        let mut kernels = self.kernels.lock();
        match kernels.get_mut(&launch.module.hash, &launch.entry_point) {
            Some(known) => *known |= asked,
            None => kernels.insert(launch.module.hash, &launch.entry_point, asked),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdbuf::ModuleRef;
    use crate::target::Dim3;

    fn launch(entry: &str, hash: u8) -> LaunchCmd {
        LaunchCmd {
            module: ModuleRef {
                plugin: "p@1.0.0".into(),
                id: "m".into(),
                hash: [hash; 32],
            },
            entry_point: entry.into(),
            grid: Dim3 { x: 1, y: 1, z: 1 },
            block: Dim3 { x: 1, y: 1, z: 1 },
            shared_memory: 0,
            params: Vec::new(),
            relocations: Vec::new(),
        }
    }

    #[test]
    fn the_table_is_bounded() {
        let k = Keepers::default();
        for i in 0..MAX_KERNELS + 10 {
            k.record(&launch(&format!("k{i}"), (i % 7) as u8), false);
            assert!(k.kernels.lock().len() <= MAX_KERNELS);
        }
        let last = MAX_KERNELS + 9;
        assert!(
            !k.keeps(&launch(&format!("k{last}"), (last % 7) as u8)),
            "the last is known"
        );
        assert!(
            k.keeps(&launch("k0", 0)),
            "forgotten when the table was cleared"
        );
    }

    #[test]
    fn kernels_keep_until_seen_not_asking_per_build_and_entry_point() {
        let k = Keepers::default();
        let (a, b, a2) = (launch("a", 1), launch("b", 1), launch("a", 2));
        assert!(k.keeps(&a), "unknown: in place, to learn");
        k.record(&a, false);
        assert!(!k.keeps(&a));
        assert!(
            k.keeps(&b) && k.keeps(&a2),
            "another entry point, another build"
        );
        k.record(&a, true);
        assert!(k.keeps(&a), "asked again");
        k.record(&a, false);
        assert!(k.keeps(&a), "a kernel that asked once keeps");
    }
}
