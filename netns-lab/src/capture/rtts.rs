//! Seed 004's per-round-trip view of a capture (its Figure 4), with each
//! flow's round-trip distribution, retransmissions, CE share and duplicate
//! ACKs, defined as tshark's TCP analysis defines them so that the two can
//! be held against each other (tests/capture.rs does).
//!
//! A round trip, as the seed defines it, starts when a data segment is sent
//! (a flow's first, or the first after the previous round trip ended) and
//! ends when an ACK covers that segment; it carries the bytes sent during
//! it and their rate. A flow's RTT samples are tshark's `ack_rtt`: each ACK
//! that ends exactly where a segment sent (a SYN or FIN too, a
//! retransmission too) ended, from that segment being sent.
//! A retransmission is a segment that does not advance the sequence (what
//! tshark labels retransmission, fast or spurious retransmission, or out of
//! order: one segment, four of its guesses at why); a duplicate ACK is a
//! pure ACK with the previous one's ack, window and sequence.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};

use anyhow::{bail, Result};
use serde::Serialize;

use super::pcapng::{ipv4_payload, Capture};

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
const CE: u8 = 3;
/// Segments tshark's analysis keeps unacknowledged per direction
/// (TCP_MAX_UNACKED_SEGMENTS in its packet-tcp.c).
const MAX_UNACKED: usize = 10_000;

/// One TCP segment's headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub ts_ns: u64,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Payload bytes (from the IP header's length: the capture keeps only
    /// the headers).
    pub len: u32,
    pub ecn: u8,
}

/// The TCP segment in an IPv4 packet, if it is one.
pub fn parse_segment(ip: &[u8], ts_ns: u64) -> Option<Segment> {
    if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 6 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let t = ip.get(ihl..ihl + 20)?;
    let doff = usize::from(t[12] >> 4) * 4;
    let addr = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    let word = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some(Segment {
        ts_ns,
        src: SocketAddrV4::new(addr(&ip[12..16]), port(&t[0..2])),
        dst: SocketAddrV4::new(addr(&ip[16..20]), port(&t[2..4])),
        seq: word(&t[4..8]),
        ack: word(&t[8..12]),
        flags: t[13],
        window: port(&t[14..16]),
        len: total.saturating_sub(ihl + doff) as u32,
        ecn: ip[1] & 3,
    })
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn seq_le(a: u32, b: u32) -> bool {
    a == b || seq_lt(a, b)
}

/// One round trip of a flow (a row of the seed's Figure 4).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundTrip {
    pub flow: usize,
    /// Its number within the flow, from 1.
    pub n: usize,
    /// When it ended, seconds from the flow's SYN (or first packet).
    pub end_s: f64,
    pub len_ms: f64,
    pub bytes_out: u64,
    pub rate_bps: f64,
}

/// One flow (one direction of a connection that carried data).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowRtts {
    pub flow: usize,
    pub from: String,
    pub to: String,
    pub data_packets: u64,
    pub data_bytes: u64,
    pub rtt_samples: usize,
    pub rtt_p50_ms: f64,
    pub rtt_p99_ms: f64,
    pub retransmissions: u64,
    pub ce_packets: u64,
    /// CE-marked data packets over all data packets.
    pub ce_share: f64,
    /// Duplicate ACKs the receiver sent for this flow.
    pub dup_acks: u64,
    pub round_trips: usize,
}

/// A capture point's flows and their round trips.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub interface: String,
    pub flows: Vec<FlowRtts>,
    pub round_trips: Vec<RoundTrip>,
    /// Every ack_rtt sample, ms, per flow (for the cross-check).
    #[serde(skip)]
    pub rtt_samples_ms: Vec<Vec<f64>>,
}

/// One direction of a connection: what it sent, and the ACKs it sent for
/// the other direction.
#[derive(Default)]
struct Half {
    addr: Option<(SocketAddrV4, SocketAddrV4)>,
    start_ns: u64,
    next_seq: Option<u32>,
    last_ack: Option<u32>,
    last_window: Option<u16>,
    /// Segments sent and not yet covered, oldest first: (start, end, sent
    /// at), as tshark keeps them.
    unacked: VecDeque<(u32, u32, u64)>,
    rtts_ns: Vec<u64>,
    /// The round trip under way: (started at, its first segment's end,
    /// bytes sent since).
    round: Option<(u64, u32, u64)>,
    rounds: Vec<(u64, u64, u64)>,
    data_packets: u64,
    data_bytes: u64,
    ce_packets: u64,
    retransmissions: u64,
    dup_acks_sent: u64,
}

impl Half {
    /// A segment this half sent.
    fn sent(&mut self, s: &Segment) {
        if self.addr.is_none() {
            self.addr = Some((s.src, s.dst));
        }
        let seglen = s.len + u32::from(s.flags & SYN != 0) + u32::from(s.flags & FIN != 0);
        let keepalive = s.len <= 1
            && s.flags & (SYN | FIN | RST) == 0
            && self.next_seq == Some(s.seq.wrapping_add(1));
        if seglen > 0 && s.flags & RST == 0 {
            let end = s.seq.wrapping_add(seglen);
            match self.next_seq {
                Some(next) if seq_lt(s.seq, next) => {
                    if !keepalive {
                        self.retransmissions += 1;
                    }
                }
                _ => self.next_seq = Some(end),
            }
            // Every segment, a retransmission too (its ACK times it when
            // the original never passed here: dropped upstream), a SYN or
            // FIN as data; tshark tracks at most 10,000 at once.
            if self.unacked.len() < MAX_UNACKED {
                self.unacked.push_back((s.seq, end, s.ts_ns));
            }
        } else if self.next_seq.is_none() {
            self.next_seq = Some(s.seq);
        }
        if s.len > 0 {
            self.data_packets += 1;
            self.data_bytes += u64::from(s.len);
            self.ce_packets += u64::from(s.ecn == CE);
            match &mut self.round {
                Some((_, _, bytes)) => *bytes += u64::from(s.len),
                None => self.round = Some((s.ts_ns, s.seq.wrapping_add(s.len), u64::from(s.len))),
            }
        }
    }

    /// An ACK the other half sent for this half's data.
    fn acked(&mut self, ack: u32, ts_ns: u64) {
        // A sample only from a segment that ends exactly at the ACK (the
        // oldest such, where a retransmission repeats one); a segment the
        // ACK ends inside now starts there; those it passed are done.
        let mut timed = None;
        self.unacked.retain_mut(|(start, end, sent)| {
            if *end == ack {
                timed.get_or_insert(*sent);
                false
            } else if seq_lt(*start, ack) && seq_lt(ack, *end) {
                *start = ack;
                true
            } else {
                seq_lt(ack, *end)
            }
        });
        if let Some(sent) = timed {
            self.rtts_ns.push(ts_ns.saturating_sub(sent));
        }
        if let Some((start, marker, bytes)) = self.round {
            if seq_le(marker, ack) {
                self.rounds.push((start, ts_ns, bytes));
                self.round = None;
            }
        }
    }

    /// Whether a pure ACK this half sent repeats its previous one.
    fn is_dup_ack(&self, s: &Segment) -> bool {
        s.len == 0
            && s.window != 0
            && s.flags & (SYN | FIN | RST) == 0
            && self.last_window == Some(s.window)
            && self.next_seq == Some(s.seq)
            && self.last_ack == Some(s.ack)
    }
}

/// `q` of sorted `v` by nearest rank (0 for none).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// The flows of interface `interface` of `cap`.
pub fn analyse(cap: &Capture, interface: usize) -> Result<Analysis> {
    let Some(iface) = cap.interfaces.get(interface) else {
        bail!(
            "the capture has {} interface(s); there is no interface {interface}",
            cap.interfaces.len()
        );
    };
    // Connections in order of their first packet; each has two halves,
    // 0 sent by the address that came first.
    let mut conns: Vec<[Half; 2]> = Vec::new();
    let mut index: HashMap<(SocketAddrV4, SocketAddrV4), usize> = HashMap::new();
    let mut seen_ip = false;
    for p in cap
        .packets
        .iter()
        .filter(|p| p.interface as usize == interface)
    {
        let Some(ip) = ipv4_payload(iface.linktype, &p.data) else {
            continue;
        };
        seen_ip = true;
        let Some(s) = parse_segment(ip, p.ts_ns) else {
            continue;
        };
        let (c, from_first) = match (index.get(&(s.src, s.dst)), index.get(&(s.dst, s.src))) {
            (Some(&c), _) => (c, true),
            (None, Some(&c)) => (c, false),
            (None, None) => {
                index.insert((s.src, s.dst), conns.len());
                let mut halves: [Half; 2] = Default::default();
                halves[0].start_ns = s.ts_ns;
                halves[1].start_ns = s.ts_ns;
                conns.push(halves);
                (conns.len() - 1, true)
            }
        };
        let [a, b] = &mut conns[c];
        let (me, other) = if from_first { (a, b) } else { (b, a) };
        if s.flags & SYN != 0 && s.flags & ACK == 0 {
            me.start_ns = s.ts_ns;
            other.start_ns = s.ts_ns;
        }
        if s.flags & ACK != 0 {
            if me.is_dup_ack(&s) {
                me.dup_acks_sent += 1;
            }
            other.acked(s.ack, s.ts_ns);
            me.last_ack = Some(s.ack);
        }
        me.sent(&s);
        me.last_window = Some(s.window);
    }
    if !seen_ip
        && !cap.packets.is_empty()
        && iface.linktype != super::pcapng::LINKTYPE_ETHERNET
        && iface.linktype != super::pcapng::LINKTYPE_RAW
    {
        bail!(
            "interface {} has link type {}: only Ethernet (1) and raw IP (101) are read",
            iface.name,
            iface.linktype
        );
    }
    let mut out = Analysis {
        interface: iface.name.clone(),
        flows: Vec::new(),
        round_trips: Vec::new(),
        rtt_samples_ms: Vec::new(),
    };
    for [a, b] in conns {
        for (h, acker) in [(&a, &b), (&b, &a)] {
            if h.data_bytes == 0 {
                continue;
            }
            let flow = out.flows.len();
            let mut ms: Vec<f64> = h.rtts_ns.iter().map(|&n| n as f64 / 1e6).collect();
            ms.sort_by(f64::total_cmp);
            let (from, to) = h
                .addr
                .map(|(f, t)| (f.to_string(), t.to_string()))
                .unwrap_or_default();
            for (n, &(start, end, bytes)) in h.rounds.iter().enumerate() {
                let secs = (end - start) as f64 / 1e9;
                out.round_trips.push(RoundTrip {
                    flow,
                    n: n + 1,
                    end_s: end.saturating_sub(h.start_ns) as f64 / 1e9,
                    len_ms: secs * 1e3,
                    bytes_out: bytes,
                    rate_bps: if secs > 0.0 {
                        bytes as f64 * 8.0 / secs
                    } else {
                        0.0
                    },
                });
            }
            out.flows.push(FlowRtts {
                flow,
                from,
                to,
                data_packets: h.data_packets,
                data_bytes: h.data_bytes,
                rtt_samples: ms.len(),
                rtt_p50_ms: quantile(&ms, 0.5),
                rtt_p99_ms: quantile(&ms, 0.99),
                retransmissions: h.retransmissions,
                ce_packets: h.ce_packets,
                ce_share: h.ce_packets as f64 / h.data_packets.max(1) as f64,
                dup_acks: acker.dup_acks_sent,
                round_trips: h.rounds.len(),
            });
            out.rtt_samples_ms.push(ms);
        }
    }
    Ok(out)
}

/// A duration the way the seed prints one: `1.3ms`, `40us`.
fn short_duration(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{:.0}us", ms * 1e3)
    }
}

fn short_bytes(b: u64) -> String {
    if b >= 1_000_000 {
        format!("{:.1}MB", b as f64 / 1e6)
    } else {
        format!("{:.1}KB", b as f64 / 1e3)
    }
}

fn short_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbps", bps / 1e9)
    } else {
        format!("{:.2} Mbps", bps / 1e6)
    }
}

impl Analysis {
    /// The flows' table, then up to `rounds` round trips of each flow (of
    /// `only`, if given) as the seed's Figure 4 lists them.
    pub fn render(&self, rounds: usize, only: Option<usize>) -> String {
        let mut s = format!(
            "Flows at {} (RTT: tshark's ack_rtt, from a segment to the ACK that ends where it ends)\n\n\
             | flow | from | to | data packets | MB | RTT p50 ms | RTT p99 ms | RTT samples | \
             retransmissions | CE share | dup ACKs | round trips |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
            self.interface
        );
        for f in &self.flows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {} | {} | {:.3} | {} | {} |",
                f.flow + 1,
                f.from,
                f.to,
                f.data_packets,
                f.data_bytes as f64 / 1e6,
                f.rtt_p50_ms,
                f.rtt_p99_ms,
                f.rtt_samples,
                f.retransmissions,
                f.ce_share,
                f.dup_acks,
                f.round_trips
            );
        }
        for f in self
            .flows
            .iter()
            .filter(|f| only.is_none_or(|o| o == f.flow))
        {
            let _ = writeln!(
                s,
                "\nRound trips of flow {} ({} -> {}), the first {}:\n```",
                f.flow + 1,
                f.from,
                f.to,
                rounds.min(f.round_trips)
            );
            for r in self
                .round_trips
                .iter()
                .filter(|r| r.flow == f.flow)
                .take(rounds)
            {
                let _ = writeln!(
                    s,
                    "RTT {}.{}\t{:.6}({:>7})\tout: {:>7}\trate: {:>12}",
                    r.flow + 1,
                    r.n,
                    r.end_s,
                    short_duration(r.len_ms),
                    short_bytes(r.bytes_out),
                    short_rate(r.rate_bps)
                );
            }
            s.push_str("```\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "198.18.0.1:40000";
    const B: &str = "198.19.0.1:5201";

    /// An Ethernet frame with an IPv4 TCP segment: `len` payload bytes (not
    /// captured), ECN `ecn`.
    #[allow(clippy::too_many_arguments)]
    fn frame(
        from: &str,
        to: &str,
        seq: u32,
        ack: u32,
        flags: u8,
        len: u16,
        ecn: u8,
        win: u16,
    ) -> Vec<u8> {
        let (f, t): (SocketAddrV4, SocketAddrV4) = (from.parse().unwrap(), to.parse().unwrap());
        let mut b = vec![0u8; 14];
        b[12] = 0x08;
        let mut ip = vec![0x45, ecn, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0];
        ip[2..4].copy_from_slice(&(40 + len).to_be_bytes());
        ip.extend_from_slice(&f.ip().octets());
        ip.extend_from_slice(&t.ip().octets());
        ip.extend_from_slice(&f.port().to_be_bytes());
        ip.extend_from_slice(&t.port().to_be_bytes());
        ip.extend_from_slice(&seq.to_be_bytes());
        ip.extend_from_slice(&ack.to_be_bytes());
        ip.extend_from_slice(&[0x50, flags]);
        ip.extend_from_slice(&win.to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&ip);
        b
    }

    fn capture(frames: Vec<(u64, Vec<u8>)>) -> Capture {
        capture_as(frames, crate::capture::pcapng::LINKTYPE_ETHERNET)
    }

    /// The frames written by the lab's writer, its interface then given
    /// link type `lt` (the field right after the section header's block).
    fn capture_as(frames: Vec<(u64, Vec<u8>)>, lt: u16) -> Capture {
        use crate::capture::pcapng::{read, Direction, Interface, Writer};
        let iface = Interface {
            name: "b0".into(),
            description: String::new(),
            snaplen: 128,
        };
        let mut w = Writer::new(Vec::new(), "", &[iface]).unwrap();
        for (ts, f) in &frames {
            w.packet(0, *ts, f.len() as u32, f, Direction::Outbound)
                .unwrap();
        }
        let mut b = w.finish().unwrap();
        let shb = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
        b[shb + 8..shb + 10].copy_from_slice(&lt.to_le_bytes());
        read(&b).unwrap()
    }

    /// A handshake, then segments of 1000 bytes as the script says; ACKs
    /// from the receiver; times in ms.
    #[test]
    fn round_trips_rtts_retransmissions_and_dup_acks_are_counted_as_defined() {
        let ms = |t: f64| (t * 1e6) as u64;
        let d = |t: f64, seq: u32, ecn: u8| (ms(t), frame(A, B, seq, 1, ACK, 1000, ecn, 500));
        let a = |t: f64, ack: u32| (ms(t), frame(B, A, 1, ack, ACK, 0, 0, 300));
        let frames = vec![
            (ms(0.0), frame(A, B, 0, 0, SYN, 0, 0, 500)),
            (ms(1.0), frame(B, A, 0, 1, SYN | ACK, 0, 0, 300)),
            (ms(2.0), frame(A, B, 1, 1, ACK, 0, 0, 500)),
            // Round 1: two segments, the first CE; ACKed 10 ms on.
            d(3.0, 1, CE),
            d(3.5, 1001, 2),
            a(13.0, 1001), // covers the first: ends round 1, RTT 10 ms
            // Round 2 starts with the next segment sent.
            d(13.5, 2001, 2),
            a(14.0, 2001),    // RTT from 3.5: 10.5 ms; round 2 not covered yet
            a(14.5, 2001),    // a duplicate ACK
            a(15.0, 2001),    // another
            d(15.5, 2001, 2), // retransmission of 2001
            a(25.5, 3001),    // ends round 2 (12 ms), RTT from 13.5: 12 ms
        ];
        let r = analyse(&capture(frames), 0).unwrap();
        assert_eq!(r.flows.len(), 1, "the ACK-only direction is no flow");
        let f = &r.flows[0];
        assert_eq!((f.from.as_str(), f.to.as_str()), (A, B));
        assert_eq!((f.data_packets, f.data_bytes, f.ce_packets), (4, 4000, 1));
        assert_eq!((f.retransmissions, f.dup_acks), (1, 2));
        // The SYN's (1 ms), then the data's.
        assert_eq!(r.rtt_samples_ms[0], vec![1.0, 10.0, 10.5, 12.0]);
        assert_eq!((f.rtt_p50_ms, f.rtt_p99_ms), (10.0, 12.0));
        assert_eq!(f.round_trips, 2);
        let r1 = &r.round_trips[0];
        assert_eq!((r1.n, r1.bytes_out), (1, 2000));
        assert!(
            (r1.len_ms - 10.0).abs() < 1e-9 && (r1.end_s - 0.013).abs() < 1e-12,
            "{r1:?}"
        );
        assert!((r1.rate_bps - 1.6e6).abs() < 1e-3);
        let r2 = &r.round_trips[1];
        assert_eq!((r2.n, r2.bytes_out), (2, 2000));
        assert!((r2.len_ms - 12.0).abs() < 1e-9, "{r2:?}");
        let text = r.render(10, None);
        assert!(
            text.contains("RTT 1.2\t0.025500( 12.0ms)\tout:   2.0KB"),
            "{text}"
        );
    }

    #[test]
    fn keepalives_and_window_updates_are_neither_retransmissions_nor_dup_acks() {
        let ms = |t: f64| (t * 1e6) as u64;
        let frames = vec![
            (ms(0.0), frame(A, B, 1, 1, ACK, 1000, 0, 500)),
            (ms(1.0), frame(B, A, 1, 1001, ACK, 0, 0, 300)),
            // Keep-alives one byte below the next sequence, without data
            // and with one byte (Linux sends either).
            (ms(2.0), frame(A, B, 1000, 1, ACK, 0, 0, 500)),
            (ms(2.5), frame(A, B, 1000, 1, ACK, 1, 0, 500)),
            // The same ack, a new window: a window update.
            (ms(3.0), frame(B, A, 1, 1001, ACK, 0, 0, 400)),
            // A zero window is never a duplicate ACK.
            (ms(4.0), frame(B, A, 1, 1001, ACK, 0, 0, 0)),
            (ms(5.0), frame(B, A, 1, 1001, ACK, 0, 0, 0)),
            // Back to 400, then the receiver's FIN with the same ack and
            // window: a FIN is no duplicate ACK.
            (ms(6.0), frame(B, A, 1, 1001, ACK, 0, 0, 400)),
            (ms(7.0), frame(B, A, 1, 1001, ACK | FIN, 0, 0, 400)),
        ];
        let r = analyse(&capture(frames), 0).unwrap();
        assert_eq!((r.flows[0].retransmissions, r.flows[0].dup_acks), (0, 0));
        // What only looks like one is a retransmission: a segment from one
        // byte below that carries more than a byte, one from further back,
        // a FIN sent again.
        let frames = vec![
            (ms(0.0), frame(A, B, 1, 1, ACK, 1000, 0, 500)),
            (ms(1.0), frame(A, B, 1000, 1, ACK, 500, 0, 500)),
            (ms(1.5), frame(A, B, 900, 1, ACK, 100, 0, 500)),
            (ms(2.0), frame(A, B, 1001, 1, ACK | FIN, 0, 0, 500)),
            (ms(3.0), frame(A, B, 1001, 1, ACK | FIN, 0, 0, 500)),
        ];
        let r = analyse(&capture(frames), 0).unwrap();
        assert_eq!(r.flows[0].retransmissions, 3);
    }

    /// What tshark does not time: a pure ACK (it covers no sequence), a
    /// segment an old ACK arriving late ends at, and segments past the
    /// 10,000 it keeps; what it does: a FIN.
    #[test]
    fn only_segments_tshark_would_time_give_samples() {
        let ms = |t: f64| (t * 1e6) as u64;
        let frames = vec![
            (ms(0.0), frame(A, B, 1, 1, ACK, 1000, 0, 500)),
            (ms(1.0), frame(A, B, 1001, 1, ACK, 1000, 0, 500)),
            // Covers both: one sample, from the second (1 ms).
            (ms(2.0), frame(B, A, 1, 2001, ACK, 0, 0, 300)),
            // Reordered: an older ACK ends where the first segment ended.
            (ms(2.1), frame(B, A, 1, 1001, ACK, 0, 0, 300)),
            // A pure ACK from the sender, then the receiver's ACK at
            // exactly its sequence (a window update): nothing to time.
            (ms(3.0), frame(A, B, 2001, 1, ACK, 0, 0, 500)),
            (ms(4.0), frame(B, A, 1, 2001, ACK, 0, 0, 350)),
            // The sender's FIN, acknowledged 5 ms later: a sample.
            (ms(5.0), frame(A, B, 2001, 1, ACK | FIN, 0, 0, 500)),
            (ms(10.0), frame(B, A, 1, 2002, ACK, 0, 0, 350)),
        ];
        let r = analyse(&capture(frames), 0).unwrap();
        assert_eq!(r.rtt_samples_ms[0], vec![1.0, 5.0]);
        // 10,000 segments unacknowledged, then one more: the ACK that ends
        // exactly at the last is no sample (it was never kept), the one at
        // the 10,000th is.
        let mut frames: Vec<(u64, Vec<u8>)> = (0..=MAX_UNACKED as u32)
            .map(|i| {
                (
                    u64::from(i) * 1000,
                    frame(A, B, 1 + i * 10, 1, ACK, 10, 0, 500),
                )
            })
            .collect();
        let last_end = 1 + (MAX_UNACKED as u32 + 1) * 10;
        frames.push((20_000_000, frame(B, A, 1, last_end - 10, ACK, 0, 0, 300)));
        frames.push((21_000_000, frame(B, A, 1, last_end, ACK, 0, 0, 300)));
        let r = analyse(&capture(frames), 0).unwrap();
        assert_eq!(r.rtt_samples_ms[0].len(), 1, "{:?}", r.rtt_samples_ms[0]);
    }

    /// A SYN sent again restarts the connection's clock; a packet without
    /// ACK (a stray from the receiver) neither restarts it nor acknowledges;
    /// the CE share is over the data packets; a round trip of no length
    /// has no rate.
    #[test]
    fn the_clock_starts_at_the_last_syn_and_only_acks_acknowledge() {
        let ms = |t: f64| (t * 1e6) as u64;
        let d = |t: f64, seq: u32, ecn: u8| (ms(t), frame(A, B, seq, 1, ACK, 1000, ecn, 500));
        let a = |t: f64, ack: u32| (ms(t), frame(B, A, 1, ack, ACK, 0, 0, 300));
        let frames = vec![
            (ms(0.0), frame(A, B, 0, 0, SYN, 0, 0, 500)),
            (ms(1000.0), frame(A, B, 0, 0, SYN, 0, 0, 500)),
            (ms(1001.0), frame(B, A, 0, 1, SYN | ACK, 0, 0, 300)),
            (ms(1002.0), frame(A, B, 1, 1, ACK, 0, 0, 500)),
            d(1003.0, 1, CE),
            d(1003.5, 1001, 2),
            (ms(1004.0), frame(B, A, 1, 2001, 0, 0, 0, 300)),
            a(1013.0, 2001),
            d(1020.0, 2001, 2),
            a(1020.0, 3001),
        ];
        let r = analyse(&capture(frames), 0).unwrap();
        let f = &r.flows[0];
        // The stray is no duplicate of the ACK after it: it acknowledged nothing.
        assert_eq!((f.dup_acks, f.retransmissions), (0, 1));
        assert_eq!((f.data_packets, f.ce_packets), (3, 1));
        assert!((f.ce_share - 1.0 / 3.0).abs() < 1e-12, "{f:?}");
        // From the SYN sent again: round 1 ends 13 ms on.
        let (r1, r2) = (&r.round_trips[0], &r.round_trips[1]);
        assert!((r1.end_s - 0.013).abs() < 1e-12, "{r1:?}");
        assert_eq!((r2.len_ms, r2.rate_bps), (0.0, 0.0));
        // The SYN-ACK timed from the first SYN (tshark's oldest match).
        assert_eq!(r.rtt_samples_ms[0], vec![0.0, 9.5, 1001.0]);
    }

    /// Only TCP over IPv4 is a segment; a packet too short for the header
    /// is none either.
    #[test]
    fn only_tcp_over_ipv4_is_a_segment() {
        let tcp = frame("198.18.0.2:5201", "198.18.1.2:40000", 1, 2, ACK, 100, 0, 9)[14..].to_vec();
        let s = parse_segment(&tcp, 7).unwrap();
        assert_eq!((s.seq, s.ack, s.len, s.window), (1, 2, 100, 9));
        let mut udp = tcp.clone();
        udp[9] = 17;
        assert!(parse_segment(&udp, 7).is_none());
        let mut v6 = tcp.clone();
        v6[0] = 0x65;
        assert!(parse_segment(&v6, 7).is_none());
        assert!(parse_segment(&tcp[..5], 7).is_none());
        assert!(parse_segment(&tcp[..30], 7).is_none());
    }

    #[test]
    fn sequence_numbers_wrap() {
        assert!(seq_lt(u32::MAX - 5, 10));
        assert!(!seq_lt(10, u32::MAX - 5));
        assert!(seq_le(7, 7));
    }

    #[test]
    fn other_link_types_are_read_as_ip_or_refused_by_name() {
        let ip = |seq: u32| frame(A, B, seq, 1, ACK, 1000, 2, 500)[14..].to_vec();
        // IPv4 without a link header (LINKTYPE_IPV4): read.
        let r = analyse(&capture_as(vec![(1, ip(1)), (2, ip(1001))], 228), 0).unwrap();
        assert_eq!(r.flows[0].data_packets, 2);
        // 802.11 frames: refused, saying which link types are read.
        let e = analyse(&capture_as(vec![(1, ip(1))], 105), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("link type 105"), "{e}");
        // An empty capture of any link type: nothing in it.
        let r = analyse(&capture_as(vec![], 105), 0).unwrap();
        assert!(r.flows.is_empty());
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = analyse(&Capture::default(), 2).unwrap_err().to_string();
        assert!(e.contains("no interface 2"), "{e}");
    }
}
