//! The `elementwise` plugin: Add, Sub, Mul, Div (numpy broadcasting), Relu and Neg on f32, f16,
//! bf16 and i32.
//!
//! A model for plugin authors: [`plan`] does shape inference, picks a kernel (a contiguous one
//! when no input is broadcast, a strided one otherwise), computes the launch and packs the
//! parameters; [`cuda`] renders the CUDA C module for a dtype; [`cpu`] is the same kernel on the
//! CPU, reading the very parameter block the GPU kernel gets.

mod cpu;
mod cuda;

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, Launch, ModuleSource, OpError, OpInfo, OpPlan, PlanRequest,
    Plugin, PluginInfo, Target, TensorDesc, TestCase, dtype, launch,
};

/// Binary ops: (ONNX name, kernel name).
pub const BINARY: [(&str, &str); 4] = [
    ("Add", "add"),
    ("Sub", "sub"),
    ("Mul", "mul"),
    ("Div", "div"),
];
/// Unary ops: (ONNX name, kernel name).
pub const UNARY: [(&str, &str); 2] = [("Relu", "relu"), ("Neg", "neg")];
/// Dtypes every op supports.
pub const DTYPES: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::I32];
/// Threads per block of every launch.
const THREADS: u32 = 256;

pub struct Elementwise;

impl Plugin for Elementwise {
    fn describe() -> PluginInfo {
        let ops = BINARY
            .iter()
            .chain(UNARY.iter())
            .map(|(name, _)| OpInfo {
                name: name.to_string(),
                targets: vec!["cpu".into(), "cuda".into()],
                priority: 0,
            })
            .collect();
        PluginInfo {
            name: "elementwise".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ops,
        }
    }

    fn plan(request: &PlanRequest) -> Result<OpPlan, OpError> {
        plan(request)
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let dt = module_id
            .strip_prefix("elementwise_")
            .and_then(dtype::from_name)
            .filter(|d| DTYPES.contains(d))
            .ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`")))?;
        Ok(cuda::module(dt))
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        cpu::run(&call)
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        vec![
            umd_sdk::test_case(
                "bias broadcast",
                "Add",
                vec![
                    (t(&[2, 3], Dtype::F32), vec![1., 2., 3., 4., 5., 6.]),
                    (t(&[3], Dtype::F32), vec![10., 20., 30.]),
                ],
                vec![(Dtype::F32, vec![11., 22., 33., 14., 25., 36.])],
                0.0,
            ),
            umd_sdk::test_case(
                "integer division by zero is 0",
                "Div",
                vec![
                    (t(&[3], Dtype::I32), vec![7., -7., 5.]),
                    (t(&[3], Dtype::I32), vec![2., 2., 0.]),
                ],
                vec![(Dtype::I32, vec![3., -3., 0.])],
                0.0,
            ),
            umd_sdk::test_case(
                "relu in bf16",
                "Relu",
                vec![(t(&[4], Dtype::Bf16), vec![-1.5, 0.0, 2.5, -0.0])],
                vec![(Dtype::Bf16, vec![0.0, 0.0, 2.5, 0.0])],
                0.0,
            ),
        ]
    }
}

umd_sdk::export_plugin!(Elementwise);

/// Plans one elementwise op.
pub fn plan(request: &PlanRequest) -> Result<OpPlan, OpError> {
    if let Some(a) = request.attributes.first() {
        return Err(OpError::InvalidAttribute(format!(
            "{}: unknown attribute `{}` (it takes none)",
            request.op, a.name
        )));
    }
    let find = |table: &[(&'static str, &'static str)]| {
        table
            .iter()
            .find(|(name, _)| request.op.eq_ignore_ascii_case(name))
            .map(|(_, kernel)| *kernel)
    };
    if let Some(kernel) = find(&BINARY) {
        plan_binary(request, kernel)
    } else if let Some(kernel) = find(&UNARY) {
        plan_unary(request, kernel)
    } else {
        Err(umd_sdk::unsupported_op(request))
    }
}

fn check_inputs(request: &PlanRequest, count: usize) -> Result<Dtype, OpError> {
    if request.inputs.len() != count {
        return Err(OpError::shape(format!(
            "{} takes {count} input(s), got {}",
            request.op,
            request.inputs.len()
        )));
    }
    let dt = request.inputs[0].dtype;
    if let Some(other) = request.inputs.iter().find(|t| t.dtype != dt) {
        return Err(OpError::dtype(format!(
            "{} needs inputs of one dtype, got {} and {}",
            request.op,
            dtype::name(dt),
            dtype::name(other.dtype)
        )));
    }
    if !DTYPES.contains(&dt) {
        return Err(OpError::dtype(format!(
            "{} supports f32, f16, bf16 and i32, not {}",
            request.op,
            dtype::name(dt)
        )));
    }
    for t in &request.inputs {
        if t.shape.len() > MAX_RANK {
            return Err(OpError::shape(format!(
                "input `{}` has rank {}, the maximum is {MAX_RANK}",
                t.name,
                t.shape.len()
            )));
        }
    }
    Ok(dt)
}

fn make_launch(
    request: &PlanRequest,
    dt: Dtype,
    entry: String,
    n: u64,
    packer: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &request.target.limits;
    let (grid, block) = launch::linear(n, THREADS, limits)?;
    let (params, relocations) = packer.finish(limits.max_param_bytes)?;
    Ok(Launch {
        module_id: format!("elementwise_{}", dtype::name(dt)),
        entry_point: entry,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

fn plan_binary(request: &PlanRequest, kernel: &str) -> Result<OpPlan, OpError> {
    let dt = check_inputs(request, 2)?;
    let (a, b) = (&request.inputs[0], &request.inputs[1]);
    let out_shape = shape::broadcast(&a.shape, &b.shape)?;
    let n = shape::byte_size(&out_shape, dt).map(|_| shape::numel(&out_shape))??;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(2, Access::Write)
        .u64(n);
    let entry = if a.shape == out_shape && b.shape == out_shape {
        format!("{kernel}_{}", dtype::name(dt))
    } else {
        p.u32(out_shape.len() as u32)
            .u64_array(&shape::padded::<MAX_RANK>(&out_shape, 1)?)
            .u64_array(&shape::padded::<MAX_RANK>(
                &shape::broadcast_strides(&a.shape, &out_shape),
                0,
            )?)
            .u64_array(&shape::padded::<MAX_RANK>(
                &shape::broadcast_strides(&b.shape, &out_shape),
                0,
            )?);
        format!("{kernel}_{}_bcast", dtype::name(dt))
    };
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("out", out_shape, dt)],
        launches: vec![make_launch(request, dt, entry, n, p)?],
        workspace_bytes: 0,
    })
}

fn plan_unary(request: &PlanRequest, kernel: &str) -> Result<OpPlan, OpError> {
    let dt = check_inputs(request, 1)?;
    let x = &request.inputs[0];
    let n = shape::byte_size(&x.shape, dt).map(|_| shape::numel(&x.shape))??;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read).ptr(1, Access::Write).u64(n);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("out", x.shape.clone(), dt)],
        launches: vec![make_launch(
            request,
            dt,
            format!("{kernel}_{}", dtype::name(dt)),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

#[cfg(test)]
mod tests;
