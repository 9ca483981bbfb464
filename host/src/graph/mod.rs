//! Graphs: whole models run as one batched submission.
//!
//! A [`Model`] is a checked, topologically sorted [`GraphDef`] (loaded from ONNX by [`onnx`] or
//! built through the Rust API) bound to a [`Host`]. Each input-shape signature is compiled once
//! ([`compile`]: plugins plan every node, constant subgraphs fold, reshapes become views,
//! intermediates are placed by liveness) and cached; a run writes the inputs, submits the fused
//! command buffers back to back on one stream, waits once and reads the outputs.
//!
//! ```no_run
//! use std::sync::Arc;
//! use umd::graph::{Model, Tensor};
//! let host = Arc::new(umd::Host::builder().build()?);
//! let model = Model::from_onnx_file(host, "mlp.onnx".as_ref())?;
//! let x = Tensor { desc: "x:f32[1,4]".parse().unwrap(), data: vec![0; 16] };
//! let run = model.run(&[x])?;
//! println!("{} outputs, peak {} bytes", run.outputs.len(), run.stats.peak_bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod compile;
pub mod def;
mod expand;
mod functions;
pub mod fuse;
mod fusion;
mod interpret;
mod maps;
pub mod onnx;
mod place;
mod segment;
mod sequence;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use thiserror::Error;

use crate::Host;
use crate::device::{BufferId, DeviceError, StreamId};
use crate::error::status;
use crate::tensor::TensorDesc;
pub use compile::PlanStats;
pub use def::{Constant, Dim, GraphDef, Node, Subgraph, ValueDecl, ValueKind};
pub use interpret::Value;
pub use interpret::{MAX_ITERATIONS, MAX_STEPS};
pub use maps::{MAX_MAPS, MapValue};

/// Whether ONNX op `op` draws random numbers (RandomUniform, RandomNormal, their `Like` forms,
/// Bernoulli, Multinomial): its outputs differ between runs unless seeded, so the graph never
/// folds it and `umd check` seeds it before comparing devices.
pub fn draws_random(op: &str) -> bool {
    // op names match case-insensitively, as the registry looks them up
    op.get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("random"))
        || op.eq_ignore_ascii_case("Bernoulli")
        || op.eq_ignore_ascii_case("Multinomial")
}

/// Compiled signatures kept per model.
pub const MAX_SIGNATURES: usize = 8;
/// Largest graph input (in elements) whose value may be planned as a constant when an op needs
/// it at plan time (Expand's or Reshape's shape given as an input): each value is a signature.
pub const MAX_VALUE_INPUT: u64 = 16;

/// What a plan is compiled for: every input's description, and the bytes of the inputs whose
/// value is planned as a constant (the others `None`).
type Signature = (Vec<TensorDesc>, Vec<Option<Vec<u8>>>);

/// A tensor by value: description (its name is the graph value's) and little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub desc: TensorDesc,
    pub data: Vec<u8>,
}

/// Why a graph could not be loaded, compiled or run. Errors about one node name it.
#[derive(Debug, Error)]
pub enum GraphError {
    #[error("malformed model: {0}")]
    Malformed(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("limit exceeded: {0}")]
    Limit(String),
    #[error("node {node}: attribute `{attribute}` {reason}")]
    NodeAttribute {
        node: String,
        attribute: String,
        reason: String,
    },
    #[error("cycle: node {node} depends on its own output")]
    Cycle { node: String },
    #[error(
        "node {node}: input `{value}` is not defined (not a graph input, initializer or node output)"
    )]
    Undefined { node: String, value: String },
    #[error(
        "node {node}: input `{input}` must be a constant (its value is needed to plan the op) but is computed at run time"
    )]
    NotConstant { node: String, input: String },
    /// Every plugin declined the node (`source`) while an input of it is computed at run time:
    /// run on host values, with every input's value, it may plan (a plan made from its inputs'
    /// values: string results of numbers). The model runs interpreted, that node on its own.
    #[error("node {node}: {source}")]
    RunValues {
        node: String,
        #[source]
        source: Box<crate::Error>,
    },
    #[error("node {node}: {source}")]
    Node {
        node: String,
        #[source]
        source: crate::Error,
    },
    #[error("input: {0}")]
    Input(String),
    #[error("node {node} failed on the device: {source}")]
    Run {
        node: String,
        #[source]
        source: DeviceError,
    },
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("command buffer: {0}")]
    CommandBuffer(#[from] crate::cmdbuf::CmdError),
    #[error("{0}")]
    Io(String),
}

impl GraphError {
    /// The protocol status code (2: an op or feature is not served; 3: invalid model or input).
    pub fn status(&self) -> i32 {
        match self {
            GraphError::Unsupported(_) | GraphError::NodeAttribute { .. } => status::UNSUPPORTED,
            GraphError::Node { source, .. } => source.status(),
            GraphError::RunValues { source, .. } => source.status(),
            GraphError::Run { .. } | GraphError::Device(_) => status::DEVICE,
            GraphError::CommandBuffer(_) => status::INVALID_COMMAND_BUFFER,
            GraphError::Io(_) => status::INTERNAL,
            _ => status::INVALID_INPUT,
        }
    }
}

/// A declared input of a device-bound run ([`Model::run_on_device`]): bytes, or a buffer of the
/// model's device holding the value (`desc` says what it holds; its name is the input's).
#[derive(Debug, Clone, Copy)]
pub enum RunInput<'a> {
    Value(&'a Tensor),
    Buffer {
        desc: &'a TensorDesc,
        buffer: BufferId,
    },
}

impl RunInput<'_> {
    fn desc(&self) -> &TensorDesc {
        match self {
            RunInput::Value(t) => &t.desc,
            RunInput::Buffer { desc, .. } => desc,
        }
    }
}

/// One run's outputs (in declared order) and the plan's figures.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub outputs: Vec<Tensor>,
    pub stats: PlanStats,
}

/// One row of a profile: a node with launches and its wall time run alone.
#[derive(Debug, Clone)]
pub struct NodeTime {
    pub node: String,
    pub op: String,
    pub launches: usize,
    pub micros: f64,
}

/// A loaded graph bound to a host.
pub struct Model {
    host: Arc<Host>,
    def: GraphDef,
    /// Initializers on the device, uploaded once.
    uploaded: Mutex<HashMap<String, BufferId>>,
    /// Compiled plans by input signature, most recently used last.
    compiled: Mutex<Vec<(Signature, Arc<compile::Compiled>)>>,
    /// Declared inputs (by index) whose value an op needs at plan time: learnt from the first
    /// compile that needs one, then part of the signature.
    by_value: Mutex<Vec<bool>>,
    /// The device stream runs are submitted on (default: the device's default stream).
    stream: std::sync::atomic::AtomicU32,
    /// Plain subgraphs (no control flow inside) compiled as models, by their graph's address
    /// (stable: the graph lives as long as this model); `None`: the body is interpreted.
    bodies: Mutex<HashMap<usize, Option<Arc<Model>>>>,
    /// The steps of the interpreted graphs (this model's own: key 0; bodies: by the graph's
    /// address), made on first run.
    steps: Mutex<HashMap<usize, Arc<Vec<segment::Step>>>>,
    /// Nodes (by graph key, as `steps`) whose plan needs a value computed at run time: each
    /// runs on its own, splitting its segment.
    lone: Mutex<HashMap<usize, std::collections::HashSet<usize>>>,
    /// Steps replaced by a split, kept while the model lives: `bodies` knows their segment
    /// graphs by address, which a new graph must never reuse. At most one per node.
    retired: Mutex<Vec<Arc<Vec<segment::Step>>>>,
    /// Whether the graph runs interpreted: [`GraphDef::runs_interpreted`] at load, or since a
    /// compile found an op whose plan needs a value computed at run time (NonZero's input, a
    /// computed Reshape shape…): then the nodes around it still run as compiled segments.
    interpreted: std::sync::atomic::AtomicBool,
    /// A plain body or segment of another model: it never turns interpreted itself (its
    /// parent splits it around the node that needs a computed value).
    nested: bool,
}

impl Drop for Model {
    fn drop(&mut self) {
        self.compiled.lock().clear();
        for (_, b) in self.uploaded.lock().drain() {
            let _ = self.host.device().free(b);
        }
    }
}

impl Model {
    /// Loads an ONNX model file; external data is read from its folder.
    pub fn from_onnx_file(host: Arc<Host>, path: &Path) -> Result<Model, GraphError> {
        let meta = std::fs::metadata(path)
            .map_err(|e| GraphError::Io(format!("{}: {e}", path.display())))?;
        if meta.len() > onnx::MAX_MODEL_BYTES as u64 {
            return Err(GraphError::Limit(format!(
                "{}: {} bytes; at most {}",
                path.display(),
                meta.len(),
                onnx::MAX_MODEL_BYTES
            )));
        }
        let bytes =
            std::fs::read(path).map_err(|e| GraphError::Io(format!("{}: {e}", path.display())))?;
        Self::from_onnx_bytes(host, &bytes, path.parent())
    }

    /// Loads ONNX model bytes; `base_dir` holds external data files (`None`: refused).
    pub fn from_onnx_bytes(
        host: Arc<Host>,
        bytes: &[u8],
        base_dir: Option<&Path>,
    ) -> Result<Model, GraphError> {
        let def = onnx::parse_with(bytes, base_dir, &expand::PluginExpander { host: &host })?;
        Self::new(host, def)
    }

    /// A model from a graph built through the Rust API.
    pub fn new(host: Arc<Host>, def: GraphDef) -> Result<Model, GraphError> {
        let def = def.sorted()?;
        let n_inputs = def.inputs.len();
        let interpreted = def.runs_interpreted();
        let stream = host.device().default_stream().0.into();
        Ok(Model {
            stream,
            host,
            def,
            uploaded: Mutex::new(HashMap::new()),
            compiled: Mutex::new(Vec::new()),
            by_value: Mutex::new(vec![false; n_inputs]),
            bodies: Mutex::new(HashMap::new()),
            steps: Mutex::new(HashMap::new()),
            lone: Mutex::new(HashMap::new()),
            retired: Mutex::new(Vec::new()),
            interpreted: interpreted.into(),
            nested: false,
        })
    }

    /// Submits later runs on `stream` of the model's device (the service puts each client's
    /// models on that client's own stream, so one client's runs never queue behind another's).
    pub fn set_stream(&self, stream: StreamId) {
        self.stream
            .store(stream.0, std::sync::atomic::Ordering::Relaxed);
    }

    fn stream(&self) -> StreamId {
        StreamId(self.stream.load(std::sync::atomic::Ordering::Relaxed))
    }

    pub fn inputs(&self) -> &[ValueDecl] {
        &self.def.inputs
    }
    pub fn outputs(&self) -> &[ValueDecl] {
        &self.def.outputs
    }
    pub fn graph(&self) -> &GraphDef {
        &self.def
    }

    /// Runs the model on `inputs` (one per declared input, by name, any order).
    pub fn run(&self, inputs: &[Tensor]) -> Result<RunOutput, GraphError> {
        let given: Vec<_> = inputs
            .iter()
            .map(|t| (&t.desc, Some(&t.data[..])))
            .collect();
        let Some((plan, data)) = self.compiled_for(&given)? else {
            let (outputs, submissions) = self.interpret(&given)?;
            return Ok(RunOutput {
                outputs,
                stats: self.interpreted_stats(submissions),
            });
        };
        let outputs = plan.run(self.stream(), &data)?;
        Ok(RunOutput {
            outputs,
            stats: plan.stats.clone(),
        })
    }

    /// A model with control flow (If, Loop, Scan) runs node by node on host values: the inputs
    /// are checked as for a compiled run, then [`interpret::Interpreter`] runs the graph on the
    /// model's stream. Returns the outputs in declared order (all tensors, or an error naming
    /// the output that is not: see [`Model::run_values`]) and the command buffers submitted.
    fn interpret(
        &self,
        given: &[(&TensorDesc, Option<&[u8]>)],
    ) -> Result<(Vec<Tensor>, usize), GraphError> {
        let (descs, data) = self.signature(given)?;
        let inputs = descs
            .into_iter()
            .zip(data)
            .map(|(desc, d)| {
                Value::Tensor(Arc::new(Tensor {
                    desc,
                    data: d.to_vec(),
                }))
            })
            .collect::<Vec<_>>();
        let mut interpreter = interpret::Interpreter::new(&self.host, self.stream(), self);
        let outs = interpreter.run(&self.def, inputs)?;
        let outputs = outs
            .into_iter()
            .zip(&self.def.outputs)
            .map(|(v, o)| match v {
                Value::Tensor(t) => Ok(Arc::unwrap_or_clone(t)),
                _ => Err(GraphError::Input(format!(
                    "output `{}` is a sequence, an optional or maps: run the model with \
                     `Model::run_values` (umd.Graph does so for the outputs a model declares so)",
                    o.name
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((outputs, interpreter.submissions()))
    }

    /// Runs the model on named values — tensors, sequences of tensors, or `Value::None` for an
    /// optional without a value — as its inputs declare them (each once, by name); returns
    /// every output by name, in declared order. The way to run a model whose inputs or outputs
    /// are sequences or optionals; any model runs this way.
    pub fn run_values(
        &self,
        inputs: &[(String, Value)],
    ) -> Result<Vec<(String, Value)>, GraphError> {
        if let Some((n, _)) = inputs
            .iter()
            .find(|(n, _)| !self.def.inputs.iter().any(|d| d.name == *n))
        {
            return Err(GraphError::Input(format!(
                "`{n}` is not an input of this model"
            )));
        }
        let mut ordered = Vec::with_capacity(self.def.inputs.len());
        for decl in &self.def.inputs {
            let mut given = inputs.iter().filter(|(n, _)| *n == decl.name);
            let (_, v) = given
                .next()
                .ok_or_else(|| GraphError::Input(format!("input `{}` is missing", decl.name)))?;
            if given.next().is_some() {
                return Err(GraphError::Input(format!(
                    "input `{}` is given twice",
                    decl.name
                )));
            }
            let kind = self.def.kinds.get(&decl.name).copied();
            // An empty map has no keys to tell their type (a client's `{}`): it is the declared one.
            let retyped = empty_map_as_declared(v, kind, decl);
            let v = retyped.as_ref().unwrap_or(v);
            let optional = matches!(
                kind,
                Some(ValueKind::OptionalTensor | ValueKind::OptionalSequence)
            );
            let sequence = matches!(
                kind,
                Some(ValueKind::Sequence | ValueKind::OptionalSequence)
            );
            match v {
                Value::None if optional => {}
                Value::Tensor(t)
                    if !sequence
                        && !matches!(kind, Some(ValueKind::Map(_) | ValueKind::MapSequence(_))) =>
                {
                    check_value(decl, &t.desc, t.data.len(), kind)?
                }
                Value::Map(m) if matches!(kind, Some(ValueKind::Map(_))) => {
                    check_map(decl, kind, m)?
                }
                Value::Maps(maps) if matches!(kind, Some(ValueKind::MapSequence(_))) => {
                    if maps.len() > maps::MAX_MAPS {
                        return Err(GraphError::Limit(format!(
                            "input `{}`: {} maps; at most {}",
                            decl.name,
                            maps.len(),
                            maps::MAX_MAPS
                        )));
                    }
                    for m in maps {
                        check_map(decl, kind, m)?;
                    }
                }
                Value::Sequence(items) if sequence => {
                    if items.len() > interpret::MAX_SEQUENCE {
                        return Err(GraphError::Limit(format!(
                            "input `{}`: {} tensors; at most {}",
                            decl.name,
                            items.len(),
                            interpret::MAX_SEQUENCE
                        )));
                    }
                    for t in items {
                        check_value(decl, &t.desc, t.data.len(), kind)?;
                    }
                }
                _ => {
                    return Err(GraphError::Input(format!(
                        "input `{}` is declared {}; the value given is not one",
                        decl.name,
                        match kind {
                            None => "a tensor",
                            Some(ValueKind::Sequence) => "a sequence",
                            Some(ValueKind::OptionalTensor) => "an optional tensor",
                            Some(ValueKind::OptionalSequence) => "an optional sequence",
                            Some(ValueKind::Map(_)) => "a map",
                            Some(ValueKind::MapSequence(_)) => "a sequence of maps",
                        }
                    )));
                }
            }
            ordered.push(v.clone());
        }
        let outs = if self.interpreted() {
            interpret::Interpreter::new(&self.host, self.stream(), self).run(&self.def, ordered)?
        } else {
            let tensors: Vec<Tensor> = ordered
                .into_iter()
                .map(|v| match v {
                    Value::Tensor(t) => Arc::unwrap_or_clone(t),
                    _ => unreachable!("checked: a model without kinds takes tensors"),
                })
                .collect();
            self.run(&tensors)?
                .outputs
                .into_iter()
                .map(|t| Value::Tensor(Arc::new(t)))
                .collect()
        };
        Ok(self
            .def
            .outputs
            .iter()
            .map(|o| o.name.clone())
            .zip(outs)
            .collect())
    }

    /// The figures of an interpreted run: its nodes and the command buffers it submitted;
    /// nothing is planned ahead or pooled at this level.
    fn interpreted_stats(&self, submissions: usize) -> PlanStats {
        PlanStats {
            nodes: self.def.nodes.len(),
            submissions,
            ..PlanStats::default()
        }
    }

    /// Every input's bytes (buffers read whole): what an interpreted run needs.
    fn read_all(&self, inputs: &[RunInput]) -> Result<Vec<Tensor>, GraphError> {
        inputs
            .iter()
            .map(|i| match i {
                RunInput::Value(t) => Ok((*t).clone()),
                RunInput::Buffer { desc, buffer } => {
                    self.check_buffer("input", desc, *buffer)?;
                    let bytes = desc.byte_size().unwrap_or(0);
                    Ok(Tensor {
                        desc: (*desc).clone(),
                        data: self.host.device().read(*buffer, 0, bytes)?,
                    })
                }
            })
            .collect()
    }

    /// Runs node by node, each waited for: the time of each node with launches.
    pub fn profile(&self, inputs: &[Tensor]) -> Result<Vec<NodeTime>, GraphError> {
        if self.interpreted() {
            return Err(GraphError::Unsupported(
                "profiling a model that runs interpreted (control flow, sequences, or an op \
                 whose plan needs a value computed at run time)"
                    .into(),
            ));
        }
        let given: Vec<_> = inputs
            .iter()
            .map(|t| (&t.desc, Some(&t.data[..])))
            .collect();
        let (plan, data) = self.plan_for(&given)?;
        let times = plan.profile(self.stream(), &data)?;
        Ok(plan
            .steps
            .iter()
            .zip(times)
            .map(|(s, micros)| NodeTime {
                node: s.label.clone(),
                op: s.op.clone(),
                launches: s.cmd.launches.len(),
                micros,
            })
            .collect())
    }

    /// The outputs' descriptions (declared order) a run on `inputs` gives; compiles the plan
    /// for their signature if new. Buffers are checked as by [`Model::run_on_device`].
    pub fn output_descs(&self, inputs: &[RunInput]) -> Result<Vec<TensorDesc>, GraphError> {
        if !self.interpreted() {
            let small = self.read_small(inputs)?;
            let given = given(inputs, &small);
            if let Some((plan, _)) = self.compiled_for(&given)? {
                return Ok(plan.output_descs());
            }
        }
        // Shapes may depend on values (a Loop's trip count, NonZero's count): known by running.
        let all = self.read_all(inputs)?;
        let outs = self.run(&all)?;
        Ok(outs.outputs.into_iter().map(|t| t.desc).collect())
    }

    /// Runs on device buffers: inputs by value or by buffer (bound as they are: no copy), each
    /// output written into `outputs[k]` (declared order), a buffer of the model's device of at
    /// least the output's size. Every buffer is checked (this device's, large enough) before
    /// anything runs. Returns the plan's figures once the outputs are written.
    pub fn run_on_device(
        &self,
        inputs: &[RunInput],
        outputs: &[BufferId],
    ) -> Result<PlanStats, GraphError> {
        if self.interpreted() {
            return self.interpret_on_device(inputs, outputs);
        }
        let small = self.read_small(inputs)?;
        let given = given(inputs, &small);
        let Some((plan, data)) = self.compiled_for(&given)? else {
            return self.interpret_on_device(inputs, outputs);
        };
        self.check_output_buffers(&plan.output_descs(), inputs, outputs)?;
        // Declared order, as the plan's inputs are.
        let feeds: Vec<compile::Feed> = self
            .def
            .inputs
            .iter()
            .zip(&data)
            .map(
                |(decl, bytes)| match inputs.iter().find(|i| i.desc().name == decl.name) {
                    Some(RunInput::Buffer { buffer, .. }) => compile::Feed::Buffer(*buffer),
                    _ => compile::Feed::Bytes(bytes),
                },
            )
            .collect();
        plan.run_bound(self.stream(), &feeds, outputs)?;
        Ok(plan.stats.clone())
    }

    /// [`Model::run_on_device`] for a model with control flow: inputs read, run on the host's
    /// values, each output written into its buffer (checked first: this device's, large
    /// enough, not an input's or another output's).
    fn interpret_on_device(
        &self,
        inputs: &[RunInput],
        outputs: &[BufferId],
    ) -> Result<PlanStats, GraphError> {
        let all = self.read_all(inputs)?;
        let run = self.run(&all)?;
        let descs: Vec<TensorDesc> = run.outputs.iter().map(|t| t.desc.clone()).collect();
        self.check_output_buffers(&descs, inputs, outputs)?;
        for (t, b) in run.outputs.iter().zip(outputs) {
            self.host.device().write(*b, 0, &t.data)?;
        }
        Ok(run.stats)
    }

    /// Checks the output buffers of a device-bound run against the outputs' descriptions: one
    /// per output, each this device's and large enough, none an input's or another output's
    /// (outputs are written while inputs are still read).
    fn check_output_buffers(
        &self,
        descs: &[TensorDesc],
        inputs: &[RunInput],
        outputs: &[BufferId],
    ) -> Result<(), GraphError> {
        if outputs.len() != descs.len() {
            return Err(GraphError::Input(format!(
                "{} output buffers given; the model has {} outputs",
                outputs.len(),
                descs.len()
            )));
        }
        for (k, (d, b)) in descs.iter().zip(outputs).enumerate() {
            self.check_buffer("output", d, *b)?;
            let input = inputs
                .iter()
                .any(|i| matches!(i, RunInput::Buffer { buffer, .. } if buffer == b));
            if input || outputs[..k].contains(b) {
                return Err(GraphError::Input(format!(
                    "output `{}`: its buffer is also {}",
                    d.name,
                    if input {
                        "an input's"
                    } else {
                        "another output's"
                    }
                )));
            }
        }
        Ok(())
    }

    /// Checks that `buffer` is the model device's and holds `desc`; the bytes of buffer
    /// inputs small enough to be planned by value (read now; the others `None`).
    fn read_small(&self, inputs: &[RunInput]) -> Result<Vec<Option<Vec<u8>>>, GraphError> {
        inputs
            .iter()
            .map(|i| match i {
                RunInput::Value(_) => Ok(None),
                RunInput::Buffer { desc, buffer } => {
                    self.check_buffer("input", desc, *buffer)?;
                    let small = crate::tensor::elements(&desc.shape) <= MAX_VALUE_INPUT;
                    let bytes = desc.byte_size().unwrap_or(0);
                    small
                        .then(|| self.host.device().read(*buffer, 0, bytes))
                        .transpose()
                        .map_err(GraphError::from)
                }
            })
            .collect()
    }

    fn check_buffer(&self, what: &str, desc: &TensorDesc, b: BufferId) -> Result<(), GraphError> {
        desc.validate()
            .map_err(|e| GraphError::Input(format!("{what} `{}`: {e}", desc.name)))?;
        let needed = desc.byte_size().unwrap_or(u64::MAX);
        let size = self.host.device().size(b).map_err(|e| {
            GraphError::Input(format!(
                "{what} `{}`: its buffer is not usable on device `{}`: {e}",
                desc.name,
                self.host.device().name()
            ))
        })?;
        if size < needed {
            return Err(GraphError::Input(format!(
                "{what} `{}` is {desc} ({needed} bytes); its buffer has {size}",
                desc.name
            )));
        }
        Ok(())
    }

    /// The compiled plan for the given inputs' signature (compiled now if new) and the inputs'
    /// bytes in declared order (empty for a buffer input not read).
    fn interpreted(&self) -> bool {
        self.interpreted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The compiled plan for `inputs`, or `None`: the model runs interpreted — it did from the
    /// start, or this compile found an op whose plan needs a value computed at run time (from
    /// now on it runs interpreted, in compiled segments split around such ops).
    #[allow(clippy::type_complexity)]
    fn compiled_for<'t>(
        &self,
        inputs: &[(&'t TensorDesc, Option<&'t [u8]>)],
    ) -> Result<Option<(Arc<compile::Compiled>, Vec<&'t [u8]>)>, GraphError> {
        if self.interpreted() {
            return Ok(None);
        }
        match self.plan_for(inputs) {
            Ok(p) => Ok(Some(p)),
            Err(GraphError::NotConstant { .. } | GraphError::RunValues { .. }) if !self.nested => {
                self.interpreted
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn plan_for<'t>(
        &self,
        inputs: &[(&'t TensorDesc, Option<&'t [u8]>)],
    ) -> Result<(Arc<compile::Compiled>, Vec<&'t [u8]>), GraphError> {
        let (descs, data) = self.signature(inputs)?;
        let plan = loop {
            let values = self.by_value.lock().clone();
            let sig: Signature = (
                descs.clone(),
                data.iter()
                    .zip(&values)
                    .map(|(d, &v)| v.then(|| d.to_vec()))
                    .collect(),
            );
            {
                let mut cache = self.compiled.lock();
                if let Some(pos) = cache.iter().position(|(s, _)| *s == sig) {
                    let entry = cache.remove(pos);
                    // planned before a plugin was loaded, replaced or removed: compiled again
                    // (a run under way finishes on the builds it holds)
                    if entry.1.generation == self.host.registry().snapshot().generation {
                        let plan = entry.1.clone();
                        cache.push(entry);
                        return Ok((plan, data));
                    }
                }
            }
            let upload = |name: &str| self.upload(name);
            match compile::Compiled::new(&self.host, &self.def, &sig.0, &sig.1, &upload) {
                Ok(p) => break (sig, Arc::new(p)),
                Err(GraphError::NotConstant { node, input }) => {
                    // An op needs this value at plan time: if it is a small graph input, plan
                    // with its value (a signature per value) and compile again.
                    let i = self.def.inputs.iter().position(|d| d.name == input);
                    let small = |i: usize| {
                        crate::tensor::elements(&descs[i].shape) <= MAX_VALUE_INPUT && !values[i]
                    };
                    match i.filter(|&i| small(i)) {
                        Some(i) => self.by_value.lock()[i] = true,
                        None => return Err(GraphError::NotConstant { node, input }),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let (sig, plan) = plan;
        let mut cache = self.compiled.lock();
        if cache.len() >= MAX_SIGNATURES {
            cache.remove(0);
        }
        cache.push((sig, plan.clone()));
        Ok((plan, data))
    }

    fn upload(&self, name: &str) -> Result<BufferId, GraphError> {
        let mut up = self.uploaded.lock();
        if let Some(b) = up.get(name) {
            return Ok(*b);
        }
        let c = &self.def.constants[name];
        let dev = self.host.device();
        let b = dev.alloc((c.data.len() as u64).max(1))?;
        // read-only from here on: a kernel may keep what it derives from it (packed weights)
        if let Err(e) = dev.write(b, 0, &c.data).and_then(|()| dev.freeze(b)) {
            let _ = dev.free(b);
            return Err(e.into());
        }
        up.insert(name.to_string(), b);
        Ok(b)
    }

    /// Checks `inputs` against the declarations: every input once, known names, dtypes, ranks,
    /// fixed dims, data sizes (of those given by value). Returns the descriptions and bytes in
    /// declared order (empty where not given).
    fn signature<'t>(
        &self,
        inputs: &[(&'t TensorDesc, Option<&'t [u8]>)],
    ) -> Result<(Vec<TensorDesc>, Vec<&'t [u8]>), GraphError> {
        if let Some((t, _)) = inputs
            .iter()
            .find(|(t, _)| !self.def.inputs.iter().any(|d| d.name == t.name))
        {
            return Err(GraphError::Input(format!(
                "`{}` is not an input of this model (inputs: {})",
                t.name,
                self.def
                    .inputs
                    .iter()
                    .map(|d| format!("{} {}", d.name, d.describe()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut sig = Vec::with_capacity(self.def.inputs.len());
        let mut data = Vec::with_capacity(self.def.inputs.len());
        for decl in &self.def.inputs {
            let mut given = inputs.iter().filter(|(t, _)| t.name == decl.name);
            let &(t, bytes_given) = given.next().ok_or_else(|| {
                GraphError::Input(format!(
                    "input `{}` ({}) is missing",
                    decl.name,
                    decl.describe()
                ))
            })?;
            if given.next().is_some() {
                return Err(GraphError::Input(format!(
                    "input `{}` is given twice",
                    decl.name
                )));
            }
            check_input(decl, t)?;
            let bytes = t.byte_size().unwrap_or(u64::MAX);
            if bytes > onnx::MAX_TENSOR_BYTES {
                return Err(GraphError::Limit(format!(
                    "input `{}` {} has {bytes} bytes; at most {}",
                    decl.name,
                    t,
                    onnx::MAX_TENSOR_BYTES
                )));
            }
            let data_len = bytes_given.map_or(bytes, |d| d.len() as u64);
            if data_len != bytes {
                return Err(GraphError::Input(format!(
                    "input `{}` {} needs {bytes} bytes, {data_len} given",
                    decl.name, t,
                )));
            }
            sig.push(t.clone());
            data.push(bytes_given.unwrap_or(&[]));
        }
        Ok((sig, data))
    }
}

impl Model {
    /// The key of one of this model's graphs: its own moves with the model (0); a body's is
    /// shared (`Arc`) and lives as long as the model (its address).
    fn graph_key(&self, def: &GraphDef) -> usize {
        if std::ptr::eq(def, &self.def) {
            0
        } else {
            def as *const GraphDef as usize
        }
    }
}

/// Plain bodies of this model's control-flow nodes run compiled: made on first use (a body with
/// nodes and no control flow, sequences or optionals inside), kept by the body graph's address
/// (stable: the graph lives as long as the model).
impl interpret::Bodies for Model {
    fn compiled(&self, g: &Arc<GraphDef>) -> Option<Arc<Model>> {
        let key = Arc::as_ptr(g) as usize;
        self.bodies
            .lock()
            .entry(key)
            .or_insert_with(|| {
                (!g.runs_interpreted() && !g.nodes.is_empty())
                    .then(|| Model::new(self.host.clone(), GraphDef::clone(g)).ok())
                    .flatten()
                    .map(|mut m| {
                        m.nested = true;
                        Arc::new(m)
                    })
            })
            .clone()
    }

    fn interpret_instead(&self, g: &Arc<GraphDef>) {
        self.bodies.lock().insert(Arc::as_ptr(g) as usize, None);
    }

    fn steps(&self, def: &GraphDef) -> Arc<Vec<segment::Step>> {
        let key = self.graph_key(def);
        self.steps
            .lock()
            .entry(key)
            .or_insert_with(|| {
                let lone = self.lone.lock().get(&key).cloned().unwrap_or_default();
                Arc::new(segment::steps(def, &lone))
            })
            .clone()
    }

    fn isolate(&self, def: &GraphDef, node: usize) {
        let key = self.graph_key(def);
        if self.lone.lock().entry(key).or_default().insert(node)
            && let Some(old) = self.steps.lock().remove(&key)
        {
            self.retired.lock().push(old);
        }
    }
}

/// The inputs as (description, bytes known on the host): a value's bytes, a small buffer's read.
fn given<'t>(
    inputs: &[RunInput<'t>],
    small: &'t [Option<Vec<u8>>],
) -> Vec<(&'t TensorDesc, Option<&'t [u8]>)> {
    inputs
        .iter()
        .zip(small)
        .map(|(i, s)| match i {
            RunInput::Value(t) => (&t.desc, Some(&t.data[..])),
            RunInput::Buffer { desc, .. } => (*desc, s.as_deref()),
        })
        .collect()
}

/// Checks one given tensor of input `decl` (an element of a sequence input, or an optional's
/// value: its declared dims do not apply) and its byte count.
fn check_value(
    decl: &ValueDecl,
    desc: &TensorDesc,
    len: usize,
    kind: Option<ValueKind>,
) -> Result<(), GraphError> {
    if kind.is_none() {
        check_input(decl, desc)?;
    } else {
        desc.validate()
            .map_err(|e| GraphError::Input(format!("input `{}`: {e}", decl.name)))?;
        if let Some(dt) = decl.dtype
            && dt != desc.dtype
        {
            return Err(GraphError::Input(format!(
                "input `{}` holds {dt} tensors; {desc} is given",
                decl.name
            )));
        }
    }
    let bytes = desc.byte_size().unwrap_or(u64::MAX);
    if bytes > onnx::MAX_TENSOR_BYTES || bytes != len as u64 {
        return Err(GraphError::Input(format!(
            "input `{}` {desc} needs {bytes} bytes (at most {}), {len} given",
            decl.name,
            onnx::MAX_TENSOR_BYTES
        )));
    }
    Ok(())
}

/// Empty maps of input `decl` (of `kind`), remade with the declared key and value dtypes;
/// `None` when `v` holds none.
fn empty_map_as_declared(v: &Value, kind: Option<ValueKind>, decl: &ValueDecl) -> Option<Value> {
    let Some(ValueKind::Map(key) | ValueKind::MapSequence(key)) = kind else {
        return None;
    };
    let empty = |m: &Arc<MapValue>| {
        if !m.is_empty() {
            return m.clone();
        }
        let t = |dt| Tensor {
            desc: TensorDesc::new("", vec![0], dt),
            data: Vec::new(),
        };
        let value = decl.dtype.unwrap_or(m.values().desc.dtype);
        MapValue::new(t(key), t(value)).map_or_else(|_| m.clone(), Arc::new)
    };
    match v {
        Value::Map(m) if m.is_empty() => Some(Value::Map(empty(m))),
        Value::Maps(ms) if ms.iter().any(|m| m.is_empty()) => {
            Some(Value::Maps(ms.iter().map(empty).collect()))
        }
        _ => None,
    }
}

/// Checks a given map of input `decl` (of `kind` Map or MapSequence): its key and value
/// dtypes are the declared ones.
fn check_map(decl: &ValueDecl, kind: Option<ValueKind>, m: &MapValue) -> Result<(), GraphError> {
    let key = match kind {
        Some(ValueKind::Map(k) | ValueKind::MapSequence(k)) => k,
        _ => unreachable!("called for map kinds"),
    };
    let (k, v) = (m.keys().desc.dtype, m.values().desc.dtype);
    if k != key || decl.dtype.is_some_and(|d| d != v) {
        return Err(GraphError::Input(format!(
            "input `{}` holds map({key}, {}); map({k}, {v}) is given",
            decl.name,
            decl.dtype.map_or("any".to_string(), |d| d.to_string())
        )));
    }
    Ok(())
}

/// Checks a given input's description against its declaration.
pub fn check_input(decl: &ValueDecl, desc: &TensorDesc) -> Result<(), GraphError> {
    let bad = |why: String| {
        Err(GraphError::Input(format!(
            "input `{}` is {desc}; the model declares {}: {why}",
            decl.name,
            decl.describe()
        )))
    };
    desc.validate()
        .map_err(|e| GraphError::Input(format!("input `{}`: {e}", decl.name)))?;
    if let Some(dt) = decl.dtype
        && dt != desc.dtype
    {
        return bad(format!("dtype {} instead of {dt}", desc.dtype));
    }
    if let Some(dims) = &decl.dims {
        if dims.len() != desc.shape.len() {
            return bad(format!(
                "rank {} instead of {}",
                desc.shape.len(),
                dims.len()
            ));
        }
        for (i, (d, &n)) in dims.iter().zip(&desc.shape).enumerate() {
            if let Dim::Fixed(f) = d
                && *f != n
            {
                return bad(format!("dimension {i} is {n}, not {f}"));
            }
        }
    }
    Ok(())
}
