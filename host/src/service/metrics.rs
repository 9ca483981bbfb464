//! The health sheet: request and error counters by op and status, a translate latency
//! histogram, and a Prometheus text endpoint that adds cache, plugin and pool figures; plus a
//! periodic log line with ops/s and p50/p99.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::Host;

/// Upper bounds of the latency buckets, in microseconds.
const BUCKETS_US: [u64; 14] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 100_000,
];

/// Most (op, status) series kept; further ones are counted under op `<other>`.
const MAX_SERIES: usize = 512;

/// Counters of the service.
#[derive(Default)]
pub struct Metrics {
    /// (op, status) → count
    requests: Mutex<HashMap<(String, i32), u64>>,
    /// One count per bucket, plus +Inf.
    latency: [AtomicU64; BUCKETS_US.len() + 1],
    latency_sum_ns: AtomicU64,
}

impl Metrics {
    /// Records one request.
    pub fn record(&self, op: &str, status: i32, took: Duration) {
        let op = if op.len() <= 64 {
            op.to_ascii_lowercase()
        } else {
            "<long>".into()
        };
        {
            // Op names come from clients: bound the label set so the map cannot grow forever.
            let mut requests = self.requests.lock();
            let fresh = !requests.contains_key(&(op.clone(), status));
            let key = if fresh && requests.len() >= MAX_SERIES {
                ("<other>".to_string(), status)
            } else {
                (op, status)
            };
            *requests.entry(key).or_default() += 1;
        }
        let us = took.as_micros() as u64;
        let bucket = BUCKETS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(BUCKETS_US.len());
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    fn counts(&self) -> Vec<u64> {
        self.latency
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// The Prometheus text exposition.
    pub fn render(&self, host: &Host) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line("# TYPE umd_requests_total counter".into());
        let mut reqs: Vec<_> = self
            .requests
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        reqs.sort();
        for ((op, status), n) in &reqs {
            let op = escape(op);
            line(format!(
                "umd_requests_total{{op=\"{op}\",status=\"{status}\"}} {n}"
            ));
        }
        line("# TYPE umd_errors_total counter".into());
        for ((op, status), n) in reqs.iter().filter(|((_, s), _)| *s != 0) {
            let op = escape(op);
            line(format!(
                "umd_errors_total{{op=\"{op}\",status=\"{status}\"}} {n}"
            ));
        }
        line("# TYPE umd_request_latency_seconds histogram".into());
        let counts = self.counts();
        let mut cumulative = 0;
        for (i, c) in counts.iter().enumerate() {
            cumulative += c;
            let le = BUCKETS_US
                .get(i)
                .map_or("+Inf".to_string(), |us| format!("{}", *us as f64 / 1e6));
            line(format!(
                "umd_request_latency_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            ));
        }
        line(format!(
            "umd_request_latency_seconds_sum {}",
            self.latency_sum_ns.load(Ordering::Relaxed) as f64 / 1e9
        ));
        line(format!("umd_request_latency_seconds_count {cumulative}"));
        let c = host.translator().cache().stats();
        line("# TYPE umd_translation_cache_hits_total counter".into());
        line(format!("umd_translation_cache_hits_total {}", c.hits));
        line(format!("umd_translation_cache_misses_total {}", c.misses));
        let ratio = if c.hits + c.misses == 0 {
            0.0
        } else {
            c.hits as f64 / (c.hits + c.misses) as f64
        };
        line(format!("umd_translation_cache_hit_ratio {ratio}"));
        line(format!("umd_translation_cache_entries {}", c.entries));
        line("# TYPE umd_plugin_faults_total counter".into());
        for p in host.registry().snapshot().plugins() {
            let label = escape(p.label());
            line(format!(
                "umd_plugin_faults_total{{plugin=\"{label}\"}} {}",
                p.faults()
            ));
            line(format!(
                "umd_plugin_calls_total{{plugin=\"{label}\"}} {}",
                p.calls()
            ));
        }
        line("# TYPE umd_plugin_refused gauge".into());
        for p in host.plugin_status().iter().filter(|p| p.status.is_err()) {
            line(format!(
                "umd_plugin_refused{{origin=\"{}\"}} 1",
                escape(&p.origin)
            ));
        }
        // One group per metric (the text format wants a family's lines together).
        let pools: Vec<_> = host
            .devices()
            .iter()
            .map(|d| (escape(d.name()), d.pool_stats()))
            .collect();
        type Field = fn(&crate::device::PoolStats) -> u64;
        let fields: [(&str, Field); 3] = [
            ("in_use", |s| s.allocated_bytes),
            ("cached", |s| s.cached_bytes),
            ("peak", |s| s.peak_bytes),
        ];
        for (name, value) in fields {
            for (dev, s) in &pools {
                line(format!(
                    "umd_pool_bytes_{name}{{device=\"{dev}\"}} {}",
                    value(s)
                ));
            }
        }
        out
    }
}

/// A label value as the Prometheus text format wants it: `\\`, `"` and newlines escaped, so a
/// client-chosen op name or a plugin file name cannot end the label and inject a series.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The quantile `q` of a bucket histogram, as the upper bound of the bucket it falls in (µs).
fn quantile_us(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil() as u64;
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(*BUCKETS_US.get(i).unwrap_or(&u64::MAX));
        }
    }
    None
}

/// Logs ops/s and p50/p99 (bucket upper bounds) over each interval.
pub async fn log_periodically(metrics: Arc<Metrics>, every: Duration) {
    let mut last = metrics.counts();
    let mut since = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = metrics.counts();
        let delta: Vec<u64> = now.iter().zip(&last).map(|(a, b)| a - b).collect();
        let n: u64 = delta.iter().sum();
        if n > 0 {
            let secs = since.elapsed().as_secs_f64();
            tracing::info!(
                ops_per_s = format!("{:.1}", n as f64 / secs),
                p50_us_le = quantile_us(&delta, 0.5),
                p99_us_le = quantile_us(&delta, 0.99),
                "requests"
            );
        }
        last = now;
        since = Instant::now();
    }
}

/// Answers every HTTP request on `listener` with the metrics text.
///
/// At most [`MAX_SCRAPES`] connections are served at once, each for at most 10 s. When `accept`
/// fails (out of file descriptors) the loop backs off, up to a second, instead of spinning.
pub async fn serve_http(listener: TcpListener, host: Arc<Host>, metrics: Arc<Metrics>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_SCRAPES));
    let mut backoff = Duration::from_millis(5);
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut conn = match listener.accept().await {
            Ok((conn, _)) => {
                backoff = Duration::from_millis(5);
                conn
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "metrics: accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let (host, metrics) = (host.clone(), metrics.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let _ = tokio::time::timeout(Duration::from_secs(10), async {
                let mut buf = [0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await;
                let body = metrics.render(&host);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(body.as_bytes()).await;
            })
            .await;
        });
    }
}

/// Metrics connections served at once.
const MAX_SCRAPES: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("add"), "add");
        assert_eq!(escape("a\"} 1\nfake{x=\"\\"), "a\\\"} 1\\nfake{x=\\\"\\\\");
    }

    #[test]
    fn quantiles_come_from_buckets() {
        let m = Metrics::default();
        for _ in 0..98 {
            m.record("Add", 0, Duration::from_micros(3));
        }
        m.record("Add", 2, Duration::from_micros(700));
        m.record("Add", 2, Duration::from_micros(700));
        let c = m.counts();
        assert_eq!(quantile_us(&c, 0.5), Some(5));
        assert_eq!(quantile_us(&c, 0.99), Some(1000));
        assert_eq!(m.requests.lock()[&("add".to_string(), 2)], 2);
        for i in 0..2 * MAX_SERIES {
            m.record(&format!("op{i}"), 2, Duration::from_micros(1));
        }
        let requests = m.requests.lock();
        assert!(
            requests.len() <= MAX_SERIES + 1,
            "bounded: {}",
            requests.len()
        );
        assert!(requests[&("<other>".to_string(), 2)] > 0);
    }
}
