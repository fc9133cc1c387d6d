//! The lab's network: namespaces, veths, addresses, the star topology, the
//! delay element, faults on its links, sockets' tcp_info, and finding and
//! removing what runs leave. Imports only report and the flat utilities.

pub mod cleanup;
pub mod cpus;
pub mod delay;
pub mod delayline;
pub mod doctor;
pub mod ecn;
pub mod link_faults;
pub mod netns;
pub mod prefix;
pub mod rate_schedule;
pub mod tcpinfo;
pub mod topology;
pub mod veth;
