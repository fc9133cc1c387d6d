//! What the lab sends: bulk flows, short flows, flows on a schedule, RPCs
//! over their wire protocol, and the congestion control each uses. Imports
//! net and below.

pub mod bulk;
pub mod cc;
pub mod rpcgen;
pub mod rpcstar;
pub mod schedule;
pub mod shortflows;
