//! Compiles every algorithm in `../bpf` into a libbpf-rs skeleton and runs
//! bindgen over `../bpf/intf.h`, the one header of structs shared with BPF.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// BPF objects the loader embeds: (source in bpf/, skeleton module name).
const OBJECTS: &[(&str, &str)] = &[
    ("dctcp.bpf.c", "dctcp"),
    ("xdctcp.bpf.c", "xdctcp"),
    ("kdctcp.bpf.c", "kdctcp"),
    ("flows.bpf.c", "flows"),
];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let bpf = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"))
        .join("..")
        .join("bpf");

    for (src, name) in OBJECTS {
        let src_path = bpf.join(src);
        SkeletonBuilder::new()
            .source(&src_path)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([
                "-Wall".as_ref(),
                "-Werror".as_ref(),
                "-I".as_ref(),
                bpf.as_os_str(),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src}: {e:#}"));
    }

    bindgen::Builder::default()
        .header(bpf.join("intf.h").to_string_lossy())
        .allowlist_type("dctcp_.*|flow_record|queue_now|marker_stats")
        .allowlist_var("(X|K)?DCTCP_.*")
        .derive_default(true)
        .generate()
        .expect("bindgen over bpf/intf.h")
        .write_to_file(out.join("intf.rs"))
        .expect("writing intf.rs");

    println!("cargo:rerun-if-changed={}", bpf.display());
    for entry in std::fs::read_dir(&bpf).expect("bpf/") {
        println!(
            "cargo:rerun-if-changed={}",
            entry.expect("dir entry").path().display()
        );
    }
}
