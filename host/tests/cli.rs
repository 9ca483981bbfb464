//! The `umd` binary as a user runs it: the README's first command (`umd demo`) and the errors of
//! a bad invocation. Being an integration test of the `umd` package, it also makes
//! `cargo test --workspace` build `target/debug/umd` — the binary `scripts/test.sh` then serves
//! the Python tests and the conformance run with (no second build with other features).

use std::process::Command;

fn umd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_umd"))
}

#[test]
fn demo_runs_the_mlp_and_checks_it_against_rust() {
    let out = umd().arg("demo").output().expect("umd runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "umd demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("checked against a plain Rust reference"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("OK"), "{stdout}");
}

#[test]
fn an_unknown_subcommand_fails_naming_it() {
    let out = umd().arg("no-such-command").output().expect("umd runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-such-command"), "{stderr}");
}

#[test]
fn run_model_of_a_missing_file_fails_naming_the_file() {
    let out = umd()
        .args(["run-model", "/nonexistent/model.onnx"])
        .output()
        .expect("umd runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/model.onnx"), "{stderr}");
}
