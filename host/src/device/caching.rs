//! Device-memory caching allocator policy (after PyTorch's CUDA caching allocator): rounds
//! requests, carves blocks out of segments taken from a [`RawAllocator`], splits and coalesces
//! them, keeps freed blocks per stream for reuse, waits on recorded events before cross-stream
//! reuse, and releases cached segments on out-of-memory or [`CachingAllocator::empty_cache`].
//!
//! Owns only the bookkeeping of device address ranges. It must not touch device memory contents,
//! call the driver directly, create or synchronize streams or events (it only asks
//! [`EventQuery::is_complete`]), or know which buffer uses a block: that is the device's business.
//!
//! Not internally synchronized: every mutating call takes `&mut self`; the device wraps the
//! allocator in a `parking_lot::Mutex` (it is `Send`, as raw allocators and events are).

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

/// Every block size is a multiple of this many bytes.
pub const ROUNDING: u64 = 512;
/// Largest block served from the small pool.
pub const SMALL_BLOCK_MAX: u64 = 1 << 20;
/// Segment size the small pool requests from the raw allocator.
pub const SMALL_SEGMENT: u64 = 2 << 20;
/// Large-pool segments are multiples of this.
pub const LARGE_SEGMENT_ROUNDING: u64 = 2 << 20;
/// Requests of at least this size get a segment of exactly their rounded size.
pub const HUGE_REQUEST: u64 = 10 << 20;

/// The raw device allocator ran out of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("raw device allocation failed: out of memory")]
pub struct RawOom;

/// The device allocator underneath (e.g. `cuMemAlloc`/`cuMemFree`).
pub trait RawAllocator: Send {
    /// Allocates `bytes` of device memory and returns its address.
    fn alloc(&mut self, bytes: u64) -> Result<u64, RawOom>;
    /// Frees memory returned by [`RawAllocator::alloc`].
    fn free(&mut self, addr: u64);
}

/// A stream: work on one stream runs in order, so a block freed on it is reusable on it.
pub use super::StreamId;

/// A device event recorded on a stream; the allocator only polls it.
pub trait EventQuery: Send {
    /// True once the work before the event has finished.
    fn is_complete(&self) -> bool;
}

impl<F: Fn() -> bool + Send> EventQuery for F {
    fn is_complete(&self) -> bool {
        self()
    }
}

/// A block handed out by [`CachingAllocator::alloc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// Device address of the block.
    pub addr: u64,
    /// Block size: the request rounded up to [`ROUNDING`], or more when a remainder was too
    /// small to split off.
    pub size: u64,
}

/// Allocator errors.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocError {
    /// The raw allocator failed even after releasing every cached segment.
    #[error(
        "out of device memory: {requested} bytes requested, {allocated} allocated, \
         {cached} cached, {reserved} reserved"
    )]
    OutOfMemory {
        requested: u64,
        allocated: u64,
        cached: u64,
        reserved: u64,
    },
    /// The address is not the start of any block this allocator knows.
    #[error("device address {addr:#x} was not allocated by this allocator")]
    UnknownAddress { addr: u64 },
    /// The block at this address is already free.
    #[error("double free of device address {addr:#x}")]
    DoubleFree { addr: u64 },
    /// `record_stream` on a block that is not allocated.
    #[error("device address {addr:#x} is not a live allocation")]
    NotLive { addr: u64 },
}

/// Allocator statistics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AllocStats {
    /// Bytes in blocks handed out now.
    pub allocated_bytes: u64,
    /// Bytes held from the raw allocator (all segments).
    pub reserved_bytes: u64,
    /// Bytes in free blocks, including ones waiting on events (`reserved - allocated`).
    pub cached_bytes: u64,
    /// Highest `allocated_bytes` seen.
    pub peak_allocated_bytes: u64,
    /// Allocations served from a cached block.
    pub hits: u64,
    /// Allocations that needed a new segment.
    pub misses: u64,
    /// Successful raw allocations.
    pub raw_allocs: u64,
    /// Raw frees.
    pub raw_frees: u64,
    /// Segments held now.
    pub segments: u64,
    /// `1 - largest_free_block / cached_bytes`, or 0.0 when nothing is cached.
    pub fragmentation: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Pool {
    Small,
    Large,
}

/// Free-set key: best fit is the first key at or after `(pool, stream, size, 0)`.
type FreeKey = (Pool, StreamId, u64, u64);

struct Block {
    size: u64,
    /// Base address of the segment holding the block; blocks merge only within a segment.
    segment: u64,
    pool: Pool,
    /// Stream the block (and its whole segment) belongs to.
    stream: StreamId,
    allocated: bool,
    /// Events recorded by `record_stream`; the block is not reusable until all complete.
    events: Vec<Box<dyn EventQuery>>,
}

impl Block {
    fn new(size: u64, segment: u64, pool: Pool, stream: StreamId) -> Self {
        let events = Vec::new();
        Block {
            size,
            segment,
            pool,
            stream,
            allocated: false,
            events,
        }
    }

    fn key(&self, addr: u64) -> FreeKey {
        (self.pool, self.stream, self.size, addr)
    }

    fn is_free(&self) -> bool {
        !self.allocated && self.events.is_empty()
    }
}

/// Rounds a request to [`ROUNDING`]; `None` on overflow.
fn round_size(bytes: u64) -> Option<u64> {
    bytes.max(1).checked_next_multiple_of(ROUNDING)
}

/// The stream-aware caching allocator. See the module docs.
pub struct CachingAllocator<A: RawAllocator> {
    raw: A,
    /// Every block (allocated, pending or free) by address.
    blocks: BTreeMap<u64, Block>,
    /// Segment base address to segment size.
    segments: BTreeMap<u64, u64>,
    /// Free, reusable blocks.
    free: BTreeSet<FreeKey>,
    /// Freed blocks still waiting on recorded events.
    pending: Vec<u64>,
    stats: AllocStats,
}

impl<A: RawAllocator> CachingAllocator<A> {
    /// An empty allocator over `raw`.
    pub fn new(raw: A) -> Self {
        Self {
            raw,
            blocks: BTreeMap::new(),
            segments: BTreeMap::new(),
            free: BTreeSet::new(),
            pending: Vec::new(),
            stats: AllocStats::default(),
        }
    }

    /// The raw allocator underneath.
    pub fn raw(&self) -> &A {
        &self.raw
    }

    /// Allocates at least `bytes` (0 counts as 1) for use on `stream`.
    pub fn alloc(&mut self, bytes: u64, stream: StreamId) -> Result<Allocation, AllocError> {
        let size = round_size(bytes).ok_or_else(|| self.oom(bytes))?;
        self.process_events();
        let pool = if size <= SMALL_BLOCK_MAX {
            Pool::Small
        } else {
            Pool::Large
        };
        let addr = match self.take_free(pool, stream, size) {
            Some(addr) => {
                self.stats.hits += 1;
                addr
            }
            None => {
                self.stats.misses += 1;
                self.new_segment(pool, stream, size, bytes)?
            }
        };
        self.split(addr, size);
        let block = self.blocks.get_mut(&addr).expect("chosen block exists");
        block.allocated = true;
        let size = block.size;
        self.stats.allocated_bytes += size;
        self.stats.peak_allocated_bytes = self
            .stats
            .peak_allocated_bytes
            .max(self.stats.allocated_bytes);
        Ok(Allocation { addr, size })
    }

    /// Frees the block at `addr`: reusable on its stream at once, or once all events recorded
    /// for it complete. A repeated free is `DoubleFree` while a block still starts at `addr`,
    /// else `UnknownAddress`; a stale free after `addr` was handed out again cannot be told apart.
    pub fn free(&mut self, addr: u64) -> Result<(), AllocError> {
        let block = self
            .blocks
            .get_mut(&addr)
            .ok_or(AllocError::UnknownAddress { addr })?;
        if !block.allocated {
            return Err(AllocError::DoubleFree { addr });
        }
        block.allocated = false;
        self.stats.allocated_bytes -= block.size;
        block.events.retain(|e| !e.is_complete());
        if block.events.is_empty() {
            self.insert_free(addr);
        } else {
            self.pending.push(addr);
        }
        Ok(())
    }

    /// Records that the live block at `addr` is used on `stream`; after it is freed it stays
    /// unavailable until `event` completes. `event` must complete only after all of `stream`'s
    /// work on the block (record it after the last use). Same-stream records are ignored.
    pub fn record_stream(
        &mut self,
        addr: u64,
        stream: StreamId,
        event: impl EventQuery + 'static,
    ) -> Result<(), AllocError> {
        let block = self
            .blocks
            .get_mut(&addr)
            .ok_or(AllocError::UnknownAddress { addr })?;
        if !block.allocated {
            return Err(AllocError::NotLive { addr });
        }
        if stream != block.stream {
            block.events.push(Box::new(event));
        }
        Ok(())
    }

    /// Polls the events of freed blocks; blocks whose events all completed become reusable.
    /// Returns how many did. Also runs on every [`alloc`](Self::alloc).
    pub fn process_events(&mut self) -> usize {
        // One block at a time: a block is listed (and merged) only after its own events are
        // done, and blocks still in `pending` keep non-empty events, so they never merge.
        let mut ready = 0;
        for addr in std::mem::take(&mut self.pending) {
            let block = self.blocks.get_mut(&addr).expect("pending block exists");
            block.events.retain(|e| !e.is_complete());
            if block.events.is_empty() {
                self.insert_free(addr);
                ready += 1;
            } else {
                self.pending.push(addr);
            }
        }
        ready
    }

    /// Returns every fully free segment to the raw allocator; returns the bytes released.
    pub fn empty_cache(&mut self) -> u64 {
        self.process_events();
        self.release_cached()
    }

    /// Same as [`empty_cache`](Self::empty_cache) (the CPU pool's name).
    pub fn trim(&mut self) -> u64 {
        self.empty_cache()
    }

    /// Current statistics.
    pub fn stats(&self) -> AllocStats {
        let (mut cached, mut largest) = (0, 0);
        for block in self.blocks.values().filter(|b| !b.allocated) {
            cached += block.size;
            largest = largest.max(block.size);
        }
        AllocStats {
            cached_bytes: cached,
            segments: self.segments.len() as u64,
            fragmentation: if cached == 0 {
                0.0
            } else {
                1.0 - largest as f64 / cached as f64
            },
            ..self.stats
        }
    }

    fn oom(&self, requested: u64) -> AllocError {
        let s = self.stats();
        AllocError::OutOfMemory {
            requested,
            allocated: s.allocated_bytes,
            cached: s.cached_bytes,
            reserved: s.reserved_bytes,
        }
    }

    /// Removes and returns the smallest free block of `pool` on `stream` that fits `size`.
    fn take_free(&mut self, pool: Pool, stream: StreamId, size: u64) -> Option<u64> {
        let key = *self.free.range((pool, stream, size, 0)..).next()?;
        if key.0 != pool || key.1 != stream {
            return None;
        }
        self.free.remove(&key);
        Some(key.3)
    }

    /// Gets a new segment for a `size` block from the raw allocator, releasing the cache and
    /// retrying once on failure; returns the address of its single (allocated-to-be) block.
    fn new_segment(
        &mut self,
        pool: Pool,
        stream: StreamId,
        size: u64,
        requested: u64,
    ) -> Result<u64, AllocError> {
        let segment_size = match pool {
            Pool::Small => Some(SMALL_SEGMENT),
            Pool::Large if size >= HUGE_REQUEST => Some(size),
            Pool::Large => size.checked_next_multiple_of(LARGE_SEGMENT_ROUNDING),
        }
        .ok_or_else(|| self.oom(requested))?;
        let addr = match self.raw.alloc(segment_size) {
            Ok(addr) => addr,
            Err(RawOom) => {
                self.release_cached();
                self.raw
                    .alloc(segment_size)
                    .map_err(|RawOom| self.oom(requested))?
            }
        };
        self.stats.raw_allocs += 1;
        self.stats.reserved_bytes += segment_size;
        self.segments.insert(addr, segment_size);
        let block = Block::new(segment_size, addr, pool, stream);
        self.blocks.insert(addr, block);
        Ok(addr)
    }

    /// Splits the (unlisted) free block at `addr` down to `size` when the remainder is worth
    /// keeping, listing the remainder as free.
    fn split(&mut self, addr: u64, size: u64) {
        let block = self.blocks.get_mut(&addr).expect("split block exists");
        let rest = block.size - size;
        let keep = match block.pool {
            Pool::Small => rest >= ROUNDING,
            Pool::Large => rest > SMALL_BLOCK_MAX,
        };
        if !keep {
            return;
        }
        block.size = size;
        let remainder = Block::new(rest, block.segment, block.pool, block.stream);
        self.free.insert(remainder.key(addr + size));
        self.blocks.insert(addr + size, remainder);
    }

    /// Lists the (unlisted, free) block at `addr` as free, merged with free neighbours.
    fn insert_free(&mut self, addr: u64) {
        let block = &self.blocks[&addr];
        let (mut start, mut size, segment) = (addr, block.size, block.segment);
        let next = addr + size;
        if let Some(n) = self.blocks.get(&next)
            && n.segment == segment
            && n.is_free()
        {
            self.free.remove(&n.key(next));
            size += n.size;
            self.blocks.remove(&next);
        }
        if let Some((&prev, p)) = self.blocks.range(..addr).next_back()
            && p.segment == segment
            && p.is_free()
        {
            self.free.remove(&p.key(prev));
            size += p.size;
            self.blocks.remove(&addr);
            start = prev;
        }
        let block = self.blocks.get_mut(&start).expect("merged block exists");
        block.size = size;
        self.free.insert(block.key(start));
    }

    /// Returns every segment that is one free block to the raw allocator.
    fn release_cached(&mut self) -> u64 {
        let whole: Vec<(u64, u64)> = self
            .segments
            .iter()
            .filter(|&(base, &size)| {
                let b = &self.blocks[base];
                b.size == size && b.is_free()
            })
            .map(|(&base, &size)| (base, size))
            .collect();
        let mut released = 0;
        for (base, size) in whole {
            let b = self.blocks.remove(&base).expect("segment block exists");
            self.free.remove(&b.key(base));
            self.segments.remove(&base);
            self.raw.free(base);
            self.stats.raw_frees += 1;
            self.stats.reserved_bytes -= size;
            released += size;
        }
        released
    }
}

impl<A: RawAllocator> Drop for CachingAllocator<A> {
    /// Returns fully free segments; segments with live or pending blocks are left to the raw
    /// allocator's own teardown.
    fn drop(&mut self) {
        self.empty_cache();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const MIB: u64 = 1 << 20;
    const S0: StreamId = StreamId(0);
    const S1: StreamId = StreamId(1);

    /// Hands out increasing, non-adjacent addresses; fails once live bytes would exceed `limit`.
    struct FakeRaw {
        next: u64,
        live: BTreeMap<u64, u64>,
        limit: u64,
    }

    impl FakeRaw {
        fn with_limit(limit: u64) -> Self {
            Self {
                next: 0x1000_0000,
                live: BTreeMap::new(),
                limit,
            }
        }
        fn live_bytes(&self) -> u64 {
            self.live.values().sum()
        }
    }

    impl RawAllocator for FakeRaw {
        fn alloc(&mut self, bytes: u64) -> Result<u64, RawOom> {
            if self.live_bytes().saturating_add(bytes) > self.limit {
                return Err(RawOom);
            }
            let addr = self.next;
            self.next = (addr + bytes).next_multiple_of(SMALL_SEGMENT) + SMALL_SEGMENT;
            self.live.insert(addr, bytes);
            Ok(addr)
        }
        fn free(&mut self, addr: u64) {
            assert!(self.live.remove(&addr).is_some(), "bad raw free {addr:#x}");
        }
    }

    /// Blocks tile their segments, the free set lists exactly the free blocks, and no two
    /// free blocks of a segment are adjacent (coalescing is complete).
    fn check_invariants(a: &CachingAllocator<FakeRaw>) {
        let listed: BTreeSet<FreeKey> = a
            .blocks
            .iter()
            .filter(|(_, b)| b.is_free())
            .map(|(&addr, b)| b.key(addr))
            .collect();
        assert_eq!(listed, a.free);
        for (&base, &len) in &a.segments {
            let (mut at, mut prev_free) = (base, false);
            for (&addr, b) in a.blocks.range(base..base + len) {
                assert_eq!((addr, b.segment), (at, base));
                assert!(
                    !(prev_free && b.is_free()),
                    "uncoalesced neighbours at {addr:#x}"
                );
                (at, prev_free) = (addr + b.size, b.is_free());
            }
            assert_eq!(at, base + len);
        }
    }

    fn alloc_with(limit: u64) -> CachingAllocator<FakeRaw> {
        CachingAllocator::new(FakeRaw::with_limit(limit))
    }

    fn flag() -> (Arc<AtomicBool>, impl EventQuery + 'static) {
        let f = Arc::new(AtomicBool::new(false));
        let g = f.clone();
        (f, move || g.load(Ordering::SeqCst))
    }

    #[test]
    fn freed_block_is_reused_as_a_hit() {
        let mut a = alloc_with(u64::MAX);
        let x = a.alloc(1000, S0).unwrap();
        assert_eq!(x.size, 1024);
        a.free(x.addr).unwrap();
        let y = a.alloc(1000, S0).unwrap();
        assert_eq!(y.addr, x.addr);
        let s = a.stats();
        assert_eq!((s.hits, s.misses, s.raw_allocs), (1, 1, 1));
    }

    #[test]
    fn small_allocs_split_one_segment() {
        let mut a = alloc_with(u64::MAX);
        let x = a.alloc(4096, S0).unwrap();
        let y = a.alloc(100, S0).unwrap();
        assert_eq!(a.raw().live.len(), 1);
        let (&base, &len) = a.raw().live.iter().next().unwrap();
        assert_eq!(len, SMALL_SEGMENT);
        for b in [x, y] {
            assert!(b.addr >= base && b.addr + b.size <= base + len);
        }
        assert!(x.addr + x.size <= y.addr || y.addr + y.size <= x.addr);
        assert_eq!(a.stats().hits, 1);
    }

    #[test]
    fn free_neighbours_coalesce() {
        let mut a = alloc_with(u64::MAX);
        let blocks: Vec<_> = (0..4).map(|_| a.alloc(256 << 10, S0).unwrap()).collect();
        assert_eq!(a.stats().raw_allocs, 1);
        a.free(blocks[1].addr).unwrap();
        a.free(blocks[2].addr).unwrap();
        let merged = a.alloc(512 << 10, S0).unwrap();
        assert_eq!(merged.addr, blocks[1].addr);
        assert_eq!(a.stats().raw_allocs, 1);
        for b in [blocks[0], blocks[3], merged] {
            a.free(b.addr).unwrap();
        }
        // Everything merged back into one whole segment, so it is released.
        assert_eq!(a.empty_cache(), SMALL_SEGMENT);
    }

    #[test]
    fn block_freed_on_one_stream_is_not_reused_on_another() {
        let mut a = alloc_with(u64::MAX);
        let x = a.alloc(MIB, S0).unwrap();
        a.free(x.addr).unwrap();
        let y = a.alloc(MIB, S1).unwrap();
        assert_ne!(y.addr, x.addr);
        assert_eq!(a.stats().raw_allocs, 2);
        assert_eq!(a.alloc(MIB, S0).unwrap().addr, x.addr);
    }

    #[test]
    fn recorded_stream_blocks_reuse_until_event_completes() {
        let mut a = alloc_with(u64::MAX);
        let x = a.alloc(3 * MIB, S0).unwrap();
        let (done, event) = flag();
        a.record_stream(x.addr, S1, event).unwrap();
        a.free(x.addr).unwrap();
        let y = a.alloc(3 * MIB, S0).unwrap();
        assert_ne!(y.addr, x.addr);
        assert_eq!(a.process_events(), 0);
        done.store(true, Ordering::SeqCst);
        assert_eq!(a.alloc(3 * MIB, S0).unwrap().addr, x.addr);
        assert!(matches!(
            a.record_stream(1, S1, || true),
            Err(AllocError::UnknownAddress { .. })
        ));
    }

    #[test]
    fn oom_releases_cache_and_retries() {
        let mut a = alloc_with(8 * MIB);
        let x = a.alloc(4 * MIB, S0).unwrap();
        let y = a.alloc(4 * MIB, S1).unwrap();
        a.free(x.addr).unwrap();
        a.free(y.addr).unwrap();
        assert_eq!(a.stats().cached_bytes, 8 * MIB);
        // 6 MiB fits in no cached block but fits once the cache is released.
        let z = a.alloc(6 * MIB, S0).unwrap();
        assert_eq!(z.size, 6 * MIB);
        let s = a.stats();
        assert_eq!((s.raw_frees, s.segments, s.reserved_bytes), (2, 1, 6 * MIB));
        assert_eq!(a.raw().live_bytes(), 6 * MIB);
    }

    #[test]
    fn impossible_alloc_reports_numbers() {
        let mut a = alloc_with(8 * MIB);
        let x = a.alloc(2 * MIB, S0).unwrap();
        let y = a.alloc(2 * MIB, S0).unwrap();
        a.free(y.addr).unwrap();
        let err = a.alloc(7 * MIB, S0).unwrap_err();
        assert_eq!(
            err,
            AllocError::OutOfMemory {
                requested: 7 * MIB,
                allocated: 2 * MIB,
                cached: 0,
                reserved: 2 * MIB,
            }
        );
        assert!(
            err.to_string()
                .contains(&format!("{} bytes requested", 7 * MIB))
        );
        assert_eq!(a.raw().live.get(&x.addr), Some(&(2 * MIB)));
        assert!(matches!(
            a.alloc(u64::MAX, S0),
            Err(AllocError::OutOfMemory { .. })
        ));
    }

    #[test]
    fn trim_returns_everything() {
        let mut a = alloc_with(u64::MAX);
        let sizes = [100, 2 * MIB, 12 * MIB, 700 << 10];
        let blocks: Vec<_> = sizes.iter().map(|&b| a.alloc(b, S0).unwrap()).collect();
        assert_eq!(a.trim(), 0);
        for b in &blocks {
            a.free(b.addr).unwrap();
        }
        let reserved = a.stats().reserved_bytes;
        assert_eq!(a.trim(), reserved);
        assert!(a.raw().live.is_empty());
        let s = a.stats();
        assert_eq!((s.reserved_bytes, s.cached_bytes, s.segments), (0, 0, 0));
    }

    #[test]
    fn stats_fields_track_usage() {
        let mut a = alloc_with(u64::MAX);
        let x = a.alloc(1, S0).unwrap();
        let y = a.alloc(10 * MIB + 1, S0).unwrap();
        assert_eq!((x.size, y.size), (512, 10 * MIB + 512));
        a.free(x.addr).unwrap();
        let s = a.stats();
        assert_eq!(s.allocated_bytes, 10 * MIB + 512);
        assert_eq!(s.reserved_bytes, SMALL_SEGMENT + 10 * MIB + 512);
        assert_eq!(s.cached_bytes, SMALL_SEGMENT);
        assert_eq!(s.peak_allocated_bytes, 10 * MIB + 1024);
        assert_eq!((s.hits, s.misses, s.raw_allocs, s.raw_frees), (0, 2, 2, 0));
        assert_eq!((s.segments, s.fragmentation), (2, 0.0));
        // Two 512 KiB free blocks apart: the largest is half the free bytes.
        let blocks: Vec<_> = (0..3).map(|_| a.alloc(MIB / 2, S0).unwrap()).collect();
        a.free(blocks[0].addr).unwrap();
        let s = a.stats();
        assert_eq!(s.cached_bytes, MIB);
        assert!((s.fragmentation - 0.5).abs() < 1e-9);
    }

    #[test]
    fn unknown_and_double_free_are_errors() {
        let mut a = alloc_with(u64::MAX);
        assert_eq!(a.free(42), Err(AllocError::UnknownAddress { addr: 42 }));
        let x = a.alloc(100, S0).unwrap();
        let _y = a.alloc(100, S0).unwrap();
        a.free(x.addr).unwrap();
        assert_eq!(a.free(x.addr), Err(AllocError::DoubleFree { addr: x.addr }));
        assert_eq!(
            a.record_stream(x.addr, S1, || true),
            Err(AllocError::NotLive { addr: x.addr })
        );
    }

    #[test]
    fn large_pool_rounding() {
        let mut a = alloc_with(u64::MAX);
        let x = a.alloc(3 * MIB, S0).unwrap();
        assert_eq!(a.raw().live[&x.addr], 4 * MIB);
        // The 1 MiB remainder is not worth splitting in the large pool.
        assert_eq!(x.size, 4 * MIB);
        let y = a.alloc(11 * MIB + 1, S0).unwrap();
        assert_eq!(a.raw().live[&y.addr], 11 * MIB + 512);
        a.free(y.addr).unwrap();
        // Reusing the big block for a smaller request splits off the remainder.
        assert_eq!(
            a.alloc(2 * MIB, S0).unwrap(),
            Allocation {
                addr: y.addr,
                size: 2 * MIB
            }
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u64, u32),
        Free(prop::sample::Index),
        Record(prop::sample::Index),
        Signal,
        EmptyCache,
    }

    fn op() -> impl Strategy<Value = Op> {
        let bytes = prop_oneof![0u64..=4096, 1..=MIB, MIB..12 * MIB];
        prop_oneof![
            5 => (bytes, 0u32..2).prop_map(|(b, s)| Op::Alloc(b, s)),
            4 => any::<prop::sample::Index>().prop_map(Op::Free),
            1 => any::<prop::sample::Index>().prop_map(Op::Record),
            1 => Just(Op::Signal),
            1 => Just(Op::EmptyCache),
        ]
    }

    proptest! {
        #[test]
        fn random_sequences_keep_invariants(ops in prop::collection::vec(op(), 1..120)) {
            let mut a = alloc_with(48 * MIB);
            let mut live: Vec<Allocation> = Vec::new();
            let mut flags: Vec<Arc<AtomicBool>> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(bytes, s) => match a.alloc(bytes, StreamId(s)) {
                        Ok(n) => {
                            prop_assert!(n.size >= bytes && n.size % ROUNDING == 0);
                            for o in &live {
                                prop_assert!(n.addr + n.size <= o.addr || o.addr + o.size <= n.addr);
                            }
                            let (&base, &len) = a.raw().live.range(..=n.addr).next_back().unwrap();
                            prop_assert!(n.addr + n.size <= base + len);
                            live.push(n);
                        }
                        Err(e) => {
                            let oom = matches!(e, AllocError::OutOfMemory { .. });
                            prop_assert!(oom, "unexpected error {:?}", e);
                        }
                    },
                    Op::Free(i) if !live.is_empty() => {
                        let n = live.swap_remove(i.index(live.len()));
                        a.free(n.addr).unwrap();
                    }
                    Op::Record(i) if !live.is_empty() => {
                        let (f, event) = flag();
                        flags.push(f);
                        a.record_stream(live[i.index(live.len())].addr, StreamId(2), event).unwrap();
                    }
                    Op::Signal => flags.drain(..).for_each(|f| f.store(true, Ordering::SeqCst)),
                    Op::EmptyCache => {
                        a.empty_cache();
                    }
                    _ => {}
                }
                check_invariants(&a);
                let s = a.stats();
                prop_assert_eq!(s.allocated_bytes, live.iter().map(|n| n.size).sum::<u64>());
                prop_assert_eq!(s.reserved_bytes, a.raw().live_bytes());
                prop_assert_eq!(s.allocated_bytes + s.cached_bytes, s.reserved_bytes);
            }
            for n in live.drain(..) {
                a.free(n.addr).unwrap();
            }
            flags.iter().for_each(|f| f.store(true, Ordering::SeqCst));
            a.empty_cache();
            prop_assert!(a.raw().live.is_empty());
            prop_assert_eq!(a.stats().segments, 0);
        }
    }

    #[test]
    fn allocator_is_send() {
        fn send<T: Send>() {}
        send::<CachingAllocator<FakeRaw>>();
    }
}
