//! Per-target selection: a vendor plugin overrides the generic one on its architecture only,
//! the generic one serves elsewhere and whenever the vendor declines; version pins; explain.

use umd::translate::Outcome;
use umd::{Dtype, Host, OpRequest, Target, TensorDesc};
use umd_tests::fixture_dir;

fn host() -> (Host, umd_tests::tempdir::TempDir) {
    let dir = fixture_dir(&["vendor"]);
    (Host::builder().plugin_dir(dir.path()).build().unwrap(), dir)
}

fn add(dt: Dtype, a: &[u64], b: &[u64], target: &str) -> OpRequest {
    OpRequest::new(
        "Add",
        vec![
            TensorDesc::new("a", a.to_vec(), dt),
            TensorDesc::new("b", b.to_vec(), dt),
        ],
    )
    .target(Target::parse(target).unwrap())
}

#[test]
fn the_vendor_wins_on_its_architecture_only() {
    let (host, _d) = host();
    let t = host
        .translate(&add(Dtype::F32, &[1024], &[1024], "cuda:sm_90"))
        .unwrap();
    assert_eq!(
        (t.plugin.as_str(), t.kernel_name.as_str()),
        ("vendor-sm90@2.3.0", "add_f32_sm90_vec4")
    );
    for target in ["cuda:sm_80", "cpu"] {
        let t = host
            .translate(&add(Dtype::F32, &[1024], &[1024], target))
            .unwrap();
        assert_eq!(t.plugin, "elementwise@0.1.0", "{target}");
    }
}

#[test]
fn the_generic_plugin_serves_when_the_vendor_declines() {
    let (host, _d) = host();
    let t = host
        .translate(&add(Dtype::F16, &[8], &[8], "cuda:sm_90"))
        .unwrap();
    assert_eq!(
        (t.plugin.as_str(), t.kernel_name.as_str()),
        ("elementwise@0.1.0", "add_f16")
    );
    let t = host
        .translate(&add(Dtype::F32, &[2, 8], &[8], "cuda:sm_90"))
        .unwrap();
    assert_eq!(
        t.plugin, "elementwise@0.1.0",
        "the vendor kernel does not broadcast"
    );
}

#[test]
fn version_pins_restrict_the_candidates() {
    let (host, _d) = host();
    let mut req = add(Dtype::F32, &[16], &[16], "cuda:sm_90");
    req.op = "Add@0.1".into();
    assert_eq!(host.translate(&req).unwrap().plugin, "elementwise@0.1.0");
    req.op = "Add@2".into();
    assert_eq!(host.translate(&req).unwrap().plugin, "vendor-sm90@2.3.0");
    req.op = "Add@9".into();
    let err = host.translate(&req).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED);
    assert!(err.to_string().contains("does not match the pin"), "{err}");
    req.op = "Add@not-a-version".into();
    assert_eq!(
        host.translate(&req).unwrap_err().status(),
        umd::error::status::INVALID_INPUT
    );
}

#[test]
fn explain_shows_candidates_winner_and_reasons() {
    let (host, _d) = host();
    let rows = host
        .translator()
        .explain(&add(Dtype::F16, &[8], &[8], "cuda:sm_90"))
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            rows[0].plugin.as_str(),
            rows[0].specificity,
            rows[0].priority
        ),
        ("vendor-sm90@2.3.0", 3, 10)
    );
    assert!(matches!(&rows[0].outcome, Outcome::Declined(why) if why.contains("f32 only")));
    assert_eq!(
        (rows[1].plugin.as_str(), rows[1].specificity),
        ("elementwise@0.1.0", 2)
    );
    assert_eq!(rows[1].outcome, Outcome::Chosen("add_f16".into()));

    let rows = host
        .translator()
        .explain(&add(Dtype::F32, &[8], &[8], "cuda:sm_90"))
        .unwrap();
    assert_eq!(rows[0].outcome, Outcome::Chosen("add_f32_sm90_vec4".into()));
    assert_eq!(rows[1].outcome, Outcome::NotAsked);
}
