//! The in-place (ABI 1.3) kernels on sizes that take several chunks and several block ranges:
//! the result must not depend on how the host splits a launch, and a split never touches
//! another range's bytes.

use super::*;
use umd_sdk::KernelCall;
use umd_sdk::kernel::{HeapMemory, Memory, part};

/// Plans `Add` of `a` (n) and `b` (n or 1) and runs its one launch as `parts` block ranges.
fn add_in_parts(n: u64, scalar_b: bool, parts: u64) -> Vec<f32> {
    let a: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 * 0.5).collect();
    let b: Vec<f64> = if scalar_b {
        vec![3.0]
    } else {
        (0..n).map(|i| -((i % 7) as f64)).collect()
    };
    let bshape = if scalar_b { vec![] } else { vec![n] };
    let req = request(
        "Add",
        &[
            (vec![n], Dtype::F32, a.clone()),
            (bshape, Dtype::F32, b.clone()),
        ],
        &[],
    );
    let plan = Elementwise::plan_ext(&req).unwrap();
    assert_eq!(plan.launches.len(), 1);
    let l = &plan.launches[0];
    assert!(
        Elementwise::splittable(&l.module_id, &l.entry_point),
        "{}",
        l.entry_point
    );
    let enc = |v: &[f64]| encode(Dtype::F32, v).unwrap();
    let (mut mem, sizes) =
        HeapMemory::for_launch(l, vec![enc(&a), enc(&b), vec![0xAB; (n * 4) as usize]]);
    let blocks = l.grid.volume();
    for p in 0..parts {
        let call = KernelCall::for_launch(l, &sizes, part(blocks, parts, p));
        Elementwise::run_kernel(&call, &mut mem as &mut dyn Memory).unwrap();
    }
    dtype::decode_f64(Dtype::F32, mem.contents(2).unwrap())
        .into_iter()
        .zip(0..)
        .map(|(x, i)| {
            let want = a[i] + if scalar_b { b[0] } else { b[i] };
            assert_eq!(x, want, "element {i} of {n}");
            x as f32
        })
        .collect()
}

#[test]
fn flat_add_gives_the_same_bytes_however_the_grid_is_split() {
    // 200_003 f32 = ~781 KiB: many 64 KiB chunks, an odd tail, ranges not chunk-aligned.
    for parts in [1, 2, 3, 7] {
        add_in_parts(200_003, false, parts);
        add_in_parts(200_003, true, parts);
    }
    add_in_parts(1, false, 1);
}

/// Plans `Add` of `a` and `b` (broadcast) and runs its one launch as `parts` block ranges; the
/// result must equal the numpy broadcast element by element.
fn broadcast_add_in_parts(a_shape: &[u64], b_shape: &[u64], parts: u64) {
    let out_shape = bcast::broadcast_all([a_shape, b_shape]).unwrap();
    let n = |s: &[u64]| s.iter().product::<u64>();
    let a: Vec<f64> = (0..n(a_shape)).map(|i| (i % 1013) as f64).collect();
    let b: Vec<f64> = (0..n(b_shape)).map(|i| (i % 7) as f64 * 1000.0).collect();
    let req = request(
        "Add",
        &[
            (a_shape.to_vec(), Dtype::F32, a.clone()),
            (b_shape.to_vec(), Dtype::F32, b.clone()),
        ],
        &[],
    );
    let plan = Elementwise::plan_ext(&req).unwrap();
    let l = &plan.launches[0];
    assert!(l.entry_point.contains("_bcast"), "{}", l.entry_point);
    assert!(Elementwise::splittable(&l.module_id, &l.entry_point));
    let enc = |v: &[f64]| encode(Dtype::F32, v).unwrap();
    let out_n = n(&out_shape);
    let (mut mem, sizes) =
        HeapMemory::for_launch(l, vec![enc(&a), enc(&b), vec![0xAB; (out_n * 4) as usize]]);
    let blocks = l.grid.volume();
    for p in (0..parts).rev() {
        let call = KernelCall::for_launch(l, &sizes, part(blocks, parts, p));
        Elementwise::run_kernel(&call, &mut mem as &mut dyn Memory).unwrap();
    }
    // The numpy broadcast, index by index.
    let rank = out_shape.len();
    let index = |shape: &[u64], mut flat: u64| -> u64 {
        // `flat` in the output → the element of an input of `shape` (right-aligned).
        let mut at = 0;
        let mut scale = 1;
        for d in (0..rank).rev() {
            let coord = flat % out_shape[d];
            flat /= out_shape[d];
            let Some(k) = (d + shape.len()).checked_sub(rank) else {
                continue;
            };
            if shape[k] != 1 {
                at += coord * scale;
            }
            scale *= shape[k];
        }
        at
    };
    let got = dtype::decode_f64(Dtype::F32, mem.contents(2).unwrap());
    for (i, x) in got.iter().enumerate() {
        let want = a[index(a_shape, i as u64) as usize] + b[index(b_shape, i as u64) as usize];
        assert_eq!(
            *x, want,
            "element {i} of {out_shape:?} = {a_shape:?} + {b_shape:?}"
        );
    }
}

#[test]
fn broadcast_add_gives_the_same_bytes_however_the_grid_is_split() {
    let cases: &[(&[u64], &[u64])] = &[
        (&[3, 4], &[3, 1]),
        (&[64, 512], &[512]),         // a bias: many rows
        (&[1000, 3], &[1000, 1]),     // narrow rows, several chunks
        (&[2, 70_001], &[1, 70_001]), // two wide rows, each several chunks' worth
        (&[5, 1, 7], &[1, 6, 1]),     // both broadcast, rank 3
        (&[2, 3, 4, 5], &[3, 1, 5]),
    ];
    for (a, b) in cases {
        for parts in [1, 2, 3, 7] {
            broadcast_add_in_parts(a, b, parts);
        }
    }
}
