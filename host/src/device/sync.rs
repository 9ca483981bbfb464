//! Fences: one-shot completion signals a caller can block on ([`Fence::wait`]) or `.await`
//! ([`Fence::wait_async`]) without polling. Devices signal them; nothing else lives here.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use super::DeviceError;

enum State {
    Pending(Vec<Waker>),
    Done(Result<(), DeviceError>),
}

struct Inner {
    state: Mutex<State>,
    cv: Condvar,
}

/// How long [`Fence::wait`] spins before it sleeps.
const SPIN_BEFORE_SLEEP: std::time::Duration = std::time::Duration::from_micros(20);

/// Spins until `ready` or `limit` has passed (the clock read every 64 turns); whether ready.
pub fn spin(limit: std::time::Duration, mut ready: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + limit;
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if std::time::Instant::now() >= until {
            return ready();
        }
    }
}

/// Signals once, when the work it tracks has finished (with its result).
#[derive(Clone)]
pub struct Fence(Arc<Inner>);

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Fence({})",
            if self.is_done() { "done" } else { "pending" }
        )
    }
}

impl Default for Fence {
    fn default() -> Self {
        Self::new()
    }
}

impl Fence {
    /// A pending fence.
    pub fn new() -> Self {
        Fence(Arc::new(Inner {
            state: Mutex::new(State::Pending(Vec::new())),
            cv: Condvar::new(),
        }))
    }

    /// An already signalled fence.
    pub fn done(result: Result<(), DeviceError>) -> Self {
        let f = Fence::new();
        f.signal(result);
        f
    }

    /// Signals the fence; later signals are ignored.
    pub fn signal(&self, result: Result<(), DeviceError>) {
        let wakers = {
            let mut s = self.0.state.lock();
            match std::mem::replace(&mut *s, State::Done(result)) {
                State::Pending(w) => w,
                done @ State::Done(_) => {
                    *s = done;
                    return;
                }
            }
        };
        self.0.cv.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Whether both are the same fence.
    pub fn same(&self, other: &Fence) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub fn is_done(&self) -> bool {
        matches!(*self.0.state.lock(), State::Done(_))
    }

    /// Blocks until signalled. Spins for a few microseconds first: short work finishes
    /// before a sleeping thread would even be woken.
    pub fn wait(&self) -> Result<(), DeviceError> {
        spin(SPIN_BEFORE_SLEEP, || self.is_done());
        let mut s = self.0.state.lock();
        loop {
            if let State::Done(r) = &*s {
                return r.clone();
            }
            self.0.cv.wait(&mut s);
        }
    }

    /// Resolves when signalled.
    pub fn wait_async(&self) -> impl Future<Output = Result<(), DeviceError>> + Send + 'static {
        FenceFuture(self.clone())
    }
}

/// An allocator can wait for a fence before reusing memory another stream used.
impl super::caching::EventQuery for Fence {
    fn is_complete(&self) -> bool {
        self.is_done()
    }
}

struct FenceFuture(Fence);

impl Future for FenceFuture {
    type Output = Result<(), DeviceError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0.0.state.lock();
        match &mut *s {
            State::Done(r) => Poll::Ready(r.clone()),
            State::Pending(wakers) => {
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// Owns the duty to signal a fence: when work is dropped without running (its queue went away,
/// its thread died), the guard signals the fence with [`DeviceError::ShutDown`], so no waiter
/// hangs. Signalling through the guard first makes the drop a no-op.
pub struct FenceGuard(pub Fence);

impl Drop for FenceGuard {
    fn drop(&mut self) {
        self.0.signal(Err(DeviceError::ShutDown));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_dropped_unrun_signals_its_fence_with_an_error() {
        let f = Fence::new();
        drop(FenceGuard(f.clone()));
        assert_eq!(f.wait(), Err(DeviceError::ShutDown));
        let done = Fence::new();
        let guard = FenceGuard(done.clone());
        guard.0.signal(Ok(()));
        drop(guard);
        assert_eq!(done.wait(), Ok(()), "a signalled fence keeps its result");
    }

    #[test]
    fn wait_returns_the_signalled_result() {
        let f = Fence::new();
        let g = f.clone();
        let t = std::thread::spawn(move || g.wait());
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert!(!f.is_done());
        f.signal(Err(DeviceError::ShutDown));
        f.signal(Ok(()));
        assert_eq!(
            t.join().unwrap(),
            Err(DeviceError::ShutDown),
            "first signal wins"
        );
    }

    #[test]
    fn future_wakes_when_signalled() {
        struct Flag(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let f = Fence::new();
        let mut fut = Box::pin(f.wait_async());
        let mut cx = Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        f.signal(Ok(()));
        assert!(
            flag.0.load(std::sync::atomic::Ordering::SeqCst),
            "waker called"
        );
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(())));
    }
}
