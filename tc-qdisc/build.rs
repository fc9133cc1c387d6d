//! Compiles the BPF switch (src/bpf/switch.bpf.c) and the faulty link
//! (src/bpf/faults.bpf.c) into libbpf-rs skeletons;
//! the structs it shares with Rust come from `../bpf/intf.h` through bindgen.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let shared = manifest.join("..").join("bpf");

    for name in ["switch", "faults"] {
        let src = manifest
            .join("src")
            .join("bpf")
            .join(format!("{name}.bpf.c"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([
                "-Wall".as_ref(),
                "-Werror".as_ref(),
                "-I".as_ref(),
                shared.as_os_str(),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {name}.bpf.c: {e:#}"));
        println!("cargo:rerun-if-changed={}", src.display());
    }

    bindgen::Builder::default()
        .header(shared.join("intf.h").to_string_lossy())
        // marker_stats and queue_now come from the loader's bindgen (intf.rs).
        .allowlist_type(
            "marker_config|marker_mode|queue_sample|queue_departure|queue_action|probe_batches|rx_flow_.*|fault_.*",
        )
        .allowlist_var("MARKER_.*|PROBE_BATCH|FAULT_.*")
        .derive_default(true)
        .generate()
        .expect("bindgen over bpf/intf.h")
        .write_to_file(out.join("intf.rs"))
        .expect("writing intf.rs");

    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("src").join("bpf").join("pkt.h").display()
    );
    println!("cargo:rerun-if-changed={}", shared.join("intf.h").display());
}
