//! Trace events as users read them: decoded from struct dctcp_event, and the
//! `--flow` filter that selects them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

use crate::flows::{alpha_fraction, ca_state_name, local_end, remote_end};
use crate::intf::{
    dctcp_event, dctcp_event_type_DCTCP_EV_ACK as EV_ACK, dctcp_event_type_DCTCP_EV_CUT as EV_CUT,
    dctcp_event_type_DCTCP_EV_END as EV_END,
    dctcp_event_type_DCTCP_EV_FALLBACK as EV_FALLBACK,
    dctcp_event_type_DCTCP_EV_REPAIR as EV_REPAIR, dctcp_event_type_DCTCP_EV_START as EV_START,
    dctcp_event_type_DCTCP_EV_STATE as EV_STATE, dctcp_event_type_DCTCP_EV_WINDOW as EV_WINDOW,
    dctcp_flow_key, dctcp_repair_DCTCP_REPAIR_CWND as DCTCP_REPAIR_CWND,
    dctcp_repair_DCTCP_REPAIR_INFLIGHT as DCTCP_REPAIR_INFLIGHT,
    dctcp_repair_DCTCP_REPAIR_SSTHRESH as DCTCP_REPAIR_SSTHRESH, prague_mode_PRAGUE_MODE_RATE,
    DCTCP_ONE, PRAGUE_CWND_SHIFT,
};

const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// One event, named and in units (one JSON line or CSV row).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Event {
    /// CLOCK_MONOTONIC, nanoseconds.
    pub ts_ns: u64,
    /// start, end, window, ack, state, fallback, repair.
    pub event: &'static str,
    pub netns: u32,
    pub local: Arc<str>,
    pub remote: Arc<str>,
    /// Congestion state when taken; for `state`, the state left.
    pub ca_state: &'static str,
    /// For `state`: the state entered.
    pub new_state: Option<&'static str>,
    /// For `repair`: what the guard repaired (ssthresh, cwnd, inflight), with
    /// cwnd and ssthresh as repaired.
    pub repair: Option<&'static str>,
    pub cwnd: u32,
    pub ssthresh: Option<u32>,
    /// 0..1.
    pub alpha: f64,
    /// For `window`: marked fraction of the window just ended.
    pub fraction_marked: Option<f64>,
    pub srtt_us: u32,
    pub mss: u32,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub win_delivered: u32,
    pub win_delivered_ce: u32,
    /// n of the flow's last cut, cwnd (1 - n alpha): 0.5 for DCTCP, ns or
    /// nl for xDCTCP; absent before the first.
    pub reduction: Option<f64>,
    pub bytes_acked: u64,
    pub bytes_sent: u64,
    /// ACKs of this socket counted while per-ACK tracing was on: consecutive
    /// `ack` rows of a socket differ by --ack-every.
    pub acks: u32,
    /// sk_pacing_rate, bit/s.
    pub pacing_rate_bps: u64,
    /// Prague's own, absent for the others.
    #[serde(flatten)]
    pub prague: Option<PragueEvent>,
}

/// What a Prague event adds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PragueEvent {
    /// The fractional window, segments.
    pub frac_cwnd: f64,
    /// window or rate: which leads.
    pub mode: &'static str,
    /// The codepoint its data leaves with: ECT(1), or ECT(0) where the
    /// ECT(1) program could not mark the socket.
    pub ect: &'static str,
    /// Growth per round relative to unscaled (RTT independence): 1, or
    /// (rtt / target)^2 below the target.
    pub rtt_scale: f64,
    /// The classic-ECN fallback in force: Reno's response to marks.
    pub classic: bool,
    /// Its evidence, 0..1 (classic_ecn=1; in force from 0.75 to 0.25).
    pub classic_score: f64,
    /// The path's min RTT (tp->rtt_min), us: the queue delay is srtt less it.
    pub min_rtt_us: u32,
}

impl PragueEvent {
    fn of(e: &dctcp_event) -> Option<PragueEvent> {
        (e.ect != 0).then(|| PragueEvent {
            frac_cwnd: e.frac_cwnd as f64 / f64::from(1u32 << PRAGUE_CWND_SHIFT),
            mode: if u32::from(e.mode) == prague_mode_PRAGUE_MODE_RATE {
                "rate"
            } else {
                "window"
            },
            ect: if e.ect == 1 { "ECT(1)" } else { "ECT(0)" },
            rtt_scale: f64::from(e.ai_per_ack) / f64::from(1u32 << PRAGUE_CWND_SHIFT),
            classic: e.classic != 0,
            classic_score: f64::from(e.classic_score) / f64::from(DCTCP_ONE),
            min_rtt_us: e.min_rtt_us,
        })
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl Event {
    pub const CSV_HEADER: &'static str = "ts_ns,event,netns,local,remote,ca_state,new_state,\
        cwnd,ssthresh,alpha,fraction_marked,srtt_us,mss,delivered,delivered_ce,win_delivered,\
        win_delivered_ce,reduction,bytes_acked,bytes_sent,acks,repair,pacing_rate_bps,frac_cwnd,\
        mode,ect,rtt_scale,classic,classic_score,min_rtt_us";

    /// One CSV row in CSV_HEADER's order; empty cells for absent values.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{:.6},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.ts_ns,
            self.event,
            self.netns,
            self.local,
            self.remote,
            self.ca_state,
            self.new_state.unwrap_or_default(),
            self.cwnd,
            opt(self.ssthresh),
            self.alpha,
            opt(self.fraction_marked.map(|f| format!("{f:.4}"))),
            self.srtt_us,
            self.mss,
            self.delivered,
            self.delivered_ce,
            self.win_delivered,
            self.win_delivered_ce,
            opt(self.reduction.map(|n| format!("{n:.5}"))),
            self.bytes_acked,
            self.bytes_sent,
            self.acks,
            self.repair.unwrap_or_default(),
            self.pacing_rate_bps,
            opt(self.prague.as_ref().map(|p| format!("{:.4}", p.frac_cwnd))),
            self.prague.as_ref().map_or("", |p| p.mode),
            self.prague.as_ref().map_or("", |p| p.ect),
            opt(self.prague.as_ref().map(|p| format!("{:.5}", p.rtt_scale))),
            opt(self.prague.as_ref().map(|p| u8::from(p.classic))),
            opt(self.prague.as_ref().map(|p| format!("{:.4}", p.classic_score))),
            opt(self.prague.as_ref().map(|p| p.min_rtt_us))
        )
    }
}

fn repair_name(what: u8) -> &'static str {
    match u32::from(what) {
        DCTCP_REPAIR_SSTHRESH => "ssthresh",
        DCTCP_REPAIR_CWND => "cwnd",
        DCTCP_REPAIR_INFLIGHT => "inflight",
        _ => "?",
    }
}

pub fn type_name(t: u8) -> &'static str {
    match u32::from(t) {
        EV_START => "start",
        EV_END => "end",
        EV_WINDOW => "window",
        EV_ACK => "ack",
        EV_STATE => "state",
        EV_FALLBACK => "fallback",
        EV_REPAIR => "repair",
        EV_CUT => "cut",
        _ => "?",
    }
}

/// Decodes events, naming each flow's ends once: formatting addresses per
/// event would cost more than everything else a tracer does with it.
#[derive(Default)]
pub struct Decoder {
    ends: HashMap<[u8; std::mem::size_of::<dctcp_flow_key>()], (Arc<str>, Arc<str>)>,
}

impl Decoder {
    pub fn decode(&mut self, e: &dctcp_event) -> Event {
        let key = dctcp_utils::bytes::to_bytes(&e.flow)
            .try_into()
            .expect("flow key size");
        let (local, remote) = self
            .ends
            .entry(key)
            .or_insert_with(|| (local_end(&e.flow).into(), remote_end(&e.flow).into()))
            .clone();
        Event::with_ends(e, local, remote)
    }
}

impl Event {
    fn with_ends(e: &dctcp_event, local: Arc<str>, remote: Arc<str>) -> Self {
        let window = u32::from(e.type_) == EV_WINDOW;
        Event {
            ts_ns: e.ts_ns,
            event: type_name(e.type_),
            netns: e.flow.netns_ino,
            local,
            remote,
            ca_state: ca_state_name(e.ca_state),
            new_state: (u32::from(e.type_) == EV_STATE).then(|| ca_state_name(e.value)),
            repair: (u32::from(e.type_) == EV_REPAIR).then(|| repair_name(e.value)),
            cwnd: e.cwnd,
            ssthresh: (e.ssthresh < TCP_INFINITE_SSTHRESH).then_some(e.ssthresh),
            alpha: alpha_fraction(e.alpha),
            fraction_marked: (window && e.win_delivered > 0)
                .then(|| f64::from(e.win_delivered_ce) / f64::from(e.win_delivered)),
            srtt_us: e.srtt_us,
            mss: e.mss,
            delivered: e.delivered,
            delivered_ce: e.delivered_ce,
            win_delivered: e.win_delivered,
            win_delivered_ce: e.win_delivered_ce,
            reduction: (e.reduction > 0).then(|| f64::from(e.reduction) / f64::from(DCTCP_ONE)),
            bytes_acked: e.bytes_acked,
            bytes_sent: e.bytes_sent,
            acks: e.acks,
            pacing_rate_bps: e.pacing_rate.saturating_mul(8),
            prague: PragueEvent::of(e),
        }
    }
}

/// `--flow`: comma-separated conditions, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowFilter {
    terms: Vec<Term>,
}

#[derive(Clone, Debug, PartialEq)]
enum Term {
    Port(u16),
    Sport(u16),
    Dport(u16),
    Addr(IpAddr),
    Saddr(IpAddr),
    Daddr(IpAddr),
    Netns(u32),
}

pub const FILTER_HELP: &str = "port=N, sport=N, dport=N, addr=IP, saddr=IP, daddr=IP, netns=INODE \
     (s = this socket's end, d = its peer; port/addr match either)";

impl FromStr for FlowFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value; keys: {FILTER_HELP}"))?;
            let port = || {
                v.parse::<u16>()
                    .map_err(|_| format!("`{v}` in `{part}` is not a port (0-65535)"))
            };
            let ip = || {
                v.parse::<IpAddr>()
                    .map_err(|_| format!("`{v}` in `{part}` is not an IP address"))
            };
            terms.push(match k {
                "port" => Term::Port(port()?),
                "sport" => Term::Sport(port()?),
                "dport" => Term::Dport(port()?),
                "addr" => Term::Addr(ip()?),
                "saddr" => Term::Saddr(ip()?),
                "daddr" => Term::Daddr(ip()?),
                "netns" => Term::Netns(
                    v.parse()
                        .map_err(|_| format!("`{v}` in `{part}` is not a namespace inode"))?,
                ),
                _ => {
                    return Err(format!(
                        "unknown key `{k}` in `{part}`; keys: {FILTER_HELP}"
                    ))
                }
            });
        }
        if terms.is_empty() {
            return Err(format!("empty filter; keys: {FILTER_HELP}"));
        }
        Ok(FlowFilter { terms })
    }
}

fn ip_of(family: u8, bytes: &[u8; 16]) -> IpAddr {
    if i32::from(family) == libc::AF_INET {
        IpAddr::from([bytes[0], bytes[1], bytes[2], bytes[3]])
    } else {
        IpAddr::from(*bytes)
    }
}

impl FlowFilter {
    pub fn matches(&self, k: &dctcp_flow_key) -> bool {
        let (s, d) = (ip_of(k.family, &k.saddr), ip_of(k.family, &k.daddr));
        self.terms.iter().all(|t| match *t {
            Term::Port(p) => k.sport == p || k.dport == p,
            Term::Sport(p) => k.sport == p,
            Term::Dport(p) => k.dport == p,
            Term::Addr(a) => s == a || d == a,
            Term::Saddr(a) => s == a,
            Term::Daddr(a) => d == a,
            Term::Netns(n) => k.netns_ino == n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sport: u16, dport: u16) -> dctcp_flow_key {
        let mut k = dctcp_flow_key {
            sport,
            dport,
            family: libc::AF_INET as u8,
            netns_ino: 77,
            ..Default::default()
        };
        k.saddr[..4].copy_from_slice(&[198, 18, 0, 1]);
        k.daddr[..4].copy_from_slice(&[198, 19, 0, 1]);
        k
    }

    #[test]
    fn filter_terms_all_hold() {
        let f: FlowFilter = "dport=5201, saddr=198.18.0.1".parse().unwrap();
        assert!(f.matches(&key(40000, 5201)));
        assert!(!f.matches(&key(5201, 40000)));
        let f: FlowFilter = "port=5201,netns=77".parse().unwrap();
        assert!(f.matches(&key(5201, 40000)) && f.matches(&key(40000, 5201)));
        let f: FlowFilter = "addr=198.19.0.1".parse().unwrap();
        assert!(f.matches(&key(1, 2)));
        let f: FlowFilter = "daddr=198.18.0.1".parse().unwrap();
        assert!(!f.matches(&key(1, 2)));
    }

    #[test]
    fn malformed_filters_say_why() {
        for (bad, says) in [
            ("dport", "not key=value"),
            ("dport=70000", "not a port"),
            ("saddr=198.18.0", "not an IP"),
            ("proto=tcp", "unknown key `proto`"),
            ("", "empty filter"),
            ("netns=x", "namespace inode"),
        ] {
            let e = bad.parse::<FlowFilter>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn window_event_carries_fraction() {
        let e = dctcp_event {
            type_: EV_WINDOW as u8,
            flow: key(40000, 5201),
            alpha: 1 << 19,
            win_delivered: 40,
            win_delivered_ce: 10,
            ssthresh: TCP_INFINITE_SSTHRESH,
            ..Default::default()
        };
        let ev = Decoder::default().decode(&e);
        assert_eq!(ev.event, "window");
        assert_eq!(ev.fraction_marked, Some(0.25));
        assert_eq!(ev.alpha, 0.5);
        assert_eq!(ev.ssthresh, None);
        assert_eq!(&*ev.local, "198.18.0.1:40000");
        let row = ev.csv_row();
        assert_eq!(
            row.split(',').count(),
            Event::CSV_HEADER.split(',').count(),
            "{row}"
        );
        assert!(
            row.contains(",window,77,198.18.0.1:40000,198.19.0.1:5201,open,,"),
            "{row}"
        );
    }
}
