//! Col2Im (opset 18): `image_shape` and `block_shape` constant inputs, `dilations`, `pads`,
//! `strides`; N-D. A gather: one thread per image element sums, over the kernel offsets, the
//! column entries whose block lands on it.

use umd_sdk::params::ParamPacker;
use umd_sdk::shape::{self, MAX_RANK};
use umd_sdk::{Access, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype};

use crate::common::{self, FLOATS, cuda_header, input_of, linear_launch};

fn arr(v: &[u64]) -> [u64; MAX_RANK] {
    let mut a = [1u64; MAX_RANK];
    a[..v.len()].copy_from_slice(v);
    a
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["dilations", "pads", "strides"])?;
    common::at_most_inputs(req, 3)?;
    let x = input_of(req, 0, &FLOATS)?;
    let need = |i: usize, what: &str| -> Result<Vec<i64>, OpError> {
        req.ints(i)?
            .ok_or_else(|| OpError::shape(format!("Col2Im: input {i} (`{what}`) is required")))
    };
    let image = need(1, "image_shape")?;
    let block = need(2, "block_shape")?;
    let nd = image.len();
    if nd == 0 || nd > MAX_RANK - 2 || block.len() != nd {
        return Err(OpError::shape(format!(
            "Col2Im: `image_shape` {image:?} and `block_shape` {block:?} must have the same length (1 to {})",
            MAX_RANK - 2
        )));
    }
    let list = |n: &str, def: i64, len: usize| -> Result<Vec<i64>, OpError> {
        let v = attr::ints_or(&req.attributes, n, &vec![def; len])?;
        if v.len() != len || v.iter().any(|x| *x < if n == "pads" { 0 } else { 1 }) {
            return Err(OpError::InvalidAttribute(format!(
                "Col2Im: `{n}` must hold {len} values ({}), got {v:?}",
                if n == "pads" { "≥ 0" } else { "≥ 1" }
            )));
        }
        Ok(v)
    };
    let dil = list("dilations", 1, nd)?;
    let pads = list("pads", 0, 2 * nd)?;
    let strides = list("strides", 1, nd)?;
    if image.iter().chain(&block).any(|v| *v < 1) {
        return Err(OpError::shape(
            "Col2Im: `image_shape` and `block_shape` must be ≥ 1",
        ));
    }
    let mut nblocks = Vec::new();
    for d in 0..nd {
        let span = dil[d] * (block[d] - 1) + 1;
        let nb = (image[d] + pads[d] + pads[d + nd] - span).div_euclid(strides[d]) + 1;
        if nb < 1 {
            return Err(OpError::shape(format!(
                "Col2Im: no sliding block fits dimension {d}"
            )));
        }
        nblocks.push(nb as u64);
    }
    let k: u64 = block.iter().map(|v| *v as u64).product();
    let l = shape::numel(&nblocks)?;
    if x.shape.len() != 3 || x.shape[1] % k != 0 || x.shape[2] != l {
        return Err(OpError::shape(format!(
            "Col2Im: the input must be [N, C·{k}, {l}] (blocks {nblocks:?}), got {:?}",
            x.shape
        )));
    }
    let c = x.shape[1] / k;
    let mut out = vec![x.shape[0], c];
    out.extend(image.iter().map(|v| *v as u64));
    let total = shape::numel(&out)?;
    let u = |v: &[i64]| v.iter().map(|x| *x as u64).collect::<Vec<_>>();
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(total)
        .u64(k)
        .u32(nd as u32)
        .u64_array(&arr(&u(&image)))
        .u64_array(&arr(&u(&block)))
        .u64_array(&arr(&nblocks))
        .u64_array(&arr(&u(&strides)))
        .u64_array(&arr(&u(&pads[..nd])))
        .u64_array(&arr(&u(&dil)));
    let name = dtype::name(x.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", out, x.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_col2im_{name}"),
            format!("col2im_{name}"),
            total,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
struct umd_d8 { unsigned long long v[8]; };
extern "C" __global__ void col2im_NAME(const T* __restrict__ x, T* __restrict__ y,
    unsigned long long total, unsigned long long K, unsigned int nd, umd_d8 img, umd_d8 blk,
    umd_d8 nb, umd_d8 st, umd_d8 pad, umd_d8 dil) {
  unsigned long long pix = 1, L = 1;
  for (unsigned int d = 0; d < nd; ++d) { pix *= img.v[d]; L *= nb.v[d]; }
  UMD_FOR(e, total) {
    unsigned long long nc = e / pix, p = e % pix;
    long long pos[8];
    unsigned long long rem = p;
    for (int d = (int)nd - 1; d >= 0; --d) { pos[d] = (long long)(rem % img.v[d]); rem /= img.v[d]; }
    C acc = (C)0;
    for (unsigned long long kk = 0; kk < K; ++kk) {
      unsigned long long kr = kk, b = 0, bm = 1;
      bool ok = true;
      for (int d = (int)nd - 1; d >= 0; --d) {
        long long kd = (long long)(kr % blk.v[d]); kr /= blk.v[d];
        long long q = pos[d] + (long long)pad.v[d] - kd * (long long)dil.v[d];
        if (q < 0 || q % (long long)st.v[d] != 0) { ok = false; break; }
        q /= (long long)st.v[d];
        if (q >= (long long)nb.v[d]) { ok = false; break; }
        b += (unsigned long long)q * bm; bm *= nb.v[d];
      }
      if (ok) acc += LD(x[(nc * K + kk) * L + b]);
    }
    y[e] = ST(acc);
  }
}
"#;

pub fn cuda(dt: umd_sdk::Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("col2im_{name}")],
    ))
}

pub fn run_cpu(
    call: &umd_sdk::CpuCall,
    dt: umd_sdk::Dtype,
) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let (xb, yb, total, k, nd) = (
        c.r.ptr()?,
        c.r.ptr()?,
        c.r.u64()?,
        c.r.u64()?,
        c.r.u32()? as usize,
    );
    let mut a = [[0u64; MAX_RANK]; 6];
    for v in &mut a {
        *v = c.r.u64_array::<MAX_RANK>()?;
    }
    let [img, blk, nb, st, pad, dil] = a;
    if nd == 0 || nd > MAX_RANK || st[..nd].contains(&0) {
        return Err(OpError::internal("Col2Im: bad parameter block"));
    }
    let pix = shape::numel(&img[..nd])?;
    let l = shape::numel(&nb[..nd])?;
    let xs = c.read_f64(xb, (total / pix.max(1)) * k * l, dt)?;
    let r = |v: f64| common::compute_round(dt, v);
    let mut ys = Vec::with_capacity(total as usize);
    let mut pos = [0i64; MAX_RANK];
    for e in 0..total {
        let (ncn, p) = (e / pix, e % pix);
        let mut rem = p;
        for d in (0..nd).rev() {
            pos[d] = (rem % img[d]) as i64;
            rem /= img[d];
        }
        let mut acc = 0.0;
        'k: for kk in 0..k {
            let (mut kr, mut b, mut bm) = (kk, 0u64, 1u64);
            for d in (0..nd).rev() {
                let kd = (kr % blk[d]) as i64;
                kr /= blk[d];
                let q = pos[d] + pad[d] as i64 - kd * dil[d] as i64;
                if q < 0 || q % st[d] as i64 != 0 || q / st[d] as i64 >= nb[d] as i64 {
                    continue 'k;
                }
                b += (q / st[d] as i64) as u64 * bm;
                bm *= nb[d];
            }
            acc = r(acc + xs[((ncn * k + kk) * l + b) as usize]);
        }
        ys.push(acc);
    }
    Ok(vec![c.write_f64(yb, &ys, dt)?])
}
