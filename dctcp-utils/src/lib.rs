//! What dctcp-bpf's three crates share, as scx_utils is for sched_ext's
//! schedulers: entering network namespaces, the bpffs pins, the kernel checks
//! made before anything is loaded, reading BPF ring buffers and plain C
//! structs out of maps, what the kernel says of a loaded program, socket
//! options, the exit statuses and logging of the binaries, and (feature
//! `build`) the build.rs helper that compiles BPF objects into skeletons and
//! runs bindgen over an interface header.

pub mod bpffs;
#[cfg(feature = "build")]
pub mod build;
pub mod bytes;
pub mod clock;
pub mod duration;
pub mod error;
pub mod generated;
pub mod preflight;
pub mod prog_info;
pub mod ring;
pub mod setns;
pub mod sockopt;
