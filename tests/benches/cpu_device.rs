//! The CPU device against native Rust in the same run: Add f32 (a native loop; flat and a
//! broadcast bias), MatMul f32
//! (ndarray's `general_mat_mul`, i.e. the matrixmultiply crate) and the demo MLP, each on umd
//! in place (ABI 1.3, the default), and through `run-cpu` whole-buffer copies on one thread
//! (the 1.0–1.2 execution model).
//!
//! Run: `MATMUL_NUM_THREADS=2 cargo bench -p umd-tests --bench cpu_device` — umd's CPU device
//! gets the same number of worker threads as the native baseline, which splits the rows of
//! its product between that many threads (default 1). Figures go in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ndarray::Array2;
use umd::device::BufferId;
use umd::{Dtype, Host, OpRequest, TensorDesc, data};

/// Worker threads of both sides (`MATMUL_NUM_THREADS`, default 1).
fn threads() -> usize {
    std::env::var("MATMUL_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// The configurations compared: in place on `threads()` workers, and copying on one.
fn hosts() -> Vec<(String, Host)> {
    let t = threads();
    vec![
        (
            format!("umd_in_place_{t}_threads"),
            Host::builder().cpu_threads(t).build().unwrap(),
        ),
        (
            "umd_copying_1_thread".into(),
            Host::builder()
                .cpu_threads(1)
                .cpu_in_place(false)
                .build()
                .unwrap(),
        ),
    ]
}

fn f32d(shape: &[u64]) -> TensorDesc {
    TensorDesc::new("x", shape.to_vec(), Dtype::F32)
}

fn upload(host: &Host, shape: &[u64], seed: u64) -> BufferId {
    let n = shape.iter().product::<u64>() as usize;
    let b = host.alloc(&f32d(shape)).unwrap();
    host.write(
        b,
        &data::encode(Dtype::F32, &data::random(Dtype::F32, n, seed)),
    )
    .unwrap();
    b
}

/// Times `op` on `host` over freshly uploaded inputs (translation cached, not timed).
fn bench_op(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    host: &Host,
    op: &str,
    shapes: &[&[u64]],
) {
    let t = host
        .translate(&OpRequest::new(
            op,
            shapes.iter().map(|s| f32d(s)).collect(),
        ))
        .unwrap();
    let mut bufs: Vec<BufferId> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| upload(host, s, i as u64))
        .collect();
    bufs.push(host.alloc(&t.outputs[0]).unwrap());
    let stream = host.device().default_stream();
    g.bench_function(name, |b| {
        b.iter(|| host.execute(&t, &bufs, stream).unwrap().wait().unwrap())
    });
    // The same launch submitted and waited for in one call: on the caller's thread.
    g.bench_function(format!("{name}_execute_wait"), |b| {
        b.iter(|| host.execute_wait(&t, &bufs, stream).unwrap())
    });
    for id in bufs {
        host.free(id).unwrap();
    }
}

fn add(c: &mut Criterion) {
    let hosts = hosts();
    // 16 elements: the fixed cost of a launch (its work is nothing)
    for n in [16usize, 1 << 16, 1 << 20, 1 << 24] {
        let mut g = c.benchmark_group(format!("add_f32_{n}"));
        g.throughput(Throughput::Bytes((n * 12) as u64));
        g.sample_size(if n > 1 << 20 { 10 } else { 30 });
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| (n - i) as f32).collect();
        let mut out = vec![0f32; n];
        g.bench_function("native_rust", |bench| {
            bench.iter(|| {
                for ((o, x), y) in out.iter_mut().zip(&a).zip(&b) {
                    *o = x + y;
                }
                black_box(&mut out);
            })
        });
        for (name, host) in &hosts {
            bench_op(&mut g, name, host, "Add", &[&[n as u64], &[n as u64]]);
        }
        g.finish();
    }
}

/// A bias Add: `[rows, 1024] + [1024]` (a broadcast launch), against a native loop.
fn add_bias(c: &mut Criterion) {
    let hosts = hosts();
    let cols = 1024usize;
    for rows in [64usize, 4096] {
        let n = rows * cols;
        let mut g = c.benchmark_group(format!("add_bias_f32_{rows}x{cols}"));
        g.throughput(Throughput::Bytes((n * 8 + cols * 4) as u64));
        g.sample_size(if n > 1 << 20 { 10 } else { 30 });
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let bias: Vec<f32> = (0..cols).map(|i| i as f32 * 0.5).collect();
        let mut out = vec![0f32; n];
        g.bench_function("native_rust", |bench| {
            bench.iter(|| {
                for (o_row, a_row) in out.chunks_exact_mut(cols).zip(a.chunks_exact(cols)) {
                    for ((o, x), y) in o_row.iter_mut().zip(a_row).zip(&bias) {
                        *o = x + y;
                    }
                }
                black_box(&mut out);
            })
        });
        for (name, host) in &hosts {
            bench_op(
                &mut g,
                name,
                host,
                "Add",
                &[&[rows as u64, cols as u64], &[cols as u64]],
            );
        }
        g.finish();
    }
}

fn matmul(c: &mut Criterion) {
    let hosts = hosts();
    for n in [512usize, 1024] {
        let mut g = c.benchmark_group(format!("matmul_f32_{n}"));
        g.throughput(Throughput::Elements((2 * n * n * n) as u64));
        g.sample_size(10);
        let a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j) % 13) as f32 * 0.1);
        let b = Array2::from_shape_fn((n, n), |(i, j)| ((i + 3 * j) % 11) as f32 * 0.1);
        let mut out = Array2::<f32>::zeros((n, n));
        g.bench_function(format!("matrixmultiply_{}_threads", threads()), |bench| {
            let rows = n.div_ceil(threads());
            bench.iter(|| {
                // one share of A's and the output's rows per thread
                std::thread::scope(|s| {
                    for (a, mut out) in a
                        .axis_chunks_iter(ndarray::Axis(0), rows)
                        .zip(out.axis_chunks_iter_mut(ndarray::Axis(0), rows))
                    {
                        let b = &b;
                        s.spawn(move || {
                            ndarray::linalg::general_mat_mul(1.0, &a, b, 0.0, &mut out)
                        });
                    }
                });
                black_box(&mut out);
            })
        });
        let s = [n as u64, n as u64];
        for (name, host) in &hosts {
            bench_op(&mut g, name, host, "MatMul", &[&s, &s]);
        }
        g.finish();
    }
}

/// `umd demo`'s MLP (64×256 → 512 → 10: MatMul, Add bias, Relu, MatMul), buffers staying on
/// the device, one wait at the end.
fn mlp(c: &mut Criterion) {
    let mut g = c.benchmark_group("mlp_demo");
    g.sample_size(20);
    for (name, host) in &hosts() {
        let (b, i, h, o) = (64u64, 256u64, 512u64, 10u64);
        let x = upload(host, &[b, i], 1);
        let w1 = upload(host, &[i, h], 2);
        let b1 = upload(host, &[h], 3);
        let w2 = upload(host, &[h, o], 4);
        let tr = |op: &str, shapes: &[&[u64]]| {
            host.translate(&OpRequest::new(
                op,
                shapes.iter().map(|s| f32d(s)).collect(),
            ))
            .unwrap()
        };
        let mm1 = tr("MatMul", &[&[b, i], &[i, h]]);
        let bias = tr("Add", &[&[b, h], &[h]]);
        let relu = tr("Relu", &[&[b, h]]);
        let mm2 = tr("MatMul", &[&[b, h], &[h, o]]);
        let hid = host.alloc(&f32d(&[b, h])).unwrap();
        let act = host.alloc(&f32d(&[b, h])).unwrap();
        let act2 = host.alloc(&f32d(&[b, h])).unwrap();
        let y = host.alloc(&f32d(&[b, o])).unwrap();
        let s = host.device().default_stream();
        g.bench_function(name.as_str(), |bench| {
            bench.iter(|| {
                host.execute(&mm1, &[x, w1, hid], s).unwrap();
                host.execute(&bias, &[hid, b1, act], s).unwrap();
                host.execute(&relu, &[act, act2], s).unwrap();
                host.execute(&mm2, &[act2, w2, y], s)
                    .unwrap()
                    .wait()
                    .unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, add, add_bias, matmul, mlp);
criterion_main!(benches);
