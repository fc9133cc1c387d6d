//! The BPF switch program, loaded and attached: marker and queue probe on the
//! bottleneck's tcx egress (before 6.6: the probe alone, on tracepoint
//! net_dev_queue), per-flow CE counter on the receiver's ingress (tcx or
//! clsact).

use std::mem::MaybeUninit;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::{Deserialize, Serialize};

use dctcp_utils::ring::RingDrainer;

use crate::hook::{self, Attached, Position};
use crate::intf::{
    dualpi2_decision, dualpi2_queue_stats, dualpi2_update, from_bytes, link_rate, marker_config,
    marker_mode_MARKER_DUALPI2, marker_mode_MARKER_PROBE, marker_stats, probe_batches,
    queue_action_QA_DROP, queue_action_QA_TAILDROP, queue_departure, queue_sample, rx_flow_key,
    rx_flow_stats, DUALPI2_C, DUALPI2_L,
};
use crate::skel::SwitchSkelBuilder;

/// Packets seen at one receiver flow.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RxFlow {
    pub src: Ipv4Addr,
    pub sport: u16,
    pub dst: Ipv4Addr,
    pub dport: u16,
    pub pkts: u64,
    pub data_bytes: u64,
    pub ce_pkts: u64,
    pub ce_bytes: u64,
    pub ect_pkts: u64,
}

/// Every arrival the probe recorded and every dequeue if the switch recorded
/// them (the two together give the queue over time), each in time order.
#[derive(Default)]
pub struct QueueTrace {
    pub samples: Vec<queue_sample>,
    pub departures: Vec<queue_departure>,
}

impl QueueTrace {
    /// The queue between `from_ns` and `to_ns` as (packets, seconds held)
    /// steps, rebuilt from every arrival and departure; None without
    /// departures. Each event carries the queue it read, so a reading racing
    /// another CPU's event is put right by the next one.
    pub fn over_time(&self, from_ns: u64, to_ns: u64) -> Option<Vec<(u32, f64)>> {
        if self.departures.is_empty() {
            return None;
        }
        let mut events: Vec<(u64, u32)> = self
            .samples
            .iter()
            .map(|s| (s.ts_ns, s.qlen + u32::from(enqueued(s))))
            .chain(self.departures.iter().map(|d| (d.ts_ns, d.qlen)))
            .collect();
        events.sort_by_key(|e| e.0);
        let mut steps = Vec::with_capacity(events.len());
        for (i, &(t, q)) in events.iter().enumerate() {
            let until = events.get(i + 1).map_or(to_ns, |e| e.0).min(to_ns);
            let since = t.max(from_ns);
            if until > since {
                steps.push((q, (until - since) as f64 / 1e9));
            }
        }
        Some(steps)
    }

    /// Packets that left the queue in [from_ns, to_ns); None without
    /// departures. Stamped by the kernel as they leave, so a window measured
    /// with them does not depend on when anyone read a counter.
    pub fn departed_between(&self, from_ns: u64, to_ns: u64) -> Option<u64> {
        if self.departures.is_empty() {
            return None;
        }
        Some(
            self.departures
                .iter()
                .filter(|d| (from_ns..to_ns).contains(&d.ts_ns))
                .map(|d| u64::from(d.packets))
                .sum(),
        )
    }

    /// The arrivals at or after `from_ns` and before `to_ns`, plus the first
    /// after them (the span ends at it, or at the last of them when none
    /// came later) as a range of `samples`; None when fewer than two.
    pub fn arrival_span(&self, from_ns: u64, to_ns: u64) -> Option<std::ops::Range<usize>> {
        let first = self.samples.partition_point(|s| s.ts_ns < from_ns);
        let last = self
            .samples
            .partition_point(|s| s.ts_ns < to_ns)
            .min(self.samples.len().checked_sub(1)?);
        (last > first).then_some(first..last)
    }

    /// Packets that left the queue from the first arrival of `span` to the
    /// one that ends it ([`Self::arrival_span`]), counted from the arrivals
    /// alone: the queue the first found, plus what was queued since, less
    /// the queue the last found. It needs every arrival (the switch records
    /// them all where it records departures) and no dequeue event: the
    /// kernel's qdisc_dequeue tracepoint skips some bulk dequeues on 6.18
    /// (docs/lab/README.md, "Probes"). A queue length read while another CPU
    /// enqueues may be one off: a packet or two at either end.
    /// `qdisc_drops` is the qdisc's own drop count over the span: a drop the
    /// probe did not foresee (a RED qdisc's early drop; it predicts only the
    /// limit's) was never queued either.
    pub fn departed_by_arrivals(&self, span: std::ops::Range<usize>, qdisc_drops: u64) -> u64 {
        let (a, b) = (&self.samples[span.start], &self.samples[span.end]);
        let arrivals = &self.samples[span];
        let queued = arrivals.iter().filter(|s| enqueued(s)).count() as u64;
        let foreseen = arrivals
            .iter()
            .filter(|s| s.action == queue_action_QA_TAILDROP as u8)
            .count() as u64;
        (u64::from(a.qlen) + queued)
            .saturating_sub(u64::from(b.qlen))
            .saturating_sub(qdisc_drops.saturating_sub(foreseen))
    }
}

/// Whether the qdisc took this arrival in: not when the marker dropped it
/// or the qdisc's limit would.
fn enqueued(s: &queue_sample) -> bool {
    s.action != queue_action_QA_DROP as u8 && s.action != queue_action_QA_TAILDROP as u8
}

pub struct BpfSwitch {
    _links: Vec<Attached>,
    /// The programs' `link_rate`, rewritten when the link's rate changes.
    link: MapHandle,
    stats: MapHandle,
    rx_flows: MapHandle,
    batches: MapHandle,
    reader: Option<RingDrainer<queue_sample>>,
    departures: Option<RingDrainer<queue_departure>>,
    /// The departure probe, to ask the kernel how many of its runs it
    /// skipped (the link holds the program; this fd only asks).
    dequeue_prog: Option<OwnedFd>,
    dualpi2: Option<Dualpi2Maps>,
    _pins: Option<LivePins>,
}

/// What a DualPI2 switch adds: its per-queue counters and, when its config
/// asks to trace, every decision and controller update.
struct Dualpi2Maps {
    /// Held open for the controller's timer: the kernel cancels a map's
    /// timers once user space holds no reference to it.
    _state: MapHandle,
    stats: MapHandle,
    decisions: Option<RingDrainer<dualpi2_decision>>,
    updates: Option<RingDrainer<dualpi2_update>>,
}

/// Every DualPI2 decision and controller update a traced run made, each in
/// time order.
#[derive(Default)]
pub struct Dualpi2Trace {
    pub decisions: Vec<dualpi2_decision>,
    pub updates: Vec<dualpi2_update>,
}

/// The oldest kernel the lab runs on (the oldest tested: Debian 12's).
/// From there to 6.6 it runs without tcx: its probes sit on tracepoints and
/// clsact, and only kernel qdiscs mark ([`MARKER_KERNEL`]).
pub const LAB_KERNEL: (u32, u32) = (6, 1);

/// The first kernel the BPF markers run on: they attach to tcx (Linux 6.6)
/// and read the qdisc through bpf_cast_to_kern_ctx (6.3).
pub const MARKER_KERNEL: (u32, u32) = crate::hook::TCX_KERNEL;

/// This kernel's version, (0, 0) if unreadable.
pub fn kernel() -> (u32, u32) {
    dctcp_utils::preflight::kernel_version().unwrap_or((0, 0))
}

/// Refuses a kernel the lab cannot run on, naming what it needs, before
/// anything is built.
pub fn require_kernel() -> Result<()> {
    kernel_suffices(kernel())
}

fn kernel_suffices((major, minor): (u32, u32)) -> Result<()> {
    anyhow::ensure!(
        (major, minor) >= LAB_KERNEL,
        "the lab needs Linux {}.{} or later (this kernel: {major}.{minor}): its probes are BPF \
         programs on BTF tracepoints and tc hooks, tested from Debian 12's 6.1 on. `lab doctor` \
         says what this kernel offers; the loader itself may still run here",
        LAB_KERNEL.0,
        LAB_KERNEL.1
    );
    Ok(())
}

/// Drains `map`, a ring of `T` records, every 10 ms.
fn drain<T: Copy + Default + Send + 'static>(
    map: &libbpf_rs::MapMut<'_>,
) -> Result<RingDrainer<T>> {
    Ok(RingDrainer::spawn(
        MapHandle::try_from(map)?,
        Duration::from_millis(10),
    ))
}

/// What the switch's programs read of a link of `rate_bps` (`struct
/// link_rate`): a backlog's time on it, and one MTU packet's.
pub fn link_rate(rate_bps: u64) -> link_rate {
    let per = |bytes: f64| (bytes * 8e9 / rate_bps.max(1) as f64).round() as u32;
    let pkt_ns = per(f64::from(crate::backend::PKT_BYTES));
    link_rate {
        rate_bps,
        ns_per_kbyte: per(1024.0),
        pkt_ns,
        stamp_shift: stamp_shift(pkt_ns),
        _pad: 0,
    }
}

/// DualPI2's stamps on a link of `pkt_ns` per packet: one in 2^shift, the
/// most packets that take no more than DUALPI2_STAMP_SPAN_NS on the link
/// (1 Gbit/s: 64; 50 Mbit/s: 4; 10 Mbit/s and slower: every packet).
pub fn stamp_shift(pkt_ns: u32) -> u32 {
    let packets = crate::intf::DUALPI2_STAMP_SPAN_NS / pkt_ns.max(1);
    packets.max(1).ilog2().min(crate::intf::DUALPI2_STAMP_SHIFT_MAX)
}

/// The switch loaded with `cfg` in its read-only data and the link's rate
/// in its writable `link_rate`: with `tcx`, its tcx programs (the marker
/// and its floors); without, the tracepoint probe that stands in for the
/// marker's, the only one an older kernel can load.
fn load(
    storage: &mut MaybeUninit<libbpf_rs::OpenObject>,
    cfg: marker_config,
    rate_bps: u64,
    tcx: bool,
) -> Result<crate::skel::SwitchSkel<'_>> {
    let mut open = SwitchSkelBuilder::default()
        .open(storage)
        .context("opening the BPF switch")?;
    let ro = open
        .maps
        .rodata_data
        .as_deref_mut()
        .context("rodata not mapped")?;
    crate::skel::set_config(&mut ro.cfg, &cfg, "marker_config");
    let link = open
        .maps
        .data_link_data
        .as_deref_mut()
        .context("the switch's link_rate not mapped")?;
    crate::skel::set_config(&mut link.link_rate, &link_rate(rate_bps), "link_rate");
    open.progs.bottleneck_egress.set_autoload(tcx);
    open.progs.floor_egress.set_autoload(tcx);
    open.progs.queue_read_egress.set_autoload(tcx);
    open.progs.bottleneck_arrival.set_autoload(!tcx);
    open.load().context("loading the BPF switch")
}

/// Refuses what needs tcx on a kernel without it.
fn require_tcx(what: &str) -> Result<()> {
    anyhow::ensure!(
        crate::hook::has_tcx(),
        "{what} runs on tcx with bpf_cast_to_kern_ctx: it needs Linux {}.{} or later (this \
         kernel: {}.{})",
        MARKER_KERNEL.0,
        MARKER_KERNEL.1,
        kernel().0,
        kernel().1
    );
    Ok(())
}

/// The inode number that names the network namespace mounted at `ns`.
fn netns_inode(ns: &Path) -> Result<u32> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(ns)
        .with_context(|| format!("namespace {}", ns.display()))?
        .ino();
    u32::try_from(ino).context("a namespace inode number above 32 bits")
}

/// What the marker's cost is measured against (`lab bench`), on the same
/// hook, tcx egress of the bottleneck.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Floor {
    /// An empty program.
    Empty,
    /// A program that only reads the qdisc's length and backlog.
    QueueRead,
}

/// A floor program attached for as long as this value lives.
pub struct MarkerFloor {
    _link: Attached,
}

impl MarkerFloor {
    pub fn attach(floor: Floor, switch_ns: &Path, egress: &str) -> Result<MarkerFloor> {
        require_tcx("the marker's floor")?;
        let mut storage = MaybeUninit::uninit();
        let skel = load(&mut storage, marker_config::default(), 0, true)?;
        let prog = match floor {
            Floor::Empty => &skel.progs.floor_egress,
            Floor::QueueRead => &skel.progs.queue_read_egress,
        };
        Ok(MarkerFloor {
            _link: hook::attach(prog, switch_ns, egress, Position::Last)?,
        })
    }
}

/// ns per run of the floor program and of the marker with `cfg`, each run
/// `repeat` times through BPF_PROG_TEST_RUN on one 1,514-byte ECT(0) TCP
/// segment: the programs' own cost on the pass path (a test run sees the
/// loopback's empty queue), without the two clock reads bpf_stats adds to
/// every call. With a probe, keep `repeat` x 32 bytes of samples under the
/// ring's 16 MiB: nothing drains it here.
pub fn isolated_ns(cfg: marker_config, rate_bps: u64, repeat: u32) -> Result<(f64, f64)> {
    require_tcx("the marker")?;
    let mut storage = MaybeUninit::uninit();
    let skel = load(&mut storage, cfg, rate_bps, true)?;
    let mut frame = vec![0u8; 1514];
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut frame[14..34];
    ip[0] = 0x45;
    ip[1] = 0x02; // ECT(0)
    ip[2..4].copy_from_slice(&1500u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6; // TCP
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    frame[34 + 12] = 5 << 4; // TCP data offset: 20 bytes
    let run = |prog: &libbpf_rs::ProgramMut<'_>| -> Result<f64> {
        let out = prog.test_run(libbpf_rs::ProgramInput {
            data_in: Some(&frame),
            repeat,
            ..Default::default()
        })?;
        anyhow::ensure!(
            out.return_value == 0,
            "{} returned {}",
            prog.name().to_string_lossy(),
            out.return_value
        );
        Ok(out.duration.as_nanos() as f64)
    };
    Ok((
        run(&skel.progs.floor_egress)?,
        run(&skel.progs.bottleneck_egress)?,
    ))
}

impl BpfSwitch {
    /// Loads the switch with `cfg` on a link of `rate_bps` and attaches
    /// the marker/probe to `egress` in `switch_ns` and the CE counter to
    /// `rx_if` in `rx_ns`. With `departures` (which needs every arrival,
    /// `cfg.sample == 1`) it also records every dequeue, for the queue over
    /// time.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        pin_dir: Option<&Path>,
        cfg: marker_config,
        rate_bps: u64,
        departures: bool,
        switch_ns: &Path,
        egress: &str,
        rx_ns: &Path,
        rx_if: &str,
    ) -> Result<BpfSwitch> {
        anyhow::ensure!(
            !departures || cfg.sample == 1,
            "departures are recorded only beside every arrival (sample 1, not {})",
            cfg.sample
        );
        let tcx = crate::hook::has_tcx();
        let mut cfg = cfg;
        if !tcx {
            anyhow::ensure!(
                cfg.mode == marker_mode_MARKER_PROBE,
                "the BPF markers (bpf-step, bpf-red, bpf-dual, bpf-dualpi2) need tcx, Linux {}.{}: on this \
                 kernel a kernel qdisc marks (red, fq_codel)",
                MARKER_KERNEL.0,
                MARKER_KERNEL.1
            );
            cfg.probe_ifindex =
                dctcp_utils::setns::with_netns(switch_ns, || hook::ifindex(egress))??;
            cfg.probe_netns = netns_inode(switch_ns)?;
        }
        let mut storage = MaybeUninit::uninit();
        let mut skel = load(&mut storage, cfg, rate_bps, tcx)?;

        let probe = if tcx {
            hook::attach(
                &skel.progs.bottleneck_egress,
                switch_ns,
                egress,
                Position::Last,
            )?
        } else {
            Attached::Link(
                skel.progs
                    .bottleneck_arrival
                    .attach()
                    .context("attaching the queue probe to tracepoint net_dev_queue")?,
            )
        };
        let mut links = vec![
            probe,
            hook::attach(&skel.progs.receiver_ingress, rx_ns, rx_if, Position::Last)?,
        ];
        // DualPI2's controller reads each queue's sojourn at its departures.
        let dualpi2 = cfg.mode == marker_mode_MARKER_DUALPI2;
        let dequeue_prog = departures
            .then(|| skel.progs.bottleneck_dequeue.as_fd().try_clone_to_owned())
            .transpose()?;
        if departures || dualpi2 {
            links.push(Attached::Link(
                skel.progs
                    .bottleneck_dequeue
                    .attach()
                    .context("attaching the departure probe to tracepoint qdisc_dequeue")?,
            ));
        }
        let pins = match pin_dir {
            Some(dir) => {
                let mut maps = vec![
                    ("queue_now", &mut skel.maps.queue_now),
                    ("marker_stats", &mut skel.maps.stats),
                ];
                if dualpi2 {
                    maps.push(("dualpi2_stats", &mut skel.maps.dualpi2_stats));
                }
                Some(LivePins::create(dir, &mut maps)?)
            }
            None => None,
        };
        let dualpi2 = dualpi2
            .then(|| -> Result<Dualpi2Maps> {
                let traced = cfg.dualpi2.trace != 0;
                Ok(Dualpi2Maps {
                    _state: MapHandle::try_from(&skel.maps.dualpi2)?,
                    stats: MapHandle::try_from(&skel.maps.dualpi2_stats)?,
                    decisions: traced.then(|| drain(&skel.maps.decisions)).transpose()?,
                    updates: traced.then(|| drain(&skel.maps.updates)).transpose()?,
                })
            })
            .transpose()?;
        let link = MapHandle::try_from(&skel.maps.data_link)?;
        let stats = MapHandle::try_from(&skel.maps.stats)?;
        let rx_flows = MapHandle::try_from(&skel.maps.rx_flows)?;
        let batches = MapHandle::try_from(&skel.maps.batches)?;
        let reader = (cfg.sample > 0)
            .then(|| drain(&skel.maps.samples))
            .transpose()?;
        let departures = departures
            .then(|| drain(&skel.maps.departures))
            .transpose()?;
        Ok(BpfSwitch {
            _pins: pins,
            _links: links,
            link,
            stats,
            rx_flows,
            batches,
            reader,
            departures,
            dequeue_prog,
            dualpi2,
        })
    }

    /// Tells the programs the link now runs at `rate_bps` (after htb's
    /// class changed: [`crate::Bottleneck::set_rate`]): from the next
    /// arrival, backlogs become times at the new rate.
    pub fn set_rate(&self, rate_bps: u64) -> Result<()> {
        self.set_link(&link_rate(rate_bps))
    }

    /// Writes the programs' `link_rate` as given (a test stamps DualPI2's
    /// packets more sparsely than the rate would).
    pub fn set_link(&self, link: &link_rate) -> Result<()> {
        let value = dctcp_utils::bytes::to_bytes(link);
        self.link
            .update(&0u32.to_ne_bytes(), &value, MapFlags::ANY)
            .context("writing the switch's link_rate")
    }

    /// DualPI2's counters of the L and C queues, each summed over CPUs;
    /// None for another backend.
    pub fn dualpi2_stats(&self) -> Result<Option<[dualpi2_queue_stats; 2]>> {
        let Some(d) = &self.dualpi2 else {
            return Ok(None);
        };
        let queue = |key: u32| -> Result<dualpi2_queue_stats> {
            let per_cpu = d
                .stats
                .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)?
                .context("dualpi2_stats: empty map")?;
            dctcp_utils::bytes::sum_per_cpu(&per_cpu)
                .context("dualpi2_stats: a value shorter than the struct")
        };
        Ok(Some([queue(DUALPI2_L)?, queue(DUALPI2_C)?]))
    }

    /// Stops DualPI2's tracing and returns what it recorded (empty when the
    /// config did not ask to trace).
    pub fn take_dualpi2_trace(&mut self) -> Result<Dualpi2Trace> {
        let Some(d) = self.dualpi2.as_mut() else {
            return Ok(Dualpi2Trace::default());
        };
        let mut t = Dualpi2Trace {
            decisions: d
                .decisions
                .take()
                .map(|r| r.finish())
                .transpose()?
                .unwrap_or_default(),
            updates: d
                .updates
                .take()
                .map(|r| r.finish())
                .transpose()?
                .unwrap_or_default(),
        };
        t.decisions.sort_by_key(|x| x.ts_ns);
        t.updates.sort_by_key(|x| x.ts_ns);
        Ok(t)
    }

    /// Marker counters, summed over CPUs.
    pub fn stats(&self) -> Result<marker_stats> {
        crate::pins::sum_stats(&self.stats)
    }

    /// Runs of the departure probe the kernel skipped because it was
    /// already running on that CPU (`recursion_misses`): each a departure
    /// not counted. None without the probe.
    pub fn departure_misses(&self) -> Result<Option<u64>> {
        self.dequeue_prog
            .as_ref()
            .map(|fd| {
                dctcp_utils::prog_info::of(fd.as_fd(), "bottleneck_dequeue")
                    .map(|i| i.recursion_misses)
            })
            .transpose()
    }

    /// What the receiver saw, per flow.
    pub fn rx_flows(&self) -> Result<Vec<RxFlow>> {
        let mut out = Vec::new();
        for key in self.rx_flows.keys() {
            let Some(k) = from_bytes::<rx_flow_key>(&key) else {
                continue;
            };
            let Some(v) = self
                .rx_flows
                .lookup(&key, MapFlags::ANY)?
                .and_then(|b| from_bytes::<rx_flow_stats>(&b))
            else {
                continue;
            };
            out.push(RxFlow {
                src: Ipv4Addr::from(u32::from_be(k.saddr)),
                sport: k.sport,
                dst: Ipv4Addr::from(u32::from_be(k.daddr)),
                dport: k.dport,
                pkts: v.pkts,
                data_bytes: v.data_bytes,
                ce_pkts: v.ce_pkts,
                ce_bytes: v.ce_bytes,
                ect_pkts: v.ect_pkts,
            });
        }
        out.sort_by_key(|f| (f.src, f.sport));
        Ok(out)
    }

    /// Stops the probe and returns every record it made: those drained
    /// from the rings, then the ones still waiting in each CPU's batch. The
    /// programs stay attached until this value is dropped; what they record
    /// after this call is lost.
    pub fn take_trace(&mut self) -> Result<QueueTrace> {
        let reading = self.reader.is_some();
        let mut samples = self.reader.take().map(|r| r.finish()).transpose()?;
        let mut departures = self.departures.take().map(|r| r.finish()).transpose()?;
        if reading {
            let waiting = self
                .batches
                .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
                .unwrap_or_default();
            for b in waiting
                .iter()
                .filter_map(|b| from_bytes::<probe_batches>(b))
            {
                if let Some(s) = samples.as_mut() {
                    s.extend_from_slice(&b.sample[..(b.samples as usize).min(b.sample.len())]);
                }
                if let Some(d) = departures.as_mut() {
                    d.extend_from_slice(
                        &b.departure[..(b.departures as usize).min(b.departure.len())],
                    );
                }
            }
        }
        // Each CPU hands the rings its own batches: put the CPUs' records
        // back in time order.
        let mut trace = QueueTrace {
            samples: samples.unwrap_or_default(),
            departures: departures.unwrap_or_default(),
        };
        trace.samples.sort_by_key(|s| s.ts_ns);
        trace.departures.sort_by_key(|d| d.ts_ns);
        Ok(trace)
    }
}

/// The switch's live maps pinned for other processes (`loader top`), removed
/// with the switch.
struct LivePins(std::path::PathBuf);

impl LivePins {
    fn create(dir: &Path, maps: &mut [(&str, &mut libbpf_rs::MapMut<'_>)]) -> Result<LivePins> {
        // A machine fresh from boot may have no bpffs on /sys/fs/bpf yet
        // (the loader mounts it when it attaches; a lab of kernel
        // algorithms alone never calls the loader).
        dctcp_utils::bpffs::ensure_mounted()?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let pins = LivePins(dir.to_path_buf());
        for (name, map) in maps.iter_mut() {
            let path = dir.join(&**name);
            map.pin(&path)
                .with_context(|| format!("pinning {}", path.display()))?;
        }
        Ok(pins)
    }
}

impl Drop for LivePins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The root goes with the last lab; another lab's directory keeps it.
        if let Some(root) = self.0.parent() {
            let _ = std::fs::remove_dir(root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(ts_ns: u64, qlen: u32, action: u8) -> queue_sample {
        queue_sample {
            ts_ns,
            qlen,
            action,
            ..Default::default()
        }
    }

    #[test]
    fn dualpi2_stamps_the_packets_of_a_millisecond_at_most_64() {
        let shift = |rate: u64| link_rate(rate).stamp_shift;
        // 1514 bytes: 12.1 us at 1 Gbit/s (82 a ms), 242 us at 50 Mbit/s.
        assert_eq!(shift(1_000_000_000), 6);
        assert_eq!(shift(100_000_000_000), 6);
        assert_eq!(shift(100_000_000), 3);
        assert_eq!(shift(50_000_000), 2);
        assert_eq!(shift(25_000_000), 1);
        assert_eq!(shift(10_000_000), 0);
        assert_eq!(shift(1_000), 0);
        // Exactly at the span: 4 packets of 250 us.
        assert_eq!(stamp_shift(250_000), 2);
        assert_eq!(stamp_shift(250_001), 1);
    }

    #[test]
    fn kernels_before_6_1_are_refused_naming_it() {
        let e = kernel_suffices((5, 15)).unwrap_err().to_string();
        assert!(e.contains("Linux 6.1 or later (this kernel: 5.15)"), "{e}");
        assert!(kernel_suffices((6, 0)).is_err());
        kernel_suffices((6, 1)).unwrap();
        kernel_suffices((7, 0)).unwrap();
    }

    #[test]
    fn queue_over_time_steps_through_arrivals_and_departures() {
        let trace = QueueTrace {
            // 0 -> 1 at 10, 1 -> 2 at 20, a tail drop at 30 leaves 2.
            samples: vec![
                arrival(10, 0, 0),
                arrival(20, 1, 1),
                arrival(30, 2, queue_action_QA_TAILDROP as u8),
            ],
            // Out of order on purpose: rings of two CPUs.
            departures: vec![
                queue_departure {
                    ts_ns: 50,
                    qlen: 0,
                    packets: 1,
                },
                queue_departure {
                    ts_ns: 40,
                    qlen: 1,
                    packets: 1,
                },
            ],
        };
        let steps = trace.over_time(15, 60).unwrap();
        let ns = |s: f64| (s * 1e9).round() as u64;
        let got: Vec<(u32, u64)> = steps.iter().map(|&(q, s)| (q, ns(s))).collect();
        assert_eq!(got, vec![(1, 5), (2, 10), (2, 10), (1, 10), (0, 10)]);
        assert!(QueueTrace::default().over_time(0, 1).is_none());
        assert_eq!(trace.departed_between(40, 50), Some(1));
        assert_eq!(trace.departed_between(0, 60), Some(2));
        assert_eq!(QueueTrace::default().departed_between(0, 60), None);
        // From the arrivals alone, once one at 60 finds the queue empty:
        // from 10 (queue 0) to 60 (queue 0) two were queued (the tail drop
        // was not), so two left, as the departures say.
        let mut later = QueueTrace {
            samples: trace.samples.clone(),
            departures: trace.departures.clone(),
        };
        later.samples.push(arrival(60, 0, 0));
        assert_eq!(later.arrival_span(0, 60), Some(0..3));
        assert_eq!(later.departed_by_arrivals(0..3, 0), 2);
        // One drop the qdisc counted beyond the foreseen tail drop: one fewer left.
        assert_eq!(later.departed_by_arrivals(0..3, 2), 1);
        assert_eq!(later.departed_by_arrivals(0..3, 1), 2);
        assert_eq!(later.departed_between(10, 60), Some(2));
        // From 20 (queue 1) to the last, which ends the span when none comes
        // after its end: the one found at 20 and the one queued then left.
        assert_eq!(later.arrival_span(15, 99), Some(1..3));
        assert_eq!(later.departed_by_arrivals(1..3, 0), 2);
        // From 10 to 20 nothing left: queue 0, one queued, 1 found.
        assert_eq!(later.arrival_span(0, 15), Some(0..1));
        assert_eq!(later.departed_by_arrivals(0..1, 0), 0);
        // An arrival at `from_ns` opens the span; one at `to_ns` closes it.
        assert_eq!(later.arrival_span(20, 30), Some(1..2));
        // Fewer than two arrivals: no span.
        assert_eq!(later.arrival_span(55, 99), None);
        assert_eq!(QueueTrace::default().arrival_span(0, 99), None);
        // Two events at one instant: the first held the queue for no time
        // and is no step.
        let mut same = trace;
        same.samples.push(arrival(40, 1, 0));
        let got: Vec<(u32, u64)> = same
            .over_time(15, 60)
            .unwrap()
            .iter()
            .map(|&(q, s)| (q, ns(s)))
            .collect();
        assert_eq!(got.len(), 5, "{got:?}");
        assert!(got.iter().all(|s| s.1 > 0), "{got:?}");
    }
}
