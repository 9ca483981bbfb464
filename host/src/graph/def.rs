//! The graph as umd holds it, whatever it was loaded from: named values, nodes in a valid
//! execution order, constants (initializers), declared inputs and outputs, opset imports.
//!
//! Owns the structural checks (unique producers, no undefined value, no cycle) and the
//! topological sort. Knows nothing of ONNX protobufs, plugins or devices.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::GraphError;
use crate::tensor::{AttrValue, Dtype, TensorDesc};

/// Most nodes one graph may have.
pub const MAX_NODES: usize = 100_000;

/// One dimension of a declared input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(u64),
    /// Known only at run time (ONNX `dim_param`, or nothing said).
    Dynamic(String),
}

/// A declared graph input or output. `dtype`/`dims` are `None` when the model does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueDecl {
    pub name: String,
    pub dtype: Option<Dtype>,
    pub dims: Option<Vec<Dim>>,
}

impl ValueDecl {
    /// `f32[N,3,224,224]`-style description for messages.
    pub fn describe(&self) -> String {
        let dt = self.dtype.map_or("?".to_string(), |d| d.to_string());
        match &self.dims {
            None => format!("{dt}[?]"),
            Some(dims) => {
                let d: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => n.to_string(),
                        Dim::Dynamic(p) if p.is_empty() => "?".into(),
                        Dim::Dynamic(p) => p.clone(),
                    })
                    .collect();
                format!("{dt}[{}]", d.join(","))
            }
        }
    }
}

/// One op of the graph. Input names are `""` where an optional input is absent; output names
/// `""` where an output is not wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: String,
    /// `""` = `ai.onnx`.
    pub domain: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: Vec<(String, AttrValue)>,
    /// Graph-valued attributes (If's branches, Loop's and Scan's body) by attribute name.
    pub subgraphs: Vec<(String, Subgraph)>,
}

/// A graph attribute: the body graph, whose declared inputs are its formal parameters followed
/// by the outer-scope values it reads (`captures`, fed by the node that runs it).
#[derive(Debug, Clone)]
pub struct Subgraph {
    pub graph: Arc<GraphDef>,
    /// Outer-scope values the body (or a body nested in it) reads, in the order they follow
    /// the formal inputs in `graph.inputs`.
    pub captures: Vec<String>,
}

impl Subgraph {
    /// A body graph as a subgraph: the values its nodes (or bodies nested in them) and outputs
    /// read that it does not define — outer-scope values — become its captures, appended to
    /// its inputs untyped (whatever the enclosing scope holds); then it is checked and sorted.
    pub fn new(mut def: GraphDef) -> Result<Subgraph, GraphError> {
        let mut defined: HashSet<&str> = def
            .inputs
            .iter()
            .map(|i| i.name.as_str())
            .chain(def.constants.keys().map(String::as_str))
            .collect();
        defined.extend(
            def.nodes
                .iter()
                .flat_map(|n| n.outputs.iter().map(String::as_str)),
        );
        let mut captures: Vec<String> = Vec::new();
        let mut captured: HashSet<&str> = HashSet::new();
        for name in def
            .nodes
            .iter()
            .flat_map(|n| n.reads())
            .chain(def.outputs.iter().map(|o| &o.name))
        {
            // a set, not the list: a node may read millions of outer names
            if !name.is_empty() && !defined.contains(name.as_str()) && captured.insert(name) {
                captures.push(name.clone());
            }
        }
        def.inputs.extend(captures.iter().map(|c| ValueDecl {
            name: c.clone(),
            dtype: None,
            dims: None,
        }));
        Ok(Subgraph {
            graph: Arc::new(def.sorted()?),
            captures,
        })
    }

    /// Number of formal inputs (those the running node feeds, before the captures).
    pub fn formal_inputs(&self) -> usize {
        self.graph.inputs.len() - self.captures.len()
    }
}

impl PartialEq for Subgraph {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.graph, &other.graph) && self.captures == other.captures
    }
}

impl Node {
    pub fn new(
        op: impl Into<String>,
        inputs: &[&str],
        outputs: &[&str],
        attributes: Vec<(String, AttrValue)>,
    ) -> Node {
        Node {
            name: String::new(),
            op: op.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attributes,
            subgraphs: Vec::new(),
        }
    }

    /// Every value the node reads: its present inputs, then what its subgraphs capture from
    /// the enclosing scopes.
    pub fn reads(&self) -> impl Iterator<Item = &String> {
        self.inputs
            .iter()
            .filter(|i| !i.is_empty())
            .chain(self.subgraphs.iter().flat_map(|(_, g)| g.captures.iter()))
    }

    /// The subgraph attribute `name`.
    pub fn subgraph(&self, name: &str) -> Option<&Subgraph> {
        self.subgraphs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, g)| g)
    }

    /// `node `name` (Op)` for messages; the first output names an unnamed node.
    pub fn label(&self) -> String {
        let name = if self.name.is_empty() {
            self.outputs.first().map_or("", |s| s.as_str())
        } else {
            &self.name
        };
        format!("`{name}` ({})", self.op)
    }
}

/// What a graph input or output holds when it is not a plain tensor (ONNX `sequence_type`,
/// `optional_type`): such a graph runs interpreted ([`super::interpret`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A sequence of tensors.
    Sequence,
    /// A tensor or nothing.
    OptionalTensor,
    /// A sequence or nothing.
    OptionalSequence,
    /// A map with keys of this dtype (int64 or string; the declaration's dtype is the values').
    Map(Dtype),
    /// A sequence of maps with keys of this dtype.
    MapSequence(Dtype),
}

/// A constant tensor: its description and little-endian bytes.
#[derive(Debug, Clone)]
pub struct Constant {
    pub desc: TensorDesc,
    pub data: Arc<Vec<u8>>,
}

/// A whole graph. Build one with the Rust API or load one with [`super::onnx`]; then
/// [`GraphDef::sorted`] checks it and orders its nodes.
#[derive(Debug, Clone, Default)]
pub struct GraphDef {
    pub name: String,
    pub nodes: Vec<Node>,
    /// Runtime inputs (initializers excluded).
    pub inputs: Vec<ValueDecl>,
    pub outputs: Vec<ValueDecl>,
    /// Initializers by name.
    pub constants: HashMap<String, Constant>,
    /// Opset imports: domain (`""` = `ai.onnx`) → version.
    pub opsets: HashMap<String, u32>,
    /// Inputs and outputs that are sequences or optionals, by name (the others are tensors).
    pub kinds: HashMap<String, ValueKind>,
}

impl GraphDef {
    /// Whether the graph runs node by node with the host deciding control flow and holding
    /// sequences ([`super::interpret`]) rather than as one compiled submission: a node runs a
    /// subgraph (If, Loop, Scan, SequenceMap), handles sequences or optionals, or an input or
    /// output is one.
    pub fn runs_interpreted(&self) -> bool {
        !self.kinds.is_empty()
            || self
                .nodes
                .iter()
                .any(|n| !n.subgraphs.is_empty() || super::interpret::host_runs(n))
    }

    /// The opset version a node of `domain` runs under (0 when the model imports none).
    pub fn opset(&self, domain: &str) -> u32 {
        let d = if domain == "ai.onnx" { "" } else { domain };
        self.opsets.get(d).copied().unwrap_or(0)
    }

    /// Checks the graph and returns it with its nodes in a valid execution order (stable:
    /// ready nodes run in their original order). Errors name the node.
    pub fn sorted(mut self) -> Result<GraphDef, GraphError> {
        if self.nodes.len() > MAX_NODES {
            return Err(GraphError::Limit(format!(
                "{} nodes; at most {MAX_NODES}",
                self.nodes.len()
            )));
        }
        let mut producer: HashMap<&str, usize> = HashMap::new();
        let mut defined: HashSet<&str> = HashSet::new();
        for i in &self.inputs {
            if self.constants.contains_key(&i.name) {
                continue;
            }
            if !defined.insert(&i.name) {
                return Err(GraphError::Malformed(format!(
                    "graph input `{}` is declared twice",
                    i.name
                )));
            }
        }
        defined.extend(self.constants.keys().map(String::as_str));
        for (n, node) in self.nodes.iter().enumerate() {
            for o in node.outputs.iter().filter(|o| !o.is_empty()) {
                if defined.contains(o.as_str()) || producer.insert(o, n).is_some() {
                    return Err(GraphError::Malformed(format!(
                        "node {}: value `{o}` is defined more than once",
                        node.label()
                    )));
                }
            }
        }
        // Kahn's algorithm over node → node edges.
        let mut pending = vec![0usize; self.nodes.len()];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            for i in node.reads() {
                if let Some(&p) = producer.get(i.as_str()) {
                    pending[n] += 1;
                    users[p].push(n);
                } else if !defined.contains(i.as_str()) {
                    return Err(GraphError::Undefined {
                        node: node.label(),
                        value: i.clone(),
                    });
                }
            }
        }
        let mut ready: std::collections::BTreeSet<usize> =
            (0..self.nodes.len()).filter(|&n| pending[n] == 0).collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(n) = ready.pop_first() {
            order.push(n);
            for &u in &users[n] {
                pending[u] -= 1;
                if pending[u] == 0 {
                    ready.insert(u);
                }
            }
        }
        if order.len() < self.nodes.len() {
            let stuck = (0..self.nodes.len()).find(|&n| pending[n] > 0).unwrap_or(0);
            return Err(GraphError::Cycle {
                node: self.nodes[stuck].label(),
            });
        }
        for o in &self.outputs {
            if !producer.contains_key(o.name.as_str()) && !defined.contains(o.name.as_str()) {
                return Err(GraphError::Malformed(format!(
                    "graph output `{}` is never produced",
                    o.name
                )));
            }
        }
        let mut nodes: Vec<Option<Node>> = self.nodes.drain(..).map(Some).collect();
        self.nodes = order.into_iter().filter_map(|n| nodes[n].take()).collect();
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str) -> ValueDecl {
        ValueDecl {
            name: name.into(),
            dtype: Some(Dtype::F32),
            dims: Some(vec![Dim::Fixed(2)]),
        }
    }

    fn graph(nodes: Vec<Node>) -> GraphDef {
        GraphDef {
            nodes,
            inputs: vec![decl("x")],
            outputs: vec![decl("y")],
            ..Default::default()
        }
    }

    #[test]
    fn sorts_out_of_order_nodes() {
        let g = graph(vec![
            Node::new("Relu", &["t"], &["y"], vec![]),
            Node::new("Neg", &["x"], &["t"], vec![]),
        ])
        .sorted()
        .unwrap();
        assert_eq!(g.nodes[0].op, "Neg");
        assert_eq!(g.nodes[1].op, "Relu");
    }

    #[test]
    fn cycles_and_undefined_values_name_the_node() {
        let e = graph(vec![
            Node::new("Add", &["x", "b"], &["a"], vec![]),
            Node::new("Relu", &["a"], &["b"], vec![]),
            Node::new("Neg", &["b"], &["y"], vec![]),
        ])
        .sorted()
        .unwrap_err();
        assert!(
            matches!(&e, GraphError::Cycle { node } if node.contains("Add")),
            "{e}"
        );
        let e = graph(vec![Node::new("Relu", &["nope"], &["y"], vec![])])
            .sorted()
            .unwrap_err();
        assert!(
            e.to_string().contains("`nope`") && e.to_string().contains("Relu"),
            "{e}"
        );
        let e = graph(vec![
            Node::new("Relu", &["x"], &["y"], vec![]),
            Node::new("Neg", &["x"], &["y"], vec![]),
        ])
        .sorted()
        .unwrap_err();
        assert!(e.to_string().contains("more than once"), "{e}");
    }
}
