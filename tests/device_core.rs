//! The CPU device's core guarantees: hazards across streams (read-after-write and
//! write-after-read wait for the conflicting work, whatever stream it is on), a failing kernel
//! signals its fence with an error and work waiting on it does not hang, a launch split
//! across worker threads computes exactly what one thread computes, and a launch whose
//! parameters lie fails alone.

use umd::device::BufferId;
use umd::{Dtype, Host, OpRequest, TensorDesc, data};
use umd_tests::{fixture_dir, tempdir::TempDir};

fn desc(shape: &[u64]) -> TensorDesc {
    TensorDesc::new("x", shape.to_vec(), Dtype::F32)
}

fn filled(host: &Host, shape: &[u64], f: impl Fn(usize) -> f64) -> (BufferId, Vec<f64>) {
    let n = shape.iter().product::<u64>() as usize;
    let v: Vec<f64> = (0..n).map(f).collect();
    let b = host.alloc(&desc(shape)).unwrap();
    host.write(b, &data::encode(Dtype::F32, &v)).unwrap();
    (b, v)
}

fn values(host: &Host, b: BufferId) -> Vec<f64> {
    data::decode(Dtype::F32, &host.read(b).unwrap())
}

/// `a (m×k) · b (k×n)` in f64.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for kk in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + kk] * b[kk * n + j];
            }
        }
    }
    c
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-3 * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// A MatMul slow enough (hundreds of milliseconds in a debug test build) that a later
/// submission on another stream would overtake it if nothing made it wait.
const M: u64 = 384;

#[test]
fn work_on_another_stream_waits_for_the_writer_it_reads() {
    let host = Host::builder().build().unwrap();
    let dev = host.device();
    let (s1, s2) = (dev.create_stream().unwrap(), dev.create_stream().unwrap());
    let (a, av) = filled(&host, &[M, M], |i| ((i % 13) as f64) * 0.25);
    let (b, bv) = filled(&host, &[M, M], |i| ((i % 7) as f64) - 3.0);
    let c = host.alloc(&desc(&[M, M])).unwrap();
    let d = host.alloc(&desc(&[M, M])).unwrap();
    let mm = host
        .translate(&OpRequest::new(
            "MatMul",
            vec![desc(&[M, M]), desc(&[M, M])],
        ))
        .unwrap();
    let add = host
        .translate(&OpRequest::new("Add", vec![desc(&[M, M]), desc(&[M, M])]))
        .unwrap();
    // s1 writes C (slowly); s2 reads C: read-after-write across streams.
    let f1 = host.execute(&mm, &[a, b, c], s1).unwrap();
    let f2 = host.execute(&add, &[c, c, d], s2).unwrap();
    f2.wait().unwrap();
    assert!(
        f1.is_done(),
        "the reader finished before the writer it depends on"
    );
    let want: Vec<f64> = matmul(&av, &bv, M as usize, M as usize, M as usize)
        .into_iter()
        .map(|x| 2.0 * x)
        .collect();
    close(&values(&host, d), &want, "D = 2·(A·B)");
}

#[test]
fn a_writer_on_another_stream_waits_for_earlier_readers() {
    let host = Host::builder().build().unwrap();
    let dev = host.device();
    let (s1, s2) = (dev.create_stream().unwrap(), dev.create_stream().unwrap());
    let (a, av) = filled(&host, &[M, M], |i| ((i % 5) as f64) + 1.0);
    let (b, bv) = filled(&host, &[M, M], |i| ((i % 3) as f64) - 1.0);
    let c = host.alloc(&desc(&[M, M])).unwrap();
    let mm = host
        .translate(&OpRequest::new(
            "MatMul",
            vec![desc(&[M, M]), desc(&[M, M])],
        ))
        .unwrap();
    let add = host
        .translate(&OpRequest::new("Add", vec![desc(&[M, M]), desc(&[M, M])]))
        .unwrap();
    // s1 reads A (slowly); s2 overwrites A with B + B: write-after-read across streams.
    let f1 = host.execute(&mm, &[a, b, c], s1).unwrap();
    let f2 = host.execute(&add, &[b, b, a], s2).unwrap();
    f2.wait().unwrap();
    f1.wait().unwrap();
    close(
        &values(&host, c),
        &matmul(&av, &bv, M as usize, M as usize, M as usize),
        "C = A_old·B",
    );
    let doubled: Vec<f64> = bv.iter().map(|x| 2.0 * x).collect();
    close(&values(&host, a), &doubled, "A = B + B");
}

#[test]
fn work_waiting_on_a_failed_kernel_runs_and_the_failure_reaches_its_submitter() {
    let dir: TempDir = fixture_dir(&["panicky"]);
    let host = Host::builder().plugin_dir(dir.path()).build().unwrap();
    let dev = host.device();
    let (s1, s2) = (dev.create_stream().unwrap(), dev.create_stream().unwrap());
    let bad = host
        .translate(&OpRequest::new("PanicKernel", vec![desc(&[1])]))
        .unwrap();
    let (x, _) = filled(&host, &[1], |i| i as f64);
    let y = host.alloc(&bad.outputs[0]).unwrap();
    let f1 = host.execute(&bad, &[x, y], s1).unwrap();
    // s2 reads what the failed launch was to write: it must not hang.
    let add = host
        .translate(&OpRequest::new("Add", vec![desc(&[1]), desc(&[1])]))
        .unwrap();
    let z = host.alloc(&desc(&[1])).unwrap();
    let f2 = host.execute(&add, &[x, x, z], s2).unwrap();
    let f3 = host.execute(&add, &[y, x, z], s2).unwrap();
    let err = f1.wait().unwrap_err().to_string();
    assert!(err.contains("kernel boom"), "{err}");
    f2.wait().unwrap();
    f3.wait().unwrap();
}

#[test]
fn a_launch_split_across_workers_matches_one_worker() {
    let n: u64 = (1 << 20) + 3;
    let mut outs = Vec::new();
    for threads in [1, 2, 3] {
        let host = Host::builder().cpu_threads(threads).build().unwrap();
        let (a, _) = filled(&host, &[n], |i| (i % 1000) as f64 * 0.5);
        let (b, _) = filled(&host, &[n], |i| -((i % 7) as f64));
        let c = host.alloc(&desc(&[n])).unwrap();
        let t = host
            .translate(&OpRequest::new("Add", vec![desc(&[n]), desc(&[n])]))
            .unwrap();
        // The first launch of a kernel runs whole and is timed; later ones are split by it.
        for _ in 0..3 {
            host.execute(&t, &[a, b, c], host.device().default_stream())
                .unwrap()
                .wait()
                .unwrap();
        }
        outs.push(host.read(c).unwrap());
    }
    let want: Vec<f64> = (0..n as usize)
        .map(|i| (i % 1000) as f64 * 0.5 - (i % 7) as f64)
        .collect();
    assert_eq!(data::decode(Dtype::F32, &outs[0]), want);
    assert!(outs.iter().all(|o| *o == outs[0]));
}

#[test]
fn reused_memory_never_shows_another_owners_data() {
    let host = Host::builder().build().unwrap();
    let dev = host.device();
    let first = dev.alloc(4096).unwrap();
    dev.write(first, 0, &[0xA5; 4096]).unwrap();
    dev.free(first).unwrap();
    let hits = dev.pool_stats().hits;
    let second = dev.alloc(4000).unwrap();
    assert!(
        dev.pool_stats().hits > hits,
        "the freed block was reused (else this test shows nothing)"
    );
    assert!(dev.read(second, 0, 4000).unwrap().iter().all(|&b| b == 0));
}

/// A TreeEnsembleClassifier of two one-split trees on 2 features.
fn forest_request(rows: u64) -> OpRequest {
    use umd::AttrValue::{Floats, Ints, Texts};
    let mut r = OpRequest::new(
        "TreeEnsembleClassifier",
        vec![TensorDesc::new("X", vec![rows, 2], Dtype::F32)],
    )
    .attr("nodes_treeids", Ints(vec![0, 0, 0, 1, 1, 1]))
    .attr("nodes_nodeids", Ints(vec![0, 1, 2, 0, 1, 2]))
    .attr("nodes_featureids", Ints(vec![0, 0, 0, 1, 0, 0]))
    .attr("nodes_values", Floats(vec![0.5, 0.0, 0.0, -0.25, 0.0, 0.0]))
    .attr(
        "nodes_modes",
        Texts(
            ["BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"]
                .map(String::from)
                .to_vec(),
        ),
    )
    .attr("nodes_truenodeids", Ints(vec![1, 0, 0, 1, 0, 0]))
    .attr("nodes_falsenodeids", Ints(vec![2, 0, 0, 2, 0, 0]))
    .attr("class_treeids", Ints(vec![0, 0, 1, 1]))
    .attr("class_nodeids", Ints(vec![1, 2, 1, 2]))
    .attr("class_ids", Ints(vec![0, 1, 1, 0]))
    .attr("class_weights", Floats(vec![1.0, 1.0, 0.5, 0.5]))
    .attr("classlabels_int64s", Ints(vec![3, 4]));
    r.domain = "ai.onnx.ml".into();
    r
}

#[test]
fn hostile_scorer_parameters_fail_their_launch_only() {
    // The forest kernel decodes its table and sizes its buffers from the launch's parameters:
    // a command buffer whose parameters lie (any count or offset set to 0, 3, 2^33 or 2^64-1)
    // must fail or finish that launch — never panic the host or wedge the stream — and the
    // honest translation must still compute the same scores afterwards.
    let host = Host::builder().build().unwrap();
    // 600 rows run as one `run-cpu` call, 70 000 (over 1 MiB bound) in place
    for rows in [600u64, 70_000] {
        hostile_forest_runs(&host, rows);
    }
}

fn hostile_forest_runs(host: &Host, rows: u64) {
    let t = host.translate(&forest_request(rows)).unwrap();
    let (x, _) = filled(host, &[rows, 2], |i| ((i * 37) % 11) as f64 / 5.0 - 1.0);
    let outs: Vec<BufferId> = t.outputs.iter().map(|d| host.alloc(d).unwrap()).collect();
    // then the workspace (the forest's table), the last binding
    let ws = t.cmdbuf.bindings.last().unwrap().desc.clone();
    let ws = host.alloc(&ws).unwrap();
    let binds: Vec<BufferId> = std::iter::once(x)
        .chain(outs.iter().copied())
        .chain([ws])
        .collect();
    let stream = host.device().default_stream();
    let run = |cmdbuf: std::sync::Arc<umd::cmdbuf::CommandBuffer>| {
        let u = umd::Translation {
            cmdbuf,
            bytes: t.bytes.clone(),
            outputs: t.outputs.clone(),
            plugin: t.plugin.clone(),
            kernel_name: t.kernel_name.clone(),
            generation: t.generation,
            setup_launches: t.setup_launches,
            planner: t.planner.clone(),
        };
        host.execute_wait(&u, &binds, stream)
    };
    run(t.cmdbuf.clone()).unwrap();
    let read = |b: BufferId| host.read(b).unwrap();
    let want: Vec<Vec<u8>> = outs.iter().map(|&b| read(b)).collect();
    let last = t.cmdbuf.launches.len() - 1;
    let l = &t.cmdbuf.launches[last];
    assert!(
        l.entry_point.starts_with("forest_cls_"),
        "{}",
        l.entry_point
    );
    let pointers: Vec<usize> = l.relocations.iter().map(|r| r.offset as usize).collect();
    let (mut failed, mut tried) = (0, 0);
    // the u64 counts and offsets after the pointers, up to (not including) max_steps
    for off in (0..l.params.len().saturating_sub(8))
        .step_by(8)
        .filter(|o| !pointers.contains(o))
        .take(9)
    {
        for v in [0u64, 3, 1 << 33, u64::MAX] {
            let mut cmd = (*t.cmdbuf).clone();
            cmd.launches[last].params[off..off + 8].copy_from_slice(&v.to_le_bytes());
            tried += 1;
            failed += run(std::sync::Arc::new(cmd)).is_err() as usize;
        }
    }
    assert_eq!(tried, 36);
    assert!(failed > 0, "some lies are caught");
    run(t.cmdbuf.clone()).unwrap();
    for (b, w) in outs.iter().zip(&want) {
        assert_eq!(&read(*b), w, "the honest launch after the hostile ones");
    }
}
