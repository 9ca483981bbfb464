//! `umd serve` and `umd bench grpc`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;

use umd::Host;
use umd::service::proto::translator_client::TranslatorClient;
use umd::service::proto::{SubmitRequest, TensorDesc, TranslateRequest};
use umd::service::{ServeConfig, serve, shutdown_signal};

#[derive(Args)]
pub struct ServeArgs {
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:50051")]
    addr: SocketAddr,
    /// Serve plugin administration (umd.Plugins).
    #[arg(long)]
    admin: bool,
    /// Token administration requires (`authorization: Bearer TOKEN`); without one, `--admin`
    /// is allowed on loopback addresses only.
    #[arg(long, env = "UMD_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// Serve Prometheus metrics at this address (e.g. 127.0.0.1:9090).
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// Largest gRPC message, in MiB.
    #[arg(long, default_value_t = 64)]
    max_message_mib: usize,
    /// Seconds between throughput/latency log lines (0: none).
    #[arg(long, default_value_t = 10)]
    log_interval: u64,
    /// Most device-buffer memory one client connection may hold, in MiB.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..))]
    client_quota_mib: u64,
    /// Watch the --plugins directories and hot-reload plugins added, replaced or removed.
    #[arg(long)]
    watch: bool,
    /// Run client command buffers that do not carry this server's seal from Translate (their
    /// launch parameters are client-written bytes: on a GPU, any device address).
    #[arg(long)]
    allow_raw_command_buffers: bool,
    /// Distinct streams leased to clients on each device: each client's streams (0 to 3) are
    /// its own until this many are in use; past it clients share the least-held ones.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
    client_streams: u64,
}

pub fn run(host: Host, args: &ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig {
        max_message_bytes: args.max_message_mib << 20,
        admin: args.admin,
        admin_token: args.admin_token.clone(),
        metrics_addr: args.metrics_addr,
        log_interval: (args.log_interval > 0).then(|| Duration::from_secs(args.log_interval)),
        client_quota_bytes: args.client_quota_mib.saturating_mul(1 << 20),
        allow_raw_command_buffers: args.allow_raw_command_buffers,
        client_streams_per_device: args.client_streams as usize,
    };
    runtime()?.block_on(async {
        let listener = TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("binding {}", args.addr))?;
        let names: Vec<&str> = host.devices().iter().map(|d| d.name()).collect();
        eprintln!(
            "umd serving on {} (device {})",
            listener.local_addr()?,
            names.join(", ")
        );
        let host = Arc::new(host);
        let _watcher = if args.watch {
            Some(host.watch(&[])?)
        } else {
            None
        };
        serve(host, config, listener, shutdown_signal()).await
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

#[derive(Args)]
pub struct GrpcBenchArgs {
    /// Server to measure; default: one started in this process on a loopback port.
    #[arg(long)]
    addr: Option<String>,
    /// Requests per run.
    #[arg(long, default_value_t = 1000)]
    count: usize,
}

fn add_request(id: i64) -> TranslateRequest {
    let t = |name: &str| TensorDesc {
        name: name.into(),
        shape: vec![64, 128],
        dtype: "float32".into(),
        text_bytes: 0,
    };
    TranslateRequest {
        op_type: "Add".into(),
        inputs: vec![t("a"), t("b")],
        request_id: id,
        ..Default::default()
    }
}

/// The seed experiment: N Adds as sequential unary calls, then as one SubmitBatch stream.
pub fn bench_grpc(host: Host, args: &GrpcBenchArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let (addr, server) = match &args.addr {
            Some(a) => (a.clone(), None),
            None => {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = format!("http://{}", listener.local_addr()?);
                let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
                let config = ServeConfig {
                    log_interval: None,
                    ..Default::default()
                };
                let task = tokio::spawn(serve(Arc::new(host), config, listener, async {
                    let _ = stop_rx.await;
                }));
                (addr, Some((stop_tx, task)))
            }
        };
        let mut client = TranslatorClient::connect(addr.clone()).await?;
        // Warm up: connection, plugin instance, cache.
        client.translate(add_request(-1)).await?;

        let mut lat = Vec::with_capacity(args.count);
        let start = Instant::now();
        for i in 0..args.count {
            let t = Instant::now();
            let r = client.translate(add_request(i as i64)).await?.into_inner();
            anyhow::ensure!(r.status == 0, "unary {i}: status {} {}", r.status, r.msg);
            lat.push(t.elapsed());
        }
        let unary = start.elapsed();
        lat.sort();

        let start = Instant::now();
        let reqs: Vec<SubmitRequest> = (0..args.count)
            .map(|i| SubmitRequest {
                request: Some(add_request(i as i64)),
                fuse: None,
            })
            .collect();
        let mut stream = client
            .submit_batch(tokio_stream::iter(reqs))
            .await?
            .into_inner();
        let mut n = 0;
        while let Some(r) = stream.message().await? {
            let r = r.response.context("empty SubmitResponse")?;
            anyhow::ensure!(
                r.status == 0 && r.request_id == n,
                "stream item {n}: {} {}",
                r.status,
                r.msg
            );
            n += 1;
        }
        let batch = start.elapsed();
        anyhow::ensure!(
            n as usize == args.count,
            "stream returned {n} of {}",
            args.count
        );

        let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
        println!(
            "gRPC bench against {addr}: {} Add translations (f32[64,128] + f32[64,128])",
            args.count
        );
        println!(
            "  unary, sequential : {:>9.2} ms total, {:>7.1} µs/call",
            unary.as_secs_f64() * 1e3,
            unary.as_secs_f64() * 1e6 / args.count as f64
        );
        println!(
            "  unary p50 / p99   : {:>9.1} µs / {:.1} µs",
            pct(0.5).as_secs_f64() * 1e6,
            pct(0.99).as_secs_f64() * 1e6
        );
        println!(
            "  SubmitBatch stream: {:>9.2} ms total, {:>7.1} µs/item",
            batch.as_secs_f64() * 1e3,
            batch.as_secs_f64() * 1e6 / args.count as f64
        );
        if let Some((stop, task)) = server {
            let _ = stop.send(());
            task.await??;
        }
        Ok(())
    })
}
