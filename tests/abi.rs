//! ABI versions: 1.0 to 1.4 plugins run unchanged on the 1.5 host (and decline what only a later
//! minor can say), 1.1+ plugins use the self-test addition and are admitted only when their
//! cases pass, 1.2+ plugins are planned through `planner`, 1.3 plugins run their CPU kernels in
//! place, 1.4 plugins are planned through `planner2` (packed sub-byte dtypes), 1.5 plugins
//! through `planner3` (string tensors), and a failing replacement leaves the working version
//! serving. (A 2.0 plugin's refusal is in
//! sandbox.rs.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use umd::plugin::HOST_ABI;
use umd::{Dtype, Host, data};
use umd_tests::{fixture, fixture_dir};

#[test]
fn a_1_0_plugin_runs_unchanged_on_the_current_host() {
    assert_eq!(HOST_ABI.to_string(), "1.10.0");
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
fn a_1_1_plugin_runs_unchanged_on_the_1_5_host_and_declines_1_2_requests() {
    let dir = fixture_dir(&["abi11"]);
    let host = Host::builder().plugin_dir(dir.path()).build().unwrap();
    let p = host
        .registry()
        .snapshot()
        .by_label("abi11@1.0.0")
        .cloned()
        .expect("1.1 plugin loaded (its self-test passed)");
    assert_eq!(p.abi().to_string(), "1.1.0");
    assert!(!p.has_planner(), "1.1 plugins have no planner export");
    assert_eq!(p.self_test_cases().unwrap().unwrap().len(), 1);
    assert_eq!(p.tuning_hints().unwrap()[0].value, "1.1");
    assert!(p.constant_inputs("Triple").is_empty());
    let x = umd::TensorDesc::new("x", vec![2], Dtype::F32);
    let out = host
        .run(
            "Triple",
            &[(x.clone(), data::encode(Dtype::F32, &[1.0, 0.5]))],
        )
        .unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![3.0, 1.5]);
    // A request only 1.2 can carry (an absent input) is declined by name, not mistranslated.
    let mut req = umd::OpRequest::new("Triple", vec![x]);
    req.absent = vec![1];
    let err = host.translate(&req).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
    assert!(err.to_string().contains("umd:plugin@1.1.0"), "{err}");
}

/// A host with only the prebuilt tagger built by the SDK of ABI `abi` (kept byte for byte), and
/// that plugin.
fn prebuilt_tagger(abi: &str) -> (Host, Arc<umd::plugin::LoadedPlugin>) {
    prebuilt(&format!("tagger-v1-abi-{abi}.wasm"), "tagger@1.0.0")
}

/// A host serving only the prebuilt component `file`, and the plugin `label` it loaded.
fn prebuilt(file: &str, label: &str) -> (Host, Arc<umd::plugin::LoadedPlugin>) {
    let dir = umd_tests::tempdir::TempDir::new();
    let path = format!("{}/fixtures/prebuilt/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(path, dir.path().join("plugin.wasm")).unwrap();
    let host = Host::builder()
        .bundled_plugins(false)
        .plugin_dir(dir.path())
        .build()
        .unwrap();
    let p = host
        .registry()
        .snapshot()
        .by_label(label)
        .cloned()
        .unwrap_or_else(|| panic!("{file} loads"));
    (host, p)
}

#[test]
fn a_1_2_plugin_from_the_previous_sdk_runs_through_run_cpu() {
    let (host, p) = prebuilt_tagger("1.2.0");
    assert_eq!(p.abi().to_string(), "1.2.0");
    assert!(p.has_planner());
    assert!(!p.runs_in_place(), "1.2 plugins have no cpu-kernel export");
    let out = host.run("Tag", &[]).unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![1.0]);
}

/// A packed INT4 input for `Tag` (which takes any inputs).
fn int4_request() -> umd::OpRequest {
    umd::OpRequest::new("Tag", vec![umd::TensorDesc::new("x", vec![3], Dtype::I4)])
}

#[test]
fn a_1_3_plugin_from_the_previous_sdk_runs_in_place_and_declines_packed_dtypes() {
    let (host, p) = prebuilt_tagger("1.3.0");
    assert_eq!(p.abi().to_string(), "1.3.0");
    assert!(p.has_planner() && !p.has_planner2());
    assert!(p.runs_in_place(), "1.3 plugins have the cpu-kernel export");
    let out = host.run("Tag", &[]).unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![1.0]);
    // A packed dtype cannot be said to a 1.3 plugin: declined by ABI, not mistranslated.
    let err = host.translate(&int4_request()).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
    assert!(
        err.to_string().contains("umd:plugin@1.3.0") && err.to_string().contains("INT4"),
        "{err}"
    );
}

/// A string input for `Tag` (which takes any inputs), with its value (two strings).
fn string_request() -> (umd::OpRequest, Vec<u8>) {
    let value = umd::text::encode(&["ab", "c"]);
    let x = umd::TensorDesc::new("x", vec![2], Dtype::Str)
        .with_size(value.len() as u64)
        .unwrap();
    (
        umd::OpRequest::new("Tag", vec![x]).value(0, value.clone()),
        value,
    )
}

#[test]
fn a_1_4_plugin_from_the_previous_sdk_runs_and_declines_string_tensors_by_its_abi() {
    let (host, p) = prebuilt_tagger("1.4.0");
    assert_eq!(p.abi().to_string(), "1.4.0");
    assert!(p.has_planner2() && !p.has_planner3());
    let out = host.run("Tag", &[]).unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![1.0]);
    let (req, _) = string_request();
    let err = host.translate(&req).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
    assert!(
        err.to_string().contains("umd:plugin@1.4.0") && err.to_string().contains("string"),
        "{err}"
    );
}

#[test]
fn a_1_6_plugin_from_the_previous_sdk_plans_through_planner3_without_setup_launches() {
    let (host, p) = prebuilt_tagger("1.6.0");
    assert_eq!(p.abi().to_string(), "1.6.0");
    assert!(p.has_planner3() && p.has_expander() && !p.has_planner4());
    let t = host.translate(&umd::OpRequest::new("Tag", vec![])).unwrap();
    assert_eq!(t.setup_launches, 0);
    let out = host.run("Tag", &[]).unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![1.0]);
}

#[test]
fn a_1_7_plugin_from_the_previous_sdk_imports_no_matrix_unit_and_runs_in_place() {
    let (host, p) = prebuilt_tagger("1.7.0");
    assert_eq!(p.abi().to_string(), "1.7.0");
    assert!(p.has_planner4() && p.runs_in_place());
    let out = host.run("Tag", &[]).unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![1.0]);
}

#[test]
fn a_1_8_plugin_importing_the_first_matrix_unit_multiplies_on_the_current_host() {
    // the bundled matmul plugin as the ABI 1.8 SDK built it (imports `matrix@1.8.0`, calls
    // `multiply-f32`, which 1.9 keeps beside `multiply`)
    let (host, p) = prebuilt("matmul-abi-1.8.0.wasm", "matmul@0.1.0");
    assert_eq!(p.abi().to_string(), "1.8.0");
    assert!(p.runs_in_place());
    // 40 rows: on the matrix unit; small integers, so every order of the sums is exact
    let (m, k, n) = (40usize, 33usize, 24usize);
    let a: Vec<f64> = (0..m * k).map(|i| (i % 7) as f64 - 3.0).collect();
    let b: Vec<f64> = (0..k * n).map(|i| (i % 5) as f64 - 2.0).collect();
    let desc = |name: &str, shape: Vec<u64>| umd::TensorDesc::new(name, shape, Dtype::F32);
    let out = host
        .run(
            "MatMul",
            &[
                (
                    desc("a", vec![m as u64, k as u64]),
                    data::encode(Dtype::F32, &a),
                ),
                (
                    desc("b", vec![k as u64, n as u64]),
                    data::encode(Dtype::F32, &b),
                ),
            ],
        )
        .unwrap();
    let got = data::decode(Dtype::F32, &out[0].1);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            assert_eq!(got[i * n + j], want, "({i}, {j})");
        }
    }
}

#[test]
fn a_1_9_plugin_without_the_vector_unit_computes_what_the_unit_computes() {
    // the bundled elementwise plugin as the ABI 1.9 SDK built it (its own loops through
    // `kernel-io`) against today's (the vector unit, ABI 1.10) and today's through `run-cpu`:
    // every operation the unit has, on every type it has, bit for bit — NaN, signed zeros,
    // infinities, integer overflow and division by zero included
    let (old, p) = prebuilt("elementwise-abi-1.9.0.wasm", "elementwise@0.1.0");
    assert_eq!(p.abi().to_string(), "1.9.0");
    assert!(p.runs_in_place());
    let new = Host::builder().build().unwrap();
    let copying = Host::builder().cpu_in_place(false).build().unwrap();
    let special = |dt: Dtype| -> Vec<f64> {
        match dt {
            Dtype::I32 => vec![0.0, -1.0, 2147483647.0, -2147483648.0, 3.0],
            Dtype::I64 => vec![0.0, -1.0, 9.2e18, i64::MIN as f64, 3.0],
            _ => vec![0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-3],
        }
    };
    let values = |dt: Dtype, n: usize, seed: usize| -> Vec<f64> {
        let sp = special(dt);
        (0..n)
            .map(|i| match (i * 7 + seed) % 4 {
                0 => sp[(i / 4 + seed) % sp.len()],
                _ => ((i * 37 + seed * 11) % 201) as f64 / 8.0 - 12.0,
            })
            .collect()
    };
    // flat, a scalar, a broadcast walk (split across the device's workers where it can be)
    let shapes: [(Vec<u64>, Vec<u64>); 3] = [
        (vec![70_000], vec![70_000]),
        (vec![70_000], vec![1]),
        (vec![3, 1, 2000], vec![5, 1]),
    ];
    let on_unit = umd::plugin::vector_unit_elements();
    for dt in [
        Dtype::F32,
        Dtype::F64,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::I32,
        Dtype::I64,
    ] {
        for op in ["Add", "Sub", "Mul", "Div", "Max", "Min"] {
            for (k, (sa, sb)) in shapes.iter().enumerate() {
                let na = sa.iter().product::<u64>() as usize;
                let nb = sb.iter().product::<u64>() as usize;
                let inputs = [
                    (
                        umd::TensorDesc::new("a", sa.clone(), dt),
                        data::encode(dt, &values(dt, na, k)),
                    ),
                    (
                        umd::TensorDesc::new("b", sb.clone(), dt),
                        data::encode(dt, &values(dt, nb, k + 1)),
                    ),
                ];
                let want = old.run(op, &inputs).unwrap();
                assert_eq!(
                    want,
                    new.run(op, &inputs).unwrap(),
                    "{op} {dt:?} {sa:?} {sb:?}"
                );
                assert_eq!(
                    want,
                    copying.run(op, &inputs).unwrap(),
                    "{op} {dt:?} copying"
                );
            }
        }
    }
    // today's in-place runs computed every element on the unit (other tests may add more)
    let computed = umd::plugin::vector_unit_elements() - on_unit;
    assert!(
        computed >= 36 * 170_000,
        "{computed} elements on the vector unit"
    );
}

#[test]
fn an_sdk_plugin_that_serves_no_string_tensor_declines_them_through_the_sdk() {
    let dir = fixture_dir(&["tagger_v1"]);
    let host = Host::builder()
        .bundled_plugins(false)
        .plugin_dir(dir.path())
        .build()
        .unwrap();
    let (req, _) = string_request();
    let err = host.translate(&req).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
    assert!(err.to_string().contains("string tensor"), "{err}");
}

#[test]
fn string_tensors_run_through_the_text_plugin_and_bad_ones_are_refused() {
    let host = Host::builder().build().unwrap();
    let (_, a) = string_request();
    let b = umd::text::encode(&["!", "?"]);
    let desc = |v: &[u8]| {
        umd::TensorDesc::new("s", vec![2], Dtype::Str)
            .with_size(v.len() as u64)
            .unwrap()
    };
    let req = umd::OpRequest::new("StringConcat", vec![desc(&a), desc(&b)]);
    let out = host.run_request(req, &[a.clone(), b.clone()]).unwrap();
    assert_eq!(out[0].0.dtype, Dtype::Str);
    assert_eq!(out[0].0.text_bytes, 5);
    let got = umd::text::decode(&out[0].1, 2).unwrap();
    assert_eq!(got, vec![b"ab!".as_slice(), b"c?"]);
    // a string input must come with its value, and a well-formed one
    let no_value = umd::OpRequest::new("StringConcat", vec![desc(&a), desc(&b)]);
    let err = host.translate(&no_value).unwrap_err();
    assert_eq!(err.status(), umd::error::status::INVALID_INPUT, "{err}");
    assert!(err.to_string().contains("has no value"), "{err}");
    let mut bad = a.clone();
    bad[0] = 200; // first string ends past the text
    let req = umd::OpRequest::new("StringConcat", vec![desc(&bad), desc(&b)]);
    let err = host.run_request(req, &[bad, b]).unwrap_err();
    assert_eq!(err.status(), umd::error::status::INVALID_INPUT, "{err}");
    assert!(err.to_string().contains("malformed string tensor"), "{err}");
    // the command buffer carries the text sizes through the wire format
    let t = host
        .translate(
            &umd::OpRequest::new("StringConcat", vec![desc(&a), desc(&a)])
                .value(0, a.clone())
                .value(1, a.clone()),
        )
        .unwrap();
    let back = umd::cmdbuf::CommandBuffer::decode(&t.bytes).unwrap();
    assert_eq!(back, *t.cmdbuf);
    assert_eq!(back.bindings[2].desc.text_bytes, 6);
}

#[test]
fn an_sdk_plugin_that_serves_no_packed_dtype_declines_them_through_the_sdk() {
    let dir = fixture_dir(&["tagger_v1"]);
    let host = Host::builder()
        .bundled_plugins(false)
        .plugin_dir(dir.path())
        .build()
        .unwrap();
    let p = host
        .registry()
        .snapshot()
        .by_label("tagger@1.0.0")
        .cloned()
        .unwrap();
    assert_eq!(p.abi().to_string(), "1.10.0");
    let err = host.translate(&int4_request()).unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
    assert!(
        err.to_string().contains("i4") && err.to_string().contains("packed"),
        "{err}"
    );
}

#[test]
fn packed_dtypes_round_trip_through_cast_on_the_cpu_device() {
    // f32 -> INT4 (wrapping, as ONNX's reference) -> f32, odd count: a half-used last byte.
    let host = Host::builder().build().unwrap();
    let x = umd::TensorDesc::new("x", vec![5], Dtype::F32);
    let req = umd::OpRequest::new("Cast", vec![x]).attr("to", umd::AttrValue::Int(22));
    let x_data = data::encode(Dtype::F32, &[1.0, -2.0, 7.9, -8.0, 9.0]);
    let out = host.run_request(req, &[x_data]).unwrap();
    assert_eq!(out[0].0.dtype, Dtype::I4);
    assert_eq!(out[0].0.byte_size(), Some(3));
    assert_eq!(out[0].1.len(), 3);
    let back =
        umd::OpRequest::new("Cast", vec![out[0].0.clone()]).attr("to", umd::AttrValue::Int(1));
    let out = host.run_request(back, &[out[0].1.clone()]).unwrap();
    assert_eq!(
        data::decode(Dtype::F32, &out[0].1),
        vec![1.0, -2.0, 7.0, -8.0, -7.0]
    );
}

#[test]
fn plugins_built_with_the_sdk_are_1_10_and_declare_self_tests_and_hints() {
    let host = Host::builder().build().unwrap();
    let snap = host.registry().snapshot();
    let ew = snap.by_label("elementwise@0.1.0").unwrap();
    assert_eq!(ew.abi().to_string(), "1.10.0");
    assert!(ew.has_planner());
    assert!(ew.has_planner2());
    assert!(ew.has_planner3());
    assert!(ew.has_planner4());
    assert!(ew.runs_in_place());
    // 1.6: every SDK plugin exports `expander`; one that expands nothing declines by name.
    assert!(ew.has_expander());
    let req = umd::plugin::wit::ExpandRequest {
        op: "Add".into(),
        domain: String::new(),
        opset: 17,
        inputs: vec![Some(None), Some(None)],
        outputs_wanted: vec![true],
        attributes: Vec::new(),
        graphs: vec!["g".into()],
    };
    match ew.expand(&req) {
        Some(Ok(Err(umd::plugin::wit::OpError::UnsupportedOp(m)))) => {
            assert!(m.contains("no expansion"), "{m}")
        }
        other => panic!("{other:?}"),
    }
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

#[test]
fn a_1_3_plugin_ships_its_cuda_module_as_ptx() {
    let dir = fixture_dir(&["ptxkit"]);
    let host = Host::builder()
        .bundled_plugins(false)
        .plugin_dir(dir.path())
        .build()
        .unwrap();
    assert!(
        host.plugin_status().iter().all(|p| p.status.is_ok()),
        "{:?}",
        host.plugin_status()
    );
    let target = umd::Target::cuda("sm_90");
    let x = umd::TensorDesc::new("x", vec![1000], Dtype::F32);
    let t = host
        .translate(&umd::OpRequest::new("Twice", vec![x]).target(target.clone()))
        .unwrap();
    let src = host
        .kernel_source(&t.cmdbuf.launches[0].module, &target)
        .unwrap();
    assert_eq!(src.form, umd::device::SourceForm::Ptx { cubin: None });
    assert!(
        src.code.contains(".visible .entry twice_f32("),
        "{}",
        src.code
    );
    assert_eq!(src.entry_points, vec!["twice_f32".to_string()]);
    // The module the CI gate must refuse when it assembles shipped PTX: same parameters, a body
    // that reads an undeclared register.
    let x = umd::TensorDesc::new("x", vec![1000], Dtype::F32);
    let t = host
        .translate(&umd::OpRequest::new("TwiceBroken", vec![x]).target(target.clone()))
        .unwrap();
    let broken = host
        .kernel_source(&t.cmdbuf.launches[0].module, &target)
        .unwrap();
    assert_ne!(broken.code, src.code);
    assert!(broken.code.contains("%f1, %f9;"), "{}", broken.code);
    // Its CPU kernel serves the CPU device as usual.
    let out = host
        .run(
            "Twice",
            &[(
                umd::TensorDesc::new("x", vec![2], Dtype::F32),
                data::encode(Dtype::F32, &[1.5, -2.0]),
            )],
        )
        .unwrap();
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![3.0, -4.0]);
}

#[test]
fn the_view_ops_move_string_tensors_as_their_bytes() {
    let host = Host::builder().build().unwrap();
    let (_, a) = string_request(); // ["ab", "c"]
    let x = umd::TensorDesc::new("x", vec![2], Dtype::Str)
        .with_size(a.len() as u64)
        .unwrap();
    let shape = umd::TensorDesc::new("s", vec![2], Dtype::I64);
    let req = umd::OpRequest::new("Reshape", vec![x.clone(), shape]);
    let out = host
        .run_request(req, &[a.clone(), data::encode(Dtype::I64, &[2.0, 1.0])])
        .unwrap();
    assert_eq!(out[0].0.shape, vec![2, 1]);
    assert_eq!((out[0].0.dtype, out[0].0.text_bytes), (Dtype::Str, 3));
    assert_eq!(out[0].1, a, "same offsets, same text");
    // Unsqueeze with no opset said takes its axes as an attribute (as before opset 13)
    let out = host
        .run_request(
            umd::OpRequest::new("Unsqueeze", vec![x.clone()])
                .attr("axes", umd::AttrValue::Ints(vec![0])),
            std::slice::from_ref(&a),
        )
        .unwrap();
    assert_eq!(
        (out[0].0.shape.clone(), out[0].1.clone()),
        (vec![1, 2], a.clone())
    );
    // other layout ops still decline strings, by name
    let err = host
        .translate(&umd::OpRequest::new("Transpose", vec![x]).value(0, a))
        .unwrap_err();
    assert_eq!(err.status(), umd::error::status::UNSUPPORTED, "{err}");
    assert!(err.to_string().contains("string tensor"), "{err}");
}

#[test]
fn strings_cast_to_numbers_and_numeric_casts_stay_with_the_shape_plugin() {
    let host = Host::builder().build().unwrap();
    let v = umd::text::encode(&["2.5", "-INF", "7"]);
    let x = umd::TensorDesc::new("x", vec![3], Dtype::Str)
        .with_size(v.len() as u64)
        .unwrap();
    let req = umd::OpRequest::new("Cast", vec![x]).attr("to", umd::AttrValue::Int(1));
    let out = host.run_request(req, &[v]).unwrap();
    assert_eq!(out[0].0.dtype, Dtype::F32);
    assert_eq!(
        data::decode(Dtype::F32, &out[0].1),
        vec![2.5, f64::NEG_INFINITY, 7.0]
    );
    let f = umd::TensorDesc::new("f", vec![2], Dtype::F32);
    let t = host
        .translate(&umd::OpRequest::new("Cast", vec![f]).attr("to", umd::AttrValue::Int(7)))
        .unwrap();
    assert!(t.plugin.starts_with("shape@"), "{}", t.plugin);
}
