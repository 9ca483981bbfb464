//! How many parts the CPU device splits a splittable launch into, from the time its kernel took
//! per block on earlier launches (per module build and entry point): each part must hold enough
//! work to pay for handing it to a worker thread. A kernel's first launch runs whole, timed.
//! The estimate counts a launch's fixed costs as work, so it is checked against what happened:
//! per size class (blocks, by powers of two), once a split launch has been timed, a split that
//! took longer than the whole launch did is not made again for that class.
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

/// What is known of one kernel.
struct Kernel {
    /// Measured cost per block (any split).
    ns_per_block: f64,
    /// Wall time of whole and of split launches, per size class (⌊log2 blocks⌋; ≤ 64 classes).
    walls: HashMap<u32, Walls>,
}

#[derive(Default, Clone, Copy)]
struct Walls {
    whole: Option<f64>,
    split: Option<f64>,
}

/// Measured costs of each kernel.
#[derive(Default)]
pub struct Splitter {
    kernels: Mutex<HashMap<([u8; 32], String), Kernel>>,
}

fn class(blocks: u64) -> u32 {
    blocks.max(1).ilog2()
}

/// Moving average of a measurement (`None`: the first).
fn average(into: &mut Option<f64>, sample: f64) {
    *into = Some(into.map_or(sample, |v| 0.5 * v + 0.5 * sample));
}

impl Splitter {
    /// Parts to run `launch` in on `workers` threads: 1 until its kernel has been timed, then
    /// as many as hold [`MIN_PART`] of estimated work each, at most one per worker and block —
    /// or 1 where splits of launches of this size were measured slower than whole ones.
    pub fn parts(&self, launch: &LaunchCmd, workers: usize) -> u64 {
        let blocks = launch.grid.volume();
        let key = (launch.module.hash, launch.entry_point.clone());
        let kernels = self.kernels.lock();
        let Some(k) = kernels.get(&key) else {
            return 1;
        };
        if let Some(Walls {
            whole: Some(whole),
            split: Some(split),
        }) = k.walls.get(&class(blocks))
            && split >= whole
        {
            return 1;
        }
        let estimate = k.ns_per_block * blocks as f64;
        let parts = (estimate / MIN_PART.as_nanos() as f64) as u64;
        parts.clamp(1, (workers as u64).min(blocks).max(1))
    }

    /// Records that `launch` took `elapsed` in `parts` parts (run concurrently).
    pub fn record(&self, launch: &LaunchCmd, parts: u64, elapsed: Duration) {
        let blocks = launch.grid.volume().max(1);
        let wall = elapsed.as_nanos() as f64;
        let sample = wall * parts as f64 / blocks as f64;
        let key = (launch.module.hash, launch.entry_point.clone());
        let mut kernels = self.kernels.lock();
        if kernels.len() >= MAX_KERNELS && !kernels.contains_key(&key) {
            kernels.clear();
        }
        let k = kernels.entry(key).or_insert(Kernel {
            ns_per_block: sample,
            walls: HashMap::new(),
        });
        k.ns_per_block = 0.5 * k.ns_per_block + 0.5 * sample;
        let walls = k.walls.entry(class(blocks)).or_default();
        if parts > 1 {
            average(&mut walls.split, wall);
        } else {
            average(&mut walls.whole, wall);
        }
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

    #[test]
    fn a_split_measured_slower_than_whole_is_not_made_again_for_that_size() {
        let s = Splitter::default();
        // 128 blocks whole in 128 µs (fixed costs included): worth two parts, it seems.
        s.record(&launch(128), 1, Duration::from_micros(128));
        assert_eq!(s.parts(&launch(128), 2), 2);
        // Split, it took longer: launches of this size run whole from now on.
        s.record(&launch(128), 2, Duration::from_micros(160));
        assert_eq!(s.parts(&launch(128), 2), 1);
        assert_eq!(
            s.parts(&launch(200), 2),
            1,
            "same size class (128..256 blocks)"
        );
        // Larger launches (another class) are still split on the estimate.
        assert_eq!(s.parts(&launch(4096), 2), 2);
        // A split that pays keeps splitting.
        s.record(&launch(4096), 1, Duration::from_millis(4));
        s.record(&launch(4096), 2, Duration::from_millis(2));
        assert_eq!(s.parts(&launch(4096), 2), 2);
    }
}
