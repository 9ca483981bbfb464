//! QuantizeLinear and DequantizeLinear (opsets 10–25): planning and the CPU kernel.
//!
//! Scale and zero point are per tensor (one element), per axis (1-D, `x.shape[axis]` long) or
//! blocked (`block_size` > 0: x's shape with `ceil(x.shape[axis] / block_size)` at `axis`). The
//! kernel finds the scale of element `e` of x, viewed as `(outer, len, inner)` around `axis`, at
//! `o * so + (a / block) * sa + i * si` — `(so, sa, si)` = `(0, 0, 0)` per tensor, `(0, 1, 0)`
//! per axis, `(nb * inner, inner, 1)` blocked.
//!
//! Parameters (both ops): `flags` (bit 0 zero point present, bit 1 saturate (Q) or "wide": f64
//! arithmetic (DQ)), `prec` (Q: the precision code of the division), `x, scale, zero_point
//! (or 0), y, n, inner, len, block, so, sa, si`. Module and entry `quant_{q|dq}_{X}_{S}_{Y}`.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, cpu, dtype,
};

use crate::elem::{self, clamp, int_range, loader, precision_code, round_to, storer};
use crate::f8;
use crate::plan::{bad_dtype, from_onnx, linear_launch, max_inputs, norm_axis, opt_ptr};

/// Dtypes QuantizeLinear reads x in.
pub const Q_X: [Dtype; 5] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64, Dtype::I32];
/// Scale dtypes (both ops).
pub const SCALES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::F8e8m0,
];
/// Quantized dtypes (Q's output, DQ's input; DQ also reads i32); the packed ones (ABI 1.4)
/// last.
pub const QUANTIZED: [Dtype; 13] = [
    Dtype::I8,
    Dtype::U8,
    Dtype::I16,
    Dtype::U16,
    Dtype::F8e4m3fn,
    Dtype::F8e4m3fnuz,
    Dtype::F8e5m2,
    Dtype::F8e5m2fnuz,
    Dtype::I4,
    Dtype::U4,
    Dtype::I2,
    Dtype::U2,
    Dtype::F4e2m1,
];
/// DequantizeLinear's output dtypes.
pub const DQ_Y: [Dtype; 4] = [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64];

/// Where the scale of each element is: see the module doc.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleView {
    pub inner: u64,
    pub len: u64,
    pub block: u64,
    pub so: u64,
    pub sa: u64,
    pub si: u64,
}

impl ScaleView {
    /// The scale index of element `e`.
    #[inline(always)]
    pub fn index(&self, e: u64) -> u64 {
        let i = e % self.inner;
        let t = e / self.inner;
        (t / self.len) * self.so + ((t % self.len) / self.block) * self.sa + i * self.si
    }
}

/// The scale view of x of shape `x` and scale (and zero point) of shape `s`.
pub fn scale_view(
    op: &str,
    x: &[u64],
    s: &[u64],
    axis: i64,
    block_size: i64,
) -> Result<ScaleView, OpError> {
    let tensor = ScaleView {
        inner: 1,
        len: 1,
        block: 1,
        so: 0,
        sa: 0,
        si: 0,
    };
    if shape::numel(s)? == 1 {
        return Ok(tensor);
    }
    if block_size < 0 {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `block_size` = {block_size} must be >= 0"
        )));
    }
    let a = norm_axis(axis, x.len())?;
    let (len, inner) = (x[a], x[a + 1..].iter().product::<u64>());
    if block_size == 0 {
        if s.len() != 1 || s[0] != len {
            return Err(OpError::shape(format!(
                "{op}: the scale has shape {s:?}; per-axis scales are 1-D of x.shape[{a}] = {len} \
                 elements (x has shape {x:?})"
            )));
        }
        return Ok(ScaleView {
            inner,
            len,
            block: 1,
            so: 0,
            sa: 1,
            si: 0,
        });
    }
    let block = block_size as u64;
    let nb = len.div_ceil(block);
    let fits = s.len() == x.len()
        && s.iter()
            .zip(x)
            .enumerate()
            .all(|(d, (&sd, &xd))| if d == a { sd == nb } else { sd == xd });
    if !fits {
        return Err(OpError::shape(format!(
            "{op}: blocked scale of shape {s:?} does not match x {x:?} with block_size \
             {block_size} on axis {a} (expected {nb} blocks there)"
        )));
    }
    Ok(ScaleView {
        inner,
        len,
        block,
        so: nb * inner,
        sa: inner,
        si: 1,
    })
}

/// The module (and entry point) of one dtype combination.
pub fn module_id(quantize: bool, x: Dtype, s: Dtype, y: Dtype) -> String {
    format!(
        "quant_{}_{}_{}_{}",
        if quantize { "q" } else { "dq" },
        dtype::name(x),
        dtype::name(s),
        dtype::name(y)
    )
}

/// Plans QuantizeLinear (`quantize`) or DequantizeLinear.
pub fn plan(req: &PlanRequestExt, quantize: bool) -> Result<OpPlan, OpError> {
    let attrs = &req.attributes;
    if quantize {
        attr::only(
            attrs,
            &[
                "axis",
                "saturate",
                "block_size",
                "output_dtype",
                "precision",
            ],
        )?;
    } else {
        attr::only(attrs, &["axis", "block_size", "output_dtype"])?;
    }
    max_inputs(req, 3)?;
    let x = req.required(0)?;
    let s = req.required(1)?;
    let zp = req.input(2);
    if x.shape.len() > MAX_RANK {
        return Err(OpError::shape(format!(
            "{}: rank {} exceeds {MAX_RANK}",
            req.op,
            x.shape.len()
        )));
    }
    let n = shape::numel(&x.shape)?;
    shape::byte_size(&x.shape, Dtype::F64)?;
    if !SCALES.contains(&s.dtype) {
        return Err(bad_dtype(req, "the scale", s.dtype, &SCALES));
    }
    let view = scale_view(
        &req.op,
        &x.shape,
        &s.shape,
        attr::int_or(attrs, "axis", 1)?,
        attr::int_or(attrs, "block_size", 0)?,
    )?;
    if let Some(z) = zp
        && z.shape != s.shape
        && !(shape::numel(&z.shape)? == 1 && shape::numel(&s.shape)? == 1)
    {
        return Err(OpError::shape(format!(
            "{}: zero point shape {:?} differs from the scale's {:?}",
            req.op, z.shape, s.shape
        )));
    }
    let out_attr = match attr::int_or(attrs, "output_dtype", 0)? {
        0 => None,
        code => Some(from_onnx(code).ok_or_else(|| {
            OpError::dtype(format!(
                "{}: output_dtype {code} is not a umd dtype",
                req.op
            ))
        })?),
    };
    let mut flags = zp.is_some() as u32;
    let (y_dt, prec) = if quantize {
        if !Q_X.contains(&x.dtype) {
            return Err(bad_dtype(req, "x", x.dtype, &Q_X));
        }
        let y_dt = match (zp, out_attr) {
            (Some(z), Some(o)) if z.dtype != o => {
                return Err(OpError::InvalidAttribute(format!(
                    "QuantizeLinear: output_dtype {} differs from the zero point's {}",
                    dtype::name(o),
                    dtype::name(z.dtype)
                )));
            }
            (Some(z), _) => z.dtype,
            (None, Some(o)) => o,
            (None, None) => Dtype::U8,
        };
        if !QUANTIZED.contains(&y_dt) {
            return Err(bad_dtype(req, "the output", y_dt, &QUANTIZED));
        }
        if attr::bool_or(attrs, "saturate", true)? {
            flags |= 2;
        }
        let prec = match attr::int_or(attrs, "precision", 0)? {
            0 => s.dtype,
            code => from_onnx(code)
                .filter(|d| DQ_Y.contains(d))
                .ok_or_else(|| {
                    OpError::InvalidAttribute(format!(
                        "attribute `precision` = {code}: served are float, float16, bfloat16 and double"
                    ))
                })?,
        };
        (y_dt, precision_code(prec))
    } else {
        let mut served = QUANTIZED.to_vec();
        served.push(Dtype::I32);
        if !served.contains(&x.dtype) {
            return Err(bad_dtype(req, "x", x.dtype, &served));
        }
        if let Some(z) = zp
            && z.dtype != x.dtype
        {
            return Err(OpError::dtype(format!(
                "DequantizeLinear: the zero point is {}, x is {}",
                dtype::name(z.dtype),
                dtype::name(x.dtype)
            )));
        }
        if dtype::is_f8(x.dtype) || x.dtype == Dtype::F4e2m1 {
            flags &= !1; // a float8/float4 zero point is ignored (0 by definition)
        }
        let y_dt = out_attr.unwrap_or(s.dtype);
        if !DQ_Y.contains(&y_dt) {
            return Err(bad_dtype(req, "the output", y_dt, &DQ_Y));
        }
        if x.dtype == Dtype::I32 || s.dtype == Dtype::F64 || y_dt == Dtype::F64 {
            flags |= 2;
        }
        (y_dt, 0)
    };
    let id = module_id(quantize, x.dtype, s.dtype, y_dt);
    let mut p = ParamPacker::new();
    p.u32(flags).u32(prec);
    p.ptr(0, Access::Read).ptr(1, Access::Read);
    opt_ptr(&mut p, req.binding(2).filter(|_| flags & 1 != 0));
    p.ptr(req.output_binding(0), Access::Write);
    p.u64(n)
        .u64(view.inner)
        .u64(view.len)
        .u64(view.block)
        .u64(view.so)
        .u64(view.sa)
        .u64(view.si);
    // A packed output is written a byte (several elements) per thread.
    let threads = shape::byte_size(&x.shape, y_dt)?.min(n);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", x.shape.clone(), y_dt)],
        launches: vec![linear_launch(req, id.clone(), id, threads, p)?],
        workspace_bytes: 0,
    })
}

/// Parses `quant_{q|dq}_{X}_{S}_{Y}` into (quantize, x, s, y).
pub fn parse(id: &str) -> Option<(bool, Dtype, Dtype, Dtype)> {
    let mut it = id.strip_prefix("quant_")?.split('_');
    let q = match it.next()? {
        "q" => true,
        "dq" => false,
        _ => return None,
    };
    let x = dtype::from_name(it.next()?)?;
    let s = dtype::from_name(it.next()?)?;
    let y = dtype::from_name(it.next()?)?;
    if it.next().is_some() {
        return None;
    }
    let ok = if q {
        Q_X.contains(&x) && QUANTIZED.contains(&y)
    } else {
        (QUANTIZED.contains(&x) || x == Dtype::I32) && DQ_Y.contains(&y)
    };
    (ok && SCALES.contains(&s)).then_some((q, x, s, y))
}

/// Runs one Q or DQ launch on the CPU.
pub fn run_cpu(
    call: &CpuCall,
    (quantize, x_dt, s_dt, y_dt): (bool, Dtype, Dtype, Dtype),
) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let prec = elem::precision_dtype(r.u32()?);
    let (xb, sb) = (r.ptr()?, r.ptr()?);
    let zb = crate::plan::read_opt_ptr(&mut r, flags & 1 != 0)?;
    let yb = r.ptr()?;
    let n = r.u64()?;
    let view = ScaleView {
        inner: r.u64()?,
        len: r.u64()?,
        block: r.u64()?,
        so: r.u64()?,
        sa: r.u64()?,
        si: r.u64()?,
    };
    let bufs = cpu::Buffers::new(call);
    let z_dt = if quantize { y_dt } else { x_dt };
    let bytes = |dt, n| {
        dtype::byte_len(dt, n).ok_or_else(|| OpError::internal(format!("{n} elements overflow")))
    };
    let x = bufs.input(xb, bytes(x_dt, n)?)?;
    let mut out = bufs.output(yb, bytes(y_dt, n)?)?;
    if n == 0 {
        return Ok(vec![out]);
    }
    let s_len = view.index(n - 1) + 1; // the last element's scale is the last one
    let s = bufs.input(sb, bytes(s_dt, s_len)?)?;
    let z = match zb {
        Some(b) => Some(bufs.input(b, bytes(z_dt, s_len)?)?),
        None => None,
    };
    let (lx, ls) = (loader(x_dt)?, loader(s_dt)?);
    let lz = loader(z_dt)?;
    let y = &mut out.data;
    if quantize {
        let saturate = flags & 2 != 0;
        let q = |e: u64, k: u64| -> f64 {
            let (xv, sv) = (lx(x, e as usize), ls(s, k as usize));
            if prec == Dtype::F64 {
                xv / sv
            } else {
                round_to(
                    prec,
                    (round_to(prec, xv) as f32 / round_to(prec, sv) as f32) as f64,
                )
            }
        };
        if dtype::is_f8(y_dt) {
            for e in 0..n {
                y[e as usize] = f8::encode(q(e, view.index(e)) as f32, y_dt, saturate);
            }
        } else if y_dt == Dtype::F4e2m1 {
            // x / scale + zero point (a float4 value), then cast: always saturating.
            let codes = (0..n).map(|e| {
                let k = view.index(e);
                let zv = z.map_or(0.0, |z| lz(z, k as usize));
                dtype::f32_to_f4e2m1((q(e, k) as f32 + zv as f32) as f64)
            });
            dtype::pack_codes(codes, y_dt, y);
        } else {
            let (lo, hi) = int_range(y_dt).expect("integer output");
            let st = storer(y_dt)?;
            for e in 0..n {
                let k = view.index(e);
                let zv = z.map_or(0.0, |z| lz(z, k as usize));
                st(y, e as usize, clamp(q(e, k).round_ties_even() + zv, lo, hi));
            }
        }
    } else {
        let wide = flags & 2 != 0;
        let st = storer(y_dt)?;
        for e in 0..n {
            let k = view.index(e);
            let zv = z.map_or(0.0, |z| lz(z, k as usize));
            let dx = lx(x, e as usize) as f32 as f64 - zv;
            let sv = ls(s, k as usize);
            let v = if wide {
                dx * sv
            } else {
                (dx as f32 * sv as f32) as f64
            };
            st(y, e as usize, v);
        }
    }
    Ok(vec![out])
}
