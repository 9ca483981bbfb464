//! The parameter block every recurrent kernel takes (CUDA and CPU read the same layout): the
//! bindings (an absent optional input is a null pointer: 8 zero bytes with no relocation), the
//! sizes, the element strides of the layout-dependent tensors, the activations, clip, direction
//! and flags. [`Block::pack`] and [`Block::read`] are the one definition of the field order; the
//! CUDA signature in [`crate::cuda`] spells the same order.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, OpError, Relocation};

/// Activation slots: up to 3 per direction (LSTM's f, g, h), 2 directions.
pub const MAX_ACTS: usize = 6;

/// The recurrent cell a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Rnn,
    Lstm,
    Gru,
}

impl Cell {
    /// Gates per hidden unit (rows of W and R per unit).
    pub fn gates(self) -> u64 {
        match self {
            Cell::Rnn => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
    /// Activations per direction.
    pub fn activations(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Lstm => 3,
            Cell::Gru => 2,
        }
    }
    /// Entry-point prefix (`{name}_{dtype}`).
    pub fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "rnn",
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }
}

/// Flag: LSTM `input_forget` (f = 1 - i).
pub const INPUT_FORGET: u32 = 1;
/// Flag: GRU `linear_before_reset`.
pub const LINEAR_BEFORE_RESET: u32 = 2;

/// Activation functions (kind, alpha, beta) of every slot: direction `d`'s `k`-th activation is
/// slot `d * cell.activations() + k`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Acts {
    pub kind: [u64; MAX_ACTS],
    pub alpha: [f64; MAX_ACTS],
    pub beta: [f64; MAX_ACTS],
}

/// Bindings of one launch (`None`: an absent optional input, or LSTM's Y_c for RNN/GRU).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bindings {
    pub x: u32,
    pub w: u32,
    pub r: u32,
    pub b: Option<u32>,
    pub seq_lens: Option<u32>,
    pub h0: Option<u32>,
    pub c0: Option<u32>,
    pub p: Option<u32>,
    pub y: u32,
    pub yh: u32,
    pub yc: Option<u32>,
    pub ws: u32,
}

/// Element strides: X by (time, batch) (its input axis is contiguous), Y by (time, direction,
/// batch), the states (initial_h/c, Y_h, Y_c) by (direction, batch); hidden units contiguous.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Strides {
    pub x_t: u64,
    pub x_b: u64,
    pub y_t: u64,
    pub y_d: u64,
    pub y_b: u64,
    pub s_d: u64,
    pub s_b: u64,
}

/// The whole parameter block.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Block {
    pub bind: Bindings,
    pub seq: u64,
    pub batch: u64,
    pub input: u64,
    pub hidden: u64,
    pub dirs: u64,
    pub st: Strides,
    pub acts: Acts,
    /// Gate pre-activations are clamped to [-clip, clip]; +inf when not clipped.
    pub clip: f64,
    /// 0 forward, 1 reverse, 2 bidirectional.
    pub direction: u32,
    pub flags: u32,
}

impl Block {
    pub fn pack(&self, max_bytes: u32) -> Result<(Vec<u8>, Vec<Relocation>), OpError> {
        let mut p = ParamPacker::new();
        let b = &self.bind;
        let opt = |p: &mut ParamPacker, v: Option<u32>, access| match v {
            Some(i) => {
                p.ptr(i, access);
            }
            None => {
                p.u64(0);
            }
        };
        p.ptr(b.x, Access::Read)
            .ptr(b.w, Access::Read)
            .ptr(b.r, Access::Read);
        for v in [b.b, b.seq_lens, b.h0, b.c0, b.p] {
            opt(&mut p, v, Access::Read);
        }
        p.ptr(b.y, Access::Write).ptr(b.yh, Access::Write);
        opt(&mut p, b.yc, Access::Write);
        p.ptr(b.ws, Access::ReadWrite);
        for v in [self.seq, self.batch, self.input, self.hidden, self.dirs] {
            p.u64(v);
        }
        let s = &self.st;
        for v in [s.x_t, s.x_b, s.y_t, s.y_d, s.y_b, s.s_d, s.s_b] {
            p.u64(v);
        }
        p.u64_array(&self.acts.kind);
        for v in self.acts.alpha.iter().chain(&self.acts.beta) {
            p.f64(*v);
        }
        p.f64(self.clip).u32(self.direction).u32(self.flags);
        p.finish(max_bytes)
    }

    pub fn read(bytes: &[u8], relocations: &[Relocation]) -> Result<Block, OpError> {
        let mut r = ParamReader::new(bytes, relocations);
        // A null pointer has no relocation: `ptr` fails after stepping over it.
        let opt = |r: &mut ParamReader| r.ptr().ok();
        let (x, w, rr) = (r.ptr()?, r.ptr()?, r.ptr()?);
        let (b, seq_lens, h0, c0, p) = (
            opt(&mut r),
            opt(&mut r),
            opt(&mut r),
            opt(&mut r),
            opt(&mut r),
        );
        let (y, yh) = (r.ptr()?, r.ptr()?);
        let yc = opt(&mut r);
        let ws = r.ptr()?;
        let bind = Bindings {
            x,
            w,
            r: rr,
            b,
            seq_lens,
            h0,
            c0,
            p,
            y,
            yh,
            yc,
            ws,
        };
        let (seq, batch, input, hidden, dirs) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let st = Strides {
            x_t: r.u64()?,
            x_b: r.u64()?,
            y_t: r.u64()?,
            y_d: r.u64()?,
            y_b: r.u64()?,
            s_d: r.u64()?,
            s_b: r.u64()?,
        };
        let mut acts = Acts {
            kind: r.u64_array()?,
            ..Acts::default()
        };
        for a in &mut acts.alpha {
            *a = r.f64()?;
        }
        for b in &mut acts.beta {
            *b = r.f64()?;
        }
        Ok(Block {
            bind,
            seq,
            batch,
            input,
            hidden,
            dirs,
            st,
            acts,
            clip: r.f64()?,
            direction: r.u32()?,
            flags: r.u32()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_round_trips_with_null_pointers() {
        let blk = Block {
            bind: Bindings {
                x: 0,
                w: 1,
                r: 2,
                b: None,
                seq_lens: Some(3),
                h0: None,
                c0: Some(4),
                p: None,
                y: 5,
                yh: 6,
                yc: None,
                ws: 7,
            },
            seq: 3,
            batch: 2,
            input: 5,
            hidden: 4,
            dirs: 2,
            st: Strides {
                x_t: 1,
                x_b: 2,
                y_t: 3,
                y_d: 4,
                y_b: 5,
                s_d: 6,
                s_b: 7,
            },
            acts: Acts {
                kind: [1, 2, 3, 4, 5, 6],
                alpha: [0.5; 6],
                beta: [-1.0; 6],
            },
            clip: f64::INFINITY,
            direction: 2,
            flags: 3,
        };
        let (bytes, relocs) = blk.pack(4096).unwrap();
        assert_eq!(relocs.len(), 8);
        assert_eq!(Block::read(&bytes, &relocs).unwrap(), blk);
    }
}
