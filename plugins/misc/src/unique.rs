//! Unique (opset 11: `axis`, `sorted`; outputs Y, indices, inverse_indices, counts) and NonZero
//! (opset 13): ops whose output extent depends on the input's values. The input is declared a
//! constant input (the host sends its values, bounded in size); the plan counts the unique items
//! (or the non-zero elements) and the kernels recompute the positions from the data they read:
//! one thread per item, comparing against every other item (O(n²) per call: a conformance-grade
//! kernel for the small tensors these ops see, not a sort).
//!
//! Items are single elements (no `axis`: the input flattened) or slices along `axis`, compared
//! lexicographically (NaN after every number and equal to NaN, as NumPy's `unique` orders them).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, check_rank, cuda_header, input_of, linear_launch};

/// Dtypes served (compared by value).
pub const DTYPES: [Dtype; 9] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::I8,
    Dtype::U8,
    Dtype::Boolean,
];

/// A value with NumPy's order: NaN last, NaN equal to NaN.
fn order(a: f64, b: f64) -> std::cmp::Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// The input's values as (f64, or exact i64) keys.
enum Keys {
    F(Vec<f64>),
    I(Vec<i64>),
}

impl Keys {
    fn new(dt: Dtype, bytes: &[u8]) -> Keys {
        match dtype::decode_ints(dt, bytes) {
            Some(v) => Keys::I(v),
            None => Keys::F(dtype::decode_f64(dt, bytes)),
        }
    }
    fn cmp(&self, a: usize, b: usize) -> std::cmp::Ordering {
        match self {
            Keys::F(v) => order(v[a], v[b]),
            Keys::I(v) => v[a].cmp(&v[b]),
        }
    }
    fn nonzero(&self, i: usize) -> bool {
        match self {
            Keys::F(v) => v[i] != 0.0,
            Keys::I(v) => v[i] != 0,
        }
    }
}

/// The item view: `outer × dim × inner`, items along `dim`.
#[derive(Clone, Copy)]
struct View {
    outer: usize,
    dim: usize,
    inner: usize,
}

impl View {
    fn cmp(&self, k: &Keys, a: usize, b: usize) -> std::cmp::Ordering {
        for o in 0..self.outer {
            for i in 0..self.inner {
                let at = |j: usize| (o * self.dim + j) * self.inner + i;
                let c = k.cmp(at(a), at(b));
                if c.is_ne() {
                    return c;
                }
            }
        }
        std::cmp::Ordering::Equal
    }
}

/// (unique items in output order, as first-occurrence indices; the output slot of every item;
/// the count of each unique item).
fn unique_items(k: &Keys, v: View, sorted: bool) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let mut order_idx: Vec<usize> = (0..v.dim).collect();
    // stable: equal items keep their order, so the first of a run is the first occurrence
    order_idx.sort_by(|a, b| v.cmp(k, *a, *b));
    let mut firsts: Vec<usize> = Vec::new();
    let mut group = vec![0usize; v.dim];
    for (p, &i) in order_idx.iter().enumerate() {
        if p == 0 || v.cmp(k, order_idx[p - 1], i).is_ne() {
            firsts.push(i);
        }
        group[i] = firsts.len() - 1;
    }
    let mut slot_of_group: Vec<usize> = (0..firsts.len()).collect();
    if !sorted {
        let mut by_first: Vec<usize> = (0..firsts.len()).collect();
        by_first.sort_by_key(|g| firsts[*g]);
        for (slot, g) in by_first.iter().enumerate() {
            slot_of_group[*g] = slot;
        }
    }
    let mut items = vec![0usize; firsts.len()];
    for (g, f) in firsts.iter().enumerate() {
        items[slot_of_group[g]] = *f;
    }
    let slots: Vec<usize> = group.iter().map(|g| slot_of_group[*g]).collect();
    let mut counts = vec![0usize; firsts.len()];
    for s in &slots {
        counts[*s] += 1;
    }
    (items, slots, counts)
}

fn view_of(req: &PlanRequestExt, x: &TensorDesc) -> Result<(View, Option<usize>), OpError> {
    Ok(match attr::ints_opt(&req.attributes, "axis")? {
        None => (
            View {
                outer: 1,
                dim: shape::numel(&x.shape)? as usize,
                inner: 1,
            },
            None,
        ),
        Some(a) if a.len() == 1 => {
            let r = x.shape.len() as i64;
            if a[0] < -r || a[0] >= r {
                return Err(OpError::InvalidAttribute(format!(
                    "Unique: `axis` {} is out of range for rank {r}",
                    a[0]
                )));
            }
            let a = a[0].rem_euclid(r) as usize;
            (
                View {
                    outer: shape::numel(&x.shape[..a])? as usize,
                    dim: x.shape[a] as usize,
                    inner: shape::numel(&x.shape[a + 1..])? as usize,
                },
                Some(a),
            )
        }
        Some(_) => {
            return Err(OpError::InvalidAttribute(
                "Unique: `axis` must be one int".into(),
            ));
        }
    })
}

pub fn plan_unique(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["axis", "sorted"])?;
    common::at_most_inputs(req, 1)?;
    let x = input_of(req, 0, &DTYPES)?;
    check_rank(&req.op, &x.shape)?;
    let sorted = match attr::int_or(&req.attributes, "sorted", 1)? {
        0 => false,
        1 => true,
        v => {
            return Err(OpError::InvalidAttribute(format!(
                "Unique: `sorted` must be 0 or 1, got {v}"
            )));
        }
    };
    let outs = req.outputs(1);
    if !(1..=4).contains(&outs) {
        return Err(OpError::shape(format!(
            "Unique has 1 to 4 outputs, {outs} wanted"
        )));
    }
    let (v, axis) = view_of(req, x)?;
    let bytes = req.value(0).ok_or_else(|| {
        OpError::shape("Unique: the value of input 0 must be known when planning (its unique count is the output's extent)")
    })?;
    let keys = Keys::new(x.dtype, bytes);
    let (items, _, _) = unique_items(&keys, v, sorted);
    let u = items.len() as u64;
    let y_shape = match axis {
        None => vec![u],
        Some(a) => {
            let mut s = x.shape.clone();
            s[a] = u;
            s
        }
    };
    let mut outputs = vec![TensorDesc::new("Y", y_shape, x.dtype)];
    let extra = [
        ("indices", u),
        ("inverse_indices", v.dim as u64),
        ("counts", u),
    ];
    for (name, n) in extra.iter().take(outs - 1) {
        outputs.push(TensorDesc::new(*name, vec![*n], Dtype::I64));
    }
    // absent outputs point at the (unused) workspace
    let ws = req.output_binding(outs);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read);
    for k in 0..4 {
        p.ptr(
            if k < outs { req.output_binding(k) } else { ws },
            Access::Write,
        );
    }
    p.u64(v.outer as u64)
        .u64(v.dim as u64)
        .u64(v.inner as u64)
        .u32(sorted as u32)
        .u32(outs as u32);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs,
        launches: vec![linear_launch(
            req,
            format!("misc_unique_{name}"),
            format!("unique_{name}"),
            v.dim as u64,
            p,
        )?],
        workspace_bytes: if outs < 4 { 8 } else { 0 },
    })
}

pub fn plan_nonzero(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &[])?;
    common::at_most_inputs(req, 1)?;
    let x = input_of(req, 0, &DTYPES)?;
    check_rank(&req.op, &x.shape)?;
    let bytes = req.value(0).ok_or_else(|| {
        OpError::shape("NonZero: the value of input 0 must be known when planning (its count of non-zero elements is the output's extent)")
    })?;
    let keys = Keys::new(x.dtype, bytes);
    let n = shape::numel(&x.shape)?;
    let nnz = (0..n as usize).filter(|i| keys.nonzero(*i)).count() as u64;
    let rank = x.shape.len();
    let mut dims = [1u64; 8];
    dims[..rank].copy_from_slice(&x.shape);
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(n)
        .u64(nnz)
        .u32(rank as u32)
        .u64_array(&dims);
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", vec![rank as u64, nnz], Dtype::I64)],
        launches: vec![linear_launch(
            req,
            format!("misc_unique_{name}"),
            format!("nonzero_{name}"),
            n,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
struct umd_d8 { unsigned long long v[8]; };
__device__ __forceinline__ int umd_cmp1(C a, C b) {
  if (a < b) return -1;
  if (a > b) return 1;
  bool an = a != a, bn = b != b;
  return an == bn ? 0 : (an ? 1 : -1);
}
__device__ int umd_item_cmp(const T* x, unsigned long long outer, unsigned long long dim,
    unsigned long long inner, unsigned long long a, unsigned long long b) {
  for (unsigned long long o = 0; o < outer; ++o)
    for (unsigned long long i = 0; i < inner; ++i) {
      int c = umd_cmp1(LD(x[(o * dim + a) * inner + i]), LD(x[(o * dim + b) * inner + i]));
      if (c) return c;
    }
  return 0;
}
__device__ unsigned long long umd_first(const T* x, unsigned long long outer,
    unsigned long long dim, unsigned long long inner, unsigned long long k) {
  for (unsigned long long j = 0; j < k; ++j)
    if (umd_item_cmp(x, outer, dim, inner, j, k) == 0) return j;
  return k;
}
extern "C" __global__ void unique_NAME(const T* __restrict__ x, T* __restrict__ y,
    long long* __restrict__ indices, long long* __restrict__ inverse, long long* __restrict__ counts,
    unsigned long long outer, unsigned long long dim, unsigned long long inner, unsigned int sorted,
    unsigned int outs) {
  UMD_FOR(k, dim) {
    unsigned long long f = umd_first(x, outer, dim, inner, k);
    /* the output slot of f's item: distinct items before it (by value, or by first occurrence) */
    unsigned long long slot = 0, count = 0;
    for (unsigned long long j = 0; j < dim; ++j) {
      int c = umd_item_cmp(x, outer, dim, inner, j, f);
      if (c == 0) { ++count; continue; }
      bool before = sorted ? c < 0 : j < f;
      if (before && umd_first(x, outer, dim, inner, j) == j) ++slot;
    }
    if (outs > 2) inverse[k] = (long long)slot;
    if (f == k) {
      if (outs > 1) indices[slot] = (long long)k;
      if (outs > 3) counts[slot] = (long long)count;
      unsigned long long u = 0;
      for (unsigned long long j = 0; j < dim; ++j)
        if (umd_first(x, outer, dim, inner, j) == j) ++u;
      for (unsigned long long o = 0; o < outer; ++o)
        for (unsigned long long i = 0; i < inner; ++i)
          y[(o * u + slot) * inner + i] = x[(o * dim + k) * inner + i];
    }
  }
}
extern "C" __global__ void nonzero_NAME(const T* __restrict__ x, long long* __restrict__ y,
    unsigned long long n, unsigned long long nnz, unsigned int rank, umd_d8 dims) {
  UMD_FOR(i, n) {
    if (!(LD(x[i]) != (C)0)) continue;
    unsigned long long pos = 0;
    for (unsigned long long j = 0; j < i; ++j) pos += LD(x[j]) != (C)0;
    unsigned long long rem = i;
    for (int d = (int)rank - 1; d >= 0; --d) {
      y[(unsigned long long)d * nnz + pos] = (long long)(rem % dims.v[d]);
      rem /= dims.v[d];
    }
  }
}
"#;

pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("unique_{name}"), format!("nonzero_{name}")],
    ))
}

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let size = dtype::size(dt);
    let i64s = |v: &[usize]| {
        v.iter()
            .flat_map(|x| (*x as i64).to_le_bytes())
            .collect::<Vec<u8>>()
    };
    if call.entry_point.starts_with("nonzero_") {
        let (xb, yb) = (c.r.ptr()?, c.r.ptr()?);
        let (n, nnz, rank) = (c.r.u64()?, c.r.u64()?, c.r.u32()? as usize);
        let dims = c.r.u64_array::<8>()?;
        let keys = Keys::new(dt, &c.bufs.input(xb, n * size as u64)?[..n as usize * size]);
        let mut out = vec![0usize; rank * nnz as usize];
        let mut pos = 0usize;
        for i in 0..n as usize {
            if !keys.nonzero(i) {
                continue;
            }
            if pos as u64 >= nnz {
                return Err(OpError::internal(
                    "NonZero: the input changed since planning",
                ));
            }
            let mut rem = i as u64;
            for d in (0..rank).rev() {
                out[d * nnz as usize + pos] = (rem % dims[d]) as usize;
                rem /= dims[d];
            }
            pos += 1;
        }
        let mut w = c.bufs.output(yb, out.len() as u64 * 8)?;
        w.data.copy_from_slice(&i64s(&out));
        return Ok(vec![w]);
    }
    let xb = c.r.ptr()?;
    let outs_b = [c.r.ptr()?, c.r.ptr()?, c.r.ptr()?, c.r.ptr()?];
    let (outer, dim, inner) = (
        c.r.u64()? as usize,
        c.r.u64()? as usize,
        c.r.u64()? as usize,
    );
    let (sorted, outs) = (c.r.u32()? != 0, c.r.u32()? as usize);
    let n = outer * dim * inner;
    let data = &c.bufs.input(xb, (n * size) as u64)?[..n * size];
    let keys = Keys::new(dt, data);
    let v = View { outer, dim, inner };
    let (items, slots, counts) = unique_items(&keys, v, sorted);
    let u = items.len();
    let mut y = c
        .bufs
        .output(outs_b[0], (outer * u * inner * size) as u64)?;
    for o in 0..outer {
        for (s, &k) in items.iter().enumerate() {
            let (d0, s0) = ((o * u + s) * inner * size, (o * dim + k) * inner * size);
            y.data[d0..d0 + inner * size].copy_from_slice(&data[s0..s0 + inner * size]);
        }
    }
    let mut writes = vec![y];
    for (k, vals) in [&items, &slots, &counts]
        .into_iter()
        .enumerate()
        .take(outs.saturating_sub(1))
    {
        let mut w = c.bufs.output(outs_b[k + 1], vals.len() as u64 * 8)?;
        w.data.copy_from_slice(&i64s(vals));
        writes.push(w);
    }
    if outs < 4 {
        writes.push(c.bufs.output(outs_b[outs], 8)?);
    }
    Ok(writes)
}
