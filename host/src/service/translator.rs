//! `umd.Translator`: `Translate` and the pipelined `SubmitBatch`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::convert::{error_response, request_from_proto, translation_response};
use super::metrics::Metrics;
use super::proto::{self, SubmitRequest, SubmitResponse, TranslateRequest, TranslateResponse};
use crate::error::{Error, RequestError};
use crate::{Host, Translation};

/// Responses computed ahead of the one being sent, per stream: the in-flight window.
const PIPELINE_DEPTH: usize = 256;

/// Requests read off a `SubmitBatch` stream and not yet in the in-flight window, per stream.
/// The request stream is read into this queue while the window is full: h2 drops a connection
/// (`GOAWAY ENHANCE_YOUR_CALM "too_many_data_frames"`) whose small DATA frames pile up unread
/// (DESIGN.md §8). Only past these bounds does reading stop (back-pressure to the client).
const QUEUED_ITEMS: usize = 1 << 17;
/// The same queue's bound in encoded request bytes.
const QUEUED_BYTES: usize = 64 << 20;

#[derive(Clone)]
pub struct TranslatorService {
    host: Arc<Host>,
    metrics: Arc<Metrics>,
}

impl TranslatorService {
    pub fn new(host: Arc<Host>, metrics: Arc<Metrics>) -> Self {
        TranslatorService { host, metrics }
    }
}

/// Translates on the calling task when the cache has it, on the blocking pool otherwise (a
/// plugin call may run up to its deadline and must not hold an async worker).
pub async fn translate(host: &Arc<Host>, req: crate::OpRequest) -> Result<Arc<Translation>, Error> {
    if let Some(hit) = host.translator().cached(&req) {
        return Ok(hit);
    }
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.translate(&req))
        .await
        .unwrap_or_else(
            |e| Err(RequestError::Other(format!("translation task failed: {e}")).into()),
        )
}

/// The request `r` asks for, planned for the device it names (or, when it names none, for
/// `device`: an Execute request's; empty = the default). A `target` that is not that device's,
/// an `r.device` that differs from `device`, or an unknown device is refused, naming it.
pub fn request_for(
    host: &Host,
    r: &TranslateRequest,
    device: &str,
) -> Result<crate::OpRequest, Error> {
    let name = match (r.device.as_str(), device) {
        (a, b) if !a.is_empty() && !b.is_empty() && a != b => {
            return Err(RequestError::Other(format!(
                "the op names device `{a:.64}`, the execution `{b:.64}`"
            ))
            .into());
        }
        ("", b) => b,
        (a, _) => a,
    };
    let mut req = request_from_proto(r)?;
    if name.is_empty() {
        return Ok(req);
    }
    let dev = host.device_named(name)?;
    if let Some(t) = req.target.as_ref().filter(|t| t.name != dev.target().name) {
        return Err(RequestError::Target(format!(
            "`{}` is not the target of device `{}` (`{}`)",
            t.name,
            dev.name(),
            dev.target().name
        ))
        .into());
    }
    // The device's own target (its real limits); `None` for the default's, as before.
    req.target = (dev.target() != host.translator().default_target())
        .then(|| dev.target().clone())
        .or(req.target);
    Ok(req)
}

impl TranslatorService {
    async fn translate_one(&self, r: TranslateRequest) -> TranslateResponse {
        let start = Instant::now();
        let resp = match request_for(&self.host, &r, "") {
            Err(e) => error_response(&e, r.request_id),
            Ok(req) => match translate(&self.host, req).await {
                Ok(t) => translation_response(&t, r.request_id),
                Err(e) => error_response(&e, r.request_id),
            },
        };
        self.metrics
            .record(&r.op_type, resp.status, start.elapsed());
        resp
    }
}

type SubmitStream = Pin<Box<dyn Stream<Item = Result<SubmitResponse, Status>> + Send>>;

#[tonic::async_trait]
impl proto::translator_server::Translator for TranslatorService {
    async fn translate(
        &self,
        request: Request<TranslateRequest>,
    ) -> Result<Response<TranslateResponse>, Status> {
        Ok(Response::new(
            self.translate_one(request.into_inner()).await,
        ))
    }

    type SubmitBatchStream = SubmitStream;

    /// The request stream is read as it arrives into a bounded queue; items leave it into an
    /// in-flight window of `PIPELINE_DEPTH` concurrent translations; a writer task sends the
    /// responses in request order as each becomes ready.
    async fn submit_batch(
        &self,
        request: Request<Streaming<SubmitRequest>>,
    ) -> Result<Response<Self::SubmitBatchStream>, Status> {
        use prost::Message;
        let mut inbound = request.into_inner();
        let (queue_tx, mut queue_rx) = mpsc::channel(QUEUED_ITEMS);
        let (order_tx, mut order_rx) = mpsc::channel(PIPELINE_DEPTH);
        let (out_tx, out_rx) = mpsc::channel(PIPELINE_DEPTH);
        let queued_bytes = Arc::new(tokio::sync::Semaphore::new(QUEUED_BYTES));
        tokio::spawn(async move {
            while let Some(item) = inbound.next().await {
                let Ok(item) = item else { break };
                let cost = item.encoded_len().clamp(1, QUEUED_BYTES) as u32;
                let Ok(permit) = queued_bytes.clone().acquire_many_owned(cost).await else {
                    break;
                };
                if queue_tx.send((item, permit)).await.is_err() {
                    break;
                }
            }
        });
        let this = self.clone();
        tokio::spawn(async move {
            while let Some((item, permit)) = queue_rx.recv().await {
                drop(permit);
                let item: SubmitRequest = item;
                let this = this.clone();
                let task = tokio::spawn(async move {
                    match item.request {
                        Some(r) => this.translate_one(r).await,
                        None => TranslateResponse {
                            status: crate::error::status::INVALID_INPUT,
                            msg: "SubmitRequest carries no request".into(),
                            ..Default::default()
                        },
                    }
                });
                if order_tx.send(task).await.is_err() {
                    break;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(task) = order_rx.recv().await {
                let response = task.await.unwrap_or_else(|e| TranslateResponse {
                    status: crate::error::status::INTERNAL,
                    msg: format!("translation task failed: {e}"),
                    ..Default::default()
                });
                if out_tx
                    .send(Ok(SubmitResponse {
                        response: Some(response),
                        fused: None,
                    }))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out_rx))))
    }
}
