//! Compiling a sorted graph for one input-shape signature: every node planned through the
//! translator (shapes inferred by the plugins), nodes whose inputs are all constant folded once
//! on the device, plan-time values filled from constants, reshape-like nodes turned into views,
//! intermediates placed by liveness ([`super::place`]) in pooled device blocks, and the launches
//! of all nodes fused into as few command buffers as the format's limits allow (one for most
//! models), with the graph's inputs, constants and intermediates as their bindings.

use std::collections::HashMap;
use std::sync::Arc;

use super::def::{GraphDef, Node};
use super::fusion;
use super::place::{self, Life};
use super::{GraphError, Tensor};
use crate::Host;
use crate::cmdbuf::{CommandBuffer, Role, limits};
use crate::device::{BufferId, Device, StreamId};
use crate::tensor::{AttrValue, TensorDesc};
use crate::translate::{OpRequest, Translation};

/// Ops that only relabel their first input's bytes: run as views of its storage.
const VIEW_OPS: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"];

/// Largest workspace a node with setup launches (ABI 1.7) keeps for the plan's life; a larger
/// one is pooled with the other values and its setup runs on every run.
pub const MAX_KEPT_WORKSPACE_BYTES: u64 = 64 << 20;

/// What a compiled run reports about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanStats {
    pub nodes: usize,
    /// Nodes run once at compile time (all inputs constant).
    pub folded: usize,
    /// Nodes turned into views (no launch).
    pub views: usize,
    /// Nodes with launches.
    pub launched: usize,
    /// Nodes computed inside fused ops (a plugin's chain, [`super::fusion`]): each fused op
    /// counts once in `launched`.
    pub fused: usize,
    /// Launches one run makes.
    pub launches: usize,
    /// (ABI 1.7) Setup launches run once, before the first run, into workspaces the plan keeps
    /// (their bytes count in `constant_bytes`).
    pub setup_launches: usize,
    /// Command buffers one run submits.
    pub submissions: usize,
    /// Bytes of the pooled blocks the intermediates and outputs are placed in.
    pub peak_bytes: u64,
    /// Bytes all intermediates and outputs would take without reuse.
    pub intermediate_bytes: u64,
    /// Bytes of constants on the device.
    pub constant_bytes: u64,
}

/// Where a graph output comes from.
enum Source {
    Const(Tensor),
    /// A buffer holding only this output: a device-bound run binds the caller's buffer in its
    /// place (no copy).
    Own(TensorDesc, BufferId),
    /// A buffer shared with other values (a pooled block, a graph input, another output): a
    /// device-bound run copies it out with `copy` (an `Identity` launch; `None`: through the
    /// host, when no plugin plans one).
    Shared(TensorDesc, BufferId, Option<Arc<CommandBuffer>>),
}

/// A declared input of a run: bytes written into the plan's input buffer, or a caller's device
/// buffer bound in its place.
#[derive(Clone, Copy)]
pub(super) enum Feed<'a> {
    Bytes(&'a [u8]),
    Buffer(BufferId),
}

/// One node with launches: for `--profile` and error messages.
pub(super) struct Step {
    pub label: String,
    pub op: String,
    pub cmd: Arc<CommandBuffer>,
    pub buffers: Vec<BufferId>,
}

/// One fused submission and the node of each of its launches.
struct Segment {
    cmd: Arc<CommandBuffer>,
    buffers: Vec<BufferId>,
    launch_nodes: Vec<usize>,
}

/// A graph compiled for one input signature. Owns its device buffers (freed on drop); runs are
/// serialized (the intermediates are shared).
pub(super) struct Compiled {
    dev: Arc<dyn Device>,
    owned: Vec<BufferId>,
    /// Per declared input, in order: its buffer.
    inputs: Vec<(TensorDesc, BufferId)>,
    outputs: Vec<(String, Source)>,
    segments: Vec<Segment>,
    /// Setup launches not yet run, each with its node and the workspace it fills (kept by this
    /// plan): run before the next run, then dropped.
    setup: parking_lot::Mutex<Vec<Setup>>,
    /// The registry generation it was compiled under: a plan of an older generation is
    /// compiled again (a plugin was loaded, replaced or removed since).
    pub generation: u64,
    /// The plugin builds that planned its launches, held so that a run under way while one is
    /// replaced finishes on the build that planned it.
    _planners: Vec<Arc<crate::plugin::LoadedPlugin>>,
    pub steps: Vec<Step>,
    pub stats: PlanStats,
    pub lock: parking_lot::Mutex<()>,
}

/// A node's setup launches (ABI 1.7) and the workspace buffer they fill, kept for every run.
struct Setup {
    node: String,
    cmd: Arc<CommandBuffer>,
    workspace: BufferId,
}

impl Drop for Compiled {
    fn drop(&mut self) {
        for b in self.owned.drain(..) {
            let _ = self.dev.free(b);
        }
    }
}

enum Kind {
    Const(Arc<Vec<u8>>),
    /// A graph input.
    Input,
    Computed,
}

struct Val {
    desc: TensorDesc,
    kind: Kind,
    /// Index into the storages (`None` for constants until uploaded).
    storage: Option<usize>,
}

enum Store {
    Fixed(BufferId),
    Placed(Life),
}

/// Compile-time state.
struct Builder<'a> {
    host: &'a Host,
    def: &'a GraphDef,
    vals: Vec<Val>,
    by_name: HashMap<&'a str, usize>,
    stores: Vec<Store>,
    owned: Vec<BufferId>,
    /// Per step: label, op, translation, value of each binding.
    steps: Vec<(String, String, Arc<Translation>, Vec<usize>)>,
    setup: Vec<Setup>,
    planners: Vec<Arc<crate::plugin::LoadedPlugin>>,
    stats: PlanStats,
    /// Chains of nodes a plugin computes as one op ([`fusion`]).
    chains: &'a [fusion::Chain],
}

impl Compiled {
    /// Compiles `def` (sorted) for `inputs` (one per declared input, in order). `upload` gives
    /// the device buffer of an initializer (uploaded once per model).
    pub fn new(
        host: &Host,
        def: &GraphDef,
        inputs: &[TensorDesc],
        values: &[Option<Vec<u8>>],
        upload: &dyn Fn(&str) -> Result<BufferId, GraphError>,
    ) -> Result<Compiled, GraphError> {
        let dev = host.device().clone();
        let chains = fusion_chains(host, def);
        let mut b = Builder {
            host,
            def,
            chains: &chains,
            vals: Vec::new(),
            by_name: HashMap::new(),
            stores: Vec::new(),
            owned: Vec::new(),
            steps: Vec::new(),
            setup: Vec::new(),
            planners: Vec::new(),
            stats: PlanStats {
                nodes: def.nodes.len(),
                ..Default::default()
            },
        };
        // the buffers made so far are freed on an error and on a panic (the caller survives
        // a panic: it would leak them on every request otherwise)
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.build(inputs, values, upload)
        }));
        if !matches!(r, Ok(Ok(_))) {
            for id in b.owned.drain(..) {
                let _ = dev.free(id);
            }
        }
        match r {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Writes the inputs, submits every fused command buffer back to back on one stream, waits
    /// once and reads the outputs.
    pub fn run(&self, stream: StreamId, inputs: &[&[u8]]) -> Result<Vec<Tensor>, GraphError> {
        let _guard = self.lock.lock();
        self.run_setup(stream)?;
        for ((_, buf), data) in self.inputs.iter().zip(inputs) {
            self.dev.write(*buf, 0, data)?;
        }
        self.submit_all(stream, &[])?;
        self.read_outputs()
    }

    /// The outputs' descriptions, in declared order.
    pub fn output_descs(&self) -> Vec<TensorDesc> {
        self.outputs
            .iter()
            .map(|(name, src)| {
                let mut d = match src {
                    Source::Const(t) => t.desc.clone(),
                    Source::Own(d, _) | Source::Shared(d, _, _) => d.clone(),
                };
                d.name = name.clone();
                d
            })
            .collect()
    }

    /// A run on device buffers: each input's bytes or the caller's buffer (bound in place of the
    /// plan's), each output into the caller's buffer `outputs[k]` (bound in place of the plan's
    /// when the output has a buffer of its own, else copied on the device). The buffers were
    /// checked by the caller (this device's, large enough). Returns when the outputs are written.
    pub fn run_bound(
        &self,
        stream: StreamId,
        inputs: &[Feed],
        outputs: &[BufferId],
    ) -> Result<(), GraphError> {
        let _guard = self.lock.lock();
        self.run_setup(stream)?;
        let mut subst: Vec<(BufferId, BufferId)> = Vec::new();
        for ((_, buf), feed) in self.inputs.iter().zip(inputs) {
            match feed {
                Feed::Bytes(data) => self.dev.write(*buf, 0, data)?,
                Feed::Buffer(b) => subst.push((*buf, *b)),
            }
        }
        for ((_, src), dst) in self.outputs.iter().zip(outputs) {
            if let Source::Own(_, b) = src {
                subst.push((*b, *dst));
            }
        }
        self.submit_all(stream, &subst)?;
        let mapped = |b: BufferId| subst.iter().find(|(p, _)| *p == b).map_or(b, |(_, c)| *c);
        let mut fences = Vec::new();
        for ((_, src), dst) in self.outputs.iter().zip(outputs) {
            match src {
                Source::Own(..) => {}
                Source::Const(t) => self.dev.write(*dst, 0, &t.data)?,
                Source::Shared(_, b, Some(copy)) => {
                    fences.push(self.dev.submit(stream, copy.clone(), &[mapped(*b), *dst])?);
                }
                Source::Shared(d, b, None) => {
                    let data = self.dev.read(mapped(*b), 0, d.byte_size().unwrap_or(0))?;
                    self.dev.write(*dst, 0, &data)?;
                }
            }
        }
        for f in fences {
            f.wait()?;
        }
        Ok(())
    }

    /// Runs the setup launches not run yet (the first run's), each into its kept workspace. A
    /// failed setup stays pending: the next run tries it again.
    fn run_setup(&self, stream: StreamId) -> Result<(), GraphError> {
        let mut pending = self.setup.lock();
        while let Some(s) = pending.first() {
            let blame = |e| GraphError::Run {
                node: s.node.clone(),
                source: e,
            };
            self.dev
                .submit_wait(stream, s.cmd.clone(), &[s.workspace])
                .map_err(blame)?;
            // read-only from now on: kernels on the CPU device may keep what they read of it
            self.dev.freeze(s.workspace).map_err(blame)?;
            pending.remove(0);
        }
        Ok(())
    }

    /// Submits every fused command buffer back to back on one stream, with the buffers of
    /// `subst` (plan's, caller's) swapped in, and waits once.
    fn submit_all(
        &self,
        stream: StreamId,
        subst: &[(BufferId, BufferId)],
    ) -> Result<(), GraphError> {
        let swap = |buffers: &[BufferId]| -> Vec<BufferId> {
            buffers
                .iter()
                .map(|b| subst.iter().find(|(p, _)| p == b).map_or(*b, |(_, c)| *c))
                .collect()
        };
        // One command buffer: submitted and waited for in one call (the CPU device runs it on
        // this thread when the stream is idle: no hand-off to its worker and back).
        if let [s] = &self.segments[..] {
            return self
                .dev
                .submit_wait(stream, s.cmd.clone(), &swap(&s.buffers))
                .map_err(|e| self.blame(s, e));
        }
        // The stream's queue is bounded (and shared): when it is full, wait for this run's
        // oldest submission (or briefly, when none is outstanding) and submit again.
        let mut fences = std::collections::VecDeque::with_capacity(self.segments.len());
        let mut waited = 0;
        for s in &self.segments {
            let swapped: Vec<BufferId>;
            let buffers = if subst.is_empty() {
                &s.buffers
            } else {
                swapped = swap(&s.buffers);
                &swapped
            };
            loop {
                match self.dev.submit(stream, s.cmd.clone(), buffers) {
                    Ok(f) => {
                        fences.push_back(f);
                        break;
                    }
                    Err(crate::device::DeviceError::QueueFull { .. }) => match fences.pop_front() {
                        Some(f) => {
                            f.wait()
                                .map_err(|e| self.blame(&self.segments[waited], e))?;
                            waited += 1;
                        }
                        None => std::thread::sleep(std::time::Duration::from_millis(1)),
                    },
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for (s, f) in self.segments[waited..].iter().zip(fences) {
            if let Err(e) = f.wait() {
                return Err(self.blame(s, e));
            }
        }
        Ok(())
    }

    /// Runs node by node, waiting after each: per-node wall time in µs (the `--profile` table).
    pub fn profile(&self, stream: StreamId, inputs: &[&[u8]]) -> Result<Vec<f64>, GraphError> {
        let _guard = self.lock.lock();
        self.run_setup(stream)?;
        for ((_, buf), data) in self.inputs.iter().zip(inputs) {
            self.dev.write(*buf, 0, data)?;
        }
        let mut times = Vec::with_capacity(self.steps.len());
        for s in &self.steps {
            let t0 = std::time::Instant::now();
            self.dev
                .submit_wait(stream, s.cmd.clone(), &s.buffers)
                .map_err(|e| GraphError::Run {
                    node: s.label.clone(),
                    source: e,
                })?;
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        Ok(times)
    }

    fn blame(&self, s: &Segment, e: crate::device::DeviceError) -> GraphError {
        let node = match &e {
            crate::device::DeviceError::Launch { launch, .. } => s
                .launch_nodes
                .get(*launch)
                .map(|&n| self.steps[n].label.clone()),
            _ => None,
        };
        GraphError::Run {
            node: node.unwrap_or_else(|| "?".into()),
            source: e,
        }
    }

    fn read_outputs(&self) -> Result<Vec<Tensor>, GraphError> {
        self.outputs
            .iter()
            .map(|(name, src)| {
                let (mut desc, data) = match src {
                    Source::Const(t) => (t.desc.clone(), t.data.clone()),
                    Source::Own(d, buf) | Source::Shared(d, buf, _) => (
                        d.clone(),
                        self.dev.read(*buf, 0, d.byte_size().unwrap_or(0))?,
                    ),
                };
                desc.name = name.clone();
                Ok(Tensor { desc, data })
            })
            .collect()
    }
}

impl<'a> Builder<'a> {
    fn build(
        &mut self,
        inputs: &[TensorDesc],
        values: &[Option<Vec<u8>>],
        upload: &dyn Fn(&str) -> Result<BufferId, GraphError>,
    ) -> Result<Compiled, GraphError> {
        let dev = self.host.device().clone();
        let generation = self.host.registry().snapshot().generation;
        let def = self.def;
        for (name, c) in &def.constants {
            let id = self.push(c.desc.clone(), Kind::Const(c.data.clone()));
            self.by_name.insert(name, id);
        }
        let mut input_bufs = Vec::new();
        for (i, (decl, desc)) in def.inputs.iter().zip(inputs).enumerate() {
            let buf = dev.alloc(desc.byte_size().unwrap_or(0).max(1))?;
            self.owned.push(buf);
            input_bufs.push((desc.clone(), buf));
            // An input planned by value is a constant of this plan (its buffer stays unread).
            if let Some(Some(v)) = values.get(i) {
                let id = self.push(desc.clone(), Kind::Const(Arc::new(v.clone())));
                self.by_name.insert(&decl.name, id);
                continue;
            }
            let id = self.push(desc.clone(), Kind::Input);
            self.vals[id].storage = Some(self.stores.len());
            self.stores.push(Store::Fixed(buf));
            self.by_name.insert(&decl.name, id);
        }
        // a chain's nodes wait for its last one, where the fused node is planned (or, when no
        // plugin plans it, the chain's own nodes in order: every value they read is defined
        // there, and what they define is read by no node in between)
        let mut last_of = HashMap::new();
        let mut in_chain = vec![false; def.nodes.len()];
        for (c, chain) in self.chains.iter().enumerate() {
            last_of.insert(*chain.nodes.last().expect("a chain has stages"), c);
            for &k in &chain.nodes {
                in_chain[k] = true;
            }
        }
        for (i, node) in def.nodes.iter().enumerate() {
            let chains: &'a [fusion::Chain] = self.chains;
            match last_of.get(&i).map(|&c| &chains[c]) {
                Some(chain) => {
                    // the longest fused node a plugin plans (none when stage 0 folds: all its
                    // inputs constant), then the chain's nodes after it
                    let first = &def.nodes[chain.nodes[0]];
                    let folds = first.inputs.iter().filter(|n| !n.is_empty()).all(|n| {
                        matches!(self.vals[self.by_name[n.as_str()]].kind, Kind::Const(_))
                    });
                    let fused = (!folds)
                        .then(|| chain.fused.iter().find(|(_, f)| self.plans(f)))
                        .flatten();
                    let done = match fused {
                        Some((k, f)) => {
                            self.node(f)?;
                            self.stats.fused += k;
                            *k
                        }
                        None => 0,
                    };
                    for &k in &chain.nodes[done..] {
                        self.node(&def.nodes[k])?;
                    }
                }
                None if in_chain[i] => {}
                None => self.node(node)?,
            }
        }
        let n_steps = self.steps.len();
        let mut outputs = Vec::new();
        for o in &def.outputs {
            let id = self.by_name[o.name.as_str()];
            let v = &self.vals[id];
            let src = match (&v.kind, v.storage) {
                (Kind::Const(data), _) => Source::Const(Tensor {
                    desc: v.desc.clone(),
                    data: data.to_vec(),
                }),
                (_, Some(s)) => {
                    if let Store::Placed(l) = &mut self.stores[s] {
                        l.last = n_steps;
                    }
                    // The storage index for now; the buffer once placed.
                    Source::Own(v.desc.clone(), BufferId(s as u64))
                }
                (_, None) => unreachable!("computed values always have a storage"),
            };
            outputs.push((o.name.clone(), src));
        }
        // Place the intermediates; fixed buffers stay.
        let placed: Vec<(usize, Life)> = self
            .stores
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Store::Placed(l) => Some((i, *l)),
                Store::Fixed(_) => None,
            })
            .collect();
        let lives: Vec<Life> = placed.iter().map(|(_, l)| *l).collect();
        let p = place::place(&lives);
        self.stats.peak_bytes = p.peak();
        self.stats.intermediate_bytes = lives.iter().map(|l| l.bytes).sum();
        let mut blocks = Vec::with_capacity(p.blocks.len());
        for &bytes in &p.blocks {
            let id = dev.alloc(bytes)?;
            self.owned.push(id);
            blocks.push(id);
        }
        let mut buffer_of: Vec<Option<BufferId>> = self
            .stores
            .iter()
            .map(|s| match s {
                Store::Fixed(b) => Some(*b),
                Store::Placed(_) => None,
            })
            .collect();
        for ((s, _), b) in placed.iter().zip(&p.block_of) {
            buffer_of[*s] = Some(blocks[*b]);
        }
        // An output whose storage is alone in its block (and is no other output's) is bound to
        // the caller's buffer in a device-bound run; the others are copied out.
        let mut per_block = vec![0usize; p.blocks.len()];
        for b in &p.block_of {
            per_block[*b] += 1;
        }
        let mut seen = Vec::new();
        for (_, src) in &mut outputs {
            if let Source::Own(desc, id) = src {
                let s = id.0 as usize;
                let alone = placed
                    .iter()
                    .position(|(i, _)| *i == s)
                    .is_some_and(|k| per_block[p.block_of[k]] == 1);
                let buf = buffer_of[s].expect("placed");
                *src = if alone && !seen.contains(&s) {
                    Source::Own(desc.clone(), buf)
                } else {
                    Source::Shared(desc.clone(), buf, self.copy_cmd(desc))
                };
                seen.push(s);
            }
        }
        // Constants read by launches go to the device once.
        let mut steps = Vec::with_capacity(n_steps);
        let mut const_bufs: HashMap<usize, BufferId> = HashMap::new();
        let step_vals = std::mem::take(&mut self.steps);
        for (label, op, t, vals) in &step_vals {
            let mut bufs = Vec::with_capacity(vals.len());
            for &v in vals {
                let buf = match (&self.vals[v].kind, self.vals[v].storage) {
                    (Kind::Const(data), _) => match const_bufs.get(&v) {
                        Some(b) => *b,
                        None => {
                            let b = self.upload_const(v, data.clone(), upload)?;
                            const_bufs.insert(v, b);
                            b
                        }
                    },
                    (_, Some(s)) => buffer_of[s].expect("placed"),
                    (_, None) => unreachable!("computed values always have a storage"),
                };
                bufs.push(buf);
            }
            steps.push(Step {
                label: label.clone(),
                op: op.clone(),
                cmd: t.cmdbuf.clone(),
                buffers: bufs,
            });
        }
        let segments = fuse(self.host, &step_vals, &steps)?;
        self.stats.submissions = segments.len();
        Ok(Compiled {
            dev,
            owned: std::mem::take(&mut self.owned),
            inputs: input_bufs,
            outputs,
            segments,
            setup: parking_lot::Mutex::new(std::mem::take(&mut self.setup)),
            generation,
            _planners: std::mem::take(&mut self.planners),
            steps,
            stats: self.stats.clone(),
            lock: parking_lot::Mutex::new(()),
        })
    }

    /// A command buffer copying a `desc` value on the device (input → output), if a plugin
    /// plans `Identity` for it.
    fn copy_cmd(&mut self, desc: &TensorDesc) -> Option<Arc<CommandBuffer>> {
        let t = self
            .host
            .translate(&OpRequest::new("Identity", vec![desc.clone()]))
            .ok()?;
        let ok = t.cmdbuf.bindings.len() == 2
            && t.cmdbuf.count(Role::Input) == 1
            && t.outputs.first().is_some_and(|o| o.shape == desc.shape);
        ok.then(|| {
            self.hold(&t.planner);
            t.cmdbuf.clone()
        })
    }

    fn push(&mut self, desc: TensorDesc, kind: Kind) -> usize {
        self.vals.push(Val {
            desc,
            kind,
            storage: None,
        });
        self.vals.len() - 1
    }

    fn upload_const(
        &mut self,
        v: usize,
        data: Arc<Vec<u8>>,
        upload: &dyn Fn(&str) -> Result<BufferId, GraphError>,
    ) -> Result<BufferId, GraphError> {
        let is_initializer = self
            .def
            .constants
            .iter()
            .find(|(n, _)| self.by_name.get(n.as_str()) == Some(&v))
            .map(|(n, _)| n.clone());
        self.stats.constant_bytes += data.len() as u64;
        if let Some(name) = is_initializer {
            return upload(&name);
        }
        let dev = self.host.device();
        let b = dev.alloc((data.len() as u64).max(1))?;
        self.owned.push(b);
        dev.write(b, 0, &data)?;
        dev.freeze(b)?; // as an initializer
        Ok(b)
    }

    /// Plans, folds or views one node.
    fn node(&mut self, node: &'a Node) -> Result<(), GraphError> {
        let at = |source: crate::Error| GraphError::Node {
            node: node.label(),
            source,
        };
        if node.op == "Constant" && node.domain.is_empty() {
            let t = constant_attr(node)?;
            let id = self.push(t.desc, Kind::Const(Arc::new(t.data)));
            self.define(node, 0, id);
            // a Constant has one output: a second one would be read undefined
            return self.check_outputs(node);
        }
        if let Some(t) = self.shape_of(node) {
            let id = self.push(t.desc, Kind::Const(Arc::new(t.data)));
            self.define(node, 0, id);
            self.stats.folded += 1;
            return Ok(());
        }
        let (present, mut req) = self.request(node);
        let all_const = present
            .iter()
            .all(|&v| matches!(self.vals[v].kind, Kind::Const(_)));
        // random ops must run every time: never folded
        if all_const && !super::draws_random(&node.op) {
            let data: Vec<Vec<u8>> = present
                .iter()
                .map(|&v| match &self.vals[v].kind {
                    Kind::Const(d) => d.to_vec(),
                    _ => unreachable!(),
                })
                .collect();
            let outs = self.host.run_request(req, &data).map_err(at)?;
            self.stats.folded += 1;
            for (k, (desc, bytes)) in outs.into_iter().enumerate() {
                if k < node.outputs.len() {
                    let id = self.push(desc, Kind::Const(Arc::new(bytes)));
                    self.define(node, k, id);
                }
            }
            return self.check_outputs(node);
        }
        let vals = &self.vals;
        self.host
            .translator()
            .fill_values(&mut req, |i, _| match &vals[present[i]].kind {
                Kind::Const(d) => Ok(d.to_vec()),
                _ => Err(GraphError::NotConstant {
                    node: node.label(),
                    input: node
                        .inputs
                        .iter()
                        .filter(|n| !n.is_empty())
                        .nth(i)
                        .cloned()
                        .unwrap_or_default(),
                }),
            })?;
        let t = match self.host.translate(&req) {
            Ok(t) => t,
            // Declined by every plugin while an input's value is computed at run time, on the
            // CPU device (where plans made from values run: string results of numbers): run on
            // host values, the node gets every input's value (`Host::run_request_on`), so it
            // runs on its own there; if that is not it either, that run reports why.
            Err(e @ crate::Error::Unsupported { .. })
                if self.host.device().target().name == crate::target::CPU_ARCH =>
            {
                let total: u64 = present
                    .iter()
                    .map(|&v| self.vals[v].desc.byte_size().unwrap_or(u64::MAX))
                    .fold(0, u64::saturating_add);
                let computed = node
                    .inputs
                    .iter()
                    .filter(|n| !n.is_empty())
                    .zip(&present)
                    .find(|(_, v)| !matches!(self.vals[**v].kind, Kind::Const(_)));
                return match computed {
                    Some(_) if total <= crate::translate::MAX_VALUE_BYTES as u64 => {
                        Err(GraphError::RunValues {
                            node: node.label(),
                            source: Box::new(e),
                        })
                    }
                    _ => Err(at(e)),
                };
            }
            Err(e) => return Err(at(e)),
        };
        let src = present.first().copied();
        let is_view = VIEW_OPS.iter().any(|v| v.eq_ignore_ascii_case(&node.op))
            && node.domain.is_empty()
            && t.outputs.len() == 1
            && src.is_some_and(|s| {
                !matches!(self.vals[s].kind, Kind::Const(_))
                    && self.vals[s].desc.byte_size() == t.outputs[0].byte_size()
            });
        if let Some(s) = src.filter(|_| is_view) {
            let storage = self.vals[s].storage;
            let id = self.push(t.outputs[0].clone(), Kind::Computed);
            self.vals[id].storage = storage;
            self.define(node, 0, id);
            self.stats.views += 1;
            return self.check_outputs(node);
        }
        self.hold(&t.planner);
        // A plan with setup launches (ABI 1.7) keeps its workspace: the setup runs once. A
        // workspace over the bound is pooled as usual and its setup runs on every run.
        let kept_bytes = t
            .cmdbuf
            .bindings
            .iter()
            .find(|b| b.role == Role::Workspace)
            .and_then(|b| b.desc.byte_size())
            .unwrap_or(u64::MAX);
        let split = (kept_bytes <= MAX_KEPT_WORKSPACE_BYTES)
            .then(|| t.split_setup())
            .flatten();
        let (t, setup) = match split {
            Some((setup, rest)) => (Arc::new(rest), Some(setup)),
            None => (t, None),
        };
        let step = self.steps.len();
        let mut bindings = Vec::with_capacity(t.cmdbuf.bindings.len());
        for &v in &present {
            self.read(v, step);
            bindings.push(v);
        }
        for (k, desc) in t.outputs.iter().enumerate() {
            let id = self.computed(desc.clone(), step);
            if k < node.outputs.len() {
                self.define(node, k, id);
            }
            bindings.push(id);
        }
        if let Some(w) = t.cmdbuf.bindings.iter().find(|b| b.role == Role::Workspace) {
            let id = match setup {
                Some(setup) => self.kept_workspace(node, w.desc.clone(), setup)?,
                None => self.computed(w.desc.clone(), step),
            };
            bindings.push(id);
        }
        self.stats.launched += 1;
        self.stats.launches += t.cmdbuf.launches.len();
        self.steps
            .push((node.label(), node.op.clone(), t.clone(), bindings));
        self.check_outputs(node)
    }

    /// The values `node` reads (its present inputs) and its request on them.
    fn request(&self, node: &Node) -> (Vec<usize>, OpRequest) {
        let present: Vec<usize> = node
            .inputs
            .iter()
            .filter(|i| !i.is_empty())
            .map(|name| self.by_name[name.as_str()])
            .collect();
        let req = node_request(
            self.def,
            node,
            present.iter().map(|&id| &self.vals[id].desc),
        );
        (present, req)
    }

    /// Whether some plugin plans `node` (a fused chain's node) on its inputs as compiled so
    /// far; nothing is recorded (the translation is cached for [`Builder::node`]).
    fn plans(&self, node: &Node) -> bool {
        let (present, mut req) = self.request(node);
        let vals = &self.vals;
        let filled =
            self.host
                .translator()
                .fill_values(&mut req, |i, _| match &vals[present[i]].kind {
                    Kind::Const(d) => Ok(d.to_vec()),
                    _ => Err(()),
                });
        filled.is_ok() && self.host.translate(&req).is_ok()
    }

    /// `Shape` and `Size` of any value are known at compile time (shapes are): folded here, so
    /// the shape subgraphs behind them (Gather, Concat, Reshape's shape) fold too.
    fn shape_of(&self, node: &Node) -> Option<Tensor> {
        use crate::tensor::Dtype;
        let first = node.inputs.first().filter(|i| !i.is_empty())?;
        if !node.domain.is_empty() || node.inputs.len() != 1 || node.outputs.len() != 1 {
            return None;
        }
        let shape = &self.vals[self.by_name[first.as_str()]].desc.shape;
        let dims: Vec<i64> = match node.op.as_str() {
            "Shape" => {
                let rank = shape.len() as i64;
                let attr = |name: &str, default: i64| {
                    node.attributes
                        .iter()
                        .find(|(n, _)| n == name)
                        .and_then(|(_, v)| match v {
                            AttrValue::Int(i) => Some(*i),
                            _ => None,
                        })
                        .unwrap_or(default)
                };
                let clamp = |i: i64| {
                    if i < 0 {
                        (i + rank).max(0)
                    } else {
                        i.min(rank)
                    }
                };
                let (start, end) = (clamp(attr("start", 0)), clamp(attr("end", rank)));
                shape[start as usize..end.max(start) as usize]
                    .iter()
                    .map(|&d| d as i64)
                    .collect()
            }
            "Size" => vec![crate::tensor::elements(shape).min(i64::MAX as u64) as i64],
            _ => return None,
        };
        let desc = if node.op == "Size" {
            TensorDesc::new("", vec![], Dtype::I64)
        } else {
            TensorDesc::new("", vec![dims.len() as u64], Dtype::I64)
        };
        Some(Tensor {
            desc,
            data: dims.iter().flat_map(|d| d.to_le_bytes()).collect(),
        })
    }

    /// Holds the build that planned a launch of this plan (once per build).
    fn hold(&mut self, p: &Arc<crate::plugin::LoadedPlugin>) {
        if !self.planners.iter().any(|q| Arc::ptr_eq(p, q)) {
            self.planners.push(p.clone());
        }
    }

    /// The workspace of a node with setup launches: a buffer of its own for the plan's life (not
    /// pooled: no other node may overwrite what the setup wrote), filled before the first run.
    fn kept_workspace(
        &mut self,
        node: &Node,
        desc: TensorDesc,
        setup: CommandBuffer,
    ) -> Result<usize, GraphError> {
        let bytes = desc.byte_size().unwrap_or(0);
        let buf = self.host.device().alloc(bytes.max(1))?;
        self.owned.push(buf);
        self.stats.setup_launches += setup.launches.len();
        self.stats.constant_bytes += bytes;
        self.setup.push(Setup {
            node: node.label(),
            cmd: Arc::new(setup),
            workspace: buf,
        });
        let id = self.push(desc, Kind::Computed);
        self.vals[id].storage = Some(self.stores.len());
        self.stores.push(Store::Fixed(buf));
        Ok(id)
    }

    /// A new computed value with its own storage, written at `step`.
    fn computed(&mut self, desc: TensorDesc, step: usize) -> usize {
        let bytes = desc.byte_size().unwrap_or(0);
        let id = self.push(desc, Kind::Computed);
        self.vals[id].storage = Some(self.stores.len());
        self.stores.push(Store::Placed(Life {
            bytes,
            first: step,
            last: step,
        }));
        id
    }

    fn read(&mut self, v: usize, step: usize) {
        if let Some(Store::Placed(l)) = self.vals[v].storage.map(|s| &mut self.stores[s]) {
            l.last = l.last.max(step);
        }
    }

    fn define(&mut self, node: &'a Node, k: usize, id: usize) {
        let name = node.outputs[k].as_str();
        if !name.is_empty() {
            self.vals[id].desc.name = name.chars().take(64).collect();
            self.by_name.insert(name, id);
        }
    }

    fn check_outputs(&self, node: &Node) -> Result<(), GraphError> {
        match node
            .outputs
            .iter()
            .find(|o| !o.is_empty() && !self.by_name.contains_key(o.as_str()))
        {
            Some(o) => Err(GraphError::Malformed(format!(
                "node {}: output `{o}` was not produced by the plan",
                node.label()
            ))),
            None => Ok(()),
        }
    }
}

/// The request that runs `node` of `def` on its present inputs described by `descs` (in slot
/// order): domain, opset, attributes, absent slots and the outputs wanted. Every path that runs
/// a node (compiled plans, constant folding, the control-flow interpreter) builds it here.
pub(super) fn node_request<'d>(
    def: &GraphDef,
    node: &Node,
    descs: impl IntoIterator<Item = &'d TensorDesc>,
) -> OpRequest {
    let mut req = OpRequest::new(node.op.clone(), Vec::new());
    req.domain = node.domain.clone();
    // a fused chain's stages are ai.onnx ops: its request carries that opset
    req.opset = if node.domain == fusion::DOMAIN {
        def.opset("")
    } else {
        def.opset(&node.domain)
    };
    req.attributes = node.attributes.clone();
    let used = node
        .inputs
        .iter()
        .rposition(|i| !i.is_empty())
        .map_or(0, |p| p + 1);
    let mut descs = descs.into_iter();
    for (slot, name) in node.inputs[..used].iter().enumerate() {
        if name.is_empty() {
            req.absent.push(slot as u32);
            continue;
        }
        if let Some(d) = descs.next() {
            let mut d = d.clone();
            d.name = name.chars().take(64).collect();
            req.inputs.push(d);
        }
    }
    if node.outputs.len() > 1 || node.outputs.iter().any(|o| o.is_empty()) {
        req.outputs_wanted = node.outputs.iter().map(|o| !o.is_empty()).collect();
    }
    req
}

/// The fused chains of `def` for the chains the registry serves on the device's target; none
/// when `UMD_FUSION=0` (for comparing a model's run with and without fusion).
fn fusion_chains(host: &Host, def: &GraphDef) -> Vec<fusion::Chain> {
    if std::env::var_os("UMD_FUSION").is_some_and(|v| v == "0") {
        return Vec::new();
    }
    let snap = host.registry().snapshot();
    let target = host.device().target();
    // an op is a chain when its plugin's signature puts it in the fused domain
    let ops = snap
        .plugins()
        .iter()
        .flat_map(|p| p.ops_in_domain(fusion::DOMAIN))
        .filter(|op| !snap.candidates(op, target).is_empty());
    fusion::chains(def, &fusion::patterns(ops))
}

/// The value of an ONNX `Constant` node (a graph constant, like an initializer).
pub(super) fn constant_attr(node: &Node) -> Result<Tensor, GraphError> {
    use crate::tensor::Dtype;
    let [(name, v)] = node.attributes.as_slice() else {
        return Err(GraphError::Malformed(format!(
            "node {}: a Constant needs exactly one value attribute",
            node.label()
        )));
    };
    let scalar = |dtype, data| (TensorDesc::new("", vec![], dtype), data);
    let list = |dtype, n: usize, data| (TensorDesc::new("", vec![n as u64], dtype), data);
    let (desc, data) = match (name.as_str(), v) {
        ("value", AttrValue::Tensor(d, data)) => (d.clone(), data.clone()),
        ("value_float", AttrValue::Float(f)) => {
            scalar(Dtype::F32, (*f as f32).to_le_bytes().to_vec())
        }
        ("value_int", AttrValue::Int(i)) => scalar(Dtype::I64, i.to_le_bytes().to_vec()),
        ("value_floats", AttrValue::Floats(f)) => list(
            Dtype::F32,
            f.len(),
            f.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect(),
        ),
        ("value_ints", AttrValue::Ints(v)) => list(
            Dtype::I64,
            v.len(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        ("value_string", AttrValue::Text(t)) => {
            let data = crate::text::encode(&[t]);
            (TensorDesc::new("", vec![], Dtype::Str), data)
        }
        ("value_strings", AttrValue::Texts(v)) => {
            let data = crate::text::encode(v);
            (TensorDesc::new("", vec![v.len() as u64], Dtype::Str), data)
        }
        _ => {
            return Err(GraphError::Unsupported(format!(
                "node {}: Constant attribute `{name}` is not supported",
                node.label()
            )));
        }
    };
    // strings: the text after the offsets
    let desc = desc
        .sized(data.len() as u64)
        .map_err(|e| GraphError::Malformed(format!("node {}: {e}", node.label())))?;
    Ok(Tensor { desc, data })
}

/// Fuses the steps' launches into command buffers of at most the format's bindings and
/// launches ([`super::fuse`]): each value one binding (an input where the segment only reads it,
/// an output where it writes it).
fn fuse(
    host: &Host,
    step_vals: &[(String, String, Arc<Translation>, Vec<usize>)],
    steps: &[Step],
) -> Result<Vec<Segment>, GraphError> {
    let target = host.device().target();
    let mut out = Vec::new();
    let flush = |range: std::ops::Range<usize>, out: &mut Vec<Segment>| -> Result<(), GraphError> {
        if range.is_empty() {
            return Ok(());
        }
        let parts: Vec<super::fuse::Part> = step_vals[range.clone()]
            .iter()
            .map(|(_, _, t, keys)| super::fuse::Part {
                cmd: &t.cmdbuf,
                values: keys,
            })
            .collect();
        let fused = super::fuse::fuse(target, &parts)?;
        // The buffer of each value: where a step of the segment binds it.
        let buffer_of = |v: usize| {
            range
                .clone()
                .find_map(|si| {
                    let keys = &step_vals[si].3;
                    keys.iter()
                        .position(|&k| k == v)
                        .map(|b| steps[si].buffers[b])
                })
                .expect("a value of the segment")
        };
        out.push(Segment {
            buffers: fused.values.iter().map(|&v| buffer_of(v)).collect(),
            launch_nodes: range
                .clone()
                .flat_map(|si| std::iter::repeat_n(si, step_vals[si].2.cmdbuf.launches.len()))
                .collect(),
            cmd: Arc::new(fused.cmd),
        });
        Ok(())
    };
    let mut start = 0;
    let mut keys: Vec<usize> = Vec::new();
    let mut launches = 0;
    for (si, (_, _, t, step_keys)) in step_vals.iter().enumerate() {
        let new = step_keys.iter().filter(|k| !keys.contains(k)).count();
        if keys.len() + new > limits::MAX_BINDINGS
            || launches + t.cmdbuf.launches.len() > limits::MAX_LAUNCHES
        {
            flush(start..si, &mut out)?;
            start = si;
            keys.clear();
            launches = 0;
        }
        for k in step_keys {
            if !keys.contains(k) {
                keys.push(*k);
            }
        }
        launches += t.cmdbuf.launches.len();
    }
    flush(start..step_vals.len(), &mut out)?;
    Ok(out)
}
