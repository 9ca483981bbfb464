//! Targets: the device a plan is made for (`cpu`, `cuda:sm_90`, …), its launch limits, and how
//! a plugin's declared target strings match a request's target.

use std::fmt;

use crate::error::RequestError;

/// Three dimensions (x fastest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }
    /// x·y·z, saturating at `u64::MAX` (three `u32`s can overflow a `u64`: found by fuzzing
    /// plan validation, where a wrapped block volume could slip under a thread limit).
    pub fn volume(&self) -> u64 {
        (self.x as u64)
            .saturating_mul(self.y as u64)
            .saturating_mul(self.z as u64)
    }
    /// True when any dimension exceeds `max`'s.
    pub fn exceeds(&self, max: &Dim3) -> bool {
        self.x > max.x || self.y > max.y || self.z > max.z
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// What a device can launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TargetLimits {
    pub max_threads_per_block: u32,
    pub max_block_dims: Dim3,
    pub max_grid_dims: Dim3,
    pub max_shared_memory: u32,
    pub warp_size: u32,
    pub sm_count: u32,
    pub max_param_bytes: u32,
}

impl TargetLimits {
    /// The limits of every CUDA device since compute capability 3.0 (the SM count varies).
    pub const fn cuda(sm_count: u32, max_shared_memory: u32) -> Self {
        TargetLimits {
            max_threads_per_block: 1024,
            max_block_dims: Dim3::new(1024, 1024, 64),
            max_grid_dims: Dim3::new(i32::MAX as u32, 65535, 65535),
            max_shared_memory,
            warp_size: 32,
            sm_count,
            max_param_bytes: 4096,
        }
    }
}

/// The CPU target's architecture (and name).
pub const CPU_ARCH: &str = "cpu";

/// A device a plan is made for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// `cpu` or `cuda:sm_XY`.
    pub name: String,
    /// `cpu` or `sm_XY`.
    pub arch: String,
    pub limits: TargetLimits,
}

impl Target {
    /// The embedded CPU device's target: CUDA-shaped limits, so plans are portable.
    pub fn cpu() -> Target {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        Target {
            name: CPU_ARCH.into(),
            arch: CPU_ARCH.into(),
            limits: TargetLimits::cuda(cores, 48 * 1024),
        }
    }

    /// A CUDA target for an architecture like `sm_90`, with nominal limits (a real device
    /// replaces them with what it reports).
    pub fn cuda(arch: &str) -> Target {
        Target {
            name: format!("cuda:{arch}"),
            arch: arch.to_string(),
            limits: TargetLimits::cuda(132, 48 * 1024),
        }
    }

    /// Parses `cpu`, `cuda:sm_90` or `sm_90`.
    pub fn parse(s: &str) -> Result<Target, RequestError> {
        let max = crate::cmdbuf::limits::MAX_STRING;
        if s.len() > max {
            return Err(RequestError::Target(format!(
                "target `{:.32}…` has {} bytes, the maximum is {max}",
                s,
                s.len()
            )));
        }
        let s = s.trim().to_ascii_lowercase();
        if s == "cpu" {
            return Ok(Target::cpu());
        }
        let arch = s.strip_prefix("cuda:").unwrap_or(&s);
        let valid = arch
            .strip_prefix("sm_")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()));
        if valid {
            Ok(Target::cuda(arch))
        } else {
            Err(RequestError::Target(format!(
                "unknown target `{s}` (expected `cpu` or `cuda:sm_XY`)"
            )))
        }
    }

    /// The device family: `cpu` or `cuda`.
    pub fn family(&self) -> &str {
        self.name.split(':').next().unwrap_or(&self.name)
    }

    /// How specifically a plugin's declared target string serves this target:
    /// exact name 3, family 2, `*` 1; `None` when it does not serve it.
    pub fn specificity(&self, declared: &str) -> Option<u8> {
        let declared = declared.trim().to_ascii_lowercase();
        if declared == self.name {
            Some(3)
        } else if declared == self.family() {
            Some(2)
        } else if declared == "*" {
            Some(1)
        } else {
            None
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_saturates_instead_of_overflowing() {
        assert_eq!(Dim3::new(2, 3, 4).volume(), 24);
        assert_eq!(
            Dim3::new(u32::MAX, u32::MAX, 1).volume(),
            (u32::MAX as u64).pow(2)
        );
        assert_eq!(Dim3::new(u32::MAX, u32::MAX, u32::MAX).volume(), u64::MAX);
        assert_eq!(
            Dim3::new(1 << 31, 1 << 31, 4).volume(),
            u64::MAX,
            "2^64 is not 0"
        );
    }

    #[test]
    fn parsing_and_matching() {
        let t = Target::parse("CUDA:sm_90").unwrap();
        assert_eq!(
            (t.name.as_str(), t.arch.as_str(), t.family()),
            ("cuda:sm_90", "sm_90", "cuda")
        );
        assert_eq!(Target::parse("sm_80").unwrap().name, "cuda:sm_80");
        assert!(Target::parse("tpu").is_err());
        assert!(Target::parse("cuda:").is_err());
        assert_eq!(t.specificity("cuda:sm_90"), Some(3));
        assert_eq!(t.specificity("cuda"), Some(2));
        assert_eq!(t.specificity("*"), Some(1));
        assert_eq!(t.specificity("cuda:sm_80"), None);
        assert_eq!(t.specificity("cpu"), None);
        assert_eq!(Target::cpu().specificity("cpu"), Some(3));
    }
}
