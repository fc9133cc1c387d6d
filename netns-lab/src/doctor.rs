//! `lab doctor`: the kernel checks of tc-qdisc plus the qdisc checks, run in
//! a scratch namespace that is removed afterwards.

use anyhow::Result;
use tc_qdisc::doctor::{kernel_checks, qdisc_checks, Check};

use crate::{Netns, Prefix, Veth};

pub fn run() -> Result<Vec<Check>> {
    let mut checks = kernel_checks();
    let prefix = Prefix::unique()?;
    let a = Netns::create(&prefix.ns("da"))?;
    let b = Netns::create(&prefix.ns("db"))?;
    let v = Veth::create(
        &a,
        &prefix.ifname("a"),
        "198.18.0.1/30",
        &b,
        &prefix.ifname("b"),
        "198.18.0.2/30",
    )?;
    checks.extend(qdisc_checks(a.name(), &v.a));
    Ok(checks)
}
