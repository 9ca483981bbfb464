//! The in-place (ABI 1.3) kernels on sizes that take several chunks and several block ranges:
//! the result must not depend on how the host splits a launch, and a range writes only its
//! own share of the output.

use super::*;
use umd_sdk::KernelCall;
use umd_sdk::kernel::{HeapMemory, Recorder, part};

/// Runs the one launch of `req` on `inputs` as `parts` block ranges, last first, on an output
/// prefilled with 0xAB; checks that each range writes only its share of the elements.
fn run_in_parts(req: &PlanRequestExt, inputs: &[Vec<u8>], parts: u64) -> Vec<u8> {
    let plan = Unary::plan_ext(req).unwrap();
    let l = &plan.launches[0];
    assert!(Unary::splittable(&l.module_id, &l.entry_point));
    let out = &plan.outputs[0];
    let n: u64 = out.shape.iter().product();
    let so = dtype::size(out.dtype) as u64;
    let mut bufs = inputs.to_vec();
    bufs.push(vec![0xAB; (n * so) as usize]);
    let y = bufs.len() as u32 - 1;
    let (mut mem, buffers) = HeapMemory::for_launch(l, bufs);
    let blocks = l.grid.volume();
    for p in (0..parts).rev() {
        let call = KernelCall::for_launch(l, &buffers, part(blocks, parts, p));
        let share = call.share(n);
        let mut spy = Recorder::new(&mut mem);
        Unary::run_kernel(&call, &mut spy).unwrap();
        let written: u64 = spy.writes().map(|t| t.range.end - t.range.start).sum();
        assert_eq!(written, (share.end - share.start) * so, "part {p}");
        for t in spy.writes() {
            let r = &t.range;
            assert_eq!(t.binding, y);
            assert!(
                r.start >= share.start * so && r.end <= share.end * so,
                "part {p}: {r:?}"
            );
        }
    }
    mem.contents(y).unwrap().to_vec()
}

#[test]
fn every_split_gives_the_same_bytes() {
    // 100_003 elements: several 64 KiB chunks, an odd tail, ranges not chunk-aligned.
    let n = 100_003u64;
    let x: Vec<f64> = (0..n).map(|i| (i % 2001) as f64 * 0.01 - 10.0).collect();
    let clip = |dt| {
        PlanRequestExt::builder("Clip")
            .input(desc("x", &[n], dt))
            .input(desc("min", &[], dt))
            .absent()
            .build(Target::cpu())
    };
    let cases: Vec<(PlanRequestExt, Vec<Vec<u8>>)> = vec![
        (
            request("Relu", &[n], Dtype::F32, &[]),
            vec![enc(Dtype::F32, &x)],
        ),
        (
            request("Sigmoid", &[7, n], Dtype::F16, &[]),
            vec![enc(Dtype::F16, &x.repeat(7))],
        ),
        (
            request("IsNaN", &[n], Dtype::F64, &[]),
            vec![enc(Dtype::F64, &x)],
        ),
        (
            request("Neg", &[n], Dtype::I64, &[]),
            vec![enc(
                Dtype::I64,
                &x.iter().map(|v| v.round()).collect::<Vec<_>>(),
            )],
        ),
        (
            clip(Dtype::F32),
            vec![enc(Dtype::F32, &x), enc(Dtype::F32, &[-1.5])],
        ),
        (
            request("Exp", &[1], Dtype::F32, &[]),
            vec![enc(Dtype::F32, &[1.0])],
        ),
    ];
    for (req, inputs) in &cases {
        let (_, want) = testing::run::<Unary>(req, inputs).unwrap();
        let whole = run_in_parts(req, inputs, 1);
        assert_eq!(whole, want[0], "{}", req.op);
        for parts in [2, 3, 7] {
            assert_eq!(
                run_in_parts(req, inputs, parts),
                whole,
                "{} in {parts} parts",
                req.op
            );
        }
    }
}
