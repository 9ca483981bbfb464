//! The `matmul` plugin: numpy-semantics MatMul (1-D, 2-D and batched with broadcast batch
//! dimensions) on f32, f16 and bf16, accumulating in f32.
//!
//! GPU: a shared-memory tiled kernel (16×16 tiles, one output element per thread, batch in
//! grid z). CPU: the same computation, reading the same parameter block.

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, CUDA_PRELUDE, CudaType, Element};
use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, Launch, ModuleSource, OpError, OpInfo, OpPlan, PlanRequest,
    Plugin, PluginInfo, SourceLanguage, Target, TensorDesc, TestCase, TuningHint, launch,
};

/// Dtypes MatMul supports.
pub const DTYPES: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::Bf16];
/// Tile edge of the CUDA kernel (threads per block: TILE×TILE).
pub const TILE: u32 = 16;
/// Batch dimensions beyond this are refused.
const MAX_BATCH_RANK: usize = MAX_RANK - 2;

pub struct MatMul;

impl Plugin for MatMul {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "matmul".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ops: vec![OpInfo {
                name: "MatMul".into(),
                targets: vec!["cpu".into(), "cuda".into()],
                priority: 0,
            }],
        }
    }

    fn plan(request: &PlanRequest) -> Result<OpPlan, OpError> {
        plan(request)
    }

    fn kernel_source(module_id: &str, _target: &Target) -> Result<ModuleSource, OpError> {
        let dt = module_id
            .strip_prefix("matmul_")
            .and_then(dtype::from_name)
            .filter(|d| DTYPES.contains(d))
            .ok_or_else(|| OpError::internal(format!("unknown module `{module_id}`")))?;
        Ok(cuda_module(dt))
    }

    fn self_tests() -> Vec<TestCase> {
        let t = |shape: &[u64], dt| TensorDesc::new("x", shape.to_vec(), dt);
        vec![
            umd_sdk::test_case(
                "2x3 @ 3x2",
                "MatMul",
                vec![
                    (t(&[2, 3], Dtype::F32), vec![1., 2., 3., 4., 5., 6.]),
                    (t(&[3, 2], Dtype::F32), vec![1., 0., 0., 1., 1., 1.]),
                ],
                vec![(Dtype::F32, vec![4., 5., 10., 11.])],
                1e-6,
            ),
            umd_sdk::test_case(
                "batched f16 with a shared right operand",
                "MatMul",
                vec![
                    (t(&[2, 1, 2], Dtype::F16), vec![1., 2., 3., 4.]),
                    (t(&[2, 1], Dtype::F16), vec![0.5, 0.25]),
                ],
                vec![(Dtype::F16, vec![1.0, 2.5])],
                1e-3,
            ),
        ]
    }

    fn tuning_hints() -> Vec<TuningHint> {
        vec![TuningHint {
            op: "MatMul".into(),
            key: "tile".into(),
            value: TILE.to_string(),
        }]
    }

    fn run_cpu(call: CpuCall) -> Result<Vec<CpuWrite>, OpError> {
        match call
            .entry_point
            .strip_prefix("matmul_")
            .and_then(dtype::from_name)
        {
            Some(Dtype::F32) => run_cpu::<f32>(&call),
            Some(Dtype::F16) => run_cpu::<f16>(&call),
            Some(Dtype::Bf16) => run_cpu::<bf16>(&call),
            _ => Err(OpError::internal(format!(
                "unknown entry point `{}`",
                call.entry_point
            ))),
        }
    }
}

umd_sdk::export_plugin!(MatMul);

/// The matrix view of one operand: batch dims, rows, cols.
struct Operand {
    batch: Vec<u64>,
    rows: u64,
    cols: u64,
}

fn u32_dim(v: u64, what: &str) -> Result<u32, OpError> {
    u32::try_from(v).map_err(|_| OpError::shape(format!("MatMul {what} of {v} exceeds 2^32-1")))
}

/// Plans MatMul with numpy semantics.
pub fn plan(request: &PlanRequest) -> Result<OpPlan, OpError> {
    if !umd_sdk::op_is(request, "MatMul") {
        return Err(umd_sdk::unsupported_op(request));
    }
    if let Some(a) = request.attributes.first() {
        return Err(OpError::InvalidAttribute(format!(
            "{}: unknown attribute `{}` (it takes none)",
            request.op, a.name
        )));
    }
    let [a, b] = &request.inputs[..] else {
        return Err(OpError::shape(format!(
            "MatMul takes 2 inputs, got {}",
            request.inputs.len()
        )));
    };
    let dt = a.dtype;
    if b.dtype != dt || !DTYPES.contains(&dt) {
        return Err(OpError::dtype(format!(
            "MatMul supports f32, f16 and bf16 inputs of one dtype, got {} and {}",
            dtype::name(a.dtype),
            dtype::name(b.dtype)
        )));
    }
    let view = |t: &TensorDesc, vector_is_row: bool| -> Result<Operand, OpError> {
        match t.shape.len() {
            0 => Err(OpError::shape(format!(
                "MatMul input `{}` is a scalar",
                t.name
            ))),
            1 if vector_is_row => Ok(Operand {
                batch: vec![],
                rows: 1,
                cols: t.shape[0],
            }),
            1 => Ok(Operand {
                batch: vec![],
                rows: t.shape[0],
                cols: 1,
            }),
            r if r - 2 > MAX_BATCH_RANK => Err(OpError::shape(format!(
                "MatMul input `{}` has {} batch dims, the maximum is {MAX_BATCH_RANK}",
                t.name,
                r - 2
            ))),
            r => Ok(Operand {
                batch: t.shape[..r - 2].to_vec(),
                rows: t.shape[r - 2],
                cols: t.shape[r - 1],
            }),
        }
    };
    let (va, vb) = (view(a, true)?, view(b, false)?);
    if va.cols != vb.rows {
        return Err(OpError::shape(format!(
            "MatMul inner dimensions differ: `{}` {:?} has K={}, `{}` {:?} has K={}",
            a.name, a.shape, va.cols, b.name, b.shape, vb.rows
        )));
    }
    let (m, k, n) = (va.rows, va.cols, vb.cols);
    let batch_shape = shape::broadcast(&va.batch, &vb.batch)?;
    let batch = shape::numel(&batch_shape)?;
    let mut out_shape = batch_shape.clone();
    if a.shape.len() > 1 {
        out_shape.push(m);
    }
    if b.shape.len() > 1 {
        out_shape.push(n);
    }
    shape::byte_size(&out_shape, dt)?;
    // Per-batch element strides of each operand in the broadcast batch shape.
    let batch_strides = |o: &Operand| -> Vec<u64> {
        shape::broadcast_strides(&o.batch, &batch_shape)
            .into_iter()
            .map(|s| s * o.rows * o.cols)
            .collect()
    };
    let limits = &request.target.limits;
    let (grid, block) = launch::tiles_2d(m, n, batch, TILE, limits)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(1, Access::Read)
        .ptr(2, Access::Write)
        .u32(u32_dim(m, "M")?)
        .u32(u32_dim(n, "N")?)
        .u32(u32_dim(k, "K")?)
        .u32(batch_shape.len() as u32)
        .u64_array(&shape::padded::<MAX_RANK>(&batch_shape, 1)?)
        .u64_array(&shape::padded::<MAX_RANK>(&batch_strides(&va), 0)?)
        .u64_array(&shape::padded::<MAX_RANK>(&batch_strides(&vb), 0)?);
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("out", out_shape, dt)],
        launches: vec![Launch {
            module_id: format!("matmul_{}", dtype::name(dt)),
            entry_point: format!("matmul_{}", dtype::name(dt)),
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

/// The CUDA module `matmul_{dtype}`.
pub fn cuda_module(dt: Dtype) -> ModuleSource {
    let CudaType {
        storage: t,
        load,
        store,
        ..
    } = dtype::cuda_type(dt).expect("matmul dtypes all have a CUDA type");
    let name = dtype::name(dt);
    let code = format!(
        "{CUDA_PRELUDE}
struct umd_dims {{ unsigned long long v[8]; }};
#define TILE {TILE}
extern \"C\" __global__ void matmul_{name}(const {t}* __restrict__ A, const {t}* __restrict__ B,
    {t}* __restrict__ C, unsigned int M, unsigned int N, unsigned int K, unsigned int brank,
    umd_dims bshape, umd_dims sa, umd_dims sb) {{
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  unsigned long long z = blockIdx.z, rem = z, oa = 0, ob = 0;
  for (int d = (int)brank - 1; d >= 0; --d) {{
    unsigned long long j = rem % bshape.v[d]; rem /= bshape.v[d];
    oa += j * sa.v[d]; ob += j * sb.v[d];
  }}
  const {t}* a = A + oa; const {t}* b = B + ob;
  {t}* c = C + z * (unsigned long long)M * N;
  unsigned int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (unsigned int t0 = 0; t0 < K; t0 += TILE) {{
    unsigned int ka = t0 + threadIdx.x, kb = t0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? {la} : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? {lb} : 0.0f;
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }}
  if (row < M && col < N) c[(unsigned long long)row * N + col] = {st};
}}
",
        la = load.replace('X', "a[(unsigned long long)row * K + ka]"),
        lb = load.replace('X', "b[(unsigned long long)kb * N + col]"),
        st = store.replace('X', "acc"),
    );
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: vec![format!("matmul_{name}")],
        options: vec!["--std=c++17".into()],
    }
}

/// The CPU kernel: accumulates in f32 in the same k order as the CUDA kernel.
fn run_cpu<T: Element<Compute = f32>>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (a, b, c) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let (m, n, k) = (r.u32()? as usize, r.u32()? as usize, r.u32()? as usize);
    let brank = r.u32()? as usize;
    let (bshape, sa, sb) = (
        r.u64_array::<MAX_RANK>()?,
        r.u64_array::<MAX_RANK>()?,
        r.u64_array::<MAX_RANK>()?,
    );
    if brank > MAX_RANK {
        return Err(OpError::internal(format!(
            "batch rank {brank} over {MAX_RANK}"
        )));
    }
    let batch: u64 = bshape[..brank].iter().product();
    let s = std::mem::size_of::<T>();
    let extent = |st: &[u64; MAX_RANK], mat: usize| {
        (0..brank)
            .map(|d| (bshape[d].saturating_sub(1)) * st[d])
            .sum::<u64>() as usize
            + mat
    };
    let a = bufs.input(a, (extent(&sa, m * k) * s) as u64)?;
    let b = bufs.input(b, (extent(&sb, k * n) * s) as u64)?;
    let mut out = bufs.output(c, batch * (m * n * s) as u64)?;
    let load = |buf: &[u8], i: usize| -> f32 { T::load(&buf[i * s..i * s + s]).to_compute() };
    let mut acc = vec![0f32; n];
    for z in 0..batch {
        let (mut rem, mut oa, mut ob) = (z, 0u64, 0u64);
        for d in (0..brank).rev() {
            let j = rem % bshape[d];
            rem /= bshape[d];
            oa += j * sa[d];
            ob += j * sb[d];
        }
        let (oa, ob) = (oa as usize, ob as usize);
        let c_base = z as usize * m * n;
        for i in 0..m {
            acc.fill(0.0);
            for kk in 0..k {
                let x = load(a, oa + i * k + kk);
                let row = ob + kk * n;
                for (j, acc) in acc.iter_mut().enumerate() {
                    *acc += x * load(b, row + j);
                }
            }
            for (j, v) in acc.iter().enumerate() {
                let at = (c_base + i * n + j) * s;
                T::from_compute(*v).store(&mut out.data[at..at + s]);
            }
        }
    }
    Ok(vec![out])
}

#[cfg(test)]
mod tests;
