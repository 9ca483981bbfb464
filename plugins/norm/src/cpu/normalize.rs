//! The `normalize` kernel (see [`crate::stats`] for the parameter block): per group, gather the
//! elements (decoded to f64), compute mean and population variance in two passes, write the
//! statistics, then the normalised, scaled and shifted elements.

use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use super::{Real, load_f64, store_dyn, store_f64};
use crate::plan::read_opt_ptr;
use crate::stats::{
    BIAS, EPS_OUTSIDE, INVSTD_OUT, L1, L2, MEAN_OUT, NO_MEAN, RUN_MEAN, RUN_VAR, SAVED_MEAN,
    SAVED_VAR, SCALE, VIEW_AXIS,
};

/// Where the elements of one group live: `count` elements as `segments` runs of `run`
/// elements, run `k` starting at `first + k * seg_stride`, elements `stride` apart.
struct Layout {
    first: usize,
    segments: usize,
    seg_stride: usize,
    run: usize,
    stride: usize,
}

impl Layout {
    fn of(view: u32, g: usize, (outer, len, inner): (usize, usize, usize)) -> Layout {
        if view == VIEW_AXIS {
            Layout {
                first: (g / inner) * len * inner + g % inner,
                segments: 1,
                seg_stride: 0,
                run: len,
                stride: inner,
            }
        } else {
            Layout {
                first: g * inner,
                segments: outer,
                seg_stride: len * inner,
                run: inner,
                stride: 1,
            }
        }
    }

    /// Calls `f(element index within the group, buffer index)` for every element, in order.
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(usize, usize)) {
        let mut e = 0;
        for k in 0..self.segments {
            let start = self.first + k * self.seg_stride;
            for j in 0..self.run {
                f(e, start + j * self.stride);
                e += 1;
            }
        }
    }
}

pub fn normalize<T: Element>(call: &CpuCall, stat: Dtype) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (flags, view) = (r.u32()?, r.u32()?);
    let has = |bit: u32| flags & bit != 0;
    let (x, y) = (r.ptr()?, r.ptr()?);
    let mut opt = |bit| read_opt_ptr(&mut r, has(bit));
    let (scale, bias) = (opt(SCALE)?, opt(BIAS)?);
    let (mean_out, invstd_out) = (opt(MEAN_OUT)?, opt(INVSTD_OUT)?);
    let (in_mean, in_var) = (opt(RUN_MEAN)?, opt(RUN_VAR)?);
    let (rm_out, rv_out) = (opt(RUN_MEAN)?, opt(RUN_VAR)?);
    let (saved_mean, saved_var) = (opt(SAVED_MEAN)?, opt(SAVED_VAR)?);
    let (outer, len, inner) = (r.u64()?, r.u64()?, r.u64()?);
    let (gm, ga, ed) = (r.u64()?.max(1), r.u64()?, r.u64()?.max(1));
    let (eps, momentum) = (r.f64()?, r.f64()?);

    let overflow = || OpError::internal("normalize: element count overflows");
    let n = outer
        .checked_mul(len)
        .and_then(|v| v.checked_mul(inner))
        .ok_or_else(overflow)?;
    let (groups, count) = if view == VIEW_AXIS {
        (outer * inner, len)
    } else {
        (len, outer * inner)
    };
    let size = std::mem::size_of::<T>() as u64;
    let x = bufs.input(x, n * size)?;
    let mut out = bufs.output(y, n * size)?;
    // scale/bias elements the mapping (g % gm) * ga + e / ed reaches
    let params_len = if groups == 0 || count == 0 {
        0
    } else {
        (groups.min(gm) - 1) * ga + (count - 1) / ed + 1
    };
    let vector = |b: Option<u32>, len: u64| -> Result<Option<Vec<f64>>, OpError> {
        b.map(|b| {
            let data = bufs.input(b, len * size)?;
            Ok((0..len as usize).map(|i| load_f64::<T>(data, i)).collect())
        })
        .transpose()
    };
    let (scale, bias) = (vector(scale, params_len)?, vector(bias, params_len)?);
    let (in_mean, in_var) = (vector(in_mean, groups)?, vector(in_var, groups)?);
    let stat_size = dtype::size(stat) as u64;
    let output = |b: Option<u32>, elem: u64| b.map(|b| bufs.output(b, groups * elem)).transpose();
    let mut mean_out = output(mean_out, stat_size)?;
    let mut invstd_out = output(invstd_out, stat_size)?;
    let mut rm_out = output(rm_out, size)?;
    let mut rv_out = output(rv_out, size)?;
    let mut saved_mean = output(saved_mean, size)?;
    let mut saved_var = output(saved_var, size)?;

    let dims = (outer as usize, len as usize, inner as usize);
    let (ed, ga, gm) = (ed as usize, ga as usize, gm as usize);
    let mut buf = vec![0f64; count as usize];
    for g in 0..groups as usize {
        let layout = Layout::of(view, g, dims);
        layout.each(|e, i| buf[e] = load_f64::<T>(x, i));
        let cnt = buf.len() as f64;
        let no_mean = has(NO_MEAN) || has(L1) || has(L2);
        let mean = if no_mean {
            0.0
        } else {
            buf.iter().sum::<f64>() / cnt
        };
        let (var, invstd) = if has(L1) {
            let tot = buf.iter().map(|v| v.abs()).sum::<f64>();
            (tot, if tot == 0.0 { 0.0 } else { 1.0 / tot })
        } else if has(L2) {
            let tot = buf.iter().map(|v| v * v).sum::<f64>();
            (tot, if tot == 0.0 { 0.0 } else { 1.0 / tot.sqrt() })
        } else {
            let var = buf.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cnt;
            if has(EPS_OUTSIDE) {
                (var, 1.0 / (var.sqrt() + eps))
            } else {
                (var, 1.0 / (var + eps).sqrt())
            }
        };
        if let Some(w) = &mut mean_out {
            store_dyn(stat, &mut w.data, g, mean)?;
        }
        if let Some(w) = &mut invstd_out {
            store_dyn(stat, &mut w.data, g, invstd)?;
        }
        let put = |w: &mut Option<CpuWrite>, v: f64| {
            if let Some(w) = w {
                store_f64::<T>(&mut w.data, g, v);
            }
        };
        if let Some(m) = &in_mean {
            put(&mut rm_out, m[g] * momentum + mean * (1.0 - momentum));
        }
        if let Some(v) = &in_var {
            put(&mut rv_out, v[g] * momentum + var * (1.0 - momentum));
        }
        put(&mut saved_mean, mean);
        put(&mut saved_var, var);

        let base = (g % gm) * ga;
        // (an empty group reaches no scale element: its slice may be empty)
        let s = scale.as_deref().map(|s| s.get(base..).unwrap_or_default());
        let b = bias.as_deref().map(|b| b.get(base..).unwrap_or_default());
        let affine = |k: usize, v: f64| -> f64 {
            let v = (v - mean) * invstd;
            let v = s.map_or(v, |s| v * s[k]);
            b.map_or(v, |b| v + b[k])
        };
        if ed == 1 {
            for (k, v) in buf.iter_mut().enumerate() {
                *v = affine(k, *v);
            }
        } else {
            for (k, chunk) in buf.chunks_mut(ed).enumerate() {
                for v in chunk {
                    *v = affine(k, *v);
                }
            }
        }
        layout.each(|e, i| store_f64::<T>(&mut out.data, i, buf[e]));
    }
    let mut writes = vec![out];
    writes.extend(
        [mean_out, invstd_out, rm_out, rv_out, saved_mean, saved_var]
            .into_iter()
            .flatten(),
    );
    Ok(writes)
}
