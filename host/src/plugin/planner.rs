//! The ABI 1.2 `planner` export: ONNX-complete planning (constant input values, absent inputs,
//! outputs wanted, domain and opset), per-op signatures and tolerances; and its ABI 1.4 twin
//! `planner2` (the same over `dtype2`, which adds the packed sub-byte types). Looked up by export
//! index (1.0 and 1.1 plugins lack both and are planned through `operator.plan`, 1.2 and 1.3
//! plugins lack `planner2`, 1.4 plugins `planner3`: 1.5 adds string tensors); wasmtime checks the function types when they are looked up.

use wasmtime::component::{Component, ComponentExportIndex};

/// Where the `planner` functions are in a component.
#[derive(Debug, Clone, Copy)]
pub struct Exports {
    pub signatures: ComponentExportIndex,
    pub plan: ComponentExportIndex,
    pub tolerance: ComponentExportIndex,
}

impl Exports {
    /// The `planner` export of a plugin built for ABI `abi`, if it has one (1.2 and later).
    pub fn find(component: &Component, abi: &semver::Version) -> Option<Exports> {
        let iface = component.get_export_index(None, &*format!("umd:plugin/planner@{abi}"))?;
        Some(Exports {
            signatures: component.get_export_index(Some(&iface), "signatures")?,
            plan: component.get_export_index(Some(&iface), "plan")?,
            tolerance: component.get_export_index(Some(&iface), "tolerance")?,
        })
    }
}

/// Where the `planner2` functions are in a component (ABI 1.4).
#[derive(Debug, Clone, Copy)]
pub struct Exports2 {
    pub plan: ComponentExportIndex,
    pub tolerance: ComponentExportIndex,
}

impl Exports2 {
    /// The `planner2` export of a plugin built for ABI `abi`, if it has one (1.4 and later).
    pub fn find(component: &Component, abi: &semver::Version) -> Option<Exports2> {
        let iface = component.get_export_index(None, &*format!("umd:plugin/planner2@{abi}"))?;
        Some(Exports2 {
            plan: component.get_export_index(Some(&iface), "plan")?,
            tolerance: component.get_export_index(Some(&iface), "tolerance")?,
        })
    }
}

/// Where the `planner3` functions are in a component (ABI 1.5: string tensors).
#[derive(Debug, Clone, Copy)]
pub struct Exports3 {
    pub plan: ComponentExportIndex,
    pub tolerance: ComponentExportIndex,
}

impl Exports3 {
    /// The `planner3` export of a plugin built for ABI `abi`, if it has one (1.5 and later).
    pub fn find(component: &Component, abi: &semver::Version) -> Option<Exports3> {
        let iface = component.get_export_index(None, &*format!("umd:plugin/planner3@{abi}"))?;
        Some(Exports3 {
            plan: component.get_export_index(Some(&iface), "plan")?,
            tolerance: component.get_export_index(Some(&iface), "tolerance")?,
        })
    }
}
