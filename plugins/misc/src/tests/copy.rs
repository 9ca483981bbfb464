//! Dropout (inference, training with ratio 0, training against the reference's generator) and
//! BitCast on every same-width dtype pair.

use super::*;
use crate::mt::Mt;

fn dropout(shape: &[u64], dt: Dtype) -> umd_sdk::request::RequestBuilder {
    PlanRequestExt::builder("Dropout").input(desc(shape, dt))
}

fn scalar_f32(v: f32) -> (TensorDesc, Vec<u8>) {
    (desc(&[], Dtype::F32), v.to_le_bytes().to_vec())
}

#[test]
fn numpy_random_state_stream() {
    // np.random.RandomState(0).random_sample(3), RandomState(42).random_sample(1)
    let mut mt = Mt::new(0);
    let want = [0.5488135039273248, 0.7151893663724195, 0.6027633760716439];
    for w in want {
        assert_eq!(mt.next_f64(), w);
    }
    assert_eq!(Mt::new(42).next_f64(), 0.3745401188473625);
}

#[test]
fn inference_is_the_identity_on_every_dtype_with_a_true_mask() {
    for dt in dtype::ALL {
        for shape in [&[3u64, 4][..], &[0, 2], &[]] {
            let n = shape.iter().product::<u64>() as usize;
            let x: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
            let x = quantize(dt, &x);
            for outs in [1usize, 2] {
                let (r, rv) = scalar_f32(0.3);
                let req = dropout(shape, dt)
                    .constant(r, &rv)
                    .outputs_wanted(vec![true; outs])
                    .build(target());
                let (plan, got) = run(&req, &[x.clone(), vec![0.3]]).unwrap();
                assert_eq!(plan.outputs.len(), outs);
                assert_eq!(got[0], x, "{dt:?} {shape:?}");
                if outs == 2 {
                    assert_eq!(plan.outputs[1].dtype, Dtype::Boolean);
                    assert_eq!(got[1], vec![1.0; n]);
                }
            }
        }
    }
    // opset 7-11: ratio attribute; training_mode false
    let req = dropout(&[2], Dtype::F32)
        .attr("ratio", AttrValueExt::Float(0.2))
        .opset(11)
        .build(target());
    assert_eq!(run(&req, &[vec![1.0, 2.0]]).unwrap().1[0], vec![1.0, 2.0]);
    let (r, rv) = scalar_f32(0.5);
    let req = dropout(&[2], Dtype::F32)
        .constant(r, &rv)
        .constant(desc(&[], Dtype::Boolean), &[0])
        .build(target());
    assert_eq!(
        run(&req, &[vec![1.0, 2.0], vec![0.5], vec![0.0]])
            .unwrap()
            .1[0],
        vec![1.0, 2.0]
    );
}

#[test]
fn training_mode_matches_the_reference_generator() {
    for dt in [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64] {
        for ratio in [0.0f32, 0.5, 0.75] {
            for seed in [0i64, 7] {
                let n = 60;
                let x = quantize(dt, &sample(n, 3));
                let (r, rv) = scalar_f32(ratio);
                let req = dropout(&[3, 4, 5], dt)
                    .constant(r, &rv)
                    .constant(desc(&[], Dtype::Boolean), &[1])
                    .attr("seed", int(seed))
                    .outputs_wanted(vec![true, true])
                    .build(target());
                let (_, got) = run(&req, &[x.clone(), vec![ratio as f64], vec![1.0]]).unwrap();
                let mut mt = Mt::new(seed as u32);
                let scale = 1.0 / (1.0 - ratio as f64);
                let (mut y, mut m) = (vec![], vec![]);
                for v in &x {
                    let keep = ratio == 0.0 || mt.next_f64() >= ratio as f64;
                    y.push(if keep { v * scale } else { 0.0 });
                    m.push(keep as u8 as f64);
                }
                let what = format!("{dt:?} ratio {ratio} seed {seed}");
                assert_eq!(got[1], m, "{what}");
                assert_close(&got[0], &quantize(dt, &y), tol(dt), &what);
            }
        }
    }
}

#[test]
fn dropout_errors() {
    let (r, rv) = scalar_f32(1.0);
    let req = dropout(&[2], Dtype::F32)
        .constant(r, &rv)
        .constant(desc(&[], Dtype::Boolean), &[1])
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(m) if m.contains("ratio")));
    let req = dropout(&[2], Dtype::F32)
        .attr("bogus", int(1))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(m) if m.contains("bogus")));
    let req = dropout(&[2], Dtype::I32)
        .constant(scalar_f32(0.5).0, &0.5f32.to_le_bytes())
        .constant(desc(&[], Dtype::Boolean), &[1])
        .build(target());
    assert!(matches!(err(&req), OpError::UnsupportedDtype(_)));
}

#[test]
fn bitcast_every_same_width_pair() {
    for from in dtype::ALL {
        for to in dtype::ALL {
            let to_n = (1..=24)
                .find(|n| crate::common::onnx_dtype(*n) == Some(to))
                .unwrap();
            let req = PlanRequestExt::builder("BitCast")
                .input(desc(&[2, 3], from))
                .attr("to", int(to_n))
                .build(target());
            if dtype::size(from) != dtype::size(to) {
                assert!(matches!(err(&req), OpError::InvalidAttribute(_)));
                continue;
            }
            let bytes: Vec<u8> = (0..6 * dtype::size(from))
                .map(|i| (i * 37 + 5) as u8)
                .collect();
            let (plan, outs) = testing::run::<Misc>(&req, std::slice::from_ref(&bytes)).unwrap();
            assert_eq!(plan.outputs[0].dtype, to);
            assert_eq!(plan.outputs[0].shape, vec![2, 3]);
            assert_eq!(outs[0], bytes, "{from:?} -> {to:?}");
        }
    }
    // node test values: f32 1.0 -> i32 0x3f800000
    let req = PlanRequestExt::builder("BitCast")
        .input(desc(&[], Dtype::F32))
        .attr("to", int(6))
        .build(target());
    assert_eq!(run(&req, &[vec![1.0]]).unwrap().1[0], vec![1_065_353_216.0]);
    let req = PlanRequestExt::builder("BitCast")
        .input(desc(&[1], Dtype::F32))
        .attr("to", int(8))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(_)), "string");
    let req = PlanRequestExt::builder("BitCast")
        .input(desc(&[1], Dtype::F32))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(m) if m.contains("`to`")));
}
