use super::*;
use proto::attribute_proto::AttributeType;

fn node(op: &str, domain: &str, inputs: &[&str], outputs: &[&str]) -> proto::NodeProto {
    proto::NodeProto {
        op_type: Some(op.into()),
        domain: Some(domain.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn float_attr(name: &str, v: f32) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

fn reference(name: &str, to: &str) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        ref_attr_name: Some(to.into()),
        ..Default::default()
    }
}

fn graph_attr(name: &str, g: proto::GraphProto) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

fn value(name: &str) -> proto::ValueInfoProto {
    proto::ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// `local::{name}(x) -> y` with `nodes`.
fn local_fn(name: &str, nodes: Vec<proto::NodeProto>) -> proto::FunctionProto {
    proto::FunctionProto {
        name: Some(name.into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        node: nodes,
        ..Default::default()
    }
}

/// `local::Act(x) -> y`: `t = Add(x, x)`, `y = LeakyRelu<alpha = @alpha>(t)`, alpha defaulting
/// to 0.5.
fn act() -> proto::FunctionProto {
    let mut leaky = node("LeakyRelu", "", &["t"], &["y"]);
    leaky.attribute.push(reference("alpha", "alpha"));
    proto::FunctionProto {
        attribute_proto: vec![float_attr("alpha", 0.5)],
        opset_import: vec![proto::OperatorSetIdProto {
            domain: Some("".into()),
            version: Some(17),
        }],
        ..local_fn("Act", vec![node("Add", "", &["x", "x"], &["t"]), leaky])
    }
}

fn model(nodes: Vec<proto::NodeProto>, functions: Vec<proto::FunctionProto>) -> proto::ModelProto {
    proto::ModelProto {
        graph: Some(proto::GraphProto {
            node: nodes,
            ..Default::default()
        }),
        functions,
        ..Default::default()
    }
}

fn nodes(m: &proto::ModelProto) -> Vec<(String, Vec<String>, Vec<String>)> {
    m.graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| (n.op_type().to_string(), n.input.clone(), n.output.clone()))
        .collect()
}

fn alpha(n: &proto::NodeProto) -> Option<f32> {
    n.attribute.iter().find(|a| a.name() == "alpha").map(|a| {
        assert!(a.ref_attr_name.is_none(), "reference resolved");
        a.f()
    })
}

#[test]
fn calls_are_replaced_by_renamed_bodies_with_attributes_resolved() {
    let mut call1 = node("Act", "local", &["a"], &["b"]);
    call1.attribute.push(float_attr("alpha", 0.25));
    let call2 = node("Act", "local", &["b"], &["c"]);
    let mut m = model(vec![call1, call2], vec![act()]);
    inline(&mut m, &NoExpansions).unwrap();
    let n = nodes(&m);
    assert_eq!(n.len(), 4, "{n:?}");
    assert_eq!(n[0].0, "Add");
    assert_eq!(n[0].1, ["a", "a"], "formal input bound to the call's value");
    let t1 = &n[0].2[0];
    assert_eq!(
        n[1],
        ("LeakyRelu".into(), vec![t1.clone()], vec!["b".into()])
    );
    let t2 = &n[2].2[0];
    assert_ne!(t1, t2, "each call's own values are renamed apart");
    assert_eq!(n[3].2, ["c"]);
    let g = m.graph.as_ref().unwrap();
    assert_eq!(alpha(&g.node[1]), Some(0.25), "the call's attribute");
    assert_eq!(alpha(&g.node[3]), Some(0.5), "the function's default");
    assert!(m.functions.is_empty());
    assert!(
        m.opset_import
            .iter()
            .any(|o| o.domain() == "" && o.version() == 17),
        "the function's opset import is the model's too"
    );
}

#[test]
fn an_attribute_without_value_or_default_is_absent() {
    let mut f = act();
    f.attribute_proto.clear();
    f.attribute.push("alpha".into());
    let mut m = model(vec![node("Act", "local", &["a"], &["b"])], vec![f]);
    inline(&mut m, &NoExpansions).unwrap();
    assert_eq!(alpha(&m.graph.as_ref().unwrap().node[1]), None);
}

#[test]
fn nested_calls_and_calls_in_subgraphs_are_inlined() {
    // local::Twice(x) -> y: Act(Act(x))
    let twice = local_fn(
        "Twice",
        vec![
            node("Act", "local", &["x"], &["m"]),
            node("Act", "local", &["m"], &["y"]),
        ],
    );
    let branch = proto::GraphProto {
        node: vec![node("Twice", "local", &["a"], &["r"])],
        output: vec![value("r")],
        ..Default::default()
    };
    let mut iff = node("If", "", &["cond"], &["out"]);
    iff.attribute
        .push(graph_attr("then_branch", branch.clone()));
    iff.attribute.push(graph_attr("else_branch", branch));
    let mut m = model(
        vec![node("Twice", "local", &["a"], &["b"]), iff],
        vec![act(), twice],
    );
    inline(&mut m, &NoExpansions).unwrap();
    let ops: Vec<String> = nodes(&m).into_iter().map(|n| n.0).collect();
    assert_eq!(ops, ["Add", "LeakyRelu", "Add", "LeakyRelu", "If"]);
    let g = m.graph.as_ref().unwrap();
    let then = g.node[4].attribute[0].g.as_ref().unwrap();
    let inner: Vec<&str> = then.node.iter().map(|n| n.op_type()).collect();
    assert_eq!(inner, ["Add", "LeakyRelu", "Add", "LeakyRelu"]);
    assert_eq!(then.node[0].input, ["a", "a"], "reads the outer value");
    assert_eq!(then.node[3].output, ["r"]);
}

#[test]
fn a_subgraph_inside_a_body_reads_bound_values_and_renames_its_own() {
    // local::Pick(c, x) -> y: y = If(c) then { z = Identity(x) } else { z = Neg(x) }
    let branch = |op: &str| proto::GraphProto {
        node: vec![node(op, "", &["x"], &["z"])],
        output: vec![value("z")],
        ..Default::default()
    };
    let mut iff = node("If", "", &["c"], &["y"]);
    iff.attribute
        .push(graph_attr("then_branch", branch("Identity")));
    iff.attribute.push(graph_attr("else_branch", branch("Neg")));
    let pick = proto::FunctionProto {
        name: Some("Pick".into()),
        domain: Some("local".into()),
        input: vec!["c".into(), "x".into()],
        output: vec!["y".into()],
        node: vec![iff],
        ..Default::default()
    };
    let mut m = model(
        vec![node("Pick", "local", &["cond", "v"], &["w"])],
        vec![pick],
    );
    inline(&mut m, &NoExpansions).unwrap();
    let g = m.graph.as_ref().unwrap();
    assert_eq!(g.node[0].input, ["cond"]);
    assert_eq!(g.node[0].output, ["w"]);
    let then = g.node[0].attribute[0].g.as_ref().unwrap();
    assert_eq!(then.node[0].input, ["v"], "the formal input, bound");
    let z = &then.node[0].output[0];
    assert_ne!(z, "z", "the subgraph's own value is renamed apart");
    assert_eq!(
        then.output[0].name(),
        z,
        "and its output declaration with it"
    );
}

#[test]
fn an_unbound_output_gets_a_name_of_its_own() {
    let mut m = model(vec![node("Act", "local", &["a"], &[""])], vec![act()]);
    inline(&mut m, &NoExpansions).unwrap();
    let n = nodes(&m);
    assert!(!n[1].2[0].is_empty());
}

#[test]
fn bad_functions_and_calls_are_refused_by_name() {
    let err = |m: &mut proto::ModelProto| inline(m, &NoExpansions).unwrap_err().to_string();
    // Recursion.
    let mut f = act();
    f.node.push(node("Act", "local", &["y"], &["w"]));
    let e = err(&mut model(
        vec![node("Act", "local", &["a"], &["b"])],
        vec![f],
    ));
    assert!(e.contains("local::Act calls itself"), "{e}");
    // Defined twice.
    let e = err(&mut model(vec![], vec![act(), act()]));
    assert!(e.contains("defined twice"), "{e}");
    // Too many inputs.
    let e = err(&mut model(
        vec![node("Act", "local", &["a", "b"], &["c"])],
        vec![act()],
    ));
    assert!(
        e.contains("passes 2 inputs to function `Act`, which has 1"),
        "{e}"
    );
    // Exponential expansion: each level calls the one below twice.
    let mut fs = vec![act()];
    for level in 0..30 {
        let below = if level == 0 {
            "Act".to_string()
        } else {
            format!("L{}", level - 1)
        };
        fs.push(local_fn(
            &format!("L{level}"),
            vec![
                node(&below, "local", &["x"], &["m"]),
                node(&below, "local", &["m"], &["y"]),
            ],
        ));
    }
    let e = err(&mut model(vec![node("L29", "local", &["a"], &["b"])], fs));
    assert!(e.contains("more than 100000 nodes"), "{e}");
}

#[test]
fn a_model_without_functions_is_untouched() {
    let mut m = model(vec![node("Act", "local", &["a"], &["b"])], vec![]);
    let before = m.clone();
    inline(&mut m, &NoExpansions).unwrap();
    assert_eq!(m, before);
}

/// Expands op `Mod` (with graph attribute `f`) into `y = Call<body = @f>(Neg(x))`, or refuses.
struct Fake {
    refuse: bool,
}

impl Expander for Fake {
    fn expand(
        &self,
        n: &proto::NodeProto,
        _: u32,
        inputs: &[Option<Option<i32>>],
    ) -> Option<Result<proto::FunctionProto, String>> {
        if n.op_type() != "Mod" {
            return None;
        }
        if self.refuse {
            return Some(Err("no, thanks".into()));
        }
        assert_eq!(inputs, [Some(Some(1))], "x is a declared f32 input");
        let mut call = node("Call", CALL_DOMAIN, &["n"], &["y"]);
        call.attribute.push(proto::AttributeProto {
            name: Some("body".into()),
            r#type: Some(AttributeType::Graph as i32),
            ref_attr_name: Some("f".into()),
            ..Default::default()
        });
        Some(Ok(proto::FunctionProto {
            name: Some("Mod".into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            node: vec![node("Neg", "", &["x"], &["n"]), call],
            ..Default::default()
        }))
    }
}

fn mod_model() -> proto::ModelProto {
    // f(s) = Add(s, bias) with an initializer `bias` and `outer`, a value of the caller's scope.
    let f = proto::GraphProto {
        input: vec![value("s")],
        output: vec![value("r")],
        initializer: vec![proto::TensorProto {
            name: Some("bias".into()),
            data_type: Some(1),
            float_data: vec![0.5],
            ..Default::default()
        }],
        node: vec![
            node("Add", "", &["s", "bias"], &["t"]),
            node("Mul", "", &["t", "outer"], &["r"]),
        ],
        ..Default::default()
    };
    let mut m = node("Mod", "", &["x"], &["out"]);
    m.attribute.push(graph_attr("f", f));
    let mut model = model(vec![node("Relu", "", &["x"], &["outer"]), m], vec![]);
    let g = model.graph.as_mut().unwrap();
    g.input.push(proto::ValueInfoProto {
        name: Some("x".into()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(1),
                    shape: None,
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    });
    model
}

#[test]
fn an_expansion_runs_the_nodes_graph_attribute_in_place() {
    let mut m = mod_model();
    inline(&mut m, &Fake { refuse: false }).unwrap();
    let n = nodes(&m);
    let ops: Vec<&str> = n.iter().map(|n| n.0.as_str()).collect();
    assert_eq!(ops, ["Relu", "Neg", "Constant", "Add", "Mul"], "{n:?}");
    let neg = &n[1].2[0];
    let bias = &n[2].2[0];
    assert_ne!(bias, "bias", "the graph's initializer is renamed apart");
    assert_eq!(
        &n[3].1,
        &[neg.clone(), bias.clone()],
        "its input bound to the call's"
    );
    assert_eq!(
        n[4].1[1], "outer",
        "the caller's value, read from the caller's scope"
    );
    assert_eq!(n[4].2, ["out"], "its output is the node's");
}

#[test]
fn a_refused_expansion_names_the_node() {
    let e = inline(&mut mod_model(), &Fake { refuse: true })
        .unwrap_err()
        .to_string();
    assert!(e.contains("node `Mod` (Mod): no, thanks"), "{e}");
    // Without an expander the node stays (and is refused later as not served).
    let mut m = mod_model();
    inline(&mut m, &NoExpansions).unwrap();
    assert_eq!(nodes(&m)[1].0, "Mod");
}

/// `local::Fi(x) -> y` calling `F(i-1)` `fan` times in a chain; `F0` is `base`.
fn tower(base: proto::FunctionProto, levels: usize, fan: usize) -> Vec<proto::FunctionProto> {
    let mut fs = vec![base];
    for level in 1..=levels {
        let below = format!("F{}", level - 1);
        let mut nodes = Vec::new();
        for i in 0..fan {
            let (from, to) = (
                if i == 0 {
                    "x".to_string()
                } else {
                    format!("m{i}")
                },
                if i + 1 == fan {
                    "y".to_string()
                } else {
                    format!("m{}", i + 1)
                },
            );
            nodes.push(node(&below, "local", &[&from], &[&to]));
        }
        fs.push(local_fn(&format!("F{level}"), nodes));
    }
    fs
}

#[test]
fn hostile_functions_stop_at_the_budgets_quickly() {
    let call = |levels: usize| node(&format!("F{levels}"), "local", &["a"], &["b"]);
    // Empty bodies called 2^31 times: the calls count against the node budget.
    let empty = local_fn("F0", vec![]);
    let e = inline(
        &mut model(vec![call(31)], tower(empty, 31, 2)),
        &NoExpansions,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nodes and calls"), "{e}");
    // A 1 MiB constant copied 16^4 times (65 536 nodes: under the node budget) is over the
    // byte budget.
    let mut big = node("Constant", "", &[], &["y"]);
    big.attribute.push(proto::AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(proto::TensorProto {
            data_type: Some(2),
            dims: vec![1 << 20],
            raw_data: Some(vec![0; 1 << 20]),
            ..Default::default()
        }),
        ..Default::default()
    });
    let f0 = local_fn("F0", vec![big]);
    let e = inline(&mut model(vec![call(4)], tower(f0, 4, 16)), &NoExpansions)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bytes"), "{e}");
    // Subgraphs nested past the limit once inlined: each level's body holds the call in an If.
    let mut fs = vec![act()];
    for level in 1..=12 {
        let below = if level == 1 {
            "Act".to_string()
        } else {
            format!("N{}", level - 1)
        };
        let branch = proto::GraphProto {
            node: vec![node(&below, "local", &["x"], &["r"])],
            output: vec![value("r")],
            ..Default::default()
        };
        let mut iff = node("If", "", &["x"], &["y"]);
        iff.attribute
            .push(graph_attr("then_branch", branch.clone()));
        iff.attribute.push(graph_attr("else_branch", branch));
        fs.push(local_fn(&format!("N{level}"), vec![iff]));
    }
    let e = inline(
        &mut model(vec![node("N12", "local", &["a"], &["b"])], fs),
        &NoExpansions,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nested more than 8 deep"), "{e}");
}

#[test]
fn a_model_may_not_use_umds_call_domain() {
    let mut m = model(vec![node("Call", CALL_DOMAIN, &["a"], &["b"])], vec![]);
    let e = inline(&mut m, &NoExpansions).unwrap_err().to_string();
    assert!(e.contains("internal domain"), "{e}");
    let mut f = act();
    f.node.push(node("Call", CALL_DOMAIN, &["y"], &["z"]));
    let e = inline(&mut model(vec![], vec![f]), &NoExpansions)
        .unwrap_err()
        .to_string();
    assert!(e.contains("internal domain"), "{e}");
}
