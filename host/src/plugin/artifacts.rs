//! The compiled-artifact cache: components compiled by Cranelift, kept on disk so a restart or
//! a reload of an unchanged plugin does not compile again.
//!
//! Keyed by the wasm's SHA-256 and the engine's compatibility hash (wasmtime version and
//! configuration: an artifact only loads into an engine configured the same way). Each file
//! starts with the SHA-256 of the artifact that follows; a stale, truncated or corrupt entry
//! fails that check (or wasmtime's own header check) and is recompiled, never trusted.
//! Owns only its directory.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
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
                Ok(c) => return Ok((c, Provenance::Cached)),
                Err(reason) => Some(reason),
            },
            Err(_) => None,
        };
        let artifact = engine.precompile_component(wasm)?;
        if let Err(e) = self.store(&path, &artifact) {
            tracing::warn!(path = %path.display(), error = %e, "compiled-artifact cache not written");
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
        if file.len() < 32 {
            return Err("truncated".into());
        }
        let (digest, artifact) = file.split_at(32);
        if Sha256::digest(artifact).as_slice() != digest {
            return Err("checksum mismatch".into());
        }
        // SAFETY: `Component::deserialize` trusts its input to be an artifact produced by
        // wasmtime's `precompile_component`. This one was written by `store` below from exactly
        // such output, and its SHA-256 was checked just above, so a truncated or corrupted file
        // never reaches it; wasmtime also checks the header's version and engine configuration.
        unsafe { Component::deserialize(engine, artifact) }.map_err(|e| format!("{e:#}"))
    }

    fn store(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        // Unique per writer: threads of one process may store the same artifact at once.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
        let mut file = Sha256::digest(artifact).to_vec();
        file.extend_from_slice(artifact);
        std::fs::write(&tmp, &file)?;
        std::fs::rename(&tmp, path)
    }
}
