//! Where results go: one folder per run, plots and their data side by side,
//! and the tables every summary shares. Imports nothing of the lab.

pub mod compare;
#[cfg(test)]
pub mod figures;
pub mod model;
pub mod plot;
pub mod render;
pub mod results;
pub mod tables;
