//! Native tests: every optimizer planned and run on the CPU kernels against naive f64
//! references of the ONNX formulas (`onnx/reference/ops/aionnx_preview_training`), one and
//! several parameters, every dtype, f32 and f64 learning rates, first and later steps, empty
//! tensors, error cases, the self-tests and the CUDA sources of every op × dtype.

use super::*;
use umd_sdk::{AttrValueExt as A, testing};

fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

fn round(dt: Dtype, v: &[f64]) -> Vec<f64> {
    dtype::decode_f64(dt, &dtype::encode(dt, v).unwrap())
}

/// A request of `kind` over parameters of `shapes` in `dt` with learning rate `r` (in `rdt`)
/// and step `t`; returns the outputs decoded and the inputs used (X, G, states per parameter).
struct Case {
    kind: Kind,
    dt: Dtype,
    rdt: Dtype,
    r: f64,
    t: i64,
    shapes: Vec<Vec<u64>>,
    attrs: Vec<(&'static str, A)>,
    domain: &'static str,
}

impl Case {
    fn new(kind: Kind, dt: Dtype, shapes: &[&[u64]]) -> Self {
        Case {
            kind,
            dt,
            rdt: Dtype::F32,
            r: 0.1,
            t: 0,
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            attrs: vec![],
            domain: DOMAIN,
        }
    }
    fn attr(mut self, name: &'static str, v: A) -> Self {
        self.attrs.push((name, v));
        self
    }
    fn group(&self) -> usize {
        if self.kind == Kind::Adam { 4 } else { 3 }
    }
    fn request(&self) -> PlanRequestExt {
        let n = self.shapes.len();
        let mut b = PlanRequestExt::builder(self.kind.name())
            .input(TensorDesc::new("R", vec![], self.rdt))
            .input(TensorDesc::new("T", vec![], Dtype::I64));
        for k in 0..self.group() {
            for i in 0..n {
                b = b.input(TensorDesc::new(
                    format!("in{k}_{i}"),
                    self.shapes[i].clone(),
                    self.dt,
                ));
            }
        }
        for (name, v) in &self.attrs {
            b = b.attr(name, v.clone());
        }
        let mut req = b.build(Target::cpu());
        req.domain = self.domain.into();
        req
    }
    /// The tensors (per group member k, per parameter i), H and V states made non-negative.
    fn values(&self) -> Vec<Vec<Vec<f64>>> {
        (0..self.group())
            .map(|k| {
                self.shapes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let n = s.iter().product::<u64>() as usize;
                        let v = data(n, (k * 10 + i) as u64 + 1);
                        let last_is_h = k == self.group() - 1 && self.kind != Kind::Momentum;
                        let v: Vec<f64> = if last_is_h {
                            v.iter().map(|x| x.abs()).collect()
                        } else {
                            v
                        };
                        round(self.dt, &v)
                    })
                    .collect()
            })
            .collect()
    }
    fn bytes(&self) -> Vec<Vec<u8>> {
        let vals = self.values();
        let mut bytes = vec![
            dtype::encode(self.rdt, &[self.r]).unwrap(),
            self.t.to_le_bytes().to_vec(),
        ];
        for group in &vals {
            for v in group {
                bytes.push(dtype::encode(self.dt, v).unwrap());
            }
        }
        bytes
    }
    fn run(&self) -> Result<(Vec<TensorDesc>, Vec<Vec<f64>>), OpError> {
        let (plan, outs) = testing::run::<OptimPlugin>(&self.request(), &self.bytes())?;
        let decoded = plan
            .outputs
            .iter()
            .zip(&outs)
            .map(|(d, b)| dtype::decode_f64(d.dtype, b))
            .collect();
        Ok((plan.outputs, decoded))
    }
    fn attr_f(&self, name: &str, default: f64) -> f64 {
        match self.attrs.iter().find(|(n, _)| *n == name) {
            Some((_, A::Float(v))) => *v,
            _ => default,
        }
    }
    /// The expected outputs: X_new…, then each state's new values….
    fn reference(&self) -> Vec<Vec<f64>> {
        let vals = self.values();
        let n = self.shapes.len();
        let r = round(self.rdt, &[self.r])[0];
        let t = self.t as f64;
        let mut out = vec![vec![]; (self.group() - 1) * n];
        for i in 0..n {
            let (x, g) = (&vals[0][i], &vals[1][i]);
            let mut cols: Vec<Vec<f64>> = vec![vec![]; self.group() - 1];
            for e in 0..x.len() {
                let norm = self.attr_f("norm_coefficient", 0.0);
                let gr = norm * x[e] + g[e];
                match self.kind {
                    Kind::Adagrad => {
                        let lr = r / (1.0 + t * self.attr_f("decay_factor", 0.0));
                        let h = vals[2][i][e] + gr * gr;
                        let eps = self.attr_f("epsilon", 1e-6);
                        cols[0].push(x[e] - lr * gr / (h.sqrt() + eps));
                        cols[1].push(h);
                    }
                    Kind::Adam => {
                        let (alpha, beta) = (self.attr_f("alpha", 0.9), self.attr_f("beta", 0.999));
                        let v = alpha * vals[2][i][e] + (1.0 - alpha) * gr;
                        let h = beta * vals[3][i][e] + (1.0 - beta) * gr * gr;
                        let lr = if t > 0.0 {
                            r * (1.0 - beta.powf(t)).sqrt() / (1.0 - alpha.powf(t))
                        } else {
                            r
                        };
                        let xn = x[e] - lr * (v / (h.sqrt() + self.attr_f("epsilon", 1e-6)));
                        cols[0].push((1.0 - self.attr_f("norm_coefficient_post", 0.0)) * xn);
                        cols[1].push(v);
                        cols[2].push(h);
                    }
                    Kind::Momentum => {
                        let alpha = self.attr_f("alpha", 0.0);
                        let beta = if t > 0.0 {
                            self.attr_f("beta", 0.0)
                        } else {
                            1.0
                        };
                        let v = alpha * vals[2][i][e] + beta * gr;
                        let nesterov = self.attrs.iter().any(|(n, v)| {
                            *n == "mode" && matches!(v, A::Text(m) if m == "nesterov")
                        });
                        cols[0].push(if nesterov {
                            x[e] - r * (gr + alpha * v)
                        } else {
                            x[e] - r * v
                        });
                        cols[1].push(v);
                    }
                }
            }
            for (k, c) in cols.into_iter().enumerate() {
                out[k * n + i] = c;
            }
        }
        out
    }
    fn check(&self, what: &str) {
        let (descs, got) = self
            .run()
            .unwrap_or_else(|e| panic!("{what} {:?}: {e:?}", self.dt));
        let want = self.reference();
        assert_eq!(got.len(), want.len(), "{what}: outputs");
        let (a, r) = match self.dt {
            Dtype::F32 => (1e-5, 1e-5),
            Dtype::F16 => (1e-2, 1e-2),
            Dtype::Bf16 => (6e-2, 6e-2),
            _ => (1e-12, 1e-12),
        };
        for (k, ((g, w), d)) in got.iter().zip(&want).zip(&descs).enumerate() {
            assert_eq!(d.dtype, self.dt, "{what}: output {k} dtype");
            assert_eq!(g.len(), w.len(), "{what}: output {k} length");
            for (e, (g, w)) in g.iter().zip(w).enumerate() {
                assert!(
                    (g - w).abs() <= a + r * w.abs(),
                    "{what} {:?} output {k}[{e}]: got {g}, want {w}",
                    self.dt
                );
            }
        }
    }
}

fn momentum(dt: Dtype, shapes: &[&[u64]], mode: &str) -> Case {
    Case::new(Kind::Momentum, dt, shapes)
        .attr("alpha", A::Float(0.95))
        .attr("beta", A::Float(0.85))
        .attr("norm_coefficient", A::Float(0.01))
        .attr("mode", A::Text(mode.into()))
}

#[test]
fn adagrad_matches_the_reference() {
    for dt in DTYPES {
        for t in [0, 3] {
            let mut c = Case::new(Kind::Adagrad, dt, &[&[1], &[2, 3], &[0, 4]])
                .attr("norm_coefficient", A::Float(0.001))
                .attr("epsilon", A::Float(1e-5))
                .attr("decay_factor", A::Float(0.1));
            c.t = t;
            c.check("adagrad");
            c.rdt = Dtype::F64;
            c.r = 0.3;
            c.check("adagrad with an f64 R");
        }
        Case::new(Kind::Adagrad, dt, &[&[5]]).check("adagrad defaults");
    }
}

#[test]
fn adam_matches_the_reference() {
    for dt in DTYPES {
        for t in [0, 1, 7] {
            let mut c = Case::new(Kind::Adam, dt, &[&[2], &[3, 1, 2]])
                .attr("norm_coefficient", A::Float(0.001))
                .attr("alpha", A::Float(0.95))
                .attr("beta", A::Float(0.85))
                .attr("epsilon", A::Float(1e-2))
                .attr("norm_coefficient_post", A::Float(0.05));
            c.t = t;
            c.check("adam");
        }
        Case::new(Kind::Adam, dt, &[&[4], &[]]).check("adam defaults, scalar parameter");
    }
}

#[test]
fn momentum_matches_the_reference() {
    for dt in DTYPES {
        for mode in ["standard", "nesterov"] {
            for t in [0, 2] {
                let mut c = momentum(dt, &[&[2], &[2, 2], &[0]], mode);
                c.t = t;
                c.rdt = if t == 0 { Dtype::F32 } else { Dtype::F64 };
                c.check(mode);
            }
        }
    }
}

#[test]
fn the_onnx_adagrad_case() {
    // test_adagrad: r 0.1, t 0, x 1, g -1, h 2 (norm 0.001, eps 1e-5, decay 0.1)
    let mut c = Case::new(Kind::Adagrad, Dtype::F32, &[&[1]])
        .attr("norm_coefficient", A::Float(0.001))
        .attr("epsilon", A::Float(1e-5))
        .attr("decay_factor", A::Float(0.1));
    c.r = 0.1;
    let (_, got) = c.run().unwrap();
    // x, g, h come from data(); check the structure and the closed form once more by hand
    let v = c.values();
    let gr = 0.001 * v[0][0][0] + v[1][0][0];
    let h = v[2][0][0] + gr * gr;
    assert!((got[1][0] - h).abs() < 1e-5);
    let x = v[0][0][0] - round(Dtype::F32, &[0.1])[0] * gr / (h.sqrt() + 1e-5);
    assert!((got[0][0] - x).abs() < 1e-5);
}

#[test]
fn errors_are_refused() {
    let e = momentum(Dtype::F32, &[&[2]], "fast").run().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("mode")));
    let e = Case::new(Kind::Momentum, Dtype::F32, &[&[2]])
        .attr("alpha", A::Float(0.5))
        .run()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)));
    let e = Case::new(Kind::Adam, Dtype::F32, &[&[2]])
        .attr("bogus", A::Float(0.5))
        .run()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("bogus")));
    let e = Case::new(Kind::Adagrad, Dtype::I32, &[&[2]])
        .run()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32, f16, bf16 and f64")));
    let mut c = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]);
    c.rdt = Dtype::I64;
    assert!(matches!(c.run().unwrap_err(), OpError::UnsupportedDtype(_)));
    let mut c = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]);
    c.domain = "com.example";
    assert!(matches!(c.run().unwrap_err(), OpError::UnsupportedOp(_)));
    let mut c = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]);
    c.domain = "";
    c.check("no domain said");
    // a group short by one tensor
    let mut req = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]).request();
    req.inputs.pop();
    assert!(matches!(
        OptimPlugin::plan_ext(&req).unwrap_err(),
        OpError::InvalidShape(_)
    ));
    // G of another shape than X
    let mut req = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]).request();
    req.inputs[3].as_mut().unwrap().desc.shape = vec![3];
    assert!(matches!(
        OptimPlugin::plan_ext(&req).unwrap_err(),
        OpError::InvalidShape(_)
    ));
    // R not a scalar
    let mut req = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]).request();
    req.inputs[0].as_mut().unwrap().desc.shape = vec![2];
    assert!(matches!(
        OptimPlugin::plan_ext(&req).unwrap_err(),
        OpError::InvalidShape(_)
    ));
    let mut req = Case::new(Kind::Adagrad, Dtype::F32, &[&[2]]).request();
    req.op = "Sgd".into();
    assert!(matches!(
        OptimPlugin::plan_ext(&req).unwrap_err(),
        OpError::UnsupportedOp(_)
    ));
}

#[test]
fn cuda_sources_exist_for_every_op_and_dtype() {
    for dt in DTYPES {
        for c in [
            Case::new(Kind::Adagrad, dt, &[&[2], &[3]]),
            Case::new(Kind::Adam, dt, &[&[2]]),
            momentum(dt, &[&[2]], "nesterov"),
        ] {
            let srcs = testing::cuda_sources::<OptimPlugin>(&c.request())
                .unwrap_or_else(|e| panic!("{:?} {dt:?}: {e:?}", c.kind));
            assert_eq!(srcs.len(), 1);
        }
        let src = OptimPlugin::kernel_source(&module_id(dt), &Target::cpu()).unwrap();
        for e in &src.entry_points {
            assert!(src.code.contains(&format!("void {e}(")), "{e} missing");
        }
        assert!(!src.code.contains("#include"));
    }
    assert!(OptimPlugin::kernel_source("optim_i32", &Target::cpu()).is_err());
}

#[test]
fn self_tests_pass_and_describe_lists_every_op() {
    for case in OptimPlugin::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: case.op.clone(),
            inputs: case.inputs.clone(),
            attributes: case.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<OptimPlugin>(&req, &case.input_data).unwrap();
        assert_eq!(outs.len(), case.expected.len(), "{}", case.name);
        for ((o, want), d) in outs.iter().zip(&case.expected).zip(&plan.outputs) {
            let (g, w) = (
                dtype::decode_f64(d.dtype, o),
                dtype::decode_f64(d.dtype, want),
            );
            for (g, w) in g.iter().zip(&w) {
                assert!((g - w).abs() <= case.tolerance, "{}: {g} vs {w}", case.name);
            }
        }
    }
    let info = OptimPlugin::describe();
    assert_eq!(info.ops.len(), OPS.len());
    assert!(info.ops.iter().all(|o| o.targets == ["cpu", "cuda"]));
}

/// Vectors for the norm plugin's `tools/cuda_emu.py` (which runs CUDA modules on the host): when
/// `UMD_DUMP_VECTORS` names a directory, each case (one parameter, so one launch) goes to
/// `optim.cases` and every module to `<module>.cu`; also run with a one-block grid.
#[test]
fn cuda_emulation_vectors() {
    use umd_sdk::Dim3;
    use umd_sdk::emu_vectors::dump_case;
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for dt in DTYPES {
        for t in [0, 3] {
            let cases = [
                Case::new(Kind::Adagrad, dt, &[&[700]])
                    .attr("decay_factor", A::Float(0.1))
                    .attr("norm_coefficient", A::Float(0.01)),
                Case::new(Kind::Adam, dt, &[&[700]])
                    .attr("norm_coefficient_post", A::Float(0.01))
                    .attr("epsilon", A::Float(1e-3)),
                momentum(dt, &[&[700]], "standard"),
                momentum(dt, &[&[700]], "nesterov"),
                Case::new(Kind::Adam, dt, &[&[0]]),
            ];
            for (k, mut c) in cases.into_iter().enumerate() {
                c.t = t;
                c.rdt = if t == 0 { Dtype::F32 } else { Dtype::F64 };
                let name = format!("{}-{k}-t{t}-{dt:?}", c.kind.name());
                let (req, bytes) = (c.request(), c.bytes());
                dump_case::<OptimPlugin>(&mut out, &dir, &name, &req, &bytes, None);
                let g1 = format!("{name}-grid1");
                dump_case::<OptimPlugin>(&mut out, &dir, &g1, &req, &bytes, Some(Dim3::x(1)));
            }
        }
    }
    std::fs::write(format!("{dir}/optim.cases"), out).unwrap();
}
