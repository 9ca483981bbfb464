//! (ABI 1.3) The `device-code` export: modules shipped as PTX (and a cubin for one architecture)
//! instead of CUDA C. Looked up by export index (older plugins lack it and ship CUDA C through
//! `operator.kernel-source`); wasmtime checks the function type when it is looked up. The sizes
//! of what comes back are bounded here, before the device sees it.

use wasmtime::component::{Component, ComponentExportIndex, ComponentType, Lift};

use super::bindings::wit;

/// Largest PTX text or cubin image a plugin may ship for one module.
pub const MAX_IMAGE_BYTES: usize = 64 << 20;

/// `device-code.module-image`.
#[derive(ComponentType, Lift, Debug, Clone)]
#[component(record)]
pub struct ModuleImage {
    pub ptx: String,
    pub cubin: Option<Vec<u8>>,
    #[component(name = "entry-points")]
    pub entry_points: Vec<String>,
}

/// The result type of `device-code.device-module`.
pub type DeviceModuleResult = Result<Option<ModuleImage>, wit::OpError>;

impl ModuleImage {
    /// Refuses an image over [`MAX_IMAGE_BYTES`], without entry points, or whose PTX defines
    /// none of them.
    pub fn check(&self) -> Result<(), String> {
        if self.ptx.len() > MAX_IMAGE_BYTES
            || self
                .cubin
                .as_ref()
                .is_some_and(|c| c.len() > MAX_IMAGE_BYTES)
        {
            return Err(format!(
                "module image over {MAX_IMAGE_BYTES} bytes (PTX {} bytes, cubin {} bytes)",
                self.ptx.len(),
                self.cubin.as_ref().map_or(0, Vec::len)
            ));
        }
        if self.entry_points.is_empty() {
            return Err("module image names no entry point".into());
        }
        if let Some(e) = self
            .entry_points
            .iter()
            .find(|e| !self.ptx.contains(&format!(".entry {e}")))
        {
            return Err(format!("module image's PTX has no `.entry {e}`"));
        }
        Ok(())
    }
}

/// Where `device-module` is in a component (1.3 and later).
pub fn find(component: &Component, abi: &semver::Version) -> Option<ComponentExportIndex> {
    let iface = component.get_export_index(None, &*format!("umd:plugin/device-code@{abi}"))?;
    component.get_export_index(Some(&iface), "device-module")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(ptx: &str, entries: &[&str]) -> ModuleImage {
        ModuleImage {
            ptx: ptx.into(),
            cubin: None,
            entry_points: entries.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn images_are_checked_before_a_device_sees_them() {
        let ptx =
            ".version 9.0\n.target sm_80\n.visible .entry k(\n.param .u64 k_param_0\n)\n{ ret; }";
        assert!(image(ptx, &["k"]).check().is_ok());
        assert!(
            image(ptx, &[])
                .check()
                .unwrap_err()
                .contains("no entry point")
        );
        assert!(
            image(ptx, &["k", "j"])
                .check()
                .unwrap_err()
                .contains("`.entry j`")
        );
        let mut big = image(ptx, &["k"]);
        big.cubin = Some(vec![0; MAX_IMAGE_BYTES + 1]);
        assert!(big.check().unwrap_err().contains("over"));
    }
}
