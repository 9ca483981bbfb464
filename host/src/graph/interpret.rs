//! Graphs with control flow (If, Loop, Scan, SequenceMap) or sequences and optionals: run step
//! by step, the host deciding which branch runs and how often a body repeats, and holding
//! sequences. A run of plain op nodes ([`super::segment`]) and a plain body run compiled, one
//! submission each; any other op node is translated and run on the model's device and stream
//! with its inputs' bytes (as constant folding runs a node). Values live on the host between
//! steps.
//!
//! Owns the ONNX semantics of If, Loop, Scan (opset 8 and 9+), the sequence ops and the
//! optional ops ([`HOST_OPS`]), and the bounds that keep a hostile model from running forever
//! or without end in memory ([`MAX_STEPS`], [`MAX_ITERATIONS`], [`MAX_BODY_RUNS`], [`MAX_SEQUENCE`],
//! [`MAX_COPIED_BYTES`], tensors the host makes within [`super::onnx::MAX_TENSOR_BYTES`]). Knows
//! nothing of protobufs or plugins.

use std::collections::HashMap;
use std::sync::Arc;

use super::compile::{constant_attr, node_request};
use super::def::{Dim, GraphDef, Node, Subgraph};
use super::maps::MapValue;
use super::segment::{Segment, Step};
use super::{GraphError, Tensor};
use crate::Host;
use crate::device::StreamId;
use crate::tensor::{AttrValue, Dtype, TensorDesc};

/// Most nodes one run may execute, every body iteration's included.
pub const MAX_STEPS: u64 = 1 << 20;
/// Most iterations of one Loop or Scan.
pub const MAX_ITERATIONS: u64 = 1 << 20;
/// Most tensors one sequence may hold.
pub const MAX_SEQUENCE: usize = 1 << 16;
/// Most body runs (If branches, Loop/Scan/SequenceMap iterations) of one run.
pub const MAX_BODY_RUNS: u64 = 1 << 22;
/// Most bytes of constants one run copies into the bodies it runs (each run of a body copies
/// its initializers).
pub const MAX_COPIED_BYTES: u64 = 16 << 30;

/// The ops whose graph attributes the host runs itself.
pub const SUBGRAPH_OPS: [&str; 4] = ["If", "Loop", "Scan", "SequenceMap"];

/// The ops of the `ai.onnx` domain the host runs itself (control flow, sequences, optionals):
/// a graph with one runs interpreted.
pub const HOST_OPS: [&str; 15] = [
    "If",
    "Loop",
    "Scan",
    "SequenceMap",
    "SequenceEmpty",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceErase",
    "SequenceAt",
    "SequenceLength",
    "ConcatFromSequence",
    "SplitToSequence",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
];

/// A value of an interpreted graph: a tensor, a sequence of tensors, a map or a sequence of
/// maps (the ONNX-ML ops' [`MapValue`]s), or an optional without a value (an optional with one
/// is its value).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Tensor(Arc<Tensor>),
    Sequence(Vec<Arc<Tensor>>),
    Map(Arc<MapValue>),
    Maps(Vec<Arc<MapValue>>),
    None,
}

/// Whether the host runs `node` itself: the control-flow, sequence and optional ops of
/// `ai.onnx` ([`HOST_OPS`]) and the map ops of `ai.onnx.ml` ([`super::maps::MAP_OPS`]).
pub fn host_runs(node: &Node) -> bool {
    let op = node.op.as_str();
    (node.domain.is_empty() && HOST_OPS.contains(&op))
        || (node.domain == super::maps::ML_DOMAIN && super::maps::MAP_OPS.contains(&op))
}

impl Value {
    pub(super) fn tensor(t: Tensor) -> Value {
        Value::Tensor(Arc::new(t))
    }
}

/// Where the compiled forms of plain bodies (no control flow, sequences or optionals inside)
/// are kept: one submission per run of such a body instead of one per node.
pub(super) trait Bodies {
    /// The compiled model of body `g`, or `None`: interpret it.
    fn compiled(&self, g: &Arc<GraphDef>) -> Option<Arc<super::Model>>;
    /// `g` could not run compiled (a plan-time value it computes, an op it plans differently):
    /// interpret it from now on.
    fn interpret_instead(&self, g: &Arc<GraphDef>);
    /// The steps of `def` ([`super::segment::steps`]), made once per graph.
    fn steps(&self, def: &GraphDef) -> Arc<Vec<Step>>;
    /// Node `node` of `def` needs a value computed at run time to be planned: it runs on its
    /// own from now on (the steps of `def` are made again, split around it).
    fn isolate(&self, def: &GraphDef, node: usize);
}

/// One run of a graph with control flow.
pub(super) struct Interpreter<'h> {
    host: &'h Host,
    stream: StreamId,
    steps: u64,
    /// Constant bytes copied into bodies so far.
    copied: u64,
    /// Bodies run so far.
    body_runs: u64,
    /// Command buffers submitted so far.
    submissions: usize,
    bodies: &'h dyn Bodies,
}

impl<'h> Interpreter<'h> {
    /// `bodies` hands out the compiled form of a plain body (If branch, Loop/Scan/SequenceMap
    /// body): one submission per iteration instead of one per node.
    pub fn new(host: &'h Host, stream: StreamId, bodies: &'h dyn Bodies) -> Self {
        Interpreter {
            host,
            stream,
            steps: 0,
            copied: 0,
            body_runs: 0,
            submissions: 0,
            bodies,
        }
    }

    /// Command buffers the runs so far submitted (a compiled segment or body: its own count).
    pub fn submissions(&self) -> usize {
        self.submissions
    }

    /// Runs `def` on `inputs` (its declared inputs, in order); returns its outputs in declared
    /// order, each named as declared.
    pub fn run(&mut self, def: &GraphDef, inputs: Vec<Value>) -> Result<Vec<Value>, GraphError> {
        let mut env: HashMap<&str, Value> = HashMap::new();
        for (decl, v) in def.inputs.iter().zip(inputs) {
            env.insert(&decl.name, v);
        }
        // a constant an input shadows is not copied, nor charged
        for (name, c) in &def.constants {
            if let std::collections::hash_map::Entry::Vacant(slot) = env.entry(name) {
                self.charge_copy(c.data.len())?;
                slot.insert(Value::tensor(Tensor {
                    desc: TensorDesc {
                        name: name.clone(),
                        ..c.desc.clone()
                    },
                    data: c.data.to_vec(),
                }));
            }
        }
        for step in self.bodies.steps(def).iter() {
            let nodes = match step {
                Step::Node(i) => *i..*i + 1,
                Step::Segment(s) => match self.segment(def, s, &env)? {
                    Some(outs) => {
                        for (&(n, k), v) in s.outputs.iter().zip(outs) {
                            env.insert(&def.nodes[n].outputs[k], v);
                        }
                        continue;
                    }
                    None => s.nodes.clone(),
                },
            };
            for node in &def.nodes[nodes] {
                let outs = self.node(def, node, &env)?;
                for (name, v) in node.outputs.iter().zip(outs) {
                    if !name.is_empty() {
                        env.insert(name, v);
                    }
                }
            }
        }
        def.outputs
            .iter()
            .map(|o| {
                let v = env.get(o.name.as_str()).ok_or_else(|| {
                    GraphError::Malformed(format!("graph output `{}` is never produced", o.name))
                })?;
                Ok(match v {
                    Value::Tensor(t) => {
                        let mut t = Tensor::clone(t);
                        t.desc.name = o.name.clone();
                        Value::tensor(t)
                    }
                    other => other.clone(),
                })
            })
            .collect()
    }

    /// Counts `n` steps of the run (nodes executed, body runs) against [`MAX_STEPS`].
    fn tick(&mut self, node: &Node, n: u64) -> Result<(), GraphError> {
        self.steps += n;
        if self.steps > MAX_STEPS {
            return Err(GraphError::Limit(format!(
                "the run executed more than {MAX_STEPS} nodes (loops included), the last {}",
                node.label()
            )));
        }
        Ok(())
    }

    /// Counts `bytes` the host copies for the run (a body's constants, each time it runs)
    /// against [`MAX_COPIED_BYTES`].
    fn charge_copy(&mut self, bytes: usize) -> Result<(), GraphError> {
        self.copied = self.copied.saturating_add(bytes as u64);
        if self.copied > MAX_COPIED_BYTES {
            return Err(GraphError::Limit(format!(
                "the run copied more than {MAX_COPIED_BYTES} bytes of constants into its \
                 (loop) bodies"
            )));
        }
        Ok(())
    }

    fn node(
        &mut self,
        def: &GraphDef,
        node: &Node,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        self.tick(node, 1)?;
        let onnx = node.domain.is_empty();
        match node.op.as_str() {
            "If" if onnx => self.run_if(node, env),
            "Loop" if onnx => self.run_loop(node, env),
            "Scan" if onnx => self.run_scan(def, node, env),
            "SequenceMap" if onnx => self.run_sequence_map(node, env),
            _ if !node.subgraphs.is_empty() => Err(GraphError::Unsupported(format!(
                "node {}: graph attributes are run for {} only, and for the ops a plugin \
                 expands (ABI 1.6)",
                node.label(),
                SUBGRAPH_OPS.join(", ")
            ))),
            "Constant" if onnx => Ok(vec![Value::tensor(constant_attr(node)?)]),
            op if onnx && HOST_OPS.contains(&op) => super::sequence::run(node, &inputs(env, node)?),
            _ if host_runs(node) => super::maps::run(node, &inputs(env, node)?),
            // A value passed on as it is (tensors, sequences, optionals): no launch.
            "Identity" if onnx => Ok(vec![first(env, node)?.unwrap_or(Value::None)]),
            _ => self.op(def, node, env),
        }
    }

    /// An op node: translated and run on its inputs' bytes.
    fn op(
        &mut self,
        def: &GraphDef,
        node: &Node,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        let present = node
            .inputs
            .iter()
            .filter(|i| !i.is_empty())
            .map(|i| tensor(node, i, &get(env, node, i)?))
            .collect::<Result<Vec<_>, _>>()?;
        let req = node_request(def, node, present.iter().map(|v| &v.desc));
        let data: Vec<Vec<u8>> = present.iter().map(|v| v.data.clone()).collect();
        self.submissions += 1;
        let outs = self
            .host
            .run_request_on(self.stream, req, &data)
            .map_err(|source| GraphError::Node {
                node: node.label(),
                source,
            })?;
        Ok(outs
            .into_iter()
            .map(|(desc, data)| Value::tensor(Tensor { desc, data }))
            .collect())
    }

    /// Runs `body` with its formal inputs `formal`, its captures read from `env`.
    fn body(
        &mut self,
        node: &Node,
        body: &Subgraph,
        mut formal: Vec<Value>,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        if formal.len() != body.formal_inputs() {
            return Err(GraphError::Malformed(format!(
                "node {}: its subgraph declares {} inputs; {} are given",
                node.label(),
                body.formal_inputs(),
                formal.len()
            )));
        }
        // body runs are bounded on their own: an empty body executes no node (nested empty
        // loops ran ~2^40 times), and a compiled one counts its nodes once per run
        self.body_runs += 1;
        if self.body_runs > MAX_BODY_RUNS {
            return Err(GraphError::Limit(format!(
                "the run ran its loop and branch bodies more than {MAX_BODY_RUNS} times, the \
                 last in {}",
                node.label()
            )));
        }
        for c in &body.captures {
            formal.push(get(env, node, c)?);
        }
        if let Some(outs) = self.compiled(&body.graph, &formal, |_| {})? {
            return Ok(outs);
        }
        self.run(&body.graph, formal)
    }

    /// Segment `s` of `def` run compiled on its inputs read from `env`; `None`: run its nodes
    /// one by one (this time; a node whose plan needs a computed value is isolated for later
    /// runs).
    fn segment(
        &mut self,
        def: &GraphDef,
        s: &Segment,
        env: &HashMap<&str, Value>,
    ) -> Result<Option<Vec<Value>>, GraphError> {
        let Some(given) = s
            .graph
            .inputs
            .iter()
            .map(|d| env.get(d.name.as_str()).cloned())
            .collect::<Option<Vec<_>>>()
        else {
            // A value is missing: node by node names the node that reads it.
            return Ok(None);
        };
        let bodies = self.bodies;
        self.compiled(&s.graph, &given, |e| {
            if let GraphError::NotConstant { node, .. } | GraphError::RunValues { node, .. } = e
                && let Some(i) = s.nodes.clone().find(|&i| def.nodes[i].label() == *node)
            {
                bodies.isolate(def, i);
            }
        })
    }

    /// Runs `graph` (a plain body or segment) as its compiled model on `values` (its declared
    /// inputs in order): `None` when it has none, a value is not a tensor, or it cannot be
    /// planned whole (then never tried again; `unplanned` sees why) — the caller runs it node
    /// by node, which reports (or avoids) the problem.
    fn compiled(
        &mut self,
        graph: &Arc<GraphDef>,
        values: &[Value],
        unplanned: impl FnOnce(&GraphError),
    ) -> Result<Option<Vec<Value>>, GraphError> {
        let Some(model) = self.bodies.compiled(graph) else {
            return Ok(None);
        };
        let Some(tensors) = values
            .iter()
            .zip(&graph.inputs)
            .map(|(v, decl)| match v {
                Value::Tensor(t) => {
                    let mut t = Tensor::clone(t);
                    t.desc.name = decl.name.clone();
                    Some(t)
                }
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        self.steps += graph.nodes.len() as u64;
        if self.steps > MAX_STEPS {
            return Err(GraphError::Limit(format!(
                "the run executed more than {MAX_STEPS} nodes (loops included)"
            )));
        }
        model.set_stream(self.stream);
        match model.run(&tensors) {
            Ok(out) => {
                self.submissions += out.stats.submissions;
                Ok(Some(out.outputs.into_iter().map(Value::tensor).collect()))
            }
            Err(e @ (GraphError::Run { .. } | GraphError::Device(_))) => Err(e),
            Err(e) => {
                self.bodies.interpret_instead(graph);
                unplanned(&e);
                Ok(None)
            }
        }
    }

    fn run_if(
        &mut self,
        node: &Node,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        let cond = node
            .inputs
            .first()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                GraphError::Malformed(format!("node {}: If needs a condition", node.label()))
            })?;
        let cond = scalar(node, "cond", &*tensor(node, cond, &get(env, node, cond)?)?)? != 0.0;
        let branch = if cond { "then_branch" } else { "else_branch" };
        let body = subgraph(node, branch)?;
        let outs = self.body(node, body, Vec::new(), env)?;
        if outs.len() < node.outputs.len() {
            return Err(GraphError::Malformed(format!(
                "node {}: `{branch}` has {} outputs; the node has {}",
                node.label(),
                outs.len(),
                node.outputs.len()
            )));
        }
        Ok(outs)
    }

    /// SequenceMap: the body once per element of the first input (a sequence); every other
    /// input is a sequence of the same length (element i is given) or a tensor (given whole).
    /// Each body output gathers into an output sequence.
    fn run_sequence_map(
        &mut self,
        node: &Node,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        let body = subgraph(node, "body")?;
        let given = inputs(env, node)?;
        let len = match given.first() {
            Some(Some(Value::Sequence(s))) => s.len(),
            _ => {
                return Err(GraphError::Input(format!(
                    "node {}: SequenceMap's first input must be a sequence",
                    node.label()
                )));
            }
        };
        let mut outs: Vec<Vec<Arc<Tensor>>> = vec![Vec::new(); body.graph.outputs.len()];
        for i in 0..len {
            let formal = given
                .iter()
                .map(|v| match v {
                    Some(Value::Sequence(s)) => {
                        s.get(i).cloned().map(Value::Tensor).ok_or_else(|| {
                            GraphError::Input(format!(
                                "node {}: its sequences differ in length",
                                node.label()
                            ))
                        })
                    }
                    Some(v) => Ok(v.clone()),
                    None => Ok(Value::None),
                })
                .collect::<Result<Vec<_>, _>>()?;
            for (k, v) in self.body(node, body, formal, env)?.iter().enumerate() {
                outs[k].push(tensor(node, "a SequenceMap body output", v)?);
            }
        }
        Ok(outs.into_iter().map(Value::Sequence).collect())
    }

    fn run_loop(
        &mut self,
        node: &Node,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        let body = subgraph(node, "body")?;
        let input = |k: usize| -> Result<Option<Value>, GraphError> {
            match node.inputs.get(k).filter(|i| !i.is_empty()) {
                Some(i) => get(env, node, i).map(Some),
                None => Ok(None),
            }
        };
        let trips = input(0)?
            .map(|m| scalar(node, "M", &*tensor(node, "M", &m)?))
            .transpose()?
            .map(|m| m as i64);
        let mut go = match input(1)? {
            Some(c) => scalar(node, "cond", &*tensor(node, "cond", &c)?)? != 0.0,
            None => true,
        };
        let mut carried = (2..node.inputs.len())
            .map(|k| {
                input(k)?.ok_or_else(|| {
                    GraphError::Malformed(format!(
                        "node {}: loop-carried input {k} is absent",
                        node.label()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let n = carried.len();
        let outputs = &body.graph.outputs;
        if outputs.len() < 1 + n {
            return Err(GraphError::Malformed(format!(
                "node {}: the body has {} outputs; a condition and {n} loop-carried values are \
                 needed",
                node.label(),
                outputs.len()
            )));
        }
        let k = outputs.len() - 1 - n;
        let mut scans: Vec<Vec<Arc<Tensor>>> = vec![Vec::new(); k];
        let mut held = 0u64;
        let mut i: i64 = 0;
        while go && trips.is_none_or(|m| i < m) {
            if i as u64 >= MAX_ITERATIONS {
                return Err(GraphError::Limit(format!(
                    "node {}: more than {MAX_ITERATIONS} iterations",
                    node.label()
                )));
            }
            let mut formal = vec![
                Value::tensor(value(Dtype::I64, vec![], &[i as f64])),
                Value::tensor(value(Dtype::Bool, vec![], &[1.0])),
            ];
            formal.extend(carried.iter().cloned());
            let outs = self.body(node, body, formal, env)?;
            let cond = tensor(node, "the body's condition", &outs[0])?;
            go = scalar(node, "the body's condition", &cond)? != 0.0;
            carried = outs[1..=n].to_vec();
            let slices = outs[1 + n..]
                .iter()
                .map(|v| tensor(node, "a scan output", v))
                .collect::<Result<Vec<_>, _>>()?;
            held = check_held(node, held, &slices)?;
            for (s, t) in scans.iter_mut().zip(slices) {
                s.push(t);
            }
            i += 1;
        }
        let mut result = carried;
        for (j, s) in scans.iter().enumerate() {
            result.push(Value::tensor(stack(node, s, 0, &outputs[1 + n + j])?));
        }
        Ok(result)
    }

    fn run_scan(
        &mut self,
        def: &GraphDef,
        node: &Node,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Value>, GraphError> {
        let body = subgraph(node, "body")?;
        let m = int_attr(node, "num_scan_inputs")?.ok_or_else(|| {
            GraphError::Malformed(format!(
                "node {}: Scan needs `num_scan_inputs`",
                node.label()
            ))
        })?;
        let legacy = def.opset("") != 0 && def.opset("") < 9;
        let first = if legacy { 1 } else { 0 };
        let inputs = node.inputs[first.min(node.inputs.len())..]
            .iter()
            .map(|i| tensor(node, i, &get(env, node, i)?))
            .collect::<Result<Vec<_>, _>>()?;
        let m = usize::try_from(m)
            .ok()
            .filter(|&m| m >= 1 && m <= inputs.len())
            .ok_or_else(|| {
                GraphError::Malformed(format!(
                    "node {}: num_scan_inputs {m} does not fit {} inputs",
                    node.label(),
                    inputs.len()
                ))
            })?;
        let n = inputs.len() - m;
        if !legacy {
            let outs = self.scan(node, body, &inputs, n, env)?;
            return Ok(outs.into_iter().map(Value::Tensor).collect());
        }
        // Opset 8: every input has a batch axis first; the scan runs per batch entry.
        if let Some(lens) = node.inputs.first().filter(|l| !l.is_empty()) {
            let lens = tensor(node, lens, &get(env, node, lens)?)?;
            let full = inputs[n].desc.shape.get(1).copied().unwrap_or(0) as f64;
            if crate::data::decode(lens.desc.dtype, &lens.data)
                .iter()
                .any(|&l| l != full)
            {
                return Err(GraphError::Unsupported(format!(
                    "node {}: Scan-8 with sequence_lens shorter than the sequence",
                    node.label()
                )));
            }
        }
        let batch = inputs[0].desc.shape.first().copied().unwrap_or(0);
        if batch > MAX_ITERATIONS {
            return Err(GraphError::Limit(format!(
                "node {}: a batch of {batch}, more than {MAX_ITERATIONS} iterations",
                node.label()
            )));
        }
        let mut per_batch: Vec<Vec<Arc<Tensor>>> = Vec::new();
        for b in 0..batch {
            let slices = inputs
                .iter()
                .map(|t| slice(node, t, 0, b).map(Arc::new))
                .collect::<Result<Vec<_>, _>>()?;
            per_batch.push(self.scan(node, body, &slices, n, env)?);
        }
        let count = body.graph.outputs.len();
        (0..count)
            .map(|j| {
                let parts: Vec<Arc<Tensor>> = per_batch.iter().map(|o| o[j].clone()).collect();
                stack(node, &parts, 0, &body.graph.outputs[j]).map(Value::tensor)
            })
            .collect()
    }

    /// Scan (opset 9 semantics) over `inputs`: `n` states, then the scan inputs.
    fn scan(
        &mut self,
        node: &Node,
        body: &Subgraph,
        inputs: &[Arc<Tensor>],
        n: usize,
        env: &HashMap<&str, Value>,
    ) -> Result<Vec<Arc<Tensor>>, GraphError> {
        let m = inputs.len() - n;
        let axes_of = |name: &str, count: usize, rank: &dyn Fn(usize) -> usize| {
            let given = ints_attr(node, name)?;
            (0..count)
                .map(|j| {
                    let a = given.as_ref().and_then(|g| g.get(j)).copied().unwrap_or(0);
                    let r = rank(j) as i64;
                    let a = if a < 0 { a + r } else { a };
                    (0..r.max(1))
                        .contains(&a)
                        .then_some(a as usize)
                        .ok_or_else(|| {
                            GraphError::Malformed(format!(
                                "node {}: `{name}` axis {a} is out of range",
                                node.label()
                            ))
                        })
                })
                .collect::<Result<Vec<_>, GraphError>>()
        };
        let dirs_of = |name: &str, count: usize| -> Result<Vec<bool>, GraphError> {
            let given = ints_attr(node, name)?
                .or(if name == "scan_input_directions" {
                    ints_attr(node, "directions")?
                } else {
                    None
                })
                .unwrap_or_default();
            Ok((0..count).map(|j| given.get(j) == Some(&1)).collect())
        };
        let in_axes = axes_of("scan_input_axes", m, &|j| inputs[n + j].desc.shape.len())?;
        let in_rev = dirs_of("scan_input_directions", m)?;
        let mut len = None;
        for (j, &a) in in_axes.iter().enumerate() {
            let d = inputs[n + j].desc.shape.get(a).copied().unwrap_or(0);
            if *len.get_or_insert(d) != d {
                return Err(GraphError::Malformed(format!(
                    "node {}: scan inputs have different lengths along their axes",
                    node.label()
                )));
            }
        }
        let len = len.unwrap_or(0);
        if len > MAX_ITERATIONS {
            return Err(GraphError::Limit(format!(
                "node {}: more than {MAX_ITERATIONS} iterations",
                node.label()
            )));
        }
        let k = body.graph.outputs.len().checked_sub(n).ok_or_else(|| {
            GraphError::Malformed(format!(
                "node {}: the body has fewer outputs than the {n} states",
                node.label()
            ))
        })?;
        let mut states: Vec<Arc<Tensor>> = inputs[..n].to_vec();
        let mut scans: Vec<Vec<Arc<Tensor>>> = vec![Vec::new(); k];
        let mut held = 0u64;
        for t in 0..len {
            let mut formal: Vec<Value> = states.iter().cloned().map(Value::Tensor).collect();
            for j in 0..m {
                let idx = if in_rev[j] { len - 1 - t } else { t };
                formal.push(Value::tensor(slice(node, &inputs[n + j], in_axes[j], idx)?));
            }
            let outs = self
                .body(node, body, formal, env)?
                .iter()
                .map(|v| tensor(node, "a Scan body output", v))
                .collect::<Result<Vec<_>, _>>()?;
            states = outs[..n].to_vec();
            held = check_held(node, held, &outs[n..])?;
            for (j, s) in scans.iter_mut().enumerate() {
                s.push(outs[n + j].clone());
            }
        }
        let out_rev = dirs_of("scan_output_directions", k)?;
        let ranks: Vec<usize> = (0..k)
            .map(|j| scans[j].first().map_or(1, |t| t.desc.shape.len() + 1))
            .collect();
        let out_axes = axes_of("scan_output_axes", k, &|j| ranks[j])?;
        let mut result = states;
        for (j, mut s) in scans.into_iter().enumerate() {
            if out_rev[j] {
                s.reverse();
            }
            result.push(Arc::new(stack(
                node,
                &s,
                out_axes[j],
                &body.graph.outputs[n + j],
            )?));
        }
        Ok(result)
    }
}

/// Adds the bytes of this iteration's scan outputs to `held`, refusing more than
/// [`super::onnx::MAX_TENSOR_BYTES`] in all (what the stacked outputs would take).
fn check_held(node: &Node, held: u64, slices: &[Arc<Tensor>]) -> Result<u64, GraphError> {
    let held = held + slices.iter().map(|s| s.data.len() as u64).sum::<u64>();
    if held > super::onnx::MAX_TENSOR_BYTES {
        return Err(GraphError::Limit(format!(
            "node {}: its scan outputs exceed {} bytes",
            node.label(),
            super::onnx::MAX_TENSOR_BYTES
        )));
    }
    Ok(held)
}

fn get(env: &HashMap<&str, Value>, node: &Node, name: &str) -> Result<Value, GraphError> {
    env.get(name).cloned().ok_or_else(|| GraphError::Undefined {
        node: node.label(),
        value: name.to_string(),
    })
}

/// Every input slot's value (`None` for an absent slot).
fn inputs(env: &HashMap<&str, Value>, node: &Node) -> Result<Vec<Option<Value>>, GraphError> {
    node.inputs
        .iter()
        .map(|i| {
            if i.is_empty() {
                Ok(None)
            } else {
                get(env, node, i).map(Some)
            }
        })
        .collect()
}

/// The first input's value, if present.
fn first(env: &HashMap<&str, Value>, node: &Node) -> Result<Option<Value>, GraphError> {
    match node.inputs.first().filter(|i| !i.is_empty()) {
        Some(i) => get(env, node, i).map(Some),
        None => Ok(None),
    }
}

/// `v` as a tensor (`what` names it in the error otherwise).
fn tensor(node: &Node, what: &str, v: &Value) -> Result<Arc<Tensor>, GraphError> {
    match v {
        Value::Tensor(t) => Ok(t.clone()),
        Value::Sequence(_) | Value::Maps(_) => Err(GraphError::Unsupported(format!(
            "node {}: `{what}` is a sequence where a tensor is needed",
            node.label()
        ))),
        Value::Map(_) => Err(GraphError::Unsupported(format!(
            "node {}: `{what}` is a map where a tensor is needed",
            node.label()
        ))),
        Value::None => Err(GraphError::Input(format!(
            "node {}: `{what}` is an optional without a value",
            node.label()
        ))),
    }
}

fn subgraph<'n>(node: &'n Node, name: &str) -> Result<&'n Subgraph, GraphError> {
    node.subgraph(name).ok_or_else(|| {
        GraphError::Malformed(format!(
            "node {}: graph attribute `{name}` is missing",
            node.label()
        ))
    })
}

/// Int attribute `name` of `node` (the host ops' attributes; `None` when not given).
pub(super) fn int_attr(node: &Node, name: &str) -> Result<Option<i64>, GraphError> {
    match node.attributes.iter().find(|(n, _)| n == name) {
        None => Ok(None),
        Some((_, AttrValue::Int(v))) => Ok(Some(*v)),
        Some(_) => Err(GraphError::NodeAttribute {
            node: node.label(),
            attribute: name.into(),
            reason: "must be an int".into(),
        }),
    }
}

fn ints_attr(node: &Node, name: &str) -> Result<Option<Vec<i64>>, GraphError> {
    match node.attributes.iter().find(|(n, _)| n == name) {
        None => Ok(None),
        Some((_, AttrValue::Ints(v))) => Ok(Some(v.clone())),
        Some(_) => Err(GraphError::NodeAttribute {
            node: node.label(),
            attribute: name.into(),
            reason: "must be a list of ints".into(),
        }),
    }
}

/// The single element of `t` as f64 (a condition or a trip count).
fn scalar(node: &Node, what: &str, t: &Tensor) -> Result<f64, GraphError> {
    // the element count first: a large tensor is not decoded to be refused
    let one = t.desc.shape.iter().all(|&d| d == 1);
    match one
        .then(|| crate::data::decode(t.desc.dtype, &t.data))
        .as_deref()
        .unwrap_or(&[])
    {
        [v] => Ok(*v),
        _ => Err(GraphError::Malformed(format!(
            "node {}: {what} is {}, not one element",
            node.label(),
            t.desc
        ))),
    }
}

fn value(dtype: Dtype, shape: Vec<u64>, values: &[f64]) -> Tensor {
    Tensor {
        desc: TensorDesc::new("", shape, dtype),
        data: crate::data::encode(dtype, values),
    }
}

/// Bytes per element of a value the host slices or joins (Loop, Scan, the sequence ops);
/// packed types and strings (their elements have no fixed size) are refused.
pub(super) fn elem_bytes(node: &Node, t: &TensorDesc) -> Result<usize, GraphError> {
    if t.dtype.is_packed() || t.dtype.is_string() {
        return Err(GraphError::Unsupported(format!(
            "node {}: {} values are not sliced or joined on the host",
            node.label(),
            t.dtype
        )));
    }
    Ok(t.dtype.size())
}

/// Bytes of a tensor of shape `dims` and `e`-byte elements the host makes itself (joins,
/// stacks, slices), refused past [`super::onnx::MAX_TENSOR_BYTES`] before any allocation.
pub(super) fn host_bytes(node: &Node, dims: &[u64], e: usize) -> Result<usize, GraphError> {
    dims.iter()
        .try_fold(e as u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= super::onnx::MAX_TENSOR_BYTES)
        .map(|n| n as usize)
        .ok_or_else(|| {
            GraphError::Limit(format!(
                "node {}: a tensor of shape {dims:?} × {e} bytes, more than {} bytes",
                node.label(),
                super::onnx::MAX_TENSOR_BYTES
            ))
        })
}

/// Element `idx` of `t` along `axis` (that axis removed).
fn slice(node: &Node, t: &Tensor, axis: usize, idx: u64) -> Result<Tensor, GraphError> {
    let shape = &t.desc.shape;
    if axis >= shape.len() || idx >= shape[axis] {
        return Err(GraphError::Malformed(format!(
            "node {}: cannot take element {idx} of axis {axis} of {}",
            node.label(),
            t.desc
        )));
    }
    let e = elem_bytes(node, &t.desc)?;
    let outer: u64 = crate::tensor::elements(&shape[..axis]);
    let len = shape[axis];
    let inner = crate::tensor::elements(&shape[axis + 1..]) as usize * e;
    let mut data = Vec::with_capacity(outer as usize * inner);
    for o in 0..outer {
        let at = ((o * len + idx) as usize) * inner;
        data.extend_from_slice(&t.data[at..at + inner]);
    }
    let mut s = shape.clone();
    s.remove(axis);
    Ok(Tensor {
        desc: TensorDesc::new("", s, t.desc.dtype),
        data,
    })
}

/// `parts` (same description) stacked along a new axis `axis` (ConcatFromSequence's
/// `new_axis` join); with no parts, an empty tensor shaped by the body's declaration of that
/// output where it says (else `[0]`).
fn stack(
    node: &Node,
    parts: &[Arc<Tensor>],
    axis: usize,
    decl: &super::def::ValueDecl,
) -> Result<Tensor, GraphError> {
    let Some(first) = parts.first() else {
        let mut shape = vec![0];
        if let Some(dims) = &decl.dims {
            shape.extend(dims.iter().map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Dynamic(_) => 0,
            }));
        }
        return Ok(Tensor {
            desc: TensorDesc::new("", shape, decl.dtype.unwrap_or(Dtype::F32)),
            data: Vec::new(),
        });
    };
    let axis = axis.min(first.desc.shape.len());
    super::sequence::concat(node, parts, axis as i64, true)
}
