//! A mixed-radix complex FFT, in f32 or f64, that forms every value as numpy's (pocketfft's
//! `cfftp`) does, for lengths whose prime factors are 2, 3 and 5: the same factorisation (radix
//! 8 first, then 4, one 2 moved to the front, then 3s and 5s), the same butterflies in the same
//! order of operations, twiddles `cos/sin(2πk/n)` rounded once from f64, and the scale applied
//! last. In f32 `np.fft.ifft` of complex64 data (numpy ≥ 2 computes it in float32) is
//! reproduced bit for bit, which the exact transform cannot do where the result is near zero
//! (the ONNX reference's expected data carries numpy's rounding); in f64 it is within f64
//! rounding of the exact transform (pocketfft computes its f64 twiddles its own way, so numpy's
//! f64 results may differ in the last bit). O(n log n) instead of the direct O(n²).
//!
//! Owns the arithmetic only; the DFT kernel ([`crate::signal`]) decides when to use it.

use std::ops::{Add, Mul, Neg, Sub};

/// The element type of a transform: f32 or f64.
pub trait Float:
    Copy
    + Default
    + PartialEq
    + Into<f64>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
{
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
}

impl Float for f32 {
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
}

impl Float for f64 {
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
}

/// One complex value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cx<T> {
    pub r: T,
    pub i: T,
}

impl<T: Float> Add for Cx<T> {
    type Output = Self;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Cx {
            r: self.r + o.r,
            i: self.i + o.i,
        }
    }
}

impl<T: Float> Sub for Cx<T> {
    type Output = Self;
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Cx {
            r: self.r - o.r,
            i: self.i - o.i,
        }
    }
}

// pocketfft's constants (cos and sin of 2π/3, 2π/5, 4π/5; 1/√2), each rounded once to `T`
#[allow(
    clippy::excessive_precision,
    reason = "the constants as pocketfft spells them"
)]
mod pf {
    pub const SIN_2PI_3: f64 = 0.8660254037844386467637231707529362;
    pub const COS_2PI_5: f64 = 0.3090169943749474241022934171828191;
    pub const SIN_2PI_5: f64 = 0.9510565162951535721164393333793821;
    pub const COS_4PI_5: f64 = -0.8090169943749474241022934171828191;
    pub const SIN_4PI_5: f64 = 0.5877852522924731291687059546390728;
    pub const HSQT2: f64 = std::f64::consts::FRAC_1_SQRT_2;
}

impl<T: Float> Cx<T> {
    #[inline(always)]
    fn scale(self, t: T) -> Self {
        Cx {
            r: self.r * t,
            i: self.i * t,
        }
    }
    /// `self · w` (backward) or `self · conj(w)` (forward).
    #[inline(always)]
    fn twiddle(self, w: Self, fwd: bool) -> Self {
        if fwd {
            Cx {
                r: self.r * w.r + self.i * w.i,
                i: self.i * w.r - self.r * w.i,
            }
        } else {
            Cx {
                r: self.r * w.r - self.i * w.i,
                i: self.r * w.i + self.i * w.r,
            }
        }
    }
    /// `i · self`.
    #[inline(always)]
    fn rot90(self) -> Self {
        Cx {
            r: -self.i,
            i: self.r,
        }
    }
    /// `∓i · self` (forward: `-i`).
    #[inline(always)]
    fn rotx90(self, fwd: bool) -> Self {
        if fwd {
            Cx {
                r: self.i,
                i: -self.r,
            }
        } else {
            self.rot90()
        }
    }
    #[inline(always)]
    fn rotx45(self, fwd: bool) -> Self {
        let h = T::of(pf::HSQT2);
        if fwd {
            Cx {
                r: h * (self.r + self.i),
                i: h * (self.i - self.r),
            }
        } else {
            Cx {
                r: h * (self.r - self.i),
                i: h * (self.i + self.r),
            }
        }
    }
    #[inline(always)]
    fn rotx135(self, fwd: bool) -> Self {
        let h = T::of(pf::HSQT2);
        if fwd {
            Cx {
                r: h * (self.i - self.r),
                i: h * (-self.r - self.i),
            }
        } else {
            Cx {
                r: h * (-self.r - self.i),
                i: h * (self.r - self.i),
            }
        }
    }
}

/// Whether `n` ≥ 1 has no prime factor above 5 (the lengths this module transforms).
fn smooth(n: usize) -> bool {
    if n == 0 {
        return false;
    }
    let mut n = n;
    for p in [2, 3, 5] {
        while n.is_multiple_of(p) {
            n /= p;
        }
    }
    n == 1
}

/// pocketfft's factor order for a [`smooth`] `n`.
fn factors(n: usize) -> Vec<usize> {
    let (mut f, mut len) = (Vec::new(), n);
    while len.is_multiple_of(8) {
        f.push(8);
        len /= 8;
    }
    while len.is_multiple_of(4) {
        f.push(4);
        len /= 4;
    }
    if len.is_multiple_of(2) {
        len /= 2;
        f.push(2);
        let last = f.len() - 1;
        f.swap(0, last);
    }
    for p in [3, 5] {
        while len.is_multiple_of(p) {
            f.push(p);
            len /= p;
        }
    }
    f
}

/// A transform of one [`smooth`] length: pocketfft's factors and the twiddles `e^{2πik/n}`,
/// made once and run on many lines.
pub struct Plan<T> {
    factors: Vec<usize>,
    tw: Vec<Cx<T>>,
    ch: Vec<Cx<T>>,
}

impl<T: Float> Plan<T> {
    /// `None` where `n` is not [`smooth`].
    pub fn new(n: usize) -> Option<Self> {
        if !smooth(n) {
            return None;
        }
        let tw = (0..n)
            .map(|k| {
                let (s, co) = crate::signal::sincospi(2.0 * k as f64 / n as f64);
                Cx {
                    r: T::of(co),
                    i: T::of(s),
                }
            })
            .collect();
        Some(Plan {
            factors: factors(n),
            tw,
            ch: vec![Cx::default(); n],
        })
    }

    /// Transforms `c` (of the plan's length) in place: forward `Σ x_j e^{-2πijk/n}` or backward
    /// `Σ x_j e^{+2πijk/n}`, times `fct`.
    pub fn run(&mut self, c: &mut [Cx<T>], fwd: bool, fct: T) {
        let n = self.tw.len();
        assert_eq!(c.len(), n, "a line of another length than the plan's");
        let mut l1 = 1;
        for &ip in &self.factors {
            let ido = n / (ip * l1);
            let p = Pass {
                ido,
                l1,
                fwd,
                tw: &self.tw,
            };
            let ch = &mut self.ch;
            match ip {
                2 => p.pass2(c, ch),
                3 => p.pass3(c, ch),
                4 => p.pass4(c, ch),
                5 => p.pass5(c, ch),
                _ => p.pass8(c, ch),
            }
            c.copy_from_slice(ch);
            l1 *= ip;
        }
        if fct != T::of(1.0) {
            c.iter_mut().for_each(|v| *v = v.scale(fct));
        }
    }
}

/// A transform of any length ≥ 1 in f64, in one direction: a [`Plan`] where the length is
/// [`smooth`], else Bluestein's chirp-z — `X_k = w_k Σ_j (x_j w_j) conj(w_{k-j})` with
/// `w_t = e^{∓πi t²/n}`, the convolution by FFTs of a smooth length ≥ 2n − 1 (within f64
/// rounding of the exact transform, O(n log n)).
pub enum AnyPlan {
    Smooth(Plan<f64>, bool),
    Chirp(Box<Chirp>),
}

/// Bluestein's state for one length and direction.
pub struct Chirp {
    /// `w_t`, `t < n`.
    w: Vec<Cx<f64>>,
    /// The forward transform of `conj(w)` wrapped to length `m`, divided by `m`.
    bf: Vec<Cx<f64>>,
    plan: Plan<f64>,
    buf: Vec<Cx<f64>>,
}

impl AnyPlan {
    /// The plan for length `n` ≥ 1, forward (`fwd`) or backward.
    pub fn new(n: usize, fwd: bool) -> Self {
        if let Some(p) = Plan::new(n) {
            return AnyPlan::Smooth(p, fwd);
        }
        assert!(n >= 1, "a transform of length 0");
        let mut m = n.checked_mul(2).expect("the line fits memory, so 2n does") - 1;
        while !smooth(m) {
            m += 1;
        }
        let sign = if fwd { -1.0 } else { 1.0 };
        let w: Vec<Cx<f64>> = (0..n as u128)
            .map(|t| {
                let (s, c) = crate::signal::sincospi(((t * t) % (2 * n as u128)) as f64 / n as f64);
                Cx { r: c, i: sign * s }
            })
            .collect();
        let mut bf = vec![Cx::default(); m];
        for (t, v) in w.iter().enumerate() {
            let conj = Cx { r: v.r, i: -v.i };
            bf[t] = conj;
            if t > 0 {
                bf[m - t] = conj;
            }
        }
        let mut plan = Plan::new(m).expect("m is smooth");
        plan.run(&mut bf, true, 1.0 / m as f64);
        AnyPlan::Chirp(Box::new(Chirp {
            w,
            bf,
            plan,
            buf: vec![Cx::default(); m],
        }))
    }

    /// Transforms `c` (of the plan's length) in place, times `fct`.
    pub fn run(&mut self, c: &mut [Cx<f64>], fct: f64) {
        match self {
            AnyPlan::Smooth(p, fwd) => p.run(c, *fwd, fct),
            AnyPlan::Chirp(ch) => {
                let Chirp { w, bf, plan, buf } = &mut **ch;
                assert_eq!(c.len(), w.len(), "a line of another length than the plan's");
                buf.fill(Cx::default());
                for ((b, x), wt) in buf.iter_mut().zip(c.iter()).zip(w.iter()) {
                    *b = x.twiddle(*wt, false);
                }
                plan.run(buf, true, 1.0);
                for (b, f) in buf.iter_mut().zip(bf.iter()) {
                    *b = b.twiddle(*f, false);
                }
                plan.run(buf, false, 1.0);
                for ((x, b), wt) in c.iter_mut().zip(buf.iter()).zip(w.iter()) {
                    *x = b.twiddle(*wt, false).scale(fct);
                }
            }
        }
    }
}

/// One radix pass: `ido` points per butterfly leg, `l1` butterflies done before it.
struct Pass<'a, T> {
    ido: usize,
    l1: usize,
    fwd: bool,
    tw: &'a [Cx<T>],
}

impl<T: Float> Pass<'_, T> {
    /// Input element `a` of leg `b` of butterfly `k` (radix `cdim`).
    #[inline(always)]
    fn cc(&self, cc: &[Cx<T>], a: usize, b: usize, k: usize, cdim: usize) -> Cx<T> {
        cc[a + self.ido * (b + cdim * k)]
    }
    #[inline(always)]
    fn at(&self, a: usize, k: usize, c: usize) -> usize {
        a + self.ido * (k + self.l1 * c)
    }
    /// The twiddle of leg `x + 1` at point `i`.
    #[inline(always)]
    fn wa(&self, x: usize, i: usize) -> Cx<T> {
        self.tw[(x + 1) * self.l1 * i]
    }
    /// `v` twiddled for leg `x + 1` at point `i` (none at point 0).
    #[inline(always)]
    fn out(&self, v: Cx<T>, x: usize, i: usize) -> Cx<T> {
        if i == 0 {
            v
        } else {
            v.twiddle(self.wa(x, i), self.fwd)
        }
    }

    fn pass2(&self, cc: &[Cx<T>], ch: &mut [Cx<T>]) {
        for k in 0..self.l1 {
            for i in 0..self.ido {
                let (a, b) = (self.cc(cc, i, 0, k, 2), self.cc(cc, i, 1, k, 2));
                ch[self.at(i, k, 0)] = a + b;
                ch[self.at(i, k, 1)] = self.out(a - b, 0, i);
            }
        }
    }

    fn pass3(&self, cc: &[Cx<T>], ch: &mut [Cx<T>]) {
        let sign = |v: T| if self.fwd { -v } else { v };
        let (tw1r, tw1i) = (T::of(-0.5), sign(T::of(pf::SIN_2PI_3)));
        for k in 0..self.l1 {
            for i in 0..self.ido {
                let t0 = self.cc(cc, i, 0, k, 3);
                let (c1, c2) = (self.cc(cc, i, 1, k, 3), self.cc(cc, i, 2, k, 3));
                let (t1, t2) = (c1 + c2, c1 - c2);
                ch[self.at(i, k, 0)] = t0 + t1;
                let ca = t0 + t1.scale(tw1r);
                let cb = t2.scale(tw1i).rot90();
                ch[self.at(i, k, 1)] = self.out(ca + cb, 0, i);
                ch[self.at(i, k, 2)] = self.out(ca - cb, 1, i);
            }
        }
    }

    fn pass4(&self, cc: &[Cx<T>], ch: &mut [Cx<T>]) {
        for k in 0..self.l1 {
            for i in 0..self.ido {
                let g = |j| self.cc(cc, i, j, k, 4);
                let (t2, t1) = (g(0) + g(2), g(0) - g(2));
                let (t3, t4) = (g(1) + g(3), (g(1) - g(3)).rotx90(self.fwd));
                ch[self.at(i, k, 0)] = t2 + t3;
                ch[self.at(i, k, 1)] = self.out(t1 + t4, 0, i);
                ch[self.at(i, k, 2)] = self.out(t2 - t3, 1, i);
                ch[self.at(i, k, 3)] = self.out(t1 - t4, 2, i);
            }
        }
    }

    fn pass5(&self, cc: &[Cx<T>], ch: &mut [Cx<T>]) {
        let sign = |v: T| if self.fwd { -v } else { v };
        let (tw1r, tw1i) = (T::of(pf::COS_2PI_5), sign(T::of(pf::SIN_2PI_5)));
        let (tw2r, tw2i) = (T::of(pf::COS_4PI_5), sign(T::of(pf::SIN_4PI_5)));
        for k in 0..self.l1 {
            for i in 0..self.ido {
                let g = |j| self.cc(cc, i, j, k, 5);
                let t0 = g(0);
                let (t1, t4) = (g(1) + g(4), g(1) - g(4));
                let (t2, t3) = (g(2) + g(3), g(2) - g(3));
                ch[self.at(i, k, 0)] = Cx {
                    r: t0.r + t1.r + t2.r,
                    i: t0.i + t1.i + t2.i,
                };
                for (u1, u2, twar, twbr, twai, twbi) in [
                    (1, 4, tw1r, tw2r, tw1i, tw2i),
                    (2, 3, tw2r, tw1r, tw2i, -tw1i),
                ] {
                    let ca = Cx {
                        r: t0.r + twar * t1.r + twbr * t2.r,
                        i: t0.i + twar * t1.i + twbr * t2.i,
                    };
                    let cb = Cx {
                        r: -(twai * t4.i + twbi * t3.i),
                        i: twai * t4.r + twbi * t3.r,
                    };
                    ch[self.at(i, k, u1)] = self.out(ca + cb, u1 - 1, i);
                    ch[self.at(i, k, u2)] = self.out(ca - cb, u2 - 1, i);
                }
            }
        }
    }

    fn pass8(&self, cc: &[Cx<T>], ch: &mut [Cx<T>]) {
        let fwd = self.fwd;
        for k in 0..self.l1 {
            for i in 0..self.ido {
                let g = |j| self.cc(cc, i, j, k, 8);
                let (a1, a5) = (g(1) + g(5), g(1) - g(5));
                let (a3, a7) = (g(3) + g(7), g(3) - g(7));
                let a7 = a7.rotx90(fwd);
                let (a1, a3) = (a1 + a3, (a1 - a3).rotx90(fwd));
                let (a5, a7) = ((a5 + a7).rotx45(fwd), (a5 - a7).rotx135(fwd));
                let (a0, a4) = (g(0) + g(4), g(0) - g(4));
                let (a2, a6) = (g(2) + g(6), (g(2) - g(6)).rotx90(fwd));
                let (a0, a2) = (a0 + a2, a0 - a2);
                let (a4, a6) = (a4 + a6, a4 - a6);
                ch[self.at(i, k, 0)] = a0 + a1;
                ch[self.at(i, k, 4)] = self.out(a0 - a1, 3, i);
                ch[self.at(i, k, 2)] = self.out(a2 + a3, 1, i);
                ch[self.at(i, k, 6)] = self.out(a2 - a3, 5, i);
                ch[self.at(i, k, 1)] = self.out(a4 + a5, 0, i);
                ch[self.at(i, k, 5)] = self.out(a4 - a5, 4, i);
                ch[self.at(i, k, 3)] = self.out(a6 + a7, 2, i);
                ch[self.at(i, k, 7)] = self.out(a6 - a7, 6, i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact DFT in f64.
    fn direct(x: &[Cx<f32>], fwd: bool) -> Vec<(f64, f64)> {
        let n = x.len();
        (0..n)
            .map(|k| {
                let (mut re, mut im) = (0.0, 0.0);
                for (j, v) in x.iter().enumerate() {
                    let a = 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                    let (s, c) = a.sin_cos();
                    let s = if fwd { -s } else { s };
                    re += v.r as f64 * c - v.i as f64 * s;
                    im += v.r as f64 * s + v.i as f64 * c;
                }
                (re, im)
            })
            .collect()
    }

    #[test]
    fn smooth_lengths_transform_like_the_exact_dft_and_others_are_declined() {
        for n in [
            1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 24, 25, 30, 32, 64, 100, 120, 360, 512,
        ] {
            let x: Vec<Cx<f32>> = (0..n)
                .map(|j| Cx {
                    r: ((j * 7919) % 97) as f32 / 13.0 - 3.0,
                    i: ((j * 104_729) % 89) as f32 / 11.0 - 4.0,
                })
                .collect();
            for fwd in [true, false] {
                let mut c = x.clone();
                Plan::new(n).expect("smooth").run(&mut c, fwd, 0.5);
                let want = direct(&x, fwd);
                let scale: f64 = x.iter().map(|v| v.r.abs().max(v.i.abs()) as f64).sum();
                for (k, (g, w)) in c.iter().zip(&want).enumerate() {
                    let err = (g.r as f64 - w.0 * 0.5)
                        .abs()
                        .max((g.i as f64 - w.1 * 0.5).abs());
                    assert!(err <= 1e-6 * scale, "n {n} fwd {fwd} k {k}: {g:?} vs {w:?}");
                }
            }
        }
        for n in [0, 7, 11, 14, 49, 97] {
            assert!(Plan::<f32>::new(n).is_none(), "n = {n}");
        }
    }

    #[test]
    fn any_length_transforms_in_f64_within_rounding_of_the_exact_dft() {
        // smooth lengths by the passes, the others (primes, 7·11, 2·97) by Bluestein
        for n in [1, 6, 7, 40, 77, 96, 97, 194, 360, 1000, 1021] {
            let x: Vec<Cx<f32>> = (0..n)
                .map(|j| Cx {
                    r: ((j * 31) % 17) as f32 - 8.0,
                    i: ((j * 7) % 5) as f32,
                })
                .collect();
            for fwd in [true, false] {
                let mut c: Vec<Cx<f64>> = x
                    .iter()
                    .map(|v| Cx {
                        r: v.r.into(),
                        i: v.i.into(),
                    })
                    .collect();
                AnyPlan::new(n, fwd).run(&mut c, 0.25);
                for (k, (g, w)) in c.iter().zip(direct(&x, fwd)).enumerate() {
                    let err = (g.r - w.0 * 0.25).abs().max((g.i - w.1 * 0.25).abs());
                    assert!(err < 1e-10, "n {n} fwd {fwd} k {k}: {g:?} vs {w:?}");
                }
            }
        }
    }

    #[test]
    fn factors_follow_pocketfft_order() {
        assert_eq!(factors(10), vec![2, 5]);
        assert_eq!(factors(16), vec![2, 8]);
        assert_eq!(factors(96), vec![8, 4, 3]);
        assert_eq!(factors(80), vec![2, 8, 5]);
        assert_eq!(factors(360), vec![8, 3, 3, 5]);
    }
}
