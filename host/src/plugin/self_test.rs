//! The ABI 1.1 `self-test` export: test cases a plugin declares for its admission, and tuning
//! hints. Looked up by export index (a 1.0 plugin simply lacks it); the types mirror the WIT
//! records field for field and wasmtime checks them when the functions are looked up.

use wasmtime::component::{Component, ComponentExportIndex, ComponentType, Lift};

use super::bindings::wit;

/// `test-case`.
#[derive(ComponentType, Lift, Debug, Clone)]
#[component(record)]
pub struct TestCase {
    pub name: String,
    pub op: String,
    pub inputs: Vec<wit::TensorDesc>,
    pub attributes: Vec<wit::Attribute>,
    #[component(name = "input-data")]
    pub input_data: Vec<Vec<u8>>,
    pub expected: Vec<Vec<u8>>,
    pub tolerance: f64,
}

/// `tuning-hint`.
#[derive(ComponentType, Lift, Debug, Clone, PartialEq)]
#[component(record)]
pub struct TuningHint {
    pub op: String,
    pub key: String,
    pub value: String,
}

/// Where the `self-test` functions are in a component.
#[derive(Debug, Clone, Copy)]
pub struct Exports {
    pub cases: ComponentExportIndex,
    pub hints: ComponentExportIndex,
}

impl Exports {
    /// The `self-test` export of a plugin built for ABI `abi`, if it has one (1.1 and later).
    pub fn find(component: &Component, abi: &semver::Version) -> Option<Exports> {
        let iface = component.get_export_index(None, &*format!("umd:plugin/self-test@{abi}"))?;
        Some(Exports {
            cases: component.get_export_index(Some(&iface), "cases")?,
            hints: component.get_export_index(Some(&iface), "hints")?,
        })
    }
}
