//! `umd check`: the host's device against its CPU reference, then the GPU figures of DESIGN §6.
//!
//! **Correctness** (`cases`): the host knows no operator, so the requests come from every
//! loaded plugin's self-test cases — their inputs and attributes, put to every op the plugin
//! offers, in every dtype (when the inputs share one), with every input dimension scaled by each
//! of [`CheckOptions::scales`]. A variant the plugin declines for the CPU is skipped, not failed.
//! Each remaining one is translated for the device and for `cpu`, run on both with the same
//! random inputs (one set per seed) and compared element-wise within the dtype's tolerance
//! ([`compare`]).
//!
//! **Figures** ([`figures`]): on a CUDA device only — host cost per launch against a bare
//! launch, allocator hit against a raw allocation, Add bandwidth against a device copy, MatMul
//! TFLOP/s. Elsewhere they are `None`, with the reason.
//!
//! The [`CheckReport`] is written as `check.txt` and `check.json` (`report`) and returned.

mod cases;
pub mod compare;
pub mod figures;
mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::Host;
use crate::tensor::TensorDesc;
pub use cases::case_requests;
pub use figures::{Budget, Comparison, Figures, Throughput};
/// JSON literals (the report's; `umd run-model` writes maps with them).
pub use report::{esc as json_string, num as json_number};

/// What `umd check` does.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOptions {
    /// Random input sets per case.
    pub seeds: u32,
    /// Factors every input dimension of a case is multiplied by (1: the case's own shapes).
    pub scales: Vec<u64>,
    /// Measure the figures (on a CUDA device).
    pub figures: bool,
    /// Longest time spent on one figure's measurement loop (each stops earlier when it has
    /// its iterations).
    pub figure_time: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            seeds: 3,
            scales: vec![1, 7, 33],
            figures: true,
            figure_time: Duration::from_secs(3),
        }
    }
}

/// One checked request: a plugin's op on some input shapes, over every seed.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// `plugin op inputs (from "self-test case", ×scale)`.
    pub name: String,
    /// `name@version` of the plugin planning it.
    pub plugin: String,
    pub op: String,
    pub inputs: Vec<TensorDesc>,
    /// The self-test case its inputs and attributes come from.
    pub source: String,
    /// The factor its dimensions were scaled by.
    pub scale: u64,
    /// Seeds run (all of them unless one failed).
    pub seeds: u32,
    /// Largest `|device - reference| / (1 + |reference|)` over every output element and seed.
    pub max_error: f64,
    pub tolerance: f64,
    /// Why it failed (`None`: passed).
    pub failure: Option<String>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// What `umd check` found.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReport {
    /// The device checked (`cpu`, `cuda:0`) and its target.
    pub device: String,
    pub target: String,
    /// The reference device.
    pub reference: String,
    pub seeds: u32,
    pub scales: Vec<u64>,
    pub cases: Vec<CaseResult>,
    /// Variants the plugins declined for the CPU (not failures).
    pub skipped: usize,
    /// Variants a plugin planned for the CPU but declined for the device: `(name, reason)`.
    pub declined_on_device: Vec<(String, String)>,
    /// `plugin op` for every offered op no variant ran for.
    pub uncovered: Vec<String>,
    /// `None` when not measured; see `figures_note`.
    pub figures: Option<Figures>,
    /// Why the figures are missing, or how they were measured.
    pub figures_note: String,
    pub elapsed: Duration,
}

impl CheckReport {
    /// Every case passed.
    pub fn passed(&self) -> bool {
        self.cases.iter().all(CaseResult::passed)
    }
    pub fn failed(&self) -> usize {
        self.cases.iter().filter(|c| !c.passed()).count()
    }
    /// The report for a person (what `check.txt` holds).
    pub fn text(&self) -> String {
        report::text(self)
    }
    /// The report as JSON (what `check.json` holds).
    pub fn json(&self) -> String {
        report::json(self)
    }
}

/// Why `umd check` could not finish (failing cases are not errors: they are in the report).
#[derive(Debug, Error)]
pub enum CheckError {
    #[error("cannot write the report to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Runs the check on `host`'s device and writes `check.txt` and `check.json` into `out_dir`
/// (created if missing).
pub fn run(host: &Host, out_dir: &Path, opts: &CheckOptions) -> Result<CheckReport, CheckError> {
    let start = Instant::now();
    let found = cases::run_all(host, opts);
    let (figures, figures_note) = if opts.figures {
        figures::measure(host, opts)
    } else {
        (None, "not measured (figures were turned off)".to_string())
    };
    let device = host.device();
    let report = CheckReport {
        device: device.name().to_string(),
        target: device.target().name.clone(),
        reference: host.reference_device().name().to_string(),
        seeds: opts.seeds,
        scales: opts.scales.clone(),
        cases: found.cases,
        skipped: found.skipped,
        declined_on_device: found.declined_on_device,
        uncovered: found.uncovered,
        figures,
        figures_note,
        elapsed: start.elapsed(),
    };
    write(out_dir, &report)?;
    Ok(report)
}

fn write(out_dir: &Path, report: &CheckReport) -> Result<(), CheckError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CheckError::Write { path, source }
    };
    std::fs::create_dir_all(out_dir).map_err(err(out_dir))?;
    for (name, body) in [("check.txt", report.text()), ("check.json", report.json())] {
        let path = out_dir.join(name);
        std::fs::write(&path, body).map_err(err(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
