//! `umd check`: the device (`--device`) against the CPU reference on every loaded plugin's ops,
//! then the GPU figures; prints the report and writes it as text and JSON. Exits non-zero when
//! any case fails, a plugin was refused, or no case ran (unless `--allow-empty`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

use umd::Host;
use umd::check::{self, CheckOptions};

#[derive(Args)]
pub struct CheckArgs {
    /// Folder the report is written to (check.txt, check.json); created if missing.
    #[arg(long, default_value = "umd-check")]
    out: PathBuf,
    /// Random input sets per case.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    seeds: u32,
    /// Factors every input dimension of a case is multiplied by.
    #[arg(long, value_delimiter = ',', default_value = "1,7,33",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    scales: Vec<u64>,
    /// Skip the GPU figures (correctness only).
    #[arg(long)]
    no_figures: bool,
    /// Longest time, in seconds, spent measuring one figure.
    #[arg(long, default_value_t = 3.0)]
    figure_seconds: f64,
    /// Succeed even when no case ran (by default that fails: nothing was checked).
    #[arg(long)]
    allow_empty: bool,
}

pub fn run(host: &Host, args: &CheckArgs) -> anyhow::Result<()> {
    if !(args.figure_seconds > 0.0 && args.figure_seconds <= 600.0) {
        bail!("--figure-seconds must be in (0, 600]");
    }
    let mut scales = args.scales.clone();
    scales.sort_unstable();
    scales.dedup();
    let opts = CheckOptions {
        seeds: args.seeds,
        scales,
        figures: !args.no_figures,
        figure_time: Duration::from_secs_f64(args.figure_seconds),
    };
    let report = check::run(host, &args.out, &opts)
        .with_context(|| format!("umd check on {}", host.device().name()))?;
    print!("{}", report.text());
    println!("report written to {}", args.out.display());
    verdict(host, &report, args.allow_empty)
}

/// Fails on a failing case, a plugin refused at load, or (unless allowed) no case at all.
fn verdict(host: &Host, report: &check::CheckReport, allow_empty: bool) -> anyhow::Result<()> {
    if !report.passed() {
        bail!(
            "{} of {} cases differ from the reference",
            report.failed(),
            report.cases.len()
        );
    }
    let refused: Vec<String> = host
        .plugin_status()
        .into_iter()
        .filter_map(|p| p.status.err().map(|e| format!("{}: {e}", p.origin)))
        .collect();
    if !refused.is_empty() {
        bail!(
            "{} plugin(s) refused at load: {}",
            refused.len(),
            refused.join("; ")
        );
    }
    if report.cases.is_empty() && !allow_empty {
        bail!("no case ran: nothing was checked (pass --allow-empty if that is intended)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    #[test]
    fn arguments() {
        assert!(Cli::try_parse_from(["umd", "--device", "cuda:0", "check", "--out", "r"]).is_ok());
        assert!(Cli::try_parse_from(["umd", "check", "--seeds", "2", "--scales", "7,1"]).is_ok());
        assert!(Cli::try_parse_from(["umd", "check", "--seeds", "0"]).is_err());
        assert!(Cli::try_parse_from(["umd", "check", "--scales", "0"]).is_err());
        assert!(Cli::try_parse_from(["umd", "--no-bundled", "check", "--allow-empty"]).is_ok());
        assert!(Cli::try_parse_from(["umd", "plugins", "--allow-empty"]).is_ok());
        assert!(
            Cli::try_parse_from([
                "umd", "plugins", "source", "Add", "-i", "f32[2]", "-i", "f32[2]"
            ])
            .is_ok()
        );
    }
}
