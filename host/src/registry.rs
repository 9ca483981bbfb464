//! The registry: which plugin serves which (op, target), as atomic snapshots.
//!
//! Readers take a snapshot (one atomic load) and keep using it for the whole request, so a
//! request that started on a plugin version finishes on it even if the registry changes. Every
//! change bumps the generation, which is part of every translation-cache key. Owns no wasmtime
//! state beyond the `Arc<LoadedPlugin>`s it lists.
//!
//! It also resolves a command buffer's [`ModuleRef`] to the exact plugin *build* that planned it
//! ([`Registry::resolve`]): the module hash folds in the build's `wasm_hash`, so a rebuilt plugin
//! with an unchanged `name@version`, or the version a hot swap replaced, is never mistaken for
//! another build.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::cmdbuf::ModuleRef;
use crate::plugin::LoadedPlugin;
use crate::target::Target;

/// Most module hashes [`Registry::resolve`] remembers; past it the memo starts over.
const MAX_RESOLVED: usize = 4096;
/// Most builds remembered for work they planned (live or retired); past it the entries whose
/// builds are gone are dropped first, then the oldest.
const MAX_KNOWN: usize = 256;

/// The identity of a module: which plugin build provides it (its `wasm_hash`), which module, for
/// which target architecture. What a command buffer's [`ModuleRef::hash`] holds.
pub fn module_hash(plugin: &LoadedPlugin, module_id: &str, arch: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(plugin.wasm_hash());
    h.update(module_id.as_bytes());
    h.update([0]);
    h.update(arch.as_bytes());
    h.finalize().into()
}

/// Why a module could not be resolved to a loaded build.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ResolveError {
    #[error("plugin {plugin} is no longer loaded (module `{module}`)")]
    Unloaded { plugin: String, module: String },
    #[error(
        "module `{module}` (hash {hash}…) was planned by a build of {plugin} that is no longer \
         loaded (loaded builds of {plugin}: {loaded}); translate again"
    )]
    BuildGone {
        plugin: String,
        module: String,
        hash: String,
        loaded: String,
    },
}

/// The first 12 hex digits of a hash: enough to tell builds apart in a message.
pub fn short_hash(h: &[u8; 32]) -> String {
    h[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// One plugin able to serve one op.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub plugin: Arc<LoadedPlugin>,
    /// 3 exact target, 2 family, 1 `*`.
    pub specificity: u8,
    pub priority: i32,
}

/// An immutable view of the registry.
#[derive(Default)]
pub struct Snapshot {
    pub generation: u64,
    plugins: Vec<Arc<LoadedPlugin>>,
    /// lowercase op name → (plugin index, declared targets, priority)
    by_op: HashMap<String, Vec<(usize, Vec<String>, i32)>>,
}

impl Snapshot {
    fn build(generation: u64, plugins: Vec<Arc<LoadedPlugin>>) -> Snapshot {
        let mut by_op: HashMap<String, Vec<(usize, Vec<String>, i32)>> = HashMap::new();
        for (i, p) in plugins.iter().enumerate() {
            for op in p.ops() {
                by_op
                    .entry(op.name.to_ascii_lowercase())
                    .or_default()
                    .push((i, op.targets.clone(), op.priority));
            }
        }
        Snapshot {
            generation,
            plugins,
            by_op,
        }
    }

    pub fn plugins(&self) -> &[Arc<LoadedPlugin>] {
        &self.plugins
    }

    /// Plugins serving `op` on `target`, best first: most specific target, then highest
    /// priority, then load order.
    pub fn candidates(&self, op: &str, target: &Target) -> Vec<Candidate> {
        let Some(entries) = self.by_op.get(&op.to_ascii_lowercase()) else {
            return Vec::new();
        };
        let mut out: Vec<Candidate> = entries
            .iter()
            .filter_map(|(i, targets, priority)| {
                let specificity = targets.iter().filter_map(|t| target.specificity(t)).max()?;
                Some(Candidate {
                    plugin: self.plugins[*i].clone(),
                    specificity,
                    priority: *priority,
                })
            })
            .collect();
        out.sort_by_key(|c| std::cmp::Reverse((c.specificity, c.priority)));
        out
    }

    /// The plugin with this `name@version` label.
    pub fn by_label(&self, label: &str) -> Option<&Arc<LoadedPlugin>> {
        self.plugins.iter().find(|p| p.label() == label)
    }
}

/// The live registry.
pub struct Registry {
    current: ArcSwap<Snapshot>,
    /// Serializes writers; readers never take it.
    write: Mutex<()>,
    /// Every build inserted or being admitted, while something (a translation, a call in
    /// flight) still holds it: work planned by a replaced build still runs on it. Two builds
    /// may share a label (a rebuild without a version bump).
    known: Mutex<Vec<Weak<LoadedPlugin>>>,
    /// Module hash → the build it was resolved to (a memo; checked against the label).
    resolved: RwLock<foldhash::HashMap<[u8; 32], Weak<LoadedPlugin>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            current: ArcSwap::from_pointee(Snapshot::default()),
            write: Mutex::new(()),
            known: Mutex::new(Vec::new()),
            resolved: RwLock::new(foldhash::HashMap::default()),
        }
    }
}

impl Registry {
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Every build labelled `name@version` that is still held: the live one first.
    pub fn builds(&self, label: &str) -> Vec<Arc<LoadedPlugin>> {
        let mut out: Vec<Arc<LoadedPlugin>> = self
            .snapshot()
            .by_label(label)
            .cloned()
            .into_iter()
            .collect();
        for p in self.known.lock().iter().filter_map(Weak::upgrade) {
            if p.label() == label && !out.iter().any(|o| Arc::ptr_eq(o, &p)) {
                out.push(p);
            }
        }
        out
    }

    /// The exact build that planned `module` for a target of architecture `arch`: the build
    /// whose [`module_hash`] is the module's hash, among the builds labelled `module.plugin`
    /// still held. Never another build of the same label.
    pub fn resolve(
        &self,
        module: &ModuleRef,
        arch: &str,
    ) -> Result<Arc<LoadedPlugin>, ResolveError> {
        if let Some(p) = self
            .resolved
            .read()
            .get(&module.hash)
            .and_then(Weak::upgrade)
            && p.label() == module.plugin
        {
            return Ok(p);
        }
        let builds = self.builds(&module.plugin);
        if builds.is_empty() {
            return Err(ResolveError::Unloaded {
                plugin: module.plugin.clone(),
                module: module.id.clone(),
            });
        }
        let found = builds
            .iter()
            .find(|p| module_hash(p, &module.id, arch) == module.hash)
            .cloned()
            .ok_or_else(|| ResolveError::BuildGone {
                plugin: module.plugin.clone(),
                module: module.id.clone(),
                hash: short_hash(&module.hash),
                loaded: builds
                    .iter()
                    .map(|p| format!("wasm {}…", short_hash(p.wasm_hash())))
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let mut memo = self.resolved.write();
        if memo.len() >= MAX_RESOLVED {
            memo.retain(|_, w| w.strong_count() > 0);
            if memo.len() >= MAX_RESOLVED {
                memo.clear();
            }
        }
        memo.insert(module.hash, Arc::downgrade(&found));
        Ok(found)
    }

    /// Makes a build resolvable (for work it planned, e.g. its admission self-tests) without
    /// offering its ops.
    pub fn remember(&self, plugin: &Arc<LoadedPlugin>) {
        let mut known = self.known.lock();
        known.retain(|w| w.strong_count() > 0);
        if known
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(plugin)))
        {
            return;
        }
        if known.len() >= MAX_KNOWN {
            known.remove(0);
        }
        known.push(Arc::downgrade(plugin));
    }

    /// Adds a plugin; one with the same name is replaced (its in-flight calls finish on it).
    pub fn insert(&self, plugin: Arc<LoadedPlugin>) {
        self.remember(&plugin);
        self.update(|plugins| {
            plugins.retain(|p| p.name() != plugin.name());
            plugins.push(plugin);
        });
    }

    /// Removes the plugin named `name`; returns whether one was loaded.
    pub fn remove(&self, name: &str) -> bool {
        let mut found = false;
        self.update(|plugins| {
            let before = plugins.len();
            plugins.retain(|p| p.name() != name);
            found = plugins.len() != before;
        });
        found
    }

    fn update(&self, f: impl FnOnce(&mut Vec<Arc<LoadedPlugin>>)) {
        let _guard = self.write.lock();
        let old = self.current.load();
        let mut plugins = old.plugins.clone();
        f(&mut plugins);
        self.current
            .store(Arc::new(Snapshot::build(old.generation + 1, plugins)));
    }
}
