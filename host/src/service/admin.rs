//! `umd.Plugins`: list, load and unload plugins. Served only with `--admin`; guarded by a bearer
//! token when one is configured (otherwise `serve` allows it on loopback addresses only).

use std::path::PathBuf;
use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use super::proto::plugins_server::{Plugins, PluginsServer};
use super::proto::*;
use crate::error::status;
use crate::{Host, PluginStatus};

pub struct AdminService {
    host: Arc<Host>,
}

/// Checks `authorization: Bearer TOKEN` when a token is configured.
#[derive(Clone)]
pub struct TokenCheck {
    expected: Option<String>,
}

/// Whether `got` equals `want`, in time that depends on their lengths only (not on where they
/// first differ).
fn same_secret(got: &[u8], want: &[u8]) -> bool {
    got.len() == want.len() && got.iter().zip(want).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

impl Interceptor for TokenCheck {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(want) = &self.expected else {
            return Ok(req);
        };
        match req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            Some(got) if same_secret(got.as_bytes(), want.as_bytes()) => Ok(req),
            _ => Err(Status::unauthenticated(
                "administration needs `authorization: Bearer TOKEN`",
            )),
        }
    }
}

/// The administration service, behind the token check.
pub fn service(
    host: Arc<Host>,
    token: Option<String>,
    max_message_bytes: usize,
) -> InterceptedService<PluginsServer<AdminService>, TokenCheck> {
    InterceptedService::new(
        compressed!(PluginsServer::new(AdminService { host }))
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes),
        TokenCheck {
            expected: token.map(|t| format!("Bearer {t}")),
        },
    )
}

fn info(p: &PluginStatus) -> PluginInfo {
    let (name, version) = match &p.status {
        Ok(label) => label
            .split_once('@')
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .unwrap_or_default(),
        Err(_) => Default::default(),
    };
    PluginInfo {
        origin: p.origin.clone(),
        name,
        version,
        abi: p.abi.clone().unwrap_or_default(),
        ops: p
            .ops
            .iter()
            .map(|(op, targets, prio)| format!("{op} [{}] priority {prio}", targets.join(",")))
            .collect(),
        status: match &p.status {
            Ok(_) => "loaded".into(),
            Err(e) => format!("refused: {e}"),
        },
        calls: p.calls,
        faults: p.faults,
    }
}

#[tonic::async_trait]
impl Plugins for AdminService {
    async fn list(&self, _: Request<ListRequest>) -> Result<Response<ListResponse>, Status> {
        let plugins = self.host.plugin_status().iter().map(info).collect();
        Ok(Response::new(ListResponse { plugins }))
    }

    async fn load(
        &self,
        request: Request<LoadRequest>,
    ) -> Result<Response<PluginResponse>, Status> {
        let path = PathBuf::from(request.into_inner().path);
        let host = self.host.clone();
        let result = tokio::task::spawn_blocking(move || host.load_plugin(&path))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(match result {
            Ok(p) => PluginResponse {
                status: status::OK,
                msg: String::new(),
                plugin: Some(info(&p)),
            },
            Err(e) => PluginResponse {
                // A path that is no readable component file is the caller's error.
                status: if matches!(e, crate::error::LoadError::Read { .. }) {
                    status::INVALID_INPUT
                } else {
                    status::PLUGIN_FAULT
                },
                msg: super::convert::message(&e.into()),
                plugin: None,
            },
        }))
    }

    async fn unload(
        &self,
        request: Request<UnloadRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(if self.host.unload_plugin(&name) {
            StatusResponse {
                status: status::OK,
                msg: String::new(),
            }
        } else {
            StatusResponse {
                status: status::UNSUPPORTED,
                msg: format!("no plugin named `{name}` is loaded"),
            }
        }))
    }
}
