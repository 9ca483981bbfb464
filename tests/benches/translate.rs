//! Criterion benches: translate (cache miss and hit), resolving a module to its plugin build,
//! and plugin load (compile, artifact cache). CPU-device execution is in `cpu_device.rs`.
//!
//! Run: `cargo bench -p umd-tests --bench translate`. Figures go in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use umd::{Dtype, Host, OpRequest, TensorDesc};

fn add_request() -> OpRequest {
    let a = TensorDesc::new("a", vec![1024, 1024], Dtype::F32);
    OpRequest::new("Add", vec![a.clone(), a])
}

fn translate(c: &mut Criterion) {
    let mut g = c.benchmark_group("translate");
    let req = add_request();
    // Cache disabled: every call enters the plugin (warm instance) and validates the plan.
    let uncached = Host::builder().cache_capacity(0).build().unwrap();
    g.bench_function("add_cache_miss", |b| {
        b.iter(|| uncached.translate(black_box(&req)).unwrap())
    });
    let cached = Host::builder().build().unwrap();
    cached.translate(&req).unwrap();
    g.bench_function("add_cache_hit", |b| {
        b.iter(|| cached.translate(black_box(&req)).unwrap())
    });
    // What every launch (and every checked submit) pays to find the exact plugin build.
    let t = cached.translate(&req).unwrap();
    let module = &t.cmdbuf.launches[0].module;
    g.bench_function("resolve_build_hit", |b| {
        b.iter(|| cached.registry().resolve(black_box(module), "cpu").unwrap())
    });
    g.finish();
}

fn plugin_load(c: &mut Criterion) {
    let mut g = c.benchmark_group("plugin_load");
    g.sample_size(10);
    let wasm = umd::BUNDLED_PLUGINS
        .iter()
        .find(|(n, _)| n.contains("elementwise"))
        .unwrap()
        .1;
    let cold = Host::builder()
        .bundled_plugins(false)
        .artifact_cache(None)
        .build()
        .unwrap();
    g.bench_function("elementwise_compile", |b| {
        b.iter(|| cold.runtime().load_bytes("bench", black_box(wasm)).unwrap())
    });
    let dir = std::env::temp_dir().join(format!("umd-bench-cache-{}", std::process::id()));
    let warm = Host::builder()
        .bundled_plugins(false)
        .artifact_cache(Some(dir.clone()))
        .build()
        .unwrap();
    warm.runtime().load_bytes("bench", wasm).unwrap();
    g.bench_function("elementwise_from_artifact_cache", |b| {
        b.iter(|| warm.runtime().load_bytes("bench", black_box(wasm)).unwrap())
    });
    g.finish();
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(benches, translate, plugin_load);
criterion_main!(benches);
