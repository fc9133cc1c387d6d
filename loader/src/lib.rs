//! dctcp-bpf's loader: registers DCTCP-family congestion controls as BPF
//! struct_ops, keeps them registered through bpffs pins, tunes them live and
//! shows the sockets that use them.

pub mod algo;
pub mod attach_file;
pub mod check;
pub mod event;
pub mod flows;
pub mod generate;
pub mod instance;
pub mod intf;
pub mod metrics;
pub mod model;
pub mod params;
mod skel;
pub mod top;
pub mod trace;
