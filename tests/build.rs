//! Builds the fixture plugins (tests/fixtures/*) into components for the tests to load.

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("fixtures");
    let mut build = umd_sdk_build::PluginBuild::new(&manifest).out_dir(&out);
    for f in [
        "panicky",
        "spin",
        "hog",
        "badplans",
        "abi2",
        "tagger-v1",
        "tagger-v1-rebuilt",
        "tagger-v2",
        "tagger-liar",
        "abi10",
        "abi11",
        "vendor",
        "brokencuda",
        "ptxkit",
    ] {
        build = build.plugin(format!("tests/fixtures/{f}"));
    }
    for dir in ["tests/fixtures", "sdk/src", "wit"] {
        println!(
            "cargo:rerun-if-changed={}",
            build.workspace().join(dir).display()
        );
    }
    if let Err(e) = build.build() {
        panic!("building the fixture plugins failed: {e}");
    }
    println!("cargo:rustc-env=UMD_FIXTURES_DIR={}", out.display());
}
