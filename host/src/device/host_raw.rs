//! The raw allocator under the CPU device's caching allocator (the same policy as CUDA's,
//! [`super::caching`]): segments of host memory at synthetic, never-reused addresses, at most
//! `limit` bytes held at once. A segment is zeroed when made; the device zeroes a block again
//! before each new owner.
//!
//! Owns segment memory only; block policy is `caching`'s, buffers are the device's.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

use super::caching::{RawAllocator, RawOom};

/// One segment's bytes; buffers in it lock it for each access.
pub type Segment = RwLock<Box<[u8]>>;

/// Gap between segments' synthetic addresses (no two segments ever touch).
const ADDRESS_GAP: u64 = 1 << 16;

/// Host memory segments by address.
pub struct HostRaw {
    limit: u64,
    held: u64,
    next: u64,
    segments: BTreeMap<u64, Arc<Segment>>,
}

impl HostRaw {
    /// At most `limit` bytes held at once.
    pub fn new(limit: u64) -> Self {
        HostRaw {
            limit,
            held: 0,
            next: ADDRESS_GAP,
            segments: BTreeMap::new(),
        }
    }

    /// Most bytes it may hold.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The segment holding `addr .. addr + len` and the offset of `addr` in it.
    pub fn locate(&self, addr: u64, len: u64) -> Option<(Arc<Segment>, usize)> {
        let (&base, seg) = self.segments.range(..=addr).next_back()?;
        let offset = addr - base;
        let size = seg.read().len() as u64;
        (offset.checked_add(len)? <= size).then(|| (seg.clone(), offset as usize))
    }
}

impl RawAllocator for HostRaw {
    fn alloc(&mut self, bytes: u64) -> Result<u64, RawOom> {
        if self.held.checked_add(bytes).is_none_or(|h| h > self.limit) {
            return Err(RawOom);
        }
        let len = usize::try_from(bytes).map_err(|_| RawOom)?;
        let mut memory = Vec::new();
        memory.try_reserve_exact(len).map_err(|_| RawOom)?;
        memory.resize(len, 0u8);
        let addr = self.next;
        self.next = bytes
            .checked_next_multiple_of(ADDRESS_GAP)
            .and_then(|b| addr.checked_add(b)?.checked_add(ADDRESS_GAP))
            .ok_or(RawOom)?;
        self.held += bytes;
        self.segments
            .insert(addr, Arc::new(RwLock::new(memory.into_boxed_slice())));
        Ok(addr)
    }

    fn free(&mut self, addr: u64) {
        if let Some(seg) = self.segments.remove(&addr) {
            self.held -= seg.read().len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_bounded_located_and_released() {
        let mut raw = HostRaw::new(10_000);
        let a = raw.alloc(4096).unwrap();
        let b = raw.alloc(4096).unwrap();
        assert!(b >= a + 4096 + ADDRESS_GAP, "segments never touch");
        assert_eq!(raw.alloc(4096), Err(RawOom), "past the limit");
        let (seg, off) = raw.locate(a + 100, 50).unwrap();
        assert_eq!((seg.read().len(), off), (4096, 100));
        assert!(raw.locate(a + 4000, 200).is_none(), "runs past its segment");
        assert!(raw.locate(a + 4096 + 10, 1).is_none(), "in the gap");
        raw.free(a);
        assert!(raw.locate(a, 1).is_none());
        raw.alloc(4096).unwrap();
        assert_eq!(raw.alloc(u64::MAX), Err(RawOom));
    }
}
