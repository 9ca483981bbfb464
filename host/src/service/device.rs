//! `umd.Device`: remote buffers and execution.
//!
//! Buffers are named by 128-bit random handles, returned only to the client that created them
//! (or that an execution created them for): a client can reach no buffer it was not given.
//! Data moves in chunks, so tensors larger than one message work. The handle table, quotas and
//! reservations are [`super::buffers`].

use std::pin::Pin;
use std::sync::Arc;

use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::buffers::{Buffers, Created};
use super::convert::{message, tensor_to_proto};
use super::metrics::Metrics;
use super::proto::{self, *};
use super::session::Session;
use super::streams::ClientStreams;
use crate::Host;
use crate::cmdbuf::CommandBuffer;
use crate::device::{BufferId, DeviceError};
use crate::error::{Error, status};

/// Default read chunk size.
const READ_CHUNK: u64 = 1 << 20;
/// Smallest read chunk: smaller requests are raised to it (64 MiB in 1-byte messages would be
/// 64 M messages).
const MIN_READ_CHUNK: u64 = 64 << 10;

#[derive(Clone)]
pub struct DeviceService {
    host: Arc<Host>,
    buffers: Arc<Buffers>,
    streams: Arc<ClientStreams>,
    metrics: Arc<Metrics>,
    /// Largest read chunk: what fits in one message.
    max_chunk: u64,
    /// Run client command buffers without this server's seal.
    allow_raw: bool,
}

impl DeviceService {
    pub fn new(
        host: Arc<Host>,
        buffers: Arc<Buffers>,
        streams: Arc<ClientStreams>,
        metrics: Arc<Metrics>,
        max_message_bytes: usize,
    ) -> Self {
        DeviceService {
            host,
            buffers,
            streams,
            metrics,
            max_chunk: (max_message_bytes as u64)
                .saturating_sub(1024)
                .max(MIN_READ_CHUNK),
            allow_raw: false,
        }
    }

    /// Runs client command buffers that carry no seal of this server (the operator's choice).
    pub fn allow_raw_command_buffers(mut self, allow: bool) -> Self {
        self.allow_raw = allow;
        self
    }

    /// The device a request names (empty = the server's default).
    fn device(&self, name: &str) -> Result<Arc<dyn crate::device::Device>, Status> {
        self.host.device_named(name).cloned().map_err(device_status)
    }

    async fn blocking<T: Send + 'static>(
        f: impl FnOnce() -> Result<T, DeviceError> + Send + 'static,
    ) -> Result<T, Status> {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(device_status)
    }

    /// Gives `req` the values its plugins need at plan time (1.2 op signatures: Reshape's shape,
    /// Slice's starts…, and every string input), read from the client's input buffers. A string
    /// input's description takes its text size from its buffer's size.
    async fn with_values(
        &self,
        mut req: crate::OpRequest,
        handles: &[String],
        owner: Session,
        dev: Arc<dyn crate::device::Device>,
    ) -> Result<crate::OpRequest, Error> {
        if self.host.translator().missing_values(&req).is_empty() {
            return Ok(req);
        }
        let buffers = handles
            .iter()
            .map(|h| self.buffers.get(owner, h))
            .collect::<Result<Vec<_>, _>>()
            .map_err(status_error)?;
        let ids: Vec<BufferId> = buffers.iter().map(|(id, _)| *id).collect();
        let host = self.host.clone();
        tokio::task::spawn_blocking(move || {
            for (i, d) in req.inputs.iter_mut().enumerate() {
                if let (true, Some(&(id, size))) = (d.dtype.is_string(), buffers.get(i)) {
                    *d = string_sized(&*dev, id, size, d.clone())?;
                }
            }
            host.translator()
                .fill_values(&mut req, |i, size| -> Result<Vec<u8>, Error> {
                    let id = *ids.get(i).ok_or_else(|| {
                        crate::error::RequestError::Other(format!(
                            "input {i} has no buffer ({} given)",
                            ids.len()
                        ))
                    })?;
                    Ok(dev.read(id, 0, size)?)
                })?;
            Ok(req)
        })
        .await
        .unwrap_or_else(|e| {
            Err(
                crate::error::RequestError::Other(format!("reading constant inputs failed: {e}"))
                    .into(),
            )
        })
    }

    async fn execute_inner(
        &self,
        r: ExecuteRequest,
        owner: Session,
    ) -> Result<ExecuteResponse, Error> {
        let dev = self.host.device_named(&r.device)?.clone();
        let (cmd, kernel_name) = match (&r.op, r.command_buffer.is_empty()) {
            (Some(op), true) => {
                let req = super::translator::request_for(&self.host, op, &r.device)?;
                let req = self.with_values(req, &r.inputs, owner, dev.clone()).await?;
                let t = super::translator::translate(&self.host, req).await?;
                (t.cmdbuf.clone(), t.kernel_name.clone())
            }
            (None, false) => {
                if !self.allow_raw && !super::seal::verify(&r.command_buffer, &r.seal) {
                    return Err(crate::cmdbuf::CmdError::Invalid(
                        "not sealed by this server: give the `seal` Translate returned with it \
                         (raw command buffers run only with --allow-raw-command-buffers)"
                            .into(),
                    )
                    .into());
                }
                let cb = CommandBuffer::decode(&r.command_buffer)?;
                within_budget(&cb)?;
                let name = cb
                    .launches
                    .first()
                    .map(|l| l.entry_point.clone())
                    .unwrap_or_default();
                (Arc::new(cb), name)
            }
            _ => {
                return Err(crate::error::RequestError::Other(
                    "give exactly one of `op` and `command_buffer`".into(),
                )
                .into());
            }
        };
        // The client's own stream (leased on first use): its queue is not anyone else's.
        let stream = self.streams.stream(owner, &*dev, r.stream)?;
        let n_in = cmd.count(crate::cmdbuf::Role::Input);
        if r.inputs.len() != n_in {
            return Err(crate::error::RequestError::Other(format!(
                "{n_in} input buffers needed, {} given",
                r.inputs.len()
            ))
            .into());
        }
        let n_out = cmd.bindings.len() - n_in;
        if !r.outputs.is_empty() && r.outputs.len() != n_out {
            return Err(crate::error::RequestError::Other(format!(
                "{n_out} output buffers needed (or none, for the server to create them), {} given",
                r.outputs.len()
            ))
            .into());
        }
        // Everything the client named is checked before anything is allocated or queued.
        let mut bindings = Vec::with_capacity(cmd.bindings.len());
        for (i, h) in r.inputs.iter().chain(&r.outputs).enumerate() {
            let (id, size) = self.buffers.get(owner, h).map_err(status_error)?;
            let desc = &cmd.bindings[i].desc;
            let needed = desc.byte_size().unwrap_or(u64::MAX);
            if size < needed {
                let what = if i < n_in { "input" } else { "output" };
                let index = if i < n_in { i } else { i - n_in };
                return Err(crate::error::RequestError::Shape(format!(
                    "{what} {index} is {desc} ({needed} bytes); its buffer has {size}"
                ))
                .into());
            }
            bindings.push(id);
        }
        // Outputs made here are freed again unless the client receives their handles: on any
        // error below and when the call is abandoned (deadline, cancellation) mid-way.
        let mut outputs = r.outputs.clone();
        let total = if outputs.is_empty() {
            cmd.bindings[n_in..].iter().fold(0u64, |t, b| {
                t.saturating_add(b.desc.byte_size().unwrap_or(u64::MAX))
            })
        } else {
            0
        };
        let reservation = self.buffers.admit(owner, total).map_err(quota_error)?;
        let mut created = Created::new(reservation, dev.clone());
        if outputs.is_empty() {
            for b in &cmd.bindings[n_in..] {
                let bytes = b.desc.byte_size().unwrap_or(u64::MAX);
                let id = dev.alloc(bytes)?;
                let handle = created.insert(id, bytes).map_err(status_error)?;
                bindings.push(id);
                outputs.push(handle);
            }
        }
        let fence = self
            .host
            .submit(&*dev, stream, &cmd, &bindings)
            .map_err(|e| match e {
                // Named as the client knows its stream, not by the device stream behind it.
                Error::Device(DeviceError::QueueFull { depth, .. }) => {
                    Error::Device(DeviceError::QueueFull {
                        stream: crate::device::StreamId(r.stream),
                        depth,
                    })
                }
                e => e,
            })?;
        if r.wait {
            fence.wait_async().await?;
        }
        created.keep();
        Ok(ExecuteResponse {
            status: status::OK,
            msg: String::new(),
            output_descs: cmd.bindings[n_in..]
                .iter()
                .map(|b| tensor_to_proto(&b.desc))
                .collect(),
            outputs,
            kernel_name,
        })
    }
}

/// Most launches one client command buffer may carry.
pub const MAX_CLIENT_LAUNCHES: usize = 64;
/// Most work one client command buffer may ask for: launches times the bytes it binds.
pub const MAX_CLIENT_WORK_BYTES: u64 = 16 << 30;

/// The per-request budget of a client's command buffer: one request cannot hold a stream that
/// every client shares for long (a big Add repeated 1,024 times).
/// A string tensor's description sized by the buffer holding it: its text ends where its last
/// offset says (read from the buffer), which must lie within the buffer (a buffer may be larger
/// than the tensor). Other dtypes are returned unchanged.
pub(super) fn string_sized(
    dev: &dyn crate::device::Device,
    id: BufferId,
    size: u64,
    desc: crate::TensorDesc,
) -> Result<crate::TensorDesc, Error> {
    if !desc.dtype.is_string() {
        return Ok(desc);
    }
    let n = desc.numel().unwrap_or(u64::MAX);
    let table = n.checked_mul(8).filter(|&t| t <= size).ok_or_else(|| {
        crate::error::RequestError::Shape(format!(
            "string tensor `{}` {desc} needs {n} offsets of 8 bytes; its buffer has {size} bytes",
            desc.name
        ))
    })?;
    let text = if n == 0 {
        0
    } else {
        let last = dev.read(id, table - 8, 8)?;
        u64::from_le_bytes(last.try_into().expect("8 bytes"))
    };
    if text > size - table {
        return Err(crate::error::RequestError::Shape(format!(
            "string tensor `{}`: its last offset says {text} bytes of text; its buffer holds {} \
             after the offsets",
            desc.name,
            size - table
        ))
        .into());
    }
    Ok(crate::TensorDesc {
        text_bytes: text,
        ..desc
    })
}

pub(super) fn within_budget(cb: &CommandBuffer) -> Result<(), Error> {
    let too_much = |what: &str, value: u64, max: u64| {
        Error::from(crate::cmdbuf::CmdError::TooLarge {
            what: format!("per-request budget: {what}"),
            value,
            max,
        })
    };
    if cb.launches.len() > MAX_CLIENT_LAUNCHES {
        return Err(too_much(
            "launches",
            cb.launches.len() as u64,
            MAX_CLIENT_LAUNCHES as u64,
        ));
    }
    let bound = cb.bindings.iter().fold(0u64, |t, b| {
        t.saturating_add(b.desc.byte_size().unwrap_or(u64::MAX))
    });
    let work = bound.saturating_mul(cb.launches.len() as u64);
    if work > MAX_CLIENT_WORK_BYTES {
        return Err(too_much(
            "launches x bound bytes",
            work,
            MAX_CLIENT_WORK_BYTES,
        ));
    }
    Ok(())
}

fn device_status(e: DeviceError) -> Status {
    match e {
        DeviceError::UnknownBuffer(_) | DeviceError::UnknownStream(_) => {
            Status::not_found(e.to_string())
        }
        DeviceError::OutOfMemory { .. } | DeviceError::QueueFull { .. } => {
            Status::resource_exhausted(e.to_string())
        }
        DeviceError::OutOfBounds { .. } => Status::out_of_range(e.to_string()),
        DeviceError::NoSuchDevice { .. } | DeviceError::ForeignBuffer { .. } => {
            Status::invalid_argument(e.to_string())
        }
        _ => Status::failed_precondition(e.to_string()),
    }
}

/// A quota refusal inside an execution: the device's out-of-memory, as the client sees it.
fn quota_error(s: Status) -> Error {
    crate::error::RequestError::Other(s.message().to_string()).into()
}

/// A handle lookup failure inside an execution, as a request error.
fn status_error(s: Status) -> Error {
    crate::error::RequestError::Other(s.message().to_string()).into()
}

type ReadStream = Pin<Box<dyn Stream<Item = Result<ReadChunk, Status>> + Send>>;

#[tonic::async_trait]
impl proto::device_server::Device for DeviceService {
    async fn info(&self, request: Request<InfoRequest>) -> Result<Response<InfoResponse>, Status> {
        let dev = self.device(&request.get_ref().device)?;
        let s = dev.pool_stats();
        Ok(Response::new(InfoResponse {
            device: dev.name().to_string(),
            target: dev.target().name.clone(),
            allocated_bytes: s.allocated_bytes,
            cached_bytes: s.cached_bytes,
            peak_bytes: s.peak_bytes,
            pool_hits: s.hits,
            pool_misses: s.misses,
            live_buffers: self.buffers.len() as u64,
        }))
    }

    async fn create_buffer(
        &self,
        request: Request<CreateBufferRequest>,
    ) -> Result<Response<BufferResponse>, Status> {
        let owner = Session::of(&request);
        let r = request.into_inner();
        let dev = self.device(&r.device)?;
        let mut reservation = self.buffers.admit(owner, r.bytes)?;
        let id = dev.alloc(r.bytes).map_err(device_status)?;
        let handle = reservation.insert(id, r.bytes).inspect_err(|_| {
            let _ = dev.free(id);
        })?;
        Ok(Response::new(BufferResponse {
            status: status::OK,
            msg: String::new(),
            handle,
            bytes: r.bytes,
        }))
    }

    async fn free_buffer(
        &self,
        request: Request<BufferRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let owner = Session::of(&request);
        let r = request.into_inner();
        let dev = self.device(&r.device)?;
        let (id, _) = self.buffers.get(owner, &r.handle)?;
        // Another device's buffer is refused before its handle is dropped.
        dev.size(id).map_err(device_status)?;
        let (id, _) = self
            .buffers
            .remove(owner, &r.handle)
            .ok_or_else(|| Status::not_found("freed concurrently"))?;
        dev.free(id).map_err(device_status)?;
        Ok(Response::new(StatusResponse {
            status: status::OK,
            msg: String::new(),
        }))
    }

    async fn write_buffer(
        &self,
        request: Request<Streaming<WriteChunk>>,
    ) -> Result<Response<StatusResponse>, Status> {
        let owner = Session::of(&request);
        let mut chunks = request.into_inner();
        let first = chunks
            .next()
            .await
            .ok_or_else(|| Status::invalid_argument("WriteBuffer needs at least one chunk"))??;
        let dev = self.device(&first.device)?;
        let (id, _) = self.buffers.get(owner, &first.handle)?;
        let mut offset = first.offset;
        let mut chunk = Some(first);
        while let Some(c) = chunk.take() {
            let len = c.data.len() as u64;
            let d = dev.clone();
            Self::blocking(move || d.write(id, offset, &c.data)).await?;
            offset += len;
            chunk = chunks.next().await.transpose()?;
        }
        Ok(Response::new(StatusResponse {
            status: status::OK,
            msg: String::new(),
        }))
    }

    type ReadBufferStream = ReadStream;

    async fn read_buffer(
        &self,
        request: Request<ReadRequest>,
    ) -> Result<Response<Self::ReadBufferStream>, Status> {
        let owner = Session::of(&request);
        let r = request.into_inner();
        let dev = self.device(&r.device)?;
        let (id, size) = self.buffers.get(owner, &r.handle)?;
        let end = if r.length == 0 {
            size
        } else {
            r.offset.saturating_add(r.length)
        };
        if r.offset > end || end > size {
            return Err(Status::out_of_range(format!(
                "read of {}..{end} outside the buffer's {size} bytes",
                r.offset
            )));
        }
        let chunk = if r.chunk_bytes == 0 {
            READ_CHUNK
        } else {
            (r.chunk_bytes as u64).clamp(MIN_READ_CHUNK, self.max_chunk)
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut offset = r.offset;
        tokio::spawn(async move {
            while offset < end {
                let len = chunk.min(end - offset);
                let d = dev.clone();
                let data = Self::blocking(move || d.read(id, offset, len)).await;
                let failed = data.is_err();
                if tx.send(data.map(|data| ReadChunk { data })).await.is_err() || failed {
                    break;
                }
                offset += len;
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn execute(
        &self,
        request: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        let owner = Session::of(&request);
        let r = request.into_inner();
        self.device(&r.device)?;
        let op =
            r.op.as_ref()
                .map(|o| o.op_type.clone())
                .unwrap_or_else(|| "<cmdbuf>".into());
        let start = std::time::Instant::now();
        let resp = self
            .execute_inner(r, owner)
            .await
            .unwrap_or_else(|e| ExecuteResponse {
                status: e.status(),
                msg: message(&e),
                ..Default::default()
            });
        self.metrics.record(&op, resp.status, start.elapsed());
        Ok(Response::new(resp))
    }

    async fn synchronize(
        &self,
        request: Request<SyncRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let owner = Session::of(&request);
        let r = request.into_inner();
        let dev = self.device(&r.device)?;
        // Only this client's work on its stream is waited for; a stream it never used holds none.
        let stream = match self.streams.used(owner, &*dev, r.stream) {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Ok(Response::new(StatusResponse {
                    status: status::OK,
                    msg: String::new(),
                }));
            }
            Err(e) => return Err(Status::not_found(e.to_string())),
        };
        let fence = dev.record_event(stream).map_err(device_status)?;
        let resp = match fence.wait_async().await {
            Ok(()) => StatusResponse {
                status: status::OK,
                msg: String::new(),
            },
            Err(e) => StatusResponse {
                status: status::DEVICE,
                msg: e.to_string(),
            },
        };
        Ok(Response::new(resp))
    }
}
