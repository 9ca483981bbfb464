//! Live plugin lifecycle: hot replacement under load through the directory watcher, broken
//! replacements that leave the working version serving, removal, and the compiled-artifact
//! cache.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use umd::plugin::artifacts::Provenance;
use umd::{Dtype, Host, OpRequest, TensorDesc, data};
use umd_tests::fixture;
use umd_tests::tempdir::TempDir;

/// Replaces `dest` atomically with `src`'s bytes (write aside, rename over).
fn install(src: &Path, dest: &Path) {
    let tmp = dest.with_extension("part");
    std::fs::copy(src, &tmp).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn live_version(host: &Host, name: &str) -> Option<String> {
    let snap = host.registry().snapshot();
    snap.plugins()
        .iter()
        .find(|p| p.name() == name)
        .map(|p| p.version().to_string())
}

/// Translates and runs `Tag`; returns (planning plugin's label, value the kernel wrote).
fn tag(host: &Host) -> Result<(String, f64), umd::Error> {
    let x = TensorDesc::new("x", vec![1], Dtype::F32);
    let t = host.translate(&OpRequest::new("Tag", vec![x.clone()]))?;
    let a = host.alloc(&x)?;
    let out = host.alloc(&t.outputs[0])?;
    let result = host
        .execute(&t, &[a, out], host.device().default_stream())
        .and_then(|f| Ok(f.wait()?))
        .and_then(|_| host.read(out));
    host.free(a)?;
    host.free(out)?;
    Ok((t.plugin.clone(), data::decode(Dtype::F32, &result?)[0]))
}

#[test]
fn hot_replacement_under_load_fails_no_request() {
    let dir = TempDir::new();
    let file = dir.path().join("tagger.wasm");
    install(&fixture("tagger_v1"), &file);
    let host = Arc::new(Host::builder().plugin_dir(dir.path()).build().unwrap());
    let _watcher = host.watch(&[]).unwrap();
    assert_eq!(live_version(&host, "tagger").as_deref(), Some("1.0.0"));

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (host, stop, done) = (host.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match tag(&host) {
                        // The version that planned a request is the version that ran it.
                        Ok((label, v)) if label == format!("tagger@{v}.0.0") => {}
                        Ok((label, v)) => failures.push(format!("planned by {label}, ran v{v}")),
                        Err(e) => failures.push(e.to_string()),
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
                failures
            })
        })
        .collect();

    for i in 0..50 {
        let (src, version) = if i % 2 == 0 {
            ("tagger_v2", "2.0.0")
        } else {
            ("tagger_v1", "1.0.0")
        };
        install(&fixture(src), &file);
        wait_for(&format!("replacement {i} to {version}"), || {
            live_version(&host, "tagger").as_deref() == Some(version)
        });
    }
    stop.store(true, Ordering::Relaxed);
    let failures: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        failures.is_empty(),
        "{} failed requests, e.g. {:?}",
        failures.len(),
        failures.first()
    );
    assert!(
        done.load(Ordering::Relaxed) >= 50,
        "the clients kept running"
    );
}

#[test]
fn broken_replacements_leave_the_working_version_and_removal_unloads() {
    let dir = TempDir::new();
    let file = dir.path().join("tagger.wasm");
    install(&fixture("tagger_v1"), &file);
    let host = Arc::new(Host::builder().plugin_dir(dir.path()).build().unwrap());
    let _watcher = host.watch(&[]).unwrap();
    let origin = file.display().to_string();
    let refused = |host: &Host, needle: &str| {
        host.plugin_status()
            .iter()
            .any(|p| p.origin == origin && p.status.as_ref().is_err_and(|e| e.contains(needle)))
    };

    // Not WebAssembly at all.
    std::fs::write(dir.path().join("junk.part"), b"definitely not wasm").unwrap();
    std::fs::rename(dir.path().join("junk.part"), &file).unwrap();
    wait_for("the junk to be refused", || {
        refused(&host, "not a valid WebAssembly component")
    });
    assert_eq!(tag(&host).unwrap().1, 1.0, "v1 still serves");

    // Another ABI major.
    install(&fixture("abi2"), &file);
    wait_for("the 2.0 plugin to be refused", || {
        refused(&host, "umd:plugin@2.0.0")
    });
    assert_eq!(tag(&host).unwrap().1, 1.0, "v1 still serves");

    // A good version replaces it, and clears the failures recorded for the file.
    install(&fixture("tagger_v2"), &file);
    wait_for("v2", || {
        live_version(&host, "tagger").as_deref() == Some("2.0.0")
    });
    assert_eq!(tag(&host).unwrap().1, 2.0);
    assert!(
        !refused(&host, ""),
        "failures of the file are cleared once it loads: {:?}",
        host.plugin_status()
    );

    // Removing the file unloads the plugin.
    std::fs::remove_file(&file).unwrap();
    wait_for("unload", || live_version(&host, "tagger").is_none());
    let err = tag(&host).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
}

#[test]
fn compiled_artifacts_are_cached_and_corrupt_ones_recompiled() {
    let cache = TempDir::new();
    let plugins = TempDir::new();
    install(&fixture("tagger_v1"), &plugins.path().join("tagger.wasm"));
    let build = || {
        Host::builder()
            .bundled_plugins(false)
            .plugin_dir(plugins.path())
            .artifact_cache(Some(cache.path().to_path_buf()))
            .build()
            .unwrap()
    };
    let provenance = |h: &Host| h.registry().snapshot().plugins()[0].provenance().clone();
    assert_eq!(provenance(&build()), Provenance::Compiled);
    let cached = build();
    assert_eq!(provenance(&cached), Provenance::Cached);
    assert_eq!(tag(&cached).unwrap().1, 1.0, "a cached artifact runs");

    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let p = entry.unwrap().path();
        let mut bytes = std::fs::read(&p).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&p, bytes).unwrap();
    }
    let rebuilt = build();
    assert!(
        matches!(provenance(&rebuilt), Provenance::Recompiled(why) if why.contains("checksum"))
    );
    assert_eq!(tag(&rebuilt).unwrap().1, 1.0);
    assert_eq!(
        provenance(&build()),
        Provenance::Cached,
        "the recompiled artifact was stored again"
    );
}

/// Runs a `Tag` translation on the default device; returns the value its kernel wrote.
fn run_tag(host: &Host, t: &umd::Translation) -> Result<f64, umd::Error> {
    let a = host.alloc(&t.cmdbuf.bindings[0].desc)?;
    let out = host.alloc(&t.outputs[0])?;
    let result = host
        .execute(t, &[a, out], host.device().default_stream())
        .and_then(|f| Ok(f.wait()?))
        .and_then(|_| host.read(out));
    host.free(a)?;
    host.free(out)?;
    Ok(data::decode(Dtype::F32, &result?)[0])
}

/// A rebuilt plugin with an unchanged `name@version` is another build: its self-test runs its
/// own kernels (not the loaded build's), translations planned by the old build keep running the
/// old build, and once nothing holds the old build its command buffer fails naming it.
#[test]
fn a_rebuild_with_the_same_version_is_told_apart() {
    let dir = TempDir::new();
    let file = dir.path().join("tagger.wasm");
    install(&fixture("tagger_v1"), &file);
    let host = Host::builder()
        .bundled_plugins(false)
        .artifact_cache(None)
        .plugin_dir(dir.path())
        .build()
        .unwrap();
    let req = OpRequest::new("Tag", vec![TensorDesc::new("x", vec![1], Dtype::F32)]);
    let old = host.translate(&req).unwrap();
    assert_eq!(run_tag(&host, &old).unwrap(), 1.0);

    // The rebuild's self-test expects 1.1: admitted only if it ran the rebuild's kernel.
    install(&fixture("tagger_v1_rebuilt"), &file);
    let status = host.load_plugin(&file).expect("rebuild admitted");
    assert_eq!(status.status.as_deref(), Ok("tagger@1.0.0"));
    let new = host.translate(&req).unwrap();
    assert_eq!(new.plugin, old.plugin, "one label, two builds");
    assert_ne!(
        new.cmdbuf.launches[0].module.hash,
        old.cmdbuf.launches[0].module.hash
    );
    assert_eq!(
        run_tag(&host, &new).unwrap(),
        1.1f32 as f64,
        "new translations run the rebuild"
    );
    assert_eq!(
        run_tag(&host, &old).unwrap(),
        1.0,
        "old ones still run the old build"
    );

    // Nothing holds the old build any more: its command buffer is refused before submit,
    // naming the plugin and the module's build hash, and never runs on the rebuild.
    let old_cmd = old.cmdbuf.clone();
    drop(old);
    host.translator().cache().clear();
    let x = host.alloc(&old_cmd.bindings[0].desc).unwrap();
    let out = host.alloc(&old_cmd.bindings[1].desc).unwrap();
    let stream = host.device().default_stream();
    let e = host
        .submit(&**host.device(), stream, &old_cmd, &[x, out])
        .expect_err("an old build's command buffer is refused");
    let msg = e.to_string();
    assert!(
        msg.contains("planned by a build of tagger@1.0.0 that is no longer loaded")
            && msg.contains("module `tag`"),
        "{msg}"
    );
    assert_eq!(e.status(), umd::error::status::INVALID_COMMAND_BUFFER);
    // Straight to the device (no host check): the launch fails with the same reason.
    let e = host
        .device()
        .submit(stream, old_cmd, &[x, out])
        .unwrap()
        .wait()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no longer loaded"), "{e}");
}

#[test]
fn a_replaced_plugin_version_is_freed_once_its_work_is_done() {
    let dir = TempDir::new();
    let (v1, v2) = (dir.path().join("v1.wasm"), dir.path().join("v2.wasm"));
    install(&fixture("tagger_v1"), &v1);
    install(&fixture("tagger_v2"), &v2);
    let host = Host::builder().bundled_plugins(false).build().unwrap();
    host.load_plugin(&v1).unwrap();
    let x = TensorDesc::new("x", vec![1], Dtype::F32);
    let req = OpRequest::new("Tag", vec![x]);
    let t = host.translate(&req).unwrap();
    assert_eq!(t.plugin, "tagger@1.0.0");
    let old = Arc::downgrade(&t.planner);
    drop(t);
    for (i, file) in [&v2, &v1, &v2].into_iter().enumerate() {
        host.load_plugin(file).unwrap();
        // The cached translation of the old generation may not keep the old version alive
        // once a translation of the new one is cached.
        let t = host.translate(&req).unwrap();
        assert_eq!(
            t.plugin,
            ["tagger@2.0.0", "tagger@1.0.0", "tagger@2.0.0"][i]
        );
        assert_eq!(host.translator().cache().stats().entries, 1);
    }
    assert!(
        old.upgrade().is_none(),
        "the replaced tagger@1.0.0 is still alive"
    );
}

/// A compiled model planned by a plugin that is then replaced is compiled again on its next
/// run (the new build plans and runs it); before, it kept a plan whose build was gone.
#[test]
fn a_compiled_model_is_compiled_again_after_its_plugin_is_replaced() {
    use std::collections::HashMap;
    use umd::graph::{Dim, GraphDef, Model, Node, Tensor, ValueDecl};
    let dir = TempDir::new();
    let file = dir.path().join("tagger.wasm");
    install(&fixture("tagger_v1"), &file);
    let host = Arc::new(
        Host::builder()
            .bundled_plugins(false)
            .artifact_cache(None)
            .plugin_dir(dir.path())
            .build()
            .unwrap(),
    );
    let decl = |name: &str| ValueDecl {
        name: name.into(),
        dtype: Some(Dtype::F32),
        dims: Some(vec![Dim::Fixed(1)]),
    };
    let def = GraphDef {
        nodes: vec![Node::new("Tag", &["x"], &["y"], vec![])],
        inputs: vec![decl("x")],
        outputs: vec![decl("y")],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host.clone(), def).unwrap();
    let x = Tensor {
        desc: TensorDesc::new("x", vec![1], Dtype::F32),
        data: data::encode(Dtype::F32, &[0.0]),
    };
    let run = |m: &Model| {
        data::decode(
            Dtype::F32,
            &m.run(std::slice::from_ref(&x)).unwrap().outputs[0].data,
        )[0]
    };
    assert_eq!(run(&model), 1.0);
    assert_eq!(run(&model), 1.0, "the compiled plan again");
    install(&fixture("tagger_v1_rebuilt"), &file);
    host.load_plugin(&file).expect("rebuild admitted");
    host.translator().cache().clear();
    assert_eq!(run(&model), 1.1f32 as f64, "planned and run by the rebuild");
    install(&fixture("tagger_v2"), &file);
    host.load_plugin(&file).expect("v2 admitted");
    assert_eq!(run(&model), 2.0, "planned and run by v2");
}

/// Loading the file a plugin is already serving, byte for byte, leaves that build serving (it is
/// not admitted again); other bytes from the same file replace it.
#[test]
fn loading_the_same_bytes_again_keeps_the_serving_build() {
    let dir = TempDir::new();
    let file = dir.path().join("tagger.wasm");
    install(&fixture("tagger_v1"), &file);
    let host = Host::builder()
        .bundled_plugins(false)
        .plugin_dir(dir.path())
        .build()
        .unwrap();
    let serving = || {
        host.registry()
            .snapshot()
            .by_label("tagger@1.0.0")
            .cloned()
            .unwrap()
    };
    let before = serving();
    host.load_plugin(&file).expect("the same bytes load");
    assert!(
        Arc::ptr_eq(&before, &serving()),
        "the same build still serves"
    );
    install(&fixture("tagger_v1_rebuilt"), &file);
    host.load_plugin(&file).expect("a rebuild loads");
    assert!(!Arc::ptr_eq(&before, &serving()), "the rebuild replaced it");
    assert_eq!(tag(&host).unwrap().1, 1.1f32 as f64);
}
