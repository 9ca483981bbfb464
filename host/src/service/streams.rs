//! Each client's streams: the `stream` number of a request (0 to [`MAX_CLIENT_STREAMS`] − 1)
//! names one of *that client's* streams, leased from the device's [`StreamPool`] on first use
//! and given back when the client's connection closes. Clients therefore never queue behind
//! each other: a client flooding its stream 0 delays only its own work (scheduling between
//! clients is the device's interleaving of streams; see `device::streams`). A client's model
//! runs go on its stream 0, in order with its Executes there.
//!
//! Owns the session → lease table only; never touches buffers or queues.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::session::Session;
use crate::device::streams::{StreamLease, StreamPool};
use crate::device::{Device, DeviceError, StreamId};
use crate::error::{Error, RequestError};

/// Streams one client may use on each device: `stream` 0 to this − 1.
pub const MAX_CLIENT_STREAMS: u32 = 4;

/// A client's streams on one device, by its stream number (`None`: not used yet).
type Slots = Vec<Option<StreamLease>>;

/// The streams every client holds, per device.
pub struct ClientStreams {
    pools: Vec<Arc<StreamPool>>,
    /// By (client, index of the device's pool).
    leases: Mutex<HashMap<(Session, usize), Slots>>,
}

impl ClientStreams {
    /// Leases on `devices`, at most `per_device` distinct streams on each.
    pub fn new(devices: &[Arc<dyn Device>], per_device: usize) -> ClientStreams {
        ClientStreams {
            pools: devices
                .iter()
                .map(|d| StreamPool::new(d.clone(), per_device))
                .collect(),
            leases: Mutex::new(HashMap::new()),
        }
    }

    fn pool_of(&self, dev: &dyn Device) -> Result<usize, Error> {
        self.pools
            .iter()
            .position(|p| p.device().name() == dev.name())
            .ok_or_else(|| {
                DeviceError::Invalid(format!("no streams for device `{}`", dev.name())).into()
            })
    }

    fn check(stream: u32) -> Result<(), Error> {
        if stream >= MAX_CLIENT_STREAMS {
            return Err(RequestError::Other(format!(
                "stream {stream} does not exist: a client has streams 0 to {} on each device",
                MAX_CLIENT_STREAMS - 1
            ))
            .into());
        }
        Ok(())
    }

    /// The device stream behind `owner`'s `stream` on `dev`, leased now if first used.
    pub fn stream(&self, owner: Session, dev: &dyn Device, stream: u32) -> Result<StreamId, Error> {
        Self::check(stream)?;
        let pool = self.pool_of(dev)?;
        let mut leases = self.leases.lock();
        let slots = leases.entry((owner, pool)).or_insert_with(|| {
            std::iter::repeat_with(|| None)
                .take(MAX_CLIENT_STREAMS as usize)
                .collect()
        });
        let slot = &mut slots[stream as usize];
        if slot.is_none() {
            *slot = Some(self.pools[pool].lease()?);
        }
        Ok(slot.as_ref().expect("leased above").stream())
    }

    /// The device stream behind `owner`'s `stream` if the client has used it (`None`: nothing
    /// of this client was ever queued there).
    pub fn used(
        &self,
        owner: Session,
        dev: &dyn Device,
        stream: u32,
    ) -> Result<Option<StreamId>, Error> {
        Self::check(stream)?;
        let pool = self.pool_of(dev)?;
        Ok(self
            .leases
            .lock()
            .get(&(owner, pool))
            .and_then(|s| s[stream as usize].as_ref())
            .map(StreamLease::stream))
    }

    /// Gives back every stream `owner` holds (its connection closed).
    pub fn end(&self, owner: Session) {
        self.leases.lock().retain(|(s, _), _| *s != owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_has_its_own_streams_until_its_connection_ends() {
        let dev = crate::device::streams::tests::device();
        let streams = ClientStreams::new(std::slice::from_ref(&dev), 3);
        let (a, b) = (Session(1), Session(2));
        let a0 = streams.stream(a, &*dev, 0).unwrap();
        assert_eq!(streams.stream(a, &*dev, 0).unwrap(), a0, "a lease is kept");
        let a1 = streams.stream(a, &*dev, 1).unwrap();
        let b0 = streams.stream(b, &*dev, 0).unwrap();
        assert!(a0 != a1 && a0 != b0 && a1 != b0);
        assert_ne!(a0, dev.default_stream());
        assert_eq!(streams.used(b, &*dev, 1).unwrap(), None);
        let e = streams.stream(a, &*dev, MAX_CLIENT_STREAMS).unwrap_err();
        assert!(e.to_string().contains("a client has streams 0 to 3"), "{e}");
        assert_eq!(e.status(), crate::error::status::INVALID_INPUT);
        streams.end(a);
        assert_eq!(streams.used(a, &*dev, 0).unwrap(), None);
        // At the bound (3 streams), A's streams are free again: the next client gets one.
        let c0 = streams.stream(Session(3), &*dev, 0).unwrap();
        assert!(c0 == a0 || c0 == a1);
    }
}
