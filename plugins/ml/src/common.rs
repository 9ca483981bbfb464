//! What every op of this plugin shares: domain checks, dtype lists and names, launch building,
//! the CUDA head of a module (prelude, helpers, f64 load/store of a storage type), and the CPU
//! element trait [`Val`] (every served dtype read and written through f64 or i64).

use half::{bf16, f16};
use umd_sdk::dtype::{self, CUDA_PRELUDE, Element};
use umd_sdk::params::ParamPacker;
use umd_sdk::{Dtype, Launch, OpError, PlanRequestExt};

/// The ONNX-ML domain.
pub const ML_DOMAIN: &str = "ai.onnx.ml";

/// Threads per block of the one-thread-per-element kernels.
pub const THREADS: u32 = 256;

/// Float dtypes (computed in f64 by the kernels, stored in their own type).
pub const FLOATS: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

/// Refuses a request whose domain is not one of `domains` (an empty domain is always accepted).
pub fn check_domain(req: &PlanRequestExt, domains: &[&str]) -> Result<(), OpError> {
    if req.domain.is_empty() || domains.contains(&req.domain.as_str()) {
        Ok(())
    } else {
        Err(OpError::UnsupportedOp(format!(
            "op `{}` of domain `{}` is not provided by this plugin (it serves {:?})",
            req.op, req.domain, domains
        )))
    }
}

/// `f32, f16 and f64`-style list of dtype names.
pub fn names(dts: &[Dtype]) -> String {
    let v: Vec<&str> = dts.iter().map(|d| dtype::name(*d)).collect();
    match v.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => v.join(""),
    }
}

/// The error for input `what` of dtype `got` when `served` are served.
pub fn dtype_error(req: &PlanRequestExt, what: &str, got: Dtype, served: &[Dtype]) -> OpError {
    OpError::dtype(format!(
        "{}: {what} is {}; served dtypes are {}",
        req.op,
        dtype::name(got),
        names(served)
    ))
}

/// A one-dimensional launch of `n` threads of `entry` in `module`.
pub fn launch(
    req: &PlanRequestExt,
    module: String,
    entry: String,
    n: u64,
    p: ParamPacker,
) -> Result<Launch, OpError> {
    let limits = &req.target.limits;
    let (grid, block) = umd_sdk::launch::linear(n, THREADS, limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(Launch {
        module_id: module,
        entry_point: entry,
        grid,
        block,
        shared_memory: 0,
        params,
        relocations,
    })
}

/// The start of a CUDA module: prelude, SDK helpers and, for every `(alias, dtype)`, the
/// storage type `alias` with `ld_alias(v) -> double` and `st_alias(double) -> alias`.
pub fn cuda_head(types: &[(&str, Dtype)]) -> String {
    let mut code = String::from(CUDA_PRELUDE);
    code.push_str(umd_sdk::cuda::HELPERS);
    code.push_str("typedef unsigned long long u64;\n");
    for (alias, dt) in types {
        let ct = dtype::cuda_type(*dt).expect("served dtypes have a CUDA type");
        let ld = ct.load.replace('X', "v");
        let st = ct.store.replace('X', &format!("(({})v)", ct.compute));
        code.push_str(&format!(
            "typedef {s} {alias};\n\
             __device__ __forceinline__ double ld_{alias}({alias} v) {{ return (double){ld}; }}\n\
             __device__ __forceinline__ {alias} st_{alias}(double v) {{ return {st}; }}\n",
            s = ct.storage,
        ));
    }
    code
}

/// A CPU element read and written through f64 (and i64, exactly, for the integer types).
pub trait Val: Element {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_i64(self) -> i64 {
        self.to_f64() as i64
    }
    fn from_i64(v: i64) -> Self {
        Self::from_f64(v as f64)
    }
}

impl Val for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}
impl Val for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}
impl Val for f16 {
    fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f32(v as f32)
    }
}
impl Val for bf16 {
    fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }
    fn from_f64(v: f64) -> Self {
        bf16::from_f32(v as f32)
    }
}
impl Val for i32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i32
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v as i32
    }
}
impl Val for i64 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    fn to_i64(self) -> i64 {
        self
    }
    fn from_i64(v: i64) -> Self {
        v
    }
}

/// Element `i` of a little-endian buffer of `T`.
#[inline(always)]
pub fn get<T: Val>(buf: &[u8], i: usize) -> T {
    let s = std::mem::size_of::<T>();
    T::load(&buf[i * s..(i + 1) * s])
}

/// Stores `v` as element `i` of a little-endian buffer of `T`.
#[inline(always)]
pub fn put<T: Val>(buf: &mut [u8], i: usize, v: T) {
    let s = std::mem::size_of::<T>();
    v.store(&mut buf[i * s..(i + 1) * s])
}

/// Word `i` of a blob of u64 words.
#[inline(always)]
pub fn word(blob: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(blob[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// Calls `$f::<T>($args)` with `T` the Rust type of dtype `$dt` (f32, f16, bf16, f64, i32, i64);
/// `$err` otherwise.
#[macro_export]
macro_rules! by_dtype {
    ($dt:expr, $f:ident, $err:expr, $($args:expr),*) => {
        match $dt {
            umd_sdk::Dtype::F32 => $f::<f32>($($args),*),
            umd_sdk::Dtype::F16 => $f::<half::f16>($($args),*),
            umd_sdk::Dtype::Bf16 => $f::<half::bf16>($($args),*),
            umd_sdk::Dtype::F64 => $f::<f64>($($args),*),
            umd_sdk::Dtype::I32 => $f::<i32>($($args),*),
            umd_sdk::Dtype::I64 => $f::<i64>($($args),*),
            _ => Err($err),
        }
    };
}

/// The written binding `b` of a CPU call, whole: its current contents when the launch reads it
/// too (`ReadWrite`), zeros otherwise.
pub fn written(call: &umd_sdk::CpuCall, b: u32) -> Result<umd_sdk::CpuWrite, OpError> {
    let buf = call
        .buffers
        .iter()
        .find(|x| x.binding == b)
        .ok_or_else(|| OpError::internal(format!("binding {b} is not bound")))?;
    let rw = call
        .relocations
        .iter()
        .any(|r| r.binding == b && r.access == umd_sdk::Access::ReadWrite);
    let data = if rw && buf.data.len() as u64 == buf.size {
        buf.data.clone()
    } else {
        vec![0; buf.size as usize]
    };
    Ok(umd_sdk::CpuWrite { binding: b, data })
}

/// What a model op's one launch is: module `ml_{family}_{T}`, entry `{family}_{T}` (regressor)
/// or `{family}_cls_{T}` (classifier), `T` X's dtype.
pub struct Scorer<'a> {
    pub family: &'a str,
    pub classifier: bool,
    pub rows: u64,
    /// Columns of X.
    pub features: u64,
    /// Scores per row.
    pub width: u64,
}

/// The plan of a model op (the linear models, the forests, the SVMs): the `blob`'s launches
/// into the workspace, then one launch over `rows` threads with parameters `X`, the table, the
/// scores (and the labels), `rows`, `features`, then what `args` packs. Outputs: `Y` scores
/// `[rows, width]` f32, or for a classifier `Y` int64 labels `[rows]` and `Z` scores.
pub fn scorer_plan(
    req: &PlanRequestExt,
    x: &umd_sdk::TensorDesc,
    s: Scorer,
    blob: &crate::blob::Blob,
    args: impl FnOnce(&mut ParamPacker),
) -> Result<umd_sdk::OpPlan, OpError> {
    use umd_sdk::{Access, TensorDesc};
    let shape = vec![s.rows, s.width];
    umd_sdk::shape::byte_size(&shape, Dtype::F32)?;
    let nout = if s.classifier { 2 } else { 1 };
    let ws = req.output_binding(nout);
    let mut launches = blob.launches(req, ws)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(ws, Access::Read)
        .ptr(req.output_binding(nout - 1), Access::Write);
    if s.classifier {
        p.ptr(req.output_binding(0), Access::Write);
    }
    p.u64(s.rows).u64(s.features);
    args(&mut p);
    let name = dtype::name(x.dtype);
    let entry = if s.classifier { "_cls" } else { "" };
    launches.push(launch(
        req,
        format!("ml_{}_{name}", s.family),
        format!("{}{entry}_{name}", s.family),
        s.rows,
        p,
    )?);
    let z = TensorDesc::new(if s.classifier { "Z" } else { "Y" }, shape, Dtype::F32);
    let outputs = if s.classifier {
        vec![TensorDesc::new("Y", vec![s.rows], Dtype::I64), z]
    } else {
        vec![z]
    };
    Ok(umd_sdk::OpPlan {
        outputs,
        launches,
        workspace_bytes: blob.bytes(),
    })
}

/// An invalid-attribute error naming `req`'s op.
pub fn bad(req: &PlanRequestExt, msg: String) -> OpError {
    OpError::InvalidAttribute(format!("{}: {msg}", req.op))
}

/// The index in `options` of string attribute `name` (`default` when absent); an error listing
/// the options otherwise.
pub fn choice(
    req: &PlanRequestExt,
    name: &str,
    default: &str,
    options: &[&str],
) -> Result<u32, OpError> {
    let v = umd_sdk::attr::text_or(&req.attributes, name, default)?;
    options
        .iter()
        .position(|o| *o == v)
        .map(|p| p as u32)
        .ok_or_else(|| {
            let (last, rest) = options.split_last().unwrap_or((&"", &[]));
            bad(
                req,
                format!("`{name}` = {v:?} must be {} or {last}", rest.join(", ")),
            )
        })
}

/// String-list attribute `name` (empty when absent; a single string is a list of one).
pub fn strings(req: &PlanRequestExt, name: &str) -> Result<Vec<String>, OpError> {
    match req
        .attributes
        .iter()
        .find(|a| a.name == name)
        .map(|a| &a.value)
    {
        None => Ok(Vec::new()),
        Some(umd_sdk::AttrValueExt::Texts(v)) => Ok(v.clone()),
        Some(umd_sdk::AttrValueExt::Text(v)) => Ok(vec![v.clone()]),
        Some(_) => Err(bad(req, format!("`{name}` must be a list of strings"))),
    }
}
