//! Tables and JSON for `list` and `flows`.

use anyhow::Result;

use loader::flows::{alpha_fraction, Flow};
use loader::instance::Instance;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

pub fn instances(list: &[Instance], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(list)?);
        return Ok(());
    }
    if list.is_empty() {
        println!("no algorithms attached (try: loader attach --algo dctcp)");
        return Ok(());
    }
    println!(
        "{:<11} {:<6} {:<16} {:<5} {:>7} {:>9}  PARAMS",
        "NAME", "ALGO", "FALLBACK", "MODE", "SOCKETS", "FB_SOCKS"
    );
    for i in list {
        let params: Vec<String> = i.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{:<11} {:<6} {:<16} {:<5} {:>7} {:>9}  {}{}",
            i.name,
            i.algo,
            i.fallback,
            i.mode,
            i.sockets,
            i.fallback_sockets,
            params.join(" "),
            if i.registered {
                ""
            } else {
                "  (NOT registered: stale pins; loader detach it)"
            }
        );
        if i.fallback_refused > 0 {
            println!(
                "{:<11} {} flows without ECN were refused {} and run the kernel's reno",
                "", i.fallback_refused, i.fallback
            );
        }
    }
    Ok(())
}

pub fn flows(flows: &[Flow], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(flows)?);
        return Ok(());
    }
    if flows.is_empty() {
        println!("no sockets use an attached algorithm (--all shows every TCP socket)");
        return Ok(());
    }
    println!(
        "{:<12} {:<22} {:<22} {:<15} {:<8} {:>6} {:>8} {:>9} {:<3} {:>6} {:>10} {:>10}",
        "NETNS",
        "LOCAL",
        "REMOTE",
        "ALGO",
        "CA",
        "CWND",
        "SSTHRESH",
        "SRTT(us)",
        "CE",
        "ALPHA",
        "AB_ECN",
        "AB_TOT"
    );
    for f in flows {
        let ca = if f.fallback { "reno-fb" } else { f.ca_state };
        println!(
            "{:<12} {:<22} {:<22} {:<15} {:<8} {:>6} {:>8} {:>9} {:<3} {:>6} {:>10} {:>10}",
            f.netns,
            f.local,
            f.remote,
            f.algorithm,
            ca,
            f.cwnd,
            opt(f.ssthresh),
            f.srtt_us,
            opt(f.ce_state),
            opt(f.alpha.map(|a| format!("{:.3}", alpha_fraction(a)))),
            opt(f.ab_ecn),
            opt(f.ab_tot),
        );
    }
    Ok(())
}
