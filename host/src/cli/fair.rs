//! `umd bench fair`: does one client's flood delay another client? A probe client runs small
//! Adds (Execute of `f32[16] + f32[16]`, waited for) alone, then while flooding clients keep
//! their stream's queue full of big Adds — against two in-process servers of one host: clients
//! on streams of their own (the default) and every client on one shared stream
//! (`client_streams_per_device: 1`, the service before per-client streams). Prints the probe's
//! p50/p99/max in each case and the ratios to the probe alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use tonic::transport::Channel;

use umd::Host;
use umd::service::ServeConfig;
use umd::service::proto::device_client::DeviceClient;
use umd::service::proto::translator_client::TranslatorClient;
use umd::service::proto::*;

use super::bench_client::{connect, create_buffer, desc, op};
use super::latency::Histogram;
use super::local_server::LocalServer;

#[derive(Args)]
pub struct FairArgs {
    /// Seconds of probing in each phase.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Flooding clients (each on its own connection).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    flooders: u64,
    /// Elements of each flooding Add (f32).
    #[arg(long, default_value_t = 1 << 22, value_parser = clap::value_parser!(u64).range(1..=1 << 26))]
    flood_elements: u64,
}

/// `Add` of two f32[n].
fn add(n: u64) -> TranslateRequest {
    let d = desc(&[n as i32]);
    op("Add", vec![d.clone(), d])
}

/// Keeps its own stream's queue full of big Adds until `stop`; counts what ran.
async fn flood(
    ch: Channel,
    sealed: TranslateResponse,
    n: u64,
    stop: Arc<AtomicBool>,
    submitted: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let mut c = DeviceClient::new(ch);
    let x = create_buffer(&mut c, n * 4).await?;
    let y = create_buffer(&mut c, n * 4).await?;
    while !stop.load(Ordering::Relaxed) {
        let r = c
            .execute(ExecuteRequest {
                command_buffer: sealed.command_buffer.clone(),
                seal: sealed.seal.clone(),
                inputs: vec![x.clone(), x.clone()],
                outputs: vec![y.clone()],
                ..Default::default()
            })
            .await?
            .into_inner();
        if r.status == 0 {
            submitted.fetch_add(1, Ordering::Relaxed);
        } else if r.msg.contains("resource exhausted") {
            // Its queue is full: the flood is at its most.
            tokio::time::sleep(Duration::from_millis(1)).await;
        } else {
            anyhow::bail!("flooding Execute: {}", r.msg);
        }
    }
    // Drained before the next phase starts on the same device.
    let s = c.synchronize(SyncRequest::default()).await?.into_inner();
    anyhow::ensure!(s.status == 0, "flooder Synchronize: {}", s.msg);
    Ok(())
}

/// Small Adds, one at a time, each waited for, for `secs`. A probe refused because a queue it
/// shares is full is retried; its latency counts until it ran.
async fn probe(ch: Channel, secs: u64) -> anyhow::Result<Histogram> {
    let mut c = DeviceClient::new(ch);
    let x = create_buffer(&mut c, 64).await?;
    let mut h = Histogram::new();
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let t0 = Instant::now();
        let r = loop {
            let r = c
                .execute(ExecuteRequest {
                    op: Some(add(16)),
                    inputs: vec![x.clone(), x.clone()],
                    wait: true,
                    ..Default::default()
                })
                .await?
                .into_inner();
            if r.status == 0 || !r.msg.contains("resource exhausted") {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        anyhow::ensure!(r.status == 0, "probe Execute: {}", r.msg);
        h.record(t0.elapsed());
        for handle in r.outputs {
            c.free_buffer(BufferRequest {
                handle,
                ..Default::default()
            })
            .await?;
        }
    }
    Ok(h)
}

struct Phase {
    name: &'static str,
    probe: Histogram,
    flood_per_s: f64,
}

/// One server of `host` with `streams` client streams per device: the probe alone (when
/// `flooders` is 0) or beside `flooders` flooding clients.
async fn phase(
    host: &Arc<Host>,
    name: &'static str,
    streams: usize,
    flooders: u64,
    args: &FairArgs,
) -> anyhow::Result<Phase> {
    let config = ServeConfig {
        log_interval: None,
        client_streams_per_device: streams,
        ..Default::default()
    };
    let server = LocalServer::start(host.clone(), config).await?;
    let addr = server.addr.clone();
    let dial = || connect(&addr);
    let mut t = TranslatorClient::new(dial().await?);
    let sealed = t.translate(add(args.flood_elements)).await?.into_inner();
    anyhow::ensure!(sealed.status == 0, "Translate: {}", sealed.msg);
    let stop = Arc::new(AtomicBool::new(false));
    let submitted = Arc::new(AtomicU64::new(0));
    let mut floods = Vec::new();
    for _ in 0..flooders {
        floods.push(tokio::spawn(flood(
            dial().await?,
            sealed.clone(),
            args.flood_elements,
            stop.clone(),
            submitted.clone(),
        )));
    }
    if flooders > 0 {
        // Let the floods fill their queues first.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let t0 = Instant::now();
    let before = submitted.load(Ordering::Relaxed);
    let probed = probe(dial().await?, args.seconds).await;
    let flood_per_s =
        (submitted.load(Ordering::Relaxed) - before) as f64 / t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for f in floods {
        f.await??;
    }
    server.stop().await?;
    Ok(Phase {
        name,
        probe: probed?,
        flood_per_s,
    })
}

pub fn run(host: Host, args: &FairArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let host = Arc::new(host);
    rt.block_on(async {
        println!(
            "probe: Execute f32[16] + f32[16], waited for, one at a time, {} s per phase; \
             {} flooding client(s), each keeping its queue full of f32[{}] Adds",
            args.seconds, args.flooders, args.flood_elements
        );
        let phases = [
            phase(&host, "alone", 32, 0, args).await?,
            phase(&host, "flooded, own streams", 32, args.flooders, args).await?,
            phase(&host, "flooded, one shared stream", 1, args.flooders, args).await?,
        ];
        let alone = &phases[0].probe;
        println!(
            "{:<28} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>12}",
            "phase", "probes", "p50 ms", "p99 ms", "max ms", "p50 ×alone", "p99 ×alone", "floods/s"
        );
        for p in &phases {
            let h = &p.probe;
            println!(
                "{:<28} {:>8} {:>9.3} {:>9.3} {:>9.1} {:>10.1} {:>10.1} {:>12.1}",
                p.name,
                h.count(),
                h.percentile_ms(0.5),
                h.percentile_ms(0.99),
                h.max_ms(),
                h.percentile_ms(0.5) / alone.percentile_ms(0.5),
                h.percentile_ms(0.99) / alone.percentile_ms(0.99),
                p.flood_per_s
            );
        }
        Ok(())
    })
}
