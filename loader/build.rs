//! Compiles every algorithm in `../bpf` into a libbpf-rs skeleton and runs
//! bindgen over `../bpf/intf.h`, the one header of structs they share with
//! the loader.

use dctcp_utils::build::BpfBuild;

fn main() {
    BpfBuild::new(&[])
        .skeleton("../bpf/dctcp.bpf.c", "dctcp")
        .skeleton("../bpf/xdctcp.bpf.c", "xdctcp")
        .skeleton("../bpf/kdctcp.bpf.c", "kdctcp")
        .skeleton("../bpf/prague.bpf.c", "prague")
        .skeleton("../bpf/flows.bpf.c", "flows")
        .bindings("../bpf/intf.h", "dctcp_.*|prague_.*|flow_record", "(X|K)?DCTCP_.*|PRAGUE_.*")
        .watch("../bpf");
}
