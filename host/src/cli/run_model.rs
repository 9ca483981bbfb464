//! `umd run-model`: loads an ONNX model, runs it on the device with given or random inputs,
//! prints load time, first-run and steady-state latency, peak device memory and (`--profile`)
//! a per-node table; writes each output as `DIR/<output>.npy` (sequences and maps: see
//! [`super::values_out`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;

use umd::graph::{Dim, Model, PlanStats, Tensor, Value, ValueDecl};
use umd::{Host, TensorDesc, data};

#[derive(Args)]
pub struct RunModelArgs {
    /// The ONNX model file (external data is read from its folder).
    model: PathBuf,
    /// Input `NAME=FILE.npy` (repeatable); inputs not given get random data of their declared
    /// type and shape (dynamic dimensions need `-i`).
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Write each output as `DIR/<output name>.npy` (a sequence as `DIR/<name>/<i>.npy`, maps
    /// as `DIR/<name>.json`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Steady-state runs after the first (their median is reported).
    #[arg(long, default_value_t = 10)]
    repeat: usize,
    /// Also run node by node and print a per-node table.
    #[arg(long)]
    profile: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the figures as one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(host: Host, args: &RunModelArgs) -> anyhow::Result<()> {
    let host = Arc::new(host);
    let t0 = Instant::now();
    let model = Model::from_onnx_file(host, &args.model)
        .with_context(|| format!("loading {}", args.model.display()))?;
    let load = t0.elapsed().as_secs_f64();
    let inputs = inputs(&model, args)?;
    // A model with sequence, optional or map outputs (a classifier's ZipMap) runs by value.
    let by_value = model
        .outputs()
        .iter()
        .any(|o| model.graph().kinds.contains_key(&o.name));
    let run_once = || -> anyhow::Result<(Vec<(String, Value)>, PlanStats)> {
        if by_value {
            let named: Vec<(String, Value)> = inputs
                .iter()
                .map(|t| (t.desc.name.clone(), Value::Tensor(Arc::new(t.clone()))))
                .collect();
            let stats = PlanStats {
                nodes: model.graph().nodes.len(),
                ..PlanStats::default()
            };
            return Ok((model.run_values(&named)?, stats));
        }
        let r = model.run(&inputs)?;
        let named = r
            .outputs
            .into_iter()
            .map(|t| (t.desc.name.clone(), Value::Tensor(Arc::new(t))))
            .collect();
        Ok((named, r.stats))
    };
    let t1 = Instant::now();
    let (first, stats) = run_once()?;
    let first_s = t1.elapsed().as_secs_f64();
    let mut times = Vec::with_capacity(args.repeat);
    for _ in 0..args.repeat {
        let t = Instant::now();
        run_once()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let steady = times.get(times.len() / 2).copied().unwrap_or(first_s);
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, v) in &first {
            super::values_out::write(dir, &safe_name(name), v)?;
        }
    }
    let s = &stats;
    let profile = if args.profile {
        Some(model.profile(&inputs)?)
    } else {
        None
    };
    if args.json {
        let outs: Vec<String> = first
            .iter()
            .map(|(name, v)| {
                format!(
                    "{{\"name\":{},\"desc\":{}}}",
                    umd::check::json_string(name),
                    umd::check::json_string(&super::values_out::describe(v))
                )
            })
            .collect();
        let packed = umd::plugin::packed_weights();
        let prof = profile.as_ref().map_or(String::new(), |p| {
            let total: f64 = p.iter().map(|n| n.micros).sum();
            format!(",\"profile_sum_s\":{}", total / 1e6)
        });
        println!(
            "{{\"load_s\":{load},\"first_s\":{first_s},\"steady_s\":{steady},\"nodes\":{},\
             \"folded\":{},\"views\":{},\"launched\":{},\"fused\":{},\"launches\":{},\
             \"setup_launches\":{},\"submissions\":{},\"peak_bytes\":{},\"intermediate_bytes\":{},\"constant_bytes\":{},\
             \"packed_copies\":{},\"packed_bytes\":{},\"outputs\":[{}]{prof}}}",
            s.nodes,
            s.folded,
            s.views,
            s.launched,
            s.fused,
            s.launches,
            s.setup_launches,
            s.submissions,
            s.peak_bytes,
            s.intermediate_bytes,
            s.constant_bytes,
            packed.0,
            packed.1,
            outs.join(",")
        );
        return Ok(());
    }
    println!("model       {}", args.model.display());
    if by_value {
        println!(
            "nodes       {} (run node by node on host values: the outputs are sequences, \
             optionals or maps)",
            s.nodes
        );
    } else {
        println!(
            "nodes       {} ({} folded at load, {} views, {} with {} launches in {} submission(s))",
            s.nodes, s.folded, s.views, s.launched, s.launches, s.submissions
        );
        if s.fused > 0 {
            println!(
                "fused       {} nodes run inside fused ops (chains plugins compute as one op; \
                 UMD_FUSION=0 runs them one by one)",
                s.fused
            );
        }
        if s.setup_launches > 0 {
            println!(
                "setup       {} launches filled their nodes' tables once, before the first run",
                s.setup_launches
            );
        }
    }
    println!("load        {:.3} ms", load * 1e3);
    println!(
        "first run   {:.3} ms (compiles this input signature)",
        first_s * 1e3
    );
    println!(
        "steady run  {:.3} ms (median of {})",
        steady * 1e3,
        args.repeat
    );
    println!(
        "peak memory {} bytes of intermediates and outputs (sum without reuse {}), {} of constants",
        s.peak_bytes, s.intermediate_bytes, s.constant_bytes
    );
    let (copies, bytes) = umd::plugin::packed_weights();
    if copies > 0 {
        println!(
            "packed      {copies} copies of frozen weights the CPU matrix unit packed once: \
             {bytes} bytes of host memory"
        );
    }
    for (name, v) in &first {
        let Value::Tensor(t) = v else {
            println!("output      {name}: {}", super::values_out::describe(v));
            continue;
        };
        let n = t.desc.numel().unwrap_or(0) as usize;
        let head: Vec<String> = if t.desc.dtype == umd::Dtype::Str {
            umd::text::decode(&t.data, n)
                .unwrap_or_default()
                .iter()
                .take(6)
                .map(|s| format!("{:?}", String::from_utf8_lossy(s)))
                .collect()
        } else {
            let v = data::decode(t.desc.dtype, &t.data);
            v.iter().take(6).map(|x| format!("{x:.4}")).collect()
        };
        println!(
            "output      {} {}: [{}{}]",
            name,
            t.desc,
            head.join(", "),
            if n > 6 { ", …" } else { "" }
        );
    }
    if let Some(p) = profile {
        let total: f64 = p.iter().map(|n| n.micros).sum();
        println!(
            "\n{:<40} {:<20} {:>8} {:>12} {:>6}",
            "node", "op", "launches", "µs", "%"
        );
        for n in &p {
            println!(
                "{:<40} {:<20} {:>8} {:>12.1} {:>6.1}",
                n.node.chars().take(40).collect::<String>(),
                n.op,
                n.launches,
                n.micros,
                100.0 * n.micros / total.max(1e-9)
            );
        }
        println!(
            "{:<40} {:<20} {:>8} {:>12.1}",
            "total (node by node)", "", "", total
        );
    }
    Ok(())
}

/// `-i` inputs read from .npy files, the rest random.
fn inputs(model: &Model, args: &RunModelArgs) -> anyhow::Result<Vec<Tensor>> {
    let mut given = Vec::new();
    for spec in &args.inputs {
        let Some((name, file)) = spec.split_once('=') else {
            bail!("-i `{spec}`: expected NAME=FILE.npy");
        };
        let (desc, data) = umd::npy::read(file.as_ref(), name).map_err(anyhow::Error::msg)?;
        given.push(Tensor { desc, data });
    }
    for (i, decl) in model.inputs().iter().enumerate() {
        if model.graph().kinds.contains_key(&decl.name) {
            bail!(
                "input `{}` is a sequence, an optional or a map: `umd run-model` gives tensors \
                 only (run such a model through the gRPC umd.Graph service, the Python client's \
                 Model.run or the Rust API's Model::run_values)",
                decl.name
            );
        }
        if given.iter().any(|t| t.desc.name == decl.name) {
            continue;
        }
        let desc = random_desc(decl)?;
        let n = desc.numel().unwrap_or(0) as usize;
        let data = data::encode(
            desc.dtype,
            &data::random(desc.dtype, n, args.seed + i as u64),
        );
        // strings: the random values' text
        let desc = desc.sized(data.len() as u64)?;
        given.push(Tensor { desc, data });
    }
    Ok(given)
}

fn random_desc(decl: &ValueDecl) -> anyhow::Result<TensorDesc> {
    let Some(dtype) = decl.dtype else {
        bail!(
            "input `{}` declares no element type: give it with -i {}=FILE.npy",
            decl.name,
            decl.name
        );
    };
    let dims = decl.dims.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "input `{}` declares no shape: give it with -i {}=FILE.npy",
            decl.name,
            decl.name
        )
    })?;
    let shape = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => Ok(*n),
            Dim::Dynamic(_) => Err(anyhow::anyhow!(
                "input `{}` {} has dynamic dimensions: give it with -i {}=FILE.npy",
                decl.name,
                decl.describe(),
                decl.name
            )),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(TensorDesc::new(decl.name.clone(), shape, dtype))
}

/// An output name as a file name: path separators and odd characters become `_`.
fn safe_name(name: &str) -> String {
    let s: String = name
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}
