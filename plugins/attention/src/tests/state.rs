//! LinearAttention, CausalConvWithState and FlexAttention against the references.

use super::reference::*;
use super::*;

#[test]
fn causal_conv_matches_the_reference() {
    for dt in ALL {
        for (b, c, l, k) in [
            (2, 4, 8, 4),
            (1, 1, 6, 4),
            (2, 3, 2, 5),
            (2, 4, 8, 1),
            (2, 4, 1, 4),
        ] {
            for (with_bias, with_past, silu) in [
                (false, false, false),
                (true, false, false),
                (false, true, true),
                (true, true, false),
                (true, true, true),
            ] {
                let u = |v: usize| v as u64;
                let x = round(dt, &data(b * c * l, 1));
                let w = round(dt, &data(c * k, 2));
                let bias = round(dt, &data(c, 3));
                let past = round(dt, &data(b * c * (k - 1), 4));
                let mut r = Req::new("CausalConvWithState")
                    .input(&[u(b), u(c), u(l)], dt)
                    .input(&[u(c), 1, u(k)], dt);
                let mut vals = vec![x.clone(), w.clone()];
                if with_bias {
                    r = r.input(&[u(c)], dt);
                    vals.push(bias.clone());
                } else if with_past {
                    r = r.absent();
                }
                if with_past {
                    r = r.input(&[u(b), u(c), u(k - 1)], dt);
                    vals.push(past.clone());
                }
                if silu {
                    r = r.attr("activation", A::Text("silu".into()));
                }
                let what = format!(
                    "{dt:?} {:?} bias {with_bias} past {with_past} silu {silu}",
                    (b, c, l, k)
                );
                let got = r.run(&vals).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let want = causal_conv_ref(
                    &x,
                    [b, c, l, k],
                    &w,
                    with_bias.then_some(&bias[..]),
                    with_past.then_some(&past[..]),
                    silu,
                );
                assert_eq!(got[1].0.shape, [u(b), u(c), u(k - 1)]);
                assert_close(&got[0].1, &want[0], dt, &format!("{what}: output"));
                assert_close(&got[1].1, &want[1], dt, &format!("{what}: state"));
            }
        }
    }
}

#[test]
fn causal_conv_refuses_bad_shapes_and_activations() {
    let f = Dtype::F32;
    let base = || Req::new("CausalConvWithState").input(&[2, 4, 8], f);
    let e = base().input(&[4, 2, 3], f).plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = base()
        .input(&[4, 1, 3], f)
        .input(&[3], f)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = base()
        .input(&[4, 1, 3], f)
        .absent()
        .input(&[2, 4, 3], f)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = base()
        .input(&[4, 1, 3], f)
        .attr("activation", A::Text("relu".into()))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("activation")));
    let e = base()
        .input(&[4, 1, 3], f)
        .outputs(&[true; 3])
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
}

/// (rule, decay last dim as a function of (hkv, dk), beta last dim)
type Rule = (
    &'static str,
    Option<fn(usize, usize) -> usize>,
    Option<fn(usize) -> usize>,
);

#[test]
fn linear_attention_matches_the_reference_for_every_rule() {
    let rules: [Rule; 6] = [
        ("linear", None, None),
        ("gated", Some(|h, d| h * d), None),
        ("gated", Some(|h, _| h), None),
        ("delta", None, Some(|h| h)),
        ("gated_delta", Some(|h, d| h * d), Some(|h| h)),
        ("gated_delta", Some(|h, _| h), Some(|_| 1)),
    ];
    for dt in ALL {
        for [b, t, hq, hkv, dk, dv] in [[2, 4, 4, 4, 8, 8], [2, 3, 8, 2, 4, 6], [1, 1, 4, 1, 8, 8]]
        {
            for (rule, decay, beta) in rules {
                for (with_past, scale) in [(false, None), (true, Some(0.25))] {
                    let u = |v: usize| v as u64;
                    let q = round(dt, &data(b * t * hq * dk, 1));
                    let k = round(dt, &data(b * t * hkv * dk, 2));
                    let v = round(dt, &data(b * t * hkv * dv, 3));
                    let past = round(dt, &data(b * hkv * dk * dv, 4));
                    // small decays (the state shrinks) and betas in [0, 1)
                    let dl = decay.map(|f| f(hkv, dk));
                    let dvals = dl.map(|n| {
                        round(
                            dt,
                            &data(b * t * n, 5)
                                .iter()
                                .map(|x| -x.abs() / 4.0)
                                .collect::<Vec<_>>(),
                        )
                    });
                    let bl = beta.map(|f| f(hkv));
                    let bvals = bl.map(|n| {
                        round(
                            dt,
                            &data(b * t * n, 6)
                                .iter()
                                .map(|x| x.abs() / 2.0)
                                .collect::<Vec<_>>(),
                        )
                    });
                    let mut r = Req::new("LinearAttention")
                        .input(&[u(b), u(t), u(hq * dk)], dt)
                        .input(&[u(b), u(t), u(hkv * dk)], dt)
                        .input(&[u(b), u(t), u(hkv * dv)], dt)
                        .attr("q_num_heads", A::Int(hq as i64))
                        .attr("kv_num_heads", A::Int(hkv as i64))
                        .attr("update_rule", A::Text(rule.into()));
                    let mut vals = vec![q.clone(), k.clone(), v.clone()];
                    r = if with_past {
                        vals.push(past.clone());
                        r.input(&[u(b), u(hkv), u(dk), u(dv)], dt)
                    } else {
                        r.absent()
                    };
                    r = match (&dl, &dvals) {
                        (Some(n), Some(d)) => {
                            vals.push(d.clone());
                            r.input(&[u(b), u(t), u(*n)], dt)
                        }
                        _ => r.absent(),
                    };
                    if let (Some(n), Some(bv)) = (&bl, &bvals) {
                        vals.push(bv.clone());
                        r = r.input(&[u(b), u(t), u(*n)], dt);
                    }
                    if let Some(s) = scale {
                        r = r.attr("scale", A::Float(s));
                    }
                    let what = format!(
                        "{dt:?} {rule} {:?} dl {dl:?} bl {bl:?} past {with_past}",
                        [b, t, hq, hkv, dk, dv]
                    );
                    let got = r.run(&vals).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                    let want = linear_attention_ref(
                        &q,
                        &k,
                        &v,
                        [b, t, hq, hkv, dk, dv],
                        with_past.then_some(&past[..]),
                        dl.zip(dvals.as_deref()).map(|(n, d)| (d, n)),
                        bl.zip(bvals.as_deref()).map(|(n, d)| (d, n)),
                        scale.unwrap_or(1.0 / (dk as f64).sqrt()),
                    );
                    assert_close(&got[0].1, &want[0], dt, &format!("{what}: output"));
                    assert_close(&got[1].1, &want[1], dt, &format!("{what}: state"));
                }
            }
        }
    }
}

#[test]
fn linear_attention_refuses_missing_or_forbidden_inputs() {
    let f = Dtype::F32;
    let base = |rule: &str| {
        Req::new("LinearAttention")
            .input(&[2, 4, 32], f)
            .input(&[2, 4, 32], f)
            .input(&[2, 4, 32], f)
            .attr("q_num_heads", A::Int(4))
            .attr("kv_num_heads", A::Int(4))
            .attr("update_rule", A::Text(rule.into()))
    };
    assert!(base("linear").plan().is_ok());
    let shape = |r: Req, what: &str| {
        let e = r.plan().unwrap_err();
        assert!(matches!(e, OpError::InvalidShape(_)), "{what}: {e:?}");
    };
    shape(base("gated"), "gated without decay");
    shape(base("delta"), "delta without beta");
    shape(
        base("linear").absent().input(&[2, 4, 4], f),
        "linear with decay",
    );
    shape(
        base("gated").absent().input(&[2, 4, 5], f),
        "decay last dim",
    );
    shape(base("linear").input(&[2, 4, 8, 4], f), "past shape");
    let e = base("rnn").plan().unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("update_rule")));
    let e = Req::new("LinearAttention")
        .input(&[2, 4, 32], f)
        .input(&[2, 4, 32], f)
        .input(&[2, 4, 32], f)
        .attr("q_num_heads", A::Int(3))
        .attr("kv_num_heads", A::Int(2))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)));
    let e = Req::new("LinearAttention")
        .input(&[2, 4, 32], f)
        .input(&[2, 4, 32], f)
        .input(&[2, 4, 32], f)
        .attr("kv_num_heads", A::Int(2))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("q_num_heads")));
}

#[test]
fn flex_attention_is_plain_attention_with_an_unrounded_softmax() {
    for dt in ALL {
        let (b, hq, hkv, s, t, e, ev) = (2usize, 4usize, 2usize, 3usize, 5usize, 8usize, 6usize);
        let u = |v: usize| v as u64;
        let q = round(dt, &data(b * hq * s * e, 1));
        let k = round(dt, &data(b * hkv * t * e, 2));
        let v = round(dt, &data(b * hkv * t * ev, 3));
        for scale in [None, Some(0.1)] {
            let mut r = Req::new("FlexAttention")
                .input(&[u(b), u(hq), u(s), u(e)], dt)
                .input(&[u(b), u(hkv), u(t), u(e)], dt)
                .input(&[u(b), u(hkv), u(t), u(ev)], dt);
            if let Some(sc) = scale {
                r = r.attr("scale", A::Float(sc));
            }
            let got = r.run(&[q.clone(), k.clone(), v.clone()]).unwrap();
            let want = attention_ref(&Attn {
                dims: [b, hq, hkv, s, t, 0, e, ev],
                q: q.clone(),
                k: k.clone(),
                v: v.clone(),
                scale,
                window: (-1, -1),
                ..Default::default()
            });
            // the square root of the scale is taken in f32, also for f64 data
            let t = if dt == Dtype::F64 { Dtype::F32 } else { dt };
            assert_close(&got[0].1, &want[0], t, &format!("flex {dt:?} {scale:?}"));
        }
    }
    let f = Dtype::F32;
    let e = Req::new("FlexAttention")
        .input(&[2, 3, 8], f)
        .input(&[2, 3, 8], f)
        .input(&[2, 3, 8], f)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = Req::new("FlexAttention")
        .input(&[1, 1, 2, 4], f)
        .input(&[1, 1, 2, 4], f)
        .input(&[1, 1, 2, 4], f)
        .attr("is_causal", A::Int(1))
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::InvalidAttribute(_)));
}
