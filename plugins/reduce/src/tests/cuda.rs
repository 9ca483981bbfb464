//! The CUDA path without a GPU: every op × served dtype plans for `cuda:sm_90` and yields a
//! module listing its entry point (with `UMD_DUMP_CUDA` set, the modules are written for
//! `scripts/nvrtc_check.py`).

use super::*;
use crate::ops::{ARG_OPS, NUMERIC, ORDERED, REDUCE_OPS};
use umd_sdk::Plugin;

/// Requests covering every kernel variant of `op` in `dt`.
fn requests(op: &str, dt: Dtype) -> Vec<PlanRequestExt> {
    let b = |shape: &[u64]| builder(op, shape, dt);
    match op {
        "CumSum" | "CumProd" => vec![
            with_ints(b(&[4, 8]), &[1], true).build(target()),
            with_ints(b(&[2, 1000]), &[1], true).build(target()),
        ],
        "TopK" => vec![with_ints(b(&[4, 8]), &[3], false).build(target())],
        "ArgMax" | "ArgMin" => vec![
            b(&[4, 1000]).attr("axis", int(1)).build(target()),
            b(&[20000, 4]).attr("axis", int(1)).build(target()),
        ],
        _ => vec![
            with_ints(b(&[4, 1000]), &[1], false).build(target()),
            with_ints(b(&[20000, 4]), &[1], false).build(target()),
            with_ints(b(&[1, 100000]), &[1], false).build(target()),
        ],
    }
}

#[test]
fn every_op_and_dtype_has_cuda_source() {
    let mut modules = std::collections::BTreeSet::new();
    let mut entries = std::collections::BTreeSet::new();
    let ops: Vec<(&str, &[Dtype])> = REDUCE_OPS
        .iter()
        .map(|(n, r, _)| (*n, r.dtypes()))
        .chain(ARG_OPS.iter().map(|(n, _)| (*n, &ORDERED[..])))
        .chain([
            ("CumSum", &NUMERIC[..]),
            ("CumProd", &NUMERIC[..]),
            ("TopK", &ORDERED[..]),
        ])
        .collect();
    for (op, dts) in ops {
        for &dt in dts {
            for req in requests(op, dt) {
                let srcs = umd_sdk::testing::cuda_sources::<Reduce>(&req)
                    .unwrap_or_else(|e| panic!("{op} {}: {e:?}", dtype::name(dt)));
                let plan = crate::plan::plan(&req).unwrap();
                entries.insert(plan.launches[0].entry_point.clone());
                for (id, src) in srcs {
                    assert!(id.starts_with("reduce_"), "{id}");
                    assert!(!src.code.contains("#include"), "{id}");
                    for e in &src.entry_points {
                        assert!(
                            src.code.contains(&format!(" {e}(")),
                            "{id}: {e} not defined"
                        );
                    }
                    modules.insert(id);
                }
            }
        }
    }
    // 13 reduce modules (one per dtype), 10 cumsum, 12 topk
    assert_eq!(modules.len(), 13 + 10 + 12, "{modules:?}");
    for e in [
        "lse_bf16_rows",
        "argmin_u8_cols",
        "cumsum_i64_rows",
        "cumsum_f16",
        "l2_f64_split1",
        "sum_u64_split1",
        "argmax_i16_rows",
        "cumsum_u32",
    ] {
        assert!(entries.contains(e), "{e} not planned: {entries:?}");
    }
}

#[test]
fn unknown_modules_are_refused() {
    for id in [
        "reduce_f99",
        "reduce_cumsum_bool",
        "reduce_topk_bool",
        "reduce_scan_f32",
        "norm_f32",
    ] {
        assert!(Reduce::kernel_source(id, &target()).is_err(), "{id}");
    }
    let bool_module = Reduce::kernel_source("reduce_bool", &target()).unwrap();
    let names = ["max", "min"]
        .map(|k| ["rows", "cols", "split1", "split2"].map(|v| format!("{k}_bool_{v}")));
    assert_eq!(bool_module.entry_points, names.concat());
}
