//! Helpers shared by the integration tests: fixture paths, naive reference implementations
//! written independently of the plugins, and comparisons with dtype tolerances.

use std::path::PathBuf;

use umd::{Dtype, data};

/// The fixture plugin component `name` (built by this crate's build script).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("UMD_FIXTURES_DIR")).join(format!("umd_fixture_{name}.wasm"))
}

/// A directory holding only the given fixtures (tests load plugin directories).
pub fn fixture_dir(names: &[&str]) -> tempdir::TempDir {
    let dir = tempdir::TempDir::new();
    for n in names {
        std::fs::copy(fixture(n), dir.path().join(format!("{n}.wasm"))).expect("copy fixture");
    }
    dir
}

/// A minimal temporary directory (removed on drop).
pub mod tempdir {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct TempDir(PathBuf);
    static N: AtomicU64 = AtomicU64::new(0);

    impl TempDir {
        #[allow(clippy::new_without_default)]
        pub fn new() -> TempDir {
            let p = std::env::temp_dir().join(format!(
                "umd-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Rounds a computed f32 to what a dtype stores (the plugins compute narrow floats in f32).
pub fn store(dtype: Dtype, v: f64) -> f64 {
    data::decode(dtype, &data::encode(dtype, &[v]))[0]
}

/// Numpy broadcasting of shapes, written out independently of the SDK.
pub fn broadcast_shape(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let n = a.len().max(b.len());
    let get = |s: &[u64], i: usize| {
        if i + s.len() >= n {
            s[i + s.len() - n]
        } else {
            1
        }
    };
    (0..n)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Index of `out_index` (a multi-index into the broadcast shape) in an input of shape `s`.
pub fn source_index(s: &[u64], out_shape: &[u64], out_index: &[u64]) -> usize {
    let lead = out_shape.len() - s.len();
    let mut idx = 0u64;
    for (j, &d) in s.iter().enumerate() {
        let i = if d == 1 { 0 } else { out_index[lead + j] };
        idx = idx * d + i;
    }
    idx as usize
}

/// Every multi-index of a shape, row-major.
pub fn indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let n: u64 = shape.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut ix = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                ix[d] = flat % shape[d];
                flat /= shape[d];
            }
            ix
        })
        .collect()
}

/// Naive elementwise binary op with numpy broadcasting, values in f64, each result rounded
/// through f32 (as the kernels compute) and then to the dtype.
pub fn binary_ref(
    op: &str,
    dt: Dtype,
    a: &[f64],
    sa: &[u64],
    b: &[f64],
    sb: &[u64],
) -> (Vec<u64>, Vec<f64>) {
    let out = broadcast_shape(sa, sb).expect("broadcastable");
    let vals = indices(&out)
        .iter()
        .map(|ix| {
            let x = a[source_index(sa, &out, ix)];
            let y = b[source_index(sb, &out, ix)];
            if dt == Dtype::I32 {
                let (x, y) = (x as i32, y as i32);
                (match op {
                    "Add" => x.wrapping_add(y),
                    "Sub" => x.wrapping_sub(y),
                    "Mul" => x.wrapping_mul(y),
                    _ if y == 0 => 0,
                    _ => x.wrapping_div(y),
                }) as f64
            } else {
                let (x, y) = (x as f32, y as f32);
                let r = match op {
                    "Add" => x + y,
                    "Sub" => x - y,
                    "Mul" => x * y,
                    _ => x / y,
                };
                store(dt, r as f64)
            }
        })
        .collect();
    (out, vals)
}

/// Naive numpy matmul for rank ≥ 2 operands with broadcast batch dims, accumulating in f64.
pub fn matmul_ref(a: &[f64], sa: &[u64], b: &[f64], sb: &[u64]) -> (Vec<u64>, Vec<f64>) {
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let n = sb[sb.len() - 1];
    assert_eq!(k, sb[sb.len() - 2]);
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = broadcast_shape(ba, bb).expect("batch dims broadcast");
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    let mut out = Vec::new();
    for bix in indices(&batch) {
        let (oa, ob) = (
            source_index(ba, &batch, &bix),
            source_index(bb, &batch, &bix),
        );
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..k {
                    acc += a[oa * (m * k) as usize + (i * k + p) as usize]
                        * b[ob * (k * n) as usize + (p * n + j) as usize];
                }
                out.push(acc);
            }
        }
    }
    (out_shape, out)
}

/// Asserts `got` matches `want` within a relative tolerance suited to `dt`.
pub fn assert_close(what: &str, dt: Dtype, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: element count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(
            ok,
            "{what} ({dt}): element {i}: got {g}, want {w} (tolerance {tol})"
        );
    }
}

/// The ONNX bytes of a model holding `graph` and importing the default domain at opset 17
/// (IR 8): what the graph tests load.
pub fn onnx_model_bytes(graph: umd::graph::onnx::proto::GraphProto) -> Vec<u8> {
    use prost::Message;
    use umd::graph::onnx::proto as onnx;
    onnx::ModelProto {
        ir_version: Some(8),
        opset_import: vec![onnx::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}
