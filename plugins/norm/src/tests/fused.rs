//! BatchNormalization chains (`crate::fused`): the fused launch gives what the chain gives
//! (BatchNormalization alone, then each stage here), split or whole; what it cannot compute
//! as the chain is declined.

use super::*;
use crate::fused;

/// `BatchNormalization` (x `[2, C, 3, 5]`) then `stages` ("Mul" by `[1, C, 1, 1]`, "Add" of
/// `[C, 1, 1]` as its first input, "Relu").
fn chain(stages: &[&'static str], c: u64, dt: Dtype) -> Req {
    let op: &'static str = match stages {
        ["Mul", "Add", "Relu"] => "BatchNormalization.Mul.Add.Relu",
        ["Mul", "Add"] => "BatchNormalization.Mul.Add",
        _ => "BatchNormalization.Relu",
    };
    let mut r = Req::new(op, &[2, c, 3, 5], dt)
        .input(&[c], dt)
        .input(&[c], dt)
        .input(&[c], dt)
        .input(&[c], dt)
        .attr("0.inputs", A::Int(5))
        .attr("0.epsilon", A::Float(1e-3));
    const INPUTS: [&str; 4] = ["1.inputs", "2.inputs", "3.inputs", "4.inputs"];
    const LINKS: [&str; 4] = ["1.link", "2.link", "3.link", "4.link"];
    for (i, s) in stages.iter().enumerate() {
        let (n, link) = match *s {
            "Mul" => {
                r = r.input(&[1, c, 1, 1], dt);
                (1, 0)
            }
            "Add" => {
                r = r.input(&[c, 1, 1], dt);
                (1, 1)
            }
            _ => (0, 0),
        };
        r = r.attr(INPUTS[i], A::Int(n)).attr(LINKS[i], A::Int(link));
    }
    r
}

#[test]
fn fused_batchnorm_matches_the_chain_split_or_whole() {
    let c = 4u64;
    for dt in ALL {
        for stages in [&["Mul", "Add", "Relu"][..], &["Mul", "Add"], &["Relu"]] {
            let req = chain(stages, c, dt);
            let n = 2 * c as usize * 15;
            let x = round(dt, &data(n, 1));
            let (sc, b, m) = (
                round(dt, &data(4, 2)),
                round(dt, &data(4, 3)),
                round(dt, &data(4, 4)),
            );
            let v = round(dt, &positive(4, 5));
            let (mul, add) = (round(dt, &data(4, 6)), round(dt, &data(4, 7)));
            let mut values = vec![x.clone(), sc.clone(), b.clone(), m.clone(), v.clone()];
            for s in stages {
                match *s {
                    "Mul" => values.push(mul.clone()),
                    "Add" => values.push(add.clone()),
                    _ => {}
                }
            }
            let got = req.run(&values).unwrap().remove(0).1;
            // the chain: BatchNormalization alone, then each stage in f64 on its rounded output
            let bn = Req::new("BatchNormalization", &[2, c, 3, 5], dt)
                .input(&[c], dt)
                .input(&[c], dt)
                .input(&[c], dt)
                .input(&[c], dt)
                .attr("epsilon", A::Float(1e-3));
            let mut want = bn.run(&[x, sc, b, m, v]).unwrap().remove(0).1;
            for s in stages {
                for (i, w) in want.iter_mut().enumerate() {
                    let ch = i / 15 % c as usize;
                    *w = match *s {
                        "Mul" => *w * mul[ch],
                        "Add" => *w + add[ch],
                        _ => w.max(0.0),
                    };
                }
                want = round(dt, &want);
            }
            let (a, r) = tol(dt);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 2.0 * (a + r * w.abs()),
                    "{} {dt:?}: element {i} is {g}, the chain gives {w}",
                    req.op
                );
            }
            let (whole, split) = inplace::both_paths(&req, &values);
            assert_eq!(whole, split, "{} {dt:?}", req.op);
        }
    }
}

#[test]
fn fused_batchnorm_declines_what_the_chain_computes_otherwise() {
    let ok = chain(&["Mul", "Add", "Relu"], 4, Dtype::F32);
    assert!(ok.plan().is_ok());
    // a Mul by a whole tensor, an Add along another axis, training mode
    let mut whole = chain(&["Mul", "Add", "Relu"], 4, Dtype::F32);
    whole.inputs[5] = Some((vec![2, 4, 3, 5], Dtype::F32));
    let mut other_axis = chain(&["Mul", "Add", "Relu"], 4, Dtype::F32);
    other_axis.inputs[6] = Some((vec![3, 1], Dtype::F32));
    let training = chain(&["Relu"], 4, Dtype::F32).attr("0.training_mode", A::Int(1));
    for (req, want) in [
        (whole, "one value per channel"),
        (other_axis, "one value per channel"),
        (training, "inference"),
    ] {
        let e = format!("{:?}", req.plan().unwrap_err());
        assert!(e.contains(want), "{want}: {e}");
    }
    assert!(
        fused::OPS
            .iter()
            .all(|o| o.len() <= umd_sdk::fused::MAX_NAME)
    );
}
