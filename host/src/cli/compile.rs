//! `umd plugins compile`: the kernel gate, with no GPU and no driver. For each `--arch`, every
//! loaded plugin's self-test cases are planned for `cuda:ARCH` in every dtype `umd check` would
//! try ([`umd::check::case_requests`]); each module a plan launches is fetched from its plugin
//! (`kernel-source`), compiled by NVRTC (PTX and cubin: compiled *and* assembled), and every
//! launch is checked against its kernel's PTX parameters ([`umd::device::cuda::ptx`]). With
//! `--out DIR` the modules are written in the kernel-cache format as prebuilt entries, so a GPU
//! host without NVRTC loads them.
//!
//! A variant the plugin declines for the target is counted, not failed; anything else that goes
//! wrong fails the run, named `plugin op dtype arch: why`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;
use clap::Args;

use umd::cmdbuf::{LaunchCmd, ModuleRef};
use umd::device::SourceForm;
use umd::device::cuda::modules::{KernelCache, Nvrtc};
use umd::device::cuda::{nvrtc, ptx};
use umd::plugin::LoadedPlugin;
use umd::{Error, Host, OpRequest, Target};

use super::HostArgs;

#[derive(Args)]
pub struct CompileArgs {
    /// Architecture to compile for (`sm_80`, `sm_90`, `sm_100`; repeatable).
    #[arg(long = "arch", required = true)]
    archs: Vec<String>,
    /// Also write every module (PTX, cubin) into DIR in the kernel-cache format.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The NVRTC library, or the folder holding it (default: `UMD_NVRTC`, the loader's path,
    /// a CUDA toolkit, the PyPI wheel `nvidia-cuda-nvrtc` of a Python environment).
    #[arg(long)]
    nvrtc: Option<PathBuf>,
    /// Succeed even when no module was compiled.
    #[arg(long)]
    allow_empty: bool,
    /// ptxas (CUDA toolkit, or the PyPI wheel `nvidia-cuda-nvcc`): also assembles modules that
    /// plugins ship as PTX for each `--arch` (NVRTC cannot); without it they are checked, not
    /// assembled.
    #[arg(long, env = "UMD_PTXAS")]
    ptxas: Option<PathBuf>,
}

/// What the gate compiles and assembles with.
struct Tools<'a> {
    cache: KernelCache<Nvrtc>,
    ptxas: Option<&'a Path>,
}

/// One compiled module: its kernels' parameter lists, or why it has none.
type Kernels = Result<Arc<HashMap<String, ptx::Entry>>, String>;

#[derive(Default)]
struct Tally {
    variants: usize,
    declined: usize,
    modules: usize,
    cubins: usize,
    /// Modules shipped as PTX without a cubin.
    shipped_ptx: usize,
    /// Of them, assembled by ptxas.
    assembled_ptx: usize,
    launches: usize,
    failures: Vec<String>,
}

pub fn run(host_args: &HostArgs, args: &CompileArgs) -> anyhow::Result<()> {
    // Before anything else could look NVRTC up by name.
    let found = nvrtc::locate(args.nvrtc.as_deref())?;
    println!("compiler: {found}");
    let host = host_args.host()?;
    let cache = Tools {
        ptxas: args.ptxas.as_deref(),
        cache: KernelCache::new(
            Nvrtc {
                version: found.version,
            },
            args.out.clone(),
        ),
    };
    let mut t = Tally::default();
    for p in host.plugin_status() {
        if let Err(e) = &p.status {
            t.failures
                .push(format!("{}: refused at load: {e}", p.origin));
        }
    }
    let start = Instant::now();
    let targets = args
        .archs
        .iter()
        .map(|a| Target::parse(&format!("cuda:{}", a.trim_start_matches("cuda:"))))
        .collect::<Result<Vec<_>, _>>()?;
    // One thread per architecture: NVRTC is most of the time.
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| s.spawn(|| gate_target(&host, &cache, target)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Tally {
                    failures: vec!["the gate's thread for this architecture panicked".into()],
                    ..Tally::default()
                })
            })
            .collect()
    });
    for (target, a) in targets.iter().zip(tallies) {
        println!(
            "{}: {} module(s) compiled, {} launch(es) checked, {} failure(s)",
            target.arch,
            a.modules,
            a.launches,
            a.failures.len()
        );
        t.variants += a.variants;
        t.declined += a.declined;
        t.modules += a.modules;
        t.cubins += a.cubins;
        t.shipped_ptx += a.shipped_ptx;
        t.assembled_ptx += a.assembled_ptx;
        t.launches += a.launches;
        t.failures.extend(a.failures);
    }
    println!(
        "{} variant(s) planned, {} declined by their plugin, {} module(s) ({} with a cubin, {} \
         shipped as PTX only, {} of them assembled by ptxas), {} launch(es) checked in {:.1} s",
        t.variants,
        t.declined,
        t.modules,
        t.cubins,
        t.shipped_ptx,
        t.assembled_ptx,
        t.launches,
        start.elapsed().as_secs_f64()
    );
    if let Some(dir) = &args.out {
        println!(
            "modules written to {} (kernel-cache format: copy its files into the GPU host's \
             kernel cache, {})",
            dir.display(),
            umd::default_kernel_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|| "~/.cache/umd/kernels".into())
        );
    }
    for f in &t.failures {
        println!("FAIL {f}");
    }
    if !t.failures.is_empty() {
        bail!("kernel gate: {} failure(s)", t.failures.len());
    }
    if t.modules == 0 && !args.allow_empty {
        bail!("kernel gate: no module was compiled (pass --allow-empty if that is intended)");
    }
    Ok(())
}

fn gate_target(host: &Host, cache: &Tools, target: &Target) -> Tally {
    let mut t = Tally::default();
    let mut modules = HashMap::new();
    for plugin in host.registry().snapshot().plugins() {
        gate_plugin(host, cache, plugin, target, &mut modules, &mut t);
    }
    t
}

fn gate_plugin(
    host: &Host,
    cache: &Tools,
    plugin: &Arc<LoadedPlugin>,
    target: &Target,
    modules: &mut HashMap<ModuleRef, Kernels>,
    t: &mut Tally,
) {
    let cases = match plugin.self_test_cases() {
        Ok(cases) => cases.unwrap_or_default(),
        Err(fault) => {
            let label = plugin.label();
            t.failures
                .push(format!("{label}: self-test cases unreadable: {fault}"));
            return;
        }
    };
    for op in plugin.ops() {
        if !op.targets.iter().any(|d| target.specificity(d).is_some()) {
            continue;
        }
        for case in &cases {
            for req in umd::check::case_requests(case, &op.name) {
                t.variants += 1;
                let what = format!(
                    "{} {} {} {}",
                    plugin.label(),
                    op.name,
                    dtypes(&req),
                    target.arch
                );
                let req = OpRequest {
                    target: Some(target.clone()),
                    ..req
                };
                let plan = match host.translator().plan_with(plugin, &req) {
                    Ok(plan) => plan,
                    Err(e) if declined(&e) => {
                        t.declined += 1;
                        continue;
                    }
                    Err(e) => {
                        t.failures.push(format!("{what}: does not plan: {e}"));
                        continue;
                    }
                };
                for (i, l) in plan.cmdbuf.launches.iter().enumerate() {
                    t.launches += 1;
                    if let Err(why) = check_launch(host, cache, target, l, modules, t) {
                        t.failures.push(format!(
                            "{what} (case \"{}\", launch {i} `{}`): {why}",
                            case.name, l.entry_point
                        ));
                    }
                }
            }
        }
    }
}

/// The distinct input dtypes of a request: `f16`, `f32+i64`.
fn dtypes(req: &OpRequest) -> String {
    let mut names: Vec<String> = Vec::new();
    for d in &req.inputs {
        let n = d.dtype.to_string();
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names.join("+")
}

fn declined(e: &Error) -> bool {
    matches!(
        e,
        Error::Unsupported { .. } | Error::Rejected { .. } | Error::Request(_)
    )
}

fn check_launch(
    host: &Host,
    cache: &Tools,
    target: &Target,
    l: &LaunchCmd,
    modules: &mut HashMap<ModuleRef, Kernels>,
    t: &mut Tally,
) -> Result<(), String> {
    let kernels = modules
        .entry(l.module.clone())
        .or_insert_with(|| {
            let k = compile(host, cache, target, &l.module, t);
            if k.is_ok() {
                t.modules += 1;
            }
            k
        })
        .clone()?;
    let entry = kernels.get(&l.entry_point).ok_or_else(|| {
        let mut names: Vec<&str> = kernels.keys().map(String::as_str).collect();
        names.sort_unstable();
        format!(
            "module `{}` has no kernel `{}` (it has: {})",
            l.module.id,
            l.entry_point,
            names.join(", ")
        )
    })?;
    let relocations: Vec<u32> = l.relocations.iter().map(|r| r.offset).collect();
    entry.check(l.params.len(), &relocations)
}

fn compile(
    host: &Host,
    cache: &Tools,
    target: &Target,
    module: &ModuleRef,
    t: &mut Tally,
) -> Kernels {
    let source = host.kernel_source(module, target)?;
    let compiled = cache
        .cache
        .prebuild(&source, &target.arch)
        .map_err(|e| format!("module `{}` does not compile: {e}", module.id))?;
    if compiled.cubin.is_some() {
        t.cubins += 1;
    } else if matches!(source.form, SourceForm::Ptx { .. }) {
        // Shipped PTX is JIT-compiled by the driver; the gate checks its parameter layout and,
        // given ptxas, assembles it for the architecture as the driver's JIT would.
        t.shipped_ptx += 1;
        if let Some(ptxas) = cache.ptxas {
            assemble(ptxas, &compiled.ptx, &target.arch)
                .map_err(|e| format!("module `{}`: shipped PTX {e}", module.id))?;
            t.assembled_ptx += 1;
        }
    } else {
        return Err(format!(
            "module `{}`: NVRTC gave PTX but no cubin for {} (not assembled)",
            module.id, target.arch
        ));
    }
    let entries = ptx::entries(&compiled.ptx)
        .map_err(|e| format!("module `{}`: PTX not understood: {e}", module.id))?;
    let mut map = HashMap::new();
    for e in entries {
        map.insert(e.name.clone(), e);
    }
    for name in &source.entry_points {
        if !map.contains_key(name) {
            return Err(format!(
                "module `{}` declares entry point `{name}`, which its PTX does not define \
                 (missing `extern \"C\"`?)",
                module.id
            ));
        }
    }
    Ok(Arc::new(map))
}

/// Assembles `ptx` for `arch` with `ptxas` (into a temporary file, removed again); `Err` carries
/// ptxas's own messages.
fn assemble(ptxas: &Path, ptx: &str, arch: &str) -> Result<(), String> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("umd-gate-{}-{n}", std::process::id()));
    let (src, out) = (base.with_extension("ptx"), base.with_extension("cubin"));
    std::fs::write(&src, ptx).map_err(|e| format!("not written for ptxas: {e}"))?;
    let run = std::process::Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output();
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&out);
    let run = run.map_err(|e| format!("not assembled: running {}: {e}", ptxas.display()))?;
    if run.status.success() {
        return Ok(());
    }
    let log = String::from_utf8_lossy(&run.stderr);
    // One line (each failure is one line of the gate's report), bounded.
    let log: String = log
        .trim()
        .lines()
        .collect::<Vec<_>>()
        .join(" | ")
        .chars()
        .take(2000)
        .collect();
    Err(format!(
        "does not assemble for {arch} (ptxas {}): {log}",
        run.status
    ))
}
