//! CPU kernels: the reference implementation of the Attention and RotaryEmbedding entry points
//! of [`crate::cuda`] (those of [`crate::conv`] and [`crate::linear`] live there), reading
//! the same parameter blocks. The entry point is decoded once (`{kernel}_{dtype}`), then a loop
//! monomorphic in the element type runs over the whole grid, with the same rounding points as
//! the CUDA kernels.

use half::{bf16, f16};
use umd_sdk::cpu::Buffers;
use umd_sdk::dtype::{self, Element};
use umd_sdk::params::ParamReader;
use umd_sdk::{CpuCall, CpuWrite, Dtype, OpError};

use crate::attention::{
    CAUSAL, MASK, MASK_BOOL, NONPAD, P_EXACT, PAST, PRESENT_K, PRESENT_V, QK_OUT, SEQ_SUM,
    SOFTMAX_ROUND, WINDOW,
};
use crate::rotary::{INTERLEAVED, POSITIONS, SEQ_OUTER};

/// What the kernels compute in: f32 (for f32, f16, bf16) or f64.
pub trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::AddAssign
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INFINITY: Self;
    const NAN: Self;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn from_f64(v: f64) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            const NAN: Self = <$t>::NAN;
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
real!(f32);
real!(f64);

/// `max` that propagates NaN (as numpy's `max`).
#[inline(always)]
fn nan_max<C: Real>(a: C, b: C) -> C {
    if a > b || a.is_nan() { a } else { b }
}

/// A buffer of `T`s decoded to the compute type.
pub fn decode<T: Element>(buf: &[u8]) -> Vec<T::Compute> {
    let s = std::mem::size_of::<T>();
    buf.chunks_exact(s)
        .map(|b| T::load(b).to_compute())
        .collect()
}

pub fn encode<T: Element>(vals: &[T::Compute], out: &mut [u8]) {
    let s = std::mem::size_of::<T>();
    for (b, v) in out.chunks_exact_mut(s).zip(vals) {
        T::from_compute(*v).store(b);
    }
}

/// `v` rounded to `T` and back.
#[inline(always)]
pub fn rnd<T: Element>(v: T::Compute) -> T::Compute {
    T::from_compute(v).to_compute()
}

fn i64s(buf: &[u8]) -> Vec<i64> {
    buf.chunks_exact(8).map(i64::load).collect()
}

fn overflow() -> OpError {
    OpError::internal("attention: element count overflows")
}

fn mul(dims: &[u64]) -> Result<u64, OpError> {
    dims.iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(overflow)
}

/// Runs one launch.
pub fn run(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    let (kernel, dt) = call.entry_point.split_once('_').ok_or_else(unknown)?;
    let dt = dtype::from_name(dt).ok_or_else(unknown)?;
    macro_rules! typed {
        ($f:ident) => {
            match dt {
                Dtype::F32 => $f::<f32>(call),
                Dtype::F16 => $f::<f16>(call),
                Dtype::Bf16 => $f::<bf16>(call),
                Dtype::F64 => $f::<f64>(call),
                _ => Err(unknown()),
            }
        };
    }
    match kernel {
        "attention" => typed!(attention),
        "rotary" => typed!(rotary),
        "causalconv" => {
            use crate::conv::run as causalconv;
            typed!(causalconv)
        }
        "linear" => {
            use crate::linear::run as linear;
            typed!(linear)
        }
        "swiglu" => {
            use crate::swiglu::run as swiglu;
            typed!(swiglu)
        }
        _ => Err(unknown()),
    }
}

/// Reads a pointer that is present when `on`, else a null u64.
pub fn opt_ptr(r: &mut ParamReader, on: bool) -> Result<Option<u32>, OpError> {
    if on {
        r.ptr().map(Some)
    } else {
        r.u64().map(|_| None)
    }
}

fn attention<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let (flags, mode) = (r.u32()?, r.u32()?);
    let has = |b: u32| flags & b != 0;
    let (q, k, v) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let mask = opt_ptr(&mut r, has(MASK))?;
    let pk = opt_ptr(&mut r, has(PAST))?;
    let pv = opt_ptr(&mut r, has(PAST))?;
    let nonpad = opt_ptr(&mut r, has(NONPAD))?;
    let y = r.ptr()?;
    let prk = opt_ptr(&mut r, has(PRESENT_K))?;
    let prv = opt_ptr(&mut r, has(PRESENT_V))?;
    let qk = opt_ptr(&mut r, has(QK_OUT))?;
    let mut u = [0u64; 25];
    for x in &mut u {
        *x = r.u64()?;
    }
    let [b_n, hq, hkv, sq, skv, p_len, dk, dv, mlen] =
        [u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8]];
    let st = |i: usize| [u[i] as usize, u[i + 1] as usize, u[i + 2] as usize];
    let (qst, kst, vst, yst) = (st(9), st(12), st(15), st(18));
    let mst = [u[21], u[22], u[23], u[24]].map(|x| x as usize);
    let ss = T::Compute::from_f64(r.f64()?);
    let softcap = T::Compute::from_f64(r.f64()?);
    let (left, right) = (r.i64()?, r.i64()?);

    let total = p_len.checked_add(skv).ok_or_else(overflow)?;
    let size = std::mem::size_of::<T>() as u64;
    // input extents: the largest element index each reads, plus one
    let extent = |st: [usize; 3], h: u64, s: u64, d: u64| -> Result<u64, OpError> {
        if b_n == 0 || h == 0 || s == 0 || d == 0 {
            return Ok(0);
        }
        let last = (b_n - 1) * st[0] as u64 + (h - 1) * st[1] as u64 + (s - 1) * st[2] as u64 + d;
        Ok(last)
    };
    let qv = decode::<T>(bufs.input(q, extent(qst, hq, sq, dk)? * size)?);
    let kv = decode::<T>(bufs.input(k, extent(kst, hkv, skv, dk)? * size)?);
    let vv = decode::<T>(bufs.input(v, extent(vst, hkv, skv, dv)? * size)?);
    let past = |b: Option<u32>, d: u64| -> Result<Vec<T::Compute>, OpError> {
        match b {
            Some(b) => Ok(decode::<T>(
                bufs.input(b, mul(&[b_n, hkv, p_len, d])? * size)?,
            )),
            None => Ok(Vec::new()),
        }
    };
    let (pkv, pvv) = (past(pk, dk)?, past(pv, dv)?);
    let nonpad = match nonpad {
        Some(b) => i64s(bufs.input(b, b_n * 8)?),
        None => Vec::new(),
    };
    let mask_extent = if mlen == 0 {
        0
    } else {
        let dims = [b_n, hq, sq, mlen];
        let mut last = 1u64;
        for (d, s) in dims.iter().zip(mst) {
            if *d == 0 {
                last = 0;
                break;
            }
            last += (d - 1) * s as u64;
        }
        last
    };
    let (mask_f, mask_b): (Vec<T::Compute>, Vec<bool>) = match mask {
        Some(b) if has(MASK_BOOL) => (
            Vec::new(),
            bufs.input(b, mask_extent)?
                .iter()
                .map(|&x| x != 0)
                .collect(),
        ),
        Some(b) => (decode::<T>(bufs.input(b, mask_extent * size)?), Vec::new()),
        None => (Vec::new(), Vec::new()),
    };

    let (bn, hq, hkv, sq, pl, dk, dv, mlen, total) = (
        b_n as usize,
        hq as usize,
        hkv as usize,
        sq as usize,
        p_len as usize,
        dk as usize,
        dv as usize,
        mlen as usize,
        total as usize,
    );
    let mut out_y = bufs.output(y, mul(&[b_n, hq as u64, sq as u64, dv as u64])? * size)?;
    let mut yv = vec![T::Compute::ZERO; bn * hq * sq * dv];
    let key_row = |b: usize, hk: usize, t: usize| -> &[T::Compute] {
        if t < pl {
            let o = ((b * hkv + hk) * pl + t) * dk;
            &pkv[o..o + dk]
        } else {
            let o = b * kst[0] + hk * kst[1] + (t - pl) * kst[2];
            &kv[o..o + dk]
        }
    };
    let value_row = |b: usize, hk: usize, t: usize| -> &[T::Compute] {
        if t < pl {
            let o = ((b * hkv + hk) * pl + t) * dv;
            &pvv[o..o + dv]
        } else {
            let o = b * vst[0] + hk * vst[1] + (t - pl) * vst[2];
            &vv[o..o + dv]
        }
    };
    // the present caches, [B, Hkv, T, D]
    let present = |out: Option<u32>, d: usize, key: bool| -> Result<Option<CpuWrite>, OpError> {
        let Some(o) = out else { return Ok(None) };
        let mut w = bufs.output(o, mul(&[b_n, hkv as u64, total as u64, d as u64])? * size)?;
        let mut vals = Vec::with_capacity(bn * hkv * total * d);
        for b in 0..bn {
            for hk in 0..hkv {
                for t in 0..total {
                    vals.extend_from_slice(if key {
                        key_row(b, hk, t)
                    } else {
                        value_row(b, hk, t)
                    });
                }
            }
        }
        encode::<T>(&vals, &mut w.data);
        Ok(Some(w))
    };
    let out_pk = present(prk, dk, true)?;
    let out_pv = present(prv, dv, false)?;
    let mut qk_out = match qk {
        Some(o) => Some(bufs.output(o, mul(&[b_n, hq as u64, sq as u64, total as u64])? * size)?),
        None => None,
    };
    let mut qkv = vec![
        T::Compute::ZERO;
        if qk.is_some() {
            bn * hq * sq * total
        } else {
            0
        }
    ];

    let ninf = T::Compute::NEG_INFINITY;
    let zero = T::Compute::ZERO;
    let term = |ok: bool| if ok { zero } else { ninf };
    let rep = hq / hkv.max(1);
    let (round, seq) = (has(SOFTMAX_ROUND), has(SEQ_SUM));
    let (mut xs, mut raws, mut biases) = (vec![zero; total], vec![zero; total], vec![zero; total]);
    let mut acc = vec![zero; dv];
    for row in 0..bn * hq * sq {
        let i = row % sq;
        let h = (row / sq) % hq;
        let b = row / (sq * hq);
        let hk = h / rep;
        let qo = b * qst[0] + h * qst[1] + i * qst[2];
        let qs: Vec<T::Compute> = qv[qo..qo + dk].iter().map(|&x| rnd::<T>(x * ss)).collect();
        let np = nonpad.get(b).copied().unwrap_or(0);
        let off = if has(PAST) {
            pl as i64
        } else if has(NONPAD) {
            np - sq as i64
        } else {
            0
        };
        let pos = i as i64 + off;
        for j in 0..total {
            let kr = key_row(b, hk, j);
            let mut s = zero;
            for d in 0..dk {
                s += qs[d] * rnd::<T>(kr[d] * ss);
            }
            let mut s = rnd::<T>(s);
            if softcap > zero {
                s = rnd::<T>(softcap * (s / softcap).tanh());
            }
            let mut bias = zero;
            if has(MASK) {
                bias = if j < mlen {
                    let mi = b * mst[0] + h * mst[1] + i * mst[2] + j * mst[3];
                    if has(MASK_BOOL) {
                        term(mask_b[mi])
                    } else {
                        mask_f[mi]
                    }
                } else {
                    ninf
                };
            }
            if has(CAUSAL) {
                bias += term(j as i64 <= pos);
            }
            if has(WINDOW) {
                let diff = pos - j as i64;
                bias += term((left < 0 || diff <= left) && (right < 0 || -diff <= right));
            }
            if has(NONPAD) {
                bias += term((j as i64) < np);
            }
            raws[j] = s;
            biases[j] = bias;
            xs[j] = rnd::<T>(s + bias);
        }
        let xm = xs.iter().fold(ninf, |m, &x| nan_max(m, x));
        let bm = biases.iter().fold(ninf, |m, &x| nan_max(m, x));
        let masked = bm == ninf;
        let safe = if xm == ninf { zero } else { xm };
        let sexp = |x: T::Compute| {
            if round {
                rnd::<T>(rnd::<T>(x - safe).exp())
            } else {
                (x - safe).exp()
            }
        };
        let mut sum = zero;
        for &x in &xs {
            sum = if seq {
                rnd::<T>(sum + sexp(x))
            } else {
                sum + sexp(x)
            };
        }
        if round {
            sum = rnd::<T>(sum);
        }
        if sum == zero {
            sum = T::Compute::ONE;
        }
        acc.iter_mut().for_each(|a| *a = zero);
        for j in 0..total {
            let p = if masked {
                zero
            } else if round {
                rnd::<T>(sexp(xs[j]) / sum)
            } else {
                sexp(xs[j]) / sum
            };
            if qk.is_some() {
                qkv[row * total + j] = match mode {
                    3 => p,
                    2 => xs[j],
                    _ => raws[j],
                };
            }
            let p = if has(P_EXACT) { p } else { rnd::<T>(p) };
            for (a, &vx) in acc.iter_mut().zip(value_row(b, hk, j)) {
                *a += p * vx;
            }
        }
        let yo = b * yst[0] + h * yst[1] + i * yst[2];
        yv[yo..yo + dv].copy_from_slice(&acc);
    }
    encode::<T>(&yv, &mut out_y.data);
    if let Some(w) = &mut qk_out {
        encode::<T>(&qkv, &mut w.data);
    }
    Ok([Some(out_y), out_pk, out_pv, qk_out]
        .into_iter()
        .flatten()
        .collect())
}

fn rotary<T: Element>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError>
where
    T::Compute: Real,
{
    let bufs = Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (x, cos, sin) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let pos = opt_ptr(&mut r, flags & POSITIONS != 0)?;
    let y = r.ptr()?;
    let [n, d, a1, a2, seq, rd, rows] = [(); 7].map(|_| 0u64);
    let mut vals = [n, d, a1, a2, seq, rd, rows];
    for v in &mut vals {
        *v = r.u64()?;
    }
    let [n, d, a1, a2, seq, rd, rows] = vals;
    let size = std::mem::size_of::<T>() as u64;
    let half = rd / 2;
    let xv = decode::<T>(bufs.input(x, n * size)?);
    let cache = mul(&[rows, half])? * size;
    let (cv, sv) = (
        decode::<T>(bufs.input(cos, cache)?),
        decode::<T>(bufs.input(sin, cache)?),
    );
    let batch = if d == 0 || a1 == 0 || a2 == 0 {
        0
    } else {
        n / (d * a1 * a2)
    };
    let pv = match pos {
        Some(p) => i64s(bufs.input(p, mul(&[batch, seq])? * 8)?),
        None => Vec::new(),
    };
    let mut out = bufs.output(y, n * size)?;
    let (d, a1, a2, seq, rd, half) = (
        d as usize,
        a1 as usize,
        a2 as usize,
        seq as usize,
        rd as usize,
        half as usize,
    );
    let mut yv = xv.clone();
    for (o, yo) in yv.iter_mut().enumerate() {
        let e = o % d;
        if e >= rd {
            continue;
        }
        let rr = o / d;
        let (s2, r1) = (rr % a2, rr / a2);
        let (s1, b) = (r1 % a1, r1 / a1);
        let s = if flags & SEQ_OUTER != 0 { s1 } else { s2 };
        let mut row = b * seq + s;
        if pos.is_some() {
            let p = pv[row];
            if p < 0 || p as u64 >= rows {
                *yo = T::Compute::NAN;
                continue;
            }
            row = p as usize;
        }
        let (i, d1, d2, second) = if flags & INTERLEAVED != 0 {
            (e / 2, e & !1, (e & !1) + 1, e & 1 == 1)
        } else if e < half {
            (e, e, e + half, false)
        } else {
            (e - half, e - half, e, true)
        };
        let (c, sn) = (cv[row * half + i], sv[row * half + i]);
        let (x1, x2) = (xv[o - e + d1], xv[o - e + d2]);
        *yo = if second {
            sn * x1 + c * x2
        } else {
            c * x1 - sn * x2
        };
    }
    encode::<T>(&yv, &mut out.data);
    Ok(vec![out])
}
