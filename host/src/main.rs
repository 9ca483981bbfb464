//! The `umd` command line: demo, check, translate, inspect, run, plugins.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    fix_malloc_thresholds();
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
/// soak`, BENCHMARKS.md). Fixed thresholds stop the adjustment: allocations of 1 MiB and more
/// are mapped and unmapped whole; smaller ones — the CPU device's 256 KiB `kernel-io` chunks,
/// allocated and freed on every read — come from the heap, which keeps up to 4 MiB at its top
/// instead of returning it, so they do not fault their pages in again on every launch (with
/// glibc's 128 KiB default each chunk was a fresh mapping: 8 % of a ResNet-50 run in page
/// faults). An operator who sets `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` keeps
/// theirs (both unset: both pinned).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_malloc_thresholds() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some()
    {
        return;
    }
    // SAFETY: `mallopt` only sets parameters of glibc's allocator; it is called first thing in
    // `main`, before this process starts any thread, and takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_malloc_thresholds() {}
