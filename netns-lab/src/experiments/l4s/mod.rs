//! `lab l4s`: scalable and classic TCP through one bottleneck, seed 002's
//! question as L4S (RFC 9330-9332) asks it outside the data centre. Mixes
//! of a scalable sender (TCP Prague by default) and a classic one (cubic,
//! ECN-capable) through each AQM this lab has: DualPI2 (RFC 9332's coupled
//! dual queue, in BPF), seed 002's dual AQM, RFC 3168 RED on one queue
//! (the classic ECN AQM a scalable sender must detect, RFC 9331 section
//! 4.3), a shallow step on one queue (an L4S queue with no classic queue
//! beside it: the starvation baseline) and drop-tail. Per run: each class's
//! rate and their ratio, Jain's index, the queue in packets and
//! milliseconds (through DualPI2, each queue's sojourn), utilization, marks
//! and drops.

mod short;

use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::backend::PKT_BYTES;
use tc_qdisc::dualpi2::{Dualpi2, Dualpi2Window, QueueWindow};
use tc_qdisc::{Backend, Bottleneck, RedProfile};

use super::coexist::{RENO_MAX_OVER_MIN, RENO_MAX_P, RENO_WEIGHT, SEED_TABLE_I};
use super::Sweep;
use crate::measure::scenario::{Outcome, Scenario};
use crate::measure::step_response::StepResponse;
use crate::net::delay::{
    bdp_pkts, fmt_duration, parse_slot, summary_lines, DelayBackend, RoundTrip, Rtt, RttMeasured,
};
use crate::net::delayline::Slot;
use crate::net::rate_schedule::RateSchedule;
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::model::{Cell, Columns, Figure, Report, Table};
use crate::report::tables::{repairs_line, steal_cell, Repairs};
use crate::stats::jain;
use crate::traffic::bulk::FlowSpec;
use crate::traffic::cc::{check_names, is_ours, Algorithms};
use crate::units::fmt_rate;

/// The AQMs a mix meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Aqm {
    /// RFC 9332's coupled dual queue (bpf-dualpi2, --dualpi2 sets its
    /// parameters): ECT(1) and CE into the L queue, marked by a 1 ms step
    /// or k p'; the rest into the C queue under PI2 (15 ms target), hit
    /// with p'^2.
    Dualpi2,
    /// Seed 002's dual AQM on one queue (bpf-dual) at its Table I setting
    /// M = BDP / 4, K = 1.73 M: ECN-capable packets marked at a step at K,
    /// Not-ECT ones dropped by RED from M to 3M (w 0.002, max_p 0.1); the
    /// classic senders do not negotiate ECN here, as the seed's Reno.
    Dual,
    /// RFC 3168 RED on one queue (bpf-red): ECN-capable packets, ECT(0) and
    /// ECT(1) alike, marked from 5 ms of average queue to 15 ms, at most 1 in
    /// 10; others dropped there. A classic ECN AQM.
    Rfc3168,
    /// A step at 1 ms of queue (bpf-step; at least 2 packets) for every
    /// ECN-capable packet: an L4S queue with no classic queue beside it, the
    /// starvation baseline.
    Step,
    /// No AQM: drop-tail at the buffer.
    Droptail,
}

impl Aqm {
    fn name(self) -> &'static str {
        match self {
            Aqm::Dualpi2 => "dualpi2",
            Aqm::Dual => "dual",
            Aqm::Rfc3168 => "rfc3168",
            Aqm::Step => "step",
            Aqm::Droptail => "droptail",
        }
    }

    /// Its backend on a link of `rate_bps` with round trip `rtt`
    /// (thresholds in packets or bytes there).
    fn backend(self, rate_bps: u64, rtt: Duration, dualpi2: &Dualpi2) -> Backend {
        let at = |ms: f64| pkts_in(ms, rate_bps);
        let bdp_bytes = rate_bps as f64 / 8.0 * rtt.as_secs_f64();
        let m = (bdp_bytes * DUAL_M).round().max(1.0) as u32;
        match self {
            Aqm::Dualpi2 => Backend::BpfDualpi2(dualpi2.clone()),
            Aqm::Dual => Backend::BpfDual {
                ect: RedProfile::step((f64::from(m) * DUAL_K_OVER_M).round() as u32),
                not_ect: RedProfile {
                    min_bytes: m,
                    max_bytes: RENO_MAX_OVER_MIN * m,
                    max_p: RENO_MAX_P,
                    weight: RENO_WEIGHT,
                },
            },
            Aqm::Rfc3168 => Backend::BpfRed {
                min: at(5.0),
                max: at(15.0),
                max_p: 0.1,
                wlog: 9,
            },
            Aqm::Step => Backend::BpfStep { k: at(1.0).max(2) },
            Aqm::Droptail => Backend::Droptail,
        }
    }
}

/// Seed 002's dual AQM as `lab l4s` runs it: Table I's row M = BDP / 4,
/// where the seed's fairest K is 1.73 M.
const DUAL_M: f64 = SEED_TABLE_I[1].0;
const DUAL_K_OVER_M: f64 = SEED_TABLE_I[1].1;

/// Packets of `PKT_BYTES` the link sends in `ms`, at least 1.
fn pkts_in(ms: f64, rate_bps: u64) -> u32 {
    ((ms / 1e3 * rate_bps as f64 / (8.0 * f64::from(PKT_BYTES))).round() as u32).max(1)
}

/// The rates a run steps down to at mid-run (`--steps 25M,5M`, or `none`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steps(pub Vec<u64>);

impl Steps {
    fn parse(s: &str) -> Result<Steps, String> {
        if s.trim() == "none" {
            return Ok(Steps::default());
        }
        s.split(',')
            .map(|r| crate::units::parse_rate(r).map_err(|e| format!("--steps: {e}")))
            .collect::<Result<_, _>>()
            .map(Steps)
    }
}

/// A mix: how many flows of each class and, where it names them, its
/// scalable sender and each flow's round trip: `1:4` (one flow of each
/// --scalable beside four --classic), `1:1:bpf_dctcp` (its own scalable
/// sender, run once), `2:0@10ms/80ms` (a round trip per flow, in order,
/// over --rtt).
#[derive(Clone, Debug, PartialEq)]
pub struct Mix {
    pub scalable: usize,
    pub classic: usize,
    pub sender: Option<String>,
    pub rtt: Option<Rtt>,
}

impl Mix {
    fn parse(s: &str) -> Result<Mix, String> {
        let (flows, rtt) = match s.split_once('@') {
            Some((f, r)) => {
                let rtt = Rtt::parse(&r.replace('/', ","))
                    .map_err(|e| format!("mix `{s}`: round trips `{r}`: {e}"))?;
                if rtt.0.is_empty() {
                    return Err(format!(
                        "mix `{s}`: `@none`: every flow here needs a round trip"
                    ));
                }
                (f, Some(rtt))
            }
            None => (s, None),
        };
        let mut parts = flows.splitn(3, ':');
        let (Some(a), Some(b)) = (parts.next(), parts.next()) else {
            return Err(format!(
                "mix `{s}`: give scalable:classic flow counts, e.g. 1:1 (or 1:1:bpf_dctcp, 2:0@10ms/80ms)"
            ));
        };
        let n = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("mix `{s}`: `{v}` is not a flow count"))
        };
        let sender = match parts.next() {
            Some("") => {
                return Err(format!(
                    "mix `{s}`: name the scalable sender after the second `:`"
                ))
            }
            other => other.map(str::to_string),
        };
        Ok(Mix {
            scalable: n(a)?,
            classic: n(b)?,
            sender,
            rtt,
        })
    }

    /// The counts alone, `1:4`.
    pub fn counts(scalable: usize, classic: usize) -> Mix {
        Mix {
            scalable,
            classic,
            sender: None,
            rtt: None,
        }
    }

    fn flows(&self) -> usize {
        self.scalable + self.classic
    }

    /// As it is written: `1:4`, `1:1:bpf_dctcp`, `2:0@10ms/80ms`.
    fn label(&self) -> String {
        let mut l = format!("{}:{}", self.scalable, self.classic);
        if let Some(s) = &self.sender {
            let _ = write!(l, ":{s}");
        }
        if let Some(r) = &self.rtt {
            let each: Vec<String> =
                r.0.iter()
                    .map(|&d| fmt_duration(d).replace(' ', ""))
                    .collect();
            let _ = write!(l, "@{}", each.join("/"));
        }
        l
    }
}

/// In results, a mix is its label.
impl Serialize for Mix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// A mix as it is written: its label, parsed back.
impl<'de> Deserialize<'de> for Mix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let label = String::deserialize(d)?;
        Mix::parse(&label).map_err(serde::de::Error::custom)
    }
}

/// Scalable and classic TCP sharing one bottleneck (RFC 9330-9332, seed 002's next step).
///
/// Each mix of a scalable sender (--scalable, TCP Prague by default, with
/// its parameters after `+`) and a classic one (--classic, cubic) runs
/// through each AQM: dualpi2 (RFC 9332's coupled dual queue in BPF, its
/// parameters as tc-dualpi2(8) names them in --dualpi2), dual (seed 002's
/// dual AQM on one queue at its Table I row, the classic senders Not-ECT
/// there as the seed's Reno), rfc3168 (RED in BPF from 5 to 15 ms of
/// queue: a classic ECN AQM, where RFC 9331 asks a scalable sender to fall
/// back to a classic response), step (a 1 ms step for every ECN-capable
/// packet: the starvation baseline) and droptail. Every other sender
/// negotiates ECN. Per run: each class's mean rate, their ratio (scalable / classic),
/// Jain's index over the flows, the queue in packets and ms, utilization,
/// marks and drops, and through DualPI2 each queue's sojourn. Compare
/// Prague's classic-ECN fallback on and off with
/// `--scalable bpf_prague+classic_ecn=1` beside `bpf_prague`. Writes
/// results/l4s/<timestamp>/: runs.csv, runs.json, ratio.png, rates.png (a
/// flow's rate over time per class), sojourn.png (DualPI2's queues),
/// summary.md.
///
/// Then the dynamic case: one flow of each --step-senders alone through
/// each --step-aqms, the link stepped down from --rate to each of --steps
/// at mid-run (htb's class and the switch's figure of the rate change
/// together). Per run: the queue delay before the step, its peak (and the
/// round trip a packet then had), where it settled and when it was back
/// there (the first 100 ms mean after the peak at most 25 %, or 1 ms,
/// over that level).
/// Writes steps.csv and steps.png (queue delay over time, per run).
#[derive(Debug, Clone, clap::Args)]
pub struct L4sArgs {
    /// Short runs for tests and a first look: 12 s each, the first 4 not measured.
    #[arg(long)]
    pub quick: bool,
    /// Bottleneck rates, comma-separated: every mix runs through every
    /// AQM at each. The step runs start from the first.
    #[arg(
        long,
        visible_alias = "rate",
        value_parser = crate::units::parse_rate,
        value_delimiter = ',',
        default_value = "50M,10M"
    )]
    pub rates: Vec<u64>,
    /// Round trip of every flow, added on the ACK path; or one per flow,
    /// comma-separated, in the mix's order (scalable flows first:
    /// `--mixes 2:0 --rtt 10ms,80ms`), for every mix but those that name
    /// their own (`2:0@10ms/80ms`). The AQMs' times that need a BDP (seed
    /// 002's dual AQM) take the first flow's.
    #[arg(long, value_parser = Rtt::parse, default_value = "20ms")]
    pub rtt: Rtt,
    /// What adds the round trip: netem where the kernel has it, else the
    /// lab's delay element.
    #[arg(long, value_enum, default_value = "auto")]
    pub delay_backend: DelayBackend,
    /// Bursty arrivals: the ACK path releases in slots, as netem's `slot`
    /// does (INTERVAL:PACKETS, e.g. 4ms:8): held ACKs leave only as a slot
    /// opens, at most PACKETS of a sender's per slot, so the senders' data
    /// reaches the bottleneck in bursts. Every run, mixes and steps.
    #[arg(long, value_parser = parse_slot)]
    pub slot: Option<Slot>,
    /// The AQMs, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "dualpi2,dual,rfc3168,step,droptail"
    )]
    pub aqms: Vec<Aqm>,
    /// DualPI2's parameters as tc-dualpi2(8) names them, over its
    /// defaults: target=15ms, tupdate=16ms, alpha=0.16, beta=3.2,
    /// step_thresh=1ms (or 30p: packets), min_qlen_step=0,
    /// coupling_factor=2, drop_overload=1 (0: overflow),
    /// classic_protection=10 (percent), ecn_mask=l4s_ect (or any_ect).
    #[arg(long, value_parser = Dualpi2::parse, default_value = "")]
    pub dualpi2: Dualpi2,
    /// The mixes, comma-separated: flow counts as scalable:classic (`1:4`:
    /// one flow of each --scalable beside four --classic); a third field
    /// names the mix's own scalable sender, run once instead of each
    /// --scalable (`1:1:bpf_dctcp`; `1:1:cubic` is two cubic flows); after
    /// `@`, the mix's round trips, one for all or one per flow in order,
    /// `/`-separated, over --rtt (`2:0@10ms/80ms`). A one-class mix (`2:0`)
    /// compares its first flow with its last.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = Mix::parse,
        default_value = "1:1,1:4,4:1,2:0@10ms/80ms,1:1:bpf_dctcp,1:1:cubic"
    )]
    pub mixes: Vec<Mix>,
    /// The scalable sender, one or more comma-separated, each run through
    /// every mix that names none: bpf_prague (parameters after `+`:
    /// bpf_prague+classic_ecn=1), bpf_dctcp, or a kernel algorithm.
    #[arg(long, value_delimiter = ',', default_value = "bpf_prague")]
    pub scalable: Vec<String>,
    /// The classic sender: a kernel algorithm (ECN on).
    #[arg(long, default_value = "cubic")]
    pub classic: String,
    /// Bottleneck buffer, packets (drop-tail's queue, and every AQM's limit).
    #[arg(long, default_value_t = 425)]
    pub buffer: u32,
    /// Seconds per run (default 40, or 12 with --quick), the first third
    /// not measured.
    #[arg(long)]
    pub duration: Option<f64>,
    /// The bottleneck's rate over each mix's run, as TIME:RATE pairs
    /// (0s:50M,20s:25M): htb's class and the switch's figure of the rate
    /// change at each time; an entry at 0 s replaces --rate. The AQMs'
    /// thresholds are set at the starting rate (RED's, in packets, then
    /// mean longer times at a lower rate; DualPI2's are times).
    #[arg(long, value_parser = RateSchedule::parse, default_value = "")]
    pub rate_schedule: RateSchedule,
    /// The dynamic case: rates the link steps down to from the first of
    /// --rates at mid-run, one run each (`none`: no step runs).
    #[arg(long, value_parser = Steps::parse, default_value = "25M,5M")]
    pub steps: Steps,
    /// Senders of the step runs, each alone on the link.
    #[arg(long, value_delimiter = ',', default_value = "bpf_prague,cubic")]
    pub step_senders: Vec<String>,
    /// AQMs of the step runs.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "dualpi2,rfc3168"
    )]
    pub step_aqms: Vec<Aqm>,
    /// The short-flow case: beside one long flow of each class (the first
    /// --scalable and --classic) at the first of --rates, short transfers
    /// of each class from a sender of their own, arriving at random
    /// (Poisson) from the warm-up's end, this many per second per class;
    /// their completion times per class, through each --short-aqms. 0: no
    /// short-flow runs.
    #[arg(long, default_value_t = 10.0)]
    pub short_per_second: f64,
    /// Short transfers' sizes, bytes, uniform between MIN and MAX.
    #[arg(long, value_parser = short::Sizes::parse, default_value = "10000-100000")]
    pub short_sizes: short::Sizes,
    /// AQMs of the short-flow runs.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "dualpi2,dual,rfc3168,step,droptail"
    )]
    pub short_aqms: Vec<Aqm>,
    /// Results directory (default results/l4s/<timestamp>).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

impl L4sArgs {
    fn config(&self) -> L4sConfig {
        let secs = self
            .duration
            .unwrap_or(if self.quick { 12.0 } else { 40.0 });
        // Negative or not a number: refused by validate as too short.
        let duration = Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO);
        L4sConfig {
            rates: self.rates.clone(),
            rtt: self.rtt.clone(),
            delay_backend: self.delay_backend,
            slot: self.slot,
            aqms: self.aqms.clone(),
            dualpi2: self.dualpi2.clone(),
            mixes: self.mixes.clone(),
            scalable: self.scalable.clone(),
            classic: self.classic.clone(),
            buffer_pkts: self.buffer,
            rate_schedule: self.rate_schedule.clone(),
            steps: self.steps.0.clone(),
            step_senders: self.step_senders.clone(),
            step_aqms: self.step_aqms.clone(),
            short_per_second: self.short_per_second,
            short_sizes: self.short_sizes,
            short_aqms: self.short_aqms.clone(),
            duration,
            // Slow start and the fallback's detection (11 marked rounds)
            // are over by then.
            warmup: duration / 3,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct L4sConfig {
    pub rates: Vec<u64>,
    pub rtt: Rtt,
    pub delay_backend: DelayBackend,
    pub slot: Option<Slot>,
    pub aqms: Vec<Aqm>,
    pub dualpi2: Dualpi2,
    pub mixes: Vec<Mix>,
    pub scalable: Vec<String>,
    pub classic: String,
    pub buffer_pkts: u32,
    pub rate_schedule: RateSchedule,
    pub steps: Vec<u64>,
    pub step_senders: Vec<String>,
    pub step_aqms: Vec<Aqm>,
    pub short_per_second: f64,
    pub short_sizes: short::Sizes,
    pub short_aqms: Vec<Aqm>,
    pub duration: Duration,
    pub warmup: Duration,
}

crate::experiments::register!("l4s", L4sArgs => L4sConfig);

impl L4sConfig {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(!self.aqms.is_empty(), "--aqms: give at least one");
        anyhow::ensure!(!self.mixes.is_empty(), "--mixes: give at least one");
        anyhow::ensure!(!self.scalable.is_empty(), "--scalable: give at least one");
        anyhow::ensure!(!self.rates.is_empty(), "--rates: give at least one");
        for m in &self.mixes {
            anyhow::ensure!(
                (2..=16).contains(&m.flows()),
                "--mixes {}: two flows at least (2:0 compares two scalable flows), 16 in all at most",
                m.label()
            );
        }
        anyhow::ensure!(
            !is_ours(&self.classic),
            "--classic {}: a kernel algorithm (cubic, reno); this lab's algorithms are scalable",
            self.classic
        );
        let mut names = self.scalable.clone();
        names.push(self.classic.clone());
        names.extend(self.step_senders.iter().cloned());
        names.extend(self.mixes.iter().filter_map(|m| m.sender.clone()));
        check_names(&names)?;
        self.rate_schedule.validate()?;
        if let Some(last) = self.rate_schedule.0.last() {
            anyhow::ensure!(
                last.at < self.duration,
                "--rate-schedule: its last change at {:?} comes after the run's {:?}",
                last.at,
                self.duration
            );
        }
        anyhow::ensure!(
            self.rate_schedule.0.is_empty() || self.rates.len() == 1,
            "--rate-schedule: give one rate in --rates (the schedule starts from it, or from its entry at 0 s)"
        );
        if !self.steps.is_empty() {
            anyhow::ensure!(
                !self.step_senders.is_empty() && !self.step_aqms.is_empty(),
                "--steps: give --step-senders and --step-aqms, or --steps none"
            );
        }
        for &to in &self.steps {
            anyhow::ensure!(
                to < self.step_from(),
                "--steps {}: a step goes down from the first of --rates, {}",
                fmt_rate(to),
                fmt_rate(self.step_from())
            );
            for a in &self.step_aqms {
                self.bottleneck(*a, to, self.rtt.of(0)).validate()?;
            }
        }
        anyhow::ensure!(
            self.duration >= Duration::from_secs(6),
            "--duration {}: at least 6 s (a third of it is warm-up)",
            self.duration.as_secs_f64()
        );
        anyhow::ensure!(
            !self.rtt.0.is_empty(),
            "--rtt none: every flow here needs a round trip"
        );
        for m in &self.mixes {
            self.rtt_of(m)
                .validate(m.flows())
                .with_context(|| format!("--mixes {}", m.label()))?;
        }
        if !self.steps.is_empty() && self.rtt.0.len() > 1 {
            anyhow::bail!(
                "--rtt with one round trip per flow: the step runs have one flow; add --steps none"
            );
        }
        if self.short_per_second != 0.0 && self.rtt.0.len() > 1 {
            anyhow::bail!(
                "--rtt with one round trip per flow: the short-flow runs have four senders; add --short-per-second 0"
            );
        }
        short::validate(self)?;
        for p in self.points() {
            self.bottleneck(p.aqm, p.rate_bps, self.rtt_of(&p.mix).of(0))
                .validate()?;
        }
        Ok(())
    }

    /// Every mix run, in the order they run: per rate, per AQM, each mix
    /// with its own scalable sender or with each of --scalable.
    fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for &rate in &self.rates {
            for &aqm in &self.aqms {
                for mix in &self.mixes {
                    for scalable in self.senders_of(mix) {
                        points.push(Point {
                            rate_bps: self.rate_schedule.initial(rate),
                            aqm,
                            scalable: scalable.clone(),
                            mix: mix.clone(),
                        });
                    }
                }
            }
        }
        points
    }

    /// The scalable senders a mix runs with: its own, or each of --scalable.
    fn senders_of<'a>(&'a self, mix: &'a Mix) -> &'a [String] {
        match &mix.sender {
            Some(s) => std::slice::from_ref(s),
            None => &self.scalable,
        }
    }

    /// Where the mix runs on the ratio plot's x axis: each mix's place,
    /// one per sender it runs with.
    fn slots(&self) -> Vec<(Mix, String)> {
        self.mixes
            .iter()
            .flat_map(|m| {
                self.senders_of(m)
                    .iter()
                    .map(move |s| (m.clone(), s.clone()))
            })
            .collect()
    }

    /// A mix's round trips: its own, else --rtt.
    fn rtt_of<'a>(&'a self, mix: &'a Mix) -> &'a Rtt {
        mix.rtt.as_ref().unwrap_or(&self.rtt)
    }

    /// The path of every flow: `rtt`, released in --slot's slots.
    fn round_trip(&self, rtt: &Rtt) -> RoundTrip {
        RoundTrip {
            slot: self.slot,
            ..RoundTrip::new(rtt.clone(), self.delay_backend)
        }
    }

    /// The rate the step runs start from.
    fn step_from(&self) -> u64 {
        self.rates[0]
    }

    /// The bottleneck as a run starts it, at `rate_bps`, its AQM's times
    /// that need a BDP at `rtt`.
    fn bottleneck(&self, aqm: Aqm, rate_bps: u64, rtt: Duration) -> Bottleneck {
        Bottleneck {
            rate_bps,
            buffer_pkts: self.buffer_pkts,
            backend: aqm.backend(rate_bps, rtt, &self.dualpi2),
        }
    }
}

/// One mix run: a mix through an AQM at a rate, with a scalable sender.
#[derive(Clone, Debug)]
struct Point {
    rate_bps: u64,
    aqm: Aqm,
    scalable: String,
    mix: Mix,
}

impl Point {
    fn label(&self, classic: &str) -> String {
        format!(
            "{} {} {} {}:{classic}",
            fmt_rate(self.rate_bps),
            self.aqm.name(),
            self.mix.label(),
            self.scalable
        )
    }
}

/// Milliseconds `pkts` of queue take to leave at `rate_bps`.
fn queue_ms(pkts: f64, rate_bps: u64) -> f64 {
    pkts * f64::from(PKT_BYTES) * 8.0 / rate_bps as f64 * 1e3
}

/// One mix through one AQM.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct L4sRun {
    pub rate_bps: u64,
    pub aqm: Aqm,
    pub scalable: String,
    pub classic: String,
    pub mix: Mix,
    /// Each flow's rate over the measured window, Mbit/s: the scalable
    /// flows first.
    pub rates_mbps: Vec<f64>,
    /// Mean rate of a flow of each class, Mbit/s.
    pub scalable_mbps: f64,
    pub classic_mbps: f64,
    /// scalable_mbps / classic_mbps: 1 is an equal share per flow; in a
    /// mix of one class (2:0), the first flow's rate over the last's.
    pub ratio: f64,
    pub jain: f64,
    /// Queue found by arrivals, packets, and in ms at the rate.
    pub queue_mean_pkts: f64,
    pub queue_p99_pkts: f64,
    pub queue_mean_ms: f64,
    pub queue_p99_ms: f64,
    pub utilization: f64,
    pub marks: u64,
    pub drops: u64,
    pub ce_fraction: f64,
    pub steal_share: f64,
    pub guard_repairs: Repairs,
    /// Each flow's round trip, and the delay element's report.
    pub rtt: RttMeasured,
    /// DualPI2's L and C queues (dualpi2 only).
    pub dualpi2: Option<Dualpi2Window>,
    /// A flow's mean rate over time in each class, scalable then classic
    /// (s from the start, Mbit/s per 100 ms; empty for a class without
    /// flows).
    #[serde(skip)]
    pub class_rates: [Vec<(f64, f64)>; 2],
}

impl L4sRun {
    fn of(cfg: &L4sConfig, p: &Point, o: &Outcome) -> L4sRun {
        let mix = &p.mix;
        let rates: Vec<f64> = o.goodput_bps.iter().map(|g| g / 1e6).collect();
        // (A sum of nothing is -0.0: a class without flows reads 0.)
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let (s, c) = rates.split_at(mix.scalable.min(rates.len()));
        let (scalable_mbps, classic_mbps) = (mean(s), mean(c));
        let ratio = if s.is_empty() || c.is_empty() {
            rates.first().copied().unwrap_or(0.0) / rates.last().copied().unwrap_or(0.0).max(1e-9)
        } else {
            scalable_mbps / classic_mbps.max(1e-9)
        };
        L4sRun {
            rate_bps: p.rate_bps,
            aqm: p.aqm,
            scalable: p.scalable.clone(),
            classic: cfg.classic.clone(),
            mix: mix.clone(),
            jain: jain(&rates),
            rates_mbps: rates,
            scalable_mbps,
            classic_mbps,
            ratio,
            queue_mean_pkts: o.queue.mean,
            queue_p99_pkts: o.queue.p99,
            queue_mean_ms: queue_ms(o.queue.mean, p.rate_bps),
            queue_p99_ms: queue_ms(o.queue.p99, p.rate_bps),
            utilization: o.utilization,
            marks: o.marks,
            drops: o.drops,
            ce_fraction: o.ce_fraction,
            steal_share: o.steal_share,
            guard_repairs: o.guard_repairs,
            rtt: o.rtt.clone(),
            dualpi2: o.dualpi2.clone(),
            class_rates: [
                class_rate(&o.flows[..mix.scalable.min(o.flows.len())]),
                class_rate(&o.flows[mix.scalable.min(o.flows.len())..]),
            ],
        }
    }

    fn label(&self) -> String {
        format!(
            "{} {} {} {}:{}",
            fmt_rate(self.rate_bps),
            self.aqm.name(),
            self.mix.label(),
            self.scalable,
            self.classic
        )
    }
}

/// The mean rate of `flows` over time: per interval, the bytes they read
/// over its length, per flow (Mbit/s at each interval's end).
fn class_rate(flows: &[crate::traffic::bulk::FlowResult]) -> Vec<(f64, f64)> {
    let Some(first) = flows.first() else {
        return Vec::new();
    };
    let ends = &first.series_end_s;
    (0..flows.iter().map(|f| f.series.len()).min().unwrap_or(0))
        .map(|i| {
            let from = if i == 0 { 0.0 } else { ends[i - 1] };
            let bytes: u64 = flows.iter().map(|f| f.series[i]).sum();
            let mbps = bytes as f64 * 8.0 / (ends[i] - from).max(1e-6) / 1e6;
            (ends[i], mbps / flows.len() as f64)
        })
        .collect()
}

/// A mix run's scenario, the scalable flows (of `scalable_cc`, the name
/// the kernel knows it by) first.
fn scenario(cfg: &L4sConfig, p: &Point, scalable_cc: &str, label: &str) -> Scenario {
    let (mix, aqm) = (&p.mix, p.aqm);
    let flows = mix.flows();
    let rtt = cfg.rtt_of(mix);
    let mut scn = Scenario {
        round_trip: Some(cfg.round_trip(rtt)),
        ..Scenario::long_flows(
            label,
            cfg.bottleneck(aqm, p.rate_bps, rtt.of(0)),
            flows,
            scalable_cc,
            cfg.duration,
            cfg.warmup,
        )
    };
    for (sender, f) in scn.flows.iter_mut().enumerate().skip(mix.scalable) {
        *f = FlowSpec::long(sender, &cfg.classic);
    }
    // Seed 002's classic senders are Not-ECT: its AQM drops them.
    if aqm == Aqm::Dual {
        scn.no_ecn_senders = (mix.scalable..flows).collect();
    }
    scn.rate_schedule = cfg.rate_schedule.clone();
    scn
}

/// One flow of `cc` alone, the link stepped down to `to_bps` at mid-run.
fn step_scenario(cfg: &L4sConfig, aqm: Aqm, cc: &str, to_bps: u64, label: &str) -> Scenario {
    let bottleneck = cfg.bottleneck(aqm, cfg.step_from(), cfg.rtt.of(0));
    let mut scn = Scenario {
        round_trip: Some(cfg.round_trip(&cfg.rtt)),
        ..Scenario::long_flows(label, bottleneck, 1, cc, cfg.duration, cfg.warmup)
    };
    scn.rate_schedule = RateSchedule::step(cfg.duration / 2, to_bps);
    scn
}

/// One sender alone through one AQM, the link stepped down at mid-run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepRun {
    pub aqm: Aqm,
    pub sender: String,
    pub response: StepResponse,
    /// The round trip with no queue, ms: the peak's round trip is this
    /// plus the peak's queue delay.
    pub base_rtt_ms: f64,
    /// The peak the step can make: the window the flow had (the old
    /// rate times its min RTT plus the queue it kept) less the new BDP,
    /// at the new rate, ms (at most the buffer's time).
    pub expected_peak_ms: f64,
    /// The flow's goodput over the last 40 % of the run, over the new
    /// link's (its rate less the headers).
    pub utilization_after: f64,
    /// The flow's rate over time, (s from the step, Mbit/s).
    #[serde(skip)]
    pub rate_series: Vec<(f64, f64)>,
    pub steal_share: f64,
    pub guard_repairs: Repairs,
}

impl StepRun {
    fn label(&self) -> String {
        format!(
            "{} {} {}->{}",
            self.aqm.name(),
            self.sender,
            fmt_rate(self.response.from_bps),
            fmt_rate(self.response.to_bps)
        )
    }
}

fn run(cfg: &L4sConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    let (points, short_points) = (cfg.points(), short::points(cfg));
    let mut names: Vec<String> = points
        .iter()
        .chain(&short_points)
        .map(|p| p.scalable.clone())
        .collect();
    names.extend(cfg.step_senders.iter().cloned());
    names.sort();
    names.dedup();
    let algorithms = Algorithms::attach(&names)?;
    let steps = cfg.steps.len() * cfg.step_senders.len() * cfg.step_aqms.len();
    let mut sweep = Sweep::new(points.len() + short_points.len() + steps, stop);
    let mut runs = Vec::with_capacity(points.len());
    for p in &points {
        let label = p.label(&cfg.classic);
        let scn = scenario(cfg, p, &algorithms.cc(&p.scalable), &label);
        let data = sweep.run(&scn, algorithms.ours(&p.scalable), &label)?;
        let r = L4sRun::of(cfg, p, &data.outcome);
        if data.outcome.marker.ect.pkts == 0 && p.aqm != Aqm::Droptail {
            bail!("{label}: no packet arrived ECN-capable: ECN was not negotiated");
        }
        sweep.said(
            &format!(
                "{label}: {:.1} / {:.1} Mbit/s per flow (ratio {:.2}), Jain {:.3}, queue {:.1} ms (p99 {:.1}), \
                 util {:.1} %, marks {}, drops {}",
                r.scalable_mbps,
                r.classic_mbps,
                r.ratio,
                r.jain,
                r.queue_mean_ms,
                r.queue_p99_ms,
                r.utilization * 100.0,
                r.marks,
                r.drops
            ),
            &data.outcome,
        );
        if let Some(d) = &r.dualpi2 {
            eprintln!("  {}", queues_line(d));
        }
        runs.push(r);
    }
    let mut short_runs = Vec::with_capacity(short_points.len());
    for p in &short_points {
        let label = short::label(p.rate_bps, p.aqm);
        let scn = short::scenario(cfg, p, &algorithms.cc(&p.scalable), &label);
        let data = sweep.run(&scn, algorithms.ours(&p.scalable), &label)?;
        let r = short::ShortRun::of(cfg, p, &data);
        sweep.said(&r.line(), &data.outcome);
        short_runs.push(r);
    }
    let mut step_runs = Vec::with_capacity(steps);
    for &aqm in &cfg.step_aqms {
        for sender in &cfg.step_senders {
            for &to in &cfg.steps {
                let label = format!(
                    "{} {sender} {}->{}",
                    aqm.name(),
                    fmt_rate(cfg.step_from()),
                    fmt_rate(to)
                );
                let scn = step_scenario(cfg, aqm, &algorithms.cc(sender), to, &label);
                let data = sweep.run(&scn, algorithms.ours(sender), &label)?;
                let r = step_run(aqm, sender, cfg.duration / 2, cfg.buffer_pkts, &data)
                    .with_context(|| {
                        format!("{label}: no queue samples on both sides of the step")
                    })?;
                sweep.said(
                    &format!(
                        "{label}: queue {:.2} ms before, peak {:.1} ms ({:.1} ms round trip) at {:.2} s, settled at \
                         {:.2} ms {}, goodput after {:.1} % of the link's",
                        r.response.before_ms,
                        r.response.peak_ms,
                        r.base_rtt_ms + r.response.peak_ms,
                        r.response.peak_at_s,
                        r.response.settled_ms,
                        back(&r.response),
                        r.utilization_after * 100.0
                    ),
                    &data.outcome,
                );
                step_runs.push(r);
            }
        }
    }
    write_csv(out, &runs)?;
    plot_ratios(out, cfg, &runs)?;
    plot_sojourn(out, cfg, &runs)?;
    plot_rates(out, cfg, &runs)?;
    if !short_runs.is_empty() {
        short::write_csv(out, &short_runs)?;
        short::plot(out, cfg, &short_runs)?;
    }
    if !step_runs.is_empty() {
        write_steps_csv(out, &step_runs)?;
        plot_steps(out, cfg, &step_runs)?;
    }
    out.write_json("shorts.json", &short_runs)?;
    out.write_json("steps.json", &step_runs)?;
    out.write_json("runs.json", &runs)?;
    Ok(report(cfg, &runs, &short_runs, &step_runs))
}

/// A step run's response, from its arrivals and its flow; `step_at` is
/// when the schedule put the step (applied at the first tick from then).
fn step_run(
    aqm: Aqm,
    sender: &str,
    step_at: Duration,
    buffer_pkts: u32,
    data: &crate::measure::scenario::RunData,
) -> Option<StepRun> {
    let o = &data.outcome;
    let response = StepResponse::of(&data.samples, o.rate_bps, &o.rate_changes)?;
    let flow = o.flows.first()?;
    // Each interval's rate, at its end on the run's clock, from the step.
    let rate_series: Vec<(f64, f64)> = class_rate(std::slice::from_ref(flow))
        .into_iter()
        .map(|(end, mbps)| (end - step_at.as_secs_f64(), mbps))
        .collect();
    let tail = rate_series.len() * 3 / 5;
    let after = &rate_series[tail..];
    let utilization_after = after.iter().map(|p| p.1).sum::<f64>() / after.len().max(1) as f64
        * 1e6
        / crate::measure::theory::goodput_bps(response.to_bps);
    let base_rtt_ms = f64::from(flow.info.min_rtt_us) / 1e3;
    Some(StepRun {
        aqm,
        sender: sender.to_string(),
        expected_peak_ms: expected_peak_ms(&response, base_rtt_ms, buffer_pkts),
        base_rtt_ms,
        utilization_after,
        rate_series,
        steal_share: o.steal_share,
        guard_repairs: o.guard_repairs,
        response,
    })
}

/// The window a flow held before the step (the old rate over its min
/// RTT plus the queue it kept) less the new BDP, as queue at the new rate,
/// ms: the most a window-limited sender can queue before it first cuts,
/// at most the buffer's time.
fn expected_peak_ms(r: &StepResponse, base_rtt_ms: f64, buffer_pkts: u32) -> f64 {
    let (from, to) = (r.from_bps as f64, r.to_bps as f64);
    let excess_ms = (from * (base_rtt_ms + r.before_ms) - to * base_rtt_ms) / to;
    let buffer_ms = f64::from(buffer_pkts * PKT_BYTES) * 8e3 / to;
    excess_ms.clamp(0.0, buffer_ms)
}

/// `20 ms`, or `10 ms, 80 ms` per flow.
fn rtts(rtt: &Rtt) -> String {
    rtt.0
        .iter()
        .map(|&d| fmt_duration(d))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `back there 1.23 s after the step` or `never back there`.
fn back(r: &StepResponse) -> String {
    r.back_s.map_or("(never back there)".to_string(), |s| {
        format!("back there {s:.2} s after the step")
    })
}

fn write_steps_csv(out: &ResultsDir, runs: &[StepRun]) -> Result<()> {
    out.csv_rows(
        "steps.csv",
        runs,
        &[
            ("aqm", |r| r.aqm.name().to_string()),
            ("sender", |r| r.sender.clone()),
            ("from_bps", |r| r.response.from_bps.to_string()),
            ("to_bps", |r| r.response.to_bps.to_string()),
            ("before_ms", |r| format!("{:.3}", r.response.before_ms)),
            ("peak_ms", |r| format!("{:.3}", r.response.peak_ms)),
            ("expected_peak_ms", |r| format!("{:.3}", r.expected_peak_ms)),
            ("peak_rtt_ms", |r| {
                format!("{:.3}", r.base_rtt_ms + r.response.peak_ms)
            }),
            ("peak_at_s", |r| format!("{:.3}", r.response.peak_at_s)),
            ("settled_ms", |r| format!("{:.3}", r.response.settled_ms)),
            ("back_s", |r| {
                r.response
                    .back_s
                    .map_or(String::new(), |v| format!("{v:.3}"))
            }),
            ("utilization_after", |r| {
                format!("{:.4}", r.utilization_after)
            }),
            ("steal_share", |r| format!("{:.4}", r.steal_share)),
        ],
    )
}

/// Per AQM, the queue delay over time around the step (log axis: L's tens
/// of microseconds and C's tens of milliseconds both in view) and the
/// flow's rate, one series per sender and step.
fn plot_steps(out: &ResultsDir, cfg: &L4sConfig, runs: &[StepRun]) -> Result<()> {
    // An empty queue sits at the axis' floor.
    const FLOOR_MS: f64 = 1.0 / 64.0;
    let name = |r: &StepRun| format!("{} to {}", r.sender, fmt_rate(r.response.to_bps));
    let titles: Vec<(Aqm, String, String)> = cfg
        .step_aqms
        .iter()
        .map(|&a| {
            (
                a,
                format!(
                    "{}: queue delay as the link steps down from {} at t = 0 ({} round trip)",
                    a.name(),
                    fmt_rate(cfg.step_from()),
                    rtts(&cfg.rtt)
                ),
                format!("{}: the flow's rate (100 ms means)", a.name()),
            )
        })
        .collect();
    let mut charts = Vec::new();
    for (aqm, queue_title, rate_title) in &titles {
        let of: Vec<&StepRun> = runs.iter().filter(|r| r.aqm == *aqm).collect();
        if of.is_empty() {
            continue;
        }
        let queue = of
            .iter()
            .map(|r| Series {
                name: name(r),
                points: r
                    .response
                    .series
                    .iter()
                    .map(|&(t, ms)| (t, ms.max(FLOOR_MS).log2()))
                    .collect(),
            })
            .collect();
        let rate = of
            .iter()
            .map(|r| Series {
                name: name(r),
                points: r.rate_series.clone(),
            })
            .collect();
        charts.push(
            // Up to 1 s, the buffer's time at 5 Mbit/s.
            Chart::new(queue_title, "s from the step", "queue delay (ms)", queue)
                .log2_y()
                .y_max(10.0)
                .vline(0.0),
        );
        charts.push(
            Chart::new(rate_title, "s from the step", "Mbit/s", rate)
                .vline(0.0)
                .y_max(cfg.step_from() as f64 / 1e6 * 1.6),
        );
    }
    plot::draw_stack(&out.file("steps.png"), &charts)
}

/// The step runs beside what DualPI2 aims at.
fn steps_section(r: &mut Report, cfg: &L4sConfig, runs: &[StepRun]) {
    if runs.is_empty() {
        return;
    }
    r.heading(2, "The link stepped down at mid-run").text(format!(
        "One flow alone, the link's rate cut from {} at {:.0} s \
         (htb's class and the switch's figure of the rate together). Queue delay = each arrival's backlog \
         over the link's rate then; peak = the largest 20 ms mean after the step, and the round trip a \
         packet then had (the flow's min RTT plus the peak); expected peak = the window the flow held \
         (the old rate times its min RTT plus the queue before) less the new BDP, at the new rate: what \
         a sender can queue before its first cut, at most the buffer; settled = the median 100 ms mean over the \
         last 40 % after the step; back = from the step to the end of the first 100 ms after the peak \
         whose mean is at most 25 % (or 1 ms) over that level. Rate after = the flow's goodput over the \
         last 40 % of the run over the new link's (its rate less the headers: 1448 of 1514 bytes). DualPI2 aims its C queue at {} and marks L from {} of queue, both times, so its levels hold \
         at the new rate; RED's thresholds are packets, set at the starting rate, so in time they grow \
         as the rate falls (5-15 ms at {} is twice that at half the rate).",
        fmt_rate(cfg.step_from()),
        cfg.duration.as_secs_f64() / 2.0,
        fmt_duration(cfg.dualpi2.target),
        step_thresh(&cfg.dualpi2),
        fmt_rate(cfg.step_from()),
    ));
    r.table(
        Columns::<StepRun>::new()
            .col("AQM", "", |r| Cell::text(r.aqm.name()))
            .col("sender", "", |r| Cell::text(&r.sender))
            .col("step", "", |r| {
                Cell::text(format!("{} -> {}", fmt_rate(r.response.from_bps), fmt_rate(r.response.to_bps)))
            })
            .col("queue before", "ms", |r| Cell::num(r.response.before_ms, 2))
            .col("peak", "ms", |r| Cell::num(r.response.peak_ms, 1))
            .col("expected peak", "ms", |r| Cell::num(r.expected_peak_ms, 1))
            .col("peak round trip", "ms", |r| Cell::num(r.base_rtt_ms + r.response.peak_ms, 1))
            .col("settled", "ms", |r| Cell::num(r.response.settled_ms, 2))
            .col("back at the level", "s", |r| r.response.back_s.map_or(Cell::text("never"), |v| Cell::num(v, 2)))
            .col("rate after / link", "", |r| Cell::pct(r.utilization_after, 1))
            .col("steal", "", |r| steal_cell(r.steal_share))
            .table(runs),
    )
    .text(repairs_line(runs.iter().map(|r| (r.label(), r.guard_repairs))));
}

/// DualPI2's step threshold: `1 ms`, or `30 packets`.
fn step_thresh(d: &Dualpi2) -> String {
    match d.step_thresh {
        tc_qdisc::dualpi2::Step::Time(t) => fmt_duration(t),
        tc_qdisc::dualpi2::Step::Packets(p) => format!("{p} packets"),
    }
}

/// DualPI2's parameters as tc-dualpi2(8) names them.
fn dualpi2_params(d: &Dualpi2) -> String {
    let step = step_thresh(d);
    format!(
        "target {}, tupdate {}, alpha {} Hz, beta {} Hz, step_thresh {step}, coupling_factor {}, \
         classic_protection {} %, {}",
        fmt_duration(d.target),
        fmt_duration(d.tupdate),
        d.alpha,
        d.beta,
        d.coupling_factor,
        d.classic_protection,
        if d.drop_overload {
            "drop_overload"
        } else {
            "overflow"
        }
    )
}

/// DualPI2's queues in one line: each queue's sojourn and what was done
/// to it.
fn queues_line(d: &Dualpi2Window) -> String {
    let q = |name: &str, w: &QueueWindow| {
        format!(
            "{name} sojourn p50 {:.2} p99 {:.2} p99.9 {:.2} mean {:.2} ms ({} pkts, {} stamped, {} marked, {} by the step, {} dropped)",
            w.sojourn_p50_ms,
            w.sojourn_p99_ms,
            w.sojourn_p999_ms,
            w.sojourn_mean_ms,
            w.departures,
            w.stamped,
            w.marked,
            w.step_marked,
            w.dropped + w.taildrop
        )
    };
    format!("{}; {}", q("L", &d.l), q("C", &d.c))
}

fn write_csv(out: &ResultsDir, runs: &[L4sRun]) -> Result<()> {
    let mut w = out.csv(
        "runs.csv",
        "rate_bps,aqm,scalable,classic,mix,scalable_mbps,classic_mbps,ratio,jain,queue_mean_ms,queue_p99_ms,\
         utilization,marks,drops,ce_fraction,steal_share,l_p50_ms,l_p99_ms,l_p999_ms,c_p50_ms,c_p99_ms,\
         c_mean_ms",
    )?;
    for r in runs {
        let queues = r.dualpi2.as_ref().map_or(",,,,,".to_string(), |d| {
            format!(
                "{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}",
                d.l.sojourn_p50_ms,
                d.l.sojourn_p99_ms,
                d.l.sojourn_p999_ms,
                d.c.sojourn_p50_ms,
                d.c.sojourn_p99_ms,
                d.c.sojourn_mean_ms
            )
        });
        writeln!(
            w,
            "{},{},{},{},{},{:.3},{:.3},{:.4},{:.4},{:.3},{:.3},{:.4},{},{},{:.4},{:.4},{queues}",
            r.rate_bps,
            r.aqm.name(),
            r.scalable,
            r.classic,
            r.mix.label(),
            r.scalable_mbps,
            r.classic_mbps,
            r.ratio,
            r.jain,
            r.queue_mean_ms,
            r.queue_p99_ms,
            r.utilization,
            r.marks,
            r.drops,
            r.ce_fraction,
            r.steal_share
        )?;
    }
    Ok(())
}

/// The rate ratio per mix on a log axis, one chart per rate, one series
/// per AQM; the band RFC 9331 aims at behind a classic AQM (0.5-2)
/// marked.
fn plot_ratios(out: &ResultsDir, cfg: &L4sConfig, runs: &[L4sRun]) -> Result<()> {
    let slots = cfg.slots();
    // The sender beside the mix where a mix runs with several.
    let names: Vec<String> = slots
        .iter()
        .map(
            |(m, s)| match m.sender.is_none() && cfg.scalable.len() > 1 {
                true => format!("{} {s}", m.label()),
                false => m.label(),
            },
        )
        .collect();
    let x = format!(
        "mix (scalable:classic[:sender][@round trips]); scalable sender {}",
        cfg.scalable.join(", ")
    );
    let titles: Vec<(u64, String)> = cfg
        .rates
        .iter()
        .map(|&rate| {
            let title = format!(
                "Rate per flow, scalable / {}, {} at {}",
                cfg.classic,
                fmt_rate(rate),
                rtts(&cfg.rtt)
            );
            (rate, title)
        })
        .collect();
    let mut charts = Vec::new();
    for (rate, title) in &titles {
        let series = cfg
            .aqms
            .iter()
            .map(|&aqm| Series {
                name: aqm.name().to_string(),
                points: slots
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (mix, sender))| {
                        runs.iter()
                            .find(|r| {
                                r.rate_bps == *rate
                                    && r.aqm == aqm
                                    && &r.mix == mix
                                    && &r.scalable == sender
                            })
                            .map(|r| (i as f64, r.ratio.max(1e-3).log2()))
                    })
                    .collect(),
            })
            .collect();
        // On a log axis: 1/2 and 2 as far from an equal share, starvation
        // (ratios of 10-40) in view without squeezing the band.
        charts.push(
            Chart::new(title, &x, "scalable / classic rate per flow", series)
                .x_categories(names.clone())
                .points()
                .log2_y()
                .hline(-1.0, "1/2".into())
                .hline(0.0, "equal share".into())
                .hline(1.0, "2x".into()),
        );
    }
    plot::draw_stack(&out.file("ratio.png"), &charts)
}

/// Per rate and AQM, a flow's mean rate over time in each class, one
/// series per mix and class: who takes the link, and how soon.
fn plot_rates(out: &ResultsDir, cfg: &L4sConfig, runs: &[L4sRun]) -> Result<()> {
    let mut titles: Vec<(u64, Aqm, String)> = Vec::new();
    for &rate in &cfg.rates {
        for &a in &cfg.aqms {
            let title = format!(
                "{}: rate per flow of each class (100 ms means), {} at {}",
                a.name(),
                fmt_rate(rate),
                rtts(&cfg.rtt)
            );
            titles.push((rate, a, title));
        }
    }
    let mut charts = Vec::new();
    for (rate, aqm, title) in &titles {
        let series: Vec<Series> = runs
            .iter()
            .filter(|r| r.aqm == *aqm && r.rate_bps == *rate)
            .flat_map(|r| {
                [(&r.scalable, 0), (&r.classic, 1)].map(|(cc, i)| Series {
                    name: format!("{} {cc}", r.mix.label()),
                    points: r.class_rates[i].clone(),
                })
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        charts.push(
            Chart::new(title, "s from the start", "Mbit/s per flow", series)
                .vline(cfg.warmup.as_secs_f64())
                .y_max(*rate as f64 / 1e6 * 1.3),
        );
    }
    if charts.is_empty() {
        return Ok(());
    }
    plot::draw_stack(&out.file("rates.png"), &charts)
}

/// DualPI2's sojourn CDF per queue, one chart per rate, one series per
/// run through it, on a log axis (L in tens of microseconds, C near the
/// target).
fn plot_sojourn(out: &ResultsDir, cfg: &L4sConfig, runs: &[L4sRun]) -> Result<()> {
    // One chart per rate and queue: L's curves rise at tens of
    // microseconds, C's near the target, so each chart's legend has a side
    // of its own to sit on.
    let mut titles: Vec<(u64, usize, String)> = Vec::new();
    for &rate in &cfg.rates {
        for (i, q) in ["L", "C"].iter().enumerate() {
            let title = format!(
                "DualPI2: sojourn in the {q} queue, {} at {}",
                fmt_rate(rate),
                rtts(&cfg.rtt)
            );
            titles.push((rate, i, title));
        }
    }
    let target = cfg.dualpi2.target.as_secs_f64() * 1e3;
    let mut charts = Vec::new();
    for (rate, queue, title) in &titles {
        let series: Vec<Series> = runs
            .iter()
            .filter(|r| r.rate_bps == *rate)
            .filter_map(|r| r.dualpi2.as_ref().map(|d| (r, [&d.l, &d.c][*queue])))
            .map(|(r, w)| Series {
                name: format!("{} {}", r.scalable, r.mix.label()),
                points: w.cdf_ms().into_iter().map(|(ms, f)| (ms.log2(), f)).collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        charts.push(
            Chart::new(title, "sojourn (ms)", "share of packets at or under", series)
                .log2_x()
                .vline(target.log2())
                .y_max(1.0),
        );
    }
    if charts.is_empty() {
        return Ok(());
    }
    plot::draw_stack(&out.file("sojourn.png"), &charts)
}

/// A figure at each of --rates: `83 packets at 50 Mbit/s, 17 at ...`.
fn per_rate(cfg: &L4sConfig, figure: impl Fn(u64) -> String) -> String {
    cfg.rates
        .iter()
        .map(|&r| format!("{} at {}", figure(r), fmt_rate(r)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One row per run of the long flows.
fn runs_table(runs: &[L4sRun]) -> Table {
    Columns::<L4sRun>::new()
        .col("rate", "", |r| Cell::text(fmt_rate(r.rate_bps)))
        .col("AQM", "", |r| Cell::text(r.aqm.name()))
        .col("scalable", "", |r| Cell::text(&r.scalable))
        .col("mix", "", |r| Cell::text(r.mix.label()))
        .col("scalable per flow", "Mbit/s", |r| Cell::num(r.scalable_mbps, 2))
        .col("classic per flow", "Mbit/s", |r| Cell::num(r.classic_mbps, 2))
        .col("ratio", "", |r| Cell::num(r.ratio, 2))
        .col("Jain", "", |r| Cell::num(r.jain, 3))
        .col("queue mean", "ms", |r| Cell::num(r.queue_mean_ms, 1))
        .col("queue p99", "ms", |r| Cell::num(r.queue_p99_ms, 1))
        .col("utilization", "", |r| Cell::pct(r.utilization, 1))
        .col("steal", "", |r| steal_cell(r.steal_share))
        .col("marks", "", |r| Cell::int(r.marks))
        .col("drops", "", |r| Cell::int(r.drops))
        .table(runs)
}

fn report(cfg: &L4sConfig, runs: &[L4sRun], short_runs: &[short::ShortRun], step_runs: &[StepRun]) -> Report {
    let mut r = Report::new("Scalable and classic TCP through one queue (L4S, seed 002)");
    r.text(format!(
        "Bottleneck at {}; {} round trip (BDP {}) but where a mix names its own (`@`); buffer {} packets; \
         every sender negotiates ECN but the classic ones behind dual. \
         {:.0} s per run, the first {:.0} s not measured. AQMs: dualpi2 = RFC 9332's coupled dual queue \
         (bpf-dualpi2: {}); dual = seed 002's dual AQM on one queue at Table I's M = BDP / 4, K = 1.73 M \
         (ECN-capable packets marked at K, Not-ECT ones dropped by RED from M to 3 M; classic senders Not-ECT \
         there, as the seed's Reno); rfc3168 = RED on the average queue from 5 to 15 ms ({}), at most 1 in 10; \
         step = every ECN-capable packet marked from 1 ms of queue, at least 2 packets ({}); \
         droptail. Rate = a flow's goodput over the measured window; ratio = a scalable flow's mean rate over a \
         classic flow's (1: equal shares; RFC 9331's goal behind a classic ECN AQM, 0.5-2; in a mix of one \
         class, its first flow's over its last's).",
        cfg.rates.iter().map(|&r| fmt_rate(r)).collect::<Vec<_>>().join(" and "),
        rtts(&cfg.rtt),
        per_rate(cfg, |r| format!("{:.0} packets", bdp_pkts(r, cfg.rtt.of(0)))),
        cfg.buffer_pkts,
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        dualpi2_params(&cfg.dualpi2),
        per_rate(cfg, |r| format!("{}-{} packets", pkts_in(5.0, r), pkts_in(15.0, r))),
        per_rate(cfg, |r| format!("{} packets", pkts_in(1.0, r).max(2))),
    ));
    if let Some(slot) = cfg.slot {
        r.text(format!(
            "Bursty arrivals (`--slot`): the ACK path releases in slots, one every {}, at most {} of a \
             sender's ACKs per slot (netem's `slot`), so each sender sends, and the bottleneck receives, \
             in bursts.",
            fmt_duration(Duration::from_nanos(slot.interval_ns)),
            slot.packets
        ));
    }
    // runs.csv stays `write_csv`'s: it carries each queue's sojourn
    // percentiles and the CE share as well.
    r.table(runs_table(runs));
    let within: Vec<String> = runs
        .iter()
        .filter(|r| r.aqm == Aqm::Rfc3168)
        .map(|r| {
            let verdict = if (0.5..=2.0).contains(&r.ratio) { "within 0.5-2" } else { "outside 0.5-2" };
            format!("{} {} {}: {:.2} ({verdict})", fmt_rate(r.rate_bps), r.scalable, r.mix.label(), r.ratio)
        })
        .collect();
    if !within.is_empty() {
        r.text(format!(
            "Behind the classic ECN AQM (rfc3168), rate per scalable flow over a classic one's: {}.",
            within.join("; ")
        ));
    }
    dualpi2_section(&mut r, cfg, runs);
    r.markdown(summary_lines(runs.iter().map(|r| (r.label(), &r.rtt))))
        .text(repairs_line(runs.iter().map(|r| (r.label(), r.guard_repairs))));
    short::section(&mut r, cfg, short_runs);
    steps_section(&mut r, cfg, step_runs);
    let mut figs = vec![
        Figure::new("ratio.png", "The rate ratio of each mix behind each AQM"),
        Figure::new("rates.png", "Each class's rate over the run"),
    ];
    if runs.iter().any(|r| r.dualpi2.is_some()) {
        figs.push(Figure::new("sojourn.png", "DualPI2: each queue's sojourn"));
    }
    if !short_runs.is_empty() {
        figs.push(Figure::new("fct.png", "The short flows' completion times, each class's CDF per AQM"));
    }
    if !step_runs.is_empty() {
        figs.push(Figure::new("steps.png", "The queue and the rate around the step, each AQM"));
    }
    r.heading(2, "Plots").figures(figs);
    r
}

/// DualPI2's queues per run, and RFC 9332's goals beside what was measured.
fn dualpi2_section(r: &mut Report, cfg: &L4sConfig, runs: &[L4sRun]) {
    let dual: Vec<(&L4sRun, &Dualpi2Window)> = runs
        .iter()
        .filter_map(|r| r.dualpi2.as_ref().map(|d| (r, d)))
        .collect();
    if dual.is_empty() {
        return;
    }
    let target_ms = cfg.dualpi2.target.as_secs_f64() * 1e3;
    let signed = |v: f64| Cell::text(format!("{v:+.2}"));
    r.heading(2, "DualPI2's two queues")
        .text(
            "Sojourn of every departing packet (the dequeue tracepoint, from its \
             enqueue time; 32.8 us buckets). Marks: C by p'^2, L by k p' or by the step (the step's share in \
             brackets). The marker estimates each arrival's sojourn as its queue's backlog over the link rate; \
             its error against the measured sojourn is the last column (mean |error|, and the bias).",
        )
        .table(
            Columns::<(&L4sRun, &Dualpi2Window)>::new()
                .col("rate", "", |(r, _)| Cell::text(fmt_rate(r.rate_bps)))
                .col("scalable", "", |(r, _)| Cell::text(&r.scalable))
                .col("mix", "", |(r, _)| Cell::text(r.mix.label()))
                .col("L sojourn p50", "ms", |(_, d)| Cell::num(d.l.sojourn_p50_ms, 2))
                .col("p99", "ms", |(_, d)| Cell::num(d.l.sojourn_p99_ms, 2))
                .col("p99.9", "ms", |(_, d)| Cell::num(d.l.sojourn_p999_ms, 2))
                .col("C sojourn p50", "ms", |(_, d)| Cell::num(d.c.sojourn_p50_ms, 2))
                .col("p99", "ms", |(_, d)| Cell::num(d.c.sojourn_p99_ms, 2))
                .col("mean", "ms", |(_, d)| Cell::num(d.c.sojourn_mean_ms, 2))
                .col("L marks (step)", "", |(_, d)| {
                    Cell::text(format!("{} ({})", d.l.marked + d.l.step_marked, d.l.step_marked))
                })
                .col("C marks", "", |(_, d)| Cell::int(d.c.marked))
                .col("drops L", "", |(_, d)| Cell::int(d.l.dropped + d.l.taildrop))
                .col("drops C", "", |(_, d)| Cell::int(d.c.dropped + d.c.taildrop))
                .col("estimate error L", "ms", |(_, d)| Cell::num(d.l.estimate_error_ms, 2))
                .col("bias L", "ms", move |(_, d)| signed(d.l.estimate_bias_ms))
                .col("estimate error C", "ms", |(_, d)| Cell::num(d.c.estimate_error_ms, 2))
                .col("bias C", "ms", move |(_, d)| signed(d.c.estimate_bias_ms))
                .table(&dual),
        )
        .text("RFC 9332's goals, each run through DualPI2:");
    let mut goals = String::new();
    for (r, d) in &dual {
        let held = |ok: bool| if ok { "holds" } else { "does not hold" };
        // RFC 9332 asks for similar rates of one flow of each class at
        // equal round trips; elsewhere the ratio is only reported. A
        // queue nothing arrived at has no figure to hold a goal to.
        let ratio_goal = if r.mix.scalable == 1 && r.mix.classic == 1 && r.mix.rtt.is_none() {
            held((0.5..=2.0).contains(&r.ratio))
        } else {
            "no goal for this mix"
        };
        let queue = |w: &QueueWindow, figure: &str, v: f64, goal: &str, ok: bool| {
            if w.arrivals == 0 {
                format!("{figure}: nothing arrived there")
            } else {
                format!("{figure} {v:.2} ms against {goal} ({})", held(ok))
            }
        };
        let _ = writeln!(
            goals,
            "- {} {} {}: {}; {}; rate ratio {:.2} against 0.5-2 ({}); utilization {:.1} % against 95 % ({}).",
            fmt_rate(r.rate_bps),
            r.scalable,
            r.mix.label(),
            queue(&d.l, "L p99", d.l.sojourn_p99_ms, "under 2 ms", d.l.sojourn_p99_ms < 2.0),
            queue(
                &d.c,
                "C mean",
                d.c.sojourn_mean_ms,
                &format!("the {target_ms:.0} ms target +/- 20 %"),
                (d.c.sojourn_mean_ms - target_ms).abs() <= 0.2 * target_ms
            ),
            r.ratio,
            ratio_goal,
            r.utilization * 100.0,
            held(r.utilization >= 0.95),
        );
    }
    r.markdown(goals);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_is_written_as_its_label_and_read_back() {
        for label in ["1:4", "1:1:bpf_dctcp", "2:0@10ms/80ms"] {
            let mix = Mix::parse(label).unwrap();
            let json = serde_json::to_string(&mix).unwrap();
            assert_eq!(json, format!("\"{label}\""));
            assert_eq!(serde_json::from_str::<Mix>(&json).unwrap(), mix);
        }
        assert!(serde_json::from_str::<Mix>("\"1\"").is_err());
    }

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<L4sArgs>("l4s").config();
        let runs: Vec<L4sRun> = recorded::data("l4s", "runs.json");
        let shorts: Vec<short::ShortRun> = recorded::data("l4s", "shorts.json");
        let steps: Vec<StepRun> = recorded::data("l4s", "steps.json");
        recorded::assert_same_figures("l4s", &report(&cfg, &runs, &shorts, &steps), &[]);
    }

    fn cfg() -> L4sConfig {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: L4sArgs,
        }
        Cli::parse_from(["lab", "--quick"]).args.config()
    }

    #[test]
    fn the_aqms_thresholds_are_times_at_the_rate() {
        // 50 Mbit/s: a 1514-byte packet every 242 us.
        assert_eq!(pkts_in(5.0, 50_000_000), 21);
        assert_eq!(pkts_in(15.0, 50_000_000), 62);
        let (rtt, d) = (Duration::from_millis(20), Dualpi2::default());
        assert_eq!(
            Aqm::Rfc3168.backend(50_000_000, rtt, &d),
            Backend::BpfRed {
                min: 21,
                max: 62,
                max_p: 0.1,
                wlog: 9
            }
        );
        assert_eq!(
            Aqm::Step.backend(50_000_000, rtt, &d),
            Backend::BpfStep { k: 4 }
        );
        // A step never below 2 packets.
        assert_eq!(
            Aqm::Step.backend(1_000_000, rtt, &d),
            Backend::BpfStep { k: 2 }
        );
        // Seed 002's Table I row at 50 Mbit/s, 20 ms: BDP 125,000 bytes,
        // M = 31,250, K = 1.73 M = 54,063; Reno's RED from M to 3 M.
        let Backend::BpfDual { ect, not_ect } = Aqm::Dual.backend(50_000_000, rtt, &d) else {
            panic!()
        };
        assert_eq!(
            (ect.min_bytes, ect.max_bytes, ect.weight),
            (54_063, 54_063, 1.0)
        );
        assert_eq!(
            (not_ect.min_bytes, not_ect.max_bytes, not_ect.max_p),
            (31_250, 93_750, 0.1)
        );
        assert_eq!(
            Aqm::Dualpi2.backend(50_000_000, rtt, &d),
            Backend::BpfDualpi2(d.clone())
        );
    }

    fn point(aqm: Aqm, mix: &str) -> Point {
        Point {
            rate_bps: 50_000_000,
            aqm,
            scalable: "bpf_prague".into(),
            mix: Mix::parse(mix).unwrap(),
        }
    }

    #[test]
    fn a_mix_puts_the_scalable_senders_first() {
        let c = cfg();
        let scn = scenario(&c, &point(Aqm::Step, "2:3"), "dl9", "x");
        let ccs: Vec<&str> = scn.flows.iter().map(|f| f.cc.as_str()).collect();
        assert_eq!(ccs, ["dl9", "dl9", "cubic", "cubic", "cubic"]);
        let senders: Vec<usize> = scn.flows.iter().map(|f| f.sender).collect();
        assert_eq!(senders, [0, 1, 2, 3, 4]);
        assert!(scn.no_ecn_senders.is_empty());
        // Behind seed 002's AQM the classic senders are Not-ECT, as its Reno.
        let dual = scenario(&c, &point(Aqm::Dual, "2:3"), "dl9", "x");
        assert_eq!(dual.no_ecn_senders, [2, 3, 4]);
        assert_eq!(c.duration, Duration::from_secs(12));
        assert_eq!(c.warmup, Duration::from_secs(4));
    }

    /// 50 -> 25 Mbit/s at 20 ms with 0.4 ms of queue: 20.4 ms of the old
    /// rate is 40.8 ms of the new, less its 20 ms BDP; capped by the buffer.
    #[test]
    fn the_expected_peak_is_the_old_window_less_the_new_bdp() {
        let r = StepResponse {
            from_bps: 50_000_000,
            to_bps: 25_000_000,
            before_ms: 0.4,
            ..Default::default()
        };
        assert!((expected_peak_ms(&r, 20.0, 425) - 20.8).abs() < 1e-9);
        // 425 packets at 5 Mbit/s are 1.03 s: 50 -> 5 at 200 ms fills it.
        let deep = StepResponse {
            to_bps: 5_000_000,
            ..r.clone()
        };
        assert!((expected_peak_ms(&deep, 200.0, 425) - 425.0 * 1514.0 * 8e3 / 5e6).abs() < 1e-9);
        // A step up queues nothing.
        let up = StepResponse {
            to_bps: 100_000_000,
            ..r
        };
        assert_eq!(expected_peak_ms(&up, 20.0, 425), 0.0);
    }

    /// Two scalable flows (2:0): the ratio is the first's rate over the
    /// last's.
    #[test]
    fn a_mix_of_one_class_compares_its_first_flow_with_its_last() {
        let c = cfg();
        let o = Outcome {
            goodput_bps: vec![30e6, 10e6],
            ..Default::default()
        };
        let r = L4sRun::of(&c, &point(Aqm::Dualpi2, "2:0"), &o);
        assert!((r.ratio - 3.0).abs() < 1e-12, "{}", r.ratio);
        assert_eq!(r.classic_mbps, 0.0);
    }

    #[test]
    fn a_run_splits_its_rates_by_class() {
        let c = cfg();
        let o = Outcome {
            goodput_bps: vec![30e6, 5e6, 15e6],
            ..Default::default()
        };
        let r = L4sRun::of(&c, &point(Aqm::Rfc3168, "1:2"), &o);
        assert_eq!(r.label(), "50 Mbit/s rfc3168 1:2 bpf_prague:cubic");
        assert_eq!((r.scalable_mbps, r.classic_mbps), (30.0, 10.0));
        assert!((r.ratio - 3.0).abs() < 1e-12);
        assert!(r.jain < 0.9);
    }

    /// A class's rate over time: each interval's bytes over its length,
    /// per flow, as far as every flow's series goes.
    #[test]
    fn a_class_rate_is_each_intervals_bytes_per_flow() {
        use crate::traffic::bulk::FlowResult;
        let flow = |series: Vec<u64>| FlowResult {
            series,
            series_end_s: vec![0.5, 1.5, 2.5],
            ..Default::default()
        };
        // 5 MB in the first 0.5 s over two flows: 80 Mbit/s, 40 each; then
        // 2.5 MB in a second: 10 each.
        let two = [flow(vec![1_250_000, 2_500_000, 9]), flow(vec![3_750_000, 0])];
        assert_eq!(class_rate(&two), [(0.5, 40.0), (1.5, 10.0)]);
        assert!(class_rate(&[]).is_empty());
    }

    /// A step run is named by its AQM, its sender and the two rates.
    #[test]
    fn a_step_run_is_named_by_aqm_sender_and_rates() {
        let run = StepRun {
            aqm: Aqm::Dualpi2,
            sender: "prague".into(),
            response: StepResponse {
                from_bps: 50_000_000,
                to_bps: 25_000_000,
                ..Default::default()
            },
            base_rtt_ms: 0.0,
            expected_peak_ms: 0.0,
            utilization_after: 0.0,
            rate_series: vec![],
            steal_share: 0.0,
            guard_repairs: Repairs::default(),
        };
        assert_eq!(run.label(), "dualpi2 prague 50 Mbit/s->25 Mbit/s");
    }

    /// The default plan: six mixes through five AQMs at two rates, each
    /// mix with its own sender run once, its own round trips in its
    /// scenario and in its label.
    #[test]
    fn the_default_mixes_name_their_senders_and_round_trips() {
        let c = cfg();
        let mix = |s: &str| Mix::parse(s).unwrap();
        assert_eq!(
            c.mixes.iter().map(Mix::label).collect::<Vec<_>>(),
            [
                "1:1",
                "1:4",
                "4:1",
                "2:0@10ms/80ms",
                "1:1:bpf_dctcp",
                "1:1:cubic"
            ]
        );
        assert_eq!(c.rates, [50_000_000, 10_000_000]);
        let points = c.points();
        assert_eq!(points.len(), 2 * 5 * 6);
        assert_eq!(
            points[0].label("cubic"),
            "50 Mbit/s dualpi2 1:1 bpf_prague:cubic"
        );
        assert_eq!(
            points[59].label("cubic"),
            "10 Mbit/s droptail 1:1:cubic cubic:cubic"
        );
        // Two --scalable: each mix without a sender of its own runs twice.
        let two = L4sConfig {
            scalable: vec!["bpf_prague".into(), "bpf_prague+classic_ecn=1".into()],
            ..c.clone()
        };
        let senders: Vec<String> = two
            .slots()
            .into_iter()
            .map(|(m, s)| format!("{} {s}", m.label()))
            .collect();
        assert_eq!(senders.len(), 10);
        assert_eq!(senders[8..], ["1:1:bpf_dctcp bpf_dctcp", "1:1:cubic cubic"]);
        // The mix's round trips over --rtt, in its scenario and the dual
        // AQM's BDP (the first flow's).
        let p = point(Aqm::Dual, "2:0@10ms/80ms");
        let scn = scenario(&c, &p, "dl9", "x");
        let rt = scn.round_trip.unwrap().rtt;
        assert_eq!(rt.0, [Duration::from_millis(10), Duration::from_millis(80)]);
        let Backend::BpfDual { not_ect, .. } = scn.bottleneck.backend else {
            panic!()
        };
        assert_eq!(not_ect.min_bytes, 15_625, "M = BDP / 4 at 10 ms");
        assert_eq!(mix("1:1:bpf_dctcp").sender.as_deref(), Some("bpf_dctcp"));
        assert_eq!(
            serde_json::to_value(mix("2:0@10ms/80ms")).unwrap(),
            "2:0@10ms/80ms"
        );
        assert_eq!(queue_ms(10.0, 10_000_000), 10.0 * 1514.0 * 8.0 / 1e4);
        // --slot reaches every run's round trip, the step runs' too.
        let slotted = L4sConfig {
            slot: Some(parse_slot("4ms:8").unwrap()),
            ..c.clone()
        };
        let rt = scenario(&slotted, &point(Aqm::Step, "1:1"), "dl9", "x").round_trip.unwrap();
        assert_eq!((rt.slot, rt.rtt), (slotted.slot, slotted.rtt.clone()));
        let step = step_scenario(&slotted, Aqm::Dualpi2, "dl9", 25_000_000, "x");
        assert_eq!(step.round_trip.unwrap().slot, slotted.slot);
        assert_eq!(step.bottleneck.rate_bps, 50_000_000);
        assert_eq!(
            step.rate_schedule,
            RateSchedule::step(Duration::from_secs(6), 25_000_000),
            "the step at mid-run"
        );
    }

    #[test]
    fn bad_input_is_refused_by_name() {
        let mix = |s: &str| Mix::parse(s);
        assert!(mix("1").unwrap_err().contains("scalable:classic"));
        assert!(mix("a:1").unwrap_err().contains("`a` is not a flow count"));
        assert!(mix("1:1:")
            .unwrap_err()
            .contains("name the scalable sender"));
        assert!(mix("2:0@10ms/fast")
            .unwrap_err()
            .contains("round trips `10ms/fast`"));
        assert!(mix("2:0@none").unwrap_err().contains("needs a round trip"));
        let base = cfg();
        let cases = vec![
            (
                L4sConfig {
                    mixes: vec![Mix::counts(0, 1)],
                    ..base.clone()
                },
                "two flows at least",
            ),
            (
                L4sConfig {
                    rtt: Rtt::parse("10ms,80ms").unwrap(),
                    mixes: vec![Mix::parse("1:2").unwrap()],
                    steps: vec![],
                    ..base.clone()
                },
                "2 round trips for 3 senders",
            ),
            (
                L4sConfig {
                    rtt: Rtt::parse("10ms,80ms").unwrap(),
                    mixes: vec![Mix::parse("2:0").unwrap()],
                    ..base.clone()
                },
                "add --steps none",
            ),
            (
                L4sConfig {
                    mixes: vec![Mix::parse("1:2@10ms/80ms").unwrap()],
                    steps: vec![],
                    ..base.clone()
                },
                "2 round trips for 3 senders",
            ),
            (
                L4sConfig {
                    mixes: vec![Mix::parse("1:1:prague").unwrap()],
                    ..base.clone()
                },
                "prague",
            ),
            (
                L4sConfig {
                    rates: vec![],
                    ..base.clone()
                },
                "--rates",
            ),
            (
                L4sConfig {
                    rtt: Rtt::parse("10ms,80ms").unwrap(),
                    mixes: vec![Mix::parse("2:0").unwrap()],
                    steps: vec![],
                    ..base.clone()
                },
                "add --short-per-second 0",
            ),
            (
                L4sConfig {
                    step_senders: vec![],
                    ..base.clone()
                },
                "give --step-senders",
            ),
            (
                L4sConfig {
                    rates: vec![50_000_000, 10_000_000],
                    rate_schedule: RateSchedule::parse("0s:50M,4s:25M").unwrap(),
                    ..base.clone()
                },
                "give one rate in --rates",
            ),
            (
                L4sConfig {
                    rates: vec![10_000_000, 50_000_000],
                    ..base.clone()
                },
                "a step goes down from the first of --rates, 10",
            ),
            (
                L4sConfig {
                    classic: "bpf_dctcp".into(),
                    ..base.clone()
                },
                "a kernel algorithm",
            ),
            (
                L4sConfig {
                    duration: Duration::from_secs(3),
                    ..base.clone()
                },
                "at least 6 s",
            ),
            (
                L4sConfig {
                    aqms: vec![],
                    ..base.clone()
                },
                "--aqms",
            ),
        ];
        crate::experiments::assert_each_refused(cases, L4sConfig::validate);
        // What those refusals name, once left out, is taken.
        for ok in [
            base.clone(),
            L4sConfig {
                rtt: Rtt::parse("10ms,80ms").unwrap(),
                mixes: vec![Mix::parse("2:0").unwrap()],
                steps: vec![],
                short_per_second: 0.0,
                ..base.clone()
            },
            L4sConfig {
                steps: vec![],
                step_senders: vec![],
                ..base.clone()
            },
        ] {
            ok.validate().unwrap();
        }
    }
}
