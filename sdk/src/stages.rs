//! A channel's run of `f32` values through the stages a convolution or a normalization ends
//! with — `+ bias`, an inference BatchNormalization `(x - mean) · a + b`, `· scale`, `+ shift`,
//! `+ residual`, Relu — in one pass on four-lane vectors ([`crate::simd::F32x4`]), 16 values
//! per loop iteration (one interruption check: see [`crate::lanes`]). Every value goes
//! through the same operations in the same order as one pass per stage would take it, so the
//! results are those of the passes, bit for bit. Each combination of stages is compiled on its
//! own: a branch per stage and vector inside the loop cost more than the passes it saves.
//!
//! ```
//! use umd_sdk::stages::{self, Stages};
//! let mut v = vec![-2.0f32, 0.5, 3.0, f32::NAN, 1.0];
//! let st = Stages { bias: Some(1.0), relu: true, ..Stages::default() };
//! assert!(stages::apply(&mut v, None, &st));
//! assert_eq!(&v[..3], &[0.0, 1.5, 4.0]);
//! assert!(v[3].is_nan());
//! ```

use crate::simd::F32x4;

/// The stages for one channel, in the order they apply: `+ bias`,
/// `(x - mean) · a + b` (an inference BatchNormalization), `· scale`, `+ shift`, `+ residual`,
/// Relu.
#[derive(Clone, Copy, Debug)]
pub struct Stages<C> {
    pub bias: Option<C>,
    pub norm: Option<(C, C, C)>,
    pub scale: Option<C>,
    pub shift: Option<C>,
    pub relu: bool,
}

impl<C> Default for Stages<C> {
    /// No stage: values pass unchanged.
    fn default() -> Self {
        Stages {
            bias: None,
            norm: None,
            scale: None,
            shift: None,
            relu: false,
        }
    }
}

/// Every stage of `st` (and the residual `res`, at the same places as `v`, when there is one)
/// applied to `v` in one pass, 16 values per loop iteration: each value goes through the same
/// operations in the same order as the stage-by-stage passes, so the same bits. Always taken
/// for `f32` (the `bool` says so, for callers generic over their compute type).
///
/// # Panics
/// When `res` is shorter than `v`.
pub fn apply(v: &mut [f32], res: Option<&[f32]>, st: &Stages<f32>) -> bool {
    let res = res.map(|r| &r[..v.len()]);
    let affine = st.scale.is_some() || st.shift.is_some();
    macro_rules! pick {
        ($(($b:literal, $n:literal, $a:literal, $r:literal, $l:literal)),*) => {
            match (st.bias.is_some(), st.norm.is_some(), affine, res.is_some(), st.relu) {
                $(($b, $n, $a, $r, $l) => fused::<$b, $n, $a, $r, $l>(v, res, st),)*
            }
        };
    }
    pick!(
        (false, false, false, false, false),
        (false, false, false, false, true),
        (false, false, false, true, false),
        (false, false, false, true, true),
        (false, false, true, false, false),
        (false, false, true, false, true),
        (false, false, true, true, false),
        (false, false, true, true, true),
        (false, true, false, false, false),
        (false, true, false, false, true),
        (false, true, false, true, false),
        (false, true, false, true, true),
        (false, true, true, false, false),
        (false, true, true, false, true),
        (false, true, true, true, false),
        (false, true, true, true, true),
        (true, false, false, false, false),
        (true, false, false, false, true),
        (true, false, false, true, false),
        (true, false, false, true, true),
        (true, false, true, false, false),
        (true, false, true, false, true),
        (true, false, true, true, false),
        (true, false, true, true, true),
        (true, true, false, false, false),
        (true, true, false, false, true),
        (true, true, false, true, false),
        (true, true, false, true, true),
        (true, true, true, false, false),
        (true, true, true, false, true),
        (true, true, true, true, false),
        (true, true, true, true, true)
    );
    true
}

/// [`apply`] for one combination of stages (`B`ias, `N`ormalization, `A`ffine: scale then
/// shift, `R`esidual, Relu `L`), which the caller has checked `st` and `res` hold. An absent
/// scale is 1 and an absent shift -0 (`x · 1` and `x + -0` are `x`, bit for bit; `x + 0` is
/// not, for `x = -0`).
#[inline(never)]
fn fused<const B: bool, const N: bool, const A: bool, const R: bool, const L: bool>(
    v: &mut [f32],
    res: Option<&[f32]>,
    st: &Stages<f32>,
) {
    let bias = st.bias.unwrap_or(0.0);
    let (m, a, b) = st.norm.unwrap_or((0.0, 1.0, 0.0));
    let (sc, sh) = (st.scale.unwrap_or(1.0), st.shift.unwrap_or(-0.0));
    let (vb, vm, va, vbb) = (
        F32x4::splat(bias),
        F32x4::splat(m),
        F32x4::splat(a),
        F32x4::splat(b),
    );
    let (vsc, vsh) = (F32x4::splat(sc), F32x4::splat(sh));
    let r = res.unwrap_or(&[]);
    let lanes = |mut x: F32x4, i: usize| {
        if B {
            x = x + vb;
        }
        if N {
            x = (x - vm) * va + vbb;
        }
        if A {
            x = x * vsc + vsh;
        }
        if R {
            x = x + F32x4::load(&r[i..]);
        }
        if L { x.relu() } else { x }
    };
    let one = |mut x: f32, i: usize| {
        if B {
            x += bias;
        }
        if N {
            x = (x - m) * a + b;
        }
        if A {
            x = x * sc + sh;
        }
        if R {
            x += r[i];
        }
        if L && x < 0.0 { 0.0 } else { x }
    };
    let n = v.len();
    let mut i = 0;
    // 16 per iteration (one interruption check), then 4, then 1
    while i + 16 <= n {
        for q in (i..i + 16).step_by(4) {
            lanes(F32x4::load(&v[q..]), q).store(&mut v[q..]);
        }
        i += 16;
    }
    while i + 4 <= n {
        lanes(F32x4::load(&v[i..]), i).store(&mut v[i..]);
        i += 4;
    }
    for (j, x) in v.iter_mut().enumerate().skip(i) {
        *x = one(*x, j);
    }
}

/// Relu in place: 0 where a value is below zero (NaN and -0 stay as they are).
#[inline(never)]
pub fn relu(v: &mut [f32]) {
    let mut chunks = v.chunks_exact_mut(16);
    for c in &mut chunks {
        for q in 0..4 {
            F32x4::load(&c[4 * q..]).relu().store(&mut c[4 * q..]);
        }
    }
    let mut chunks = chunks.into_remainder().chunks_exact_mut(4);
    for c in &mut chunks {
        F32x4::load(c).relu().store(c);
    }
    for x in chunks.into_remainder() {
        *x = if *x < 0.0 { 0.0 } else { *x };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::awkward_f32s as row;

    #[test]
    fn epilogue_in_one_pass_equals_the_stage_by_stage_passes() {
        let full = Stages {
            bias: Some(0.25),
            norm: Some((0.5, 1.5, -0.75)),
            scale: Some(-2.0),
            shift: Some(1.0),
            relu: true,
        };
        let variants = [
            Stages::default(),
            Stages {
                bias: Some(-1.0),
                relu: true,
                ..Stages::default()
            },
            Stages {
                norm: full.norm,
                ..Stages::default()
            },
            full,
        ];
        for st in variants {
            for n in [0, 3, 4, 17, 64] {
                for with_res in [false, true] {
                    let (mut fast, r) = (row(n), row(n + 3)[3..].to_vec());
                    let res = with_res.then_some(&r[..]);
                    let mut slow = fast.clone();
                    assert!(apply(&mut fast, res, &st));
                    // the passes, one stage over the whole run at a time
                    let pass = |v: &mut Vec<f32>, f: &dyn Fn(f32, usize) -> f32| {
                        for (i, x) in v.iter_mut().enumerate() {
                            *x = f(*x, i);
                        }
                    };
                    if let Some(b) = st.bias {
                        pass(&mut slow, &|x, _| x + b);
                    }
                    if let Some((m, a, b)) = st.norm {
                        pass(&mut slow, &|x, _| (x - m) * a + b);
                    }
                    if let Some(s) = st.scale {
                        pass(&mut slow, &|x, _| x * s);
                    }
                    if let Some(t) = st.shift {
                        pass(&mut slow, &|x, _| x + t);
                    }
                    if let Some(res) = res {
                        pass(&mut slow, &|x, i| x + res[i]);
                    }
                    if st.relu {
                        pass(&mut slow, &|x, _| if x < 0.0 { 0.0 } else { x });
                    }
                    let bits = |v: &[f32]| {
                        v.iter()
                            .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&fast), bits(&slow), "{st:?} {n} {with_res}");
                }
            }
        }
    }

    #[test]
    fn relu_matches_its_scalar_loop() {
        for n in [0, 5, 16, 27, 33] {
            let mut v = row(n);
            let want: Vec<u32> = v
                .iter()
                .map(|&x| if x < 0.0 { 0.0f32 } else { x }.to_bits())
                .collect();
            relu(&mut v);
            assert_eq!(
                v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want,
                "{n}"
            );
        }
    }
}
