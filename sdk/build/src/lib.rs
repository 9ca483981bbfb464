//! Builds umd plugin crates into WebAssembly components, from a `build.rs`.
//!
//! A plugin crate is compiled for `wasm32-unknown-unknown` (so it imports nothing but the umd
//! interfaces: the sandbox grants nothing) by a nested `cargo build` into its own target
//! directory, then wrapped into a component with `wit_component::ComponentEncoder`.
//! The host uses this for its bundled plugins and the test crate for its fixture plugins.
//!
//! This crate owns the nested build and componentization only; it knows nothing of what a plugin
//! does.
//!
//! ```no_run
//! // build.rs of a crate that bundles plugins
//! let built = umd_sdk_build::PluginBuild::new(env!("CARGO_MANIFEST_DIR"))
//!     .plugin("plugins/elementwise")
//!     .build()
//!     .expect("plugins build");
//! for p in &built {
//!     println!("{} -> {}", p.name, p.component.display());
//! }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target plugins are compiled for.
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// The cargo profile plugins are compiled with. Its settings ([`PROFILE_SETTINGS`]) are passed
/// on the nested cargo command line, so a plugin's workspace need not define it.
pub const PROFILE: &str = "plugin";
/// The settings of [`PROFILE`], as `--config` values (they override a workspace's own
/// `[profile.plugin]`).
pub const PROFILE_SETTINGS: &[&str] = &[
    "profile.plugin.inherits=\"release\"",
    "profile.plugin.opt-level=3",
    "profile.plugin.panic=\"abort\"",
    "profile.plugin.codegen-units=1",
    "profile.plugin.strip=\"debuginfo\"",
];

/// A built plugin component.
#[derive(Debug, Clone)]
pub struct BuiltPlugin {
    /// Crate name, e.g. `umd-plugin-elementwise`.
    pub name: String,
    /// Path of the component (`.wasm`) file.
    pub component: PathBuf,
}

/// Why a plugin build failed.
#[derive(Debug)]
pub enum BuildError {
    Io(String, std::io::Error),
    Command(String),
    Componentize(String, String),
    Manifest(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Io(what, e) => write!(f, "{what}: {e}"),
            BuildError::Command(msg) => write!(f, "{msg}"),
            BuildError::Componentize(name, e) => {
                write!(f, "turning {name} into a component failed: {e}")
            }
            BuildError::Manifest(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// A set of plugin crates to build.
#[derive(Debug, Clone)]
pub struct PluginBuild {
    workspace: PathBuf,
    crates: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
}

impl PluginBuild {
    /// `from` is any directory inside the cargo workspace holding the plugin crates.
    pub fn new(from: impl AsRef<Path>) -> Self {
        let from = from.as_ref();
        let workspace = from
            .ancestors()
            .find(|d| {
                std::fs::read_to_string(d.join("Cargo.toml"))
                    .map(|s| s.contains("[workspace]"))
                    .unwrap_or(false)
            })
            .unwrap_or(from)
            .to_path_buf();
        PluginBuild {
            workspace,
            crates: Vec::new(),
            out_dir: None,
        }
    }

    /// Adds a plugin crate, by its directory relative to the workspace root.
    pub fn plugin(mut self, dir: impl AsRef<Path>) -> Self {
        self.crates.push(self.workspace.join(dir));
        self
    }

    /// Where components are written (default: `<target>/wasm/components`, see
    /// [`PluginBuild::target_dir`]).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The workspace root found by [`PluginBuild::new`].
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The nested build's target directory: `$CARGO_TARGET_DIR/wasm` when that variable is set,
    /// else `<workspace>/target/wasm`.
    pub fn target_dir(&self) -> PathBuf {
        match std::env::var_os("CARGO_TARGET_DIR") {
            Some(d) if !d.is_empty() => {
                let d = PathBuf::from(d);
                let d = if d.is_relative() {
                    self.workspace.join(d)
                } else {
                    d
                };
                d.join("wasm")
            }
            _ => self.workspace.join("target").join("wasm"),
        }
    }

    /// Takes every added crate's component from `dir` (`<crate_name>.wasm`, as
    /// [`PluginBuild::build`] writes them) instead of building: for a second toolchain's build of
    /// the same tree (the nightly fuzz build reuses the stable build's components). Fails naming
    /// the first crate whose component is missing; nothing is checked for staleness.
    pub fn prebuilt(&self, dir: impl AsRef<Path>) -> Result<Vec<BuiltPlugin>, BuildError> {
        let dir = dir.as_ref();
        self.crates
            .iter()
            .map(|c| {
                let name = crate_name(c)?;
                let component = dir.join(format!("{}.wasm", name.replace('-', "_")));
                if !component.is_file() {
                    return Err(BuildError::Manifest(format!(
                        "no prebuilt component for {name}: {} is missing",
                        component.display()
                    )));
                }
                Ok(BuiltPlugin { name, component })
            })
            .collect()
    }

    /// Compiles every added crate and componentizes it.
    pub fn build(&self) -> Result<Vec<BuiltPlugin>, BuildError> {
        ensure_wasm_target()?;
        let target_dir = self.target_dir();
        let out_dir = self
            .out_dir
            .clone()
            .unwrap_or_else(|| target_dir.join("components"));
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| BuildError::Io(format!("creating {}", out_dir.display()), e))?;

        let names = self
            .crates
            .iter()
            .map(|dir| crate_name(dir))
            .collect::<Result<Vec<_>, _>>()?;
        let mut cmd = cargo();
        cmd.current_dir(&self.workspace)
            .args([
                "build",
                "--quiet",
                "--target",
                WASM_TARGET,
                "--profile",
                PROFILE,
            ])
            .arg("--target-dir")
            .arg(&target_dir);
        for setting in PROFILE_SETTINGS {
            cmd.args(["--config", setting]);
        }
        for n in &names {
            cmd.args(["-p", n]);
        }
        // SIMD lets LLVM vectorize the CPU kernels; Cranelift lowers it to SSE/AVX/NEON.
        // (Relaxed SIMD — `F32x4::madd` as one fused multiply-add — was measured: MatMul 512³ and
        // 1024³ no faster, results then differ between hosts with and without FMA; not enabled.)
        cmd.env(
            "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS",
            "-C target-feature=+simd128",
        );
        let status = cmd
            .status()
            .map_err(|e| BuildError::Io("running cargo".into(), e))?;
        if !status.success() {
            return Err(BuildError::Command(format!(
                "cargo build of plugins {names:?} for {WASM_TARGET} failed ({status})"
            )));
        }

        let mut built = Vec::new();
        for name in names {
            let file = name.replace('-', "_");
            let module = target_dir
                .join(WASM_TARGET)
                .join(PROFILE)
                .join(format!("{file}.wasm"));
            let bytes = std::fs::read(&module)
                .map_err(|e| BuildError::Io(format!("reading {}", module.display()), e))?;
            let component =
                componentize(&bytes).map_err(|e| BuildError::Componentize(name.clone(), e))?;
            let dest = out_dir.join(format!("{file}.wasm"));
            if std::fs::read(&dest).ok().as_deref() != Some(&component[..]) {
                std::fs::write(&dest, &component)
                    .map_err(|e| BuildError::Io(format!("writing {}", dest.display()), e))?;
            }
            built.push(BuiltPlugin {
                name,
                component: dest,
            });
        }
        Ok(built)
    }
}

/// Wraps a core module built with wit-bindgen (it carries its `component-type` section) into a
/// component.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, String> {
    wit_component::ComponentEncoder::default()
        .module(module)
        .map_err(|e| format!("{e:#}"))?
        .validate(true)
        .encode()
        .map_err(|e| format!("{e:#}"))
}

/// A `cargo` command with the variables of the enclosing cargo invocation (clippy's wrapper,
/// rustflags, target overrides) removed, so the nested build is an ordinary one.
fn cargo() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let inherited_build_setting = matches!(
            key,
            "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "RUSTFLAGS"
                | "CARGO_ENCODED_RUSTFLAGS"
                | "CARGO_TARGET_DIR"
                | "CARGO_BUILD_TARGET"
                | "CARGO_BUILD_RUSTFLAGS"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_MANIFEST_PATH"
                | "__CARGO_FIX_PLZ"
        ) || key.starts_with("CARGO_PROFILE_")
            || key.starts_with("CARGO_FEATURE_")
            || key.starts_with("CARGO_CFG_");
        if inherited_build_setting {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Installs the wasm target with rustup when the toolchain lacks it.
fn ensure_wasm_target() -> Result<(), BuildError> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", WASM_TARGET])
        .output()
        .map_err(|e| BuildError::Io("running rustc".into(), e))?;
    let libdir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && Path::new(&libdir).join("libstd.rlib").exists()
        || std::fs::read_dir(&libdir)
            .map(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-")))
            })
            .unwrap_or(false)
    {
        return Ok(());
    }
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status()
        .map_err(|e| {
            BuildError::Io(
                format!("{WASM_TARGET} is not installed and rustup could not be run"),
                e,
            )
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(BuildError::Command(format!(
            "`rustup target add {WASM_TARGET}` failed ({status})"
        )))
    }
}

/// The `[package] name` of the crate in `dir`.
fn crate_name(dir: &Path) -> Result<String, BuildError> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| BuildError::Io(format!("reading {}", manifest.display()), e))?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("name") {
            let value = rest.trim_start().trim_start_matches('=').trim();
            return Ok(value.trim_matches('"').to_string());
        }
    }
    Err(BuildError::Manifest(format!(
        "{} has no [package] name",
        manifest.display()
    )))
}
