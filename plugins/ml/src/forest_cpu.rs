//! The tree ensembles' CPU kernel (`forest_{T}`, `forest_cls_{T}`): the flattened table
//! ([`crate::forest`]'s blob) decoded once into node records ([`Table`]) — in a compiled model
//! kept by the instance under the table's resident name (ABI 1.7) — then every row scored on
//! its own, so a launch splits by rows across the host's worker threads (in place, ABI 1.3).
//!
//! Owns the CPU traversal only: the table's layout and onnxruntime's aggregation rules stay in
//! `forest.rs` ([`finish`]), shared with the CUDA kernel's description there.

use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, OpError};

use crate::common::{Val, get, put};
use crate::forest::{NODE_WORDS, Shape, finish};
use crate::rows::{self, RowLaunch, Scorer, elem};

/// Tells a decoded forest apart from other values kept under the same name.
const KEY: u64 = 0x666f_7265_7374;

/// One branch node: the input feature, how it compares with `split`, where each way leads (a
/// node index, or `-(leaf + 1)`), and whether a NaN input takes the true branch.
#[derive(Clone, Copy)]
struct Node {
    split: f64,
    feature: u32,
    mode: u8,
    nan_true: bool,
    yes: i32,
    no: i32,
}

/// A forest's table as the CPU traversal reads it.
pub struct Table {
    /// The base values, and a classifier's labels (empty for a regressor).
    base: Vec<f32>,
    labels: Vec<i64>,
    /// Each tree's first node (or leaf).
    roots: Vec<i32>,
    nodes: Vec<Node>,
    /// Each leaf's (first, count) of its (target, weight) pairs in `targets`.
    leaves: Vec<(u32, u32)>,
    targets: Vec<(u32, f32)>,
}

fn bad_table(what: String) -> OpError {
    OpError::internal(format!("forest table: {what}"))
}

/// A node or leaf reference of the table, checked.
fn link(v: u64, nodes: usize) -> Result<i32, OpError> {
    let c = v as i64;
    match i32::try_from(c) {
        Ok(c) if c < 0 || (c as usize) < nodes => Ok(c),
        _ => Err(bad_table(format!("link {c} is outside the {nodes} nodes"))),
    }
}

impl Table {
    /// Decodes `bytes` (the table's words) for the launch shape `sh`.
    fn decode(bytes: &[u8], sh: &Shape, classifier: bool) -> Result<Table, OpError> {
        let words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        let (n0, n1) = (sh.nodes, sh.leaves);
        if n0 < sh.trees || n1 < n0 || (n1 - n0) % NODE_WORDS != 0 || n1 > words.len() {
            return Err(bad_table(format!(
                "nodes at words {n0}..{n1} of {} do not fit",
                words.len()
            )));
        }
        let count = (n1 - n0) / NODE_WORDS;
        let mut nodes = Vec::with_capacity(count);
        for r in words[n0..n1].chunks_exact(NODE_WORDS) {
            let leaf = r[1] == 6;
            if !leaf && r[0] as usize >= sh.nf {
                return Err(bad_table(format!("feature {} of {} features", r[0], sh.nf)));
            }
            nodes.push(Node {
                split: f64::from_bits(r[2]),
                feature: if leaf { 0 } else { r[0] as u32 },
                mode: r[1].min(6) as u8,
                nan_true: r[5] != 0,
                yes: if leaf { 0 } else { link(r[3], count)? },
                no: if leaf { 0 } else { link(r[4], count)? },
            });
        }
        let roots: Vec<i32> = words[..sh.trees]
            .iter()
            .map(|&w| link(w, count))
            .collect::<Result<_, _>>()?;
        // the leaves some link reaches, each with its pairs, checked here once
        let reached = roots
            .iter()
            .chain(nodes.iter().flat_map(|n| [&n.yes, &n.no]))
            .filter(|&&c| c < 0)
            .map(|&c| (-(c as i64 + 1)) as usize)
            .max()
            .map_or(0, |l| l + 1);
        if reached > words.len().saturating_sub(sh.leaves) / 2 {
            return Err(bad_table(format!(
                "leaf {} is outside the table",
                reached - 1
            )));
        }
        let (mut leaves, mut targets) = (Vec::with_capacity(reached), Vec::new());
        // leaves may share pairs in a hostile table: all of them together hold no more pairs
        // than the table has words for (a plan's leaves never share)
        let most = words.len() / 2;
        let word = |i: usize| {
            words
                .get(i)
                .copied()
                .ok_or_else(|| bad_table(format!("word {i} of {}", words.len())))
        };
        for l in 0..reached {
            let at = sh.leaves + 2 * l;
            let (start, n) = (word(at)? as usize, word(at + 1)? as usize);
            if n > most - targets.len() {
                return Err(bad_table(format!(
                    "leaf {l} has more pairs than the table holds"
                )));
            }
            leaves.push((targets.len() as u32, n as u32));
            for k in 0..n {
                let id = word(start.saturating_add(2 * k))?;
                let wt = f64::from_bits(word(start.saturating_add(2 * k + 1))?) as f32;
                if id >= sh.e as u64 {
                    return Err(bad_table(format!("leaf {l} names target {id} of {}", sh.e)));
                }
                targets.push((id as u32, wt));
            }
        }
        let base = (0..sh.nbase)
            .map(|k| word(sh.base.saturating_add(k)).map(|w| f64::from_bits(w) as f32))
            .collect::<Result<_, _>>()?;
        let labels = match classifier {
            true => (0..sh.e)
                .map(|k| word(sh.labels.saturating_add(k)).map(|w| w as i64))
                .collect::<Result<_, _>>()?,
            false => Vec::new(),
        };
        Ok(Table {
            base,
            labels,
            roots,
            nodes,
            leaves,
            targets,
        })
    }

    fn bytes(&self) -> usize {
        (self.base.len() + self.labels.len()) * 8
            + self.nodes.len() * std::mem::size_of::<Node>()
            + (self.leaves.len() + self.targets.len()) * 8
    }
}

/// The launch's bindings (X, table, scores, labels) and shape.
fn params(
    params: &[u8],
    relocations: &[umd_sdk::Relocation],
    classifier: bool,
) -> Result<(u32, u32, u32, Option<u32>, Shape), OpError> {
    let mut r = ParamReader::new(params, relocations);
    let (xb, tb, zb) = (r.ptr()?, r.ptr()?, r.ptr()?);
    let yb = if classifier { Some(r.ptr()?) } else { None };
    let mut u = || r.u64().map(|v| v as usize);
    let (rows, nf, e, trees, nodes, leaves, base, nbase, labels) =
        (u()?, u()?, u()?, u()?, u()?, u()?, u()?, u()?, u()?);
    let max_steps = r.u64()?;
    let (agg, post, binary, positive) = (r.u32()?, r.u32()?, r.u32()? != 0, r.u32()? != 0);
    let sh = Shape {
        rows,
        nf,
        e,
        trees,
        nodes,
        leaves,
        base,
        nbase,
        labels,
        max_steps,
        agg,
        post,
        binary,
        positive,
    };
    Ok((xb, tb, zb, yb, sh))
}

/// Words of the table the launch reads.
fn table_words(sh: &Shape, classifier: bool) -> Result<usize, OpError> {
    sh.labels
        .checked_add(if classifier { sh.e } else { 0 })
        .ok_or_else(|| OpError::internal("forest: table too large"))
}

/// Scores `rows` rows of `x` (`sh.nf` elements of `T` each) into `z` (rows of `sh.e` f32)
/// and, for a classifier, the labels into `y` (i64 per row).
fn score<T: Val>(
    t: &Table,
    sh: &Shape,
    classifier: bool,
    rows: usize,
    x: &[u8],
    z: &mut [u8],
    mut y: Option<&mut [u8]>,
) -> Result<(), OpError> {
    let e = sh.e;
    let (base, labels) = (&t.base, &t.labels);
    let label = |k: usize| labels.get(k).copied().unwrap_or(0);
    // Rows in blocks, trees outermost within a block: a tree's nodes stay in cache while the
    // block's rows walk it (row by row, every row walked the whole forest). Each row still
    // adds its trees' weights in tree order: the sums are the same.
    let (nf, w) = (sh.nf, e.max(2));
    // at most 128 rows, 4096 scores and 64 Ki features a block (one row at least)
    let block = (4096 / w)
        .min(65536 / nf.max(1))
        .clamp(1, 128)
        .min(rows.max(1));
    let mut xs = vec![0f64; block * nf];
    let (mut s, mut has) = (vec![0f32; block * w], vec![false; block * w]);
    for b0 in (0..rows).step_by(block) {
        let n = block.min(rows - b0);
        for (i, v) in xs[..n * nf].iter_mut().enumerate() {
            *v = get::<T>(x, b0 * nf + i).to_f64();
        }
        s.fill(0.0);
        has.fill(false);
        for &root in &t.roots {
            for r in 0..n {
                let xr = &xs[r * nf..][..nf];
                let mut c = root;
                let mut steps = 0;
                while c >= 0 && steps < sh.max_steps {
                    let nd = &t.nodes[c as usize];
                    let v = xr[nd.feature as usize];
                    let go = match nd.mode {
                        0 => v <= nd.split,
                        1 => v < nd.split,
                        2 => v >= nd.split,
                        3 => v > nd.split,
                        4 => v == nd.split,
                        _ => v != nd.split,
                    } || (nd.nan_true && v.is_nan());
                    c = if go { nd.yes } else { nd.no };
                    steps += 1;
                }
                if c >= 0 {
                    continue;
                }
                let (first, count) = t.leaves[(-(c as i64 + 1)) as usize];
                let (sr, hr) = (&mut s[r * w..][..w], &mut has[r * w..][..w]);
                for &(id, wt) in &t.targets[first as usize..][..count as usize] {
                    let id = id as usize;
                    match sh.agg {
                        0 | 1 => sr[id] += wt,
                        2 if !hr[id] || wt < sr[id] => sr[id] = wt,
                        3 if !hr[id] || wt > sr[id] => sr[id] = wt,
                        _ => {}
                    }
                    hr[id] = true;
                }
            }
        }
        for r in 0..n {
            let (sr, hr) = (&mut s[r * w..][..w], &mut has[r * w..][..w]);
            let l = finish(sr, hr, sh, base, &label, classifier);
            for (k, &v) in sr.iter().take(e).enumerate() {
                put::<f32>(z, (b0 + r) * e + k, v);
            }
            if let Some(y) = y.as_deref_mut() {
                put::<i64>(y, b0 + r, l);
            }
        }
    }
    Ok(())
}

/// A forest launch: its parameters and X's dtype.
pub struct Forest {
    dt: Dtype,
    classifier: bool,
    b: (u32, u32, u32, Option<u32>),
    sh: Shape,
}

impl Forest {
    pub fn read(
        params_bytes: &[u8],
        relocations: &[umd_sdk::Relocation],
        dt: Dtype,
        classifier: bool,
    ) -> Result<Forest, OpError> {
        let (xb, tb, zb, yb, sh) = params(params_bytes, relocations, classifier)?;
        Ok(Forest {
            dt,
            classifier,
            b: (xb, tb, zb, yb),
            sh,
        })
    }
}

impl Scorer for Forest {
    type Table = Table;

    fn launch(&self) -> Result<RowLaunch, OpError> {
        let (xb, tb, zb, yb) = self.b;
        let sh = &self.sh;
        let words = table_words(sh, self.classifier)?;
        let too_large = || OpError::internal("forest: launch too large");
        let xrow = sh.nf.checked_mul(elem(self.dt)?).ok_or_else(too_large)?;
        let zrow = sh.e.checked_mul(4).ok_or_else(too_large)?;
        let tbytes = words.checked_mul(8).ok_or_else(too_large)?;
        let mut outputs = vec![(zb, zrow)];
        outputs.extend(yb.map(|b| (b, 8)));
        // everything decode reads besides the bytes
        let key = [
            words,
            sh.nf,
            sh.e,
            sh.trees,
            sh.nodes,
            sh.leaves,
            sh.base,
            sh.nbase,
            sh.labels,
            self.classifier as usize,
        ]
        .map(|v| v as u64);
        Ok(RowLaunch {
            rows: sh.rows,
            x: (xb, xrow),
            table: (tb, tbytes),
            outputs,
            key: [&[KEY][..], &key].concat(),
        })
    }

    fn decode(&self, bytes: &[u8]) -> Result<(Table, usize), OpError> {
        let t = Table::decode(bytes, &self.sh, self.classifier)?;
        let n = t.bytes();
        Ok((t, n))
    }

    fn score(&self, t: &Table, rows: usize, x: &[u8], outs: &mut [Vec<u8>]) -> Result<(), OpError> {
        let (z, y) = rows::scores_and_labels(outs);
        let (sh, c) = (&self.sh, self.classifier);
        crate::by_dtype!(
            self.dt,
            score,
            OpError::internal("forest: unknown dtype"),
            t,
            sh,
            c,
            rows,
            x,
            z,
            y
        )
    }
}
