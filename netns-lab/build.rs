//! Compiles the lab's own BPF (src/bpf/calltime.bpf.c, `lab bench`'s call
//! timer) into a libbpf-rs skeleton, and runs bindgen over src/bpf/intf.h,
//! the struct it shares with Rust.

use dctcp_utils::build::BpfBuild;

fn main() {
    BpfBuild::new(&["src/bpf"])
        .skeleton("src/bpf/calltime.bpf.c", "calltime")
        .bindings("src/bpf/intf.h", "call_time", "")
        .watch("src/bpf");
}
