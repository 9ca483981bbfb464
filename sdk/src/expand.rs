//! (ABI 1.6) Writing an [`Expansion`]: an op as a composition of other ops, which the host
//! inlines into the graph in place of the node (see [`crate::Plugin::expand`]). A [`Builder`]
//! names values for you; nodes may use any op a loaded plugin serves, and run the node's graph
//! attributes ([`Builder::graph`]).
//!
//! ```
//! use umd_sdk::expand::Builder;
//! // Y = Softmax(score_mod(X · 2))
//! let mut b = Builder::new(&["X"], &["Y"]);
//! let two = b.scalar_f32(2.0);
//! let scaled = b.op("Mul", &["X", &two], vec![]);
//! let modded = b.graph("score_mod", &[&scaled]);
//! b.op_into("Softmax", &[&modded], "Y", vec![umd_sdk::expand::int("axis", -1)]);
//! let e = b.finish();
//! assert_eq!(e.nodes.len(), 4);
//! assert_eq!(e.nodes[2].graph.as_deref(), Some("score_mod"));
//! ```

use crate::{AttrValueExt, AttributeExt, Dtype, Expansion, ExpansionNode, TensorDesc, TensorValue};

/// Builds an [`Expansion`] node by node.
pub struct Builder {
    inputs: Vec<String>,
    outputs: Vec<String>,
    nodes: Vec<ExpansionNode>,
    next: u32,
}

impl Builder {
    /// An expansion whose formal inputs and outputs (by position) are named `inputs`/`outputs`.
    pub fn new(inputs: &[&str], outputs: &[&str]) -> Self {
        Builder {
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            nodes: Vec::new(),
            next: 0,
        }
    }

    fn fresh(&mut self, hint: &str) -> String {
        self.next += 1;
        format!("{hint}_{}", self.next)
    }

    /// A node of `op` (default domain) reading `inputs`; its one output's new name.
    pub fn op(&mut self, op: &str, inputs: &[&str], attributes: Vec<AttributeExt>) -> String {
        let out = self.fresh(op);
        self.op_into(op, inputs, &out, attributes);
        out
    }

    /// A node of `op` (default domain) reading `inputs` and writing `output`.
    pub fn op_into(
        &mut self,
        op: &str,
        inputs: &[&str],
        output: &str,
        attributes: Vec<AttributeExt>,
    ) {
        self.nodes.push(ExpansionNode {
            op: op.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![output.to_string()],
            attributes,
            graph: None,
        });
    }

    /// Runs the node's graph attribute `name` on `inputs`; its (first) output's new name.
    pub fn graph(&mut self, name: &str, inputs: &[&str]) -> String {
        let out = self.fresh(name);
        self.nodes.push(ExpansionNode {
            op: String::new(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![out.clone()],
            attributes: Vec::new(),
            graph: Some(name.into()),
        });
        out
    }

    /// A `Constant` node holding `values` of `shape` as i64.
    pub fn const_i64(&mut self, values: &[i64], shape: &[u64]) -> String {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(Dtype::I64, shape, data)
    }

    /// A `Constant` f32 scalar.
    pub fn scalar_f32(&mut self, v: f32) -> String {
        self.constant(Dtype::F32, &[], v.to_le_bytes().to_vec())
    }

    fn constant(&mut self, dtype: Dtype, shape: &[u64], data: Vec<u8>) -> String {
        let value = TensorValue {
            desc: TensorDesc::new("value", shape.to_vec(), dtype),
            data,
        };
        let attr = AttributeExt {
            name: "value".into(),
            value: AttrValueExt::Tensor(value),
        };
        self.op("Constant", &[], vec![attr])
    }

    /// The expansion.
    pub fn finish(self) -> Expansion {
        Expansion {
            inputs: self.inputs,
            outputs: self.outputs,
            nodes: self.nodes,
        }
    }
}

/// An integer attribute.
pub fn int(name: &str, v: i64) -> AttributeExt {
    AttributeExt {
        name: name.into(),
        value: AttrValueExt::Int(v),
    }
}

/// An integer-list attribute.
pub fn ints(name: &str, v: &[i64]) -> AttributeExt {
    AttributeExt {
        name: name.into(),
        value: AttrValueExt::Ints(v.to_vec()),
    }
}
