//! Native tests of planning and the CPU kernels, against independent naive references and the
//! ONNX reference (the replayed fixture).

mod cuda;
mod emu;
mod gather;
mod inplace;
mod layout;
mod onnx;
mod pad;
mod resize;
mod scatter;
mod util;
