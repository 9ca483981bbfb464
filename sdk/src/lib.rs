//! The umd plugin SDK: everything a plugin author needs to write an operator plugin.
//!
//! A plugin implements [`Plugin`] (describe its ops, plan a request, hand out kernel source, run a
//! launch on the CPU) and exports it with [`export_plugin!`]. The SDK supplies the WIT bindings
//! ([`bindings`], types re-exported at the root), a CUDA-compatible [`params`] packer and reader,
//! [`launch`] configuration helpers checked against the target's limits, [`shape`] helpers (numpy
//! broadcasting, overflow-checked element counts), [`dtype`] sizes and element conversion,
//! typed [`attr`] getters, and for CPU kernels [`simd`] vectors and a packed [`gemm`].
//!
//! The SDK never touches a device or the host's memory: it only builds the data the host checks.

pub mod abi12;
pub mod abi14;
pub mod attr;
pub mod cpu;
pub mod cuda;
pub mod dtype;
#[cfg(not(target_arch = "wasm32"))]
pub mod emu_vectors;
pub mod expand;
pub mod fmath;
pub mod fused;
pub mod gemm;
pub mod kernel;
pub mod lanes;
pub mod launch;
pub mod legacy;
pub mod matrix;
mod older;
#[cfg(not(target_arch = "wasm32"))]
pub mod onnx_cases;
pub mod params;
pub mod request;
pub mod shape;
pub mod simd;
pub mod stages;
pub mod strings;
pub mod testing;
pub mod vector;

/// Generated bindings of `umd:plugin@1.10.0` (the world `plugin`).
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit/umd-plugin-1.10.0",
        // the matrix unit's operands are borrowed from the kernel's memory, not copied
        ownership: Borrowing { duplicate_if_necessary: false },
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "export_plugin_world",
        default_bindings_module: "umd_sdk::bindings",
    });
}

pub use bindings::exports::umd::plugin::cpu_kernel::Guest as CpuKernelGuest;
pub use bindings::exports::umd::plugin::cpu_kernel::{BlockRange, BoundBuffer, KernelCall};
pub use bindings::exports::umd::plugin::device_code::Guest as DeviceCodeGuest;
pub use bindings::exports::umd::plugin::device_code::ModuleImage;
pub use bindings::exports::umd::plugin::expander::Guest as ExpanderGuest;
pub use bindings::exports::umd::plugin::operator::Guest;
pub use bindings::exports::umd::plugin::planner::Guest as PlannerGuest;
pub use bindings::exports::umd::plugin::planner2::Guest as Planner2Guest;
pub use bindings::exports::umd::plugin::planner3::Guest as Planner3Guest;
pub use bindings::exports::umd::plugin::planner4::Guest as Planner4Guest;
pub use bindings::exports::umd::plugin::self_test::Guest as SelfTestGuest;
pub use bindings::umd::plugin::host::LogLevel;
// The 1.5 forms are the SDK's primary names (`Dtype` has every 1.5 element type, packed
// sub-byte ones and strings included; `PlanRequestExt`, `AttrValueExt`… keep their 1.2 names);
// the 1.0/1.1 forms the legacy exports still use are `Legacy*` (see [`legacy`]), the 1.2 forms
// of the `planner` export are converted in [`abi12`], the 1.4 ones of `planner2` in [`abi14`].
pub use bindings::umd::plugin::types::{
    Access, AttrValue, AttrValue3 as AttrValueExt, Attribute, Attribute3 as AttributeExt,
    CpuBuffer, CpuCall, CpuWrite, Dim3, Dtype as LegacyDtype, Dtype3 as Dtype, ExpandRequest,
    Expansion, ExpansionNode, InputSlot3 as InputSlot, Launch, ModuleSource, OpError, OpInfo,
    OpPlan as LegacyOpPlan, OpPlan3 as OpPlan, OpPlan4 as SetupPlan, OpSignature,
    OpTolerance as Tolerance, PlanRequest, PlanRequest3 as PlanRequestExt, PluginInfo, Relocation,
    SourceLanguage, Target, TargetLimits, TensorDesc as LegacyTensorDesc,
    TensorDesc3 as TensorDesc, TensorValue3 as TensorValue, TestCase, TuningHint,
};
pub use half;

/// ABI version of the WIT package this SDK is generated from.
pub const ABI_VERSION: &str = "1.10.0";

/// What a plugin implements. [`export_plugin!`] turns it into the component's exports.
pub trait Plugin {
    /// Name, version and ops.
    fn describe() -> PluginInfo;
    /// Plans a 1.0/1.1-style `request` (its op already matched case-insensitively against
    /// `describe`). Implement this or [`Plugin::plan_ext`]; by default it calls `plan_ext`.
    fn plan(request: &PlanRequest) -> Result<OpPlan, OpError> {
        Self::plan_ext(&PlanRequestExt::from_legacy(request))
    }
    /// (ABI 1.2) Plans an ONNX-complete request: constant input values, absent inputs, outputs
    /// wanted, opset. By default it calls [`Plugin::plan`] when the request has nothing only 1.2
    /// can say, and declines otherwise.
    fn plan_ext(request: &PlanRequestExt) -> Result<OpPlan, OpError> {
        match request.to_legacy() {
            Some(legacy) => Self::plan(&legacy),
            None => Err(OpError::InvalidAttribute(format!(
                "{}: this plugin takes no absent inputs, constant values or tensor attributes",
                request.op
            ))),
        }
    }
    /// (ABI 1.4) Whether `op` takes or produces the packed sub-byte dtypes (`I4`, `U4`, `I2`,
    /// `U2`, `F4e2m1`; see [`dtype::bits`]). Default: no — the SDK then declines, before
    /// [`Plugin::plan_ext`] runs, a request with a packed input, and refuses a plan with a
    /// packed output, so a plugin that sizes tensors by [`dtype::size`] never mis-sizes one.
    fn serves_packed(_op: &str) -> bool {
        false
    }
    /// (ABI 1.5) Whether `op` takes or produces string tensors ([`Dtype::String`]: offsets then
    /// text, see [`strings`]; the host gives every string input's value). Default: no — the SDK
    /// then declines a request with a string input and refuses a plan with a string output.
    fn serves_strings(_op: &str) -> bool {
        false
    }
    /// (ABI 1.7) How many leading launches of `plan` (planned for `request`) are *setup*:
    /// launches that bind only the workspace and write into it what depends only on their
    /// parameters — a table built from the attributes — while no later launch writes the
    /// workspace. A host running the plan again on the same workspace (a compiled model, run
    /// after run) runs them once. The host refuses a plan that breaks the rule. Default: 0.
    fn setup_launches(_request: &PlanRequestExt, _plan: &OpPlan) -> u32 {
        0
    }
    /// (ABI 1.2) Per-op signatures: which inputs' values a plan needs. Default: none.
    fn signatures() -> Vec<OpSignature> {
        Vec::new()
    }
    /// (ABI 1.2) Comparison tolerance of `op` in `dtype`; `None`: the host's default.
    fn tolerance(_op: &str, _dtype: Dtype) -> Option<Tolerance> {
        None
    }
    /// Device source of a module named by one of this plugin's plans.
    fn kernel_source(module_id: &str, target: &Target) -> Result<ModuleSource, OpError>;
    /// (ABI 1.3) The module as device code — PTX, and optionally a cubin for `target.arch` —
    /// instead of CUDA C. Default: `None` (the host compiles [`Plugin::kernel_source`]).
    fn module_image(_module_id: &str, _target: &Target) -> Result<Option<ModuleImage>, OpError> {
        Ok(None)
    }
    /// Runs one launch on the CPU; returns the contents of every written binding (the ABI
    /// 1.0–1.2 path). A plugin whose kernels implement [`Plugin::run_kernel`] answers with
    /// [`kernel::run_cpu_in_memory`].
    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError>;
    /// (ABI 1.3) Runs the blocks `call.blocks` of a launch in place, reading and writing its
    /// buffers through `memory` in chunks. By default the whole grid runs through
    /// [`Plugin::run_cpu`] (whole buffers read, results written back).
    fn run_kernel(call: &KernelCall, memory: &mut dyn kernel::Memory) -> Result<(), OpError> {
        kernel::run_via_cpu_call::<Self>(call, memory)
    }
    /// (ABI 1.3) Whether `entry_point` of `module_id` runs correctly as separate block ranges in
    /// separate instances, concurrently (distinct blocks write distinct bytes and read nothing
    /// another block writes). Default: no, the host runs the whole grid in one call.
    fn splittable(_module_id: &str, _entry_point: &str) -> bool {
        false
    }
    /// (ABI 1.6) `request`'s node as a composition of other ops (see [`expand`]), which the
    /// host inlines into the graph: how an op with graph attributes is served. Default: this
    /// plugin expands nothing.
    fn expand(request: &ExpandRequest) -> Result<Expansion, OpError> {
        Err(OpError::UnsupportedOp(format!(
            "{}: this plugin offers no expansion of it",
            request.op
        )))
    }
    /// (ABI 1.1) Cases the host runs before admitting the plugin. Default: none.
    fn self_tests() -> Vec<TestCase> {
        Vec::new()
    }
    /// (ABI 1.1) Informative tuning hints. Default: none.
    fn tuning_hints() -> Vec<TuningHint> {
        Vec::new()
    }
}

/// Sends a message to the host's log (and to stderr when running natively, e.g. in unit tests).
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    bindings::umd::plugin::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

/// Routes panic messages to the host log: a `wasm32-unknown-unknown` plugin has no stderr, and
/// the host reports the last message with the trap.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log(LogLevel::Error, &format!("plugin panicked: {info}"));
        }));
    });
}

/// Convenience constructors for [`OpError`].
impl OpError {
    pub fn shape(msg: impl Into<String>) -> Self {
        OpError::InvalidShape(msg.into())
    }
    pub fn dtype(msg: impl Into<String>) -> Self {
        OpError::UnsupportedDtype(msg.into())
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        OpError::Internal(msg.into())
    }
}

impl Dim3 {
    /// A 1-D extent.
    pub const fn x(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
    /// Total number of threads or blocks.
    pub fn volume(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

impl TargetLimits {
    /// The limits every CUDA device since compute capability 3.0 shares (as the host reports
    /// them for `cpu` too), with `sm_count` multiprocessors: handy in plugin unit tests.
    pub fn cuda(sm_count: u32) -> Self {
        TargetLimits {
            max_threads_per_block: 1024,
            max_block_dims: Dim3 {
                x: 1024,
                y: 1024,
                z: 64,
            },
            max_grid_dims: Dim3 {
                x: i32::MAX as u32,
                y: 65535,
                z: 65535,
            },
            max_shared_memory: 48 * 1024,
            warp_size: 32,
            sm_count,
            max_param_bytes: params::CUDA_MAX_PARAM_BYTES,
        }
    }
}

impl Target {
    /// The `cpu` target as the host describes it (for plugin unit tests).
    pub fn cpu() -> Self {
        Target {
            name: "cpu".into(),
            arch: "cpu".into(),
            limits: TargetLimits::cuda(2),
        }
    }
}

impl TensorDesc {
    pub fn new(name: impl Into<String>, shape: Vec<u64>, dtype: Dtype) -> Self {
        TensorDesc {
            name: name.into(),
            shape,
            dtype,
            text_bytes: 0,
        }
    }

    /// Bytes of a tensor of this description: packed types round up to whole bytes, strings
    /// add their text to their offsets; `invalid-shape` on overflow.
    pub fn byte_size(&self) -> Result<u64, OpError> {
        shape::byte_size(&self.shape, self.dtype)?
            .checked_add(self.text_bytes)
            .ok_or_else(|| OpError::shape(format!("`{}`: its size overflows", self.name)))
    }
}

/// Plans `request` through [`Plugin::plan_ext`], declining packed sub-byte (string) inputs and
/// refusing packed (string) outputs of ops the plugin does not declare in
/// [`Plugin::serves_packed`] ([`Plugin::serves_strings`]). Every export that plans (`planner3`,
/// `planner2`, `planner`, `operator`) goes through here.
pub fn plan_checked<P: Plugin + ?Sized>(request: &PlanRequestExt) -> Result<OpPlan, OpError> {
    if !P::serves_strings(&request.op) {
        let string_attr = request
            .attributes
            .iter()
            .find(|a| matches!(&a.value, AttrValueExt::Tensor(t) if t.desc.dtype == Dtype::String));
        if let Some(d) = request.present().find(|d| d.dtype == Dtype::String) {
            return Err(OpError::UnsupportedDtype(format!(
                "{}: input `{}` is a string tensor, which this plugin does not serve for {}",
                request.op, d.name, request.op
            )));
        }
        if let Some(a) = string_attr {
            return Err(OpError::UnsupportedDtype(format!(
                "{}: attribute `{}` is a string tensor, which this plugin does not serve",
                request.op, a.name
            )));
        }
    }
    let packed = P::serves_packed(&request.op);
    if !packed && let Some(d) = request.present().find(|d| dtype::is_packed(d.dtype)) {
        return Err(OpError::UnsupportedDtype(format!(
            "{}: input `{}` is {}, a packed sub-byte dtype this plugin does not serve for {}",
            request.op,
            d.name,
            dtype::name(d.dtype),
            request.op
        )));
    }
    let plan = P::plan_ext(request)?;
    if !P::serves_strings(&request.op)
        && let Some(o) = plan.outputs.iter().find(|o| o.dtype == Dtype::String)
    {
        return Err(OpError::UnsupportedDtype(format!(
            "{}: output `{}` would be a string tensor, which this plugin does not serve",
            request.op, o.name
        )));
    }
    if !packed && let Some(o) = plan.outputs.iter().find(|o| dtype::is_packed(o.dtype)) {
        return Err(OpError::UnsupportedDtype(format!(
            "{}: output `{}` would be {}, a packed sub-byte dtype this plugin does not serve for {}",
            request.op,
            o.name,
            dtype::name(o.dtype),
            request.op
        )));
    }
    Ok(plan)
}

/// Exports a [`Plugin`] implementation as the component's `operator` interface.
///
/// ```ignore
/// struct MyPlugin;
/// impl umd_sdk::Plugin for MyPlugin { /* ... */ }
/// umd_sdk::export_plugin!(MyPlugin);
/// ```
///
/// On native targets (unit tests) nothing is exported, so several plugins can link together.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __UmdExport;
            impl $crate::Guest for __UmdExport {
                fn describe() -> $crate::PluginInfo {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::describe()
                }
                fn plan(
                    request: $crate::PlanRequest,
                ) -> Result<$crate::LegacyOpPlan, $crate::OpError> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::plan(&request)
                        .and_then(|p| $crate::legacy::plan_to_legacy(p))
                }
                fn kernel_source(
                    module_id: String,
                    target: $crate::Target,
                ) -> Result<$crate::ModuleSource, $crate::OpError> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::kernel_source(&module_id, &target)
                }
                fn run_cpu(
                    call: $crate::CpuCall,
                ) -> Result<Vec<$crate::CpuWrite>, $crate::OpError> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::run_cpu(call)
                }
            }
            impl $crate::PlannerGuest for __UmdExport {
                fn signatures() -> Vec<$crate::OpSignature> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::signatures()
                }
                fn plan(
                    request: $crate::abi12::Request,
                ) -> Result<$crate::abi12::Plan, $crate::OpError> {
                    $crate::install_panic_hook();
                    $crate::abi12::plan::<$plugin>(request)
                }
                fn tolerance(op: String, dtype: $crate::abi12::Dtype) -> Option<$crate::Tolerance> {
                    <$plugin as $crate::Plugin>::tolerance(&op, $crate::abi12::dtype_from(dtype))
                }
            }
            impl $crate::Planner2Guest for __UmdExport {
                fn plan(
                    request: $crate::abi14::Request,
                ) -> Result<$crate::abi14::Plan, $crate::OpError> {
                    $crate::install_panic_hook();
                    $crate::abi14::plan::<$plugin>(request)
                }
                fn tolerance(op: String, dtype: $crate::abi14::Dtype) -> Option<$crate::Tolerance> {
                    <$plugin as $crate::Plugin>::tolerance(&op, $crate::abi14::dtype_from(dtype))
                }
            }
            impl $crate::Planner3Guest for __UmdExport {
                fn plan(
                    request: $crate::PlanRequestExt,
                ) -> Result<$crate::OpPlan, $crate::OpError> {
                    $crate::install_panic_hook();
                    $crate::plan_checked::<$plugin>(&request)
                }
                fn tolerance(op: String, dtype: $crate::Dtype) -> Option<$crate::Tolerance> {
                    <$plugin as $crate::Plugin>::tolerance(&op, dtype)
                }
            }
            impl $crate::Planner4Guest for __UmdExport {
                fn plan(
                    request: $crate::PlanRequestExt,
                ) -> Result<$crate::SetupPlan, $crate::OpError> {
                    $crate::install_panic_hook();
                    let plan = $crate::plan_checked::<$plugin>(&request)?;
                    let setup_launches =
                        <$plugin as $crate::Plugin>::setup_launches(&request, &plan);
                    Ok($crate::SetupPlan {
                        plan,
                        setup_launches,
                    })
                }
            }
            impl $crate::CpuKernelGuest for __UmdExport {
                fn splittable(module_id: String, entry_point: String) -> bool {
                    <$plugin as $crate::Plugin>::splittable(&module_id, &entry_point)
                }
                fn run(call: $crate::KernelCall) -> Result<(), $crate::OpError> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::run_kernel(&call, &mut $crate::kernel::HostMemory)
                }
            }
            impl $crate::DeviceCodeGuest for __UmdExport {
                fn device_module(
                    module_id: String,
                    target: $crate::Target,
                ) -> Result<Option<$crate::ModuleImage>, $crate::OpError> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::module_image(&module_id, &target)
                }
            }
            impl $crate::ExpanderGuest for __UmdExport {
                fn expand(
                    request: $crate::ExpandRequest,
                ) -> Result<$crate::Expansion, $crate::OpError> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::expand(&request)
                }
            }
            impl $crate::SelfTestGuest for __UmdExport {
                fn cases() -> Vec<$crate::TestCase> {
                    $crate::install_panic_hook();
                    <$plugin as $crate::Plugin>::self_tests()
                }
                fn hints() -> Vec<$crate::TuningHint> {
                    <$plugin as $crate::Plugin>::tuning_hints()
                }
            }
    $crate::bindings::export_plugin_world!(__UmdExport with_types_in $crate::bindings);
        };
    };
}

/// A self-test case from values: `inputs` as (description, values), `expected` as one value list
/// per output (in the output's dtype), compared within `tolerance`.
pub fn test_case(
    name: &str,
    op: &str,
    inputs: Vec<(TensorDesc, Vec<f64>)>,
    expected: Vec<(Dtype, Vec<f64>)>,
    tolerance: f64,
) -> TestCase {
    let enc = |dt: Dtype, v: &[f64]| dtype::encode(dt, v).expect("every dtype encodes");
    TestCase {
        name: name.into(),
        op: op.into(),
        input_data: inputs.iter().map(|(d, v)| enc(d.dtype, v)).collect(),
        inputs: inputs
            .into_iter()
            .map(|(d, _)| legacy::desc_to_legacy(&d).expect("self-test inputs use 1.1 dtypes"))
            .collect(),
        attributes: Vec::new(),
        expected: expected.iter().map(|(dt, v)| enc(*dt, v)).collect(),
        tolerance,
    }
}

/// A self-test case with attributes and absent-free inputs, from values (see [`test_case`]).
pub fn test_case_with(
    name: &str,
    op: &str,
    inputs: Vec<(TensorDesc, Vec<f64>)>,
    attributes: Vec<Attribute>,
    expected: Vec<(Dtype, Vec<f64>)>,
    tolerance: f64,
) -> TestCase {
    TestCase {
        attributes,
        ..test_case(name, op, inputs, expected, tolerance)
    }
}

/// What `describe` returns for a plugin serving every op of `ops` on the CPU and CUDA targets
/// at priority 0 (the bundled plugins' case): `plugin_info("myops", env!("CARGO_PKG_VERSION"),
/// ["Scale"])`.
pub fn plugin_info<S: Into<String>>(
    name: &str,
    version: &str,
    ops: impl IntoIterator<Item = S>,
) -> PluginInfo {
    PluginInfo {
        name: name.into(),
        version: version.into(),
        ops: ops
            .into_iter()
            .map(|op| OpInfo {
                name: op.into(),
                targets: vec!["cpu".into(), "cuda".into()],
                priority: 0,
            })
            .collect(),
    }
}

/// A signature for `op` in the default ONNX domain whose inputs `constant_inputs` must be
/// known when planning.
pub fn signature(op: &str, constant_inputs: &[u32]) -> OpSignature {
    OpSignature {
        name: op.into(),
        domain: String::new(),
        constant_inputs: constant_inputs.to_vec(),
    }
}

/// Case-insensitive op-name comparison (ONNX names are matched this way everywhere in umd).
pub fn op_is(request: &PlanRequest, name: &str) -> bool {
    request.op.eq_ignore_ascii_case(name)
}

/// The error for an op this plugin does not know (1.2 requests).
pub fn unsupported_op_ext(request: &PlanRequestExt) -> OpError {
    OpError::UnsupportedOp(format!(
        "op `{}` is not provided by this plugin",
        request.op
    ))
}

/// The error for an op this plugin does not know.
pub fn unsupported_op(request: &PlanRequest) -> OpError {
    OpError::UnsupportedOp(format!(
        "op `{}` is not provided by this plugin",
        request.op
    ))
}

#[cfg(test)]
mod wit_copy {
    /// The SDK binds its own copy of the WIT (so it builds without this repository); it must be
    /// byte-identical to the published ABI in the top-level `wit/`.
    #[test]
    fn sdk_wit_is_the_published_abi() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let ours = std::fs::read(root.join("wit/umd-plugin-1.10.0/plugin.wit")).unwrap();
        let published = std::fs::read(root.join("../wit/umd-plugin-1.10.0/plugin.wit")).unwrap();
        assert!(
            ours == published,
            "sdk/wit/umd-plugin-1.10.0 differs from wit/umd-plugin-1.10.0: copy the published WIT"
        );
    }
}
