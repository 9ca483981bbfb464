//! The [`Host`]: plugins + registry + translator + devices, assembled by [`HostBuilder`], with
//! the small API a client uses (translate, allocate, write, execute, synchronize, read).
//!
//! The devices are a list (`cpu`, `cpu:0,cpu:1`, `cuda:0,cuda:1,cpu`; `cuda:N` in builds with
//! the `cuda` feature); the first is the default ([`Host::device`]), others are picked by name
//! ([`Host::device_named`]). Plugin admission always runs on a CPU device (the first listed, or
//! a private one), the reference every GPU kernel is checked against. Every launch runs the
//! exact plugin build that planned it ([`Registry::resolve`]), checked before submit.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cmdbuf::{CommandBuffer, LaunchCmd, ModuleRef};
use crate::device::cpu::CpuDevice;
use crate::device::{
    BoundMemory, BufferId, CpuKernelMode, CpuKernels, Device, DeviceError, DeviceSpec, Fence,
    KernelSource, KernelSources, SourceForm, StreamId,
};
use crate::error::{Error, LoadError, Result};
use crate::plugin::artifacts::ArtifactCache;
use crate::plugin::convert::{self, Declined};
use crate::plugin::kernel_call::{
    BlockRangeRef, BoundBufferRef, CpuBufferRef, CpuCallRef, KernelCallRef,
};
use crate::plugin::{LoadedPlugin, Runtime, SandboxLimits, component_files, wit};
use crate::registry::Registry;
use crate::target::{CPU_ARCH, Target};
use crate::tensor::TensorDesc;
use crate::translate::{OpRequest, Translation, Translator};

/// What `umd plugins` shows for one plugin file.
#[derive(Debug, Clone)]
pub struct PluginStatus {
    pub origin: String,
    /// `Ok(label)` when loaded, `Err(reason)` when refused.
    pub status: std::result::Result<String, String>,
    pub abi: Option<String>,
    pub ops: Vec<(String, Vec<String>, i32)>,
    pub calls: u64,
    pub faults: u64,
}

impl PluginStatus {
    fn loaded(p: &LoadedPlugin) -> Self {
        PluginStatus {
            origin: p.origin().to_string(),
            status: Ok(p.label().to_string()),
            abi: Some(p.abi().to_string()),
            ops: p
                .ops()
                .iter()
                .map(|o| (o.name.clone(), o.targets.clone(), o.priority))
                .collect(),
            calls: p.calls(),
            faults: p.faults(),
        }
    }

    fn refused(origin: String, e: &LoadError) -> Self {
        PluginStatus {
            origin,
            status: Err(e.to_string()),
            abi: None,
            ops: Vec::new(),
            calls: 0,
            faults: 0,
        }
    }
}

/// Builds a [`Host`].
pub struct HostBuilder {
    bundled: bool,
    plugin_dirs: Vec<PathBuf>,
    limits: SandboxLimits,
    cache_capacity: usize,
    device_memory: u64,
    artifact_dir: Option<PathBuf>,
    device: String,
    kernel_dir: Option<PathBuf>,
    cpu_threads: usize,
    cpu_in_place: bool,
}

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            bundled: true,
            plugin_dirs: Vec::new(),
            limits: SandboxLimits::default(),
            cache_capacity: 4096,
            device_memory: 8 << 30,
            artifact_dir: ArtifactCache::default_dir(),
            device: "cpu".into(),
            kernel_dir: default_kernel_dir(),
            cpu_threads: 0,
            cpu_in_place: true,
        }
    }
}

impl HostBuilder {
    /// Load the plugins built into the binary (default: yes).
    pub fn bundled_plugins(mut self, yes: bool) -> Self {
        self.bundled = yes;
        self
    }
    /// Also load every `.wasm` component of `dir`.
    pub fn plugin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.plugin_dirs.push(dir.into());
        self
    }
    pub fn sandbox_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = limits;
        self
    }
    pub fn cache_capacity(mut self, n: usize) -> Self {
        self.cache_capacity = n;
        self
    }
    /// Where compiled components are cached (`None`: compile every load). Default:
    /// `$XDG_CACHE_HOME/umd/components` or `~/.cache/umd/components`.
    pub fn artifact_cache(mut self, dir: Option<PathBuf>) -> Self {
        self.artifact_dir = dir;
        self
    }
    /// Most bytes each CPU device's buffers may hold at once.
    pub fn device_memory(mut self, bytes: u64) -> Self {
        self.device_memory = bytes;
        self
    }

    /// The devices to run on, comma-separated: `cpu` (default, = `cpu:0`), `cpu:N`, `cuda:N`
    /// (builds with the `cuda` feature); the first is the default. Checked by
    /// [`build`](Self::build).
    pub fn device(mut self, spec: &str) -> Self {
        self.device = spec.to_string();
        self
    }
    /// Worker threads the CPU device splits one launch across (0, the default: one per core).
    pub fn cpu_threads(mut self, n: usize) -> Self {
        self.cpu_threads = n;
        self
    }
    /// Whether ABI 1.3 plugins run their CPU kernels in place (default: yes). `false` runs
    /// every plugin through `run-cpu`, copying whole buffers (for comparing the two paths).
    pub fn cpu_in_place(mut self, yes: bool) -> Self {
        self.cpu_in_place = yes;
        self
    }
    /// Where a GPU device caches compiled kernels (`None`: memory only). Default:
    /// `$XDG_CACHE_HOME/umd/kernels` or `~/.cache/umd/kernels`.
    pub fn kernel_cache(mut self, dir: Option<PathBuf>) -> Self {
        self.kernel_dir = dir;
        self
    }

    /// Opens the device, loads the plugins. A plugin that fails to load is reported in
    /// [`Host::plugin_status`] and does not stop the others; a device that cannot be opened is
    /// an error saying why.
    pub fn build(self) -> Result<Host> {
        let specs = DeviceSpec::parse_list(&self.device)?;
        let runtime = Runtime::new(self.limits, self.artifact_dir.clone())?;
        let registry = Arc::new(Registry::default());
        let kernels = Arc::new(RegistryKernels(registry.clone(), self.cpu_in_place));
        let devices = specs
            .iter()
            .map(|spec| self.open(*spec, kernels.clone()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let reference = devices
            .iter()
            .find(|d| d.target().name == CPU_ARCH)
            .cloned()
            .unwrap_or_else(|| {
                CpuDevice::named("cpu", kernels.clone(), self.device_memory, self.cpu_threads)
            });
        let translator = Translator::new(
            registry.clone(),
            devices[0].target().clone(),
            self.cache_capacity,
        );
        let host = Host {
            runtime,
            registry,
            translator,
            devices,
            reference,
            failures: Mutex::new(Vec::new()),
            plugin_dirs: self.plugin_dirs,
        };
        if self.bundled {
            for (name, bytes) in crate::BUNDLED_PLUGINS {
                let origin = format!("bundled:{name}");
                let _ = host.install(&origin, host.runtime.load_bytes(&origin, bytes));
            }
        }
        for dir in &host.plugin_dirs {
            let files = component_files(dir).map_err(|e| LoadError::Read {
                path: dir.display().to_string(),
                reason: e.to_string(),
            })?;
            for f in files {
                let origin = f.display().to_string();
                let _ = host.install(&origin, host.runtime.load_file(&f));
            }
        }
        Ok(host)
    }

    fn open(
        &self,
        spec: DeviceSpec,
        kernels: Arc<RegistryKernels>,
    ) -> std::result::Result<Arc<dyn Device>, DeviceError> {
        match spec {
            DeviceSpec::Cpu(_) => Ok(CpuDevice::named(
                &spec.to_string(),
                kernels,
                self.device_memory,
                self.cpu_threads,
            )),
            #[cfg(feature = "cuda")]
            DeviceSpec::Cuda(index) => Ok(crate::device::cuda::CudaDevice::open(
                index,
                kernels,
                self.kernel_dir.clone(),
            )?),
            #[cfg(not(feature = "cuda"))]
            DeviceSpec::Cuda(_) => {
                let _ = (kernels, &self.kernel_dir);
                Err(DeviceError::Unavailable(format!(
                    "device `{spec}`: this umd was built without the `cuda` feature \
                     (rebuild with `cargo build --features cuda`)"
                )))
            }
        }
    }
}

/// `$XDG_CACHE_HOME/umd/kernels` or `~/.cache/umd/kernels`: where GPU devices cache kernels.
pub fn default_kernel_dir() -> Option<PathBuf> {
    ArtifactCache::default_dir().map(|d| d.with_file_name("kernels"))
}

/// The host: plugins, registry, translator and devices.
pub struct Host {
    runtime: Arc<Runtime>,
    registry: Arc<Registry>,
    translator: Translator,
    /// At least one; the first is the default.
    devices: Vec<Arc<dyn Device>>,
    /// A CPU device: runs admission (the reference); the first CPU device listed, if any.
    reference: Arc<dyn Device>,
    /// Plugin files that were refused, most recent last.
    failures: Mutex<Vec<PluginStatus>>,
    plugin_dirs: Vec<PathBuf>,
}

impl Host {
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// Translates for the request's target, or the default device's.
    pub fn translate(&self, req: &OpRequest) -> Result<Arc<Translation>> {
        self.translator.translate(req)
    }

    /// Translates for `device`'s target unless the request names one (devices of one target
    /// share cached translations).
    pub fn translate_for(&self, device: &dyn Device, req: &OpRequest) -> Result<Arc<Translation>> {
        match &req.target {
            None if device.target() != self.translator.default_target() => self
                .translator
                .translate(&req.clone().target(device.target().clone())),
            _ => self.translator.translate(req),
        }
    }

    pub fn translator(&self) -> &Translator {
        &self.translator
    }
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
    /// The device code of `module` for `target`, from the exact plugin build that planned it
    /// (what a GPU device fetches; `umd plugins compile` and `source` use it without one).
    pub fn kernel_source(
        &self,
        module: &ModuleRef,
        target: &Target,
    ) -> std::result::Result<KernelSource, String> {
        RegistryKernels(self.registry.clone(), true).source(module, target)
    }
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
    /// The default device (the first listed).
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.devices[0]
    }
    /// Every device, the default first.
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }
    /// The device named `name` (`cpu`, `cpu:0` = `cpu`, `cpu:1`, `cuda:0`); empty names the
    /// default. An unknown name is an error naming it and the devices there are.
    pub fn device_named(&self, name: &str) -> std::result::Result<&Arc<dyn Device>, DeviceError> {
        if name.is_empty() {
            return Ok(self.device());
        }
        let canonical = name.parse::<DeviceSpec>().map(|s| s.to_string());
        self.devices
            .iter()
            .find(|d| canonical.as_deref() == Ok(d.name()))
            .ok_or_else(|| DeviceError::NoSuchDevice {
                name: name.chars().take(64).collect(),
                available: self
                    .devices
                    .iter()
                    .map(|d| format!("`{}`", d.name()))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
    /// The CPU device plugins are admitted on (the default device when that is `cpu`).
    pub fn reference_device(&self) -> &Arc<dyn Device> {
        &self.reference
    }
    /// Every loaded plugin, then every refused plugin file.
    pub fn plugin_status(&self) -> Vec<PluginStatus> {
        let snap = self.registry.snapshot();
        let mut out: Vec<PluginStatus> = snap
            .plugins()
            .iter()
            .map(|p| PluginStatus::loaded(p))
            .collect();
        out.extend(self.failures.lock().iter().cloned());
        out
    }

    /// Loads (or replaces, by name) a plugin from a file. A file that fails to load is recorded
    /// in [`Host::plugin_status`] and the working version, if any, keeps serving.
    pub fn load_plugin(
        &self,
        path: &std::path::Path,
    ) -> std::result::Result<PluginStatus, LoadError> {
        let origin = path.display().to_string();
        self.install(&origin, self.runtime.load_file(path))
    }

    /// Admits a loaded plugin (its self-test cases must pass) and offers its ops, replacing the
    /// plugin of the same name; or records why `origin` was refused. The working version, if
    /// any, keeps serving on failure.
    fn install(
        &self,
        origin: &str,
        loaded: std::result::Result<Arc<LoadedPlugin>, LoadError>,
    ) -> std::result::Result<PluginStatus, LoadError> {
        // The very build already serving from this file (the watcher seeing bytes it loaded
        // once more): left as it is, not admitted again — a second admission could only fail
        // on the machine's load (a self-test deadline) and record a failure for a working file.
        if let Ok(p) = &loaded {
            let snap = self.registry.snapshot();
            if let Some(current) = snap
                .plugins()
                .iter()
                .find(|q| q.origin() == origin && q.wasm_hash() == p.wasm_hash())
            {
                self.failures.lock().retain(|f| f.origin != origin);
                return Ok(PluginStatus::loaded(current));
            }
        }
        let admitted = loaded.and_then(|p| match crate::admission::admit(self, &p) {
            Ok(report) => {
                tracing::debug!(plugin = p.label(), cases = report.cases, "plugin admitted");
                Ok(p)
            }
            Err(reason) => Err(LoadError::Admission {
                path: origin.to_string(),
                plugin: p.label().to_string(),
                reason,
            }),
        });
        match admitted {
            Ok(p) => {
                // Failures of the file are cleared before the new build is published, under
                // the failures lock: a reader of `plugin_status` that already sees the new
                // build never sees the failures it replaced.
                let mut failures = self.failures.lock();
                failures.retain(|f| f.origin != origin);
                self.registry.insert(p.clone());
                drop(failures);
                Ok(PluginStatus::loaded(&p))
            }
            Err(e) => {
                tracing::warn!(%origin, error = %e, "plugin not loaded");
                let mut failures = self.failures.lock();
                if failures.len() >= 100 {
                    failures.remove(0);
                }
                failures.push(PluginStatus::refused(origin.to_string(), &e));
                Err(e)
            }
        }
    }

    /// Applies a change to a plugin file: (re)loads it when it exists, unloads the plugin
    /// loaded from it when it is gone. Used by the directory watcher and reload requests.
    pub fn apply_change(&self, path: &std::path::Path) {
        if path.is_file() {
            match self.load_plugin(path) {
                Ok(p) => {
                    tracing::info!(path = %path.display(), plugin = ?p.status, "plugin loaded")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "plugin replacement refused; the loaded version keeps serving")
                }
            }
        } else {
            let origin = path.display().to_string();
            let snap = self.registry.snapshot();
            if let Some(p) = snap.plugins().iter().find(|p| p.origin() == origin) {
                tracing::info!(plugin = p.label(), "plugin file removed; unloading");
                self.registry.remove(p.name());
            }
        }
    }

    /// Watches the plugin directories given to the builder (and `extra`), reloading on change
    /// until the returned watcher is dropped.
    pub fn watch(self: &Arc<Self>, extra: &[PathBuf]) -> notify::Result<crate::watch::Watcher> {
        let mut dirs = self.plugin_dirs.clone();
        dirs.extend_from_slice(extra);
        crate::watch::watch(self.clone(), &dirs)
    }

    /// Unloads the plugin named `name`; calls in flight finish on it. Returns whether it was
    /// loaded.
    pub fn unload_plugin(&self, name: &str) -> bool {
        self.registry.remove(name)
    }

    /// A buffer of the default device large enough for `desc`.
    pub fn alloc(&self, desc: &TensorDesc) -> Result<BufferId> {
        let bytes = desc
            .byte_size()
            .ok_or_else(|| crate::error::RequestError::Shape(format!("tensor {desc} overflows")))?;
        Ok(self.device().alloc(bytes)?)
    }
    pub fn free(&self, b: BufferId) -> Result<()> {
        Ok(self.device().free(b)?)
    }
    pub fn write(&self, b: BufferId, data: &[u8]) -> Result<()> {
        Ok(self.device().write(b, 0, data)?)
    }
    pub fn read(&self, b: BufferId) -> Result<Vec<u8>> {
        let size = self.device().size(b)?;
        Ok(self.device().read(b, 0, size)?)
    }

    /// Queues a translation on the default device's `stream` with one buffer per binding
    /// (inputs, outputs, workspace).
    pub fn execute(
        &self,
        t: &Translation,
        bindings: &[BufferId],
        stream: StreamId,
    ) -> Result<Fence> {
        self.submit(&**self.device(), stream, &t.cmdbuf, bindings)
    }

    /// [`Host::execute`] and a wait for it, in one call: on the CPU device the launch runs on
    /// the calling thread when `stream` is idle ([`Device::submit_wait`]: no hand-off to the
    /// stream's worker and back). For a thread that would block on the fence at once anyway.
    pub fn execute_wait(
        &self,
        t: &Translation,
        bindings: &[BufferId],
        stream: StreamId,
    ) -> Result<()> {
        let device = &**self.device();
        self.check_builds_for(device, &t.cmdbuf)?;
        Ok(device.submit_wait(stream, t.cmdbuf.clone(), bindings)?)
    }

    /// Queues a command buffer on `device`'s `stream`, after checking that every module it
    /// launches resolves to the exact plugin build that planned it.
    pub fn submit(
        &self,
        device: &dyn Device,
        stream: StreamId,
        cmd: &Arc<CommandBuffer>,
        bindings: &[BufferId],
    ) -> Result<Fence> {
        self.check_builds_for(device, cmd)?;
        Ok(device.submit(stream, cmd.clone(), bindings)?)
    }

    /// [`Host::check_builds`] for `device`'s target; a command buffer for another target is the
    /// device's to refuse (`WrongTarget`).
    fn check_builds_for(&self, device: &dyn Device, cmd: &CommandBuffer) -> Result<()> {
        if cmd.target == device.target().name {
            self.check_builds(cmd, device.target())?;
        }
        Ok(())
    }

    /// Checks that every module `cmd` launches resolves to a loaded build for `target` (the
    /// build that planned it: the module hash says which).
    pub fn check_builds(&self, cmd: &CommandBuffer, target: &Target) -> Result<()> {
        for l in &cmd.launches {
            self.registry.resolve(&l.module, &target.arch)?;
        }
        Ok(())
    }

    pub fn synchronize(&self, stream: StreamId) -> Result<()> {
        Ok(self.device().synchronize(stream)?)
    }

    /// Translates and runs one op on host data; returns each output's description and bytes.
    pub fn run(
        &self,
        op: &str,
        inputs: &[(TensorDesc, Vec<u8>)],
    ) -> Result<Vec<(TensorDesc, Vec<u8>)>> {
        let req = OpRequest::new(op, inputs.iter().map(|(d, _)| d.clone()).collect());
        let data: Vec<Vec<u8>> = inputs.iter().map(|(_, d)| d.clone()).collect();
        self.run_request(req, &data)
    }

    /// Translates and runs `req` on host data, one byte vector per present input; inputs whose
    /// values the plan needs (1.2 op signatures) are taken from `data`. Returns each output's
    /// description and bytes.
    pub fn run_request(
        &self,
        req: OpRequest,
        data: &[Vec<u8>],
    ) -> Result<Vec<(TensorDesc, Vec<u8>)>> {
        self.run_request_on(self.device().default_stream(), req, data)
    }

    /// [`Host::run_request`] on `stream` of the default device.
    pub fn run_request_on(
        &self,
        stream: StreamId,
        mut req: OpRequest,
        data: &[Vec<u8>],
    ) -> Result<Vec<(TensorDesc, Vec<u8>)>> {
        if data.len() != req.inputs.len() {
            return Err(crate::error::RequestError::Other(format!(
                "{} data buffers for {} present inputs",
                data.len(),
                req.inputs.len()
            ))
            .into());
        }
        // A string input's text size is its data's.
        for (d, bytes) in req.inputs.iter_mut().zip(data) {
            *d = d.clone().sized(bytes.len() as u64)?;
        }
        self.translator()
            .fill_values(&mut req, |i, _| Ok::<_, Error>(data[i].clone()))?;
        let t = match self.translate(&req) {
            Ok(t) => t,
            Err(e @ Error::Unsupported { .. }) => {
                self.translate_on_values(&req, data).ok_or(e)??
            }
            Err(e) => return Err(e),
        };
        let data: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let outputs = crate::device::run_once_on(&**self.device(), stream, &t.cmdbuf, &data)?;
        Ok(t.outputs.iter().cloned().zip(outputs).collect())
    }
}

impl Host {
    /// `req` (declined by every plugin) translated again with the value of every present input
    /// (`data`), within [`crate::translate::MAX_VALUE_BYTES`] in all: a plugin may compute an
    /// op when planning (a string result sized by run-time numbers: a classifier's string
    /// labels, numbers mapped to strings) and then needs what it will run on. `None` when every
    /// input already had its value or they do not fit; otherwise the second answer (its error
    /// when declined again, as the caller reports the first).
    fn translate_on_values(
        &self,
        req: &OpRequest,
        data: &[Vec<u8>],
    ) -> Option<Result<Arc<Translation>>> {
        let total: usize = data.iter().map(Vec::len).sum();
        if req.values.len() == req.inputs.len() || total > crate::translate::MAX_VALUE_BYTES {
            return None;
        }
        let mut all = req.clone();
        all.values = data
            .iter()
            .enumerate()
            .map(|(i, d)| (i as u32, d.clone()))
            .collect();
        // Not cached: its key holds run-time values, new on every run.
        match self.translator().translate_uncached_checked(&all) {
            Err(Error::Unsupported { .. } | Error::Request(_)) => None,
            other => Some(other.map(Arc::new)),
        }
    }
}

/// Runs CPU launches and fetches GPU kernel sources through the registry: the exact plugin build
/// that planned the launch's module (never another build of the same `name@version`). The flag:
/// whether ABI 1.3 kernels run in place.
struct RegistryKernels(Arc<Registry>, bool);

impl KernelSources for RegistryKernels {
    fn source(
        &self,
        module: &ModuleRef,
        target: &Target,
    ) -> std::result::Result<KernelSource, String> {
        let plugin = self
            .0
            .resolve(module, &target.arch)
            .map_err(|e| e.to_string())?;
        let target = convert::target_to_wit(target);
        let fault = |fault| {
            Error::Plugin {
                plugin: plugin.label().to_string(),
                fault,
            }
            .to_string()
        };
        // (1.3) Device code shipped as PTX (and a cubin) comes first.
        match plugin.device_module(&module.id, &target).map_err(fault)? {
            Ok(Some(image)) => {
                image.check().map_err(|m| {
                    format!("plugin {} module `{}`: {m}", plugin.label(), module.id)
                })?;
                return Ok(KernelSource {
                    code: image.ptx,
                    entry_points: image.entry_points,
                    options: Vec::new(),
                    form: SourceForm::Ptx { cubin: image.cubin },
                });
            }
            Ok(None) => {}
            Err(e) => {
                return Err(match convert::op_error(e) {
                    Declined::Unsupported(m) | Declined::Invalid(m) | Declined::Internal(m) => {
                        format!(
                            "plugin {} device-module `{}`: {m}",
                            plugin.label(),
                            module.id
                        )
                    }
                });
            }
        }
        match plugin.kernel_source(&module.id, &target) {
            Ok(Ok(src)) => {
                let wit::SourceLanguage::CudaC = src.language;
                Ok(KernelSource {
                    code: src.code,
                    entry_points: src.entry_points,
                    options: src.options,
                    form: SourceForm::CudaC,
                })
            }
            Ok(Err(e)) => Err(match convert::op_error(e) {
                Declined::Unsupported(m) | Declined::Invalid(m) | Declined::Internal(m) => {
                    format!(
                        "plugin {} kernel-source `{}`: {m}",
                        plugin.label(),
                        module.id
                    )
                }
            }),
            Err(f) => Err(fault(f)),
        }
    }
}

impl RegistryKernels {
    /// The exact build that planned `launch`.
    fn plugin(&self, launch: &LaunchCmd) -> std::result::Result<Arc<LoadedPlugin>, String> {
        self.0
            .resolve(&launch.module, CPU_ARCH)
            .map_err(|e| e.to_string())
    }
}

/// The message of a failed CPU kernel call.
fn kernel_failure<T>(
    plugin: &LoadedPlugin,
    r: std::result::Result<std::result::Result<T, wit::OpError>, crate::error::PluginFault>,
) -> std::result::Result<T, String> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(match convert::op_error(e) {
            Declined::Unsupported(m) | Declined::Invalid(m) | Declined::Internal(m) => {
                format!("plugin {} CPU kernel: {m}", plugin.label())
            }
        }),
        Err(fault) => Err(Error::Plugin {
            plugin: plugin.label().to_string(),
            fault,
        }
        .to_string()),
    }
}

impl CpuKernels for RegistryKernels {
    fn mode(&self, launch: &LaunchCmd) -> std::result::Result<CpuKernelMode, String> {
        let plugin = self.plugin(launch)?;
        if !plugin.runs_in_place() || !self.1 {
            return Ok(CpuKernelMode::Copy);
        }
        let splittable = plugin
            .splittable(&launch.module.id, &launch.entry_point)
            .map_err(|fault| {
                Error::Plugin {
                    plugin: plugin.label().to_string(),
                    fault,
                }
                .to_string()
            })?;
        Ok(CpuKernelMode::InPlace { splittable })
    }

    fn run_in_place(
        &self,
        launch: &LaunchCmd,
        bound: &Arc<[BoundMemory]>,
        blocks: std::ops::Range<u64>,
    ) -> std::result::Result<(), String> {
        let plugin = self.plugin(launch)?;
        let relocations: Vec<wit::Relocation> = launch
            .relocations
            .iter()
            .map(convert::relocation_to_wit)
            .collect();
        let buffers: Vec<BoundBufferRef> = bound
            .iter()
            .map(|b| BoundBufferRef {
                binding: b.binding,
                size: b.size,
            })
            .collect();
        let call = KernelCallRef {
            module_id: &launch.module.id,
            entry_point: &launch.entry_point,
            grid: convert::dim3_to_wit(launch.grid),
            block: convert::dim3_to_wit(launch.block),
            params: &launch.params,
            relocations: &relocations,
            buffers: &buffers,
            blocks: BlockRangeRef {
                first: blocks.start,
                count: blocks.end - blocks.start,
            },
        };
        let result = plugin
            .run_in_place(&call, bound.clone())
            .ok_or_else(|| format!("plugin {} has no in-place kernels", plugin.label()))?;
        kernel_failure(&plugin, result)
    }

    fn run(
        &self,
        launch: &LaunchCmd,
        buffers: &[(u32, u64, Option<&[u8]>)],
    ) -> std::result::Result<Vec<(u32, Vec<u8>)>, String> {
        let plugin = self.plugin(launch)?;
        let relocations: Vec<wit::Relocation> = launch
            .relocations
            .iter()
            .map(convert::relocation_to_wit)
            .collect();
        let buffers: Vec<CpuBufferRef<'_>> = buffers
            .iter()
            .map(|(binding, size, data)| CpuBufferRef {
                binding: *binding,
                size: *size,
                data: data.unwrap_or_default(),
            })
            .collect();
        let call = CpuCallRef {
            module_id: &launch.module.id,
            entry_point: &launch.entry_point,
            grid: convert::dim3_to_wit(launch.grid),
            block: convert::dim3_to_wit(launch.block),
            params: &launch.params,
            relocations: &relocations,
            buffers: &buffers,
        };
        let writes = kernel_failure(&plugin, plugin.run_cpu(&call))?;
        Ok(writes.into_iter().map(|w| (w.binding, w.data)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> HostBuilder {
        Host::builder()
            .bundled_plugins(false)
            .artifact_cache(None)
            .kernel_cache(None)
    }

    #[test]
    fn unknown_devices_are_refused() {
        let e = builder().device("tpu:0").build().err().expect("refused");
        assert!(e.to_string().contains("unknown device `tpu:0`"), "{e}");
    }

    #[test]
    fn cuda_without_a_gpu_is_a_clean_error() {
        match builder().device("cuda:0").build() {
            Ok(host) => assert!(host.device().name().starts_with("cuda:")),
            Err(e) => {
                let msg = e.to_string();
                #[cfg(not(feature = "cuda"))]
                assert!(msg.contains("built without the `cuda` feature"), "{msg}");
                #[cfg(feature = "cuda")]
                if !crate::device::cuda::driver::driver_present() {
                    assert!(msg.contains("libcuda.so"), "{msg}");
                }
            }
        }
    }

    #[test]
    fn cpu_is_the_default_and_its_own_reference() {
        let host = builder().build().unwrap();
        assert_eq!(host.device().name(), "cpu");
        assert!(Arc::ptr_eq(host.device(), host.reference_device()));
    }

    #[test]
    fn several_cpu_devices_are_named_and_picked() {
        let host = builder().device("cpu:0,cpu:1").build().unwrap();
        let names: Vec<&str> = host.devices().iter().map(|d| d.name()).collect();
        assert_eq!(names, ["cpu", "cpu:1"]);
        assert!(Arc::ptr_eq(host.device(), host.reference_device()));
        for (name, index) in [("", 0), ("cpu", 0), ("cpu:0", 0), ("CPU:1", 1)] {
            let d = host.device_named(name).unwrap();
            assert!(Arc::ptr_eq(d, &host.devices()[index]), "{name}");
        }
        let e = host
            .device_named("cpu:2")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("no device `cpu:2`") && e.contains("`cpu:1`"),
            "{e}"
        );
        // A buffer belongs to the device that made it.
        let b = host.devices()[1].alloc(16).unwrap();
        let e = host.device().read(b, 0, 16).unwrap_err();
        assert!(matches!(e, DeviceError::ForeignBuffer { .. }), "{e}");
        assert!(
            e.to_string().contains("does not belong to device `cpu`"),
            "{e}"
        );
        assert_eq!(host.devices()[1].size(b), Ok(16));
    }

    #[test]
    fn duplicate_devices_are_refused() {
        let e = builder()
            .device("cpu,cpu:0")
            .build()
            .err()
            .expect("refused");
        assert!(e.to_string().contains("`cpu` is named twice"), "{e}");
    }
}
