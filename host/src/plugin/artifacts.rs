//! The compiled-artifact cache: components compiled by Cranelift, kept on disk so a restart or
//! a reload of an unchanged plugin does not compile again.
//!
//! Keyed by the wasm's SHA-256 and the engine's compatibility hash (wasmtime version and
//! configuration: an artifact only loads into an engine configured the same way). Each file
//! is a [`crate::disk_cache`] entry (the SHA-256 of the artifact, then the artifact); a stale,
//! truncated or corrupt entry fails that check (or wasmtime's own header check) and is
//! recompiled, never trusted. The directory is kept within the disk cache's budget, least
//! recently loaded artifacts out first. Owns only its directory.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use crate::disk_cache;
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a component came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    /// Compiled now (no cache, or nothing cached).
    Compiled,
    /// Loaded from the cache.
    Cached,
    /// The cached entry was unusable (the reason) and the component was compiled again.
    Recompiled(String),
}

pub struct ArtifactCache {
    dir: PathBuf,
    engine_key: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ArtifactCache {
    /// A cache in `dir` (created on first write) for artifacts of `engine`.
    pub fn new(dir: impl Into<PathBuf>, engine: &Engine) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        ArtifactCache {
            dir: dir.into(),
            engine_key: format!("{:016x}", h.finish()),
        }
    }

    /// The default location: `$XDG_CACHE_HOME/umd/components` or `~/.cache/umd/components`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
        Some(base.join("umd").join("components"))
    }

    fn path(&self, wasm_hash: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{}-{}.cwasm", hex(wasm_hash), self.engine_key))
    }

    /// The component for `wasm`, from the cache when a valid entry exists.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        wasm_hash: &[u8; 32],
    ) -> wasmtime::Result<(Component, Provenance)> {
        let path = self.path(wasm_hash);
        let stale = match std::fs::read(&path) {
            Ok(file) => match self.deserialize(engine, &file) {
                Ok(c) => {
                    disk_cache::touch(&path);
                    return Ok((c, Provenance::Cached));
                }
                Err(reason) => Some(reason),
            },
            Err(_) => None,
        };
        let artifact = engine.precompile_component(wasm)?;
        if let Err(e) = disk_cache::store(&path, &artifact) {
            tracing::warn!(path = %path.display(), error = %e, "compiled-artifact cache not written");
        }
        // also after a failed store: a full disk may be this directory's doing
        match disk_cache::prune(&self.dir, "cwasm", disk_cache::BUDGET_BYTES, &path) {
            Ok(0) => {}
            Ok(n) => {
                tracing::debug!(dir = %self.dir.display(), removed = n, "compiled-artifact cache pruned")
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "compiled-artifact cache not pruned")
            }
        }
        // SAFETY: `artifact` was produced by `precompile_component` of this very engine a
        // moment ago and never left this process's memory.
        let component = unsafe { Component::deserialize(engine, &artifact)? };
        Ok((
            component,
            stale.map_or(Provenance::Compiled, Provenance::Recompiled),
        ))
    }

    fn deserialize(&self, engine: &Engine, file: &[u8]) -> Result<Component, String> {
        let artifact = disk_cache::decode(file)?;
        // SAFETY: `Component::deserialize` trusts its input to be an artifact produced by
        // wasmtime's `precompile_component`. This one was written by `disk_cache::store` from
        // exactly such output, and its SHA-256 was checked just above, so a truncated or
        // corrupted file never reaches it; wasmtime also checks the header's version and engine
        // configuration.
        unsafe { Component::deserialize(engine, artifact) }.map_err(|e| format!("{e:#}"))
    }
}
