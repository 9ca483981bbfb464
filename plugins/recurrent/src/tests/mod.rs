//! Native tests: every op against a naive f64 reference written from the ONNX spec (per
//! direction, whole batch at once, layout 0, transposed at the end), across dtypes, directions,
//! layouts, optional inputs present and absent, sequence_lens, activations, clip, the cell
//! flags, empty shapes and error cases; plus the CUDA sources of every op × dtype. This file:
//! the request builder ([`Case`]), the comparison, and the tests; [`reference`] the reference,
//! [`emu`] the CUDA emulation vectors.

mod emu;
mod reference;

use super::*;
use umd_sdk::{AttrValueExt as A, testing};

const ALL: [Dtype; 4] = DTYPES;

/// Deterministic values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(7);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn round(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

/// One test configuration.
#[derive(Clone)]
struct Case {
    op: &'static str,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    direction: &'static str,
    layout: i64,
    bias: bool,
    lens: Option<Vec<i32>>,
    h0: bool,
    c0: bool,
    peep: bool,
    attrs: Vec<(&'static str, A)>,
    dt: Dtype,
}

impl Case {
    fn new(op: &'static str, dt: Dtype) -> Self {
        Case {
            op,
            seq: 3,
            batch: 2,
            input: 3,
            hidden: 4,
            dirs: 1,
            direction: "forward",
            layout: 0,
            bias: true,
            lens: None,
            h0: true,
            c0: true,
            peep: true,
            attrs: vec![],
            dt,
        }
    }
    fn gates(&self) -> usize {
        match self.op {
            "RNN" => 1,
            "LSTM" => 4,
            _ => 3,
        }
    }
    fn lstm(&self) -> bool {
        self.op == "LSTM"
    }
    fn dir(mut self, d: &'static str) -> Self {
        self.direction = d;
        self.dirs = if d == "bidirectional" { 2 } else { 1 };
        self
    }
    fn attr(mut self, n: &'static str, v: A) -> Self {
        self.attrs.push((n, v));
        self
    }
    fn state_shape(&self) -> Vec<u64> {
        let (d, b, h) = (self.dirs as u64, self.batch as u64, self.hidden as u64);
        if self.layout == 0 {
            vec![d, b, h]
        } else {
            vec![b, d, h]
        }
    }
    /// The request and one value list per present input.
    fn build(&self) -> (PlanRequestExt, Vec<Vec<f64>>) {
        let (s, b, i, h, d, g) = (
            self.seq as u64,
            self.batch as u64,
            self.input as u64,
            self.hidden as u64,
            self.dirs as u64,
            self.gates() as u64,
        );
        let dt = self.dt;
        let x_shape = if self.layout == 0 {
            vec![s, b, i]
        } else {
            vec![b, s, i]
        };
        let mut r = PlanRequestExt::builder(self.op);
        let mut vals = vec![];
        let add = |vals: &mut Vec<Vec<f64>>,
                   r: umd_sdk::request::RequestBuilder,
                   name: &str,
                   shape: Vec<u64>,
                   seed| {
            let n = shape.iter().product::<u64>() as usize;
            vals.push(round(dt, &data(n, seed)));
            r.input(TensorDesc::new(name, shape, dt))
        };
        r = add(&mut vals, r, "X", x_shape, 1);
        r = add(&mut vals, r, "W", vec![d, g * h, i], 2);
        r = add(&mut vals, r, "R", vec![d, g * h, h], 3);
        r = if self.bias {
            add(&mut vals, r, "B", vec![d, 2 * g * h], 4)
        } else {
            r.absent()
        };
        r = match &self.lens {
            Some(l) => {
                vals.push(l.iter().map(|v| *v as f64).collect());
                r.input(TensorDesc::new("sequence_lens", vec![b], Dtype::I32))
            }
            None => r.absent(),
        };
        r = if self.h0 {
            add(&mut vals, r, "initial_h", self.state_shape(), 5)
        } else {
            r.absent()
        };
        if self.lstm() {
            r = if self.c0 {
                add(&mut vals, r, "initial_c", self.state_shape(), 6)
            } else {
                r.absent()
            };
            r = if self.peep {
                add(&mut vals, r, "P", vec![d, 3 * h], 7)
            } else {
                r.absent()
            };
        }
        r = r
            .attr("hidden_size", A::Int(self.hidden as i64))
            .attr("direction", A::Text(self.direction.into()));
        if self.layout != 0 {
            r = r.attr("layout", A::Int(self.layout));
        }
        for (n, v) in &self.attrs {
            r = r.attr(n, v.clone());
        }
        (r.build(Target::cpu()), vals)
    }

    /// Runs on the CPU kernels; every output decoded.
    fn run(&self) -> Result<Vec<Vec<f64>>, OpError> {
        let (req, vals) = self.build();
        let present: Vec<&TensorDesc> = req.present().collect();
        let bytes: Vec<Vec<u8>> = present
            .iter()
            .zip(&vals)
            .map(|(d, v)| dtype::encode(d.dtype, v).unwrap())
            .collect();
        let (plan, outs) = testing::run::<Recurrent>(&req, &bytes)?;
        Ok(plan
            .outputs
            .iter()
            .zip(outs)
            .map(|(d, b)| dtype::decode_f64(d.dtype, &b))
            .collect())
    }

    fn check(&self) {
        let got = self
            .run()
            .unwrap_or_else(|e| panic!("{}: {e:?}", self.name()));
        let want = self.reference();
        let tol = match self.dt {
            Dtype::F32 => 1e-5,
            Dtype::F64 => 1e-12,
            Dtype::F16 => 4e-3,
            _ => 3e-2,
        };
        assert_eq!(got.len(), want.len(), "{}", self.name());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len(), "{} output {k}", self.name());
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!(
                    (a - b).abs() <= tol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan()),
                    "{} output {k}[{i}]: got {a}, want {b}",
                    self.name()
                );
            }
        }
    }

    fn name(&self) -> String {
        format!(
            "{} {:?} {} layout {} s{} b{} i{} h{} bias {} lens {:?} h0 {} c0 {} p {} {:?}",
            self.op,
            self.dt,
            self.direction,
            self.layout,
            self.seq,
            self.batch,
            self.input,
            self.hidden,
            self.bias,
            self.lens,
            self.h0,
            self.c0,
            self.peep,
            self.attrs
        )
    }
}

fn cell_of(op: &str) -> Cell {
    match op {
        "RNN" => Cell::Rnn,
        "LSTM" => Cell::Lstm,
        _ => Cell::Gru,
    }
}

/// The input products of every step at once, and one step's rows at a time (what a long
/// sequence takes), both checked against the reference on every case of the tests below.
#[test]
fn every_case_with_the_input_products_of_each_step_alone() {
    crate::cpu::INPUT_PRODUCTS_LIMIT.with(|l| l.set(0));
    every_op_dtype_direction_and_layout();
    optional_inputs_absent();
    sequence_lens_zero_pad_y_and_keep_the_last_valid_state();
    activations_clip_and_cell_flags();
    larger_than_a_block();
}

#[test]
fn every_op_dtype_direction_and_layout() {
    for op in OPS {
        for dt in ALL {
            for dir in ["forward", "reverse", "bidirectional"] {
                for layout in [0, 1] {
                    let mut c = Case::new(op, dt).dir(dir);
                    c.layout = layout;
                    c.check();
                }
            }
        }
    }
}

#[test]
fn optional_inputs_absent() {
    for op in OPS {
        for dir in ["forward", "bidirectional"] {
            for mask in 0..16u32 {
                let mut c = Case::new(op, Dtype::F32).dir(dir);
                c.bias = mask & 1 != 0;
                c.h0 = mask & 2 != 0;
                c.c0 = mask & 4 != 0;
                c.peep = mask & 8 != 0;
                c.check();
            }
        }
    }
}

#[test]
fn sequence_lens_zero_pad_y_and_keep_the_last_valid_state() {
    for op in OPS {
        for dir in ["forward", "reverse", "bidirectional"] {
            for layout in [0, 1] {
                let mut c = Case::new(op, Dtype::F32).dir(dir);
                c.seq = 4;
                c.batch = 3;
                c.layout = layout;
                c.lens = Some(vec![2, 4, 0]);
                // batch 2 has length 0: Y and the final states all zero
                c.check();
            }
        }
    }
}

#[test]
fn activations_clip_and_cell_flags() {
    let names = act::NAMES;
    for (k, name) in names.iter().enumerate() {
        // RNN with each activation, both directions, alpha/beta given to those taking them
        let c = Case::new("RNN", Dtype::F32)
            .dir("bidirectional")
            .attr(
                "activations",
                A::Texts(vec![name.to_string(), name.to_string()]),
            )
            .attr("activation_alpha", A::Floats(vec![0.7, 0.3]))
            .attr("activation_beta", A::Floats(vec![0.2, -0.1]));
        let (uses_a, uses_b) = match k {
            3 | 6 | 7 => (true, true),
            4 | 5 | 8 => (true, false),
            _ => (false, false),
        };
        let mut c = c;
        if !uses_a {
            c.attrs.retain(|(n, _)| *n != "activation_alpha");
        }
        if !uses_b {
            c.attrs.retain(|(n, _)| *n != "activation_beta");
        }
        c.check();
    }
    let lstm = Case::new("LSTM", Dtype::F32)
        .attr(
            "activations",
            A::Texts(vec!["HardSigmoid".into(), "Elu".into(), "Softsign".into()]),
        )
        .attr("clip", A::Float(0.3));
    lstm.check();
    Case::new("LSTM", Dtype::F64)
        .attr("input_forget", A::Int(1))
        .check();
    for dt in ALL {
        Case::new("GRU", dt)
            .dir("bidirectional")
            .attr("linear_before_reset", A::Int(1))
            .check();
    }
    Case::new("GRU", Dtype::F32)
        .attr("clip", A::Float(0.1))
        .attr(
            "activations",
            A::Texts(vec!["relu".into(), "affine".into()]),
        )
        .attr("activation_alpha", A::Floats(vec![0.5]))
        .attr("activation_beta", A::Floats(vec![0.25]))
        .check();
}

#[test]
fn empty_shapes() {
    for op in OPS {
        for (s, b, h) in [(0, 2, 4), (3, 0, 4), (3, 2, 0)] {
            for dir in ["forward", "bidirectional"] {
                let mut c = Case::new(op, Dtype::F32).dir(dir);
                c.seq = s;
                c.batch = b;
                c.hidden = h;
                c.check();
            }
        }
    }
}

#[test]
fn larger_than_a_block() {
    // more hidden units than threads per block (256) and a grid-stride over pairs
    let mut c = Case::new("GRU", Dtype::F32).dir("bidirectional");
    c.hidden = 300;
    c.seq = 2;
    c.input = 2;
    c.check();
}

#[test]
fn only_the_outputs_asked_for_at_most() {
    let (mut req, _) = Case::new("RNN", Dtype::F32).build();
    req.outputs_wanted = vec![false, true];
    let plan = Recurrent::plan_ext(&req).unwrap();
    assert_eq!(plan.outputs.len(), 2);
    req.outputs_wanted = vec![true, true, true];
    assert!(matches!(
        Recurrent::plan_ext(&req),
        Err(OpError::InvalidShape(_))
    ));
}

#[test]
fn errors_name_what_is_wrong() {
    let attr_err = |c: Case, what: &str| match Recurrent::plan_ext(&c.build().0) {
        Err(OpError::InvalidAttribute(m)) => assert!(m.contains(what), "{m}"),
        other => panic!("{what}: {other:?}"),
    };
    attr_err(Case::new("RNN", Dtype::F32).dir("sideways"), "sideways");
    attr_err(
        Case::new("RNN", Dtype::F32).attr("activations", A::Texts(vec!["Gelu".into()])),
        "Gelu",
    );
    attr_err(
        Case::new("GRU", Dtype::F32).attr("input_forget", A::Int(1)),
        "input_forget",
    );
    attr_err(
        Case::new("LSTM", Dtype::F32).attr("layout", A::Int(2)),
        "layout",
    );
    let (mut req, _) = Case::new("LSTM", Dtype::F32).build();
    req.attributes[0].value = A::Int(7);
    assert!(
        matches!(Recurrent::plan_ext(&req), Err(OpError::InvalidAttribute(m)) if m.contains("hidden_size"))
    );
    attr_err(
        Case::new("LSTM", Dtype::F32).attr("activations", A::Texts(vec!["Tanh".into()])),
        "activations",
    );
    // dtypes and shapes
    let mut c = Case::new("RNN", Dtype::F32);
    c.dt = Dtype::I32;
    assert!(matches!(
        Recurrent::plan_ext(&c.build().0),
        Err(OpError::UnsupportedDtype(_))
    ));
    let (mut req, _) = Case::new("GRU", Dtype::F32).build();
    req.inputs[1].as_mut().unwrap().desc.shape = vec![1, 5, 3];
    assert!(matches!(
        Recurrent::plan_ext(&req),
        Err(OpError::InvalidShape(_))
    ));
    let mut c = Case::new("LSTM", Dtype::F32);
    c.lens = Some(vec![1, 2]);
    let (mut req, _) = c.build();
    req.inputs[4].as_mut().unwrap().desc.dtype = Dtype::I64;
    assert!(matches!(
        Recurrent::plan_ext(&req),
        Err(OpError::UnsupportedDtype(_))
    ));
    let req = PlanRequestExt::builder("Scan").build(Target::cpu());
    assert!(matches!(
        Recurrent::plan_ext(&req),
        Err(OpError::UnsupportedOp(_))
    ));
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    for case in Recurrent::self_tests() {
        let mut b = PlanRequestExt::builder(&case.op);
        for d in &case.inputs {
            b = b.input(umd_sdk::legacy::desc_from_legacy(d));
        }
        let req = b.build(Target::cpu());
        let (_, outs) = testing::run::<Recurrent>(&req, &case.input_data).unwrap();
        assert_eq!(outs.len(), case.expected.len(), "{}", case.name);
        for (o, e) in outs.iter().zip(&case.expected) {
            let (o, e) = (
                dtype::decode_f64(Dtype::F32, o),
                dtype::decode_f64(Dtype::F32, e),
            );
            for (a, b) in o.iter().zip(&e) {
                assert!(
                    (a - b).abs() <= case.tolerance + 1e-7,
                    "{}: {a} vs {b}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn cuda_sources_for_every_op_and_dtype() {
    for op in OPS {
        for dt in ALL {
            let mut c = Case::new(op, dt).dir("bidirectional");
            c.lens = Some(vec![3, 1]);
            let srcs = testing::cuda_sources::<Recurrent>(&c.build().0).unwrap();
            assert_eq!(srcs.len(), 1);
            let code = &srcs[0].1.code;
            assert!(!code.contains("#include"));
            assert!(code.contains(&format!("{}_{}(", op.to_ascii_lowercase(), dtype::name(dt))));
        }
    }
}

#[test]
fn every_opset_form() {
    // opset 1 (output_sequence), 7 (no layout), 14 and 22 read the same attributes here
    for op in OPS {
        for opset in [1, 7, 14, 22] {
            let (mut req, _) = Case::new(op, Dtype::F32).build();
            req.opset = opset;
            if opset == 1 {
                req.attributes.push(umd_sdk::AttributeExt {
                    name: "output_sequence".into(),
                    value: A::Int(0),
                });
            }
            let plan = Recurrent::plan_ext(&req).unwrap();
            assert_eq!(plan.outputs.len(), if op == "LSTM" { 3 } else { 2 });
        }
    }
    // one activation list shared by both directions of a bidirectional op
    Case::new("LSTM", Dtype::F32)
        .dir("bidirectional")
        .attr(
            "activations",
            A::Texts(vec!["Sigmoid".into(), "Softsign".into(), "Relu".into()]),
        )
        .check();
}
