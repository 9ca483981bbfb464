//! Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile against naive references.

use super::*;

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

fn transpose_ref(shape: &[u64], perm: &[usize], x: &[f64]) -> (Vec<u64>, Vec<f64>) {
    let out: Vec<u64> = perm.iter().map(|&p| shape[p]).collect();
    let y = gather_ref(&out, x, |o| {
        let mut idx = vec![0; shape.len()];
        for (k, &p) in perm.iter().enumerate() {
            idx[p] = o[k];
        }
        ravel(&idx, shape)
    });
    (out, y)
}

#[test]
fn transpose_every_permutation_and_dtype() {
    for dt in ALL_DTYPES {
        for shape in [vec![2u64, 3, 4], vec![3, 1, 5, 2], vec![2, 0, 3]] {
            let x = values(numel(&shape), dt);
            for perm in permutations(shape.len()) {
                let p: Vec<i64> = perm.iter().map(|&v| v as i64).collect();
                let got = case("Transpose")
                    .input(&shape, dt, &x)
                    .int_list("perm", &p)
                    .out();
                assert_eq!(
                    got,
                    transpose_ref(&shape, &perm, &x),
                    "{dt:?} {shape:?} {perm:?}"
                );
            }
        }
    }
}

#[test]
fn transpose_defaults_to_reversal_and_refuses_bad_perms() {
    let x = values(24, Dtype::F32);
    let got = case("Transpose").input(&[2, 3, 4], Dtype::F32, &x).out();
    assert_eq!(got, transpose_ref(&[2, 3, 4], &[2, 1, 0], &x));
    let (s, v) = case("Transpose").input(&[], Dtype::I64, &[7.0]).out();
    assert_eq!((s, v), (vec![], vec![7.0]));
    for bad in [&[0, 0][..], &[0], &[0, 2], &[1, -3]] {
        let e = case("Transpose")
            .input(&[2, 3], Dtype::F32, &x[..6])
            .int_list("perm", bad)
            .err();
        assert!(is_attr_err(&e), "{bad:?}: {e:?}");
    }
    let e = case("Transpose")
        .input(&[2, 3], Dtype::F32, &x[..6])
        .int("axis", 1)
        .err();
    assert!(is_attr_err(&e));
    // rank 9: more than the SDK's usual 8, handled after merging
    let shape = [2u64, 1, 2, 1, 2, 1, 2, 1, 2];
    let x = values(32, Dtype::I8);
    let perm = [8usize, 7, 6, 5, 4, 3, 2, 1, 0];
    let got = case("Transpose").input(&shape, Dtype::I8, &x).out();
    assert_eq!(got, transpose_ref(&shape, &perm, &x));
}

#[test]
fn reshape_follows_the_onnx_cases() {
    let x = values(24, Dtype::F32);
    let cases: [(&[i64], &[u64]); 9] = [
        (&[4, 2, 3], &[4, 2, 3]),
        (&[2, 4, 3], &[2, 4, 3]),
        (&[2, 12], &[2, 12]),
        (&[2, 3, 2, 2], &[2, 3, 2, 2]),
        (&[24], &[24]),
        (&[2, -1, 2], &[2, 6, 2]),
        (&[-1, 2, 3, 4], &[1, 2, 3, 4]),
        (&[2, 0, 4, 1], &[2, 3, 4, 1]),
        (&[2, 0, 1, -1], &[2, 3, 1, 4]),
    ];
    for (target, want) in cases {
        let got = case("Reshape")
            .input(&[2, 3, 4], Dtype::F32, &x)
            .ints(target)
            .out();
        assert_eq!(got, (want.to_vec(), x.clone()), "{target:?}");
    }
    let got = case("Reshape")
        .input(&[0, 3, 4], Dtype::F32, &[])
        .ints(&[3, 4, 0])
        .int("allowzero", 1)
        .out();
    assert_eq!(got.0, vec![3, 4, 0]);
    // opset 1 form: shape attribute
    let got = case("Reshape")
        .input(&[2, 3], Dtype::U8, &x[..6])
        .int_list("shape", &[3, 2])
        .out();
    assert_eq!(got.0, vec![3, 2]);
    for bad in [&[5, -1][..], &[-1, -1], &[7], &[2, -2, 6]] {
        let e = case("Reshape")
            .input(&[2, 3, 4], Dtype::F32, &x)
            .ints(bad)
            .err();
        assert!(is_shape_err(&e), "{bad:?}: {e:?}");
    }
    let e = case("Reshape")
        .input(&[0, 3], Dtype::F32, &[])
        .ints(&[0, -1])
        .int("allowzero", 1)
        .err();
    assert!(is_shape_err(&e));
    let e = case("Reshape").input(&[2, 3], Dtype::F32, &x[..6]).err();
    assert!(is_shape_err(&e), "the shape is required");
}

#[test]
fn flatten_every_axis() {
    let shape = [2u64, 3, 4, 5];
    let x = values(120, Dtype::F16);
    for axis in -4i64..=4 {
        let a = if axis < 0 { axis + 4 } else { axis } as usize;
        let outer: u64 = shape[..a].iter().product();
        let got = case("Flatten")
            .input(&shape, Dtype::F16, &x)
            .int("axis", axis)
            .out();
        assert_eq!(got, (vec![outer, 120 / outer], x.clone()), "axis {axis}");
    }
    let got = case("Flatten").input(&shape, Dtype::F16, &x).out();
    assert_eq!(got.0, vec![2, 60], "default axis 1");
    for axis in [5, -5] {
        let e = case("Flatten")
            .input(&shape, Dtype::F16, &x)
            .int("axis", axis)
            .err();
        assert!(is_attr_err(&e));
    }
}

#[test]
fn squeeze_both_forms_and_default() {
    let x = values(15, Dtype::I32);
    let got = case("Squeeze")
        .input(&[1, 3, 1, 5], Dtype::I32, &x)
        .ints(&[0])
        .out();
    assert_eq!(got, (vec![3, 1, 5], x.clone()));
    let got = case("Squeeze")
        .input(&[1, 3, 1, 5], Dtype::I32, &x)
        .ints(&[-2])
        .out();
    assert_eq!(got.0, vec![1, 3, 5]);
    let got = case("Squeeze")
        .input(&[1, 3, 1, 5], Dtype::I32, &x)
        .int_list("axes", &[0, 2])
        .opset(11)
        .out();
    assert_eq!(got.0, vec![3, 5]);
    let got = case("Squeeze").input(&[1, 3, 1, 5], Dtype::I32, &x).out();
    assert_eq!(got.0, vec![3, 5], "no axes: every 1-dim");
    let got = case("Squeeze")
        .input(&[1, 3, 1, 5], Dtype::I32, &x)
        .absent()
        .out();
    assert_eq!(got.0, vec![3, 5], "absent axes input");
    let e = case("Squeeze")
        .input(&[1, 3], Dtype::I32, &x[..3])
        .ints(&[1])
        .err();
    assert!(is_shape_err(&e), "dim 1 is 3");
    let e = case("Squeeze")
        .input(&[1, 3], Dtype::I32, &x[..3])
        .ints(&[0, -2])
        .err();
    assert!(is_attr_err(&e), "duplicate axis");
    let e = case("Squeeze")
        .input(&[1, 3], Dtype::I32, &x[..3])
        .ints(&[0])
        .int_list("axes", &[0])
        .err();
    assert!(is_attr_err(&e), "both forms");
}

#[test]
fn unsqueeze_both_forms() {
    let x = values(60, Dtype::Bf16);
    for i in 0..4i64 {
        let got = case("Unsqueeze")
            .input(&[3, 4, 5], Dtype::Bf16, &x)
            .ints(&[i])
            .out();
        let mut want = vec![3, 4, 5];
        want.insert(i as usize, 1);
        assert_eq!(got, (want, x.clone()));
    }
    for axes in [&[1, 4][..], &[2, 4, 5], &[5, 4, 2]] {
        let got = case("Unsqueeze")
            .input(&[3, 4, 5], Dtype::Bf16, &x)
            .ints(axes)
            .out();
        let mut want = vec![3u64, 4, 5];
        let mut sorted = axes.to_vec();
        sorted.sort();
        for a in sorted {
            want.insert(a as usize, 1);
        }
        assert_eq!(got.0, want, "{axes:?}");
    }
    let got = case("Unsqueeze")
        .input(&[1, 3, 1, 5], Dtype::Bf16, &x[..15])
        .ints(&[-2])
        .out();
    assert_eq!(got.0, vec![1, 3, 1, 1, 5]);
    let got = case("Unsqueeze")
        .input(&[], Dtype::Bf16, &[2.0])
        .int_list("axes", &[0])
        .out();
    assert_eq!(got, (vec![1], vec![2.0]));
    let e = case("Unsqueeze")
        .input(&[3], Dtype::Bf16, &x[..3])
        .ints(&[2])
        .err();
    assert!(is_attr_err(&e), "axis out of range");
    let e = case("Unsqueeze").input(&[3], Dtype::Bf16, &x[..3]).err();
    assert!(is_attr_err(&e), "axes required");
}

fn expand_ref(shape: &[u64], target: &[u64], x: &[f64]) -> (Vec<u64>, Vec<f64>) {
    let r = shape.len().max(target.len());
    let pad = |s: &[u64]| [vec![1; r - s.len()], s.to_vec()].concat();
    let (a, b) = (pad(shape), pad(target));
    let out: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| if x == 1 { y } else { x })
        .collect();
    let y = gather_ref(&out, x, |o| {
        let idx: Vec<usize> = (0..r).map(|d| if a[d] == 1 { 0 } else { o[d] }).collect();
        ravel(&idx, &a)
    });
    (out, y)
}

#[test]
fn expand_broadcasts_both_ways() {
    for dt in [Dtype::F32, Dtype::I64, Dtype::Boolean, Dtype::F16] {
        for (shape, target) in [
            (&[3u64, 1][..], &[2u64, 1, 6][..]),
            (&[3, 1], &[3, 4]),
            (&[3, 1], &[1]),
            (&[1], &[2, 0]),
            (&[], &[2, 2]),
            (&[2, 1, 3], &[2, 2, 4, 1]),
        ] {
            let x = values(numel(shape), dt);
            let t: Vec<i64> = target.iter().map(|&v| v as i64).collect();
            let got = case("Expand").input(shape, dt, &x).ints(&t).out();
            assert_eq!(
                got,
                expand_ref(shape, target, &x),
                "{dt:?} {shape:?} {target:?}"
            );
        }
    }
    let e = case("Expand")
        .input(&[3], Dtype::F32, &[1., 2., 3.])
        .ints(&[4])
        .err();
    assert!(is_shape_err(&e));
    let e = case("Expand")
        .input(&[3], Dtype::F32, &[1., 2., 3.])
        .ints(&[-3])
        .err();
    assert!(is_shape_err(&e));
}

fn tile_ref(shape: &[u64], reps: &[u64], x: &[f64]) -> (Vec<u64>, Vec<f64>) {
    let out: Vec<u64> = shape.iter().zip(reps).map(|(&a, &b)| a * b).collect();
    let y = gather_ref(&out, x, |o| {
        let idx: Vec<usize> = o.iter().zip(shape).map(|(&i, &d)| i % d as usize).collect();
        ravel(&idx, shape)
    });
    (out, y)
}

#[test]
fn tile_repeats_every_dim() {
    let got = case("Tile")
        .input(&[2, 2], Dtype::F32, &[0., 1., 2., 3.])
        .ints(&[2, 2])
        .out();
    assert_eq!(
        got,
        (
            vec![4, 4],
            vec![
                0., 1., 0., 1., 2., 3., 2., 3., 0., 1., 0., 1., 2., 3., 2., 3.
            ]
        )
    );
    for dt in [Dtype::F32, Dtype::U8, Dtype::F64] {
        for (shape, reps) in [
            (&[2u64, 3, 4, 5][..], &[3u64, 1, 2, 4][..]),
            (&[3], &[0]),
            (&[1, 2, 1, 2, 1, 2, 1, 2], &[2, 1, 2, 2, 1, 2, 2, 1]),
            (&[4, 1], &[1, 5]),
        ] {
            let x = values(numel(shape), dt);
            let r: Vec<i64> = reps.iter().map(|&v| v as i64).collect();
            let got = case("Tile").input(shape, dt, &x).ints(&r).out();
            assert_eq!(got, tile_ref(shape, reps, &x), "{dt:?} {shape:?} {reps:?}");
        }
    }
    let e = case("Tile")
        .input(&[2], Dtype::F32, &[1., 2.])
        .ints(&[1, 2])
        .err();
    assert!(is_shape_err(&e));
    let e = case("Tile")
        .input(&[2], Dtype::F32, &[1., 2.])
        .ints(&[-1])
        .err();
    assert!(is_shape_err(&e));
}

#[test]
fn plain_copies_use_wide_elements() {
    let (plan, _) = case("Reshape")
        .input(&[4, 2], Dtype::U8, &values(8, Dtype::U8))
        .ints(&[8])
        .run();
    assert_eq!(plan.launches.len(), 1);
    assert_eq!(plan.launches[0].entry_point, "gather_b8");
    let (plan, _) = case("Identity")
        .input(&[3], Dtype::F16, &[1., 2., 3.])
        .run();
    assert_eq!(plan.launches[0].entry_point, "gather_b2");
}

proptest::proptest! {
    #[test]
    fn random_transposes_match_the_reference(
        shape in proptest::collection::vec(0u64..4, 0..6),
        seed in 0usize..1000,
    ) {
        let perms = permutations(shape.len());
        let perm = &perms[seed % perms.len()];
        let x = values(numel(&shape), Dtype::I32);
        let p: Vec<i64> = perm.iter().map(|&v| v as i64).collect();
        let got = case("Transpose").input(&shape, Dtype::I32, &x).int_list("perm", &p).out();
        proptest::prop_assert_eq!(got, transpose_ref(&shape, perm, &x));
    }
}
