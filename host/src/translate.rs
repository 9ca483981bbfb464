//! Translation: request → validated request → cache → plugin `plan` → validated plan → command
//! buffer (DESIGN §2 steps 1–7).
//!
//! Owns request validation, the fall-back order among candidate plugins, plan validation (a
//! plugin is never trusted) and module identity. Knows nothing of devices; talks to plugins only
//! through `LoadedPlugin` and the registry snapshot.

use std::sync::Arc;

use crate::cache::TranslationCache;
use crate::cmdbuf::{Binding, CommandBuffer, LaunchCmd, ModuleRef, Role};
use crate::error::{Error, PluginFault, RequestError, Result};
use crate::plugin::convert::{self, Declined};
use crate::plugin::{LoadedPlugin, wit};
use crate::registry::{Registry, Snapshot};
use crate::target::Target;
use crate::tensor::{AttrValue, Dtype, TensorDesc};

/// Largest workspace a plan may ask for (16 GiB).
pub const MAX_WORKSPACE_BYTES: u64 = 16 << 30;
/// Most bytes of text a plan may give one string output (1 GiB).
pub const MAX_TEXT_BYTES: u64 = 1 << 30;
/// Most outputs one op may produce.
pub const MAX_OUTPUTS: usize = 64;
/// Most bytes of constant input values one request may carry.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Most bytes of attribute values one request may carry: a trained model's tree ensemble or
/// support vectors (a 100-tree forest of depth 8 takes ~3 MB).
pub const MAX_ATTRIBUTE_BYTES: usize = 64 << 20;
/// Most input slots (present or absent) one request may have.
pub const MAX_INPUTS: usize = 64;

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
    /// (ABI 1.2) ONNX domain (`""` = `ai.onnx`).
    pub domain: String,
    /// (ABI 1.2) Opset version of `domain`; 0 = not said.
    pub opset: u32,
    /// (ABI 1.2) Positions of absent optional inputs in the full input list (sorted). `inputs`
    /// holds the present ones, in order: slot `i` is absent or the next present input.
    pub absent: Vec<u32>,
    /// (ABI 1.2) Values of present inputs known at plan time, by index into `inputs`.
    pub values: Vec<(u32, Vec<u8>)>,
    /// (ABI 1.2) Which outputs the caller uses; empty = the op's default outputs.
    pub outputs_wanted: Vec<bool>,
}

impl OpRequest {
    pub fn new(op: impl Into<String>, inputs: Vec<TensorDesc>) -> Self {
        OpRequest {
            op: op.into(),
            inputs,
            attributes: Vec::new(),
            target: None,
            domain: String::new(),
            opset: 0,
            absent: Vec::new(),
            values: Vec::new(),
            outputs_wanted: Vec::new(),
        }
    }

    /// Gives present input `index` its value (known at plan time).
    pub fn value(mut self, index: u32, bytes: Vec<u8>) -> Self {
        self.values.retain(|(i, _)| *i != index);
        self.values.push((index, bytes));
        self.values.sort_by_key(|(i, _)| *i);
        self
    }

    /// Whether the request names a string tensor (an input or a tensor attribute), which only a
    /// 1.5 plugin (`planner3`) can be told about.
    pub fn needs_abi_1_5(&self) -> bool {
        self.inputs.iter().any(|d| !d.dtype.in_abi_1_4())
            || self
                .attributes
                .iter()
                .any(|(_, v)| matches!(v, AttrValue::Tensor(d, _) if !d.dtype.in_abi_1_4()))
    }

    /// Whether the request names a packed sub-byte dtype (an input or a tensor attribute), which
    /// only a 1.4 plugin (`planner2`) can be told about.
    pub fn needs_abi_1_4(&self) -> bool {
        self.inputs.iter().any(|d| !d.dtype.in_abi_1_2())
            || self
                .attributes
                .iter()
                .any(|(_, v)| matches!(v, AttrValue::Tensor(d, _) if !d.dtype.in_abi_1_2()))
    }

    /// Whether the request says anything only ABI 1.2 can carry to a plugin.
    pub fn needs_abi_1_2(&self) -> bool {
        self.inputs.iter().any(|d| !d.dtype.in_abi_1_1())
            || !self.absent.is_empty()
            || !self.values.is_empty()
            || !self.outputs_wanted.is_empty()
            || self
                .attributes
                .iter()
                .any(|(_, v)| matches!(v, AttrValue::Texts(_) | AttrValue::Tensor(..)))
    }

    /// Number of input slots, present and absent.
    pub fn slots(&self) -> usize {
        self.inputs.len() + self.absent.len()
    }

    /// The index into `inputs` of input slot `slot`; `None` when it is absent or past the end.
    pub fn present_index(&self, slot: u32) -> Option<usize> {
        if slot as usize >= self.slots() || self.absent.binary_search(&slot).is_ok() {
            return None;
        }
        Some(slot as usize - self.absent.iter().filter(|&&a| a < slot).count())
    }

    pub fn attr(mut self, name: impl Into<String>, value: AttrValue) -> Self {
        self.attributes.push((name.into(), value));
        self
    }

    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    pub(crate) fn validate(&self) -> Result<(), RequestError> {
        if self.op.is_empty() || self.op.len() > 128 {
            return Err(RequestError::Other(
                "op name is empty or longer than 128 bytes".into(),
            ));
        }
        if self.slots() > MAX_INPUTS {
            return Err(RequestError::Other(format!(
                "{} input slots; at most {MAX_INPUTS}",
                self.slots()
            )));
        }
        for t in &self.inputs {
            t.validate()?;
        }
        if self.attributes.len() > 64 {
            return Err(RequestError::Attribute("more than 64 attributes".into()));
        }
        let max = crate::cmdbuf::limits::MAX_STRING;
        if let Some((name, _)) = self.attributes.iter().find(|(n, _)| n.len() > max) {
            return Err(RequestError::Attribute(format!(
                "attribute name `{name:.32}…` has {} bytes, the maximum is {max}",
                name.len()
            )));
        }
        if self.domain.len() > 128 {
            return Err(RequestError::Other("domain longer than 128 bytes".into()));
        }
        if self.outputs_wanted.len() > MAX_OUTPUTS {
            return Err(RequestError::Other(format!(
                "{} outputs wanted; at most {MAX_OUTPUTS}",
                self.outputs_wanted.len()
            )));
        }
        let slots = self.slots() as u32;
        if self.absent.windows(2).any(|w| w[0] >= w[1]) || self.absent.iter().any(|&a| a >= slots) {
            return Err(RequestError::Other(format!(
                "absent inputs {:?} must be distinct, sorted positions below {slots}",
                self.absent
            )));
        }
        let (mut bytes, mut attr_bytes) = (0usize, 0usize);
        for (i, v) in &self.values {
            let desc = self.inputs.get(*i as usize).ok_or_else(|| {
                RequestError::Other(format!(
                    "a value is given for input {i}, but there are {} present inputs",
                    self.inputs.len()
                ))
            })?;
            if desc.byte_size() != Some(v.len() as u64) {
                return Err(RequestError::Shape(format!(
                    "the value of input {i} has {} bytes; {desc} needs {}",
                    v.len(),
                    desc.byte_size().unwrap_or(0)
                )));
            }
            bytes += v.len();
        }
        for (i, d) in self.inputs.iter().enumerate() {
            if !d.dtype.is_string() {
                continue;
            }
            let Some((_, v)) = self.values.iter().find(|(j, _)| *j as usize == i) else {
                return Err(RequestError::Shape(format!(
                    "string input {i} (`{}`) has no value: string inputs are planned by value \
                     (at most {MAX_VALUE_BYTES} bytes)",
                    d.name
                )));
            };
            check_strings(v, d).map_err(|e| RequestError::Shape(format!("input {i}: {e}")))?;
        }
        for (name, v) in &self.attributes {
            if let AttrValue::Tensor(d, data) = v {
                d.validate()?;
                if d.byte_size() != Some(data.len() as u64) {
                    return Err(RequestError::Attribute(format!(
                        "tensor attribute `{name}` has {} bytes; {d} needs {}",
                        data.len(),
                        d.byte_size().unwrap_or(0)
                    )));
                }
                if d.dtype.is_string() {
                    check_strings(data, d)
                        .map_err(|e| RequestError::Attribute(format!("`{name}`: {e}")))?;
                }
            }
            attr_bytes += name.len() + v.byte_len();
        }
        if bytes > MAX_VALUE_BYTES {
            return Err(RequestError::Other(format!(
                "constant input values of {bytes} bytes; at most {MAX_VALUE_BYTES}"
            )));
        }
        if attr_bytes > MAX_ATTRIBUTE_BYTES {
            return Err(RequestError::Other(format!(
                "attribute values of {attr_bytes} bytes; at most {MAX_ATTRIBUTE_BYTES}"
            )));
        }
        Ok(())
    }
}

/// Checks that `bytes` is a well-formed string tensor described by `d` (offsets in order, the
/// text where they say).
fn check_strings(bytes: &[u8], d: &TensorDesc) -> Result<(), String> {
    let n = d
        .numel()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(usize::MAX);
    crate::text::decode(bytes, n)
        .map(drop)
        .map_err(|e| format!("malformed string tensor `{}`: {e}", d.name))
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
    /// Entry point of the first launch after the setup launches (the Translator protocol's
    /// `kernel_name`).
    pub kernel_name: String,
    /// Registry generation it was made under.
    pub generation: u64,
    /// (ABI 1.7) How many leading launches are setup: they only fill the workspace from their
    /// parameters (checked at plan validation), so a run of the same plan on the same workspace
    /// may skip them ([`Translation::split_setup`]); 0 for most plans.
    pub setup_launches: usize,
    /// The plugin version that planned it, kept alive so the translation can run on it even
    /// after a hot reload replaced it.
    pub planner: Arc<LoadedPlugin>,
}

impl Translation {
    /// For a plan with setup launches: the setup alone, as a command buffer with the workspace
    /// as its one binding, and the rest of the plan as a translation without them. A caller
    /// that keeps one workspace buffer for every run of the plan runs the setup once on it.
    pub fn split_setup(&self) -> Option<(CommandBuffer, Translation)> {
        let n = self.setup_launches;
        if n == 0 {
            return None;
        }
        let cb = &self.cmdbuf;
        let ws = cb.bindings.iter().position(|b| b.role == Role::Workspace)?;
        let mut launches = cb.launches.get(..n)?.to_vec();
        for r in launches.iter_mut().flat_map(|l| &mut l.relocations) {
            // checked at plan validation; checked again: a relocation rebound here must have
            // named the workspace
            if r.binding as usize != ws {
                return None;
            }
            r.binding = 0;
        }
        let setup = CommandBuffer {
            target: cb.target.clone(),
            bindings: vec![cb.bindings[ws].clone()],
            launches,
        };
        let rest = CommandBuffer {
            target: cb.target.clone(),
            bindings: cb.bindings.clone(),
            launches: cb.launches[n..].to_vec(),
        };
        Some((
            setup,
            Translation {
                bytes: rest.encode().into(),
                cmdbuf: Arc::new(rest),
                outputs: self.outputs.clone(),
                plugin: self.plugin.clone(),
                kernel_name: self.kernel_name.clone(),
                generation: self.generation,
                setup_launches: 0,
                planner: self.planner.clone(),
            },
        ))
    }
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

    /// The present inputs (indices into `req.inputs`) whose values some plugin that could serve
    /// `req` needs at plan time (its 1.2 op signature), and every string input (ABI 1.5: a plan
    /// sizes its string outputs from them), that `req` does not carry yet.
    pub fn missing_values(&self, req: &OpRequest) -> Vec<usize> {
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        let op = split_pin(&req.op).map(|(op, _)| op).unwrap_or(&req.op);
        let strings = req
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.dtype.is_string());
        let mut out: Vec<usize> = self
            .registry
            .snapshot()
            .candidates(op, target)
            .iter()
            .flat_map(|c| c.plugin.constant_inputs(op).to_vec())
            .filter_map(|slot| req.present_index(slot))
            .chain(strings.map(|(i, _)| i))
            .filter(|i| !req.values.iter().any(|(j, _)| *j as usize == *i))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Gives `req` the values of the inputs its plugins need at plan time, read by `read` (an
    /// input index and its byte size → its bytes). Inputs larger than [`MAX_VALUE_BYTES`] are left without one
    /// (the plugin then refuses the request, naming the input).
    pub fn fill_values<E>(
        &self,
        req: &mut OpRequest,
        mut read: impl FnMut(usize, u64) -> std::result::Result<Vec<u8>, E>,
    ) -> std::result::Result<(), E> {
        // At most MAX_VALUE_BYTES in all (what validation allows): nothing is read beyond it.
        let mut total: u64 = req.values.iter().map(|(_, v)| v.len() as u64).sum();
        for i in self.missing_values(req) {
            let Some(size) = req.inputs[i]
                .byte_size()
                .filter(|&b| total + b <= MAX_VALUE_BYTES as u64)
            else {
                continue;
            };
            let bytes = read(i, size)?;
            total += size;
            req.values.push((i as u32, bytes));
        }
        req.values.sort_by_key(|(i, _)| *i);
        Ok(())
    }

    /// The cached translation of `req`, if any (never enters a plugin).
    pub fn cached(&self, req: &OpRequest) -> Option<Arc<Translation>> {
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        self.cache
            .peek(req, target, self.registry.snapshot().generation)
    }

    /// Translates one request without looking it up in the cache or storing it there: for a
    /// request holding run-time values, whose key would be new on every run.
    pub fn translate_uncached_checked(&self, req: &OpRequest) -> Result<Translation> {
        req.validate()?;
        let snapshot = self.registry.snapshot();
        let target = req.target.as_ref().unwrap_or(&self.default_target);
        self.translate_uncached(req, target, &snapshot)
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
        let wit_req = WitRequest::new(op, req, target);
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
            &WitRequest::new(op, req, target),
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
        let wit_req = WitRequest::new(op, req, target);
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

/// The request in the forms plugins take, each built at most once per translation: 1.4
/// (`planner2.plan`), 1.2 (`planner.plan`) and 1.0/1.1 (`operator.plan`), and 1.5 (`planner3.plan`).
struct WitRequest<'a> {
    op: &'a str,
    req: &'a OpRequest,
    target: &'a Target,
    v3: std::cell::OnceCell<wit::PlanRequest3>,
    v2: std::cell::OnceCell<Option<wit::PlanRequest2>>,
    ext: std::cell::OnceCell<Option<wit::PlanRequestExt>>,
    legacy: std::cell::OnceCell<Option<wit::PlanRequest>>,
}

impl<'a> WitRequest<'a> {
    fn new(op: &'a str, req: &'a OpRequest, target: &'a Target) -> Self {
        WitRequest {
            op,
            req,
            target,
            v3: Default::default(),
            v2: Default::default(),
            ext: Default::default(),
            legacy: Default::default(),
        }
    }

    /// Each input slot: `None` when absent, else its description and value.
    fn slots<T>(
        &self,
        mut desc: impl FnMut(&TensorDesc) -> T,
    ) -> Vec<Option<(T, Option<Vec<u8>>)>> {
        let req = self.req;
        let mut present = req.inputs.iter().enumerate();
        (0..req.slots() as u32)
            .map(|slot| {
                if req.absent.binary_search(&slot).is_ok() {
                    return None;
                }
                let (i, d) = present.next()?;
                let value = req
                    .values
                    .iter()
                    .find(|(j, _)| *j as usize == i)
                    .map(|(_, v)| v.clone());
                Some((desc(d), value))
            })
            .collect()
    }

    fn v3(&self) -> &wit::PlanRequest3 {
        self.v3.get_or_init(|| {
            let req = self.req;
            wit::PlanRequest3 {
                op: self.op.to_string(),
                domain: req.domain.clone(),
                opset: req.opset,
                inputs: self
                    .slots(convert::tensor_to_wit3)
                    .into_iter()
                    .map(|s| s.map(|(desc, value)| wit::InputSlot3 { desc, value }))
                    .collect(),
                outputs_wanted: req.outputs_wanted.clone(),
                attributes: req
                    .attributes
                    .iter()
                    .map(|(k, v)| convert::attr_to_wit3(k, v))
                    .collect(),
                target: convert::target_to_wit(self.target),
            }
        })
    }

    /// `None`: the request names a string tensor only 1.5 can carry.
    fn v2(&self) -> Option<&wit::PlanRequest2> {
        self.v2
            .get_or_init(|| {
                let req = self.req;
                if req.needs_abi_1_5() {
                    return None;
                }
                Some(wit::PlanRequest2 {
                    op: self.op.to_string(),
                    domain: req.domain.clone(),
                    opset: req.opset,
                    inputs: self
                        .slots(convert::tensor_to_wit2)
                        .into_iter()
                        // a slot without this form makes no request (never an absent slot)
                        .map(|s| match s {
                            None => Some(None),
                            Some((desc, value)) => {
                                Some(Some(wit::InputSlot2 { desc: desc?, value }))
                            }
                        })
                        .collect::<Option<Vec<_>>>()?,
                    outputs_wanted: req.outputs_wanted.clone(),
                    attributes: req
                        .attributes
                        .iter()
                        .map(|(k, v)| convert::attr_to_wit2(k, v))
                        .collect::<Option<Vec<_>>>()?,
                    target: convert::target_to_wit(self.target),
                })
            })
            .as_ref()
    }

    /// `None`: the request names a packed dtype only 1.4 can carry.
    fn ext(&self) -> Option<&wit::PlanRequestExt> {
        self.ext
            .get_or_init(|| {
                let req = self.req;
                if req.needs_abi_1_4() || req.needs_abi_1_5() {
                    return None;
                }
                Some(wit::PlanRequestExt {
                    op: self.op.to_string(),
                    domain: req.domain.clone(),
                    opset: req.opset,
                    inputs: self
                        .slots(convert::tensor_to_wit_ext)
                        .into_iter()
                        // a slot without this form makes no request (never an absent slot)
                        .map(|s| match s {
                            None => Some(None),
                            Some((desc, value)) => {
                                Some(Some(wit::InputSlot { desc: desc?, value }))
                            }
                        })
                        .collect::<Option<Vec<_>>>()?,
                    outputs_wanted: req.outputs_wanted.clone(),
                    attributes: req
                        .attributes
                        .iter()
                        .map(|(k, v)| convert::attr_to_wit_ext(k, v))
                        .collect::<Option<Vec<_>>>()?,
                    target: convert::target_to_wit(self.target),
                })
            })
            .as_ref()
    }

    /// `None`: the request says something only 1.2 can carry.
    fn legacy(&self) -> Option<&wit::PlanRequest> {
        self.legacy
            .get_or_init(|| {
                if self.req.needs_abi_1_2() {
                    return None;
                }
                Some(wit::PlanRequest {
                    op: self.op.to_string(),
                    inputs: self
                        .req
                        .inputs
                        .iter()
                        .map(convert::tensor_to_wit)
                        .collect::<Option<Vec<_>>>()?,
                    attributes: self
                        .req
                        .attributes
                        .iter()
                        .filter_map(|(k, v)| convert::attr_to_wit(k, v))
                        .collect(),
                    target: convert::target_to_wit(self.target),
                })
            })
            .as_ref()
    }
}

/// An older plan (1.0/1.1, 1.2/1.3, 1.4) in the 1.5 form every plan is validated in: its
/// outputs through `desc` (every older dtype has a 1.5 twin), its launches as they are.
macro_rules! plan3 {
    ($p:expr, $desc:path) => {{
        let p = $p;
        wit::OpPlan3 {
            outputs: p
                .outputs
                .into_iter()
                .map(|o| convert::tensor_to_wit3(&$desc(o)))
                .collect(),
            launches: p.launches,
            workspace_bytes: p.workspace_bytes,
        }
    }};
}

/// Asks one plugin for a plan and validates it. `Ok(Err(reason))`: the plugin declined
/// (unsupported), so another may serve the request.
fn plan_on(
    p: &Arc<LoadedPlugin>,
    wit_req: &WitRequest<'_>,
    req: &OpRequest,
    target: &Target,
    generation: u64,
) -> Result<std::result::Result<Translation, String>> {
    let fault = |fault| Error::Plugin {
        plugin: p.label().to_string(),
        fault,
    };
    let mut setup = 0;
    let planned = if p.has_planner4() {
        p.plan4(wit_req.v3()).expect("has planner4").map(|r| {
            r.map(|p| {
                setup = p.setup_launches;
                p.plan
            })
        })
    } else if p.has_planner3() {
        p.plan3(wit_req.v3()).expect("has planner3")
    } else if p.has_planner2() {
        match wit_req.v2() {
            Some(v2) => p
                .plan2(v2)
                .expect("has planner2")
                .map(|r| r.map(|p| plan3!(p, convert::tensor_from_wit2))),
            None => {
                return Ok(Err(format!(
                    "built for umd:plugin@{}, which cannot take string tensors (ABI 1.5)",
                    p.abi()
                )));
            }
        }
    } else if p.has_planner() {
        match wit_req.ext() {
            Some(ext) => p
                .plan_ext(ext)
                .expect("has planner")
                .map(|r| r.map(|p| plan3!(p, convert::tensor_from_wit_ext))),
            None => {
                return Ok(Err(format!(
                    "built for umd:plugin@{}, which cannot take the packed sub-byte dtypes \
                     (INT4, UINT4, INT2, UINT2, FLOAT4E2M1; ABI 1.4) or string tensors (1.5)",
                    p.abi()
                )));
            }
        }
    } else {
        match wit_req.legacy() {
            Some(legacy) => p
                .plan(legacy)
                .map(|r| r.map(|p| plan3!(p, convert::tensor_from_wit))),
            None => {
                return Ok(Err(format!(
                    "built for umd:plugin@{}, which cannot take absent inputs, constant values, \
                     outputs wanted, tensor/string-list attributes or 1.2 dtypes",
                    p.abi()
                )));
            }
        }
    };
    match planned.map_err(fault)? {
        Ok(plan) => {
            let hash = |module: &str| crate::registry::module_hash(p, module, &target.arch);
            let cb = build_command_buffer(p.label(), &hash, req, target, plan).map_err(fault)?;
            let setup = check_setup(&cb, setup).map_err(fault)?;
            Ok(Ok(finish(cb, setup, p.clone(), generation)))
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

fn finish(
    cb: CommandBuffer,
    setup_launches: usize,
    planner: Arc<LoadedPlugin>,
    generation: u64,
) -> Translation {
    let bytes: Arc<[u8]> = cb.encode().into();
    let outputs = cb
        .bindings
        .iter()
        .filter(|b| b.role == Role::Output)
        .map(|b| b.desc.clone())
        .collect();
    // The op's own kernel, not a setup launch filling a table.
    let kernel_name = cb
        .launches
        .get(setup_launches)
        .or(cb.launches.first())
        .map(|l| l.entry_point.clone())
        .unwrap_or_default();
    Translation {
        cmdbuf: Arc::new(cb),
        bytes,
        outputs,
        plugin: planner.label().to_string(),
        kernel_name,
        generation,
        setup_launches,
        planner,
    }
}

/// Checks a 1.7 plan's `setup` launches (the first ones): they name only the workspace, and no
/// later launch writes it — so the workspace a setup filled can be kept and the setup skipped on
/// the next run of the same plan on the same buffers. Returns the count.
fn check_setup(cb: &CommandBuffer, setup: u32) -> Result<usize, PluginFault> {
    let setup = setup as usize;
    if setup == 0 {
        return Ok(0);
    }
    let invalid = |m: String| Err(PluginFault::InvalidPlan(m));
    if setup > cb.launches.len() {
        return invalid(format!(
            "{setup} setup launches of a plan with {} launches",
            cb.launches.len()
        ));
    }
    let Some(ws) = cb.bindings.iter().position(|b| b.role == Role::Workspace) else {
        return invalid(format!("{setup} setup launches but no workspace to fill"));
    };
    for (i, l) in cb.launches.iter().enumerate() {
        for r in &l.relocations {
            if i < setup && r.binding as usize != ws {
                return invalid(format!(
                    "setup launch {i} (`{}`) binds binding {}: a setup launch binds only the \
                     workspace",
                    l.entry_point, r.binding
                ));
            }
            if i >= setup && r.binding as usize == ws && r.access.writes() {
                return invalid(format!(
                    "launch {i} (`{}`) writes the workspace its plan's setup launches fill",
                    l.entry_point
                ));
            }
        }
    }
    Ok(setup)
}

/// Plan validation alone, as for a plan from a plugin labelled `fuzz@0.0.0` (for the fuzzer in
/// `fuzz/`: what a hostile plugin may return must be refused, never panic). The plan is in the
/// 1.7 form (every older plan is converted to its `op-plan3` with no setup launches); returns
/// the command buffer and its count of setup launches.
#[doc(hidden)]
pub fn validate_plan(
    req: &OpRequest,
    target: &Target,
    plan: wit::OpPlan4,
) -> std::result::Result<(CommandBuffer, usize), PluginFault> {
    let cb = build_command_buffer("fuzz@0.0.0", &|_| [0; 32], req, target, plan.plan)?;
    let setup = check_setup(&cb, plan.setup_launches)?;
    Ok((cb, setup))
}

/// Turns the plan of plugin `label` into a validated command buffer (DESIGN §2 step 5);
/// `module_hash` names each module's build.
fn build_command_buffer(
    label: &str,
    module_hash: &dyn Fn(&str) -> [u8; 32],
    req: &OpRequest,
    target: &Target,
    plan: wit::OpPlan3,
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
        let desc = convert::tensor_from_wit3(o);
        if let Err(e) = desc.validate() {
            return Err(invalid(format!("output {i}: {e}")));
        }
        if desc.text_bytes > MAX_TEXT_BYTES {
            return Err(invalid(format!(
                "output {i} says {} bytes of text; at most {MAX_TEXT_BYTES}",
                desc.text_bytes
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
                plugin: label.to_string(),
                hash: module_hash(&l.module_id),
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
