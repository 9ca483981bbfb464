//! QLinearMatMul (opsets 10, 21) on int8/uint8: a simple kernel, one thread per output element.
//!
//! `acc = Σ_k (a − a_zp)(b − b_zp)` exactly (64-bit), the multiplier `a_scale · b_scale / y_scale`
//! rounded after each step to the scales' dtype (as numpy computes it), then
//! `y = saturate(rint(acc · multiplier + y_zp))` in f64. Scales and zero points are per tensor
//! (one element) or per row of a (`M` elements) / per column of b (`N` elements). Batch
//! dimensions broadcast as in MatMul; a 1-D a or b is promoted as numpy does.
//!
//! Parameters: `flags` (bit 0 a_zp, 1 b_zp, 2 y_zp present), `prec` (the scales' precision
//! code), pointers `a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, y` (absent ones 0), then
//! `M, K, N, batches, rank` and `umd_dims` batch dims, a's and b's batch strides (elements), then
//! `as_n, bs_n` (1 or M / N). Module and entry `quant_qmm_{A}_{B}_{S}_{Y}`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, cpu, dtype,
};

use crate::elem::{clamp, int_range, loader, precision_code, precision_dtype, round_to, storer};
use crate::plan::{bad_dtype, linear_launch, max_inputs, opt_ptr, read_opt_ptr};

/// Quantized dtypes served.
pub const INTS: [Dtype; 2] = [Dtype::I8, Dtype::U8];
/// Scale dtypes served.
pub const SCALES: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::Bf16];

/// The module (and entry) of one dtype combination.
pub fn module_id(a: Dtype, b: Dtype, s: Dtype, y: Dtype) -> String {
    let n = dtype::name;
    format!("quant_qmm_{}_{}_{}_{}", n(a), n(b), n(s), n(y))
}

/// Parses [`module_id`].
pub fn parse(id: &str) -> Option<[Dtype; 4]> {
    let v: Vec<Dtype> = id
        .strip_prefix("quant_qmm_")?
        .split('_')
        .map(dtype::from_name)
        .collect::<Option<_>>()?;
    let d: [Dtype; 4] = v.try_into().ok()?;
    (INTS.contains(&d[0]) && INTS.contains(&d[1]) && SCALES.contains(&d[2]) && INTS.contains(&d[3]))
        .then_some(d)
}

/// Plans QLinearMatMul.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &[])?;
    max_inputs(req, 8)?;
    let a = req.required(0)?;
    let b = req.required(3)?;
    for t in [a, b] {
        if !INTS.contains(&t.dtype) {
            return Err(bad_dtype(req, &format!("`{}`", t.name), t.dtype, &INTS));
        }
        if t.shape.is_empty() || t.shape.len() > MAX_RANK {
            return Err(OpError::shape(format!(
                "QLinearMatMul: `{}` has rank {}; ranks 1 to {MAX_RANK} are served",
                t.name,
                t.shape.len()
            )));
        }
    }
    let s_dt = req.required(1)?.dtype;
    if !SCALES.contains(&s_dt) {
        return Err(bad_dtype(req, "a_scale", s_dt, &SCALES));
    }
    for slot in [4, 6] {
        if req.required(slot)?.dtype != s_dt {
            return Err(OpError::dtype(
                "QLinearMatMul: the three scales must have one dtype",
            ));
        }
    }
    for (slot, of) in [(2, a.dtype), (5, b.dtype)] {
        if let Some(z) = req.input(slot)
            && z.dtype != of
        {
            return Err(OpError::dtype(format!(
                "QLinearMatMul: zero point `{}` is {}, its tensor {}",
                z.name,
                dtype::name(z.dtype),
                dtype::name(of)
            )));
        }
    }
    let y_dt = req.input(7).map_or(a.dtype, |z| z.dtype);
    if !INTS.contains(&y_dt) {
        return Err(bad_dtype(req, "y_zero_point", y_dt, &INTS));
    }
    // numpy promotion of 1-D operands
    let (mut ash, mut bsh) = (a.shape.clone(), b.shape.clone());
    let a1 = ash.len() == 1;
    let b1 = bsh.len() == 1;
    if a1 {
        ash.insert(0, 1);
    }
    if b1 {
        bsh.push(1);
    }
    let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let (k2, n) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
    if k != k2 {
        return Err(OpError::shape(format!(
            "QLinearMatMul: inner dimensions differ: a {:?}, b {:?}",
            a.shape, b.shape
        )));
    }
    let (ab, bb) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
    let batch = shape::broadcast(ab, bb)?;
    let a_str: Vec<u64> = shape::broadcast_strides(ab, &batch)
        .iter()
        .map(|s| s * m * k)
        .collect();
    let b_str: Vec<u64> = shape::broadcast_strides(bb, &batch)
        .iter()
        .map(|s| s * k * n)
        .collect();
    let batches = shape::numel(&batch)?;
    let mut out = batch.clone();
    if !a1 {
        out.push(m);
    }
    if !b1 {
        out.push(n);
    }
    let total = shape::numel(&out)?;
    shape::byte_size(&out, Dtype::F64)?;
    let count = |slot: usize, per: u64, what: &str| -> Result<u64, OpError> {
        match req.input(slot) {
            None => Ok(0),
            Some(t) => {
                let c = shape::numel(&t.shape)?;
                if c == 1 || c == per {
                    Ok(c)
                } else {
                    Err(OpError::shape(format!(
                        "QLinearMatMul: `{}` has {c} elements; 1 or {per} ({what}) are served",
                        t.name
                    )))
                }
            }
        }
    };
    let (as_n, azp_n) = (count(1, m, "per row of a")?, count(2, m, "per row of a")?);
    let (bs_n, bzp_n) = (
        count(4, n, "per column of b")?,
        count(5, n, "per column of b")?,
    );
    if count(6, 1, "per tensor")? != 1 || count(7, 1, "per tensor")? > 1 {
        return Err(OpError::shape(
            "QLinearMatMul: y_scale and y_zero_point are per tensor",
        ));
    }
    if (azp_n != 0 && azp_n != as_n) || (bzp_n != 0 && bzp_n != bs_n) {
        return Err(OpError::shape(
            "QLinearMatMul: a zero point must have its scale's element count",
        ));
    }
    let flags =
        (azp_n != 0) as u32 | ((bzp_n != 0) as u32) << 1 | (req.input(7).is_some() as u32) << 2;
    let mut p = ParamPacker::new();
    p.u32(flags).u32(precision_code(s_dt));
    p.ptr(req.binding(0).unwrap(), Access::Read);
    p.ptr(req.binding(1).unwrap(), Access::Read);
    opt_ptr(&mut p, req.binding(2));
    p.ptr(req.binding(3).unwrap(), Access::Read);
    p.ptr(req.binding(4).unwrap(), Access::Read);
    opt_ptr(&mut p, req.binding(5));
    p.ptr(req.binding(6).unwrap(), Access::Read);
    opt_ptr(&mut p, req.binding(7));
    p.ptr(req.output_binding(0), Access::Write);
    p.u64(m).u64(k).u64(n).u64(batches).u64(batch.len() as u64);
    p.u64_array(&shape::padded::<8>(&batch, 1)?)
        .u64_array(&shape::padded::<8>(&a_str, 0)?)
        .u64_array(&shape::padded::<8>(&b_str, 0)?);
    p.u64(as_n).u64(bs_n);
    let id = module_id(a.dtype, b.dtype, s_dt, y_dt);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out, y_dt)],
        launches: vec![linear_launch(req, id.clone(), id, total, p)?],
        workspace_bytes: 0,
    })
}

/// Runs the op's launch on the CPU.
pub fn run_cpu(
    call: &CpuCall,
    [a_dt, b_dt, s_dt, y_dt]: [Dtype; 4],
) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let prec = precision_dtype(r.u32()?);
    let ab = r.ptr()?;
    let asb = r.ptr()?;
    let azb = read_opt_ptr(&mut r, flags & 1 != 0)?;
    let bb = r.ptr()?;
    let bsb = r.ptr()?;
    let bzb = read_opt_ptr(&mut r, flags & 2 != 0)?;
    let ysb = r.ptr()?;
    let yzb = read_opt_ptr(&mut r, flags & 4 != 0)?;
    let yb = r.ptr()?;
    let (m, k, n, batches, rank) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()? as usize);
    let dims = r.u64_array::<8>()?;
    let a_str = r.u64_array::<8>()?;
    let b_str = r.u64_array::<8>()?;
    let (as_n, bs_n) = (r.u64()?, r.u64()?);
    let bufs = cpu::Buffers::new(call);
    let total = batches * m * n;
    let mut out = bufs.output(yb, total * dtype::size(y_dt) as u64)?;
    if total == 0 {
        return Ok(vec![out]);
    }
    let sz = |dt| dtype::size(dt) as u64;
    let a_len = (0..rank).map(|d| (dims[d] - 1) * a_str[d]).sum::<u64>() + m * k;
    let b_len = (0..rank).map(|d| (dims[d] - 1) * b_str[d]).sum::<u64>() + k * n;
    let a = bufs.input(ab, a_len * sz(a_dt))?;
    let b = bufs.input(bb, b_len * sz(b_dt))?;
    let ls = loader(s_dt)?;
    let scales_a = bufs.input(asb, as_n * sz(s_dt))?;
    let scales_b = bufs.input(bsb, bs_n * sz(s_dt))?;
    let y_scale = ls(bufs.input(ysb, sz(s_dt))?, 0);
    let zps = |zb: Option<u32>, dt: Dtype, len: u64| -> Result<Vec<i64>, OpError> {
        Ok(match zb {
            Some(zb) => {
                let l = loader(dt)?;
                let buf = bufs.input(zb, len * sz(dt))?;
                (0..len as usize).map(|i| l(buf, i) as i64).collect()
            }
            None => vec![0; len as usize],
        })
    };
    let a_zp = zps(azb, a_dt, as_n)?;
    let b_zp = zps(bzb, b_dt, bs_n)?;
    let y_zp = zps(yzb, y_dt, 1)?[0] as f64;
    let (la, lb) = (loader(a_dt)?, loader(b_dt)?);
    let (lo, hi) = int_range(y_dt).expect("integer output");
    let st = storer(y_dt)?;
    let pick = |cnt: u64, i: u64| if cnt == 1 { 0 } else { i as usize };
    let mut col = vec![0i64; k as usize];
    let mut row = vec![0i64; k as usize];
    for bt in 0..batches {
        let (mut rem, mut ao, mut bo) = (bt, 0u64, 0u64);
        for d in (0..rank).rev() {
            let idx = rem % dims[d];
            rem /= dims[d];
            ao += idx * a_str[d];
            bo += idx * b_str[d];
        }
        for j in 0..n {
            let bz = b_zp[pick(bs_n, j)];
            for (kk, c) in col.iter_mut().enumerate() {
                *c = lb(b, (bo + kk as u64 * n + j) as usize) as i64 - bz;
            }
            for i in 0..m {
                let az = a_zp[pick(as_n, i)];
                for (kk, rv) in row.iter_mut().enumerate() {
                    *rv = la(a, (ao + i * k + kk as u64) as usize) as i64 - az;
                }
                let acc: i64 = row.iter().zip(&col).map(|(x, y)| x * y).sum();
                let sa = ls(scales_a, pick(as_n, i));
                let sb = ls(scales_b, pick(bs_n, j));
                let mult = round_to(prec, round_to(prec, sa * sb) / y_scale);
                let v = (acc as f64 * mult + y_zp).round_ties_even();
                st(
                    &mut out.data,
                    ((bt * m + i) * n + j) as usize,
                    clamp(v, lo, hi),
                );
            }
        }
    }
    Ok(vec![out])
}
