//! Placement of a run's intermediates by liveness: each storage (a value, its views, or a
//! node's workspace) lives from the step that writes it to the last step that reads it; storages
//! whose lives do not overlap share a block. Greedy best fit over a free list, growing a free
//! block when none is large enough. Pure planning: the blocks are allocated by the caller.

/// Alignment of every storage inside a block.
const ALIGN: u64 = 256;

/// One storage to place: bytes, first step (written), last step (read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Life {
    pub bytes: u64,
    pub first: usize,
    pub last: usize,
}

/// Where every storage went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Block sizes.
    pub blocks: Vec<u64>,
    /// Storage index → block index.
    pub block_of: Vec<usize>,
}

impl Placement {
    /// Bytes of all blocks: the run's peak.
    pub fn peak(&self) -> u64 {
        self.blocks.iter().sum()
    }
}

/// Places `lives` (any order) into blocks. Storages live on the same step never share; a
/// storage last read at step `s` is free for storages first written after `s`.
pub fn place(lives: &[Life]) -> Placement {
    let mut order: Vec<usize> = (0..lives.len()).collect();
    order.sort_by_key(|&i| (lives[i].first, std::cmp::Reverse(lives[i].bytes)));
    let mut blocks: Vec<u64> = Vec::new();
    let mut block_of = vec![usize::MAX; lives.len()];
    let mut free: Vec<usize> = Vec::new();
    // (last step, block) of the storages alive now.
    let mut live: Vec<(usize, usize)> = Vec::new();
    for &i in &order {
        let l = lives[i];
        let need = l.bytes.max(1).next_multiple_of(ALIGN);
        live.retain(|&(last, b)| {
            let done = last < l.first;
            if done {
                free.push(b);
            }
            !done
        });
        let fit = free
            .iter()
            .enumerate()
            .filter(|(_, b)| blocks[**b] >= need)
            .min_by_key(|(_, b)| blocks[**b])
            .map(|(k, _)| k)
            .or_else(|| {
                // None fits: grow the largest free block rather than adding a new one.
                free.iter()
                    .enumerate()
                    .max_by_key(|(_, b)| blocks[**b])
                    .map(|(k, _)| k)
            });
        let b = match fit {
            Some(k) => free.swap_remove(k),
            None => {
                blocks.push(0);
                blocks.len() - 1
            }
        };
        blocks[b] = blocks[b].max(need);
        block_of[i] = b;
        live.push((l.last.max(l.first), b));
    }
    Placement { blocks, block_of }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn life(bytes: u64, first: usize, last: usize) -> Life {
        Life { bytes, first, last }
    }

    #[test]
    fn a_chain_reuses_two_blocks() {
        // a → b → c → d: each value read by the next step only.
        let lives: Vec<Life> = (0..4).map(|s| life(1024, s, s + 1)).collect();
        let p = place(&lives);
        assert_eq!(p.blocks.len(), 2, "{p:?}");
        assert_eq!(p.peak(), 2048);
        for w in p.block_of.windows(2) {
            assert_ne!(w[0], w[1], "consecutive lives overlap");
        }
    }

    #[test]
    fn overlapping_lives_never_share() {
        let lives = vec![
            life(100, 0, 5),
            life(300, 1, 2),
            life(200, 2, 3),
            life(300, 3, 4),
            life(50, 4, 4),
        ];
        let p = place(&lives);
        for i in 0..lives.len() {
            for j in 0..i {
                let (a, b) = (lives[i], lives[j]);
                let overlap = a.first <= b.last && b.first <= a.last;
                if overlap {
                    assert_ne!(p.block_of[i], p.block_of[j], "{i} and {j} overlap");
                }
                assert!(p.blocks[p.block_of[i]] >= a.bytes);
            }
        }
        assert!(
            p.peak()
                < lives
                    .iter()
                    .map(|l| l.bytes.next_multiple_of(ALIGN))
                    .sum::<u64>()
        );
    }
}
