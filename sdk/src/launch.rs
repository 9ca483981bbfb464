//! Launch configuration helpers, each checked against the target's limits.
//!
//! ```
//! use umd_sdk::{launch, TargetLimits};
//! let limits = TargetLimits::cuda(132);
//! let (grid, block) = launch::linear(1000, 256, &limits).unwrap();
//! assert_eq!((grid.x, block.x), (4, 256));
//! ```

use crate::{Dim3, OpError, TargetLimits};

/// Blocks needed to cover `n` elements with `per_block` each.
pub fn blocks_for(n: u64, per_block: u64) -> u64 {
    n.div_ceil(per_block.max(1)).max(1)
}

/// A 1-D launch over `n` elements with `threads` threads per block (clamped to the target's
/// limit). The grid is clamped to the grid limit: kernels use a grid-stride loop.
pub fn linear(n: u64, threads: u32, limits: &TargetLimits) -> Result<(Dim3, Dim3), OpError> {
    let threads = threads
        .min(limits.max_threads_per_block)
        .min(limits.max_block_dims.x)
        .max(1);
    let grid = blocks_for(n, threads as u64).min(limits.max_grid_dims.x as u64) as u32;
    let (grid, block) = (Dim3::x(grid), Dim3::x(threads));
    check(grid, block, 0, limits)?;
    Ok((grid, block))
}

/// A 2-D tiled launch: `tile`×`tile` threads per block covering `rows`×`cols`, `batch` in z.
pub fn tiles_2d(
    rows: u64,
    cols: u64,
    batch: u64,
    tile: u32,
    limits: &TargetLimits,
) -> Result<(Dim3, Dim3), OpError> {
    let dim = |v: u64, what: &str, max: u32| -> Result<u32, OpError> {
        if v > max as u64 {
            Err(OpError::shape(format!(
                "{what} of {v} blocks exceeds the target's grid limit of {max}"
            )))
        } else {
            Ok(v as u32)
        }
    };
    let grid = Dim3 {
        x: dim(
            blocks_for(cols, tile as u64),
            "grid x",
            limits.max_grid_dims.x,
        )?,
        y: dim(
            blocks_for(rows, tile as u64),
            "grid y",
            limits.max_grid_dims.y,
        )?,
        z: dim(batch.max(1), "grid z (batch)", limits.max_grid_dims.z)?,
    };
    let block = Dim3 {
        x: tile,
        y: tile,
        z: 1,
    };
    check(grid, block, 0, limits)?;
    Ok((grid, block))
}

/// Checks a launch shape against the target's limits (the host checks again; this gives the
/// plugin author the error first).
pub fn check(grid: Dim3, block: Dim3, shared: u32, limits: &TargetLimits) -> Result<(), OpError> {
    let fail = |m: String| Err(OpError::internal(m));
    if block.volume() == 0 || grid.volume() == 0 {
        return fail(format!("empty launch: grid {grid:?}, block {block:?}"));
    }
    if block.volume() > limits.max_threads_per_block as u64 {
        return fail(format!(
            "block of {} threads exceeds the target's {}",
            block.volume(),
            limits.max_threads_per_block
        ));
    }
    let over = |d: Dim3, m: Dim3| d.x > m.x || d.y > m.y || d.z > m.z;
    if over(block, limits.max_block_dims) {
        return fail(format!(
            "block {block:?} exceeds {:?}",
            limits.max_block_dims
        ));
    }
    if over(grid, limits.max_grid_dims) {
        return fail(format!("grid {grid:?} exceeds {:?}", limits.max_grid_dims));
    }
    if shared > limits.max_shared_memory {
        return fail(format!(
            "{shared} bytes of shared memory exceed the target's {}",
            limits.max_shared_memory
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> TargetLimits {
        // a small grid-x limit to exercise clamping
        let mut l = TargetLimits::cuda(132);
        l.max_grid_dims.x = 1000;
        l
    }

    #[test]
    fn linear_clamps_to_limits() {
        let (g, b) = linear(10_000_000, 4096, &limits()).unwrap();
        assert_eq!(b.x, 1024);
        assert_eq!(g.x, 1000, "grid clamped; the kernel strides");
        let (g, _) = linear(0, 256, &limits()).unwrap();
        assert_eq!(g.x, 1, "an empty tensor still gets a valid launch");
    }

    #[test]
    fn tiles_cover_and_refuse_oversized_batches() {
        let (g, b) = tiles_2d(33, 17, 3, 16, &limits()).unwrap();
        assert_eq!((g.x, g.y, g.z), (2, 3, 3));
        assert_eq!((b.x, b.y), (16, 16));
        assert!(tiles_2d(4, 4, 70_000, 16, &limits()).is_err());
        assert!(
            tiles_2d(4, 4, 1, 64, &limits()).is_err(),
            "64x64 = 4096 threads"
        );
    }
}
