//! `umd check`: the device (`--device`) against the CPU reference on every loaded plugin's ops,
//! then the GPU figures; prints the report and writes it as text and JSON. Exits non-zero when
//! any case fails.

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
    /// Succeed even when no plugin is loaded and no case ran.
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
    super::plugins_usable(host, args.allow_empty)?;
    if report.cases.is_empty() && !args.allow_empty {
        bail!("no case ran (pass --allow-empty if that is expected)");
    }
    if !report.passed() {
        bail!(
            "{} of {} cases differ from the reference",
            report.failed(),
            report.cases.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    /// A junk `.wasm` in a plugin folder is refused: `umd plugins` and `umd check` fail; with no
    /// plugin at all they fail unless `--allow-empty`.
    #[test]
    fn refused_plugins_and_empty_checks_fail() {
        let dir = std::env::temp_dir().join(format!("umd-cli-test-{}", std::process::id()));
        let junk = dir.join("junk");
        std::fs::create_dir_all(&junk).unwrap();
        std::fs::write(junk.join("bad.wasm"), b"not wasm").unwrap();
        let out = dir.join("report").display().to_string();
        let junk = junk.display().to_string();
        let run = |args: &[&str]| Cli::try_parse_from(args).unwrap().run();
        let e = run(&["umd", "--no-bundled", "--plugins", &junk, "plugins"]).unwrap_err();
        assert!(e.to_string().contains("1 plugin(s) refused"), "{e}");
        let e = run(&[
            "umd",
            "--no-bundled",
            "--plugins",
            &junk,
            "check",
            "--no-figures",
            "--out",
            &out,
            "--allow-empty",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("refused"), "{e}");
        let e = run(&["umd", "--no-bundled", "plugins"]).unwrap_err();
        assert!(e.to_string().contains("no plugin is loaded"), "{e}");
        run(&["umd", "--no-bundled", "plugins", "--allow-empty"]).unwrap();
        let e = run(&[
            "umd",
            "--no-bundled",
            "check",
            "--no-figures",
            "--out",
            &out,
        ])
        .unwrap_err();
        assert!(e.to_string().contains("no plugin is loaded"), "{e}");
        run(&[
            "umd",
            "--no-bundled",
            "check",
            "--no-figures",
            "--out",
            &out,
            "--allow-empty",
        ])
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn arguments() {
        assert!(Cli::try_parse_from(["umd", "--device", "cuda:0", "check", "--out", "r"]).is_ok());
        assert!(Cli::try_parse_from(["umd", "check", "--seeds", "2", "--scales", "7,1"]).is_ok());
        assert!(Cli::try_parse_from(["umd", "check", "--seeds", "0"]).is_err());
        assert!(Cli::try_parse_from(["umd", "check", "--scales", "0"]).is_err());
    }
}
