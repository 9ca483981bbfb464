//! Baselines for `umd check`'s figures (DESIGN §6): the same work as the device's own paths, done
//! straight through the [`driver`](super::driver) wrappers — launches without validation, fences
//! or bookkeeping, raw `cuMemAlloc`/`cuMemFree`, a device-to-device copy — each timed on the host
//! from a synchronized stream to a synchronized stream.
//!
//! Owns only the timing loops: no policy, no `unsafe` (that stays in `driver`). Buffers passed in
//! stay alive for the call and every stream used is synchronized before returning.

use std::time::{Duration, Instant};

use super::CudaDevice;
use super::launch::patch_params;
use crate::cmdbuf::CommandBuffer;
use crate::device::check_bindings;
use crate::device::{BufferId, Device, DeviceError, StreamId};

impl CudaDevice {
    /// Queues `cmd`'s launches `n` times on `stream` directly with `cuLaunchKernel` (the same
    /// kernels, grid, block and patched parameters `submit` would use) and waits for them.
    /// Returns the time from the first launch to the stream being idle.
    pub fn time_bare_launches(
        &self,
        stream: StreamId,
        cmd: &CommandBuffer,
        bindings: &[BufferId],
        n: u64,
    ) -> Result<Duration, DeviceError> {
        check_bindings(cmd, bindings, |id| self.size(id))?;
        let slot = self.stream(stream)?;
        let s = &slot.stream;
        let buffers = bindings
            .iter()
            .map(|id| self.buffer(*id))
            .collect::<Result<Vec<_>, _>>()?;
        buffers.iter().for_each(|b| b.wait_idle());
        let addrs: Vec<u64> = buffers.iter().map(|b| b.addr).collect();
        let prepared = cmd
            .launches
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let f = self.kernel(i, l)?;
                Ok((f, l, patch_params(&l.params, &l.relocations, &addrs)))
            })
            .collect::<Result<Vec<_>, DeviceError>>()?;
        s.synchronize()?;
        let start = Instant::now();
        for _ in 0..n {
            for (f, l, params) in &prepared {
                s.launch(f, l.grid, l.block, l.shared_memory, params)?;
            }
        }
        s.synchronize()?;
        Ok(start.elapsed())
    }

    /// `n` pairs of raw `cuMemAlloc(bytes)` + `cuMemFree`, bypassing the caching allocator.
    pub fn time_raw_alloc(&self, bytes: u64, n: u64) -> Result<Duration, DeviceError> {
        let start = Instant::now();
        for _ in 0..n {
            let addr = self.ctx.alloc(bytes)?;
            self.ctx.free(addr)?;
        }
        Ok(start.elapsed())
    }

    /// `n` device-to-device copies of the first `bytes` of `src` into `dst` on `stream`
    /// (`cuMemcpyDtoDAsync`), waited for.
    pub fn time_device_copy(
        &self,
        stream: StreamId,
        dst: BufferId,
        src: BufferId,
        bytes: u64,
        n: u64,
    ) -> Result<Duration, DeviceError> {
        let slot = self.stream(stream)?;
        let s = &slot.stream;
        let (d, from) = (self.buffer(dst)?, self.buffer(src)?);
        let (d_addr, s_addr) = (d.at(0, bytes)?, from.at(0, bytes)?);
        d.wait_idle();
        from.wait_idle();
        s.synchronize()?;
        let start = Instant::now();
        for _ in 0..n {
            s.copy_device_to_device(d_addr, s_addr, bytes)?;
        }
        s.synchronize()?;
        Ok(start.elapsed())
    }
}
