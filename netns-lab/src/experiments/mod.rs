//! The experiments of the seeds, each writing a results directory.

pub mod queue;
