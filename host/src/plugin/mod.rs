//! Plugins: the wasmtime engine, loading a component (ABI negotiation, import check, describe),
//! and calling into it through a pool of warm sandboxed instances.
//!
//! Owns everything that touches wasmtime. A call checks out an instance (or instantiates one from
//! the `InstancePre`), runs under an epoch deadline and a memory limit, and goes back to the pool
//! on success; on any error the instance — its whole `Store` — is dropped, so a trap poisons
//! nothing else. Knows nothing of devices, caches or command buffers.

pub mod artifacts;
mod bindings;
pub mod convert;
pub mod device_code;
pub mod kernel_call;
pub mod kernel_io;
pub mod matrix;
pub(crate) mod packed;
pub mod planner;
pub mod sandbox;
pub mod self_test;
pub(crate) mod vector;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmtime::component::{
    Component, ComponentExportIndex, HasSelf, Instance as ComponentInstance, Linker, TypedFunc,
};
use wasmtime::{Config, Engine, Store};

pub use bindings::wit;
use bindings::{PluginCore as PluginWorld, PluginCorePre as PluginPre};
pub use sandbox::SandboxLimits;
use sandbox::StoreState;
pub use vector::elements_computed as vector_unit_elements;

use crate::error::{LoadError, PluginFault};
use crate::tensor::Dtype;

/// The ABI this host implements: `umd:plugin@1.10.0`. Plugins of the same major load (1.0–1.9
/// plugins without the later additions).
pub const HOST_ABI: semver::Version = semver::Version::new(1, 10, 0);
/// Most op signatures a plugin may declare, and constant inputs per signature.
const MAX_SIGNATURES: usize = 1024;
const MAX_CONSTANT_INPUTS: usize = 64;
/// Largest component file [`Runtime::load_file`] reads.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;
/// The WIT package plugins export from.
const PACKAGE: &str = "umd:plugin";
/// Epoch tick period: deadlines are accurate to about this.
const TICK: Duration = Duration::from_millis(5);
/// Warm instances kept per plugin (at least one per CPU worker thread of a split launch).
const MAX_IDLE_INSTANCES: usize = 64;
/// `splittable` answers remembered per plugin build (forgotten all at once past this).
const MAX_SPLITTABLE_ANSWERS: usize = 4096;

/// The engine, linker and limits shared by every plugin.
pub struct Runtime {
    engine: Engine,
    linker: Linker<StoreState>,
    limits: SandboxLimits,
    artifacts: Option<artifacts::ArtifactCache>,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// A runtime with an epoch ticker thread driving call deadlines; compiled components are
    /// cached in `cache_dir` when given.
    pub fn new(
        limits: SandboxLimits,
        cache_dir: Option<PathBuf>,
    ) -> Result<Arc<Runtime>, LoadError> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        // For profiling kernels: `UMD_WASM_PERFMAP=1` names the compiled WebAssembly
        // functions in `/tmp/perf-<pid>.map`, which `perf report` reads.
        if std::env::var_os("UMD_WASM_PERFMAP").is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| LoadError::Compile {
            path: "<engine>".into(),
            reason: format!("{e:#}"),
        })?;
        let mut linker = Linker::new(&engine);
        bindings::host_iface::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)
            .and_then(|()| kernel_io::add_to_linker(&mut linker))
            .and_then(|()| matrix::add_to_linker(&mut linker))
            .and_then(|()| vector::add_to_linker(&mut linker))
            .map_err(|e| LoadError::Interface {
                path: "<linker>".into(),
                reason: format!("{e:#}"),
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ticker_engine, ticker_stop) = (engine.clone(), stop.clone());
        std::thread::Builder::new()
            .name("umd-epoch".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    ticker_engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        let artifacts = cache_dir.map(|d| artifacts::ArtifactCache::new(d, &engine));
        Ok(Arc::new(Runtime {
            engine,
            linker,
            limits,
            artifacts,
            stop_ticker: stop,
        }))
    }

    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// Loads a plugin component from a file.
    /// Only a regular file of at most [`MAX_COMPONENT_BYTES`] is read: a device (`/dev/zero`),
    /// a FIFO or a directory is refused before it is opened.
    pub fn load_file(self: &Arc<Self>, path: &Path) -> Result<Arc<LoadedPlugin>, LoadError> {
        use std::io::Read;
        let fail = |reason: String| LoadError::Read {
            path: path.display().to_string(),
            reason,
        };
        let regular = |m: &std::fs::Metadata| -> Result<(), LoadError> {
            if !m.is_file() {
                return Err(fail("not a regular file".into()));
            }
            if m.len() > MAX_COMPONENT_BYTES {
                return Err(fail(format!(
                    "{} bytes; a component may have at most {MAX_COMPONENT_BYTES}",
                    m.len()
                )));
            }
            Ok(())
        };
        regular(&std::fs::metadata(path).map_err(|e| fail(e.to_string()))?)?;
        let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
        // Checked again on the open file (it may have been replaced), and read with a bound.
        regular(&file.metadata().map_err(|e| fail(e.to_string()))?)?;
        let mut bytes = Vec::new();
        file.take(MAX_COMPONENT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(fail(format!(
                "grew past {MAX_COMPONENT_BYTES} bytes while being read"
            )));
        }
        self.load_bytes(&path.display().to_string(), &bytes)
    }

    /// Loads a plugin component from bytes; `origin` names it in errors.
    pub fn load_bytes(
        self: &Arc<Self>,
        origin: &str,
        bytes: &[u8],
    ) -> Result<Arc<LoadedPlugin>, LoadError> {
        let started = std::time::Instant::now();
        let wasm_hash: [u8; 32] = Sha256::digest(bytes).into();
        let compiled = match &self.artifacts {
            Some(cache) => cache.load_or_compile(&self.engine, bytes, &wasm_hash),
            None => {
                Component::new(&self.engine, bytes).map(|c| (c, artifacts::Provenance::Compiled))
            }
        };
        let (component, provenance) = compiled.map_err(|e| LoadError::Compile {
            path: origin.into(),
            reason: format!("{e:#}"),
        })?;
        if let artifacts::Provenance::Recompiled(why) = &provenance {
            tracing::warn!(%origin, reason = %why, "cached compiled artifact unusable; recompiled");
        }
        let abi = self.check_interface(origin, &component)?;
        let run_cpu_index = component
            .get_export_index(None, &*format!("{PACKAGE}/operator@{abi}"))
            .and_then(|iface| component.get_export_index(Some(&iface), "run-cpu"))
            .ok_or_else(|| LoadError::Interface {
                path: origin.into(),
                reason: "does not export operator.run-cpu".into(),
            })?;
        let self_test = self_test::Exports::find(&component, &abi);
        let planner = planner::Exports::find(&component, &abi);
        let planner2 = planner::Exports2::find(&component, &abi);
        let planner3 = planner::Exports3::find(&component, &abi);
        let cpu_kernel = kernel_io::Exports::find(&component, &abi);
        let device_module = device_code::find(&component, &abi);
        let expander = component
            .get_export_index(None, &*format!("{PACKAGE}/expander@{abi}"))
            .and_then(|iface| component.get_export_index(Some(&iface), "expand"));
        let planner4 = component
            .get_export_index(None, &*format!("{PACKAGE}/planner4@{abi}"))
            .and_then(|iface| component.get_export_index(Some(&iface), "plan"));
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(|e| LoadError::Instantiate {
                path: origin.into(),
                reason: format!("{e:#}"),
            })?;
        let plugin = LoadedPlugin {
            runtime: self.clone(),
            origin: origin.to_string(),
            label: origin.to_string(),
            abi,
            wasm_hash,
            provenance,
            load_time: std::time::Duration::ZERO,
            pre,
            run_cpu_index,
            self_test,
            planner,
            planner2,
            planner3,
            planner4,
            cpu_kernel,
            device_module,
            expander,
            splittable: Mutex::new(crate::memo::Memo::new(MAX_SPLITTABLE_ANSWERS)),
            signatures: Vec::new(),
            idle: Mutex::new(Vec::new()),
            info: wit::PluginInfo {
                name: String::new(),
                version: String::new(),
                ops: Vec::new(),
            },
            faults: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        };
        let info = plugin
            .call("describe", self.limits.plan_deadline, |s, _, p| {
                p.umd_plugin_operator().call_describe(s)
            })
            .map_err(|e| LoadError::Instantiate {
                path: origin.into(),
                reason: format!("describe failed: {e}"),
            })?;
        validate_info(origin, &info)?;
        let signatures = plugin
            .fetch_signatures()
            .map_err(|e| LoadError::Instantiate {
                path: origin.into(),
                reason: format!("planner.signatures failed: {e}"),
            })?;
        validate_signatures(origin, &info, &signatures)?;
        let label = format!("{}@{}", info.name, info.version);
        Ok(Arc::new(LoadedPlugin {
            info,
            signatures,
            label,
            load_time: started.elapsed(),
            ..plugin
        }))
    }

    /// Checks the component's ABI version and that it imports nothing but `umd:plugin/host`.
    fn check_interface(
        &self,
        origin: &str,
        component: &Component,
    ) -> Result<semver::Version, LoadError> {
        let ty = component.component_type();
        let iface = |e: String| LoadError::Interface {
            path: origin.into(),
            reason: e,
        };
        let mut abi = None;
        for (name, _) in ty.exports(&self.engine) {
            if let Some(version) = name
                .strip_prefix(PACKAGE)
                .and_then(|r| r.strip_prefix("/operator@"))
            {
                let v = semver::Version::parse(version)
                    .map_err(|e| iface(format!("export `{name}` has an invalid version: {e}")))?;
                abi = Some(v);
            }
        }
        let Some(abi) = abi else {
            let names: Vec<String> = ty
                .exports(&self.engine)
                .map(|(n, _)| n.to_string())
                .collect();
            return Err(iface(format!(
                "does not export {PACKAGE}/operator (exports: {names:?}); is it a umd plugin?"
            )));
        };
        if abi.major != HOST_ABI.major {
            return Err(LoadError::AbiMismatch {
                path: origin.into(),
                plugin_abi: abi.to_string(),
                host_abi: HOST_ABI.to_string(),
            });
        }
        for (name, _) in ty.imports(&self.engine) {
            let allowed = name
                .strip_prefix(PACKAGE)
                .and_then(|r| {
                    r.strip_prefix("/host@")
                        .or_else(|| r.strip_prefix("/types@"))
                        .or_else(|| r.strip_prefix("/kernel-io@"))
                        .or_else(|| r.strip_prefix("/matrix@"))
                        .or_else(|| r.strip_prefix("/vector@"))
                })
                .and_then(|v| semver::Version::parse(v).ok())
                .is_some_and(|v| v.major == HOST_ABI.major);
            if !allowed {
                return Err(iface(format!(
                    "imports `{name}`, which the sandbox does not grant (plugins may import only {PACKAGE}/host, {PACKAGE}/kernel-io, {PACKAGE}/matrix and {PACKAGE}/vector)"
                )));
            }
        }
        Ok(abi)
    }
}

fn validate_info(origin: &str, info: &wit::PluginInfo) -> Result<(), LoadError> {
    let fail = |reason: String| {
        Err(LoadError::Describe {
            path: origin.into(),
            name: info.name.clone(),
            reason,
        })
    };
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !name_ok(&info.name) {
        return fail("name must be 1-64 characters of [A-Za-z0-9-_.]".into());
    }
    if semver::Version::parse(&info.version).is_err() {
        return fail(format!("version `{}` is not semver", info.version));
    }
    if info.ops.is_empty() {
        return fail("declares no ops".into());
    }
    for op in &info.ops {
        if !name_ok(&op.name) || op.targets.is_empty() {
            return fail(format!(
                "op `{}` has an invalid name or no targets",
                op.name
            ));
        }
    }
    Ok(())
}

fn validate_signatures(
    origin: &str,
    info: &wit::PluginInfo,
    sigs: &[wit::OpSignature],
) -> Result<(), LoadError> {
    let fail = |reason: String| {
        Err(LoadError::Describe {
            path: origin.into(),
            name: info.name.clone(),
            reason,
        })
    };
    if sigs.len() > MAX_SIGNATURES {
        return fail(format!(
            "{} op signatures; at most {MAX_SIGNATURES}",
            sigs.len()
        ));
    }
    for s in sigs {
        if !info
            .ops
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&s.name))
        {
            return fail(format!(
                "signature for op `{:.64}`, which it does not serve",
                s.name
            ));
        }
        if s.domain.len() > 128 || s.constant_inputs.len() > MAX_CONSTANT_INPUTS {
            return fail(format!("signature of `{}` is oversized", s.name));
        }
    }
    Ok(())
}

/// A warm instance: its own store (a trap makes a store unusable) and bindings.
struct Instance {
    store: Store<StoreState>,
    instance: ComponentInstance,
    bindings: PluginWorld,
    /// Its CPU kernel functions, once looked up.
    kernels: kernel_call::Funcs,
}

impl Instance {
    /// The typed export at `index`, kept in the slot `slot` picks: looked up and type-checked
    /// on its first use in this instance only.
    fn typed<P, R>(
        &mut self,
        slot: impl FnOnce(&mut kernel_call::Funcs) -> &mut Option<TypedFunc<P, R>>,
        index: ComponentExportIndex,
    ) -> wasmtime::Result<TypedFunc<P, R>>
    where
        P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower,
        R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift,
    {
        let slot = slot(&mut self.kernels);
        match *slot {
            Some(f) => Ok(f),
            None => Ok(*slot.insert(self.instance.get_typed_func(&mut self.store, index)?)),
        }
    }
}

/// A loaded, described plugin.
pub struct LoadedPlugin {
    runtime: Arc<Runtime>,
    origin: String,
    label: String,
    abi: semver::Version,
    wasm_hash: [u8; 32],
    provenance: artifacts::Provenance,
    load_time: std::time::Duration,
    pre: PluginPre<StoreState>,
    run_cpu_index: ComponentExportIndex,
    /// The 1.1 `self-test` export, when the plugin has it.
    self_test: Option<self_test::Exports>,
    /// The 1.2 `planner` export, when the plugin has it.
    planner: Option<planner::Exports>,
    /// The 1.4 `planner2` export, when the plugin has it.
    planner2: Option<planner::Exports2>,
    /// The 1.5 `planner3` export, when the plugin has it.
    planner3: Option<planner::Exports3>,
    /// The 1.7 `planner4.plan` export (plans with setup launches), when the plugin has it.
    planner4: Option<ComponentExportIndex>,
    /// The 1.3 `cpu-kernel` export, when the plugin has it.
    cpu_kernel: Option<kernel_io::Exports>,
    /// The 1.3 `device-code.device-module` export, when the plugin has it.
    device_module: Option<ComponentExportIndex>,
    /// The 1.6 `expander.expand` export, when the plugin has it.
    expander: Option<ComponentExportIndex>,
    /// (1.3) `splittable` answers by (module id, entry point); bounded by
    /// [`MAX_SPLITTABLE_ANSWERS`].
    splittable: Mutex<crate::memo::Memo<String, bool>>,
    /// (1.2) Op signatures (empty for older plugins).
    signatures: Vec<wit::OpSignature>,
    idle: Mutex<Vec<Instance>>,
    info: wit::PluginInfo,
    faults: AtomicU64,
    calls: AtomicU64,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("label", &self.label)
            .field("origin", &self.origin)
            .field("abi", &self.abi)
            .finish()
    }
}

impl LoadedPlugin {
    /// `name@version`.
    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn name(&self) -> &str {
        &self.info.name
    }
    pub fn version(&self) -> &str {
        &self.info.version
    }
    /// The ABI version the plugin was built for.
    pub fn abi(&self) -> &semver::Version {
        &self.abi
    }
    /// Where it was loaded from (a path or `bundled:NAME`).
    pub fn origin(&self) -> &str {
        &self.origin
    }
    pub fn ops(&self) -> &[wit::OpInfo] {
        &self.info.ops
    }
    pub fn wasm_hash(&self) -> &[u8; 32] {
        &self.wasm_hash
    }
    /// Whether the compiled code came from the artifact cache.
    pub fn provenance(&self) -> &artifacts::Provenance {
        &self.provenance
    }
    /// Time from bytes to a described, ready plugin.
    pub fn load_time(&self) -> std::time::Duration {
        self.load_time
    }
    /// Calls that faulted (trap, deadline, memory) since load.
    pub fn faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn instantiate(&self) -> wasmtime::Result<Instance> {
        let limits = self.runtime.limits;
        let mut store = Store::new(&self.runtime.engine, StoreState::new(&self.label, &limits));
        store.limiter(|s| s);
        // A guest cannot hold more than its linear memory, so a result of up to that size
        // (a large constant folded at load) may come back; wasmtime's default is 128 MiB.
        store.set_hostcall_fuel(limits.memory_bytes);
        store.epoch_deadline_trap();
        // The deadline must be set before instantiation: a start function runs under it too.
        store.set_epoch_deadline(ticks(limits.plan_deadline));
        let instance = self.pre.instance_pre().instantiate(&mut store)?;
        let bindings = PluginWorld::new(&mut store, &instance)?;
        Ok(Instance {
            store,
            instance,
            bindings,
            kernels: kernel_call::Funcs::default(),
        })
    }

    /// Runs `f` on a warm instance under `deadline`. Any error discards the instance.
    pub fn call<R>(
        &self,
        call: &'static str,
        deadline: Duration,
        f: impl FnOnce(&mut Store<StoreState>, &ComponentInstance, &PluginWorld) -> wasmtime::Result<R>,
    ) -> Result<R, PluginFault> {
        self.call_on(call, deadline, |i| {
            f(&mut i.store, &i.instance, &i.bindings)
        })
    }

    /// [`LoadedPlugin::call`] with the whole instance (its cached functions too).
    fn call_on<R>(
        &self,
        call: &'static str,
        deadline: Duration,
        f: impl FnOnce(&mut Instance) -> wasmtime::Result<R>,
    ) -> Result<R, PluginFault> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let pooled = self.idle.lock().pop();
        let mut inst = match pooled {
            Some(i) => i,
            None => self.instantiate().map_err(|e| {
                self.faults.fetch_add(1, Ordering::Relaxed);
                PluginFault::Trap {
                    call: "instantiate",
                    message: format!("{e:#}"),
                    last_log: None,
                }
            })?,
        };
        inst.store.set_epoch_deadline(ticks(deadline));
        inst.store.data_mut().last_log = None;
        match f(&mut inst) {
            Ok(r) => {
                let mut idle = self.idle.lock();
                if idle.len() < MAX_IDLE_INSTANCES {
                    idle.push(inst);
                }
                Ok(r)
            }
            Err(e) => {
                self.faults.fetch_add(1, Ordering::Relaxed);
                let fault = sandbox::classify(call, &e, inst.store.data(), deadline);
                tracing::warn!(plugin = %self.label, %fault, "plugin call failed; instance discarded");
                Err(fault)
            }
        }
    }

    /// The one-argument export at `index` (a planner's `plan`, `expander.expand`) under the
    /// plan deadline; wasmtime checks its type when it is looked up.
    fn call_planning<P, R>(
        &self,
        call: &'static str,
        index: ComponentExportIndex,
        arg: &P,
    ) -> Result<Result<R, wit::OpError>, PluginFault>
    where
        P: wasmtime::component::Lower,
        Result<R, wit::OpError>: wasmtime::component::Lift + 'static,
    {
        self.call(call, self.runtime.limits.plan_deadline, |s, inst, _| {
            let f = inst.get_typed_func::<(&P,), (Result<R, wit::OpError>,)>(&mut *s, index)?;
            Ok(f.call(s, (arg,))?.0)
        })
    }

    /// `plan` under the plan deadline.
    pub fn plan(
        &self,
        req: &wit::PlanRequest,
    ) -> Result<Result<wit::OpPlan, wit::OpError>, PluginFault> {
        self.call("plan", self.runtime.limits.plan_deadline, |s, _, p| {
            p.umd_plugin_operator().call_plan(s, req)
        })
    }

    /// Whether the plugin has the ABI 1.2 `planner` (ONNX-complete requests).
    pub fn has_planner(&self) -> bool {
        self.planner.is_some()
    }

    /// (1.2) The ops whose signature puts them in `domain`.
    pub fn ops_in_domain<'a>(&'a self, domain: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.signatures
            .iter()
            .filter(move |s| s.domain == domain)
            .map(|s| s.name.as_str())
    }

    /// (1.2) Input positions of `op` whose values a plan needs (empty for older plugins).
    pub fn constant_inputs(&self, op: &str) -> &[u32] {
        self.signatures
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(op))
            .map(|s| s.constant_inputs.as_slice())
            .unwrap_or_default()
    }

    fn fetch_signatures(&self) -> Result<Vec<wit::OpSignature>, PluginFault> {
        let Some(ex) = self.planner else {
            return Ok(Vec::new());
        };
        self.call(
            "planner.signatures",
            self.runtime.limits.plan_deadline,
            |s, inst, _| {
                let f =
                    inst.get_typed_func::<(), (Vec<wit::OpSignature>,)>(&mut *s, ex.signatures)?;
                Ok(f.call(s, ())?.0)
            },
        )
    }

    /// (1.2) `planner.plan` under the plan deadline; `None` for a plugin without the planner.
    pub fn plan_ext(
        &self,
        req: &wit::PlanRequestExt,
    ) -> Option<Result<Result<wit::OpPlanExt, wit::OpError>, PluginFault>> {
        let index = self.planner?.plan;
        Some(self.call_planning("planner.plan", index, req))
    }

    /// Whether the plugin has the ABI 1.4 `planner2` (packed sub-byte dtypes).
    pub fn has_planner2(&self) -> bool {
        self.planner2.is_some()
    }

    /// (1.4) `planner2.plan` under the plan deadline; `None` for a plugin without it.
    pub fn plan2(
        &self,
        req: &wit::PlanRequest2,
    ) -> Option<Result<Result<wit::OpPlan2, wit::OpError>, PluginFault>> {
        let index = self.planner2?.plan;
        Some(self.call_planning("planner2.plan", index, req))
    }

    /// Whether the plugin has the ABI 1.6 `expander` (ops served as compositions of ops).
    pub fn has_expander(&self) -> bool {
        self.expander.is_some()
    }

    /// (1.6) `expander.expand` under the plan deadline; `None` for a plugin without it.
    pub fn expand(
        &self,
        req: &wit::ExpandRequest,
    ) -> Option<Result<Result<wit::Expansion, wit::OpError>, PluginFault>> {
        let index = self.expander?;
        Some(self.call_planning("expander.expand", index, req))
    }

    /// Whether the plugin has the ABI 1.5 `planner3` (string tensors).
    pub fn has_planner3(&self) -> bool {
        self.planner3.is_some()
    }

    /// (1.5) `planner3.plan` under the plan deadline; `None` for a plugin without it.
    pub fn plan3(
        &self,
        req: &wit::PlanRequest3,
    ) -> Option<Result<Result<wit::OpPlan3, wit::OpError>, PluginFault>> {
        let index = self.planner3?.plan;
        Some(self.call_planning("planner3.plan", index, req))
    }

    /// Whether the plugin has the ABI 1.7 `planner4` (plans with setup launches).
    pub fn has_planner4(&self) -> bool {
        self.planner4.is_some()
    }

    /// (1.7) `planner4.plan` under the plan deadline; `None` for a plugin without it.
    pub fn plan4(
        &self,
        req: &wit::PlanRequest3,
    ) -> Option<Result<Result<wit::OpPlan4, wit::OpError>, PluginFault>> {
        let index = self.planner4?;
        Some(self.call_planning("planner4.plan", index, req))
    }

    /// (1.2) The plugin's tolerance for `op` in `dtype`, through `planner3` (1.5), `planner2` (1.4) or `planner`
    /// (1.2, 1.3); `None` when it declares none, is older than 1.2, or (1.2/1.3) cannot be told
    /// about `dtype`. A faulting call counts as none.
    pub fn tolerance(&self, op: &str, dtype: Dtype) -> Option<wit::OpTolerance> {
        let deadline = self.runtime.limits.plan_deadline;
        let answer = if let Some(ex) = self.planner3 {
            self.call("planner3.tolerance", deadline, |s, inst, _| {
                let f = inst.get_typed_func::<(&str, wit::Dtype3), (Option<wit::OpTolerance>,)>(
                    &mut *s,
                    ex.tolerance,
                )?;
                Ok(f.call(s, (op, convert::dtype_to_wit3(dtype)))?.0)
            })
        } else if let Some(ex) = self.planner2 {
            let dt = convert::dtype_to_wit2(dtype)?;
            self.call("planner2.tolerance", deadline, |s, inst, _| {
                let f = inst.get_typed_func::<(&str, wit::Dtype2), (Option<wit::OpTolerance>,)>(
                    &mut *s,
                    ex.tolerance,
                )?;
                Ok(f.call(s, (op, dt))?.0)
            })
        } else {
            let ex = self.planner?;
            let dt = convert::dtype_to_wit_ext(dtype)?;
            self.call("planner.tolerance", deadline, |s, inst, _| {
                let f = inst.get_typed_func::<(&str, wit::DtypeExt), (Option<wit::OpTolerance>,)>(
                    &mut *s,
                    ex.tolerance,
                )?;
                Ok(f.call(s, (op, dt))?.0)
            })
        };
        answer.ok().flatten().filter(|t| {
            t.absolute.is_finite()
                && t.relative.is_finite()
                && t.absolute >= 0.0
                && t.relative >= 0.0
        })
    }

    /// `kernel-source` under the plan deadline.
    pub fn kernel_source(
        &self,
        module_id: &str,
        target: &wit::Target,
    ) -> Result<Result<wit::ModuleSource, wit::OpError>, PluginFault> {
        self.call(
            "kernel-source",
            self.runtime.limits.plan_deadline,
            |s, _, p| {
                p.umd_plugin_operator()
                    .call_kernel_source(s, module_id, target)
            },
        )
    }

    /// (1.3) `device-code.device-module` under the plan deadline: the module as PTX (and a
    /// cubin); `Ok(Ok(None))` for CUDA C modules and plugins without the export.
    pub fn device_module(
        &self,
        module_id: &str,
        target: &wit::Target,
    ) -> Result<device_code::DeviceModuleResult, PluginFault> {
        let Some(index) = self.device_module else {
            return Ok(Ok(None));
        };
        self.call(
            "device-code.device-module",
            self.runtime.limits.plan_deadline,
            |s, inst, _| {
                let f = inst
                    .get_typed_func::<(&str, &wit::Target), (device_code::DeviceModuleResult,)>(
                        &mut *s, index,
                    )?;
                Ok(f.call(s, (module_id, target))?.0)
            },
        )
    }

    /// (1.1) The plugin's self-test cases; `None` for a plugin without the `self-test` export.
    pub fn self_test_cases(&self) -> Result<Option<Vec<self_test::TestCase>>, PluginFault> {
        let Some(ex) = self.self_test else {
            return Ok(None);
        };
        self.call(
            "self-test.cases",
            self.runtime.limits.plan_deadline,
            |s, inst, _| {
                let f =
                    inst.get_typed_func::<(), (Vec<self_test::TestCase>,)>(&mut *s, ex.cases)?;
                Ok(f.call(s, ())?.0)
            },
        )
        .map(Some)
    }

    /// (1.1) The plugin's tuning hints; empty for a plugin without the `self-test` export.
    pub fn tuning_hints(&self) -> Result<Vec<self_test::TuningHint>, PluginFault> {
        let Some(ex) = self.self_test else {
            return Ok(Vec::new());
        };
        self.call(
            "self-test.hints",
            self.runtime.limits.plan_deadline,
            |s, inst, _| {
                let f =
                    inst.get_typed_func::<(), (Vec<self_test::TuningHint>,)>(&mut *s, ex.hints)?;
                Ok(f.call(s, ())?.0)
            },
        )
    }

    /// (1.3) Whether the plugin runs its CPU kernels in place (`cpu-kernel`).
    pub fn runs_in_place(&self) -> bool {
        self.cpu_kernel.is_some()
    }

    /// (1.3) Whether `entry_point` of `module_id` may run as concurrent block ranges; asked
    /// once per module and entry point, false for a plugin without `cpu-kernel`.
    pub fn splittable(&self, module_id: &str, entry_point: &str) -> Result<bool, PluginFault> {
        let Some(ex) = self.cpu_kernel else {
            return Ok(false);
        };
        if let Some(&answer) = self.splittable.lock().get(module_id, entry_point) {
            return Ok(answer);
        }
        let answer = self.call(
            "cpu-kernel.splittable",
            self.runtime.limits.plan_deadline,
            |s, inst, _| {
                let f = inst.get_typed_func::<(&str, &str), (bool,)>(&mut *s, ex.splittable)?;
                Ok(f.call(s, (module_id, entry_point))?.0)
            },
        )?;
        self.splittable
            .lock()
            .insert(module_id.to_string(), entry_point, answer);
        Ok(answer)
    }

    /// (1.3) `cpu-kernel.run` under the kernel deadline, with `bound` readable and writable
    /// through `kernel-io` for the duration of the call. `None` for a plugin without it.
    pub fn run_in_place(
        &self,
        call: &kernel_call::KernelCallRef<'_>,
        bound: Arc<[crate::device::BoundMemory]>,
    ) -> Option<Result<kernel_call::RunKernelResult, PluginFault>> {
        let ex = self.cpu_kernel?;
        Some(
            self.call_on("cpu-kernel.run", self.runtime.limits.kernel_deadline, |i| {
                let f: kernel_call::RunInPlaceFn<'_> = i.typed(|k| &mut k.run_in_place, ex.run)?;
                i.store.data_mut().io = Some(bound);
                let result = f.call(&mut i.store, (call,));
                i.store.data_mut().io = None;
                Ok(result?.0)
            }),
        )
    }

    /// `run-cpu` under the kernel deadline, lowering the borrowed buffers directly.
    pub fn run_cpu(
        &self,
        call: &kernel_call::CpuCallRef<'_>,
    ) -> Result<kernel_call::RunCpuResult, PluginFault> {
        let index = self.run_cpu_index;
        self.call_on("run-cpu", self.runtime.limits.kernel_deadline, |i| {
            let f: kernel_call::RunCpuFn<'_> = i.typed(|k| &mut k.run_cpu, index)?;
            Ok(f.call(&mut i.store, (call,))?.0)
        })
    }
}

fn ticks(d: Duration) -> u64 {
    (d.as_micros() / TICK.as_micros()).max(1) as u64 + 1
}

/// The CPU matrix unit's packed copies of frozen weights held process-wide, and their bytes
/// (host memory beside the devices' buffers; bounded: [`packed`]).
pub fn packed_weights() -> (usize, usize) {
    packed::held_total()
}

/// The `.wasm` files of a directory, sorted by name.
pub fn component_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}
