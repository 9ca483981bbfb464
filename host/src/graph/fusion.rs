//! Plugin-declared fusion of op chains (`umd_sdk::fused` is the plugin side): a plugin serving
//! an op named `A.B.…` in domain [`DOMAIN`] computes the chain A → B → … as one op. This module
//! reads the chains from the op names the registry serves (the host names no op), finds them in
//! a graph — each stage's one output read only by the next stage: never twice, never by a
//! body, never a graph output — and builds each chain's fused node (inputs, prefixed
//! attributes, the last stage's outputs). Compilation plans the fused node in the chain's place
//! and, when no plugin plans it, the longest served prefix of the chain it does plan (then the
//! rest one by one), else the chain's own nodes. Pure: no plugin call, no device.

use std::collections::HashMap;

use super::def::{GraphDef, Node};
use crate::tensor::AttrValue;

/// The domain of fused ops.
pub const DOMAIN: &str = "ai.umd.fused";
/// Most stages of a chain.
pub const MAX_STAGES: usize = 8;
/// Most chains read from the registry (the rest are ignored: a graph compiles as before).
const MAX_PATTERNS: usize = 256;
/// Longest op name of a stage.
const MAX_OP_LEN: usize = 64;

/// A chain some plugin serves: its op name and its stages' ONNX ops.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub op: String,
    pub stages: Vec<String>,
}

/// The chains among `ops` (op names served), longest first, each once; names that are not
/// 2..=[`MAX_STAGES`] identifiers joined by `.` are not chains.
pub fn patterns<'a>(ops: impl IntoIterator<Item = &'a str>) -> Vec<Pattern> {
    let ident = |s: &str| {
        !s.is_empty()
            && s.len() <= MAX_OP_LEN
            && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut out: Vec<Pattern> = Vec::new();
    for op in ops {
        let stages: Vec<String> = op.split('.').map(str::to_string).collect();
        if !(2..=MAX_STAGES).contains(&stages.len()) || !stages.iter().all(|s| ident(s)) {
            continue;
        }
        if out.iter().any(|p| p.op.eq_ignore_ascii_case(op)) {
            continue;
        }
        out.push(Pattern {
            op: op.to_string(),
            stages,
        });
        if out.len() == MAX_PATTERNS {
            break;
        }
    }
    // longest first; among equals, as served
    out.sort_by_key(|p| std::cmp::Reverse(p.stages.len()));
    out
}

/// A chain found in a graph: its nodes (indices into `def.nodes`, in order) and the fused
/// nodes to try, longest first: `(k, node)` computes the first `k` stages (the whole chain, then
/// each shorter prefix some plugin also serves).
#[derive(Debug, Clone)]
pub struct Chain {
    pub nodes: Vec<usize>,
    pub fused: Vec<(usize, Node)>,
}

/// The chains of `def` (nodes in execution order) for `patterns` (longest first): each node in
/// at most one, claimed in node order.
pub fn chains(def: &GraphDef, patterns: &[Pattern]) -> Vec<Chain> {
    if patterns.is_empty() {
        return Vec::new();
    }
    // every read of a value: node inputs, bodies' captures, graph outputs
    let mut uses: HashMap<&str, usize> = HashMap::new();
    let mut reader: HashMap<&str, usize> = HashMap::new();
    for (j, n) in def.nodes.iter().enumerate() {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            *uses.entry(i.as_str()).or_default() += 1;
            reader.insert(i.as_str(), j);
        }
        for (_, sg) in &n.subgraphs {
            for c in &sg.captures {
                *uses.entry(c.as_str()).or_default() += 1;
            }
        }
    }
    for o in &def.outputs {
        *uses.entry(o.name.as_str()).or_default() += 1;
    }
    let plain = |n: &Node| n.domain.is_empty() && n.subgraphs.is_empty();
    let mut claimed = vec![false; def.nodes.len()];
    let mut out = Vec::new();
    for (i, node) in def.nodes.iter().enumerate() {
        if claimed[i] || !plain(node) {
            continue;
        }
        'pattern: for p in patterns {
            if !p.stages[0].eq_ignore_ascii_case(&node.op) {
                continue;
            }
            let (mut nodes, mut links) = (vec![i], vec![0usize]);
            for stage in &p.stages[1..] {
                let cur = &def.nodes[*nodes.last().expect("stage 0")];
                // the stage's one output, read once, by the next stage
                let [v] = used(&cur.outputs) else {
                    continue 'pattern;
                };
                let Some(&j) = reader
                    .get(v.as_str())
                    .filter(|_| uses.get(v.as_str()) == Some(&1))
                else {
                    continue 'pattern;
                };
                let next = &def.nodes[j];
                if claimed[j] || !plain(next) || !next.op.eq_ignore_ascii_case(stage) {
                    continue 'pattern;
                }
                let link = next.inputs.iter().position(|x| x == v).expect("read by it");
                nodes.push(j);
                links.push(link);
            }
            let Some(whole) = fused_node(def, p, &nodes, &links) else {
                continue;
            };
            let mut fused = vec![(nodes.len(), whole)];
            for k in (2..nodes.len()).rev() {
                let prefix = &p.stages[..k];
                let served = patterns.iter().find(|q| {
                    q.stages.len() == k
                        && q.stages
                            .iter()
                            .zip(prefix)
                            .all(|(a, b)| a.eq_ignore_ascii_case(b))
                });
                if let Some(node) = served.and_then(|q| fused_node(def, q, &nodes[..k], &links)) {
                    fused.push((k, node));
                }
            }
            for &k in &nodes {
                claimed[k] = true;
            }
            out.push(Chain { nodes, fused });
            break;
        }
    }
    out
}

/// `outputs` without its trailing unwanted ones.
fn used(outputs: &[String]) -> &[String] {
    let n = outputs
        .iter()
        .rposition(|o| !o.is_empty())
        .map_or(0, |p| p + 1);
    &outputs[..n]
}

/// The fused node of `nodes` (stage `k` reading the previous one's output at input
/// `links[k]`); `None` when its inputs cannot be said exactly (a trailing absent input, an
/// attribute named like the convention's own).
fn fused_node(def: &GraphDef, p: &Pattern, nodes: &[usize], links: &[usize]) -> Option<Node> {
    let mut inputs = Vec::new();
    let mut attributes = Vec::new();
    let mut names = Vec::new();
    for (k, (&n, &link)) in nodes.iter().zip(links).enumerate() {
        let node = &def.nodes[n];
        let given = used(&node.inputs);
        let own: Vec<&String> = given
            .iter()
            .enumerate()
            .filter(|&(i, _)| k == 0 || i != link)
            .map(|(_, v)| v)
            .collect();
        attributes.push((format!("{k}.inputs"), AttrValue::Int(own.len() as i64)));
        if k > 0 {
            attributes.push((format!("{k}.link"), AttrValue::Int(link as i64)));
        }
        for (name, v) in &node.attributes {
            if name == "inputs" || name == "link" {
                return None;
            }
            attributes.push((format!("{k}.{name}"), v.clone()));
        }
        inputs.extend(own.into_iter().cloned());
        names.push(if node.name.is_empty() {
            used(&node.outputs).first().cloned().unwrap_or_default()
        } else {
            node.name.clone()
        });
    }
    if inputs.last().is_some_and(|i| i.is_empty()) {
        return None;
    }
    let last = &def.nodes[*nodes.last()?];
    // a last stage's unwanted trailing outputs are not asked for
    let mut name = names.join("+");
    if name.len() > 256 {
        name = format!("{}+…", names[0]);
    }
    Some(Node {
        name,
        op: p.op.clone(),
        domain: DOMAIN.into(),
        inputs,
        outputs: used(&last.outputs).to_vec(),
        attributes,
        subgraphs: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::def::ValueDecl;

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> Node {
        Node {
            name: name.into(),
            op: op.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attributes: vec![("alpha".into(), AttrValue::Int(2))],
            subgraphs: Vec::new(),
        }
    }

    fn graph(nodes: Vec<Node>, outputs: &[&str]) -> GraphDef {
        GraphDef {
            name: "g".into(),
            nodes,
            inputs: Vec::new(),
            outputs: outputs
                .iter()
                .map(|n| ValueDecl {
                    name: n.to_string(),
                    dtype: None,
                    dims: None,
                })
                .collect(),
            constants: HashMap::new(),
            opsets: HashMap::new(),
            kinds: HashMap::new(),
        }
    }

    fn pats() -> Vec<Pattern> {
        patterns([
            "Conv.Relu",
            "Add",
            "Conv.BatchNormalization.Add.Relu",
            "Conv.BatchNormalization",
            "Conv..Relu",
            "Conv.Bad Name",
            "conv.relu",
            "Conv+Relu",
        ])
    }

    #[test]
    fn patterns_are_chains_longest_first_each_once() {
        let p = pats();
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(p[0].stages.len(), 4);
        assert_eq!(p[1].op, "Conv.Relu");
    }

    #[test]
    fn a_chain_becomes_one_node_with_its_inputs_links_and_attributes() {
        let g = graph(
            vec![
                node("c", "Conv", &["x", "w", ""], &["a"]),
                node("skip", "Relu", &["x"], &["s"]),
                node(
                    "bn",
                    "BatchNormalization",
                    &["a", "sc", "b", "m", "v"],
                    &["n"],
                ),
                node("add", "Add", &["s", "n"], &["r"]),
                node("relu", "Relu", &["r"], &["y"]),
            ],
            &["y"],
        );
        let c = chains(&g, &pats());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].nodes, vec![0, 2, 3, 4]);
        // the whole chain, then the served prefix Conv.BatchNormalization (not Conv.BN.Add)
        let alternatives: Vec<(usize, &str)> = c[0]
            .fused
            .iter()
            .map(|(k, n)| (*k, n.op.as_str()))
            .collect();
        assert_eq!(
            alternatives,
            [
                (4, "Conv.BatchNormalization.Add.Relu"),
                (2, "Conv.BatchNormalization")
            ]
        );
        assert_eq!(c[0].fused[1].1.outputs, ["n"]);
        assert_eq!(c[0].fused[1].1.inputs, ["x", "w", "sc", "b", "m", "v"]);
        let f = &c[0].fused[0].1;
        assert_eq!(f.op, "Conv.BatchNormalization.Add.Relu");
        assert_eq!(f.domain, DOMAIN);
        assert_eq!(f.name, "c+bn+add+relu");
        assert_eq!(f.inputs, ["x", "w", "sc", "b", "m", "v", "s"]);
        assert_eq!(f.outputs, ["y"]);
        let attr = |n: &str| {
            f.attributes
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(attr("0.inputs"), Some(AttrValue::Int(2)));
        assert_eq!(attr("1.inputs"), Some(AttrValue::Int(4)));
        assert_eq!(attr("2.link"), Some(AttrValue::Int(1)));
        assert_eq!(attr("3.link"), Some(AttrValue::Int(0)));
        assert_eq!(attr("2.alpha"), Some(AttrValue::Int(2)));
    }

    #[test]
    fn values_read_elsewhere_break_the_chain() {
        let conv_relu = |extra: Vec<Node>, outputs: &[&str]| {
            let mut nodes = vec![
                node("c", "Conv", &["x", "w"], &["a"]),
                node("r", "Relu", &["a"], &["y"]),
            ];
            nodes.extend(extra);
            chains(&graph(nodes, outputs), &pats()).len()
        };
        assert_eq!(conv_relu(vec![], &["y"]), 1);
        // read twice, a graph output, read twice by one node
        assert_eq!(
            conv_relu(vec![node("o", "Neg", &["a"], &["z"])], &["y", "z"]),
            0
        );
        assert_eq!(conv_relu(vec![], &["y", "a"]), 0);
        let g = graph(
            vec![
                node("c", "Conv", &["x", "w"], &["a"]),
                node("r", "Add", &["a", "a"], &["y"]),
            ],
            &["y"],
        );
        assert!(chains(&g, &patterns(["Conv.Add"])).is_empty());
        // a stage in another domain, or with a second output used
        let mut other = node("r", "Relu", &["a"], &["y"]);
        other.domain = "com.vendor".into();
        let g = graph(vec![node("c", "Conv", &["x", "w"], &["a"]), other], &["y"]);
        assert!(chains(&g, &pats()).is_empty());
        let g = graph(
            vec![
                node("c", "Conv", &["x", "w"], &["a", "extra"]),
                node("r", "Relu", &["a"], &["y"]),
            ],
            &["y", "extra"],
        );
        assert!(chains(&g, &pats()).is_empty());
    }
}
