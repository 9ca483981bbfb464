//! The `Reduce*` ops against a naive f64 reference over explicit multi-indices.

use super::*;
use crate::ops::{REDUCE_OPS, Red};

/// One reduction case: input shape, axes (`None`: not given), keepdims, noop_with_empty_axes,
/// and whether axes go as the attribute (old opsets) rather than input 1.
struct Case {
    shape: &'static [u64],
    axes: Option<&'static [i64]>,
    keepdims: bool,
    noop: bool,
    attr_form: bool,
}

const fn case(shape: &'static [u64], axes: Option<&'static [i64]>, keepdims: bool) -> Case {
    Case {
        shape,
        axes,
        keepdims,
        noop: false,
        attr_form: false,
    }
}

const CASES: &[Case] = &[
    case(&[3, 4, 5], Some(&[1]), true),
    case(&[3, 4, 5], Some(&[0, 2]), false),
    case(&[3, 4, 5], Some(&[-1]), true),
    case(&[3, 4, 5], None, true),
    case(&[3, 4, 5], Some(&[]), false),
    Case {
        noop: true,
        ..case(&[3, 4, 5], Some(&[]), true)
    },
    Case {
        noop: true,
        ..case(&[2, 3], None, false)
    },
    Case {
        attr_form: true,
        ..case(&[3, 4, 5], Some(&[0, -1]), false)
    },
    case(&[2, 0, 4], Some(&[1]), true),
    case(&[2, 0, 4], Some(&[2]), true),
    case(&[], None, false),
    case(&[6, 37], Some(&[1]), false),
    case(&[37, 6], Some(&[0]), true),
    case(&[2, 3, 40], Some(&[1, 2]), false),
    case(&[2, 3, 4, 5], Some(&[1, 3]), false),
    case(&[2, 3, 4, 5], Some(&[0, 2]), true),
    case(&[1, 5, 1], Some(&[1]), false),
    case(&[2, 700], Some(&[1]), false),
    case(&[700, 2], Some(&[0]), false),
    // split across blocks (few outputs, long reductions)
    case(&[3, 9000], Some(&[1]), true),
    case(&[100, 100], None, false),
    case(&[50, 2, 200], Some(&[0, 2]), false),
];

/// The mask of reduced dims of a case (numpy semantics of axes / noop).
fn mask_of(c: &Case) -> Vec<bool> {
    let rank = c.shape.len();
    match c.axes {
        Some(a) if !a.is_empty() => {
            let mut m = vec![false; rank];
            for &x in a {
                m[(if x < 0 { x + rank as i64 } else { x }) as usize] = true;
            }
            m
        }
        _ => vec![!c.noop; rank],
    }
}

/// The lowest and highest values of `dt` (ReduceMax/ReduceMin of nothing).
fn bounds(dt: Dtype) -> (f64, f64) {
    match dt {
        Dtype::I32 => (i32::MIN as f64, i32::MAX as f64),
        Dtype::I64 => (i64::MIN as f64, i64::MAX as f64),
        Dtype::I8 => (-128.0, 127.0),
        Dtype::U8 => (0.0, 255.0),
        Dtype::I16 => (-32768.0, 32767.0),
        Dtype::U16 => (0.0, 65535.0),
        Dtype::U32 => (0.0, u32::MAX as f64),
        Dtype::U64 => (0.0, u64::MAX as f64),
        Dtype::Boolean => (0.0, 1.0),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    }
}

/// The reference value of `red` over `g` in `dt`.
fn reduce_ref(red: Red, dt: Dtype, g: &[f64]) -> f64 {
    let int = !umd_sdk::request::is_float(dt);
    let n = g.len() as f64;
    let sum = |f: &dyn Fn(f64) -> f64| g.iter().map(|x| f(*x)).sum::<f64>();
    let trunc = |v: f64| if int { v.trunc() } else { v };
    let (lo, hi) = bounds(dt);
    match red {
        Red::Sum => sum(&|x| x),
        Red::Mean if g.is_empty() => {
            if int {
                0.0
            } else {
                f64::NAN
            }
        }
        Red::Mean => trunc(sum(&|x| x) / n),
        Red::Max if g.iter().any(|x| x.is_nan()) => f64::NAN,
        Red::Max => g.iter().copied().fold(lo, f64::max),
        Red::Min if g.iter().any(|x| x.is_nan()) => f64::NAN,
        Red::Min => g.iter().copied().fold(hi, f64::min),
        Red::Prod => g.iter().product(),
        Red::L1 => sum(&|x| x.abs()),
        Red::L2 => trunc(sum(&|x| x * x).sqrt()),
        Red::SumSquare => sum(&|x| x * x),
        Red::LogSum => sum(&|x| x).ln(),
        Red::LogSumExp if g.is_empty() => f64::NEG_INFINITY,
        Red::LogSumExp => {
            let m = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            sum(&|x| (x - m).exp()).ln() + m
        }
    }
}

/// Reference reduction: output shape and values.
fn reference(
    red: Red,
    dt: Dtype,
    shape: &[u64],
    mask: &[bool],
    keepdims: bool,
    x: &[f64],
) -> (Vec<u64>, Vec<f64>) {
    let kshape: Vec<u64> = shape
        .iter()
        .zip(mask)
        .filter(|(_, m)| !**m)
        .map(|(d, _)| *d)
        .collect();
    let n_out: u64 = kshape.iter().product();
    let mut groups = vec![Vec::new(); n_out as usize];
    for (flat, v) in x.iter().enumerate() {
        let idx = unravel(flat, shape);
        let kidx: Vec<usize> = idx
            .iter()
            .zip(mask)
            .filter(|(_, m)| !**m)
            .map(|(i, _)| *i)
            .collect();
        groups[ravel(&kidx, &kshape)].push(*v);
    }
    let out_shape = shape
        .iter()
        .zip(mask)
        .filter_map(|(d, m)| match (m, keepdims) {
            (false, _) => Some(*d),
            (true, true) => Some(1),
            _ => None,
        })
        .collect();
    let vals: Vec<f64> = groups
        .iter()
        .map(|g| match red {
            Red::Max | Red::Min => reduce_ref(red, dt, g),
            _ => wrap(dt, reduce_ref(red, dt, g)),
        })
        .collect();
    (out_shape, quantize(dt, &vals))
}

/// Input values suited to `red` in `dt` (positive for LogSum, small for Prod).
fn input_for(red: Red, dt: Dtype, n: usize, seed: u64) -> Vec<f64> {
    let step = if umd_sdk::request::is_float(dt) {
        1.0 / 64.0
    } else {
        1.0
    };
    let v = match red {
        Red::Prod => sample(dt, n, seed, 2.0, step),
        Red::LogSum => data(n, seed, 8.0, step)
            .into_iter()
            .map(|x| x.abs() + 0.5)
            .collect(),
        Red::LogSumExp => data(n, seed, 4.0, step),
        _ => sample(dt, n, seed, 10.0, step),
    };
    quantize(dt, &v)
}

fn request(op: &str, dt: Dtype, c: &Case) -> PlanRequestExt {
    let mut b = builder(op, c.shape, dt).attr("keepdims", int(c.keepdims as i64));
    if c.noop {
        b = b.attr("noop_with_empty_axes", int(1));
    }
    match (c.axes, c.attr_form) {
        (Some(a), true) => b = b.attr("axes", ints(a)),
        (Some(a), false) => b = with_ints(b, a, false),
        (None, _) => {}
    }
    b.build(target())
}

#[test]
fn every_reduce_op_dtype_and_case_matches_the_reference() {
    let mut runs = 0;
    for (op, red, _) in REDUCE_OPS {
        for &dt in red.dtypes() {
            if matches!(dt, Dtype::I8 | Dtype::U8 | Dtype::Boolean) {
                continue; // covered below
            }
            for (ci, c) in CASES.iter().enumerate() {
                let n = c.shape.iter().product::<u64>() as usize;
                let x = input_for(red, dt, n, ci as u64 * 31 + 7);
                let req = request(op, dt, c);
                let what = format!(
                    "{op} {} case {ci} {:?} axes {:?}",
                    dtype::name(dt),
                    c.shape,
                    c.axes
                );
                let (plan, outs) = run(&req, &x).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let (shape, want) = reference(red, dt, c.shape, &mask_of(c), c.keepdims, &x);
                assert_eq!(plan.outputs[0].shape, shape, "{what}: shape");
                assert_eq!(plan.outputs[0].dtype, dt, "{what}: dtype");
                assert_close(&outs[0], &want, tol(dt), &what);
                runs += 1;
            }
        }
    }
    assert!(runs > 1400, "{runs} runs");
}

#[test]
fn max_and_min_serve_small_integers_and_bool() {
    for dt in [Dtype::I8, Dtype::U8, Dtype::Boolean] {
        for (op, red) in [("ReduceMax", Red::Max), ("ReduceMin", Red::Min)] {
            for (ci, c) in CASES.iter().enumerate() {
                let n = c.shape.iter().product::<u64>() as usize;
                let x = match dt {
                    Dtype::Boolean => data(n, ci as u64, 1.0, 1.0)
                        .iter()
                        .map(|v| (*v > 0.0) as u8 as f64)
                        .collect(),
                    Dtype::U8 => data(n, ci as u64, 100.0, 1.0)
                        .iter()
                        .map(|v| v + 100.0)
                        .collect(),
                    _ => data(n, ci as u64, 120.0, 1.0),
                };
                let (_, outs) = run(&request(op, dt, c), &x).unwrap();
                let (_, want) = reference(red, dt, c.shape, &mask_of(c), c.keepdims, &x);
                assert_close(
                    &outs[0],
                    &want,
                    0.0,
                    &format!("{op} {} case {ci}", dtype::name(dt)),
                );
            }
        }
    }
}

/// The ONNX node tests `reduce_*_empty_set`: a reduced axis of size 0.
#[test]
fn empty_sets_give_the_identity_of_each_op() {
    let c = case(&[2, 0, 4], Some(&[1]), true);
    let expect = [
        ("ReduceSum", Dtype::F32, 0.0),
        ("ReduceMean", Dtype::F32, f64::NAN),
        ("ReduceMean", Dtype::I32, 0.0),
        ("ReduceProd", Dtype::F32, 1.0),
        ("ReduceMax", Dtype::F32, f64::NEG_INFINITY),
        ("ReduceMin", Dtype::F32, f64::INFINITY),
        ("ReduceMax", Dtype::I32, i32::MIN as f64),
        ("ReduceMin", Dtype::I64, i64::MAX as f64),
        ("ReduceMax", Dtype::Boolean, 0.0),
        ("ReduceMin", Dtype::Boolean, 1.0),
        ("ReduceMin", Dtype::U8, 255.0),
        ("ReduceL1", Dtype::F32, 0.0),
        ("ReduceL2", Dtype::F32, 0.0),
        ("ReduceSumSquare", Dtype::F32, 0.0),
        ("ReduceLogSum", Dtype::F32, f64::NEG_INFINITY),
        ("ReduceLogSumExp", Dtype::F32, f64::NEG_INFINITY),
        ("ReduceLogSumExp", Dtype::F16, f64::NEG_INFINITY),
    ];
    for (op, dt, v) in expect {
        let (plan, outs) = run(&request(op, dt, &c), &[]).unwrap();
        assert_eq!(plan.outputs[0].shape, vec![2, 1, 4]);
        assert_close(&outs[0], &[v; 8], 0.0, op);
    }
}

#[test]
fn nan_propagates_through_max_and_min() {
    for dt in [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64] {
        for op in ["ReduceMax", "ReduceMin"] {
            // NaN first, in the middle and last of a row; a row without NaN.
            let x = [
                f64::NAN,
                1.,
                2.,
                3.,
                1.,
                f64::NAN,
                2.,
                3.,
                3.,
                2.,
                1.,
                f64::NAN,
                5.,
                -1.,
                0.,
                4.,
            ];
            for axes in [&[1i64][..], &[0]] {
                let req = with_ints(builder(op, &[4, 4], dt), axes, false).build(target());
                let (_, outs) = run(&req, &x).unwrap();
                let want: Vec<f64> = if axes == [1] {
                    let last = if op == "ReduceMax" { 5.0 } else { -1.0 };
                    vec![f64::NAN, f64::NAN, f64::NAN, last]
                } else {
                    let col2 = if op == "ReduceMax" { 2.0 } else { 0.0 };
                    vec![f64::NAN, f64::NAN, col2, f64::NAN]
                };
                assert_close(
                    &outs[0],
                    &want,
                    0.0,
                    &format!("{op} {axes:?} {}", dtype::name(dt)),
                );
            }
        }
    }
}

#[test]
fn log_sum_exp_handles_infinities() {
    let inf = f64::INFINITY;
    let x = [-inf, -inf, 0.0, -inf, inf, 1.0, 1000.0, 1000.0];
    let req =
        with_ints(builder("ReduceLogSumExp", &[4, 2], Dtype::F32), &[1], false).build(target());
    let (_, outs) = run(&req, &x).unwrap();
    assert_close(&outs[0], &[-inf, 0.0, inf, 1000.0 + 2f64.ln()], 1e-6, "lse");
}

#[test]
fn integer_semantics_truncate_and_wrap() {
    let req = |op: &str, dt| with_ints(builder(op, &[2, 2], dt), &[1], false).build(target());
    let (_, o) = run(&req("ReduceMean", Dtype::I32), &[-7., 0., 7., 0.]).unwrap();
    assert_eq!(o[0], vec![-3., 3.], "mean truncates toward zero");
    let (_, o) = run(&req("ReduceSum", Dtype::I32), &[2147483647., 1., -5., 2.]).unwrap();
    assert_eq!(o[0], vec![-2147483648., -3.], "i32 sums wrap");
    let (_, o) = run(&req("ReduceL2", Dtype::I64), &[3., 4., 1., 1.]).unwrap();
    assert_eq!(o[0], vec![5., 1.], "L2 truncates");
}

#[test]
fn kernels_are_chosen_by_shape() {
    let entry = |shape: &[u64], axes: &[i64]| {
        let req = with_ints(builder("ReduceSum", shape, Dtype::F32), axes, false).build(target());
        crate::plan::plan(&req).unwrap().launches[0]
            .entry_point
            .clone()
    };
    assert_eq!(
        entry(&[64, 1000], &[1]),
        "sum_f32_rows",
        "long contiguous rows"
    );
    assert_eq!(
        entry(&[1000, 64], &[0]),
        "sum_f32_rows",
        "few outputs, long columns"
    );
    assert_eq!(
        entry(&[1000, 10000], &[0]),
        "sum_f32_cols",
        "many outputs, coalesced columns"
    );
    assert_eq!(entry(&[100000, 4], &[1]), "sum_f32_cols", "short rows");
    let plan = |op: &str, shape: &[u64], axes: &[i64], t: Target| {
        let mut req = with_ints(builder(op, shape, Dtype::F32), axes, false).build(target());
        req.target = t;
        crate::plan::plan(&req).unwrap()
    };
    let cuda = umd_sdk::testing::cuda_target("sm_90");
    let p = plan("ReduceMean", &[1 << 20], &[0], cuda.clone());
    let entries: Vec<&str> = p.launches.iter().map(|l| l.entry_point.as_str()).collect();
    assert_eq!(entries, ["mean_f32_split1", "mean_f32_split2"]);
    assert_eq!(p.launches[0].grid.x, 512, "one chunk per block");
    assert_eq!(p.workspace_bytes, 512 * 8);
    assert_eq!(
        p.launches[0].relocations[1].binding, 3,
        "workspace after input, axes, output"
    );
    let p = plan("ReduceLogSumExp", &[1 << 20], &[0], cuda.clone());
    assert_eq!(p.launches.len(), 1, "LogSumExp is not split");
    let p = plan("ReduceSum", &[1000, 10000], &[1], cuda);
    assert_eq!(
        p.launches[0].entry_point, "sum_f32_rows",
        "enough outputs: no split"
    );
    let req = builder("ReduceLogSumExp", &[7, 300], Dtype::Bf16)
        .attr("axes", ints(&[1]))
        .build(target());
    let l = &crate::plan::plan(&req).unwrap().launches[0];
    assert_eq!(
        (l.module_id.as_str(), l.block.x, l.grid.x),
        ("reduce_bf16", 256, 7)
    );
}

#[test]
fn opset_forms_agree() {
    // ReduceSum-1 (axes attribute), ReduceSum-13 (axes input), absent axes input (all).
    let x = data(24, 3, 5.0, 1.0);
    let old = builder("ReduceSum", &[2, 3, 4], Dtype::F32)
        .opset(11)
        .attr("axes", ints(&[1]))
        .build(target());
    let new = with_ints(
        builder("ReduceSum", &[2, 3, 4], Dtype::F32).opset(13),
        &[1],
        false,
    )
    .build(target());
    assert_eq!(run(&old, &x).unwrap().1, run(&new, &x).unwrap().1);
    let absent = builder("ReduceSum", &[2, 3, 4], Dtype::F32)
        .absent()
        .build(target());
    let (p, o) = run(&absent, &x).unwrap();
    assert_eq!(p.outputs[0].shape, vec![1, 1, 1]);
    assert_eq!(o[0], vec![x.iter().sum::<f64>()]);
}
