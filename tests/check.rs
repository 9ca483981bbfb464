//! `umd check` without a GPU: the library entry point on the default CPU host (device and
//! reference are both the CPU), its verdict and its two report files.

use umd::Host;
use umd::check::{self, CheckOptions};
use umd_tests::tempdir::TempDir;

#[test]
fn check_on_the_cpu_device_passes_and_writes_text_and_json() {
    let host = Host::builder().artifact_cache(None).build().unwrap();
    let out = TempDir::new();
    // Two seeds and two scales keep this debug-build test short with 130+ ops loaded.
    let opts = CheckOptions {
        seeds: 2,
        scales: vec![1, 7],
        ..CheckOptions::default()
    };
    let report = check::run(&host, &out.path().join("report"), &opts).unwrap();
    assert!(report.passed(), "{}", report.text());
    assert_eq!(
        (report.device.as_str(), report.reference.as_str()),
        ("cpu", "cpu")
    );
    assert_eq!(report.seeds, 2);
    assert!(report.cases.iter().all(|c| c.seeds == 2));
    for k in [1, 7] {
        assert!(report.cases.iter().any(|c| c.scale == k), "no case at x{k}");
    }
    assert!(report.figures.is_none());

    let json = std::fs::read_to_string(out.path().join("report/check.json")).unwrap();
    assert!(json.contains("\"figures\": null"), "{json}");
    assert!(json.contains("\"passed\": true"));
    for name in [
        "bias broadcast",
        "integer division by zero is 0",
        "leaky relu bf16",
        "2x3 @ 3x2",
    ] {
        assert!(
            json.contains(name),
            "case source `{name}` missing from the JSON"
        );
    }
    for op in ["Add", "Sub", "Mul", "Div", "Relu", "Neg", "MatMul"] {
        assert!(
            json.contains(&format!("\"op\": \"{op}\"")),
            "{op} missing from the JSON"
        );
    }
    let text = std::fs::read_to_string(out.path().join("report/check.txt")).unwrap();
    assert!(text.contains("result: PASS"), "{text}");
    assert!(text.contains("need a CUDA device"), "{text}");
}
