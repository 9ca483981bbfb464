//! Buffer handles: the map from [`BufferId`] to a backend's buffer objects, shared by every
//! device. Queued work holds its own `Arc` of a buffer, so removing a handle never frees memory
//! that work still uses; the backend's `Drop` for its buffer type returns the memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::{BufferId, DeviceError};

pub struct BufferTable<B> {
    next: AtomicU64,
    map: RwLock<HashMap<BufferId, Arc<B>>>,
}

impl<B> Default for BufferTable<B> {
    fn default() -> Self {
        BufferTable {
            next: AtomicU64::new(1),
            map: RwLock::new(HashMap::new()),
        }
    }
}

impl<B> BufferTable<B> {
    /// Registers the buffer `make` builds for a fresh id.
    pub fn insert(&self, make: impl FnOnce(BufferId) -> B) -> BufferId {
        let id = BufferId(self.next.fetch_add(1, Ordering::Relaxed));
        self.map.write().insert(id, Arc::new(make(id)));
        id
    }

    pub fn get(&self, id: BufferId) -> Result<Arc<B>, DeviceError> {
        self.map
            .read()
            .get(&id)
            .cloned()
            .ok_or(DeviceError::UnknownBuffer(id))
    }

    /// Forgets a handle; the buffer lives on while queued work holds it.
    pub fn remove(&self, id: BufferId) -> Result<(), DeviceError> {
        self.map
            .write()
            .remove(&id)
            .map(drop)
            .ok_or(DeviceError::UnknownBuffer(id))
    }
}
