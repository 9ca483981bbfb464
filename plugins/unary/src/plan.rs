//! Planning: validate the request against the op's row of the table, pick the kernel and pack
//! its parameters. Every op is one contiguous launch over `n` elements, output shape = input
//! shape. Parameter layouts:
//!
//! - every op but Clip: `x, out, n: u64, a: f64, b: f64` (`a`, `b`: the row's attributes);
//! - Clip: `x, min, max, out, n: u64, flags: u32, min_value: f64, max_value: f64`, where an
//!   absent min/max input is bound to `x` and ignored (see the flag bits in [`crate::cpu`]).

use umd_sdk::params::ParamPacker;
use umd_sdk::{
    Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, launch, shape,
};

use crate::cpu::{HI_PTR, HI_VAL, LO_PTR, LO_VAL};
use crate::ops::{self, Class, OpDef};

/// Threads per block of every launch.
const THREADS: u32 = 256;
/// Opset-1 attribute of many of these ops; it never changed a result.
const LEGACY: &str = "consumed_inputs";
/// Clip-6's default bounds (the float32 range).
const CLIP6_DEFAULT: f64 = f32::MAX as f64;

/// Plans one unary op.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let Some(first) = ops::all().find(|d| req.op.eq_ignore_ascii_case(d.onnx)) else {
        return Err(umd_sdk::unsupported_op_ext(req));
    };
    if req.outputs(1) != 1 {
        return Err(OpError::shape(format!(
            "{} has one output, {} were asked for",
            first.onnx,
            req.outputs(1)
        )));
    }
    if first.class == Class::Clip {
        return plan_clip(req);
    }
    let def = if first.onnx == "Gelu" {
        attr::only(&req.attributes, &["approximate", LEGACY])?;
        match attr::text_or(&req.attributes, "approximate", "none")?.as_str() {
            "none" => first,
            "tanh" => ops::by_kernel("gelu_tanh").expect("the table has gelu_tanh"),
            other => {
                return Err(OpError::InvalidAttribute(format!(
                    "Gelu: attribute `approximate` must be \"none\" or \"tanh\", got {other:?}"
                )));
            }
        }
    } else {
        let mut names: Vec<&str> = first.attrs.iter().map(|(n, _)| *n).collect();
        names.push(LEGACY);
        attr::only(&req.attributes, &names)?;
        first
    };
    if req.slots() != 1 {
        return Err(OpError::shape(format!(
            "{} takes 1 input, got {}",
            def.onnx,
            req.slots()
        )));
    }
    let x = req.required(0)?;
    check_dtype(def, x.dtype)?;
    let mut values = [0.0f64; 2];
    for (v, (name, default)) in values.iter_mut().zip(def.attrs) {
        *v = attr::float_or(&req.attributes, name, *default)?;
    }
    let out_dt = def.class.output(x.dtype);
    let n = count(x, out_dt)?;
    let mut p = ParamPacker::new();
    p.ptr(binding(req, 0)?, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .f64(values[0])
        .f64(values[1]);
    finish(req, def, x, out_dt, n, p)
}

fn binding(req: &PlanRequestExt, i: usize) -> Result<u32, OpError> {
    req.binding(i)
        .ok_or_else(|| OpError::shape(format!("{}: input {i} is required", req.op)))
}

fn check_dtype(def: &OpDef, dt: Dtype) -> Result<(), OpError> {
    let served = def.class.dtypes();
    if served.contains(&dt) {
        return Ok(());
    }
    let names: Vec<&str> = served.iter().map(|d| dtype::name(*d)).collect();
    Err(OpError::dtype(format!(
        "{} serves {}, not {}",
        def.onnx,
        names.join(", "),
        dtype::name(dt)
    )))
}

/// Elements of `x`, checking that the input and output byte sizes fit in u64.
fn count(x: &TensorDesc, out_dt: Dtype) -> Result<u64, OpError> {
    shape::byte_size(&x.shape, x.dtype)?;
    shape::byte_size(&x.shape, out_dt)?;
    shape::numel(&x.shape)
}

fn finish(
    req: &PlanRequestExt,
    def: &OpDef,
    x: &TensorDesc,
    out_dt: Dtype,
    n: u64,
    p: ParamPacker,
) -> Result<OpPlan, OpError> {
    let limits = &req.target.limits;
    let (grid, block) = launch::linear(n, THREADS, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), out_dt)],
        launches: vec![Launch {
            module_id: format!("unary_{name}"),
            entry_point: format!("{}_{name}", def.kernel),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

/// Clip, every opset: min/max as inputs 1 and 2 (each optional, a scalar or one element of the
/// input's dtype, read by the kernel) or, in opset 6, as attributes (default: the float32 range).
fn plan_clip(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let def = &ops::CLIP;
    attr::only(&req.attributes, &["min", "max", LEGACY])?;
    if req.slots() == 0 || req.slots() > 3 {
        return Err(OpError::shape(format!(
            "Clip takes 1 to 3 inputs, got {}",
            req.slots()
        )));
    }
    let x = req.required(0)?;
    check_dtype(def, x.dtype)?;
    let n = count(x, x.dtype)?;
    let opset6 = (6..11).contains(&req.opset);
    let xb = binding(req, 0)?;
    let mut flags = 0;
    let mut bounds = [(xb, 0.0); 2];
    for (k, (name, ptr_bit, val_bit, default)) in [
        ("min", LO_PTR, LO_VAL, -CLIP6_DEFAULT),
        ("max", HI_PTR, HI_VAL, CLIP6_DEFAULT),
    ]
    .into_iter()
    .enumerate()
    {
        if let (Some(b), Some(t)) = (req.binding(k + 1), req.input(k + 1)) {
            if t.dtype != x.dtype {
                return Err(OpError::dtype(format!(
                    "Clip: `{name}` must have the input's dtype {}, got {}",
                    dtype::name(x.dtype),
                    dtype::name(t.dtype)
                )));
            }
            if shape::numel(&t.shape)? != 1 {
                return Err(OpError::shape(format!(
                    "Clip: `{name}` must be a scalar (one element), got shape {:?}",
                    t.shape
                )));
            }
            flags |= ptr_bit;
            bounds[k].0 = b;
        } else if attr::has(&req.attributes, name) || opset6 {
            flags |= val_bit;
            bounds[k].1 = attr::float_or(&req.attributes, name, default)?;
        }
    }
    let mut p = ParamPacker::new();
    p.ptr(xb, Access::Read)
        .ptr(bounds[0].0, Access::Read)
        .ptr(bounds[1].0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u32(flags)
        .f64(bounds[0].1)
        .f64(bounds[1].1);
    finish(req, def, x, x.dtype, n, p)
}
