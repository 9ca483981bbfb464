//! Einsum against a naive reference (every assignment of the labels enumerated), on explicit,
//! implicit, ellipsis, diagonal and broadcast equations, every served dtype, empty operands.

use super::*;

fn einsum(eq: &str, shapes: &[&[u64]], dt: Dtype) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("Einsum").attr("equation", text(eq));
    for s in shapes {
        b = b.input(desc(s, dt));
    }
    b.build(target())
}

/// Naive einsum of an explicit equation of letters only.
fn naive(eq: &str, shapes: &[&[u64]], xs: &[Vec<f64>]) -> (Vec<u64>, Vec<f64>) {
    let (lhs, rhs) = eq.split_once("->").unwrap();
    let terms: Vec<&str> = lhs.split(',').collect();
    let mut labels: Vec<char> = Vec::new();
    let mut ext = std::collections::HashMap::new();
    for (t, s) in terms.iter().zip(shapes) {
        for (c, d) in t.chars().zip(s.iter()) {
            if !labels.contains(&c) {
                labels.push(c);
            }
            let e = ext.entry(c).or_insert(*d);
            if *e == 1 {
                *e = *d;
            }
        }
    }
    let out_shape: Vec<u64> = rhs.chars().map(|c| ext[&c]).collect();
    let mut out = vec![0.0; out_shape.iter().product::<u64>() as usize];
    let total: u64 = labels.iter().map(|c| ext[c]).product();
    for flat in 0..total {
        let mut val = std::collections::HashMap::new();
        let mut rem = flat;
        for c in labels.iter().rev() {
            val.insert(*c, rem % ext[c]);
            rem /= ext[c];
        }
        let mut prod = 1.0;
        for ((t, s), x) in terms.iter().zip(shapes).zip(xs) {
            let mut off = 0;
            for (c, d) in t.chars().zip(s.iter()) {
                off = off * d + if *d == 1 { 0 } else { val[&c] };
            }
            prod *= x[off as usize];
        }
        let mut o = 0;
        for (c, d) in rhs.chars().zip(&out_shape) {
            o = o * d + val[&c];
        }
        out[o as usize] += prod;
    }
    (out_shape, out)
}

/// (equation run, equation for the naive reference, shapes)
const CASES: &[(&str, &str, &[&[u64]])] = &[
    ("ij->ji", "ij->ji", &[&[3, 4]]),
    ("ij->i", "ij->i", &[&[3, 4]]),
    ("ij", "ij->ij", &[&[3, 4]]),
    ("ji", "ji->ij", &[&[3, 4]]),
    ("ii->i", "ii->i", &[&[5, 5]]),
    ("ii", "ii->", &[&[4, 4]]),
    ("i,i", "i,i->", &[&[5], &[5]]),
    ("i,j->ij", "i,j->ij", &[&[3], &[4]]),
    ("ij,jk->ik", "ij,jk->ik", &[&[2, 3], &[3, 4]]),
    ("ij,jk", "ij,jk->ik", &[&[2, 3], &[3, 4]]),
    ("bij, bjk -> bik", "bij,bjk->bik", &[&[5, 2, 3], &[5, 3, 4]]),
    (
        "...ij,...jk->...ik",
        "bij,bjk->bik",
        &[&[5, 2, 3], &[1, 3, 4]],
    ),
    ("...ii->...i", "bii->bi", &[&[3, 5, 5]]),
    ("ij,jk,kl->il", "ij,jk,kl->il", &[&[2, 3], &[3, 2], &[2, 4]]),
    ("abc,cd->abd", "abc,cd->abd", &[&[2, 0, 3], &[3, 2]]),
    ("ij,jk->ik", "ij,jk->ik", &[&[2, 0], &[0, 3]]),
    ("i...->...", "ij->j", &[&[3, 4]]),
    ("->", "->", &[&[]]),
    ("BA,Ab->bB", "BA,Ab->bB", &[&[2, 3], &[3, 2]]),
];

#[test]
fn einsum_matches_naive_on_every_dtype() {
    for dt in crate::einsum::DTYPES {
        for (i, (eq, neq, shapes)) in CASES.iter().enumerate() {
            let req = einsum(eq, shapes, dt);
            let xs: Vec<Vec<f64>> = shapes
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    let n = s.iter().product::<u64>() as usize;
                    let v = sample(n, (i * 8 + k) as u64);
                    let v: Vec<f64> = if crate::common::FLOATS.contains(&dt) {
                        v
                    } else {
                        v.iter().map(|x| (x * 4.0).round()).collect()
                    };
                    quantize(dt, &v)
                })
                .collect();
            let what = format!("{eq} {dt:?}");
            let (plan, got) = run(&req, &xs).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            let (shape, want) = naive(neq, shapes, &xs);
            assert_eq!(plan.outputs[0].shape, shape, "{what}");
            let t = match dt {
                Dtype::F16 => 1e-2,
                Dtype::Bf16 => 5e-2,
                _ => tol(dt).max(1e-12),
            };
            assert_close(&got[0], &quantize(dt, &want), t, &what);
        }
    }
}

#[test]
fn implicit_output_sorts_letters_once() {
    let n = crate::einsum::nest("ba,ac", &[&[2, 3], &[3, 4]]).unwrap();
    assert_eq!(n.out_shape, vec![2, 4], "b then c");
    let n = crate::einsum::nest("...ij,jk", &[&[7, 2, 3], &[3, 4]]).unwrap();
    assert_eq!(n.out_shape, vec![7, 2, 4]);
}

#[test]
fn einsum_errors() {
    let bad = |eq: &str, shapes: &[&[u64]]| err(&einsum(eq, shapes, Dtype::F32));
    assert!(matches!(
        bad("ij,jk->ik", &[&[2, 3]]),
        OpError::InvalidAttribute(_)
    ));
    assert!(matches!(
        bad("ij->i", &[&[2, 3, 4]]),
        OpError::InvalidShape(_)
    ));
    assert!(matches!(
        bad("ij,jk->ik", &[&[2, 3], &[4, 5]]),
        OpError::InvalidShape(_)
    ));
    assert!(matches!(
        bad("ij->k", &[&[2, 3]]),
        OpError::InvalidAttribute(_)
    ));
    assert!(matches!(
        bad("ij->ii", &[&[2, 3]]),
        OpError::InvalidAttribute(_)
    ));
    assert!(matches!(
        bad("i1->i", &[&[2, 3]]),
        OpError::InvalidAttribute(_)
    ));
    let req = PlanRequestExt::builder("Einsum")
        .input(desc(&[2], Dtype::F32))
        .build(target());
    assert!(matches!(err(&req), OpError::InvalidAttribute(m) if m.contains("equation")));
    let req = PlanRequestExt::builder("Einsum")
        .input(desc(&[2], Dtype::F32))
        .input(desc(&[2], Dtype::F64))
        .attr("equation", text("i,i"))
        .build(target());
    assert!(matches!(err(&req), OpError::UnsupportedDtype(_)));
    assert!(matches!(
        err(&einsum("i", &[&[2]], Dtype::U8)),
        OpError::UnsupportedDtype(_)
    ));
}
