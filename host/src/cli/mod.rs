//! Command-line parsing and the small commands; `demo` has its own module.

mod bench_client;
mod check;
#[cfg(feature = "cuda")]
mod compile;
mod demo;
mod fair;
mod latency;
mod local_server;
mod plugin_kit;
mod plugins;
mod run_model;
mod serve;
mod soak;
mod values_out;

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use umd::cmdbuf::CommandBuffer;
use umd::{AttrValue, Host, OpRequest, Target, TensorDesc, data};

#[derive(Parser)]
#[command(
    name = "umd",
    version,
    about = "GPU user-mode driver host with sandboxed WebAssembly operator plugins"
)]
pub struct Cli {
    #[command(flatten)]
    host: HostArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct HostArgs {
    /// Also load every .wasm plugin in DIR (repeatable).
    #[arg(long = "plugins", global = true, value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Do not load the plugins built into the binary.
    #[arg(long, global = true)]
    no_bundled: bool,
    /// Devices to open, comma-separated, the first the default: `cpu` (= `cpu:0`), `cpu:N`,
    /// `cuda:N` (builds with the `cuda` feature; `umd devices` lists the GPUs). `umd serve`
    /// serves them all (requests pick one by its `device` field); other commands run on the
    /// first.
    #[arg(long, global = true, default_value = "cpu")]
    device: String,
    /// Worker threads the CPU device splits one launch across (0: one per core).
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
    cpu_threads: usize,
    /// Run every CPU kernel through `run-cpu` (whole-buffer copies), not in place (ABI 1.3):
    /// for comparing the two paths.
    #[arg(long, global = true)]
    cpu_copying: bool,
}

impl HostArgs {
    fn host(&self) -> anyhow::Result<Host> {
        let mut b = Host::builder()
            .bundled_plugins(!self.no_bundled)
            .device(&self.device)
            .cpu_threads(self.cpu_threads)
            .cpu_in_place(!self.cpu_copying);
        for d in &self.plugin_dirs {
            b = b.plugin_dir(d);
        }
        // One line: the library error repeats its cause as its source.
        b.build().map_err(|e| anyhow::anyhow!("{e}"))
    }
}

#[derive(Subcommand)]
enum Command {
    /// The main job: a 2-layer MLP forward pass through the plugins on the device (`--device`,
    /// the CPU by default), checked against a plain Rust computation.
    Demo(demo::DemoArgs),
    /// Every op of every loaded plugin on the device (`--device`) against the CPU reference,
    /// on random inputs of many shapes and dtypes; on a CUDA device also the DESIGN §6 figures
    /// (launch cost, allocator hit, Add bandwidth, MatMul TFLOP/s). Writes check.txt and
    /// check.json; exits non-zero when a case fails.
    Check(check::CheckArgs),
    /// Translate one op and print its command buffer.
    Translate {
        /// ONNX op name (Add, MatMul, Relu, …).
        op: String,
        #[command(flatten)]
        op_args: OpArgs,
        /// Target to plan for (`cpu`, `cuda:sm_90`).
        #[arg(long)]
        target: Option<String>,
        /// Write the UMDCMD bytes to FILE.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Decode and print a UMDCMD file.
    Inspect { file: PathBuf },
    /// Translate and run one op on the device with random (or given) data.
    Run {
        op: String,
        #[command(flatten)]
        op_args: OpArgs,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write each output as `DIR/output_N.npy`.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print every value of every output (default: a summary and the first 8).
        #[arg(long)]
        full: bool,
    },
    /// Run an ONNX model on the device as one batched submission: load time, first and
    /// steady-state latency, peak device memory, outputs as .npy (`--out`), a per-node table
    /// (`--profile`).
    RunModel(run_model::RunModelArgs),
    /// List plugins: file, name, version, ABI, ops, targets, status, load time (exits non-zero
    /// when one was refused or none loaded); explain the choice of plugin for a request; print
    /// a module's kernel source; compile every CUDA module offline (`compile`).
    Plugins(plugins::PluginsArgs),
    /// The vendor kit: write (`new`), build and test an out-of-tree plugin project.
    #[command(subcommand)]
    Plugin(plugin_kit::PluginCommand),
    /// Serve the gRPC Translator, Device (and, with --admin, Plugins) services.
    Serve(serve::ServeArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// List the GPUs this umd can run on (`--device cuda:N`): name, architecture, memory, SMs,
    /// driver and NVRTC versions.
    Devices,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// N Adds as sequential unary Translate calls and as one SubmitBatch stream.
    Grpc(serve::GrpcBenchArgs),
    /// Mixed load for N minutes (translate, execute, SubmitBatch, hot swaps, hostile requests):
    /// RSS, p50/p99 and errors per minute, then a verdict.
    Soak(soak::SoakArgs),
    /// One client's small Adds alone and while other clients flood the device, with each
    /// client on its own streams and all on one shared stream: p50/p99 and ratios.
    Fair(fair::FairArgs),
}

#[derive(Args)]
struct OpArgs {
    /// Input tensor: `f32[64,128]`, `x:f16[2,3]`, with data `f32[3]=1,2,3`, from a file
    /// `@x.npy`, or `none` for an absent optional input (repeatable, in order).
    #[arg(long = "input", short = 'i', required = true)]
    inputs: Vec<String>,
    /// Attribute `name=value` (repeatable): `3` int, `0.5` float, `true`, `[1,2]` ints,
    /// `[0.5,1]` floats, anything else text.
    #[arg(long = "attr")]
    attrs: Vec<String>,
    /// ONNX opset version the op is used under (default: the plugin's newest).
    #[arg(long, default_value_t = 0)]
    opset: u32,
}

/// Parsed `--input`/`--attr` arguments: the request and, per present input, its bytes where given.
struct ParsedOp {
    req: OpRequest,
    data: Vec<Option<Vec<u8>>>,
}

impl OpArgs {
    fn parse(&self, op: &str) -> anyhow::Result<ParsedOp> {
        let mut req = OpRequest::new(op, Vec::new());
        req.opset = self.opset;
        let mut data = Vec::new();
        for (i, s) in self.inputs.iter().enumerate() {
            if s == "none" {
                req.absent.push(i as u32);
                continue;
            }
            if let Some(path) = s.strip_prefix('@') {
                let (desc, bytes) = umd::npy::read(std::path::Path::new(path), &format!("in{i}"))
                    .map_err(|e| anyhow::anyhow!("input {i}: {e}"))?;
                req.inputs.push(desc);
                data.push(Some(bytes));
                continue;
            }
            let (spec, values) = match s.split_once('=') {
                Some((spec, d)) => {
                    let v = d
                        .split(',')
                        .map(|x| x.trim().parse::<f64>())
                        .collect::<Result<Vec<_>, _>>()
                        .with_context(|| {
                            format!("input {i}: data `{d}` is not a list of numbers")
                        })?;
                    (spec, Some(v))
                }
                None => (s.as_str(), None),
            };
            let mut desc: TensorDesc = spec.parse().with_context(|| format!("input {i}"))?;
            if desc.name.is_empty() {
                desc.name = format!("in{i}");
            }
            if let Some(v) = &values
                && v.len() as u64 != desc.numel().unwrap_or(0)
            {
                bail!(
                    "input {i}: {} values given for {} elements",
                    v.len(),
                    desc.numel().unwrap_or(0)
                );
            }
            data.push(values.map(|v| data::encode(desc.dtype, &v)));
            req.inputs.push(desc);
        }
        req.attributes = self
            .attrs
            .iter()
            .map(|a| {
                a.split_once('=')
                    .map(|(k, v)| (k.to_string(), AttrValue::parse(v)))
                    .with_context(|| format!("attribute `{a}` is not name=value"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        req.attributes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(ParsedOp { req, data })
    }

    /// The request, with the values of inputs given with data (so plans needing them work).
    fn request(&self, op: &str) -> anyhow::Result<OpRequest> {
        let ParsedOp { mut req, data } = self.parse(op)?;
        for (i, d) in data.into_iter().enumerate() {
            if let Some(bytes) = d {
                req = req.value(i as u32, bytes);
            }
        }
        Ok(req)
    }
}

impl Cli {
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Demo(args) => demo::run(&self.host.host()?, &args),
            Command::Check(args) => check::run(&self.host.host()?, &args),
            Command::Serve(args) => serve::run(self.host.host()?, &args),
            Command::Bench(BenchCommand::Grpc(args)) => serve::bench_grpc(self.host.host()?, &args),
            Command::Bench(BenchCommand::Soak(args)) => soak::run(self.host.host()?, &args),
            Command::Bench(BenchCommand::Fair(args)) => fair::run(self.host.host()?, &args),
            Command::Devices => devices(),
            Command::RunModel(args) => run_model::run(self.host.host()?, &args),
            Command::Translate {
                op,
                op_args,
                target,
                out,
            } => {
                let host = self.host.host()?;
                let mut req = op_args.request(&op)?;
                if let Some(t) = target {
                    req.target = Some(Target::parse(&t)?);
                }
                let t = host.translate(&req)?;
                // Print what a device would decode, not the in-memory plan.
                let decoded = CommandBuffer::decode(&t.bytes)?;
                println!("{decoded}");
                println!("{} bytes, planned by {}", t.bytes.len(), t.plugin);
                if let Some(path) = out {
                    std::fs::write(&path, &t.bytes)
                        .with_context(|| format!("writing {}", path.display()))?;
                    println!("written to {}", path.display());
                }
                Ok(())
            }
            Command::Inspect { file } => {
                let bytes =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                let cb = CommandBuffer::decode(&bytes)
                    .with_context(|| format!("{} is not a valid command buffer", file.display()))?;
                println!("{cb}");
                Ok(())
            }
            Command::Run {
                op,
                op_args,
                seed,
                out,
                full,
            } => {
                let host = self.host.host()?;
                let ParsedOp { req, data } = op_args.parse(&op)?;
                let data: Vec<Vec<u8>> = req
                    .inputs
                    .iter()
                    .zip(data)
                    .enumerate()
                    .map(|(i, (d, v))| {
                        v.unwrap_or_else(|| {
                            let n = d.numel().unwrap_or(0) as usize;
                            data::encode(d.dtype, &data::random(d.dtype, n, seed + i as u64))
                        })
                    })
                    .collect();
                let start = std::time::Instant::now();
                let outputs = host.run_request(req, &data)?;
                let took = start.elapsed();
                if let Some(dir) = &out {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                }
                for (i, (d, bytes)) in outputs.iter().enumerate() {
                    let values = data::decode(d.dtype, bytes);
                    if full {
                        println!("{} {d}: {values:?}", d.name);
                    } else {
                        println!("{}", summary(d, &values));
                    }
                    if let Some(dir) = &out {
                        let path = dir.join(format!("output_{i}.npy"));
                        umd::npy::write(&path, d, bytes)
                            .with_context(|| format!("writing {}", path.display()))?;
                        println!("  written to {}", path.display());
                    }
                }
                println!(
                    "ran on {} in {:.3} ms",
                    host.device().name(),
                    took.as_secs_f64() * 1e3
                );
                Ok(())
            }
            Command::Plugins(args) => plugins::run(&self.host, args),
            Command::Plugin(cmd) => plugin_kit::run(cmd),
        }
    }
}

/// `umd devices`: one line per GPU, or why there is none.
#[cfg(feature = "cuda")]
fn devices() -> anyhow::Result<()> {
    let list = umd::device::cuda::devices()?;
    if list.is_empty() {
        bail!("the NVIDIA driver is installed but reports no CUDA device");
    }
    for d in list {
        println!("{d}");
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn devices() -> anyhow::Result<()> {
    bail!(
        "this umd was built without the `cuda` feature (rebuild with `cargo build --features cuda`)"
    )
}

/// `out f32[2, 3]: min -1 max 2 mean 0.1 [0.5, …]`
fn summary(d: &TensorDesc, v: &[f64]) -> String {
    let (min, max) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    let head: Vec<String> = v.iter().take(8).map(|x| format!("{x:.4}")).collect();
    let more = if v.len() > 8 { ", …" } else { "" };
    format!(
        "{} {d}: min {min:.4} max {max:.4} mean {mean:.4} [{}{more}]",
        d.name,
        head.join(", ")
    )
}
