//! One op per plugin family on the CPU device against a plain native Rust loop computing the same
//! result, in the same run (the baseline). Prints a Markdown table for BENCHMARKS.md.
//!
//! Run: `cargo bench -p umd-tests --bench families` (release). Each figure is the median of
//! `RUNS` timed runs after one warm-up; umd's time is execute + wait on buffers allocated and
//! written beforehand (translation is cached and not timed).
//!
//! `cargo bench -p umd-tests --bench families -- FILTER` runs only the in-place tables, the
//! rows whose label contains FILTER (`-- all`: every row): the `shape` plugin's hot data
//! movement, and the reduce and gather rows, each op against the native loop, on the CPU device
//! in place (ABI 1.3 kernels split across the device's workers, and on one thread for reduce and
//! gather) and copying (`cpu_in_place(false)`: every launch through `run-cpu`, whole buffers,
//! one thread).

use std::time::{Duration, Instant};

use umd::{Dtype, Host, OpRequest, TensorDesc, data};

const RUNS: usize = 15;

fn median(mut f: impl FnMut()) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[RUNS / 2]
}

fn f32s(n: usize, seed: u64) -> Vec<f32> {
    data::random(Dtype::F32, n, seed)
        .into_iter()
        .map(|x| x as f32)
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Times `req` on the CPU device with `inputs` (bytes per present input).
fn umd_time(host: &Host, req: OpRequest, inputs: &[Vec<u8>]) -> Duration {
    let mut req = req;
    host.translator()
        .fill_values(&mut req, |i, _| Ok::<_, umd::Error>(inputs[i].clone()))
        .unwrap();
    let t = host.translate(&req).unwrap();
    let mut bufs = Vec::new();
    for (d, data) in req.inputs.iter().zip(inputs) {
        let b = host.alloc(d).unwrap();
        host.write(b, data).unwrap();
        bufs.push(b);
    }
    // outputs, then the plan's workspace when it has one
    for b in &t.cmdbuf.bindings[req.inputs.len()..] {
        bufs.push(host.alloc(&b.desc).unwrap());
    }
    let stream = host.device().default_stream();
    median(|| host.execute(&t, &bufs, stream).unwrap().wait().unwrap())
}

fn t(shape: &[u64]) -> TensorDesc {
    TensorDesc::new("x", shape.to_vec(), Dtype::F32)
}

fn row(family: &str, what: &str, umd: Duration, native: Duration) {
    println!(
        "| {family} | {what} | {:.3} ms | {:.3} ms | {:.2}× |",
        umd.as_secs_f64() * 1e3,
        native.as_secs_f64() * 1e3,
        umd.as_secs_f64() / native.as_secs_f64()
    );
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .filter(|a| !a.is_empty());
    if let Some(f) = filter {
        let f = if f == "all" { String::new() } else { f };
        shape_in_place(&f);
        in_place_rows(&f);
        return;
    }
    let host = Host::builder().build().unwrap();
    println!("| family | op | umd CPU device | native Rust loop | ratio |");
    println!("| --- | --- | --- | --- | --- |");

    // unary: Exp f32[1Mi]
    let n = 1 << 20;
    let x = f32s(n, 1);
    let mut out = vec![0f32; n];
    let native = median(|| {
        for (o, v) in out.iter_mut().zip(&x) {
            *o = v.exp();
        }
        std::hint::black_box(&mut out);
    });
    let u = umd_time(
        &host,
        OpRequest::new("Exp", vec![t(&[n as u64])]),
        &[bytes(&x)],
    );
    row("unary", "Exp f32[1Mi]", u, native);

    // elementwise: Add f32[1024,1024] + f32[1024] (bias broadcast)
    let (r, c) = (1024usize, 1024usize);
    let a = f32s(r * c, 2);
    let b = f32s(c, 3);
    let mut out = vec![0f32; r * c];
    let native = median(|| {
        for (orow, arow) in out.chunks_exact_mut(c).zip(a.chunks_exact(c)) {
            for ((o, x), y) in orow.iter_mut().zip(arow).zip(&b) {
                *o = x + y;
            }
        }
        std::hint::black_box(&mut out);
    });
    let req = OpRequest::new("Add", vec![t(&[r as u64, c as u64]), t(&[c as u64])]);
    let u = umd_time(&host, req, &[bytes(&a), bytes(&b)]);
    row("elementwise", "Add f32[1024,1024]+f32[1024]", u, native);

    // reduce: ReduceSum over the last axis of f32[1024,1024]
    let mut out = vec![0f32; r];
    let native = median(|| {
        for (o, arow) in out.iter_mut().zip(a.chunks_exact(c)) {
            *o = arow.iter().sum();
        }
        std::hint::black_box(&mut out);
    });
    let axes = TensorDesc::new("axes", vec![1], Dtype::I64);
    let mut req = OpRequest::new("ReduceSum", vec![t(&[r as u64, c as u64]), axes]);
    req.opset = 13;
    let u = umd_time(&host, req, &[bytes(&a), 1i64.to_le_bytes().to_vec()]);
    row("reduce", "ReduceSum f32[1024,1024] axis 1", u, native);

    // norm: Softmax over the last axis of f32[1024,1024]
    let mut out = vec![0f32; r * c];
    let native = median(|| {
        for (orow, arow) in out.chunks_exact_mut(c).zip(a.chunks_exact(c)) {
            let m = arow.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut s = 0.0;
            for (o, x) in orow.iter_mut().zip(arow) {
                *o = (x - m).exp();
                s += *o;
            }
            for o in orow.iter_mut() {
                *o /= s;
            }
        }
        std::hint::black_box(&mut out);
    });
    let u = umd_time(
        &host,
        OpRequest::new("Softmax", vec![t(&[r as u64, c as u64])]),
        &[bytes(&a)],
    );
    row("norm", "Softmax f32[1024,1024] axis -1", u, native);

    // norm: LayerNormalization over the last axis of f32[1024,1024] with Scale and B
    let (scale, bias) = (f32s(c, 9), f32s(c, 10));
    let native = median(|| {
        for (orow, arow) in out.chunks_exact_mut(c).zip(a.chunks_exact(c)) {
            let mean = arow.iter().sum::<f32>() / c as f32;
            let var = arow.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / c as f32;
            let inv = 1.0 / (var + 1e-5).sqrt();
            for (((o, x), s), b) in orow.iter_mut().zip(arow).zip(&scale).zip(&bias) {
                *o = (x - mean) * inv * s + b;
            }
        }
        std::hint::black_box(&mut out);
    });
    let vec_c = t(&[c as u64]);
    let u = umd_time(
        &host,
        OpRequest::new(
            "LayerNormalization",
            vec![t(&[r as u64, c as u64]), vec_c.clone(), vec_c],
        ),
        &[bytes(&a), bytes(&scale), bytes(&bias)],
    );
    row(
        "norm",
        "LayerNormalization f32[1024,1024] axis -1",
        u,
        native,
    );

    // matmul: f32 256x256 @ 256x256 (native: i-k-j loop, auto-vectorized; not a GEMM crate)
    let m = 256usize;
    let ma = f32s(m * m, 4);
    let mb = f32s(m * m, 5);
    let mut out = vec![0f32; m * m];
    let native = median(|| {
        out.iter_mut().for_each(|o| *o = 0.0);
        for i in 0..m {
            for k in 0..m {
                let av = ma[i * m + k];
                let brow = &mb[k * m..(k + 1) * m];
                for (o, bv) in out[i * m..(i + 1) * m].iter_mut().zip(brow) {
                    *o += av * bv;
                }
            }
        }
        std::hint::black_box(&mut out);
    });
    let sq = t(&[m as u64, m as u64]);
    let u = umd_time(
        &host,
        OpRequest::new("MatMul", vec![sq.clone(), sq]),
        &[bytes(&ma), bytes(&mb)],
    );
    row("matmul", "MatMul f32 256³", u, native);

    // conv: f32 N1 C32 28x28, 32 filters 3x3, pad 1 (native: direct loops)
    let (ch, hw, k) = (32usize, 28usize, 3usize);
    let x = f32s(ch * hw * hw, 6);
    let w = f32s(ch * ch * k * k, 7);
    let mut out = vec![0f32; ch * hw * hw];
    let native = median(|| {
        out.iter_mut().for_each(|o| *o = 0.0);
        for oc in 0..ch {
            for ic in 0..ch {
                for ky in 0..k {
                    for kx in 0..k {
                        let wv = w[((oc * ch + ic) * k + ky) * k + kx];
                        for oy in 0..hw {
                            let iy = oy as isize + ky as isize - 1;
                            if iy < 0 || iy >= hw as isize {
                                continue;
                            }
                            for ox in 0..hw {
                                let ix = ox as isize + kx as isize - 1;
                                if ix < 0 || ix >= hw as isize {
                                    continue;
                                }
                                out[(oc * hw + oy) * hw + ox] +=
                                    wv * x[(ic * hw + iy as usize) * hw + ix as usize];
                            }
                        }
                    }
                }
            }
        }
        std::hint::black_box(&mut out);
    });
    let req = OpRequest::new(
        "Conv",
        vec![
            t(&[1, ch as u64, hw as u64, hw as u64]),
            t(&[ch as u64, ch as u64, k as u64, k as u64]),
        ],
    )
    .attr("pads", umd::AttrValue::Ints(vec![1, 1, 1, 1]));
    let u = umd_time(&host, req, &[bytes(&x), bytes(&w)]);
    row("conv", "Conv f32 1×32×28×28, 32×3×3, pad 1", u, native);

    // shape: Transpose f32[1024,1024]
    let mut out = vec![0f32; r * c];
    let native = median(|| {
        for i in 0..r {
            for j in 0..c {
                out[j * r + i] = a[i * c + j];
            }
        }
        std::hint::black_box(&mut out);
    });
    let u = umd_time(
        &host,
        OpRequest::new("Transpose", vec![t(&[r as u64, c as u64])]),
        &[bytes(&a)],
    );
    row("shape", "Transpose f32[1024,1024]", u, native);

    // gather: Gather rows of f32[16384,128] by 4096 i64 indices
    let (rows, width, picks) = (16384usize, 128usize, 4096usize);
    let table = f32s(rows * width, 8);
    let idx: Vec<i64> = (0..picks).map(|i| ((i * 7919) % rows) as i64).collect();
    let mut out = vec![0f32; picks * width];
    let native = median(|| {
        for (orow, &i) in out.chunks_exact_mut(width).zip(&idx) {
            orow.copy_from_slice(&table[i as usize * width..(i as usize + 1) * width]);
        }
        std::hint::black_box(&mut out);
    });
    let req = OpRequest::new(
        "Gather",
        vec![
            t(&[rows as u64, width as u64]),
            TensorDesc::new("i", vec![picks as u64], Dtype::I64),
        ],
    );
    let idx_bytes: Vec<u8> = idx.iter().flat_map(|x| x.to_le_bytes()).collect();
    let u = umd_time(&host, req, &[bytes(&table), idx_bytes]);
    row("gather", "Gather f32[16384,128] by 4096 rows", u, native);

    // text: StringSplit of 4096 strings of 8 words on " " (the plan computes the op too, to size
    // the outputs: that is translation, not timed here)
    let words: Vec<String> = (0..4096)
        .map(|i| {
            (0..8)
                .map(|j| format!("w{}", (i * 31 + j * 7) % 1000))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let native = median(|| {
        let parts: Vec<Vec<&str>> = words.iter().map(|s| s.split(' ').collect()).collect();
        std::hint::black_box(parts);
    });
    let data = umd::text::encode(&words);
    let d = TensorDesc::new("s", vec![4096], Dtype::Str)
        .with_size(data.len() as u64)
        .unwrap();
    let req =
        OpRequest::new("StringSplit", vec![d]).attr("delimiter", umd::AttrValue::Text(" ".into()));
    let u = umd_time(&host, req, &[data]);
    row("text", "StringSplit 4096 strings of 8 words", u, native);

    // ml: TreeEnsembleRegressor, 100 full trees of depth 6 over f32[4096, 16], SUM
    let (trees, depth, rows, feats) = (100usize, 6u32, 4096usize, 16usize);
    let n = (1usize << (depth + 1)) - 1;
    let inner = (1usize << depth) - 1;
    let mut rng = 12345u64;
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) as usize
    };
    let (mut feat, mut thr, mut leaf_w) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..trees * n {
        feat.push(next() % feats);
        thr.push((next() % 2000) as f32 / 1000.0 - 1.0);
        leaf_w.push((next() % 1000) as f32 / 1000.0);
    }
    let x = f32s(rows * feats, 9);
    let native = median(|| {
        let mut out = vec![0f32; rows];
        for (r, o) in out.iter_mut().enumerate() {
            for t in 0..trees {
                let mut i = 0;
                while i < inner {
                    let k = t * n + i;
                    i = if x[r * feats + feat[k]] <= thr[k] {
                        2 * i + 1
                    } else {
                        2 * i + 2
                    };
                }
                *o += leaf_w[t * n + i];
            }
        }
        std::hint::black_box(out);
    });
    let ints = |v: Vec<i64>| umd::AttrValue::Ints(v);
    let (mut tids, mut nids, mut fids, mut vals, mut modes, mut tr, mut fl) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut wt, mut wn, mut wi, mut ww) = (vec![], vec![], vec![], vec![]);
    for t in 0..trees {
        for i in 0..n {
            let k = t * n + i;
            tids.push(t as i64);
            nids.push(i as i64);
            let leaf = i >= inner;
            fids.push(if leaf { 0 } else { feat[k] as i64 });
            vals.push(thr[k] as f64);
            modes.push(if leaf { "LEAF" } else { "BRANCH_LEQ" }.to_string());
            tr.push(if leaf { 0 } else { 2 * i as i64 + 1 });
            fl.push(if leaf { 0 } else { 2 * i as i64 + 2 });
            if leaf {
                wt.push(t as i64);
                wn.push(i as i64);
                wi.push(0);
                ww.push(leaf_w[k] as f64);
            }
        }
    }
    let req = OpRequest::new(
        "TreeEnsembleRegressor",
        vec![t(&[rows as u64, feats as u64])],
    )
    .attr("nodes_treeids", ints(tids))
    .attr("nodes_nodeids", ints(nids))
    .attr("nodes_featureids", ints(fids))
    .attr("nodes_values", umd::AttrValue::Floats(vals))
    .attr("nodes_modes", umd::AttrValue::Texts(modes))
    .attr("nodes_truenodeids", ints(tr))
    .attr("nodes_falsenodeids", ints(fl))
    .attr("target_treeids", ints(wt))
    .attr("target_nodeids", ints(wn))
    .attr("target_ids", ints(wi))
    .attr("target_weights", umd::AttrValue::Floats(ww));
    let u = umd_time(&host, req, &[bytes(&x)]);
    row(
        "ml",
        "TreeEnsembleRegressor 100 trees of depth 6, f32[4096,16]",
        u,
        native,
    );

    println!();
    shape_in_place("");
}

/// One row of the in-place table: native, umd in place, umd copying.
fn row3(what: &str, native: Duration, in_place: Duration, copying: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {what} | {:.3} ms | {:.3} ms | {:.2}× | {:.3} ms | {:.2}× |",
        ms(native),
        ms(in_place),
        ms(in_place) / ms(native),
        ms(copying),
        ms(copying) / ms(native)
    );
}

/// The `shape` plugin's data movement: native, in place, copying (rows whose label contains
/// `filter`; all with "").
fn shape_in_place(filter: &str) {
    let in_place = Host::builder().build().unwrap();
    let copying = Host::builder().cpu_in_place(false).build().unwrap();
    let want = |what: &str| what.to_lowercase().contains(&filter.to_lowercase());
    let both = |req: OpRequest, inputs: &[Vec<u8>]| {
        (
            umd_time(&in_place, req.clone(), inputs),
            umd_time(&copying, req, inputs),
        )
    };
    let ints = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let i64s = |n: u64| TensorDesc::new("c", vec![n], Dtype::I64);
    println!("| op | native | umd in place | ratio | umd copying (run-cpu) | ratio |");
    println!("| --- | --- | --- | --- | --- | --- |");

    let what = "Transpose f32[1024,1024] perm 1,0";
    if want(what) {
        let (r, c) = (1024usize, 1024usize);
        let a = f32s(r * c, 2);
        let mut out = vec![0f32; r * c];
        let native = median(|| {
            for i in 0..r {
                for j in 0..c {
                    out[j * r + i] = a[i * c + j];
                }
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new("Transpose", vec![t(&[r as u64, c as u64])]);
        let (u, k) = both(req, &[bytes(&a)]);
        row3(what, native, u, k);
    }

    let what = "Transpose f32[16,128,12,64] perm 0,2,1,3";
    if want(what) {
        let (b, s, h, d) = (16usize, 128usize, 12usize, 64usize);
        let a = f32s(b * s * h * d, 3);
        let mut out = vec![0f32; a.len()];
        let native = median(|| {
            for bi in 0..b {
                for hi in 0..h {
                    for si in 0..s {
                        let from = ((bi * s + si) * h + hi) * d;
                        let to = ((bi * h + hi) * s + si) * d;
                        out[to..to + d].copy_from_slice(&a[from..from + d]);
                    }
                }
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new("Transpose", vec![t(&[16, 128, 12, 64])])
            .attr("perm", umd::AttrValue::Ints(vec![0, 2, 1, 3]));
        let (u, k) = both(req, &[bytes(&a)]);
        row3(what, native, u, k);
    }

    let what = "Concat 2× f32[2048,1024] axis 1";
    if want(what) {
        let (r, c) = (2048usize, 1024usize);
        let (x, y) = (f32s(r * c, 4), f32s(r * c, 5));
        let mut out = vec![0f32; 2 * r * c];
        let native = median(|| {
            for ((o, a), b) in out
                .chunks_exact_mut(2 * c)
                .zip(x.chunks_exact(c))
                .zip(y.chunks_exact(c))
            {
                o[..c].copy_from_slice(a);
                o[c..].copy_from_slice(b);
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new("Concat", vec![t(&[2048, 1024]), t(&[2048, 1024])])
            .attr("axis", umd::AttrValue::Int(1));
        let (u, k) = both(req, &[bytes(&x), bytes(&y)]);
        row3(what, native, u, k);
    }

    let what = "Slice f32[4096,1024] every other row";
    if want(what) {
        let (r, c) = (4096usize, 1024usize);
        let a = f32s(r * c, 6);
        let mut out = vec![0f32; r / 2 * c];
        let native = median(|| {
            for (o, a) in out.chunks_exact_mut(c).zip(a.chunks_exact(c).step_by(2)) {
                o.copy_from_slice(a);
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new(
            "Slice",
            vec![t(&[4096, 1024]), i64s(1), i64s(1), i64s(1), i64s(1)],
        );
        let inputs = [bytes(&a), ints(&[0]), ints(&[4096]), ints(&[0]), ints(&[2])];
        let (u, k) = both(req, &inputs);
        row3(what, native, u, k);
    }

    let what = "Expand f32[1,1024] to [4096,1024]";
    if want(what) {
        let (r, c) = (4096usize, 1024usize);
        let a = f32s(c, 7);
        let mut out = vec![0f32; r * c];
        let native = median(|| {
            for o in out.chunks_exact_mut(c) {
                o.copy_from_slice(&a);
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new("Expand", vec![t(&[1, 1024]), i64s(2)]);
        let (u, k) = both(req, &[bytes(&a), ints(&[4096, 1024])]);
        row3(what, native, u, k);
    }

    let what = "Cast f32 to f16, 4 Mi";
    if want(what) {
        let n = 4usize << 20;
        let a = f32s(n, 8);
        let mut out = vec![half::f16::ZERO; n];
        let native = median(|| {
            for (o, x) in out.iter_mut().zip(&a) {
                *o = half::f16::from_f32(*x);
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new("Cast", vec![t(&[n as u64])]).attr("to", umd::AttrValue::Int(10));
        let (u, k) = both(req, &[bytes(&a)]);
        row3(what, native, u, k);
    }
}

/// The CPU device in place (worker threads: one per core), in place on one thread, and copying.
struct Hosts {
    in_place: Host,
    one_thread: Host,
    copying: Host,
}

/// One row of the in-place table: native, then each umd configuration with its ratio.
fn in_place_row(
    h: &Hosts,
    family: &str,
    what: &str,
    req: OpRequest,
    inputs: &[Vec<u8>],
    native: Duration,
) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let cell = |host: &Host| {
        let d = umd_time(host, req.clone(), inputs);
        format!(
            "{:.3} ms ({:.2}×)",
            ms(d),
            d.as_secs_f64() / native.as_secs_f64()
        )
    };
    let (a, b, c) = (cell(&h.in_place), cell(&h.one_thread), cell(&h.copying));
    println!(
        "| {family} | {what} | {:.3} ms | {a} | {b} | {c} |",
        ms(native)
    );
}

/// The reduce and gather rows whose label contains `filter`.
fn in_place_rows(filter: &str) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let h = Hosts {
        in_place: Host::builder().build().unwrap(),
        one_thread: Host::builder().cpu_threads(1).build().unwrap(),
        copying: Host::builder().cpu_in_place(false).build().unwrap(),
    };
    println!(
        "| family | op | native Rust loop | umd in place ({threads} threads) | umd in place (1 thread) \
         | umd copying (run-cpu) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let wanted = |label: &str| label.contains(filter);
    let mean = |shape: &[u64]| {
        let axes = TensorDesc::new("axes", vec![1], Dtype::I64);
        let mut req = OpRequest::new("ReduceMean", vec![t(shape), axes]);
        req.opset = 18;
        req
    };

    // reduce: ReduceMean over the last axis of f32[4096,1024]
    let label = "ReduceMean f32[4096,1024] axis 1";
    if wanted(label) {
        let (r, c) = (4096usize, 1024usize);
        let a = f32s(r * c, 21);
        let mut out = vec![0f32; r];
        let native = median(|| {
            for (o, row) in out.iter_mut().zip(a.chunks_exact(c)) {
                *o = row.iter().sum::<f32>() / c as f32;
            }
            std::hint::black_box(&mut out);
        });
        let inputs = [bytes(&a), 1i64.to_le_bytes().to_vec()];
        in_place_row(
            &h,
            "reduce",
            label,
            mean(&[r as u64, c as u64]),
            &inputs,
            native,
        );
    }

    // reduce: ReduceMean over axis 0 of f32[1024,4096] (column sums)
    let label = "ReduceMean f32[1024,4096] axis 0";
    if wanted(label) {
        let (r, c) = (1024usize, 4096usize);
        let a = f32s(r * c, 22);
        let mut out = vec![0f32; c];
        let native = median(|| {
            out.iter_mut().for_each(|o| *o = 0.0);
            for row in a.chunks_exact(c) {
                for (o, x) in out.iter_mut().zip(row) {
                    *o += x;
                }
            }
            out.iter_mut().for_each(|o| *o /= r as f32);
            std::hint::black_box(&mut out);
        });
        let inputs = [bytes(&a), 0i64.to_le_bytes().to_vec()];
        in_place_row(
            &h,
            "reduce",
            label,
            mean(&[r as u64, c as u64]),
            &inputs,
            native,
        );
    }

    // gather: an embedding lookup, 4096 rows of f32[30000,768]
    let label = "Gather f32[30000,768] by 4096 rows";
    if wanted(label) {
        let (rows, width, picks) = (30000usize, 768usize, 4096usize);
        let table = f32s(rows * width, 23);
        let idx: Vec<i64> = (0..picks)
            .map(|i| ((i * 7919 + 13) % rows) as i64)
            .collect();
        let mut out = vec![0f32; picks * width];
        let native = median(|| {
            for (orow, &i) in out.chunks_exact_mut(width).zip(&idx) {
                orow.copy_from_slice(&table[i as usize * width..(i as usize + 1) * width]);
            }
            std::hint::black_box(&mut out);
        });
        let req = OpRequest::new(
            "Gather",
            vec![
                t(&[rows as u64, width as u64]),
                TensorDesc::new("i", vec![picks as u64], Dtype::I64),
            ],
        );
        let idx_bytes: Vec<u8> = idx.iter().flat_map(|x| x.to_le_bytes()).collect();
        in_place_row(
            &h,
            "gather",
            label,
            req,
            &[bytes(&table), idx_bytes],
            native,
        );
    }

    // gather: Resize nearest 2x (H and W) of f32[8,64,128,128] (half_pixel, round_prefer_floor:
    // output pixel y reads input y / 2)
    let label = "Resize nearest 2x f32[8,64,128,128]";
    if wanted(label) {
        let (planes, hw) = (8 * 64usize, 128usize);
        let x = f32s(planes * hw * hw, 24);
        let ohw = 2 * hw;
        let mut out = vec![0f32; planes * ohw * ohw];
        let native = median(|| {
            for (op, ip) in out.chunks_exact_mut(ohw * ohw).zip(x.chunks_exact(hw * hw)) {
                for (oy, orow) in op.chunks_exact_mut(ohw).enumerate() {
                    let irow = &ip[oy / 2 * hw..(oy / 2 + 1) * hw];
                    for (ox, o) in orow.iter_mut().enumerate() {
                        *o = irow[ox / 2];
                    }
                }
            }
            std::hint::black_box(&mut out);
        });
        let scales = TensorDesc::new("scales", vec![4], Dtype::F32);
        let mut req = OpRequest::new("Resize", vec![t(&[8, 64, 128, 128]), scales]);
        req.opset = 19;
        req.absent = vec![1]; // roi
        let sc = bytes(&[1.0, 1.0, 2.0, 2.0]);
        in_place_row(&h, "gather", label, req, &[bytes(&x), sc], native);
    }
}
