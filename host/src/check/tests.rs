//! `umd check` on the CPU device: the correctness path runs end to end (the device and the
//! reference are the same, so every case must agree exactly), the figures say why they are
//! missing, and both report files are written.

use super::*;
use crate::tensor::Dtype;

fn host() -> Host {
    Host::builder()
        .artifact_cache(None)
        .kernel_cache(None)
        .build()
        .expect("CPU host with the bundled plugins")
}

#[test]
fn cpu_check_passes_and_writes_both_reports() {
    let host = host();
    let dir = std::env::temp_dir().join(format!("umd-check-unit-{}", std::process::id()));
    let opts = CheckOptions {
        seeds: 1,
        scales: vec![1, 7],
        ..CheckOptions::default()
    };
    let report = run(&host, &dir, &opts).expect("report written");
    assert!(report.passed(), "{}", report.text());
    assert_eq!(report.device, "cpu");
    assert!(report.figures.is_none());
    assert!(report.figures_note.contains("need a CUDA device"));
    // Every op that some self-test case of its plugin plans for is covered, in more than its
    // self-test dtypes; the others (ops whose plans need constant input values, which 1.1
    // self-test cases cannot carry) are listed as uncovered, each with the reason.
    assert!(
        report
            .uncovered
            .iter()
            .all(|u| u.contains("no self-test case of its plugin plans for it")),
        "{:?}",
        report.uncovered
    );

    for op in ["Add", "Sub", "Mul", "Div", "Relu", "Neg", "MatMul"] {
        assert!(report.cases.iter().any(|c| c.op == op), "{op} not checked");
    }
    assert!(
        report
            .cases
            .iter()
            .any(|c| c.op == "Sub" && c.inputs[0].dtype == Dtype::F16)
    );
    assert!(report.cases.iter().any(|c| c.scale == 7));
    assert!(
        report
            .cases
            .iter()
            .all(|c| c.max_error == 0.0 && c.seeds == 1)
    );
    assert!(
        report.skipped > 0,
        "unsupported dtypes are skipped, not failed"
    );
    let json = std::fs::read_to_string(dir.join("check.json")).unwrap();
    assert!(json.contains("\"figures\": null"), "{json}");
    assert!(json.contains("\"passed\": true"));
    let text = std::fs::read_to_string(dir.join("check.txt")).unwrap();
    assert!(text.contains("result: PASS"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn figures_can_be_turned_off_and_failures_count() {
    let mut report = CheckReport {
        device: "cpu".into(),
        target: "cpu".into(),
        reference: "cpu".into(),
        seeds: 1,
        scales: vec![1],
        cases: Vec::new(),
        skipped: 0,
        declined_on_device: Vec::new(),
        uncovered: Vec::new(),
        figures: None,
        figures_note: "off".into(),
        elapsed: Duration::ZERO,
    };
    assert!(report.passed());
    report.cases.push(CaseResult {
        name: "p@1 Add f32[3] (from \"c\", x1)".into(),
        plugin: "p@1".into(),
        op: "Add".into(),
        inputs: vec![TensorDesc::new("a", vec![3], Dtype::F32)],
        source: "c".into(),
        scale: 1,
        seeds: 1,
        max_error: 0.5,
        tolerance: 1e-5,
        failure: Some("output 0 element 1: device 2, reference 1".into()),
    });
    assert!(!report.passed());
    assert_eq!(report.failed(), 1);
    assert!(report.text().contains("result: FAIL (1 of 1 cases)"));
    let json = report.json();
    assert!(
        json.contains(r#""name": "p@1 Add f32[3] (from \"c\", x1)""#),
        "{json}"
    );
    assert!(json.contains("\"passed\": false"));
}
