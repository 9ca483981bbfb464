//! Einsum (opset 12): the equation parsed into labels (letters, and one label per dimension an
//! ellipsis covers, right-aligned and broadcast across operands), then one loop nest over every
//! label: a thread per output element sums, over the reduced labels, the product of the operands
//! at their (label-stride) offsets. A repeated label in one operand (a diagonal) adds its
//! strides; a dimension of size 1 broadcasts (stride 0). Floats (f32 compute for the halves),
//! i32 and i64 (wrapping).

use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, Dtype, OpError, OpPlan, PlanRequestExt, TensorDesc, attr, dtype, shape};

use crate::common::{self, cuda_header, linear_launch};

/// Most operands.
pub const MAX_IN: usize = 8;
/// Most labels (letters plus ellipsis dimensions) in one equation.
pub const MAX_LABELS: usize = 16;

/// Dtypes served.
pub const DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
];

/// A label of a term: a letter or the ellipsis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Letter(u8),
    Ellipsis,
}

fn bad(msg: String) -> OpError {
    OpError::InvalidAttribute(format!("Einsum: {msg}"))
}

fn parse_term(t: &str) -> Result<Vec<Tok>, OpError> {
    let mut out = Vec::new();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() {
            out.push(Tok::Letter(b[i]));
            i += 1;
        } else if t[i..].starts_with("...") {
            if out.contains(&Tok::Ellipsis) {
                return Err(bad(format!("term `{t}` has two ellipses")));
            }
            out.push(Tok::Ellipsis);
            i += 3;
        } else {
            return Err(bad(format!("unexpected `{}` in term `{t}`", b[i] as char)));
        }
    }
    Ok(out)
}

/// The loop nest of an equation: label extents (output labels first, then reduced ones) and
/// per-operand strides over them.
#[derive(Debug, PartialEq)]
pub struct Nest {
    pub out_shape: Vec<u64>,
    pub k_out: usize,
    pub ext: Vec<u64>,
    pub strides: Vec<Vec<u64>>,
}

/// Plans the loop nest of `equation` over operands of `shapes`.
pub fn nest(equation: &str, shapes: &[&[u64]]) -> Result<Nest, OpError> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Vec<Tok>> = lhs.split(',').map(parse_term).collect::<Result<_, _>>()?;
    if terms.len() != shapes.len() {
        return Err(bad(format!(
            "the equation has {} operands, {} inputs were given",
            terms.len(),
            shapes.len()
        )));
    }
    // Ellipsis dimensions of each operand, and of the broadcast.
    let mut ell = Vec::new();
    for (t, s) in terms.iter().zip(shapes) {
        let letters = t.iter().filter(|x| **x != Tok::Ellipsis).count();
        let has = t.contains(&Tok::Ellipsis);
        if s.len() < letters || (!has && s.len() != letters) {
            return Err(OpError::shape(format!(
                "Einsum: term of {letters} labels{} for an operand of rank {}",
                if has { " and an ellipsis" } else { "" },
                s.len()
            )));
        }
        ell.push(s.len() - letters);
    }
    let e_max = ell.iter().copied().max().unwrap_or(0);
    // Labels: ellipsis dims are 0..e_max, letters follow in order of appearance.
    let mut letters: Vec<u8> = Vec::new();
    for t in &terms {
        for x in t {
            if let Tok::Letter(c) = x
                && !letters.contains(c)
            {
                letters.push(*c);
            }
        }
    }
    let id = |c: u8| e_max + letters.iter().position(|l| *l == c).expect("collected");
    let n_labels = e_max + letters.len();
    if n_labels > MAX_LABELS {
        return Err(OpError::shape(format!(
            "Einsum: {n_labels} labels exceed the {MAX_LABELS} served"
        )));
    }
    // Each operand's dims as labels.
    let dims_of = |t: &[Tok], e: usize| -> Vec<usize> {
        let mut v = Vec::new();
        for x in t {
            match x {
                Tok::Letter(c) => v.push(id(*c)),
                Tok::Ellipsis => v.extend(e_max - e..e_max),
            }
        }
        v
    };
    let mut ext: Vec<Option<u64>> = vec![None; n_labels];
    let mut op_dims = Vec::new();
    for ((t, s), e) in terms.iter().zip(shapes).zip(&ell) {
        let dims = dims_of(t, *e);
        for (&l, &d) in dims.iter().zip(s.iter()) {
            ext[l] = match ext[l] {
                None => Some(d),
                Some(x) if x == d || d == 1 => Some(x),
                Some(1) => Some(d),
                Some(x) => {
                    return Err(OpError::shape(format!(
                        "Einsum: a label has extents {x} and {d} ({shapes:?})"
                    )));
                }
            };
        }
        op_dims.push(dims);
    }
    let ext: Vec<u64> = ext.into_iter().map(|e| e.unwrap_or(1)).collect();
    // Output labels.
    let out_labels: Vec<usize> = match rhs {
        Some(r) => {
            let t = parse_term(r)?;
            let mut v = Vec::new();
            for x in &t {
                match x {
                    Tok::Letter(c) => {
                        if !letters.contains(c) {
                            return Err(bad(format!(
                                "output label `{}` is in no operand",
                                *c as char
                            )));
                        }
                        v.push(id(*c));
                    }
                    Tok::Ellipsis => v.extend(0..e_max),
                }
            }
            if !t.contains(&Tok::Ellipsis) && e_max > 0 {
                return Err(bad("the output must keep the ellipsis dimensions".into()));
            }
            v
        }
        None => {
            let mut once: Vec<u8> = letters
                .iter()
                .copied()
                .filter(|c| {
                    terms
                        .iter()
                        .flatten()
                        .filter(|x| **x == Tok::Letter(*c))
                        .count()
                        == 1
                })
                .collect();
            once.sort_unstable();
            (0..e_max).chain(once.into_iter().map(id)).collect()
        }
    };
    for (i, l) in out_labels.iter().enumerate() {
        if out_labels[..i].contains(l) {
            return Err(bad("an output label repeats".into()));
        }
    }
    let order: Vec<usize> = out_labels
        .iter()
        .copied()
        .chain((0..n_labels).filter(|l| !out_labels.contains(l)))
        .collect();
    let strides = op_dims
        .iter()
        .zip(shapes)
        .map(|(dims, s)| {
            let own = shape::contiguous_strides(s);
            order
                .iter()
                .map(|&l| {
                    dims.iter()
                        .zip(&own)
                        .zip(s.iter())
                        .filter(|((d, _), n)| **d == l && **n != 1)
                        .map(|((_, st), _)| *st)
                        .sum()
                })
                .collect()
        })
        .collect();
    Ok(Nest {
        out_shape: out_labels.iter().map(|&l| ext[l]).collect(),
        k_out: out_labels.len(),
        ext: order.iter().map(|&l| ext[l]).collect(),
        strides,
    })
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    attr::only(&req.attributes, &["equation"])?;
    let equation = attr::text_or(&req.attributes, "equation", "")?;
    if !attr::has(&req.attributes, "equation") {
        return Err(OpError::InvalidAttribute(
            "Einsum: `equation` is required".into(),
        ));
    }
    let n_in = req.slots();
    if n_in == 0 || n_in > MAX_IN {
        return Err(OpError::shape(format!(
            "Einsum: 1 to {MAX_IN} inputs are served, got {n_in}"
        )));
    }
    let x0 = common::input_of(req, 0, &DTYPES)?;
    let mut shapes = Vec::new();
    for i in 0..n_in {
        let x = req.required(i)?;
        if x.dtype != x0.dtype {
            return Err(OpError::dtype(format!(
                "Einsum: every input must be {}, input {i} is {}",
                dtype::name(x0.dtype),
                dtype::name(x.dtype)
            )));
        }
        shapes.push(x.shape.as_slice());
    }
    let nest = nest(&equation, &shapes)?;
    let n_out = shape::numel(&nest.out_shape)?;
    let n_red = shape::numel(&nest.ext[nest.k_out..])?;
    let mut p = ParamPacker::new();
    for i in 0..MAX_IN {
        // unused operand slots point at operand 0 (never read)
        p.ptr(if i < n_in { i as u32 } else { 0 }, Access::Read);
    }
    p.ptr(req.output_binding(0), Access::Write)
        .u64(n_out)
        .u64(n_red)
        .u32(n_in as u32)
        .u32(nest.k_out as u32)
        .u32((nest.ext.len() - nest.k_out) as u32);
    let pad = |v: &[u64]| {
        let mut a = [0u64; MAX_LABELS];
        a[..v.len()].copy_from_slice(v);
        a
    };
    p.u64_array(&pad(&nest.ext));
    for i in 0..MAX_IN {
        p.u64_array(&pad(nest.strides.get(i).map_or(&[][..], |s| s)));
    }
    let name = dtype::name(x0.dtype);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("y", nest.out_shape.clone(), x0.dtype)],
        launches: vec![linear_launch(
            req,
            format!("misc_einsum_{name}"),
            format!("einsum_{name}"),
            n_out,
            p,
        )?],
        workspace_bytes: 0,
    })
}

const CUDA: &str = r#"
struct umd_ein_l { unsigned long long v[16]; };
struct umd_ein_st { unsigned long long v[8][16]; };
// The 8 operand pointers are separate parameters (each a relocation the host patches and the
// kernel gate checks as a 64-bit parameter); unused ones are bound to operand 0.
extern "C" __global__ void einsum_NAME(const T* x0, const T* x1, const T* x2, const T* x3,
    const T* x4, const T* x5, const T* x6, const T* x7, T* __restrict__ y,
    unsigned long long n_out, unsigned long long n_red, unsigned int n_in, unsigned int k_out,
    unsigned int k_red, umd_ein_l ext, umd_ein_st st) {
  const T* const xs[8] = {x0, x1, x2, x3, x4, x5, x6, x7};
  UMD_FOR(o, n_out) {
    unsigned long long base[8];
    for (unsigned int k = 0; k < n_in; ++k) base[k] = 0;
    unsigned long long rem = o;
    for (int d = (int)k_out - 1; d >= 0; --d) {
      unsigned long long i = rem % ext.v[d]; rem /= ext.v[d];
      for (unsigned int k = 0; k < n_in; ++k) base[k] += i * st.v[k][d];
    }
    C acc = (C)0;
    for (unsigned long long r = 0; r < n_red; ++r) {
      unsigned long long off[8];
      for (unsigned int k = 0; k < n_in; ++k) off[k] = base[k];
      unsigned long long rr = r;
      for (int d = (int)(k_out + k_red) - 1; d >= (int)k_out; --d) {
        unsigned long long i = rr % ext.v[d]; rr /= ext.v[d];
        for (unsigned int k = 0; k < n_in; ++k) off[k] += i * st.v[k][d];
      }
      C prod = LD(xs[0][off[0]]);
      for (unsigned int k = 1; k < n_in; ++k) prod = prod * LD(xs[k][off[k]]);
      acc = acc + prod;
    }
    y[o] = ST(acc);
  }
}
"#;

pub fn cuda(dt: Dtype) -> Result<(String, Vec<String>), OpError> {
    let name = dtype::name(dt);
    Ok((
        format!("{}{}", cuda_header(dt)?, CUDA.replace("NAME", name)),
        vec![format!("einsum_{name}")],
    ))
}

/// The loop nest over values of one compute type.
fn run_nest<V: Copy>(
    xs: &[Vec<V>],
    n_out: u64,
    n_red: u64,
    (k_out, k_red): (usize, usize),
    ext: &[u64],
    st: &[[u64; MAX_LABELS]],
    (zero, mul, add): (V, impl Fn(V, V) -> V, impl Fn(V, V) -> V),
) -> Vec<V> {
    let n_in = xs.len();
    let mut out = Vec::with_capacity(n_out as usize);
    let mut base = [0u64; MAX_IN];
    let mut off = [0u64; MAX_IN];
    for o in 0..n_out {
        base[..n_in].fill(0);
        let mut rem = o;
        for d in (0..k_out).rev() {
            let i = rem % ext[d];
            rem /= ext[d];
            for k in 0..n_in {
                base[k] += i * st[k][d];
            }
        }
        let mut acc = zero;
        for r in 0..n_red {
            off[..n_in].copy_from_slice(&base[..n_in]);
            let mut rr = r;
            for d in (k_out..k_out + k_red).rev() {
                let i = rr % ext[d];
                rr /= ext[d];
                for k in 0..n_in {
                    off[k] += i * st[k][d];
                }
            }
            let mut prod = xs[0][off[0] as usize];
            for k in 1..n_in {
                prod = mul(prod, xs[k][off[k] as usize]);
            }
            acc = add(acc, prod);
        }
        out.push(acc);
    }
    out
}

pub fn run_cpu(call: &umd_sdk::CpuCall, dt: Dtype) -> Result<Vec<umd_sdk::CpuWrite>, OpError> {
    let mut c = common::Call::new(call);
    let mut ptrs = [0u32; MAX_IN];
    for p in &mut ptrs {
        *p = c.r.ptr()?;
    }
    let y = c.r.ptr()?;
    let (n_out, n_red) = (c.r.u64()?, c.r.u64()?);
    let (n_in, k_out, k_red) = (
        c.r.u32()? as usize,
        c.r.u32()? as usize,
        c.r.u32()? as usize,
    );
    let ext = c.r.u64_array::<MAX_LABELS>()?;
    let mut st = [[0u64; MAX_LABELS]; MAX_IN];
    for s in &mut st {
        *s = c.r.u64_array::<MAX_LABELS>()?;
    }
    if n_in == 0 || n_in > MAX_IN || k_out + k_red > MAX_LABELS {
        return Err(OpError::internal("Einsum: bad parameter block"));
    }
    // Elements each operand must hold: 1 + the largest offset (nothing when the loop is empty).
    let mut sizes = Vec::new();
    let dims = k_out + k_red;
    let empty = ext[..dims].contains(&0);
    for s in &st[..n_in] {
        let last: u64 = (0..dims).map(|d| ext[d].saturating_sub(1) * s[d]).sum();
        sizes.push(if empty { 0 } else { last + 1 });
    }
    let nest = (k_out, k_red);
    if dtype::cuda_type(dt).is_some() && common::FLOATS.contains(&dt) {
        let xs: Vec<Vec<f64>> = (0..n_in)
            .map(|k| c.read_f64(ptrs[k], sizes[k], dt))
            .collect::<Result<_, _>>()?;
        let r = |v: f64| common::compute_round(dt, v);
        let ys = run_nest(
            &xs,
            n_out,
            n_red,
            nest,
            &ext,
            &st,
            (0.0, |a: f64, b: f64| r(a * b), |a: f64, b: f64| r(a + b)),
        );
        Ok(vec![c.write_f64(y, &ys, dt)?])
    } else {
        let xs: Vec<Vec<i64>> = (0..n_in)
            .map(|k| {
                let bytes = sizes[k] * dtype::size(dt) as u64;
                let data = c.bufs.input(ptrs[k], bytes)?;
                dtype::decode_ints(dt, &data[..bytes as usize])
                    .ok_or_else(|| OpError::internal("Einsum: not an integer dtype"))
            })
            .collect::<Result<_, _>>()?;
        let wrap = |v: i64| if dt == Dtype::I32 { v as i32 as i64 } else { v };
        let ys = run_nest(
            &xs,
            n_out,
            n_red,
            nest,
            &ext,
            &st,
            (
                0i64,
                |a: i64, b: i64| wrap(a.wrapping_mul(b)),
                |a: i64, b: i64| wrap(a.wrapping_add(b)),
            ),
        );
        let mut w = c.bufs.output(y, n_out * dtype::size(dt) as u64)?;
        for (o, v) in w.data.chunks_exact_mut(dtype::size(dt)).zip(ys) {
            o.copy_from_slice(&v.to_le_bytes()[..dtype::size(dt)]);
        }
        Ok(vec![w])
    }
}
