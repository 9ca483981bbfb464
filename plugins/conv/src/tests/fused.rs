//! Fused ops (`crate::fused`): a conv with its BatchNormalization, residual and Relu computed
//! as one launch gives what the chain gives (the plain conv's output, then each stage in f64
//! here), on every path of the CPU kernel (tiles on the matrix unit, planes, depthwise), split
//! or whole; requests it cannot compute exactly are declined.

use super::*;
use crate::fused;
use umd_sdk::Plugin;

/// The fused request for `stages` after a conv of `x`/`w` (bias when `bias`), with the
/// statistics (4 × `m`) and residual inputs each stage takes.
fn fused_request(
    stages: &[&str],
    xs: &[u64],
    ws: &[u64],
    ys: &[u64],
    bias: bool,
    group: i64,
    dt: Dtype,
    residual_link: i64,
) -> PlanRequestExt {
    let m = ws[0];
    let mut inputs: Vec<(Vec<u64>, Dtype)> = vec![(xs.to_vec(), dt), (ws.to_vec(), dt)];
    if bias {
        inputs.push((vec![m], dt));
    }
    let mut attrs = vec![
        ("0.inputs".to_string(), int(inputs.len() as i64)),
        ("0.group".to_string(), int(group)),
        ("0.pads".to_string(), ints(&[1, 1, 1, 1])),
    ];
    for (i, s) in stages.iter().enumerate().map(|(i, s)| (i + 1, s)) {
        let (n, link) = match *s {
            "BatchNormalization" => {
                inputs.extend((0..4).map(|_| (vec![m], dt)));
                attrs.push((format!("{i}.epsilon"), AttrValueExt::Float(1e-3)));
                (4, 0)
            }
            "Add" | "Sum" => {
                inputs.push((ys.to_vec(), dt));
                (1, residual_link)
            }
            // per-channel Mul ([1, M, 1, 1]) and Add ([M, 1, 1], as its first input)
            "Scale" => {
                inputs.push((vec![1, m, 1, 1], dt));
                (1, 0)
            }
            "Shift" => {
                inputs.push((vec![m, 1, 1], dt));
                (1, 1)
            }
            // Clip with both bounds (scalars), or its `min` alone
            "Clip" => {
                inputs.extend([(vec![], dt), (vec![1], dt)]);
                (2, 0)
            }
            "ClipLo" => {
                inputs.push((vec![], dt));
                (1, 0)
            }
            "LeakyRelu" => {
                attrs.push((format!("{i}.alpha"), AttrValueExt::Float(0.1)));
                (0, 0)
            }
            _ => (0, 0),
        };
        attrs.push((format!("{i}.inputs"), int(n)));
        attrs.push((format!("{i}.link"), int(link)));
    }
    let op = std::iter::once("Conv")
        .chain(stages.iter().map(|s| match *s {
            "Scale" => "Mul",
            "Shift" => "Add",
            "ClipLo" => "Clip",
            s => s,
        }))
        .collect::<Vec<_>>()
        .join(".");
    let mut b = PlanRequestExt::builder(&op);
    for (k, (s, d)) in inputs.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{k}"), s.clone(), *d));
    }
    for (n, v) in attrs {
        b = b.attr(&n, v);
    }
    let mut r = b.build(Target::cpu());
    r.domain = umd_sdk::fused::DOMAIN.into();
    r
}

/// Clip's bounds in the fused tests (values of every float type; outputs fall on both sides).
const LO: f64 = -0.5;
const HI: f64 = 0.75;

/// Fused against the plain conv then each stage in f64, on shapes that take each CPU path.
#[test]
fn fused_matches_the_chain_on_every_path() {
    // (x, w, group): tiles (out ≥ 256 positions, ≥ 8 channels per group), planes (few
    // positions), depthwise (one channel per group)
    let cases: [(&[u64], &[u64], i64); 3] = [
        (&[2, 3, 18, 18], &[16, 3, 3, 3], 1),
        (&[1, 8, 5, 5], &[12, 8, 3, 3], 1),
        (&[2, 6, 7, 7], &[6, 1, 3, 3], 6),
    ];
    let chains: [&[&str]; 12] = [
        &["BatchNormalization", "LeakyRelu"],
        &["LeakyRelu"],
        &["BatchNormalization", "Clip"],
        &["Clip"],
        &["BatchNormalization", "Add", "ClipLo"],
        &["BatchNormalization", "Scale", "Shift", "Relu"],
        &["Scale", "Shift", "Relu"],
        &["BatchNormalization", "Add", "Relu"],
        &["BatchNormalization", "Relu"],
        &["Sum", "Relu"],
        &["BatchNormalization"],
        &["Relu"],
    ];
    for (xs, ws, group) in cases {
        for dt in [Dtype::F32, Dtype::F64, Dtype::F16, Dtype::Bf16] {
            for chain in chains {
                for bias in [false, true] {
                    let plain_req = request(
                        "Conv",
                        &[(xs, dt), (ws, dt)][..],
                        &[("group", int(group)), ("pads", ints(&[1, 1, 1, 1]))],
                    );
                    let ys = Conv::plan_ext(&plain_req).unwrap().outputs[0].shape.clone();
                    let (n_x, n_w) = (xs.iter().product::<u64>(), ws.iter().product::<u64>());
                    let n_y = ys.iter().product::<u64>() as usize;
                    let (m, per) = (ws[0] as usize, n_y / (ys[0] as usize * ws[0] as usize));
                    let x = data(n_x as usize, 1, dt);
                    let w = data(n_w as usize, 2, dt);
                    let b = data(m, 3, dt);
                    let link = (chain.len() as i64) % 2; // both residual positions
                    let req = fused_request(chain, xs, ws, &ys, bias, group, dt, link);
                    // statistics: var > 0
                    let stats: Vec<Vec<f64>> = (0..4)
                        .map(|k| {
                            data(m, 10 + k, dt)
                                .iter()
                                .map(|v| if k == 3 { v.abs() + 0.5 } else { *v })
                                .collect()
                        })
                        .collect();
                    let r = data(n_y, 20, dt);
                    let (sc, sh) = (data(m, 30, dt), data(m, 31, dt));
                    let mut inputs = vec![x.clone(), w.clone()];
                    if bias {
                        inputs.push(b.clone());
                    }
                    for s in chain {
                        match *s {
                            "BatchNormalization" => inputs.extend(stats.iter().cloned()),
                            "Add" | "Sum" => inputs.push(r.clone()),
                            "Scale" => inputs.push(sc.clone()),
                            "Shift" => inputs.push(sh.clone()),
                            "Clip" => inputs.extend([vec![LO], vec![HI]]),
                            "ClipLo" => inputs.push(vec![LO]),
                            _ => {}
                        }
                    }
                    let (_, got) = run(&req, &inputs).unwrap();
                    // the chain: the plain conv (bias included), then each stage in f64
                    let mut plain_in = vec![x, w];
                    let plain = if bias {
                        plain_in.push(b);
                        request(
                            "Conv",
                            &[(xs, dt), (ws, dt), (&[m as u64][..], dt)][..],
                            &[("group", int(group)), ("pads", ints(&[1, 1, 1, 1]))],
                        )
                    } else {
                        plain_req
                    };
                    let mut want = run(&plain, &plain_in).unwrap().1.remove(0);
                    for s in chain {
                        for (i, v) in want.iter_mut().enumerate() {
                            let ch = i / per % m;
                            *v = match *s {
                                "BatchNormalization" => {
                                    (*v - stats[2][ch])
                                        * (stats[0][ch] / (stats[3][ch] + 1e-3).sqrt())
                                        + stats[1][ch]
                                }
                                "Add" | "Sum" => *v + r[i],
                                "Scale" => *v * sc[ch],
                                "Shift" => *v + sh[ch],
                                "Clip" => v.clamp(LO, HI),
                                "ClipLo" => v.max(LO),
                                "LeakyRelu" if *v > 0.0 => *v,
                                "LeakyRelu" => 0.1 * *v,
                                _ => v.max(0.0),
                            };
                        }
                    }
                    // f16/bf16: the reference keeps f64 between stages, the chain rounds
                    let tol = match dt {
                        Dtype::F32 => 1e-5,
                        Dtype::F16 => 4e-3,
                        Dtype::Bf16 => 3e-2,
                        _ => 1e-12,
                    };
                    for (i, (g, w)) in got[0].iter().zip(&want).enumerate() {
                        assert!(
                            (g - w).abs() <= tol * (1.0 + w.abs()),
                            "{} {dt:?} bias {bias} x {xs:?}: element {i} is {g}, the chain gives {w}",
                            req.op
                        );
                    }
                    // split into block ranges: the same bytes, each written once
                    let bytes: Vec<Vec<u8>> = req
                        .present()
                        .zip(&inputs)
                        .map(|(d, v)| dtype::encode(d.dtype, v).unwrap())
                        .collect();
                    let whole = super::inplace::run_in_parts(&req, &bytes, 1);
                    assert_eq!(super::inplace::run_in_parts(&req, &bytes, 3), whole);
                }
            }
        }
    }
}

/// Every chain's name loads in any host (op names of at most 64 bytes).
#[test]
fn chain_names_fit_every_host() {
    for op in fused::OPS {
        assert!(op.len() <= umd_sdk::fused::MAX_NAME, "{op}");
        assert!(op.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'));
    }
}

/// Relu keeps NaN (it is not below zero).
#[test]
fn fused_relu_keeps_nan() {
    let req = fused_request(
        &["Relu"],
        &[1, 1, 3, 3],
        &[1, 1, 3, 3],
        &[1, 1, 3, 3],
        false,
        1,
        Dtype::F32,
        0,
    );
    let mut x = vec![1.0; 9];
    x[4] = f64::NAN;
    let (_, got) = run(&req, &[x, vec![-1.0; 9]]).unwrap();
    assert!(got[0].iter().all(|v| v.is_nan()), "{:?}", got[0]);
}

/// What the chain would compute differently is declined, naming why.
#[test]
fn fused_declines_what_it_cannot_compute_as_the_chain() {
    let (xs, ws, ys): (&[u64], &[u64], &[u64]) = (&[1, 2, 4, 4], &[3, 2, 3, 3], &[1, 3, 4, 4]);
    let ok = fused_request(
        &["BatchNormalization", "Add", "Relu"],
        xs,
        ws,
        ys,
        false,
        1,
        Dtype::F32,
        1,
    );
    assert!(fused::plan(&ok).is_ok());
    let expect = |mut req: PlanRequestExt, edit: &dyn Fn(&mut PlanRequestExt), want: &str| {
        edit(&mut req);
        let e = format!("{:?}", Conv::plan_ext(&req).unwrap_err());
        assert!(e.contains(want), "{want}: {e}");
    };
    // a Mul by a whole tensor (only per-channel scales are served)
    let mul = fused_request(
        &["Scale", "Shift", "Relu"],
        xs,
        ws,
        ys,
        false,
        1,
        Dtype::F32,
        0,
    );
    assert!(fused::plan(&mul).is_ok());
    expect(
        mul,
        &|r| r.inputs[2].as_mut().unwrap().desc.shape = ys.to_vec(),
        "no epilogue for Mul",
    );
    // a residual that would broadcast along channels (a per-channel one is a shift: served)
    expect(
        ok.clone(),
        &|r| r.inputs[6].as_mut().unwrap().desc.shape = vec![1, 1, 4, 4],
        "output's shape",
    );
    // statistics of another dtype
    expect(
        ok.clone(),
        &|r| r.inputs[3].as_mut().unwrap().desc.dtype = Dtype::F16,
        "is not",
    );
    // training mode
    expect(
        ok.clone(),
        &|r| {
            r.attributes.push(umd_sdk::AttributeExt {
                name: "1.training_mode".into(),
                value: int(1),
            })
        },
        "training-mode",
    );
    // BatchNormalization fed the conv as its scale
    expect(
        ok.clone(),
        &|r| {
            for a in &mut r.attributes {
                if a.name == "1.link" {
                    a.value = int(1);
                }
            }
        },
        "must read the conv as X",
    );
    // an unknown chain
    let mut other = ok.clone();
    other.op = "Conv.Relu.BatchNormalization".into();
    assert!(matches!(
        Conv::plan_ext(&other),
        Err(OpError::UnsupportedOp(_))
    ));
    // a second output wanted
    expect(ok, &|r| r.outputs_wanted = vec![true, true], "first output");
}
