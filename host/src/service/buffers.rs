//! The client buffer table of the gRPC service: handle → device buffer, per session, with a
//! per-session byte quota. A handle works only from the session (connection) that created it;
//! a session's buffers are freed when it ends.
//!
//! Quota and liveness are decided under one lock with the insertion: bytes are *reserved* by
//! [`Buffers::admit`] before the device allocates, so concurrent requests of one client cannot
//! all pass the check and exceed the quota together; and a buffer made for a session whose
//! connection has closed meanwhile (a long run finishing after its client left) is refused at
//! insertion and freed, not kept under a dead session forever. Owns no device and allocates
//! nothing: callers allocate between admitting and inserting.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::Rng;
use tonic::Status;

use super::session::Session;
use crate::device::BufferId;

/// One client buffer: the device buffer, its size and the session that owns it. (The device
/// is the one whose table tagged `id`: another device refuses it, naming itself.)
#[derive(Clone, Copy)]
struct Owned {
    id: BufferId,
    bytes: u64,
    owner: Session,
}

#[derive(Default)]
struct Table {
    handles: HashMap<String, Owned>,
    /// Bytes admitted and not inserted yet, per session.
    reserved: HashMap<Session, u64>,
    /// Sessions whose connection is open ([`Session`] 0, in-process callers, always is).
    live: HashSet<Session>,
}

impl Table {
    fn held(&self, owner: Session) -> u64 {
        self.handles
            .values()
            .filter(|b| b.owner == owner)
            .map(|b| b.bytes)
            .sum()
    }

    fn is_live(&self, owner: Session) -> bool {
        owner == Session(0) || self.live.contains(&owner)
    }
}

/// The handle table.
pub struct Buffers {
    table: Mutex<Table>,
    /// Most bytes one session may hold in buffers.
    quota: u64,
}

impl Buffers {
    pub fn new(quota: u64) -> Buffers {
        Buffers {
            table: Mutex::default(),
            quota,
        }
    }

    /// Session `s`'s connection is open: buffers may be made for it.
    pub(super) fn open(&self, s: Session) {
        self.table.lock().live.insert(s);
    }

    /// Whether `s`'s connection is open (session 0, in-process callers, always is).
    pub(super) fn is_live(&self, s: Session) -> bool {
        self.table.lock().is_live(s)
    }

    /// Reserves `more` bytes for `owner` if what it holds, what it has reserved and `more` fit
    /// its quota; the reservation is given back as it is inserted or dropped.
    pub(super) fn admit(
        self: &Arc<Self>,
        owner: Session,
        more: u64,
    ) -> Result<Reservation, Status> {
        let mut t = self.table.lock();
        let held = t.held(owner);
        let reserved = t.reserved.get(&owner).copied().unwrap_or(0);
        if held.saturating_add(reserved).saturating_add(more) > self.quota {
            return Err(Status::resource_exhausted(format!(
                "client quota: {more} more bytes requested, {held} held (and {reserved} being \
                 allocated), the quota is {}",
                self.quota
            )));
        }
        *t.reserved.entry(owner).or_default() += more;
        Ok(Reservation {
            buffers: self.clone(),
            owner,
            left: more,
        })
    }

    pub(super) fn get(&self, owner: Session, handle: &str) -> Result<(BufferId, u64), Status> {
        match self.table.lock().handles.get(handle) {
            Some(b) if b.owner == owner => Ok((b.id, b.bytes)),
            // Another session's handle reads exactly like an unknown one.
            _ => Err(Status::not_found(format!(
                "no buffer `{handle:.48}` (handles are per connection; was it freed?)"
            ))),
        }
    }

    pub(super) fn remove(&self, owner: Session, handle: &str) -> Option<(BufferId, u64)> {
        let mut t = self.table.lock();
        match t.handles.get(handle) {
            Some(b) if b.owner == owner => t.handles.remove(handle).map(|b| (b.id, b.bytes)),
            _ => None,
        }
    }

    #[allow(clippy::len_without_is_empty)] // a count for `Info`, not a collection
    pub fn len(&self) -> usize {
        self.table.lock().handles.len()
    }

    /// Frees every buffer of a session that ended, each on the device of `devices` that made
    /// it; buffers made for it from now on are refused.
    pub fn free_session(&self, owner: Session, devices: &[Arc<dyn crate::device::Device>]) {
        let gone: Vec<Owned> = {
            let mut t = self.table.lock();
            t.live.remove(&owner);
            let handles: Vec<String> = t
                .handles
                .iter()
                .filter(|(_, b)| b.owner == owner)
                .map(|(h, _)| h.clone())
                .collect();
            handles.iter().filter_map(|h| t.handles.remove(h)).collect()
        };
        for b in gone {
            free_anywhere(devices, b.id);
        }
    }

    /// Frees every buffer (shutdown).
    pub fn free_all(&self, devices: &[Arc<dyn crate::device::Device>]) {
        for (_, b) in self.table.lock().handles.drain() {
            free_anywhere(devices, b.id);
        }
    }
}

/// Frees `id` on the device that made it (the others refuse it without side effects).
fn free_anywhere(devices: &[Arc<dyn crate::device::Device>], id: BufferId) {
    for d in devices {
        if d.free(id).is_ok() {
            return;
        }
    }
}

/// Bytes admitted for one request: inserted buffers take their part of it; the rest is given
/// back when it drops.
pub(super) struct Reservation {
    buffers: Arc<Buffers>,
    owner: Session,
    left: u64,
}

impl Reservation {
    /// Who the bytes are for.
    pub(super) fn owner(&self) -> Session {
        self.owner
    }

    /// Records buffer `id` of `bytes` bytes for the owner under a new handle, out of this
    /// reservation; refused when the owner's connection has closed (the caller frees `id`).
    pub(super) fn insert(&mut self, id: BufferId, bytes: u64) -> Result<String, Status> {
        let mut t = self.buffers.table.lock();
        if !t.is_live(self.owner) {
            return Err(Status::cancelled(
                "the client's connection closed before its buffer was made",
            ));
        }
        let part = bytes.min(self.left);
        self.left -= part;
        release(&mut t, self.owner, part);
        let handle = format!("buf-{:032x}", rand::rng().random::<u128>());
        t.handles.insert(
            handle.clone(),
            Owned {
                id,
                bytes,
                owner: self.owner,
            },
        );
        Ok(handle)
    }
}

fn release(t: &mut Table, owner: Session, bytes: u64) {
    if let Some(r) = t.reserved.get_mut(&owner) {
        *r = r.saturating_sub(bytes);
        if *r == 0 {
            t.reserved.remove(&owner);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.left > 0 {
            release(&mut self.buffers.table.lock(), self.owner, self.left);
        }
    }
}

/// Buffers an execution created for its outputs: freed on drop unless [`Created::keep`] hands
/// them to the client.
pub(super) struct Created {
    reservation: Reservation,
    dev: Arc<dyn crate::device::Device>,
    handles: Vec<String>,
}

impl Created {
    pub(super) fn new(reservation: Reservation, dev: Arc<dyn crate::device::Device>) -> Self {
        Created {
            reservation,
            dev,
            handles: Vec::new(),
        }
    }

    /// Records `id` for the client; freed here (and an error) if it can no longer take it.
    pub(super) fn insert(&mut self, id: BufferId, bytes: u64) -> Result<String, Status> {
        match self.reservation.insert(id, bytes) {
            Ok(handle) => {
                self.handles.push(handle.clone());
                Ok(handle)
            }
            Err(e) => {
                let _ = self.dev.free(id);
                Err(e)
            }
        }
    }

    pub(super) fn keep(mut self) {
        self.handles.clear();
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        let owner = self.reservation.owner();
        for h in self.handles.drain(..) {
            if let Some((id, _)) = self.reservation.buffers.remove(owner, &h) {
                // Freed once queued work using it is done (the device's contract).
                let _ = self.dev.free(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_count_against_the_quota_until_inserted_or_dropped() {
        let b = Arc::new(Buffers::new(100));
        let s = Session(7);
        b.open(s);
        let mut r1 = b.admit(s, 60).unwrap();
        // a concurrent request of the same client sees the reservation
        assert!(b.admit(s, 50).is_err());
        // another client has its own quota
        assert!(b.admit(Session(8), 100).is_ok());
        let h = r1.insert(BufferId(1), 60).unwrap();
        assert!(b.admit(s, 50).is_err(), "held now, not reserved");
        drop(r1);
        assert!(b.admit(s, 40).is_ok());
        b.remove(s, &h).unwrap();
        let r2 = b.admit(s, 90).unwrap();
        drop(r2);
        assert!(
            b.admit(s, 100).is_ok(),
            "a dropped reservation is given back"
        );
    }

    #[test]
    fn a_closed_session_gets_no_new_buffers() {
        let b = Arc::new(Buffers::new(100));
        let s = Session(9);
        b.open(s);
        let mut r = b.admit(s, 10).unwrap();
        b.free_session(s, &[]);
        let e = r.insert(BufferId(3), 10).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Cancelled);
        assert_eq!(b.len(), 0);
        // in-process callers (session 0) are always served
        let mut r0 = b.admit(Session(0), 10).unwrap();
        r0.insert(BufferId(4), 10).unwrap();
        assert_eq!(b.len(), 1);
    }
}
