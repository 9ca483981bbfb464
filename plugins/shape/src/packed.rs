//! Casts to and from the packed sub-byte dtypes (ABI 1.4: INT4, UINT4, INT2, UINT2,
//! FLOAT4E2M1), on the CPU and in CUDA C. The rules are ONNX's reference (ml_dtypes) casts:
//! - a packed integer is its value (sign-extended for INT4/INT2), a FLOAT4E2M1 its float; as a
//!   source it converts exactly as an i8/u8/f32 of the same value would;
//! - to a packed integer: floats truncate toward zero to a 64-bit integer (NaN and values beyond
//!   it become 0), integers keep their value; then the low bits are kept (wrapping, two's
//!   complement);
//! - to FLOAT4E2M1: round to nearest, ties to the even code, saturate to ±6 (see
//!   [`umd_sdk::dtype::f32_to_f4e2m1`]).
//!
//! A kernel writing a packed tensor writes whole bytes: its thread `j` (or CPU step) computes the
//! elements of byte `j`, so no two threads touch one byte.

use umd_sdk::Dtype;
use umd_sdk::dtype::{self, is_packed};

use crate::cast::convert_bytes;

/// The whole-byte dtype holding a packed type's values exactly.
fn twin(dt: Dtype) -> Dtype {
    match dt {
        Dtype::I4 | Dtype::I2 => Dtype::I8,
        Dtype::F4e2m1 => Dtype::F32,
        _ => Dtype::U8,
    }
}

fn is_float(dt: Dtype) -> bool {
    matches!(dt, Dtype::F32 | Dtype::F16 | Dtype::Bf16 | Dtype::F64) || dtype::is_f8(dt)
}

/// Converts `n` elements of `from` in `src` into `dst` (`to`), one of them packed.
pub fn convert(from: Dtype, to: Dtype, mode: u32, n: usize, src: &[u8], dst: &mut [u8]) {
    let expanded;
    let (from, src) = if is_packed(from) {
        let t = twin(from);
        let mut buf = vec![0u8; n * dtype::size(t)];
        for (i, o) in buf.chunks_exact_mut(dtype::size(t)).enumerate() {
            let v = dtype::packed_value(dtype::packed_code(src, from, i), from);
            match t {
                Dtype::F32 => o.copy_from_slice(&v.to_le_bytes()),
                _ => o[0] = v as i8 as u8,
            }
        }
        expanded = buf;
        (t, &expanded[..])
    } else {
        (from, src)
    };
    if !is_packed(to) {
        return convert_bytes(from, to, mode, src, dst);
    }
    let codes: Vec<u8> = if is_float(from) {
        let mut wide = vec![0u8; n * 8];
        convert_bytes(from, Dtype::F64, mode, src, &mut wide);
        wide.chunks_exact(8)
            .map(|b| {
                let d = f64::from_le_bytes(b.try_into().expect("8 bytes"));
                match to {
                    Dtype::F4e2m1 => dtype::f32_to_f4e2m1(d),
                    _ => dtype::int_to_packed(truncate(d), to),
                }
            })
            .collect()
    } else {
        let mut wide = vec![0u8; n * 8];
        convert_bytes(from, Dtype::I64, mode, src, &mut wide);
        wide.chunks_exact(8)
            .map(|b| {
                let v = i64::from_le_bytes(b.try_into().expect("8 bytes"));
                match to {
                    Dtype::F4e2m1 => dtype::f32_to_f4e2m1(v as f64),
                    _ => dtype::int_to_packed(v, to),
                }
            })
            .collect()
    };
    dtype::pack_codes(codes, to, dst);
}

/// A float truncated toward zero to i64; NaN and values beyond i64 are 0 (as ml_dtypes).
fn truncate(d: f64) -> i64 {
    if d.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) {
        0
    } else {
        d as i64
    }
}

/// How a packed source element `i` of `src` is loaded in CUDA C: as `long long v` (integers)
/// or `float f` (FLOAT4E2M1).
pub fn cuda_load(dt: Dtype, i: &str) -> String {
    let b = dtype::bits(dt);
    let per = 8 / b;
    let code = format!(
        "const unsigned int c = ((unsigned int)src[({i}) / {per}u] >> ((unsigned int)(({i}) % {per}u) * {b}u)) & {mask}u;",
        mask = (1u32 << b) - 1
    );
    let value = match dt {
        Dtype::I4 => "const long long v = (long long)((int)(c << 28) >> 28);",
        Dtype::I2 => "const long long v = (long long)((int)(c << 30) >> 30);",
        Dtype::F4e2m1 => "const float f = umd_f4_decode(c);",
        _ => "const long long v = (long long)c;",
    };
    format!("{code} {value}")
}

/// Whether a packed type loads as a float (`f`) in CUDA C.
pub fn loads_float(dt: Dtype) -> bool {
    dt == Dtype::F4e2m1
}

/// The body of a kernel writing packed `to`: each thread builds whole bytes from the elements
/// `load` (a statement defining `v`, `f` or `d` from element `i`) yields. `value` names what
/// `load` defines: "f" (float), "d" (double), "v" (integer).
pub fn cuda_store_body(to: Dtype, load: &str, value: &str) -> String {
    let b = dtype::bits(to);
    let per = 8 / b;
    let code = match (to, value) {
        (Dtype::F4e2m1, v) => format!("umd_f4_encode((double){v})"),
        (_, "v") => "(unsigned int)v".to_string(),
        (_, v) => format!("(unsigned int)umd_f2ll_wrap((double){v})"),
    };
    format!(
        "const unsigned long long nb = (n * {b}ull + 7ull) / 8ull;
    UMD_GRID_STRIDE(j, nb) {{
        unsigned int byte = 0u;
        for (unsigned int k = 0u; k < {per}u; ++k) {{
            const unsigned long long i = j * {per}ull + k;
            if (i < n) {{ {load} byte |= ({code} & {mask}u) << (k * {b}u); }}
        }}
        dst[j] = (unsigned char)byte;
    }}",
        mask = (1u32 << b) - 1
    )
}
