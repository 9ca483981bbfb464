//! `umd plugins`: the loaded plugins (a refused one, or none at all, makes the command fail),
//! `explain` (which plugin serves a request and why), `source` (the kernel modules a plan for a
//! GPU target runs, as the plugin returns them) and `compile` (the GPU-free kernel gate, in
//! `compile`, feature `cuda`).

use anyhow::bail;
use clap::{Args, Subcommand};

use umd::translate::Outcome;
use umd::{Host, Target};

use super::{HostArgs, OpArgs};

#[derive(Args)]
pub struct PluginsArgs {
    #[command(subcommand)]
    action: Option<PluginsCommand>,
    /// Listing: succeed even when no plugin is loaded.
    #[arg(long)]
    allow_empty: bool,
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Show the candidates for a request, the winner and why (ranked by target specificity,
    /// then priority). `OP@1.2` pins the plugin version.
    Explain {
        op: String,
        #[command(flatten)]
        op_args: OpArgs,
        /// Target to plan for (`cpu`, `cuda:sm_90`).
        #[arg(long)]
        target: Option<String>,
    },
    /// Print the kernel modules (CUDA C, entry points, options) a plan of OP for a GPU target
    /// runs, as the planning plugin returns them.
    Source {
        op: String,
        #[command(flatten)]
        op_args: OpArgs,
        /// GPU target to plan for.
        #[arg(long, default_value = "cuda:sm_90")]
        target: String,
    },
    /// The kernel gate, no GPU needed: plan every self-test case of every loaded plugin (in
    /// every dtype the op accepts) for each `cuda:ARCH`, compile each module with NVRTC, and
    /// check every launch's parameter block against the kernel's PTX parameters. With `--out`,
    /// also writes the PTX and cubins in the kernel-cache format (for GPU hosts without NVRTC).
    /// Exits non-zero naming plugin, op, dtype and architecture on any failure.
    #[cfg(feature = "cuda")]
    Compile(super::compile::CompileArgs),
}

pub fn run(host_args: &HostArgs, args: PluginsArgs) -> anyhow::Result<()> {
    match args.action {
        None => list(&host_args.host()?, args.allow_empty),
        Some(PluginsCommand::Explain {
            op,
            op_args,
            target,
        }) => explain(&host_args.host()?, &op, &op_args, target),
        Some(PluginsCommand::Source {
            op,
            op_args,
            target,
        }) => source(&host_args.host()?, &op, &op_args, &target),
        #[cfg(feature = "cuda")]
        Some(PluginsCommand::Compile(c)) => super::compile::run(host_args, &c),
    }
}

fn list(host: &Host, allow_empty: bool) -> anyhow::Result<()> {
    let status = host.plugin_status();
    for p in &status {
        match &p.status {
            Ok(label) => {
                let snap = host.registry().snapshot();
                let detail = snap.by_label(label).map(|lp| {
                    format!(
                        ", loaded in {:.1} ms ({:?})",
                        lp.load_time().as_secs_f64() * 1e3,
                        lp.provenance()
                    )
                });
                println!(
                    "{label}  (ABI {})  from {}{}",
                    p.abi.as_deref().unwrap_or("?"),
                    p.origin,
                    detail.unwrap_or_default()
                );
                for (op, targets, prio) in &p.ops {
                    println!(
                        "    {op:<12} targets {:<20} priority {prio}",
                        targets.join(",")
                    );
                }
                println!("    status: loaded");
            }
            Err(e) => println!("{}\n    status: REFUSED: {e}", p.origin),
        }
    }
    let refused: Vec<&str> = status
        .iter()
        .filter(|p| p.status.is_err())
        .map(|p| p.origin.as_str())
        .collect();
    if !refused.is_empty() {
        bail!(
            "{} plugin(s) refused: {}",
            refused.len(),
            refused.join(", ")
        );
    }
    if status.is_empty() && !allow_empty {
        bail!("no plugin loaded (pass --allow-empty if that is intended)");
    }
    Ok(())
}

fn explain(host: &Host, op: &str, op_args: &OpArgs, target: Option<String>) -> anyhow::Result<()> {
    let mut req = op_args.request(op)?;
    if let Some(t) = target {
        req.target = Some(Target::parse(&t)?);
    }
    let target = req
        .target
        .clone()
        .unwrap_or_else(|| host.translator().default_target().clone());
    let rows = host.translator().explain(&req)?;
    println!(
        "{op} on {target}: {} candidate(s), best first (target specificity, then priority)",
        rows.len()
    );
    for r in &rows {
        let spec = ["", "any (*)", "family", "exact"][r.specificity as usize];
        let outcome = match &r.outcome {
            Outcome::Chosen(k) => format!("CHOSEN: kernel {k}"),
            Outcome::Declined(why) => format!("declined: {why}"),
            Outcome::Failed(e) => format!("failed: {e}"),
            Outcome::PinnedOut => "excluded by the version pin".into(),
            Outcome::NotAsked => "not asked (a better candidate decided)".into(),
        };
        println!(
            "  {:<24} target match {spec:<8} priority {:<4} {outcome}",
            r.plugin, r.priority
        );
    }
    if !rows.iter().any(|r| matches!(r.outcome, Outcome::Chosen(_))) {
        println!("  => no plugin serves it (status 2)");
    }
    Ok(())
}

fn source(host: &Host, op: &str, op_args: &OpArgs, target: &str) -> anyhow::Result<()> {
    let target = Target::parse(target)?;
    if target.family() != "cuda" {
        bail!("`{target}` runs CPU kernels inside the plugin: name a GPU target (cuda:sm_90)");
    }
    let mut req = op_args.request(op)?;
    req.target = Some(target.clone());
    let t = host.translate(&req)?;
    let mut seen = Vec::new();
    for l in &t.cmdbuf.launches {
        if seen.contains(&&l.module) {
            continue;
        }
        seen.push(&l.module);
        let src = host
            .kernel_source(&l.module, &target)
            .map_err(|e| anyhow::anyhow!("module `{}` of {}: {e}", l.module.id, l.module.plugin))?;
        println!(
            "// module `{}` of {} for {target}\n// entry points: {}\n// options: {}\n{}",
            l.module.id,
            l.module.plugin,
            src.entry_points.join(", "),
            src.options.join(" "),
            src.code
        );
    }
    if seen.is_empty() {
        println!("// the plan of {op} for {target} launches no kernel");
    }
    Ok(())
}
