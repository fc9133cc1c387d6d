//! Rust view of the switch's structs in `src/bpf/intf.h` (bindgen, build time).
#![allow(non_camel_case_types, non_upper_case_globals, dead_code, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/intf.rs"));

pub use dctcp_utils::bytes::from_bytes;
