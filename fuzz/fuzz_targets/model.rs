//! ONNX model bytes as a client sends them to `umd.Graph.LoadModel`: parsed (protobuf, opsets,
//! initializers, attributes, value types) and sorted into a graph, or refused with an error;
//! never a panic, an unbounded allocation or a hang. Stops short of planning (no plugins here).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(def) = umd::graph::onnx::parse(bytes, None) {
        let _ = def.sorted();
    }
});
