//! `umd demo`: a 2-layer MLP forward pass (MatMul → Add(bias, broadcast) → Relu → MatMul)
//! translated by the plugins and executed on the device, buffers staying on the device between
//! ops, checked against an independent plain-Rust computation — and, on a GPU, also against the
//! same pipeline on the CPU device. The weights are uploaded once, as a runtime keeps a model's
//! weights resident; a forward pass uploads `x`, runs the four ops and reads `y` back.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;

use umd::device::{BufferId, Device};
use umd::{Dtype, Host, OpRequest, Target, TensorDesc, data};

#[derive(Args)]
pub struct DemoArgs {
    /// Batch size.
    #[arg(long, default_value_t = 64)]
    batch: u64,
    /// Input features.
    #[arg(long, default_value_t = 256)]
    input: u64,
    /// Hidden units.
    #[arg(long, default_value_t = 512)]
    hidden: u64,
    /// Output classes.
    #[arg(long, default_value_t = 10)]
    classes: u64,
    /// Run the forward pass this many more times after the first and print their median (the
    /// first run also pays for translation and the plugins' first calls).
    #[arg(long, default_value_t = 0)]
    repeat: u32,
}

struct Tensor {
    desc: TensorDesc,
    buf: BufferId,
}

/// One device and the target plans for it are made for.
struct On<'a> {
    host: &'a Host,
    dev: &'a Arc<dyn Device>,
    target: Target,
    verbose: bool,
}

impl On<'_> {
    fn upload(&self, name: &str, shape: Vec<u64>, values: &[f64]) -> anyhow::Result<Tensor> {
        let desc = TensorDesc::new(name, shape, Dtype::F32);
        let buf = self.dev.alloc(desc.byte_size().unwrap_or(0))?;
        self.dev.write(buf, 0, &data::encode(Dtype::F32, values))?;
        Ok(Tensor { desc, buf })
    }

    /// Translates and runs one op on device tensors, printing what happened.
    fn step(&self, op: &str, inputs: &[&Tensor], name: &str) -> anyhow::Result<Tensor> {
        let start = Instant::now();
        let req = OpRequest::new(op, inputs.iter().map(|t| t.desc.clone()).collect())
            .target(self.target.clone());
        let t = self.host.translate(&req)?;
        let translated = start.elapsed();
        let mut desc = t.outputs[0].clone();
        desc.name = name.to_string();
        let out = Tensor {
            buf: self.dev.alloc(desc.byte_size().unwrap_or(0))?,
            desc,
        };
        let mut bindings: Vec<BufferId> = inputs.iter().map(|t| t.buf).collect();
        bindings.push(out.buf);
        let start = Instant::now();
        self.dev
            .submit_wait(self.dev.default_stream(), t.cmdbuf.clone(), &bindings)
            .with_context(|| format!("{op} failed on device `{}`", self.dev.name()))?;
        let executed = start.elapsed();
        let l = &t.cmdbuf.launches[0];
        if self.verbose {
            println!(
                "{op:<7} {:<22} -> {:<14} kernel {:<16} grid {:<14} block {:<12} cmdbuf {:>4} B  translate {:>8.1} µs  execute {:>8.3} ms",
                inputs
                    .iter()
                    .map(|t| t.desc.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                out.desc.to_string(),
                l.entry_point,
                l.grid.to_string(),
                l.block.to_string(),
                t.bytes.len(),
                translated.as_secs_f64() * 1e6,
                executed.as_secs_f64() * 1e3,
            );
        }
        Ok(out)
    }

    /// Uploads the weights (once per device); returns them and the time it took.
    fn load(
        &self,
        w1: &[f64],
        b1: &[f64],
        w2: &[f64],
        a: &DemoArgs,
    ) -> anyhow::Result<(Weights, f64)> {
        let start = Instant::now();
        let w = Weights {
            w1: self.upload("w1", vec![a.input, a.hidden], w1)?,
            b1: self.upload("b1", vec![a.hidden], b1)?,
            w2: self.upload("w2", vec![a.hidden, a.classes], w2)?,
        };
        Ok((w, start.elapsed().as_secs_f64() * 1e3))
    }

    /// One forward pass: `x` up, four ops, `y` back; returns y and the time it took.
    fn forward(&self, x: &[f64], w: &Weights, a: &DemoArgs) -> anyhow::Result<(Vec<f64>, f64)> {
        let start = Instant::now();
        let tx = self.upload("x", vec![a.batch, a.input], x)?;
        let h1 = self.step("MatMul", &[&tx, &w.w1], "h1")?;
        let h2 = self.step("Add", &[&h1, &w.b1], "h2")?;
        let h3 = self.step("Relu", &[&h2], "h3")?;
        let y = self.step("MatMul", &[&h3, &w.w2], "y")?;
        let size = y.desc.byte_size().unwrap_or(0);
        let got = data::decode(Dtype::F32, &self.dev.read(y.buf, 0, size)?);
        let took = start.elapsed().as_secs_f64() * 1e3;
        for t in [tx, h1, h2, h3, y] {
            self.dev.free(t.buf)?;
        }
        Ok((got, took))
    }

    fn unload(&self, w: Weights) -> anyhow::Result<()> {
        for t in [w.w1, w.b1, w.w2] {
            self.dev.free(t.buf)?;
        }
        Ok(())
    }
}

/// The model's weights, resident on one device.
struct Weights {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

/// Plain row-major reference: out[m][n] = Σ_k a[m][k] b[k][n] (+ bias[n], relu).
fn reference_layer(
    a: &[f64],
    b: &[f64],
    bias: Option<&[f64]>,
    m: usize,
    k: usize,
    n: usize,
    relu: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for p in 0..k {
                acc += a[i * k + p] * b[p * n + j];
            }
            if let Some(bias) = bias {
                acc += bias[j];
            }
            out[i * n + j] = if relu { acc.max(0.0) } else { acc };
        }
    }
    out
}

fn max_rel_err(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
        .fold(0.0, f64::max)
}

pub fn run(host: &Host, args: &DemoArgs) -> anyhow::Result<()> {
    let (b, i, h, c) = (args.batch, args.input, args.hidden, args.classes);
    println!(
        "umd demo: 2-layer MLP forward on device `{}` (batch {b}, {i} -> {h} -> {c}), f32",
        host.device().name()
    );
    let round = |v: Vec<f64>| data::decode(Dtype::F32, &data::encode(Dtype::F32, &v));
    let x = round(data::random(Dtype::F32, (b * i) as usize, 1));
    let w1 = round(data::random(Dtype::F32, (i * h) as usize, 2));
    let b1 = round(data::random(Dtype::F32, h as usize, 3));
    let w2 = round(data::random(Dtype::F32, (h * c) as usize, 4));

    let dev = host.device();
    let on_device = On {
        host,
        dev,
        target: dev.target().clone(),
        verbose: true,
    };
    let (weights, loaded) = on_device.load(&w1, &b1, &w2, args)?;
    println!("weights uploaded once: {loaded:.2} ms");
    let (got, took) = on_device.forward(&x, &weights, args)?;

    let hidden = reference_layer(&x, &w1, Some(&b1), b as usize, i as usize, h as usize, true);
    let want = reference_layer(
        &hidden, &w2, None, b as usize, h as usize, c as usize, false,
    );
    let err = max_rel_err(&got, &want);
    println!(
        "output y f32[{b}, {c}]: {:?} …",
        got.iter()
            .take(4)
            .map(|v| (v * 1e4).round() / 1e4)
            .collect::<Vec<_>>()
    );
    println!(
        "checked against a plain Rust reference: max relative error {err:.2e} over {} values; forward pass {took:.2} ms",
        got.len()
    );
    if args.repeat > 0 {
        let quiet = On {
            verbose: false,
            target: on_device.target.clone(),
            ..on_device
        };
        let mut times = Vec::with_capacity(args.repeat as usize);
        for _ in 0..args.repeat {
            let (again, took) = quiet.forward(&x, &weights, args)?;
            if again != got {
                bail!("MISMATCH: a repeated run gave other results than the first");
            }
            times.push(took);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "forward pass repeated {} times: median {:.3} ms, best {:.3} ms (first run {took:.2} ms)",
            args.repeat,
            times[times.len() / 2],
            times[0]
        );
    }
    on_device.unload(weights)?;
    let mut worst = err;
    if dev.name() != "cpu" {
        // Every GPU result is also checked against the CPU device running the same plugins.
        let reference = host.reference_device();
        let on_cpu = On {
            host,
            dev: reference,
            target: Target::cpu(),
            verbose: false,
        };
        let (cpu_weights, _) = on_cpu.load(&w1, &b1, &w2, args)?;
        let (cpu, _) = on_cpu.forward(&x, &cpu_weights, args)?;
        on_cpu.unload(cpu_weights)?;
        let vs_cpu = max_rel_err(&got, &cpu);
        println!("checked against the CPU device: max relative error {vs_cpu:.2e}");
        worst = worst.max(vs_cpu);
    }
    if worst > 1e-4 {
        bail!(
            "MISMATCH: the device result differs from the reference (max relative error {worst:.2e})"
        );
    }
    println!("OK");
    Ok(())
}
