//! One run of bulk flows through the star's bottleneck, measured: the queue
//! at every arrival, what the qdisc sent, dropped and marked, what the
//! receiver got and how much of it was CE.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use dctcp_utils::clock::monotonic_ns;
use serde::{Deserialize, Serialize};
use tc_qdisc::intf::{marker_stats, queue_sample};
use tc_qdisc::qdisc_stats::{self, QdiscCounters};
use tc_qdisc::{Bottleneck, BpfSwitch, RxFlow};

use crate::measure::cctrace::{CcTrace, Recorder, TraceCheck};
use crate::measure::cpu::Cpu;
use crate::net::delay::{RoundTrip, RttMeasured};
use crate::net::link_faults::{FaultArgs, FaultReport, Faults};
use crate::net::rate_schedule::{capacity_bits, AppliedRate, RateSchedule};
use crate::net::topology::{Star, StarSpec};
use crate::report::tables::Repairs;
use crate::stats::{summarize, weighted_summary, Summary};
use crate::traffic::bulk::{run_bulk, FlowResult, FlowSpec};
use crate::traffic::shortflows::{FctSummary, ShortFlow, ShortFlowSpec, ShortFlows, SHORT_PORT};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Scenario {
    pub label: String,
    pub bottleneck: Bottleneck,
    pub flows: Vec<FlowSpec>,
    pub duration: Duration,
    /// Measurements start after this much time (slow start, convergence).
    pub warmup: Duration,
    /// Round trip added on the ACK path, if any.
    pub round_trip: Option<RoundTrip>,
    /// Rate of each sender's link, if shaped (`StarSpec::access_rate_bps`).
    pub access_rate_bps: Option<u64>,
    /// Received-bytes sampling interval.
    pub interval: Duration,
    /// A BPF algorithm of the flows to record live (cwnd, alpha, states).
    pub trace_algorithm: Option<String>,
    /// Short flows arriving at random beside the long ones: one generator
    /// per entry (a class of its own: sender and algorithm), each served
    /// on a port of its own.
    pub short_flows: Vec<ShortFlowSpec>,
    /// Each receiver's window cap (TCP_WINDOW_CLAMP), bytes: how much the
    /// long flows can ever have in flight.
    pub rwnd_clamp_bytes: Option<u32>,
    /// Senders whose TCP neither asks for nor accepts ECN (tcp_ecn = 0):
    /// seed 002's Reno, whose packets leave Not-ECT. An algorithm that
    /// needs ECN (bpf_dctcp) still asks for it on such a sender.
    pub no_ecn_senders: Vec<usize>,
    /// Faults between the switch and the receiver.
    pub faults: FaultArgs,
    /// The bottleneck's rate over the run (empty: `bottleneck.rate_bps`
    /// throughout; an entry at 0 s sets the rate it starts at).
    pub rate_schedule: RateSchedule,
}

/// A receiver's window cap, packets (`Scenario::rwnd_clamp_bytes` in
/// segments): `times` what one of its flows may need, at least `floor`.
/// Each experiment caps its receivers so, naming what a flow needs there:
/// a window the kernel issue (README "Known issue") corrupts can then burst
/// at most this into the queue.
pub fn window_cap_pkts(need_pkts: f64, times: f64, floor: u32) -> u32 {
    ((times * need_pkts).ceil() as u32).max(floor)
}

impl Scenario {
    /// `flows` long flows of `cc`, one per sender, through `bottleneck`: no
    /// extra delay, no trace, no short flows.
    pub fn long_flows(
        label: &str,
        bottleneck: Bottleneck,
        flows: usize,
        cc: &str,
        duration: Duration,
        warmup: Duration,
    ) -> Scenario {
        Scenario {
            label: label.to_string(),
            bottleneck,
            flows: (0..flows)
                .map(|sender| FlowSpec::long(sender, cc))
                .collect(),
            duration,
            warmup,
            round_trip: None,
            access_rate_bps: None,
            interval: Duration::from_millis(100),
            trace_algorithm: None,
            short_flows: Vec::new(),
            rwnd_clamp_bytes: None,
            no_ecn_senders: Vec::new(),
            faults: FaultArgs::default(),
            rate_schedule: RateSchedule::default(),
        }
    }
}

/// Whether the probe and the qdisc tell the same story.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeCheck {
    /// Arrivals the probe saw that reached the qdisc (not dropped by BPF).
    pub probe_enqueued: u64,
    /// What the qdisc accounts for: sent + dropped + still queued at the end.
    pub qdisc_accounted: u64,
    pub probe_taildrops: u64,
    pub qdisc_drops: u64,
    /// Packets the departure probe saw leave the root qdisc (0 when arrivals
    /// were sampled and departures not recorded), beside the qdisc's sent count.
    pub probe_departed: u64,
    pub qdisc_sent: u64,
    /// Runs of the departure probe the kernel skipped, the probe already
    /// running on that CPU (0 without departures).
    pub departure_misses: u64,
    /// The window's departures counted both ways (None without departures
    /// or with arrivals lost to a full ring): the utilization's count.
    pub window_departed: Option<WindowDepartures>,
    /// Marks made (BPF marker, or the qdisc's own count).
    pub marks: u64,
    /// CE packets the receiver saw.
    pub receiver_ce: u64,
}

/// Packets that left the queue from the window's first arrival to the one
/// after its end, counted from the arrivals and from the dequeue tracepoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WindowDepartures {
    pub span_ns: u64,
    pub by_arrivals: u64,
    pub by_tracepoint: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Outcome {
    pub label: String,
    /// The link's rate at the start (the rate schedule's, if it has one at 0 s).
    pub rate_bps: u64,
    /// The rate schedule's changes as applied (empty without one).
    pub rate_changes: Vec<AppliedRate>,
    pub window_s: f64,
    /// Queue length (packets) found by each arrival in the window.
    pub queue: Summary,
    pub queue_empty_fraction: f64,
    /// Queue length weighted by the time it held, rebuilt from every arrival
    /// and departure: what a switch sampling its queue periodically reports
    /// (the reference traces did). None when arrivals were sampled.
    pub queue_over_time: Option<Summary>,
    pub queue_over_time_empty_fraction: Option<f64>,
    /// Bottleneck bytes sent / capacity over the window.
    pub utilization: f64,
    pub drops: u64,
    pub marks: u64,
    /// Fraction of data packets arriving CE-marked at the receiver.
    pub ce_fraction: f64,
    /// Goodput per flow over the window, bit/s.
    pub goodput_bps: Vec<f64>,
    pub flows: Vec<FlowResult>,
    pub rx: Vec<RxFlow>,
    pub marker: MarkerCounts,
    pub probe_check: ProbeCheck,
    /// ssthresh and cwnd values repaired and transmissions held by bpf_dctcp's
    /// guard during the run (README "Known issue"); filled by the experiment.
    pub guard_repairs: Repairs,
    /// The last impossible ssthresh and cwnd those repairs found, as found
    /// (0: none in this run), so a run anywhere reports the value itself.
    pub guard_found: (u64, u64),
    /// The recorded stream beside the receiver's counts (traced runs only).
    pub trace_check: Option<TraceCheck>,
    /// Completion times of the short flows, per generator of the
    /// scenario's (none without short flows).
    pub short_fct: Vec<FctSummary>,
    /// Share of all CPUs the machine spent in irq and softirq over the
    /// window: near 1, the lab measures its host, not the network.
    pub softirq_share: f64,
    /// Share of the lab's CPUs' time the hypervisor took over the window
    /// (steal): while it does, the emulated link, the switch and the hosts
    /// all stand still, and the link's capacity is lost for good. A figure
    /// that needs the CPU (utilization, goodput) is the platform's beside
    /// a large one.
    pub steal_share: f64,
    /// The round trip the flows really had, beside the configured one.
    pub rtt: RttMeasured,
    /// htb's hysteresis mode during the run (on unless `lab --no-htb-hysteresis`).
    pub htb_hysteresis: Option<bool>,
    /// DualPI2's two queues over the window (bpf-dualpi2 only).
    pub dualpi2: Option<tc_qdisc::dualpi2::Dualpi2Window>,
    /// The ECN feedback the hosts negotiated (`lab --ecn`).
    pub ecn_feedback: crate::net::ecn::EcnFeedback,
    /// The receivers' window cap, bytes, if the scenario set one.
    pub rwnd_clamp_bytes: Option<u32>,
    /// What the faults did, if the scenario had any.
    pub faults: Option<FaultReport>,
}

impl Outcome {
    /// The largest share of a long flow's busy time its receiver's window
    /// held it back (tcp_info), or None if no flow was ever busy.
    pub fn rwnd_limited_share(&self) -> Option<f64> {
        self.flows
            .iter()
            .filter(|f| f.info.busy_us > 0)
            .map(|f| f.info.rwnd_limited_us as f64 / f.info.busy_us as f64)
            .reduce(f64::max)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MarkerCounts {
    pub pkts: u64,
    pub marked: u64,
    pub dropped: u64,
    pub taildrop: u64,
    pub ring_full: u64,
    pub departures_lost: u64,
    /// Per class of arrival: ECN-capable, and not.
    pub ect: ClassCounts,
    pub not_ect: ClassCounts,
}

/// What the marker did to one class of arrivals (`struct class_counts`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct ClassCounts {
    pub pkts: u64,
    pub marked: u64,
    pub dropped: u64,
    pub taildrop: u64,
}

impl From<tc_qdisc::intf::class_counts> for ClassCounts {
    fn from(c: tc_qdisc::intf::class_counts) -> Self {
        ClassCounts {
            pkts: c.pkts,
            marked: c.marked,
            dropped: c.dropped,
            taildrop: c.taildrop,
        }
    }
}

impl From<marker_stats> for MarkerCounts {
    fn from(s: marker_stats) -> Self {
        MarkerCounts {
            pkts: s.pkts,
            marked: s.marked,
            dropped: s.dropped,
            taildrop: s.taildrop,
            ring_full: s.ring_full,
            departures_lost: s.departures_lost,
            ect: s.ect.into(),
            not_ect: s.not_ect.into(),
        }
    }
}

/// Everything a run measured (`Default`: an empty run, for the analyses'
/// unit tests to fill in).
#[derive(Default)]
pub struct RunData {
    pub outcome: Outcome,
    /// The probe's samples of the measurement window.
    pub samples: Vec<queue_sample>,
    /// The queue over the measurement window, `(packets, seconds held)`
    /// from its start (`window_start_ns`, the probes' clock), rebuilt from
    /// every arrival and departure; empty when departures were not recorded.
    pub queue_steps: Vec<(u32, f64)>,
    pub window_start_ns: u64,
    /// The recorded stream of `trace_algorithm`, whole run.
    pub cc_trace: Option<CcTrace>,
    /// Every short flow of the run, per generator.
    pub short: Vec<Vec<ShortFlow>>,
    /// What `lab --pcap` wrote of the run.
    pub capture: Option<crate::capture::CaptureReport>,
}

/// Runs the scenario on a fresh star and tears it down.
pub fn run(
    scn: &Scenario,
    stop: &Arc<AtomicBool>,
    mut progress: impl FnMut(Duration),
) -> Result<RunData> {
    scn.rate_schedule.validate()?;
    let bottleneck = scn
        .bottleneck
        .at_rate(scn.rate_schedule.initial(scn.bottleneck.rate_bps));
    bottleneck.validate()?;
    let senders = scn
        .flows
        .iter()
        .map(|f| f.sender + 1)
        .chain(scn.short_flows.iter().map(|s| s.sender + 1))
        .max()
        .unwrap_or(1);
    for s in &scn.short_flows {
        s.validate()?;
    }
    let mut star = Star::build(&StarSpec {
        senders,
        round_trip: scn.round_trip.clone(),
        access_rate_bps: scn.access_rate_bps,
    })?;
    star.ecn_everywhere()?;
    let _ect1 = ect1_on_senders(&star, scn)?;
    for &i in &scn.no_ecn_senders {
        star.senders
            .get(i)
            .with_context(|| format!("no sender {i} to turn ECN off on"))?
            .ns
            .sysctl("net.ipv4.tcp_ecn", "0")?;
    }
    bottleneck.install(star.switch.name(), &star.bottleneck_if)?;
    let cfg = bottleneck.backend.marker_config(bottleneck.buffer_pkts, 1);
    let mut switch = BpfSwitch::start(
        Some(&std::path::Path::new(dctcp_utils::bpffs::LAB_ROOT).join(star.prefix.as_str())),
        cfg,
        bottleneck.rate_bps,
        true,
        &star.switch.path(),
        &star.bottleneck_if,
        &star.receiver.ns.path(),
        &star.receiver.ifname,
    )?;
    // After the switch: ahead of its receiver counter, which then counts
    // what the faults let through.
    let faults = (!scn.faults.is_none())
        .then(|| Faults::install(&star, &scn.faults, bottleneck.rate_bps))
        .transpose()?;

    let ns = star.switch.name().to_string();
    let dev = star.bottleneck_if.clone();
    let mut at_warmup: Option<(u64, QdiscCounters, marker_stats, Cpu)> = None;
    let mut dualpi2_at_warmup = None;
    let mut at_end: Option<(u64, QdiscCounters, Cpu)> = None;
    let mut pending_rates = scn.rate_schedule.changes().peekable();
    let mut rate_changes = Vec::new();
    let recorder = scn
        .trace_algorithm
        .as_deref()
        .map(|a| Recorder::start(a, bottleneck.rate_bps))
        .transpose()?;
    // `lab --pcap`: open before the first packet of the run.
    let capture = crate::capture::Capture::start(&star)?;
    let short = scn
        .short_flows
        .iter()
        .enumerate()
        .map(|(i, s)| ShortFlows::start(&star, s, SHORT_PORT + i as u16, scn.duration, stop))
        .collect::<Result<Vec<_>>>()?;
    let flows = run_bulk(
        &star,
        &scn.flows,
        scn.rwnd_clamp_bytes,
        scn.duration,
        scn.interval,
        stop,
        |t| {
            // A rate change at the first tick at or after its time: htb's
            // classes, then the switch's figure, stamped after both.
            while let Some(step) = pending_rates.next_if(|s| s.at <= t) {
                bottleneck.set_rate(&ns, &dev, step.rate_bps)?;
                switch.set_rate(step.rate_bps)?;
                rate_changes.push(AppliedRate {
                    ns: monotonic_ns(),
                    rate_bps: step.rate_bps,
                });
            }
            // The window is stamped at the ticks themselves. The qdisc's
            // counters read with it come through `tc`, which a slow machine
            // (the VM tier) takes half a second to answer, so figures that
            // need them exact use the probes' kernel timestamps instead.
            if at_warmup.is_none() && t >= scn.warmup {
                at_warmup = Some((
                    monotonic_ns(),
                    qdisc_stats::read(&ns, &dev)?,
                    switch.stats()?,
                    Cpu::now()?,
                ));
                dualpi2_at_warmup = switch.dualpi2_stats()?;
            }
            // The senders stop writing at the deadline, so the last tick
            // closes the window; after it come the drain and the teardown
            // (joins, the trace), idle time a slow machine stretches.
            if at_end.is_none() && t + scn.interval / 2 >= scn.duration {
                at_end = Some((monotonic_ns(), qdisc_stats::read(&ns, &dev)?, Cpu::now()?));
            }
            progress(t);
            Ok(())
        },
    )?;
    let at_end = match at_end {
        Some(e) => e,
        // Stopped early (Ctrl-C): the window ends now.
        None => (monotonic_ns(), qdisc_stats::read(&ns, &dev)?, Cpu::now()?),
    };
    let (end_ns, end_cpu) = (at_end.0, at_end.2);
    let short = short
        .into_iter()
        .map(ShortFlows::finish)
        .collect::<Result<Vec<_>>>()?;
    let cc_trace = recorder.map(Recorder::finish).transpose()?;
    let capture = capture.map(crate::capture::Capture::finish).transpose()?;
    let end_q = qdisc_stats::read(&ns, &dev)?;
    let end_m = switch.stats()?;
    let dualpi2 = dualpi2_at_warmup
        .zip(switch.dualpi2_stats()?)
        .map(|(a, b)| tc_qdisc::dualpi2::Dualpi2Window::between(&a, &b));
    let departure_misses = switch.departure_misses()?.unwrap_or(0);
    let trace = switch.take_trace()?;
    let faults = faults.map(Faults::finish).transpose()?;
    // Once the faults' detour has stopped, so that the receiver has counted
    // all it will of what they let through.
    let rx = switch.rx_flows()?;
    drop(switch);
    let element = star.stop_delay()?;
    let rtt = star.rtt_measured(
        scn.round_trip.as_ref(),
        flows.iter().map(|f| (f.sender, f.info.min_rtt_us)),
        element,
    );
    drop(star);

    let (t0, q0, m0, cpu0) = at_warmup.unwrap_or_default();
    let window_s = (end_ns.saturating_sub(t0)) as f64 / 1e9;
    let used = end_cpu.since(cpu0);
    let softirq_share = used.softirq_share(window_s);
    let steal_share = used.steal_share(window_s);
    let queue_steps = trace.over_time(t0, end_ns);
    let over_time = queue_steps.as_ref().map(|steps| {
        let pairs: Vec<(f64, f64)> = steps.iter().map(|&(q, s)| (f64::from(q), s)).collect();
        let held: f64 = steps.iter().map(|s| s.1).sum();
        let empty: f64 = steps.iter().filter(|s| s.0 == 0).map(|s| s.1).sum();
        // (A sum of no steps is -0.0.)
        let empty = if empty > 0.0 { empty / held } else { 0.0 };
        (weighted_summary(&pairs), empty)
    });
    // What left the queue in the window, from the probe where it recorded
    // every arrival: its timestamps are the kernel's, where the qdisc's byte
    // counter is read through `tc` some time after the tick (a share of a
    // short window in the VM tier). Counted from the arrivals, which it sees
    // all of (unless its ring overflowed), not from the dequeue tracepoint,
    // which on 6.18 skips some bulk dequeues; the two counts go to
    // `probe_check`. Lab data packets are full size, so packets x wire size
    // is the bytes sent.
    let span = (!trace.departures.is_empty() && end_m.ring_full == 0)
        .then(|| trace.arrival_span(t0, end_ns))
        .flatten();
    let window_departed = span.clone().map(|span| {
        let (from, to) = (
            trace.samples[span.start].ts_ns,
            trace.samples[span.end].ts_ns,
        );
        WindowDepartures {
            span_ns: to - from,
            by_arrivals: trace.departed_by_arrivals(span, at_end.1.drops - q0.drops),
            by_tracepoint: trace.departed_between(from, to).unwrap_or(0),
        }
    });
    // What was sent, and over which span of the probes' clock.
    let (sent, sent_from, sent_to) = match (&window_departed, &span) {
        (Some(w), Some(span)) if w.span_ns > 0 => {
            let from = trace.samples[span.start].ts_ns;
            (
                w.by_arrivals * u64::from(tc_qdisc::backend::PKT_BYTES),
                from,
                from + w.span_ns,
            )
        }
        _ => (at_end.1.sent_bytes - q0.sent_bytes, t0, end_ns),
    };
    let samples: Vec<queue_sample> = trace
        .samples
        .into_iter()
        .filter(|s| s.ts_ns >= t0 && s.ts_ns <= end_ns)
        .collect();
    let qlens: Vec<f64> = samples.iter().map(|s| f64::from(s.qlen)).collect();
    let empty = qlens.iter().filter(|&&q| q == 0.0).count() as f64 / qlens.len().max(1) as f64;
    // The link's capacity over that span, at each rate it ran at.
    let capacity = capacity_bits(bottleneck.rate_bps, &rate_changes, sent_from, sent_to);
    let utilization = sent as f64 * 8.0 / capacity;
    let bpf_marks = end_m.marked - m0.marked;
    let qdisc_marks = end_q.marks - q0.marks;
    let held_limit = scn.bottleneck.backend.marker_holds_limit();
    let drops = (end_q.drops - q0.drops)
        + (end_m.dropped - m0.dropped)
        + if held_limit {
            end_m.taildrop - m0.taildrop
        } else {
            0
        };
    let skip = (scn.warmup.as_secs_f64() / scn.interval.as_secs_f64()).round() as usize;
    let goodput_bps = flows
        .iter()
        .map(|f| {
            let from = skip.min(f.series.len());
            let bytes: u64 = f.series[from..].iter().sum();
            let t0 = from.checked_sub(1).map_or(0.0, |i| f.series_end_s[i]);
            let t1 = f.series_end_s.last().copied().unwrap_or(t0);
            bytes as f64 * 8.0 / (t1 - t0).max(f64::MIN_POSITIVE)
        })
        .collect();
    let rx_pkts: u64 = rx.iter().filter(|f| f.data_bytes > 0).map(|f| f.pkts).sum();
    let rx_ce: u64 = rx.iter().map(|f| f.ce_pkts).sum();

    let outcome = Outcome {
        label: scn.label.clone(),
        rate_bps: bottleneck.rate_bps,
        rate_changes,
        window_s,
        queue: summarize(&qlens),
        queue_empty_fraction: empty,
        queue_over_time: over_time.as_ref().map(|o| o.0.clone()),
        queue_over_time_empty_fraction: over_time.map(|o| o.1),
        utilization,
        drops,
        marks: bpf_marks + qdisc_marks,
        ce_fraction: rx_ce as f64 / rx_pkts.max(1) as f64,
        goodput_bps,
        flows,
        rx,
        marker: end_m.into(),
        probe_check: ProbeCheck {
            probe_enqueued: end_m.pkts - end_m.dropped,
            qdisc_accounted: end_q.sent_packets + end_q.drops,
            probe_taildrops: end_m.taildrop,
            qdisc_drops: end_q.drops,
            probe_departed: end_m.departed,
            qdisc_sent: end_q.sent_packets,
            departure_misses,
            window_departed,
            marks: end_m.marked + end_q.marks,
            receiver_ce: rx_ce,
        },
        guard_repairs: Repairs::default(),
        guard_found: (0, 0),
        trace_check: None,
        short_fct: short.iter().map(|s| FctSummary::of(s)).collect(),
        softirq_share,
        steal_share,
        htb_hysteresis: tc_qdisc::hysteresis::current(),
        ecn_feedback: crate::net::ecn::selected(),
        dualpi2,
        rwnd_clamp_bytes: scn.rwnd_clamp_bytes,
        faults,
        rtt,
    };
    let mut outcome = outcome;
    outcome.trace_check = cc_trace
        .as_ref()
        .map(|t| t.check(&outcome.flows, &outcome.rx));
    Ok(RunData {
        outcome,
        samples,
        queue_steps: queue_steps.unwrap_or_default(),
        window_start_ns: t0,
        cc_trace,
        short,
        capture,
    })
}

/// The ECT(1) program of every algorithm of the run that has one (Prague),
/// on tcx egress of every sender: it rewrites only its own sockets'
/// packets, so senders of other algorithms are untouched. Detached when
/// the links are dropped, before the namespaces go.
fn ect1_on_senders(star: &Star, scn: &Scenario) -> Result<Vec<std::os::fd::OwnedFd>> {
    let mut names: Vec<&str> = scn.flows.iter().map(|f| f.cc.as_str()).collect();
    names.extend(scn.short_flows.iter().map(|s| s.cc.as_str()));
    names.sort_unstable();
    names.dedup();
    let mut links = Vec::new();
    for name in names {
        let pin = dctcp_utils::bpffs::InstanceDir::new(name)
            .path
            .join(loader::instance::ECT1_PROG_PIN);
        if !pin.exists() {
            continue;
        }
        for h in &star.senders {
            links.push(tc_qdisc::hook::attach_pinned_egress(
                &pin,
                &h.ns.path(),
                &h.ifname,
            )?);
        }
    }
    Ok(links)
}
