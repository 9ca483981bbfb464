//! Native tests: both ops on the CPU kernels against a naive reference written here (the ONNX
//! reference's algorithm in f64), every reduction, weights, ignore_index (also negative and out
//! of the class range), N-D inputs, every served dtype, the log_prob output, errors and the
//! CUDA sources of every module.

use super::*;
use umd_sdk::dtype::{decode_f64, encode};
use umd_sdk::{AttrValueExt, testing};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Case {
    x: Vec<u64>,
    dt: Dtype,
    it: Dtype,
    weight: bool,
    ignore: Option<i64>,
    reduction: &'static str,
}

fn request(sce: bool, c: &Case, outputs: usize) -> PlanRequestExt {
    let op = if sce {
        "SoftmaxCrossEntropyLoss"
    } else {
        "NegativeLogLikelihoodLoss"
    };
    let mut t = vec![c.x[0]];
    t.extend_from_slice(&c.x[2..]);
    let mut b = PlanRequestExt::builder(op)
        .opset(13)
        .input(TensorDesc::new("x", c.x.clone(), c.dt))
        .input(TensorDesc::new("t", t, c.it));
    if c.weight {
        b = b.input(TensorDesc::new("w", vec![c.x[1]], c.dt));
    }
    b = b.attr("reduction", AttrValueExt::Text(c.reduction.into()));
    if let Some(ii) = c.ignore {
        b = b.attr("ignore_index", AttrValueExt::Int(ii));
    }
    b.outputs_wanted(vec![true; outputs]).build(Target::cpu())
}

fn rnd(dt: Dtype, v: f64) -> f64 {
    decode_f64(dt, &encode(dt, &[v]).unwrap())[0]
}

/// The reference (loss values, log-probabilities).
fn reference(sce: bool, c: &Case, x: &[f64], t: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (n, cl) = (c.x[0] as usize, c.x[1] as usize);
    let d: usize = c.x[2..].iter().product::<u64>() as usize;
    let mut lp = x.to_vec();
    if sce {
        for nn in 0..n {
            for dd in 0..d {
                let at = |k: usize| (nn * cl + k) * d + dd;
                let m = (0..cl).map(|k| x[at(k)]).fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = (0..cl).map(|k| (x[at(k)] - m).exp()).sum();
                for k in 0..cl {
                    lp[at(k)] = rnd(c.dt, x[at(k)] - m - s.ln());
                }
            }
        }
    }
    let mut losses = vec![];
    let mut weights = vec![];
    for r in 0..n * d {
        let tt = t[r] as i64;
        let (l, wt) = if Some(tt) == c.ignore {
            (0.0, 0.0)
        } else {
            let wv = if c.weight { w[tt as usize] } else { 1.0 };
            (-wv * lp[((r / d) * cl + tt as usize) * d + r % d], wv)
        };
        losses.push(l);
        weights.push(wt);
    }
    let out = match c.reduction {
        "none" => losses.iter().map(|v| rnd(c.dt, *v)).collect(),
        "sum" => vec![rnd(c.dt, losses.iter().sum())],
        _ => vec![rnd(
            c.dt,
            losses.iter().sum::<f64>() / weights.iter().sum::<f64>(),
        )],
    };
    (out, lp)
}

fn close(dt: Dtype, got: &[f64], want: &[f64], what: &str) {
    let tol = match dt {
        Dtype::F16 => 4e-3,
        Dtype::Bf16 => 2e-2,
        Dtype::F32 => 1e-5,
        _ => 1e-12,
    };
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: {g} vs {w}\n{got:?}\n{want:?}"
        );
    }
}

fn check(sce: bool, c: &Case, log_prob: bool, rng: &mut Rng) {
    let (n, cl) = (c.x[0], c.x[1]);
    let total: u64 = c.x.iter().product();
    let rows = n * c.x[2..].iter().product::<u64>();
    let x: Vec<f64> = (0..total)
        .map(|_| {
            rnd(
                c.dt,
                if sce {
                    rng.next() * 6.0 - 3.0
                } else {
                    -rng.next() * 4.0
                },
            )
        })
        .collect();
    let t: Vec<f64> = (0..rows)
        .map(|i| match c.ignore {
            Some(ii) if i % 4 == 1 => ii as f64,
            _ => ((rng.next() * cl as f64) as u64).min(cl.saturating_sub(1)) as f64,
        })
        .collect();
    let w: Vec<f64> = (0..cl).map(|_| rnd(c.dt, 0.25 + rng.next())).collect();
    let req = request(sce, c, if log_prob { 2 } else { 1 });
    let mut data = vec![encode(c.dt, &x).unwrap(), encode(c.it, &t).unwrap()];
    if c.weight {
        data.push(encode(c.dt, &w).unwrap());
    }
    let what = format!(
        "{} {:?} {:?} {:?} w {} ii {:?} {}",
        req.op, c.x, c.dt, c.it, c.weight, c.ignore, c.reduction
    );
    let (plan, outs) =
        testing::run::<Loss>(&req, &data).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    testing::cuda_sources::<Loss>(&req).unwrap();
    let (want, lp) = reference(sce, c, &x, &t, &w);
    close(c.dt, &decode_f64(c.dt, &outs[0]), &want, &what);
    let mut t_shape = vec![n];
    t_shape.extend_from_slice(&c.x[2..]);
    let want_shape = if c.reduction == "none" {
        t_shape
    } else {
        vec![]
    };
    assert_eq!(plan.outputs[0].shape, want_shape, "{what}");
    if log_prob {
        assert_eq!(plan.outputs[1].shape, c.x);
        close(
            c.dt,
            &decode_f64(c.dt, &outs[1]),
            &lp,
            &format!("{what} log_prob"),
        );
    }
}

#[test]
fn both_ops_every_form() {
    let mut rng = Rng(5);
    let shapes: [Vec<u64>; 5] = [
        vec![3, 5],
        vec![3, 5, 2],
        vec![2, 4, 2, 3],
        vec![1, 3, 2, 1, 2, 1, 2],
        vec![2, 1],
    ];
    for sce in [false, true] {
        for dt in FLOATS {
            for it in TARGETS {
                for x in &shapes {
                    for weight in [false, true] {
                        for ignore in [None, Some(0), Some(-1), Some(10)] {
                            for reduction in ["none", "sum", "mean"] {
                                let c = Case {
                                    x: x.clone(),
                                    dt,
                                    it,
                                    weight,
                                    ignore,
                                    reduction,
                                };
                                for log_prob in if sce { vec![false, true] } else { vec![false] } {
                                    check(sce, &c, log_prob, &mut rng);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn empty_batches_and_all_ignored() {
    let mut rng = Rng(6);
    for sce in [false, true] {
        for reduction in ["none", "sum"] {
            check(
                sce,
                &Case {
                    x: vec![0, 3, 2],
                    dt: Dtype::F32,
                    it: Dtype::I64,
                    weight: true,
                    ignore: None,
                    reduction,
                },
                sce,
                &mut rng,
            );
        }
    }
    // mean over nothing is NaN (0 / 0), as numpy's
    let c = Case {
        x: vec![0, 3],
        dt: Dtype::F32,
        it: Dtype::I64,
        weight: false,
        ignore: None,
        reduction: "mean",
    };
    let (_, outs) = testing::run::<Loss>(&request(false, &c, 1), &[vec![], vec![]]).unwrap();
    assert!(decode_f64(Dtype::F32, &outs[0])[0].is_nan());
}

#[test]
fn out_of_range_targets_give_nan_not_a_fault() {
    let c = Case {
        x: vec![2, 3],
        dt: Dtype::F32,
        it: Dtype::I64,
        weight: false,
        ignore: None,
        reduction: "none",
    };
    let x = encode(Dtype::F32, &[-1.0; 6]).unwrap();
    let t = encode(Dtype::I64, &[7.0, 1.0]).unwrap();
    let (_, outs) = testing::run::<Loss>(&request(false, &c, 1), &[x, t]).unwrap();
    let v = decode_f64(Dtype::F32, &outs[0]);
    assert!(v[0].is_nan());
    assert_eq!(v[1], 1.0);
}

#[test]
fn errors_name_what_is_wrong() {
    let c = Case {
        x: vec![2, 3],
        dt: Dtype::F32,
        it: Dtype::I64,
        weight: false,
        ignore: None,
        reduction: "avg",
    };
    assert!(
        matches!(Loss::plan_ext(&request(false, &c, 1)), Err(OpError::InvalidAttribute(m)) if m.contains("reduction"))
    );
    let c = Case {
        reduction: "sum",
        it: Dtype::F32,
        ..c
    };
    assert!(matches!(
        Loss::plan_ext(&request(true, &c, 1)),
        Err(OpError::UnsupportedDtype(_))
    ));
    let c = Case {
        it: Dtype::I64,
        dt: Dtype::I32,
        ..c
    };
    assert!(matches!(
        Loss::plan_ext(&request(true, &c, 1)),
        Err(OpError::UnsupportedDtype(_))
    ));
    let c = Case {
        dt: Dtype::F32,
        ..c
    };
    assert!(matches!(
        Loss::plan_ext(&request(false, &c, 2)),
        Err(OpError::InvalidShape(_))
    ));
    let bad_target = PlanRequestExt::builder("NegativeLogLikelihoodLoss")
        .input(TensorDesc::new("x", vec![2, 3, 4], Dtype::F32))
        .input(TensorDesc::new("t", vec![2, 3], Dtype::I64))
        .build(Target::cpu());
    assert!(matches!(
        Loss::plan_ext(&bad_target),
        Err(OpError::InvalidShape(_))
    ));
    let rank1 = PlanRequestExt::builder("SoftmaxCrossEntropyLoss")
        .input(TensorDesc::new("x", vec![3], Dtype::F32))
        .input(TensorDesc::new("t", vec![], Dtype::I64))
        .build(Target::cpu());
    assert!(matches!(
        Loss::plan_ext(&rank1),
        Err(OpError::InvalidShape(_))
    ));
    let unknown = PlanRequestExt::builder("NegativeLogLikelihoodLoss")
        .input(TensorDesc::new("x", vec![2, 3], Dtype::F32))
        .input(TensorDesc::new("t", vec![2], Dtype::I64))
        .attr("axis", AttrValueExt::Int(1))
        .build(Target::cpu());
    assert!(
        matches!(Loss::plan_ext(&unknown), Err(OpError::InvalidAttribute(m)) if m.contains("axis"))
    );
    assert!(matches!(
        Loss::plan_ext(&PlanRequestExt::builder("Nope").build(Target::cpu())),
        Err(OpError::UnsupportedOp(_))
    ));
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    for case in Loss::self_tests() {
        let mut b = PlanRequestExt::builder(&case.op);
        for d in &case.inputs {
            b = b.input(umd_sdk::legacy::desc_from_legacy(d));
        }
        let (plan, outs) = testing::run::<Loss>(&b.build(Target::cpu()), &case.input_data).unwrap();
        let dt = plan.outputs[0].dtype;
        let (g, w) = (decode_f64(dt, &outs[0]), decode_f64(dt, &case.expected[0]));
        assert!(
            (g[0] - w[0]).abs() <= case.tolerance * (1.0 + w[0].abs()),
            "{}: {g:?} vs {w:?}",
            case.name
        );
    }
}

#[test]
fn cuda_modules_define_their_entry_points() {
    for t in FLOATS {
        for i in TARGETS {
            let id = plan::module_id(t, i);
            let src = Loss::kernel_source(&id, &Target::cpu()).unwrap();
            assert!(
                !src.code.contains("#include") && !src.code.contains('$'),
                "{id}"
            );
            for e in &src.entry_points {
                assert!(
                    src.code.contains(&format!("void {e}(")),
                    "{e} missing from {id}"
                );
            }
            if let Ok(dir) = std::env::var("UMD_DUMP_CUDA") {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    std::path::Path::new(&dir).join(format!("{id}.cu")),
                    &src.code,
                )
                .unwrap();
            }
        }
    }
    assert!(Loss::kernel_source("loss_i32_i64", &Target::cpu()).is_err());
}
