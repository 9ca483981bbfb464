//! Native tests of planning and the CPU kernels, against independent naive references and the
//! ONNX reference (the replayed fixture).

mod onnx;
