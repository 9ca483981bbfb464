//! Translation: request → validated request → cache → plugin `plan` → validated plan → command
//! buffer (DESIGN §2 steps 1–7).
//!
//! Owns request validation, the fall-back order among candidate plugins, plan validation (a
//! plugin is never trusted) and module identity. Knows nothing of devices; talks to plugins only
//! through `LoadedPlugin` and the registry snapshot.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::cache::TranslationCache;
use crate::cmdbuf::{Binding, CommandBuffer, LaunchCmd, ModuleRef, Role};
use crate::error::{Error, PluginFault, RequestError, Result};
use crate::plugin::convert::{self, Declined};
use crate::plugin::{LoadedPlugin, wit};
use crate::registry::{Registry, Snapshot};
use crate::target::Target;
use crate::tensor::{AttrValue, Dtype, MAX_ELEMENTS, TensorDesc};

/// Largest workspace a plan may ask for (16 GiB).
pub const MAX_WORKSPACE_BYTES: u64 = 16 << 30;
/// Most outputs one op may produce.
pub const MAX_OUTPUTS: usize = 64;

/// One operation to translate.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRequest {
    /// ONNX op name, matched case-insensitively.
    pub op: String,
    pub inputs: Vec<TensorDesc>,
    /// Attributes in a stable order.
    pub attributes: Vec<(String, AttrValue)>,
    /// `None`: the host's default target (its device's).
    pub target: Option<Target>,
}

impl OpRequest {
    pub fn new(op: impl Into<String>, inputs: Vec<TensorDesc>) -> Self {
        OpRequest {
            op: op.into(),
            inputs,
            attributes: Vec::new(),
            target: None,
        }
    }

    pub fn attr(mut self, name: impl Into<String>, value: AttrValue) -> Self {
        self.attributes.push((name.into(), value));
        self
    }

    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    fn validate(&self) -> Result<(), RequestError> {
        if self.op.is_empty() || self.op.len() > 128 {
            return Err(RequestError::Other(
                "op name is empty or longer than 128 bytes".into(),
            ));
        }
        if self.inputs.len() > 64 {
            return Err(RequestError::Other(format!(
                "{} inputs; at most 64",
                self.inputs.len()
            )));
        }
        for t in &self.inputs {
            t.validate()?;
        }
        if self.attributes.len() > 64 {
            return Err(RequestError::Attribute("more than 64 attributes".into()));
        }
        Ok(())
    }
}

/// A translated op: its command buffer and what a caller needs to run it.
#[derive(Debug)]
pub struct Translation {
    pub cmdbuf: Arc<CommandBuffer>,
    /// The encoded `UMDCMD` bytes.
    pub bytes: Arc<[u8]>,
    pub outputs: Vec<TensorDesc>,
    /// `name@version` of the plugin that planned it.
    pub plugin: String,
    /// Entry point of the first launch (the Translator protocol's `kernel_name`).
    pub kernel_name: String,
    /// Registry generation it was made under.
    pub generation: u64,
    /// The plugin version that planned it, kept alive so the translation can run on it even
    /// after a hot reload replaced it.
    pub planner: Arc<LoadedPlugin>,
}

/// Translates requests against a registry, with a cache in front.
pub struct Translator {
    registry: Arc<Registry>,
    cache: TranslationCache,
    default_target: Target,
}

impl Translator {
    pub fn new(registry: Arc<Registry>, default_target: Target, cache_capacity: usize) -> Self {
        Translator {
            registry,
            cache: TranslationCache::new(cache_capacity),
            default_target,
        }
    }

    pub fn cache(&self) -> &TranslationCache {
        &self.cache
    }

    pub fn default_target(&self) -> &Target {
        &self.default_target
    }

    /// The cached translation of `req`, if any (never enters a plugin).
    pub fn cached(&self, req: &OpRequest) -> Option<Arc<Translation>> {
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        self.cache
            .peek(req, target, self.registry.snapshot().generation)
    }

    /// Translates one request.
    pub fn translate(&self, req: &OpRequest) -> Result<Arc<Translation>> {
        let snapshot = self.registry.snapshot();
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        if let Some(hit) = self.cache.get(req, target, snapshot.generation) {
            return Ok(hit);
        }
        req.validate()?;
        let t = Arc::new(self.translate_uncached(req, target, &snapshot)?);
        self.cache
            .insert(req, target, snapshot.generation, t.clone());
        Ok(t)
    }

    fn translate_uncached(
        &self,
        req: &OpRequest,
        target: &Target,
        snap: &Snapshot,
    ) -> Result<Translation> {
        let (op, pin) = split_pin(&req.op)?;
        let wit_req = plan_request(op, req, target);
        let mut declined = Vec::new();
        for c in snap.candidates(op, target) {
            if let Some(why) = pinned_out(&c.plugin, pin.as_ref()) {
                declined.push(why);
                continue;
            }
            match plan_on(&c.plugin, &wit_req, req, target, snap.generation)? {
                Ok(t) => return Ok(t),
                Err(why) => declined.push(format!("{}: {why}", c.plugin.label())),
            }
        }
        Err(Error::Unsupported {
            op: req.op.clone(),
            target: target.name.clone(),
            tried: declined,
        })
    }

    /// Plans `req` with one given plugin, bypassing selection and the cache (admission tests).
    pub fn plan_with(&self, plugin: &Arc<LoadedPlugin>, req: &OpRequest) -> Result<Translation> {
        req.validate()?;
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        let generation = self.registry.snapshot().generation;
        let (op, _) = split_pin(&req.op)?;
        plan_on(
            plugin,
            &plan_request(op, req, target),
            req,
            target,
            generation,
        )?
        .map_err(|why| Error::Unsupported {
            op: req.op.clone(),
            target: target.name.clone(),
            tried: vec![format!("{}: {why}", plugin.label())],
        })
    }
}

/// Splits `Add@1.2` into the op and a version requirement on the plugin serving it.
fn split_pin(op: &str) -> Result<(&str, Option<semver::VersionReq>), RequestError> {
    match op.split_once('@') {
        None => Ok((op, None)),
        Some((name, req)) => semver::VersionReq::parse(req)
            .map(|v| (name, Some(v)))
            .map_err(|e| RequestError::Other(format!("bad version pin `{req}` in `{op}`: {e}"))),
    }
}

/// Why a pinned request may not use `plugin` (`None`: it may).
fn pinned_out(plugin: &LoadedPlugin, pin: Option<&semver::VersionReq>) -> Option<String> {
    let pin = pin?;
    let ok = semver::Version::parse(plugin.version()).is_ok_and(|v| pin.matches(&v));
    (!ok).then(|| format!("{}: version does not match the pin {pin}", plugin.label()))
}

/// What happened to one candidate in [`Translator::explain`].
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It planned the request (its first launch's entry point).
    Chosen(String),
    /// It declined (unsupported dtype, shape, target): the next candidate was asked.
    Declined(String),
    /// It failed or rejected the request: translation stops here with this error.
    Failed(String),
    /// Excluded by the request's version pin.
    PinnedOut,
    /// Not asked: a better-ranked candidate already decided.
    NotAsked,
}

/// One candidate plugin for a request, in rank order.
#[derive(Debug, Clone)]
pub struct Candidacy {
    pub plugin: String,
    /// 3 exact target, 2 family, 1 `*`.
    pub specificity: u8,
    pub priority: i32,
    pub outcome: Outcome,
}

impl Translator {
    /// Every plugin that could serve `req`, best first, and what each did with it (for
    /// `umd plugins explain`). Plans for real but caches nothing.
    pub fn explain(&self, req: &OpRequest) -> Result<Vec<Candidacy>> {
        req.validate()?;
        let (op, pin) = split_pin(&req.op)?;
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        let snap = self.registry.snapshot();
        let wit_req = plan_request(op, req, target);
        let mut decided = false;
        let mut rows = Vec::new();
        for c in snap.candidates(op, target) {
            let outcome = if pinned_out(&c.plugin, pin.as_ref()).is_some() {
                Outcome::PinnedOut
            } else if decided {
                Outcome::NotAsked
            } else {
                match plan_on(&c.plugin, &wit_req, req, target, snap.generation) {
                    Ok(Ok(t)) => {
                        decided = true;
                        Outcome::Chosen(t.kernel_name)
                    }
                    Ok(Err(why)) => Outcome::Declined(why),
                    Err(e) => {
                        decided = true;
                        Outcome::Failed(e.to_string())
                    }
                }
            };
            rows.push(Candidacy {
                plugin: c.plugin.label().to_string(),
                specificity: c.specificity,
                priority: c.priority,
                outcome,
            });
        }
        Ok(rows)
    }
}

fn plan_request(op: &str, req: &OpRequest, target: &Target) -> wit::PlanRequest {
    wit::PlanRequest {
        op: op.to_string(),
        inputs: req.inputs.iter().map(convert::tensor_to_wit).collect(),
        attributes: req
            .attributes
            .iter()
            .map(|(k, v)| convert::attr_to_wit(k, v))
            .collect(),
        target: convert::target_to_wit(target),
    }
}

/// Asks one plugin for a plan and validates it. `Ok(Err(reason))`: the plugin declined
/// (unsupported), so another may serve the request.
fn plan_on(
    p: &Arc<LoadedPlugin>,
    wit_req: &wit::PlanRequest,
    req: &OpRequest,
    target: &Target,
    generation: u64,
) -> Result<std::result::Result<Translation, String>> {
    let fault = |fault| Error::Plugin {
        plugin: p.label().to_string(),
        fault,
    };
    match p.plan(wit_req).map_err(fault)? {
        Ok(plan) => {
            let cb = build_command_buffer(p, req, target, plan).map_err(fault)?;
            Ok(Ok(finish(cb, p.clone(), generation)))
        }
        Err(e) => match convert::op_error(e) {
            Declined::Unsupported(m) => Ok(Err(m)),
            Declined::Invalid(m) => Err(Error::Rejected {
                plugin: p.label().to_string(),
                message: m,
            }),
            Declined::Internal(m) => Err(fault(PluginFault::Internal(m))),
        },
    }
}

fn finish(cb: CommandBuffer, planner: Arc<LoadedPlugin>, generation: u64) -> Translation {
    let bytes: Arc<[u8]> = cb.encode().into();
    let outputs = cb
        .bindings
        .iter()
        .filter(|b| b.role == Role::Output)
        .map(|b| b.desc.clone())
        .collect();
    let kernel_name = cb
        .launches
        .first()
        .map(|l| l.entry_point.clone())
        .unwrap_or_default();
    Translation {
        cmdbuf: Arc::new(cb),
        bytes,
        outputs,
        plugin: planner.label().to_string(),
        kernel_name,
        generation,
        planner,
    }
}

/// Turns a plugin's plan into a validated command buffer (DESIGN §2 step 5).
fn build_command_buffer(
    plugin: &LoadedPlugin,
    req: &OpRequest,
    target: &Target,
    plan: wit::OpPlan,
) -> Result<CommandBuffer, PluginFault> {
    let invalid = |m: String| PluginFault::InvalidPlan(m);
    if plan.outputs.is_empty() || plan.outputs.len() > MAX_OUTPUTS {
        return Err(invalid(format!(
            "{} outputs (1 to {MAX_OUTPUTS} allowed)",
            plan.outputs.len()
        )));
    }
    if plan.launches.is_empty() {
        return Err(invalid("no launches".into()));
    }
    if plan.workspace_bytes > MAX_WORKSPACE_BYTES {
        return Err(invalid(format!(
            "workspace of {} bytes exceeds {MAX_WORKSPACE_BYTES}",
            plan.workspace_bytes
        )));
    }
    let mut bindings: Vec<Binding> = req
        .inputs
        .iter()
        .map(|d| Binding {
            role: Role::Input,
            desc: d.clone(),
        })
        .collect();
    for (i, o) in plan.outputs.into_iter().enumerate() {
        let desc = convert::tensor_from_wit(o);
        if desc.validate().is_err() || desc.numel().is_none_or(|n| n > MAX_ELEMENTS) {
            return Err(invalid(format!(
                "output {i} has an invalid shape {:?}",
                desc.shape
            )));
        }
        bindings.push(Binding {
            role: Role::Output,
            desc,
        });
    }
    if plan.workspace_bytes > 0 {
        bindings.push(Binding {
            role: Role::Workspace,
            desc: TensorDesc::new("workspace", vec![plan.workspace_bytes], Dtype::U8),
        });
    }
    let launches = plan
        .launches
        .into_iter()
        .map(|l| LaunchCmd {
            module: ModuleRef {
                plugin: plugin.label().to_string(),
                hash: module_hash(plugin, &l.module_id, target),
                id: l.module_id,
            },
            entry_point: l.entry_point,
            grid: convert::dim3_from_wit(l.grid),
            block: convert::dim3_from_wit(l.block),
            shared_memory: l.shared_memory,
            relocations: l
                .relocations
                .iter()
                .map(convert::relocation_from_wit)
                .collect(),
            params: l.params,
        })
        .collect();
    let cb = CommandBuffer {
        target: target.name.clone(),
        bindings,
        launches,
    };
    cb.validate(Some(&target.limits))
        .map_err(|e| invalid(e.to_string()))?;
    // Every output must be written by some launch, or it would be returned uninitialized.
    for (i, b) in cb.bindings.iter().enumerate() {
        let written = cb
            .launches
            .iter()
            .flat_map(|l| &l.relocations)
            .any(|r| r.binding as usize == i && r.access.writes());
        if b.role == Role::Output && !written {
            return Err(invalid(format!("output binding {i} is never written")));
        }
    }
    Ok(cb)
}

/// The identity of a module: which plugin build provides it, which module, for which target.
/// (GPU devices key their compiled-module cache by the kernel source itself.)
fn module_hash(plugin: &LoadedPlugin, module_id: &str, target: &Target) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(plugin.wasm_hash());
    h.update(module_id.as_bytes());
    h.update([0]);
    h.update(target.arch.as_bytes());
    h.finalize().into()
}
