//! The CPU device's caching allocator: host memory blocks rounded to size classes, freed blocks
//! kept per class for reuse, a cap on cached bytes, `trim`, and statistics.
//!
//! Owns block memory only; which buffer uses a block is the device's business.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use super::DeviceError;

/// Allocation statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes in blocks handed out now (class-rounded).
    pub allocated_bytes: u64,
    /// Bytes in free blocks kept for reuse.
    pub cached_bytes: u64,
    /// Highest `allocated_bytes` seen.
    pub peak_bytes: u64,
    /// Allocations served from the cache.
    pub hits: u64,
    /// Allocations that needed fresh memory.
    pub misses: u64,
    /// Bytes requested but not used because of class rounding, over live blocks.
    pub rounding_waste_bytes: u64,
}

/// Rounds a request to its size class: 512 B steps up to 1 MiB, 64 KiB steps up to 16 MiB,
/// 2 MiB steps beyond. Small steps keep waste low; large steps keep the class count small.
/// `None` when the rounded size does not fit in a `u64` (a request near 2^64 bytes).
pub fn size_class(bytes: u64) -> Option<u64> {
    let step = match bytes {
        0..=0x10_0000 => 512,
        0x10_0001..=0x100_0000 => 64 << 10,
        _ => 2 << 20,
    };
    bytes.max(1).div_ceil(step).checked_mul(step)
}

struct Inner {
    free: BTreeMap<u64, Vec<Box<[u8]>>>,
    stats: PoolStats,
}

/// A caching allocator of host memory blocks.
pub struct HostPool {
    /// Most bytes that may be allocated at once.
    limit: u64,
    /// Most bytes kept in the cache.
    max_cached: u64,
    inner: Mutex<Inner>,
}

impl HostPool {
    pub fn new(limit: u64, max_cached: u64) -> Self {
        HostPool {
            limit,
            max_cached,
            inner: Mutex::new(Inner {
                free: BTreeMap::new(),
                stats: PoolStats::default(),
            }),
        }
    }

    /// A zeroed block of at least `bytes` (its length is the size class). A reused block is
    /// cleared before it is handed out: its previous owner's bytes never reach the next one.
    pub fn alloc(&self, bytes: u64) -> Result<Box<[u8]>, DeviceError> {
        let mut g = self.inner.lock();
        let oom = |in_use| DeviceError::OutOfMemory {
            requested: bytes,
            limit: self.limit,
            in_use,
        };
        // Refused before any side effect: a size beyond the limit (or near 2^64) never rounds.
        let class = size_class(bytes)
            .filter(|&c| c <= self.limit && c <= isize::MAX as u64)
            .ok_or_else(|| oom(g.stats.allocated_bytes))?;
        let reused = g.free.get_mut(&class).and_then(Vec::pop);
        let block = match reused {
            Some(mut b) => {
                g.stats.hits += 1;
                g.stats.cached_bytes -= class;
                // Cleared outside the lock would be cheaper for huge blocks; the pool caps
                // what it caches, so this stays bounded.
                b.fill(0);
                b
            }
            None => {
                // Cached blocks hold real memory: they count against the limit.
                let used = g.stats.allocated_bytes.saturating_add(g.stats.cached_bytes);
                if used.saturating_add(class) > self.limit {
                    // Free what is cached and retry once before giving up.
                    Self::drop_cached(&mut g);
                    if g.stats.allocated_bytes.saturating_add(class) > self.limit {
                        return Err(oom(g.stats.allocated_bytes));
                    }
                }
                g.stats.misses += 1;
                vec![0u8; class as usize].into_boxed_slice()
            }
        };
        g.stats.allocated_bytes += class;
        g.stats.rounding_waste_bytes += class - bytes;
        g.stats.peak_bytes = g.stats.peak_bytes.max(g.stats.allocated_bytes);
        Ok(block)
    }

    /// Returns a block obtained from `alloc` for `requested` bytes.
    pub fn release(&self, block: Box<[u8]>, requested: u64) {
        let class = block.len() as u64;
        let mut g = self.inner.lock();
        g.stats.allocated_bytes -= class;
        g.stats.rounding_waste_bytes -= class - requested;
        if g.stats.cached_bytes + class <= self.max_cached {
            g.stats.cached_bytes += class;
            g.free.entry(class).or_default().push(block);
        }
    }

    fn drop_cached(g: &mut Inner) {
        g.free.clear();
        g.stats.cached_bytes = 0;
    }

    /// Frees every cached block.
    pub fn trim(&self) {
        Self::drop_cached(&mut self.inner.lock());
    }

    pub fn stats(&self) -> PoolStats {
        self.inner.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up() {
        assert_eq!(size_class(0), Some(512));
        assert_eq!(size_class(513), Some(1024));
        assert_eq!(size_class(1 << 20), Some(1 << 20));
        assert_eq!(size_class((1 << 20) + 1), Some((1 << 20) + (64 << 10)));
        assert_eq!(size_class(100 << 20), Some(100 << 20));
        assert_eq!(size_class((100 << 20) + 1), Some(102 << 20));
        assert_eq!(size_class(u64::MAX), None);
        assert_eq!(size_class(u64::MAX - (1 << 20)), None);
    }

    #[test]
    fn reuse_trim_and_limits() {
        let pool = HostPool::new(1 << 20, 1 << 20);
        let a = pool.alloc(1000).unwrap();
        assert_eq!(a.len(), 1024);
        pool.release(a, 1000);
        let s = pool.stats();
        assert_eq!((s.allocated_bytes, s.cached_bytes, s.misses), (0, 1024, 1));
        let b = pool.alloc(900).unwrap();
        assert_eq!(pool.stats().hits, 1, "same class reused");
        let err = pool.alloc(1 << 20).unwrap_err();
        assert!(matches!(err, DeviceError::OutOfMemory { .. }));
        pool.release(b, 900);
        // The cache is dropped to make room before refusing.
        let big = pool.alloc(1 << 20).unwrap();
        assert_eq!(pool.stats().cached_bytes, 0);
        pool.release(big, 1 << 20);
        pool.trim();
        assert_eq!(pool.stats().cached_bytes, 0);
        assert_eq!(pool.stats().peak_bytes, 1 << 20);
    }

    #[test]
    fn huge_requests_are_refused_and_reused_blocks_are_zeroed() {
        let pool = HostPool::new(u64::MAX, 1 << 20);
        for bytes in [u64::MAX, u64::MAX - 1, 1 << 63] {
            let e = pool.alloc(bytes).unwrap_err();
            assert!(matches!(e, DeviceError::OutOfMemory { requested, .. } if requested == bytes));
        }
        let mut a = pool.alloc(100).unwrap();
        a.fill(0xA5);
        pool.release(a, 100);
        let b = pool.alloc(200).unwrap();
        assert_eq!(pool.stats().hits, 1);
        assert!(
            b.iter().all(|&x| x == 0),
            "a reused block comes back cleared"
        );
    }

    proptest::proptest! {
        #[test]
        fn accounting_balances(ops in proptest::collection::vec((0u64..5000, proptest::bool::ANY), 1..200)) {
            let pool = HostPool::new(u64::MAX, 64 << 10);
            let mut live = Vec::new();
            for (size, free) in ops {
                if free && !live.is_empty() {
                    let (b, s) = live.swap_remove(size as usize % live.len());
                    pool.release(b, s);
                } else {
                    live.push((pool.alloc(size).unwrap(), size));
                }
                let st = pool.stats();
                let expect: u64 = live.iter().map(|(b, _)| b.len() as u64).sum();
                proptest::prop_assert_eq!(st.allocated_bytes, expect);
                proptest::prop_assert!(st.cached_bytes <= 64 << 10);
            }
            for (b, s) in live.drain(..) { pool.release(b, s); }
            proptest::prop_assert_eq!(pool.stats().allocated_bytes, 0);
            proptest::prop_assert_eq!(pool.stats().rounding_waste_bytes, 0);
        }
    }
}
