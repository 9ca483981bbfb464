//! Conv and the pools in place (ABI 1.3): split into block ranges, they give the bytes
//! `run-cpu` gives on the whole tensors, whatever the split, and each range writes only its
//! own output planes.

use super::*;
use umd_sdk::kernel::{HeapMemory, Recorder, part};
use umd_sdk::{CpuBuffer, CpuCall, KernelCall, Plugin};

/// Runs the one launch of `req` as `parts` block ranges, last first, on outputs prefilled
/// with 0xAB; checks the ranges write disjoint bytes that together cover every output (a conv
/// shares planes, or on the matrix unit tiles of positions; pools share planes).
pub(super) fn run_in_parts(req: &PlanRequestExt, inputs: &[Vec<u8>], parts: u64) -> Vec<Vec<u8>> {
    run_named(req, inputs, parts, None).0
}

/// Test data for inputs of `shapes`, encoded; input `k` from seed `seed + k`.
fn encoded(shapes: &[(&[u64], Dtype)], seed: u64) -> Vec<Vec<u8>> {
    (shapes.iter().zip(0..))
        .map(|((s, dt), k)| {
            let v = data(s.iter().product::<u64>() as usize, seed + k, *dt);
            dtype::encode(*dt, &v).unwrap()
        })
        .collect()
}

/// Bytes the ranges of a launch read: copied into the kernel (`x`: binding 0, `w`: binding
/// 1), and read for the matrix unit (in place, in a host).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Reads {
    x: u64,
    x_unit: u64,
    w: u64,
    w_unit: u64,
}

/// [`run_in_parts`] with the weights (binding 1) named resident under `w_name`; also returns
/// how many bytes of the input and the weights the ranges read.
fn run_named(
    req: &PlanRequestExt,
    inputs: &[Vec<u8>],
    parts: u64,
    w_name: Option<u64>,
) -> (Vec<Vec<u8>>, Reads) {
    let plan = Conv::plan_ext(req).unwrap();
    let l = &plan.launches[0];
    assert!(Conv::splittable(&l.module_id, &l.entry_point));
    let mut bufs = inputs.to_vec();
    let mut outputs = Vec::new();
    for out in &plan.outputs {
        let bytes = out.shape.iter().product::<u64>() * dtype::size(out.dtype) as u64;
        outputs.push((bufs.len() as u32, bytes, Vec::new()));
        bufs.push(vec![0xAB; bytes as usize]);
    }
    let (mut mem, buffers) = HeapMemory::for_launch(l, bufs);
    if let Some(name) = w_name {
        mem.name_resident(1, name);
    }
    let mut reads = Reads::default();
    let blocks = l.grid.volume();
    for p in (0..parts).rev() {
        let call = KernelCall::for_launch(l, &buffers, part(blocks, parts, p));
        let mut spy = Recorder::new(&mut mem);
        Conv::run_kernel(&call, &mut spy).unwrap();
        reads.x += spy.bytes_read(0);
        reads.x_unit += spy.bytes_read_by_unit(0);
        reads.w += spy.bytes_read(1);
        reads.w_unit += spy.bytes_read_by_unit(1);
        for (y, _, written) in &mut outputs {
            written.extend(
                spy.writes()
                    .filter(|w| w.binding == *y)
                    .map(|w| w.range.clone()),
            );
        }
    }
    for (y, bytes, written) in &mut outputs {
        written.sort_by_key(|r| r.start);
        let mut end = 0;
        for r in written.iter() {
            assert!(
                r.start >= end,
                "binding {y}: bytes {r:?} written twice in {parts} parts"
            );
            end = r.end;
        }
        let total: u64 = written.iter().map(|r| r.end - r.start).sum();
        assert_eq!(
            total, *bytes,
            "binding {y}: every byte written once in {parts} parts"
        );
    }
    let outs = outputs
        .iter()
        .map(|&(y, _, _)| mem.contents(y).unwrap().to_vec())
        .collect();
    (outs, reads)
}

/// The output bytes of `run-cpu` on the whole tensors.
fn run_cpu_whole(req: &PlanRequestExt, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let plan = Conv::plan_ext(req).unwrap();
    let l = &plan.launches[0];
    let mut buffers: Vec<CpuBuffer> = inputs
        .iter()
        .zip(0..)
        .map(|(d, binding)| CpuBuffer {
            binding,
            size: d.len() as u64,
            data: d.clone(),
        })
        .collect();
    for (out, binding) in plan.outputs.iter().zip(inputs.len() as u32..) {
        buffers.push(CpuBuffer {
            binding,
            size: out.shape.iter().product::<u64>() * dtype::size(out.dtype) as u64,
            data: Vec::new(),
        });
    }
    let w = Conv::run_cpu(CpuCall {
        module_id: l.module_id.clone(),
        entry_point: l.entry_point.clone(),
        grid: l.grid,
        block: l.block,
        params: l.params.clone(),
        relocations: l.relocations.clone(),
        buffers,
    })
    .unwrap();
    let mut w = w;
    w.sort_by_key(|w| w.binding);
    w.into_iter().map(|w| w.data).collect()
}

/// (x shape, w shape, bias, group, dtype)
type Case<'a> = (&'a [u64], &'a [u64], bool, i64, Dtype);

#[test]
fn conv_splits_give_the_bytes_of_the_whole() {
    // (x, w, bias, group, dtype): grouped with 6 channels a group (im2col + GEMM), depthwise
    // (direct), a 1-D conv, f16 and f64; on the matrix unit, tiles of output positions
    // (outputs of 323 and 625 positions: two and four tiles an image; and no image at all)
    let cases: [Case; 8] = [
        (&[0, 4, 17, 19], &[6, 2, 3, 3], true, 2, Dtype::F32),
        (&[2, 4, 9, 11], &[12, 2, 3, 3], true, 2, Dtype::F32),
        (&[2, 4, 17, 19], &[6, 2, 3, 3], true, 2, Dtype::F32),
        (&[1, 3, 23, 23], &[5, 3, 1, 1], true, 1, Dtype::Bf16),
        (&[1, 6, 10, 7], &[6, 1, 3, 2], true, 6, Dtype::F32),
        (&[3, 5, 40], &[7, 5, 4], false, 1, Dtype::F16),
        (&[1, 3, 6, 6], &[9, 3, 1, 1], true, 1, Dtype::F64),
        (&[2, 8, 5, 5], &[16, 2, 3, 3], false, 4, Dtype::Bf16),
    ];
    for (i, &(x, w, bias, group, dt)) in cases.iter().enumerate() {
        let m = w[0];
        let mut shapes = vec![(x, dt), (w, dt)];
        let b = [m];
        if bias {
            shapes.push((&b, dt));
        }
        let req = request(
            "Conv",
            &shapes,
            &[
                ("group", int(group)),
                ("pads", ints(&vec![1; 2 * (x.len() - 2)])),
            ],
        );
        let inputs = encoded(&shapes, 7 * i as u64);
        let whole = run_cpu_whole(&req, &inputs);
        for parts in [1, 2, 3, 7] {
            assert_eq!(
                run_in_parts(&req, &inputs, parts),
                whole,
                "case {i} in {parts} parts"
            );
        }
        // weights named resident (a compiled model's): read on the first launch, kept by the
        // instance, not read again; the same bytes. f32 weights of an im2col conv are never
        // kept: the matrix unit reads them from their buffer on every launch (ABI 1.9; here
        // the SDK's stand-in for it reads them through the launch's memory)
        let name = 7000 + i as u64;
        let empty = x[0] == 0;
        let bound = dt == Dtype::F32 && (w[0] / group as u64) as usize >= umd_sdk::gemm::MR;
        // (a split reads the ranges it needs once: another split may read its own)
        let runs = [
            (3, Some(true)),
            (3, Some(false)),
            (1, None),
            (1, Some(false)),
        ];
        for (run, (parts, first)) in runs.into_iter().enumerate() {
            let (bytes, read) = run_named(&req, &inputs, parts, Some(name));
            assert_eq!(bytes, whole, "case {i}, resident weights, run {run}");
            if let Some(first) = first {
                assert_eq!(
                    (read.w > 0, read.w_unit > 0),
                    (first && !bound && !empty, bound && !empty),
                    "case {i}, run {run}: weights read ({read:?})"
                );
            }
        }
    }
}

#[test]
fn conv_transpose_splits_give_the_bytes_of_the_whole() {
    // (x, w = [C, M/group, k..], bias, group, dtype), strides 2: overlapping scatter
    let cases: [Case; 4] = [
        (&[2, 4, 5, 6], &[4, 3, 3, 3], true, 2, Dtype::F32),
        (&[1, 6, 7, 4], &[6, 1, 2, 3], false, 6, Dtype::F32),
        (&[2, 3, 30], &[3, 9, 4], true, 1, Dtype::F16),
        (&[1, 2, 4, 4], &[2, 5, 3, 3], true, 1, Dtype::F64),
    ];
    for (i, &(x, w, bias, group, dt)) in cases.iter().enumerate() {
        let b = [w[1] * group as u64];
        let mut shapes = vec![(x, dt), (w, dt)];
        if bias {
            shapes.push((&b, dt));
        }
        let strides = ints(&vec![2; x.len() - 2]);
        let req = request(
            "ConvTranspose",
            &shapes,
            &[("group", int(group)), ("strides", strides)],
        );
        let inputs = encoded(&shapes, 5 * i as u64);
        let whole = run_cpu_whole(&req, &inputs);
        for parts in [1, 2, 3, 7] {
            assert_eq!(
                run_in_parts(&req, &inputs, parts),
                whole,
                "case {i} in {parts} parts"
            );
        }
    }
}

#[test]
fn pool_splits_give_the_bytes_of_the_whole() {
    let x: &[u64] = &[2, 5, 9, 8];
    let window = [
        ("kernel_shape", ints(&[3, 2])),
        ("pads", ints(&[1, 0, 1, 1])),
    ];
    let cases = [
        ("MaxPool", Dtype::F32, vec![("storage_order", int(1))]),
        ("MaxPool", Dtype::U8, vec![]),
        // without Indices: the row-by-row kernel
        ("MaxPool ", Dtype::F32, vec![]),
        ("MaxPool ", Dtype::I8, vec![]),
        (
            "AveragePool",
            Dtype::F16,
            vec![("count_include_pad", int(1))],
        ),
        ("LpPool", Dtype::F64, vec![("p", int(3))]),
    ];
    for (i, (op, dt, extra)) in cases.into_iter().enumerate() {
        let attrs: Vec<_> = window.iter().cloned().chain(extra).collect();
        let mut req = request(op.trim(), &[(x, dt)], &attrs);
        if op == "MaxPool" {
            req.outputs_wanted = vec![true, true];
        }
        let v = data(x.iter().product::<u64>() as usize, i as u64, dt);
        let inputs = vec![dtype::encode(dt, &v).unwrap()];
        let whole = run_cpu_whole(&req, &inputs);
        for parts in [1, 2, 3, 7] {
            assert_eq!(
                run_in_parts(&req, &inputs, parts),
                whole,
                "{op} {dt:?} in {parts} parts"
            );
        }
    }
}

#[test]
fn every_float_entry_splits() {
    for e in [
        "conv_f32",
        "conv_bias_f16",
        "convt_f64",
        "convt_bias_bf16",
        "maxpool_u8",
        "maxpool_idx_f32",
        "avgpool_f64",
        "lppool_bf16",
    ] {
        assert!(Conv::splittable("conv_f32", e), "{e}");
    }
    for e in ["avgpool_i8", "conv_i8", "convt_u8", "conv"] {
        assert!(!Conv::splittable("conv_f32", e), "{e}");
    }
}

#[test]
fn pointwise_f32_convs_read_their_input_in_place() {
    // 1×1, stride 1, no padding, f32, on the matrix unit (at least MR output channels a
    // group): neither the input planes nor the weights are copied into the kernel — the
    // matrix unit reads both where they lie — whole or split, small outputs (planes) or large
    // (tiles); padding, a 3×3 kernel or f16 copy the input as before; the bytes are the same
    // (x, w, group, pads, dtype, whether the input stays in place)
    type Case<'a> = (&'a [u64], &'a [u64], i64, &'a [i64], Dtype, bool);
    let (f32, none, pad) = (Dtype::F32, &[0i64; 4][..], &[1i64, 0, 1, 0][..]);
    let cases: [Case; 6] = [
        (&[2, 8, 5, 7], &[6, 8, 1, 1], 1, none, f32, true),
        (&[1, 6, 20, 30], &[8, 3, 1, 1], 2, none, f32, true),
        (&[1, 4, 300], &[5, 4, 1], 1, &[0, 0], f32, true),
        (&[2, 8, 5, 7], &[6, 8, 1, 1], 1, pad, f32, false),
        (&[1, 6, 20, 30], &[8, 6, 3, 3], 1, &[1; 4], f32, false),
        (&[2, 8, 5, 7], &[6, 8, 1, 1], 1, none, Dtype::F16, false),
    ];
    for (i, &(x, w, group, pads, dt, in_place)) in cases.iter().enumerate() {
        let shapes = vec![(x, dt), (w, dt)];
        let req = request(
            "Conv",
            &shapes,
            &[("group", int(group)), ("pads", ints(pads))],
        );
        let inputs = encoded(&shapes, 5 * i as u64);
        let whole = run_cpu_whole(&req, &inputs);
        for parts in [1, 2, 5] {
            let (bytes, read) = run_named(&req, &inputs, parts, None);
            assert_eq!(bytes, whole, "case {i} in {parts} parts");
            assert_eq!(
                (read.x == 0, read.x_unit > 0),
                (in_place, in_place),
                "case {i} in {parts} parts: {read:?}"
            );
        }
    }
}
