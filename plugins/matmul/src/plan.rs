//! Planning MatMul (numpy semantics), Gemm and MatMulInteger onto one strided, batched product
//! `Y[z][i][j] = Σ_k A[z](i, k) · B[z](k, j)` (then Gemm's `alpha`, `beta · C`), described by a
//! [`Geometry`]: element strides of A over (i, k) and of B over (k, j) cover `transA`/`transB`,
//! and per-batch strides cover broadcast batch dimensions.
//!
//! Parameter blocks (the CUDA signatures in [`crate::cuda`] follow them exactly):
//! - `matmul_{T}`: `flags (1: C bound), A, B, C (or null), Y, alpha, beta, scm, scn`, geometry.
//! - `matmulint_{TA}_{TB}`: `flags (1: a_zero_point, 2: b_zero_point), A, B, azp, bzp, Y,
//!   azs, bzs` (zero-point strides per row of A / column of B: 0 per tensor, 1 per row/column),
//!   geometry.
//! - geometry: `M, N, K, sam, sak, sbk, sbn` (u64), `brank` (u32), `bshape, sa, sb` (`u64[8]`).

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, Dim3, Dtype, Launch, OpError, OpPlan, PlanRequestExt, TargetLimits, TensorDesc, attr,
    dtype, launch,
};

use crate::{DTYPES, INT8, TILE};

/// Batch dimensions beyond this are refused.
const MAX_BATCH_RANK: usize = MAX_RANK - 2;

/// The shape of one batched product.
#[derive(Debug, Clone, PartialEq)]
pub struct Geometry {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Element strides of A over (row i, depth k) and of B over (depth k, column j).
    pub sam: u64,
    pub sak: u64,
    pub sbk: u64,
    pub sbn: u64,
    /// Broadcast batch shape and each operand's element stride per batch dimension.
    pub bshape: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
}

impl Geometry {
    pub fn batch(&self) -> u64 {
        self.bshape.iter().product()
    }

    pub fn pack(&self, p: &mut ParamPacker) -> Result<(), OpError> {
        p.u64(self.m)
            .u64(self.n)
            .u64(self.k)
            .u64(self.sam)
            .u64(self.sak)
            .u64(self.sbk)
            .u64(self.sbn)
            .u32(self.bshape.len() as u32)
            .u64_array(&shape::padded::<MAX_RANK>(&self.bshape, 1)?)
            .u64_array(&shape::padded::<MAX_RANK>(&self.sa, 0)?)
            .u64_array(&shape::padded::<MAX_RANK>(&self.sb, 0)?);
        Ok(())
    }

    pub fn read(r: &mut ParamReader) -> Result<Geometry, OpError> {
        let (m, n, k) = (r.u64()?, r.u64()?, r.u64()?);
        let (sam, sak, sbk, sbn) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
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
        Ok(Geometry {
            m,
            n,
            k,
            sam,
            sak,
            sbk,
            sbn,
            bshape: bshape[..brank].to_vec(),
            sa: sa[..brank].to_vec(),
            sb: sb[..brank].to_vec(),
        })
    }

    /// Element offsets of A and B for batch `z`.
    pub fn batch_offsets(&self, z: u64) -> (u64, u64) {
        let (mut rem, mut oa, mut ob) = (z, 0, 0);
        for d in (0..self.bshape.len()).rev() {
            let j = rem % self.bshape[d];
            rem /= self.bshape[d];
            oa += j * self.sa[d];
            ob += j * self.sb[d];
        }
        (oa, ob)
    }

    /// 16×16 tiles: columns in grid x, rows in grid y and batches in grid z (both strided over
    /// by the kernel when they exceed the grid).
    pub fn launch_shape(&self, limits: &TargetLimits) -> Result<(Dim3, Dim3), OpError> {
        let tiles_n = launch::blocks_for(self.n, TILE as u64);
        if tiles_n > limits.max_grid_dims.x as u64 {
            return Err(OpError::shape(format!(
                "N = {} needs {tiles_n} column tiles, over the grid limit",
                self.n
            )));
        }
        let grid = Dim3 {
            x: tiles_n as u32,
            y: launch::blocks_for(self.m, TILE as u64).min(limits.max_grid_dims.y as u64) as u32,
            z: self.batch().clamp(1, limits.max_grid_dims.z as u64) as u32,
        };
        let block = Dim3 {
            x: TILE,
            y: TILE,
            z: 1,
        };
        launch::check(grid, block, 0, limits)?;
        Ok((grid, block))
    }
}

/// The matrix view of one MatMul operand: batch dims, rows, cols.
struct Operand {
    batch: Vec<u64>,
    rows: u64,
    cols: u64,
}

/// numpy matmul of `a` and `b`: the geometry (contiguous operands) and the output shape.
fn matmul_geometry(a: &TensorDesc, b: &TensorDesc) -> Result<(Geometry, Vec<u64>), OpError> {
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
    let bshape = shape::broadcast(&va.batch, &vb.batch)?;
    let mut out = bshape.clone();
    if a.shape.len() > 1 {
        out.push(m);
    }
    if b.shape.len() > 1 {
        out.push(n);
    }
    shape::numel(&out)?;
    let strides = |o: &Operand| -> Vec<u64> {
        shape::broadcast_strides(&o.batch, &bshape)
            .into_iter()
            .map(|s| s * o.rows * o.cols)
            .collect()
    };
    let g = Geometry {
        m,
        n,
        k,
        sam: k,
        sak: 1,
        sbk: n,
        sbn: 1,
        sa: strides(&va),
        sb: strides(&vb),
        bshape,
    };
    Ok((g, out))
}

/// The request's input slots `0..count` (all required, none beyond `max`).
fn inputs(req: &PlanRequestExt, required: usize, max: usize) -> Result<(), OpError> {
    if req.slots() > max || req.slots() < required {
        return Err(OpError::shape(format!(
            "{} takes {required} to {max} inputs, got {}",
            req.op,
            req.slots()
        )));
    }
    if req.outputs(1) != 1 {
        return Err(OpError::shape(format!("{} has one output", req.op)));
    }
    Ok(())
}

fn same_dtype(req: &PlanRequestExt, served: &[Dtype], slots: &[usize]) -> Result<Dtype, OpError> {
    let dt = req.required(0)?.dtype;
    let names: Vec<&str> = served.iter().map(|d| dtype::name(*d)).collect();
    for &s in slots {
        if let Some(t) = req.input(s)
            && (t.dtype != dt || !served.contains(&dt))
        {
            return Err(OpError::dtype(format!(
                "{} serves inputs of one dtype among {}; got {} and {}",
                req.op,
                names.join(", "),
                dtype::name(dt),
                dtype::name(t.dtype)
            )));
        }
    }
    Ok(dt)
}

fn plan_of(
    req: &PlanRequestExt,
    module: String,
    entry: String,
    g: &Geometry,
    p: ParamPacker,
    out: TensorDesc,
) -> Result<OpPlan, OpError> {
    let limits = &req.target.limits;
    let (grid, block) = g.launch_shape(limits)?;
    let (params, relocations) = p.finish(limits.max_param_bytes)?;
    Ok(OpPlan {
        outputs: vec![out],
        launches: vec![Launch {
            module_id: module,
            entry_point: entry,
            grid,
            block,
            shared_memory: 0,
            params,
            relocations,
        }],
        workspace_bytes: 0,
    })
}

/// Packs the `matmul_{T}` block: `flags, A, B, C, Y, alpha, beta, scm, scn`, geometry.
fn float_params(
    req: &PlanRequestExt,
    c: Option<(u32, u64, u64)>,
    alpha: f64,
    beta: f64,
    g: &Geometry,
) -> Result<ParamPacker, OpError> {
    let mut p = ParamPacker::new();
    p.u32(c.is_some() as u32)
        .ptr(0, Access::Read)
        .ptr(1, Access::Read);
    match c {
        Some((b, _, _)) => p.ptr(b, Access::Read),
        None => p.u64(0),
    };
    let (scm, scn) = c.map_or((0, 0), |(_, m, n)| (m, n));
    p.ptr(req.output_binding(0), Access::Write)
        .f64(alpha)
        .f64(beta)
        .u64(scm)
        .u64(scn);
    g.pack(&mut p)?;
    Ok(p)
}

/// Plans one request (the op already matched against [`crate::OPS`]).
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    if req.op.eq_ignore_ascii_case("MatMul") {
        plan_matmul(req)
    } else if req.op.eq_ignore_ascii_case("Gemm") {
        plan_gemm(req)
    } else if req.op.eq_ignore_ascii_case("MatMulInteger") {
        plan_matmul_integer(req)
    } else {
        Err(umd_sdk::unsupported_op_ext(req))
    }
}

fn plan_matmul(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &[])?;
    inputs(req, 2, 2)?;
    let dt = same_dtype(req, &DTYPES, &[0, 1])?;
    let (a, b) = (req.required(0)?, req.required(1)?);
    let (g, out) = matmul_geometry(a, b)?;
    shape::byte_size(&out, dt)?;
    let p = float_params(req, None, 1.0, 0.0, &g)?;
    let name = dtype::name(dt);
    let out = TensorDesc::new("Y", out, dt);
    plan_of(
        req,
        format!("matmul_{name}"),
        format!("matmul_{name}"),
        &g,
        p,
        out,
    )
}

fn plan_gemm(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    // `broadcast` (opset < 7): 0 requires C of the exact output shape
    attr::only(
        &req.attributes,
        &["alpha", "beta", "transA", "transB", "broadcast"],
    )?;
    inputs(req, 2, 3)?;
    let dt = same_dtype(req, &DTYPES, &[0, 1, 2])?;
    let (a, b) = (req.required(0)?, req.required(1)?);
    let alpha = attr::float_or(&req.attributes, "alpha", 1.0)?;
    let beta = attr::float_or(&req.attributes, "beta", 1.0)?;
    let (ta, tb) = (
        attr::bool_or(&req.attributes, "transA", false)?,
        attr::bool_or(&req.attributes, "transB", false)?,
    );
    let broadcast = attr::bool_or(&req.attributes, "broadcast", true)?;
    if !dtype_is_float(dt) {
        for (name, v) in [("alpha", alpha), ("beta", beta)] {
            if v.fract() != 0.0 || v.abs() > i64::MAX as f64 {
                return Err(OpError::InvalidAttribute(format!(
                    "attribute `{name}` = {v} must be a whole number for {} Gemm",
                    dtype::name(dt)
                )));
            }
        }
    }
    for t in [a, b] {
        if t.shape.len() != 2 {
            return Err(OpError::shape(format!(
                "Gemm input `{}` has shape {:?}; A and B are matrices",
                t.name, t.shape
            )));
        }
    }
    let (m, ka) = if ta {
        (a.shape[1], a.shape[0])
    } else {
        (a.shape[0], a.shape[1])
    };
    let (kb, n) = if tb {
        (b.shape[1], b.shape[0])
    } else {
        (b.shape[0], b.shape[1])
    };
    if ka != kb {
        return Err(OpError::shape(format!(
            "Gemm inner dimensions differ: op(A) is {m}x{ka}, op(B) is {kb}x{n}"
        )));
    }
    let out = vec![m, n];
    shape::byte_size(&out, dt)?;
    // C, unidirectionally broadcast to (M, N): element (i, j) at i * scm + j * scn
    let c = match req.input(2) {
        Some(c) if beta != 0.0 => {
            let fits = match c.shape[..] {
                [] => Some((1, 1)),
                [cn] => Some((1, cn)),
                [cm, cn] => Some((cm, cn)),
                _ => None,
            }
            .filter(|&(cm, cn)| (cm == 1 || cm == m) && (cn == 1 || cn == n))
            .filter(|&(cm, cn)| broadcast || (cm == m && cn == n && c.shape.len() == 2));
            let Some((cm, cn)) = fits else {
                return Err(OpError::shape(format!(
                    "Gemm input C `{}` of shape {:?} does not broadcast to [{m}, {n}]",
                    c.name, c.shape
                )));
            };
            let binding = req.binding(2).expect("present");
            Some((binding, if cm == 1 { 0 } else { cn }, (cn != 1) as u64))
        }
        _ => None,
    };
    let g = Geometry {
        m,
        n,
        k: ka,
        sam: if ta { 1 } else { ka },
        sak: if ta { m } else { 1 },
        sbk: if tb { 1 } else { n },
        sbn: if tb { ka } else { 1 },
        bshape: vec![],
        sa: vec![],
        sb: vec![],
    };
    let p = float_params(req, c, alpha, beta, &g)?;
    let name = dtype::name(dt);
    let out = TensorDesc::new("Y", out, dt);
    plan_of(
        req,
        format!("matmul_{name}"),
        format!("matmul_{name}"),
        &g,
        p,
        out,
    )
}

fn dtype_is_float(dt: Dtype) -> bool {
    umd_sdk::request::is_float(dt)
}

fn plan_matmul_integer(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &[])?;
    inputs(req, 2, 4)?;
    let (a, b) = (req.required(0)?, req.required(1)?);
    for t in [a, b] {
        if !INT8.contains(&t.dtype) {
            return Err(OpError::dtype(format!(
                "MatMulInteger serves u8 and i8 inputs, `{}` is {}",
                t.name,
                dtype::name(t.dtype)
            )));
        }
    }
    let (g, out) = matmul_geometry(a, b)?;
    shape::byte_size(&out, Dtype::I32)?;
    // zero points: per tensor (one element) or per row of A / per column of B
    let zero_point = |slot: usize, of: &TensorDesc, per: u64, what: &str| {
        let Some(z) = req.input(slot) else {
            return Ok(None);
        };
        if z.dtype != of.dtype {
            return Err(OpError::dtype(format!(
                "MatMulInteger: zero point `{}` is {}, its input is {}",
                z.name,
                dtype::name(z.dtype),
                dtype::name(of.dtype)
            )));
        }
        let count = shape::numel(&z.shape)?;
        let stride = if count == 1 {
            0
        } else if count == per
            && z.shape.len() <= 2
            && z.shape.iter().filter(|&&d| d != 1).count() <= 1
        {
            1
        } else {
            return Err(OpError::shape(format!(
                "MatMulInteger: zero point `{}` of shape {:?} is neither per tensor nor per {what} \
                 ({per} elements)",
                z.name, z.shape
            )));
        };
        Ok(Some((req.binding(slot).expect("present"), stride)))
    };
    let az = zero_point(2, a, g.m, "row of A")?;
    let bz = zero_point(3, b, g.n, "column of B")?;
    if (az.is_some_and(|z| z.1 == 1) && a.shape.len() > 2)
        || (bz.is_some_and(|z| z.1 == 1) && b.shape.len() > 2)
    {
        return Err(OpError::shape(
            "MatMulInteger: per-row/column zero points of batched inputs are not served",
        ));
    }
    let mut p = ParamPacker::new();
    p.u32(az.is_some() as u32 | (bz.is_some() as u32) << 1)
        .ptr(0, Access::Read)
        .ptr(1, Access::Read);
    for z in [az, bz] {
        match z {
            Some((b, _)) => p.ptr(b, Access::Read),
            None => p.u64(0),
        };
    }
    p.ptr(req.output_binding(0), Access::Write)
        .u64(az.map_or(0, |z| z.1))
        .u64(bz.map_or(0, |z| z.1));
    g.pack(&mut p)?;
    let entry = format!(
        "matmulint_{}_{}",
        dtype::name(a.dtype),
        dtype::name(b.dtype)
    );
    let out = TensorDesc::new("Y", out, Dtype::I32);
    plan_of(req, "matmul_int8".into(), entry, &g, p, out)
}
