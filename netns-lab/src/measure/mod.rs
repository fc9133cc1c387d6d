//! What the lab measures and how it judges it: one run of a scenario,
//! congestion-control traces, call timing, CPU time and profiles, fairness,
//! DCTCP's theory, the sawtooth's estimators, what faults did. Imports
//! traffic and below.

pub mod calltime;
pub mod cctrace;
pub mod cpu;
pub mod fairness;
pub mod fault_effects;
pub mod oscillation;
pub mod profile;
pub mod scenario;
pub mod step_response;
pub mod theory;
