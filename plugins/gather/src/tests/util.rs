//! Test helpers: requests, random data, element-level access to byte buffers.

use umd_sdk::request::RequestBuilder;
use umd_sdk::{AttrValueExt, Dtype, OpError, OpPlan, PlanRequestExt, Target, TensorDesc, dtype};

use crate::GatherPlugin;
use crate::common::ALL_DTYPES;

/// A tiny deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo) as u64) as i64
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    pub fn shape(&mut self, rank: usize, lo: i64, hi: i64) -> Vec<u64> {
        (0..rank).map(|_| self.range(lo, hi) as u64).collect()
    }
}

pub fn desc(name: &str, shape: &[u64], dt: Dtype) -> TensorDesc {
    TensorDesc::new(name, shape.to_vec(), dt)
}

pub fn numel(shape: &[u64]) -> usize {
    shape.iter().product::<u64>() as usize
}

/// Index values as bytes of an i32 or i64 tensor.
pub fn idx_bytes(v: &[i64], is64: bool) -> Vec<u8> {
    if is64 {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    } else {
        v.iter().flat_map(|x| (*x as i32).to_le_bytes()).collect()
    }
}

pub fn enc(dt: Dtype, v: &[f64]) -> Vec<u8> {
    dtype::encode(dt, v).unwrap()
}

pub fn dec(dt: Dtype, b: &[u8]) -> Vec<f64> {
    dtype::decode_f64(dt, b)
}

pub fn ints(v: &[i64]) -> Vec<u8> {
    idx_bytes(v, true)
}

/// Random bytes that are valid elements of `dt` (0/1 for bool).
pub fn data(rng: &mut Rng, dt: Dtype, n: usize) -> Vec<u8> {
    let mut b = rng.bytes(n * dtype::size(dt));
    if dt == Dtype::Boolean {
        b.iter_mut().for_each(|x| *x &= 1);
    }
    b
}

/// Element `i` of a buffer of `size`-byte elements.
pub fn elem(b: &[u8], size: usize, i: usize) -> &[u8] {
    &b[i * size..(i + 1) * size]
}

pub fn builder(op: &str) -> RequestBuilder {
    PlanRequestExt::builder(op)
}

pub fn int(v: i64) -> AttrValueExt {
    AttrValueExt::Int(v)
}

pub fn text(v: &str) -> AttrValueExt {
    AttrValueExt::Text(v.into())
}

pub fn build(b: RequestBuilder) -> PlanRequestExt {
    b.build(Target::cpu())
}

/// Plans and runs on the CPU kernels; every output's bytes.
pub fn run(req: &PlanRequestExt, inputs: &[Vec<u8>]) -> Result<(OpPlan, Vec<Vec<u8>>), OpError> {
    umd_sdk::testing::run::<GatherPlugin>(req, inputs)
}

/// Plans only.
pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    <GatherPlugin as umd_sdk::Plugin>::plan_ext(req)
}

/// Plans for CUDA and fetches the module sources.
pub fn cuda(req: &PlanRequestExt) {
    umd_sdk::testing::cuda_sources::<GatherPlugin>(req)
        .unwrap_or_else(|e| panic!("{}: {e:?}", req.op));
}

pub fn all_dtypes() -> [Dtype; 18] {
    ALL_DTYPES
}

/// Row-major strides.
pub fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// The multi-index of flat `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[u64]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d] as usize;
        i /= shape[d] as usize;
    }
    c
}

pub fn ravel(c: &[usize], shape: &[u64]) -> usize {
    c.iter().zip(strides(shape)).map(|(a, s)| a * s).sum()
}

#[track_caller]
pub fn assert_attr_err(r: Result<(OpPlan, Vec<Vec<u8>>), OpError>, needle: &str) {
    match r {
        Err(OpError::InvalidAttribute(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!(
            "want InvalidAttribute({needle}), got {:?}",
            other.map(|_| ())
        ),
    }
}

#[track_caller]
pub fn assert_shape_err(r: Result<(OpPlan, Vec<Vec<u8>>), OpError>) {
    assert!(
        matches!(r, Err(OpError::InvalidShape(_))),
        "want InvalidShape, got {:?}",
        r.map(|_| ())
    );
}

#[track_caller]
pub fn assert_dtype_err(r: Result<(OpPlan, Vec<Vec<u8>>), OpError>) {
    assert!(
        matches!(r, Err(OpError::UnsupportedDtype(_))),
        "want UnsupportedDtype, got {:?}",
        r.map(|_| ())
    );
}
