//! `umd.Translator`: `Translate` and the pipelined `SubmitBatch`, whose items may be fused by
//! group (`SubmitRequest.fuse`): each item is translated and answered as ever, and the last
//! item of a group also carries one sealed command buffer running the whole group, the links
//! between its items kept on the device ([`Fuser`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::convert::{error_response, request_from_proto, translation_response};
use super::metrics::Metrics;
use super::proto::{
    self, FuseItem, FusedBinding, FusedGroup, SubmitRequest, SubmitResponse, TranslateRequest,
    TranslateResponse,
};
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
        self.translate_item(r).await.0
    }

    /// The response, and the translation when there is one (for fusion).
    async fn translate_item(
        &self,
        r: TranslateRequest,
    ) -> (TranslateResponse, Option<Arc<Translation>>) {
        let start = Instant::now();
        let (resp, t) = match request_for(&self.host, &r, "") {
            Err(e) => (error_response(&e, r.request_id), None),
            Ok(req) => match translate(&self.host, req).await {
                Ok(t) => (translation_response(&t, r.request_id), Some(t)),
                Err(e) => (error_response(&e, r.request_id), None),
            },
        };
        self.metrics
            .record(&r.op_type, resp.status, start.elapsed());
        (resp, t)
    }
}

/// Most items one fused group may hold.
pub const MAX_GROUP_ITEMS: usize = 64;

/// One item of an open group.
struct Item {
    status: i32,
    msg: String,
    translation: Option<Arc<Translation>>,
    links: Vec<proto::FuseLink>,
}

struct Group {
    name: String,
    items: Vec<Item>,
    /// More than `MAX_GROUP_ITEMS` items came: failed at its end.
    overflow: bool,
}

/// The fusion state of one `SubmitBatch` stream: at most one open group, of at most
/// `MAX_GROUP_ITEMS` items. Fed the items in stream order.
#[derive(Default)]
pub struct Fuser {
    open: Option<Group>,
}

impl Fuser {
    /// Takes the next item and returns what its response's `fused` carries: the group's fused
    /// command buffer on its last item; a failure on an item that interrupts an open group
    /// (that item is not fused itself); nothing otherwise.
    fn next(
        &mut self,
        host: &Host,
        fuse: Option<&FuseItem>,
        resp: &TranslateResponse,
        translation: Option<Arc<Translation>>,
    ) -> Option<FusedGroup> {
        let Some(f) = fuse.filter(|f| !f.group.is_empty()) else {
            return self.open.take().map(|g| {
                failed(
                    &g.name,
                    "an item outside the group came before its end".into(),
                )
            });
        };
        if let Some(g) = self.open.take_if(|g| g.name != f.group) {
            return Some(failed(
                &g.name,
                format!(
                    "an item of group `{:.64}` came before its end (only one group is open \
                     at a time; that item is not fused)",
                    f.group
                ),
            ));
        }
        let g = self.open.get_or_insert_with(|| Group {
            name: f.group.chars().take(256).collect(),
            items: Vec::new(),
            overflow: false,
        });
        if g.items.len() >= MAX_GROUP_ITEMS {
            g.overflow = true;
        } else {
            g.items.push(Item {
                status: resp.status,
                msg: resp.msg.clone(),
                translation,
                links: f.links.clone(),
            });
        }
        if !f.end {
            return None;
        }
        let g = self.open.take()?;
        Some(fuse_group(host, &g).unwrap_or_else(|msg| failed(&g.name, msg)))
    }
}

fn failed(group: &str, msg: String) -> FusedGroup {
    FusedGroup {
        status: crate::error::status::INVALID_INPUT,
        msg,
        group: group.to_string(),
        ..Default::default()
    }
}

/// Checks a closed group (every item translated, every link to an earlier item's output of the
/// same description, one target) and fuses it. Binding `b` of item `k` is value
/// `k * MAX_BINDINGS + b`; a linked input is the value of the output it reads.
fn fuse_group(host: &Host, g: &Group) -> Result<FusedGroup, String> {
    use crate::cmdbuf::{Role, limits::MAX_BINDINGS};
    if g.overflow {
        return Err(format!("the group has more than {MAX_GROUP_ITEMS} items"));
    }
    let mut cmds = Vec::with_capacity(g.items.len());
    for (k, item) in g.items.iter().enumerate() {
        match &item.translation {
            Some(t) if item.status == crate::error::status::OK => cmds.push(&t.cmdbuf),
            _ => return Err(format!("item {k} was not translated: {}", item.msg)),
        }
    }
    let first = cmds.first().ok_or("an empty group")?;
    let target = host
        .devices()
        .iter()
        .map(|d| d.target())
        .find(|t| t.name == first.target)
        .ok_or_else(|| format!("no device of target `{}`", first.target))?;
    let mut values: Vec<Vec<usize>> = Vec::with_capacity(cmds.len());
    for (k, (item, cmd)) in g.items.iter().zip(&cmds).enumerate() {
        if cmd.target != target.name {
            return Err(format!(
                "item {k} is planned for `{}`, the group for `{}`",
                cmd.target, target.name
            ));
        }
        let n_in = cmd.count(Role::Input);
        let mut v: Vec<usize> = (0..cmd.bindings.len())
            .map(|b| k * MAX_BINDINGS + b)
            .collect();
        for l in &item.links {
            let (input, from, output) = (l.input as usize, l.item as usize, l.output as usize);
            let bad = |why: String| Err(format!("item {k}, link of input {input}: {why}"));
            if input >= n_in {
                return bad(format!("the item has {n_in} inputs"));
            }
            if v[input] != k * MAX_BINDINGS + input {
                return bad("linked twice".into());
            }
            if from >= k {
                return bad(format!("item {from} is not an earlier item of the group"));
            }
            let src = cmds[from];
            let src_in = src.count(Role::Input);
            let outputs: Vec<usize> = (src_in..src.bindings.len())
                .filter(|&b| src.bindings[b].role == Role::Output)
                .collect();
            let Some(&b) = outputs.get(output) else {
                return bad(format!("item {from} has {} outputs", outputs.len()));
            };
            let (have, want) = (&src.bindings[b].desc, &cmd.bindings[input].desc);
            if have.shape != want.shape || have.dtype != want.dtype {
                return bad(format!(
                    "output {output} of item {from} is {have}, the input {want}"
                ));
            }
            v[input] = values[from][b];
        }
        values.push(v);
    }
    let parts: Vec<crate::graph::fuse::Part> = cmds
        .iter()
        .zip(&values)
        .map(|(cmd, v)| crate::graph::fuse::Part { cmd, values: v })
        .collect();
    let fused = crate::graph::fuse::fuse(target, &parts).map_err(|e| e.to_string())?;
    super::device::within_budget(&fused.cmd).map_err(|e| e.to_string())?;
    let bindings = fused
        .values
        .iter()
        .zip(&fused.cmd.bindings)
        .map(|(&v, binding)| {
            let (item, b) = (v / MAX_BINDINGS, v % MAX_BINDINGS);
            let cmd = cmds[item];
            let n_in = cmd.count(Role::Input);
            let (kind, slot) = match cmd.bindings[b].role {
                Role::Input => (proto::fused_binding::Kind::Input, b),
                Role::Output => (proto::fused_binding::Kind::Output, b - n_in),
                Role::Workspace => (proto::fused_binding::Kind::Workspace, 0),
            };
            FusedBinding {
                item: item as u32,
                kind: kind as i32,
                slot: slot as u32,
                desc: Some(super::convert::tensor_to_proto(&binding.desc)),
            }
        })
        .collect();
    let bytes = fused.cmd.encode();
    Ok(FusedGroup {
        status: crate::error::status::OK,
        msg: String::new(),
        group: g.name.clone(),
        seal: super::seal::seal(&bytes),
        command_buffer: bytes,
        bindings,
        items: g.items.len() as u32,
    })
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
                let fuse = item.fuse;
                let task = tokio::spawn(async move {
                    match item.request {
                        Some(r) => this.translate_item(r).await,
                        None => (
                            TranslateResponse {
                                status: crate::error::status::INVALID_INPUT,
                                msg: "SubmitRequest carries no request".into(),
                                ..Default::default()
                            },
                            None,
                        ),
                    }
                });
                if order_tx.send((task, fuse)).await.is_err() {
                    break;
                }
            }
        });
        let host = self.host.clone();
        tokio::spawn(async move {
            let mut fuser = Fuser::default();
            while let Some((task, fuse)) = order_rx.recv().await {
                let (response, translation) = task.await.unwrap_or_else(|e| {
                    let r = TranslateResponse {
                        status: crate::error::status::INTERNAL,
                        msg: format!("translation task failed: {e}"),
                        ..Default::default()
                    };
                    (r, None)
                });
                // Items without `fuse` pass straight through (unless they interrupt a group).
                let fused = if fuse.is_some() || fuser.open.is_some() {
                    fuser.next(&host, fuse.as_ref(), &response, translation)
                } else {
                    None
                };
                if out_tx
                    .send(Ok(SubmitResponse {
                        response: Some(response),
                        fused,
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
