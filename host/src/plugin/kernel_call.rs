//! The CPU kernel calls with borrowed arguments: `run-cpu` (1.0–1.2) and `cpu-kernel.run` (1.3).
//! For `run-cpu`, buffer contents are lowered straight from device memory into the instance,
//! with no intermediate copy (the generated bindings would take owned `Vec`s). The types mirror
//! the WIT records field for field; wasmtime checks them against the component's function type
//! when the function is looked up — once per instance ([`Funcs`]), not per call.

use wasmtime::component::{ComponentType, Lower, TypedFunc};

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

/// (1.3) `cpu-kernel.bound-buffer`.
#[derive(ComponentType, Lower, Clone, Copy, Debug)]
#[component(record)]
pub struct BoundBufferRef {
    pub binding: u32,
    pub size: u64,
}

/// (1.3) `cpu-kernel.block-range`.
#[derive(ComponentType, Lower, Clone, Copy, Debug)]
#[component(record)]
pub struct BlockRangeRef {
    pub first: u64,
    pub count: u64,
}

/// (1.3) `cpu-kernel.kernel-call`, borrowing everything.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct KernelCallRef<'a> {
    #[component(name = "module-id")]
    pub module_id: &'a str,
    #[component(name = "entry-point")]
    pub entry_point: &'a str,
    pub grid: wit::Dim3,
    pub block: wit::Dim3,
    pub params: &'a [u8],
    pub relocations: &'a [wit::Relocation],
    pub buffers: &'a [BoundBufferRef],
    pub blocks: BlockRangeRef,
}

/// The result type of `cpu-kernel.run`.
pub type RunKernelResult = Result<(), wit::OpError>;

/// `cpu-kernel.run`, typed. Stored with `'static` arguments; a call's borrowed arguments fit
/// because `TypedFunc` is covariant in its parameters (wasmtime copies them into the guest and
/// keeps nothing).
pub(crate) type RunInPlaceFn<'a> = TypedFunc<(&'a KernelCallRef<'a>,), (RunKernelResult,)>;
/// `run-cpu`, typed (as [`RunInPlaceFn`]).
pub(crate) type RunCpuFn<'a> = TypedFunc<(&'a CpuCallRef<'a>,), (RunCpuResult,)>;

/// An instance's CPU kernel functions, each looked up and type-checked on its first call
/// there: a launch costs no type check (the check walks the whole call record).
#[derive(Default)]
pub(crate) struct Funcs {
    pub run_in_place: Option<RunInPlaceFn<'static>>,
    pub run_cpu: Option<RunCpuFn<'static>>,
}
