//! Unique and NonZero against the ONNX node-test values and naive references.

use super::*;

fn unique(
    shape: &[u64],
    dt: Dtype,
    x: &[f64],
    axis: Option<i64>,
    sorted: i64,
    outs: usize,
) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("Unique")
        .constant(desc(shape, dt), &enc(dt, x))
        .attr("sorted", int(sorted))
        .outputs_wanted(vec![true; outs]);
    if let Some(a) = axis {
        b = b.attr("axis", int(a));
    }
    b.build(target())
}

#[test]
fn unique_node_test_values() {
    let x = [2.0, 1.0, 1.0, 3.0, 4.0, 3.0];
    for dt in [Dtype::F32, Dtype::Bf16, Dtype::I64, Dtype::U8, Dtype::F64] {
        let (plan, got) = run(&unique(&[6], dt, &x, None, 1, 4), &[x.to_vec()]).unwrap();
        assert_eq!(plan.outputs[0].shape, vec![4]);
        assert_eq!(got[0], vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(got[1], vec![1.0, 0.0, 3.0, 4.0]);
        assert_eq!(got[2], vec![1.0, 0.0, 0.0, 2.0, 3.0, 2.0]);
        assert_eq!(got[3], vec![2.0, 1.0, 2.0, 1.0]);
        let (_, got) = run(&unique(&[6], dt, &x, None, 0, 4), &[x.to_vec()]).unwrap();
        assert_eq!(got[0], vec![2.0, 1.0, 3.0, 4.0]);
        assert_eq!(got[1], vec![0.0, 1.0, 3.0, 4.0]);
        assert_eq!(got[2], vec![0.0, 1.0, 1.0, 2.0, 3.0, 2.0]);
        assert_eq!(got[3], vec![1.0, 2.0, 2.0, 1.0]);
        for outs in 1..4 {
            let (plan, got) = run(&unique(&[6], dt, &x, None, 1, outs), &[x.to_vec()]).unwrap();
            assert_eq!(plan.outputs.len(), outs);
            assert_eq!(got[0], vec![1.0, 2.0, 3.0, 4.0]);
        }
    }
    // test_unique_sorted_with_axis: rows [1,0,0] twice and [2,3,4]
    let x = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 4.0];
    let (plan, got) = run(
        &unique(&[3, 3], Dtype::F32, &x, Some(0), 1, 4),
        &[x.to_vec()],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 3]);
    assert_eq!(got[0], vec![1.0, 0.0, 0.0, 2.0, 3.0, 4.0]);
    assert_eq!(got[1], vec![0.0, 2.0]);
    assert_eq!(got[2], vec![0.0, 0.0, 1.0]);
    assert_eq!(got[3], vec![2.0, 1.0]);
    // axis -1 on [[1,0,0],[1,0,0],[2,3,3]]: columns [1,1,2], [0,0,3], [0,0,3] -> [0,0,3] first
    let x = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 3.0];
    let (plan, got) = run(
        &unique(&[3, 3], Dtype::F32, &x, Some(-1), 1, 4),
        &[x.to_vec()],
    )
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![3, 2]);
    assert_eq!(got[0], vec![0.0, 1.0, 0.0, 1.0, 3.0, 2.0]);
    assert_eq!(got[1], vec![1.0, 0.0]);
    assert_eq!(got[2], vec![1.0, 0.0, 0.0]);
    assert_eq!(got[3], vec![2.0, 1.0]);
}

#[test]
fn unique_nan_and_empty() {
    let nan = f64::NAN;
    let x = [nan, 1.0, nan, -1.0];
    let (_, got) = run(&unique(&[4], Dtype::F32, &x, None, 1, 4), &[x.to_vec()]).unwrap();
    assert_eq!(got[0][..2], [-1.0, 1.0]);
    assert!(got[0][2].is_nan() && got[0].len() == 3);
    assert_eq!(got[3], vec![1.0, 1.0, 2.0]);
    let (plan, got) = run(&unique(&[0], Dtype::F32, &[], None, 1, 4), &[vec![]]).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![0]);
    assert!(got.iter().all(|v| v.is_empty()));
    let req = PlanRequestExt::builder("Unique")
        .input(desc(&[3], Dtype::F32))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidShape(m) if m.contains("known")));
}

#[test]
fn nonzero_matches_naive() {
    for dt in [Dtype::F32, Dtype::I32, Dtype::Boolean, Dtype::F16] {
        for shape in [&[2u64, 3][..], &[4], &[2, 2, 2], &[0, 3]] {
            let n = shape.iter().product::<u64>() as usize;
            let x: Vec<f64> = (0..n)
                .map(|i| ((i * 7) % 3 == 0) as u8 as f64 * (i as f64 + 1.0))
                .collect();
            let x = if dt == Dtype::Boolean {
                x.iter().map(|v| (*v != 0.0) as u8 as f64).collect()
            } else {
                x
            };
            let req = PlanRequestExt::builder("NonZero")
                .constant(desc(shape, dt), &enc(dt, &x))
                .build(target());
            let (plan, got) = run(&req, std::slice::from_ref(&x)).unwrap();
            let nz: Vec<usize> = (0..n).filter(|i| x[*i] != 0.0).collect();
            assert_eq!(
                plan.outputs[0].shape,
                vec![shape.len() as u64, nz.len() as u64]
            );
            let mut want = vec![0.0; shape.len() * nz.len()];
            for (p, &i) in nz.iter().enumerate() {
                let mut rem = i as u64;
                for d in (0..shape.len()).rev() {
                    want[d * nz.len() + p] = (rem % shape[d]) as f64;
                    rem /= shape[d];
                }
            }
            assert_eq!(got[0], want, "{dt:?} {shape:?}");
        }
    }
}
