//! The feature preprocessing ops of ai.onnx.ml: Scaler, Normalizer, Imputer, OneHotEncoder and
//! FeatureVectorizer, on f32, f64, i64 and i32 inputs, as onnxruntime computes them:
//! - Scaler: `y = (x − offset[c]) · scale[c]` in f32 (`offset`/`scale` of one value or one per
//!   column `c` of `X [N, C]` / `[C]`);
//! - Normalizer: each row divided by its MAX (largest value), L1 (sum of magnitudes) or L2
//!   (root of the sum of squares) norm, in f32; a row whose norm is 0 is copied;
//! - Imputer: each value equal to `replaced_value_*` (NaN: each NaN) becomes the column's
//!   `imputed_value_*`; same dtype out (f32/f64 take the float attributes, i64/i32 the ints);
//! - OneHotEncoder: `Y [..., K]` f32, 1 where `x` (floats truncated to integers) equals
//!   category `k` of `cats_int64s` (the first of duplicates); an unknown value gives a row of zeros, or with `zeros = 0`
//!   fails the call on the CPU device (string categories are not served);
//! - FeatureVectorizer: the first `inputdimensions[i]` columns of each input `[N, C_i]`, side by
//!   side into `Y [N, Σ inputdimensions]` f32, zero-padded where an input has fewer.
//!
//! Module `ml_prep_{T}`; per-value or per-row attribute tables travel in the workspace as a
//! [`Blob`]. One thread per element (per row for Normalizer).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, TensorDesc,
    attr, dtype,
};

use crate::blob::Blob;
use crate::common::{self, Val, bad, dtype_error, get, launch, put, word};

/// Input dtypes of the classic ONNX-ML ops.
pub const INPUTS: [Dtype; 4] = [Dtype::F32, Dtype::F64, Dtype::I64, Dtype::I32];

/// Most values of a per-column or category table.
const MAX_TABLE: usize = 1 << 18;

/// Input `X` (the first of `slots` inputs): `(desc, rows, columns)` of a `[N, C]` or `[C]`
/// tensor of one of [`INPUTS`].
pub fn rows_of(req: &PlanRequestExt, slots: usize) -> Result<(&TensorDesc, u64, u64), OpError> {
    if req.slots() != slots {
        return Err(OpError::shape(format!(
            "{}: takes {slots} input(s), got {}",
            req.op,
            req.slots()
        )));
    }
    let x = req.required(0)?;
    if !INPUTS.contains(&x.dtype) {
        return Err(dtype_error(req, "X", x.dtype, &INPUTS));
    }
    let (rows, c) = match x.shape[..] {
        [c] => (1, c),
        [n, c] => (n, c),
        _ => {
            return Err(OpError::shape(format!(
                "{}: X must be [N, C] or [C], got {:?}",
                req.op, x.shape
            )));
        }
    };
    umd_sdk::shape::byte_size(&x.shape, x.dtype)?;
    Ok((x, rows, c))
}

/// A per-column table: one value, or one per column.
fn per_column(req: &PlanRequestExt, name: &str, v: &[f64], c: u64) -> Result<(), OpError> {
    if v.len() == 1 || v.len() as u64 == c {
        Ok(())
    } else {
        Err(bad(
            req,
            format!(
                "`{name}` has {} values; 1 or {c} (one per column) expected",
                v.len()
            ),
        ))
    }
}

/// The plan of one `prep_*` launch over `n` threads, reading X (binding 0) and the blob, writing
/// output 0, after the blob's own launches.
fn one_launch(
    req: &PlanRequestExt,
    x: &TensorDesc,
    entry: &str,
    n: u64,
    blob: &Blob,
    out: TensorDesc,
    args: impl FnOnce(&mut ParamPacker),
) -> Result<OpPlan, OpError> {
    umd_sdk::shape::byte_size(&out.shape, out.dtype)?;
    let ws = req.output_binding(1);
    let mut launches = blob.launches(req, ws)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(ws, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
    args(&mut p);
    let name = dtype::name(x.dtype);
    launches.push(launch(
        req,
        format!("ml_prep_{name}"),
        format!("{entry}_{name}"),
        n,
        p,
    )?);
    Ok(OpPlan {
        outputs: vec![out],
        launches,
        workspace_bytes: blob.bytes(),
    })
}

pub fn plan_scaler(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    attr::only(&req.attributes, &["offset", "scale"])?;
    let (x, rows, c) = rows_of(req, 1)?;
    let offset = attr::floats_or(&req.attributes, "offset", &[0.0])?;
    let scale = attr::floats_or(&req.attributes, "scale", &[1.0])?;
    per_column(req, "offset", &offset, c)?;
    per_column(req, "scale", &scale, c)?;
    let mut blob = Blob::default();
    offset.iter().chain(&scale).for_each(|&v| blob.f64(v));
    let out = TensorDesc::new("Y", x.shape.clone(), Dtype::F32);
    one_launch(req, x, "scaler", rows * c, &blob, out, |p| {
        p.u64(rows * c)
            .u64(c)
            .u64(offset.len() as u64)
            .u64(scale.len() as u64);
    })
}

pub fn plan_normalizer(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    attr::only(&req.attributes, &["norm"])?;
    let code = common::choice(req, "norm", "MAX", &["MAX", "L1", "L2"])?;
    let (x, rows, c) = rows_of(req, 1)?;
    let out = TensorDesc::new("Y", x.shape.clone(), Dtype::F32);
    one_launch(req, x, "normalizer", rows, &Blob::default(), out, |p| {
        p.u64(rows).u64(c).u32(code);
    })
}

pub fn plan_imputer(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(
        a,
        &[
            "imputed_value_floats",
            "imputed_value_int64s",
            "replaced_value_float",
            "replaced_value_int64",
        ],
    )?;
    let (x, rows, c) = rows_of(req, 1)?;
    let floats = matches!(x.dtype, Dtype::F32 | Dtype::F64);
    let (imputed, replaced) = if floats {
        (
            attr::floats_or(a, "imputed_value_floats", &[])?,
            attr::float_or(a, "replaced_value_float", 0.0)?,
        )
    } else {
        let v = attr::ints_or(a, "imputed_value_int64s", &[])?;
        let r = attr::int_or(a, "replaced_value_int64", 0)?;
        (v.iter().map(|&i| i as f64).collect(), r as f64)
    };
    let which = if floats {
        "imputed_value_floats"
    } else {
        "imputed_value_int64s"
    };
    if imputed.is_empty() {
        return Err(bad(
            req,
            format!("`{which}` is required for X of {}", dtype::name(x.dtype)),
        ));
    }
    per_column(req, which, &imputed, c)?;
    let mut blob = Blob::default();
    if floats {
        imputed.iter().for_each(|&v| blob.f64(v));
    } else {
        attr::ints_or(a, "imputed_value_int64s", &[])?
            .iter()
            .for_each(|&v| blob.i64(v));
    }
    let rep_int = attr::int_or(a, "replaced_value_int64", 0)?;
    let out = TensorDesc::new("Y", x.shape.clone(), x.dtype);
    one_launch(req, x, "imputer", rows * c, &blob, out, |p| {
        p.u64(rows * c)
            .u64(c)
            .u64(imputed.len() as u64)
            .f64(replaced)
            .u64(rep_int as u64);
    })
}

pub fn plan_onehot(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(a, &["cats_int64s", "cats_strings", "zeros"])?;
    if attr::has(a, "cats_strings") {
        return plan_onehot_strings(req);
    }
    let cats = attr::ints_or(a, "cats_int64s", &[])?;
    if cats.is_empty() || cats.len() > MAX_TABLE {
        return Err(bad(
            req,
            format!(
                "`cats_int64s` has {} categories; 1..={MAX_TABLE} expected",
                cats.len()
            ),
        ));
    }
    let zeros = attr::int_or(a, "zeros", 1)?;
    if req.slots() != 1 {
        return Err(OpError::shape("OneHotEncoder: takes one input X"));
    }
    let x = req.required(0)?;
    if !INPUTS.contains(&x.dtype) {
        return Err(dtype_error(req, "X", x.dtype, &INPUTS));
    }
    let n = umd_sdk::shape::numel(&x.shape)?;
    let mut shape = x.shape.clone();
    shape.push(cats.len() as u64);
    let k = cats.len() as u64;
    let mut blob = Blob::default();
    cats.iter().for_each(|&v| blob.i64(v));
    let out = TensorDesc::new("Y", shape, Dtype::F32);
    one_launch(req, x, "onehot", n, &blob, out, |p| {
        p.u64(n).u64(k).u32((zeros != 0) as u32);
    })
}

/// OneHotEncoder over string categories (`cats_strings`): X is a string tensor, whose value
/// the host gives at plan time (ABI 1.5), so each element's category is found when planning
/// and the launch writes the rows from that index list (CPU device only: string tensors live
/// on the host).
fn plan_onehot_strings(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let a = &req.attributes;
    if attr::has(a, "cats_int64s") {
        return Err(bad(
            req,
            "give `cats_int64s` or `cats_strings`, not both".into(),
        ));
    }
    let cats = common::strings(req, "cats_strings")?;
    if cats.is_empty() || cats.len() > MAX_TABLE {
        return Err(bad(
            req,
            format!(
                "`cats_strings` has {} categories; 1..={MAX_TABLE} expected",
                cats.len()
            ),
        ));
    }
    let zeros = attr::int_or(a, "zeros", 1)?;
    if req.slots() != 1 {
        return Err(OpError::shape("OneHotEncoder: takes one input X"));
    }
    let x = req.required(0)?;
    if x.dtype != Dtype::String {
        return Err(OpError::UnsupportedDtype(format!(
            "OneHotEncoder: `cats_strings` categorize string tensors; X is {}",
            dtype::name(x.dtype)
        )));
    }
    if !req.target.name.eq_ignore_ascii_case("cpu") {
        return Err(OpError::UnsupportedTarget(format!(
            "OneHotEncoder on strings runs on the CPU device only (target `{}`)",
            req.target.name
        )));
    }
    let n = umd_sdk::shape::numel(&x.shape)?;
    let bytes = req.value(0).ok_or_else(|| {
        OpError::UnsupportedDtype(
            "OneHotEncoder: X's strings were not given when planning (more than the host \
             passes)"
                .into(),
        )
    })?;
    let items = umd_sdk::strings::decode(bytes, n as usize)?;
    // the last equal category only (onnxruntime 1.32 keeps the last of repeated strings, the
    // first of repeated integers)
    let index: std::collections::HashMap<&str, i64> = cats
        .iter()
        .enumerate()
        .map(|(j, c)| (c.as_str(), j as i64))
        .collect();
    let mut blob = Blob::default();
    for s in &items {
        match index.get(s) {
            Some(&j) => blob.i64(j),
            None if zeros != 0 => blob.i64(-1),
            None => {
                return Err(bad(
                    req,
                    format!("`{s}` is not one of the categories and `zeros` = 0"),
                ));
            }
        }
    }
    let mut shape = x.shape.clone();
    shape.push(cats.len() as u64);
    let out = TensorDesc::new("Y", shape, Dtype::F32);
    one_launch(req, x, "onehot", n, &blob, out, |p| {
        p.u64(n).u64(cats.len() as u64);
    })
}

/// `onehot_string`: row `i` gets a 1 at the category index the plan found (`-1`: none).
fn onehot_strings(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (_, tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (n, k) = (r.u64()? as usize, r.u64()? as usize);
    let tab = bufs.input(tb, (8 * n) as u64)?;
    let mut y = bufs.output(yb, (n * k * 4) as u64)?;
    for i in 0..n {
        let j = word(tab, i) as i64;
        if (0..k as i64).contains(&j) {
            put::<f32>(&mut y.data, i * k + j as usize, 1.0);
        }
    }
    Ok(vec![y])
}

pub fn plan_feature_vectorizer(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    attr::only(&req.attributes, &["inputdimensions"])?;
    let dims = attr::ints_or(&req.attributes, "inputdimensions", &[])?;
    if dims.len() != req.slots() || dims.iter().any(|&d| !(0..=1 << 24).contains(&d)) {
        return Err(bad(
            req,
            format!(
                "`inputdimensions` {dims:?} must give each of the {} inputs its column count",
                req.slots()
            ),
        ));
    }
    let total: u64 = dims.iter().map(|&d| d as u64).sum();
    let mut rows = None;
    let mut launches = Vec::new();
    let mut at = 0u64;
    for (i, &d) in dims.iter().enumerate() {
        let x = req.required(i)?;
        if !INPUTS.contains(&x.dtype) {
            return Err(dtype_error(req, &format!("input {i}"), x.dtype, &INPUTS));
        }
        let (n, c) = match x.shape[..] {
            [c] => (1, c),
            [n, c] => (n, c),
            _ => {
                return Err(OpError::shape(format!(
                    "FeatureVectorizer: input {i} must be [N, C] or [C], got {:?}",
                    x.shape
                )));
            }
        };
        if *rows.get_or_insert(n) != n {
            return Err(OpError::shape(format!(
                "FeatureVectorizer: input {i} has {n} rows, input 0 {}",
                rows.unwrap_or(0)
            )));
        }
        let d = d as u64;
        let mut p = ParamPacker::new();
        p.ptr(req.binding(i).unwrap_or(i as u32), Access::Read)
            // each input's launch writes its own columns: the others are kept
            .ptr(req.output_binding(0), Access::ReadWrite)
            .u64(n * d)
            .u64(c)
            .u64(d)
            .u64(total)
            .u64(at);
        let name = dtype::name(x.dtype);
        if n * d > 0 {
            launches.push(launch(
                req,
                format!("ml_prep_{name}"),
                format!("fv_{name}"),
                n * d,
                p,
            )?);
        }
        at += d;
    }
    let shape = vec![rows.unwrap_or(0), total];
    umd_sdk::shape::byte_size(&shape, Dtype::F32)?;
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", shape, Dtype::F32)],
        launches,
        workspace_bytes: 0,
    })
}

const KERNELS: &str = r#"
__device__ __forceinline__ double umd_w(const u64* t, u64 i) {
  return __longlong_as_double((long long)t[i]);
}
extern "C" __global__ void scaler_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ y, u64 n, u64 c, u64 no, u64 ns) {
  UMD_FOR(i, n) {
    u64 k = i % c;
    float off = (float)umd_w(tab, no == 1 ? 0 : k), sc = (float)umd_w(tab, no + (ns == 1 ? 0 : k));
    y[i] = ((float)ld_T(x[i]) - off) * sc;
  }
}
extern "C" __global__ void normalizer_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ y, u64 rows, u64 c, unsigned int norm) {
  UMD_FOR(r, rows) {
    const T* xr = x + r * c;
    float d = 0.0f;
    if (norm == 0) {
      d = -3.402823466e38f;
      for (u64 k = 0; k < c; k++) d = fmaxf(d, (float)ld_T(xr[k]));
    } else if (norm == 1) {
      for (u64 k = 0; k < c; k++) d += fabsf((float)ld_T(xr[k]));
    } else {
      for (u64 k = 0; k < c; k++) { float v = (float)ld_T(xr[k]); d += v * v; }
      d = sqrtf(d);
    }
    for (u64 k = 0; k < c; k++)
      y[r * c + k] = d != 0.0f ? (float)ld_T(xr[k]) / d : (float)ld_T(xr[k]);
  }
}
extern "C" __global__ void imputer_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    T* __restrict__ y, u64 n, u64 c, u64 ni, double rep, u64 rep_int) {
  UMD_FOR(i, n) {
    u64 k = ni == 1 ? 0 : i % c;
    y[i] = umd_impute(x[i], tab[k], rep, (long long)rep_int);
  }
}
extern "C" __global__ void onehot_NAME(const T* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ y, u64 n, u64 k, unsigned int zeros) {
  UMD_FOR(i, n) {
    long long v = umd_category(x[i]);
    bool found = false;
    for (u64 j = 0; j < k; j++) {
      bool hit = !found && (long long)tab[j] == v;
      y[i * k + j] = hit ? 1.0f : 0.0f;
      found = found || hit;
    }
  }
}
extern "C" __global__ void fv_NAME(const T* __restrict__ x, float* __restrict__ y, u64 n,
    u64 c, u64 d, u64 total, u64 at) {
  UMD_FOR(i, n) {
    u64 r = i / d, k = i % d;
    y[r * total + at + k] = k < c ? (float)ld_T(x[r * c + k]) : 0.0f;
  }
}
"#;

pub fn cuda(dt: Dtype) -> ModuleSource {
    let mut code = common::cuda_head(&[("T", dt)]);
    // Imputer: floats compare against the replaced value (NaN: is NaN) and take the imputed
    // float; integers compare exactly and take the imputed integer.
    code.push_str(if matches!(dt, Dtype::F32 | Dtype::F64) {
        "__device__ __forceinline__ T umd_impute(T x, u64 w, double rep, long long) {\n\
         double v = ld_T(x);\n\
         bool hit = rep != rep ? v != v : v == rep;\n\
         return hit ? st_T(__longlong_as_double((long long)w)) : x;\n}\n"
    } else {
        "__device__ __forceinline__ T umd_impute(T x, u64 w, double, long long rep) {\n\
         return (long long)x == rep ? (T)(long long)w : x;\n}\n"
    });
    // OneHotEncoder: integers as they are (a double would round past 2^53), floats truncated
    code.push_str(if matches!(dt, Dtype::F32 | Dtype::F64) {
        "__device__ __forceinline__ long long umd_category(T x) { return (long long)ld_T(x); }\n"
    } else {
        "__device__ __forceinline__ long long umd_category(T x) { return (long long)x; }\n"
    });
    let name = dtype::name(dt);
    code.push_str(&KERNELS.replace("NAME", name));
    let entries = ["scaler", "normalizer", "imputer", "onehot", "fv"]
        .iter()
        .map(|e| format!("{e}_{name}"))
        .collect();
    crate::simple::module(code, entries)
}

fn scaler<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (n, c, no, ns) = (
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
    );
    let x = bufs.input(xb, (n * std::mem::size_of::<T>()) as u64)?;
    let tab = bufs.input(tb, (8 * (no + ns)) as u64)?;
    let mut y = bufs.output(yb, (n * 4) as u64)?;
    let w = |i: usize| f64::from_bits(word(tab, i)) as f32;
    for i in 0..n {
        let k = i % c;
        let off = w(if no == 1 { 0 } else { k });
        let sc = w(no + if ns == 1 { 0 } else { k });
        put::<f32>(&mut y.data, i, (get::<T>(x, i).to_f64() as f32 - off) * sc);
    }
    Ok(vec![y])
}

fn normalizer<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, _tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (rows, c, norm) = (r.u64()? as usize, r.u64()? as usize, r.u32()?);
    let x = bufs.input(xb, (rows * c * std::mem::size_of::<T>()) as u64)?;
    let mut y = bufs.output(yb, (rows * c * 4) as u64)?;
    for row in 0..rows {
        let v = |k: usize| get::<T>(x, row * c + k).to_f64() as f32;
        let d = match norm {
            0 => (0..c).fold(-f32::MAX, |m, k| m.max(v(k))),
            1 => (0..c).map(|k| v(k).abs()).sum(),
            _ => (0..c).map(|k| v(k) * v(k)).sum::<f32>().sqrt(),
        };
        for k in 0..c {
            let out = if d != 0.0 { v(k) / d } else { v(k) };
            put::<f32>(&mut y.data, row * c + k, out);
        }
    }
    Ok(vec![y])
}

fn imputer<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (n, c, ni) = (r.u64()? as usize, r.u64()? as usize, r.u64()? as usize);
    let (rep, rep_int) = (r.f64()?, r.u64()? as i64);
    let size = std::mem::size_of::<T>();
    let x = bufs.input(xb, (n * size) as u64)?;
    let tab = bufs.input(tb, (8 * ni) as u64)?;
    let mut y = bufs.output(yb, (n * size) as u64)?;
    let floats = matches!(T::DTYPE, Dtype::F32 | Dtype::F64);
    for i in 0..n {
        let k = if ni == 1 { 0 } else { i % c };
        let v = get::<T>(x, i);
        let out = if floats {
            let f = v.to_f64();
            let hit = if rep.is_nan() { f.is_nan() } else { f == rep };
            if hit {
                T::from_f64(f64::from_bits(word(tab, k)))
            } else {
                v
            }
        } else if v.to_i64() == rep_int {
            T::from_i64(word(tab, k) as i64)
        } else {
            v
        };
        put(&mut y.data, i, out);
    }
    Ok(vec![y])
}

fn onehot<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (n, k, zeros) = (r.u64()? as usize, r.u64()? as usize, r.u32()? != 0);
    let x = bufs.input(xb, (n * std::mem::size_of::<T>()) as u64)?;
    let tab = bufs.input(tb, (8 * k) as u64)?;
    let mut y = bufs.output(yb, (n * k * 4) as u64)?;
    for i in 0..n {
        let v = get::<T>(x, i);
        let v = if matches!(T::DTYPE, Dtype::F32 | Dtype::F64) {
            v.to_f64() as i64
        } else {
            v.to_i64()
        };
        // the first equal category only (onnxruntime's map keeps the first of duplicates)
        let found = (0..k).find(|&j| word(tab, j) as i64 == v);
        if let Some(j) = found {
            put::<f32>(&mut y.data, i * k + j, 1.0);
        }
        let found = found.is_some();
        if !found && !zeros {
            return Err(OpError::InvalidAttribute(format!(
                "OneHotEncoder: value {v} is not one of the categories and `zeros` = 0"
            )));
        }
    }
    Ok(vec![y])
}

fn feature_vectorizer<T: Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, yb) = (r.ptr()?, r.ptr()?);
    let (n, c, d, total, at) = (
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
        r.u64()? as usize,
    );
    let rows = n.checked_div(d).unwrap_or(0);
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let x = bufs.input(xb, (rows * c * std::mem::size_of::<T>()) as u64)?;
    // each input's launch fills its own columns of Y: keep the others
    let mut y = common::written(call, yb)?;
    if y.data.len() < rows * total * 4 {
        return Err(OpError::internal(
            "FeatureVectorizer: output smaller than planned",
        ));
    }
    for row in 0..rows {
        for k in 0..d {
            let v = if k < c {
                get::<T>(x, row * c + k).to_f64() as f32
            } else {
                0.0
            };
            put::<f32>(&mut y.data, row * total + at + k, v);
        }
    }
    Ok(vec![y])
}

/// Runs entry point `{kind}_{T}` of module `ml_prep_{T}`.
pub fn run_cpu(call: &CpuCall, kind: &str, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let err = || OpError::internal(format!("prep: unknown entry point `{}`", call.entry_point));
    match kind {
        "scaler" => crate::by_dtype!(dt, scaler, err(), call),
        "normalizer" => crate::by_dtype!(dt, normalizer, err(), call),
        "imputer" => crate::by_dtype!(dt, imputer, err(), call),
        "onehot" if dt == Dtype::String => onehot_strings(call),
        "onehot" => crate::by_dtype!(dt, onehot, err(), call),
        "fv" => crate::by_dtype!(dt, feature_vectorizer, err(), call),
        _ => Err(err()),
    }
}
