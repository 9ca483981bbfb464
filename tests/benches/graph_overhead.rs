//! Host overhead of a graph run per node on the CPU device: a chain of N small element-wise
//! nodes (f32[16], Neg and Relu alternating) run as one model, against (a) the sum of its
//! kernels' own times — each launch called in isolation through the same plugin entry the
//! device uses (`cpu-kernel.run`, in place), so the difference is everything the host and the
//! device add around the kernels — and (b) today's op-by-op path: per node a (cached)
//! translation, a submission and a wait.
//!
//! Run: `cargo bench -p umd-tests --bench graph_overhead` (`-- N…` for other chain lengths).
//! Prints medians over repeated runs; figures go in BENCHMARKS.md.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use memory::Memory;
use umd::device::{BoundMemory, BufferMemory};
use umd::graph::{Dim, GraphDef, Model, Node, Tensor, ValueDecl};
use umd::plugin::convert::{dim3_to_wit, relocation_to_wit};
use umd::plugin::kernel_call::{BlockRangeRef, BoundBufferRef, KernelCallRef};
use umd::{Dtype, Host, OpRequest, TensorDesc};

/// Elements per tensor: small, so the kernels are short and the overhead shows.
const LEN: u64 = 16;

mod memory {
    /// A buffer for an isolated kernel call.
    pub struct Memory(pub std::sync::Mutex<Vec<u8>>);
    impl umd::device::BufferMemory for Memory {
        fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
            dst.extend_from_slice(&self.0.lock().unwrap()[offset..offset + len]);
        }
        fn write_from(&self, offset: usize, src: &[u8]) {
            self.0.lock().unwrap()[offset..offset + src.len()].copy_from_slice(src);
        }
    }
}

fn op(i: usize) -> &'static str {
    if i.is_multiple_of(2) { "Neg" } else { "Relu" }
}

fn chain(n: usize) -> GraphDef {
    let name = |i: usize| {
        if i == 0 {
            "x".to_string()
        } else {
            format!("v{i}")
        }
    };
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| Node::new(op(i), &[&name(i)], &[&name(i + 1)], vec![]))
        .collect();
    nodes.last_mut().unwrap().outputs = vec!["y".into()];
    let decl = |n: &str| ValueDecl {
        name: n.into(),
        dtype: Some(Dtype::F32),
        dims: Some(vec![Dim::Fixed(LEN)]),
    };
    GraphDef {
        nodes,
        inputs: vec![decl("x")],
        outputs: vec![decl("y")],
        opsets: HashMap::from([(String::new(), 17)]),
        ..Default::default()
    }
}

/// The same chain inside `If(true)`: a model with control flow, which the host interprets; the
/// branch itself has no control flow, so it runs as one compiled submission.
fn interpreted(n: usize) -> GraphDef {
    let mut body = chain(n);
    body.inputs.clear(); // `x` becomes the branch's capture
    let branch = umd::graph::Subgraph::new(body).unwrap();
    let mut node = Node::new("If", &["cond"], &["y"], vec![]);
    node.subgraphs = vec![
        ("then_branch".into(), branch.clone()),
        ("else_branch".into(), branch),
    ];
    let outer = chain(1);
    GraphDef {
        nodes: vec![node],
        constants: HashMap::from([(
            "cond".into(),
            umd::graph::Constant {
                desc: TensorDesc::new("cond", vec![], Dtype::Bool),
                data: Arc::new(vec![1]),
            },
        )]),
        ..outer
    }
}

/// The chain after an `If(true)` whose branch passes `x` on: the chain is a run of plain nodes
/// at the top of a graph with control flow, which the host runs as one compiled segment.
fn after_if(n: usize) -> GraphDef {
    let mut g = chain(n);
    g.nodes[0].inputs = vec!["xi".into()];
    let pass = |out: &str| {
        umd::graph::Subgraph::new(GraphDef {
            nodes: vec![Node::new("Identity", &["x"], &[out], vec![])],
            outputs: vec![ValueDecl {
                name: out.into(),
                dtype: None,
                dims: None,
            }],
            opsets: HashMap::from([(String::new(), 17)]),
            ..Default::default()
        })
        .unwrap()
    };
    let mut node = Node::new("If", &["cond"], &["xi"], vec![]);
    node.subgraphs = vec![
        ("then_branch".into(), pass("t")),
        ("else_branch".into(), pass("e")),
    ];
    g.nodes.insert(0, node);
    g.constants.insert(
        "cond".into(),
        umd::graph::Constant {
            desc: TensorDesc::new("cond", vec![], Dtype::Bool),
            data: Arc::new(vec![1]),
        },
    );
    g
}

/// Median and best of `reps` timings of `f`, in µs.
fn timed(reps: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..reps / 10 + 1 {
        f();
    }
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[t.len() / 2], t[0])
}

/// One launch of `op` on f32[LEN], called in isolation through its plugin's in-place entry.
fn kernel_alone(host: &Host, op: &str, reps: usize) -> f64 {
    let d = TensorDesc::new("x", vec![LEN], Dtype::F32);
    let t = host.translate(&OpRequest::new(op, vec![d])).unwrap();
    let cmd = &t.cmdbuf;
    assert_eq!(cmd.launches.len(), 1, "{op}: one launch");
    let l = &cmd.launches[0];
    let plugin = host
        .registry()
        .resolve(&l.module, umd::target::CPU_ARCH)
        .unwrap();
    let bytes = (LEN * 4) as usize;
    let bound: Arc<[BoundMemory]> = cmd
        .bindings
        .iter()
        .enumerate()
        .map(|(b, binding)| BoundMemory {
            binding: b as u32,
            size: bytes as u64,
            access: if binding.role == umd::cmdbuf::Role::Input {
                umd::cmdbuf::Access::Read
            } else {
                umd::cmdbuf::Access::Write
            },
            memory: Arc::new(Memory(std::sync::Mutex::new(vec![0; bytes])))
                as Arc<dyn BufferMemory>,
            resident: None,
            asked: Default::default(),
            units: Default::default(),
        })
        .collect();
    let relocations: Vec<_> = l.relocations.iter().map(relocation_to_wit).collect();
    let buffers: Vec<_> = bound
        .iter()
        .map(|b| BoundBufferRef {
            binding: b.binding,
            size: b.size,
        })
        .collect();
    let call = KernelCallRef {
        module_id: &l.module.id,
        entry_point: &l.entry_point,
        grid: dim3_to_wit(l.grid),
        block: dim3_to_wit(l.block),
        params: &l.params,
        relocations: &relocations,
        buffers: &buffers,
        blocks: BlockRangeRef {
            first: 0,
            count: l.grid.volume(),
        },
    };
    timed(reps, || {
        plugin
            .run_in_place(&call, bound.clone())
            .expect("an in-place kernel")
            .unwrap()
            .unwrap();
    })
    .0
}

fn main() {
    let lens: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let lens = if lens.is_empty() {
        vec![16, 64, 256]
    } else {
        lens
    };
    let host = Arc::new(Host::builder().cpu_threads(1).build().unwrap());
    let dev = host.device().clone();
    let reps = 400;
    let k_neg = kernel_alone(&host, "Neg", reps * 10);
    let k_relu = kernel_alone(&host, "Relu", reps * 10);
    println!("kernel alone (cpu-kernel.run, f32[{LEN}]): Neg {k_neg:.2} µs, Relu {k_relu:.2} µs");
    // Two pieces of the CPU device's per-launch dispatch (both run for every launch).
    let t = host
        .translate(&OpRequest::new(
            "Neg",
            vec![TensorDesc::new("x", vec![LEN], Dtype::F32)],
        ))
        .unwrap();
    let l = &t.cmdbuf.launches[0];
    let resolve = timed(reps * 10, || {
        std::hint::black_box(
            host.registry()
                .resolve(&l.module, umd::target::CPU_ARCH)
                .unwrap(),
        );
    })
    .0;
    let plugin = host
        .registry()
        .resolve(&l.module, umd::target::CPU_ARCH)
        .unwrap();
    let splittable = timed(reps * 10, || {
        std::hint::black_box(plugin.splittable(&l.module.id, &l.entry_point).unwrap());
    })
    .0;
    println!(
        "per-launch dispatch pieces: registry.resolve {:.3} µs, plugin.splittable {:.3} µs",
        resolve, splittable
    );
    println!("medians (best in brackets):");
    println!(
        "{:>5} {:>16} {:>10} {:>22} {:>20} {:>22} {:>22}",
        "nodes",
        "graph µs",
        "kernels µs",
        "graph overhead µs/node",
        "per-op µs/node",
        "in If: overhead µs/node",
        "after If: µs/node"
    );
    for n in lens {
        let model = Model::new(host.clone(), chain(n)).unwrap();
        let x = Tensor {
            desc: TensorDesc::new("x", vec![LEN], Dtype::F32),
            data: vec![0; (LEN * 4) as usize],
        };
        let run = model.run(std::slice::from_ref(&x)).unwrap();
        assert_eq!(run.stats.launches, n);
        let (graph, graph_best) = timed(reps, || {
            model.run(std::slice::from_ref(&x)).unwrap();
        });
        let kernels: f64 = (0..n)
            .map(|i| if op(i) == "Neg" { k_neg } else { k_relu })
            .sum();
        // Today's per-op path: per node a cached translation, a submission, a wait.
        let bufs: Vec<_> = (0..=n).map(|_| dev.alloc(LEN * 4).unwrap()).collect();
        let reqs: Vec<OpRequest> = (0..n)
            .map(|i| OpRequest::new(op(i), vec![x.desc.clone()]))
            .collect();
        let (per_op, per_op_best) = timed(reps / 4 + 1, || {
            for (i, req) in reqs.iter().enumerate() {
                let t = host.translate(req).unwrap();
                dev.submit(dev.default_stream(), t.cmdbuf.clone(), &bufs[i..i + 2])
                    .unwrap()
                    .wait()
                    .unwrap();
            }
        });
        for b in bufs {
            dev.free(b).unwrap();
        }
        let nf = n as f64;
        let inter = Model::new(host.clone(), interpreted(n)).unwrap();
        assert_eq!(
            inter.run(std::slice::from_ref(&x)).unwrap().outputs[0].data,
            run.outputs[0].data,
            "the interpreted chain computes what the compiled one does"
        );
        let (inter_t, inter_best) = timed(reps / 4 + 1, || {
            inter.run(std::slice::from_ref(&x)).unwrap();
        });
        let after = Model::new(host.clone(), after_if(n)).unwrap();
        let first = after.run(std::slice::from_ref(&x)).unwrap();
        assert_eq!(first.outputs[0].data, run.outputs[0].data);
        // The branch (an Identity: a view, no launch) submits nothing; the chain what the
        // compiled chain does.
        assert_eq!(
            first.stats.submissions, run.stats.submissions,
            "the chain as one segment"
        );
        let (after_t, after_best) = timed(reps / 4 + 1, || {
            after.run(std::slice::from_ref(&x)).unwrap();
        });
        println!(
            "{n:>5} {:>16} {kernels:>10.1} {:>22} {:>20} {:>22} {:>22}",
            format!("{graph:.1} ({graph_best:.1})"),
            format!(
                "{:.2} ({:.2})",
                (graph - kernels) / nf,
                (graph_best - kernels) / nf
            ),
            format!("{:.2} ({:.2})", per_op / nf, per_op_best / nf),
            format!(
                "{:.2} ({:.2})",
                (inter_t - kernels) / nf,
                (inter_best - kernels) / nf
            ),
            format!(
                "{:.2} ({:.2})",
                (after_t - kernels) / nf,
                (after_best - kernels) / nf
            ),
        );
    }
}
