//! ABI versions: a 1.0 plugin runs unchanged on the 1.1 host, 1.1 plugins use the addition
//! (self-test cases, tuning hints) and are admitted only when their cases pass, and a failing
//! replacement leaves the working version serving. (A 2.0 plugin's refusal is in sandbox.rs.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use umd::plugin::HOST_ABI;
use umd::{Dtype, Host, data};
use umd_tests::{fixture, fixture_dir};

#[test]
fn a_1_0_plugin_runs_unchanged_on_the_1_1_host() {
    assert_eq!(HOST_ABI.to_string(), "1.1.0");
    let dir = fixture_dir(&["abi10"]);
    let host = Host::builder().plugin_dir(dir.path()).build().unwrap();
    let p = host
        .registry()
        .snapshot()
        .by_label("abi10@1.0.0")
        .cloned()
        .expect("1.0 plugin loaded");
    assert_eq!(p.abi().to_string(), "1.0.0");
    assert!(
        p.self_test_cases().unwrap().is_none(),
        "1.0 plugins have no self-test export"
    );
    assert!(p.tuning_hints().unwrap().is_empty());
    let x = umd::TensorDesc::new("x", vec![3], Dtype::F32);
    let out = host
        .run(
            "Double",
            &[(x, data::encode(Dtype::F32, &[1.0, -2.5, 4.0]))],
        )
        .unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![2.0, -5.0, 8.0]);
}

#[test]
fn plugins_built_for_1_1_declare_self_tests_and_hints() {
    let host = Host::builder().build().unwrap();
    let snap = host.registry().snapshot();
    let ew = snap.by_label("elementwise@0.1.0").unwrap();
    assert_eq!(ew.abi().to_string(), "1.1.0");
    let cases = ew
        .self_test_cases()
        .unwrap()
        .expect("1.1 plugins export self-test");
    assert!(cases.len() >= 3);
    assert!(
        cases
            .iter()
            .any(|c| c.op == "Div" && c.name.contains("division by zero"))
    );
    let mm = snap.by_label("matmul@0.1.0").unwrap();
    let hints = mm.tuning_hints().unwrap();
    assert!(
        hints
            .iter()
            .any(|h| h.op == "MatMul" && h.key == "tile" && h.value == "16"),
        "{hints:?}"
    );
}

#[test]
fn a_plugin_failing_its_self_test_is_not_admitted() {
    let dir = fixture_dir(&["tagger_liar"]);
    let host = Host::builder().plugin_dir(dir.path()).build().unwrap();
    assert!(
        host.registry()
            .snapshot()
            .plugins()
            .iter()
            .all(|p| p.name() != "tagger")
    );
    let status = host.plugin_status();
    let refused = status
        .iter()
        .find(|p| p.origin.ends_with("tagger_liar.wasm"))
        .unwrap();
    let msg = refused.status.clone().unwrap_err();
    assert!(
        msg.contains("tagger@3.0.0") && msg.contains("not admitted"),
        "{msg}"
    );
    assert!(
        msg.contains("self-test `tag is the major version` (Tag) failed"),
        "{msg}"
    );
    assert!(msg.contains("got 3, expected 99"), "{msg}");
}

#[test]
fn a_replacement_failing_its_self_test_leaves_the_old_version_serving() {
    let dir = fixture_dir(&["tagger_v1"]);
    let file = dir.path().join("tagger_v1.wasm");
    let host = Arc::new(Host::builder().plugin_dir(dir.path()).build().unwrap());
    let _w = host.watch(&[]).unwrap();
    let tmp = dir.path().join("liar.part");
    std::fs::copy(fixture("tagger_liar"), &tmp).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !host
        .plugin_status()
        .iter()
        .any(|p| p.status.as_ref().is_err_and(|e| e.contains("not admitted")))
    {
        assert!(Instant::now() < deadline, "the liar was never refused");
        std::thread::sleep(Duration::from_millis(5));
    }
    let x = umd::TensorDesc::new("x", vec![1], Dtype::F32);
    let out = host.run("Tag", &[(x, vec![0; 4])]).unwrap();
    assert_eq!(
        data::decode(Dtype::F32, &out[0].1),
        vec![1.0],
        "v1 keeps serving"
    );
}
