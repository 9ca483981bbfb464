//! Native unit tests of planning and the CPU kernels (the host-level tests run the wasm build).

use super::*;
use umd_sdk::{CpuBuffer, CpuCall};

pub fn cpu_target() -> Target {
    Target::cpu()
}

fn request(op: &str, inputs: Vec<(Vec<u64>, Dtype)>) -> PlanRequest {
    PlanRequest {
        op: op.into(),
        inputs: inputs
            .into_iter()
            .enumerate()
            .map(|(i, (s, d))| TensorDesc::new(format!("in{i}"), s, d))
            .collect(),
        attributes: vec![],
        target: cpu_target(),
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn run_plan(plan: &OpPlan, inputs: Vec<Vec<u8>>) -> Vec<u8> {
    let l = &plan.launches[0];
    let out_size = shape::byte_size(&plan.outputs[0].shape, plan.outputs[0].dtype).unwrap();
    let mut buffers: Vec<CpuBuffer> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, d)| CpuBuffer {
            binding: i as u32,
            size: d.len() as u64,
            data: d,
        })
        .collect();
    buffers.push(CpuBuffer {
        binding: buffers.len() as u32,
        size: out_size,
        data: vec![],
    });
    let call = CpuCall {
        module_id: l.module_id.clone(),
        entry_point: l.entry_point.clone(),
        grid: l.grid,
        block: l.block,
        params: l.params.clone(),
        relocations: l.relocations.clone(),
        buffers,
    };
    cpu::run(&call).unwrap().remove(0).data
}

#[test]
fn add_broadcasts_a_bias_row() {
    let plan = plan(&request(
        "add",
        vec![(vec![2, 3], Dtype::F32), (vec![3], Dtype::F32)],
    ))
    .unwrap();
    assert_eq!(plan.outputs[0].shape, vec![2, 3]);
    assert!(plan.launches[0].entry_point.ends_with("_bcast"));
    let out = run_plan(
        &plan,
        vec![
            f32_bytes(&[1., 2., 3., 4., 5., 6.]),
            f32_bytes(&[10., 20., 30.]),
        ],
    );
    assert_eq!(out, f32_bytes(&[11., 22., 33., 14., 25., 36.]));
}

#[test]
fn contiguous_div_and_relu() {
    let plan = plan(&request(
        "Div",
        vec![(vec![4], Dtype::F32), (vec![4], Dtype::F32)],
    ))
    .unwrap();
    assert_eq!(plan.launches[0].entry_point, "div_f32");
    let out = run_plan(
        &plan,
        vec![f32_bytes(&[1., -4., 9., 1.]), f32_bytes(&[2., 2., 3., 0.])],
    );
    assert_eq!(out, f32_bytes(&[0.5, -2., 3., f32::INFINITY]));
    let plan = super::plan(&request("RELU", vec![(vec![3], Dtype::F32)])).unwrap();
    assert_eq!(
        run_plan(&plan, vec![f32_bytes(&[-1., 0.5, f32::NAN])]),
        f32_bytes(&[0., 0.5, 0.])
    );
}

#[test]
fn integer_semantics_match_the_cuda_template() {
    let i = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let p = plan(&request(
        "Div",
        vec![(vec![3], Dtype::I32), (vec![3], Dtype::I32)],
    ))
    .unwrap();
    assert_eq!(
        run_plan(&p, vec![i(&[7, i32::MIN, 5]), i(&[2, -1, 0])]),
        i(&[3, i32::MIN, 0])
    );
}

#[test]
fn bad_requests_are_named() {
    let e = plan(&request(
        "Add",
        vec![(vec![2], Dtype::F32), (vec![3], Dtype::F32)],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::InvalidShape(_)));
    let e = plan(&request(
        "Add",
        vec![(vec![2], Dtype::F32), (vec![2], Dtype::F16)],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32 and f16")));
    let e = plan(&request(
        "Add",
        vec![(vec![2], Dtype::I64), (vec![2], Dtype::I64)],
    ))
    .unwrap_err();
    assert!(matches!(e, OpError::UnsupportedDtype(_)));
    assert!(matches!(
        plan(&request("Conv", vec![])).unwrap_err(),
        OpError::UnsupportedOp(_)
    ));
}

#[test]
fn cuda_module_names_every_entry_point_it_defines() {
    let src = Elementwise::kernel_source("elementwise_bf16", &cpu_target()).unwrap();
    for e in &src.entry_points {
        assert!(
            src.code.contains(&format!("void {e}(")),
            "{e} missing from source"
        );
    }
    assert_eq!(src.entry_points.len(), 10);
    assert!(Elementwise::kernel_source("elementwise_i64", &cpu_target()).is_err());
}
