//! Compiles the BPF switch (src/bpf/switch.bpf.c) into a libbpf-rs skeleton;
//! the structs it shares with Rust come from `../bpf/intf.h` through bindgen.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let shared = manifest.join("..").join("bpf");
    let src = manifest.join("src").join("bpf").join("switch.bpf.c");

    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join("switch.bpf.o"))
        .clang_args([
            "-Wall".as_ref(),
            "-Werror".as_ref(),
            "-I".as_ref(),
            shared.as_os_str(),
        ])
        .build_and_generate(out.join("switch.skel.rs"))
        .unwrap_or_else(|e| panic!("building switch.bpf.c: {e:#}"));

    bindgen::Builder::default()
        .header(shared.join("intf.h").to_string_lossy())
        // marker_stats and queue_now come from the loader's bindgen (intf.rs).
        .allowlist_type(
            "marker_config|marker_mode|queue_sample|queue_departure|queue_action|probe_batches|rx_flow_.*",
        )
        .allowlist_var("MARKER_.*|PROBE_BATCH")
        .derive_default(true)
        .generate()
        .expect("bindgen over bpf/intf.h")
        .write_to_file(out.join("intf.rs"))
        .expect("writing intf.rs");

    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", shared.join("intf.h").display());
}
