//! The steps of a graph that runs interpreted (it holds control flow, sequences or optionals):
//! its nodes split, in execution order, into runs of plain op nodes — what [`super::compile`]
//! plans whole: no graph attributes, no host op, no input that holds a sequence or an
//! optional — and the nodes the interpreter runs one by one. Each run of [`MIN_RUN`] or more
//! plain nodes becomes a graph of its own (its inputs: the values it reads from before it; its
//! outputs: the values read after it, by later nodes, their bodies or the graph's outputs;
//! the initializers it reads as its constants) that the model compiles once: one submission
//! per run of the segment instead of one per node, constants uploaded once, shape chains
//! folded. A node whose plan turns out to need a value computed at run time (NonZero's
//! input, a computed Reshape shape) is made `lone` and splits its run: it runs on its own with
//! its inputs' values, the nodes around it stay compiled.
//!
//! Owns the partition only; running the steps is [`super::interpret`]'s, caching them the
//! model's.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use super::def::{GraphDef, ValueDecl};
use super::interpret::host_runs;

/// Fewest consecutive plain nodes made one compiled segment.
pub const MIN_RUN: usize = 2;

/// One step of an interpreted graph.
pub(super) enum Step {
    /// Node `i` of the graph, run by the interpreter.
    Node(usize),
    /// Consecutive plain nodes run as one compiled graph.
    Segment(Segment),
}

/// Nodes `nodes` of a graph as a graph of their own.
pub(super) struct Segment {
    pub nodes: Range<usize>,
    /// Inputs untyped (whatever the enclosing graph holds), in first-read order.
    pub graph: Arc<GraphDef>,
    /// For each output of `graph`: the node (index in the enclosing graph) and output position
    /// that define it, so the interpreter binds it under the enclosing graph's own name.
    pub outputs: Vec<(usize, usize)>,
}

/// The steps of `def` (its nodes in order, as sorted); the nodes in `lone` (indices) run on
/// their own (their plan needs a value computed at run time: a segment cannot hold them).
pub(super) fn steps(def: &GraphDef, lone: &HashSet<usize>) -> Vec<Step> {
    let opaque = maybe_opaque(def);
    let plain = |j: usize| {
        let n = &def.nodes[j];
        !lone.contains(&j)
            && n.subgraphs.is_empty()
            && !host_runs(n)
            && n.inputs.iter().all(|i| !opaque.contains(i.as_str()))
    };
    let mut steps = Vec::new();
    let mut i = 0;
    while i < def.nodes.len() {
        let end = (i..def.nodes.len())
            .find(|&j| !plain(j))
            .unwrap_or(def.nodes.len());
        if end - i >= MIN_RUN
            && let Some(s) = segment(def, i..end)
        {
            steps.push(Step::Segment(s));
            i = end;
        } else {
            steps.push(Step::Node(i));
            i += 1;
        }
    }
    steps
}

/// Ops whose outputs are sequences or optionals.
const OPAQUE_OUTPUTS: [&str; 7] = [
    "SequenceEmpty",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceErase",
    "SplitToSequence",
    "SequenceMap",
    "Optional",
];

/// Values of `def` that hold a sequence, an optional or maps: inputs declared so, the outputs of
/// the ops that make them, and what Identity or OptionalGetElement passes on from them. (An If's
/// or Loop's outputs may be either: a segment reading one checks at run time.)
fn maybe_opaque(def: &GraphDef) -> HashSet<&str> {
    let mut opaque: HashSet<&str> = def.kinds.keys().map(String::as_str).collect();
    for n in &def.nodes {
        let makes = if n.domain.is_empty() {
            OPAQUE_OUTPUTS.contains(&n.op.as_str())
        } else {
            n.domain == super::maps::ML_DOMAIN && n.op == "ZipMap"
        };
        let passes = n.domain.is_empty()
            && matches!(n.op.as_str(), "Identity" | "OptionalGetElement")
            && n.inputs
                .first()
                .is_some_and(|i| opaque.contains(i.as_str()));
        if makes || passes {
            opaque.extend(n.outputs.iter().map(String::as_str));
        }
    }
    opaque
}

/// Nodes `nodes` of `def` as a graph; `None` when nothing they define is read after them
/// (the interpreter then runs them one by one, as before).
fn segment(def: &GraphDef, nodes: Range<usize>) -> Option<Segment> {
    let inside = &def.nodes[nodes.clone()];
    let mut defined: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut inputs: Vec<&str> = Vec::new();
    let mut constants = HashMap::new();
    for (offset, n) in inside.iter().enumerate() {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            if defined.contains_key(i.as_str()) || inputs.contains(&i.as_str()) {
                continue;
            }
            // A declared input shadows an initializer of the same name (as the interpreter's
            // environment does).
            match def.constants.get(i) {
                Some(c) if !def.inputs.iter().any(|d| d.name == *i) => {
                    constants.insert(i.clone(), c.clone());
                }
                _ => inputs.push(i),
            }
        }
        for (k, o) in n.outputs.iter().enumerate() {
            if !o.is_empty() {
                defined.insert(o, (nodes.start + offset, k));
            }
        }
    }
    let read_after = read_after(def, nodes.end);
    let mut outputs: Vec<(&str, (usize, usize))> = defined
        .into_iter()
        .filter(|(name, _)| read_after.contains(name))
        .collect();
    if outputs.is_empty() {
        return None;
    }
    outputs.sort_by_key(|&(_, at)| at);
    let untyped = |name: &str| ValueDecl {
        name: name.to_string(),
        dtype: None,
        dims: None,
    };
    let graph = GraphDef {
        name: format!("{} nodes {}..{}", def.name, nodes.start, nodes.end),
        nodes: inside.to_vec(),
        inputs: inputs.iter().map(|n| untyped(n)).collect(),
        outputs: outputs.iter().map(|(n, _)| untyped(n)).collect(),
        constants,
        opsets: def.opsets.clone(),
        kinds: HashMap::new(),
    };
    Some(Segment {
        nodes,
        graph: Arc::new(graph),
        outputs: outputs.into_iter().map(|(_, at)| at).collect(),
    })
}

/// The names read from node `from` on: node inputs, the outer values their bodies capture,
/// and the graph's outputs.
fn read_after(def: &GraphDef, from: usize) -> HashSet<&str> {
    let mut read: HashSet<&str> = def.outputs.iter().map(|o| o.name.as_str()).collect();
    for n in &def.nodes[from..] {
        read.extend(n.inputs.iter().map(String::as_str));
        for (_, body) in &n.subgraphs {
            read.extend(body.captures.iter().map(String::as_str));
        }
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::def::{Node, Subgraph};

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> Node {
        Node::new(op, inputs, outputs, vec![])
    }

    fn graph(nodes: Vec<Node>, inputs: &[&str], outputs: &[&str]) -> GraphDef {
        let decl = |n: &&str| ValueDecl {
            name: n.to_string(),
            dtype: None,
            dims: None,
        };
        GraphDef {
            nodes,
            inputs: inputs.iter().map(decl).collect(),
            outputs: outputs.iter().map(decl).collect(),
            ..Default::default()
        }
    }

    fn shape(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Step::Node(i) => format!("n{i}"),
                Step::Segment(s) => format!("s{}..{}", s.nodes.start, s.nodes.end),
            })
            .collect()
    }

    #[test]
    fn plain_runs_become_segments_around_control_flow() {
        let branch = Subgraph::new(graph(vec![node("Neg", &["b"], &["t"])], &[], &["t"])).unwrap();
        let mut cond = node("If", &["c"], &["d"]);
        cond.subgraphs = vec![
            ("then_branch".into(), branch.clone()),
            ("else_branch".into(), branch),
        ];
        let g = graph(
            vec![
                node("Neg", &["x"], &["a"]),
                node("Relu", &["a"], &["b"]),
                cond,
                node("Neg", &["d"], &["e"]),
                node("Abs", &["e"], &["y"]),
            ],
            &["x", "c"],
            &["y"],
        );
        let steps = steps(&g, &HashSet::new());
        assert_eq!(shape(&steps), ["s0..2", "n2", "s3..5"]);
        let Step::Segment(first) = &steps[0] else {
            unreachable!()
        };
        // `b` is read after the run only by the branch (a capture); `a` is not read after it.
        let names: Vec<_> = first.graph.outputs.iter().map(|o| &o.name).collect();
        assert_eq!(names, ["b"]);
        assert_eq!(first.outputs, [(1, 0)]);
        let inputs: Vec<_> = first.graph.inputs.iter().map(|o| &o.name).collect();
        assert_eq!(inputs, ["x"]);
    }

    #[test]
    fn values_that_may_be_sequences_keep_their_readers_out_of_segments() {
        let g = graph(
            vec![
                node("SequenceConstruct", &["x"], &["s"]),
                node("Identity", &["s"], &["t"]),
                node("SequenceLength", &["t"], &["n"]),
                node("Neg", &["n"], &["m"]),
                node("Abs", &["m"], &["y"]),
            ],
            &["x"],
            &["y"],
        );
        assert_eq!(
            shape(&steps(&g, &HashSet::new())),
            ["n0", "n1", "n2", "s3..5"]
        );
    }

    #[test]
    fn a_lone_node_splits_its_run() {
        let g = graph(
            vec![
                node("Neg", &["x"], &["a"]),
                node("Relu", &["a"], &["b"]),
                node("NonZero", &["b"], &["c"]),
                node("Transpose", &["c"], &["d"]),
                node("Neg", &["d"], &["y"]),
            ],
            &["x"],
            &["y"],
        );
        assert_eq!(shape(&steps(&g, &HashSet::new())), ["s0..5"]);
        assert_eq!(
            shape(&steps(&g, &HashSet::from([2]))),
            ["s0..2", "n2", "s3..5"]
        );
    }

    #[test]
    fn a_run_nothing_reads_afterwards_or_a_single_node_stays_interpreted() {
        let mut cond = node("If", &["c"], &["y"]);
        let branch = Subgraph::new(graph(vec![node("Neg", &["c"], &["t"])], &[], &["t"])).unwrap();
        cond.subgraphs = vec![
            ("then_branch".into(), branch.clone()),
            ("else_branch".into(), branch),
        ];
        let g = graph(
            vec![
                node("Neg", &["x"], &["dead1"]),
                node("Relu", &["dead1"], &["dead2"]),
                cond,
                node("Neg", &["y"], &["z"]),
            ],
            &["x", "c"],
            &["z"],
        );
        assert_eq!(shape(&steps(&g, &HashSet::new())), ["n0", "n1", "n2", "n3"]);
    }
}
