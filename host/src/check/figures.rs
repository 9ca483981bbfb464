//! The figures half of `umd check` (DESIGN §6), on a CUDA device: host cost per launch against a
//! bare `cuLaunchKernel`, allocator hit against raw `cuMemAlloc`+`cuMemFree`, elementwise Add
//! bandwidth at 256 MiB against a device-to-device copy, MatMul f32 4096³ TFLOP/s.
//!
//! Every loop is timed on the host between synchronized streams, after a warm-up, and stops
//! when it has its iterations or [`CheckOptions::figure_time`](super::CheckOptions) is spent.
//! A figure that cannot be measured carries the reason instead. The baselines are the CUDA
//! device's own timing helpers (`device::cuda` `timing`).

/// A bound on a [`Comparison`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// `umd / baseline` at most this.
    RatioAtMost(f64),
    /// `umd / baseline` at least this.
    RatioAtLeast(f64),
    /// The umd figure itself at most this (in its unit).
    ValueAtMost(f64),
}

impl Budget {
    pub fn met(&self, c: &Comparison) -> bool {
        match *self {
            Budget::RatioAtMost(b) => c.ratio <= b,
            Budget::RatioAtLeast(b) => c.ratio >= b,
            Budget::ValueAtMost(b) => c.umd <= b,
        }
    }
}

/// A umd figure next to its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// `µs per launch`, `µs per alloc+free`, `GB/s`.
    pub unit: &'static str,
    /// What umd's figure measures.
    pub umd_path: &'static str,
    pub umd: f64,
    /// What the baseline measures.
    pub baseline_path: &'static str,
    pub baseline: f64,
    /// `umd / baseline`.
    pub ratio: f64,
    pub budget: Budget,
    /// Iterations timed (umd, baseline).
    pub iterations: (u64, u64),
}

impl Comparison {
    pub fn within_budget(&self) -> bool {
        self.budget.met(self)
    }
}

/// A throughput figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    pub unit: &'static str,
    pub value: f64,
    pub iterations: u64,
    /// Seconds per iteration.
    pub seconds_each: f64,
}

/// The figures of one GPU; each is the figure or why it could not be measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// The GPU, as `umd devices` shows it.
    pub gpu: String,
    /// Host cost per launch: `submit` of a translated f32 Add of 256 elements.
    pub launch: Result<Comparison, String>,
    /// Allocator hit: alloc+free of 1 MiB through the device.
    pub alloc: Result<Comparison, String>,
    /// Elementwise f32 Add with 256 MiB inputs.
    pub add_bandwidth: Result<Comparison, String>,
    /// MatMul f32 4096×4096×4096.
    pub matmul: Result<Throughput, String>,
}

/// Measures the figures when the host's device is a CUDA device; otherwise `None` and why.
pub(super) fn measure(host: &crate::Host, opts: &super::CheckOptions) -> (Option<Figures>, String) {
    let device: &dyn crate::device::Device = &**host.device();
    let any: &dyn std::any::Any = device;
    #[cfg(feature = "cuda")]
    if let Some(cuda) = any.downcast_ref::<crate::device::cuda::CudaDevice>() {
        return (
            Some(gpu::measure(host, cuda, opts.figure_time)),
            "host-timed between synchronized streams, after a warm-up".into(),
        );
    }
    let _ = (any, opts);
    let why = if cfg!(feature = "cuda") {
        format!(
            "not measured: they need a CUDA device (this check ran on `{}`; use --device cuda:N)",
            device.name()
        )
    } else {
        "not measured: they need a CUDA device (this umd was built without the `cuda` feature)"
            .to_string()
    };
    (None, why)
}

#[cfg(feature = "cuda")]
mod gpu;
