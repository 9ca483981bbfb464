//! NonMaxSuppression (opsets 10, 11): boxes `[B, N, 4]`, scores `[B, C, N]`, optional
//! `max_output_boxes_per_class`, `iou_threshold`, `score_threshold`; `center_point_box` 0/1;
//! output `selected_indices` i64 `[num_selected, 3]`, per batch, per class, by score descending
//! (ties: lower box index first), as `onnx/reference/ops/op_non_max_suppression.py` selects.
//!
//! The selected count is the output's extent, so boxes, scores and the three scalars are
//! constant inputs (the host sends values of at most 1 MiB per request; larger ones are refused,
//! naming the input). The plan runs the selection to size the output; the kernels recompute it
//! from the buffers: `nms_select` (one thread per (batch, class): a heap sort of the box indices
//! by score, then the greedy IoU pass; selections and counts go to the workspace) and
//! `nms_write` (one thread: concatenates the selections as rows). The IoU is computed in the
//! compute type (f32 for f32/f16/bf16, f64 for f64) with the reference's operation order and no
//! fused multiply-adds, so the boundary `iou == threshold` (kept) is exact.

use std::ops::{Add, Div, Mul, Sub};

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TensorDesc, attr};

use crate::common::{self, FLOATS, cuda_header, input_of};

/// The compute types.
pub trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
{
    fn of(v: f64) -> Self;
}
impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
}
impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
}

/// (min, max) of a box edge pair, as the reference's `max_min`.
fn min_max<F: Real>(a: F, b: F) -> (F, F) {
    if a >= b { (b, a) } else { (a, b) }
}

/// The box `b` (4 values) as (x_min, x_max, y_min, y_max).
fn extent<F: Real>(b: &[F], center: bool) -> (F, F, F, F) {
    if center {
        let two = F::of(2.0);
        let (w, h) = (b[2] / two, b[3] / two);
        (b[0] - w, b[0] + w, b[1] - h, b[1] + h)
    } else {
        let (x0, x1) = min_max(b[1], b[3]);
        let (y0, y1) = min_max(b[0], b[2]);
        (x0, x1, y0, y1)
    }
}

/// Whether `a` suppresses `b` (their IoU exceeds `thr`), as the reference's `suppress_by_iou`.
fn suppress<F: Real>(a: &[F], b: &[F], center: bool, thr: F) -> bool {
    let zero = F::of(0.0);
    let (ax0, ax1, ay0, ay1) = extent(a, center);
    let (bx0, bx1, by0, by1) = extent(b, center);
    let max = |p: F, q: F| if p > q { p } else { q };
    let min = |p: F, q: F| if p < q { p } else { q };
    let (ix0, ix1) = (max(ax0, bx0), min(ax1, bx1));
    if ix1 <= ix0 {
        return false;
    }
    let (iy0, iy1) = (max(ay0, by0), min(ay1, by1));
    if iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    if inter <= zero {
        return false;
    }
    let area_a = (ax1 - ax0) * (ay1 - ay0);
    let area_b = (bx1 - bx0) * (by1 - by0);
    let union = area_a + area_b - inter;
    if area_a <= zero || area_b <= zero || union <= zero {
        return false;
    }
    inter / union > thr
}

/// What a selection needs besides the data.
#[derive(Clone, Copy)]
pub struct Setup {
    pub batches: usize,
    pub classes: usize,
    pub boxes: usize,
    /// `min(max_output_boxes_per_class, boxes)`.
    pub keep: usize,
    pub iou: f64,
    pub score: Option<f64>,
    pub center: bool,
}

/// The selected box indices of every (batch, class), in output order.
pub fn select<F: Real>(s: &Setup, boxes: &[F], scores: &[F]) -> Vec<Vec<u32>> {
    let (iou, score) = (F::of(s.iou), s.score.map(F::of));
    let mut out = Vec::with_capacity(s.batches * s.classes);
    let mut order: Vec<u32> = Vec::with_capacity(s.boxes);
    for b in 0..s.batches {
        let bx = &boxes[b * s.boxes * 4..(b + 1) * s.boxes * 4];
        for c in 0..s.classes {
            let sc = &scores[(b * s.classes + c) * s.boxes..][..s.boxes];
            order.clear();
            order.extend((0..s.boxes as u32).filter(|&i| score.is_none_or(|t| sc[i as usize] > t)));
            // stable: equal scores keep the lower index first; NaN after every number (a total
            // order, as the CUDA kernel's)
            order.sort_by(|p, q| {
                let (a, b) = (sc[*p as usize], sc[*q as usize]);
                #[allow(clippy::eq_op)]
                let nan = |v: F| v != v;
                b.partial_cmp(&a).unwrap_or_else(|| nan(a).cmp(&nan(b)))
            });
            let mut sel: Vec<u32> = Vec::new();
            for &i in &order {
                if sel.len() >= s.keep {
                    break;
                }
                let bi = &bx[i as usize * 4..][..4];
                if !sel
                    .iter()
                    .any(|&j| suppress(bi, &bx[j as usize * 4..][..4], s.center, iou))
                {
                    sel.push(i);
                }
            }
            out.push(sel);
        }
    }
    out
}

/// The selection on `dt`'s compute type from values decoded to f64.
fn select_values(s: &Setup, dt: Dtype, boxes: &[f64], scores: &[f64]) -> Vec<Vec<u32>> {
    if dt == Dtype::F64 {
        select(s, boxes, scores)
    } else {
        let f = |v: &[f64]| v.iter().map(|x| *x as f32).collect::<Vec<f32>>();
        select(s, &f(boxes), &f(scores))
    }
}

/// The first value of a scalar input, when present and not empty.
fn scalar<T: Copy>(v: Option<Vec<T>>) -> Option<T> {
    v.and_then(|v| v.first().copied())
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["center_point_box"])?;
    common::at_most_inputs(req, 5)?;
    let boxes = input_of(req, 0, &FLOATS)?;
    let scores = input_of(req, 1, &FLOATS)?;
    let dt = boxes.dtype;
    if scores.dtype != dt {
        return Err(OpError::dtype(
            "NonMaxSuppression: boxes and scores must have the same dtype",
        ));
    }
    let (bs, ss) = (&boxes.shape, &scores.shape);
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(OpError::shape(format!(
            "NonMaxSuppression: boxes must be [B, N, 4] and scores [B, C, N], got {bs:?} and {ss:?}"
        )));
    }
    let center = match attr::int_or(&req.attributes, "center_point_box", 0)? {
        0 => false,
        1 => true,
        v => {
            return Err(OpError::InvalidAttribute(format!(
                "NonMaxSuppression: `center_point_box` must be 0 or 1, got {v}"
            )));
        }
    };
    let need = |i: usize, name: &str| {
        req.value(i).ok_or_else(|| {
            OpError::shape(format!(
                "NonMaxSuppression: the value of `{name}` (input {i}) must be known when planning \
                 (the number of selected boxes is the output's extent); the host sends input \
                 values of at most 1 MiB per request"
            ))
        })
    };
    let (bv, sv) = (need(0, "boxes")?, need(1, "scores")?);
    let (batches, classes, n) = (bs[0] as usize, ss[1] as usize, bs[1] as usize);
    if bs[1] > u32::MAX as u64 {
        return Err(OpError::shape("NonMaxSuppression: too many boxes"));
    }
    let max_out = scalar(req.ints(2)?).unwrap_or(0).max(0) as u64;
    let s = Setup {
        batches,
        classes,
        boxes: n,
        keep: max_out.min(n as u64) as usize,
        iou: scalar(req.floats(3)?).unwrap_or(0.0),
        score: scalar(req.floats(4)?),
        center,
    };
    let dec = |b: &[u8]| umd_sdk::dtype::decode_f64(dt, b);
    let (bvals, svals) = (dec(bv), dec(sv));
    if bvals.len() != batches * n * 4 || svals.len() != batches * classes * n {
        return Err(OpError::shape(
            "NonMaxSuppression: the values sent do not match the inputs' shapes",
        ));
    }
    let total: u64 = select_values(&s, dt, &bvals, &svals)
        .iter()
        .map(|v| v.len() as u64)
        .sum();
    let bc = (batches * classes) as u64;
    let ws = umd_sdk::shape::numel(&[bc, 1 + s.keep as u64 + n as u64])?
        .checked_mul(4)
        .ok_or_else(|| OpError::shape("NonMaxSuppression: workspace size overflows"))?
        .max(4);
    let wsb = req.output_binding(1);
    let name = umd_sdk::dtype::name(dt);
    let module = format!("misc_nms_{name}");
    let mut p = ParamPacker::new();
    p.ptr(req.binding(0).unwrap_or(0), Access::Read)
        .ptr(req.binding(1).unwrap_or(1), Access::Read)
        .ptr(wsb, Access::Write)
        .u64(batches as u64)
        .u64(classes as u64)
        .u64(n as u64)
        .u64(s.keep as u64)
        .f64(s.iou)
        .f64(s.score.unwrap_or(0.0))
        .u32(s.score.is_some() as u32)
        .u32(center as u32);
    let select = common::linear_launch(req, module.clone(), format!("nms_select_{name}"), bc, p)?;
    let mut p = ParamPacker::new();
    p.ptr(wsb, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(bc)
        .u64(classes as u64)
        .u64(s.keep as u64)
        .u64(total);
    let limits = &req.target.limits;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    let write = Launch {
        module_id: module,
        entry_point: format!("nms_write_{name}"),
        grid: Dim3::x(1),
        block: Dim3::x(1),
        shared_memory: 0,
        params,
        relocations,
    };
    Ok(OpPlan {
        outputs: vec![TensorDesc::new(
            "selected_indices",
            vec![total, 3],
            Dtype::I64,
        )],
        launches: vec![select, write],
        workspace_bytes: ws,
    })
}

const CUDA: &str = r#"
__device__ __forceinline__ float umd_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double umd_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float umd_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double umd_add(double a, double b) { return __dadd_rn(a, b); }
__device__ void umd_extent(const T* b, unsigned int center, C* e) {
  if (center) {
    C w = LD(b[2]) / (C)2, h = LD(b[3]) / (C)2;
    e[0] = LD(b[0]) - w; e[1] = LD(b[0]) + w; e[2] = LD(b[1]) - h; e[3] = LD(b[1]) + h;
  } else {
    C x0 = LD(b[1]), x1 = LD(b[3]), y0 = LD(b[0]), y1 = LD(b[2]);
    if (x0 >= x1) { C t = x0; x0 = x1; x1 = t; }
    if (y0 >= y1) { C t = y0; y0 = y1; y1 = t; }
    e[0] = x0; e[1] = x1; e[2] = y0; e[3] = y1;
  }
}
__device__ bool umd_suppress(const T* a, const T* b, unsigned int center, C thr) {
  C ea[4], eb[4];
  umd_extent(a, center, ea);
  umd_extent(b, center, eb);
  C ix0 = ea[0] > eb[0] ? ea[0] : eb[0], ix1 = ea[1] < eb[1] ? ea[1] : eb[1];
  if (ix1 <= ix0) return false;
  C iy0 = ea[2] > eb[2] ? ea[2] : eb[2], iy1 = ea[3] < eb[3] ? ea[3] : eb[3];
  if (iy1 <= iy0) return false;
  C inter = umd_mul(ix1 - ix0, iy1 - iy0);
  if (inter <= (C)0) return false;
  C area_a = umd_mul(ea[1] - ea[0], ea[3] - ea[2]);
  C area_b = umd_mul(eb[1] - eb[0], eb[3] - eb[2]);
  C uni = umd_add(area_a, area_b) - inter;
  if (area_a <= (C)0 || area_b <= (C)0 || uni <= (C)0) return false;
  return inter / uni > thr;
}
/* p ranks before q: higher score, then lower index; NaN after every number */
__device__ __forceinline__ bool umd_before(const T* s, unsigned int p, unsigned int q) {
  C a = LD(s[p]), b = LD(s[q]);
  bool an = a != a, bn = b != b;
  if (an != bn) return bn;
  return a > b || ((an || a == b) && p < q);
}
__device__ void umd_sift(const T* s, unsigned int* o, unsigned long long root, unsigned long long n) {
  for (;;) {
    unsigned long long c = 2 * root + 1;
    if (c >= n) return;
    if (c + 1 < n && umd_before(s, o[c], o[c + 1])) ++c;
    if (!umd_before(s, o[root], o[c])) return;
    unsigned int t = o[root]; o[root] = o[c]; o[c] = t;
    root = c;
  }
}
extern "C" __global__ void nms_select_NAME(const T* __restrict__ boxes, const T* __restrict__ scores,
    unsigned int* __restrict__ ws, unsigned long long batches, unsigned long long classes,
    unsigned long long n, unsigned long long keep, double iou, double score_thr,
    unsigned int has_score, unsigned int center) {
  unsigned long long bc_n = batches * classes;
  unsigned int* counts = ws;
  unsigned int* sels = ws + bc_n;
  unsigned int* orders = sels + bc_n * keep;
  UMD_FOR(bc, bc_n) {
    unsigned long long b = bc / classes;
    const T* sc = scores + bc * n;
    const T* bx = boxes + b * n * 4;
    unsigned int* o = orders + bc * n;
    unsigned int* sel = sels + bc * keep;
    /* heap sort with umd_before as "less": o ends in rank order, the best first */
    for (unsigned long long i = 0; i < n; ++i) o[i] = (unsigned int)i;
    for (unsigned long long i = n / 2; i-- > 0;) umd_sift(sc, o, i, n);
    for (unsigned long long e = n; e-- > 1;) {
      unsigned int t = o[0]; o[0] = o[e]; o[e] = t;
      umd_sift(sc, o, 0, e);
    }
    unsigned long long count = 0;
    C thr = (C)iou, sthr = (C)score_thr;
    for (unsigned long long k = 0; k < n && count < keep; ++k) {
      unsigned int i = o[k];
      if (has_score && !(LD(sc[i]) > sthr)) continue;
      bool keep_it = true;
      for (unsigned long long j = 0; j < count; ++j)
        if (umd_suppress(bx + (unsigned long long)i * 4, bx + (unsigned long long)sel[j] * 4, center, thr)) {
          keep_it = false;
          break;
        }
      if (keep_it) sel[count++] = i;
    }
    counts[bc] = (unsigned int)count;
  }
}
extern "C" __global__ void nms_write_NAME(const unsigned int* __restrict__ ws, long long* __restrict__ out,
    unsigned long long bc_n, unsigned long long classes, unsigned long long keep,
    unsigned long long total) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const unsigned int* sels = ws + bc_n;
  unsigned long long row = 0;
  for (unsigned long long bc = 0; bc < bc_n; ++bc)
    for (unsigned int j = 0; j < ws[bc] && row < total; ++j, ++row) {
      out[row * 3] = (long long)(bc / classes);
      out[row * 3 + 1] = (long long)(bc % classes);
      out[row * 3 + 2] = (long long)sels[bc * keep + j];
    }
}
"#;

pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = umd_sdk::dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("nms_select_{name}"), format!("nms_write_{name}")],
    ))
}

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    if call.entry_point.starts_with("nms_write_") {
        let (wb, ob) = (c.r.ptr()?, c.r.ptr()?);
        let (bc, classes, keep, total) = (c.r.u64()?, c.r.u64()?, c.r.u64()?, c.r.u64()?);
        let ws_len = (bc * (1 + keep) * 4) as usize;
        let ws = c.bufs.input(wb, ws_len as u64)?;
        let word = |i: u64| {
            let i = i as usize * 4;
            u32::from_le_bytes([ws[i], ws[i + 1], ws[i + 2], ws[i + 3]]) as u64
        };
        let mut w = c.bufs.output(ob, total * 24)?;
        let mut row = 0u64;
        for k in 0..bc {
            for j in 0..word(k) {
                if row >= total {
                    return Err(OpError::internal(
                        "NonMaxSuppression: the inputs changed since planning",
                    ));
                }
                let vals = [k / classes, k % classes, word(bc + k * keep + j)];
                for (f, v) in vals.iter().enumerate() {
                    let at = (row as usize * 3 + f) * 8;
                    w.data[at..at + 8].copy_from_slice(&(*v as i64).to_le_bytes());
                }
                row += 1;
            }
        }
        return Ok(vec![w]);
    }
    let (bb, sb, wb) = (c.r.ptr()?, c.r.ptr()?, c.r.ptr()?);
    let (batches, classes, n, keep) = (
        c.r.u64()? as usize,
        c.r.u64()? as usize,
        c.r.u64()? as usize,
        c.r.u64()? as usize,
    );
    let (iou, score, has_score, center) = (c.r.f64()?, c.r.f64()?, c.r.u32()?, c.r.u32()?);
    let s = Setup {
        batches,
        classes,
        boxes: n,
        keep,
        iou,
        score: (has_score != 0).then_some(score),
        center: center != 0,
    };
    let boxes = c.read_f64(bb, (batches * n * 4) as u64, dt)?;
    let scores = c.read_f64(sb, (batches * classes * n) as u64, dt)?;
    let sel = select_values(&s, dt, &boxes, &scores);
    let bc = batches * classes;
    let ws_len = (bc * (1 + keep + n) * 4).max(4);
    let mut w = c.bufs.output(wb, ws_len as u64)?;
    let mut put = |i: usize, v: u32| w.data[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    for (k, v) in sel.iter().enumerate() {
        put(k, v.len() as u32);
        for (j, i) in v.iter().enumerate() {
            put(bc + k * keep + j, *i);
        }
    }
    Ok(vec![w])
}
