//! Element-by-element loops over slices that run [`UNROLL`] elements per iteration.
//!
//! The host compiles a plugin with epoch interruption (a plugin's deadline, DESIGN §5): every
//! loop iteration of compiled WebAssembly first checks the engine's epoch — a load, a compare
//! and a branch, around which Cranelift also spills the loop's constants. A plain
//! `for x in v { *x = … }` that LLVM vectorizes pays that check once per 4 `f32`s, more than
//! the arithmetic itself. These helpers take [`UNROLL`] elements per iteration (LLVM turns the
//! fixed-length inner loop into four 128-bit operations), so the check is paid once per 16.
//! Results are exactly those of the plain loop: each element is computed alone, in order.
//!
//! ```
//! use umd_sdk::lanes;
//! let mut v = vec![-1.0f32, 2.0, f32::NAN, -0.5];
//! lanes::map(&mut v, |x| x * 2.0 + 1.0);
//! assert_eq!(&v[..2], &[-1.0, 5.0]);
//! assert!(v[2].is_nan());
//! let mut acc = vec![1.0f32; 20];
//! lanes::zip(&mut acc, &[2.0; 20], |a, b| a + b);
//! assert!(acc.iter().all(|&x| x == 3.0));
//! ```

/// Elements per loop iteration.
pub const UNROLL: usize = 16;

/// `v[i] = f(v[i])` for every element.
#[inline(always)]
pub fn map<T: Copy>(v: &mut [T], f: impl Fn(T) -> T) {
    let mut chunks = v.chunks_exact_mut(UNROLL);
    for c in &mut chunks {
        // opaque to the loop vectorizer, which would otherwise vectorize across chunks with
        // strided loads; the chunk's own 16 operations become four vector ones
        let c: &mut [T; UNROLL] = core::hint::black_box(c).try_into().expect("a whole chunk");
        for x in c.iter_mut() {
            *x = f(*x);
        }
    }
    for x in chunks.into_remainder() {
        *x = f(*x);
    }
}

/// `v[i] = f(v[i], w[i])` for every element of `v` (`w` at least as long).
///
/// # Panics
/// When `w` is shorter than `v`.
#[inline(always)]
pub fn zip<T: Copy, U: Copy>(v: &mut [T], w: &[U], f: impl Fn(T, U) -> T) {
    let w = &w[..v.len()];
    let mut chunks = v.chunks_exact_mut(UNROLL);
    let mut wc = w.chunks_exact(UNROLL);
    for (c, d) in (&mut chunks).zip(&mut wc) {
        let c: &mut [T; UNROLL] = core::hint::black_box(c).try_into().expect("a whole chunk");
        let d: &[U; UNROLL] = d.try_into().expect("a whole chunk");
        for (x, &y) in c.iter_mut().zip(d) {
            *x = f(*x, y);
        }
    }
    for (x, &y) in chunks.into_remainder().iter_mut().zip(wc.remainder()) {
        *x = f(*x, y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_maps_each_element_once() {
        for n in [0, 1, 15, 16, 17, 33, 100] {
            let mut v: Vec<i64> = (0..n).collect();
            map(&mut v, |x| x * 3 + 1);
            assert_eq!(v, (0..n).map(|x| x * 3 + 1).collect::<Vec<_>>(), "{n}");
            let w: Vec<i64> = (0..n + 2).map(|x| 100 - x).collect();
            zip(&mut v, &w, |x, y| x - y);
            let want: Vec<i64> = (0..n).map(|x| x * 3 + 1 - (100 - x)).collect();
            assert_eq!(v, want, "{n}");
        }
    }

    #[test]
    #[should_panic]
    fn a_short_second_operand_panics() {
        zip(&mut [1, 2, 3], &[1, 2], |a, b| a + b);
    }
}
