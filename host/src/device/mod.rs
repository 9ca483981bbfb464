//! Devices: the [`Device`] trait every backend implements, with one module per backend
//! ([`cpu`], the embedded default; `cuda`, behind the `cuda` feature), the buffer [`pool`] and
//! the [`sync`] primitives.
//!
//! A device owns memory, streams and execution. It receives validated command buffers and the
//! buffers bound to them; it never plans anything and never knows an operator. The CPU device
//! runs a launch by calling the providing plugin's CPU kernel through [`CpuKernels`]; a GPU
//! device compiles the providing plugin's kernel source, fetched through [`KernelSources`].
//! [`caching`] is the device-memory allocator policy of GPU backends.

pub mod caching;
pub mod completion;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod hazard;
pub mod host_raw;
pub mod keepers;
pub mod pool;
pub mod split;
pub mod streams;
pub mod sync;
pub mod table;

use std::any::Any;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use thiserror::Error;

use crate::cmdbuf::{Access, CommandBuffer, LaunchCmd, ModuleRef, Role};
pub use pool::PoolStats;
pub use sync::Fence;

use crate::target::Target;

/// A device buffer handle (valid on the device that made it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u64);

/// A stream handle: work submitted to one stream runs in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

#[derive(Debug, Error, Clone, PartialEq)]
pub enum DeviceError {
    #[error("unknown buffer {0:?}")]
    UnknownBuffer(BufferId),
    #[error("unknown stream {0:?}")]
    UnknownStream(StreamId),
    #[error(
        "resource exhausted: stream {} has {depth} submissions queued, the most it holds; retry \
         later",
        stream.0
    )]
    QueueFull { stream: StreamId, depth: usize },
    #[error("out of memory: {requested} bytes requested, limit {limit}, in use {in_use}")]
    OutOfMemory {
        requested: u64,
        limit: u64,
        in_use: u64,
    },
    #[error("access to {buffer:?} bytes {offset}..{end} is outside its {size} bytes")]
    OutOfBounds {
        buffer: BufferId,
        offset: u64,
        end: u64,
        size: u64,
    },
    #[error("command buffer targets `{found}`, this device runs `{expected}`")]
    WrongTarget { expected: String, found: String },
    #[error("{expected} buffers must be bound, got {found}")]
    BindingCount { expected: usize, found: usize },
    #[error("binding {index} needs {needed} bytes, buffer {buffer:?} has {size}")]
    BindingTooSmall {
        index: usize,
        buffer: BufferId,
        needed: u64,
        size: u64,
    },
    #[error("launch {launch} (`{entry}`) failed: {message}")]
    Launch {
        launch: usize,
        entry: String,
        message: String,
    },
    #[error("input {index} needs {expected} bytes, {given} given")]
    InputSize {
        index: usize,
        expected: u64,
        given: u64,
    },
    #[error("device is shut down")]
    ShutDown,
    #[error("unknown device `{0}` (expected `cpu`, `cpu:N` or `cuda:N`, comma-separated)")]
    UnknownDevice(String),
    /// A device list naming one device twice (`cpu,cpu:0`) or too many devices.
    #[error("device list `{list}`: {reason}")]
    DeviceList { list: String, reason: String },
    /// A request named a device this host does not have.
    #[error("no device `{name}` on this host (it has {available})")]
    NoSuchDevice { name: String, available: String },
    /// A buffer handle given to a device that did not make it.
    #[error(
        "{buffer:?} does not belong to device `{device}` (a buffer is used only on the device \
         that allocated it; copy it across with `copy_from`)"
    )]
    ForeignBuffer { buffer: BufferId, device: String },
    /// The device cannot be opened: no driver, no such device, versions that do not fit, or a
    /// build without its backend. The message says which and what to do.
    #[error("{0}")]
    Unavailable(String),
    #[error("{buffer:?} is read-only (a compiled model's constant): {what}")]
    ReadOnly { buffer: BufferId, what: String },
    #[error("driver call `{call}` failed: {message}")]
    Driver { call: &'static str, message: String },
    /// A command buffer that does not fit this device's real limits.
    #[error("command buffer does not fit this device: {0}")]
    Invalid(String),
    /// The device hit a sticky error (illegal address, launch failure, …): pending work
    /// failed and every later operation fails too. Only a new process recovers it.
    #[error("device lost: {0} (every pending and later operation on it fails; restart umd)")]
    Lost(String),
}

/// One device of a host: `cpu` (= `cpu:0`), `cpu:N` or `cuda:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// A CPU device; `0` is named `cpu`, others `cpu:N`.
    Cpu(usize),
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

/// Most devices one host opens.
pub const MAX_DEVICES: usize = 16;

impl DeviceSpec {
    /// Parses a comma-separated device list (`cpu:0,cpu:1`, `cuda:0,cuda:1,cpu`): the first is
    /// the default. Empty items, duplicates (`cpu,cpu:0`) and more than [`MAX_DEVICES`] are
    /// refused.
    pub fn parse_list(list: &str) -> Result<Vec<DeviceSpec>, DeviceError> {
        let bad = |reason: String| DeviceError::DeviceList {
            list: list.chars().take(200).collect(),
            reason,
        };
        let mut out: Vec<DeviceSpec> = Vec::new();
        for item in list.split(',') {
            if item.trim().is_empty() {
                return Err(bad("an empty item".into()));
            }
            let spec: DeviceSpec = item.parse()?;
            if out.contains(&spec) {
                return Err(bad(format!("`{spec}` is named twice")));
            }
            if out.len() == MAX_DEVICES {
                return Err(bad(format!("more than {MAX_DEVICES} devices")));
            }
            out.push(spec);
        }
        Ok(out)
    }
}

impl FromStr for DeviceSpec {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let spec = s.trim().to_ascii_lowercase();
        if spec == "cpu" {
            return Ok(DeviceSpec::Cpu(0));
        }
        let ordinal = |prefix: &str| {
            spec.strip_prefix(prefix)
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n < 1 << 16)
        };
        ordinal("cpu:")
            .map(DeviceSpec::Cpu)
            .or_else(|| ordinal("cuda:").map(DeviceSpec::Cuda))
            .ok_or_else(|| DeviceError::UnknownDevice(s.chars().take(200).collect()))
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu(0) => f.write_str("cpu"),
            DeviceSpec::Cpu(n) => write!(f, "cpu:{n}"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// The memory of a buffer as a CPU kernel reads and writes it in place. Ranges are checked
/// by the caller against the binding's size (never past the buffer's).
pub trait BufferMemory: Send + Sync {
    /// Appends bytes `offset .. offset + len` to `dst`.
    fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>);
    /// Stores `src` at `offset`.
    fn write_from(&self, offset: usize, src: &[u8]);
    /// Calls `f` with bytes `offset .. offset + len`, in place where the memory allows (the
    /// reader holds the buffer for the call: `f` takes no lock of the device). The default
    /// copies them first.
    fn with_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        let mut bytes = Vec::with_capacity(len);
        self.read_into(offset, len, &mut bytes);
        f(&bytes)
    }
    /// Where these bytes live: an identity of the storage they may share with other buffers
    /// (never dereferenced) and their offset in it; `None` where the memory has no such
    /// storage (the default).
    fn placement(&self) -> Option<(usize, usize)> {
        None
    }
    /// Calls `f` with the whole storage [`BufferMemory::placement`] names, writable, under its
    /// write lock when it is free now; `false` (nothing called) when it is not, or where the
    /// memory has none (the default). Never waits: a caller may hold other buffers' locks.
    fn try_with_storage_mut(&self, _f: &mut dyn FnMut(&mut [u8])) -> bool {
        false
    }
    /// [`BufferMemory::with_bytes`] when it can be done without waiting for a writer; `false`
    /// (nothing called) otherwise. The default copies, which never waits.
    fn try_with_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        self.with_bytes(offset, len, f);
        true
    }
}

/// One buffer bound to a CPU launch run in place: the binding, its size in the command buffer,
/// how the launch uses it, and its memory.
#[derive(Clone)]
pub struct BoundMemory {
    pub binding: u32,
    pub size: u64,
    pub access: Access,
    pub memory: Arc<dyn BufferMemory>,
    /// (ABI 1.7) The buffer's resident name when it is frozen ([`Device::freeze`]).
    pub resident: Option<u64>,
    /// Set when the launch's kernel asks for a resident name: one flag per launch, shared by
    /// its bindings ([`keepers`]).
    pub asked: Arc<std::sync::atomic::AtomicBool>,
    /// Set when the launch's kernel computes on the device's vector unit (ABI 1.10): one flag
    /// per launch, shared by its bindings; such a kernel runs in place however small its
    /// launch ([`keepers`]).
    pub units: Arc<std::sync::atomic::AtomicBool>,
}

/// How the plugin build behind a launch runs it on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuKernelMode {
    /// `run-cpu` (ABI 1.0–1.2): whole inputs in, whole outputs back.
    Copy,
    /// `cpu-kernel.run` (ABI 1.3): in place; `splittable` when block ranges may run
    /// concurrently.
    InPlace { splittable: bool },
}

/// Runs a launch on the CPU: implemented by the plugin registry.
pub trait CpuKernels: Send + Sync {
    /// Runs `launch` on the bindings it uses: (binding, size, `Some(contents)` where the launch
    /// reads it); returns (binding, new contents) for each binding it writes.
    fn run(
        &self,
        launch: &LaunchCmd,
        buffers: &[(u32, u64, Option<&[u8]>)],
    ) -> Result<Vec<(u32, Vec<u8>)>, String>;

    /// How `launch` runs. Default: [`CpuKernelMode::Copy`].
    fn mode(&self, _launch: &LaunchCmd) -> Result<CpuKernelMode, String> {
        Ok(CpuKernelMode::Copy)
    }

    /// Runs blocks `blocks` of `launch` in place on `bound` (one entry per binding the launch
    /// names; shared by a split launch's ranges). Only called when [`CpuKernels::mode`] says
    /// `InPlace`; concurrently with other ranges of the same launch only when it says
    /// `splittable`.
    fn run_in_place(
        &self,
        launch: &LaunchCmd,
        _bound: &Arc<[BoundMemory]>,
        _blocks: std::ops::Range<u64>,
    ) -> Result<(), String> {
        Err(format!(
            "`{}`: this kernel provider has no in-place kernels",
            launch.entry_point
        ))
    }
}

/// What form a module's device code comes in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceForm {
    /// `code` is CUDA C, compiled by the host (NVRTC).
    #[default]
    CudaC,
    /// (ABI 1.3) `code` is PTX shipped by the plugin (JIT-compiled by the driver), with a cubin
    /// for the target's architecture when the plugin ships one.
    Ptx { cubin: Option<Vec<u8>> },
}

/// The device code of one kernel module, as the plugin that planned it provides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    /// CUDA C source, or PTX ([`SourceForm`]).
    pub code: String,
    /// The kernels it defines (`extern "C"` names).
    pub entry_points: Vec<String>,
    /// The plugin's compiler options; the device adds the architecture.
    pub options: Vec<String>,
    pub form: SourceForm,
}

impl KernelSource {
    /// Refuses a source with a file include: the compiler would read that file (`/dev/zero`, a
    /// FIFO, a secret) on the host. Line continuations and comments between `#` and `include`
    /// do not hide one; a `#include` inside a string literal is refused too.
    pub fn check_no_includes(&self) -> Result<(), String> {
        if self.form != SourceForm::CudaC {
            return Ok(()); // PTX is not preprocessed: nothing in it reads a file.
        }
        let joined = self.code.replace("\\\r\n", "").replace("\\\n", "");
        for (at, _) in joined.match_indices('#') {
            let mut rest = &joined[at + 1..];
            loop {
                let trimmed = rest.trim_start();
                if let Some(comment) = trimmed.strip_prefix("/*") {
                    rest = comment.split_once("*/").map_or("", |(_, after)| after);
                } else {
                    rest = trimmed;
                    break;
                }
            }
            if rest.starts_with("include") || rest.starts_with("import") {
                let line = joined[..at].matches('\n').count() + 1;
                return Err(format!(
                    "kernel source line {line}: file includes are not allowed (a kernel source must be self-contained)"
                ));
            }
        }
        Ok(())
    }
}

/// Fetches kernel modules' device code for GPU devices: implemented by the plugin registry
/// (the plugin named by the module, through its `kernel-source`).
pub trait KernelSources: Send + Sync {
    /// The source of `module` for `target` (the device's, with its real limits).
    fn source(&self, module: &ModuleRef, target: &Target) -> Result<KernelSource, String>;
}

/// A device: memory, streams, execution. (`Any`: `umd check` finds a CUDA device's timing
/// baselines by downcasting.)
pub trait Device: Any + Send + Sync {
    /// `cpu`, `cuda:0`, …
    fn name(&self) -> &str;
    /// The target plans for this device are made for.
    fn target(&self) -> &Target;

    fn alloc(&self, bytes: u64) -> Result<BufferId, DeviceError>;
    /// Frees a buffer once the work using it has finished.
    fn free(&self, buffer: BufferId) -> Result<(), DeviceError>;
    /// (ABI 1.7) Makes `buffer` read-only for the rest of its life, once the work writing it has
    /// finished: later host writes and launches that write it are refused (`ReadOnly`). A
    /// device whose in-place CPU kernels may keep what they read (the CPU device) names the
    /// frozen bytes to them (`kernel-io.resident`, a name never reused). Default: nothing is
    /// kept, and the buffer stays writable.
    fn freeze(&self, buffer: BufferId) -> Result<(), DeviceError> {
        self.size(buffer).map(drop)
    }
    /// Size of a buffer in bytes.
    fn size(&self, buffer: BufferId) -> Result<u64, DeviceError>;
    /// Writes host bytes into a buffer, after the work using it has finished.
    fn write(&self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), DeviceError>;
    /// Reads a buffer into host memory, after the work writing it has finished.
    fn read(&self, buffer: BufferId, offset: u64, len: u64) -> Result<Vec<u8>, DeviceError>;

    fn default_stream(&self) -> StreamId;
    fn create_stream(&self) -> Result<StreamId, DeviceError>;
    /// Queues a command buffer on a stream with one buffer per binding; the fence signals when
    /// it has run (or failed).
    fn submit(
        &self,
        stream: StreamId,
        cmd: Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<Fence, DeviceError>;
    /// [`submit`](Self::submit), then waits for it: the work's result. For callers that would
    /// block on the fence at once anyway (a run waited for): a backend may run the work on the
    /// calling thread when nothing is queued ahead of it on `stream` (the CPU device does: no
    /// hand-off to the stream's worker and back). Call it only from a thread that may block
    /// for the whole run (never an async executor's).
    fn submit_wait(
        &self,
        stream: StreamId,
        cmd: Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<(), DeviceError> {
        self.submit(stream, cmd, bindings)?.wait()
    }
    /// A fence that signals when everything queued on `stream` so far has run (an event).
    fn record_event(&self, stream: StreamId) -> Result<Fence, DeviceError>;
    /// Blocks until all work on `stream` is done.
    fn synchronize(&self, stream: StreamId) -> Result<(), DeviceError> {
        self.record_event(stream)?.wait()
    }
    /// Makes work queued on `stream` after this call wait until `event` (a fence or event of
    /// any device, this one or another) has signalled. A failed event does not fail that work
    /// (its error went to its own submitter). The default waits on the host, in this call:
    /// correct ordering, but the caller blocks (the CUDA backend uses it).
    fn wait_event(&self, _stream: StreamId, event: &Fence) -> Result<(), DeviceError> {
        let _ = event.wait();
        Ok(())
    }
    /// Copies all of `src`, a buffer of the device `from` (another device, or this one), into
    /// `dst` of this device, ordered on `stream`: after the work queued on it so far (e.g. a
    /// [`wait_event`](Self::wait_event) on `from`'s work), before the work queued after it.
    /// The bytes are `src`'s once the work writing it has finished. The default runs on the
    /// host, in this call.
    fn copy_from(
        &self,
        stream: StreamId,
        dst: BufferId,
        from: &Arc<dyn Device>,
        src: BufferId,
    ) -> Result<Fence, DeviceError> {
        copy_on_host(self, stream, dst, &**from, src)
    }

    fn pool_stats(&self) -> PoolStats;
    /// Releases cached, unused memory.
    fn trim(&self);
    /// Why the device is lost ([`DeviceError::Lost`]; health reports it), `None` while it works.
    fn lost(&self) -> Option<String> {
        None
    }
}

/// [`Device::copy_from`] on the host, in the call: waits for `stream`, reads `src` from `from`,
/// writes it into `dst` of `to`.
pub fn copy_on_host(
    to: &(impl Device + ?Sized),
    stream: StreamId,
    dst: BufferId,
    from: &dyn Device,
    src: BufferId,
) -> Result<Fence, DeviceError> {
    let len = from.size(src)?;
    check_copy(dst, to.size(dst)?, len)?;
    to.synchronize(stream)?;
    let data = from.read(src, 0, len)?;
    to.write(dst, 0, &data)?;
    Ok(Fence::done(Ok(())))
}

/// Runs a command buffer once on `dev` with host data: allocates a buffer per binding, writes
/// `inputs` into the input bindings, waits, and returns the output bindings' bytes; frees every
/// buffer whatever happens. (`Host::run`, admission and `umd check` all go through here.)
pub fn run_once(
    dev: &dyn Device,
    cmd: &Arc<CommandBuffer>,
    inputs: &[&[u8]],
) -> Result<Vec<Vec<u8>>, DeviceError> {
    run_once_on(dev, dev.default_stream(), cmd, inputs)
}

/// [`run_once`] on `stream` of `dev`.
pub fn run_once_on(
    dev: &dyn Device,
    stream: StreamId,
    cmd: &Arc<CommandBuffer>,
    inputs: &[&[u8]],
) -> Result<Vec<Vec<u8>>, DeviceError> {
    let n_in = cmd.count(Role::Input);
    if inputs.len() != n_in {
        return Err(DeviceError::BindingCount {
            expected: n_in,
            found: inputs.len(),
        });
    }
    let mut bufs: Vec<BufferId> = Vec::with_capacity(cmd.bindings.len());
    let result = (|| {
        for (index, b) in cmd.bindings.iter().enumerate() {
            let size = b.desc.byte_size().unwrap_or(u64::MAX);
            bufs.push(dev.alloc(size)?);
            if let Some(data) = inputs.get(index).filter(|_| b.role == Role::Input) {
                if data.len() as u64 != size {
                    return Err(DeviceError::InputSize {
                        index,
                        expected: size,
                        given: data.len() as u64,
                    });
                }
                dev.write(bufs[index], 0, data)?;
            }
        }
        dev.submit_wait(stream, cmd.clone(), &bufs)?;
        cmd.bindings
            .iter()
            .zip(&bufs)
            .filter(|(b, _)| b.role == Role::Output)
            .map(|(b, id)| dev.read(*id, 0, b.desc.byte_size().unwrap_or(0)))
            .collect()
    })();
    for id in bufs {
        let _ = dev.free(id);
    }
    result
}

/// What every device checks before a submission has any side effect: the command buffer is
/// for this target, well formed within the target's limits, and bound to one large enough
/// buffer per binding.
pub fn check_submit(
    cmd: &CommandBuffer,
    target: &Target,
    bindings: &[BufferId],
    size_of: impl FnMut(BufferId) -> Result<u64, DeviceError>,
) -> Result<(), DeviceError> {
    if cmd.target != target.name {
        return Err(DeviceError::WrongTarget {
            expected: target.name.clone(),
            found: cmd.target.clone(),
        });
    }
    cmd.validate(Some(&target.limits))
        .map_err(|e| DeviceError::Invalid(e.to_string()))?;
    check_bindings(cmd, bindings, size_of)
}

/// Refuses a copy of `len` bytes into `dst` of `dst_size` bytes.
pub fn check_copy(dst: BufferId, dst_size: u64, len: u64) -> Result<(), DeviceError> {
    if len > dst_size {
        return Err(DeviceError::OutOfBounds {
            buffer: dst,
            offset: 0,
            end: len,
            size: dst_size,
        });
    }
    Ok(())
}

/// Checks the buffers bound to a command buffer: one per binding, each large enough
/// (`size_of` is asked once per binding, in order, until one fails).
pub fn check_bindings(
    cmd: &CommandBuffer,
    bindings: &[BufferId],
    mut size_of: impl FnMut(BufferId) -> Result<u64, DeviceError>,
) -> Result<(), DeviceError> {
    if bindings.len() != cmd.bindings.len() {
        return Err(DeviceError::BindingCount {
            expected: cmd.bindings.len(),
            found: bindings.len(),
        });
    }
    for (index, (b, id)) in cmd.bindings.iter().zip(bindings).enumerate() {
        let needed = b.desc.byte_size().unwrap_or(u64::MAX);
        let size = size_of(*id)?;
        if size < needed {
            return Err(DeviceError::BindingTooSmall {
                index,
                buffer: *id,
                needed,
                size,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_specs_parse() {
        assert_eq!("cpu".parse::<DeviceSpec>(), Ok(DeviceSpec::Cpu(0)));
        assert_eq!("cpu:0".parse::<DeviceSpec>(), Ok(DeviceSpec::Cpu(0)));
        assert_eq!("cpu:3".parse::<DeviceSpec>(), Ok(DeviceSpec::Cpu(3)));
        assert_eq!(DeviceSpec::Cpu(0).to_string(), "cpu");
        assert_eq!(DeviceSpec::Cpu(1).to_string(), "cpu:1");
        assert_eq!(" CUDA:1 ".parse::<DeviceSpec>(), Ok(DeviceSpec::Cuda(1)));
        assert_eq!(DeviceSpec::Cuda(0).to_string(), "cuda:0");
        for bad in [
            "cpu:",
            "cpu:x",
            "cpu:99999999",
            "cuda",
            "cuda:",
            "cuda:-1",
            "cuda:x",
            "gpu:0",
            "cuda:99999999999999999999",
        ] {
            assert_eq!(
                bad.parse::<DeviceSpec>(),
                Err(DeviceError::UnknownDevice(bad.to_string())),
                "{bad}"
            );
        }
    }

    #[test]
    fn device_lists_parse() {
        use DeviceSpec::*;
        assert_eq!(DeviceSpec::parse_list("cpu"), Ok(vec![Cpu(0)]));
        assert_eq!(
            DeviceSpec::parse_list("cpu:0, cpu:1"),
            Ok(vec![Cpu(0), Cpu(1)])
        );
        assert_eq!(
            DeviceSpec::parse_list("cuda:0,cuda:1,cpu"),
            Ok(vec![Cuda(0), Cuda(1), Cpu(0)])
        );
        for (bad, says) in [
            ("cpu,cpu:0", "`cpu` is named twice"),
            ("cpu,,cpu:1", "an empty item"),
            ("", "an empty item"),
            ("cpu,tpu", "unknown device `tpu`"),
        ] {
            let e = DeviceSpec::parse_list(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let many = (0..=MAX_DEVICES)
            .map(|i| format!("cpu:{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = DeviceSpec::parse_list(&many).unwrap_err().to_string();
        assert!(e.contains("more than 16 devices"), "{e}");
    }
}
