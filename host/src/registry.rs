//! The registry: which plugin serves which (op, target), as atomic snapshots.
//!
//! Readers take a snapshot (one atomic load) and keep using it for the whole request, so a
//! request that started on a plugin version finishes on it even if the registry changes. Every
//! change bumps the generation, which is part of every translation-cache key. Owns no wasmtime
//! state beyond the `Arc<LoadedPlugin>`s it lists.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::plugin::LoadedPlugin;
use crate::target::Target;

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
    /// Every version ever inserted, by label, while something (a translation, a call in
    /// flight) still holds it: work planned by a replaced version still runs on it.
    known: Mutex<HashMap<String, Weak<LoadedPlugin>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            current: ArcSwap::from_pointee(Snapshot::default()),
            write: Mutex::new(()),
            known: Mutex::new(HashMap::new()),
        }
    }
}

impl Registry {
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// The plugin `name@version`: the live one, or a replaced one still held by earlier work.
    pub fn find_label(&self, label: &str) -> Option<Arc<LoadedPlugin>> {
        if let Some(p) = self.snapshot().by_label(label) {
            return Some(p.clone());
        }
        self.known.lock().get(label).and_then(Weak::upgrade)
    }

    /// Makes a plugin findable by label (for work it planned) without offering its ops.
    pub fn remember(&self, plugin: &Arc<LoadedPlugin>) {
        let mut known = self.known.lock();
        known.retain(|_, w| w.strong_count() > 0);
        known.insert(plugin.label().to_string(), Arc::downgrade(plugin));
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
