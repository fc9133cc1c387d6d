//! `lab doctor`: the kernel checks of tc-qdisc plus the qdisc checks, run in
//! a scratch namespace that is removed afterwards.

use anyhow::Result;
use tc_qdisc::checks::{kernel_checks, qdisc_checks, Check};

use crate::{Netns, Prefix, Veth};

/// Whether the delay element can run here: an AF_PACKET socket on a lab
/// link, and the tc mirred redirect that carries the data direction past it.
fn delay_element_check(ns: &Netns, dev: &str) -> Check {
    let packet = ns
        .run(|| {
            // SAFETY: plain socket(2); closed right away.
            let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
            fd >= 0
        })
        .unwrap_or(false);
    let tc = |args: &[&str]| tc_qdisc::tc::tc(ns.name(), args).is_ok();
    let mirred = tc(&["qdisc", "add", "dev", dev, "clsact"])
        && tc(&[
            "filter", "add", "dev", dev, "ingress", "u32", "match", "u32", "0", "0", "action",
            "mirred", "egress", "redirect", "dev", dev,
        ]);
    let _ = tc(&["qdisc", "del", "dev", dev, "clsact"]);
    let ok = packet && mirred;
    Check {
        feature: "delay element",
        available: ok,
        note: if ok {
            "delayline can add --rtt on any kernel (--delay-backend element; auto uses it where netem is missing)".into()
        } else {
            format!(
                "AF_PACKET {}, cls_u32 + act_mirred {}: the delay element cannot run here; use netem",
                if packet { "ok" } else { "missing" },
                if mirred { "ok" } else { "missing" }
            )
        },
    }
}

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
    checks.push(delay_element_check(&a, &v.a));
    Ok(checks)
}

/// `lab doctor`: one line per feature (or `--json`, one array).
pub fn command(json: bool) -> Result<()> {
    dctcp_utils::preflight::require_root("lab")?;
    let checks = run()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
        return Ok(());
    }
    for c in checks {
        println!(
            "{:<40} {:<4} {}",
            c.feature,
            if c.available { "yes" } else { "NO" },
            c.note
        );
    }
    Ok(())
}
