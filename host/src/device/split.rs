//! How many parts the CPU device splits a splittable launch into, from the time its kernel took
//! per block on earlier launches (per module build and entry point): each part must hold enough
//! work to pay for handing it to a worker thread. A kernel's first launch runs whole and is not
//! trusted (it pays for cold instances and caches), nor is the first split launch of a size. The estimate counts a launch's fixed costs
//! as work, so it is checked against what happened: per size class (blocks, by powers of two)
//! both ways are timed — whichever has not been measured yet is tried — and the faster one is
//! taken; every [`REPROBE`]th launch of a class runs the other way once, so a choice made on a
//! noisy or cold measurement is corrected.
//!
//! Owns only the cost table (bounded); never runs anything.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::cmdbuf::LaunchCmd;
use crate::memo::Memo;

/// Least estimated work per part: waking a worker and a second plugin instance costs a few
/// microseconds; below this a split loses.
const MIN_PART: Duration = Duration::from_micros(50);
/// Kernels whose cost is remembered (forgotten all at once past this).
const MAX_KERNELS: usize = 4096;
/// Every this many launches of a size class (and early on more often: [`reprobe`]), the way
/// not chosen is timed again.
const REPROBE: u64 = 64;

/// What is known of one kernel.
struct Kernel {
    /// Measured cost per block (any split); `None` until a warm launch was timed.
    ns_per_block: Option<f64>,
    /// Wall time of whole and of split launches, per size class (⌊log2 blocks⌋; ≤ 64 classes).
    walls: HashMap<u32, Walls>,
}

#[derive(Default, Clone, Copy)]
struct Walls {
    whole: Option<f64>,
    split: Option<f64>,
    /// Launches of this class asked about (drives the re-probe).
    launches: u64,
    /// Whether a split launch of this class ran (the first one is not trusted: its worker
    /// threads ran cold).
    split_ran: bool,
}

/// Measured costs of each kernel (per module build and entry point).
pub struct Splitter {
    kernels: Mutex<Memo<[u8; 32], Kernel>>,
}

impl Default for Splitter {
    fn default() -> Self {
        Splitter {
            kernels: Mutex::new(Memo::new(MAX_KERNELS)),
        }
    }
}

/// Whether the `n`th launch of a size class goes the way not chosen: soon at first (the 4th,
/// 8th, 16th and 32nd: the first walls of a model's kernels are often cold — a worker's plugin
/// instance still reading the model's tables — and a choice made on them must be checked
/// early), then every [`REPROBE`]th.
fn reprobe(n: u64) -> bool {
    n.is_multiple_of(REPROBE) || (n >= 4 && n.is_power_of_two())
}

fn class(blocks: u64) -> u32 {
    blocks.max(1).ilog2()
}

/// Moving average of a measurement (`None`: the first).
fn average(into: &mut Option<f64>, sample: f64) {
    *into = Some(into.map_or(sample, |v| 0.5 * v + 0.5 * sample));
}

/// How fast a wall estimate may rise per launch (see [`observe`]).
const RISE: f64 = 1.5;

/// A wall time estimate that follows a faster launch at once and a slower one by at most
/// [`RISE`]× per launch: noise and cold starts (a worker's plugin instance that still has to
/// read a model's tables) only ever add time, so one slow launch must not outweigh the way's
/// speed, while launches that stay slower (a busy machine) still move it within a few.
fn observe(into: &mut Option<f64>, sample: f64) {
    let sample = sample.max(1.0); // a 0 ns wall would never rise again
    *into = Some(into.map_or(sample, |v| sample.min(v * RISE)));
}

impl Splitter {
    /// Parts to run `launch` in on `workers` threads: 1 until its kernel has been timed warm,
    /// then as many as hold [`MIN_PART`] of estimated work each, at most one per worker and
    /// block — unless launches of this size were measured faster whole than split (or split
    /// was measured and whole not yet: then whole, to measure it). Every [`REPROBE`]th launch
    /// of a class goes the other way.
    pub fn parts(&self, launch: &LaunchCmd, workers: usize) -> u64 {
        let blocks = launch.grid.volume();
        let most = (workers as u64).min(blocks).max(1);
        if most == 1 {
            return 1;
        }
        let mut kernels = self.kernels.lock();
        let Some(k) = kernels.get_mut(&launch.module.hash, &launch.entry_point) else {
            return 1;
        };
        let Some(ns_per_block) = k.ns_per_block else {
            return 1;
        };
        let estimated =
            ((ns_per_block * blocks as f64 / MIN_PART.as_nanos() as f64) as u64).clamp(1, most);
        let walls = k.walls.entry(class(blocks)).or_default();
        walls.launches += 1;
        let reprobe = reprobe(walls.launches);
        let split_faster = match (walls.whole, walls.split) {
            (Some(whole), Some(split)) => split < whole,
            (None, Some(_)) => return 1,
            (_, None) => return estimated,
        };
        if split_faster != reprobe {
            estimated.max(2)
        } else {
            1
        }
    }

    /// Records that `launch` took `elapsed` in `parts` parts (run concurrently). The first
    /// launch of a kernel only makes its entry: it ran cold.
    pub fn record(&self, launch: &LaunchCmd, parts: u64, elapsed: Duration) {
        let blocks = launch.grid.volume().max(1);
        let wall = elapsed.as_nanos() as f64;
        let sample = wall * parts as f64 / blocks as f64;
        let mut kernels = self.kernels.lock();
        let Some(k) = kernels.get_mut(&launch.module.hash, &launch.entry_point) else {
            kernels.insert(
                launch.module.hash,
                &launch.entry_point,
                Kernel {
                    ns_per_block: None,
                    walls: HashMap::new(),
                },
            );
            return;
        };
        let walls = k.walls.entry(class(blocks)).or_default();
        if parts > 1 && !walls.split_ran {
            walls.split_ran = true;
            return;
        }
        if parts > 1 {
            observe(&mut walls.split, wall);
        } else {
            observe(&mut walls.whole, wall);
        }
        average(&mut k.ns_per_block, sample);
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

    /// Records `n` launches of `l` in `parts` parts taking `us` µs each.
    fn timed(s: &Splitter, l: &LaunchCmd, parts: u64, us: u64) {
        s.record(l, parts, Duration::from_micros(us));
    }

    #[test]
    fn launches_split_only_once_timed_warm_and_worth_it() {
        let s = Splitter::default();
        let big = launch(1000);
        assert_eq!(s.parts(&big, 8), 1, "untimed: whole");
        // The first launch ran cold: it says nothing.
        timed(&s, &big, 1, 50_000);
        assert_eq!(s.parts(&big, 8), 1, "timed only cold: whole");
        // 1000 blocks in 1 ms: 1 µs a block, 1 ms of work: 20 parts' worth, 8 workers.
        timed(&s, &big, 1, 1000);
        assert_eq!(s.parts(&big, 8), 8);
        assert_eq!(s.parts(&launch(120), 8), 2, "120 µs of work: two parts");
        assert_eq!(s.parts(&launch(30), 8), 1, "30 µs: whole");
        assert_eq!(s.parts(&launch(3), 8), 1);
        assert_eq!(s.parts(&big, 1), 1, "one worker: whole");
    }

    #[test]
    fn a_split_measured_slower_than_whole_is_not_made_again_for_that_size() {
        let s = Splitter::default();
        let l = launch(128);
        timed(&s, &l, 1, 10_000); // cold
        // 128 blocks whole in 128 µs (fixed costs included): worth two parts, it seems.
        timed(&s, &l, 1, 128);
        assert_eq!(s.parts(&l, 2), 2);
        // Split, it took longer (the first split ran cold and is not trusted): launches of
        // this size run whole from now on.
        timed(&s, &l, 2, 10_000);
        assert_eq!(s.parts(&l, 2), 2, "a cold split says nothing");
        timed(&s, &l, 2, 160);
        assert_eq!(s.parts(&l, 2), 1);
        assert_eq!(
            s.parts(&launch(200), 2),
            2,
            "its class's 4th launch: a re-probe"
        );
        assert_eq!(
            s.parts(&launch(200), 2),
            1,
            "same size class (128..256 blocks)"
        );
        // Larger launches (another class) are still split on the estimate.
        let big = launch(4096);
        assert_eq!(s.parts(&big, 2), 2);
        // A split that pays keeps splitting.
        timed(&s, &big, 1, 4000);
        timed(&s, &big, 2, 9000); // cold
        timed(&s, &big, 2, 2000);
        assert_eq!(s.parts(&big, 2), 2);
    }

    #[test]
    fn the_way_not_measured_is_tried_and_a_wrong_choice_is_corrected() {
        let s = Splitter::default();
        let l = launch(256);
        timed(&s, &l, 1, 10_000); // cold
        timed(&s, &l, 1, 256); // 1 µs a block: worth splitting
        // Split measured first, whole only cold-free once (256 µs)... and whole is the
        // faster: the split is measured slower, whole wins.
        assert_eq!(s.parts(&l, 2), 2);
        timed(&s, &l, 2, 9000); // cold
        timed(&s, &l, 2, 400);
        assert_eq!(s.parts(&l, 2), 1);
        // A whole wall measured while the machine was busy makes split look better...
        timed(&s, &l, 1, 2000);
        timed(&s, &l, 1, 2000);
        assert_eq!(s.parts(&l, 2), 2);
        // ...until the split itself is measured slow again: back to whole.
        timed(&s, &l, 2, 3000);
        timed(&s, &l, 2, 3000);
        assert_eq!(s.parts(&l, 2), 2, "the class's 4th launch: a re-probe");
        assert_eq!(s.parts(&l, 2), 1);
        // Only split measured (another class): whole is tried to compare.
        let m = launch(1024);
        timed(&s, &m, 2, 9000); // cold
        timed(&s, &m, 2, 500);
        assert_eq!(s.parts(&m, 2), 1, "whole not yet measured for this class");
        // A split timed cold (its workers' instances still reading a model's tables) after
        // the first: whole wins for now, and the next warm re-probe puts split back.
        let c = launch(16384);
        timed(&s, &c, 1, 9500);
        timed(&s, &c, 2, 9000); // the first split, not trusted
        timed(&s, &c, 2, 30_000); // still cold
        assert_eq!(s.parts(&c, 2), 1);
        timed(&s, &c, 2, 5000); // a warm re-probe
        assert_eq!(s.parts(&c, 2), 2);
        timed(&s, &c, 2, 40_000); // one slow launch does not undo it
        assert_eq!(s.parts(&c, 2), 2);
        // The way not chosen is re-timed every REPROBE launches.
        let ways: Vec<u64> = (0..4 * REPROBE).map(|_| s.parts(&l, 2)).collect();
        let split: Vec<usize> = (0..ways.len()).filter(|&i| ways[i] == 2).collect();
        // l's launches so far: 5; then the 8th, 16th, 32nd, 64th, 128th, 192nd, 256th
        assert_eq!(split, [2, 10, 26, 58, 122, 186, 250], "{ways:?}");
    }
}
