//! The 16-bit and unsigned integer dtypes on exact bit patterns (values past 2^53, wrapping),
//! including the ONNX node test `test_top_k_uint64`.

use super::*;

fn raw(req: &PlanRequestExt, x: Vec<u8>) -> Vec<Vec<u8>> {
    let mut inputs = vec![x];
    for i in 1..req.slots() {
        if let Some(v) = req.value(i) {
            inputs.push(v.to_vec());
        }
    }
    umd_sdk::testing::run::<Reduce>(req, &inputs).unwrap().1
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn as_u64(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn as_i64(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn top_k_uint64_node_test() {
    let x: Vec<u64> = (0..12).collect();
    let req = with_ints(builder("TopK", &[3, 4], Dtype::U64), &[3], false)
        .attr("axis", int(1))
        .build(target());
    let outs = raw(&req, u64s(&x));
    assert_eq!(as_u64(&outs[0]), vec![3, 2, 1, 7, 6, 5, 11, 10, 9]);
    assert_eq!(as_i64(&outs[1]), vec![3, 2, 1, 3, 2, 1, 3, 2, 1]);
}

#[test]
fn u64_orders_values_past_2_pow_63() {
    let big = [5u64, u64::MAX, 1 << 63, (1 << 63) + 1];
    let max = builder("ReduceMax", &[4], Dtype::U64)
        .attr("keepdims", int(0))
        .build(target());
    assert_eq!(as_u64(&raw(&max, u64s(&big))[0]), vec![u64::MAX]);
    let min = builder("ReduceMin", &[4], Dtype::U64)
        .attr("keepdims", int(0))
        .build(target());
    assert_eq!(as_u64(&raw(&min, u64s(&big))[0]), vec![5]);
    let arg = builder("ArgMin", &[3], Dtype::U64).build(target());
    assert_eq!(as_i64(&raw(&arg, u64s(&big[1..]))[0]), vec![1]);
    let topk = with_ints(builder("TopK", &[4], Dtype::U64), &[2], false)
        .attr("largest", int(0))
        .build(target());
    let outs = raw(&topk, u64s(&big));
    assert_eq!(as_u64(&outs[0]), vec![5, 1 << 63]);
    assert_eq!(as_i64(&outs[1]), vec![0, 2]);
}

#[test]
fn unsigned_and_16_bit_sums_wrap() {
    let sum = |dt: Dtype, x: Vec<u8>| {
        let req = builder("ReduceSum", &[2], dt)
            .attr("keepdims", int(0))
            .build(target());
        raw(&req, x).remove(0)
    };
    let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(sum(Dtype::U32, u32s(&[u32::MAX, 2])), 1u32.to_le_bytes());
    assert_eq!(
        sum(Dtype::U64, u64s(&[u64::MAX, 3])),
        2u64.to_le_bytes().to_vec()
    );
    let i16s = |v: &[i16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(
        sum(Dtype::I16, i16s(&[32767, 1])),
        (-32768i16).to_le_bytes()
    );
    let u16s = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(sum(Dtype::U16, u16s(&[65535, 7])), 6u16.to_le_bytes());
    // the mean of 16-bit values is taken over their 32-bit sum (as the CUDA kernels do)
    let mean = builder("ReduceMean", &[2], Dtype::I16)
        .attr("keepdims", int(0))
        .build(target());
    assert_eq!(raw(&mean, i16s(&[30000, 30000]))[0], 30000i16.to_le_bytes());
    let cum = with_ints(builder("CumSum", &[3], Dtype::U64), &[0], true).build(target());
    assert_eq!(
        as_u64(&raw(&cum, u64s(&[1 << 62, 1 << 62, 1 << 63]))[0]),
        vec![1 << 62, 1 << 63, 0]
    );
}
