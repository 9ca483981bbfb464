//! (ABI 1.6) Expansions from the plugins: for a node with graph attributes the host does not
//! run itself, the plugins serving its op on the device's target are asked, best first, for
//! an `expander.expand`; the first answer, checked and bounded, becomes a function body the
//! loader inlines ([`super::functions`]). Names no operator: which op expands is the plugins'
//! business.
//!
//! Owns the request built from the node and the conversion of the answer to ONNX protobuf; must
//! not touch a device.

use std::collections::HashSet;

use super::functions::{CALL_DOMAIN, Expander};
use super::interpret::SUBGRAPH_OPS;
use super::onnx::{self, proto};
use crate::Host;
use crate::plugin::convert::{attr_to_wit3, dtype_to_wit3, op_error, tensor_from_wit3};
use crate::plugin::wit;

/// Most nodes one expansion may have.
pub const MAX_EXPANSION_NODES: usize = 4096;
/// Longest value, op or domain name in an expansion.
pub const MAX_NAME_BYTES: usize = 256;

/// Asks the plugins of `host` (see the module doc).
pub struct PluginExpander<'a> {
    pub host: &'a Host,
}

impl Expander for PluginExpander<'_> {
    fn expand(
        &self,
        node: &proto::NodeProto,
        opset: u32,
        inputs: &[Option<Option<i32>>],
    ) -> Option<Result<proto::FunctionProto, String>> {
        // The host runs these subgraphs itself.
        if matches!(node.domain(), "" | "ai.onnx") && SUBGRAPH_OPS.contains(&node.op_type()) {
            return None;
        }
        let snapshot = self.host.registry().snapshot();
        let candidates = snapshot.candidates(node.op_type(), self.host.device().target());
        // Declines of "not mine" leave the node as it is (refused later as not served, unless
        // another plugin expands it); any other refusal or fault is the node's error.
        let mut declined = Vec::new();
        let mut failed = false;
        let mut request = None;
        for c in candidates.iter().filter(|c| c.plugin.has_expander()) {
            let req = match &request {
                Some(r) => r,
                None => match build_request(node, opset, inputs) {
                    Ok(r) => request.insert(r),
                    Err(e) => return Some(Err(e)),
                },
            };
            let label = c.plugin.label();
            match c.plugin.expand(req) {
                Some(Ok(Ok(e))) => {
                    return Some(
                        to_function(node, req, e).map_err(|m| format!("{label}'s expansion: {m}")),
                    );
                }
                Some(Ok(Err(e))) => {
                    let (unsupported, why) = declined_reason(e);
                    failed |= !unsupported;
                    declined.push(format!("{label}: {why}"));
                }
                Some(Err(fault)) => {
                    failed = true;
                    declined.push(format!("{label}: {fault}"));
                }
                None => {}
            }
        }
        if !failed {
            if !declined.is_empty() {
                tracing::debug!(node = node.name(), "no expansion: {}", declined.join("; "));
            }
            None
        } else {
            Some(Err(format!("no expansion: {}", declined.join("; "))))
        }
    }
}

/// Whether the plugin declined as "not mine", and its message.
fn declined_reason(e: wit::OpError) -> (bool, String) {
    use crate::plugin::convert::Declined;
    match op_error(e) {
        Declined::Unsupported(m) => (true, m),
        Declined::Invalid(m) | Declined::Internal(m) => (false, m),
    }
}

fn build_request(
    node: &proto::NodeProto,
    opset: u32,
    inputs: &[Option<Option<i32>>],
) -> Result<wit::ExpandRequest, String> {
    let mut attributes = Vec::new();
    let mut graphs = Vec::new();
    for a in &node.attribute {
        if a.g.is_some() || !a.graphs.is_empty() {
            graphs.push(a.name().to_string());
            continue;
        }
        let v = onnx::attribute(a, None).map_err(|e| format!("attribute `{}` {e}", a.name()))?;
        attributes.push(attr_to_wit3(a.name(), &v));
    }
    Ok(wit::ExpandRequest {
        op: node.op_type().to_string(),
        domain: match node.domain() {
            "ai.onnx" => String::new(),
            d => d.to_string(),
        },
        opset,
        inputs: inputs
            .iter()
            .map(|i| i.map(|t| t.and_then(onnx::dtype_of).map(dtype_to_wit3)))
            .collect(),
        outputs_wanted: node.output.iter().map(|o| !o.is_empty()).collect(),
        attributes,
        graphs,
    })
}

/// The expansion as a function body, checked: as many formals as the node has inputs and
/// outputs (at least), bounded sizes, graph runs only of the node's graph attributes.
fn to_function(
    node: &proto::NodeProto,
    req: &wit::ExpandRequest,
    e: wit::Expansion,
) -> Result<proto::FunctionProto, String> {
    if e.nodes.len() > MAX_EXPANSION_NODES {
        return Err(format!(
            "{} nodes; at most {MAX_EXPANSION_NODES}",
            e.nodes.len()
        ));
    }
    if e.inputs.len() != node.input.len() || e.outputs.len() != node.output.len() {
        return Err(format!(
            "{} inputs and {} outputs for a node with {} and {}",
            e.inputs.len(),
            e.outputs.len(),
            node.input.len(),
            node.output.len()
        ));
    }
    let long = |s: &String| s.len() > MAX_NAME_BYTES;
    if e.inputs.iter().chain(&e.outputs).any(long) {
        return Err(format!("a name over {MAX_NAME_BYTES} bytes"));
    }
    let formal_inputs: HashSet<&str> = e.inputs.iter().map(String::as_str).collect();
    let graphs: HashSet<&str> = req.graphs.iter().map(String::as_str).collect();
    let mut body = Vec::with_capacity(e.nodes.len());
    for n in e.nodes {
        if long(&n.op)
            || long(&n.domain)
            || n.inputs.iter().chain(&n.outputs).any(long)
            || n.attributes.iter().any(|a| long(&a.name))
        {
            return Err(format!("a name over {MAX_NAME_BYTES} bytes"));
        }
        if let Some(o) = n
            .outputs
            .iter()
            .find(|o| formal_inputs.contains(o.as_str()))
        {
            return Err(format!("a node writes `{o}`, one of its inputs"));
        }
        let mut p = proto::NodeProto {
            input: n.inputs,
            output: n.outputs,
            ..Default::default()
        };
        match n.graph {
            Some(g) => {
                if !graphs.contains(g.as_str()) {
                    return Err(format!(
                        "runs graph attribute `{g}`, which the node does not have"
                    ));
                }
                p.op_type = Some("Call".into());
                p.domain = Some(CALL_DOMAIN.into());
                p.attribute.push(proto::AttributeProto {
                    name: Some("body".into()),
                    r#type: Some(proto::attribute_proto::AttributeType::Graph as i32),
                    ref_attr_name: Some(g),
                    ..Default::default()
                });
            }
            None => {
                if n.domain == CALL_DOMAIN {
                    return Err(format!("uses umd's own domain `{CALL_DOMAIN}`"));
                }
                p.op_type = Some(n.op);
                p.domain = Some(n.domain);
                for a in n.attributes {
                    p.attribute.push(attribute_proto(a)?);
                }
            }
        }
        body.push(p);
    }
    Ok(proto::FunctionProto {
        name: Some(node.op_type().to_string()),
        domain: node.domain.clone(),
        input: e.inputs,
        output: e.outputs,
        node: body,
        ..Default::default()
    })
}

/// A 1.5 attribute as ONNX protobuf.
fn attribute_proto(a: wit::Attribute3) -> Result<proto::AttributeProto, String> {
    use proto::attribute_proto::AttributeType as T;
    let mut p = proto::AttributeProto {
        name: Some(a.name.clone()),
        ..Default::default()
    };
    let ty = match a.value {
        wit::AttrValue3::Int(v) => {
            p.i = Some(v);
            T::Int
        }
        wit::AttrValue3::Boolean(v) => {
            p.i = Some(v as i64);
            T::Int
        }
        wit::AttrValue3::Float(v) => {
            p.f = Some(v as f32);
            T::Float
        }
        wit::AttrValue3::Text(v) => {
            p.s = Some(v.into_bytes());
            T::String
        }
        wit::AttrValue3::Ints(v) => {
            p.ints = v;
            T::Ints
        }
        wit::AttrValue3::Floats(v) => {
            p.floats = v.into_iter().map(|x| x as f32).collect();
            T::Floats
        }
        wit::AttrValue3::Texts(v) => {
            p.strings = v.into_iter().map(String::into_bytes).collect();
            T::Strings
        }
        wit::AttrValue3::Tensor(t) => {
            let desc = tensor_from_wit3(t.desc);
            p.t = Some(
                onnx::tensor_proto(&desc, &t.data)
                    .map_err(|e| format!("attribute `{}`: {e}", a.name))?,
            );
            T::Tensor
        }
    };
    p.r#type = Some(ty as i32);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(graphs: &[&str]) -> wit::ExpandRequest {
        wit::ExpandRequest {
            op: "Op".into(),
            domain: String::new(),
            opset: 1,
            inputs: vec![Some(None)],
            outputs_wanted: vec![true],
            attributes: Vec::new(),
            graphs: graphs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn node_of(
        op: &str,
        graph: Option<&str>,
        attributes: Vec<wit::Attribute3>,
    ) -> wit::ExpansionNode {
        wit::ExpansionNode {
            op: op.into(),
            domain: String::new(),
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            attributes,
            graph: graph.map(String::from),
        }
    }

    fn expansion(nodes: Vec<wit::ExpansionNode>) -> wit::Expansion {
        wit::Expansion {
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            nodes,
        }
    }

    fn call_node() -> proto::NodeProto {
        proto::NodeProto {
            op_type: Some("Op".into()),
            input: vec!["a".into()],
            output: vec!["b".into()],
            ..Default::default()
        }
    }

    #[test]
    fn an_expansion_becomes_a_function_with_its_attributes_and_graph_runs() {
        let t = wit::TensorValue3 {
            desc: crate::plugin::convert::tensor_to_wit3(&crate::TensorDesc::new(
                "v",
                vec![2],
                crate::Dtype::I64,
            )),
            data: [3i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let attrs = vec![
            wit::Attribute3 {
                name: "axis".into(),
                value: wit::AttrValue3::Int(-1),
            },
            wit::Attribute3 {
                name: "value".into(),
                value: wit::AttrValue3::Tensor(t),
            },
            wit::Attribute3 {
                name: "on".into(),
                value: wit::AttrValue3::Boolean(true),
            },
        ];
        let e = expansion(vec![
            node_of("Softmax", None, attrs),
            node_of("", Some("g"), vec![]),
        ]);
        let f = to_function(&call_node(), &request(&["g"]), e).unwrap();
        assert_eq!(f.input, ["x"]);
        let a = &f.node[0].attribute;
        assert_eq!((a[0].name(), a[0].i()), ("axis", -1));
        let v = onnx::tensor(a[1].t.as_ref().unwrap(), None).unwrap();
        assert_eq!(v.desc.shape, [2]);
        assert_eq!(a[2].i(), 1, "booleans are ONNX ints");
        assert_eq!(
            (f.node[1].op_type(), f.node[1].domain()),
            ("Call", CALL_DOMAIN)
        );
        assert_eq!(f.node[1].attribute[0].ref_attr_name(), "g");
    }

    #[test]
    fn bad_expansions_are_refused_with_the_reason() {
        let err = |graphs: &[&str], e| to_function(&call_node(), &request(graphs), e).unwrap_err();
        let e = err(&[], expansion(vec![node_of("", Some("g"), vec![])]));
        assert!(
            e.contains("graph attribute `g`, which the node does not have"),
            "{e}"
        );
        let mut n = node_of("Call", None, vec![]);
        n.domain = CALL_DOMAIN.into();
        assert!(err(&[], expansion(vec![n])).contains("umd's own domain"));
        let many = (0..=MAX_EXPANSION_NODES)
            .map(|_| node_of("Relu", None, vec![]))
            .collect();
        assert!(err(&[], expansion(many)).contains("at most"));
        let mut short = expansion(vec![]);
        short.inputs.clear();
        assert!(err(&[], short).contains("0 inputs"));
        let mut writes_input = node_of("Relu", None, vec![]);
        writes_input.outputs = vec!["x".into()];
        assert!(err(&[], expansion(vec![writes_input])).contains("writes `x`, one of its inputs"));
        let long = node_of(&"R".repeat(MAX_NAME_BYTES + 1), None, vec![]);
        assert!(err(&[], expansion(vec![long])).contains("over 256 bytes"));
        let bad_tensor = wit::Attribute3 {
            name: "value".into(),
            value: wit::AttrValue3::Tensor(wit::TensorValue3 {
                desc: crate::plugin::convert::tensor_to_wit3(&crate::TensorDesc::new(
                    "v",
                    vec![4],
                    crate::Dtype::F32,
                )),
                data: vec![0; 3],
            }),
        };
        let e = err(
            &[],
            expansion(vec![node_of("Constant", None, vec![bad_tensor])]),
        );
        assert!(e.contains("3 bytes of data"), "{e}");
    }
}
