//! What a conv does to its output values before storing them: its bias, and for the fused
//! ops ([`crate::fused`]) an inference BatchNormalization, a residual of the output's shape and
//! Relu — in that order, each exactly as the op alone computes it (the normalization's
//! per-channel constants formed in f64 as the `norm` plugin forms them; f16/bf16 values rounded
//! to their type between stages, as the chain stores them). Reads the small per-channel inputs
//! once per call; the residual is read by the caller, run by run.

use super::real::{Real, Stages};
use crate::fused::{BIAS, CLIP_HI, CLIP_LO, LEAKY, NORM, RELU, RESIDUAL, SCALE, SHIFT};
use umd_sdk::dtype::{self, Element};
use umd_sdk::kernel::Memory;
use umd_sdk::lanes;
use umd_sdk::params::ParamReader;
use umd_sdk::{KernelCall, OpError};

/// The epilogue of one launch.
pub struct Epilogue<C> {
    /// Rounds a value to the stored type (f16, bf16) between stages; `None`: it is one.
    round: Option<fn(C) -> C>,
    bias: Option<Vec<C>>,
    /// Per channel `(mean, scale / √(var + ε), B)`.
    norm: Option<Vec<(C, C, C)>>,
    /// A per-channel `Mul`'s and `Add`'s operands.
    scale: Option<Vec<C>>,
    shift: Option<Vec<C>>,
    /// The binding of the residual (`Y`-shaped).
    pub residual: Option<u32>,
    relu: bool,
    /// Clip's bounds.
    lo: Option<C>,
    hi: Option<C>,
    /// LeakyRelu's slope.
    leaky: Option<C>,
}

impl<C: Real> Epilogue<C> {
    /// Nothing after the conv.
    pub fn none() -> Self {
        Epilogue {
            round: None,
            bias: None,
            norm: None,
            scale: None,
            shift: None,
            residual: None,
            relu: false,
            lo: None,
            hi: None,
            leaky: None,
        }
    }

    /// A plain conv's bias (`m` channels of binding `b`).
    pub fn bias<T: Element<Compute = C>>(
        call: &KernelCall,
        mem: &mut dyn Memory,
        b: Option<u32>,
        m: usize,
    ) -> Result<Self, OpError> {
        let mut e = Self::none();
        if let Some(b) = b {
            e.bias = Some(channels::<T>(call, mem, b, m)?.to_vec());
        }
        Ok(e)
    }

    /// Rounds between stages when `T` is stored narrower than it computes.
    fn rounding<T: Element<Compute = C>>(mut self) -> Self {
        if std::mem::size_of::<T>() < std::mem::size_of::<C>() {
            self.round = Some(|v| T::from_compute(v).to_compute());
        }
        self
    }

    /// The epilogue of a `conv_fused` launch: the eight pointers after `X` and `W` (bias,
    /// scale, B, mean, var, residual, `Mul`'s scale, `Add`'s shift), then — after `Y` and the
    /// geometry, read by the caller in between — `ε`, the flags, Clip's two bound pointers and
    /// LeakyRelu's `alpha` ([`Epilogue::finish`]).
    pub fn fused_pointers(r: &mut ParamReader) -> Result<[u32; 8], OpError> {
        let mut p = [0; 8];
        for v in &mut p {
            *v = r.ptr()?;
        }
        Ok(p)
    }

    /// Reads `ε`, the flags, Clip's bound pointers and LeakyRelu's `alpha`, then the inputs
    /// they name, for `m` output channels; the residual must hold `y_elems` elements.
    pub fn finish<T: Element<Compute = C>>(
        call: &KernelCall,
        mem: &mut dyn Memory,
        r: &mut ParamReader,
        ptrs: [u32; 8],
        m: usize,
        y_elems: usize,
    ) -> Result<Self, OpError> {
        let (eps, flags) = (r.f64()?, r.u32()?);
        let (lo_p, hi_p, alpha) = (r.ptr()?, r.ptr()?, r.f64()?);
        let mut e = Self::none().rounding::<T>();
        let s = std::mem::size_of::<T>();
        let mut bound = |bit: u32, p: u32| -> Result<Option<C>, OpError> {
            if flags & bit == 0 {
                return Ok(None);
            }
            call.require_size(p, s as u64, "a Clip bound")?;
            Ok(Some(T::load(&mem.read(p, 0, s)?[..s]).to_compute()))
        };
        (e.lo, e.hi) = (bound(CLIP_LO, lo_p)?, bound(CLIP_HI, hi_p)?);
        e.leaky = (flags & LEAKY != 0).then(|| C::from_f64(alpha));
        let bytes = m
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| OpError::internal(format!("{m} channels do not fit memory")))?;
        if flags & BIAS != 0 {
            e.bias = Some(channels::<T>(call, mem, ptrs[0], m)?.to_vec());
        }
        if flags & NORM != 0 {
            let f = |mem: &mut dyn Memory, b: u32| -> Result<Vec<f64>, OpError> {
                call.require_size(b, bytes as u64, "statistics")?;
                Ok(dtype::decode_f64(T::DTYPE, &mem.read(b, 0, bytes)?))
            };
            let (sc, bb, me, va) = (
                f(mem, ptrs[1])?,
                f(mem, ptrs[2])?,
                f(mem, ptrs[3])?,
                f(mem, ptrs[4])?,
            );
            let k = C::from_f64;
            e.norm = Some(
                (0..m)
                    .map(|i| (k(me[i]), k(sc[i] / (va[i] + eps).sqrt()), k(bb[i])))
                    .collect(),
            );
        }
        if flags & SCALE != 0 {
            e.scale = Some(channels::<T>(call, mem, ptrs[6], m)?.to_vec());
        }
        if flags & SHIFT != 0 {
            e.shift = Some(channels::<T>(call, mem, ptrs[7], m)?.to_vec());
        }
        if flags & RESIDUAL != 0 {
            let bytes = (y_elems as u64).saturating_mul(std::mem::size_of::<T>() as u64);
            call.require_size(ptrs[5], bytes, "the residual")?;
            e.residual = Some(ptrs[5]);
        }
        e.relu = flags & RELU != 0;
        Ok(e)
    }

    /// Whether values pass through unchanged.
    pub fn is_identity(&self) -> bool {
        self.bias.is_none()
            && self.norm.is_none()
            && self.scale.is_none()
            && self.shift.is_none()
            && self.residual.is_none()
            && !self.relu
            && self.lo.is_none()
            && self.hi.is_none()
            && self.leaky.is_none()
    }

    /// Applies the epilogue to a run of channel `ch`'s values (`res`: the residual's values at
    /// the same places, when there is one).
    pub fn run(&self, ch: usize, v: &mut [C], res: Option<&[C]>) {
        // in one pass where the compute type has a kernel for it (no rounding between stages)
        if self.round.is_none() {
            let at = |c: &Option<Vec<C>>| c.as_ref().map(|c| c[ch]);
            let st = Stages {
                bias: at(&self.bias),
                norm: self.norm.as_ref().map(|n| n[ch]),
                scale: at(&self.scale),
                shift: at(&self.shift),
                relu: self.relu,
            };
            if C::epilogue(v, res, &st) {
                self.activate(v);
                return;
            }
        }
        // every pass 16 values per loop iteration ([`lanes`]: one interruption check each)
        let round = |v: &mut [C]| {
            if let Some(f) = self.round {
                lanes::map(v, f);
            }
        };
        if let Some(b) = &self.bias {
            let b = b[ch];
            lanes::map(v, |x| x + b);
        }
        if let Some(n) = &self.norm {
            round(v);
            let (m, a, b) = n[ch];
            lanes::map(v, |x| (x - m) * a + b);
        }
        if let Some(s) = &self.scale {
            round(v);
            let s = s[ch];
            lanes::map(v, |x| x * s);
        }
        if let Some(t) = &self.shift {
            round(v);
            let t = t[ch];
            lanes::map(v, |x| x + t);
        }
        if let Some(r) = res {
            round(v);
            lanes::zip(v, r, |x, r| x + r);
        }
        if self.relu {
            C::relu(v);
        }
        self.activate(v);
    }

    /// The activation after the other stages: LeakyRelu, or Clip's bounds as the op alone
    /// compares (NaN stays NaN; a lower bound above the upper gives the upper). LeakyRelu
    /// multiplies the value the chain stored (rounded to f16/bf16 first); Clip needs no
    /// rounding first — rounding is monotonic and the bounds are values of the type — except
    /// for the sign of a zero (a tiny negative value clipped at 0 gives +0 here, -0 in the
    /// chain, as with Relu).
    fn activate(&self, v: &mut [C]) {
        if let Some(a) = self.leaky {
            if let Some(f) = self.round {
                lanes::map(v, f);
            }
            let zero = C::from_f64(0.0);
            lanes::map(v, |x| if x > zero { x } else { a * x });
        }
        match (self.lo, self.hi) {
            (Some(l), Some(h)) => lanes::map(v, |x| {
                let x = if x < l { l } else { x };
                if x > h { h } else { x }
            }),
            (Some(l), None) => lanes::map(v, |x| if x < l { l } else { x }),
            (None, Some(h)) => lanes::map(v, |x| if x > h { h } else { x }),
            (None, None) => {}
        }
    }

    /// [`Epilogue::run`] over `rows` (consecutive channels from `ch0`, `len` values each, at
    /// element `at` of `Y`), reading the residual of those places when there is one.
    pub fn run_rows<T: Element<Compute = C>>(
        &self,
        mem: &mut dyn Memory,
        ch0: usize,
        rows: &mut [C],
        len: usize,
        at: usize,
    ) -> Result<(), OpError> {
        if self.is_identity() || len == 0 {
            return Ok(());
        }
        let res = match self.residual {
            Some(b) => {
                let s = std::mem::size_of::<T>();
                Some(dtype::Decoded::<T>::new(mem.read(
                    b,
                    (at * s) as u64,
                    rows.len() * s,
                )?))
            }
            None => None,
        };
        for (i, row) in rows.chunks_mut(len).enumerate() {
            let r = res.as_ref().map(|r| &r[i * len..][..row.len()]);
            self.run(ch0 + i, row, r);
        }
        Ok(())
    }
}

/// The first `m` elements of binding `b`, which must hold them.
fn channels<T: Element>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    b: u32,
    m: usize,
) -> Result<dtype::Decoded<T>, OpError> {
    let bytes = m
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| OpError::internal(format!("{m} channels do not fit memory")))?;
    call.require_size(b, bytes as u64, "per-channel input")?;
    Ok(dtype::Decoded::new(mem.read(b, 0, bytes)?))
}
