//! The CPU device's core guarantees: hazards across streams (read-after-write and
//! write-after-read wait for the conflicting work, whatever stream it is on), a failing kernel
//! signals its fence with an error and work waiting on it does not hang, and a launch split
//! across worker threads computes exactly what one thread computes.

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
