//! Graphs through the Rust API and from ONNX bytes: results, folding, views, liveness reuse,
//! the signature cache, external data, and clear errors for bad graphs and inputs.

use std::collections::HashMap;
use std::sync::Arc;

use umd::graph::onnx::proto as onnx;
use umd::graph::{Constant, Dim, GraphDef, GraphError, Model, Node, Tensor, ValueDecl};
use umd::{AttrValue, Dtype, Host, TensorDesc, data};
use umd_tests::tempdir::TempDir;

fn host() -> Arc<Host> {
    Arc::new(Host::builder().build().expect("host"))
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decl(name: &str, dims: Vec<Dim>) -> ValueDecl {
    ValueDecl {
        name: name.into(),
        dtype: Some(Dtype::F32),
        dims: Some(dims),
    }
}

fn tensor(name: &str, shape: Vec<u64>, v: &[f32]) -> Tensor {
    Tensor {
        desc: TensorDesc::new(name, shape, Dtype::F32),
        data: f32s(v),
    }
}

fn constant(shape: Vec<u64>, dtype: Dtype, bytes: Vec<u8>) -> Constant {
    Constant {
        desc: TensorDesc::new("", shape, dtype),
        data: Arc::new(bytes),
    }
}

/// y = (relu(x) + neg(x)) * 2, nodes given out of order; a diamond, not a chain.
fn diamond() -> GraphDef {
    GraphDef {
        nodes: vec![
            Node::new("Mul", &["c", "two"], &["y"], vec![]),
            Node::new("Relu", &["x"], &["a"], vec![]),
            Node::new("Neg", &["x"], &["b"], vec![]),
            Node::new("Add", &["a", "b"], &["c"], vec![]),
        ],
        inputs: vec![decl("x", vec![Dim::Dynamic("n".into())])],
        outputs: vec![decl("y", vec![Dim::Dynamic("n".into())])],
        constants: HashMap::from([("two".into(), constant(vec![], Dtype::F32, f32s(&[2.0])))]),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    }
}

#[test]
fn a_diamond_runs_in_one_submission_and_reuses_memory() {
    let model = Model::new(host(), diamond()).unwrap();
    let x: Vec<f32> = (0..1000).map(|i| i as f32 - 500.0).collect();
    let run = model.run(&[tensor("x", vec![1000], &x)]).unwrap();
    let y = data::decode(Dtype::F32, &run.outputs[0].data);
    for (xi, yi) in x.iter().zip(&y) {
        assert_eq!(*yi as f32, (xi.max(0.0) - xi) * 2.0);
    }
    let s = &run.stats;
    assert_eq!((s.launched, s.submissions), (4, 1), "{s:?}");
    assert!(s.peak_bytes < s.intermediate_bytes, "no reuse: {s:?}");
    // Another length compiles another signature; the first stays cached and correct.
    let run2 = model
        .run(&[tensor("x", vec![3], &[1.0, -1.0, 0.0])])
        .unwrap();
    assert_eq!(
        data::decode(Dtype::F32, &run2.outputs[0].data),
        vec![0.0, 2.0, 0.0]
    );
    let again = model.run(&[tensor("x", vec![1000], &x)]).unwrap();
    assert_eq!(again.outputs, run.outputs);
}

#[test]
fn runs_on_device_buffers_match_runs_by_value() {
    use umd::graph::RunInput;
    let h = host();
    let mut g = diamond();
    // Outputs of every kind: `y` shares a pooled block with an earlier intermediate (copied out
    // on the device), `xi` is a view of the input, `c` is read by another node.
    g.nodes.push(Node::new("Identity", &["x"], &["xi"], vec![]));
    g.outputs.push(decl("xi", vec![Dim::Dynamic("n".into())]));
    g.outputs.push(decl("c", vec![Dim::Dynamic("n".into())]));
    let model = Model::new(h.clone(), g).unwrap();
    let x = tensor("x", vec![5], &[1.0, -2.0, 3.0, -4.0, 0.5]);
    let by_value = model.run(std::slice::from_ref(&x)).unwrap().outputs;
    let dev = h.device();
    let xb = dev.alloc(20).unwrap();
    dev.write(xb, 0, &x.data).unwrap();
    let input = [RunInput::Buffer {
        desc: &x.desc,
        buffer: xb,
    }];
    let descs = model.output_descs(&input).unwrap();
    assert_eq!(
        descs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["y", "xi", "c"]
    );
    // Output buffers larger than needed are fine; the bytes past the output stay.
    let outs: Vec<_> = (0..3).map(|_| dev.alloc(24).unwrap()).collect();
    for o in &outs {
        dev.write(*o, 0, &[0xAB; 24]).unwrap();
    }
    for _ in 0..2 {
        model.run_on_device(&input, &outs).unwrap();
        for (o, want) in outs.iter().zip(&by_value) {
            let got = dev.read(*o, 0, 24).unwrap();
            assert_eq!(&got[..20], &want.data[..], "{}", want.desc.name);
            assert_eq!(&got[20..], &[0xAB; 4], "{}", want.desc.name);
        }
    }
    // The input buffer was read in place, not written.
    assert_eq!(dev.read(xb, 0, 20).unwrap(), x.data);
    // Too small or unknown buffers: refused, naming them, before anything runs.
    let small = dev.alloc(8).unwrap();
    let mut bad = outs.clone();
    bad[1] = small;
    let e = model.run_on_device(&input, &bad).unwrap_err();
    assert!(
        e.to_string().contains("output `xi`") && e.to_string().contains("has 8"),
        "{e}"
    );
    let e = model
        .run_on_device(
            &[RunInput::Buffer {
                desc: &x.desc,
                buffer: umd::device::BufferId(u64::MAX - 7),
            }],
            &outs,
        )
        .unwrap_err();
    assert!(e.to_string().contains("input `x`"), "{e}");
    let e = model
        .run_on_device(&input, &[outs[0], xb, outs[2]])
        .unwrap_err();
    assert!(e.to_string().contains("also an input's"), "{e}");
    let e = model
        .run_on_device(&input, &[outs[0], outs[1], outs[0]])
        .unwrap_err();
    assert!(e.to_string().contains("also another output's"), "{e}");
    let e = model.run_on_device(&input, &outs[..2]).unwrap_err();
    assert!(e.to_string().contains("3 outputs"), "{e}");
    for b in outs.into_iter().chain([xb, small]) {
        dev.free(b).unwrap();
    }
}

#[test]
fn constant_subgraphs_fold_and_reshapes_are_views() {
    let ints = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let g = GraphDef {
        nodes: vec![
            // shape = Concat(Shape(x)[0:1] , [-1]) → folded; Reshape → a view.
            Node::new(
                "Shape",
                &["x"],
                &["s"],
                vec![("end".into(), AttrValue::Int(1))],
            ),
            Node::new(
                "Concat",
                &["s", "m1"],
                &["shape"],
                vec![("axis".into(), AttrValue::Int(0))],
            ),
            Node::new("Reshape", &["x", "shape"], &["r"], vec![]),
            Node::new("Add", &["one", "one"], &["two"], vec![]),
            Node::new("Mul", &["r", "two"], &["y"], vec![]),
        ],
        inputs: vec![decl("x", vec![Dim::Fixed(2), Dim::Fixed(3)])],
        outputs: vec![ValueDecl {
            name: "y".into(),
            dtype: None,
            dims: None,
        }],
        constants: HashMap::from([
            ("m1".into(), constant(vec![1], Dtype::I64, ints(&[-1]))),
            ("one".into(), constant(vec![], Dtype::F32, f32s(&[1.0]))),
        ]),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host(), g).unwrap();
    let run = model
        .run(&[tensor("x", vec![2, 3], &[1., 2., 3., 4., 5., 6.])])
        .unwrap();
    assert_eq!(run.outputs[0].desc.shape, vec![2, 3]);
    assert_eq!(
        data::decode(Dtype::F32, &run.outputs[0].data),
        vec![2., 4., 6., 8., 10., 12.]
    );
    assert_eq!(
        (run.stats.folded, run.stats.views, run.stats.launched),
        (3, 1, 1)
    );
}

#[test]
fn bad_graphs_and_inputs_are_clear_errors() {
    let mut g = diamond();
    g.nodes[1].inputs[0] = "c".into(); // a → c → a
    let e = Model::new(host(), g).err().unwrap();
    assert!(matches!(e, GraphError::Cycle { .. }), "{e}");

    let mut g = diamond();
    g.nodes[2].inputs[0] = "ghost".into();
    let e = Model::new(host(), g).err().unwrap().to_string();
    assert!(e.contains("`ghost`") && e.contains("(Neg)"), "{e}");

    let model = Model::new(host(), diamond()).unwrap();
    let e = model
        .run(&[tensor("z", vec![2], &[1., 2.])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`z` is not an input"), "{e}");
    let e = model.run(&[]).unwrap_err().to_string();
    assert!(e.contains("input `x`") && e.contains("missing"), "{e}");
    let bad = Tensor {
        desc: TensorDesc::new("x", vec![2], Dtype::I32),
        data: vec![0; 8],
    };
    let e = model.run(&[bad]).unwrap_err().to_string();
    assert!(e.contains("dtype i32 instead of f32"), "{e}");
    let e = model
        .run(&[tensor("x", vec![2, 2], &[0.; 4])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 2 instead of 1"), "{e}");
    let short = Tensor {
        desc: TensorDesc::new("x", vec![4], Dtype::F32),
        data: vec![0; 3],
    };
    assert!(
        model
            .run(&[short])
            .unwrap_err()
            .to_string()
            .contains("needs 16 bytes, 3 given")
    );

    // A value the plan needs given as a small graph input: planned with its value, one plan
    // per value (Reshape's shape here); a large one stays an error naming the input.
    let reshape = |n: u64| GraphDef {
        nodes: vec![Node::new("Reshape", &["x", "shape"], &["y"], vec![])],
        inputs: vec![
            decl("x", vec![Dim::Fixed(4)]),
            ValueDecl {
                name: "shape".into(),
                dtype: Some(Dtype::I64),
                dims: Some(vec![Dim::Fixed(n)]),
            },
        ],
        outputs: vec![decl("y", vec![])],
        ..Default::default()
    };
    let shape = |v: &[i64]| Tensor {
        desc: TensorDesc::new("shape", vec![v.len() as u64], Dtype::I64),
        data: v.iter().flat_map(|d| d.to_le_bytes()).collect(),
    };
    let model = Model::new(host(), reshape(2)).unwrap();
    let x = tensor("x", vec![4], &[1., 2., 3., 4.]);
    for dims in [[2, 2], [4, 1], [2, 2]] {
        let out = model.run(&[x.clone(), shape(&dims)]).unwrap();
        assert_eq!(
            out.outputs[0].desc.shape,
            vec![dims[0] as u64, dims[1] as u64]
        );
        assert_eq!(out.outputs[0].data, f32s(&[1., 2., 3., 4.]));
    }
    // A shape input too long to be planned by value (17 dims): the model runs interpreted
    // (Reshape on its own, with the value), where the plugin refuses it, naming the node.
    let model = Model::new(host(), reshape(17)).unwrap();
    let e = model.run(&[x, shape(&[1; 17])]).unwrap_err().to_string();
    assert!(
        e.contains("(Reshape)") && e.contains("has 1 elements"),
        "{e}"
    );

    // An op no plugin serves: status 2, naming the node.
    let g = GraphDef {
        nodes: vec![Node {
            name: "odd".into(),
            ..Node::new("NoSuchOp", &["x"], &["y"], vec![])
        }],
        inputs: vec![decl("x", vec![Dim::Fixed(4)])],
        outputs: vec![decl("y", vec![])],
        ..Default::default()
    };
    let e = Model::new(host(), g)
        .unwrap()
        .run(&[tensor("x", vec![4], &[0.; 4])])
        .unwrap_err();
    assert_eq!(e.status(), 2, "{e}");
    assert!(e.to_string().contains("`odd` (NoSuchOp)"), "{e}");
}

fn value_info(name: &str, dims: &[i64]) -> onnx::ValueInfoProto {
    use onnx::tensor_shape_proto::{Dimension, dimension::Value};
    onnx::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(onnx::TypeProto {
            value: Some(onnx::type_proto::Value::TensorType(
                onnx::type_proto::Tensor {
                    elem_type: Some(1),
                    shape: Some(onnx::TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| Dimension {
                                value: Some(Value::DimValue(d)),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// y = x + w, w from `w`'s TensorProto.
fn onnx_model(w: onnx::TensorProto) -> Vec<u8> {
    umd_tests::onnx_model_bytes(onnx::GraphProto {
        node: vec![onnx::NodeProto {
            input: vec!["x".into(), "w".into()],
            output: vec!["y".into()],
            op_type: Some("Add".into()),
            ..Default::default()
        }],
        initializer: vec![w],
        input: vec![value_info("x", &[3])],
        output: vec![value_info("y", &[3])],
        ..Default::default()
    })
}

#[test]
fn onnx_bytes_typed_fields_and_external_data() {
    let w = onnx::TensorProto {
        name: Some("w".into()),
        dims: vec![3],
        data_type: Some(1),
        float_data: vec![10., 20., 30.],
        ..Default::default()
    };
    let model = Model::from_onnx_bytes(host(), &onnx_model(w), None).unwrap();
    let run = model.run(&[tensor("x", vec![3], &[1., 2., 3.])]).unwrap();
    assert_eq!(
        data::decode(Dtype::F32, &run.outputs[0].data),
        vec![11., 22., 33.]
    );

    let dir = TempDir::new();
    let mut file = vec![0u8; 4];
    file.extend(f32s(&[100., 200., 300.]));
    std::fs::write(dir.path().join("w.bin"), &file).unwrap();
    let ext = |location: &str| onnx::TensorProto {
        name: Some("w".into()),
        dims: vec![3],
        data_type: Some(1),
        data_location: Some(onnx::tensor_proto::DataLocation::External as i32),
        external_data: [("location", location), ("offset", "4"), ("length", "12")]
            .iter()
            .map(|(k, v)| onnx::StringStringEntryProto {
                key: Some(k.to_string()),
                value: Some(v.to_string()),
            })
            .collect(),
        ..Default::default()
    };
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, onnx_model(ext("w.bin"))).unwrap();
    let model = Model::from_onnx_file(host(), &path).unwrap();
    let run = model.run(&[tensor("x", vec![3], &[1., 2., 3.])]).unwrap();
    assert_eq!(
        data::decode(Dtype::F32, &run.outputs[0].data),
        vec![101., 202., 303.]
    );

    std::fs::write(&path, onnx_model(ext("../w.bin"))).unwrap();
    let e = Model::from_onnx_file(host(), &path)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("inside the model's folder"), "{e}");
    let e = Model::from_onnx_bytes(host(), b"\x0a\xff\xff\xff\xff\x0fjunk", None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("not an ONNX ModelProto"), "{e}");
    let huge = onnx::TensorProto {
        name: Some("w".into()),
        dims: vec![1 << 29],
        data_type: Some(1),
        ..Default::default()
    };
    let e = Model::from_onnx_bytes(host(), &onnx_model(huge), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("initializer `w`") && e.contains("larger than"),
        "{e}"
    );
}

// ---- control flow (If, Loop, Scan): the host runs the subgraphs -------------------------------

fn typed(name: &str, dtype: Dtype, dims: Vec<Dim>) -> ValueDecl {
    ValueDecl {
        name: name.into(),
        dtype: Some(dtype),
        dims: Some(dims),
    }
}

fn body(nodes: Vec<Node>, inputs: Vec<ValueDecl>, outputs: &[&str]) -> umd::graph::Subgraph {
    umd::graph::Subgraph::new(GraphDef {
        nodes,
        inputs,
        outputs: outputs
            .iter()
            .map(|o| ValueDecl {
                name: o.to_string(),
                dtype: None,
                dims: None,
            })
            .collect(),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    })
    .unwrap()
}

fn with_subgraphs(mut n: Node, subgraphs: Vec<(&str, umd::graph::Subgraph)>) -> Node {
    n.subgraphs = subgraphs
        .into_iter()
        .map(|(k, g)| (k.to_string(), g))
        .collect();
    n
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Loop: acc += x * i for i in 0..M while acc < limit (a body reading the outer `x`), each
/// iteration's acc stacked as a scan output.
fn loop_graph() -> GraphDef {
    let b = body(
        vec![
            Node::new(
                "Cast",
                &["i"],
                &["fi"],
                vec![("to".into(), AttrValue::Int(1))],
            ),
            Node::new("Mul", &["x", "fi"], &["xi"], vec![]),
            Node::new("Add", &["acc", "xi"], &["acc2"], vec![]),
            Node::new(
                "ReduceSum",
                &["acc2"],
                &["total"],
                vec![("keepdims".into(), AttrValue::Int(0))],
            ),
            Node::new("Less", &["total", "limit"], &["go"], vec![]),
            Node::new("Identity", &["acc2"], &["scan"], vec![]),
        ],
        vec![
            typed("i", Dtype::I64, vec![]),
            typed("c", Dtype::Bool, vec![]),
            decl("acc", vec![Dim::Fixed(2)]),
        ],
        &["go", "acc2", "scan"],
    );
    GraphDef {
        nodes: vec![with_subgraphs(
            Node::new("Loop", &["m", "", "acc0"], &["acc_out", "scans"], vec![]),
            vec![("body", b)],
        )],
        inputs: vec![
            typed("m", Dtype::I64, vec![]),
            decl("x", vec![Dim::Fixed(2)]),
            decl("acc0", vec![Dim::Fixed(2)]),
            decl("limit", vec![]),
        ],
        outputs: vec![decl("acc_out", vec![]), decl("scans", vec![])],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    }
}

#[test]
fn loop_runs_its_body_with_outer_values_until_its_trip_count_or_condition() {
    let model = Model::new(host(), loop_graph()).unwrap();
    let run = |m: i64, limit: f32| {
        model
            .run(&[
                Tensor {
                    desc: TensorDesc::new("m", vec![], Dtype::I64),
                    data: i64s(&[m]),
                },
                tensor("x", vec![2], &[1.0, 10.0]),
                tensor("acc0", vec![2], &[0.0, 0.0]),
                tensor("limit", vec![], &[limit]),
            ])
            .unwrap()
            .outputs
    };
    // 4 trips: acc = x * (0 + 1 + 2 + 3); scans stack every iteration's acc along axis 0.
    let out = run(4, 1e9);
    assert_eq!(out[0].desc.shape, vec![2]);
    assert_eq!(data::decode(Dtype::F32, &out[0].data), vec![6.0, 60.0]);
    assert_eq!(out[1].desc.shape, vec![4, 2]);
    assert_eq!(
        data::decode(Dtype::F32, &out[1].data),
        vec![0.0, 0.0, 1.0, 10.0, 3.0, 30.0, 6.0, 60.0]
    );
    // The condition stops it first: after acc sums to 33 (i = 0..=2) 33 < 20 is false.
    let out = run(100, 20.0);
    assert_eq!(data::decode(Dtype::F32, &out[0].data), vec![3.0, 30.0]);
    assert_eq!(out[1].desc.shape, vec![3, 2]);
    // Zero trips: the initial value, an empty scan output.
    let out = run(0, 1e9);
    assert_eq!(data::decode(Dtype::F32, &out[0].data), vec![0.0, 0.0]);
    assert_eq!(out[1].desc.shape[0], 0);
}

#[test]
fn if_runs_the_branch_its_condition_names_and_scan_scans_both_ways() {
    // If: y = cond ? x + 1 : x * 3 (both branches read the outer x; their constants are
    // their own initializers, not captures).
    let branch = |op: &str, c: &str, v: f32, out: &str| {
        umd::graph::Subgraph::new(GraphDef {
            nodes: vec![Node::new(op, &["x", c], &[out], vec![])],
            outputs: vec![decl(out, vec![])],
            constants: HashMap::from([(c.to_string(), constant(vec![], Dtype::F32, f32s(&[v])))]),
            opsets: HashMap::from([(String::new(), 17)]),
            ..Default::default()
        })
        .unwrap()
    };
    let (then_b, else_b) = (
        branch("Add", "one", 1.0, "t"),
        branch("Mul", "three", 3.0, "e"),
    );
    assert_eq!(then_b.captures, vec!["x"]);
    let g = GraphDef {
        nodes: vec![with_subgraphs(
            Node::new("If", &["cond"], &["y"], vec![]),
            vec![("then_branch", then_b), ("else_branch", else_b)],
        )],
        inputs: vec![
            ValueDecl {
                name: "cond".into(),
                dtype: Some(Dtype::Bool),
                dims: None,
            },
            decl("x", vec![Dim::Fixed(2)]),
        ],
        outputs: vec![decl("y", vec![])],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host(), g).unwrap();
    let run = |c: bool| {
        let out = model
            .run(&[
                Tensor {
                    desc: TensorDesc::new("cond", vec![], Dtype::Bool),
                    data: vec![c as u8],
                },
                tensor("x", vec![2], &[2.0, -1.0]),
            ])
            .unwrap();
        data::decode(Dtype::F32, &out.outputs[0].data)
    };
    assert_eq!(run(true), vec![3.0, 0.0]);
    assert_eq!(run(false), vec![6.0, -3.0]);
    // A condition of two elements is a clear error naming the node, not a crash.
    let e = model
        .run(&[
            Tensor {
                desc: TensorDesc::new("cond", vec![2], Dtype::Bool),
                data: vec![1, 0],
            },
            tensor("x", vec![2], &[2.0, -1.0]),
        ])
        .unwrap_err();
    assert!(
        e.to_string().contains("(If)") && e.to_string().contains("not one element"),
        "{e}"
    );

    // Scan: running sums of the rows of x, forward and (second scan input) reversed.
    let sb = body(
        vec![
            Node::new("Add", &["s", "row"], &["s2"], vec![]),
            Node::new("Identity", &["s2"], &["out"], vec![]),
        ],
        vec![
            decl("s", vec![Dim::Fixed(2)]),
            decl("row", vec![Dim::Fixed(2)]),
        ],
        &["s2", "out"],
    );
    let g = GraphDef {
        nodes: vec![with_subgraphs(
            Node::new(
                "Scan",
                &["s0", "x"],
                &["final", "sums"],
                vec![
                    ("num_scan_inputs".into(), AttrValue::Int(1)),
                    ("scan_input_directions".into(), AttrValue::Ints(vec![1])),
                ],
            ),
            vec![("body", sb)],
        )],
        inputs: vec![
            decl("s0", vec![Dim::Fixed(2)]),
            decl("x", vec![Dim::Fixed(3), Dim::Fixed(2)]),
        ],
        outputs: vec![decl("final", vec![]), decl("sums", vec![])],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host(), g).unwrap();
    let out = model
        .run(&[
            tensor("s0", vec![2], &[0.0, 0.0]),
            tensor("x", vec![3, 2], &[1.0, 2.0, 10.0, 20.0, 100.0, 200.0]),
        ])
        .unwrap()
        .outputs;
    assert_eq!(data::decode(Dtype::F32, &out[0].data), vec![111.0, 222.0]);
    assert_eq!(out[1].desc.shape, vec![3, 2]);
    // Reversed input: rows 2, 1, 0 are added in that order.
    assert_eq!(
        data::decode(Dtype::F32, &out[1].data),
        vec![100.0, 200.0, 110.0, 220.0, 111.0, 222.0]
    );
}

#[test]
fn an_endless_loop_is_stopped_at_its_iteration_bound() {
    // No trip count, a body that passes its condition (true) through: it never ends by itself.
    let b = body(
        vec![],
        vec![
            typed("i", Dtype::I64, vec![]),
            typed("c", Dtype::Bool, vec![]),
            decl("v", vec![Dim::Fixed(1)]),
        ],
        &["c", "v"],
    );
    let g = GraphDef {
        nodes: vec![with_subgraphs(
            Node::new("Loop", &["", "", "v0"], &["v"], vec![]),
            vec![("body", b)],
        )],
        inputs: vec![decl("v0", vec![Dim::Fixed(1)])],
        outputs: vec![decl("v", vec![])],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host(), g).unwrap();
    let e = model.run(&[tensor("v0", vec![1], &[1.0])]).unwrap_err();
    assert!(
        matches!(&e, GraphError::Limit(m) if m.contains("iterations")),
        "{e}"
    );
    assert_eq!(e.status(), umd::error::status::INVALID_INPUT);
}

#[test]
fn sequences_and_optionals_run_on_the_host() {
    use umd::graph::{Value, ValueKind};
    // x[3] -> SplitToSequence(split [1, 2]) -> insert y at 0 -> (length, concat along 0), and a
    // sequence input's last element; an optional input tells whether it holds a value.
    let i64c = |v: &[i64]| constant(vec![v.len() as u64], Dtype::I64, i64s(v));
    let mut g = GraphDef {
        nodes: vec![
            Node::new("SplitToSequence", &["x", "split"], &["parts"], vec![]),
            Node::new("SequenceInsert", &["parts", "y", "zero"], &["seq"], vec![]),
            Node::new("SequenceLength", &["seq"], &["len"], vec![]),
            Node::new(
                "ConcatFromSequence",
                &["seq"],
                &["cat"],
                vec![("axis".into(), AttrValue::Int(0))],
            ),
            Node::new("SequenceAt", &["s_in", "last"], &["tail"], vec![]),
            Node::new("OptionalHasElement", &["maybe"], &["has"], vec![]),
        ],
        inputs: vec![
            decl("x", vec![Dim::Fixed(3)]),
            decl("y", vec![Dim::Fixed(2)]),
            decl("s_in", vec![]),
            decl("maybe", vec![]),
        ],
        outputs: vec![
            decl("len", vec![]),
            decl("cat", vec![]),
            decl("tail", vec![]),
            decl("has", vec![]),
            decl("seq", vec![]),
        ],
        constants: HashMap::from([
            ("split".into(), i64c(&[1, 2])),
            ("zero".into(), constant(vec![], Dtype::I64, i64s(&[0]))),
            ("last".into(), constant(vec![], Dtype::I64, i64s(&[-1]))),
        ]),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    g.kinds = HashMap::from([
        ("s_in".into(), ValueKind::Sequence),
        ("maybe".into(), ValueKind::OptionalTensor),
        ("seq".into(), ValueKind::Sequence),
    ]);
    let model = Model::new(host(), g).unwrap();
    let t =
        |name: &str, shape: Vec<u64>, v: &[f32]| Value::Tensor(Arc::new(tensor(name, shape, v)));
    let seq_in = Value::Sequence(vec![
        Arc::new(tensor("a", vec![1], &[7.0])),
        Arc::new(tensor("b", vec![2], &[8.0, 9.0])),
    ]);
    let run = |maybe: Value| {
        model
            .run_values(&[
                ("x".into(), t("x", vec![3], &[1.0, 2.0, 3.0])),
                ("y".into(), t("y", vec![2], &[-1.0, -2.0])),
                ("s_in".into(), seq_in.clone()),
                ("maybe".into(), maybe),
            ])
            .unwrap()
    };
    let out = run(Value::None);
    let get = |k: usize| match &out[k].1 {
        Value::Tensor(t) => data::decode(t.desc.dtype, &t.data),
        other => panic!("{other:?}"),
    };
    assert_eq!(get(0), vec![3.0], "y, [1], [2, 3]");
    assert_eq!(get(1), vec![-1.0, -2.0, 1.0, 2.0, 3.0]);
    assert_eq!(get(2), vec![8.0, 9.0]);
    assert_eq!(get(3), vec![0.0], "an optional without a value");
    match &out[4] {
        (name, Value::Sequence(s)) => {
            assert_eq!(name, "seq");
            let shapes: Vec<_> = s.iter().map(|t| t.desc.shape.clone()).collect();
            assert_eq!(shapes, vec![vec![2], vec![1], vec![2]]);
        }
        other => panic!("{other:?}"),
    }
    let out = run(t("maybe", vec![1], &[0.0]));
    assert!(matches!(&out[3].1, Value::Tensor(t) if t.data == vec![1]));
    // A sequence where a tensor is declared, and a tensor-only run of a sequence model, are
    // clear errors.
    let e = model
        .run_values(&[
            ("x".into(), seq_in.clone()),
            ("y".into(), t("y", vec![2], &[-1.0, -2.0])),
            ("s_in".into(), seq_in.clone()),
            ("maybe".into(), Value::None),
        ])
        .unwrap_err();
    assert!(
        e.to_string().contains("input `x` is declared a tensor"),
        "{e}"
    );
}

/// The plain nodes around control flow run as compiled segments (one submission each), with
/// results equal to the node-by-node semantics; a segment whose plan depends on a value it is
/// given stays correct as the value changes.
#[test]
fn plain_nodes_around_control_flow_run_as_compiled_segments() {
    // a = (relu(-x) + x) * x; b = cond ? a * 2 : -a; y = |b + 1| + a: 4 plain nodes before
    // the If, 3 after it.
    let branch = |op: &str, out: &str| {
        let mut inputs: Vec<&str> = vec!["a"];
        if op == "Mul" {
            inputs.push("two");
        }
        umd::graph::Subgraph::new(GraphDef {
            nodes: vec![Node::new(op, &inputs, &[out], vec![])],
            outputs: vec![decl(out, vec![])],
            constants: HashMap::from([("two".into(), constant(vec![], Dtype::F32, f32s(&[2.0])))]),
            opsets: HashMap::from([(String::new(), 17)]),
            ..Default::default()
        })
        .unwrap()
    };
    let g = GraphDef {
        nodes: vec![
            Node::new("Neg", &["x"], &["n"], vec![]),
            Node::new("Relu", &["n"], &["r"], vec![]),
            Node::new("Add", &["r", "x"], &["s"], vec![]),
            Node::new("Mul", &["s", "x"], &["a"], vec![]),
            with_subgraphs(
                Node::new("If", &["cond"], &["b"], vec![]),
                vec![
                    ("then_branch", branch("Mul", "t")),
                    ("else_branch", branch("Neg", "e")),
                ],
            ),
            Node::new("Add", &["b", "one"], &["c"], vec![]),
            Node::new("Abs", &["c"], &["d"], vec![]),
            Node::new("Add", &["d", "a"], &["y"], vec![]),
        ],
        inputs: vec![
            ValueDecl {
                name: "cond".into(),
                dtype: Some(Dtype::Bool),
                dims: None,
            },
            decl("x", vec![Dim::Dynamic("n".into())]),
        ],
        outputs: vec![decl("y", vec![Dim::Dynamic("n".into())])],
        constants: HashMap::from([("one".into(), constant(vec![], Dtype::F32, f32s(&[1.0])))]),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let reference = |cond: bool, x: &[f32]| -> Vec<f32> {
        x.iter()
            .map(|&x| {
                let a = ((-x).max(0.0) + x) * x;
                let b = if cond { a * 2.0 } else { -a };
                (b + 1.0).abs() + a
            })
            .collect()
    };
    let model = Model::new(host(), g).unwrap();
    let xs = [1.5f32, -2.0, 0.0, 3.25, -0.5];
    for cond in [true, false, true] {
        let out = model
            .run(&[
                Tensor {
                    desc: TensorDesc::new("cond", vec![], Dtype::Bool),
                    data: vec![cond as u8],
                },
                tensor("x", vec![xs.len() as u64], &xs),
            ])
            .unwrap();
        let want: Vec<f64> = reference(cond, &xs).into_iter().map(f64::from).collect();
        assert_eq!(data::decode(Dtype::F32, &out.outputs[0].data), want);
        // Node by node this is 8 submissions (7 op nodes and the branch's one); as segments:
        // the 4 nodes before the If, the branch (a plain body), the 3 nodes after it.
        assert_eq!(out.stats.submissions, 3, "cond {cond}: {:?}", out.stats);
    }

    // A segment whose plan needs a value computed from its input (ConstantOfShape's shape from
    // the If's output): planned whole with that input taken by value, or node by node when it
    // cannot be — correct on every run, whatever the value.
    let shape_body = |out: &str| {
        umd::graph::Subgraph::new(GraphDef {
            nodes: vec![Node::new("Identity", &["k"], &[out], vec![])],
            outputs: vec![decl(out, vec![])],
            opsets: HashMap::from([(String::new(), 17)]),
            ..Default::default()
        })
        .unwrap()
    };
    let g = GraphDef {
        nodes: vec![
            with_subgraphs(
                Node::new("If", &["cond"], &["m"], vec![]),
                vec![
                    ("then_branch", shape_body("t")),
                    ("else_branch", shape_body("e")),
                ],
            ),
            Node::new("Add", &["m", "one"], &["len"], vec![]),
            Node::new("ConstantOfShape", &["len"], &["y"], vec![]),
        ],
        inputs: vec![
            ValueDecl {
                name: "cond".into(),
                dtype: Some(Dtype::Bool),
                dims: None,
            },
            typed("k", Dtype::I64, vec![Dim::Fixed(1)]),
        ],
        outputs: vec![ValueDecl {
            name: "y".into(),
            dtype: None,
            dims: None,
        }],
        constants: HashMap::from([("one".into(), constant(vec![1], Dtype::I64, i64s(&[1])))]),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host(), g).unwrap();
    for k in [2i64, 5, 0] {
        let out = model
            .run(&[
                Tensor {
                    desc: TensorDesc::new("cond", vec![], Dtype::Bool),
                    data: vec![1],
                },
                Tensor {
                    desc: TensorDesc::new("k", vec![1], Dtype::I64),
                    data: i64s(&[k]),
                },
            ])
            .unwrap();
        assert_eq!(out.outputs[0].desc.shape, vec![k as u64 + 1], "k = {k}");
        assert!(out.outputs[0].data.iter().all(|&b| b == 0));
    }
}

/// An op whose plan needs a value computed at run time (NonZero's input) does not stop a model:
/// it runs interpreted, the node alone with its input's values, the nodes around it as compiled
/// segments (from the second run on: the first finds the node), correct as the count changes.
#[test]
fn a_value_computed_at_run_time_splits_the_model_around_its_node() {
    let g = GraphDef {
        nodes: vec![
            Node::new("Neg", &["x"], &["n"], vec![]),
            Node::new("Relu", &["n"], &["r"], vec![]),
            Node::new("NonZero", &["r"], &["nz"], vec![]),
            Node::new("Transpose", &["nz"], &["t"], vec![]),
            Node::new("Neg", &["t"], &["y"], vec![]),
        ],
        inputs: vec![decl("x", vec![Dim::Fixed(6)])],
        outputs: vec![ValueDecl {
            name: "y".into(),
            dtype: None,
            dims: None,
        }],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let model = Model::new(host(), g).unwrap();
    for (run, xs) in [
        [1.0f32, -2.0, 0.0, -3.5, 4.0, -0.5],
        [-1.0, -2.0, -3.0, 0.0, 0.0, 0.0],
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    ]
    .iter()
    .enumerate()
    {
        let out = model.run(&[tensor("x", vec![6], xs)]).unwrap();
        let want: Vec<i64> = (0..6)
            .filter(|&i| -xs[i] > 0.0)
            .map(|i| -(i as i64))
            .collect();
        assert_eq!(
            out.outputs[0].desc.shape,
            vec![want.len() as u64, 1],
            "run {run}"
        );
        assert_eq!(out.outputs[0].data, i64s(&want), "run {run}");
        if run > 0 {
            // Neg+Relu compiled, NonZero alone, Transpose+Neg compiled.
            assert_eq!(out.stats.submissions, 3, "run {run}: {:?}", out.stats);
        }
    }
}

/// Hostile models the host runs itself are refused by their bounds before anything large is
/// allocated or run: a join of many copies of one tensor, a split into 2^40 parts of a
/// zero-byte tensor, nested empty loop bodies, an opset-8 Scan over a 2^62 batch, a Constant
/// with a second output read downstream. The host serves on.
#[test]
fn hostile_models_are_refused_by_their_bounds_before_they_allocate() {
    let h = host();
    let seq_graph =
        |nodes: Vec<Node>, consts: Vec<(&str, Constant)>, out: &str, opset: u32| GraphDef {
            nodes,
            constants: consts
                .into_iter()
                .map(|(n, c)| (n.to_string(), c))
                .collect(),
            outputs: vec![decl(out, vec![])],
            opsets: HashMap::from([(String::new(), opset)]),
            ..Default::default()
        };
    let limit = |g: GraphDef, what: &str| {
        let e = Model::new(h.clone(), g)
            .and_then(|m| m.run(&[]))
            .expect_err("the model ran");
        assert!(
            matches!(&e, GraphError::Limit(m) if m.contains(what)),
            "{e}"
        );
        assert_eq!(e.status(), umd::error::status::INVALID_INPUT, "{e}");
    };
    // 300 × 4 MiB joined: 1.2 GiB, past the 1 GiB a host-made tensor may have
    let four_mib = constant(vec![1 << 20], Dtype::F32, vec![0; 4 << 20]);
    limit(
        seq_graph(
            vec![
                Node::new("SequenceConstruct", &["c"; 300], &["s"], vec![]),
                Node::new(
                    "ConcatFromSequence",
                    &["s"],
                    &["y"],
                    vec![("axis".into(), AttrValue::Int(0))],
                ),
            ],
            vec![("c", four_mib)],
            "y",
            17,
        ),
        "more than 1073741824 bytes",
    );
    // 2^40 parts of nothing
    let empty = constant(vec![1 << 40, 0], Dtype::F32, vec![]);
    limit(
        seq_graph(
            vec![
                Node::new("SplitToSequence", &["t"], &["s"], vec![]),
                Node::new("SequenceLength", &["s"], &["y"], vec![]),
            ],
            vec![("t", empty)],
            "y",
            17,
        ),
        "a sequence of 1099511627776 tensors",
    );
    // Loop(5){ Loop(2^20 - 1){ } }: empty bodies execute no node; their runs are bounded
    let empty_body = || {
        body(
            vec![],
            vec![
                typed("i", Dtype::I64, vec![]),
                typed("c", Dtype::Bool, vec![]),
            ],
            &["c"],
        )
    };
    let inner = body(
        vec![with_subgraphs(
            Node::new("Loop", &["big", ""], &[], vec![]),
            vec![("body", empty_body())],
        )],
        vec![
            typed("j", Dtype::I64, vec![]),
            typed("c2", Dtype::Bool, vec![]),
        ],
        &["c2"],
    );
    let m = |v: i64| constant(vec![], Dtype::I64, i64s(&[v]));
    let mut g = seq_graph(
        vec![
            with_subgraphs(
                Node::new("Loop", &["two", ""], &[], vec![]),
                vec![("body", inner)],
            ),
            Node::new("Identity", &["two"], &["y"], vec![]),
        ],
        vec![("two", m(5)), ("big", m((1 << 20) - 1))],
        "y",
        17,
    );
    g.outputs[0].dtype = Some(Dtype::I64);
    limit(g, "bodies more than 4194304 times");
    // Scan-8 over a batch of 2^62 zero-byte entries
    let scan_body = body(
        vec![Node::new("Identity", &["e"], &["o"], vec![])],
        vec![decl("e", vec![Dim::Fixed(0)])],
        &["o"],
    );
    let huge = constant(vec![1 << 62, 0], Dtype::F32, vec![]);
    limit(
        seq_graph(
            vec![with_subgraphs(
                Node::new(
                    "Scan",
                    &["", "t"],
                    &["y"],
                    vec![("num_scan_inputs".into(), AttrValue::Int(1))],
                ),
                vec![("body", scan_body)],
            )],
            vec![("t", huge)],
            "y",
            8,
        ),
        "a batch of 4611686018427387904",
    );
    // a Constant's second output does not exist: an error, not a panic (nor leaked buffers)
    let value = AttrValue::Tensor(TensorDesc::new("", vec![1], Dtype::F32), f32s(&[1.0]));
    let g = GraphDef {
        nodes: vec![
            Node::new("Constant", &[], &["a", "b"], vec![("value".into(), value)]),
            Node::new("Relu", &["b"], &["y"], vec![]),
        ],
        outputs: vec![decl("y", vec![])],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    };
    let e = Model::new(h.clone(), g)
        .and_then(|m| m.run(&[]))
        .expect_err("ran");
    assert!(e.to_string().contains("output `b`"), "{e}");
    // and the host serves on
    let model = Model::new(h, diamond()).unwrap();
    model
        .run(&[tensor("x", vec![4], &[1.0, -2.0, 3.0, -4.0])])
        .unwrap();
}

/// y = x · w + 0.5 through `ai.onnx.ml` LinearRegressor over `features` columns: its
/// coefficients reach the kernel as a table the plan's setup launches write (ABI 1.7).
fn linear_regressor(features: usize) -> (GraphDef, Vec<f64>) {
    let w: Vec<f64> = (0..features).map(|i| (i % 7) as f64 - 3.0).collect();
    let mut n = Node::new(
        "LinearRegressor",
        &["x"],
        &["y"],
        vec![
            ("coefficients".into(), AttrValue::Floats(w.clone())),
            ("intercepts".into(), AttrValue::Floats(vec![0.5])),
        ],
    );
    n.domain = "ai.onnx.ml".into();
    let g = GraphDef {
        nodes: vec![n],
        inputs: vec![decl(
            "x",
            vec![Dim::Dynamic("n".into()), Dim::Fixed(features as u64)],
        )],
        outputs: vec![decl("y", vec![Dim::Dynamic("n".into()), Dim::Fixed(1)])],
        opsets: HashMap::from([(String::new(), 17), ("ai.onnx.ml".into(), 3)]),
        ..Default::default()
    };
    (g, w)
}

#[test]
fn setup_launches_fill_a_kept_workspace_once_and_every_run_reads_it() {
    let features = 1200; // 1201 table words: three setup launches of 500
    let (g, w) = linear_regressor(features);
    let h = host();
    let model = Model::new(h.clone(), g).unwrap();
    let expect = |x: &[f32]| -> Vec<f32> {
        x.chunks(features)
            .map(|r| (r.iter().zip(&w).map(|(a, b)| *a as f64 * b).sum::<f64>() + 0.5) as f32)
            .collect()
    };
    for seed in 0..3 {
        let x: Vec<f32> = (0..2 * features)
            .map(|i| ((i * 31 + seed * 17) % 13) as f32 - 6.0)
            .collect();
        let run = model
            .run(&[tensor("x", vec![2, features as u64], &x)])
            .unwrap();
        let y = data::decode(Dtype::F32, &run.outputs[0].data);
        let want = expect(&x);
        for (a, b) in y.iter().zip(&want) {
            assert!(
                (*a as f32 - b).abs() <= 1e-3 * b.abs().max(1.0),
                "{y:?} != {want:?}"
            );
        }
        let s = &run.stats;
        assert_eq!((s.setup_launches, s.launches), (3, 1), "{s:?}");
        assert!(s.constant_bytes >= 1201 * 8, "{s:?}");
        // the same op on its own (no kept workspace) runs all four launches, to the same bytes
        let mut req = umd::OpRequest::new(
            "LinearRegressor",
            vec![TensorDesc::new("x", vec![2, features as u64], Dtype::F32)],
        )
        .attr("coefficients", AttrValue::Floats(w.clone()))
        .attr("intercepts", AttrValue::Floats(vec![0.5]));
        req.domain = "ai.onnx.ml".into();
        let t = h.translate(&req).unwrap();
        assert_eq!((t.setup_launches, t.cmdbuf.launches.len()), (3, 4));
        let single = h.run_request(req, &[f32s(&x)]).unwrap();
        assert_eq!(single[0].1, run.outputs[0].data);
    }
}

/// `y = x · W` with W an initializer.
fn matmul_model(k: usize, n: usize, w: &[f32]) -> GraphDef {
    GraphDef {
        nodes: vec![Node::new("MatMul", &["x", "w"], &["y"], vec![])],
        inputs: vec![decl(
            "x",
            vec![Dim::Dynamic("m".into()), Dim::Fixed(k as u64)],
        )],
        outputs: vec![decl(
            "y",
            vec![Dim::Dynamic("m".into()), Dim::Fixed(n as u64)],
        )],
        constants: HashMap::from([(
            "w".into(),
            constant(vec![k as u64, n as u64], Dtype::F32, f32s(w)),
        )]),
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    }
}

#[test]
fn weights_kept_by_kernels_stay_each_models_own_across_runs() {
    // Initializers are frozen on upload: the CPU device names them resident and the matmul
    // kernel keeps B packed per instance. Two models with weights of the same shape, run in
    // turn on the same instances, must each multiply by their own, every run.
    let (k, n) = (70, 45);
    let h = host();
    let ws: Vec<Vec<f32>> = (0..2)
        .map(|m| {
            (0..k * n)
                .map(|i| ((i * 7 + m * 3) % 11) as f32 - 5.0)
                .collect()
        })
        .collect();
    let models: Vec<Model> = ws
        .iter()
        .map(|w| Model::new(h.clone(), matmul_model(k, n, w)).unwrap())
        .collect();
    for round in 0..4 {
        for (model, w) in models.iter().zip(&ws) {
            let rows = 3 + round;
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 13 + round * 5) % 9) as f32 - 4.0)
                .collect();
            let run = model
                .run(&[tensor("x", vec![rows as u64, k as u64], &x)])
                .unwrap();
            let y = data::decode(Dtype::F32, &run.outputs[0].data);
            for r in 0..rows {
                for j in 0..n {
                    let want: f32 = (0..k).map(|t| x[r * k + t] * w[t * n + j]).sum();
                    assert_eq!(y[r * n + j] as f32, want, "round {round}, ({r}, {j})");
                }
            }
        }
    }
}

/// A residual block: conv → BN → Relu → conv → BN, plus a projection conv → BN of the input,
/// summed, then Relu. With `exposed`, every intermediate is also a graph output, which keeps
/// every node its own (a fused chain's values are read by nothing else).
fn residual_block(exposed: bool) -> GraphDef {
    let mut seed = 7u64;
    let mut rand = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    };
    let (c, m) = (4u64, 8u64);
    let mut constants = HashMap::new();
    let mut weights = |name: &str, shape: Vec<u64>, positive: bool| {
        let n = shape.iter().product::<u64>() as usize;
        let v: Vec<f32> = rand(n)
            .iter()
            .map(|x| if positive { x.abs() + 0.5 } else { *x })
            .collect();
        constants.insert(name.to_string(), constant(shape, Dtype::F32, f32s(&v)));
    };
    weights("w1", vec![m, c, 3, 3], false);
    weights("w2", vec![m, m, 3, 3], false);
    weights("wp", vec![m, c, 1, 1], false);
    weights("b1", vec![m], false);
    for bn in ["n1", "n2", "np"] {
        weights(&format!("{bn}s"), vec![m], false);
        weights(&format!("{bn}b"), vec![m], false);
        weights(&format!("{bn}m"), vec![m], false);
        weights(&format!("{bn}v"), vec![m], true);
    }
    let pads = || vec![("pads".to_string(), AttrValue::Ints(vec![1, 1, 1, 1]))];
    let bn = |x: &str, p: &str, y: &str| {
        let (s, b, mm, v) = (
            format!("{p}s"),
            format!("{p}b"),
            format!("{p}m"),
            format!("{p}v"),
        );
        Node::new(
            "BatchNormalization",
            &[x, s.as_str(), b.as_str(), mm.as_str(), v.as_str()],
            &[y],
            vec![("epsilon".into(), AttrValue::Float(1e-3))],
        )
    };
    let nodes = vec![
        Node::new("Conv", &["x", "w1", "b1"], &["c1"], pads()),
        bn("c1", "n1", "a1"),
        Node::new("Relu", &["a1"], &["r1"], vec![]),
        Node::new("Conv", &["x", "wp"], &["cp"], vec![]),
        bn("cp", "np", "ap"),
        Node::new("Conv", &["r1", "w2"], &["c2"], pads()),
        bn("c2", "n2", "a2"),
        Node::new("Sum", &["ap", "a2"], &["s"], vec![]),
        Node::new("Relu", &["s"], &["y"], vec![]),
    ];
    let shape = |n: u64| vec![Dim::Fixed(2), Dim::Fixed(n), Dim::Fixed(17), Dim::Fixed(17)];
    let mut outputs = vec![decl("y", shape(m))];
    if exposed {
        for v in ["c1", "a1", "r1", "cp", "ap", "c2", "a2", "s"] {
            outputs.push(decl(v, shape(m)));
        }
    }
    GraphDef {
        nodes,
        inputs: vec![decl("x", shape(c))],
        outputs,
        constants,
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    }
}

/// Runs `fused` (fused chains) and `plain` (every node its own) on `input`; checks the nodes
/// run fused and the launches of each, and that the first outputs agree.
fn compare_fused(
    fused: GraphDef,
    plain: GraphDef,
    input: &[Tensor],
    (fused_nodes, fused_launches, plain_launches): (usize, usize, usize),
) -> Vec<f64> {
    let h = host();
    let fused = Model::new(h.clone(), fused).unwrap().run(input).unwrap();
    let plain = Model::new(h, plain).unwrap().run(input).unwrap();
    assert_eq!(
        (fused.stats.fused, fused.stats.launched),
        (fused_nodes, fused_launches),
        "{:?}",
        fused.stats
    );
    assert_eq!(
        (plain.stats.fused, plain.stats.launched),
        (0, plain_launches),
        "{:?}",
        plain.stats
    );
    let (got, want) = (
        data::decode(Dtype::F32, &fused.outputs[0].data),
        data::decode(Dtype::F32, &plain.outputs[0].data),
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "element {i}: {g} fused, {w} node by node"
        );
    }
    want
}

#[test]
fn chains_a_plugin_computes_as_one_op_run_fused_and_match_the_chain() {
    let x: Vec<f32> = (0..2 * 4 * 17 * 17)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    // conv+BN+Relu; the projection conv (first in node order) claims conv+BN+Sum+Relu, the
    // second conv conv+BN: 3 launches for 9 nodes
    let want = compare_fused(
        residual_block(false),
        residual_block(true),
        &[tensor("x", vec![2, 4, 17, 17], &x)],
        (9, 3, 9),
    );
    assert!(want.iter().any(|v| *v > 0.0) && want.contains(&0.0));
}

/// Conv → BN → Add of a per-position constant (broadcast along channels) → Relu: the conv
/// plugin declines the whole chain (it adds residuals of the output's shape and per-channel
/// shifts only), so the longest prefix it serves
/// (conv+BN) runs fused and the Add and Relu on their own; the same as node by node.
#[test]
fn a_declined_chain_runs_its_longest_served_prefix_fused() {
    let graph = |exposed: bool| {
        let mut g = residual_block(false);
        let m = 8u64;
        // one value per position, broadcast along channels: neither a residual of the
        // output's shape nor a per-channel shift
        let plane: Vec<f32> = (0..17 * 17).map(|i| (i % 7) as f32 * 0.25 - 0.75).collect();
        g.constants.insert(
            "shift".into(),
            constant(vec![1, 1, 17, 17], Dtype::F32, f32s(&plane)),
        );
        g.nodes.truncate(2); // conv, BN
        g.nodes
            .push(Node::new("Add", &["a1", "shift"], &["s"], vec![]));
        g.nodes.push(Node::new("Relu", &["s"], &["y"], vec![]));
        if exposed {
            let shape = vec![Dim::Fixed(2), Dim::Fixed(m), Dim::Fixed(17), Dim::Fixed(17)];
            g.outputs.push(decl("c1", shape.clone()));
            g.outputs.push(decl("a1", shape));
        }
        g
    };
    let x: Vec<f32> = (0..2 * 4 * 17 * 17)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 24.0)
        .collect();
    let input = [tensor("x", vec![2, 4, 17, 17], &x)];
    compare_fused(graph(false), graph(true), &input, (2, 3, 4));
}
