//! CPU pooling: MaxPool (with optional Indices), AveragePool and LpPool over one window per
//! output element, visiting only the window's in-bounds positions (the same arithmetic as the
//! CUDA kernels).

use super::gemm::Real;
use crate::geom::{FLAG_COL_MAJOR, FLAG_COUNT_PAD, Geom, valid_range};

/// What MaxPool compares: NaN-aware ordering and the value of an empty window.
pub trait MaxVal: Copy + PartialOrd {
    const LOWEST: Self;
    fn is_nan(self) -> bool;
}

macro_rules! max_val {
    ($t:ty, $lowest:expr, $nan:expr) => {
        impl MaxVal for $t {
            const LOWEST: $t = $lowest;
            #[inline(always)]
            fn is_nan(self) -> bool {
                $nan(self)
            }
        }
    };
}
max_val!(f32, f32::NEG_INFINITY, f32::is_nan);
max_val!(f64, f64::NEG_INFINITY, f64::is_nan);
max_val!(i8, i8::MIN, |_| false);
max_val!(u8, 0, |_| false);

/// Visits every output position of every (image, channel) plane with the in-bounds window
/// ranges: `f(plane, out_index, base, ranges)` where `base[d] = o[d]*s[d] - pb[d]` and
/// `ranges[d]` are the kernel offsets `k` with `0 <= base[d] + k*d[d] < in[d]`. The bases and
/// ranges depend on one axis each: computed once per axis position (a division each), not per
/// output.
fn each_window(g: &Geom, mut f: impl FnMut(usize, usize, [i64; 3], [(i64, i64); 3], [i64; 3])) {
    let axis = |d: usize| -> Vec<(i64, (i64, i64))> {
        (0..g.out[d])
            .map(|o| {
                let b = o * g.s[d] - g.pb[d];
                (b, valid_range(b, g.d[d], g.k[d], g.inp[d]))
            })
            .collect()
    };
    let (zs, ys, xs) = (axis(0), axis(1), axis(2));
    let planes = (g.n * g.c) as usize;
    let mut o = 0usize;
    for plane in 0..planes {
        for (oz, &(bz, rz)) in zs.iter().enumerate() {
            for (oy, &(by, ry)) in ys.iter().enumerate() {
                for (ox, &(bx, rx)) in xs.iter().enumerate() {
                    let at = [oz as i64, oy as i64, ox as i64];
                    f(plane, o, [bz, by, bx], [rz, ry, rx], at);
                    o += 1;
                }
            }
        }
    }
}

/// MaxPool: writes the maxima to `y` and, when given, their flat input indices to `idx`
/// (row-major, or column-major over the spatial axes with `storage_order = 1`). NaN wins.
pub fn max<V: MaxVal>(g: &Geom, x: &[V], mut y: impl FnMut(usize, V), mut idx: Option<&mut [i64]>) {
    let in_sz = g.in_size() as usize;
    let col_major = g.flags & FLAG_COL_MAJOR != 0;
    each_window(g, |plane, o, b, r, _| {
        let xp = &x[plane * in_sz..][..in_sz];
        let mut best = V::LOWEST;
        let mut arg: Option<[i64; 3]> = None;
        for kz in r[0].0..r[0].1 {
            let iz = b[0] + kz * g.d[0];
            for ky in r[1].0..r[1].1 {
                let iy = b[1] + ky * g.d[1];
                let row = (iz * g.inp[1] + iy) * g.inp[2];
                for kx in r[2].0..r[2].1 {
                    let ix = b[2] + kx * g.d[2];
                    let v = xp[(row + ix) as usize];
                    if arg.is_none() || v > best || (v.is_nan() && !best.is_nan()) {
                        best = v;
                        arg = Some([iz, iy, ix]);
                    }
                }
            }
        }
        y(o, best);
        if let Some(idx) = idx.as_deref_mut() {
            idx[o] = match arg {
                None => -1,
                Some([iz, iy, ix]) => {
                    let within = if col_major {
                        iz + g.inp[0] * (iy + g.inp[1] * ix)
                    } else {
                        (iz * g.inp[1] + iy) * g.inp[2] + ix
                    };
                    (plane * in_sz) as i64 + within
                }
            };
        }
    });
}

/// AveragePool (`lp = None`) or LpPool (`lp = Some(p)`): the window's in-bounds sum, divided
/// by the in-bounds count (or, with `count_include_pad`, by the count of positions inside the
/// padded input), or raised to `1/p`.
pub fn sum<A: Real>(g: &Geom, x: &[A], lp: Option<A>, mut y: impl FnMut(usize, A)) {
    let in_sz = g.in_size() as usize;
    let count_pad = g.flags & FLAG_COUNT_PAD != 0;
    let (one, two) = (A::ONE, A::ONE + A::ONE);
    each_window(g, |plane, o, b, r, out| {
        let xp = &x[plane * in_sz..][..in_sz];
        let mut acc = A::ZERO;
        for kz in r[0].0..r[0].1 {
            let iz = b[0] + kz * g.d[0];
            for ky in r[1].0..r[1].1 {
                let row = (iz * g.inp[1] + b[1] + ky * g.d[1]) * g.inp[2] + b[2];
                for kx in r[2].0..r[2].1 {
                    let v = xp[(row + kx * g.d[2]) as usize];
                    acc += match lp {
                        None => v,
                        Some(p) if p == one => v.abs(),
                        Some(p) if p == two => v * v,
                        Some(p) => v.abs().powf(p),
                    };
                }
            }
        }
        let v = match lp {
            Some(p) if p == one => acc,
            Some(p) if p == two => acc.sqrt(),
            Some(p) => acc.powf(one / p),
            None => {
                let count = if count_pad {
                    (0..3)
                        .map(|d| {
                            let (lo, hi) = valid_range(
                                out[d] * g.s[d],
                                g.d[d],
                                g.k[d],
                                g.inp[d] + g.pb[d] + g.pe[d],
                            );
                            hi - lo
                        })
                        .product::<i64>()
                } else {
                    r.iter().map(|(lo, hi)| hi - lo).product::<i64>()
                };
                acc / A::from_f64(count as f64)
            }
        };
        y(o, v);
    });
}
