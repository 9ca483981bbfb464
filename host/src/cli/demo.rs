//! `umd demo`: a 2-layer MLP forward pass (MatMul → Add(bias, broadcast) → Relu → MatMul)
//! translated by the plugins and executed on the device, buffers staying on the device between
//! ops, checked against an independent plain-Rust computation.

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;

use umd::device::BufferId;
use umd::{Dtype, Host, OpRequest, TensorDesc, data};

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
}

struct Tensor {
    desc: TensorDesc,
    buf: BufferId,
}

fn upload(host: &Host, name: &str, shape: Vec<u64>, values: &[f64]) -> anyhow::Result<Tensor> {
    let desc = TensorDesc::new(name, shape, Dtype::F32);
    let buf = host.alloc(&desc)?;
    host.write(buf, &data::encode(Dtype::F32, values))?;
    Ok(Tensor { desc, buf })
}

/// Translates and runs one op on device tensors, printing what happened.
fn step(host: &Host, op: &str, inputs: &[&Tensor], name: &str) -> anyhow::Result<Tensor> {
    let start = Instant::now();
    let t = host.translate(&OpRequest::new(
        op,
        inputs.iter().map(|t| t.desc.clone()).collect(),
    ))?;
    let translated = start.elapsed();
    let mut desc = t.outputs[0].clone();
    desc.name = name.to_string();
    let out = Tensor {
        buf: host.alloc(&desc)?,
        desc,
    };
    let mut bindings: Vec<BufferId> = inputs.iter().map(|t| t.buf).collect();
    bindings.push(out.buf);
    let start = Instant::now();
    host.execute(&t, &bindings, host.device().default_stream())?
        .wait()
        .with_context(|| format!("{op} failed on the device"))?;
    let executed = start.elapsed();
    let l = &t.cmdbuf.launches[0];
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
    Ok(out)
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

    let start = Instant::now();
    let tx = upload(host, "x", vec![b, i], &x)?;
    let tw1 = upload(host, "w1", vec![i, h], &w1)?;
    let tb1 = upload(host, "b1", vec![h], &b1)?;
    let tw2 = upload(host, "w2", vec![h, c], &w2)?;
    let h1 = step(host, "MatMul", &[&tx, &tw1], "h1")?;
    let h2 = step(host, "Add", &[&h1, &tb1], "h2")?;
    let h3 = step(host, "Relu", &[&h2], "h3")?;
    let y = step(host, "MatMul", &[&h3, &tw2], "y")?;
    let got = data::decode(Dtype::F32, &host.read(y.buf)?);
    let total = start.elapsed();

    let hidden = reference_layer(&x, &w1, Some(&b1), b as usize, i as usize, h as usize, true);
    let want = reference_layer(
        &hidden, &w2, None, b as usize, h as usize, c as usize, false,
    );
    let max_err = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
        .fold(0.0, f64::max);
    println!(
        "output y {}: {:?} …",
        y.desc,
        got.iter()
            .take(4)
            .map(|v| (v * 1e4).round() / 1e4)
            .collect::<Vec<_>>()
    );
    println!(
        "checked against a plain Rust reference: max relative error {max_err:.2e} over {} values; total {:.2} ms",
        got.len(),
        total.as_secs_f64() * 1e3
    );
    for t in [tx, tw1, tb1, tw2, h1, h2, h3, y] {
        host.free(t.buf)?;
    }
    if got.len() != want.len() || max_err > 1e-4 {
        bail!(
            "MISMATCH: the device result differs from the reference (max relative error {max_err:.2e})"
        );
    }
    println!("OK");
    Ok(())
}
