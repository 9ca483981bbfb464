//! Native tests of planning and the CPU kernels, against independent naive references, the
//! ONNX reference (the replayed fixture) and, for the in-place kernels, the whole-buffer ones
//! they replaced ([`oracle`]).

mod cuda;
mod emu;
mod gather;
mod inplace;
mod layout;
mod onnx;
mod oracle;
mod pad;
mod resize;
mod scatter;
mod util;
