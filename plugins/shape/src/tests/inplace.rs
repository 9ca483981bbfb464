//! The in-place (ABI 1.3) kernels against the `run-cpu` path, on sizes that take several chunks
//! and on empty and odd ones: for every entry point, `run-cpu` (now the in-place kernel over
//! buffers in memory) gives the bytes the whole-buffer kernels of before gave
//! ([`super::before`]), the whole grid in place gives the same, and so do 2 or 3 uneven block
//! ranges (run last first), each byte written by one range only.

use std::ops::Range;

use super::*;
use umd_sdk::kernel::{HeapMemory, Recorder};
use umd_sdk::{KernelCall, Plugin, testing};

/// Ways to cut `0..g` blocks: whole, then uneven 2- and 3-way cuts where `g` allows.
fn cuts(g: u64) -> Vec<Vec<Range<u64>>> {
    let mut out = vec![vec![0..g]];
    if g >= 2 {
        out.push(vec![0..1, 1..g]);
        out.push(vec![0..g / 3 + 1, g / 3 + 1..g]);
    }
    if g >= 3 {
        out.push(vec![0..g / 5 + 1, g / 5 + 1..g - 1, g - 1..g]);
        out.push(vec![0..g / 2, g / 2..g / 2 + 1, g / 2 + 1..g]);
    }
    out
}

/// Runs `plan` in place, each launch in the block ranges `cut(grid)` picks (last first), on
/// outputs prefilled with 0xAB; checks that no two writes of a launch overlap. The outputs.
fn in_place(
    plan: &OpPlan,
    inputs: &[Vec<u8>],
    cut: &dyn Fn(u64) -> Vec<Range<u64>>,
    max_read: Option<u64>,
) -> Vec<Vec<u8>> {
    let mut buffers = inputs.to_vec();
    for o in &plan.outputs {
        let bytes = umd_sdk::shape::byte_size(&o.shape, o.dtype).unwrap();
        buffers.push(vec![0xAB; bytes as usize]);
    }
    for l in &plan.launches {
        assert!(
            Shape::splittable(&l.module_id, &l.entry_point),
            "{}",
            l.entry_point
        );
        let (mut mem, sizes) = HeapMemory::for_launch(l, buffers.clone());
        let mut writes: Vec<(u32, Range<u64>)> = Vec::new();
        let ranges = cut(l.grid.volume());
        assert_eq!(
            ranges.iter().map(|r| r.end - r.start).sum::<u64>(),
            l.grid.volume()
        );
        for r in ranges.iter().rev() {
            let call = KernelCall::for_launch(l, &sizes, r.clone());
            let mut spy = Recorder::new(&mut mem);
            match max_read {
                None => Shape::run_kernel(&call, &mut spy),
                Some(m) => crate::cpu::run_kernel_reading(&call, &mut spy, m),
            }
            .unwrap_or_else(|e| panic!("{} {r:?}: {e:?}", l.entry_point));
            writes.extend(spy.writes().map(|t| (t.binding, t.range.clone())));
        }
        writes.sort_by_key(|(b, r)| (*b, r.start));
        for w in writes.windows(2) {
            assert!(
                w[0].0 != w[1].0 || w[0].1.end <= w[1].1.start,
                "{}: writes {:?} and {:?} overlap",
                l.entry_point,
                w[0],
                w[1]
            );
        }
        for b in &sizes {
            buffers[b.binding as usize] = mem.contents(b.binding).unwrap().to_vec();
        }
    }
    buffers.into_iter().skip(inputs.len()).collect()
}

/// Checks `c` in place (whole and cut) against `run-cpu`; returns the plan's entry points.
fn check(c: &Case) -> Vec<String> {
    check_reading(c, None)
}

/// [`check`] with the strided copy reading at most `max_read` bytes at once.
fn check_reading(c: &Case, max_read: Option<u64>) -> Vec<String> {
    let plan = umd_sdk::plan_checked::<Shape>(&c.req).unwrap();
    let want = testing::execute(&plan, &c.data, Shape::run_cpu).unwrap();
    let before = testing::execute(&plan, &c.data, |call| super::before::run(&call)).unwrap();
    assert_eq!(want, before, "{}: run-cpu changed its results", c.req.op);
    // Cut #k of each launch's own grid (#0 whole; a grid too small for #k runs whole).
    for k in 0..cuts(3).len() {
        let pick = move |g: u64| {
            let all = cuts(g);
            all.get(k).cloned().unwrap_or_else(|| all[0].clone())
        };
        let got = in_place(&plan, &c.data, &pick, max_read);
        assert_eq!(
            got,
            want,
            "{} {:?}: cut #{k}",
            c.req.op,
            c.req
                .inputs
                .iter()
                .flatten()
                .map(|s| &s.desc.shape)
                .collect::<Vec<_>>()
        );
    }
    plan.launches
        .iter()
        .map(|l| l.entry_point.clone())
        .collect()
}

fn x(shape: &[u64], dt: Dtype) -> Case {
    case("Identity").input(shape, dt, &values(numel(shape), dt))
}

fn with_input(op: &str, shape: &[u64], dt: Dtype) -> Case {
    let mut c = x(shape, dt);
    c.req.op = op.into();
    c
}

#[test]
fn data_movement_in_place_equals_run_cpu() {
    let mut entries = Vec::new();
    let mut run = |c: Case| entries.extend(check(&c));
    // Transpose: one chunk and many (300×701 f32: the whole-share read), odd ranks and dtypes,
    // empty.
    for (shape, perm, dt) in [
        (&[300u64, 701][..], &[1i64, 0][..], Dtype::F32),
        (&[3, 5, 7], &[2, 0, 1], Dtype::I8),
        (&[4, 128, 12, 64], &[0, 2, 1, 3], Dtype::Bf16),
        (&[2, 3, 4, 5], &[3, 1, 0, 2], Dtype::F64),
        (&[0, 4], &[1, 0], Dtype::F16),
        (&[1031, 3], &[1, 0], Dtype::Boolean),
    ] {
        run(with_input("Transpose", shape, dt).int_list("perm", perm));
    }
    // Concat on the last axis (windows of the output) and the first, with an empty input.
    run(with_input("Concat", &[513, 257], Dtype::F32)
        .input(&[513, 300], Dtype::F32, &values(513 * 300, Dtype::F32))
        .int("axis", 1));
    run(with_input("Concat", &[3, 7], Dtype::Boolean)
        .input(&[0, 7], Dtype::Boolean, &[])
        .input(
            &[70001, 7],
            Dtype::Boolean,
            &values(70001 * 7, Dtype::Boolean),
        )
        .int("axis", 0));
    run(with_input("Concat", &[0, 2], Dtype::I64)
        .input(&[0, 3], Dtype::I64, &[])
        .int("axis", 1));
    // Split into uneven parts on a strided axis.
    run(with_input("Split", &[7, 30001], Dtype::U16)
        .ints(&[10000, 1, 20000])
        .int("axis", 1)
        .wanted(3));
    // Slice: every other row, negative steps, empty.
    run(with_input("Slice", &[1001, 1030], Dtype::F32)
        .ints(&[0])
        .ints(&[1001])
        .ints(&[0])
        .ints(&[2]));
    run(with_input("Slice", &[301, 130], Dtype::I32)
        .ints(&[-1, 128])
        .ints(&[-1000, 2])
        .ints(&[0, 1])
        .ints(&[-3, -5]));
    run(with_input("Slice", &[5, 6], Dtype::U8)
        .ints(&[3])
        .ints(&[3])
        .ints(&[1])
        .ints(&[1]));
    // Expand and Tile: reads far smaller than writes.
    run(with_input("Expand", &[1, 1031], Dtype::F32).ints(&[300, 1031]));
    run(with_input("Expand", &[3, 1], Dtype::I32).ints(&[2, 3, 5]));
    run(with_input("Expand", &[0, 1], Dtype::F64).ints(&[0, 4]));
    run(with_input("Tile", &[5, 7], Dtype::U8).ints(&[4000, 3]));
    run(with_input("Tile", &[1, 3, 1], Dtype::F16).ints(&[2, 1, 1]));
    // The views, as single ops: plain copies.
    run(x(&[3, 100003], Dtype::F32));
    run(x(&[7, 1, 13], Dtype::I8));
    run(x(&[], Dtype::U64));
    run(x(&[0], Dtype::F32));
    run(with_input("Reshape", &[2, 3, 4], Dtype::F16).ints(&[4, -1]));
    run(with_input("Flatten", &[5, 70001], Dtype::Bf16).int("axis", 1));
    run(with_input("Squeeze", &[1, 65537, 1], Dtype::I64).ints(&[0, 2]));
    run(with_input("Unsqueeze", &[3], Dtype::U32).ints(&[0]));
    entries.sort();
    entries.dedup();
    for e in ["gather_b1", "gather_b2", "gather_b4", "gather_b8"] {
        assert!(
            entries.iter().any(|x| x == e),
            "{e} not covered: {entries:?}"
        );
    }
}

#[test]
fn casts_in_place_equal_run_cpu() {
    let pairs = [
        (Dtype::F32, Dtype::F16),
        (Dtype::F64, Dtype::I32),
        (Dtype::Boolean, Dtype::F32),
        (Dtype::U8, Dtype::Bf16),
        (Dtype::F32, Dtype::F8e4m3fn),
        (Dtype::I64, Dtype::U16),
        (Dtype::F16, Dtype::Boolean),
        (Dtype::F32, Dtype::I4),
        (Dtype::U4, Dtype::F32),
        (Dtype::I2, Dtype::I64),
        (Dtype::F4e2m1, Dtype::U2),
    ];
    for (from, to) in pairs {
        for n in [0u64, 1, 7, 9, 70_001, 300_000] {
            let mut v = values(n as usize, from);
            if from == Dtype::F32 {
                // NaN and infinities too.
                for (i, x) in v.iter_mut().enumerate().step_by(97) {
                    *x = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e30][i % 4];
                }
            }
            let c = case("Cast")
                .input(&[n], from, &v)
                .int("to", dtype::to_onnx(to));
            let entries = check(&c);
            assert_eq!(entries.len(), 1);
        }
    }
    // CastLike takes the same kernels.
    check(
        &case("CastLike")
            .input(&[3, 1001], Dtype::F64, &values(3003, Dtype::F64))
            .input(&[1], Dtype::F16, &[0.0]),
    );
}

#[test]
fn written_values_in_place_equal_run_cpu() {
    // Range: floats (both stash types for f16) and integers, one element to many chunks.
    for (dt, (s, l, d)) in [
        (Dtype::F32, (0.5, 1e5, 0.7)),
        (Dtype::F64, (-3.0, 4e5, 1.25)),
        (Dtype::F16, (0.0, 3000.0, 0.1)),
        (Dtype::Bf16, (1.0, -2000.0, -0.03)),
        (Dtype::I64, (7.0, -100_000.0, -3.0)),
        (Dtype::I32, (0.0, 300_001.0, 1.0)),
        (Dtype::I16, (-5.0, 30000.0, 7.0)),
        (Dtype::F32, (1.0, 1.5, 1.0)),
        (Dtype::I32, (1.0, 1.0, 1.0)),
    ] {
        check(
            &case("Range")
                .constant(&[], dt, &[s])
                .constant(&[], dt, &[l])
                .constant(&[], dt, &[d]),
        );
    }
    // ConstantOfShape: default f32 zeros, large and empty.
    check(&case("ConstantOfShape").ints(&[301, 999]));
    check(&case("ConstantOfShape").ints(&[0, 5]));
    // EyeLike and Trilu, k on both sides, batched.
    check(&with_input("EyeLike", &[300, 1001], Dtype::I64).int("k", 5));
    check(&with_input("EyeLike", &[7, 3], Dtype::F16).int("k", -1));
    check(&with_input("EyeLike", &[0, 3], Dtype::F32));
    for (upper, k) in [(1, -3), (0, 2), (1, 0)] {
        check(
            &with_input("Trilu", &[3, 301, 257], Dtype::F32)
                .ints_shaped(&[], &[k])
                .int("upper", upper),
        );
    }
    check(&with_input("Trilu", &[2, 0, 5], Dtype::U8));
    // Constant: two `fill_bytes` launches (8000 bytes), the second ReadWrite.
    let ints: Vec<i64> = (0..1000).map(|i| i * 7 - 3000).collect();
    let entries = check(&case("Constant").int_list("value_ints", &ints));
    assert_eq!(entries, ["fill_bytes", "fill_bytes"]);
    check(&case("Shape").input(&[3, 0, 9], Dtype::F32, &[]));
}

#[test]
fn copies_past_the_read_limit_read_pieces() {
    // With reads of at most 4 KiB (64 KiB) the transposes cannot read their source span at
    // once: each row piece reads its own span or its elements one by one.
    for limit in [4096, 64 << 10] {
        for c in [
            with_input("Transpose", &[300, 701], Dtype::F32).int_list("perm", &[1, 0]),
            with_input("Transpose", &[33, 17, 9], Dtype::U8).int_list("perm", &[2, 1, 0]),
            with_input("Slice", &[401, 1030], Dtype::F16)
                .ints(&[400, 1029])
                .ints(&[-1000, -1000])
                .ints(&[0, 1])
                .ints(&[-1, -7]),
        ] {
            check_reading(&c, Some(limit));
        }
    }
}

#[test]
fn fast_float_casts_equal_the_general_conversion() {
    use crate::cast::{convert_bytes, convert_fast};
    // Every f16 and bf16 bit pattern; f32 patterns striding through every exponent and
    // mantissa, with the neighbours of each f16/bf16 rounding boundary (ties, NaN payloads,
    // subnormals, overflow).
    let halves: Vec<u8> = (0..=u16::MAX).flat_map(|b| b.to_le_bytes()).collect();
    let mut singles: Vec<u32> = (0..=u32::MAX).step_by(65_521).collect();
    for hi in (0..=u16::MAX as u32).step_by(7) {
        for lo in [
            0u32, 1, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001, 0xffff,
        ] {
            singles.push(hi << 16 | lo);
            singles.push((hi << 16 | lo).wrapping_add(0x1000));
        }
    }
    let singles: Vec<u8> = singles.iter().flat_map(|b| b.to_le_bytes()).collect();
    for (from, to, src) in [
        (Dtype::F32, Dtype::F16, &singles),
        (Dtype::F32, Dtype::Bf16, &singles),
        (Dtype::F16, Dtype::F32, &halves),
        (Dtype::Bf16, Dtype::F32, &halves),
    ] {
        let n = src.len() / dtype::size(from);
        let mut fast = vec![0u8; n * dtype::size(to)];
        let mut general = fast.clone();
        assert!(convert_fast(from, to, src, &mut fast));
        for mode in [0, 1] {
            convert_bytes(from, to, mode, src, &mut general);
            assert!(fast == general, "{from:?} -> {to:?} mode {mode}");
        }
    }
    assert!(!convert_fast(Dtype::F64, Dtype::F16, &[], &mut []));
}
