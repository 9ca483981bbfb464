//! The CPU driver of the model scorers that score every row of `X` on its own (tree
//! ensembles, SVMs, linear models): a kernel says what its launch binds, how it decodes its
//! table and how it scores rows ([`Scorer`]); this module runs it whole (`run-cpu`) or in place
//! (ABI 1.3), where a launch's block range scores its share of the rows, so the host may split
//! it across worker threads. In place, the table is decoded once per instance when the host
//! names it resident (a compiled model's workspace after its setup launches, ABI 1.7:
//! [`resident::derived`]), on every launch otherwise.
//!
//! Owns the binding checks, the share, the reads and writes; the decoding and the scoring
//! are the kernel's.

use std::rc::Rc;

use umd_sdk::kernel::{Memory, resident};
use umd_sdk::{CpuCall, CpuWrite, Dtype, KernelCall, OpError};

/// What a scorer launch binds.
pub struct RowLaunch {
    /// Rows of `X`.
    pub rows: usize,
    /// `X` and the bytes of one of its rows.
    pub x: (u32, usize),
    /// The table and the bytes of it the kernel reads.
    pub table: (u32, usize),
    /// The outputs and the bytes of one row of each.
    pub outputs: Vec<(u32, usize)>,
    /// Tells this kernel's decoded table apart from other values kept under the same name:
    /// everything besides the table's bytes that the decoding depends on.
    pub key: Vec<u64>,
}

/// A row scorer's launch, as its kernel reads it from the parameters.
pub trait Scorer {
    type Table: 'static;
    /// What the launch binds (sizes checked against the bindings by the driver).
    fn launch(&self) -> Result<RowLaunch, OpError>;
    /// The table from its bytes, and about how many bytes the decoded table holds.
    fn decode(&self, bytes: &[u8]) -> Result<(Self::Table, usize), OpError>;
    /// Scores `rows` rows of `x` into `outputs` (one zeroed buffer per output, rows of that
    /// output's row bytes).
    fn score(
        &self,
        table: &Self::Table,
        rows: usize,
        x: &[u8],
        outputs: &mut [Vec<u8>],
    ) -> Result<(), OpError>;
}

fn too_large(what: &str) -> OpError {
    OpError::internal(format!("{what} of the launch is too large"))
}

/// `run-cpu`: every row, the table decoded for this call.
pub fn run_cpu<S: Scorer>(call: &CpuCall, s: &S) -> Result<Vec<CpuWrite>, OpError> {
    let l = s.launch()?;
    let bufs = umd_sdk::cpu::Buffers::new(call);
    let xn = l.rows.checked_mul(l.x.1).ok_or_else(|| too_large("X"))?;
    let x = &bufs.input(l.x.0, xn as u64)?[..xn];
    let table = &bufs.input(l.table.0, l.table.1 as u64)?[..l.table.1];
    let mut writes = l
        .outputs
        .iter()
        .map(|&(b, row)| {
            let n = l
                .rows
                .checked_mul(row)
                .ok_or_else(|| too_large("an output"))?;
            bufs.output(b, n as u64)
        })
        .collect::<Result<Vec<_>, _>>()?;
    if l.rows == 0 {
        return Ok(writes); // nothing to score (and no X to bound the kernel's row buffers)
    }
    let mut outs: Vec<Vec<u8>> = writes
        .iter_mut()
        .map(|w| std::mem::take(&mut w.data))
        .collect();
    s.score(&s.decode(table)?.0, l.rows, x, &mut outs)?;
    for (w, o) in writes.iter_mut().zip(outs) {
        w.data = o;
    }
    Ok(writes)
}

/// In place: the share of `call` of the rows.
pub fn run_in_place<S: Scorer>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    s: &S,
) -> Result<(), OpError> {
    let l = s.launch()?;
    let fits = |b: u32, bytes: Option<usize>, what: &str| -> Result<(), OpError> {
        match bytes {
            Some(n) if n as u64 <= call.size_of(b)? => Ok(()),
            _ => Err(OpError::internal(format!(
                "binding {b} ({what}) is smaller than the launch reads or writes"
            ))),
        }
    };
    fits(l.x.0, l.rows.checked_mul(l.x.1), "X")?;
    fits(l.table.0, Some(l.table.1), "table")?;
    for &(b, row) in &l.outputs {
        fits(b, l.rows.checked_mul(row), "output")?;
    }
    let share = call.share(l.rows as u64);
    let (r0, r1) = (share.start as usize, share.end as usize);
    if r0 == r1 {
        return Ok(());
    }
    let (tb, len) = l.table;
    let table = match mem.resident(tb) {
        Some(name) => resident::derived(name, &l.key, || s.decode(&mem.read(tb, 0, len)?))?,
        None => Rc::new(s.decode(&mem.read(tb, 0, len)?)?.0),
    };
    let x = mem.read(l.x.0, (r0 * l.x.1) as u64, (r1 - r0) * l.x.1)?;
    let mut outs: Vec<Vec<u8>> = l
        .outputs
        .iter()
        .map(|&(_, row)| vec![0; (r1 - r0) * row])
        .collect();
    s.score(&table, r1 - r0, &x, &mut outs)?;
    for (&(b, row), o) in l.outputs.iter().zip(&outs) {
        mem.write(b, (r0 * row) as u64, o)?;
    }
    Ok(())
}

/// Bytes of an element of a scorer's `X` dtype (f32, f64, i32, i64, f16, bf16).
pub fn elem(dt: Dtype) -> Result<usize, OpError> {
    match dt {
        Dtype::F32 | Dtype::I32 | Dtype::F64 | Dtype::I64 | Dtype::F16 | Dtype::Bf16 => {
            Ok(umd_sdk::dtype::size(dt))
        }
        _ => Err(OpError::internal(format!("unknown scorer dtype {dt:?}"))),
    }
}

/// Scores (`outputs[0]`) and, for a classifier, labels (`outputs[1]`).
pub fn scores_and_labels(outputs: &mut [Vec<u8>]) -> (&mut [u8], Option<&mut [u8]>) {
    let (z, y) = outputs.split_at_mut(1);
    (&mut z[0], y.first_mut().map(|y| &mut y[..]))
}

/// The table's words as f64 (words holding integers keep their bits: `to_bits`).
pub fn words_f64(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|w| f64::from_bits(u64::from_le_bytes(w.try_into().expect("8 bytes"))))
        .collect()
}
