//! The CUDA device (`cuda:N`, feature `cuda`): device memory from a caching allocator, a pool
//! of streams, command buffers launched with their relocations patched to device addresses,
//! kernels compiled from the plugins' CUDA C with NVRTC and cached, fences signalled in order by
//! each stream's completion thread waiting on an event recorded after each submit (no stream
//! callback, no polling).
//!
//! A command buffer of several launches submitted again with the same buffers is captured into a
//! CUDA graph on its second run and replayed from then on ([`graphs`]: the policy).
//!
//! Hazards, as on the CPU device ([`super::hazard`]): every submission records its fence on the
//! buffers it binds as reader and/or writer; a submission conflicting with work queued on another
//! stream waits for it on the host before it enqueues (no `cuStreamWaitEvent` yet); `read` and
//! `write` wait for a buffer's users, and a freed buffer's memory is reused only after them (the
//! allocator holds the block until they signal).
//!
//! Owns the device's buffers, streams and loaded modules; never plans. Driver calls go through
//! [`driver`], the only file here with `unsafe`. `timing` adds the bare-driver baselines of
//! `umd check`'s figures (bare launches, raw allocations, device copies).
//!
//! Written without a GPU: everything that needs the driver is untested here (the pure parts —
//! versions, kernel cache, parameter patching, errors without a driver — are unit-tested).

pub mod driver;
pub mod graphs;
mod info;
mod launch;
mod loaded;
pub mod modules;
pub mod nvrtc;
pub mod ptx;
mod raw_alloc;
mod timing;
pub mod versions;

use crate::device::table::BufferTable;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

pub use info::{DeviceInfo, devices};
pub use launch::patch_params;

use super::caching::{AllocError, CachingAllocator};
use super::completion::Completions;
use super::hazard::Hazards;
use super::pool::PoolStats;
use super::sync::Fence;
use super::{BufferId, Device, DeviceError, KernelSources, StreamId, check_submit};
use crate::cmdbuf::{CommandBuffer, LaunchCmd};
use crate::target::Target;
use driver::{Context, Event, Function, Graph, Stream};
use graphs::{Plan, Replays};
use loaded::Modules;
use modules::{Compiler, KernelCache, NoCompiler, Nvrtc};
use raw_alloc::CudaRaw;

type Allocator = Arc<Mutex<CachingAllocator<CudaRaw>>>;

/// Allocator stream of every block: `Device::alloc` takes no stream.
const ALLOC_STREAM: StreamId = StreamId(0);
/// Pseudo-stream under which a freed block's pending fences are recorded, so the allocator
/// holds the block until they signal.
const FENCED: StreamId = StreamId(u32::MAX);

/// Whether the device is lost: set by the first sticky error (from any driver call or a
/// stream's status), seen by every later call, which then fails with that error.
#[derive(Clone, Default)]
pub(crate) struct LostFlag(Arc<Mutex<Option<String>>>);

impl LostFlag {
    /// `Err(Lost)` once the device is lost.
    fn check(&self) -> Result<(), DeviceError> {
        match &*self.0.lock() {
            Some(why) => Err(DeviceError::Lost(why.clone())),
            None => Ok(()),
        }
    }

    /// Passes `r` through, remembering the first loss it reports.
    fn note<T>(&self, r: Result<T, DeviceError>) -> Result<T, DeviceError> {
        if let Err(DeviceError::Lost(why)) = &r {
            let mut lost = self.0.lock();
            if lost.is_none() {
                tracing::error!(error = %why, "CUDA device lost");
                *lost = Some(why.clone());
            }
        }
        r
    }

    /// Why the device is lost, if it is.
    fn reason(&self) -> Option<String> {
        self.0.lock().clone()
    }
}

/// One buffer; its block returns to the allocator when the last handle drops.
struct Buffer {
    id: BufferId,
    size: u64,
    addr: u64,
    /// Block bytes beyond `size` (rounding), for the statistics.
    waste: u64,
    /// Fences of submissions using it that may still be running.
    uses: Mutex<Vec<Fence>>,
    /// Its readers and writer across streams.
    hazards: Mutex<Hazards>,
    alloc: Allocator,
    stats: Arc<AtomicU64>,
}

impl Buffer {
    fn wait_idle(&self) {
        let uses = self.uses.lock().clone();
        // A failed kernel leaves the buffer usable; its error went to the submitter.
        uses.iter().for_each(|f| drop(f.wait()));
    }

    fn record(&self, fence: &Fence) {
        let mut uses = self.uses.lock();
        uses.retain(|f| !f.is_done());
        uses.push(fence.clone());
    }

    /// The device address of bytes `offset..offset + len`.
    fn at(&self, offset: u64, len: u64) -> Result<u64, DeviceError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(self.addr + offset),
            _ => Err(DeviceError::OutOfBounds {
                buffer: self.id,
                offset,
                end: offset.saturating_add(len),
                size: self.size,
            }),
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.stats.fetch_sub(self.waste, Ordering::Relaxed);
        let mut alloc = self.alloc.lock();
        for f in self.uses.get_mut().drain(..).filter(|f| !f.is_done()) {
            if let Err(e) = alloc.record_stream(self.addr, FENCED, f) {
                tracing::error!(error = %e, "device buffer fence not recorded");
            }
        }
        if let Err(e) = alloc.free(self.addr) {
            tracing::error!(error = %e, "device buffer not freed");
        }
    }
}

/// A CUDA device.
pub struct CudaDevice {
    name: String,
    info: DeviceInfo,
    target: Target,
    ctx: Context,
    alloc: Allocator,
    waste: Arc<AtomicU64>,
    buffers: BufferTable<Buffer>,
    streams: RwLock<Vec<Arc<StreamSlot>>>,
    /// Host-to-device copies of `write`, one at a time.
    uploads: Mutex<Stream>,
    modules: Modules,
    kernels: Arc<dyn KernelSources>,
    lost: LostFlag,
    /// Held while a submission records its hazards.
    submit_order: Mutex<()>,
    /// Captured graphs and the submissions seen once ([`graphs`]).
    replays: Mutex<Replays<Replay>>,
}

/// A captured graph and the kernels it launches (keeping their modules loaded while it lives).
struct Replay {
    graph: Graph,
    _kernels: Vec<Function>,
}

impl CudaDevice {
    /// Opens `cuda:{index}`, compiling kernels with NVRTC and caching them in `kernel_cache`
    /// (`None`: in memory only; the host uses `$XDG_CACHE_HOME/umd/kernels`, or
    /// `~/.cache/umd/kernels`). Without NVRTC only prebuilt modules in that cache load.
    /// Refuses, with what to do, a missing driver, a missing device, and versions that do not
    /// work together.
    pub fn open(
        index: usize,
        kernels: Arc<dyn KernelSources>,
        kernel_cache: Option<PathBuf>,
    ) -> Result<Arc<CudaDevice>, DeviceError> {
        let name = format!("cuda:{index}");
        let count = driver::device_count()?;
        if index >= count {
            return Err(DeviceError::Unavailable(format!(
                "no CUDA device {index}: the driver reports {count} (`umd devices` lists them)"
            )));
        }
        let unavailable = |why: String| DeviceError::Unavailable(format!("{name}: {why}"));
        let driver_cuda = driver::driver_version()?;
        let found = nvrtc::locate(None).ok().cloned();
        let info = DeviceInfo::new(
            index,
            driver::device_attributes(index)?,
            driver_cuda,
            found.clone(),
        );
        let compiler: Box<dyn Compiler> = match &found {
            Some(f) => {
                versions::check_versions(driver_cuda, f.version, versions::MIN_DRIVER)
                    .map_err(unavailable)?;
                let archs = nvrtc::supported_archs()?;
                versions::check_arch(info.compute_capability, &archs, f.version)
                    .map_err(unavailable)?;
                Box::new(Nvrtc { version: f.version })
            }
            None => {
                versions::check_versions(driver_cuda, versions::MIN_DRIVER, versions::MIN_DRIVER)
                    .map_err(unavailable)?;
                tracing::warn!(device = %name, "no NVRTC: only prebuilt kernels (`umd plugins compile --out`) will load");
                Box::new(NoCompiler)
            }
        };

        let ctx = Context::open(index)?;
        let lost = LostFlag::default();
        let stream = StreamSlot::new(&name, 0, &ctx, &lost)?;
        let uploads = Mutex::new(ctx.new_stream()?);
        let cache = KernelCache::new(compiler, kernel_cache);
        tracing::info!(device = %info, "CUDA device opened");
        let buffers = BufferTable::for_device(&name);
        Ok(Arc::new(CudaDevice {
            target: info.target(),
            name,
            info,
            alloc: Arc::new(Mutex::new(CachingAllocator::new(CudaRaw::new(
                ctx.clone(),
                lost.clone(),
            )))),
            waste: Arc::new(AtomicU64::new(0)),
            buffers,
            streams: RwLock::new(vec![stream]),
            uploads,
            modules: Modules::new(ctx.clone(), cache),
            ctx,
            kernels,
            lost,
            submit_order: Mutex::new(()),
            replays: Mutex::new(Replays::default()),
        }))
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn buffer(&self, id: BufferId) -> Result<Arc<Buffer>, DeviceError> {
        self.buffers.get(id)
    }

    fn stream(&self, id: StreamId) -> Result<Arc<StreamSlot>, DeviceError> {
        self.streams
            .read()
            .get(id.0 as usize)
            .cloned()
            .ok_or(DeviceError::UnknownStream(id))
    }

    /// The kernel of one launch, checked against it.
    fn kernel(&self, index: usize, l: &LaunchCmd) -> Result<Function, DeviceError> {
        let err = |message: String| DeviceError::Launch {
            launch: index,
            entry: l.entry_point.clone(),
            message,
        };
        let module = self
            .modules
            .get(&l.module, &self.target, &*self.kernels)
            .map_err(err)?;
        let f = module.function(&l.entry_point).map_err(err)?;
        let max_shared = self.target.limits.max_shared_memory;
        launch::check_kernel(
            l,
            f.max_threads_per_block,
            f.static_shared_memory,
            max_shared,
        )
        .map_err(err)?;
        Ok(f)
    }

    /// Queues every launch of `cmd` on `slot` (captured, not run, while it captures); stops at the
    /// first that fails (the ones queued before still run).
    fn launch_all(
        &self,
        slot: &StreamSlot,
        cmd: &CommandBuffer,
        kernels: &[Function],
        addrs: &[u64],
    ) -> Result<(), DeviceError> {
        for (i, (l, f)) in cmd.launches.iter().zip(kernels).enumerate() {
            let params = patch_params(&l.params, &l.relocations, addrs);
            self.lost
                .note(
                    slot.stream
                        .launch(f, l.grid, l.block, l.shared_memory, &params),
                )
                .map_err(|e| DeviceError::Launch {
                    launch: i,
                    entry: l.entry_point.clone(),
                    message: e.to_string(),
                })?;
        }
        Ok(())
    }

    /// Records every launch of `cmd` into a graph (nothing runs).
    fn capture(
        &self,
        slot: &StreamSlot,
        cmd: &CommandBuffer,
        kernels: &[Function],
        addrs: &[u64],
    ) -> Result<Graph, DeviceError> {
        slot.stream.begin_capture()?;
        let queued = self.launch_all(slot, cmd, kernels, addrs);
        let ended = self.lost.note(slot.stream.end_capture());
        queued?;
        ended?.ok_or_else(|| DeviceError::Driver {
            call: "cuStreamEndCapture",
            message: "nothing was captured".into(),
        })
    }

    /// Launches `cmd` plainly, or captures it into a graph, or replays its graph
    /// ([`graphs::Replays::plan`]). A failed capture falls back to plain launches. The caller
    /// holds `slot.launching`.
    fn run_launches(
        &self,
        stream: StreamId,
        slot: &StreamSlot,
        cmd: &Arc<CommandBuffer>,
        kernels: Vec<Function>,
        addrs: &[u64],
    ) -> Result<(), DeviceError> {
        let key = graphs::Key::new(stream, cmd, addrs);
        let plan = self.replays.lock().plan(&key, cmd.launches.len());
        let replay_failed = |e: DeviceError| DeviceError::Launch {
            launch: 0,
            entry: "(CUDA graph)".into(),
            message: e.to_string(),
        };
        match plan {
            Plan::Plain => self.launch_all(slot, cmd, &kernels, addrs),
            Plan::Replay(r) => self.lost.note(r.graph.launch()).map_err(replay_failed),
            Plan::Capture => match self.capture(slot, cmd, &kernels, addrs) {
                Ok(graph) => {
                    let launched = self.lost.note(graph.launch()).map_err(replay_failed);
                    let replay = Replay {
                        graph,
                        _kernels: kernels,
                    };
                    self.replays.lock().captured(key, Some(replay));
                    launched
                }
                Err(e) => {
                    tracing::warn!(device = %self.name, error = %e, "CUDA graph capture failed: launching plainly");
                    self.replays.lock().captured(key, None);
                    self.launch_all(slot, cmd, &kernels, addrs)
                }
            },
        }
    }

    /// Signals `fence` with `result` once `stream` reaches this point (the caller holds
    /// `slot.launching`): an event recorded here
    /// and waited for by the stream's completion thread (if the event cannot be recorded: after
    /// waiting for the stream here).
    fn signal_when_reached(
        &self,
        slot: &StreamSlot,
        fence: &Fence,
        result: Result<(), DeviceError>,
    ) {
        let event = slot
            .events
            .lock()
            .pop()
            .map_or_else(|| self.ctx.new_blocking_event(), Ok);
        match self
            .lost
            .note(event.and_then(|e| e.record(&slot.stream).map(|()| e)))
        {
            Ok(event) => slot.completions.push(event, fence, result),
            Err(e) => {
                tracing::warn!(device = %self.name, error = %e, "waiting for the stream instead");
                fence.signal(self.lost.note(result.and(slot.stream.synchronize())));
            }
        }
    }
}

/// Events kept per stream for reuse.
const MAX_SPARE_EVENTS: usize = 64;

/// A stream, the thread that signals its fences, and its spare events.
struct StreamSlot {
    stream: Stream,
    completions: Completions<Event>,
    events: Arc<Mutex<Vec<Event>>>,
    /// Held by whatever queues work on the stream (launches, graph captures and replays, event
    /// records, the fallback synchronize): a capture must see no other thread's work.
    launching: Mutex<()>,
}

impl StreamSlot {
    fn new(
        device: &str,
        index: usize,
        ctx: &Context,
        lost: &LostFlag,
    ) -> Result<Arc<Self>, DeviceError> {
        let stream = lost.note(ctx.new_stream())?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let (note, spare) = (lost.clone(), events.clone());
        let completions = Completions::new(
            format!("umd-{device}-stream-{index}"),
            move |r| note.note(r),
            move |event| {
                let mut spare = spare.lock();
                if spare.len() < MAX_SPARE_EVENTS {
                    spare.push(event);
                }
            },
        )?;
        Ok(Arc::new(StreamSlot {
            stream,
            completions,
            events,
            launching: Mutex::new(()),
        }))
    }
}

impl Drop for CudaDevice {
    /// Lets queued work (and the callbacks signalling its fences) finish before the graphs,
    /// streams, modules and memory go.
    fn drop(&mut self) {
        for s in self.streams.get_mut().iter() {
            if let Err(e) = s.stream.synchronize() {
                tracing::warn!(device = %self.name, error = %e, "stream failed at shutdown");
            }
        }
        // Graphs go first, while their streams and modules are still there.
        self.replays.get_mut().clear();
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn target(&self) -> &Target {
        &self.target
    }

    fn alloc(&self, bytes: u64) -> Result<BufferId, DeviceError> {
        self.lost.check()?;
        let block = self
            .alloc
            .lock()
            .alloc(bytes, ALLOC_STREAM)
            .map_err(|e| match e {
                // The raw allocator saw a sticky error, not a full device.
                _ if self.lost.check().is_err() => self.lost.check().unwrap_err(),
                AllocError::OutOfMemory { allocated, .. } => DeviceError::OutOfMemory {
                    requested: bytes,
                    limit: self.info.total_memory,
                    in_use: allocated,
                },
                other => DeviceError::Driver {
                    call: "alloc",
                    message: other.to_string(),
                },
            })?;
        // A reused block holds its last owner's bytes: cleared before anyone sees it (as the
        // CPU device does).
        if bytes > 0
            && let Err(e) = self.lost.note(self.uploads.lock().zero(block.addr, bytes))
        {
            let _ = self.alloc.lock().free(block.addr);
            return Err(e);
        }
        let waste = block.size - bytes.min(block.size);
        self.waste.fetch_add(waste, Ordering::Relaxed);
        Ok(self.buffers.insert(|id| Buffer {
            id,
            size: bytes,
            addr: block.addr,
            waste,
            uses: Mutex::new(Vec::new()),
            hazards: Mutex::new(Hazards::default()),
            alloc: self.alloc.clone(),
            stats: self.waste.clone(),
        }))
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        // The block goes back when the last handle drops, held until the buffer's fences signal.
        self.buffers.remove(buffer)
    }

    fn size(&self, buffer: BufferId) -> Result<u64, DeviceError> {
        Ok(self.buffer(buffer)?.size)
    }

    fn write(&self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let b = self.buffer(buffer)?;
        let addr = b.at(offset, data.len() as u64)?;
        b.wait_idle();
        self.lost.check()?;
        if data.is_empty() {
            return Ok(());
        }
        self.lost
            .note(self.uploads.lock().copy_to_device(addr, data))
    }

    fn read(&self, buffer: BufferId, offset: u64, len: u64) -> Result<Vec<u8>, DeviceError> {
        let b = self.buffer(buffer)?;
        let addr = b.at(offset, len)?;
        b.wait_idle();
        self.lost.check()?;
        let mut out = vec![0u8; len as usize];
        if len > 0 {
            self.lost.note(self.ctx.copy_from_device(&mut out, addr))?;
        }
        Ok(out)
    }

    fn default_stream(&self) -> StreamId {
        StreamId(0)
    }

    fn create_stream(&self) -> Result<StreamId, DeviceError> {
        self.lost.check()?;
        let mut streams = self.streams.write();
        let slot = StreamSlot::new(&self.name, streams.len(), &self.ctx, &self.lost)?;
        streams.push(slot);
        Ok(StreamId(streams.len() as u32 - 1))
    }

    fn submit(
        &self,
        stream: StreamId,
        cmd: Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<Fence, DeviceError> {
        self.lost.check()?;
        check_submit(&cmd, &self.target, bindings, |id| self.size(id))?;
        let s = self.stream(stream)?;
        let buffers = bindings
            .iter()
            .map(|id| self.buffer(*id))
            .collect::<Result<Vec<_>, _>>()?;
        let addrs: Vec<u64> = buffers.iter().map(|b| b.addr).collect();
        // Every kernel is found and checked before anything is queued.
        let kernels = cmd
            .launches
            .iter()
            .enumerate()
            .map(|(i, l)| self.kernel(i, l))
            .collect::<Result<Vec<_>, _>>()?;
        // Work of other streams this conflicts with is waited for on the host before anything
        // is queued (a stream is in order by itself); hazards are recorded in submission order.
        let waits = {
            let _order = self.submit_order.lock();
            let fence = Fence::new();
            let hazards = buffers.iter().map(|b| &b.hazards);
            let waits = super::hazard::record_all(stream, &cmd, hazards, &fence);
            buffers.iter().for_each(|b| b.record(&fence));
            (fence, waits)
        };
        let (fence, waits) = waits;
        for w in waits {
            let _ = w.wait();
        }
        // Nothing else touches this stream from here to the completion event (a capture would
        // take another thread's event or synchronize). On a failed launch the ones queued
        // before still run: the fence signals after them.
        let _launching = s.launching.lock();
        let result = self.run_launches(stream, &s, &cmd, kernels, &addrs);
        self.signal_when_reached(&s, &fence, result);
        Ok(fence)
    }

    fn record_event(&self, stream: StreamId) -> Result<Fence, DeviceError> {
        self.lost.check()?;
        let s = self.stream(stream)?;
        let fence = Fence::new();
        // Never inside another thread's capture.
        let _launching = s.launching.lock();
        self.signal_when_reached(&s, &fence, Ok(()));
        Ok(fence)
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats::from_allocator(
            &self.alloc.lock().stats(),
            self.waste.load(Ordering::Relaxed),
        )
    }

    fn lost(&self) -> Option<String> {
        self.lost.reason()
    }

    fn trim(&self) {
        let released = self.alloc.lock().empty_cache();
        tracing::debug!(device = %self.name, released, "device memory cache trimmed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdbuf::ModuleRef;
    use crate::device::KernelSource;

    struct NoSources;
    impl KernelSources for NoSources {
        fn source(&self, _: &ModuleRef, _: &Target) -> Result<KernelSource, String> {
            Err("no plugins here".into())
        }
    }

    #[test]
    fn a_sticky_error_loses_the_device_for_every_later_call() {
        let lost = LostFlag::default();
        assert_eq!(lost.check(), Ok(()));
        // An ordinary driver error leaves the device usable.
        let busy = DeviceError::Driver {
            call: "cuLaunchKernel",
            message: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES".into(),
        };
        assert_eq!(lost.note::<()>(Err(busy.clone())), Err(busy));
        assert_eq!((lost.check(), lost.reason()), (Ok(()), None));
        // The first sticky error (here as a stream callback reports it) is kept and returned to
        // every later caller, from any clone (the callbacks hold one).
        let status = driver::stream_status(700);
        let callback_side = lost.clone();
        assert!(matches!(
            callback_side.note(status),
            Err(DeviceError::Lost(_))
        ));
        let _ = lost.note::<()>(Err(DeviceError::Lost("a later one".into())));
        let e = lost.check().unwrap_err();
        assert!(e.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{e}");
        assert!(e.to_string().contains("restart umd"), "{e}");
        assert_eq!(lost.reason().map(|r| r.contains("700")), Some(true));
    }

    #[test]
    fn open_is_a_clean_error_without_a_driver() {
        let r = CudaDevice::open(0, Arc::new(NoSources), None);
        if !driver::driver_present() {
            let msg = r.err().expect("no driver, no device").to_string();
            assert!(
                msg.contains("CUDA driver library (libcuda.so) not found"),
                "{msg}"
            );
        }
        // With a driver: opened, or refused with a reason (no device, versions); no panic.
    }

    #[test]
    fn a_missing_device_is_named() {
        if driver::driver_present() {
            let msg = CudaDevice::open(1 << 20, Arc::new(NoSources), None)
                .err()
                .expect("no such device")
                .to_string();
            assert!(msg.contains("no CUDA device 1048576"), "{msg}");
        }
    }
}
