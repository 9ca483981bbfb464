//! The `umd` command line: demo, check, translate, inspect, run, plugins.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    fix_malloc_mmap_threshold();
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

/// glibc's malloc raises its mmap threshold after each large free (up to 32 MiB); from then on
/// the large short-lived buffers of plugin loading and compilation come from the heap and
/// fragment it: a long-running `umd serve` grew ~2.5 MiB of RSS per plugin hot swap (`umd bench
/// soak`, BENCHMARKS.md). A fixed threshold — glibc's default, 128 KiB — stops the adjustment,
/// as `MALLOC_MMAP_THRESHOLD_=131072` does (an operator who sets that variable keeps theirs).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_malloc_mmap_threshold() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
        return;
    }
    // SAFETY: `mallopt` only sets a parameter of glibc's allocator; it is called first thing in
    // `main`, before this process starts any thread, and takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_malloc_mmap_threshold() {}
