//! The random ops against NumPy's legacy `RandomState` (values printed by NumPy 2 for the
//! seeds used here), their refusals, and CUDA emulation vectors (seeded only: an unseeded CUDA
//! kernel seeds from the clock).

use super::*;

fn rnd(op: &str, attrs: Vec<(&str, AttrValueExt)>, inputs: &[(Vec<u64>, Dtype)]) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op);
    for (s, d) in inputs {
        b = b.input(desc(s, *d));
    }
    for (n, v) in attrs {
        b = b.attr(n, v);
    }
    b.build(target())
}

fn float(v: f64) -> AttrValueExt {
    AttrValueExt::Float(v)
}

#[test]
fn seeded_draws_are_numpys() {
    let shape = || ("shape", AttrValueExt::Ints(vec![3]));
    // RandomState(0).rand(3), cast to f64
    let r = rnd(
        "RandomUniform",
        vec![shape(), ("seed", float(0.0)), ("dtype", int(11))],
        &[],
    );
    let (_, out) = run(&r, &[]).unwrap();
    assert_eq!(
        out[0],
        vec![0.5488135039273248, 0.7151893663724195, 0.6027633760716439]
    );
    // RandomState(0).randn(3) * 2 + 1 in f64
    let r = rnd(
        "RandomNormal",
        vec![
            shape(),
            ("seed", float(0.0)),
            ("dtype", int(11)),
            ("scale", float(2.0)),
            ("mean", float(1.0)),
        ],
        &[],
    );
    let (_, out) = run(&r, &[]).unwrap();
    let want = [1.764052345967664, 0.4001572083672233, 0.9787379841057392].map(|v| v * 2.0 + 1.0);
    assert_eq!(out[0], want.to_vec());
    // RandomState(7).binomial(1, p): one draw each, p = 0 never 1, p = 1 always
    let r = rnd(
        "Bernoulli",
        vec![("seed", float(7.0))],
        &[(vec![6], Dtype::F64)],
    );
    let (plan, out) = run(&r, &[vec![0.5, 0.9, 0.0, 1.0, 0.2, 0.7]]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::F64);
    assert_eq!(out[0], vec![0.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
    // the Like form takes its input's shape; the output dtype may differ
    let r = rnd(
        "RandomUniformLike",
        vec![("seed", float(0.0)), ("dtype", int(1))],
        &[(vec![2, 2], Dtype::F64)],
    );
    let (plan, out) = run(&r, &[vec![0.0; 4]]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 2]);
    assert_eq!(plan.outputs[0].dtype, Dtype::F32);
    assert_eq!(out[0][0], 0.5488135039273248f64 as f32 as f64);
}

#[test]
fn unseeded_calls_differ_and_bad_requests_are_refused() {
    let r = rnd(
        "RandomUniform",
        vec![("shape", AttrValueExt::Ints(vec![8]))],
        &[],
    );
    let (_, a) = run(&r, &[]).unwrap();
    let (_, b) = run(&r, &[]).unwrap();
    assert_ne!(a, b);
    assert!(a[0].iter().all(|v| (0.0..1.0).contains(v)));
    // refusals
    let no_shape = rnd("RandomNormal", vec![], &[]);
    assert!(matches!(err(&no_shape), OpError::InvalidAttribute(_)));
    let bad_seed = rnd(
        "RandomUniform",
        vec![
            ("shape", AttrValueExt::Ints(vec![2])),
            ("seed", float(-1.0)),
        ],
        &[],
    );
    assert!(matches!(err(&bad_seed), OpError::InvalidAttribute(_)));
    let int_out = rnd(
        "RandomUniform",
        vec![("shape", AttrValueExt::Ints(vec![2])), ("dtype", int(6))],
        &[],
    );
    assert!(matches!(err(&int_out), OpError::UnsupportedDtype(_)));
    let int_p = rnd("Bernoulli", vec![], &[(vec![2], Dtype::I32)]);
    assert!(matches!(err(&int_p), OpError::UnsupportedDtype(_)));
    let flat = rnd("Multinomial", vec![], &[(vec![4], Dtype::F32)]);
    assert!(matches!(err(&flat), OpError::InvalidShape(_)));
    // Multinomial: int32 by default, [batch, sample_size], classes in range
    let m = rnd(
        "Multinomial",
        vec![("sample_size", int(50)), ("seed", float(1.0))],
        &[(vec![2, 3], Dtype::F32)],
    );
    let (plan, out) = run(&m, &[vec![0.0, 0.0, 0.0, -50.0, 10.0, -50.0]]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::I32);
    assert_eq!(plan.outputs[0].shape, vec![2, 50]);
    assert!(out[0][..50].iter().all(|&c| (0.0..3.0).contains(&c)));
    assert!(
        out[0][50..].iter().all(|&c| c == 1.0),
        "a near-certain class"
    );
}

/// Vectors for `plugins/norm/tools/cuda_emu.py`: seeded draws of every op and float dtype
/// (`misc-random.cases`).
#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for dt in crate::common::FLOATS {
        let onnx = (1..=24)
            .find(|n| crate::common::onnx_dtype(*n) == Some(dt))
            .unwrap();
        let seed = || ("seed", float(5.0));
        let cases = [
            (
                "uniform",
                rnd(
                    "RandomUniform",
                    vec![
                        ("shape", AttrValueExt::Ints(vec![700])),
                        ("dtype", int(onnx)),
                        ("low", float(-1.0)),
                        seed(),
                    ],
                    &[],
                ),
                vec![],
            ),
            (
                "normal",
                rnd(
                    "RandomNormal",
                    vec![
                        ("shape", AttrValueExt::Ints(vec![701])),
                        ("dtype", int(onnx)),
                        ("scale", float(3.0)),
                        seed(),
                    ],
                    &[],
                ),
                vec![],
            ),
            (
                "bernoulli",
                rnd(
                    "Bernoulli",
                    vec![seed(), ("dtype", int(9))],
                    &[(vec![64], dt)],
                ),
                vec![enc(
                    dt,
                    &(0..64).map(|i| i as f64 / 63.0).collect::<Vec<_>>(),
                )],
            ),
            (
                "multinomial",
                rnd(
                    "Multinomial",
                    vec![seed(), ("sample_size", int(20)), ("dtype", int(7))],
                    &[(vec![3, 4], dt)],
                ),
                vec![enc(
                    dt,
                    &[0.0, 1.0, 2.0, 3.0, -1.0, 0.5, 0.0, 2.0, 1.0, 1.0, 1.0, 1.0],
                )],
            ),
        ];
        for (name, req, inputs) in cases {
            let name = format!("random-{name}-{}", dtype::name(dt));
            umd_sdk::emu_vectors::dump_case::<Misc>(&mut out, &dir, &name, &req, &inputs, None);
        }
    }
    std::fs::write(format!("{dir}/misc-random.cases"), out).unwrap();
}
