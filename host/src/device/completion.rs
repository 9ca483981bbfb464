//! Fences of a device stream (CUDA) signalled from a completion thread, in submission order: each submit
//! records an event after its work, and the stream's completion thread waits for the events one
//! by one and signals the fences. Nothing is inserted into the stream itself (a stream callback
//! blocks later work in the stream until it returns: a GPU→host→GPU round trip per submit).
//!
//! Generic over [`Marker`] (the CUDA driver's event, or a fake in tests, so it is tested without
//! a GPU); owns the thread and the
//! queue, never the device work. Dropping it finishes the queue: every fence queued is
//! signalled, with the marker's result or, if the thread is gone, an error.

use std::sync::mpsc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::device::DeviceError;
use crate::device::sync::{Fence, FenceGuard};

/// A point in a stream the completion thread can wait for.
pub trait Marker: Send + 'static {
    /// Blocks until the work before the point has run; its status (a fault: an error).
    fn wait(&self) -> Result<(), DeviceError>;
}

struct Entry<M> {
    marker: M,
    /// What the submit itself found (a launch the driver refused, …).
    result: Result<(), DeviceError>,
    fence: FenceGuard,
}

/// The completion queue and thread of one stream.
pub struct Completions<M: Marker> {
    tx: Mutex<Option<mpsc::Sender<Entry<M>>>>,
    thread: Option<JoinHandle<()>>,
}

impl<M: Marker> Completions<M> {
    /// Starts the thread; `note` sees every result before its fence does (the device's
    /// lost-device bookkeeping), `done` gets each marker back once waited for (to reuse it).
    pub fn new(
        name: String,
        note: impl Fn(Result<(), DeviceError>) -> Result<(), DeviceError> + Send + 'static,
        done: impl Fn(M) + Send + 'static,
    ) -> Result<Completions<M>, DeviceError> {
        let (tx, rx) = mpsc::channel::<Entry<M>>();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                for e in rx {
                    let status = e.marker.wait();
                    e.fence.0.signal(note(e.result.and(status)));
                    done(e.marker);
                }
            })
            .map_err(|e| DeviceError::Driver {
                call: "spawning the completion thread",
                message: e.to_string(),
            })?;
        Ok(Completions {
            tx: Mutex::new(Some(tx)),
            thread: Some(thread),
        })
    }

    /// Queues `fence` to be signalled once `marker` is reached, with `result` (what the submit
    /// found) combined with the marker's status.
    pub fn push(&self, marker: M, fence: &Fence, result: Result<(), DeviceError>) {
        let entry = Entry {
            marker,
            result,
            fence: FenceGuard(fence.clone()),
        };
        // A queue that is gone drops the entry: its guard signals the fence with an error.
        if let Some(tx) = &*self.tx.lock() {
            let _ = tx.send(entry);
        }
    }
}

impl<M: Marker> Drop for Completions<M> {
    fn drop(&mut self) {
        self.tx.lock().take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A fake event: reached when the test opens its gate; fails when told to.
    struct Gate {
        open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
        status: Result<(), DeviceError>,
    }

    impl Marker for Gate {
        fn wait(&self) -> Result<(), DeviceError> {
            let (m, cv) = &*self.open;
            let mut open = m.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            self.status.clone()
        }
    }

    fn gate() -> (Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>, impl Fn()) {
        let g = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let h = g.clone();
        (g, move || {
            *h.0.lock().unwrap() = true;
            h.1.notify_all();
        })
    }

    #[test]
    fn fences_are_signalled_in_order_with_their_status() {
        let returned = Arc::new(AtomicUsize::new(0));
        let r = returned.clone();
        let c = Completions::new(
            "test-completions".into(),
            |res| res,
            move |_| {
                r.fetch_add(1, Ordering::Relaxed);
            },
        )
        .unwrap();
        let (g1, open1) = gate();
        let (g2, open2) = gate();
        let (f1, f2, f3) = (Fence::new(), Fence::new(), Fence::new());
        c.push(
            Gate {
                open: g1,
                status: Ok(()),
            },
            &f1,
            Ok(()),
        );
        c.push(
            Gate {
                open: g2.clone(),
                status: Err(DeviceError::Lost("illegal address".into())),
            },
            &f2,
            Ok(()),
        );
        c.push(
            Gate {
                open: g2,
                status: Ok(()),
            },
            &f3,
            Err(DeviceError::Invalid("refused launch".into())),
        );
        // The second point is reached first: nothing is signalled before the first is.
        open2();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!f1.is_done() && !f2.is_done() && !f3.is_done());
        open1();
        assert_eq!(f1.wait(), Ok(()));
        assert_eq!(f2.wait(), Err(DeviceError::Lost("illegal address".into())));
        assert_eq!(
            f3.wait(),
            Err(DeviceError::Invalid("refused launch".into()))
        );
        drop(c);
        assert_eq!(
            returned.load(Ordering::Relaxed),
            3,
            "every marker handed back"
        );
    }

    #[test]
    fn dropping_the_queue_signals_everything_queued() {
        let c = Completions::new("test-completions".into(), |r| r, |_| {}).unwrap();
        let (g, open) = gate();
        let f = Fence::new();
        c.push(
            Gate {
                open: g,
                status: Ok(()),
            },
            &f,
            Ok(()),
        );
        open();
        drop(c);
        assert!(f.is_done());
    }
}
