//! The ONNX backend node tests of this plugin's ops, replayed on its CPU kernels by
//! [`umd_sdk::onnx_cases`] when `UMD_ONNX_CASES` names a dump (see there).

#[test]
fn onnx_node_cases() {
    umd_sdk::onnx_cases::run_dump::<crate::Norm>();
}
