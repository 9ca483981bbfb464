//! How many parts the CPU device splits a splittable launch into, from the time its kernel took
//! per block on earlier launches (per module build and entry point): each part must hold enough
//! work to pay for handing it to a worker thread. A kernel's first launch runs whole, timed.
//!
//! Owns only the cost table (bounded); never runs anything.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::cmdbuf::LaunchCmd;

/// Least estimated work per part: waking a worker and a second plugin instance costs a few
/// microseconds; below this a split loses.
const MIN_PART: Duration = Duration::from_micros(50);
/// Kernels whose cost is remembered (forgotten all at once past this).
const MAX_KERNELS: usize = 4096;

/// Measured cost per block of each kernel.
#[derive(Default)]
pub struct Splitter {
    ns_per_block: Mutex<HashMap<([u8; 32], String), f64>>,
}

impl Splitter {
    /// Parts to run `launch` in on `workers` threads: 1 until its kernel has been timed, then
    /// as many as hold [`MIN_PART`] of estimated work each, at most one per worker and block.
    pub fn parts(&self, launch: &LaunchCmd, workers: usize) -> u64 {
        let blocks = launch.grid.volume();
        let key = (launch.module.hash, launch.entry_point.clone());
        let Some(per_block) = self.ns_per_block.lock().get(&key).copied() else {
            return 1;
        };
        let estimate = per_block * blocks as f64;
        let parts = (estimate / MIN_PART.as_nanos() as f64) as u64;
        parts.clamp(1, (workers as u64).min(blocks).max(1))
    }

    /// Records that `launch` took `elapsed` in `parts` parts (run concurrently).
    pub fn record(&self, launch: &LaunchCmd, parts: u64, elapsed: Duration) {
        let blocks = launch.grid.volume().max(1);
        let sample = elapsed.as_nanos() as f64 * parts as f64 / blocks as f64;
        let key = (launch.module.hash, launch.entry_point.clone());
        let mut costs = self.ns_per_block.lock();
        if costs.len() >= MAX_KERNELS && !costs.contains_key(&key) {
            costs.clear();
        }
        let cost = costs.entry(key).or_insert(sample);
        *cost = 0.5 * *cost + 0.5 * sample;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdbuf::ModuleRef;
    use crate::target::Dim3;

    fn launch(blocks: u32) -> LaunchCmd {
        LaunchCmd {
            module: ModuleRef {
                plugin: "p@1.0.0".into(),
                id: "m".into(),
                hash: [7; 32],
            },
            entry_point: "k".into(),
            grid: Dim3 {
                x: blocks,
                y: 1,
                z: 1,
            },
            block: Dim3 { x: 1, y: 1, z: 1 },
            shared_memory: 0,
            params: Vec::new(),
            relocations: Vec::new(),
        }
    }

    #[test]
    fn launches_split_only_once_timed_and_worth_it() {
        let s = Splitter::default();
        let big = launch(1000);
        assert_eq!(s.parts(&big, 8), 1, "untimed: whole");
        // 1000 blocks in 1 ms: 1 µs a block, 1 ms of work: 20 parts' worth, 8 workers.
        s.record(&big, 1, Duration::from_millis(1));
        assert_eq!(s.parts(&big, 8), 8);
        assert_eq!(s.parts(&launch(120), 8), 2, "120 µs of work: two parts");
        assert_eq!(s.parts(&launch(30), 8), 1, "30 µs: whole");
        assert_eq!(s.parts(&launch(3), 8), 1);
    }
}
