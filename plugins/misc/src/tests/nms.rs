//! NonMaxSuppression against the ONNX node-test values, a naive greedy reference (pick the best
//! remaining box, drop the ones it overlaps) on generated boxes, and error cases.

use super::*;

fn f32s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect()
}

/// A request with every input a constant (`None`: the slot absent).
fn request(
    boxes: (&[u64], &[f64]),
    scores: (&[u64], &[f64]),
    max_out: Option<i64>,
    iou: Option<f64>,
    score: Option<f64>,
    center: Option<i64>,
    dt: Dtype,
) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("NonMaxSuppression")
        .constant(desc(boxes.0, dt), &enc(dt, boxes.1))
        .constant(desc(scores.0, dt), &enc(dt, scores.1));
    b = match max_out {
        Some(m) => b.constant(desc(&[1], Dtype::I64), &m.to_le_bytes()),
        None => b.absent(),
    };
    b = match iou {
        Some(v) => b.constant(desc(&[1], Dtype::F32), &f32s(&[v])),
        None => b.absent(),
    };
    if let Some(v) = score {
        b = b.constant(desc(&[1], Dtype::F32), &f32s(&[v]));
    }
    if let Some(c) = center {
        b = b.attr("center_point_box", int(c));
    }
    b.build(target())
}

fn run_nms(req: &PlanRequestExt, boxes: &[f64], scores: &[f64]) -> Vec<[i64; 3]> {
    let (plan, out) = run(
        req,
        &[boxes.to_vec(), scores.to_vec(), vec![], vec![], vec![]],
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(plan.outputs[0].shape[1], 3);
    assert_eq!(plan.outputs[0].dtype, Dtype::I64);
    out[0]
        .chunks(3)
        .map(|r| [r[0] as i64, r[1] as i64, r[2] as i64])
        .collect()
}

const BOXES: [f64; 24] = [
    0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, -0.1, 1.0, 0.9, 0.0, 10.0, 1.0, 11.0, 0.0, 10.1,
    1.0, 11.1, 0.0, 100.0, 1.0, 101.0,
];
const SCORES: [f64; 6] = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3];

#[test]
fn node_test_values() {
    for dt in crate::common::FLOATS {
        let r = |m, s, c| {
            let req = request(
                (&[1, 6, 4], &BOXES),
                (&[1, 1, 6], &SCORES),
                Some(m),
                Some(0.5),
                s,
                c,
                dt,
            );
            run_nms(&req, &BOXES, &SCORES)
        };
        assert_eq!(r(3, Some(0.0), None), [[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
        assert_eq!(r(3, None, None), [[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
        assert_eq!(r(3, Some(0.4), None), [[0, 0, 3], [0, 0, 0]]);
        assert_eq!(r(2, Some(0.0), None), [[0, 0, 3], [0, 0, 0]]);
        assert_eq!(r(0, Some(0.0), None), Vec::<[i64; 3]>::new());
    }
    // center-point format
    let cb = [
        0.5, 0.5, 1.0, 1.0, 0.5, 0.6, 1.0, 1.0, 0.5, 0.4, 1.0, 1.0, 0.5, 10.5, 1.0, 1.0, 0.5, 10.6,
        1.0, 1.0, 0.5, 100.5, 1.0, 1.0,
    ];
    let req = request(
        (&[1, 6, 4], &cb),
        (&[1, 1, 6], &SCORES),
        Some(3),
        Some(0.5),
        Some(0.0),
        Some(1),
        Dtype::F32,
    );
    assert_eq!(
        run_nms(&req, &cb, &SCORES),
        [[0, 0, 3], [0, 0, 0], [0, 0, 5]]
    );
    // two batches, two classes
    let b2: Vec<f64> = BOXES.iter().chain(BOXES.iter()).copied().collect();
    let s2: Vec<f64> = SCORES.iter().chain(SCORES.iter()).copied().collect();
    let req = request(
        (&[2, 6, 4], &b2),
        (&[2, 1, 6], &s2),
        Some(2),
        Some(0.5),
        Some(0.0),
        None,
        Dtype::F32,
    );
    assert_eq!(
        run_nms(&req, &b2, &s2),
        [[0, 0, 3], [0, 0, 0], [1, 0, 3], [1, 0, 0]]
    );
    let req = request(
        (&[1, 6, 4], &BOXES),
        (&[1, 2, 6], &s2),
        Some(2),
        Some(0.5),
        Some(0.0),
        None,
        Dtype::F32,
    );
    assert_eq!(
        run_nms(&req, &BOXES, &s2),
        [[0, 0, 3], [0, 0, 0], [0, 1, 3], [0, 1, 0]]
    );
    // identical boxes and scores: the first index only
    let ib: Vec<f64> = (0..10).flat_map(|_| [0.0, 0.0, 1.0, 1.0]).collect();
    let is = vec![0.9; 10];
    let req = request(
        (&[1, 10, 4], &ib),
        (&[1, 1, 10], &is),
        Some(3),
        Some(0.5),
        Some(0.0),
        None,
        Dtype::F32,
    );
    assert_eq!(run_nms(&req, &ib, &is), [[0, 0, 0]]);
    // IoU exactly at the threshold: kept
    let bb = [0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 1.5, 1.5];
    let thr = (0.25f64 / 1.75) as f32 as f64;
    let req = request(
        (&[1, 2, 4], &bb),
        (&[1, 1, 2], &[0.9, 0.8]),
        Some(3),
        Some(thr),
        Some(0.0),
        None,
        Dtype::F32,
    );
    assert_eq!(run_nms(&req, &bb, &[0.9, 0.8]), [[0, 0, 0], [0, 0, 1]]);
    // absent max_output_boxes_per_class: nothing selected
    let req = request(
        (&[1, 6, 4], &BOXES),
        (&[1, 1, 6], &SCORES),
        None,
        None,
        None,
        None,
        Dtype::F32,
    );
    assert!(run_nms(&req, &BOXES, &SCORES).is_empty());
}

/// Naive greedy NMS in f64 on integer-valued boxes (exact IoU comparisons).
fn naive(
    b: usize,
    c: usize,
    n: usize,
    boxes: &[f64],
    scores: &[f64],
    keep: usize,
    thr: f64,
) -> Vec<[i64; 3]> {
    let iou = |p: &[f64], q: &[f64]| {
        let (px0, px1) = (p[1].min(p[3]), p[1].max(p[3]));
        let (py0, py1) = (p[0].min(p[2]), p[0].max(p[2]));
        let (qx0, qx1) = (q[1].min(q[3]), q[1].max(q[3]));
        let (qy0, qy1) = (q[0].min(q[2]), q[0].max(q[2]));
        let w = (px1.min(qx1) - px0.max(qx0)).max(0.0);
        let h = (py1.min(qy1) - py0.max(qy0)).max(0.0);
        let i = w * h;
        let u = (px1 - px0) * (py1 - py0) + (qx1 - qx0) * (qy1 - qy0) - i;
        if i <= 0.0 || u <= 0.0 { 0.0 } else { i / u }
    };
    let mut out = Vec::new();
    for bi in 0..b {
        for ci in 0..c {
            let sc = &scores[(bi * c + ci) * n..][..n];
            let mut alive: Vec<bool> = vec![true; n];
            let mut got = 0;
            while got < keep {
                let best = (0..n)
                    .filter(|i| alive[*i])
                    .fold(None, |m: Option<usize>, i| match m {
                        Some(j) if sc[j] >= sc[i] => Some(j),
                        _ => Some(i),
                    });
                let Some(i) = best else { break };
                out.push([bi as i64, ci as i64, i as i64]);
                got += 1;
                let bx = |k: usize| &boxes[(bi * n + k) * 4..][..4];
                for (k, a) in alive.iter_mut().enumerate() {
                    if *a && (k == i || iou(bx(i), bx(k)) > thr) {
                        *a = false;
                    }
                }
            }
        }
    }
    out
}

#[test]
fn matches_naive_greedy() {
    for (b, c, n, keep) in [(1, 1, 0, 3), (2, 3, 17, 5), (1, 2, 40, 100), (3, 1, 9, 2)] {
        let boxes: Vec<f64> = (0..b * n * 4)
            .map(|i| ((i * 37 + 11) % 13) as f64)
            .collect();
        let scores: Vec<f64> = (0..b * c * n)
            .map(|i| ((i * 53 + 7) % 19) as f64 / 8.0)
            .collect();
        for thr in [0.0, 0.25, 0.5] {
            for dt in [Dtype::F32, Dtype::F64, Dtype::F16] {
                let req = request(
                    (&[b as u64, n as u64, 4], &boxes),
                    (&[b as u64, c as u64, n as u64], &scores),
                    Some(keep as i64),
                    Some(thr),
                    None,
                    None,
                    dt,
                );
                assert_eq!(
                    run_nms(&req, &boxes, &scores),
                    naive(b, c, n, &boxes, &scores, keep, thr),
                    "{b} {c} {n} {keep} {thr} {dt:?}"
                );
            }
        }
    }
}

#[test]
fn errors() {
    let bad = |r: PlanRequestExt| err(&r);
    let e = bad(request(
        (&[1, 6, 4], &BOXES),
        (&[1, 1, 6], &SCORES),
        Some(3),
        None,
        None,
        Some(2),
        Dtype::F32,
    ));
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("center_point_box")));
    let e = bad(request(
        (&[1, 6, 4], &BOXES),
        (&[1, 1, 5], &SCORES[..5]),
        Some(3),
        None,
        None,
        None,
        Dtype::F32,
    ));
    assert!(matches!(e, OpError::InvalidShape(_)));
    let no_value = PlanRequestExt::builder("NonMaxSuppression")
        .input(desc(&[1, 6, 4], Dtype::F32))
        .input(desc(&[1, 1, 6], Dtype::F32))
        .build(target());
    let e = bad(no_value);
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("`boxes`") && m.contains("1 MiB")));
    let ints = PlanRequestExt::builder("NonMaxSuppression")
        .constant(desc(&[1, 1, 4], Dtype::I32), &[0; 16])
        .constant(desc(&[1, 1, 1], Dtype::I32), &[0; 4])
        .build(target());
    assert!(matches!(bad(ints), OpError::UnsupportedDtype(_)));
    let unknown = PlanRequestExt::builder("NonMaxSuppression")
        .constant(desc(&[1, 1, 4], Dtype::F32), &[0; 16])
        .constant(desc(&[1, 1, 1], Dtype::F32), &[0; 4])
        .attr("bogus", int(1))
        .build(target());
    assert!(matches!(bad(unknown), OpError::InvalidAttribute(_)));
}

#[test]
fn nan_scores_rank_last_without_a_panic() {
    // disjoint boxes; NaN scores after every number, in index order
    let boxes: Vec<f64> = (0..4)
        .flat_map(|i| [0.0, 2.0 * i as f64, 1.0, 2.0 * i as f64 + 1.0])
        .collect();
    let scores = [f64::NAN, 0.5, f64::NAN, 0.9];
    for dt in crate::common::FLOATS {
        let req = request(
            (&[1, 4, 4], &boxes),
            (&[1, 1, 4], &scores),
            Some(4),
            Some(0.5),
            None,
            None,
            dt,
        );
        assert_eq!(
            run_nms(&req, &boxes, &scores),
            [[0, 0, 3], [0, 0, 1], [0, 0, 0], [0, 0, 2]]
        );
        // a score threshold drops them (NaN > t is false)
        let req = request(
            (&[1, 4, 4], &boxes),
            (&[1, 1, 4], &scores),
            Some(4),
            Some(0.5),
            Some(0.0),
            None,
            dt,
        );
        assert_eq!(run_nms(&req, &boxes, &scores), [[0, 0, 3], [0, 0, 1]]);
    }
}
