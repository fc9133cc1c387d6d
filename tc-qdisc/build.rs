//! Compiles the BPF switch (src/bpf/switch.bpf.c) and the faulty link
//! (src/bpf/faults.bpf.c) into libbpf-rs skeletons, and runs bindgen over
//! src/bpf/intf.h, the structs they share with Rust.

use dctcp_utils::build::BpfBuild;

fn main() {
    BpfBuild::new(&["src/bpf"])
        .skeleton("src/bpf/switch.bpf.c", "switch")
        .skeleton("src/bpf/faults.bpf.c", "faults")
        .bindings(
            "src/bpf/intf.h",
            "marker_.*|red_profile|class_counts|queue_.*|probe_batches|rx_flow_.*|fault_.*|dualpi2_.*|link_rate",
            "MARKER_.*|PROBE_BATCH|FAULT_.*|DUALPI2_.*",
        )
        .watch("src/bpf");
}
