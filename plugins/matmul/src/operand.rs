//! B as a launch keeps it between chunks of rows ([`BOperand`]): packed for the SDK's GEMM
//! ([`umd_sdk::gemm`]), decoded as it is for the device's matrix unit ([`umd_sdk::matrix`],
//! ABI 1.8, f32 compute: f32, f16 and bf16), which packs for itself, or (f32, ABI 1.9) not
//! read at all: where it lies in its binding, which the matrix unit reads in place — and the
//! product of a chunk of A's rows with it.

use std::ops::Range;
use umd_sdk::OpError;
use umd_sdk::gemm::{self, Acc, PackedB, Strided, Work};
use umd_sdk::kernel::Memory;
use umd_sdk::matrix::{Bound, Operand};

/// Fewest rows of A (per batch) whose products run on the matrix unit ([`BOperand::prepare`]).
pub const UNIT_MIN_ROWS: usize = 16;

/// Columns `first..` of B, `k` deep.
pub enum BOperand<A> {
    Packed(PackedB<A>),
    /// As decoded: column `c` (from `first`) of depth `kk` at `data[kk * rs + c * cs]`.
    Plain {
        data: Vec<A>,
        rs: usize,
        cs: usize,
        first: usize,
    },
    /// (f32 only) In its binding: column `c` (from `first`) of depth `kk` at element
    /// `kk * b.rs + c * b.cs` from `b.offset`.
    Bound {
        b: Bound,
        first: usize,
    },
}

impl<A: Acc> BOperand<A> {
    /// B's columns `cols`, decoded into `data` (`rs`, `cs` apart), for products with `m` rows
    /// of A, `kept` between launches or not: as they are for the matrix unit, else packed;
    /// `None` when the packed copy does not fit memory. A kept B multiplying fewer than
    /// [`UNIT_MIN_ROWS`] rows stays packed for the wasm GEMM: the matrix unit packs B on every
    /// call, which costs more than a few rows' multiply-adds, while a packed B is packed once.
    pub fn prepare(
        k: usize,
        cols: Range<usize>,
        (data, rs, cs): (Vec<A>, usize, usize),
        (m, kept): (usize, bool),
    ) -> Option<Self> {
        if A::UNIT && (m >= UNIT_MIN_ROWS || !kept) {
            return Some(BOperand::Plain {
                data,
                rs,
                cs,
                first: cols.start,
            });
        }
        PackedB::pack(
            k,
            cols,
            Strided {
                data: &data,
                rs,
                cs,
            },
        )
        .map(BOperand::Packed)
    }

    /// Elements held.
    pub fn elements(&self) -> usize {
        match self {
            BOperand::Packed(p) => p.elements(),
            BOperand::Plain { data, .. } => data.len(),
            BOperand::Bound { .. } => 0,
        }
    }

    /// Whether B is multiplied where it lies ([`BOperand::Bound`]): then A may be too.
    pub fn is_bound(&self) -> bool {
        matches!(self, BOperand::Bound { .. })
    }

    /// `acc` (row-major `rows × cols.len()`) = `a` (`rows × k`) · B's columns `cols`
    /// (`work`: memory for packing). `a` is in memory unless B is bound; `mem` is the launch's.
    #[allow(clippy::too_many_arguments)]
    pub fn multiply(
        &self,
        rows: usize,
        k: usize,
        a: Operand<A>,
        cols: &Range<usize>,
        work: &mut Work<A>,
        acc: &mut Vec<A>,
        mem: &mut dyn Memory,
    ) -> Result<(), OpError> {
        match (self, a) {
            (&BOperand::Bound { b, first }, a) => {
                let b = Operand::Bound(b).at(0, cols.start - first);
                *acc = A::unit_operands((rows, cols.len(), k), a, b, mem)
                    .ok_or_else(|| OpError::internal("a bound B needs the matrix unit"))??;
            }
            (_, Operand::Bound(_)) => {
                return Err(OpError::internal("a bound A needs a bound B"));
            }
            (BOperand::Packed(p), Operand::Memory(a)) => {
                gemm::pack_a(rows, k, a, &mut work.apack);
                gemm::multiply(rows, &work.apack, p, p.columns(cols), acc);
            }
            (
                &BOperand::Plain {
                    ref data,
                    rs,
                    cs,
                    first,
                },
                Operand::Memory(a),
            ) => {
                let skip = if k == 0 { 0 } else { (cols.start - first) * cs };
                let b = Strided {
                    data: &data[skip..],
                    rs,
                    cs,
                };
                gemm::product((rows, cols.len(), k), a, None, b, work, acc);
            }
        }
        Ok(())
    }
}
