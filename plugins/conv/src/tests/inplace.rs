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

/// [`run_in_parts`] with the weights (binding 1) named resident under `w_name`; also returns
/// how many bytes of them the ranges read.
fn run_named(
    req: &PlanRequestExt,
    inputs: &[Vec<u8>],
    parts: u64,
    w_name: Option<u64>,
) -> (Vec<Vec<u8>>, u64) {
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
    let mut w_read = 0;
    let blocks = l.grid.volume();
    for p in (0..parts).rev() {
        let call = KernelCall::for_launch(l, &buffers, part(blocks, parts, p));
        let mut spy = Recorder::new(&mut mem);
        Conv::run_kernel(&call, &mut spy).unwrap();
        w_read += spy.bytes_read(1);
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
    (outs, w_read)
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
        let inputs: Vec<Vec<u8>> = shapes
            .iter()
            .zip(0..)
            .map(|((s, dt), k)| {
                let v = data(s.iter().product::<u64>() as usize, 7 * i as u64 + k, *dt);
                dtype::encode(*dt, &v).unwrap()
            })
            .collect();
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
                    read > 0,
                    (first || bound) && !empty,
                    "case {i}, run {run}: weights read ({read} bytes)"
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
        let inputs: Vec<Vec<u8>> = shapes
            .iter()
            .zip(0..)
            .map(|((s, dt), k)| {
                let v = data(s.iter().product::<u64>() as usize, 5 * i as u64 + k, *dt);
                dtype::encode(*dt, &v).unwrap()
            })
            .collect();
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
