//! The in-place (ABI 1.3) kernels against the whole-buffer kernels ([`super::oracle`], the
//! `run-cpu` kernels before the in-place ones): every converted entry point (`_rows`, `_cols`,
//! `_split1`, `_split2`, ArgMax/ArgMin, CumSum/CumProd with and without `_rows`), run whole and
//! as 2 or 3 uneven block ranges (last first, on outputs prefilled with 0xAB), must give the
//! same bytes — across dtypes, odd sizes, empty tensors, NaN, and shapes large enough to take
//! the chunked and row-by-row read paths.

use super::oracle;
use super::*;
use crate::ops::{ARG_OPS, NUMERIC, ORDERED, REDUCE_OPS};
use umd_sdk::Plugin;
use umd_sdk::testing;

/// The bytes of the data input: `sample` values, with NaN sprinkled in for float dtypes.
fn input(dt: Dtype, n: usize, seed: u64) -> Vec<u8> {
    let mut v = sample(
        dt,
        n,
        seed,
        20.0,
        if umd_sdk::request::is_float(dt) {
            0.25
        } else {
            1.0
        },
    );
    if matches!(dt, Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64) && n > 10 {
        for i in (7..n).step_by(n / 3 + 1) {
            v[i] = f64::NAN;
        }
    }
    if dt == Dtype::Boolean {
        v.iter_mut().for_each(|x| *x = (*x > 0.0) as u8 as f64);
    }
    dtype::encode(dt, &v).unwrap()
}

/// Plans `req`, runs it through the whole-buffer kernels and the in-place ones (whole, and in
/// 2 and 3 uneven ranges); asserts equal bytes. Returns the entry points it ran.
fn check(req: &PlanRequestExt, seed: u64) -> Vec<String> {
    let x = req.input(0).unwrap();
    let n = x.shape.iter().product::<u64>() as usize;
    let mut inputs = vec![input(x.dtype, n, seed)];
    for i in 1..req.slots() {
        if let Some(v) = req.value(i) {
            inputs.push(v.to_vec());
        }
    }
    let plan = umd_sdk::plan_checked::<Reduce>(req).unwrap();
    for l in &plan.launches {
        assert!(
            Reduce::splittable(&l.module_id, &l.entry_point),
            "{}",
            l.entry_point
        );
    }
    let want = testing::execute(&plan, &inputs, |c| oracle::run(&c)).unwrap();
    let what = format!("{} {:?} {}", req.op, x.shape, dtype::name(x.dtype));
    for cuts in [&[][..], &[0.3][..], &[0.11, 0.77][..], &[0.5, 0.5001][..]] {
        // written bindings start as 0xAB: a byte no range writes shows
        let got = testing::execute_kernels_cut::<Reduce>(&plan, &inputs, cuts, 0xAB).unwrap();
        assert!(got == want, "{what}: in place with cuts {cuts:?} differs");
    }
    // run-cpu (the SDK's in-memory run of the in-place kernels) gives the same bytes too
    let via = testing::execute(&plan, &inputs, Reduce::run_cpu).unwrap();
    assert!(via == want, "{what}: run-cpu differs");
    plan.launches
        .iter()
        .map(|l| l.entry_point.clone())
        .collect()
}

fn reduce_req(op: &str, shape: &[u64], dt: Dtype, axes: &[i64], keep: bool) -> PlanRequestExt {
    let b = builder(op, shape, dt).attr("keepdims", int(keep as i64));
    let b = if axes.is_empty() {
        b
    } else {
        with_ints(b, axes, false)
    };
    b.build(target())
}

/// Every reduction × served dtype on small shapes covering each kernel variant and view form.
#[test]
fn reductions_in_place_match_whole_buffer_kernels() {
    let shapes: &[(&[u64], &[i64])] = &[
        (&[5, 37], &[1]),         // rows (r ≥ 32, contiguous)
        (&[37, 9], &[0]),         // cols, contiguous inner kept
        (&[3, 40, 2], &[1]),      // kept inner < 4: per-output folds, strided
        (&[4, 5, 6, 7], &[0, 2]), // two reduced, two kept dims
        (&[2, 3, 4], &[]),        // everything
        (&[9000], &[]),           // split1 + split2
        (&[7], &[0]),             // one output
        (&[0, 5], &[1]),          // no outputs
        (&[3, 0], &[1]),          // empty reductions
        (&[], &[]),               // scalar
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (op, red, _) in REDUCE_OPS {
        for &dt in red.dtypes() {
            for (k, (shape, axes)) in shapes.iter().enumerate() {
                for e in check(&reduce_req(op, shape, dt, axes, k % 2 == 0), k as u64) {
                    seen.insert(e.rsplit('_').next().unwrap().to_string());
                }
            }
        }
    }
    for v in ["rows", "cols", "split1", "split2"] {
        assert!(seen.contains(v), "no {v} launch ran: {seen:?}");
    }
}

/// Shapes whose chunks span more than the in-place kernels read at once (256 KiB): the
/// grouped and row-by-row reads of the column kernels, several span chunks, one output larger
/// than a span.
#[test]
fn large_reductions_take_every_read_path() {
    let cases: &[(&str, &[u64], &[i64], Dtype)] = &[
        ("ReduceMean", &[300, 1000], &[0], Dtype::F32), // cols, rows read in groups
        ("ReduceMax", &[2, 50_000, 8], &[1], Dtype::F32), // narrow rows in groups
        ("ReduceSum", &[3, 2000, 100], &[0], Dtype::F32), // rows far apart: one by one
        ("ReduceLogSumExp", &[300, 1000], &[0], Dtype::F32),
        ("ReduceMax", &[700, 513], &[1], Dtype::F16), // rows, two span chunks per range
        ("ReduceSum", &[5, 301, 700], &[1], Dtype::F64), // kept inner 700: runs across rows
        ("ReduceLogSumExp", &[3, 300_000], &[1], Dtype::F32), // one output > a span
        ("ReduceL2", &[3, 300_000], &[1], Dtype::F32), // split over 3 outputs
        ("ReduceSum", &[100_000, 3], &[0], Dtype::I32), // split, strided partials
        ("ReduceProd", &[2, 50_000, 4], &[1], Dtype::F32),
    ];
    for (k, (op, shape, axes, dt)) in cases.iter().enumerate() {
        check(&reduce_req(op, shape, *dt, axes, true), 100 + k as u64);
    }
}

#[test]
fn arg_in_place_matches_whole_buffer_kernels() {
    let shapes: &[(&[u64], i64)] = &[
        (&[5, 37], 1),
        (&[37, 9], 0),
        (&[3, 40, 2], 1),
        (&[4, 5, 6], -1),
        (&[7], 0),
        (&[0, 5], 1),
        (&[300, 1000], 0),  // column-wise, read row by row
        (&[2, 300_000], 1), // one output larger than a span
    ];
    for (op, _) in ARG_OPS {
        for &dt in &ORDERED {
            for (k, (shape, axis)) in shapes.iter().enumerate() {
                let big = shape.iter().product::<u64>() > 100_000;
                if big && !matches!(dt, Dtype::F32 | Dtype::I8) {
                    continue;
                }
                let req = builder(op, shape, dt)
                    .attr("axis", int(*axis))
                    .attr("select_last_index", int((k % 2) as i64))
                    .build(target());
                check(&req, k as u64);
            }
        }
    }
}

#[test]
fn scans_in_place_match_whole_buffer_kernels() {
    let shapes: &[(&[u64], i64)] = &[
        (&[7, 5, 3], 1),
        (&[7, 5, 3], 0),
        (&[7, 5, 3], 2),
        (&[1000, 300], 1),  // rows (`_rows` entry), whole small outers
        (&[300, 1000], 0),  // one outer larger than a chunk: pieces of rows
        (&[2, 100_000], 0), // lanes wider than a chunk: lane segments
        (&[3, 70_000], 1),  // long lines, inner 1
        (&[0, 3], 1),
        (&[5, 0], 1),
        (&[1], 0),
    ];
    for op in ["CumSum", "CumProd"] {
        for &dt in &NUMERIC {
            for (k, (shape, axis)) in shapes.iter().enumerate() {
                let big = shape.iter().product::<u64>() > 100_000;
                if big && !matches!(dt, Dtype::F32 | Dtype::I64 | Dtype::F16) {
                    continue;
                }
                let b = with_ints(builder(op, shape, dt), &[*axis], true)
                    .attr("exclusive", int((k % 2) as i64))
                    .attr("reverse", int((k / 2 % 2) as i64));
                check(&b.build(target()), k as u64);
            }
        }
    }
}
