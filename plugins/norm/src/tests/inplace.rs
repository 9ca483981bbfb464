//! The in-place row kernels (`cpu::inplace`): odd row counts, rows larger than one chunk, many
//! rows per chunk, empty tensors, which launches split, the bytes each block range touches, and
//! the `run-cpu` path giving the same bits.

use super::reference::*;
use super::*;
use umd_sdk::kernel::{CHUNK_BYTES, HeapMemory, Recorder, part};

/// Softmax family, LayerNorm (with its statistics) and RMSNorm over rows of `[rows, len]`.
fn check_rows(rows: u64, len: u64, dts: &[Dtype]) {
    let shape = [rows, len];
    let (r, l) = (rows as usize, len as usize);
    for &dt in dts {
        let x = round(dt, &data(r * l, 3));
        for (op, mode) in [("Softmax", 0), ("LogSoftmax", 1), ("Hardmax", 2)] {
            let got = Req::new(op, &shape, dt)
                .run(std::slice::from_ref(&x))
                .unwrap();
            let want = softmax_ref(&x, (r, l, 1), mode);
            assert_close(&got[0].1, &want, dt, &format!("{op} {dt:?} {shape:?}"));
        }
        let w = round(dt, &data(l, 4));
        let b = round(dt, &data(l, 5));
        let got = Req::new("LayerNormalization", &shape, dt)
            .input(&[len], dt)
            .input(&[len], dt)
            .outputs(3)
            .run(&[x.clone(), w.clone(), b.clone()])
            .unwrap();
        let mut want = layer_norm_ref(&x, l, &w, Some(&b), 1e-5);
        if l == 0 {
            // rows of no elements: mean 0/0 and its invstd are NaN
            want[1] = vec![f64::NAN; r];
            want[2] = vec![f64::NAN; r];
        }
        for (k, what) in ["Y", "Mean", "InvStdDev"].iter().enumerate() {
            let (a, rel) = tol(dt);
            // Mean and InvStdDev are f32 whatever the data's dtype
            let sdt = if k == 0 { dt } else { Dtype::F32 };
            let want = if k == 0 {
                want[0].clone()
            } else {
                round(sdt, &want[k])
            };
            for (i, (g, w)) in got[k].1.iter().zip(&want).enumerate() {
                let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= a + rel * w.abs();
                assert!(ok, "LayerNorm {what} {dt:?} {shape:?} [{i}]: {g} vs {w}");
            }
            assert_eq!(got[k].1.len(), want.len(), "LayerNorm {what} length");
        }
        let got = Req::new("RMSNormalization", &shape, dt)
            .input(&[len], dt)
            .run(&[x.clone(), w.clone()])
            .unwrap();
        let want: Vec<f64> = x
            .chunks(l.max(1))
            .flat_map(|row| {
                let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / l as f64 + 1e-5).sqrt();
                row.iter().zip(&w).map(move |(v, w)| v * inv * w)
            })
            .collect();
        assert_close(&got[0].1, &want, dt, &format!("RMSNorm {dt:?} {shape:?}"));
    }
}

#[test]
fn odd_row_counts_split_into_uneven_ranges() {
    for rows in [1, 2, 3, 5, 7, 13, 31] {
        check_rows(rows, 9, &ALL);
    }
}

#[test]
fn rows_larger_than_one_chunk() {
    // 70 000 f32 (280 000 bytes) per row: more than CHUNK_BYTES
    let len = 70_000u64;
    assert!(len * 4 > CHUNK_BYTES as u64);
    check_rows(5, len, &[Dtype::F32]);
    check_rows(2, 40_000, &[Dtype::F64]);
}

#[test]
fn many_rows_per_chunk_and_several_chunks_per_range() {
    // 2 000 rows of 100 f32: 655 rows a chunk, a few chunks in each of the three ranges
    check_rows(2_000, 100, &[Dtype::F32, Dtype::F16]);
}

#[test]
fn empty_tensors() {
    for (rows, len) in [(0, 5), (4, 0), (0, 0)] {
        check_rows(rows, len, &ALL);
    }
}

#[test]
fn row_wise_launches_split_and_others_do_not() {
    use crate::cpu::inplace::splittable;
    for dt in ["f32", "f16", "bf16", "f64"] {
        assert!(splittable(&format!("softmax_{dt}_rows")));
        assert!(!splittable(&format!("softmax_{dt}_cols")));
        assert!(splittable(&format!("normalize_{dt}_f32")));
        assert!(splittable(&format!("batchnorm_{dt}")));
        assert!(splittable(&format!("lrn_{dt}")));
    }
    assert!(!splittable("softmax"));
    assert!(!splittable("nonsense_f32_rows"));
}

/// Runs the single launch of `req` as `parts` block ranges, each through a [`Recorder`]; checks
/// that range `p` writes exactly its share of the rows of every output (`row_bytes[k]` per row
/// of output `k`) and reads `x` only inside its rows, in reads of at most a chunk or one row.
fn check_touches(req: &Req, values: &[Vec<f64>], rows: u64, row_bytes: u64, parts: u64) {
    let plan = req.plan().unwrap();
    assert_eq!(plan.launches.len(), 1);
    let l = &plan.launches[0];
    assert!(
        Norm::splittable(&l.module_id, &l.entry_point),
        "{}",
        l.entry_point
    );
    let present: Vec<_> = req.inputs.iter().flatten().collect();
    let mut contents: Vec<Vec<u8>> = present
        .iter()
        .zip(values)
        .map(|((_, dt), v)| dtype::encode(*dt, v).unwrap())
        .collect();
    for o in &plan.outputs {
        contents.push(vec![
            0;
            umd_sdk::shape::byte_size(&o.shape, o.dtype).unwrap()
                as usize
        ]);
    }
    let (mut mem, sizes) = HeapMemory::for_launch(l, contents);
    let blocks = l.grid.volume();
    let y = present.len() as u32;
    for p in 0..parts {
        let range = part(blocks, parts, p);
        let call = KernelCall::for_launch(l, &sizes, range);
        let share = call.share(rows);
        let mut rec = Recorder::new(&mut mem);
        Norm::run_kernel(&call, &mut rec).unwrap();
        let mut written = 0;
        for t in rec.writes() {
            if t.binding == y {
                assert!(t.range.start >= share.start * row_bytes, "{t:?} {share:?}");
                assert!(t.range.end <= share.end * row_bytes, "{t:?} {share:?}");
                written += t.range.end - t.range.start;
            }
        }
        assert_eq!(written, (share.end - share.start) * row_bytes, "part {p}");
        for t in rec.log.iter().filter(|t| !t.write && t.binding == 0) {
            assert!(t.range.start >= share.start * row_bytes, "{t:?}");
            assert!(t.range.end <= share.end * row_bytes, "{t:?}");
            let len = t.range.end - t.range.start;
            assert!(
                len <= (CHUNK_BYTES as u64).max(row_bytes),
                "read of {len} bytes"
            );
        }
    }
}

#[test]
fn each_block_range_touches_only_its_rows() {
    let (rows, len) = (1_000u64, 300u64);
    let x = data((rows * len) as usize, 9);
    for parts in [2, 3, 7] {
        let softmax = Req::new("Softmax", &[rows, len], Dtype::F32);
        check_touches(&softmax, std::slice::from_ref(&x), rows, len * 4, parts);
        let ln = Req::new("LayerNormalization", &[rows, len], Dtype::F16)
            .input(&[len], Dtype::F16)
            .outputs(3);
        check_touches(
            &ln,
            &[x.clone(), data(len as usize, 1)],
            rows,
            len * 2,
            parts,
        );
    }
}

/// The outputs of `req` through `run-cpu` (whole buffers) and through the in-place kernels.
pub(super) fn both_paths(req: &Req, values: &[Vec<f64>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let plan = req.plan().unwrap();
    let present: Vec<_> = req.inputs.iter().flatten().collect();
    let bytes: Vec<Vec<u8>> = present
        .iter()
        .zip(values)
        .map(|((_, dt), v)| dtype::encode(*dt, v).unwrap())
        .collect();
    let whole = testing::execute(&plan, &bytes, Norm::run_cpu).unwrap();
    let split = testing::execute_kernels::<Norm>(&plan, &bytes).unwrap();
    (whole, split)
}

#[test]
fn run_cpu_and_split_ranges_give_the_same_bits() {
    let shape = [37u64, 50];
    for dt in ALL {
        let x = data(37 * 50, 11);
        for op in ["Softmax", "LogSoftmax", "Hardmax", "LpNormalization"] {
            let (a, b) = both_paths(&Req::new(op, &shape, dt), std::slice::from_ref(&x));
            assert_eq!(a, b, "{op} {dt:?}");
        }
        let w = data(50, 12);
        let req = Req::new("LayerNormalization", &shape, dt)
            .input(&[50], dt)
            .input(&[50], dt)
            .outputs(3);
        let (a, b) = both_paths(&req, &[x.clone(), w.clone(), w.clone()]);
        assert_eq!(a, b, "LayerNorm {dt:?}");
        let req = Req::new("BatchNormalization", &[37, 5, 10], dt)
            .input(&[5], dt)
            .input(&[5], dt)
            .input(&[5], dt)
            .input(&[5], dt)
            .attr("training_mode", A::Int(1))
            .outputs(3);
        let p = positive(5, 13);
        let (a, b) = both_paths(
            &req,
            &[
                x.clone(),
                w[..5].to_vec(),
                w[..5].to_vec(),
                w[..5].to_vec(),
                p,
            ],
        );
        assert_eq!(a, b, "BatchNorm training {dt:?}");
        // LRN: 37 images of 10 channels, windows of 5 channels reaching across pieces
        let req = Req::new("LRN", &[37, 10, 5], dt).attr("size", A::Int(5));
        let (a, b) = both_paths(&req, std::slice::from_ref(&x));
        assert_eq!(a, b, "LRN {dt:?}");
    }
}
