//! The statistics type every device reports ([`super::Device::pool_stats`]): both backends
//! allocate through the caching allocator ([`super::caching`]), the CPU over host segments
//! ([`super::host_raw`]), CUDA over `cuMemAlloc`.

use super::caching::AllocStats;

/// Allocation statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes in blocks handed out now (rounded).
    pub allocated_bytes: u64,
    /// Bytes held for reuse (segments minus blocks handed out).
    pub cached_bytes: u64,
    /// Highest `allocated_bytes` seen.
    pub peak_bytes: u64,
    /// Allocations served from a cached block.
    pub hits: u64,
    /// Allocations that needed a new segment.
    pub misses: u64,
    /// Bytes requested but not used because of rounding, over live blocks.
    pub rounding_waste_bytes: u64,
}

impl PoolStats {
    /// A device's figures from its allocator's and the rounding waste of its live buffers.
    pub fn from_allocator(s: &AllocStats, rounding_waste_bytes: u64) -> Self {
        PoolStats {
            allocated_bytes: s.allocated_bytes,
            cached_bytes: s.cached_bytes,
            peak_bytes: s.peak_allocated_bytes,
            hits: s.hits,
            misses: s.misses,
            rounding_waste_bytes,
        }
    }
}
