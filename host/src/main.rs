//! The `umd` command line: demo, check, translate, inspect, run, plugins.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("UMD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli::Cli::parse().run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line per cause, no backtrace: errors here are for the person at the terminal.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
