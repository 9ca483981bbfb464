//! TfIdfVectorizer (default domain, opset 9) on i32/i64 token ids or (CPU device) string
//! tokens, 1-D `[C]` or 2-D `[B, C]`, every mode (TF, IDF, TFIDF), n-gram lengths, skips, pools
//! and weights; f32 output. String pools become ids when planning (each distinct string one),
//! the strings themselves ride in the table and the CPU kernel maps X's strings to them.
//!
//! The plan turns the pool into a table (a [`Blob`] in the workspace): for every output index
//! `j`, the n-grams counted into it (`csr[j]..csr[j+1]`, entries `(pool offset, n)`), the pool
//! values, and the weights. One thread per `(row, j)` counts, for each of its n-grams and each
//! skip distance `d` (1 only for unigrams, as the reference does), the start positions where
//! the n-gram occurs with stride `d`, then weighs the count.
//!
//! Blob layout (words): `csr[0..=O]`, entries at `ent` (2 words each), pool at its offsets,
//! weights (f64, per output) at `wts` when given.
//!
//! `weights[i]` is the weight of the i-th n-gram of the pool, as the ONNX spec says and
//! onnxruntime does: it weighs output `ngram_indexes[i]`. (The reference reads `weights` by
//! output index instead; the two agree when `ngram_indexes` is `0, 1, 2…`, as in every node
//! test.)

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{
    Access, CpuCall, CpuWrite, Dtype, ModuleSource, OpError, OpPlan, PlanRequestExt, TensorDesc,
    attr, dtype,
};

use crate::blob::Blob;
use crate::common::{self, dtype_error, get, launch, word};

pub const DTYPES: [Dtype; 2] = [Dtype::I32, Dtype::I64];
/// Mode codes.
pub const TF: u32 = 0;
pub const IDF: u32 = 1;
pub const TFIDF: u32 = 2;
/// Largest output width (`max(ngram_indexes) + 1`) served.
pub const MAX_OUTPUTS: i64 = 1 << 24;

fn bad(msg: String) -> OpError {
    OpError::InvalidAttribute(format!("TfIdfVectorizer: {msg}"))
}

/// The live n-grams `(pool offset, length, output index)` of the attributes, in the
/// reference's order (a repeated n-gram counts only into the output of its last occurrence).
pub fn ngrams(
    pool: &[i64],
    counts: &[i64],
    indexes: &[i64],
    min: i64,
    max: i64,
) -> Result<Vec<(usize, usize, usize)>, OpError> {
    let total = pool.len() as i64;
    let mut found: Vec<(usize, usize, usize)> = Vec::new();
    let mut id = 0usize; // 0-based n-gram id
    for (level, &start) in counts.iter().enumerate() {
        let end = counts.get(level + 1).copied().unwrap_or(total);
        if start < 0 || end < start || end > total {
            return Err(bad(format!(
                "`ngram_counts` {counts:?} must be non-decreasing offsets into the pool of {total}"
            )));
        }
        let size = level + 1;
        let grams = (end - start) as usize / size;
        let in_range = size as i64 >= min && size as i64 <= max;
        for g in 0..grams {
            if in_range {
                let off = start as usize + g * size;
                let out = *indexes.get(id).ok_or_else(|| {
                    bad(format!(
                        "`ngram_indexes` has {} entries, the pool holds more n-grams",
                        indexes.len()
                    ))
                })?;
                if out < 0 {
                    return Err(bad(format!("`ngram_indexes` holds a negative index {out}")));
                }
                let gram = &pool[off..off + size];
                found.retain(|&(o, n, _)| n != size || pool[o..o + n] != *gram);
                found.push((off, size, out as usize));
            }
            id += 1;
        }
    }
    Ok(found)
}

pub fn plan(req: &PlanRequestExt) -> Result<OpPlan, OpError> {
    common::check_domain(req, &["ai.onnx"])?;
    let a = &req.attributes;
    attr::only(
        a,
        &[
            "max_gram_length",
            "min_gram_length",
            "max_skip_count",
            "mode",
            "ngram_counts",
            "ngram_indexes",
            "pool_int64s",
            "pool_strings",
            "weights",
        ],
    )?;
    let strings = attr::has(a, "pool_strings");
    if strings && attr::has(a, "pool_int64s") {
        return Err(bad("give `pool_int64s` or `pool_strings`, not both".into()));
    }
    let need = |n: &str| {
        if attr::has(a, n) {
            attr::int(a, n)
        } else {
            Err(bad(format!("attribute `{n}` is required")))
        }
    };
    let (min, max, skip) = (
        need("min_gram_length")?,
        need("max_gram_length")?,
        need("max_skip_count")?,
    );
    if min < 1 || max < min || skip < 0 || skip > u32::MAX as i64 - 1 {
        return Err(bad(format!(
            "min_gram_length {min}, max_gram_length {max}, max_skip_count {skip}: need \
             1 <= min <= max and skip >= 0"
        )));
    }
    let mode = match attr::text_or(a, "mode", "")?.as_str() {
        "TF" => TF,
        "IDF" => IDF,
        "TFIDF" => TFIDF,
        m => return Err(bad(format!("`mode` = {m:?} must be TF, IDF or TFIDF"))),
    };
    let counts = attr::ints_or(a, "ngram_counts", &[])?;
    let indexes = attr::ints_or(a, "ngram_indexes", &[])?;
    // String tokens: each distinct pool string gets an id; the kernel maps X's strings to them.
    let (pool, words) = if strings {
        let pool_strings = common::strings(req, "pool_strings")?;
        let mut ids = std::collections::HashMap::new();
        let mut words: Vec<String> = Vec::new();
        let pool = pool_strings
            .iter()
            .map(|w| {
                *ids.entry(w.as_str()).or_insert_with(|| {
                    words.push(w.clone());
                    words.len() as i64 - 1
                })
            })
            .collect();
        (pool, words)
    } else {
        (attr::ints_or(a, "pool_int64s", &[])?, Vec::new())
    };
    let weights = attr::floats_or(a, "weights", &[])?;
    if indexes.is_empty() {
        return Err(bad("`ngram_indexes` is required".into()));
    }
    if let Some(i) = indexes.iter().find(|&&i| !(0..MAX_OUTPUTS).contains(&i)) {
        return Err(bad(format!(
            "`ngram_indexes` holds {i}; indexes must be in 0..{MAX_OUTPUTS}"
        )));
    }
    let outs = *indexes.iter().max().expect("non-empty") as u64 + 1;
    if !weights.is_empty() && weights.len() < indexes.len() {
        return Err(bad(format!(
            "`weights` has {} values for {} n-grams",
            weights.len(),
            indexes.len()
        )));
    }
    // the weight of n-gram `id` goes to its output `ngram_indexes[id]` (the last one there wins)
    let mut out_weights = vec![1.0; outs as usize];
    for (id, &w) in weights.iter().enumerate().take(indexes.len()) {
        out_weights[indexes[id] as usize] = w;
    }
    let grams = ngrams(&pool, &counts, &indexes, min, max)?;

    if req.slots() != 1 {
        return Err(OpError::shape("TfIdfVectorizer: takes one input X"));
    }
    let x = req.required(0)?;
    if strings {
        if x.dtype != Dtype::String {
            return Err(dtype_error(req, "X", x.dtype, &[Dtype::String]));
        }
        if !req.target.name.eq_ignore_ascii_case("cpu") {
            return Err(OpError::UnsupportedTarget(format!(
                "TfIdfVectorizer on strings runs on the CPU device only (target `{}`)",
                req.target.name
            )));
        }
    } else if !DTYPES.contains(&x.dtype) {
        return Err(dtype_error(req, "X", x.dtype, &DTYPES));
    }
    let (rows, c, shape) = match x.shape.as_slice() {
        [] => (1, 1, vec![outs]),
        [c] => (1, *c, vec![outs]),
        [b, c] => (*b, *c, vec![*b, outs]),
        s => {
            return Err(OpError::shape(format!(
                "TfIdfVectorizer: X must be [C] or [B, C], got {s:?}"
            )));
        }
    };
    let n = umd_sdk::shape::numel(&shape)?;
    umd_sdk::shape::byte_size(&shape, Dtype::F32)?;

    // the table
    let mut blob = Blob::default();
    let mut per_out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); outs as usize];
    for &(off, size, out) in &grams {
        per_out[out].push((off, size));
    }
    let ent = outs + 1;
    let pool_at = ent + 2 * grams.len() as u64;
    let mut k = 0;
    for list in &per_out {
        blob.i64(k);
        k += list.len() as i64;
    }
    blob.i64(k);
    for list in &per_out {
        for &(off, size) in list {
            blob.i64((pool_at + off as u64) as i64);
            blob.i64(size as i64);
        }
    }
    for &v in &pool {
        blob.i64(v);
    }
    let wts = blob.len();
    if !weights.is_empty() {
        for &w in &out_weights {
            blob.f64(w);
        }
    }
    // the pool's distinct strings: count, then each one's length and bytes (whole words)
    let dict = blob.len();
    if strings {
        blob.i64(words.len() as i64);
        for w in &words {
            blob.i64(w.len() as i64);
            for chunk in w.as_bytes().chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                blob.words.push(u64::from_le_bytes(word));
            }
        }
    }
    let ws = req.output_binding(1);
    let mut launches = blob.launches(req, ws)?;
    let mut p = ParamPacker::new();
    p.ptr(0, Access::Read)
        .ptr(ws, Access::Read)
        .ptr(req.output_binding(0), Access::Write)
        .u64(rows)
        .u64(c)
        .u64(outs)
        .u64(ent)
        .u64(if weights.is_empty() { 0 } else { wts })
        .u32(mode)
        .u32(skip as u32);
    if strings {
        p.u64(dict);
    }
    let name = dtype::name(x.dtype);
    launches.push(launch(
        req,
        "ml_tfidf".into(),
        format!("tfidf_{name}"),
        n,
        p,
    )?);
    Ok(OpPlan {
        outputs: vec![TensorDesc::new("Y", shape, Dtype::F32)],
        launches,
        workspace_bytes: blob.bytes(),
    })
}

const KERNEL: &str = r#"
extern "C" __global__ void tfidf_NAME(const TOK* __restrict__ x, const u64* __restrict__ tab,
    float* __restrict__ y, u64 rows, u64 c, u64 outs, u64 ent, u64 wts, unsigned int mode,
    unsigned int skip) {
  UMD_FOR(e, rows * outs) {
    u64 r = e / outs, j = e % outs;
    const TOK* row = x + r * c;
    long long freq = 0;
    for (u64 g = tab[j]; g < tab[j + 1]; g++) {
      const long long* gram = (const long long*)tab + tab[ent + 2 * g];
      u64 n = tab[ent + 2 * g + 1];
      u64 dmax = n == 1 ? 1 : (u64)skip + 1;
      for (u64 d = 1; d <= dmax; d++) {
        u64 span = (n - 1) * d;
        if (span >= c) break;
        for (u64 s = 0; s + span < c; s++) {
          u64 m = 0;
          while (m < n && (long long)row[s + m * d] == gram[m]) m++;
          if (m == n) freq++;
        }
      }
    }
    double w = wts ? __longlong_as_double((long long)tab[wts + j]) : 1.0;
    double v;
    if (mode == 0) v = (double)freq;
    else if (mode == 1) v = freq > 0 ? w : 0.0;
    else v = w * (double)freq;
    y[e] = (float)v;
  }
}
"#;

pub fn cuda() -> ModuleSource {
    let mut code = common::cuda_head(&[]);
    let mut entries = Vec::new();
    for dt in DTYPES {
        let name = dtype::name(dt);
        let ty = if dt == Dtype::I32 { "int" } else { "long long" };
        code.push_str(&KERNEL.replace("NAME", name).replace("TOK", ty));
        entries.push(format!("tfidf_{name}"));
    }
    crate::simple::module(code, entries)
}

/// The parameters every `tfidf_*` entry starts with.
struct Params {
    xb: u32,
    tb: u32,
    yb: u32,
    rows: usize,
    c: usize,
    outs: usize,
    ent: usize,
    wts: usize,
    mode: u32,
    skip: usize,
}

fn params(r: &mut ParamReader) -> Result<Params, OpError> {
    Ok(Params {
        xb: r.ptr()?,
        tb: r.ptr()?,
        yb: r.ptr()?,
        rows: r.u64()? as usize,
        c: r.u64()? as usize,
        outs: r.u64()? as usize,
        ent: r.u64()? as usize,
        wts: r.u64()? as usize,
        mode: r.u32()?,
        skip: r.u32()? as usize,
    })
}

fn tfidf<T: common::Val>(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let p = params(&mut ParamReader::new(&call.params, &call.relocations))?;
    let x = bufs.input(p.xb, (p.rows * p.c * std::mem::size_of::<T>()) as u64)?;
    let xs: Vec<i64> = (0..p.rows * p.c).map(|i| get::<T>(x, i).to_i64()).collect();
    weigh(&bufs, &p, &xs)
}

/// `tfidf_string`: X's strings become the pool's ids (`-1`, matching nothing, where a string is
/// not in the pool), then as for integer tokens.
fn tfidf_strings(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let p = params(&mut r)?;
    let dict = r.u64()? as usize;
    let n = p.rows * p.c;
    let x = umd_sdk::strings::decode(bufs.input(p.xb, 8 * n as u64)?, n)?;
    let tab = bufs.input(p.tb, 8 * (dict as u64 + 1))?;
    let count = word(tab, dict) as usize;
    let mut ids = std::collections::HashMap::with_capacity(count);
    let mut at = dict + 1;
    for id in 0..count {
        if (at + 1) * 8 > tab.len() {
            return Err(OpError::internal(
                "tfidf_string: the pool overruns the table",
            ));
        }
        let len = word(tab, at) as usize;
        let words = len.div_ceil(8);
        let end = (at + 1 + words) * 8;
        if end > tab.len() {
            return Err(OpError::internal(
                "tfidf_string: the pool overruns the table",
            ));
        }
        ids.insert(&tab[(at + 1) * 8..(at + 1) * 8 + len], id as i64);
        at += 1 + words;
    }
    let xs: Vec<i64> = x
        .iter()
        .map(|s| ids.get(s.as_bytes()).copied().unwrap_or(-1))
        .collect();
    weigh(&bufs, &p, &xs)
}

/// Counts and weighs every output of every row of token ids `xs`.
fn weigh(bufs: &umd_sdk::cpu::Buffers, p: &Params, xs: &[i64]) -> Result<Vec<CpuWrite>, OpError> {
    let (rows, c, outs, ent, wts, mode, skip) = (p.rows, p.c, p.outs, p.ent, p.wts, p.mode, p.skip);
    let tab = bufs.input(p.tb, 8 * (ent as u64))?;
    let mut y = bufs.output(p.yb, (rows * outs * 4) as u64)?;
    let mut gram = Vec::new();
    for j in 0..outs {
        let w = if wts != 0 {
            f64::from_bits(word(tab, wts + j))
        } else {
            1.0
        };
        // the n-grams of output j
        let grams: Vec<(usize, usize)> = (word(tab, j)..word(tab, j + 1))
            .map(|g| {
                let g = g as usize;
                (
                    word(tab, ent + 2 * g) as usize,
                    word(tab, ent + 2 * g + 1) as usize,
                )
            })
            .collect();
        for r in 0..rows {
            let row = &xs[r * c..(r + 1) * c];
            let mut freq = 0i64;
            for &(off, n) in &grams {
                gram.clear();
                gram.extend((0..n).map(|m| word(tab, off + m) as i64));
                let dmax = if n == 1 { 1 } else { skip + 1 };
                for d in 1..=dmax {
                    let span = (n - 1) * d;
                    if span >= c {
                        break;
                    }
                    for s in 0..c - span {
                        if gram.iter().enumerate().all(|(m, &g)| row[s + m * d] == g) {
                            freq += 1;
                        }
                    }
                }
            }
            let v = match mode {
                TF => freq as f64,
                IDF => {
                    if freq > 0 {
                        w
                    } else {
                        0.0
                    }
                }
                _ => w * freq as f64,
            };
            let i = r * outs + j;
            y.data[i * 4..i * 4 + 4].copy_from_slice(&(v as f32).to_le_bytes());
        }
    }
    Ok(vec![y])
}

pub fn run_cpu(call: &CpuCall, dt: Dtype) -> Result<Vec<CpuWrite>, OpError> {
    if dt == Dtype::String {
        return tfidf_strings(call);
    }
    crate::by_dtype!(dt, tfidf, OpError::internal("tfidf: unknown dtype"), call)
}
