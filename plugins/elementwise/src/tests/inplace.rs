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

#[test]
fn strided_entries_run_whole_only() {
    let req = request(
        "Add",
        &[
            (vec![3, 4], Dtype::F32, vec![1.0; 12]),
            (vec![3, 1], Dtype::F32, vec![2.0; 3]),
        ],
        &[],
    );
    let plan = Elementwise::plan_ext(&req).unwrap();
    let l = &plan.launches[0];
    assert!(!Elementwise::splittable(&l.module_id, &l.entry_point));
}
