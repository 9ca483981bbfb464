//! Training-mode Dropout: the mask the ONNX reference draws, `RandomState(seed).uniform(0, 1,
//! shape) >= ratio`, i.e. NumPy's legacy MT19937 (seeded by `init_genrand(seed)`) and its
//! 53-bit doubles `((a >> 5) * 2^26 + (b >> 6)) / 2^53`, in element order. The stream is
//! sequential: the CUDA kernel runs it in one thread (training-mode Dropout is for conformance,
//! not speed).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dim3, Dtype, Launch, OpError, PlanRequestExt, dtype};

use crate::common::{self, cuda_header};

/// MT19937 as NumPy's legacy `RandomState` runs it.
pub struct Mt {
    key: [u32; 624],
    pos: usize,
}

impl Mt {
    pub fn new(seed: u32) -> Self {
        let mut key = [0u32; 624];
        let mut s = seed;
        for (i, k) in key.iter_mut().enumerate() {
            *k = s;
            s = 1_812_433_253u32
                .wrapping_mul(s ^ (s >> 30))
                .wrapping_add(i as u32 + 1);
        }
        Mt { key, pos: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.pos == 624 {
            for i in 0..624 {
                let y = (self.key[i] & 0x8000_0000) | (self.key[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.key[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.key[i] = v;
            }
            self.pos = 0;
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// A double in [0, 1) (`random_sample`).
    pub fn next_f64(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }
}

/// Module id of the training kernels of `dt`.
fn module(dt: Dtype) -> String {
    format!("misc_dropout_{}", dtype::name(dt))
}

/// The training-mode launch (one thread).
pub fn dropout_launch(
    req: &PlanRequestExt,
    dt: Dtype,
    n: u64,
    ratio: f64,
    seed: u32,
    mask: bool,
) -> Result<Launch, OpError> {
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write);
    if mask {
        p.ptr(req.output_binding(1), Access::Write);
    }
    p.u64(n).f64(ratio).u32(seed);
    let (params, relocations) = p.finish(req.target.limits.max_param_bytes)?;
    let name = dtype::name(dt);
    Ok(Launch {
        module_id: module(dt),
        entry_point: format!("dropout_train{}_{name}", if mask { "_mask" } else { "" }),
        grid: Dim3::x(1),
        block: Dim3::x(1),
        shared_memory: 0,
        params,
        relocations,
    })
}

/// CUDA C of NumPy's legacy MT19937 step (`umd_mt_next`), shared with [`crate::random`].
pub const CUDA_MT: &str = r#"
__device__ unsigned int umd_mt_next(unsigned int* key, int* pos) {
  if (*pos == 624) {
    for (int i = 0; i < 624; ++i) {
      unsigned int y = (key[i] & 0x80000000u) | (key[(i + 1) % 624] & 0x7fffffffu);
      unsigned int v = key[(i + 397) % 624] ^ (y >> 1);
      if (y & 1u) v ^= 0x9908b0dfu;
      key[i] = v;
    }
    *pos = 0;
  }
  unsigned int y = key[(*pos)++];
  y ^= y >> 11; y ^= (y << 7) & 0x9d2c5680u; y ^= (y << 15) & 0xefc60000u; y ^= y >> 18;
  return y;
}
"#;

const CUDA: &str = r#"
__device__ void umd_dropout_train(const T* x, T* y, unsigned char* m, unsigned long long n,
    double ratio, unsigned int seed) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned int key[624];
  unsigned int s = seed;
  for (int i = 0; i < 624; ++i) { key[i] = s; s = 1812433253u * (s ^ (s >> 30)) + (unsigned int)(i + 1); }
  int pos = 624;
  C scale = (C)1 / ((C)1 - (C)ratio);
  for (unsigned long long i = 0; i < n; ++i) {
    double a = (double)(umd_mt_next(key, &pos) >> 5), b = (double)(umd_mt_next(key, &pos) >> 6);
    double u = (a * 67108864.0 + b) / 9007199254740992.0;
    bool keep = u >= ratio;
    y[i] = ST(keep ? LD(x[i]) * scale : (C)0);
    if (m) m[i] = keep ? 1 : 0;
  }
}
extern "C" __global__ void dropout_train_NAME(const T* __restrict__ x, T* __restrict__ y,
    unsigned long long n, double ratio, unsigned int seed) {
  umd_dropout_train(x, y, 0, n, ratio, seed);
}
extern "C" __global__ void dropout_train_mask_NAME(const T* __restrict__ x, T* __restrict__ y,
    unsigned char* __restrict__ m, unsigned long long n, double ratio, unsigned int seed) {
  umd_dropout_train(x, y, m, n, ratio, seed);
}
"#;

/// CUDA source of the training module of `dt`.
pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!(
            "{}{CUDA_MT}{}",
            cuda_header(dt)?,
            CUDA.replace("NAME", name)
        ),
        vec![
            format!("dropout_train_{name}"),
            format!("dropout_train_mask_{name}"),
        ],
    ))
}

/// CPU twin of the training kernels.
pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let with_mask = call.entry_point.starts_with("dropout_train_mask_");
    let (x, y) = (c.r.ptr()?, c.r.ptr()?);
    let m = if with_mask { Some(c.r.ptr()?) } else { None };
    let (n, ratio, seed) = (c.r.u64()?, c.r.f64()?, c.r.u32()?);
    let xs = c.read_f64(x, n, dt)?;
    let r = |v: f64| common::compute_round(dt, v);
    let scale = r(1.0 / r(1.0 - r(ratio)));
    let mut mt = Mt::new(seed);
    let mut ys = vec![0.0; n as usize];
    let mut ms = vec![0.0; n as usize];
    for i in 0..n as usize {
        if mt.next_f64() >= ratio {
            ys[i] = r(xs[i] * scale);
            ms[i] = 1.0;
        }
    }
    let mut out = vec![c.write_f64(y, &ys, dt)?];
    if let Some(m) = m {
        out.push(c.write_f64(m, &ms, Dtype::Boolean)?);
    }
    Ok(out)
}
