//! Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 7, 9): attribute and constant-input
//! handling, output sizes and per-axis scales, exactly as `_interpolate_nd` of ONNX's reference
//! computes them, then one launch of a kernel of [`crate::resize_core`].
//!
//! Forms: Resize-11+ takes `X, roi, scales, sizes` (roi, scales and sizes plan-time constants;
//! empty or absent scales/sizes are "not given"; roi only matters to `tf_crop_and_resize` and the
//! reference's identity-axis test). Resize-10 (`X, scales`; recognized by opset 10, or by two
//! inputs when the opset is unsaid) and Upsample-7/9 (`scales` attribute or input 1) resize
//! with `asymmetric` coordinates and `floor` nearest rounding (Upsample's reference: repeat).

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::MAX_RANK;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common;
use crate::resize_core::{
    self, COORD_MODES, CUBIC, LINEAR, NEAREST, NEAREST_MODES, ResizeParams, TF_CROP,
};

/// Largest product of taps over the resized axes (work per output element).
const MAX_TAPS: u64 = 1 << 24;

const MODERN_ATTRS: [&str; 9] = [
    "mode",
    "coordinate_transformation_mode",
    "nearest_mode",
    "cubic_coeff_a",
    "exclude_outside",
    "extrapolation_value",
    "antialias",
    "axes",
    "keep_aspect_ratio_policy",
];

fn bad(msg: String) -> OpError {
    OpError::InvalidAttribute(msg)
}

/// What the attributes and constant inputs say, before sizes are worked out.
struct Spec {
    kind: u32,
    cmode: u32,
    nmode: u32,
    exclude: bool,
    antialias: bool,
    cubic_a: f64,
    ev: f64,
    axes: Option<Vec<usize>>,
    policy: String,
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
    /// roi as (start, end) per data axis, in the roi's dtype
    roi: Option<(Vec<f64>, Vec<f64>, Dtype)>,
}

fn kind_of(mode: &str, op: &str) -> Result<u32, OpError> {
    match mode {
        "nearest" => Ok(NEAREST),
        "linear" | "bilinear" | "trilinear" => Ok(LINEAR),
        "cubic" | "bicubic" if op == "Resize" => Ok(CUBIC),
        m => Err(bad(format!(
            "{op}: attribute `mode` = \"{m}\" is not supported"
        ))),
    }
}

fn nonempty<T>(v: Option<Vec<T>>) -> Option<Vec<T>> {
    v.filter(|v| !v.is_empty())
}

/// The legacy forms: Upsample and Resize-10.
fn legacy_spec(req: &PlanRequestExt, op: &str) -> Result<Spec, OpError> {
    let scales = if op == "Upsample" && req.input(1).is_none() {
        attr::only(&req.attributes, &["mode", "scales"])?;
        Some(attr::floats_or(&req.attributes, "scales", &[])?)
    } else {
        attr::only(&req.attributes, &["mode"])?;
        nonempty(req.floats(1)?)
    };
    let mode = attr::text_or(&req.attributes, "mode", "nearest")?;
    Ok(Spec {
        kind: kind_of(&mode, "Upsample")?,
        cmode: 1,
        nmode: 2,
        exclude: false,
        antialias: false,
        cubic_a: -0.75,
        ev: 0.0,
        axes: None,
        policy: "stretch".into(),
        scales: Some(scales.ok_or_else(|| OpError::shape(format!("{op}: scales are required")))?),
        sizes: None,
        roi: None,
    })
}

fn modern_spec(req: &PlanRequestExt, rank: usize) -> Result<Spec, OpError> {
    attr::only(&req.attributes, &MODERN_ATTRS)?;
    let a = &req.attributes;
    let kind = kind_of(&attr::text_or(a, "mode", "nearest")?, "Resize")?;
    let cname = attr::text_or(a, "coordinate_transformation_mode", "half_pixel")?;
    let cmode = COORD_MODES.iter().position(|m| *m == cname).ok_or_else(|| {
        bad(format!(
            "Resize: attribute `coordinate_transformation_mode` = \"{cname}\" is not one of {COORD_MODES:?}"
        ))
    })? as u32;
    let nname = attr::text_or(a, "nearest_mode", "round_prefer_floor")?;
    let nmode = NEAREST_MODES
        .iter()
        .position(|m| *m == nname)
        .ok_or_else(|| {
            bad(format!(
                "Resize: attribute `nearest_mode` = \"{nname}\" is not one of {NEAREST_MODES:?}"
            ))
        })? as u32;
    let antialias = attr::int_or(a, "antialias", 0)? != 0;
    if antialias && kind == NEAREST {
        return Err(bad(
            "Resize: attribute `antialias` needs mode linear or cubic".into(),
        ));
    }
    let policy = attr::text_or(a, "keep_aspect_ratio_policy", "stretch")?;
    if !["stretch", "not_larger", "not_smaller"].contains(&policy.as_str()) {
        return Err(bad(format!(
            "Resize: attribute `keep_aspect_ratio_policy` = \"{policy}\" is not stretch, not_larger or not_smaller"
        )));
    }
    let axes = match attr::ints_opt(a, "axes")? {
        None => None,
        Some(v) => {
            let mut out = Vec::with_capacity(v.len());
            for x in v {
                let d = common::norm_axis("Resize", "axes", x, rank)?;
                if out.contains(&d) {
                    return Err(bad(format!("Resize: attribute `axes` repeats axis {d}")));
                }
                out.push(d);
            }
            Some(out)
        }
    };
    let naxes = axes.as_ref().map_or(rank, |v| v.len());
    let roi = match nonempty(req.floats(1)?) {
        Some(v) if v.len() == 2 * naxes => {
            let mut start = vec![0.0; rank];
            let mut end = vec![1.0; rank];
            for i in 0..naxes {
                let d = axes.as_ref().map_or(i, |ax| ax[i]);
                start[d] = v[i];
                end[d] = v[naxes + i];
            }
            Some((start, end, req.required(1)?.dtype))
        }
        Some(v) if cmode == TF_CROP => {
            return Err(OpError::shape(format!(
                "Resize: roi has {} values, tf_crop_and_resize needs {}",
                v.len(),
                2 * naxes
            )));
        }
        _ => None,
    };
    if cmode == TF_CROP && roi.is_none() {
        return Err(OpError::shape("Resize: tf_crop_and_resize needs roi"));
    }
    Ok(Spec {
        kind,
        cmode,
        nmode,
        exclude: attr::int_or(a, "exclude_outside", 0)? != 0,
        antialias,
        cubic_a: attr::float_or(a, "cubic_coeff_a", -0.75)?,
        ev: attr::float_or(a, "extrapolation_value", 0.0)?,
        axes,
        policy,
        scales: nonempty(req.floats(2)?),
        sizes: nonempty(req.ints(3)?),
        roi,
    })
}

/// `math.isclose(a, b)` with Python's defaults (rel_tol 1e-9, abs_tol 0).
fn isclose(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The roi terms of one axis as the reference computes them in the roi's dtype:
/// `(end - start)`, `start * (w - 1)` and `(end - start) * (w - 1) / 2`.
fn roi_terms(start: f64, end: f64, w: u64, dt: Dtype) -> (f64, f64, f64) {
    let wm1 = w as f64 - 1.0;
    match dt {
        Dtype::F32 => {
            let (s, e) = (start as f32, end as f32);
            let d = e - s;
            (
                d as f64,
                (s * wm1 as f32) as f64,
                (d * wm1 as f32 / 2.0) as f64,
            )
        }
        Dtype::F16 => {
            use umd_sdk::half::f16;
            let (s, e) = (f16::from_f64(start), f16::from_f64(end));
            let d = e - s;
            let w16 = f16::from_f64(wm1);
            (
                d.to_f64(),
                (s * w16).to_f64(),
                (d * w16 / f16::from_f32(2.0)).to_f64(),
            )
        }
        _ => {
            let d = end - start;
            (d, start * wm1, d * wm1 / 2.0)
        }
    }
}

/// Plans Resize or Upsample.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    let op = if req.op.eq_ignore_ascii_case("Upsample") {
        "Upsample"
    } else {
        "Resize"
    };
    let x = req.required(0)?;
    common::check_rank(op, x)?;
    let r = x.shape.len();
    let legacy =
        op == "Upsample" || (1..=10).contains(&req.opset) || (req.opset == 0 && req.slots() == 2);
    let spec = if legacy {
        legacy_spec(req, op)?
    } else {
        modern_spec(req, r)?
    };
    let served: &[Dtype] = if spec.kind == NEAREST {
        &common::ALL_DTYPES
    } else {
        &common::NUMERIC_DTYPES
    };
    common::check_dtype(op, x, served)?;

    // output sizes and scales (reference `_interpolate_nd`)
    let axes: Vec<usize> = spec.axes.clone().unwrap_or_else(|| (0..r).collect());
    let mut scale = vec![1.0f64; r];
    let mut out: Vec<u64> = x.shape.clone();
    match (&spec.scales, &spec.sizes) {
        (Some(_), Some(_)) => {
            return Err(OpError::shape(format!(
                "{op}: give scales or sizes, not both"
            )));
        }
        (None, None) => return Err(OpError::shape(format!("{op}: scales or sizes is required"))),
        (Some(s), None) => {
            if s.len() != axes.len() {
                return Err(OpError::shape(format!(
                    "{op}: {} scales for {} axes",
                    s.len(),
                    axes.len()
                )));
            }
            for (i, &d) in axes.iter().enumerate() {
                if s[i].is_nan() || s[i] <= 0.0 || !s[i].is_finite() {
                    return Err(OpError::shape(format!("{op}: scale {} must be > 0", s[i])));
                }
                scale[d] = s[i];
            }
            for d in 0..r {
                let o = (scale[d] * x.shape[d] as f64).floor();
                if o >= u64::MAX as f64 {
                    return Err(OpError::shape(format!(
                        "{op}: output dimension {o} too large"
                    )));
                }
                out[d] = o as u64;
            }
        }
        (None, Some(sz)) => {
            if sz.len() != axes.len() {
                return Err(OpError::shape(format!(
                    "{op}: {} sizes for {} axes",
                    sz.len(),
                    axes.len()
                )));
            }
            for (i, &d) in axes.iter().enumerate() {
                if sz[i] < 0 {
                    return Err(OpError::shape(format!("{op}: size {} is negative", sz[i])));
                }
                out[d] = sz[i] as u64;
            }
            for d in 0..r {
                scale[d] = if x.shape[d] == 0 {
                    1.0
                } else {
                    out[d] as f64 / x.shape[d] as f64
                };
            }
            if spec.policy != "stretch" {
                let pick = axes.iter().map(|&d| scale[d]);
                let s = if spec.policy == "not_larger" {
                    pick.fold(f64::INFINITY, f64::min)
                } else {
                    pick.fold(f64::NEG_INFINITY, f64::max)
                };
                scale = vec![1.0; r];
                for &d in &axes {
                    scale[d] = s;
                    out[d] = (s * x.shape[d] as f64 + 0.5).floor() as u64;
                }
            }
        }
    }
    let n = common::out_numel(&out, x.dtype)?;

    // the levels: resized axes in processing order (identity axes are skipped, as the reference
    // skips them)
    let identity = |d: usize| {
        isclose(scale[d], 1.0)
            && out[d] == x.shape[d]
            && spec
                .roi
                .as_ref()
                .is_none_or(|(s, e, _)| s[d] == 0.0 && isclose(e[d], 1.0))
    };
    let levels: Vec<usize> = axes.iter().copied().filter(|&d| !identity(d)).collect();
    let mut prm = ResizeParams {
        n,
        rank: r as u32,
        nlev: levels.len() as u32,
        cmode: spec.cmode,
        kind: spec.kind,
        nmode: spec.nmode,
        exclude: spec.exclude,
        antialias: spec.antialias,
        odims: common::dims8(&out, 1)?,
        idims: common::dims8(&x.shape, 1)?,
        cubic_a: spec.cubic_a,
        ev: spec.ev,
        ev_bits: ev_bits(x.dtype, spec.ev),
        ..Default::default()
    };
    let mut work = 1u64;
    for (l, &d) in levels.iter().enumerate() {
        if x.shape[d] == 0 && n > 0 {
            return Err(OpError::shape(format!(
                "{op}: cannot resize the empty dimension {d} to {}",
                out[d]
            )));
        }
        prm.levaxis[l] = d as u64;
        prm.scale[d] = scale[d];
        prm.taps[d] = resize_core::tap_count(spec.kind, spec.antialias, scale[d]);
        work = work.saturating_mul(prm.taps[d]);
        if let Some((s, e, dt)) = &spec.roi {
            (prm.roi_d[d], prm.roi_b[d], prm.roi_half[d]) = roi_terms(s[d], e[d], x.shape[d], *dt);
        }
    }
    if work > MAX_TAPS {
        return Err(OpError::shape(format!(
            "{op}: {work} taps per output element (antialiased downscaling too strong); \
             the maximum is {MAX_TAPS}"
        )));
    }
    debug_assert!(levels.len() <= MAX_RANK);

    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
    prm.pack(&mut p);
    let (module, entry) = if spec.kind == NEAREST {
        let s = dtype::size(x.dtype);
        (
            common::move_module(s),
            common::move_entry("resize_nearest", s),
        )
    } else {
        let dt = dtype::name(x.dtype);
        (format!("gather_resize_{dt}"), format!("resize_interp_{dt}"))
    };
    let l = common::make_launch(req, module, entry, n, p)?;
    Ok(common::one_output(
        TensorDesc::new("Y", out, x.dtype),
        vec![l],
    ))
}

/// `extrapolation_value` as an element of `dt` (numpy's `saturate_cast`; an 8-bit float as
/// ml_dtypes casts).
fn ev_bits(dt: Dtype, ev: f64) -> u64 {
    use crate::resize_core::Saturate;
    use umd_sdk::half::{bf16, f16};
    fn bits<T: Saturate>(v: f64) -> u64 {
        let mut b = [0u8; 8];
        T::saturate(v).store(&mut b[..std::mem::size_of::<T>()]);
        u64::from_le_bytes(b)
    }
    match dt {
        Dtype::F32 => bits::<f32>(ev),
        Dtype::F16 => bits::<f16>(ev),
        Dtype::Bf16 => bits::<bf16>(ev),
        Dtype::F64 => bits::<f64>(ev),
        Dtype::I32 => bits::<i32>(ev),
        Dtype::I64 => bits::<i64>(ev),
        Dtype::I8 => bits::<i8>(ev),
        Dtype::U8 => bits::<u8>(ev),
        Dtype::I16 => bits::<i16>(ev),
        Dtype::U16 => bits::<u16>(ev),
        Dtype::U32 => bits::<u32>(ev),
        Dtype::U64 => bits::<u64>(ev),
        Dtype::Boolean => (ev != 0.0) as u64,
        // ml_dtypes' float → float8 cast (no saturation: out of range is NaN, or inf for E5M2)
        f8 => dtype::f32_to_f8(ev as f32, f8, false) as u64,
    }
}
