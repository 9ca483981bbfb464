//! Streams leased to independent users of one device (the service's clients). A lease gets a
//! stream no other lease holds while the device has fewer than the pool's bound of leased
//! streams, so one user's queue never delays another's: each has its own in-order queue, and
//! the backend interleaves streams (CPU: one worker thread per stream, the OS time-slices them;
//! CUDA: the hardware scheduler). Past the bound, a lease shares the stream with the fewest
//! holders (threads and queues stay bounded; fairness degrades gracefully, never correctness:
//! hazards across streams are the device's business). A stream returns to the pool when its
//! last lease is dropped and is reused, never destroyed.
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
    /// Every stream created for leases, with how many leases hold it now.
    streams: Mutex<Vec<(StreamId, usize)>>,
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
            streams: Mutex::new(Vec::new()),
        })
    }

    /// The device the streams are on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.dev
    }

    /// A stream for one holder: an idle one, else a new one while under the bound, else the one
    /// with the fewest holders. Fails only when the device cannot create a stream at all.
    pub fn lease(self: &Arc<Self>) -> Result<StreamLease, DeviceError> {
        let mut streams = self.streams.lock();
        let pick = match streams.iter().position(|s| s.1 == 0) {
            Some(i) => i,
            None if streams.len() < self.max => match self.dev.create_stream() {
                Ok(id) => {
                    streams.push((id, 0));
                    streams.len() - 1
                }
                // Out of streams (threads, driver limits): share rather than fail.
                Err(e) if streams.is_empty() => return Err(e),
                Err(_) => Self::least_held(&streams),
            },
            None => Self::least_held(&streams),
        };
        streams[pick].1 += 1;
        Ok(StreamLease {
            pool: self.clone(),
            stream: streams[pick].0,
        })
    }

    fn least_held(streams: &[(StreamId, usize)]) -> usize {
        (0..streams.len())
            .min_by_key(|&i| streams[i].1)
            .expect("a pool at its bound holds streams")
    }

    /// How many distinct streams the pool has created (for tests and figures).
    pub fn created(&self) -> usize {
        self.streams.lock().len()
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
        let mut streams = self.pool.streams.lock();
        if let Some(s) = streams.iter_mut().find(|s| s.0 == self.stream) {
            s.1 = s.1.saturating_sub(1);
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
    fn a_dropped_lease_returns_its_stream_for_reuse() {
        let p = pool(4);
        let a = p.lease().unwrap();
        let first = a.stream();
        drop(a);
        let b = p.lease().unwrap();
        assert_eq!(b.stream(), first);
        assert_eq!(p.created(), 1);
        // The reused stream still runs work.
        p.device().synchronize(b.stream()).unwrap();
    }
}
