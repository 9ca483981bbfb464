//! Driver and NVRTC versions, and the rule that says whether they work together.
//!
//! The rule ([`check_versions`]): NVRTC writes PTX of the ISA of its own CUDA release, and a
//! driver JIT-compiles only PTX of releases up to the CUDA version it supports (older drivers
//! answer `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`; CUDA's minor-version compatibility does not
//! extend to PTX). So the driver's CUDA version must be at least NVRTC's, major *and* minor
//! (NVRTC 13.x PTX needs a CUDA 13.x driver of at least that minor, e.g. driver 580 for 13.0),
//! and at least [`MIN_DRIVER`], the oldest this backend supports.
//!
//! Owns version arithmetic and messages; reads versions only through `driver` and `nvrtc`.

use super::driver::{self, Version};
use super::nvrtc;
use crate::device::DeviceError;

/// The oldest CUDA version (as the driver reports it) this backend supports.
pub const MIN_DRIVER: Version = (12, 0);

/// `cuDriverGetVersion`'s integer (e.g. 13000, 12040) as `(major, minor)`.
pub fn from_driver_int(v: i32) -> Version {
    let v = v.max(0) as u32;
    (v / 1000, (v % 1000) / 10)
}

/// The first Linux driver branch of a CUDA release (`R580` for 13.0), for messages.
pub fn driver_branch(cuda: Version) -> Option<u32> {
    Some(match cuda {
        (13, 0) => 580,
        (12, 9) => 575,
        (12, 8) => 570,
        (12, 6) => 560,
        (12, 5) => 555,
        (12, 4) => 550,
        (12, 3) => 545,
        (12, 2) => 535,
        (12, 1) => 530,
        (12, 0) => 525,
        _ => return None,
    })
}

fn needs(cuda: Version) -> String {
    match driver_branch(cuda) {
        Some(b) => format!("a driver for CUDA {}.{} or newer (R{b}+)", cuda.0, cuda.1),
        None => format!("a driver for CUDA {}.{} or newer", cuda.0, cuda.1),
    }
}

/// Whether a driver supporting CUDA `driver` can run this backend (`required`, normally
/// [`MIN_DRIVER`]) and load the PTX of NVRTC `nvrtc`. See the module docs for the rule.
pub fn check_versions(driver: Version, nvrtc: Version, required: Version) -> Result<(), String> {
    let (d, n, r) = (driver, nvrtc, required);
    if d < r {
        return Err(format!(
            "the NVIDIA driver supports CUDA {}.{}, this umd needs {}: update the NVIDIA driver",
            d.0,
            d.1,
            needs(r)
        ));
    }
    if d < n {
        return Err(format!(
            "the NVIDIA driver supports CUDA {}.{}, but NVRTC {}.{} writes PTX that needs {}: \
             update the NVIDIA driver, or use an NVRTC no newer than {}.{} (LD_LIBRARY_PATH)",
            d.0,
            d.1,
            n.0,
            n.1,
            needs(n),
            d.0,
            d.1
        ));
    }
    Ok(())
}

/// Whether NVRTC (`nvrtc`, compiling for the real architectures `supported`, as
/// `major * 10 + minor`) can compile for compute capability `cc`.
pub fn check_arch(cc: Version, supported: &[u32], nvrtc: Version) -> Result<(), String> {
    let arch = cc.0 * 10 + cc.1;
    if supported.contains(&arch) {
        return Ok(());
    }
    let range = match (supported.iter().min(), supported.iter().max()) {
        (Some(lo), Some(hi)) => format!("sm_{lo}…sm_{hi}"),
        _ => "no architecture".into(),
    };
    Err(format!(
        "NVRTC {}.{} cannot compile for sm_{arch} (it supports {range}): use an NVRTC release \
         that supports this GPU",
        nvrtc.0, nvrtc.1
    ))
}

/// Reads the driver's CUDA version and, when NVRTC is found, where and which.
pub fn read() -> Result<(Version, Option<nvrtc::Found>), DeviceError> {
    let driver = driver::driver_version()?;
    Ok((driver, nvrtc::locate(None).ok().cloned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_ints_decode() {
        assert_eq!(from_driver_int(13000), (13, 0));
        assert_eq!(from_driver_int(12040), (12, 4));
        assert_eq!(from_driver_int(12090), (12, 9));
        assert_eq!(from_driver_int(-1), (0, 0));
    }

    #[test]
    fn matching_and_older_nvrtc_pass() {
        assert_eq!(check_versions((13, 0), (13, 0), MIN_DRIVER), Ok(()));
        assert_eq!(check_versions((13, 0), (12, 8), MIN_DRIVER), Ok(()));
        assert_eq!(check_versions((12, 4), (12, 0), MIN_DRIVER), Ok(()));
    }

    #[test]
    fn driver_older_than_nvrtc_is_refused_by_name() {
        let e = check_versions((12, 4), (13, 0), MIN_DRIVER).unwrap_err();
        assert!(e.contains("supports CUDA 12.4"), "{e}");
        assert!(e.contains("NVRTC 13.0"), "{e}");
        assert!(e.contains("R580"), "{e}");
        // Minor versions count too: 13.1 PTX does not load on a 13.0 driver.
        let e = check_versions((13, 0), (13, 1), MIN_DRIVER).unwrap_err();
        assert!(
            e.contains("NVRTC 13.1") && e.contains("CUDA 13.1 or newer"),
            "{e}"
        );
    }

    #[test]
    fn driver_older_than_required_is_refused() {
        let e = check_versions((11, 8), (11, 8), MIN_DRIVER).unwrap_err();
        assert!(
            e.contains("supports CUDA 11.8") && e.contains("R525"),
            "{e}"
        );
    }

    #[test]
    fn architectures() {
        assert_eq!(check_arch((9, 0), &[75, 80, 90, 100], (13, 0)), Ok(()));
        let e = check_arch((7, 0), &[75, 80, 90], (13, 0)).unwrap_err();
        assert!(e.contains("NVRTC 13.0 cannot compile for sm_70"), "{e}");
        assert!(e.contains("sm_75…sm_90"), "{e}");
    }
}
