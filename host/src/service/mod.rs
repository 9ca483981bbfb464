//! The gRPC service: `umd.Translator` (wire-compatible with the seed protocol), `umd.Device`
//! (remote execution), `umd.Graph` (whole models), `umd.Plugins` (administration, opt-in), gRPC health and reflection, and
//! Prometheus metrics.
//!
//! Owns the network side only: request conversion, status codes, streaming, buffer handles and
//! shutdown. Translation and execution are the [`Host`]'s.

/// Accepts gzip and zstd requests and compresses responses for clients that ask (by
/// `grpc-accept-encoding`). The decompressed size stays bounded: tonic inflates into a buffer
/// limited to the service's `max_decoding_message_size` and answers RESOURCE_EXHAUSTED past it.
macro_rules! compressed {
    ($server:expr) => {
        $server
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .accept_compressed(tonic::codec::CompressionEncoding::Zstd)
            .send_compressed(tonic::codec::CompressionEncoding::Gzip)
            .send_compressed(tonic::codec::CompressionEncoding::Zstd)
    };
}

mod admin;
mod buffers;
mod convert;
mod device;
mod graph;
pub mod metrics;
mod seal;
mod session;
mod streams;
mod translator;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

use crate::Host;
pub use graph::{MAX_MODELS, MAX_MODELS_PER_CLIENT};
pub use metrics::Metrics;

/// Generated protocol types, clients and servers (`proto/umd.proto`).
pub mod proto {
    tonic::include_proto!("umd");
    /// The encoded descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/umd_descriptor.bin"));
}

/// How `umd serve` runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Largest gRPC message accepted or sent (default 64 MiB).
    pub max_message_bytes: usize,
    /// Serve `umd.Plugins`.
    pub admin: bool,
    /// With `admin`, the token clients must send as `authorization: Bearer TOKEN`; without one,
    /// administration is served only on a loopback address.
    pub admin_token: Option<String>,
    /// Where to serve Prometheus metrics (`None`: not served).
    pub metrics_addr: Option<SocketAddr>,
    /// Interval of the throughput/latency log line (`None`: no log line).
    pub log_interval: Option<Duration>,
    /// Most bytes one client connection may hold in device buffers (default 2 GiB).
    pub client_quota_bytes: u64,
    /// Run client command buffers that carry no seal of this server (default false: refused).
    pub allow_raw_command_buffers: bool,
    /// Distinct streams leased to clients on each device (default 32): each client's streams
    /// are its own until this many are in use, then clients share the least-held ones.
    pub client_streams_per_device: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_message_bytes: 64 << 20,
            admin: false,
            admin_token: None,
            metrics_addr: None,
            log_interval: Some(Duration::from_secs(10)),
            client_quota_bytes: 2 << 30,
            allow_raw_command_buffers: false,
            client_streams_per_device: crate::device::streams::DEFAULT_LEASED_STREAMS,
        }
    }
}

/// Serves on `listener` until `shutdown` resolves; then stops accepting, lets in-flight calls
/// and streams finish, waits for the device, frees every client buffer and returns.
pub async fn serve(
    host: Arc<Host>,
    config: ServeConfig,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    if config.admin && config.admin_token.is_none() && !local.ip().is_loopback() {
        anyhow::bail!(
            "refusing to serve administration on non-loopback address {local} without --admin-token"
        );
    }
    let metrics = Arc::new(Metrics::default());
    let buffers = Arc::new(buffers::Buffers::new(config.client_quota_bytes));
    let max = config.max_message_bytes;

    let streams = Arc::new(streams::ClientStreams::new(
        host.devices(),
        config.client_streams_per_device,
    ));

    let translator = translator::TranslatorService::new(host.clone(), metrics.clone());
    let device = device::DeviceService::new(
        host.clone(),
        buffers.clone(),
        streams.clone(),
        metrics.clone(),
        max,
    )
    .allow_raw_command_buffers(config.allow_raw_command_buffers);
    let graph = graph::GraphService::new(host.clone(), buffers.clone(), streams.clone());
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<proto::translator_server::TranslatorServer<translator::TranslatorService>>()
        .await;
    health_reporter
        .set_serving::<proto::device_server::DeviceServer<device::DeviceService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let admin = config
        .admin
        .then(|| admin::service(host.clone(), config.admin_token.clone(), max));

    let mut background = Vec::new();
    if let Some(addr) = config.metrics_addr {
        let l = TcpListener::bind(addr).await?;
        tracing::info!(addr = %l.local_addr()?, "metrics served");
        background.push(tokio::spawn(metrics::serve_http(
            l,
            host.clone(),
            metrics.clone(),
        )));
    }
    if let Some(every) = config.log_interval {
        background.push(tokio::spawn(metrics::log_periodically(
            metrics.clone(),
            every,
        )));
    }

    // Each connection is a session owning its buffers and streams: given back when the
    // connection closes.
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    let (b, h, g) = (buffers.clone(), host.clone(), graph.clone());
    background.push(tokio::spawn(async move {
        while let Some(s) = closed_rx.recv().await {
            let (b, h, st, g) = (b.clone(), h.clone(), streams.clone(), g.clone());
            let _ = tokio::task::spawn_blocking(move || {
                g.free_session(s);
                b.free_session(s, h.devices());
                st.end(s);
            })
            .await;
        }
    }));
    let opened = buffers.clone();
    let names: Vec<&str> = host.devices().iter().map(|d| d.name()).collect();
    tracing::info!(addr = %local, devices = %names.join(","), admin = config.admin, "umd serving");
    let incoming = tokio_stream::StreamExt::map(
        TcpIncoming::from(listener).with_nodelay(Some(true)),
        move |conn| {
            conn.map(|s| {
                let t = session::Tracked::new(s, closed_tx.clone());
                opened.open(t.session());
                t
            })
        },
    );
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(reflection)
        .add_service(
            compressed!(proto::translator_server::TranslatorServer::new(translator))
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_service(
            compressed!(proto::device_server::DeviceServer::new(device))
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_service(
            compressed!(proto::graph_server::GraphServer::new(graph.clone()))
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_optional_service(admin)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;

    tracing::info!("draining: waiting for the device, freeing client buffers");
    for task in background {
        task.abort();
    }
    let host2 = host.clone();
    tokio::task::spawn_blocking(move || {
        for dev in host2.devices() {
            let _ = dev.synchronize(dev.default_stream());
        }
        buffers.free_all(host2.devices());
        graph.unload_all();
        for dev in host2.devices() {
            dev.trim();
        }
    })
    .await?;
    tracing::info!("umd stopped");
    Ok(())
}

/// The service's request conversion alone, for the fuzzer in `fuzz/`: protobuf bytes →
/// `TranslateRequest` → `OpRequest`, validated as Translate validates it; an error says why.
#[doc(hidden)]
pub fn check_request_bytes(bytes: &[u8]) -> Result<crate::OpRequest, String> {
    let r =
        <proto::TranslateRequest as prost::Message>::decode(bytes).map_err(|e| e.to_string())?;
    let req = convert::request_from_proto(&r).map_err(|e| e.to_string())?;
    req.validate().map_err(|e| e.to_string())?;
    Ok(req)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
