//! The `run-cpu` call with borrowed inputs: buffer contents are lowered straight from device
//! memory into the instance, with no intermediate copy (the generated bindings would take
//! owned `Vec`s). The types mirror `cpu-call` / `cpu-buffer` field for field; wasmtime checks
//! them against the component's function type when the function is looked up.

use wasmtime::component::{ComponentType, Lower};

use super::bindings::wit;

/// `cpu-buffer`, borrowing its data.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct CpuBufferRef<'a> {
    pub binding: u32,
    pub size: u64,
    pub data: &'a [u8],
}

/// `cpu-call`, borrowing everything.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct CpuCallRef<'a> {
    #[component(name = "module-id")]
    pub module_id: &'a str,
    #[component(name = "entry-point")]
    pub entry_point: &'a str,
    pub grid: wit::Dim3,
    pub block: wit::Dim3,
    pub params: &'a [u8],
    pub relocations: &'a [wit::Relocation],
    pub buffers: &'a [CpuBufferRef<'a>],
}

/// The result type of `run-cpu`.
pub type RunCpuResult = Result<Vec<wit::CpuWrite>, wit::OpError>;
