//! Model-local functions (`ModelProto.functions`, ONNX IR ≥ 8), as exporters such as
//! onnxscript and PyTorch's write them, and plugin expansions (ABI 1.6) of nodes with graph
//! attributes the host does not run itself: every call of one is replaced by the function's
//! body before the graph is built. The call's values are bound to the function's formal inputs and
//! outputs, every other name of the body (and of subgraphs in it) is renamed apart per call,
//! attribute references (`ref_attr_name`) take the call's attribute, else the function's
//! default, else none; calls inside bodies and inside subgraphs are inlined in turn. A function
//! that calls itself, one defined twice, a call passing more values than the function takes, or
//! an expansion past [`MAX_NODES`] nodes is refused with its name. An expansion runs the
//! node's graph attributes through [`CALL_DOMAIN`]`::Call` nodes whose `body` refers to the
//! attribute: the graph is inlined there, its inputs bound to the call's, its own values renamed
//! apart, and what it reads from outside read from the node's scope.
//!
//! Owns only this rewrite of the decoded protobuf; knows nothing of plugins, shapes or devices.

use std::collections::{HashMap, HashSet};

use prost::Message;

use super::GraphError;
use super::def::MAX_NODES;
use super::onnx::{MAX_DEPTH, proto};

/// Most calls nested in one another (a function calling a function…).
pub const MAX_CALL_DEPTH: usize = 32;

/// Most protobuf bytes inlining may copy (bodies, the caller's attributes they refer to, graph
/// attributes run by expansions), all calls together.
pub const MAX_INLINED_BYTES: usize = 512 << 20;

/// The domain of the node an expansion runs a graph attribute with (op `Call`, attribute
/// `body`): umd's own, never a model's op.
pub const CALL_DOMAIN: &str = "umd.function";

/// Where expansions of nodes with graph attributes come from (the plugins, in the host).
pub trait Expander {
    /// The expansion of `node` — whose op no model-local function defines and which has graph
    /// attributes — as a function body (formal inputs and outputs by position), given the
    /// opset of its domain and, per input position, `None` when absent, else its ONNX element
    /// type where known at load. `None`: nobody offers one (the node stays as it is).
    fn expand(
        &self,
        node: &proto::NodeProto,
        opset: u32,
        inputs: &[Option<Option<i32>>],
    ) -> Option<Result<proto::FunctionProto, String>>;
}

/// No expansions (a graph parsed without a host).
pub struct NoExpansions;

impl Expander for NoExpansions {
    fn expand(
        &self,
        _: &proto::NodeProto,
        _: u32,
        _: &[Option<Option<i32>>],
    ) -> Option<Result<proto::FunctionProto, String>> {
        None
    }
}

/// A function's identity: (domain, name, overload), the domain `ai.onnx` spelled `""`.
type Key = (String, String, String);

fn domain(d: &str) -> String {
    if d == "ai.onnx" {
        String::new()
    } else {
        d.to_string()
    }
}

fn key_of_node(n: &proto::NodeProto) -> Key {
    (
        domain(n.domain()),
        n.op_type().to_string(),
        n.overload().to_string(),
    )
}

fn describe(k: &Key) -> String {
    let mut s = if k.0.is_empty() {
        k.1.clone()
    } else {
        format!("{}::{}", k.0, k.1)
    };
    if !k.2.is_empty() {
        s += &format!(" (overload `{}`)", k.2);
    }
    s
}

/// Inlines every call of a model-local function in `model`'s graph, and the expansions
/// `expander` offers for nodes with graph attributes; the functions' opset imports of domains
/// the model does not import are added to the model's.
pub fn inline(model: &mut proto::ModelProto, expander: &dyn Expander) -> Result<(), GraphError> {
    // umd's own `Call` is for expansions only: a model (or its functions) using it is refused.
    let model_nodes = model.graph.iter().flat_map(|g| &g.node);
    let function_nodes = model.functions.iter().flat_map(|f| &f.node);
    if uses_call_domain(model_nodes.chain(function_nodes), 0) {
        return Err(GraphError::Malformed(format!(
            "a node uses umd's internal domain `{CALL_DOMAIN}`"
        )));
    }
    let functions = std::mem::take(&mut model.functions);
    let mut by_key = HashMap::new();
    for f in &functions {
        let key = (
            domain(f.domain()),
            f.name().to_string(),
            f.overload().to_string(),
        );
        if f.name().is_empty() {
            return Err(GraphError::Malformed(
                "a model-local function has no name".into(),
            ));
        }
        if by_key.insert(key.clone(), f).is_some() {
            return Err(GraphError::Malformed(format!(
                "function {} is defined twice",
                describe(&key)
            )));
        }
        for o in &f.opset_import {
            let d = domain(o.domain());
            if !model.opset_import.iter().any(|m| domain(m.domain()) == d) {
                model.opset_import.push(o.clone());
            }
        }
    }
    let opsets = model
        .opset_import
        .iter()
        .map(|o| {
            (
                domain(o.domain()),
                o.version().clamp(0, u32::MAX as i64) as u32,
            )
        })
        .collect();
    let mut dtypes = HashMap::new();
    if let Some(g) = &model.graph {
        for v in g.input.iter().chain(&g.value_info).chain(&g.output) {
            let t = v.r#type.as_ref().and_then(|t| match &t.value {
                Some(proto::type_proto::Value::TensorType(t)) => t.elem_type,
                _ => None,
            });
            if let Some(t) = t {
                dtypes.insert(v.name().to_string(), t);
            }
        }
        for t in &g.initializer {
            dtypes.insert(t.name().to_string(), t.data_type());
        }
    }
    let mut inliner = Inliner {
        functions: by_key,
        calls: 0,
        nodes: 0,
        bytes: MAX_INLINED_BYTES,
        expander,
        opsets,
        dtypes,
    };
    if let Some(g) = model.graph.as_mut() {
        inliner.graph(g, &mut Vec::new(), 0)?;
    }
    Ok(())
}

/// Whether any of `nodes` (or a node in their subgraphs) is in [`CALL_DOMAIN`]. Protobuf
/// decoding bounds the nesting (prost's recursion limit).
fn uses_call_domain<'a>(nodes: impl Iterator<Item = &'a proto::NodeProto>, depth: usize) -> bool {
    nodes.into_iter().any(|n| {
        n.domain() == CALL_DOMAIN
            || (depth < 128
                && n.attribute.iter().any(|a| {
                    a.g.iter()
                        .chain(&a.graphs)
                        .any(|g| uses_call_domain(g.node.iter(), depth + 1))
                }))
    })
}

struct Inliner<'a> {
    functions: HashMap<Key, &'a proto::FunctionProto>,
    expander: &'a dyn Expander,
    /// The model's opset per domain.
    opsets: HashMap<String, u32>,
    /// Element types of the main graph's values known at load.
    dtypes: HashMap<String, i32>,
    /// Calls inlined so far (numbers each call's renamed values).
    calls: usize,
    /// Nodes emitted so far, in every graph.
    nodes: usize,
    /// Protobuf bytes inlining may still copy.
    bytes: usize,
}

impl Inliner<'_> {
    /// Inlines the calls in `g`'s nodes (and its subgraphs'); `stack` holds the functions
    /// being expanded around it.
    fn graph(
        &mut self,
        g: &mut proto::GraphProto,
        stack: &mut Vec<Key>,
        depth: usize,
    ) -> Result<(), GraphError> {
        if depth > MAX_DEPTH {
            return Err(GraphError::Limit(format!(
                "subgraphs nested more than {MAX_DEPTH} deep once functions are inlined"
            )));
        }
        let nodes = std::mem::take(&mut g.node);
        let mut out = Vec::with_capacity(nodes.len());
        for n in nodes {
            self.node(n, &mut out, stack, depth)?;
        }
        g.node = out;
        Ok(())
    }

    fn node(
        &mut self,
        mut n: proto::NodeProto,
        out: &mut Vec<proto::NodeProto>,
        stack: &mut Vec<Key>,
        depth: usize,
    ) -> Result<(), GraphError> {
        for a in &mut n.attribute {
            if let Some(g) = a.g.as_mut() {
                self.graph(g, stack, depth + 1)?;
            }
            for g in &mut a.graphs {
                self.graph(g, stack, depth + 1)?;
            }
        }
        let key = key_of_node(&n);
        if key.0 == CALL_DOMAIN {
            return self.graph_call(n, out, stack, depth);
        }
        let expansion;
        let f = match self.functions.get(&key) {
            Some(&f) => Some(f),
            None if has_graphs(&n) => {
                let inputs: Vec<Option<Option<i32>>> = n
                    .input
                    .iter()
                    .map(|i| (!i.is_empty()).then(|| self.dtypes.get(i).copied()))
                    .collect();
                let opset = self.opsets.get(&key.0).copied().unwrap_or(0);
                match self.expander.expand(&n, opset, &inputs) {
                    None => None,
                    Some(Ok(f)) => {
                        expansion = f;
                        Some(&expansion)
                    }
                    Some(Err(reason)) => {
                        return Err(GraphError::Unsupported(format!(
                            "node `{}` ({}): {reason}",
                            if n.name().is_empty() {
                                n.op_type()
                            } else {
                                n.name()
                            },
                            describe(&key)
                        )));
                    }
                }
            }
            None => None,
        };
        let Some(f) = f else {
            self.nodes += 1;
            if self.nodes > MAX_NODES {
                return Err(GraphError::Limit(format!(
                    "more than {MAX_NODES} nodes once model-local functions are inlined"
                )));
            }
            out.push(n);
            return Ok(());
        };
        if stack.contains(&key) {
            return Err(GraphError::Unsupported(format!(
                "function {} calls itself (recursion cannot be inlined)",
                describe(&key)
            )));
        }
        if stack.len() >= MAX_CALL_DEPTH {
            return Err(GraphError::Limit(format!(
                "function calls nested more than {MAX_CALL_DEPTH} deep (at {})",
                describe(&key)
            )));
        }
        self.count_call()?;
        let body = Binding::new(f, &n, self.calls)?.body(&mut self.bytes)?;
        stack.push(key);
        for b in body {
            self.node(b, out, stack, depth)?;
        }
        stack.pop();
        Ok(())
    }

    /// Counts one more inlined call, which the node budget covers too (a body of no nodes
    /// called exponentially often must stop as soon as one with nodes would).
    fn count_call(&mut self) -> Result<(), GraphError> {
        self.calls += 1;
        if self.calls.saturating_add(self.nodes) > MAX_NODES {
            return Err(GraphError::Limit(format!(
                "more than {MAX_NODES} nodes and calls once model-local functions are inlined"
            )));
        }
        Ok(())
    }

    /// A `Call` of an expansion: the graph in its `body` attribute inlined in its place.
    fn graph_call(
        &mut self,
        n: proto::NodeProto,
        out: &mut Vec<proto::NodeProto>,
        stack: &mut Vec<Key>,
        depth: usize,
    ) -> Result<(), GraphError> {
        let body = n.attribute.iter().find(|a| a.name() == "body");
        let Some(g) = body.and_then(|a| a.g.as_ref()) else {
            let why = match body {
                Some(_) => "a list of graphs, not one graph",
                None => "an attribute its node does not have",
            };
            return Err(GraphError::Unsupported(format!(
                "an expansion runs a graph attribute that is {why}"
            )));
        };
        // The initializers are copied into constants before the body's copy.
        let size: usize = g.initializer.iter().map(|t| t.encoded_len()).sum();
        self.bytes = self.bytes.checked_sub(size).ok_or_else(too_many_bytes)?;
        let f = graph_as_function(g);
        self.count_call()?;
        let mut binding = Binding::new(&f, &n, self.calls)?;
        // What the graph reads from outside is read from the node's scope, unrenamed.
        binding.local = Some(defined_in(g));
        for b in binding.body_of(f.node.iter().chain(&g.node), &mut self.bytes)? {
            self.node(b, out, stack, depth)?;
        }
        Ok(())
    }
}

fn too_many_bytes() -> GraphError {
    GraphError::Limit(format!(
        "inlining functions would copy more than {MAX_INLINED_BYTES} bytes"
    ))
}

fn has_graphs(n: &proto::NodeProto) -> bool {
    n.attribute
        .iter()
        .any(|a| a.g.is_some() || !a.graphs.is_empty())
}

/// The names a graph defines: inputs, initializers, node outputs.
fn defined_in(g: &proto::GraphProto) -> HashSet<String> {
    let mut local: HashSet<String> = HashSet::new();
    local.extend(g.input.iter().map(|v| v.name().to_string()));
    local.extend(g.initializer.iter().map(|t| t.name().to_string()));
    local.extend(
        g.sparse_initializer
            .iter()
            .filter_map(|s| s.values.as_ref())
            .map(|t| t.name().to_string()),
    );
    local.extend(g.node.iter().flat_map(|n| n.output.iter().cloned()));
    local
}

/// A graph attribute as a function: its inputs (less initializers) and outputs the formals;
/// its nodes are only those the graph adds to its own (run together with them): its
/// initializers as `Constant` nodes, an output that no node computes copied by `Identity`.
fn graph_as_function(g: &proto::GraphProto) -> proto::FunctionProto {
    let inits: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let computed: HashSet<&str> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    let mut node: Vec<proto::NodeProto> = g
        .initializer
        .iter()
        .map(|t| proto::NodeProto {
            op_type: Some("Constant".into()),
            output: vec![t.name().to_string()],
            attribute: vec![proto::AttributeProto {
                name: Some("value".into()),
                r#type: Some(proto::attribute_proto::AttributeType::Tensor as i32),
                t: Some(t.clone()),
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    let mut output = Vec::new();
    for (j, o) in g.output.iter().enumerate() {
        if computed.contains(o.name()) {
            output.push(o.name().to_string());
        } else {
            let copy = format!("{}#out{j}", o.name());
            node.push(proto::NodeProto {
                op_type: Some("Identity".into()),
                input: vec![o.name().to_string()],
                output: vec![copy.clone()],
                ..Default::default()
            });
            output.push(copy);
        }
    }
    proto::FunctionProto {
        name: Some(g.name().to_string()),
        input: g
            .input
            .iter()
            .filter(|v| !inits.contains(v.name()))
            .map(|v| v.name().to_string())
            .collect(),
        output,
        node,
        ..Default::default()
    }
}

/// One call of a function: how the body's names and attribute references resolve.
struct Binding<'a> {
    f: &'a proto::FunctionProto,
    call: &'a proto::NodeProto,
    /// Formal input and output names → the call's values.
    formals: HashMap<&'a str, String>,
    /// Prefix of every other name of this expansion.
    prefix: String,
    /// When set (a graph attribute inlined), names outside it are the enclosing scope's and
    /// stay as they are.
    local: Option<HashSet<String>>,
}

impl<'a> Binding<'a> {
    fn new(
        f: &'a proto::FunctionProto,
        call: &'a proto::NodeProto,
        number: usize,
    ) -> Result<Self, GraphError> {
        let who = if call.name().is_empty() {
            call.op_type()
        } else {
            call.name()
        };
        let too_many = |what: &str, given: usize, takes: usize| {
            GraphError::Malformed(format!(
                "node `{who}` passes {given} {what} to function `{}`, which has {takes}",
                f.name()
            ))
        };
        if call.input.len() > f.input.len() {
            return Err(too_many("inputs", call.input.len(), f.input.len()));
        }
        if call.output.len() > f.output.len() {
            return Err(too_many("outputs", call.output.len(), f.output.len()));
        }
        let prefix = format!("{who}/{}#{number}/", f.name());
        let mut formals = HashMap::new();
        for (i, formal) in f.input.iter().enumerate() {
            formals.insert(
                formal.as_str(),
                call.input.get(i).cloned().unwrap_or_default(),
            );
        }
        for (j, formal) in f.output.iter().enumerate() {
            let bound = match call.output.get(j) {
                Some(o) if !o.is_empty() => o.clone(),
                // An output the caller does not take still needs a name of its own.
                _ => format!("{prefix}{formal}"),
            };
            formals.insert(formal.as_str(), bound);
        }
        Ok(Binding {
            f,
            call,
            formals,
            prefix,
            local: None,
        })
    }

    /// A name of the body's own scope, bound.
    fn value(&self, name: &str) -> String {
        if name.is_empty() {
            return String::new();
        }
        match self.formals.get(name) {
            Some(v) => v.clone(),
            None if self.local.as_ref().is_some_and(|l| !l.contains(name)) => name.to_string(),
            None => format!("{}{name}", self.prefix),
        }
    }

    /// The body's nodes, renamed and with their attribute references resolved; their bytes
    /// are taken from `budget`, and the body refused once it is spent.
    fn body(&self, budget: &mut usize) -> Result<Vec<proto::NodeProto>, GraphError> {
        self.body_of(self.f.node.iter(), budget)
    }

    /// [`Binding::body`] over `nodes` (a graph attribute's, which are not the function's).
    fn body_of<'n>(
        &self,
        nodes: impl Iterator<Item = &'n proto::NodeProto>,
        budget: &mut usize,
    ) -> Result<Vec<proto::NodeProto>, GraphError> {
        let top = |name: &str| self.value(name);
        let mut out = Vec::new();
        for n in nodes {
            // The copy of a reference is the caller's attribute: count it before making it.
            let size = n.encoded_len().saturating_add(self.referred_bytes(n));
            *budget = budget.checked_sub(size).ok_or_else(too_many_bytes)?;
            out.push(self.renamed(n, &top)?);
        }
        Ok(out)
    }

    /// `n` with its values named by `name` and its attributes resolved.
    fn renamed(
        &self,
        n: &proto::NodeProto,
        name: &dyn Fn(&str) -> String,
    ) -> Result<proto::NodeProto, GraphError> {
        let mut m = n.clone();
        if !n.name().is_empty() {
            m.name = Some(format!("{}{}", self.prefix, n.name()));
        }
        m.input = n.input.iter().map(|v| name(v)).collect();
        m.output = n.output.iter().map(|v| name(v)).collect();
        m.attribute = Vec::with_capacity(n.attribute.len());
        for a in &n.attribute {
            if !a.ref_attr_name().is_empty() {
                if let Some(v) = self.reference(a) {
                    m.attribute.push(v);
                }
                continue;
            }
            let mut a = a.clone();
            if let Some(g) = a.g.as_mut() {
                self.nested(g, name)?;
            }
            for g in &mut a.graphs {
                self.nested(g, name)?;
            }
            m.attribute.push(a);
        }
        Ok(m)
    }

    /// The value of attribute reference `a`: the call's attribute of the referenced name, else
    /// the function's default, else none (the attribute is absent). The value is the caller's
    /// as is: a subgraph in it reads the caller's scope, not the body's.
    fn reference(&self, a: &proto::AttributeProto) -> Option<proto::AttributeProto> {
        let mut v = self.referred(a)?.clone();
        v.name = a.name.clone();
        v.ref_attr_name = None;
        Some(v)
    }

    /// Bytes of the caller's attributes that `n`'s references (in its subgraphs too) copy.
    fn referred_bytes(&self, n: &proto::NodeProto) -> usize {
        n.attribute
            .iter()
            .map(|a| {
                if !a.ref_attr_name().is_empty() {
                    return self.referred(a).map_or(0, |r| r.encoded_len());
                }
                a.g.iter()
                    .chain(&a.graphs)
                    .flat_map(|g| &g.node)
                    .map(|m| self.referred_bytes(m))
                    .fold(0usize, usize::saturating_add)
            })
            .fold(0, usize::saturating_add)
    }

    /// The attribute reference `a` refers to: the call's, else the function's default.
    fn referred(&self, a: &proto::AttributeProto) -> Option<&'a proto::AttributeProto> {
        let wanted = a.ref_attr_name();
        self.call
            .attribute
            .iter()
            .find(|c| c.name() == wanted)
            .or_else(|| self.f.attribute_proto.iter().find(|d| d.name() == wanted))
    }

    /// A subgraph inside the body: every name it defines is renamed apart (subgraphs may not
    /// shadow outer names); every name it reads from outside is named as `outer` names it.
    fn nested(
        &self,
        g: &mut proto::GraphProto,
        outer: &dyn Fn(&str) -> String,
    ) -> Result<(), GraphError> {
        let local = defined_in(g);
        let prefix = &self.prefix;
        let name = |v: &str| -> String {
            if v.is_empty() {
                String::new()
            } else if local.contains(v) {
                format!("{prefix}{v}")
            } else {
                outer(v)
            }
        };
        for v in g
            .input
            .iter_mut()
            .chain(g.output.iter_mut())
            .chain(g.value_info.iter_mut())
        {
            v.name = Some(name(v.name()));
        }
        for t in &mut g.initializer {
            t.name = Some(name(t.name()));
        }
        for s in &mut g.sparse_initializer {
            if let Some(t) = s.values.as_mut() {
                t.name = Some(name(t.name()));
            }
        }
        let nodes = std::mem::take(&mut g.node);
        g.node = nodes
            .iter()
            .map(|n| self.renamed(n, &name))
            .collect::<Result<_, _>>()?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "functions_tests.rs"]
mod tests;
