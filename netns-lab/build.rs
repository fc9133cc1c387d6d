//! Compiles the lab's own BPF (src/bpf/calltime.bpf.c, `lab bench`'s call
//! timer) into a libbpf-rs skeleton, and runs bindgen over the struct it
//! shares with Rust in `../bpf/intf.h`.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let shared = manifest.join("..").join("bpf");
    let src = manifest.join("src").join("bpf").join("calltime.bpf.c");
    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join("calltime.bpf.o"))
        .clang_args([
            "-Wall".as_ref(),
            "-Werror".as_ref(),
            "-I".as_ref(),
            shared.as_os_str(),
        ])
        .build_and_generate(out.join("calltime.skel.rs"))
        .unwrap_or_else(|e| panic!("building calltime.bpf.c: {e:#}"));
    println!("cargo:rerun-if-changed={}", src.display());

    bindgen::Builder::default()
        .header(shared.join("intf.h").to_string_lossy())
        .allowlist_type("call_time")
        .derive_default(true)
        .generate()
        .expect("bindgen over bpf/intf.h")
        .write_to_file(out.join("intf.rs"))
        .expect("writing intf.rs");
    println!("cargo:rerun-if-changed={}", shared.join("intf.h").display());
}
