//! `umd bench soak`: mixed load against the gRPC service for N minutes — Translate, Execute
//! (ops and sealed command buffers, results checked), SubmitBatch, a plugin hot swap every ~30 s
//! and hostile requests (oversized, inflation bombs, bad names, unknown streams and handles,
//! unsealed command buffers) — printing per interval the process RSS (mean and peak of 1 s samples), p50/p99 of good requests
//! and error counts, then a verdict: no good request failed and RSS of the first and last
//! interval within 10 %.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use parking_lot::Mutex;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;

use umd::service::ServeConfig;
use umd::service::proto::device_client::DeviceClient;
use umd::service::proto::plugins_client::PluginsClient;
use umd::service::proto::translator_client::TranslatorClient;
use umd::service::proto::*;
use umd::{Dtype, Host, data};

use super::bench_client::{connect, create_buffer, desc, op};
use super::latency::Histogram;
use super::local_server::LocalServer;

#[derive(Args)]
pub struct SoakArgs {
    /// How long to run, in minutes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    minutes: u64,
    /// Seconds per reported interval.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    interval_secs: u64,
    /// Seconds of load before the first interval (caches fill, pools reach their size).
    #[arg(long, default_value_t = 20)]
    warmup_secs: u64,
    /// Server to load; default: one started in this process on a loopback port (with
    /// administration, for the hot swaps). RSS is this process's either way.
    #[arg(long)]
    addr: Option<String>,
    /// The server's largest message, in MiB (the oversized requests are just above it; `umd
    /// serve` defaults to 64).
    #[arg(long, default_value_t = 4)]
    max_message_mib: usize,
    /// Client tasks of each good kind (Translate, Execute, SubmitBatch), each on its own
    /// connection.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Seconds between plugin hot swaps (0: none). Swaps go through `umd.Plugins.Load` with a
    /// path on this machine: against `--addr`, the server must be local and serve `--admin`.
    #[arg(long, default_value_t = 30)]
    swap_secs: u64,
}

#[derive(Clone)]
struct Window {
    hist: Histogram,
    good: u64,
    good_errors: u64,
    hostile: u64,
    hostile_unexpected: u64,
    swaps: u64,
    /// The first few messages of failures, to say what went wrong.
    samples: Vec<String>,
}

impl Window {
    fn new() -> Window {
        Window {
            hist: Histogram::new(),
            good: 0,
            good_errors: 0,
            hostile: 0,
            hostile_unexpected: 0,
            swaps: 0,
            samples: Vec::new(),
        }
    }

    fn sample(&mut self, what: String) {
        if self.samples.len() < 5 {
            self.samples.push(what);
        }
    }
}

struct Stats {
    window: Mutex<Window>,
    stop: AtomicBool,
}

impl Stats {
    fn good(&self, took: Duration, result: anyhow::Result<()>) {
        let mut w = self.window.lock();
        match result {
            Ok(()) => {
                w.good += 1;
                w.hist.record(took);
            }
            Err(e) => {
                w.good_errors += 1;
                w.sample(format!("good request failed: {e:#}"));
            }
        }
    }

    fn hostile(&self, what: &str, refused_as_expected: bool, detail: String) {
        let mut w = self.window.lock();
        w.hostile += 1;
        if !refused_as_expected {
            w.hostile_unexpected += 1;
            w.sample(format!("hostile {what}: {detail}"));
        }
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }
}

/// The good translations, cycled: a few ops over a range of shapes (cache hits and misses).
fn good_request(i: usize) -> TranslateRequest {
    let rows = 1 + (i % 48) as i32;
    match i % 4 {
        0 => op("Add", vec![desc(&[rows, 128]), desc(&[rows, 128])]),
        1 => op("Relu", vec![desc(&[rows, 256])]),
        2 => op("MatMul", vec![desc(&[rows, 64]), desc(&[64, 32])]),
        _ => op("Mul", vec![desc(&[rows, 1]), desc(&[rows, 64])]),
    }
}

async fn translate_loop(addr: String, stats: Arc<Stats>, seed: usize) -> anyhow::Result<()> {
    let mut c = TranslatorClient::new(connect(&addr).await?);
    let mut i = seed;
    while stats.running() {
        let t = Instant::now();
        let r = c.translate(good_request(i)).await;
        let r = match r {
            Ok(r) if r.get_ref().status == 0 => Ok(()),
            Ok(r) => Err(anyhow::anyhow!("Translate: status {}", r.get_ref().msg)),
            Err(e) => Err(e.into()),
        };
        stats.good(t.elapsed(), r);
        i += 1;
    }
    Ok(())
}

async fn batch_loop(addr: String, stats: Arc<Stats>, seed: usize) -> anyhow::Result<()> {
    // Half the batches ask for compressed answers.
    let mut c = TranslatorClient::new(connect(&addr).await?);
    let mut zc = TranslatorClient::new(connect(&addr).await?)
        .send_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd);
    let mut round = 0usize;
    while stats.running() {
        let reqs: Vec<SubmitRequest> = (0..32)
            .map(|k| SubmitRequest {
                request: Some(TranslateRequest {
                    request_id: k,
                    ..good_request(seed + round + k as usize)
                }),
                fuse: None,
            })
            .collect();
        let t = Instant::now();
        let client = if round.is_multiple_of(2) {
            &mut c
        } else {
            &mut zc
        };
        let r = async {
            let mut s = client
                .submit_batch(tokio_stream::iter(reqs))
                .await?
                .into_inner();
            let mut n = 0;
            while let Some(item) = s.message().await? {
                let r = item.response.context("empty SubmitResponse")?;
                anyhow::ensure!(r.status == 0 && r.request_id == n, "item {n}: {}", r.msg);
                n += 1;
            }
            anyhow::ensure!(n == 32, "SubmitBatch answered {n} of 32");
            Ok(())
        }
        .await;
        stats.good(t.elapsed(), r);
        round += 1;
    }
    Ok(())
}

async fn status_of(
    r: Result<tonic::Response<StatusResponse>, tonic::Status>,
) -> anyhow::Result<()> {
    let r = r?.into_inner();
    anyhow::ensure!(r.status == 0, "status {}: {}", r.status, r.msg);
    Ok(())
}

/// One Execute of `x + x` (alternately as an op and as the sealed command buffer Translate
/// returned), its output read back and checked, then freed.
async fn execute_once(
    c: &mut DeviceClient<Channel>,
    sealed: &TranslateResponse,
    x: &str,
    expect: &[f64],
    as_op: bool,
) -> anyhow::Result<()> {
    let n = expect.len() as i32;
    let req = if as_op {
        ExecuteRequest {
            op: Some(op("Add", vec![desc(&[n]), desc(&[n])])),
            inputs: vec![x.into(), x.into()],
            wait: true,
            ..Default::default()
        }
    } else {
        ExecuteRequest {
            command_buffer: sealed.command_buffer.clone(),
            seal: sealed.seal.clone(),
            inputs: vec![x.into(), x.into()],
            wait: true,
            ..Default::default()
        }
    };
    let r = c.execute(req).await?.into_inner();
    anyhow::ensure!(r.status == 0, "Execute: {}", r.msg);
    let out = r
        .outputs
        .first()
        .context("Execute returned no output")?
        .clone();
    let mut s = c
        .read_buffer(ReadRequest {
            handle: out.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(chunk) = s.message().await? {
        bytes.extend(chunk.data);
    }
    for h in r.outputs {
        status_of(
            c.free_buffer(BufferRequest {
                handle: h,
                ..Default::default()
            })
            .await,
        )
        .await?;
    }
    anyhow::ensure!(
        data::decode(Dtype::F32, &bytes) == expect,
        "Execute: wrong result"
    );
    Ok(())
}

async fn execute_loop(addr: String, stats: Arc<Stats>) -> anyhow::Result<()> {
    let ch = connect(&addr).await?;
    let mut c = DeviceClient::new(ch.clone());
    let mut t = TranslatorClient::new(ch);
    const N: usize = 4096;
    let values: Vec<f64> = (0..N).map(|i| (i % 97) as f64).collect();
    let expect: Vec<f64> = values.iter().map(|v| v * 2.0).collect();
    let x = create_buffer(&mut c, (N * 4) as u64).await?;
    let chunk = WriteChunk {
        handle: x.clone(),
        data: data::encode(Dtype::F32, &values),
        ..Default::default()
    };
    status_of(c.write_buffer(tokio_stream::iter([chunk])).await).await?;
    let sealed = t
        .translate(op("Add", vec![desc(&[N as i32]), desc(&[N as i32])]))
        .await?
        .into_inner();
    anyhow::ensure!(sealed.status == 0, "Translate: {}", sealed.msg);
    let mut i = 0usize;
    while stats.running() {
        let start = Instant::now();
        let r = execute_once(&mut c, &sealed, &x, &expect, i.is_multiple_of(2)).await;
        stats.good(start.elapsed(), r);
        i += 1;
    }
    Ok(())
}

/// Replaces the elementwise plugin by a copy from a directory every `every`, alternating two
/// files, through `umd.Plugins.Load` (the hot-swap path). A refused swap is a good-request error.
async fn swap_loop(
    addr: String,
    stats: Arc<Stats>,
    dir: PathBuf,
    every: Duration,
) -> anyhow::Result<()> {
    let (_, wasm) = umd::BUNDLED_PLUGINS
        .iter()
        .find(|(name, _)| name.contains("elementwise"))
        .context("no bundled elementwise plugin to swap")?;
    let files = [
        dir.join("elementwise-a.wasm"),
        dir.join("elementwise-b.wasm"),
    ];
    for f in &files {
        std::fs::write(f, wasm).with_context(|| format!("writing {}", f.display()))?;
    }
    let mut c = PluginsClient::new(connect(&addr).await?);
    let mut i = 0usize;
    let mut next = Instant::now() + every;
    while stats.running() {
        if Instant::now() < next {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        next += every;
        let path = files[i % 2].display().to_string();
        let start = Instant::now();
        let r = c.load(LoadRequest { path: path.clone() }).await;
        let r = match r {
            Ok(r) if r.get_ref().status == 0 => Ok(()),
            Ok(r) => Err(anyhow::anyhow!("hot swap of {path}: {}", r.get_ref().msg)),
            Err(e) => Err(anyhow::anyhow!("hot swap of {path}: {e}")),
        };
        let ok = r.is_ok();
        stats.good(start.elapsed(), r);
        if ok {
            stats.window.lock().swaps += 1;
        }
        i += 1;
    }
    Ok(())
}

/// Whether a unary call was refused: a gRPC status with one of `codes`, or an answer whose
/// status field is non-zero.
fn refused<T>(
    r: Result<tonic::Response<T>, tonic::Status>,
    codes: &[Code],
    status: fn(&T) -> i32,
) -> (bool, String) {
    match r {
        Ok(r) => {
            let s = status(r.get_ref());
            (s != 0, format!("answered with status {s}"))
        }
        Err(e) => (
            codes.contains(&e.code()),
            format!("{:?}: {}", e.code(), e.message()),
        ),
    }
}

async fn hostile_loop(addr: String, stats: Arc<Stats>, max_message: usize) -> anyhow::Result<()> {
    let ch = connect(&addr).await?;
    let mut t = TranslatorClient::new(ch.clone()).max_encoding_message_size(usize::MAX);
    let mut d = DeviceClient::new(ch);
    let mut gz = TranslatorClient::new(connect(&addr).await?)
        .send_compressed(CompressionEncoding::Gzip)
        .max_encoding_message_size(usize::MAX);
    let too_big = "A".repeat(max_message + 1);
    let bomb = "A".repeat(max_message * 2);
    let tr_status = |r: &TranslateResponse| r.status;
    let ex_status = |r: &ExecuteResponse| r.status;
    let mut i = 0usize;
    while stats.running() {
        let what = [
            "oversized",
            "inflation bomb",
            "bad name",
            "long name",
            "unknown stream",
            "unknown handle",
            "unsealed command buffer",
        ][i % 7];
        let (ok, detail) = match i % 7 {
            0 => refused(
                t.translate(op(&too_big, vec![])).await,
                &[Code::OutOfRange, Code::ResourceExhausted],
                tr_status,
            ),
            1 => refused(
                gz.translate(op(&bomb, vec![])).await,
                &[Code::ResourceExhausted],
                tr_status,
            ),
            2 => refused(
                t.translate(op("No\u{0}Such\nOp", vec![desc(&[4])])).await,
                &[Code::InvalidArgument],
                tr_status,
            ),
            3 => refused(
                t.translate(op(&"Add".repeat(4000), vec![desc(&[4]), desc(&[4])]))
                    .await,
                &[Code::InvalidArgument],
                tr_status,
            ),
            4 => refused(
                d.execute(ExecuteRequest {
                    op: Some(op("Add", vec![desc(&[4]), desc(&[4])])),
                    stream: 7 + (i as u32 % 1000),
                    ..Default::default()
                })
                .await,
                &[Code::InvalidArgument, Code::NotFound],
                ex_status,
            ),
            5 => refused(
                d.execute(ExecuteRequest {
                    op: Some(op("Add", vec![desc(&[4]), desc(&[4])])),
                    inputs: vec![format!("no-such-handle-{i}"), "x".into()],
                    ..Default::default()
                })
                .await,
                &[Code::InvalidArgument, Code::NotFound],
                ex_status,
            ),
            _ => {
                let cb = umd::cmdbuf::CommandBuffer {
                    target: "cpu".into(),
                    bindings: vec![],
                    launches: vec![],
                };
                refused(
                    d.execute(ExecuteRequest {
                        command_buffer: cb.encode(),
                        ..Default::default()
                    })
                    .await,
                    &[Code::InvalidArgument, Code::PermissionDenied],
                    ex_status,
                )
            }
        };
        stats.hostile(what, ok, detail);
        i += 1;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}

/// This process's resident set, in MiB (`/proc/self/status` VmRSS).
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

pub fn run(host: Host, args: &SoakArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(soak(host, args))
}

async fn soak(host: Host, args: &SoakArgs) -> anyhow::Result<()> {
    let max_message = args.max_message_mib << 20;
    let (addr, server) = match &args.addr {
        Some(a) => (a.clone(), None),
        None => {
            let config = ServeConfig {
                log_interval: None,
                admin: true,
                max_message_bytes: max_message,
                ..Default::default()
            };
            let server = LocalServer::start(Arc::new(host), config).await?;
            (server.addr.clone(), Some(server))
        }
    };
    let stats = Arc::new(Stats {
        window: Mutex::new(Window::new()),
        stop: AtomicBool::new(false),
    });
    let dir = std::env::temp_dir().join(format!("umd-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let mut tasks = Vec::new();
    for k in 0..args.clients {
        tasks.push(tokio::spawn(translate_loop(
            addr.clone(),
            stats.clone(),
            k * 7,
        )));
        tasks.push(tokio::spawn(batch_loop(
            addr.clone(),
            stats.clone(),
            k * 13,
        )));
        tasks.push(tokio::spawn(execute_loop(addr.clone(), stats.clone())));
    }
    tasks.push(tokio::spawn(hostile_loop(
        addr.clone(),
        stats.clone(),
        max_message,
    )));
    if args.swap_secs > 0 {
        let every = Duration::from_secs(args.swap_secs);
        tasks.push(tokio::spawn(swap_loop(
            addr.clone(),
            stats.clone(),
            dir.clone(),
            every,
        )));
    }

    println!(
        "soak against {addr}: {} min, {} client(s) each of Translate / Execute / SubmitBatch, \
         hostile requests every 25 ms, a hot swap every {} s; {} s of warm-up not reported",
        args.minutes, args.clients, args.swap_secs, args.warmup_secs
    );
    tokio::time::sleep(Duration::from_secs(args.warmup_secs)).await;
    let warm = std::mem::replace(&mut *stats.window.lock(), Window::new());
    println!(
        "warm-up: {} good, {} good errors, {} hostile ({} unexpected), RSS {:.1} MiB",
        warm.good,
        warm.good_errors,
        warm.hostile,
        warm.hostile_unexpected,
        rss_mib()
    );
    for s in &warm.samples {
        println!("  {s}");
    }
    println!(
        "{:>8} {:>9} {:>8} {:>9} {:>8} {:>8} {:>9} {:>8} {:>10} {:>6}",
        "interval",
        "RSS MiB",
        "peak",
        "good",
        "p50 ms",
        "p99 ms",
        "good err",
        "hostile",
        "unexpected",
        "swaps"
    );
    let intervals = (args.minutes * 60).div_ceil(args.interval_secs);
    let mut rows = Vec::new();
    let mut total = Window::new();
    for n in 1..=intervals {
        // RSS as the mean of one sample a second: a single sample swings with the transient
        // buffers of whatever requests are in flight.
        let mut samples = Vec::new();
        let end = Instant::now() + Duration::from_secs(args.interval_secs);
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_secs(1).min(end - Instant::now())).await;
            samples.push(rss_mib());
        }
        let w = std::mem::replace(&mut *stats.window.lock(), Window::new());
        let rss = samples.iter().sum::<f64>() / samples.len() as f64;
        let peak = samples.iter().cloned().fold(0.0, f64::max);
        println!(
            "{n:>8} {rss:>9.1} {peak:>8.1} {:>9} {:>8.2} {:>8.2} {:>9} {:>8} {:>10} {:>6}",
            w.good,
            w.hist.percentile_ms(0.5),
            w.hist.percentile_ms(0.99),
            w.good_errors,
            w.hostile,
            w.hostile_unexpected,
            w.swaps
        );
        for s in &w.samples {
            println!("  {s}");
        }
        total.good += w.good;
        total.good_errors += w.good_errors;
        total.hostile += w.hostile;
        total.hostile_unexpected += w.hostile_unexpected;
        total.swaps += w.swaps;
        rows.push(rss);
    }
    stats.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        match tokio::time::timeout(Duration::from_secs(30), t).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                total.good_errors += 1;
                println!("  a client task failed: {e:#}");
            }
            Ok(Err(e)) => anyhow::bail!("a client task panicked: {e}"),
            Err(_) => anyhow::bail!("a client task did not stop within 30 s"),
        }
    }
    if let Some(server) = server {
        server.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&dir);

    let (first, last) = (rows[0], rows[rows.len() - 1]);
    let growth = (last - first) / first * 100.0;
    let flat = growth.abs() <= 10.0;
    let pass = flat && total.good_errors == 0 && total.hostile_unexpected == 0;
    println!(
        "verdict: {} — mean RSS {first:.1} MiB in the first interval, {last:.1} MiB in the last \
         ({growth:+.1} %, limit ±10 %); {} good requests, {} failed; {} hostile, {} not refused \
         as expected; {} hot swaps",
        if pass { "PASS" } else { "FAIL" },
        total.good,
        total.good_errors,
        total.hostile,
        total.hostile_unexpected,
        total.swaps
    );
    anyhow::ensure!(pass, "the soak failed");
    Ok(())
}
