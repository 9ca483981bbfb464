//! The modules loaded on one device: a launch's [`ModuleRef`] maps to a loaded module (fetched
//! once: kernel source from the plugin, cubin or PTX from the [`KernelCache`], then loaded into
//! the context: the cubin when there is one, so the driver need not JIT-compile) and an entry
//! point to a kernel handle.
//!
//! Loaded modules are shared by PTX content key, so references that only differ by name (or a
//! forged hash) never load the same code twice; the reference map is bounded.
//! Owns loaded modules; must not compile (that is `modules`), launch or touch buffers.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::driver::{Context, Function, Module};
use super::modules::{Compiled, Compiler, KernelCache};
use crate::cmdbuf::ModuleRef;
use crate::device::KernelSources;
use crate::target::Target;

/// Most module references remembered; past it the map starts over (modules stay loaded).
const REFERENCES: usize = 4096;

/// One loaded module and the kernels fetched from it.
pub struct Loaded {
    module: Module,
    entry_points: Vec<String>,
    functions: RwLock<HashMap<String, Function>>,
}

impl Loaded {
    /// The kernel `name`, which the module's source must declare.
    pub fn function(&self, name: &str) -> Result<Function, String> {
        if let Some(f) = self.functions.read().get(name) {
            return Ok(f.clone());
        }
        if !self.entry_points.iter().any(|e| e == name) {
            return Err(format!(
                "the module does not declare entry point `{name}` (it has: {})",
                self.entry_points.join(", ")
            ));
        }
        let f = self.module.function(name).map_err(|e| e.to_string())?;
        self.functions.write().insert(name.to_string(), f.clone());
        Ok(f)
    }
}

/// The loaded modules of one context.
pub struct Modules {
    ctx: Context,
    cache: KernelCache<Box<dyn Compiler>>,
    by_ref: RwLock<HashMap<ModuleRef, Arc<Loaded>>>,
    by_key: Mutex<HashMap<[u8; 32], Arc<Loaded>>>,
    /// One fetch-compile-load at a time, so concurrent first launches do it once.
    loading: Mutex<()>,
}

impl Modules {
    /// The cubin when there is one (no JIT), else the PTX (JIT-compiled by the driver).
    fn load(&self, compiled: &Compiled) -> Result<Module, String> {
        if let Some(cubin) = &compiled.cubin {
            // SAFETY: the image came whole from NVRTC, through the checksummed cache.
            match unsafe { self.ctx.load_cubin(cubin) } {
                Ok(m) => return Ok(m),
                Err(e) => tracing::warn!(error = %e, "cubin refused; loading the PTX"),
            }
        }
        self.ctx.load_ptx(&compiled.ptx).map_err(|e| e.to_string())
    }

    pub fn new(ctx: Context, cache: KernelCache<Box<dyn Compiler>>) -> Self {
        Modules {
            ctx,
            cache,
            by_ref: RwLock::new(HashMap::new()),
            by_key: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
        }
    }

    /// The loaded module `module` names, for `target` (this device's).
    pub fn get(
        &self,
        module: &ModuleRef,
        target: &Target,
        sources: &dyn KernelSources,
    ) -> Result<Arc<Loaded>, String> {
        if let Some(m) = self.by_ref.read().get(module) {
            return Ok(m.clone());
        }
        let _one = self.loading.lock();
        if let Some(m) = self.by_ref.read().get(module) {
            return Ok(m.clone());
        }
        let source = sources.source(module, target)?;
        let compiled = self.cache.ptx(&source, &target.arch).map_err(|log| {
            format!(
                "module `{}` of {} does not compile for {}: {log}",
                module.id, module.plugin, target.arch
            )
        })?;
        tracing::debug!(module = %module.id, plugin = %module.plugin, provenance = ?compiled.provenance, "kernel module ready");
        let existing = self.by_key.lock().get(&compiled.key).cloned();
        let loaded = match existing {
            Some(m) => m,
            None => {
                let m = Arc::new(Loaded {
                    module: self.load(&compiled)?,
                    entry_points: source.entry_points,
                    functions: RwLock::new(HashMap::new()),
                });
                self.by_key.lock().insert(compiled.key, m.clone());
                m
            }
        };
        let mut by_ref = self.by_ref.write();
        if by_ref.len() >= REFERENCES {
            by_ref.clear();
        }
        by_ref.insert(module.clone(), loaded.clone());
        Ok(loaded)
    }
}
