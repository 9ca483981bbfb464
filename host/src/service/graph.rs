//! `umd.Graph`: whole models over gRPC. `LoadModel` takes an ONNX model as a stream of chunks
//! and returns an unguessable handle (given only to the client that loaded it, like buffer
//! handles); `Run` takes named tensors by value and returns the named outputs; `Unload` drops
//! the model and its device memory. Owns only the network side; the engine is [`crate::graph`].

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::Rng;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::convert::{tensor_from_proto, tensor_to_proto};
use super::proto::*;
use crate::Host;
use crate::error::status;
use crate::graph::{Dim, Model, Tensor, ValueDecl};

/// Largest model accepted over the wire (1 GiB).
pub const MAX_MODEL_BYTES: usize = 1 << 30;
/// Most models loaded at once on one server.
pub const MAX_MODELS: usize = 64;

#[derive(Clone)]
pub struct GraphService {
    host: Arc<Host>,
    models: Arc<Mutex<HashMap<String, Arc<Model>>>>,
}

impl GraphService {
    pub fn new(host: Arc<Host>) -> Self {
        GraphService {
            host,
            models: Arc::default(),
        }
    }

    /// Drops every model (shutdown).
    pub fn unload_all(&self) {
        self.models.lock().clear();
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
    }
}

fn load_error(status: i32, msg: String) -> LoadModelResponse {
    LoadModelResponse {
        status,
        msg,
        ..Default::default()
    }
}

#[tonic::async_trait]
impl graph_server::Graph for GraphService {
    async fn load_model(
        &self,
        request: Request<Streaming<ModelChunk>>,
    ) -> Result<Response<LoadModelResponse>, Status> {
        let mut chunks = request.into_inner();
        let mut bytes = Vec::new();
        while let Some(c) = chunks.next().await {
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
        if self.models.lock().len() >= MAX_MODELS {
            return Ok(Response::new(load_error(
                status::INVALID_INPUT,
                format!("{MAX_MODELS} models are loaded; unload one first"),
            )));
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
        self.models.lock().insert(handle, Arc::new(model));
        Ok(Response::new(response))
    }

    async fn run(
        &self,
        request: Request<RunModelRequest>,
    ) -> Result<Response<RunModelResponse>, Status> {
        let r = request.into_inner();
        let fail = |status, msg| {
            Ok(Response::new(RunModelResponse {
                status,
                msg,
                ..Default::default()
            }))
        };
        let Some(model) = self.models.lock().get(&r.handle).cloned() else {
            return fail(
                status::INVALID_INPUT,
                format!(
                    "no model `{}` (handles are per client; was it unloaded?)",
                    r.handle
                ),
            );
        };
        let mut inputs = Vec::with_capacity(r.inputs.len());
        for t in r.inputs {
            let Some(desc) = t.desc.as_ref() else {
                return fail(
                    status::INVALID_INPUT,
                    "an input without a description".into(),
                );
            };
            match tensor_from_proto(desc) {
                Ok(desc) => inputs.push(Tensor { desc, data: t.data }),
                Err(e) => return fail(status::INVALID_INPUT, format!("input: {e}")),
            }
        }
        let ran = tokio::task::spawn_blocking(move || model.run(&inputs))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        match ran {
            Ok(out) => Ok(Response::new(RunModelResponse {
                status: status::OK,
                msg: String::new(),
                peak_bytes: out.stats.peak_bytes,
                outputs: out
                    .outputs
                    .into_iter()
                    .map(|t| TensorValue {
                        desc: Some(tensor_to_proto(&t.desc)),
                        data: t.data,
                    })
                    .collect(),
            })),
            Err(e) => fail(e.status(), e.to_string()),
        }
    }

    async fn unload(
        &self,
        request: Request<UnloadModelRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let handle = request.into_inner().handle;
        let model = self.models.lock().remove(&handle);
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
