//! Every bundled op on the CPU device against independent naive references, on random shapes
//! (broadcasting, batched MatMul with broadcast batch dims) and every supported dtype.

use rand::{Rng, SeedableRng, rngs::StdRng};
use umd::{Dtype, Host, TensorDesc, data};
use umd_tests::{assert_close, binary_ref, matmul_ref, store};

const ELEMENTWISE_DTYPES: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::I32];

fn host() -> Host {
    Host::builder().build().expect("host with bundled plugins")
}

fn tensor(name: &str, shape: Vec<u64>, dt: Dtype, values: &[f64]) -> (TensorDesc, Vec<u8>) {
    (TensorDesc::new(name, shape, dt), data::encode(dt, values))
}

/// Values as the dtype stores them (so the reference starts from the same inputs).
fn random_values(dt: Dtype, n: usize, rng: &mut StdRng) -> Vec<f64> {
    let v = data::random(dt, n, rng.random());
    v.into_iter().map(|x| store(dt, x * 4.0)).collect()
}

/// A random shape pair that broadcasts: dims of b are dropped or set to 1 at random.
fn broadcast_pair(rng: &mut StdRng) -> (Vec<u64>, Vec<u64>) {
    let rank = rng.random_range(0..=4);
    let a: Vec<u64> = (0..rank).map(|_| rng.random_range(1..=5)).collect();
    let drop = rng.random_range(0..=rank);
    let mut b: Vec<u64> = a[drop..]
        .iter()
        .map(|&d| if rng.random_bool(0.3) { 1 } else { d })
        .collect();
    let mut a = a;
    if rng.random_bool(0.3) {
        // broadcast the other way too: a gets a 1 where b keeps its dim
        if let Some(i) = (0..b.len()).find(|&i| b[i] != 1) {
            let ai = a.len() - b.len() + i;
            a[ai] = 1;
        }
    }
    if rng.random_bool(0.5) {
        std::mem::swap(&mut a, &mut b);
    }
    (a, b)
}

#[test]
fn binary_ops_match_the_reference_with_broadcasting() {
    let host = host();
    let mut rng = StdRng::seed_from_u64(7);
    for case in 0..60 {
        let (sa, sb) = broadcast_pair(&mut rng);
        for op in ["Add", "Sub", "Mul", "Div"] {
            for dt in ELEMENTWISE_DTYPES {
                let na: u64 = sa.iter().product();
                let nb: u64 = sb.iter().product();
                let a = random_values(dt, na as usize, &mut rng);
                let b = random_values(dt, nb as usize, &mut rng);
                let (shape, want) = binary_ref(op, dt, &a, &sa, &b, &sb);
                let out = host
                    .run(
                        op,
                        &[
                            tensor("a", sa.clone(), dt, &a),
                            tensor("b", sb.clone(), dt, &b),
                        ],
                    )
                    .unwrap_or_else(|e| panic!("case {case} {op} {dt} {sa:?} {sb:?}: {e}"));
                assert_eq!(out[0].0.shape, shape, "case {case} {op} {dt} {sa:?} {sb:?}");
                assert_eq!(out[0].0.dtype, dt);
                let got = data::decode(dt, &out[0].1);
                // Same f32 arithmetic and rounding as the reference: exact.
                assert_close(
                    &format!("case {case} {op} {sa:?} {sb:?}"),
                    dt,
                    &got,
                    &want,
                    0.0,
                );
            }
        }
    }
}

#[test]
fn unary_ops_match_the_reference() {
    let host = host();
    let mut rng = StdRng::seed_from_u64(11);
    for case in 0..20 {
        let shape: Vec<u64> = (0..rng.random_range(0..=3))
            .map(|_| rng.random_range(1..=7))
            .collect();
        let n: u64 = shape.iter().product();
        for dt in ELEMENTWISE_DTYPES {
            let x = random_values(dt, n as usize, &mut rng);
            for op in ["Relu", "Neg"] {
                let want: Vec<f64> = x
                    .iter()
                    .map(|&v| if op == "Relu" { v.max(0.0) } else { -v })
                    .collect();
                let out = host.run(op, &[tensor("x", shape.clone(), dt, &x)]).unwrap();
                assert_eq!(out[0].0.shape, shape);
                assert_close(
                    &format!("case {case} {op}"),
                    dt,
                    &data::decode(dt, &out[0].1),
                    &want,
                    0.0,
                );
            }
        }
    }
}

#[test]
fn matmul_matches_the_reference_batched_and_broadcast() {
    let host = host();
    let mut rng = StdRng::seed_from_u64(3);
    for case in 0..25 {
        let (m, k, n) = (
            rng.random_range(1..=20),
            rng.random_range(1..=40),
            rng.random_range(1..=20),
        );
        let batch_rank = rng.random_range(0..=2);
        let batch: Vec<u64> = (0..batch_rank).map(|_| rng.random_range(1..=3)).collect();
        let thin = |rng: &mut StdRng| -> Vec<u64> {
            batch
                .iter()
                .map(|&d| if rng.random_bool(0.3) { 1 } else { d })
                .collect()
        };
        let mut sa = thin(&mut rng);
        let mut sb = thin(&mut rng);
        if rng.random_bool(0.3) && !sb.is_empty() {
            sb.remove(0); // fewer batch dims on one side
        }
        sa.extend([m, k]);
        sb.extend([k, n]);
        for dt in [Dtype::F32, Dtype::F16, Dtype::Bf16] {
            let a = random_values(dt, sa.iter().product::<u64>() as usize, &mut rng);
            let b = random_values(dt, sb.iter().product::<u64>() as usize, &mut rng);
            let (shape, want) = matmul_ref(&a, &sa, &b, &sb);
            let want: Vec<f64> = want.iter().map(|&v| store(dt, v)).collect();
            let out = host
                .run(
                    "MatMul",
                    &[
                        tensor("a", sa.clone(), dt, &a),
                        tensor("b", sb.clone(), dt, &b),
                    ],
                )
                .unwrap_or_else(|e| panic!("case {case} {dt} {sa:?} @ {sb:?}: {e}"));
            assert_eq!(out[0].0.shape, shape, "case {case} {sa:?} @ {sb:?}");
            // f32 accumulation vs the f64 reference; then the dtype's own rounding.
            let tol = match dt {
                Dtype::F32 => 1e-5,
                Dtype::F16 => 2e-3,
                _ => 1.6e-2,
            };
            let got = data::decode(dt, &out[0].1);
            assert_close(
                &format!("case {case} MatMul {sa:?} @ {sb:?}"),
                dt,
                &got,
                &want,
                tol,
            );
        }
    }
}

#[test]
fn matmul_of_vectors_drops_their_dimension() {
    let host = host();
    let v = [1.0, 2.0, 3.0];
    let m = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // [3, 2]
    let out = host
        .run(
            "matmul",
            &[
                tensor("v", vec![3], Dtype::F32, &v),
                tensor("m", vec![3, 2], Dtype::F32, &m),
            ],
        )
        .unwrap();
    assert_eq!(out[0].0.shape, vec![2]);
    assert_eq!(data::decode(Dtype::F32, &out[0].1), vec![4.0, 5.0]);
}

#[test]
fn large_contiguous_add_crosses_many_blocks() {
    let host = host();
    let n = 1 << 20;
    let a: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let b: Vec<f64> = (0..n).map(|i| (n - i) as f64).collect();
    let out = host
        .run(
            "Add",
            &[
                tensor("a", vec![n as u64], Dtype::F32, &a),
                tensor("b", vec![n as u64], Dtype::F32, &b),
            ],
        )
        .unwrap();
    let got = data::decode(Dtype::F32, &out[0].1);
    assert!(got.iter().all(|&v| v == n as f64), "every element is n");
}
