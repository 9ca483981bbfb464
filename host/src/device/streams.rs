//! Streams leased to independent users of one device (the service's clients). A lease gets a
//! stream no other lease holds while the device has fewer than the pool's bound of leased
//! streams, so one user's queue never delays another's: each has its own in-order queue, and
//! the backend interleaves streams (CPU: one worker thread per stream, the OS time-slices them;
//! CUDA: the hardware scheduler). Past the bound, a lease takes the idle stream given back
//! longest ago (what a former holder left queued has had the most time to drain), else shares
//! the stream with the fewest holders (threads and queues stay bounded; fairness degrades
//! gracefully, never correctness: hazards across streams are the device's business). Streams
//! are reused, never destroyed.
//!
//! Owns the lease bookkeeping only; the streams are the device's. The device's default stream is
//! never leased: it stays the host's own (admission, in-process callers).

use std::sync::Arc;

use parking_lot::Mutex;

use super::{Device, DeviceError, StreamId};

/// Streams leased to clients, per device, unless configured otherwise.
pub const DEFAULT_LEASED_STREAMS: usize = 32;

/// The leasable streams of one device.
pub struct StreamPool {
    dev: Arc<dyn Device>,
    max: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Every stream created for leases: how many leases hold it now, and when (in releases
    /// counted by `released`) it was last given back.
    streams: Vec<Leased>,
    released: u64,
}

struct Leased {
    id: StreamId,
    holders: usize,
    released_at: u64,
}

/// One holder's use of a stream; the stream goes back to the pool when the lease is dropped.
pub struct StreamLease {
    pool: Arc<StreamPool>,
    stream: StreamId,
}

impl StreamPool {
    /// A pool creating at most `max` (≥ 1) streams on `dev`.
    pub fn new(dev: Arc<dyn Device>, max: usize) -> Arc<StreamPool> {
        Arc::new(StreamPool {
            dev,
            max: max.max(1),
            inner: Mutex::new(Inner {
                streams: Vec::new(),
                released: 0,
            }),
        })
    }

    /// The device the streams are on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.dev
    }

    /// A stream for one holder: a new one while under the bound, else the idle one given back
    /// longest ago (work a former holder left queued has had the most time to drain), else the
    /// one with the fewest holders. Fails only when the device cannot create a stream at all.
    pub fn lease(self: &Arc<Self>) -> Result<StreamLease, DeviceError> {
        let mut inner = self.inner.lock();
        let streams = &mut inner.streams;
        let idle = (0..streams.len())
            .filter(|&i| streams[i].holders == 0)
            .min_by_key(|&i| streams[i].released_at);
        let created = if streams.len() < self.max {
            match self.dev.create_stream() {
                Ok(id) => Some(id),
                // Out of streams (threads, driver limits): reuse or share rather than fail.
                Err(e) if streams.is_empty() => return Err(e),
                Err(_) => None,
            }
        } else {
            None
        };
        let pick = match (created, idle) {
            (Some(id), _) => {
                streams.push(Leased {
                    id,
                    holders: 0,
                    released_at: 0,
                });
                streams.len() - 1
            }
            (None, Some(i)) => i,
            (None, None) => (0..streams.len())
                .min_by_key(|&i| streams[i].holders)
                .expect("a pool that cannot create streams holds some"),
        };
        streams[pick].holders += 1;
        Ok(StreamLease {
            pool: self.clone(),
            stream: streams[pick].id,
        })
    }

    /// How many distinct streams the pool has created (for tests and figures).
    pub fn created(&self) -> usize {
        self.inner.lock().streams.len()
    }
}

impl StreamLease {
    /// The leased stream.
    pub fn stream(&self) -> StreamId {
        self.stream
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        let mut inner = self.pool.inner.lock();
        inner.released += 1;
        let now = inner.released;
        if let Some(s) = inner.streams.iter_mut().find(|s| s.id == self.stream) {
            s.holders = s.holders.saturating_sub(1);
            s.released_at = now;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::device::cpu::CpuDevice;

    struct NoKernels;
    impl crate::device::CpuKernels for NoKernels {
        fn run(
            &self,
            _: &crate::cmdbuf::LaunchCmd,
            _: &[(u32, u64, Option<&[u8]>)],
        ) -> Result<Vec<(u32, Vec<u8>)>, String> {
            Err("no kernels here".into())
        }
    }

    /// A CPU device without kernels (streams, buffers and events only).
    pub(crate) fn device() -> Arc<dyn Device> {
        CpuDevice::new(Arc::new(NoKernels), 1 << 20)
    }

    fn pool(max: usize) -> Arc<StreamPool> {
        StreamPool::new(device(), max)
    }

    #[test]
    fn leases_get_distinct_streams_up_to_the_bound_then_share_the_least_held() {
        let p = pool(2);
        let default = p.device().default_stream();
        let a = p.lease().unwrap();
        let b = p.lease().unwrap();
        assert_ne!(a.stream(), b.stream());
        assert!(a.stream() != default && b.stream() != default);
        let c = p.lease().unwrap();
        assert!(c.stream() == a.stream() || c.stream() == b.stream());
        let shared = c.stream();
        let d = p.lease().unwrap();
        assert_ne!(d.stream(), shared, "the least held stream is shared next");
        assert_eq!(p.created(), 2);
    }

    #[test]
    fn at_the_bound_the_idle_stream_given_back_longest_ago_is_reused() {
        let p = pool(2);
        let a = p.lease().unwrap();
        let b = p.lease().unwrap();
        let (first, second) = (a.stream(), b.stream());
        drop(a);
        drop(b);
        let c = p.lease().unwrap();
        assert_eq!(c.stream(), first, "given back longest ago");
        let d = p.lease().unwrap();
        assert_eq!(d.stream(), second);
        assert_eq!(p.created(), 2);
        // The reused streams still run work.
        p.device().synchronize(c.stream()).unwrap();
        p.device().synchronize(d.stream()).unwrap();
    }
}
