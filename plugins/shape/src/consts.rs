//! Planning of the ops whose output is known when planning: Shape, Size and Constant (bytes
//! carried in the parameter block of `fill_bytes` launches), ConstantOfShape (`splat_b*` of one
//! value) and Range (`range_*`, computing `start + i·delta`).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common::{arity, dim, dt_name, make_launch, numel_checked, out, plan, required_ints};
use crate::copy::MOVE_MODULE;

/// Bytes of constant data one `fill_bytes` launch carries (its parameter block is 4024 bytes).
pub const FILL_CHUNK: usize = 4000;
/// Most `fill_bytes` launches one plan may use (a Constant of up to 256000 bytes).
pub const MAX_FILL_CHUNKS: usize = 64;
/// The module of the Range kernels.
pub const RANGE_MODULE: &str = "shape_range";
/// Dtypes Range serves.
pub const RANGE_DTYPES: [Dtype; 7] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I16,
];

/// Launches writing `bytes` into binding `dst`, 4000 bytes at a time.
pub fn fill_launches(req: &PlanRequestExt, dst: u32, bytes: &[u8]) -> Result<Vec<Launch>, OpError> {
    let chunks = bytes.len().div_ceil(FILL_CHUNK).max(1);
    if chunks > MAX_FILL_CHUNKS {
        return Err(OpError::shape(format!(
            "{}: a constant of {} bytes is larger than this plugin carries in kernel parameters \
             ({} bytes); make it an initializer",
            req.op,
            bytes.len(),
            FILL_CHUNK * MAX_FILL_CHUNKS
        )));
    }
    (0..chunks)
        .map(|c| {
            let part =
                &bytes[(c * FILL_CHUNK).min(bytes.len())..((c + 1) * FILL_CHUNK).min(bytes.len())];
            let mut blob = [0u64; FILL_CHUNK / 8];
            for (w, b) in blob.iter_mut().zip(part.chunks(8)) {
                let mut le = [0u8; 8];
                le[..b.len()].copy_from_slice(b);
                *w = u64::from_le_bytes(le);
            }
            let access = if c == 0 {
                Access::Write
            } else {
                Access::ReadWrite
            };
            let mut p = ParamPacker::new();
            p.ptr(dst, access)
                .u64((c * FILL_CHUNK) as u64)
                .u64(part.len() as u64)
                .u64_array(&blob);
            make_launch(req, MOVE_MODULE, "fill_bytes".into(), part.len() as u64, p)
        })
        .collect()
}

fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn shape_op(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &["start", "end"])?;
    let x = req.required(0)?;
    let r = x.shape.len() as i64;
    let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) } as usize;
    let start = clamp(attr::int_or(&req.attributes, "start", 0)?);
    let end = clamp(attr::int_or(&req.attributes, "end", r)?).max(start);
    let dims: Vec<i64> = x.shape[start..end].iter().map(|&d| d as i64).collect();
    let launches = fill_launches(req, req.output_binding(0), &i64_bytes(&dims))?;
    Ok(plan(
        vec![out(req, vec![dims.len() as u64], Dtype::I64)],
        launches,
    ))
}

pub fn size(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &[])?;
    let x = req.required(0)?;
    let n = numel_checked(&x.shape, x.dtype)?;
    let launches = fill_launches(req, req.output_binding(0), &i64_bytes(&[n as i64]))?;
    Ok(plan(vec![out(req, vec![], Dtype::I64)], launches))
}

/// The value of a Constant node: exactly one of its value attributes.
fn constant_value(req: &PlanRequestExt) -> Result<(TensorDesc, Vec<u8>), OpError> {
    const FORMS: [&str; 5] = [
        "value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
    ];
    for unsupported in ["value_string", "value_strings", "sparse_value"] {
        if attr::has(&req.attributes, unsupported) {
            return Err(OpError::InvalidAttribute(format!(
                "Constant: attribute `{unsupported}` is not supported (no string or sparse tensors)"
            )));
        }
    }
    attr::only(&req.attributes, &FORMS)?;
    if req.attributes.len() != 1 {
        return Err(OpError::InvalidAttribute(format!(
            "Constant: exactly one of {FORMS:?} is required, got {}",
            req.attributes.len()
        )));
    }
    let a = &req.attributes;
    let desc = |shape: Vec<u64>, dt| out(req, shape, dt);
    Ok(match a[0].name.as_str() {
        "value" => {
            let t = attr::tensor_opt(a, "value")?.expect("present");
            let bytes = umd_sdk::shape::byte_size(&t.desc.shape, t.desc.dtype)?;
            if bytes != t.data.len() as u64 {
                return Err(OpError::InvalidAttribute(format!(
                    "Constant: `value` of shape {:?} {} needs {bytes} bytes, has {}",
                    t.desc.shape,
                    dt_name(t.desc.dtype),
                    t.data.len()
                )));
            }
            (desc(t.desc.shape.clone(), t.desc.dtype), t.data.clone())
        }
        "value_float" => {
            let v = attr::float_or(a, "value_float", 0.0)? as f32;
            (desc(vec![], Dtype::F32), v.to_le_bytes().to_vec())
        }
        "value_floats" => {
            let v = attr::floats_or(a, "value_floats", &[])?;
            let bytes = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
            (desc(vec![v.len() as u64], Dtype::F32), bytes)
        }
        "value_int" => {
            let v = attr::int(a, "value_int")?;
            (desc(vec![], Dtype::I64), v.to_le_bytes().to_vec())
        }
        _ => {
            let v = attr::ints_or(a, "value_ints", &[])?;
            (desc(vec![v.len() as u64], Dtype::I64), i64_bytes(&v))
        }
    })
}

pub fn constant(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 0, 0)?;
    let (desc, bytes) = constant_value(req)?;
    let launches = fill_launches(req, req.output_binding(0), &bytes)?;
    Ok(plan(vec![desc], launches))
}

/// A launch of `splat_b{size}` writing `n` copies of the element `bits` into `dst`.
pub fn splat_launch(
    req: &PlanRequestExt,
    dst: u32,
    n: u64,
    elem: usize,
    bits: u64,
) -> Result<Launch, OpError> {
    let mut p = ParamPacker::new();
    p.ptr(dst, Access::Write).u64(n).u64(bits);
    make_launch(req, MOVE_MODULE, format!("splat_b{elem}"), n, p)
}

/// The little-endian bits of one element of `dt` (its first `size(dt)` bytes).
pub fn element_bits(data: &[u8]) -> u64 {
    let mut le = [0u8; 8];
    le[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
    u64::from_le_bytes(le)
}

pub fn constant_of_shape(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 1, 1)?;
    attr::only(&req.attributes, &["value"])?;
    let shape = required_ints(req, 0, "input")?
        .iter()
        .map(|&v| dim(req, "input", v))
        .collect::<Result<Vec<_>, _>>()?;
    let (dt, bits) = match attr::tensor_opt(&req.attributes, "value")? {
        None => (Dtype::F32, 0),
        Some(t) => {
            let size = dtype::size(t.desc.dtype);
            if umd_sdk::shape::numel(&t.desc.shape)? != 1 || t.data.len() != size {
                return Err(OpError::InvalidAttribute(format!(
                    "ConstantOfShape: `value` must hold exactly one element, got shape {:?} with {} bytes",
                    t.desc.shape,
                    t.data.len()
                )));
            }
            (t.desc.dtype, element_bits(&t.data))
        }
    };
    let n = numel_checked(&shape, dt)?;
    let l = splat_launch(req, req.output_binding(0), n, dtype::size(dt), bits)?;
    Ok(plan(vec![out(req, shape, dt)], vec![l]))
}

/// One scalar of Range's inputs.
fn scalar<T: Copy>(i: usize, v: Option<Vec<T>>, what: &str) -> Result<T, OpError> {
    match v.as_deref() {
        Some([x]) => Ok(*x),
        Some(other) => Err(OpError::shape(format!(
            "Range: `{what}` must be a scalar, got {} values",
            other.len()
        ))),
        None => Err(OpError::shape(format!(
            "Range: input {i} (`{what}`) is required"
        ))),
    }
}

pub fn range(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    arity(req, 3, 3)?;
    attr::only(&req.attributes, &["stash_type"])?;
    let dt = req.required(0)?.dtype;
    for i in 1..3 {
        if req.required(i)?.dtype != dt {
            return Err(OpError::dtype(format!(
                "Range: start, limit and delta must share one dtype, got {} and {}",
                dt_name(dt),
                dt_name(req.required(i)?.dtype)
            )));
        }
    }
    if !RANGE_DTYPES.contains(&dt) {
        return Err(OpError::dtype(format!(
            "Range serves f32, f16, bf16, f64, i16, i32 and i64, not {}",
            dt_name(dt)
        )));
    }
    let stash = attr::int_or(&req.attributes, "stash_type", 1)?;
    if stash != 1 && stash != 11 {
        return Err(OpError::InvalidAttribute(format!(
            "Range: stash_type {stash} must be 1 (float) or 11 (double)"
        )));
    }
    let names = ["start", "limit", "delta"];
    let mut p = ParamPacker::new();
    let n: u64 = if umd_sdk::request::is_float(dt) {
        let v: Vec<f64> = (0..3)
            .map(|i| scalar(i, req.floats(i)?, names[i]))
            .collect::<Result<_, _>>()?;
        let (start, limit, delta) = (v[0], v[1], v[2]);
        if delta == 0.0 || !delta.is_finite() || !start.is_finite() || !limit.is_finite() {
            return Err(OpError::shape(format!(
                "Range: start {start}, limit {limit}, delta {delta} give no finite sequence"
            )));
        }
        let n = ((limit - start) / delta).ceil().max(0.0);
        if n >= 2f64.powi(62) {
            return Err(OpError::shape(format!("Range: {n} elements are too many")));
        }
        let wide = stash == 11; // only f16/bf16 look at it
        p.ptr(req.output_binding(0), Access::Write)
            .u64(n as u64)
            .f64(start)
            .f64(delta)
            .i64(0)
            .i64(0)
            .u32(wide as u32);
        n as u64
    } else {
        let v: Vec<i64> = (0..3)
            .map(|i| scalar(i, req.ints(i)?, names[i]))
            .collect::<Result<_, _>>()?;
        let (start, limit, delta) = (v[0] as i128, v[1] as i128, v[2] as i128);
        if delta == 0 {
            return Err(OpError::shape("Range: delta is 0".to_string()));
        }
        let span = limit - start;
        // ceil(span / delta) with integer arithmetic
        let q = span / delta;
        let n = if span % delta != 0 && (span < 0) == (delta < 0) {
            q + 1
        } else {
            q
        }
        .max(0);
        if n >= 1 << 62 {
            return Err(OpError::shape(format!("Range: {n} elements are too many")));
        }
        p.ptr(req.output_binding(0), Access::Write)
            .u64(n as u64)
            .f64(0.0)
            .f64(0.0)
            .i64(v[0])
            .i64(v[2])
            .u32(0);
        n as u64
    };
    numel_checked(&[n], dt)?;
    let l = make_launch(req, RANGE_MODULE, format!("range_{}", dt_name(dt)), n, p)?;
    Ok(plan(vec![out(req, vec![n], dt)], vec![l]))
}
