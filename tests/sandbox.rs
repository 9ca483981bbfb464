//! Hostile plugins: each fails its own call with an error naming the plugin and what it did,
//! and the same host then serves a good request.

use umd::error::{LoadError, PluginFault, status};
use umd::{Dtype, Error, Host, OpRequest, TensorDesc};
use umd_tests::{fixture, fixture_dir};

fn f32v(shape: &[u64]) -> TensorDesc {
    TensorDesc::new("x", shape.to_vec(), Dtype::F32)
}

/// A good request the bundled plugins serve, run end to end.
fn assert_still_serves(host: &Host) {
    let a: Vec<u8> = [1f32, 2., 3.]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let out = host
        .run("Add", &[(f32v(&[3]), a.clone()), (f32v(&[3]), a)])
        .expect("the host still serves good requests");
    let want: Vec<u8> = [2f32, 4., 6.]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(out[0].1, want);
}

fn host_with(names: &[&str]) -> (Host, umd_tests::tempdir::TempDir) {
    let dir = fixture_dir(names);
    let host = Host::builder()
        .plugin_dir(dir.path())
        .build()
        .expect("host builds");
    (host, dir)
}

fn plugin_fault(e: Error) -> (String, PluginFault) {
    match e {
        Error::Plugin { plugin, fault } => (plugin, fault),
        other => panic!("expected a plugin fault, got {other}"),
    }
}

#[test]
fn a_panicking_plugin_fails_its_call_with_its_message() {
    let (host, _d) = host_with(&["panicky"]);
    for round in 0..3 {
        let err = host
            .translate(&OpRequest::new("Panic", vec![f32v(&[1])]))
            .unwrap_err();
        assert_eq!(err.status(), status::PLUGIN_FAULT);
        let msg = err.to_string();
        let (plugin, fault) = plugin_fault(err);
        assert_eq!(plugin, "panicky@0.1.0");
        assert!(
            matches!(
                fault,
                PluginFault::Trap {
                    call: "planner4.plan",
                    ..
                }
            ),
            "round {round}: {msg}"
        );
        assert!(
            msg.contains("boom: the panicky plugin panicked on purpose"),
            "{msg}"
        );
        assert_still_serves(&host);
    }
    let p = host
        .registry()
        .snapshot()
        .by_label("panicky@0.1.0")
        .cloned()
        .unwrap();
    assert_eq!(p.faults(), 3, "each trap counted");
}

#[test]
fn a_panicking_cpu_kernel_fails_its_launch_only() {
    let (host, _d) = host_with(&["panicky"]);
    let err = host
        .run("PanicKernel", &[(f32v(&[1]), vec![0; 4])])
        .unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.status(), status::DEVICE);
    assert!(
        msg.contains("panicky@0.1.0") && msg.contains("kernel boom"),
        "{msg}"
    );
    assert_still_serves(&host);
}

#[test]
fn a_looping_plugin_is_interrupted_at_its_deadline() {
    let (host, _d) = host_with(&["spin"]);
    let err = host
        .translate(&OpRequest::new("Spin", vec![f32v(&[1])]))
        .unwrap_err();
    let msg = err.to_string();
    let (plugin, fault) = plugin_fault(err);
    assert_eq!(plugin, "spin@0.1.0");
    assert!(
        matches!(
            fault,
            PluginFault::Deadline {
                call: "planner4.plan",
                deadline_ms: 1000
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("deadline"), "{msg}");
    assert_still_serves(&host);
}

#[test]
fn a_looping_cpu_kernel_is_interrupted() {
    let dir = fixture_dir(&["spin"]);
    let limits = umd::plugin::SandboxLimits {
        kernel_deadline: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let host = Host::builder()
        .plugin_dir(dir.path())
        .sandbox_limits(limits)
        .build()
        .unwrap();
    let err = host
        .run("SpinKernel", &[(f32v(&[1]), vec![0; 4])])
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("spin@0.1.0") && msg.contains("200 ms deadline"),
        "{msg}"
    );
    assert_still_serves(&host);
}

#[test]
fn a_memory_hog_hits_its_limit() {
    let (host, _d) = host_with(&["hog"]);
    let err = host
        .translate(&OpRequest::new("Hog", vec![f32v(&[1])]))
        .unwrap_err();
    let msg = err.to_string();
    let (plugin, fault) = plugin_fault(err);
    assert_eq!(plugin, "hog@0.1.0");
    assert!(
        matches!(
            fault,
            PluginFault::Memory {
                call: "planner4.plan",
                limit_mib: 1024
            }
        ),
        "{msg}"
    );
    assert_still_serves(&host);
}

#[test]
fn invalid_plans_are_refused_with_the_rule_they_break() {
    let (host, _d) = host_with(&["badplans"]);
    let cases = [
        ("ZeroBlock", "empty launch"),
        ("HugeBlock", "2048 threads"),
        ("RelocOutside", "outside the"),
        ("BadBinding", "names binding 99"),
        ("BigParams", "5000 bytes"),
        ("WritesInput", "writes input binding 0"),
        ("UnwrittenOutput", "never written"),
        (
            "SetupBindsOutput",
            "a setup launch binds only the workspace",
        ),
        ("SetupTooMany", "3 setup launches of a plan with 2 launches"),
        ("SetupNoWorkspace", "no workspace to fill"),
        (
            "SetupThenWrite",
            "writes the workspace its plan's setup launches fill",
        ),
    ];
    for (op, expect) in cases {
        let err = host
            .translate(&OpRequest::new(op, vec![f32v(&[2])]))
            .unwrap_err();
        let msg = err.to_string();
        let (plugin, fault) = plugin_fault(err);
        assert_eq!(plugin, "badplans@0.1.0");
        assert!(matches!(fault, PluginFault::InvalidPlan(_)), "{op}: {msg}");
        assert!(
            msg.contains(expect),
            "{op}: `{msg}` should mention `{expect}`"
        );
        assert_still_serves(&host);
    }
    // A valid plan whose CPU kernel returns 3 bytes for a 4-byte output.
    let err = host
        .run("WrongSize", &[(f32v(&[2]), vec![0; 8])])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("returned 3 bytes for binding 1 of 4 bytes"),
        "{err}"
    );
    assert_still_serves(&host);
}

#[test]
fn a_plugin_for_another_major_is_refused_naming_both_versions() {
    let (host, _d) = host_with(&["abi2"]);
    let refused = host
        .plugin_status()
        .into_iter()
        .find(|p| p.origin.ends_with("abi2.wasm"))
        .expect("abi2 listed");
    let msg = refused.status.clone().unwrap_err();
    assert!(
        msg.contains("umd:plugin@2.0.0") && msg.contains("umd:plugin@1.10.0"),
        "{msg}"
    );
    // Its Add (priority 1000) is not offered: the bundled plugin serves Add.
    assert_still_serves(&host);

    let rt = host.runtime();
    match rt.load_file(&fixture("abi2")).unwrap_err() {
        LoadError::AbiMismatch {
            plugin_abi,
            host_abi,
            ..
        } => {
            assert_eq!(
                (plugin_abi.as_str(), host_abi.as_str()),
                ("2.0.0", "1.10.0")
            );
        }
        other => panic!("expected an ABI mismatch, got {other}"),
    }
}

#[test]
fn garbage_and_core_modules_are_refused_at_load() {
    let host = Host::builder().build().unwrap();
    let rt = host.runtime();
    let err = rt
        .load_bytes("garbage.wasm", b"\0asm\x0d\0\x01\0garbage")
        .unwrap_err();
    assert!(matches!(err, LoadError::Compile { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("garbage.wasm: not a valid WebAssembly component")
    );
    let err = rt.load_bytes("empty.wasm", b"").unwrap_err();
    assert!(err.to_string().contains("empty.wasm"), "{err}");
    // A plain core module (not a component) is refused, not run.
    let core = b"\0asm\x01\0\0\0";
    assert!(rt.load_bytes("core.wasm", core).is_err());
    assert_still_serves(&host);
}

/// A model whose one node, `op` of the spin fixture, carries a graph attribute `body`.
fn model_with_graph_attribute(op: &str) -> Vec<u8> {
    use umd::graph::onnx::proto as onnx;
    let body = onnx::GraphProto {
        node: vec![onnx::NodeProto {
            op_type: Some("Identity".into()),
            input: vec!["x".into()],
            output: vec!["z".into()],
            ..Default::default()
        }],
        output: vec![onnx::ValueInfoProto {
            name: Some("z".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    umd_tests::onnx_model_bytes(onnx::GraphProto {
        node: vec![onnx::NodeProto {
            name: Some("hostile".into()),
            op_type: Some(op.into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            attribute: vec![onnx::AttributeProto {
                name: Some("body".into()),
                r#type: Some(onnx::attribute_proto::AttributeType::Graph as i32),
                g: Some(body),
                ..Default::default()
            }],
            ..Default::default()
        }],
        input: vec![onnx::ValueInfoProto {
            name: Some("x".into()),
            ..Default::default()
        }],
        output: vec![onnx::ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn load_error(host: &std::sync::Arc<Host>, bytes: &[u8]) -> String {
    match umd::graph::Model::from_onnx_bytes(host.clone(), bytes, None) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_hostile_expander_fails_the_model_load_only() {
    let (host, _d) = host_with(&["spin"]);
    let host = std::sync::Arc::new(host);
    // Loops in `expander.expand`: interrupted at the plan deadline, the node named.
    let e = load_error(&host, &model_with_graph_attribute("Spin"));
    assert!(
        e.contains("hostile") && e.contains("spin@0.1.0") && e.contains("deadline"),
        "{e}"
    );
    // Answers an expansion running a graph attribute the node does not have: refused.
    let e = load_error(&host, &model_with_graph_attribute("SpinKernel"));
    assert!(
        e.contains("runs graph attribute `nope`, which the node does not have"),
        "{e}"
    );
    assert_still_serves(&host);
}
