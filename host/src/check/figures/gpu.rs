//! Measuring the figures on a CUDA device: umd's own paths through the [`Device`] trait, the
//! baselines through [`CudaDevice`]'s timing helpers, on the device's default stream.
//!
//! Owns the workloads (shapes, iteration counts, bytes moved) and the arithmetic; every buffer
//! it allocates is freed, and the device's cache trimmed, before the next figure.

use std::time::{Duration, Instant};

use super::{Budget, Comparison, Figures, Throughput};
use crate::Host;
use crate::device::cuda::CudaDevice;
use crate::device::{BufferId, Device};
use crate::tensor::{Dtype, TensorDesc};
use crate::translate::{OpRequest, Translation};

const MIB: u64 = 1 << 20;

pub(super) fn measure(host: &Host, cuda: &CudaDevice, budget: Duration) -> Figures {
    let figures = Figures {
        gpu: cuda.info().to_string(),
        launch: launch_cost(host, cuda, budget),
        alloc: alloc_cost(host, cuda, budget),
        add_bandwidth: add_bandwidth(host, cuda, budget),
        matmul: matmul(host, budget),
    };
    host.device().trim();
    figures
}

/// Buffers for every binding of a translation, freed on drop.
struct Bound<'a> {
    dev: &'a dyn Device,
    ids: Vec<BufferId>,
}

impl Drop for Bound<'_> {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            let _ = self.dev.free(id);
        }
        self.dev.trim();
    }
}

fn bind<'a>(dev: &'a dyn Device, t: &Translation) -> Result<Bound<'a>, String> {
    let mut b = Bound {
        dev,
        ids: Vec::new(),
    };
    for binding in &t.cmdbuf.bindings {
        let size = binding.desc.byte_size().unwrap_or(u64::MAX);
        b.ids.push(dev.alloc(size).map_err(|e| e.to_string())?);
    }
    Ok(b)
}

fn translate(
    host: &Host,
    op: &str,
    inputs: &[&[u64]],
) -> Result<std::sync::Arc<Translation>, String> {
    let inputs = inputs
        .iter()
        .enumerate()
        .map(|(i, s)| TensorDesc::new(format!("in{i}"), s.to_vec(), Dtype::F32))
        .collect();
    host.translate(&OpRequest::new(op, inputs))
        .map_err(|e| e.to_string())
}

/// `n` submissions of `t` on the default stream, waited for.
fn submits(
    dev: &dyn Device,
    t: &Translation,
    bufs: &[BufferId],
    n: u64,
) -> Result<Duration, String> {
    let stream = dev.default_stream();
    let start = Instant::now();
    for _ in 0..n {
        dev.submit(stream, t.cmdbuf.clone(), bufs)
            .map_err(|e| e.to_string())?;
    }
    dev.synchronize(stream).map_err(|e| e.to_string())?;
    Ok(start.elapsed())
}

/// Runs `f(chunk)` until `max` iterations are done or `budget` has passed; returns the
/// iterations and the time `f` reported for them.
fn repeat(
    max: u64,
    chunk: u64,
    budget: Duration,
    mut f: impl FnMut(u64) -> Result<Duration, String>,
) -> Result<(u64, Duration), String> {
    let start = Instant::now();
    let (mut n, mut took) = (0, Duration::ZERO);
    while n < max && (n == 0 || start.elapsed() < budget) {
        let k = chunk.min(max - n).max(1);
        took += f(k)?;
        n += k;
    }
    Ok((n, took))
}

fn per_iteration(n: u64, took: Duration) -> f64 {
    took.as_secs_f64() / n.max(1) as f64
}

fn launch_cost(host: &Host, cuda: &CudaDevice, budget: Duration) -> Result<Comparison, String> {
    const N: u64 = 2000;
    let dev = &**host.device();
    let t = translate(host, "Add", &[&[256], &[256]])?;
    let bufs = bind(dev, &t)?;
    let stream = dev.default_stream();
    let bare = |n| {
        cuda.time_bare_launches(stream, &t.cmdbuf, &bufs.ids, n)
            .map_err(|e| e.to_string())
    };
    // Warm-up: the kernel is compiled and loaded by the first submission.
    submits(dev, &t, &bufs.ids, 100)?;
    bare(100)?;
    let (n_umd, umd) = repeat(N, 500, budget, |n| submits(dev, &t, &bufs.ids, n))?;
    let (n_bare, base) = repeat(N, 500, budget, bare)?;
    let (umd, base) = (
        per_iteration(n_umd, umd) * 1e6,
        per_iteration(n_bare, base) * 1e6,
    );
    Ok(Comparison {
        unit: "µs per launch",
        umd_path: "Device::submit of a translated f32 Add of 256 elements",
        umd,
        baseline_path: "cuLaunchKernel of the same kernel and parameters",
        baseline: base,
        ratio: umd / base,
        budget: Budget::RatioAtMost(1.5),
        iterations: (n_umd, n_bare),
    })
}

fn alloc_cost(host: &Host, cuda: &CudaDevice, budget: Duration) -> Result<Comparison, String> {
    const N: u64 = 2000;
    let dev = &**host.device();
    let pool = |n| -> Result<Duration, String> {
        let start = Instant::now();
        for _ in 0..n {
            let b = dev.alloc(MIB).map_err(|e| e.to_string())?;
            dev.free(b).map_err(|e| e.to_string())?;
        }
        Ok(start.elapsed())
    };
    let raw = |n| cuda.time_raw_alloc(MIB, n).map_err(|e| e.to_string());
    // Warm-up: the first allocation takes a segment; the rest are hits.
    pool(100)?;
    raw(10)?;
    let (n_pool, took_pool) = repeat(N, 500, budget, pool)?;
    let (n_raw, took_raw) = repeat(N, 100, budget, raw)?;
    let (umd, base) = (
        per_iteration(n_pool, took_pool) * 1e6,
        per_iteration(n_raw, took_raw) * 1e6,
    );
    Ok(Comparison {
        unit: "µs per alloc+free",
        umd_path: "Device::alloc + Device::free of 1 MiB (caching allocator hit)",
        umd,
        baseline_path: "cuMemAlloc + cuMemFree of 1 MiB",
        baseline: base,
        ratio: umd / base,
        // DESIGN §6: a pool hit ≤ 1 µs; applied here to the alloc+free pair.
        budget: Budget::ValueAtMost(1.0),
        iterations: (n_pool, n_raw),
    })
}

fn add_bandwidth(host: &Host, cuda: &CudaDevice, budget: Duration) -> Result<Comparison, String> {
    const BYTES: u64 = 256 * MIB;
    const ELEMENTS: u64 = BYTES / 4;
    let dev = &**host.device();
    let t = translate(host, "Add", &[&[ELEMENTS], &[ELEMENTS]])?;
    let bufs = bind(dev, &t)?;
    let (a, out) = (bufs.ids[0], bufs.ids[2]);
    let stream = dev.default_stream();
    let copy = |n| {
        cuda.time_device_copy(stream, out, a, BYTES, n)
            .map_err(|e| e.to_string())
    };
    submits(dev, &t, &bufs.ids, 3)?;
    copy(3)?;
    let (n_add, took_add) = repeat(200, 10, budget, |n| submits(dev, &t, &bufs.ids, n))?;
    let (n_copy, took_copy) = repeat(200, 10, budget, copy)?;
    let gbs = |bytes: u64, n: u64, took: Duration| (bytes * n) as f64 / took.as_secs_f64() / 1e9;
    let (umd, base) = (
        gbs(3 * BYTES, n_add, took_add),
        gbs(2 * BYTES, n_copy, took_copy),
    );
    Ok(Comparison {
        unit: "GB/s",
        umd_path: "f32 Add of two 256 MiB tensors (3 × 256 MiB moved)",
        umd,
        baseline_path: "device-to-device copy of 256 MiB (2 × 256 MiB moved)",
        baseline: base,
        ratio: umd / base,
        budget: Budget::RatioAtLeast(0.85),
        iterations: (n_add, n_copy),
    })
}

fn matmul(host: &Host, budget: Duration) -> Result<Throughput, String> {
    const N: u64 = 4096;
    let dev = &**host.device();
    let t = translate(host, "MatMul", &[&[N, N], &[N, N]])?;
    let bufs = bind(dev, &t)?;
    submits(dev, &t, &bufs.ids, 1)?;
    let (n, took) = repeat(20, 1, budget, |n| submits(dev, &t, &bufs.ids, n))?;
    let each = per_iteration(n, took);
    Ok(Throughput {
        unit: "TFLOP/s",
        value: 2.0 * (N * N * N) as f64 / each / 1e12,
        iterations: n,
        seconds_each: each,
    })
}
