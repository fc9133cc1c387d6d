//! The lab switch: bottleneck shaping (htb), ECN-marking backends (kernel
//! qdiscs and BPF markers), the queue probe and the receiver's per-flow CE
//! counter, faulty links (loss, ECN bleaching, reordering), and a probe of
//! what the running kernel offers.

pub mod backend;
pub mod bottleneck;
pub mod checks;
pub mod dualpi2;
pub mod faults;
pub mod hook;
pub mod hysteresis;
pub mod intf;
pub mod marker;
pub mod pins;
pub mod qdisc_stats;
mod skel;
pub mod tc;

pub use backend::{Backend, Marking, RedProfile};
pub use bottleneck::Bottleneck;
pub use marker::{BpfSwitch, Floor, MarkerFloor, QueueTrace, RxFlow};
