//! LabelEncoder (ai.onnx.ml opsets 2 and 4) between numeric types: keys from `keys_int64s`,
//! `keys_floats` or `keys_tensor`, values from `values_int64s`, `values_floats` or
//! `values_tensor`, defaults from `default_int64` (-1), `default_float` (-0.0) or
//! `default_tensor`. X is i32/i64 for integer keys, f32/f64 for float keys (NaN keys match NaN);
//! Y is i64 (`values_int64s`), f32 (`values_floats`) or the dtype of `values_tensor` (i32, i64,
//! f32, f64). String keys or values are refused: umd has no string dtype.
//!
//! The table (a [`Blob`]): keys (i64 or f64 words), values (i64 or f64 words), the default.
//! One thread per element scans the keys from the last (a repeated key maps to its last value,
//! as the reference's dict does).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, TensorDesc,
    attr, dtype,
};

use crate::blob::Blob;
use crate::common::{self, Val, dtype_error, get, launch, put, word};

/// X and Y dtypes served.
pub const DTYPES: [Dtype; 4] = [Dtype::I32, Dtype::I64, Dtype::F32, Dtype::F64];

fn bad(msg: String) -> OpError {
    OpError::InvalidAttribute(format!("LabelEncoder: {msg}"))
}

fn is_int(dt: Dtype) -> bool {
    matches!(dt, Dtype::I32 | Dtype::I64)
}

/// Keys, values or default: `(integer?, values as i64 or f64 bits, name)` of the one of
/// `{kind}_int64s`, `{kind}_floats`, `{kind}_tensor` given.
fn table(req: &PlanRequestExt, kind: &str) -> Result<(Dtype, Vec<u64>), OpError> {
    let a = &req.attributes;
    if attr::has(a, &format!("{kind}_strings")) {
        return Err(OpError::dtype(format!(
            "LabelEncoder: `{kind}_strings`: string tables are the text plugin's (this plugin \
             maps numbers to numbers)"
        )));
    }
    let given: Vec<&str> = ["int64s", "floats", "tensor"]
        .into_iter()
        .filter(|s| attr::has(a, &format!("{kind}_{s}")))
        .collect();
    match given.as_slice() {
        ["int64s"] => Ok((
            Dtype::I64,
            attr::ints_or(a, &format!("{kind}_int64s"), &[])?
                .into_iter()
                .map(|v| v as u64)
                .collect(),
        )),
        ["floats"] => Ok((
            Dtype::F32,
            attr::floats_or(a, &format!("{kind}_floats"), &[])?
                .into_iter()
                .map(f64::to_bits)
                .collect(),
        )),
        ["tensor"] => {
            let t = attr::tensor_opt(a, &format!("{kind}_tensor"))?.expect("given");
            tensor_words(t.desc.dtype, &t.data, &format!("{kind}_tensor"))
        }
        _ => Err(bad(format!(
            "exactly one of `{kind}_int64s`, `{kind}_floats`, `{kind}_tensor` must be given"
        ))),
    }
}

fn tensor_words(dt: Dtype, data: &[u8], name: &str) -> Result<(Dtype, Vec<u64>), OpError> {
    if !DTYPES.contains(&dt) {
        return Err(OpError::dtype(format!(
            "LabelEncoder: `{name}` is {}; {} are served",
            dtype::name(dt),
            common::names(&DTYPES)
        )));
    }
    let words = if is_int(dt) {
        dtype::decode_ints(dt, data)
            .expect("integer dtype")
            .into_iter()
            .map(|v| v as u64)
            .collect()
    } else {
        dtype::decode_f64(dt, data)
            .into_iter()
            .map(f64::to_bits)
            .collect()
    };
    Ok((dt, words))
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &[common::ML_DOMAIN])?;
    let a = &req.attributes;
    attr::only(
        a,
        &[
            "default_float",
            "default_int64",
            "default_string",
            "default_tensor",
            "keys_floats",
            "keys_int64s",
            "keys_strings",
            "keys_tensor",
            "values_floats",
            "values_int64s",
            "values_strings",
            "values_tensor",
        ],
    )?;
    let (kdt, keys) = table(req, "keys")?;
    let (vdt, values) = table(req, "values")?;
    if keys.len() != values.len() {
        return Err(bad(format!(
            "{} keys for {} values",
            keys.len(),
            values.len()
        )));
    }
    let default = if let Some(t) = attr::tensor_opt(a, "default_tensor")? {
        let (ddt, w) = tensor_words(t.desc.dtype, &t.data, "default_tensor")?;
        let w0 = *w
            .first()
            .ok_or_else(|| bad("`default_tensor` is empty".into()))?;
        match (is_int(ddt), is_int(vdt)) {
            (true, true) | (false, false) => w0,
            (true, false) => (w0 as i64 as f64).to_bits(),
            (false, true) => f64::from_bits(w0) as i64 as u64,
        }
    } else if is_int(vdt) {
        attr::int_or(a, "default_int64", -1)? as u64
    } else {
        attr::float_or(a, "default_float", -0.0)?.to_bits()
    };

    if req.slots() != 1 {
        return Err(OpError::shape("LabelEncoder: takes one input X"));
    }
    let x = req.required(0)?;
    if !DTYPES.contains(&x.dtype) {
        return Err(dtype_error(req, "X", x.dtype, &DTYPES));
    }
    if is_int(x.dtype) != is_int(kdt) {
        return Err(OpError::dtype(format!(
            "LabelEncoder: X is {} but the keys are {}",
            dtype::name(x.dtype),
            if is_int(kdt) { "integers" } else { "floats" }
        )));
    }
    let n = umd_sdk::shape::numel(&x.shape)?;
    umd_sdk::shape::byte_size(&x.shape, vdt)?;
    let mut blob = Blob::default();
    blob.words.extend(&keys);
    blob.words.extend(&values);
    blob.words.push(default);
    let ws = req.output_binding(1);
    let mut launches = blob.launches(req, ws)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(ws, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(keys.len() as u64);
    launches.push(launch(
        req,
        "ml_label".into(),
        format!("label_{}_{}", dtype::name(x.dtype), dtype::name(vdt)),
        n,
        p,
    )?);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", x.shape.clone(), vdt)],
        launches,
        workspace_bytes: blob.bytes(),
    })
}

pub fn cuda() -> ModuleSource {
    let aliases: Vec<(String, Dtype)> = DTYPES
        .iter()
        .map(|&d| (format!("t_{}", dtype::name(d)), d))
        .collect();
    let refs: Vec<(&str, Dtype)> = aliases.iter().map(|(a, d)| (a.as_str(), *d)).collect();
    let mut code = common::cuda_head(&refs);
    code.push_str(
        "__device__ __forceinline__ bool umd_same(double a, double b) { return a == b || (a != a && b != b); }\n",
    );
    let mut entries = Vec::new();
    for xd in DTYPES {
        for yd in DTYPES {
            let (xn, yn) = (dtype::name(xd), dtype::name(yd));
            let hit = if is_int(xd) {
                "(long long)xv == (long long)tab[k]"
            } else {
                "umd_same(xv, __longlong_as_double((long long)tab[k]))"
            };
            let xv = if is_int(xd) {
                "long long xv = (long long)x[i]"
            } else {
                "double xv = ld_t_XN(x[i])"
            };
            let store = if is_int(yd) {
                "y[i] = (t_YN)(long long)v"
            } else {
                "y[i] = st_t_YN(__longlong_as_double((long long)v))"
            };
            let k = format!(
                "extern \"C\" __global__ void label_XN_YN(const t_XN* __restrict__ x, \
                 const u64* __restrict__ tab, t_YN* __restrict__ y, u64 n, u64 nk) {{\n\
                 UMD_FOR(i, n) {{\n  {xv};\n  u64 v = tab[2 * nk];\n\
                 for (u64 k = nk; k-- > 0;) if ({hit}) {{ v = tab[nk + k]; break; }}\n  {store};\n}}\n}}\n"
            );
            code.push_str(&k.replace("XN", xn).replace("YN", yn));
            entries.push(format!("label_{xn}_{yn}"));
        }
    }
    crate::simple::module(code, entries)
}

fn label<X: Val, Y: Val>(
    call: &CpuCall,
    int_x: bool,
    int_y: bool,
) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (xb, tb, yb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (n, nk) = (r.u64()? as usize, r.u64()? as usize);
    let x = bufs.input(xb, (n * std::mem::size_of::<X>()) as u64)?;
    let tab = bufs.input(tb, 8 * (2 * nk as u64 + 1))?;
    let mut y = bufs.output(yb, (n * std::mem::size_of::<Y>()) as u64)?;
    let keys: Vec<u64> = (0..nk).map(|k| word(tab, k)).collect();
    let default = word(tab, 2 * nk);
    for i in 0..n {
        let xv = get::<X>(x, i);
        let found = if int_x {
            let xi = xv.to_i64();
            keys.iter().rposition(|&k| k as i64 == xi)
        } else {
            let xf = xv.to_f64();
            keys.iter().rposition(|&k| {
                let kf = f64::from_bits(k);
                kf == xf || (kf.is_nan() && xf.is_nan())
            })
        };
        let v = found.map_or(default, |k| word(tab, nk + k));
        let out = if int_y {
            Y::from_i64(v as i64)
        } else {
            Y::from_f64(f64::from_bits(v))
        };
        put(&mut y.data, i, out);
    }
    Ok(vec![y])
}

fn with_x<X: Val>(call: &CpuCall, yd: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    let ix = is_int(X::DTYPE);
    match yd {
        Dtype::I32 => label::<X, i32>(call, ix, true),
        Dtype::I64 => label::<X, i64>(call, ix, true),
        Dtype::F32 => label::<X, f32>(call, ix, false),
        Dtype::F64 => label::<X, f64>(call, ix, false),
        _ => Err(OpError::internal("label: unknown dtype")),
    }
}

pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let unknown = || OpError::internal(format!("unknown entry `{}`", call.entry_point));
    let rest = call
        .entry_point
        .strip_prefix("label_")
        .ok_or_else(unknown)?;
    let (xn, yn) = rest.split_once('_').ok_or_else(unknown)?;
    let xd = dtype::from_name(xn).ok_or_else(unknown)?;
    let yd = dtype::from_name(yn).ok_or_else(unknown)?;
    crate::by_dtype!(xd, with_x, unknown(), call, yd)
}
