//! The ABI 1.2 `planner` export: ONNX-complete planning (constant input values, absent inputs,
//! outputs wanted, domain and opset), per-op signatures and tolerances. Looked up by export
//! index (1.0 and 1.1 plugins lack it and are planned through `operator.plan`); wasmtime checks
//! the function types when they are looked up.

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
