//! Attention against [`super::reference::attention_ref`]: layouts, grouped-query heads, masks,
//! caches, softcap, every `qk_matmul_output_mode`, padding, windows, dtypes, empty shapes and
//! errors.

use super::reference::*;
use super::*;

/// A problem with random inputs of `dims` = (B, Hq, Hkv, Sq, Skv, P, Dk, Dv) rounded to `dt`.
fn problem(dims: [usize; 8], dt: Dtype, seed: u64) -> Attn {
    let [b, hq, hkv, sq, skv, p, dk, dv] = dims;
    let r = |n, s| round(dt, &data(n, seed * 10 + s));
    Attn {
        dims,
        q: r(b * hq * sq * dk, 1),
        k: r(b * hkv * skv * dk, 2),
        v: r(b * hkv * skv * dv, 3),
        past_k: r(b * hkv * p * dk, 4),
        past_v: r(b * hkv * p * dv, 5),
        window: (-1, -1),
        ..Default::default()
    }
}

/// Runs `a` through the plugin (3-D inputs when `three_d`) with `outputs` wanted, and checks
/// every output against the reference.
fn check(a: &Attn, dt: Dtype, three_d: bool, outputs: usize, what: &str) {
    let [b, hq, hkv, sq, skv, p, dk, dv] = a.dims;
    let u = |v: usize| v as u64;
    let mut r = Req::new("Attention");
    let mut vals = vec![];
    if three_d {
        r = r
            .input(&[u(b), u(sq), u(hq * dk)], dt)
            .input(&[u(b), u(skv), u(hkv * dk)], dt)
            .input(&[u(b), u(skv), u(hkv * dv)], dt)
            .attr("q_num_heads", A::Int(hq as i64))
            .attr("kv_num_heads", A::Int(hkv as i64));
        vals.push(to_3d(&a.q, b, hq, sq, dk));
        vals.push(to_3d(&a.k, b, hkv, skv, dk));
        vals.push(to_3d(&a.v, b, hkv, skv, dv));
    } else {
        r = r
            .input(&[u(b), u(hq), u(sq), u(dk)], dt)
            .input(&[u(b), u(hkv), u(skv), u(dk)], dt)
            .input(&[u(b), u(hkv), u(skv), u(dv)], dt);
        vals.extend([a.q.clone(), a.k.clone(), a.v.clone()]);
    }
    match &a.mask {
        Some((shape, m, boolean)) => {
            let s: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
            r = r.input(&s, if *boolean { Dtype::Boolean } else { dt });
            vals.push(m.clone());
        }
        None => r = r.absent(),
    }
    if p > 0 {
        r = r
            .input(&[u(b), u(hkv), u(p), u(dk)], dt)
            .input(&[u(b), u(hkv), u(p), u(dv)], dt);
        vals.extend([a.past_k.clone(), a.past_v.clone()]);
    } else {
        r = r.absent().absent();
    }
    if let Some(n) = &a.nonpad {
        r = r.input(&[u(b)], Dtype::I64).opset(24);
        vals.push(n.iter().map(|&x| x as f64).collect());
    }
    if let Some(s) = a.scale {
        r = r.attr("scale", A::Float(s));
    }
    if a.causal {
        r = r.attr("is_causal", A::Int(1));
    }
    if a.softcap > 0.0 {
        r = r.attr("softcap", A::Float(a.softcap));
    }
    if a.mode > 0 {
        r = r.attr("qk_matmul_output_mode", A::Int(a.mode as i64));
    }
    if a.window != (-1, -1) {
        r = r
            .attr("left_window_size", A::Int(a.window.0))
            .attr("right_window_size", A::Int(a.window.1))
            .opset(25);
    }
    let mut wanted = vec![true; outputs];
    if outputs == 4 && p == 0 {
        (wanted[1], wanted[2]) = (false, false);
    }
    r = r.outputs(&wanted);
    let got = r.run(&vals).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let want = attention_ref(a);
    assert_eq!(got.len(), outputs, "{what}");
    let y = if three_d {
        to_3d(&want[0], b, hq, sq, dv)
    } else {
        want[0].clone()
    };
    let y_shape: Vec<u64> = if three_d {
        vec![u(b), u(sq), u(hq * dv)]
    } else {
        vec![u(b), u(hq), u(sq), u(dv)]
    };
    assert_eq!(got[0].0.shape, y_shape, "{what}");
    assert_close(&got[0].1, &y, dt, &format!("{what}: Y"));
    let shapes = [
        vec![u(b), u(hkv), u(p + skv), u(dk)],
        vec![u(b), u(hkv), u(p + skv), u(dv)],
        vec![u(b), u(hq), u(sq), u(p + skv)],
    ];
    for k in 1..outputs {
        assert_eq!(got[k].0.shape, shapes[k - 1], "{what}: output {k}");
        assert_close(&got[k].1, &want[k], dt, &format!("{what}: output {k}"));
    }
}

#[test]
fn plain_scaled_and_grouped_heads_in_3d_and_4d() {
    for dt in ALL {
        for dims in [
            [2, 3, 3, 4, 6, 0, 8, 8],
            [2, 6, 3, 4, 6, 0, 8, 8],
            [1, 4, 1, 3, 5, 0, 4, 6],
            [2, 3, 3, 4, 6, 0, 8, 10],
        ] {
            let mut a = problem(dims, dt, 1);
            for three_d in [false, true] {
                for scale in [None, Some(0.3)] {
                    a.scale = scale;
                    check(
                        &a,
                        dt,
                        three_d,
                        1,
                        &format!("{dt:?} {dims:?} 3d {three_d} {scale:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn causal_softcap_and_float_or_bool_masks_of_every_rank() {
    let dims = [2, 4, 2, 3, 5, 0, 4, 4];
    for dt in ALL {
        for mask_shape in [
            vec![5],
            vec![3, 5],
            vec![3, 4],
            vec![4, 3, 5],
            vec![2, 1, 3, 5],
            vec![2, 4, 3, 2],
            vec![1, 4, 1, 5],
        ] {
            for boolean in [false, true] {
                let mut a = problem(dims, dt, 2);
                let n: usize = mask_shape.iter().product();
                let m = if boolean {
                    (0..n).map(|i| (i % 3 != 1) as u8 as f64).collect()
                } else {
                    round(dt, &data(n, 9))
                };
                a.mask = Some((mask_shape.clone(), m, boolean));
                for (causal, softcap) in [(false, 0.0), (true, 0.0), (true, 1.5), (false, 0.7)] {
                    a.causal = causal;
                    a.softcap = softcap;
                    let what = format!(
                        "{dt:?} mask {mask_shape:?} bool {boolean} causal {causal} softcap {softcap}"
                    );
                    check(&a, dt, false, 1, &what);
                }
            }
        }
    }
}

#[test]
fn past_and_present_caches_with_every_qk_output_mode() {
    for dt in ALL {
        for dims in [[2, 3, 3, 4, 2, 5, 8, 8], [1, 4, 2, 2, 3, 2, 4, 6]] {
            let mut a = problem(dims, dt, 3);
            let t = dims[4] + dims[5];
            a.mask = Some((vec![dims[3], t], round(dt, &data(dims[3] * t, 4)), false));
            for mode in 0..4 {
                for causal in [false, true] {
                    for softcap in [0.0, 2.0] {
                        a.mode = mode;
                        a.causal = causal;
                        a.softcap = softcap;
                        for three_d in [false, true] {
                            let what = format!(
                                "{dt:?} {dims:?} mode {mode} causal {causal} softcap {softcap} 3d {three_d}"
                            );
                            check(&a, dt, three_d, 4, &what);
                            check(&a, dt, three_d, 3, &what);
                        }
                    }
                }
            }
        }
    }
    // qk output without caches (outputs 1 and 2 not wanted)
    let mut a = problem([1, 2, 2, 3, 4, 0, 4, 4], Dtype::F32, 4);
    a.mode = 3;
    check(&a, Dtype::F32, false, 4, "qk without caches");
}

#[test]
fn fully_masked_rows_give_zero_probabilities_and_output() {
    let mut a = problem([1, 2, 2, 2, 2, 0, 8, 8], Dtype::F32, 5);
    a.mask = Some((vec![2, 2], vec![1., 0., 0., 0.], true));
    a.mode = 3;
    check(&a, Dtype::F32, false, 4, "boolean fully masked row");
    let got = attention_ref(&a);
    // rows (h, i) = (0, 1) and (1, 1) see no key
    assert!(got[0][8..16].iter().chain(&got[0][24..]).all(|&v| v == 0.0));
    a.causal = true;
    check(&a, Dtype::F32, false, 4, "fully masked and causal");
    // an all -inf float mask row
    a.mask = Some((
        vec![2, 2],
        vec![0., f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY],
        false,
    ));
    a.causal = false;
    check(&a, Dtype::F32, false, 4, "float -inf row");
}

#[test]
fn nonpad_kv_seqlen_pads_keys_and_moves_the_causal_frontier() {
    for dt in ALL {
        let mut a = problem([3, 4, 2, 2, 6, 0, 8, 8], dt, 6);
        for nonpad in [vec![6, 3, 1], vec![2, 6, 4], vec![0, 1, 6]] {
            a.nonpad = Some(nonpad.clone());
            for causal in [false, true] {
                a.causal = causal;
                a.mask = None;
                check(
                    &a,
                    dt,
                    false,
                    1,
                    &format!("{dt:?} nonpad {nonpad:?} causal {causal}"),
                );
                a.mask = Some((
                    vec![3, 1, 2, 6],
                    (0..36).map(|i| (i % 4 != 0) as u8 as f64).collect(),
                    true,
                ));
                check(
                    &a,
                    dt,
                    false,
                    1,
                    &format!("{dt:?} nonpad {nonpad:?} causal {causal} masked"),
                );
            }
        }
    }
}

#[test]
fn sliding_windows_with_and_without_causality_and_caches() {
    for window in [(2, -1), (1, 2), (0, 0), (-1, 1)] {
        for causal in [false, true] {
            let mut a = problem([2, 2, 1, 4, 3, 3, 4, 4], Dtype::F32, 7);
            a.window = window;
            a.causal = causal;
            check(
                &a,
                Dtype::F32,
                false,
                3,
                &format!("window {window:?} causal {causal}"),
            );
            let mut a = problem([2, 2, 2, 4, 6, 0, 4, 4], Dtype::F64, 8);
            a.window = window;
            a.causal = causal;
            a.nonpad = Some(vec![5, 6]);
            check(
                &a,
                Dtype::F64,
                false,
                1,
                &format!("window {window:?} causal {causal} nonpad"),
            );
        }
    }
}

#[test]
fn empty_shapes_plan_a_launch_and_touch_nothing() {
    for dims in [
        [0, 2, 2, 3, 4, 0, 4, 4],
        [2, 2, 2, 0, 4, 0, 4, 4],
        [2, 2, 2, 3, 0, 0, 4, 4],
        [2, 2, 2, 3, 0, 2, 4, 4],
        [2, 2, 2, 3, 4, 0, 0, 4],
        [2, 2, 2, 3, 4, 0, 4, 0],
    ] {
        let a = problem(dims, Dtype::F32, 9);
        check(&a, Dtype::F32, false, 3, &format!("empty {dims:?}"));
    }
}

#[test]
fn bad_shapes_and_attributes_are_refused() {
    let f = Dtype::F32;
    let base = || {
        Req::new("Attention")
            .input(&[2, 4, 3, 8], f)
            .input(&[2, 2, 5, 8], f)
            .input(&[2, 2, 5, 6], f)
    };
    let shape_err = |r: Req, what: &str| {
        let e = r.plan().unwrap_err();
        assert!(matches!(e, OpError::InvalidShape(_)), "{what}: {e:?}");
    };
    let attr_err = |r: Req, what: &str| {
        let e = r.plan().unwrap_err();
        assert!(matches!(e, OpError::InvalidAttribute(_)), "{what}: {e:?}");
    };
    assert!(base().plan().is_ok());
    shape_err(
        Req::new("Attention")
            .input(&[2, 3, 3, 8], f)
            .input(&[2, 2, 5, 8], f)
            .input(&[2, 2, 5, 8], f),
        "3 heads over 2",
    );
    shape_err(
        Req::new("Attention")
            .input(&[2, 2, 3, 8], f)
            .input(&[2, 2, 5, 4], f)
            .input(&[2, 2, 5, 8], f),
        "head sizes",
    );
    shape_err(base().input(&[3, 9], f), "mask longer than the keys");
    shape_err(base().input(&[2, 3, 5], f), "mask heads");
    shape_err(
        base().absent().input(&[2, 2, 4, 8], f).absent(),
        "past key alone",
    );
    shape_err(
        base()
            .absent()
            .input(&[2, 2, 4, 7], f)
            .input(&[2, 2, 4, 6], f),
        "past head size",
    );
    shape_err(
        base()
            .absent()
            .input(&[2, 2, 4, 8], f)
            .input(&[2, 2, 4, 6], f)
            .input(&[2], Dtype::I64),
        "nonpad with past",
    );
    shape_err(
        base().absent().absent().absent().input(&[3], Dtype::I64),
        "nonpad shape",
    );
    let e = base()
        .absent()
        .absent()
        .absent()
        .input(&[2], Dtype::I32)
        .plan()
        .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    let e = base().input(&[3, 5], Dtype::F16).plan().unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("attn_mask")));
    shape_err(base().outputs(&[true; 5]), "five outputs");
    attr_err(base().attr("qk_matmul_output_mode", A::Int(4)), "mode");
    attr_err(base().attr("softmax_precision", A::Int(7)), "precision");
    attr_err(base().attr("left_window_size", A::Int(-2)), "window");
    attr_err(
        Req::new("Attention")
            .input(&[2, 3, 16], f)
            .input(&[2, 4, 8], f)
            .input(&[2, 4, 8], f),
        "3-D without heads",
    );
    shape_err(
        Req::new("Attention")
            .input(&[2, 3, 16], f)
            .input(&[2, 4, 8], f)
            .input(&[2, 4, 8], f)
            .attr("q_num_heads", A::Int(3))
            .attr("kv_num_heads", A::Int(1)),
        "hidden not a multiple of heads",
    );
    attr_err(
        Req::new("Attention")
            .input(&[2, 3, 16], f)
            .input(&[2, 4, 8], f)
            .input(&[2, 4, 8], f)
            .attr("q_num_heads", A::Int(0))
            .attr("kv_num_heads", A::Int(1)),
        "zero heads",
    );
    // empty tensors whose other dimensions overflow: refused, not wrapped
    let big = 1u64 << 40;
    shape_err(
        Req::new("Attention")
            .input(&[big, big, 1, 0], f)
            .input(&[big, 1, 1, 0], f)
            .input(&[big, 1, 1, 4], f),
        "row count overflow",
    );
    shape_err(
        Req::new("Attention")
            .input(&[2, 1, 3, 8], f)
            .input(&[2, 1, 5, 8], f)
            .input(&[2, 1, 5, 2000], f),
        "value head too large",
    );
}
