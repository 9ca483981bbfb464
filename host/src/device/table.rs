//! Buffer handles: the map from [`BufferId`] to a backend's buffer objects, shared by every
//! device. Queued work holds its own `Arc` of a buffer, so removing a handle never frees memory
//! that work still uses; the backend's `Drop` for its buffer type returns the memory.
//!
//! Each table tags its ids with a process-wide table number (the high 16 bits), so a handle of
//! one device given to another is refused by name ([`DeviceError::ForeignBuffer`]) instead of
//! meaning some other buffer there.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::{BufferId, DeviceError};

/// Bits of a [`BufferId`] below the table tag.
const TAG_SHIFT: u32 = 48;
/// The next table's tag (wraps after 65,535 tables; tag 0 is never used).
static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

pub struct BufferTable<B> {
    /// This table's tag, already shifted into place.
    tag: u64,
    /// The device the buffers belong to (for errors).
    device: String,
    next: AtomicU64,
    /// Keys are handed out here (a client can only look one up).
    map: RwLock<foldhash::HashMap<BufferId, Arc<B>>>,
}

impl<B> BufferTable<B> {
    /// An empty table for the device named `device`.
    pub fn for_device(device: &str) -> Self {
        let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed) % 0xffff + 1;
        BufferTable {
            tag: tag << TAG_SHIFT,
            device: device.to_string(),
            next: AtomicU64::new(1),
            map: RwLock::new(foldhash::HashMap::default()),
        }
    }

    /// Registers the buffer `make` builds for a fresh id.
    pub fn insert(&self, make: impl FnOnce(BufferId) -> B) -> BufferId {
        let n = self.next.fetch_add(1, Ordering::Relaxed) & ((1 << TAG_SHIFT) - 1);
        let id = BufferId(self.tag | n);
        self.map.write().insert(id, Arc::new(make(id)));
        id
    }

    pub fn get(&self, id: BufferId) -> Result<Arc<B>, DeviceError> {
        self.map
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| self.missing(id))
    }

    /// Why `id` is not here: another device's handle, or an unknown one.
    fn missing(&self, id: BufferId) -> DeviceError {
        let tag = id.0 & !((1 << TAG_SHIFT) - 1);
        if tag != 0 && tag != self.tag {
            DeviceError::ForeignBuffer {
                buffer: id,
                device: self.device.clone(),
            }
        } else {
            DeviceError::UnknownBuffer(id)
        }
    }

    /// Forgets a handle; the buffer lives on while queued work holds it.
    pub fn remove(&self, id: BufferId) -> Result<(), DeviceError> {
        self.map
            .write()
            .remove(&id)
            .map(drop)
            .ok_or_else(|| self.missing(id))
    }
}
