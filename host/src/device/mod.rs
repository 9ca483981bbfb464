//! Devices: the [`Device`] trait every backend implements, with one module per backend
//! ([`cpu`], the embedded default), the buffer [`pool`] and the [`sync`] primitives.
//!
//! A device owns memory, streams and execution. It receives validated command buffers and the
//! buffers bound to them; it never plans anything and never knows an operator. The CPU device
//! runs a launch by calling the providing plugin's CPU kernel through [`CpuKernels`].
//! [`caching`] is the device-memory allocator policy for GPU backends (tested with a fake raw
//! allocator; the CUDA backend that will use it is not built yet).

pub mod caching;
pub mod cpu;
pub mod pool;
pub mod sync;

use std::sync::Arc;

use thiserror::Error;

use crate::cmdbuf::{CommandBuffer, LaunchCmd};
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
    #[error("device is shut down")]
    ShutDown,
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
}

/// A device: memory, streams, execution.
pub trait Device: Send + Sync {
    /// `cpu`, `cuda:0`, …
    fn name(&self) -> &str;
    /// The target plans for this device are made for.
    fn target(&self) -> &Target;

    fn alloc(&self, bytes: u64) -> Result<BufferId, DeviceError>;
    /// Frees a buffer once the work using it has finished.
    fn free(&self, buffer: BufferId) -> Result<(), DeviceError>;
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
    /// A fence that signals when everything queued on `stream` so far has run (an event).
    fn record_event(&self, stream: StreamId) -> Result<Fence, DeviceError>;
    /// Blocks until all work on `stream` is done.
    fn synchronize(&self, stream: StreamId) -> Result<(), DeviceError> {
        self.record_event(stream)?.wait()
    }

    fn pool_stats(&self) -> PoolStats;
    /// Releases cached, unused memory.
    fn trim(&self);
}

/// Checks the buffers bound to a command buffer: one per binding, each large enough.
pub fn check_bindings(
    cmd: &CommandBuffer,
    bindings: &[BufferId],
    size_of: impl Fn(BufferId) -> Result<u64, DeviceError>,
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
