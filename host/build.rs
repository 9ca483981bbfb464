//! Builds the bundled plugins (plugins/*) into components and embeds them in the `umd` binary,
//! and generates the gRPC code from `proto/umd.proto` (with protox: no protoc needed).

fn main() {
    proto();
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let build = umd_sdk_build::PluginBuild::new(&manifest)
        .plugin("plugins/elementwise")
        .plugin("plugins/matmul")
        .plugin("plugins/unary")
        .plugin("plugins/reduce")
        .plugin("plugins/norm")
        .plugin("plugins/conv")
        .plugin("plugins/shape")
        .plugin("plugins/gather")
        .plugin("plugins/attention")
        .plugin("plugins/misc")
        .plugin("plugins/quant")
        .plugin("plugins/optim")
        .plugin("plugins/ml")
        .plugin("plugins/image")
        .plugin("plugins/text")
        .plugin("plugins/loss")
        .plugin("plugins/recurrent");
    for dir in ["plugins", "sdk/src", "sdk/wit", "sdk/Cargo.toml", "wit"] {
        println!(
            "cargo:rerun-if-changed={}",
            build.workspace().join(dir).display()
        );
    }
    // UMD_PREBUILT_PLUGINS=DIR embeds the components another build of this tree already made
    // (`<target>/wasm/components`) instead of building them again: CI's nightly fuzz build uses it.
    println!("cargo:rerun-if-env-changed=UMD_PREBUILT_PLUGINS");
    let built = match std::env::var_os("UMD_PREBUILT_PLUGINS") {
        Some(dir) if !dir.is_empty() => build.prebuilt(dir),
        _ => build.build(),
    };
    let built = match built {
        Ok(b) => b,
        Err(e) => panic!("building the bundled plugins failed: {e}"),
    };
    let mut list = String::from("&[\n");
    for p in &built {
        list.push_str(&format!(
            "    ({:?}, include_bytes!({:?})),\n",
            p.name,
            p.component.display().to_string()
        ));
    }
    list.push(']');
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("bundled.rs");
    std::fs::write(out, list).expect("writing bundled.rs");
}

fn proto() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let proto = root.join("proto/umd.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let fds = protox::compile([&proto], [root.join("proto")]).expect("proto/umd.proto compiles");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(
        out.join("umd_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )
    .expect("writing the descriptor set");
    tonic_prost_build::configure()
        .compile_fds(fds)
        .expect("generating gRPC code");

    let onnx = root.join("proto/onnx/onnx.proto");
    println!("cargo:rerun-if-changed={}", onnx.display());
    let fds = protox::compile([&onnx], [root.join("proto/onnx")])
        .expect("proto/onnx/onnx.proto compiles");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .compile_fds(fds)
        .expect("generating the ONNX types");
}
