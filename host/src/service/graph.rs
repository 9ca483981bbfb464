//! `umd.Graph`: whole models over gRPC. `LoadModel` takes an ONNX model as a stream of chunks
//! and returns an unguessable handle (given only to the client that loaded it, like buffer
//! handles); `Run` takes named tensors by value and returns the named outputs; `Unload` drops
//! the model and its device memory. `Run` may also take inputs and give outputs as the
//! connection's `umd.Device` buffer handles (zero-copy chaining of runs): every handle is checked
//! (owner, device, size) before anything is allocated or run. Owns only the network side; the
//! engine is [`crate::graph`].

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::Rng;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::buffers::{Buffers, Created};
use super::convert::{tensor_from_proto, tensor_to_proto};
use super::proto::*;
use super::session::Session;
use super::streams::ClientStreams;
use crate::Host;
use crate::device::BufferId;
use crate::error::status;
use crate::graph::{Dim, GraphError, Model, RunInput, Tensor, ValueDecl};

/// Largest model accepted over the wire (1 GiB).
pub const MAX_MODEL_BYTES: usize = 1 << 30;
/// Most models loaded at once on one server.
pub const MAX_MODELS: usize = 64;
/// Most models one client (connection) holds at once.
pub const MAX_MODELS_PER_CLIENT: usize = 16;
/// Most `LoadModel` uploads in progress at once (each buffers up to [`MAX_MODEL_BYTES`]).
pub const MAX_CONCURRENT_LOADS: usize = 4;
/// Longest wait for the next chunk of an upload (a stalled client gives its place back).
pub const CHUNK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A loaded model and the session that loaded it (the only one that may run or unload it; it
/// is unloaded when that session ends).
type Owned = (Session, Arc<Model>);

#[derive(Clone)]
pub struct GraphService {
    host: Arc<Host>,
    models: Arc<Mutex<HashMap<String, Owned>>>,
    /// Uploads in progress ([`MAX_CONCURRENT_LOADS`]).
    loads: Arc<tokio::sync::Semaphore>,
    /// The `umd.Device` handle table (runs on buffers).
    buffers: Arc<Buffers>,
    /// Runs go on the running client's stream 0.
    streams: Arc<ClientStreams>,
}

impl GraphService {
    pub fn new(host: Arc<Host>, buffers: Arc<Buffers>, streams: Arc<ClientStreams>) -> Self {
        GraphService {
            host,
            models: Arc::default(),
            loads: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_LOADS)),
            buffers,
            streams,
        }
    }

    /// Drops every model (shutdown).
    pub fn unload_all(&self) {
        self.models.lock().clear();
    }

    /// Drops the models of a session that ended (call off the async runtime: freeing device
    /// memory may wait for the device).
    pub fn free_session(&self, owner: Session) {
        let gone: Vec<Owned> = {
            let mut models = self.models.lock();
            let handles: Vec<String> = models
                .iter()
                .filter(|(_, (s, _))| *s == owner)
                .map(|(h, _)| h.clone())
                .collect();
            handles.iter().filter_map(|h| models.remove(h)).collect()
        };
        drop(gone);
    }

    /// The model `handle` if `owner` loaded it.
    fn model(&self, owner: Session, handle: &str) -> Option<Arc<Model>> {
        match self.models.lock().get(handle) {
            Some((s, m)) if *s == owner => Some(m.clone()),
            _ => None,
        }
    }
}

fn decl_to_proto(d: &ValueDecl) -> TensorDesc {
    TensorDesc {
        name: d.name.clone(),
        shape: d.dims.as_ref().map_or_else(Vec::new, |dims| {
            dims.iter()
                .map(|d| match d {
                    Dim::Fixed(n) => i32::try_from(*n).unwrap_or(i32::MAX),
                    Dim::Dynamic(_) => -1,
                })
                .collect()
        }),
        dtype: d.dtype.map_or(String::new(), |t| t.name().to_string()),
        // a declaration says no text size (it is the value's)
        text_bytes: 0,
    }
}

fn load_error(status: i32, msg: String) -> LoadModelResponse {
    LoadModelResponse {
        status,
        msg,
        ..Default::default()
    }
}

/// A device-bound run's buffers, resolved from the connection's handles.
struct Bound {
    /// Inputs by buffer: description and buffer.
    inputs: Vec<(crate::tensor::TensorDesc, BufferId)>,
    /// Outputs named by the client: output name → (buffer, its bytes, handle).
    outputs: Vec<(String, BufferId, u64, String)>,
}

impl GraphService {
    /// Resolves the handles of a run (owner; known names, each once). Device and size checks
    /// follow in [`Bound::run`], still before any side effect.
    fn on_device(
        &self,
        owner: Session,
        model: &Model,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
    ) -> Result<Bound, GraphError> {
        let handle = |what: &str, name: &str, h: &str| {
            self.buffers
                .get(owner, h)
                .map_err(|s| GraphError::Input(format!("{what} `{name:.64}`: {}", s.message())))
        };
        let mut bound = Bound {
            inputs: Vec::with_capacity(inputs.len()),
            outputs: Vec::with_capacity(outputs.len()),
        };
        for t in inputs {
            let desc = t
                .desc
                .as_ref()
                .ok_or_else(|| GraphError::Input("an input buffer without a description".into()))?;
            let desc =
                tensor_from_proto(desc).map_err(|e| GraphError::Input(format!("input: {e}")))?;
            let (id, bytes) = handle("input", &desc.name, &t.handle)?;
            let desc = super::device::string_sized(&**self.host.device(), id, bytes, desc)
                .map_err(|e| GraphError::Input(format!("input: {e}")))?;
            bound.inputs.push((desc, id));
        }
        for t in outputs {
            let name = t.desc.as_ref().map_or("", |d| d.name.as_str());
            if !model.outputs().iter().any(|o| o.name == name) {
                return Err(GraphError::Input(format!(
                    "`{name:.64}` is not an output of this model (outputs: {})",
                    model
                        .outputs()
                        .iter()
                        .map(|o| o.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            if bound.outputs.iter().any(|o| o.0 == name) {
                return Err(GraphError::Input(format!("output `{name}` is given twice")));
            }
            let (id, bytes) = handle("output", name, &t.handle)?;
            bound
                .outputs
                .push((name.to_string(), id, bytes, t.handle.clone()));
        }
        Ok(bound)
    }
}

impl Bound {
    /// Checks the buffers against the plan's descriptions, creates the outputs not given (freed
    /// again on failure), runs, and returns the outputs' buffers and the plan's peak bytes.
    fn run(
        self,
        model: &Model,
        values: &[Tensor],
        buffers: &Arc<Buffers>,
        host: &Arc<Host>,
        owner: Session,
    ) -> Result<(Vec<DeviceTensor>, u64), GraphError> {
        let inputs: Vec<RunInput> = values
            .iter()
            .map(RunInput::Value)
            .chain(self.inputs.iter().map(|(desc, buffer)| RunInput::Buffer {
                desc,
                buffer: *buffer,
            }))
            .collect();
        let descs = model.output_descs(&inputs)?;
        for (name, id, bytes, _) in &self.outputs {
            let d = descs
                .iter()
                .find(|d| d.name == *name)
                .expect("checked name");
            let needed = d.byte_size().unwrap_or(u64::MAX);
            if *bytes < needed {
                return Err(GraphError::Input(format!(
                    "output `{name}` is {d} ({needed} bytes); its buffer has {bytes}"
                )));
            }
            host.device()
                .size(*id)
                .map_err(|e| GraphError::Input(format!("output `{name}`: not usable here: {e}")))?;
        }
        let dev = host.device().clone();
        let new_bytes: u64 = descs
            .iter()
            .filter(|d| !self.outputs.iter().any(|o| o.0 == d.name))
            .map(|d| d.byte_size().unwrap_or(0).max(1))
            .sum();
        let reservation = buffers
            .admit(owner, new_bytes)
            .map_err(|s| GraphError::Input(s.message().to_string()))?;
        let mut created = Created::new(reservation, dev.clone());
        let mut ids = Vec::with_capacity(descs.len());
        let mut out = Vec::with_capacity(descs.len());
        for d in &descs {
            let (id, handle) = match self.outputs.iter().find(|o| o.0 == d.name) {
                Some((_, id, _, h)) => (*id, h.clone()),
                None => {
                    let bytes = d.byte_size().unwrap_or(0).max(1);
                    let id = dev.alloc(bytes)?;
                    let handle = created
                        .insert(id, bytes)
                        .map_err(|s| GraphError::Input(s.message().to_string()))?;
                    (id, handle)
                }
            };
            ids.push(id);
            out.push(DeviceTensor {
                desc: Some(tensor_to_proto(d)),
                handle,
            });
        }
        let stats = model.run_on_device(&inputs, &ids)?;
        created.keep();
        Ok((out, stats.peak_bytes))
    }
}

#[tonic::async_trait]
impl graph_server::Graph for GraphService {
    async fn load_model(
        &self,
        request: Request<Streaming<ModelChunk>>,
    ) -> Result<Response<LoadModelResponse>, Status> {
        let owner = Session::of(&request);
        // Memory held by uploads is bounded: a few at a time, each at most MAX_MODEL_BYTES.
        let Ok(_upload) = self.loads.clone().try_acquire_owned() else {
            return Ok(Response::new(load_error(
                status::INVALID_INPUT,
                format!("{MAX_CONCURRENT_LOADS} model uploads are in progress; retry later"),
            )));
        };
        let mut chunks = request.into_inner();
        let mut bytes = Vec::new();
        loop {
            let Ok(next) = tokio::time::timeout(CHUNK_TIMEOUT, chunks.next()).await else {
                return Ok(Response::new(load_error(
                    status::INVALID_INPUT,
                    format!(
                        "no model chunk for {} s: upload abandoned",
                        CHUNK_TIMEOUT.as_secs()
                    ),
                )));
            };
            let Some(c) = next else { break };
            let c = c?;
            let why = match self.host.device_named(&c.device) {
                Ok(d) if Arc::ptr_eq(d, self.host.device()) => None,
                Ok(d) => Some(format!(
                    "models run on the default device `{}`, not `{}`",
                    self.host.device().name(),
                    d.name()
                )),
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = why {
                return Ok(Response::new(load_error(status::INVALID_INPUT, why)));
            }
            if bytes.len() + c.data.len() > MAX_MODEL_BYTES {
                return Ok(Response::new(load_error(
                    status::INVALID_INPUT,
                    format!("model larger than {MAX_MODEL_BYTES} bytes"),
                )));
            }
            bytes.extend_from_slice(&c.data);
        }
        let held = |models: &HashMap<String, Owned>| {
            let mine = models.values().filter(|(s, _)| *s == owner).count();
            if mine >= MAX_MODELS_PER_CLIENT {
                Some(format!(
                    "this client holds {MAX_MODELS_PER_CLIENT} models; unload one first"
                ))
            } else if models.len() >= MAX_MODELS {
                Some(format!("{MAX_MODELS} models are loaded; unload one first"))
            } else {
                None
            }
        };
        if let Some(why) = held(&self.models.lock()) {
            return Ok(Response::new(load_error(status::INVALID_INPUT, why)));
        }
        let host = self.host.clone();
        let loaded =
            tokio::task::spawn_blocking(move || Model::from_onnx_bytes(host, &bytes, None))
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
        let model = match loaded {
            Ok(m) => m,
            Err(e) => return Ok(Response::new(load_error(e.status(), e.to_string()))),
        };
        let handle = format!("model-{:032x}", rand::rng().random::<u128>());
        let response = LoadModelResponse {
            status: status::OK,
            msg: String::new(),
            handle: handle.clone(),
            inputs: model.inputs().iter().map(decl_to_proto).collect(),
            outputs: model.outputs().iter().map(decl_to_proto).collect(),
        };
        // checked again: other loads may have finished meanwhile
        let refused = {
            let mut models = self.models.lock();
            match held(&models) {
                Some(why) => Some((why, model)),
                // the client left while the model compiled: nobody could unload it
                None if !self.buffers.is_live(owner) => {
                    Some(("the client's connection closed".to_string(), model))
                }
                None => {
                    models.insert(handle, (owner, Arc::new(model)));
                    None
                }
            }
        };
        if let Some((why, model)) = refused {
            let _ = tokio::task::spawn_blocking(move || drop(model)).await;
            return Ok(Response::new(load_error(status::INVALID_INPUT, why)));
        }
        Ok(Response::new(response))
    }

    async fn run(
        &self,
        request: Request<RunModelRequest>,
    ) -> Result<Response<RunModelResponse>, Status> {
        let owner = Session::of(&request);
        let r = request.into_inner();
        let fail = |status, msg| {
            Ok(Response::new(RunModelResponse {
                status,
                msg,
                ..Default::default()
            }))
        };
        let Some(model) = self.model(owner, &r.handle) else {
            return fail(
                status::INVALID_INPUT,
                format!(
                    "no model `{}` (handles are per client; was it unloaded?)",
                    r.handle
                ),
            );
        };
        // On the running client's stream 0: in order with its Executes there, never queued
        // behind another client's work.
        match self.streams.stream(owner, &**self.host.device(), 0) {
            Ok(stream) => model.set_stream(stream),
            Err(e) => return fail(e.status(), e.to_string()),
        }
        let mut inputs = Vec::with_capacity(r.inputs.len());
        for t in r.inputs {
            let Some(desc) = t.desc.as_ref() else {
                return fail(
                    status::INVALID_INPUT,
                    "an input without a description".into(),
                );
            };
            match tensor_from_proto(desc).and_then(|d| d.sized(t.data.len() as u64)) {
                Ok(desc) => inputs.push(Tensor { desc, data: t.data }),
                Err(e) => return fail(status::INVALID_INPUT, format!("input: {e}")),
            }
        }
        if !r.list_inputs.is_empty() || !model.graph().kinds.is_empty() {
            if !r.input_buffers.is_empty() || !r.output_buffers.is_empty() || r.outputs_on_device {
                return fail(
                    status::INVALID_INPUT,
                    "a model with sequence or optional inputs or outputs runs by value".into(),
                );
            }
            let values = match list_values(&model, inputs, r.list_inputs) {
                Ok(v) => v,
                Err(e) => return fail(status::INVALID_INPUT, e),
            };
            let ran = tokio::task::spawn_blocking(move || {
                let out = model.run_values(&values);
                (model, out)
            })
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
            return match ran {
                (model, Ok(outs)) => Ok(Response::new(values_response(&model, outs))),
                (_, Err(e)) => fail(e.status(), e.to_string()),
            };
        }
        if !r.input_buffers.is_empty() || !r.output_buffers.is_empty() || r.outputs_on_device {
            let ran = match self.on_device(owner, &model, &r.input_buffers, &r.output_buffers) {
                Ok(bound) => {
                    let (buffers, host) = (self.buffers.clone(), self.host.clone());
                    tokio::task::spawn_blocking(move || {
                        bound.run(&model, &inputs, &buffers, &host, owner)
                    })
                    .await
                    .map_err(|e| Status::internal(e.to_string()))?
                }
                Err(e) => Err(e),
            };
            return match ran {
                Ok((outputs, peak_bytes)) => Ok(Response::new(RunModelResponse {
                    status: status::OK,
                    msg: String::new(),
                    peak_bytes,
                    output_buffers: outputs,
                    ..Default::default()
                })),
                Err(e) => fail(e.status(), e.to_string()),
            };
        }
        let ran = tokio::task::spawn_blocking(move || model.run(&inputs))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        match ran {
            Ok(out) => Ok(Response::new(RunModelResponse {
                status: status::OK,
                msg: String::new(),
                peak_bytes: out.stats.peak_bytes,
                output_buffers: Vec::new(),
                outputs: out
                    .outputs
                    .into_iter()
                    .map(|t| TensorValue {
                        desc: Some(tensor_to_proto(&t.desc)),
                        data: t.data,
                    })
                    .collect(),
                list_outputs: Vec::new(),
            })),
            Err(e) => fail(e.status(), e.to_string()),
        }
    }

    async fn unload(
        &self,
        request: Request<UnloadModelRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let owner = Session::of(&request);
        let handle = request.into_inner().handle;
        let model = {
            let mut models = self.models.lock();
            match models.get(&handle) {
                Some((s, _)) if *s == owner => models.remove(&handle),
                _ => None,
            }
        };
        Ok(Response::new(match model {
            Some(m) => {
                // Device memory is freed off the async runtime (it may wait for the device).
                let _ = tokio::task::spawn_blocking(move || drop(m)).await;
                StatusResponse {
                    status: status::OK,
                    msg: String::new(),
                }
            }
            None => StatusResponse {
                status: status::INVALID_INPUT,
                msg: format!("no model `{handle}`"),
            },
        }))
    }
}

/// The named values of a by-value run: tensors from `tensors`, sequences and optionals from
/// `lists` read as the model declares each input.
fn list_values(
    model: &Model,
    tensors: Vec<Tensor>,
    lists: Vec<ValueList>,
) -> Result<Vec<(String, crate::graph::Value)>, String> {
    use crate::graph::{MapValue, Value, ValueKind};
    let mut out: Vec<(String, Value)> = tensors
        .into_iter()
        .map(|t| (t.desc.name.clone(), Value::Tensor(Arc::new(t))))
        .collect();
    for l in lists {
        let tensor = |t: TensorValue| -> Result<Tensor, String> {
            let desc = t
                .desc
                .as_ref()
                .ok_or_else(|| format!("`{}`: an item without a description", l.name))?;
            let desc = tensor_from_proto(desc)
                .and_then(|d| d.sized(t.data.len() as u64))
                .map_err(|e| format!("`{}`: {e}", l.name))?;
            Ok(Tensor { desc, data: t.data })
        };
        let kind = model.graph().kinds.get(&l.name);
        if !l.maps.is_empty() || matches!(kind, Some(ValueKind::Map(_) | ValueKind::MapSequence(_)))
        {
            let single = matches!(kind, Some(ValueKind::Map(_)));
            if !matches!(kind, Some(ValueKind::Map(_) | ValueKind::MapSequence(_)))
                || !l.items.is_empty()
                || l.none
                || (single && l.maps.len() != 1)
            {
                return Err(format!(
                    "`{}` is {}: give it as `maps`{}",
                    l.name,
                    if single {
                        "a map"
                    } else {
                        "not a map input of this model"
                    },
                    if single { " with one entry" } else { "" }
                ));
            }
            if l.maps.len() > crate::graph::MAX_MAPS {
                return Err(format!(
                    "`{}`: {} maps; at most {}",
                    l.name,
                    l.maps.len(),
                    crate::graph::MAX_MAPS
                ));
            }
            let name = l.name.clone();
            let maps = l
                .maps
                .into_iter()
                .map(|m| {
                    let (Some(k), Some(v)) = (m.keys, m.values) else {
                        return Err(format!("`{name}`: a map without keys or values"));
                    };
                    MapValue::new(tensor(k)?, tensor(v)?)
                        .map(Arc::new)
                        .map_err(|e| format!("`{name}`: {e}"))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let v = if single {
                Value::Map(maps.into_iter().next().expect("one map"))
            } else {
                Value::Maps(maps)
            };
            out.push((name, v));
            continue;
        }
        let items = l
            .items
            .into_iter()
            .map(|t| tensor(t).map(Arc::new))
            .collect::<Result<Vec<_>, String>>()?;
        let v = match kind {
            _ if l.none => Value::None,
            Some(ValueKind::OptionalTensor) if items.len() == 1 => {
                Value::Tensor(items.into_iter().next().expect("one item"))
            }
            Some(ValueKind::OptionalTensor) => {
                return Err(format!(
                    "`{}` is an optional tensor: one item, or `none`",
                    l.name
                ));
            }
            Some(_) => Value::Sequence(items),
            None => {
                return Err(format!(
                    "`{}` is not a sequence or optional input of this model",
                    l.name
                ));
            }
        };
        out.push((l.name, v));
    }
    Ok(out)
}

/// Tensor `t` of output `name` on the wire.
fn tensor_value(t: &Tensor, name: &str) -> TensorValue {
    let mut desc = tensor_to_proto(&t.desc);
    desc.name = name.to_string();
    TensorValue {
        desc: Some(desc),
        data: t.data.clone(),
    }
}

/// Map `m` on the wire (its tensors unnamed: the `ValueList` names the output, and a long name
/// repeated in each of many maps would multiply the response).
fn map_value(m: &crate::graph::MapValue) -> super::proto::MapValue {
    super::proto::MapValue {
        keys: Some(tensor_value(m.keys(), "")),
        values: Some(tensor_value(m.values(), "")),
    }
}

/// A by-value run's response: tensor outputs in `outputs`, sequences and optionals in
/// `list_outputs`, as the model declares each output.
fn values_response(model: &Model, outs: Vec<(String, crate::graph::Value)>) -> RunModelResponse {
    use crate::graph::Value;
    let mut r = RunModelResponse {
        status: status::OK,
        ..Default::default()
    };
    for (name, v) in outs {
        let listed = model.graph().kinds.contains_key(&name);
        match v {
            Value::Tensor(t) if !listed => r.outputs.push(tensor_value(&t, &name)),
            Value::Tensor(t) => r.list_outputs.push(ValueList {
                items: vec![tensor_value(&t, &name)],
                name,
                ..Default::default()
            }),
            Value::Sequence(items) => r.list_outputs.push(ValueList {
                items: items.iter().map(|t| tensor_value(t, &name)).collect(),
                name,
                ..Default::default()
            }),
            Value::None => r.list_outputs.push(ValueList {
                name,
                none: true,
                ..Default::default()
            }),
            Value::Map(m) => r.list_outputs.push(ValueList {
                maps: vec![map_value(&m)],
                map: true,
                name,
                ..Default::default()
            }),
            Value::Maps(maps) => r.list_outputs.push(ValueList {
                maps: maps.iter().map(|m| map_value(m)).collect(),
                name,
                ..Default::default()
            }),
        }
    }
    r
}
