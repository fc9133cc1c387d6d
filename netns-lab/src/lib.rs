//! Network-namespace labs for DCTCP. The library in rooms, each importing
//! only the rooms below it (tests/layout.rs checks it):
//!
//! - `experiments`: one file per `lab` subcommand (options, plan, analysis,
//!   plots, summary), and `bench`;
//! - `measure`: one run of a scenario and what is measured in it;
//! - `traffic`: what the lab sends;
//! - `capture`: its packets as pcapng (`lab --pcap`), read per round trip
//!   (`lab rtts`);
//! - `net`: the namespaces, links, delay element and faults it sends over;
//! - `report`: results folders, plots, shared tables; with `units`, `rng`
//!   and `stats` below everything.

pub mod capture;
pub mod experiments;
pub mod measure;
pub mod net;
pub mod report;
pub mod rng;
pub mod stats;
pub mod traffic;
pub mod units;

pub use net::netns::Netns;
pub use net::prefix::Prefix;
pub use net::veth::Veth;
