//! What the machine's GPUs are: [`devices`] lists them with their architecture, memory, SM
//! count, real launch limits and the driver's and NVRTC's versions.
//!
//! Owns the description only; opens no context and allocates nothing.

use std::fmt;

use super::driver::{self, DeviceAttributes, Version};
use super::nvrtc;
use super::versions;
use crate::cmdbuf::limits::MAX_PARAM_BYTES;
use crate::device::DeviceError;
use crate::target::{Target, TargetLimits};

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The ordinal: the device is `cuda:{index}`.
    pub index: usize,
    pub name: String,
    /// `sm_XY`.
    pub arch: String,
    pub compute_capability: Version,
    pub total_memory: u64,
    pub sm_count: u32,
    /// The launch limits the device reports.
    pub limits: TargetLimits,
    /// The CUDA version the driver supports.
    pub driver_cuda: Version,
    /// NVRTC's version and where it was found; `None` when it was not.
    pub nvrtc: Option<nvrtc::Found>,
}

impl DeviceInfo {
    pub fn new(
        index: usize,
        a: DeviceAttributes,
        driver_cuda: Version,
        nvrtc: Option<nvrtc::Found>,
    ) -> Self {
        let (major, minor) = a.compute_capability;
        DeviceInfo {
            index,
            arch: format!("sm_{major}{minor}"),
            compute_capability: a.compute_capability,
            total_memory: a.total_memory,
            sm_count: a.sm_count,
            limits: TargetLimits {
                max_threads_per_block: a.max_threads_per_block,
                max_block_dims: a.max_block_dims,
                max_grid_dims: a.max_grid_dims,
                max_shared_memory: a.max_shared_memory_per_block,
                warp_size: a.warp_size,
                sm_count: a.sm_count,
                // The command-buffer format's limit, which is also CUDA's classic one.
                max_param_bytes: MAX_PARAM_BYTES as u32,
            },
            name: a.name,
            driver_cuda,
            nvrtc,
        }
    }

    /// The target plans for this device are made for: `cuda:sm_XY` with its real limits.
    pub fn target(&self) -> Target {
        Target {
            name: format!("cuda:{}", self.arch),
            arch: self.arch.clone(),
            limits: self.limits,
        }
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gib = self.total_memory as f64 / (1u64 << 30) as f64;
        let (dm, dn) = self.driver_cuda;
        write!(
            f,
            "cuda:{}  {}  {}  {gib:.1} GiB  {} SMs  driver supports CUDA {dm}.{dn}  ",
            self.index, self.name, self.arch, self.sm_count
        )?;
        match &self.nvrtc {
            Some(found) => write!(f, "{found}"),
            None => f.write_str("NVRTC not found (prebuilt kernels only)"),
        }
    }
}

/// Every CUDA device of the machine (empty when the driver sees none); a clear error when the
/// driver library is missing.
pub fn devices() -> Result<Vec<DeviceInfo>, DeviceError> {
    let (driver_cuda, nvrtc) = versions::read()?;
    (0..driver::device_count()?)
        .map(|i| {
            let a = driver::device_attributes(i)?;
            Ok(DeviceInfo::new(i, a, driver_cuda, nvrtc.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Dim3;

    #[test]
    fn info_from_attributes() {
        let a = DeviceAttributes {
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            total_memory: 150 << 30,
            sm_count: 132,
            max_threads_per_block: 1024,
            max_block_dims: Dim3::new(1024, 1024, 64),
            max_grid_dims: Dim3::new(i32::MAX as u32, 65535, 65535),
            max_shared_memory_per_block: 48 << 10,
            warp_size: 32,
        };
        let found = nvrtc::Found {
            path: Some("/opt/nvrtc/libnvrtc.so.13".into()),
            version: (13, 0),
        };
        let info = DeviceInfo::new(0, a, (13, 0), Some(found));
        let t = info.target();
        assert_eq!((t.name.as_str(), t.arch.as_str()), ("cuda:sm_90", "sm_90"));
        assert_eq!(t.limits, TargetLimits::cuda(132, 48 << 10));
        let line = info.to_string();
        assert!(
            line.starts_with("cuda:0  NVIDIA H200  sm_90  150.0 GiB  132 SMs"),
            "{line}"
        );
        assert!(
            line.ends_with("driver supports CUDA 13.0  NVRTC 13.0 (/opt/nvrtc/libnvrtc.so.13)"),
            "{line}"
        );
    }

    #[test]
    fn devices_is_a_clean_error_without_a_driver() {
        // On a machine with a driver this lists GPUs (or none); it never panics.
        match devices() {
            Ok(list) => assert!(driver::driver_present(), "{list:?}"),
            Err(e) => {
                if !driver::driver_present() {
                    let msg = e.to_string();
                    assert!(
                        msg.contains("libcuda.so") && msg.contains("install the NVIDIA driver"),
                        "{msg}"
                    );
                }
            }
        }
    }
}
