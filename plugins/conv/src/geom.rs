//! Geometry shared by every op of the plugin: the spatial attributes (`kernel_shape`, `strides`,
//! `dilations`, `pads`, `auto_pad`, `ceil_mode`, `output_padding`, `output_shape`), the output
//! extent and padding arithmetic exactly as ONNX defines it, and [`Geom`], the one parameter
//! block every kernel (CUDA and CPU) reads.
//!
//! Kernels always see three spatial dimensions: a 1-D or 2-D op is padded in front with
//! dimensions of extent 1 (kernel 1, stride 1, dilation 1, no padding), which changes nothing.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{AttributeExt, OpError, attr};

/// Spatial dimensions the kernels handle.
pub const MAX_SPATIAL: usize = 3;

/// The `auto_pad` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// Reads `auto_pad` (default `NOTSET`; an empty string is read as `NOTSET`).
pub fn auto_pad(attrs: &[AttributeExt]) -> Result<AutoPad, OpError> {
    match attr::text_or(attrs, "auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => Ok(AutoPad::NotSet),
        "SAME_UPPER" => Ok(AutoPad::SameUpper),
        "SAME_LOWER" => Ok(AutoPad::SameLower),
        "VALID" => Ok(AutoPad::Valid),
        other => Err(OpError::InvalidAttribute(format!(
            "attribute `auto_pad` must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {other:?}"
        ))),
    }
}

/// An int-list attribute of exactly `len` entries, each at least `min`; `default` (repeated)
/// when absent.
pub fn ints(
    attrs: &[AttributeExt],
    name: &str,
    len: usize,
    default: i64,
    min: i64,
) -> Result<Vec<i64>, OpError> {
    let v = match attr::ints_opt(attrs, name)? {
        None => return Ok(vec![default; len]),
        Some(v) => v,
    };
    if v.len() != len {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `{name}` must have {len} entries (one per {}), got {v:?}",
            if name == "pads" {
                "spatial dimension begin and end"
            } else {
                "spatial dimension"
            }
        )));
    }
    if let Some(bad) = v.iter().find(|&&x| x < min || x > LIMIT) {
        return Err(OpError::InvalidAttribute(format!(
            "attribute `{name}` entries must lie in {min}..={LIMIT}, got {bad} in {v:?}"
        )));
    }
    Ok(v)
}

/// Largest kernel extent, stride, dilation or pad accepted (keeps the arithmetic in i64).
pub const LIMIT: i64 = 1 << 31;

/// Converts an input extent to i64 (extents over 2^62 are refused).
pub fn dim(v: u64) -> Result<i64, OpError> {
    if v > (1 << 62) {
        return Err(OpError::shape(format!("dimension {v} is too large")));
    }
    Ok(v as i64)
}

/// Extent of a dilated kernel: `(k - 1) * d + 1`.
pub fn effective(k: i64, d: i64) -> i64 {
    (k - 1) * d + 1
}

fn floor_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

fn ceil_div(a: i64, b: i64) -> i64 {
    -(-a).div_euclid(b)
}

/// One spatial dimension of a Conv or pooling op: output extent and (begin, end) pads.
///
/// `NOTSET`: `floor((in + pb + pe - keff) / s) + 1` (or ceil with `ceil_mode`, dropping a last
/// window that would start in the end padding); `VALID`: no padding; `SAME_*`:
/// `ceil(in / s)` outputs, the padding needed split with the extra one at the end (UPPER) or
/// the beginning (LOWER).
#[allow(clippy::too_many_arguments)]
pub fn forward_dim(
    axis: usize,
    inp: i64,
    k: i64,
    s: i64,
    d: i64,
    pads: (i64, i64),
    auto: AutoPad,
    ceil_mode: bool,
) -> Result<(i64, i64, i64), OpError> {
    let keff = effective(k, d);
    let (out, pb, pe) = match auto {
        AutoPad::NotSet => {
            let (pb, pe) = pads;
            let span = inp + pb + pe - keff;
            let mut out = if ceil_mode {
                ceil_div(span, s) + 1
            } else {
                floor_div(span, s) + 1
            };
            if ceil_mode && out > 0 && (out - 1) * s >= inp + pb {
                out -= 1;
            }
            (out, pb, pe)
        }
        AutoPad::Valid => (floor_div(inp - keff, s) + 1, 0, 0),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let out = ceil_div(inp, s);
            let total = ((out - 1) * s + keff - inp).max(0);
            let pb = if auto == AutoPad::SameUpper {
                total / 2
            } else {
                total - total / 2
            };
            (out, pb, total - pb)
        }
    };
    if inp + pb + pe < keff {
        return Err(OpError::shape(format!(
            "spatial axis {axis}: a kernel of extent {keff} does not fit an input of {inp} \
             padded by ({pb}, {pe})"
        )));
    }
    Ok((out, pb, pe))
}

/// One spatial dimension of ConvTranspose: output extent and (begin, end) pads (the pads may
/// be negative when `output_shape` asks for more than the natural output).
///
/// With `output_shape`: `total = s*(in-1) + output_padding + keff - output_shape`, split as
/// the ONNX spec says (SAME_UPPER: `total/2` at the beginning; otherwise `total - total/2`).
/// With `SAME_*` alone: `output_shape = in * s`. Otherwise the explicit pads give
/// `s*(in-1) + output_padding + keff - pb - pe`.
#[allow(clippy::too_many_arguments)]
pub fn transpose_dim(
    axis: usize,
    inp: i64,
    k: i64,
    s: i64,
    d: i64,
    out_pad: i64,
    pads: (i64, i64),
    auto: AutoPad,
    output_shape: Option<i64>,
) -> Result<(i64, i64, i64), OpError> {
    let natural = s * (inp - 1) + out_pad + effective(k, d);
    let target = match (output_shape, auto) {
        (Some(o), _) => Some(o),
        (None, AutoPad::SameUpper | AutoPad::SameLower) => Some(inp * s),
        _ => None,
    };
    let (out, pb, pe) = match target {
        Some(out) => {
            let total = natural - out;
            let half = floor_div(total, 2);
            if auto == AutoPad::SameUpper {
                (out, half, total - half)
            } else {
                (out, total - half, half)
            }
        }
        None if auto == AutoPad::Valid => (natural, 0, 0),
        None => (natural - pads.0 - pads.1, pads.0, pads.1),
    };
    if out < 0 {
        return Err(OpError::shape(format!(
            "spatial axis {axis}: ConvTranspose output extent would be {out}"
        )));
    }
    Ok((out, pb, pe))
}

/// Flag bit: AveragePool counts padding in the divisor.
pub const FLAG_COUNT_PAD: i64 = 1;
/// Flag bit: MaxPool indices in column-major spatial order (`storage_order = 1`).
pub const FLAG_COL_MAJOR: i64 = 2;

/// The parameter block of every kernel (after its pointers), packed as consecutive 8-byte
/// fields: the CUDA `struct conv_geom` of [`crate::cuda`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Geom {
    /// Batch.
    pub n: i64,
    /// Input channels (pools: channels).
    pub c: i64,
    /// Output channels (pools: channels).
    pub m: i64,
    pub group: i64,
    /// Input channels per group.
    pub cg: i64,
    /// Output channels per group.
    pub mg: i64,
    pub inp: [i64; MAX_SPATIAL],
    pub out: [i64; MAX_SPATIAL],
    pub k: [i64; MAX_SPATIAL],
    pub s: [i64; MAX_SPATIAL],
    pub d: [i64; MAX_SPATIAL],
    /// Pads at the beginning (ConvTranspose: may be negative).
    pub pb: [i64; MAX_SPATIAL],
    /// Pads at the end (used by AveragePool's `count_include_pad`).
    pub pe: [i64; MAX_SPATIAL],
    pub flags: i64,
    /// LpPool's `p`.
    pub p: f64,
}

impl Geom {
    /// A geometry with every spatial dimension neutral (extent 1, kernel 1).
    pub fn neutral() -> Self {
        Geom {
            inp: [1; 3],
            out: [1; 3],
            k: [1; 3],
            s: [1; 3],
            d: [1; 3],
            group: 1,
            ..Geom::default()
        }
    }

    /// Sets spatial dimension `i` of `rank` (stored right-aligned in the 3 slots).
    #[allow(clippy::too_many_arguments)]
    pub fn set_dim(
        &mut self,
        rank: usize,
        i: usize,
        inp: i64,
        out: i64,
        k: i64,
        s: i64,
        d: i64,
        pb: i64,
        pe: i64,
    ) {
        let j = MAX_SPATIAL - rank + i;
        self.inp[j] = inp;
        self.out[j] = out;
        self.k[j] = k;
        self.s[j] = s;
        self.d[j] = d;
        self.pb[j] = pb;
        self.pe[j] = pe;
    }

    pub fn in_size(&self) -> i64 {
        self.inp.iter().product()
    }
    pub fn out_size(&self) -> i64 {
        self.out.iter().product()
    }
    pub fn k_size(&self) -> i64 {
        self.k.iter().product()
    }

    pub fn pack(&self, p: &mut ParamPacker) {
        for v in [self.n, self.c, self.m, self.group, self.cg, self.mg] {
            p.i64(v);
        }
        for a in [
            &self.inp, &self.out, &self.k, &self.s, &self.d, &self.pb, &self.pe,
        ] {
            for &v in a {
                p.i64(v);
            }
        }
        p.i64(self.flags).f64(self.p);
    }

    /// Reads a block written by [`Geom::pack`] and checks it is self-consistent (the CPU
    /// kernels index with it).
    pub fn read(r: &mut ParamReader) -> Result<Self, OpError> {
        let mut g = Geom {
            n: r.i64()?,
            c: r.i64()?,
            m: r.i64()?,
            group: r.i64()?,
            cg: r.i64()?,
            mg: r.i64()?,
            ..Geom::default()
        };
        for a in [
            &mut g.inp, &mut g.out, &mut g.k, &mut g.s, &mut g.d, &mut g.pb, &mut g.pe,
        ] {
            for v in a.iter_mut() {
                *v = r.i64()?;
            }
        }
        g.flags = r.i64()?;
        g.p = r.f64()?;
        g.check()?;
        Ok(g)
    }

    fn check(&self) -> Result<(), OpError> {
        let bad = |what: &str| {
            Err(OpError::internal(format!(
                "bad geometry ({what}): {self:?}"
            )))
        };
        if [self.n, self.c, self.m, self.cg, self.mg]
            .iter()
            .any(|&v| !(0..=1 << 62).contains(&v))
            || self.group < 1
        {
            return bad("counts");
        }
        if self.cg.checked_mul(self.group) != Some(self.c)
            || self.mg.checked_mul(self.group) != Some(self.m)
        {
            return bad("groups");
        }
        for i in 0..MAX_SPATIAL {
            if !(0..=1 << 40).contains(&self.inp[i])
                || !(0..=1 << 40).contains(&self.out[i])
                || !(1..=LIMIT).contains(&self.k[i])
                || !(1..=LIMIT).contains(&self.s[i])
                || !(1..=LIMIT).contains(&self.d[i])
                || self.pb[i].abs() > 1 << 40
                || self.pe[i].abs() > 1 << 40
            {
                return bad("spatial");
            }
        }
        let total = [
            self.n,
            self.c.max(self.m),
            self.in_size().max(self.out_size()),
        ]
        .iter()
        .try_fold(1i64, |a, &b| a.checked_mul(b));
        if total.is_none() || self.k_size().checked_mul(self.cg.max(self.mg)).is_none() {
            return bad("sizes");
        }
        Ok(())
    }
}

/// The positions `t` in `0..n` with `0 <= start + t * step < lim` (`step >= 1`), as a range.
#[inline]
pub fn valid_range(start: i64, step: i64, n: i64, lim: i64) -> (i64, i64) {
    // both numerators below are non-negative; the common steps skip the division, which is
    // what im2col's runs spent most of their time in
    let div = |a: i64| match step {
        1 => a,
        2 => a >> 1,
        _ => a / step,
    };
    let lo = if start >= 0 {
        0
    } else {
        div(-start + step - 1)
    };
    let hi = if start >= lim {
        0
    } else {
        (div(lim - 1 - start) + 1).min(n)
    };
    (lo.min(hi), hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ranges() {
        assert_eq!(valid_range(-3, 2, 10, 5), (2, 4)); // -3,-1,1,3,5: t=2,3
        assert_eq!(valid_range(0, 1, 4, 10), (0, 4));
        assert_eq!(valid_range(7, 1, 4, 5), (0, 0));
        assert_eq!(valid_range(-10, 1, 4, 5), (4, 4));
        // every step against the plain definition
        for step in 1..5 {
            for start in -12..12 {
                for lim in 0..9 {
                    let ts: Vec<i64> = (0..6)
                        .filter(|t| (0..lim).contains(&(start + t * step)))
                        .collect();
                    let (lo, hi) = valid_range(start, step, 6, lim);
                    if ts.is_empty() {
                        assert!(lo >= hi, "{start} {step} {lim}");
                    } else {
                        assert_eq!(
                            (lo, hi),
                            (ts[0], ts[ts.len() - 1] + 1),
                            "{start} {step} {lim}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn output_extents_follow_onnx() {
        let f = |inp, k, s, d, p, a, c| forward_dim(0, inp, k, s, d, p, a, c).unwrap();
        // ceil mode: 4, k3 s2 -> 2
        assert_eq!(f(4, 3, 2, 1, (0, 0), AutoPad::NotSet, true), (2, 0, 0));
        // the last window would start on the padding: dropped
        assert_eq!(f(2, 3, 3, 1, (1, 1), AutoPad::NotSet, true), (1, 1, 1));
        assert_eq!(f(5, 3, 2, 1, (0, 0), AutoPad::SameUpper, false), (3, 1, 1));
        assert_eq!(
            f(32, 2, 1, 1, (0, 0), AutoPad::SameUpper, false),
            (32, 0, 1)
        );
        assert_eq!(
            f(32, 2, 1, 1, (0, 0), AutoPad::SameLower, false),
            (32, 1, 0)
        );
        assert_eq!(f(32, 5, 3, 2, (0, 0), AutoPad::NotSet, true), (9, 0, 0));
        assert_eq!(f(32, 5, 3, 2, (0, 0), AutoPad::NotSet, false), (8, 0, 0));
        assert_eq!(f(7, 3, 2, 1, (9, 9), AutoPad::Valid, false), (3, 0, 0));
        assert!(forward_dim(0, 2, 5, 1, 1, (0, 0), AutoPad::NotSet, false).is_err());
        let t = |inp, k, s, op, p, a, o| transpose_dim(0, inp, k, s, 1, op, p, a, o).unwrap();
        assert_eq!(
            t(3, 3, 3, 0, (0, 0), AutoPad::NotSet, Some(10)),
            (10, 0, -1)
        );
        assert_eq!(t(3, 3, 2, 0, (0, 0), AutoPad::SameUpper, None), (6, 0, 1));
        assert_eq!(t(3, 3, 3, 0, (1, 1), AutoPad::NotSet, None), (7, 1, 1));
        assert_eq!(t(3, 3, 3, 1, (0, 0), AutoPad::NotSet, None), (10, 0, 0));
    }
}
