//! The raw device allocator under the caching allocator: `cuMemAlloc`/`cuMemFree` in the
//! device's context (bound on every call by `driver`).
//!
//! Owns nothing but the calls: block policy is `caching`'s, buffers are the device's.

use super::LostFlag;
use super::driver::Context;
use crate::device::caching::{RawAllocator, RawOom};

/// `cuMemAlloc`/`cuMemFree` of one context.
pub struct CudaRaw {
    ctx: Context,
    /// A sticky error here marks the device lost (the policy only sees "no memory").
    lost: LostFlag,
}

impl CudaRaw {
    pub fn new(ctx: Context, lost: LostFlag) -> Self {
        CudaRaw { ctx, lost }
    }
}

impl RawAllocator for CudaRaw {
    fn alloc(&mut self, bytes: u64) -> Result<u64, RawOom> {
        // Any failure reads as out of memory to the policy, which then releases its cache and
        // retries once; the real cause goes to the log, and a lost device to the device.
        self.lost.note(self.ctx.alloc(bytes)).map_err(|e| {
            tracing::debug!(bytes, error = %e, "cuMemAlloc failed");
            RawOom
        })
    }

    fn free(&mut self, addr: u64) {
        if let Err(e) = self.ctx.free(addr) {
            tracing::error!(addr, error = %e, "cuMemFree failed");
        }
    }
}
