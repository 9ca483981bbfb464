//! `umd plugin new|build|test`: the vendor kit. Writes an out-of-tree plugin project (its own
//! workspace, depending on this checkout's SDK by path), builds it into a component and runs
//! its native tests. Templates live in `cli/templates/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Write a new plugin project NAME (one op `Scale`, CPU + CUDA kernels, self-tests, a native
    /// test, README) into DIR/NAME.
    New(NewArgs),
    /// Build the project in DIR into a component; prints the component's path.
    Build(ProjectArgs),
    /// Run the project's native tests (`cargo test`: CPU kernels, CUDA sources).
    Test(ProjectArgs),
}

#[derive(Args)]
pub struct NewArgs {
    /// Crate and plugin name: lowercase letters, digits, `-` and `_`, starting with a letter.
    name: String,
    /// Directory the project directory is created in.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The umd SDK directory (`sdk/` of a umd checkout; default: the one this umd was built from).
    #[arg(long)]
    sdk: Option<PathBuf>,
}

#[derive(Args)]
pub struct ProjectArgs {
    /// The plugin project directory.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Pass `--offline` to cargo (build from the local registry cache only).
    #[arg(long)]
    offline: bool,
}

const CARGO_TOML: &str = include_str!("templates/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("templates/lib.rs.tmpl");
const NATIVE_RS: &str = include_str!("templates/native.rs.tmpl");
const README: &str = include_str!("templates/README.md.tmpl");
const COMPONENTIZE_TOML: &str = include_str!("templates/componentize.Cargo.toml.tmpl");
const COMPONENTIZE_MAIN: &str = include_str!("templates/componentize.main.rs.tmpl");
const GITIGNORE: &str = "/target\n";

pub fn run(cmd: PluginCommand) -> anyhow::Result<()> {
    match cmd {
        PluginCommand::New(a) => new(&a),
        PluginCommand::Build(a) => build(&a),
        PluginCommand::Test(a) => test(&a),
    }
}

fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn new(a: &NewArgs) -> anyhow::Result<()> {
    if !valid_name(&a.name) {
        bail!(
            "plugin name `{}`: use 1-64 lowercase letters, digits, `-` or `_`, starting with a letter",
            a.name
        );
    }
    let sdk = match &a.sdk {
        Some(s) => s.clone(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk"),
    };
    let sdk = sdk
        .canonicalize()
        .with_context(|| format!("SDK directory {}", sdk.display()))?;
    if !sdk.join("Cargo.toml").is_file() || !sdk.join("build/Cargo.toml").is_file() {
        bail!(
            "{} is not the umd SDK (no Cargo.toml and build/Cargo.toml)",
            sdk.display()
        );
    }
    let project = a.dir.join(&a.name);
    if project.exists() {
        bail!("{} already exists", project.display());
    }
    let snake = a.name.replace('-', "_");
    let ty: String = snake
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    let sdk_str = sdk
        .to_str()
        .context("the SDK path is not UTF-8")?
        .replace('\\', "/");
    let fill = |t: &str| {
        t.replace("__NAME__", &a.name)
            .replace("__SNAKE__", &snake)
            .replace("__TYPE__", &ty)
            .replace("__SDK__", &sdk_str)
    };
    let files: [(&str, &str); 7] = [
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB_RS),
        ("tests/native.rs", NATIVE_RS),
        ("README.md", README),
        ("componentize/Cargo.toml", COMPONENTIZE_TOML),
        ("componentize/src/main.rs", COMPONENTIZE_MAIN),
        (".gitignore", GITIGNORE),
    ];
    for (rel, template) in files {
        let path = project.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, fill(template))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!("created {} (SDK: {})", project.display(), sdk.display());
    Ok(())
}

fn project_dir(a: &ProjectArgs) -> anyhow::Result<PathBuf> {
    let dir = a
        .dir
        .canonicalize()
        .with_context(|| format!("plugin project {}", a.dir.display()))?;
    if !dir.join("componentize/Cargo.toml").is_file() {
        bail!(
            "{} is not a plugin project made by `umd plugin new` (no componentize/Cargo.toml)",
            dir.display()
        );
    }
    Ok(dir)
}

fn cargo(dir: &Path, offline: bool) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(dir);
    if offline {
        c.arg("--offline");
    }
    c
}

fn build(a: &ProjectArgs) -> anyhow::Result<()> {
    let dir = project_dir(a)?;
    let name = std::fs::read_to_string(dir.join("componentize/Cargo.toml"))?
        .lines()
        .find_map(|l| {
            l.strip_prefix("name = \"")
                .map(|s| s.trim_end_matches('"').to_string())
        })
        .context("componentize/Cargo.toml has no name")?;
    let out = cargo(&dir, a.offline)
        .args(["run", "--quiet", "-p", &name])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !out.status.success() {
        bail!("building {} failed ({})", dir.display(), out.status);
    }
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

fn test(a: &ProjectArgs) -> anyhow::Result<()> {
    let dir = project_dir(a)?;
    let status = cargo(&dir, a.offline)
        .args(["test", "--workspace"])
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("tests of {} failed ({status})", dir.display());
    }
    println!("tests of {} passed", dir.display());
    Ok(())
}
