//! The thin safe layer over the CUDA driver API (through `cudarc`): with `nvrtc` (the compiler),
//! the only files of the CUDA backend with `unsafe` or that name `cudarc`.
//!
//! Every entry point that works in a context binds it to the calling thread first (`cudarc`'s
//! safe API does it inside; the raw calls here call [`Context::bind`]): nothing relies on the
//! calling thread's current context. Host memory is only lent to synchronous calls. Device
//! addresses are plain `u64`s passed through to the driver, which rejects those it did not
//! hand out where it checks, and a kernel's bad access faults the context.
//!
//! Trust boundary: a kernel is code the host runs on the GPU, compiled from a plugin's source.
//! Where the GPU shares the host's address space (HMM, ATS), a kernel could reach host memory
//! through a pointer it makes up; the WebAssembly sandbox does not extend to the GPU, so kernel
//! sources are trusted as far as that goes.
//!
//! Owns no policy and no state beyond the driver handles it wraps: it must not know buffers,
//! fences' meaning, plans, the allocator policy or the module cache.
//!
//! Not exercised on this machine (no GPU): written against cudarc 0.19.10's sources.

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, result};
use cudarc::nvrtc;

use crate::device::DeviceError;
use crate::target::Dim3;

/// `(major, minor)`.
pub type Version = (u32, u32);

fn failed(call: &'static str, e: result::DriverError) -> DeviceError {
    let name = e
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if is_sticky(e.0 as u32) {
        return DeviceError::Lost(format!("`{call}`: {name}: {text}"));
    }
    DeviceError::Driver {
        call,
        message: format!("{name}: {text}"),
    }
}

/// Whether a `CUresult` code leaves the context unusable (`cuda.h`: "the process must be
/// terminated and relaunched"): the device is lost.
pub fn is_sticky(code: u32) -> bool {
    matches!(
        code,
        214 // ECC_UNCORRECTABLE
        | 700 // ILLEGAL_ADDRESS
        | 702 // LAUNCH_TIMEOUT
        | 709 // CONTEXT_IS_DESTROYED
        | 710 // ASSERT
        | 714 // HARDWARE_STACK_ERROR
        | 715 // ILLEGAL_INSTRUCTION
        | 716 // MISALIGNED_ADDRESS
        | 717 // INVALID_ADDRESS_SPACE
        | 718 // INVALID_PC
        | 719 // LAUNCH_FAILED
        | 999 // UNKNOWN
    )
}

/// The status a stream reports at a point, as the error it means (no CUDA call: usable on the
/// driver's callback thread).
pub fn stream_status(code: u32) -> Result<(), DeviceError> {
    match code {
        0 => Ok(()),
        c if is_sticky(c) => Err(DeviceError::Lost(format!(
            "CUDA error {c} ({}) in work queued on a stream",
            code_name(c)
        ))),
        c => Err(DeviceError::Driver {
            call: "stream work",
            message: format!(
                "CUDA error {c} ({}): a kernel or copy queued before failed",
                code_name(c)
            ),
        }),
    }
}

/// The name of a common `CUresult` code, without calling the driver.
fn code_name(code: u32) -> &'static str {
    match code {
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        214 => "CUDA_ERROR_ECC_UNCORRECTABLE",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        709 => "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        710 => "CUDA_ERROR_ASSERT",
        714 => "CUDA_ERROR_HARDWARE_STACK_ERROR",
        715 => "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        716 => "CUDA_ERROR_MISALIGNED_ADDRESS",
        717 => "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        718 => "CUDA_ERROR_INVALID_PC",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => "see cuda.h",
    }
}

/// Whether the CUDA driver library (`libcuda.so`) can be loaded. Checked once per process;
/// every other function here assumes it is (`cudarc` panics on a missing library).
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: loads (and unloads) the NVIDIA driver library by its usual names to see whether
    // it exists; its initializers are made to run in any process that loads it.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

fn need_driver() -> Result<(), DeviceError> {
    if driver_present() {
        Ok(())
    } else {
        Err(DeviceError::Unavailable(
            "CUDA driver library (libcuda.so) not found: install the NVIDIA driver \
             (and, in a container, run it with the GPU exposed, e.g. `--gpus all`)"
                .into(),
        ))
    }
}

/// The CUDA version the driver supports (`cuDriverGetVersion`, e.g. 13.0 for driver 580).
pub fn driver_version() -> Result<Version, DeviceError> {
    need_driver()?;
    let mut v = 0;
    // SAFETY: writes one int through a valid pointer; callable before `cuInit`.
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| failed("cuDriverGetVersion", e))?;
    Ok(super::versions::from_driver_int(v))
}

/// Number of CUDA devices (0 when the driver sees none).
pub fn device_count() -> Result<usize, DeviceError> {
    need_driver()?;
    match result::init() {
        Err(result::DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => return Ok(0),
        r => r.map_err(|e| failed("cuInit", e))?,
    }
    let n = result::device::get_count().map_err(|e| failed("cuDeviceGetCount", e))?;
    Ok(n.max(0) as usize)
}

/// What a device reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttributes {
    pub name: String,
    pub compute_capability: Version,
    pub total_memory: u64,
    pub sm_count: u32,
    pub max_threads_per_block: u32,
    pub max_block_dims: Dim3,
    pub max_grid_dims: Dim3,
    /// Without opting in per kernel (`cudaFuncAttributeMaxDynamicSharedMemorySize`).
    pub max_shared_memory_per_block: u32,
    pub warp_size: u32,
}

/// Queries device `index`'s attributes (no context needed).
pub fn device_attributes(index: usize) -> Result<DeviceAttributes, DeviceError> {
    need_driver()?;
    result::init().map_err(|e| failed("cuInit", e))?;
    let ordinal =
        i32::try_from(index).map_err(|_| DeviceError::UnknownDevice(index.to_string()))?;
    let dev = result::device::get(ordinal).map_err(|e| failed("cuDeviceGet", e))?;
    let attr = |a: Attr| -> Result<u32, DeviceError> {
        // SAFETY: `dev` was returned by `cuDeviceGet` just above.
        let v = unsafe { result::device::get_attribute(dev, a) }
            .map_err(|e| failed("cuDeviceGetAttribute", e))?;
        Ok(v.max(0) as u32)
    };
    let dim =
        |x, y, z| -> Result<Dim3, DeviceError> { Ok(Dim3::new(attr(x)?, attr(y)?, attr(z)?)) };
    // SAFETY: as above.
    let total =
        unsafe { result::device::total_mem(dev) }.map_err(|e| failed("cuDeviceTotalMem", e))?;
    Ok(DeviceAttributes {
        name: result::device::get_name(dev).map_err(|e| failed("cuDeviceGetName", e))?,
        compute_capability: (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        total_memory: total as u64,
        sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dims: dim(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
            Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
            Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
        )?,
        max_grid_dims: dim(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
            Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
            Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
        )?,
        max_shared_memory_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        warp_size: attr(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
    })
}

/// A device's primary context.
#[derive(Clone)]
pub struct Context(Arc<CudaContext>);

impl Context {
    /// Retains device `index`'s primary context.
    pub fn open(index: usize) -> Result<Context, DeviceError> {
        need_driver()?;
        CudaContext::new(index)
            .map(Context)
            .map_err(|e| failed("cuDevicePrimaryCtxRetain", e))
    }

    /// Makes this context current on the calling thread (`cuCtxSetCurrent` when it is not).
    pub fn bind(&self) -> Result<(), DeviceError> {
        self.0
            .bind_to_thread()
            .map_err(|e| failed("cuCtxSetCurrent", e))
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream, DeviceError> {
        let stream = self
            .0
            .new_stream()
            .map_err(|e| failed("cuStreamCreate", e))?;
        Ok(Stream {
            stream,
            ctx: self.clone(),
        })
    }

    /// A new event (timing disabled).
    pub fn new_event(&self) -> Result<Event, DeviceError> {
        let event = self
            .0
            .new_event(None)
            .map_err(|e| failed("cuEventCreate", e))?;
        Ok(Event {
            event,
            ctx: self.clone(),
        })
    }

    /// A new event a waiting thread sleeps on (`CU_EVENT_BLOCKING_SYNC`) instead of spinning.
    pub fn new_blocking_event(&self) -> Result<Event, DeviceError> {
        let event = self
            .0
            .new_event(Some(sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC))
            .map_err(|e| failed("cuEventCreate", e))?;
        Ok(Event {
            event,
            ctx: self.clone(),
        })
    }

    /// `cuMemAlloc`: `bytes` of device memory; returns its address.
    pub fn alloc(&self, bytes: u64) -> Result<u64, DeviceError> {
        self.bind()?;
        let bytes = usize::try_from(bytes).map_err(|_| DeviceError::Driver {
            call: "cuMemAlloc",
            message: format!("{bytes} bytes do not fit in usize"),
        })?;
        // SAFETY: allocates device memory; nothing on the host is read or written. The memory
        // is uninitialized, which is fine for untyped device bytes.
        unsafe { result::malloc_sync(bytes) }.map_err(|e| failed("cuMemAlloc", e))
    }

    /// `cuMemFree`. The caller makes sure no queued work still uses `addr`.
    pub fn free(&self, addr: u64) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: frees device memory only; the driver rejects an address it did not allocate.
        unsafe { result::free_sync(addr) }.map_err(|e| failed("cuMemFree", e))
    }

    /// Copies device bytes at `src` into `dst`; returns when the copy is done (`cuMemcpyDtoH`,
    /// synchronous whatever memory `dst` is, so nothing writes into it after the call). Not
    /// ordered with any stream: the caller waits for the work writing `src` first (a fence).
    pub fn copy_from_device(&self, dst: &mut [u8], src: u64) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: `dst` is a valid, exclusively borrowed slice for the whole (synchronous)
        // call; any byte pattern is a valid `u8`.
        unsafe { result::memcpy_dtoh_sync(dst, src) }.map_err(|e| failed("cuMemcpyDtoH", e))
    }

    /// Loads a PTX module (the driver compiles it for the device).
    pub fn load_ptx(&self, ptx: &str) -> Result<Module, DeviceError> {
        if ptx.contains('\0') {
            return Err(DeviceError::Driver {
                call: "cuModuleLoadData",
                message: "PTX contains a NUL character".into(),
            });
        }
        let module = self.0.load_module(nvrtc::Ptx::from_src(ptx)).map_err(|e| {
            let mut err = failed("cuModuleLoadData", e);
            if let DeviceError::Driver { message, .. } = &mut err {
                let log = self.jit_log(ptx);
                if !log.is_empty() {
                    message.push_str("\nJIT log:\n");
                    message.push_str(&log);
                }
            }
            err
        })?;
        Ok(Module {
            module,
            ctx: self.clone(),
        })
    }

    /// The driver's JIT error log for `ptx` (loads it once more with a log buffer, then
    /// unloads it); empty when there is none.
    fn jit_log(&self, ptx: &str) -> String {
        const LOG_BYTES: usize = 16 << 10;
        let (Ok(()), Ok(text)) = (self.bind(), std::ffi::CString::new(ptx)) else {
            return String::new();
        };
        let mut log = vec![0u8; LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: [*mut c_void; 2] = [
            log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG_BYTES),
        ];
        let mut module = std::mem::MaybeUninit::<sys::CUmodule>::uninit();
        // SAFETY: `text` is a NUL-terminated PTX image; the two options pair with their values
        // (a buffer of LOG_BYTES bytes, which outlives the call, and its size passed by value).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                module.as_mut_ptr(),
                text.as_ptr().cast(),
                2,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if r == sys::CUresult::CUDA_SUCCESS {
            // SAFETY: the module was just loaded and nothing else holds it.
            unsafe { sys::cuModuleUnload(module.assume_init()) };
        }
        let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
        String::from_utf8_lossy(&log[..end]).trim_end().to_string()
    }

    /// Loads a cubin or fatbin image.
    ///
    /// # Safety
    /// `image` must be a complete cubin or fatbin (as NVRTC or nvcc write them): the driver
    /// reads as many bytes as the image's own headers say.
    pub unsafe fn load_cubin(&self, image: &[u8]) -> Result<Module, DeviceError> {
        let module = self
            .0
            .load_module(nvrtc::Ptx::from_binary(image.to_vec()))
            .map_err(|e| failed("cuModuleLoadData", e))?;
        Ok(Module {
            module,
            ctx: self.clone(),
        })
    }
}

/// A stream: work queued on it runs in order.
pub struct Stream {
    stream: Arc<CudaStream>,
    ctx: Context,
}

impl Stream {
    /// Blocks until all work queued so far has run.
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        self.stream
            .synchronize()
            .map_err(|e| failed("cuStreamSynchronize", e))
    }

    /// Copies host bytes to device address `dst` on this stream (`cuMemcpyHtoDAsync`) and waits
    /// until the stream has run it, so the bytes are on the device for any stream's later
    /// work. (A synchronous `cuMemcpyHtoD` from pageable memory may return before its DMA
    /// lands.) Not ordered with other streams: the caller waits for the work using `dst` first.
    pub fn copy_to_device(&self, dst: u64, src: &[u8]) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        // SAFETY: `src` is valid for the call; the driver stages pageable memory before
        // returning, and the stream is synchronized before `src` is given back.
        unsafe { result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }
            .map_err(|e| failed("cuMemcpyHtoDAsync", e))?;
        self.synchronize()
    }

    /// Sets `bytes` bytes at device address `dst` to zero on this stream (`cuMemsetD8Async`)
    /// and waits until they are.
    pub fn zero(&self, dst: u64, bytes: u64) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        let bytes = usize::try_from(bytes).map_err(|_| DeviceError::Driver {
            call: "cuMemsetD8Async",
            message: format!("{bytes} bytes do not fit in usize"),
        })?;
        // SAFETY: device memory only, a block of this context's allocator (`cuMemAlloc`, not a
        // stream-ordered pool, so any stream may set it); no host memory is involved.
        unsafe { result::memset_d8_async(dst, 0, bytes, self.stream.cu_stream()) }
            .map_err(|e| failed("cuMemsetD8Async", e))?;
        self.synchronize()
    }

    /// Queues a device-to-device copy of `bytes` bytes.
    pub fn copy_device_to_device(&self, dst: u64, src: u64, bytes: u64) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        let bytes = usize::try_from(bytes).map_err(|_| DeviceError::Driver {
            call: "cuMemcpyDtoDAsync",
            message: format!("{bytes} bytes do not fit in usize"),
        })?;
        // SAFETY: device addresses only; no host memory is involved.
        unsafe { result::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }
            .map_err(|e| failed("cuMemcpyDtoDAsync", e))
    }

    /// Queues `function` with a packed parameter block (`cuLaunchKernel`'s `extra`:
    /// `CU_LAUNCH_PARAM_BUFFER_POINTER`/`_SIZE`/`_END`). The driver copies `params` before
    /// returning.
    pub fn launch(
        &self,
        function: &Function,
        grid: Dim3,
        block: Dim3,
        shared_memory: u32,
        params: &[u8],
    ) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        // An 8-byte aligned copy with the same bytes: the driver reads the block as the
        // kernel's parameter struct.
        let mut words: Vec<u64> = params
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_ne_bytes(w)
            })
            .collect();
        let mut size: usize = params.len();
        let mut extra: [*mut c_void; 5] = [
            std::ptr::without_provenance_mut(sys::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT as usize),
            words.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(sys::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT as usize),
            (&raw mut size).cast(),
            std::ptr::without_provenance_mut(sys::CU_LAUNCH_PARAM_END_AS_INT as usize),
        ];
        let extra = if params.is_empty() {
            std::ptr::null_mut()
        } else {
            extra.as_mut_ptr()
        };
        // SAFETY: `function` belongs to a module of this context, kept loaded by `Function`.
        // `extra` is a well-formed, END-terminated list whose buffer (`words`, at least `size`
        // bytes, 8-byte aligned) and size outlive the call; the driver copies the parameters
        // before returning. What the kernel then does runs on the device (see the module docs
        // on the trust boundary).
        unsafe {
            sys::cuLaunchKernel(
                function.function.cu_function(),
                grid.x,
                grid.y,
                grid.z,
                block.x,
                block.y,
                block.z,
                shared_memory,
                self.stream.cu_stream(),
                std::ptr::null_mut(),
                extra,
            )
        }
        .result()
        .map_err(|e| failed("cuLaunchKernel", e))
    }
}

impl Stream {
    /// Starts capturing the work this thread queues on the stream into a graph
    /// (`cuStreamBeginCapture`, thread-local mode): queued launches are recorded, not run, until
    /// [`Stream::end_capture`]. The caller keeps every other thread off the stream meanwhile.
    pub fn begin_capture(&self) -> Result<(), DeviceError> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| failed("cuStreamBeginCapture", e))
    }

    /// Ends a capture and instantiates what it recorded (`cuStreamEndCapture`,
    /// `cuGraphInstantiate`); `None` when nothing was recorded. Always ends the capture, so the
    /// stream runs work again afterwards, whatever the result.
    pub fn end_capture(&self) -> Result<Option<Graph>, DeviceError> {
        self.stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map(|g| g.map(Graph))
            .map_err(|e| failed("cuStreamEndCapture", e))
    }
}

/// An instantiated CUDA graph: replays, on the stream it was captured on, the launches recorded
/// (`cuGraphLaunch`: one call for all of them). Destroyed when dropped.
pub struct Graph(cudarc::driver::CudaGraph);

// SAFETY: a CUDA graph is not tied to the thread that made it; the driver only requires calls on
// one graph to be serialized. The CUDA device launches a graph only while holding the launch lock
// of the stream it was captured on (graphs are keyed by stream), and the last `Arc` drops it when
// no launch can be running it.
unsafe impl Send for Graph {}
// SAFETY: as for `Send`: every call on a shared graph happens under its stream's launch lock.
unsafe impl Sync for Graph {}

impl Graph {
    /// Queues the whole graph on its stream.
    pub fn launch(&self) -> Result<(), DeviceError> {
        self.0.launch().map_err(|e| failed("cuGraphLaunch", e))
    }
}

/// An event: marks a point of a stream.
pub struct Event {
    event: CudaEvent,
    ctx: Context,
}

impl Event {
    /// Marks everything queued on `stream` so far.
    pub fn record(&self, stream: &Stream) -> Result<(), DeviceError> {
        self.event
            .record(&stream.stream)
            .map_err(|e| failed("cuEventRecord", e))
    }

    /// Blocks until the marked work has run (`cuEventSynchronize`; the thread sleeps for an
    /// event made by [`Context::new_blocking_event`]). A fault in that work is its error.
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        self.event
            .synchronize()
            .map_err(|e| failed("cuEventSynchronize", e))
    }

    /// Whether the marked work has run (`cuEventQuery`, no waiting).
    pub fn is_complete(&self) -> Result<bool, DeviceError> {
        self.ctx.bind()?;
        self.event
            .try_is_complete()
            .map_err(|e| failed("cuEventQuery", e))
    }
}

impl crate::device::completion::Marker for Event {
    fn wait(&self) -> Result<(), DeviceError> {
        self.synchronize()
    }
}

/// A loaded module.
pub struct Module {
    module: Arc<CudaModule>,
    ctx: Context,
}

impl Module {
    /// A kernel of the module, with the attributes launches are checked against.
    pub fn function(&self, name: &str) -> Result<Function, DeviceError> {
        if name.contains('\0') {
            return Err(DeviceError::Driver {
                call: "cuModuleGetFunction",
                message: "the kernel name contains a NUL character".into(),
            });
        }
        self.ctx.bind()?;
        let function = self
            .module
            .load_function(name)
            .map_err(|e| failed("cuModuleGetFunction", e))?;
        let attr = |r: Result<i32, result::DriverError>| {
            r.map(|v| v.max(0) as u32)
                .map_err(|e| failed("cuFuncGetAttribute", e))
        };
        Ok(Function {
            max_threads_per_block: attr(function.max_threads_per_block())?,
            static_shared_memory: attr(function.shared_size_bytes())?,
            function,
        })
    }
}

/// A kernel; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    function: CudaFunction,
    /// Most threads a block of this kernel may have (registers can make it less than the
    /// device's limit).
    pub max_threads_per_block: u32,
    /// Shared memory the kernel declares statically.
    pub static_shared_memory: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_errors_mean_a_lost_device_and_are_named() {
        assert_eq!(stream_status(0), Ok(()));
        let e = stream_status(700).unwrap_err();
        assert!(matches!(&e, DeviceError::Lost(m) if m.contains("CUDA_ERROR_ILLEGAL_ADDRESS")));
        assert!(
            e.to_string().starts_with("device lost: CUDA error 700"),
            "{e}"
        );
        assert!(matches!(stream_status(719), Err(DeviceError::Lost(_))));
        // Not sticky: the device stays usable, the error is still named.
        let e = stream_status(701).unwrap_err();
        assert!(
            matches!(&e, DeviceError::Driver { message, .. }
                if message.contains("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")),
            "{e}"
        );
        assert!(!is_sticky(2), "out of memory is not sticky");
    }
}
