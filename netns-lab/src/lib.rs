//! Network-namespace labs for DCTCP: namespaces, veth links and the prefix
//! that ties every object of one run together so it can be removed.

pub mod cleanup;
pub mod netns;
pub mod prefix;
pub mod veth;

pub use netns::Netns;
pub use prefix::Prefix;
pub use veth::Veth;
