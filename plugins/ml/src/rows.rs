//! The in-place driver (ABI 1.3) of the model scorers that score every row of `X` on its own
//! (tree ensembles, SVMs, linear models): a launch's block range scores its share of the
//! rows, so the host may split it across worker threads. The model's table is decoded once
//! per instance when the host names it resident (a compiled model's workspace after its setup
//! launches, ABI 1.7: [`resident::derived`]), on every launch otherwise.
//!
//! Owns the binding checks, the share, the reads and writes; the decoding and the scoring
//! are the kernel's.

use std::rc::Rc;

use umd_sdk::kernel::{Memory, resident};
use umd_sdk::{KernelCall, OpError};

/// One scorer launch as the driver sees it.
pub struct RowLaunch<'a> {
    /// Rows of `X`.
    pub rows: usize,
    /// `X` and the bytes of one of its rows.
    pub x: (u32, usize),
    /// The table and the bytes of it the kernel reads.
    pub table: (u32, usize),
    /// The outputs and the bytes of one row of each.
    pub outputs: &'a [(u32, usize)],
    /// Tells this kernel's decoded table apart from other values kept under the same name:
    /// everything besides the table's bytes that the decoding depends on.
    pub key: &'a [u64],
}

/// Runs the share of `call` of the rows of `l`: `decode(table bytes)` gives the decoded table
/// and about how many bytes it holds; `score(table, rows, x, outputs)` scores `rows` rows of
/// `x` into one zeroed buffer per output (rows of that output's row bytes).
pub fn run<D: 'static>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    l: RowLaunch,
    decode: impl FnOnce(&[u8]) -> Result<(D, usize), OpError>,
    score: impl FnOnce(&D, usize, &[u8], &mut [Vec<u8>]) -> Result<(), OpError>,
) -> Result<(), OpError> {
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
    for &(b, row) in l.outputs {
        fits(b, l.rows.checked_mul(row), "output")?;
    }
    let share = call.share(l.rows as u64);
    let (r0, r1) = (share.start as usize, share.end as usize);
    if r0 == r1 {
        return Ok(());
    }
    let (tb, len) = l.table;
    let table = match mem.resident(tb) {
        Some(name) => resident::derived(name, l.key, || decode(&mem.read(tb, 0, len)?))?,
        None => Rc::new(decode(&mem.read(tb, 0, len)?)?.0),
    };
    let x = mem.read(l.x.0, (r0 * l.x.1) as u64, (r1 - r0) * l.x.1)?;
    let mut outs: Vec<Vec<u8>> = l
        .outputs
        .iter()
        .map(|&(_, row)| vec![0; (r1 - r0) * row])
        .collect();
    score(&table, r1 - r0, &x, &mut outs)?;
    for (&(b, row), o) in l.outputs.iter().zip(&outs) {
        mem.write(b, (r0 * row) as u64, o)?;
    }
    Ok(())
}

/// Bytes of an element of a scorer's `X` dtype.
pub fn elem(dt: umd_sdk::Dtype) -> Result<usize, OpError> {
    use umd_sdk::Dtype;
    match dt {
        Dtype::F32 | Dtype::I32 => Ok(4),
        Dtype::F64 | Dtype::I64 => Ok(8),
        Dtype::F16 | Dtype::Bf16 => Ok(2),
        _ => Err(OpError::internal(format!("unknown scorer dtype {dt:?}"))),
    }
}
