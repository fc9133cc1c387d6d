//! Network-namespace labs for DCTCP: topologies of namespaces and veths,
//! traffic, experiments, results and plots.

pub mod bench;
pub mod calltime;
pub mod cc;
pub mod cctrace;
pub mod cleanup;
pub mod delay;
pub mod delay_bench;
pub mod delayline;
pub mod doctor;
pub mod experiments;
pub mod fairness;
pub mod faults;
pub mod netns;
pub mod oscillation;
pub mod plot;
pub mod prefix;
pub mod profile;
pub mod results;
pub mod rng;
pub mod rpc;
pub mod rpcstar;
pub mod scenario;
pub mod schedule;
pub mod shortflows;
pub mod stats;
pub mod tcpinfo;
pub mod theory;
pub mod topology;
pub mod traffic;
pub mod units;
pub mod veth;

pub use netns::Netns;
pub use prefix::Prefix;
pub use veth::Veth;
