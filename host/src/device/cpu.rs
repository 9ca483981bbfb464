//! The CPU device, the embedded default: host buffers from the same caching allocator policy as
//! CUDA ([`super::caching`] over [`HostRaw`] segments, zeroed for each new owner), streams that
//! run submitted command
//! buffers in order on a worker thread each, fences, and launches executed by the providing
//! plugin's CPU kernel (through [`CpuKernels`]): in place when the plugin can (ABI 1.3), its grid
//! split into block ranges across the device's worker threads when the kernel allows it.
//!
//! Hazards ([`super::hazard`]): every submission records its fence on the buffers it binds, as
//! a reader and/or writer; queued work waits for the earlier work it conflicts with on any
//! stream, and the host's `read`, `write` and the
//! return of a freed buffer's memory wait for it. Owns buffers and threads; never plans.
//!
//! A host may open several (`cpu`, `cpu:1`, …): each has its own buffers and streams; a stream
//! can wait on another device's event and copy from another CPU device's buffer, in stream order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;

use parking_lot::Mutex;

use super::caching::{AllocError, CachingAllocator};
use super::hazard::Hazards;
use super::host_raw::{HostRaw, Segment};
use super::keepers::Keepers;
use super::pool::PoolStats;
use super::split::Splitter;
use super::sync::{Fence, FenceGuard};
use super::table::BufferTable;
use super::{
    BoundMemory, BufferId, BufferMemory, CpuKernelMode, CpuKernels, Device, DeviceError, StreamId,
    check_copy, check_submit,
};
use crate::cmdbuf::{Access, CommandBuffer, LaunchCmd};
use crate::target::Target;

/// The CPU device's allocator: CUDA's caching policy over host segments.
type Allocator = Arc<Mutex<CachingAllocator<HostRaw>>>;

/// One buffer: bytes `offset .. offset + size` of a segment; its block returns to the allocator
/// when the last user (a handle or queued work) drops.
struct Buffer {
    id: BufferId,
    size: u64,
    addr: u64,
    segment: Arc<Segment>,
    offset: usize,
    /// Block bytes beyond `size` (rounding), for the statistics.
    waste: u64,
    hazards: Mutex<Hazards>,
    alloc: Allocator,
    stats: Arc<std::sync::atomic::AtomicU64>,
    /// (ABI 1.7) The resident name once frozen ([`Device::freeze`]); 0 while writable.
    resident: AtomicU64,
}

/// The next resident name (process-wide, never reused; 0 means none).
static NEXT_RESIDENT: AtomicU64 = AtomicU64::new(1);

impl Buffer {
    fn resident(&self) -> Option<u64> {
        Some(self.resident.load(Ordering::Acquire)).filter(|&n| n != 0)
    }

    fn check_writable(&self, what: impl FnOnce() -> String) -> Result<(), DeviceError> {
        match self.resident() {
            Some(_) => Err(DeviceError::ReadOnly {
                buffer: self.id,
                what: what(),
            }),
            None => Ok(()),
        }
    }

    /// Waits for the work the host's access must follow (a failed kernel leaves the buffer
    /// usable: its error went to its submitter).
    fn wait_for(&self, host_writes: bool) {
        let fences = {
            let h = self.hazards.lock();
            if host_writes {
                h.before_write()
            } else {
                h.before_read().into_iter().collect()
            }
        };
        for f in fences {
            let _ = f.wait();
        }
    }

    fn range(&self, offset: u64, len: u64) -> Result<std::ops::Range<usize>, DeviceError> {
        let end = offset.checked_add(len).filter(|e| *e <= self.size).ok_or(
            DeviceError::OutOfBounds {
                buffer: self.id,
                offset,
                end: offset.saturating_add(len),
                size: self.size,
            },
        )?;
        Ok(self.offset + offset as usize..self.offset + end as usize)
    }
}

impl BufferMemory for Buffer {
    fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
        // `read_recursive`: the same buffer may be bound twice while a writer waits.
        let at = self.offset + offset;
        dst.extend_from_slice(&self.segment.read_recursive()[at..at + len]);
    }

    fn write_from(&self, offset: usize, src: &[u8]) {
        let at = self.offset + offset;
        self.segment.write()[at..at + src.len()].copy_from_slice(src);
    }

    fn with_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        // in place, under the segment's read lock (recursive: both operands of a product
        // may be in one segment while a writer waits)
        let at = self.offset + offset;
        f(&self.segment.read_recursive()[at..at + len])
    }

    fn placement(&self) -> Option<(usize, usize)> {
        Some((
            Arc::as_ptr(&self.segment) as *const () as usize,
            self.offset,
        ))
    }

    fn try_with_storage_mut(&self, f: &mut dyn FnMut(&mut [u8])) -> bool {
        match self.segment.try_write() {
            Some(mut storage) => {
                f(&mut storage);
                true
            }
            None => false,
        }
    }

    fn try_with_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        let at = self.offset + offset;
        match self.segment.try_read_recursive() {
            Some(storage) => {
                f(&storage[at..at + len]);
                true
            }
            None => false,
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(name) = self.resident() {
            // the matrix unit's packed copies of these frozen bytes go with them
            crate::plugin::packed::forget(name);
        }
        self.stats.fetch_sub(self.waste, Ordering::Relaxed);
        if let Err(e) = self.alloc.lock().free(self.addr) {
            tracing::error!(error = %e, "CPU buffer block not returned");
        }
    }
}

enum Job {
    Run {
        cmd: Arc<CommandBuffer>,
        buffers: Vec<Arc<Buffer>>,
        /// Earlier work on other streams this waits for (hazards).
        waits: Vec<Fence>,
        fence: FenceGuard,
    },
    Event(Fence),
    /// Waits for work the stream's caller runs itself ([`Device::submit_wait`]): what is
    /// queued after it runs after that work.
    After(Fence),
    /// Host work in stream order (a cross-device wait or copy); `fence` gets its result.
    Host {
        work: Box<dyn FnOnce() -> Result<(), DeviceError> + Send>,
        fence: FenceGuard,
    },
}

/// The stream a cross-device copy is recorded under on the source's buffer (never one of the
/// source device's streams).
const FOREIGN_STREAM: StreamId = StreamId(u32::MAX);

/// Bound bytes up to which a launch that is not worth splitting runs through `run-cpu` even
/// when its plugin runs kernels in place (measured: Add of 64 Ki f32 is faster that way).
const SMALL_LAUNCH_BYTES: u64 = 1 << 20;
/// Bytes of read-and-written bindings past which a launch runs in place even when small: the
/// copy path moves such a binding in and out whole, where a kernel filling it a chunk at a time
/// touches only its chunk (measured: a gradient-boosting table of 284 KB written in 71 chunks
/// took 8 ms a run through `run-cpu`).
const SMALL_READ_WRITE_BYTES: u64 = 64 << 10;
/// Bound bytes past which a launch of a kernel computing on the vector unit (ABI 1.10) runs in
/// place even when small: below, one `run-cpu` call still costs less (measured: an Add of 16
/// f32s 6.0 µs through `run-cpu`, 8.6 µs in place; of 64 Ki, 78 µs and 27 µs; crossing near
/// 37 KiB).
const UNIT_IN_PLACE_BYTES: u64 = 32 << 10;

/// Submissions one stream holds queued or running; past it `submit` answers
/// [`DeviceError::QueueFull`] (one client cannot make everyone's queue unbounded).
pub const STREAM_QUEUE_DEPTH: usize = 256;

struct Stream {
    tx: mpsc::Sender<Job>,
    /// Submissions queued or running on this stream.
    pending: Arc<AtomicUsize>,
    /// The fence of work a caller runs on its own thread, while it runs: jobs queued meanwhile
    /// wait for it first.
    on_caller: Arc<Mutex<Option<Fence>>>,
}

/// The CPU device.
pub struct CpuDevice {
    name: String,
    target: Target,
    alloc: Allocator,
    /// Rounding waste of live buffers.
    waste: Arc<std::sync::atomic::AtomicU64>,
    buffers: BufferTable<Buffer>,
    streams: Mutex<Vec<Stream>>,
    /// Held while a submission records its hazards and is queued.
    submit_order: Mutex<()>,
    exec: Arc<Exec>,
}

/// What runs launches: the kernel provider and the worker threads split launches run on.
struct Exec {
    kernels: Arc<dyn CpuKernels>,
    workers: rayon::ThreadPool,
    /// How many parts a splittable launch is worth.
    splitter: Splitter,
    /// Which kernels keep frozen bytes they read.
    keepers: Keepers,
    /// Kernels that compute on the device's vector unit (ABI 1.10).
    unit_users: Keepers,
}

impl CpuDevice {
    /// A CPU device named `cpu` whose buffers may hold `memory_limit` bytes at once, with a
    /// worker thread per core.
    pub fn new(kernels: Arc<dyn CpuKernels>, memory_limit: u64) -> Arc<CpuDevice> {
        Self::named("cpu", kernels, memory_limit, 0)
    }

    /// A CPU device named `name` (`cpu:1`) whose buffers may hold `memory_limit` bytes at once,
    /// splitting launches across `threads` workers (0: one per core).
    pub fn named(
        name: &str,
        kernels: Arc<dyn CpuKernels>,
        memory_limit: u64,
        threads: usize,
    ) -> Arc<CpuDevice> {
        let workers = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("umd-cpu-worker-{i}"))
            .build()
            .expect("spawning the CPU device's worker threads");
        let dev = Arc::new(CpuDevice {
            name: name.to_string(),
            target: Target::cpu(),
            alloc: Arc::new(Mutex::new(CachingAllocator::new(HostRaw::new(
                memory_limit,
            )))),
            waste: Arc::default(),
            buffers: BufferTable::for_device(name),
            streams: Mutex::new(Vec::new()),
            submit_order: Mutex::new(()),
            exec: Arc::new(Exec {
                kernels,
                workers,
                splitter: Splitter::default(),
                keepers: Keepers::default(),
                unit_users: Keepers::default(),
            }),
        });
        dev.create_stream().expect("the default stream");
        dev
    }

    fn buffer(&self, id: BufferId) -> Result<Arc<Buffer>, DeviceError> {
        self.buffers.get(id)
    }

    fn send(&self, stream: StreamId, job: Job) -> Result<(), DeviceError> {
        let streams = self.streams.lock();
        let s = streams
            .get(stream.0 as usize)
            .ok_or(DeviceError::UnknownStream(stream))?;
        // Stream order: after the work a caller is running on its own thread.
        if let Some(f) = s.on_caller.lock().as_ref().filter(|f| !f.is_done()) {
            s.tx.send(Job::After(f.clone()))
                .map_err(|_| DeviceError::ShutDown)?;
        }
        s.tx.send(job).map_err(|_| DeviceError::ShutDown)
    }

    /// `cmd` checked against the target and `bindings`, and the buffers it binds (nothing is
    /// changed yet).
    fn checked(
        &self,
        cmd: &CommandBuffer,
        bindings: &[BufferId],
    ) -> Result<Vec<Arc<Buffer>>, DeviceError> {
        // each binding's buffer looked up once: kept as its size is checked
        let mut buffers: Vec<Arc<Buffer>> = Vec::with_capacity(bindings.len());
        check_submit(cmd, &self.target, bindings, |id| {
            let b = self.buffer(id)?;
            let size = b.size;
            buffers.push(b);
            Ok(size)
        })?;
        debug_assert_eq!(buffers.len(), bindings.len());
        for (li, l) in cmd.launches.iter().enumerate() {
            for r in l.relocations.iter().filter(|r| r.access.writes()) {
                if let Some(b) = buffers.get(r.binding as usize) {
                    b.check_writable(|| {
                        format!(
                            "launch {li} (`{}`) writes it as binding {}",
                            l.entry_point, r.binding
                        )
                    })?;
                }
            }
        }
        Ok(buffers)
    }

    /// Takes the only slot of `stream`'s queue if it is empty (nothing queued or running):
    /// the caller then runs its work itself, `fence` marking it for work queued meanwhile.
    fn claim_idle(&self, stream: StreamId, fence: &Fence) -> Result<Option<Claim>, DeviceError> {
        let streams = self.streams.lock();
        let s = streams
            .get(stream.0 as usize)
            .ok_or(DeviceError::UnknownStream(stream))?;
        if s.pending
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Ok(None);
        }
        *s.on_caller.lock() = Some(fence.clone());
        Ok(Some(Claim {
            pending: s.pending.clone(),
            on_caller: s.on_caller.clone(),
        }))
    }

    /// Takes a slot in `stream`'s bounded queue (its worker gives it back).
    fn take_slot(&self, stream: StreamId) -> Result<(), DeviceError> {
        let streams = self.streams.lock();
        let s = streams
            .get(stream.0 as usize)
            .ok_or(DeviceError::UnknownStream(stream))?;
        s.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < STREAM_QUEUE_DEPTH).then_some(n + 1)
            })
            .map(drop)
            .map_err(|depth| DeviceError::QueueFull { stream, depth })
    }

    /// Queues host `work` on `stream` (a slot of its bounded queue) with `fence` for its result.
    fn queue_host(
        &self,
        stream: StreamId,
        fence: Fence,
        work: impl FnOnce() -> Result<(), DeviceError> + Send + 'static,
    ) -> Result<(), DeviceError> {
        self.take_slot(stream)?;
        let job = Job::Host {
            work: Box::new(work),
            fence: FenceGuard(fence.clone()),
        };
        if let Err(e) = self.send(stream, job) {
            fence.signal(Err(e.clone()));
            return Err(e);
        }
        Ok(())
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn target(&self) -> &Target {
        &self.target
    }

    fn alloc(&self, bytes: u64) -> Result<BufferId, DeviceError> {
        let (block, located) = {
            let mut a = self.alloc.lock();
            let block = a.alloc(bytes, StreamId(0)).map_err(|e| match e {
                AllocError::OutOfMemory { allocated, .. } => DeviceError::OutOfMemory {
                    requested: bytes,
                    limit: a.raw().limit(),
                    in_use: allocated,
                },
                other => DeviceError::Driver {
                    call: "alloc",
                    message: other.to_string(),
                },
            })?;
            let located = a.raw().locate(block.addr, bytes);
            if located.is_none() {
                let _ = a.free(block.addr);
            }
            (block, located)
        };
        let (segment, offset) = located.ok_or_else(|| DeviceError::Driver {
            call: "alloc",
            message: format!("block {:#x} is in no segment", block.addr),
        })?;
        // A reused block holds its last owner's bytes: cleared before anyone sees it.
        segment.write()[offset..offset + bytes as usize].fill(0);
        let waste = block.size - bytes.min(block.size);
        self.waste.fetch_add(waste, Ordering::Relaxed);
        Ok(self.buffers.insert(|id| Buffer {
            id,
            size: bytes,
            addr: block.addr,
            segment,
            offset,
            waste,
            hazards: Mutex::new(Hazards::default()),
            alloc: self.alloc.clone(),
            stats: self.waste.clone(),
            resident: AtomicU64::new(0),
        }))
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        // Queued work holds its own reference: the memory returns when that work is done.
        self.buffers.remove(buffer)
    }

    fn size(&self, buffer: BufferId) -> Result<u64, DeviceError> {
        Ok(self.buffer(buffer)?.size)
    }

    fn write(&self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let b = self.buffer(buffer)?;
        let range = b.range(offset, data.len() as u64)?;
        b.check_writable(|| "a host write".into())?;
        b.wait_for(true);
        // checked again under the segment's lock, which `freeze` takes to name the bytes: a
        // write either lands before the name is given or is refused
        let mut segment = b.segment.write();
        b.check_writable(|| "a host write".into())?;
        segment[range].copy_from_slice(data);
        Ok(())
    }

    fn freeze(&self, buffer: BufferId) -> Result<(), DeviceError> {
        let b = self.buffer(buffer)?;
        // No submission records itself meanwhile (a writing one checked before this is
        // refused when it runs: `run_launch` checks again); the work writing it so far (a
        // setup) finishes first; a host write in progress lands before the name is given.
        let _order = self.submit_order.lock();
        b.wait_for(false);
        let _segment = b.segment.write();
        let _ = b.resident.compare_exchange(
            0,
            NEXT_RESIDENT.fetch_add(1, Ordering::Relaxed),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        Ok(())
    }

    fn read(&self, buffer: BufferId, offset: u64, len: u64) -> Result<Vec<u8>, DeviceError> {
        let b = self.buffer(buffer)?;
        let range = b.range(offset, len)?;
        b.wait_for(false);
        Ok(b.segment.read_recursive()[range].to_vec())
    }

    fn default_stream(&self) -> StreamId {
        StreamId(0)
    }

    fn create_stream(&self) -> Result<StreamId, DeviceError> {
        let mut streams = self.streams.lock();
        let id = StreamId(streams.len() as u32);
        let (tx, rx) = mpsc::channel();
        let exec = self.exec.clone();
        let pending = Arc::new(AtomicUsize::new(0));
        let done = pending.clone();
        std::thread::Builder::new()
            .name(format!("umd-cpu-stream-{}", id.0))
            .spawn(move || worker(rx, exec, done))
            .map_err(|_| DeviceError::ShutDown)?;
        streams.push(Stream {
            tx,
            pending,
            on_caller: Arc::default(),
        });
        Ok(id)
    }

    fn submit(
        &self,
        stream: StreamId,
        cmd: Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<Fence, DeviceError> {
        // Validate before any side effect: a fence left on the buffers must always be signalled.
        let buffers = self.checked(&cmd, bindings)?;
        // A slot in the stream's bounded queue is taken here and given back by its worker.
        self.take_slot(stream)?;
        // Hazards are recorded and the job queued under one lock: submissions are ordered, and
        // each waits only for earlier ones (no cycle).
        let _order = self.submit_order.lock();
        let fence = Fence::new();
        let waits = record_hazards(stream, &cmd, &buffers, &fence);
        let job = Job::Run {
            cmd,
            buffers,
            waits,
            fence: FenceGuard(fence.clone()),
        };
        // A job that cannot be queued is dropped: its guard signals the fence.
        self.send(stream, job)?;
        Ok(fence)
    }

    /// On the calling thread when `stream` has nothing queued or running (its worker is not
    /// woken, nor the caller after it); else queued as [`Device::submit`] and waited for.
    fn submit_wait(
        &self,
        stream: StreamId,
        cmd: Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<(), DeviceError> {
        let buffers = self.checked(&cmd, bindings)?;
        let fence = Fence::new();
        let (claim, waits) = {
            let _order = self.submit_order.lock();
            let Some(claim) = self.claim_idle(stream, &fence)? else {
                drop(_order);
                return self.submit(stream, cmd, bindings)?.wait();
            };
            (claim, record_hazards(stream, &cmd, &buffers, &fence))
        };
        let guard = FenceGuard(fence);
        for w in waits {
            let _ = w.wait();
        }
        let result = run_job(&self.exec, &cmd, &buffers);
        drop(buffers);
        // Signalled before the stream is given back: fences signal in stream order.
        guard.0.signal(result.clone());
        drop(claim);
        result
    }

    fn record_event(&self, stream: StreamId) -> Result<Fence, DeviceError> {
        let fence = Fence::new();
        self.send(stream, Job::Event(fence.clone()))?;
        Ok(fence)
    }

    /// Queued: the stream's worker waits for `event` (nothing else blocks).
    fn wait_event(&self, stream: StreamId, event: &Fence) -> Result<(), DeviceError> {
        let event = event.clone();
        self.queue_host(stream, Fence::new(), move || {
            // A failed event's error went to its submitter; the work after it still runs.
            let _ = event.wait();
            Ok(())
        })
    }

    /// Queued when `from` is a CPU device: the work writing `src` and `dst` when this is called
    /// is waited for when the copy runs (captured now, so later work cannot make it wait on
    /// itself); host reads and writes of `dst` wait for the copy. Other devices: on the host.
    fn copy_from(
        &self,
        stream: StreamId,
        dst: BufferId,
        from: &Arc<dyn Device>,
        src: BufferId,
    ) -> Result<Fence, DeviceError> {
        let Some(cpu) = (&**from as &dyn std::any::Any).downcast_ref::<CpuDevice>() else {
            return super::copy_on_host(self, stream, dst, &**from, src);
        };
        let (s, d) = (cpu.buffer(src)?, self.buffer(dst)?);
        check_copy(dst, d.size, s.size)?;
        d.check_writable(|| "a copy into it".into())?;
        // The copy reads `src` and writes `dst`: recorded as hazards like a submission (the
        // source's own device numbers its streams apart, so there it is a foreign stream).
        let src_stream = if std::ptr::eq(cpu, self) {
            stream
        } else {
            FOREIGN_STREAM
        };
        let fence = Fence::new();
        let waits = {
            let _order = self.submit_order.lock();
            let mut waits = Vec::new();
            s.hazards
                .lock()
                .record(src_stream, (true, false), &fence, &mut waits);
            d.hazards
                .lock()
                .record(stream, (false, true), &fence, &mut waits);
            waits
        };
        self.queue_host(stream, fence.clone(), move || {
            for f in waits {
                let _ = f.wait();
            }
            let data = s.segment.read_recursive()[s.offset..s.offset + s.size as usize].to_vec();
            d.segment.write()[d.offset..d.offset + data.len()].copy_from_slice(&data);
            Ok(())
        })?;
        Ok(fence)
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats::from_allocator(
            &self.alloc.lock().stats(),
            self.waste.load(Ordering::Relaxed),
        )
    }

    fn trim(&self) {
        self.alloc.lock().empty_cache();
    }
}

/// How long a stream's worker polls for the next job before it sleeps: a client submitting op
/// after op finds it awake instead of paying a thread wake-up per launch.
const POLL_BEFORE_SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

/// The next job: polled for a moment, then waited for; `None` once the stream is gone.
fn next_job(rx: &mpsc::Receiver<Job>) -> Option<Job> {
    let mut next = None;
    super::sync::spin(POLL_BEFORE_SLEEP, || match rx.try_recv() {
        Ok(job) => {
            next = Some(Some(job));
            true
        }
        Err(mpsc::TryRecvError::Disconnected) => {
            next = Some(None);
            true
        }
        Err(mpsc::TryRecvError::Empty) => false,
    });
    next.unwrap_or_else(|| rx.recv().ok())
}

/// A stream claimed by a caller running its work itself: given back when dropped (also when
/// the work panics through it).
struct Claim {
    pending: Arc<AtomicUsize>,
    on_caller: Arc<Mutex<Option<Fence>>>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.on_caller.lock().take();
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// [`hazard::record_all`] over the CPU device's buffers.
fn record_hazards(
    stream: StreamId,
    cmd: &CommandBuffer,
    buffers: &[Arc<Buffer>],
    fence: &Fence,
) -> Vec<Fence> {
    super::hazard::record_all(stream, cmd, buffers.iter().map(|b| &b.hazards), fence)
}

/// Runs the launches of `cmd` in order; a panic in one is its error (the fence must still be
/// signalled, the worker must live on).
fn run_job(exec: &Exec, cmd: &CommandBuffer, buffers: &[Arc<Buffer>]) -> Result<(), DeviceError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cmd.launches.iter().enumerate().try_for_each(|(i, l)| {
            run_launch(exec, cmd, l, buffers).map_err(|message| DeviceError::Launch {
                launch: i,
                entry: l.entry_point.clone(),
                message,
            })
        })
    }))
    .unwrap_or_else(|_| {
        Err(DeviceError::Launch {
            launch: 0,
            entry: String::new(),
            message: "the CPU launch panicked".into(),
        })
    })
}

fn worker(rx: mpsc::Receiver<Job>, exec: Arc<Exec>, pending: Arc<AtomicUsize>) {
    while let Some(job) = next_job(&rx) {
        match job {
            Job::Event(f) => f.signal(Ok(())),
            Job::After(f) => {
                let _ = f.wait();
            }
            Job::Host { work, fence } => {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                    .unwrap_or_else(|_| Err(DeviceError::Invalid("host work panicked".into())));
                pending.fetch_sub(1, Ordering::AcqRel);
                fence.0.signal(result);
            }
            Job::Run {
                cmd,
                buffers,
                waits,
                fence,
            } => {
                for w in waits {
                    let _ = w.wait();
                }
                let result = run_job(&exec, &cmd, &buffers);
                drop(buffers);
                pending.fetch_sub(1, Ordering::AcqRel);
                fence.0.signal(result);
            }
        }
    }
}

/// Runs one launch: in place when its plugin can, else through whole-buffer copies.
fn run_launch(
    exec: &Exec,
    cmd: &CommandBuffer,
    launch: &LaunchCmd,
    buffers: &[Arc<Buffer>],
) -> Result<(), String> {
    let mut used: Vec<(u32, Access)> = Vec::new();
    for r in &launch.relocations {
        match used.iter_mut().find(|(b, _)| *b == r.binding) {
            Some((_, a)) if *a != r.access => *a = Access::ReadWrite,
            Some(_) => {}
            None => used.push((r.binding, r.access)),
        }
    }
    let binding_size = |b: u32| cmd.bindings[b as usize].desc.byte_size().unwrap_or(0);
    let bytes: u64 = used.iter().map(|&(b, _)| binding_size(b)).sum();
    let (in_place, splittable) = match exec.kernels.mode(launch)? {
        CpuKernelMode::Copy => (false, false),
        CpuKernelMode::InPlace { splittable } => (true, splittable),
    };
    let parts = if splittable {
        exec.splitter
            .parts(launch, exec.workers.current_num_threads())
    } else {
        1
    };
    let started = std::time::Instant::now();
    // A small launch not worth splitting is cheaper in one `run-cpu` call than in chunks (each
    // chunk read is copied twice); 1.3 plugins serve both.
    let read_write: u64 = used
        .iter()
        .filter(|&&(_, a)| a == Access::ReadWrite)
        .map(|&(b, _)| binding_size(b))
        .sum();
    // A launch reading a frozen buffer runs in place when its kernel may keep those bytes.
    let resident = used
        .iter()
        .any(|&(b, a)| a == Access::Read && buffers[b as usize].resident().is_some());
    // A kernel computing on the vector unit runs in place: nothing is copied.
    let small = parts == 1
        && bytes <= SMALL_LAUNCH_BYTES
        && read_write <= SMALL_READ_WRITE_BYTES
        && !(resident && exec.keepers.keeps(launch))
        && !(bytes > UNIT_IN_PLACE_BYTES && exec.unit_users.keeps(launch));
    // checked at submit; again here, for a submission checked before its buffer was frozen
    if let Some(&(b, _)) = used
        .iter()
        .find(|&&(b, a)| a.writes() && buffers[b as usize].resident().is_some())
    {
        return Err(format!(
            "it writes binding {b}, a read-only buffer (a compiled model's constant)"
        ));
    }
    let result = if !in_place || small {
        run_copying(&*exec.kernels, launch, buffers, &used, binding_size)
    } else {
        let asked = Arc::new(AtomicBool::new(false));
        let units = Arc::new(AtomicBool::new(false));
        let bound: Arc<[BoundMemory]> = used
            .iter()
            .map(|&(b, access)| BoundMemory {
                binding: b,
                size: binding_size(b),
                access,
                memory: buffers[b as usize].clone(),
                resident: buffers[b as usize].resident(),
                asked: asked.clone(),
                units: units.clone(),
            })
            .collect();
        let blocks = launch.grid.volume();
        let result = if parts == 1 {
            exec.kernels.run_in_place(launch, &bound, 0..blocks)
        } else {
            use rayon::prelude::*;
            exec.workers.install(|| {
                (0..parts).into_par_iter().try_for_each(|p| {
                    let range = blocks * p / parts..blocks * (p + 1) / parts;
                    exec.kernels.run_in_place(launch, &bound, range)
                })
            })
        };
        if resident && result.is_ok() {
            exec.keepers.record(launch, asked.load(Ordering::Relaxed));
        }
        if result.is_ok() {
            exec.unit_users
                .record(launch, units.load(Ordering::Relaxed));
        }
        result
    };
    if splittable && result.is_ok() {
        exec.splitter.record(launch, parts, started.elapsed());
    }
    result
}

/// Runs a launch through whole-buffer copies (`run-cpu`): gathers the bindings it references,
/// calls the CPU kernel, stores what it wrote after checking it matches the binding's size.
fn run_copying(
    kernels: &dyn CpuKernels,
    launch: &LaunchCmd,
    buffers: &[Arc<Buffer>],
    used: &[(u32, Access)],
    binding_size: impl Fn(u32) -> u64,
) -> Result<(), String> {
    // Read guards stay held for the call, so inputs are lowered straight from device memory.
    // `read_recursive`: the same buffer may be bound twice while a writer waits.
    let guards = used
        .iter()
        .map(|&(b, access)| {
            let buffer = &buffers[b as usize];
            let guard = access
                .reads()
                .then(|| (buffer.segment.read_recursive(), buffer.offset));
            (b, binding_size(b), guard)
        })
        .collect::<Vec<_>>();
    let views = guards
        .iter()
        .map(|(b, size, g)| {
            let data = g.as_ref().map(|(g, at)| &g[*at..*at + *size as usize]);
            (*b, *size, data)
        })
        .collect::<Vec<_>>();
    let writes = kernels.run(launch, &views);
    drop(views);
    drop(guards);
    let writes = writes?;
    for (b, data) in writes {
        let allowed = used.iter().any(|&(u, a)| u == b && a.writes());
        if !allowed {
            return Err(format!(
                "kernel wrote binding {b}, which the launch does not write"
            ));
        }
        let size = binding_size(b);
        if data.len() as u64 != size {
            return Err(format!(
                "kernel returned {} bytes for binding {b} of {size} bytes",
                data.len()
            ));
        }
        let buffer = &buffers[b as usize];
        let at = buffer.offset;
        buffer.segment.write()[at..at + data.len()].copy_from_slice(&data);
    }
    Ok(())
}

#[cfg(test)]
#[path = "cpu_tests.rs"]
mod tests;
