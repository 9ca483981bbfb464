//! Kernel compilation and the module cache: a plugin's CUDA C source is compiled for the
//! device's architecture (`--gpu-architecture=sm_XY`, added by the host, then the plugin's
//! options) into PTX and, where the compiler gives one, a cubin for that architecture; both are
//! cached in memory and on disk, keyed by content: SHA-256 of source, options, architecture and
//! compiler version ([`cache_key`]).
//!
//! On disk (`$XDG_CACHE_HOME/umd/kernels` or `~/.cache/umd/kernels`), per key `KEY.ptx` and
//! `KEY.cubin`, each the SHA-256 of its bytes followed by the bytes. Every read checks it; a
//! missing, truncated or corrupt entry is compiled again and rewritten, never fatal, and a cache
//! that cannot be written only costs a warning. The directory is not pruned (unlike the
//! compiled-artifact cache): prebuilt entries an operator copied there cannot be made again on
//! a host without NVRTC; its entries are small text and binaries.
//!
//! Prebuilt modules (`umd plugins compile --out DIR`, for GPU hosts without NVRTC) are the same
//! files under the key of "any compiler" ([`cache_key`] with `None`); a cache looks there after
//! its own compiler's key, and a host without a compiler ([`NoCompiler`]) looks only there.
//!
//! Owns compilation requests, keys and its directory. It must not load modules or talk to a
//! device: the compiler is behind [`Compiler`] (NVRTC in production, a fake in tests).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::driver::Version;
use super::nvrtc;
use crate::device::{KernelSource, SourceForm};
use crate::disk_cache;

/// Most modules kept in memory; past it the memory cache starts over (the disk keeps them).
const MEMORY_ENTRIES: usize = 256;

/// Why a kernel source has no PTX.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompileError {
    #[error("compiler option `{0}` is not allowed")]
    OptionNotAllowed(String),
    /// The source includes a file ([`KernelSource::check_no_includes`]).
    #[error("{0}")]
    Source(String),
    /// The compiler refused the source: its log.
    #[error("{0}")]
    Compiler(String),
}

/// Compiles CUDA C.
pub trait Compiler: Send + Sync {
    /// Goes into every cache key: a new compiler never reuses an old compiler's output.
    /// `None`: no compiler (only prebuilt modules can be used).
    fn version(&self) -> Option<Version>;
    /// PTX (and cubin, for a real architecture) for `code` compiled with exactly `options`;
    /// `Err` carries the compiler's log.
    fn compile(&self, code: &str, options: &[String]) -> Result<nvrtc::Output, String>;
}

/// NVRTC.
pub struct Nvrtc {
    pub version: Version,
}

impl Compiler for Nvrtc {
    fn version(&self) -> Option<Version> {
        Some(self.version)
    }
    fn compile(&self, code: &str, options: &[String]) -> Result<nvrtc::Output, String> {
        nvrtc::compile(code, options)
    }
}

impl Compiler for Box<dyn Compiler> {
    fn version(&self) -> Option<Version> {
        (**self).version()
    }
    fn compile(&self, code: &str, options: &[String]) -> Result<nvrtc::Output, String> {
        (**self).compile(code, options)
    }
}

/// No compiler on this host: only prebuilt modules load.
pub struct NoCompiler;

impl Compiler for NoCompiler {
    fn version(&self) -> Option<Version> {
        None
    }
    fn compile(&self, _: &str, options: &[String]) -> Result<nvrtc::Output, String> {
        let arch = options
            .first()
            .and_then(|o| o.strip_prefix("--gpu-architecture="))
            .unwrap_or("this GPU");
        Err(format!(
            "no NVRTC on this host and no prebuilt module for {arch}: install NVRTC, or run \
             `umd plugins compile --arch {arch} --out DIR` where NVRTC is and copy DIR into \
             this host's kernel cache (`umd devices` shows where it is)"
        ))
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
pub fn cache_key(
    code: &str,
    options: &[String],
    arch: &str,
    compiler: Option<Version>,
) -> [u8; 32] {
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
    match compiler {
        Some((major, minor)) => {
            field(&major.to_le_bytes());
            field(&minor.to_le_bytes());
        }
        None => field(b"prebuilt"),
    }
    h.finalize().into()
}

/// The bytes of a disk entry ([`disk_cache::decode`], not empty), or why it is unusable.
pub fn decode_entry(file: &[u8]) -> Result<&[u8], &'static str> {
    match disk_cache::decode(file)? {
        [] => Err("empty"),
        bytes => Ok(bytes),
    }
}

/// The PTX of a disk entry, or why it is unusable.
pub fn decode_ptx(file: &[u8]) -> Result<&str, &'static str> {
    let ptx = std::str::from_utf8(decode_entry(file)?).map_err(|_| "not UTF-8")?;
    if ptx.contains('\0') {
        return Err("not PTX text");
    }
    Ok(ptx)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where a module came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    Memory,
    Disk,
    /// A prebuilt entry (`umd plugins compile --out`).
    Prebuilt,
    Compiled,
    /// The disk entry was unusable (the reason) and the source was compiled again.
    Recompiled(String),
    /// (ABI 1.3) PTX (and a cubin) shipped by the plugin: nothing to compile.
    Shipped,
}

/// A compiled module and its key.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub key: [u8; 32],
    pub ptx: Arc<str>,
    /// The module assembled for the architecture, when the compiler gave one.
    pub cubin: Option<Arc<[u8]>>,
    pub provenance: Provenance,
}

type Entry = (Arc<str>, Option<Arc<[u8]>>);

/// The module cache over a [`Compiler`].
pub struct KernelCache<C: Compiler> {
    compiler: C,
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<[u8; 32], Entry>>,
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

    /// The cache's folder (`None`: memory only).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path(&self, key: &[u8; 32], ext: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.{ext}", hex(key))))
    }

    /// The entry under `key` on disk: `Ok(None)` when there is none, `Err` when it is unusable.
    fn read(&self, key: &[u8; 32]) -> Result<Option<Entry>, String> {
        let Some(Ok(file)) = self.path(key, "ptx").map(std::fs::read) else {
            return Ok(None);
        };
        let ptx = decode_ptx(&file).map_err(str::to_string)?;
        let cubin = match self.path(key, "cubin").map(std::fs::read) {
            Some(Ok(file)) => Some(
                decode_entry(&file)
                    .map_err(|r| format!("cubin: {r}"))?
                    .into(),
            ),
            _ => None,
        };
        Ok(Some((ptx.into(), cubin)))
    }

    /// The module of `source` for `arch` (`sm_90`): from memory, disk, a prebuilt entry, or
    /// the compiler.
    pub fn ptx(&self, source: &KernelSource, arch: &str) -> Result<Compiled, CompileError> {
        if let SourceForm::Ptx { cubin } = &source.form {
            let mut key = cache_key(&source.code, &[], arch, None);
            if let Some(c) = cubin {
                key = Sha256::new()
                    .chain_update(key)
                    .chain_update(Sha256::digest(c))
                    .finalize()
                    .into();
            }
            let entry: Entry = (
                source.code.as_str().into(),
                cubin.as_deref().map(Into::into),
            );
            return Ok(compiled(key, entry, Provenance::Shipped));
        }
        source.check_no_includes().map_err(CompileError::Source)?;
        let options = compile_options(arch, &source.options)?;
        let key = cache_key(&source.code, &options, arch, self.compiler.version());
        if let Some(e) = self.memory.lock().get(&key).cloned() {
            return Ok(compiled(key, e, Provenance::Memory));
        }
        let stale = match self.read(&key) {
            Ok(Some(e)) => return Ok(self.remember(key, e, Provenance::Disk)),
            Ok(None) => None,
            Err(reason) => {
                tracing::warn!(dir = ?self.dir, reason, "kernel cache entry unusable; recompiling");
                Some(reason)
            }
        };
        let prebuilt = cache_key(&source.code, &options, arch, None);
        if prebuilt != key
            && let Ok(Some(e)) = self.read(&prebuilt)
        {
            return Ok(self.remember(key, e, Provenance::Prebuilt));
        }
        let out = self
            .compiler
            .compile(&source.code, &options)
            .map_err(CompileError::Compiler)?;
        self.store(&key, &out);
        let provenance = stale.map_or(Provenance::Compiled, Provenance::Recompiled);
        Ok(self.remember(key, (out.ptx.into(), out.cubin.map(Into::into)), provenance))
    }

    /// Compiles `source` for `arch` like [`ptx`](Self::ptx) and also files it as a prebuilt
    /// entry, for hosts without a compiler.
    pub fn prebuild(&self, source: &KernelSource, arch: &str) -> Result<Compiled, CompileError> {
        let c = self.ptx(source, arch)?;
        if c.provenance == Provenance::Shipped {
            return Ok(c); // the plugin ships it: nothing to file
        }
        let options = compile_options(arch, &source.options)?;
        let out = nvrtc::Output {
            ptx: c.ptx.to_string(),
            cubin: c.cubin.as_ref().map(|b| b.to_vec()),
        };
        self.store(&cache_key(&source.code, &options, arch, None), &out);
        Ok(c)
    }

    fn store(&self, key: &[u8; 32], out: &nvrtc::Output) {
        let files = [
            (self.path(key, "cubin"), out.cubin.as_deref()),
            (self.path(key, "ptx"), Some(out.ptx.as_bytes())),
        ];
        for (path, bytes) in files {
            if let (Some(path), Some(bytes)) = (path, bytes)
                && let Err(e) = disk_cache::store(&path, bytes)
            {
                tracing::warn!(path = %path.display(), error = %e, "kernel cache entry not written");
            }
        }
    }

    fn remember(&self, key: [u8; 32], e: Entry, provenance: Provenance) -> Compiled {
        let mut memory = self.memory.lock();
        if memory.len() >= MEMORY_ENTRIES {
            memory.clear();
        }
        memory.insert(key, e.clone());
        compiled(key, e, provenance)
    }
}

fn compiled(key: [u8; 32], (ptx, cubin): Entry, provenance: Provenance) -> Compiled {
    Compiled {
        key,
        ptx,
        cubin,
        provenance,
    }
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
        fn version(&self) -> Option<Version> {
            Some(self.version)
        }
        fn compile(&self, code: &str, options: &[String]) -> Result<nvrtc::Output, String> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if code.contains("syntax error") {
                return Err("kernel.cu(1): error: expected a `;`".into());
            }
            Ok(nvrtc::Output {
                ptx: format!("// {}\n.version 9.0\n// {code}\n", options.join(" ")),
                cubin: code.contains("cubin").then(|| b"\x7fELF cubin".to_vec()),
            })
        }
    }

    fn source(code: &str) -> KernelSource {
        KernelSource {
            code: code.into(),
            entry_points: vec!["k".into()],
            options: vec!["--std=c++17".into()],
            form: SourceForm::CudaC,
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
        let base = cache_key("src", &o(&["-a"]), "sm_90", Some((13, 0)));
        assert_eq!(base, cache_key("src", &o(&["-a"]), "sm_90", Some((13, 0))));
        for other in [
            cache_key("src2", &o(&["-a"]), "sm_90", Some((13, 0))),
            cache_key("src", &o(&["-b"]), "sm_90", Some((13, 0))),
            cache_key("src", &o(&[]), "sm_90", Some((13, 0))),
            cache_key("src", &o(&["-a"]), "sm_80", Some((13, 0))),
            cache_key("src", &o(&["-a"]), "sm_90", Some((13, 1))),
            cache_key("src", &o(&["-a"]), "sm_90", Some((12, 0))),
            cache_key("src", &o(&["-a"]), "sm_90", None),
        ] {
            assert_ne!(base, other);
        }
        // Boundaries between fields are part of the key.
        assert_ne!(
            cache_key("ab", &o(&["c"]), "sm_90", Some((13, 0))),
            cache_key("a", &o(&["bc"]), "sm_90", Some((13, 0)))
        );
        assert_ne!(
            cache_key("s", &o(&["-a", "-b"]), "sm_90", Some((13, 0))),
            cache_key("s", &o(&["-a-b"]), "sm_90", Some((13, 0)))
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
        let file = disk_cache::encode(b".version 9.0\n");
        assert_eq!(decode_ptx(&file), Ok(".version 9.0\n"));
        assert_eq!(decode_entry(&file[..20]), Err("truncated"));
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(decode_entry(&flipped), Err("checksum mismatch"));
        assert_eq!(decode_entry(&disk_cache::encode(b"")), Err("empty"));
        assert_eq!(
            decode_ptx(&disk_cache::encode(b"a\0b")),
            Err("not PTX text")
        );
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
        assert_eq!(decode_ptx(&std::fs::read(&file).unwrap()), Ok(&*a.ptx));

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
        assert_eq!(decode_ptx(&std::fs::read(&file).unwrap()), Ok(&*good.ptx));

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
    fn prebuilt_modules_serve_hosts_without_that_compiler() {
        let dir = TempDir::new("prebuilt");
        let built = KernelCache::new(Fake::new(), Some(dir.0.clone()));
        let a = built.prebuild(&source("kernel F cubin"), "sm_90").unwrap();
        assert_eq!(a.cubin.as_deref(), Some(&b"\x7fELF cubin"[..]));
        // Own key and prebuilt key, PTX and cubin each.
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 4);

        let bare = KernelCache::new(NoCompiler, Some(dir.0.clone()));
        let b = bare.ptx(&source("kernel F cubin"), "sm_90").unwrap();
        assert_eq!((&*b.ptx, &b.cubin), (&*a.ptx, &a.cubin));
        let newer = KernelCache::new(
            Fake {
                version: (13, 1),
                ..Fake::new()
            },
            Some(dir.0.clone()),
        );
        let c = newer.ptx(&source("kernel F cubin"), "sm_90").unwrap();
        assert_eq!(c.provenance, Provenance::Prebuilt);
        assert_eq!(newer.compiler().calls.load(Ordering::SeqCst), 0);

        // Nothing prebuilt for sm_80: the error says what to run.
        let e = bare.ptx(&source("kernel F cubin"), "sm_80").unwrap_err();
        assert!(
            e.to_string()
                .contains("umd plugins compile --arch sm_80 --out DIR"),
            "{e}"
        );
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
