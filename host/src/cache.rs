//! The translation cache: same op (any case) + inputs + attributes + target + registry
//! generation → the same translation, without entering wasm.
//!
//! Bounded in entries and in bytes (a request's names, attributes and values plus its encoded
//! translation count): when either is full it drops everything (translations are cheap to redo). Entries of an
//! older registry generation are unreachable and are dropped when the first entry of a newer one
//! arrives: they would otherwise keep replaced plugin versions (their compiled code) alive. A lookup hashes the borrowed request, so a hit
//! allocates nothing. Owns nothing but its map.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::target::Target;
use crate::translate::{OpRequest, Translation};

/// Most bytes the cache holds (requests and translations, estimated from their contents).
pub const MAX_CACHE_BYTES: usize = 64 << 20;
/// What an entry costs beyond its contents (map slot, `Arc`s, small fields).
const ENTRY_OVERHEAD: usize = 256;

struct Entry {
    request: OpRequest,
    target: String,
    generation: u64,
    translation: Arc<Translation>,
}

impl Entry {
    /// The hit path: integers and lengths first, and no `memcmp` call for an empty field (on the
    /// development machine glibc's AVX-512 `memcmp` costs ~50 ns a call even for 0 bytes, which
    /// made a hit 4.6× slower once the 1.2 request fields, usually empty, were compared).
    fn matches(&self, req: &OpRequest, target: &Target, generation: u64) -> bool {
        let r = &self.request;
        self.generation == generation
            && r.opset == req.opset
            && same(self.target.as_bytes(), target.name.as_bytes())
            && r.op.eq_ignore_ascii_case(&req.op)
            && r.inputs == req.inputs
            && same(&r.attributes, &req.attributes)
            && same(r.domain.as_bytes(), req.domain.as_bytes())
            && same(&r.absent, &req.absent)
            && same(&r.values, &req.values)
            && same(&r.outputs_wanted, &req.outputs_wanted)
    }
}

/// Slice equality that decides on the lengths first and never compares empty slices.
#[inline]
fn same<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// Hit/miss counters and size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    /// Estimated bytes held.
    pub bytes: usize,
    pub clears: u64,
}

/// What caching `req` → `t` costs, estimated from everything of variable size in both.
fn cost(req: &OpRequest, t: &Translation) -> usize {
    let tensors = |ts: &[crate::tensor::TensorDesc]| -> usize {
        ts.iter()
            .map(|d| d.name.len() + d.shape.len() * 8 + 8)
            .sum()
    };
    ENTRY_OVERHEAD
        + req.op.len()
        + req.domain.len()
        + tensors(&req.inputs)
        + req
            .attributes
            .iter()
            .map(|(k, v)| k.len() + v.byte_len())
            .sum::<usize>()
        + req.values.iter().map(|(_, v)| v.len() + 8).sum::<usize>()
        + req.absent.len() * 4
        + req.outputs_wanted.len()
        + t.bytes.len()
        + tensors(&t.outputs)
        + t.plugin.len()
        + t.kernel_name.len()
}

pub struct TranslationCache {
    capacity: usize,
    max_bytes: usize,
    map: Mutex<HashMap<u64, Vec<Entry>>>,
    len: AtomicU64,
    bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    clears: AtomicU64,
    /// The newest registry generation inserted: entries of older ones are unreachable (lookups
    /// use the current generation) and are dropped when a newer one arrives, so they do not
    /// keep replaced plugin versions alive.
    newest: AtomicU64,
}

fn key(req: &OpRequest, target: &Target, generation: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for b in req.op.bytes() {
        h.write_u8(b.to_ascii_lowercase());
    }
    req.inputs.hash(&mut h);
    for (k, v) in &req.attributes {
        k.hash(&mut h);
        v.hash_into(&mut h);
    }
    req.domain.hash(&mut h);
    req.opset.hash(&mut h);
    req.absent.hash(&mut h);
    req.values.hash(&mut h);
    req.outputs_wanted.hash(&mut h);
    target.name.hash(&mut h);
    generation.hash(&mut h);
    h.finish()
}

impl TranslationCache {
    /// A cache of at most `capacity` translations and [`MAX_CACHE_BYTES`] (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Self::with_max_bytes(capacity, MAX_CACHE_BYTES)
    }

    /// A cache of at most `capacity` translations holding at most `max_bytes`.
    pub fn with_max_bytes(capacity: usize, max_bytes: usize) -> Self {
        TranslationCache {
            capacity,
            max_bytes,
            map: Mutex::new(HashMap::new()),
            len: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            clears: AtomicU64::new(0),
            newest: AtomicU64::new(0),
        }
    }

    /// Looks a request up, counting a hit or a miss.
    pub fn get(
        &self,
        req: &OpRequest,
        target: &Target,
        generation: u64,
    ) -> Option<Arc<Translation>> {
        self.lookup(req, target, generation, true)
    }

    /// Looks a request up, counting only a hit (for a probe followed by a counted `get`).
    pub fn peek(
        &self,
        req: &OpRequest,
        target: &Target,
        generation: u64,
    ) -> Option<Arc<Translation>> {
        self.lookup(req, target, generation, false)
    }

    fn lookup(
        &self,
        req: &OpRequest,
        target: &Target,
        generation: u64,
        count_miss: bool,
    ) -> Option<Arc<Translation>> {
        let k = key(req, target, generation);
        let found = self
            .map
            .lock()
            .get(&k)
            .and_then(|v| v.iter().find(|e| e.matches(req, target, generation)))
            .map(|e| e.translation.clone());
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else if count_miss {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    pub fn insert(&self, req: &OpRequest, target: &Target, generation: u64, t: Arc<Translation>) {
        if self.capacity == 0 {
            return;
        }
        let size = cost(req, &t);
        // One entry may not take more than an eighth: it would flush everything else.
        if size > self.max_bytes / 8 {
            return;
        }
        let k = key(req, target, generation);
        let mut map = self.map.lock();
        if generation > self.newest.load(Ordering::Relaxed) {
            self.newest.store(generation, Ordering::Relaxed);
            let (mut len, mut bytes) = (0u64, 0u64);
            map.retain(|_, bucket| {
                bucket.retain(|e| e.generation >= generation);
                len += bucket.len() as u64;
                bytes += bucket
                    .iter()
                    .map(|e| cost(&e.request, &e.translation) as u64)
                    .sum::<u64>();
                !bucket.is_empty()
            });
            self.len.store(len, Ordering::Relaxed);
            self.bytes.store(bytes, Ordering::Relaxed);
        } else if generation < self.newest.load(Ordering::Relaxed) {
            // Planned under a registry that has changed since: never looked up again.
            return;
        }
        if self.len.load(Ordering::Relaxed) as usize >= self.capacity
            || self.bytes.load(Ordering::Relaxed) as usize + size > self.max_bytes
        {
            map.clear();
            self.len.store(0, Ordering::Relaxed);
            self.bytes.store(0, Ordering::Relaxed);
            self.clears.fetch_add(1, Ordering::Relaxed);
        }
        let bucket = map.entry(k).or_default();
        if bucket.iter().any(|e| e.matches(req, target, generation)) {
            return;
        }
        bucket.push(Entry {
            request: req.clone(),
            target: target.name.clone(),
            generation,
            translation: t,
        });
        self.len.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(size as u64, Ordering::Relaxed);
    }

    /// Drops every entry.
    pub fn clear(&self) {
        self.map.lock().clear();
        self.len.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.len.load(Ordering::Relaxed) as usize,
            bytes: self.bytes.load(Ordering::Relaxed) as usize,
            clears: self.clears.load(Ordering::Relaxed),
        }
    }
}
