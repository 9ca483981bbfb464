//! The CPU device, the embedded default: pooled host buffers, streams that run submitted command
//! buffers in order on a worker thread each, fences, and launches executed by the providing
//! plugin's CPU kernel (through [`CpuKernels`]).
//!
//! Hazards: every submission records its fence on the buffers it binds; `read`, `write` and the
//! return of a freed buffer's memory wait for it. Owns buffers and threads; never plans.
//!
//! A host may open several (`cpu`, `cpu:1`, …): each has its own buffers and streams; a stream
//! can wait on another device's event and copy from another CPU device's buffer, in stream order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use parking_lot::{Mutex, RwLock};

use super::pool::{HostPool, PoolStats};
use super::sync::Fence;
use super::table::BufferTable;
use super::{BufferId, CpuKernels, Device, DeviceError, StreamId, check_bindings, check_copy};
use crate::cmdbuf::{Access, CommandBuffer, LaunchCmd};
use crate::target::Target;

/// One buffer: its memory returns to the pool when the last user (a handle or queued work) drops.
struct Buffer {
    id: BufferId,
    size: u64,
    data: RwLock<Box<[u8]>>,
    last_use: Mutex<Option<Fence>>,
    pool: Arc<HostPool>,
}

impl Buffer {
    fn wait_idle(&self) -> Result<(), DeviceError> {
        let fence = self.last_use.lock().clone();
        match fence {
            // A failed kernel leaves the buffer usable; its error went to the submitter.
            Some(f) => f.wait().or(Ok(())),
            None => Ok(()),
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
        Ok(offset as usize..end as usize)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let block = std::mem::take(&mut *self.data.write());
        self.pool.release(block, self.size);
    }
}

enum Job {
    Run {
        cmd: Arc<CommandBuffer>,
        buffers: Vec<Arc<Buffer>>,
        fence: Fence,
    },
    Event(Fence),
    /// Host work in stream order (a cross-device wait or copy); `fence` gets its result.
    Host {
        work: Box<dyn FnOnce() -> Result<(), DeviceError> + Send>,
        fence: Fence,
    },
}

/// Submissions one stream holds queued or running; past it `submit` answers
/// [`DeviceError::QueueFull`] (one client cannot make everyone's queue unbounded).
pub const STREAM_QUEUE_DEPTH: usize = 256;

struct Stream {
    tx: mpsc::Sender<Job>,
    /// Submissions queued or running on this stream.
    pending: Arc<AtomicUsize>,
}

/// The CPU device.
pub struct CpuDevice {
    name: String,
    target: Target,
    pool: Arc<HostPool>,
    buffers: BufferTable<Buffer>,
    streams: Mutex<Vec<Stream>>,
    kernels: Arc<dyn CpuKernels>,
}

impl CpuDevice {
    /// A CPU device named `cpu` whose buffers may hold `memory_limit` bytes at once.
    pub fn new(kernels: Arc<dyn CpuKernels>, memory_limit: u64) -> Arc<CpuDevice> {
        Self::named("cpu", kernels, memory_limit)
    }

    /// A CPU device named `name` (`cpu:1`) whose buffers may hold `memory_limit` bytes at once.
    pub fn named(name: &str, kernels: Arc<dyn CpuKernels>, memory_limit: u64) -> Arc<CpuDevice> {
        let dev = Arc::new(CpuDevice {
            name: name.to_string(),
            target: Target::cpu(),
            pool: Arc::new(HostPool::new(memory_limit, memory_limit / 4)),
            buffers: BufferTable::for_device(name),
            streams: Mutex::new(Vec::new()),
            kernels,
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
        s.tx.send(job).map_err(|_| DeviceError::ShutDown)
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
            fence: fence.clone(),
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
        let block = self.pool.alloc(bytes)?;
        Ok(self.buffers.insert(|id| Buffer {
            id,
            size: bytes,
            data: RwLock::new(block),
            last_use: Mutex::new(None),
            pool: self.pool.clone(),
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
        b.wait_idle()?;
        b.data.write()[range].copy_from_slice(data);
        Ok(())
    }

    fn read(&self, buffer: BufferId, offset: u64, len: u64) -> Result<Vec<u8>, DeviceError> {
        let b = self.buffer(buffer)?;
        let range = b.range(offset, len)?;
        b.wait_idle()?;
        Ok(b.data.read()[range].to_vec())
    }

    fn default_stream(&self) -> StreamId {
        StreamId(0)
    }

    fn create_stream(&self) -> Result<StreamId, DeviceError> {
        let mut streams = self.streams.lock();
        let id = StreamId(streams.len() as u32);
        let (tx, rx) = mpsc::channel();
        let kernels = self.kernels.clone();
        let pending = Arc::new(AtomicUsize::new(0));
        let done = pending.clone();
        std::thread::Builder::new()
            .name(format!("umd-cpu-stream-{}", id.0))
            .spawn(move || worker(rx, kernels, done))
            .map_err(|_| DeviceError::ShutDown)?;
        streams.push(Stream { tx, pending });
        Ok(id)
    }

    fn submit(
        &self,
        stream: StreamId,
        cmd: Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<Fence, DeviceError> {
        if cmd.target != self.target.name {
            return Err(DeviceError::WrongTarget {
                expected: self.target.name.clone(),
                found: cmd.target.clone(),
            });
        }
        check_bindings(&cmd, bindings, |id| self.size(id))?;
        let buffers = bindings
            .iter()
            .map(|id| self.buffer(*id))
            .collect::<Result<Vec<_>, _>>()?;
        // Validate before any side effect: a fence left on the buffers must always be signalled.
        // A slot in the stream's bounded queue is taken here and given back by its worker.
        self.take_slot(stream)?;
        let fence = Fence::new();
        for b in &buffers {
            *b.last_use.lock() = Some(fence.clone());
        }
        let job = Job::Run {
            cmd,
            buffers,
            fence: fence.clone(),
        };
        if let Err(e) = self.send(stream, job) {
            fence.signal(Err(e.clone()));
            return Err(e);
        }
        Ok(fence)
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
            let len = from.size(src)?;
            check_copy(dst, self.size(dst)?, len)?;
            self.synchronize(stream)?;
            let data = from.read(src, 0, len)?;
            self.write(dst, 0, &data)?;
            return Ok(Fence::done(Ok(())));
        };
        let (s, d) = (cpu.buffer(src)?, self.buffer(dst)?);
        check_copy(dst, d.size, s.size)?;
        let before = [s.last_use.lock().clone(), d.last_use.lock().clone()];
        let fence = Fence::new();
        let dst_buffer = d.clone();
        self.queue_host(stream, fence.clone(), move || {
            for f in before.iter().flatten() {
                let _ = f.wait();
            }
            let data = s.data.read()[..s.size as usize].to_vec();
            dst_buffer.data.write()[..data.len()].copy_from_slice(&data);
            Ok(())
        })?;
        *d.last_use.lock() = Some(fence.clone());
        Ok(fence)
    }

    fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    fn trim(&self) {
        self.pool.trim();
    }
}

fn worker(rx: mpsc::Receiver<Job>, kernels: Arc<dyn CpuKernels>, pending: Arc<AtomicUsize>) {
    for job in rx {
        match job {
            Job::Event(f) => f.signal(Ok(())),
            Job::Host { work, fence } => {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                    .unwrap_or_else(|_| Err(DeviceError::Invalid("host work panicked".into())));
                pending.fetch_sub(1, Ordering::AcqRel);
                fence.signal(result);
            }
            Job::Run {
                cmd,
                buffers,
                fence,
            } => {
                // A panic in a launch must not leave the fence unsignalled (waiters would hang) or
                // kill the stream's worker.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    cmd.launches.iter().enumerate().try_for_each(|(i, l)| {
                        run_launch(&*kernels, &cmd, l, &buffers).map_err(|message| {
                            DeviceError::Launch {
                                launch: i,
                                entry: l.entry_point.clone(),
                                message,
                            }
                        })
                    })
                }))
                .unwrap_or_else(|_| {
                    Err(DeviceError::Launch {
                        launch: 0,
                        entry: String::new(),
                        message: "the CPU launch panicked".into(),
                    })
                });
                drop(buffers);
                pending.fetch_sub(1, Ordering::AcqRel);
                fence.signal(result);
            }
        }
    }
}

/// Runs one launch: gathers the bindings it references, calls the CPU kernel, stores what it
/// wrote after checking it matches the binding's size.
fn run_launch(
    kernels: &dyn CpuKernels,
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
    // Read guards stay held for the call, so inputs are lowered straight from device memory.
    // `read_recursive`: the same buffer may be bound twice while a writer waits.
    let guards = used
        .iter()
        .map(|&(b, access)| {
            let guard = access
                .reads()
                .then(|| buffers[b as usize].data.read_recursive());
            (b, binding_size(b), guard)
        })
        .collect::<Vec<_>>();
    let views = guards
        .iter()
        .map(|(b, size, g)| (*b, *size, g.as_ref().map(|g| &g[..*size as usize])))
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
        buffers[b as usize].data.write()[..data.len()].copy_from_slice(&data);
    }
    Ok(())
}
