//! NVRTC, the runtime CUDA C compiler, without a GPU or a driver: finding its library, its
//! version and architectures, and compiling CUDA C to PTX and — for a real architecture
//! (`sm_XY`) — to a cubin.
//!
//! Where the library comes from ([`locate`], decided once per process by its first call):
//! 1. a path given by the caller (`--nvrtc FILE|DIR`) or in `UMD_NVRTC`;
//! 2. whatever the dynamic loader finds by name (`LD_LIBRARY_PATH`, `ldconfig`);
//! 3. a CUDA toolkit (`$CUDA_HOME`, `/usr/local/cuda`), then the PyPI wheel
//!    `nvidia-cuda-nvrtc` (`nvidia/cu13/lib`) in the Python environments it can see
//!    (`$VIRTUAL_ENV`, `$CONDA_PREFIX`, `~/.local`, `/usr/local`, `/usr`).
//!
//! A library found by path is loaded with `RTLD_GLOBAL`, its `libnvrtc-builtins` first (NVRTC
//! opens it by name at its first compile, which otherwise fails with "failed to open
//! libnvrtc-builtins.so.13.0"); `cudarc`, which opens NVRTC by name, then gets the loaded copy.
//!
//! Owns loading and calling NVRTC; knows no cache, device or plugin. With `driver`, the only
//! files of the backend with `unsafe`.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::{result, sys};

use super::driver::Version;
use crate::device::DeviceError;

/// Where NVRTC was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The library file; `None`: the dynamic loader found it by name.
    pub path: Option<PathBuf>,
    pub version: Version,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (m, n) = self.version;
        match &self.path {
            Some(p) => write!(f, "NVRTC {m}.{n} ({})", p.display()),
            None => write!(f, "NVRTC {m}.{n} (found by the dynamic loader)"),
        }
    }
}

/// What [`compile`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub ptx: String,
    /// For a real architecture (`sm_XY`): the assembled module.
    pub cubin: Option<Vec<u8>>,
}

static FOUND: OnceLock<Result<Found, String>> = OnceLock::new();

/// Finds and loads NVRTC (see the module docs); `explicit` is a library file or the folder
/// holding it. The first call decides for the whole process; later calls return its answer.
pub fn locate(explicit: Option<&Path>) -> Result<&'static Found, DeviceError> {
    FOUND
        .get_or_init(|| find(explicit))
        .as_ref()
        .map_err(|e| DeviceError::Unavailable(e.clone()))
}

/// Whether NVRTC can be used (found by [`locate`] with no explicit path, if nothing called it
/// before).
pub fn present() -> bool {
    locate(None).is_ok()
}

fn find(explicit: Option<&Path>) -> Result<Found, String> {
    let env = std::env::var_os("UMD_NVRTC").map(PathBuf::from);
    if let Some(p) = explicit.map(Path::to_path_buf).or(env) {
        let lib = library_in(&p).ok_or_else(|| {
            format!(
                "no NVRTC library (libnvrtc.so*) at {} (given with --nvrtc or UMD_NVRTC)",
                p.display()
            )
        })?;
        return load_path(&lib);
    }
    // SAFETY: loads (and unloads) NVRTC by its usual names to see whether it exists.
    if unsafe { sys::is_culib_present() } {
        return Ok(Found {
            path: None,
            version: read_version()?,
        });
    }
    for dir in candidate_dirs() {
        if let Some(lib) = library_in(&dir) {
            return load_path(&lib);
        }
    }
    Err(
        "NVRTC library (libnvrtc.so) not found: install the CUDA toolkit's runtime compiler \
         (`cuda-nvrtc-13-0`) or the PyPI wheel (`pip install 'nvidia-cuda-nvrtc==13.0.*'`), add \
         its folder to LD_LIBRARY_PATH, or name it with --nvrtc / UMD_NVRTC"
            .into(),
    )
}

/// The NVRTC library `p` names: the file itself, or the best `libnvrtc.so*` in the folder.
fn library_in(p: &Path) -> Option<PathBuf> {
    if p.is_file() {
        return Some(p.to_path_buf());
    }
    let mut libs: Vec<PathBuf> = std::fs::read_dir(p)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libnvrtc.so") && !name.contains("alt")
        })
        .collect();
    // `libnvrtc.so.13` before `libnvrtc.so.13.0.88`: the soname the others link to.
    libs.sort_by_key(|f| f.as_os_str().len());
    libs.into_iter().next()
}

/// Toolkit folders, then the wheel's folder in every Python environment in reach.
fn candidate_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
    for cuda in [
        var("CUDA_HOME"),
        var("CUDA_PATH"),
        Some("/usr/local/cuda".into()),
    ]
    .into_iter()
    .flatten()
    {
        out.push(cuda.join("lib64"));
        out.push(cuda.join("targets/x86_64-linux/lib"));
    }
    let prefixes = [
        var("VIRTUAL_ENV"),
        var("CONDA_PREFIX"),
        var("HOME").map(|h| h.join(".local")),
        Some("/usr/local".into()),
        Some("/usr".into()),
    ];
    for prefix in prefixes.into_iter().flatten() {
        let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
            continue;
        };
        for py in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if !py
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
            {
                continue;
            }
            for site in ["site-packages", "dist-packages"] {
                for wheel in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"] {
                    out.push(py.join(site).join(wheel));
                }
            }
        }
    }
    out
}

/// Loads `lib` (after the `libnvrtc-builtins` beside it) for the whole process.
fn load_path(lib: &Path) -> Result<Found, String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    let dir = lib.parent().unwrap_or(Path::new("."));
    let builtins = std::fs::read_dir(dir).ok().and_then(|entries| {
        entries.filter_map(|e| e.ok().map(|e| e.path())).find(|f| {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libnvrtc-builtins.so") && !name.contains("alt")
        })
    });
    for file in builtins.iter().chain(std::iter::once(&lib.to_path_buf())) {
        // SAFETY: loads NVIDIA's compiler libraries, whose initializers are made to run in any
        // process; they stay loaded for the life of the process (forgotten, never closed).
        let l = unsafe { Library::open(Some(file), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| format!("cannot load {}: {e}", file.display()))?;
        std::mem::forget(l);
    }
    Ok(Found {
        path: Some(lib.to_path_buf()),
        version: read_version()?,
    })
}

fn failed(call: &str, e: result::NvrtcError) -> String {
    format!("{call}: {:?}", e.0)
}

fn read_version() -> Result<Version, String> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints through valid pointers; the library is loaded.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    r.result().map_err(|e| failed("nvrtcVersion", e))?;
    Ok((major.max(0) as u32, minor.max(0) as u32))
}

/// NVRTC's version.
pub fn version() -> Result<Version, DeviceError> {
    Ok(locate(None)?.version)
}

/// The real architectures NVRTC compiles for, as `major * 10 + minor` (e.g. 90 for sm_90).
pub fn supported_archs() -> Result<Vec<u32>, DeviceError> {
    locate(None)?;
    let err = |m: String| DeviceError::Driver {
        call: "nvrtcGetSupportedArchs",
        message: m,
    };
    let mut n = 0;
    // SAFETY: writes one int through a valid pointer.
    let r = unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) };
    r.result()
        .map_err(|e| err(failed("nvrtcGetNumSupportedArchs", e)))?;
    let mut archs = vec![0; n.max(0) as usize];
    // SAFETY: `archs` has room for the `n` ints NVRTC just said it will write.
    let r = unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) };
    r.result()
        .map_err(|e| err(failed("nvrtcGetSupportedArchs", e)))?;
    Ok(archs.into_iter().map(|a| a.max(0) as u32).collect())
}

/// Compiles CUDA C with exactly `options`; `Err` carries the compiler's log.
pub fn compile(code: &str, options: &[String]) -> Result<Output, String> {
    locate(None).map_err(|e| e.to_string())?;
    // Plugins' strings are never trusted: no interior NUL reaches a C string.
    let code = CString::new(code).map_err(|_| "the source contains a NUL character")?;
    if options.iter().any(|o| o.contains('\0')) {
        return Err("an option contains a NUL character".into());
    }
    let prog = result::create_program(&code, Some(c"umd_module.cu"))
        .map_err(|e| failed("nvrtcCreateProgram", e))?;
    // SAFETY: `prog` was created just above and is destroyed once, below; `code` outlives it.
    let out = unsafe { compile_program(prog, options) };
    // SAFETY: as above.
    if let Err(e) = unsafe { result::destroy_program(prog) } {
        tracing::warn!(error = ?e.0, "nvrtcDestroyProgram failed");
    }
    out
}

/// # Safety
/// `prog` is a live program.
unsafe fn compile_program(prog: sys::nvrtcProgram, options: &[String]) -> Result<Output, String> {
    // SAFETY: the caller's; options hold no NUL (checked by `compile`).
    let compiled = unsafe { result::compile_program(prog, options) };
    if let Err(e) = compiled {
        // SAFETY: the caller's.
        let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
        return Err(format!("{:?}:\n{}", e.0, text(&log).trim_end()));
    }
    // SAFETY: the caller's; compiled.
    let ptx = unsafe { result::get_ptx(prog) }.map_err(|e| failed("nvrtcGetPTX", e))?;
    let ptx = text(&ptx);
    if ptx.is_empty() {
        return Err("NVRTC returned no PTX".into());
    }
    let mut size = 0usize;
    // SAFETY: the caller's; writes one size through a valid pointer. Fails (or says 0) when
    // the architecture was virtual: then there is no cubin.
    let has_cubin = unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
        .result()
        .is_ok();
    let cubin = if has_cubin && size > 0 {
        let mut image = vec![0u8; size];
        // SAFETY: `image` has the `size` bytes NVRTC just asked for.
        let r = unsafe { sys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast()) };
        r.result().map_err(|e| failed("nvrtcGetCUBIN", e))?;
        Some(image)
    } else {
        None
    };
    Ok(Output { ptx, cubin })
}

/// A NUL-terminated C buffer as text.
fn text(buf: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .map(|c| *c as u8)
        .take_while(|b| *b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_names_its_library_not_the_builtins() {
        let dir = std::env::temp_dir().join(format!("umd-nvrtc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in [
            "libnvrtc-builtins.so.13.0",
            "libnvrtc.alt.so.13",
            "libnvrtc.so.13.0.88",
            "libnvrtc.so.13",
        ] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        assert_eq!(library_in(&dir), Some(dir.join("libnvrtc.so.13")));
        assert_eq!(
            library_in(&dir.join("libnvrtc.so.13")),
            Some(dir.join("libnvrtc.so.13"))
        );
        assert_eq!(library_in(&dir.join("missing")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wrong_explicit_path_is_named() {
        let e = find(Some(Path::new("/nonexistent/nvrtc"))).unwrap_err();
        assert!(
            e.contains("no NVRTC library (libnvrtc.so*) at /nonexistent/nvrtc"),
            "{e}"
        );
    }
}
