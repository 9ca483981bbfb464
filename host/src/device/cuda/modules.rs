//! Kernel compilation and the PTX cache: a plugin's CUDA C source is compiled for the device's
//! architecture (`--gpu-architecture=sm_XY`, added by the host, then the plugin's options) and
//! the PTX is cached in memory and on disk, keyed by content: SHA-256 of source, options,
//! architecture and compiler version ([`cache_key`]).
//!
//! On disk (`$XDG_CACHE_HOME/umd/kernels` or `~/.cache/umd/kernels`), one file per key holding
//! the SHA-256 of the PTX followed by the PTX. Every read checks it; a missing, truncated or
//! corrupt entry is compiled again and rewritten, never fatal, and a cache that cannot be
//! written only costs a warning.
//!
//! Owns compilation requests, keys and its directory. It must not load modules or talk to a
//! device: the compiler is behind [`Compiler`] (NVRTC in production, a fake in tests).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::driver::{self, Version};
use crate::device::KernelSource;

/// Most PTX texts kept in memory; past it the memory cache starts over (the disk keeps them).
const MEMORY_ENTRIES: usize = 256;

/// Why a kernel source has no PTX.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompileError {
    #[error("compiler option `{0}` is not allowed")]
    OptionNotAllowed(String),
    /// The compiler refused the source: its log.
    #[error("{0}")]
    Compiler(String),
}

/// Compiles CUDA C to PTX.
pub trait Compiler: Send + Sync {
    /// Goes into every cache key: a new compiler never reuses an old compiler's PTX.
    fn version(&self) -> Version;
    /// PTX for `code` compiled with exactly `options`; `Err` carries the compiler's log.
    fn compile(&self, code: &str, options: &[String]) -> Result<String, String>;
}

/// NVRTC.
pub struct Nvrtc {
    pub version: Version,
}

impl Compiler for Nvrtc {
    fn version(&self) -> Version {
        self.version
    }
    fn compile(&self, code: &str, options: &[String]) -> Result<String, String> {
        driver::compile_ptx(code, options)
    }
}

/// Option prefixes a plugin may pass. Everything else is refused: the host owns the
/// architecture, and options that read or write files (include paths, precompiled headers,
/// timing traces) would give a sandboxed plugin a way out.
const ALLOWED_OPTIONS: &[&str] = &[
    "--std=",
    "-std=",
    "--use_fast_math",
    "-use_fast_math",
    "--fmad=",
    "-fmad=",
    "--ftz=",
    "-ftz=",
    "--prec-div=",
    "-prec-div=",
    "--prec-sqrt=",
    "-prec-sqrt=",
    "--extra-device-vectorization",
    "-extra-device-vectorization",
    "--maxrregcount=",
    "-maxrregcount=",
    "--restrict",
    "-restrict",
    "--generate-line-info",
    "-lineinfo",
    "--define-macro=",
    "-D",
    "--undefine-macro=",
    "-U",
    "--diag-suppress=",
    "-diag-suppress=",
    "--dopt=",
    "-dopt=",
];

/// The options NVRTC gets: the architecture first, then the plugin's, each checked against
/// the allowed prefixes (flags that only change code generation).
pub fn compile_options(arch: &str, plugin_options: &[String]) -> Result<Vec<String>, CompileError> {
    let mut out = vec![format!("--gpu-architecture={arch}")];
    for o in plugin_options {
        if !ALLOWED_OPTIONS.iter().any(|p| o.starts_with(p)) {
            return Err(CompileError::OptionNotAllowed(o.clone()));
        }
        out.push(o.clone());
    }
    Ok(out)
}

/// The cache key: SHA-256 over length-prefixed source, options, architecture and compiler
/// version, so no two different inputs share a key by concatenation.
pub fn cache_key(code: &str, options: &[String], arch: &str, compiler: Version) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"umd-kernel-v1");
    field(code.as_bytes());
    field(&(options.len() as u64).to_le_bytes());
    for o in options {
        field(o.as_bytes());
    }
    field(arch.as_bytes());
    field(&compiler.0.to_le_bytes());
    field(&compiler.1.to_le_bytes());
    h.finalize().into()
}

/// A disk entry: SHA-256 of the PTX, then the PTX.
pub fn encode_entry(ptx: &str) -> Vec<u8> {
    let mut file = Sha256::digest(ptx.as_bytes()).to_vec();
    file.extend_from_slice(ptx.as_bytes());
    file
}

/// The PTX of a disk entry, or why it is unusable.
pub fn decode_entry(file: &[u8]) -> Result<&str, &'static str> {
    if file.len() < 32 {
        return Err("truncated");
    }
    let (digest, ptx) = file.split_at(32);
    if Sha256::digest(ptx).as_slice() != digest {
        return Err("checksum mismatch");
    }
    let ptx = std::str::from_utf8(ptx).map_err(|_| "not UTF-8")?;
    if ptx.is_empty() || ptx.contains('\0') {
        return Err("not PTX text");
    }
    Ok(ptx)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where PTX came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    Memory,
    Disk,
    Compiled,
    /// The disk entry was unusable (the reason) and the source was compiled again.
    Recompiled(String),
}

/// Compiled PTX and its key.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub key: [u8; 32],
    pub ptx: Arc<str>,
    pub provenance: Provenance,
}

/// The PTX cache over a [`Compiler`].
pub struct KernelCache<C: Compiler> {
    compiler: C,
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<[u8; 32], Arc<str>>>,
}

impl<C: Compiler> KernelCache<C> {
    /// A cache in `dir` (created on first write; `None`: memory only).
    pub fn new(compiler: C, dir: Option<PathBuf>) -> Self {
        KernelCache {
            compiler,
            dir,
            memory: Mutex::new(HashMap::new()),
        }
    }

    pub fn compiler(&self) -> &C {
        &self.compiler
    }

    fn path(&self, key: &[u8; 32]) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.ptx", hex(key))))
    }

    /// PTX of `source` for `arch` (`sm_90`), from memory, disk, or the compiler.
    pub fn ptx(&self, source: &KernelSource, arch: &str) -> Result<Compiled, CompileError> {
        let options = compile_options(arch, &source.options)?;
        let key = cache_key(&source.code, &options, arch, self.compiler.version());
        if let Some(ptx) = self.memory.lock().get(&key) {
            return Ok(Compiled {
                key,
                ptx: ptx.clone(),
                provenance: Provenance::Memory,
            });
        }
        let path = self.path(&key);
        let stale = match path.as_ref().map(std::fs::read) {
            Some(Ok(file)) => match decode_entry(&file) {
                Ok(ptx) => return Ok(self.remember(key, ptx.into(), Provenance::Disk)),
                Err(reason) => {
                    tracing::warn!(path = ?path, reason, "kernel cache entry unusable; recompiling");
                    Some(reason.to_string())
                }
            },
            _ => None,
        };
        let ptx = self
            .compiler
            .compile(&source.code, &options)
            .map_err(CompileError::Compiler)?;
        if let Some(path) = &path
            && let Err(e) = store(path, &ptx)
        {
            tracing::warn!(path = %path.display(), error = %e, "kernel cache entry not written");
        }
        let provenance = stale.map_or(Provenance::Compiled, Provenance::Recompiled);
        Ok(self.remember(key, ptx.into(), provenance))
    }

    fn remember(&self, key: [u8; 32], ptx: Arc<str>, provenance: Provenance) -> Compiled {
        let mut memory = self.memory.lock();
        if memory.len() >= MEMORY_ENTRIES {
            memory.clear();
        }
        memory.insert(key, ptx.clone());
        Compiled {
            key,
            ptx,
            provenance,
        }
    }
}

/// Writes an entry atomically: a unique temporary file, then a rename.
fn store(path: &Path, ptx: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    std::fs::write(&tmp, encode_entry(ptx))?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// "Compiles" to a PTX-looking text naming the source and options; counts calls.
    struct Fake {
        calls: AtomicUsize,
        version: Version,
    }

    impl Fake {
        fn new() -> Self {
            Fake {
                calls: AtomicUsize::new(0),
                version: (13, 0),
            }
        }
    }

    impl Compiler for Fake {
        fn version(&self) -> Version {
            self.version
        }
        fn compile(&self, code: &str, options: &[String]) -> Result<String, String> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if code.contains("syntax error") {
                return Err("kernel.cu(1): error: expected a `;`".into());
            }
            Ok(format!(
                "// {}\n.version 9.0\n// {code}\n",
                options.join(" ")
            ))
        }
    }

    fn source(code: &str) -> KernelSource {
        KernelSource {
            code: code.into(),
            entry_points: vec!["k".into()],
            options: vec!["--std=c++17".into()],
        }
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new(name: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::SeqCst);
            let dir =
                std::env::temp_dir().join(format!("umd-kernels-{name}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            TempDir(dir)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn only_file(dir: &Path) -> PathBuf {
        let files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.into_iter().next().unwrap()
    }

    #[test]
    fn keys_cover_every_input() {
        let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let base = cache_key("src", &o(&["-a"]), "sm_90", (13, 0));
        assert_eq!(base, cache_key("src", &o(&["-a"]), "sm_90", (13, 0)));
        for other in [
            cache_key("src2", &o(&["-a"]), "sm_90", (13, 0)),
            cache_key("src", &o(&["-b"]), "sm_90", (13, 0)),
            cache_key("src", &o(&[]), "sm_90", (13, 0)),
            cache_key("src", &o(&["-a"]), "sm_80", (13, 0)),
            cache_key("src", &o(&["-a"]), "sm_90", (13, 1)),
            cache_key("src", &o(&["-a"]), "sm_90", (12, 0)),
        ] {
            assert_ne!(base, other);
        }
        // Boundaries between fields are part of the key.
        assert_ne!(
            cache_key("ab", &o(&["c"]), "sm_90", (13, 0)),
            cache_key("a", &o(&["bc"]), "sm_90", (13, 0))
        );
        assert_ne!(
            cache_key("s", &o(&["-a", "-b"]), "sm_90", (13, 0)),
            cache_key("s", &o(&["-a-b"]), "sm_90", (13, 0))
        );
    }

    #[test]
    fn options_get_the_architecture_and_a_filter() {
        let opts = compile_options("sm_90", &["--std=c++17".into(), "-DN=4".into()]).unwrap();
        assert_eq!(opts, ["--gpu-architecture=sm_90", "--std=c++17", "-DN=4"]);
        for bad in [
            "--gpu-architecture=sm_50",
            "-arch=sm_50",
            "-I/etc",
            "--time=/tmp/x",
            "-G",
        ] {
            let e = compile_options("sm_90", &[bad.into()]).unwrap_err();
            assert_eq!(e, CompileError::OptionNotAllowed(bad.into()));
            assert_eq!(
                e.to_string(),
                format!("compiler option `{bad}` is not allowed")
            );
        }
    }

    #[test]
    fn entries_round_trip_and_reject_damage() {
        let file = encode_entry(".version 9.0\n");
        assert_eq!(decode_entry(&file), Ok(".version 9.0\n"));
        assert_eq!(decode_entry(&file[..20]), Err("truncated"));
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(decode_entry(&flipped), Err("checksum mismatch"));
        assert_eq!(decode_entry(&encode_entry("")), Err("not PTX text"));
    }

    #[test]
    fn memory_then_disk_then_compiler() {
        let dir = TempDir::new("roundtrip");
        let cache = KernelCache::new(Fake::new(), Some(dir.0.clone()));
        let a = cache.ptx(&source("kernel A"), "sm_90").unwrap();
        assert_eq!(a.provenance, Provenance::Compiled);
        assert!(a.ptx.contains("--gpu-architecture=sm_90 --std=c++17"));
        assert_eq!(
            cache.ptx(&source("kernel A"), "sm_90").unwrap().provenance,
            Provenance::Memory
        );
        assert_eq!(cache.compiler().calls.load(Ordering::SeqCst), 1);

        // A new process (a new cache over the same directory) reads the disk.
        let again = KernelCache::new(Fake::new(), Some(dir.0.clone()));
        let b = again.ptx(&source("kernel A"), "sm_90").unwrap();
        assert_eq!(
            (b.provenance, b.key, &*b.ptx),
            (Provenance::Disk, a.key, &*a.ptx)
        );
        assert_eq!(again.compiler().calls.load(Ordering::SeqCst), 0);
        // The file is named by the key and holds the checksummed PTX.
        let file = only_file(&dir.0);
        assert_eq!(
            file.file_name().unwrap().to_str().unwrap(),
            format!("{}.ptx", hex(&a.key))
        );
        assert_eq!(decode_entry(&std::fs::read(&file).unwrap()), Ok(&*a.ptx));

        // Another architecture or compiler version is another entry.
        assert_eq!(
            again.ptx(&source("kernel A"), "sm_80").unwrap().provenance,
            Provenance::Compiled
        );
        let newer = KernelCache::new(
            Fake {
                version: (13, 1),
                ..Fake::new()
            },
            Some(dir.0.clone()),
        );
        assert_eq!(
            newer.ptx(&source("kernel A"), "sm_90").unwrap().provenance,
            Provenance::Compiled
        );
    }

    #[test]
    fn corrupt_or_truncated_entries_are_recompiled_and_rewritten() {
        let dir = TempDir::new("corrupt");
        let first = KernelCache::new(Fake::new(), Some(dir.0.clone()));
        let good = first.ptx(&source("kernel B"), "sm_90").unwrap();
        let file = only_file(&dir.0);
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[40] ^= 0xff;
        std::fs::write(&file, &bytes).unwrap();

        let cache = KernelCache::new(Fake::new(), Some(dir.0.clone()));
        let c = cache.ptx(&source("kernel B"), "sm_90").unwrap();
        assert_eq!(
            c.provenance,
            Provenance::Recompiled("checksum mismatch".into())
        );
        assert_eq!(&*c.ptx, &*good.ptx);
        assert_eq!(cache.compiler().calls.load(Ordering::SeqCst), 1);
        assert_eq!(decode_entry(&std::fs::read(&file).unwrap()), Ok(&*good.ptx));

        std::fs::write(&file, b"short").unwrap();
        let cache = KernelCache::new(Fake::new(), Some(dir.0.clone()));
        let c = cache.ptx(&source("kernel B"), "sm_90").unwrap();
        assert_eq!(c.provenance, Provenance::Recompiled("truncated".into()));
    }

    #[test]
    fn unwritable_cache_and_compile_errors_are_not_panics() {
        let dir = TempDir::new("blocked");
        // A file where the directory should be: writes fail, compiling still works.
        std::fs::write(&dir.0, b"not a directory").unwrap();
        let cache = KernelCache::new(Fake::new(), Some(dir.0.join("kernels")));
        assert_eq!(
            cache.ptx(&source("kernel C"), "sm_90").unwrap().provenance,
            Provenance::Compiled
        );
        let _ = std::fs::remove_file(&dir.0);

        let e = cache.ptx(&source("syntax error"), "sm_90").unwrap_err();
        assert!(matches!(&e, CompileError::Compiler(log) if log.contains("expected a `;`")));
        let mut bad = source("kernel D");
        bad.options.push("--include-path=/etc".into());
        assert!(matches!(
            cache.ptx(&bad, "sm_90"),
            Err(CompileError::OptionNotAllowed(_))
        ));
    }

    #[test]
    fn memory_only_cache() {
        let cache = KernelCache::new(Fake::new(), None);
        cache.ptx(&source("kernel E"), "sm_90").unwrap();
        assert_eq!(
            cache.ptx(&source("kernel E"), "sm_90").unwrap().provenance,
            Provenance::Memory
        );
    }
}
