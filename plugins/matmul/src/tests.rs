//! Native unit tests of MatMul planning and its CPU kernel.

use super::*;
use umd_sdk::CpuBuffer;

fn target() -> Target {
    Target::cpu()
}

fn req(a: Vec<u64>, b: Vec<u64>) -> PlanRequest {
    PlanRequest {
        op: "matmul".into(),
        inputs: vec![
            TensorDesc::new("a", a, Dtype::F32),
            TensorDesc::new("b", b, Dtype::F32),
        ],
        attributes: vec![],
        target: target(),
    }
}

#[test]
fn shapes_follow_numpy_matmul() {
    let out = |a, b| plan(&req(a, b)).map(|p| p.outputs[0].shape.clone());
    assert_eq!(out(vec![2, 3], vec![3, 4]).unwrap(), vec![2, 4]);
    assert_eq!(
        out(vec![5, 1, 2, 3], vec![4, 3, 7]).unwrap(),
        vec![5, 4, 2, 7]
    );
    assert_eq!(out(vec![3], vec![3, 4]).unwrap(), vec![4]);
    assert_eq!(out(vec![2, 3], vec![3]).unwrap(), vec![2]);
    assert_eq!(out(vec![3], vec![3]).unwrap(), Vec::<u64>::new());
    let e = out(vec![2, 3], vec![4, 5]).unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(m) if m.contains("K=3") && m.contains("K=4")));
    assert!(out(vec![2, 2, 3], vec![3, 3, 4]).is_err(), "batch 2 vs 3");
}

#[test]
fn cpu_kernel_multiplies_with_batch_broadcast() {
    // a: [2, 1, 2] (two batches), b: [2, 1] shared: out [2, 1, 1]
    let p = plan(&req(vec![2, 1, 2], vec![2, 1])).unwrap();
    let l = &p.launches[0];
    assert_eq!((l.grid.z, l.block.x), (2, TILE));
    let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let call = CpuCall {
        module_id: l.module_id.clone(),
        entry_point: l.entry_point.clone(),
        grid: l.grid,
        block: l.block,
        params: l.params.clone(),
        relocations: l.relocations.clone(),
        buffers: vec![
            CpuBuffer {
                binding: 0,
                size: 16,
                data: f(&[1., 2., 3., 4.]),
            },
            CpuBuffer {
                binding: 1,
                size: 8,
                data: f(&[10., 100.]),
            },
            CpuBuffer {
                binding: 2,
                size: 8,
                data: vec![],
            },
        ],
    };
    let out = MatMul::run_cpu(call).unwrap();
    assert_eq!(out[0].data, f(&[210., 430.]));
}

#[test]
fn cuda_source_defines_its_entry_point() {
    let src = MatMul::kernel_source("matmul_f16", &target()).unwrap();
    assert!(src.code.contains("void matmul_f16("));
    assert!(src.code.contains("umd_h2f(a["));
}

#[test]
fn cuda_sources_are_produced_for_every_dtype() {
    use umd_sdk::{PlanRequestExt, TensorDesc};
    for dt in DTYPES {
        let req = PlanRequestExt::builder("MatMul")
            .input(TensorDesc::new("a", vec![4, 8], dt))
            .input(TensorDesc::new("b", vec![8, 3], dt))
            .build(Target::cpu());
        let srcs = umd_sdk::testing::cuda_sources::<MatMul>(&req).unwrap();
        assert_eq!(srcs.len(), 1);
    }
}
