//! `lab l4s`'s short-flow case: beside one long flow of each class, short
//! transfers of each class, each from a sender of its own, arriving at
//! random; their completion times per class and AQM. What a queue costs a
//! user shows here: a short transfer lives a few round trips, each of them
//! stretched by the queue its class waits in.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Aqm, L4sConfig, Mix, Point};
use crate::measure::scenario::{Outcome, RunData, Scenario};
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::model::{Cell, Columns, Fmt, Report};
use crate::report::tables::{repairs_line, steal_cell, Repairs};
use crate::traffic::shortflows::{FctSummary, ShortFlow, ShortFlowSpec};
use crate::units::fmt_rate;

/// Short transfers' sizes, bytes, uniform between the two: `10000-100000`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizes {
    pub min: u64,
    pub max: u64,
}

impl Sizes {
    pub fn parse(s: &str) -> Result<Sizes, String> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("--short-sizes {s}: give MIN-MAX bytes, e.g. 10000-100000"))?;
        let n = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("--short-sizes {s}: `{v}` is not a byte count"))
        };
        Ok(Sizes {
            min: n(a)?,
            max: n(b)?,
        })
    }
}

/// The mix the short flows run beside: one long flow of each class.
pub fn long_mix() -> Mix {
    Mix::counts(1, 1)
}

/// The short-flow generators of a run: the scalable class's from sender
/// 2, the classic class's from sender 3 (the long flows hold 0 and 1).
fn specs(cfg: &L4sConfig, scalable_cc: &str) -> [ShortFlowSpec; 2] {
    let spec = |sender: usize, cc: &str, seed: u64| ShortFlowSpec {
        sender,
        cc: cc.to_string(),
        per_second: cfg.short_per_second,
        min_bytes: cfg.short_sizes.min,
        max_bytes: cfg.short_sizes.max,
        start_after: cfg.warmup,
        seed,
    };
    [spec(2, scalable_cc, 1), spec(3, &cfg.classic, 2)]
}

/// The checks `L4sConfig::validate` makes of the short-flow case.
pub fn validate(cfg: &L4sConfig) -> Result<()> {
    if cfg.short_per_second == 0.0 {
        return Ok(());
    }
    anyhow::ensure!(
        !cfg.short_aqms.is_empty(),
        "--short-per-second: give --short-aqms, or --short-per-second 0"
    );
    for s in specs(cfg, "x") {
        s.validate()?;
    }
    Ok(())
}

/// The runs of the short-flow case, one per AQM, at the first rate with
/// the first --scalable.
pub fn points(cfg: &L4sConfig) -> Vec<Point> {
    if cfg.short_per_second == 0.0 {
        return Vec::new();
    }
    cfg.short_aqms
        .iter()
        .map(|&aqm| Point {
            rate_bps: cfg.step_from(),
            aqm,
            scalable: cfg.scalable[0].clone(),
            mix: long_mix(),
        })
        .collect()
}

/// A short-flow run's name: `50 Mbit/s dualpi2 short flows`.
pub fn label(rate_bps: u64, aqm: Aqm) -> String {
    format!("{} {} short flows", fmt_rate(rate_bps), aqm.name())
}

/// A short-flow run's scenario: the long mix's, with a generator per class.
pub fn scenario(cfg: &L4sConfig, p: &Point, scalable_cc: &str, label: &str) -> Scenario {
    let mut scn = super::scenario(cfg, p, scalable_cc, label);
    scn.short_flows = specs(cfg, scalable_cc).to_vec();
    // Behind seed 002's AQM the classic class is Not-ECT, its short flows too.
    if p.aqm == Aqm::Dual {
        scn.no_ecn_senders.push(3);
    }
    scn
}

/// One class's short flows in one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassFct {
    pub sender: String,
    pub fct: FctSummary,
    /// Every flow, for the CDF and shorts.csv.
    #[serde(skip)]
    pub flows: Vec<ShortFlow>,
}

/// One AQM's short-flow run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShortRun {
    pub rate_bps: u64,
    pub aqm: Aqm,
    /// The scalable class's short flows, then the classic class's.
    pub classes: [ClassFct; 2],
    /// The long flows' rates, scalable then classic, Mbit/s.
    pub long_mbps: Vec<f64>,
    pub queue_mean_ms: f64,
    pub utilization: f64,
    pub marks: u64,
    pub drops: u64,
    pub steal_share: f64,
    pub guard_repairs: Repairs,
}

impl ShortRun {
    pub fn of(cfg: &L4sConfig, p: &Point, data: &RunData) -> ShortRun {
        let o: &Outcome = &data.outcome;
        let class = |i: usize, sender: &str| ClassFct {
            sender: sender.to_string(),
            fct: o.short_fct.get(i).cloned().unwrap_or_default(),
            flows: data.short.get(i).cloned().unwrap_or_default(),
        };
        ShortRun {
            rate_bps: p.rate_bps,
            aqm: p.aqm,
            classes: [class(0, &p.scalable), class(1, &cfg.classic)],
            long_mbps: o.goodput_bps.iter().map(|g| g / 1e6).collect(),
            queue_mean_ms: super::queue_ms(o.queue.mean, p.rate_bps),
            utilization: o.utilization,
            marks: o.marks,
            drops: o.drops,
            steal_share: o.steal_share,
            guard_repairs: o.guard_repairs,
        }
    }

    pub fn label(&self) -> String {
        label(self.rate_bps, self.aqm)
    }

    /// One line for the console.
    pub fn line(&self) -> String {
        let class = |c: &ClassFct| {
            format!(
                "{} {}/{} done, FCT p50 {:.1} p99 {:.1} ms",
                c.sender,
                c.fct.completed,
                c.fct.started,
                c.fct.fct_us.p50 / 1e3,
                c.fct.fct_us.p99 / 1e3
            )
        };
        format!(
            "{}: {}; {}; queue {:.1} ms, marks {}, drops {}",
            self.label(),
            class(&self.classes[0]),
            class(&self.classes[1]),
            self.queue_mean_ms,
            self.marks,
            self.drops
        )
    }
}

/// shorts.csv: every short flow of every run.
pub fn write_csv(out: &ResultsDir, runs: &[ShortRun]) -> Result<()> {
    let mut w = out.csv(
        "shorts.csv",
        "rate_bps,aqm,class,sender,start_s,bytes,fct_us",
    )?;
    for r in runs {
        for (class, c) in ["scalable", "classic"].iter().zip(&r.classes) {
            for f in &c.flows {
                writeln!(
                    w,
                    "{},{},{class},{},{:.4},{},{}",
                    r.rate_bps,
                    r.aqm.name(),
                    c.sender,
                    f.start_s,
                    f.bytes,
                    f.fct_us.map_or(String::new(), |u| u.to_string())
                )?;
            }
        }
    }
    Ok(())
}

/// fct.png: each class's completion-time CDF per AQM, on a log axis.
pub fn plot(out: &ResultsDir, cfg: &L4sConfig, runs: &[ShortRun]) -> Result<()> {
    let series: Vec<Series> = runs
        .iter()
        .flat_map(|r| {
            r.classes.iter().map(move |c| {
                let mut ms: Vec<f64> = c
                    .flows
                    .iter()
                    .filter_map(|f| f.fct_us)
                    .map(|u| u as f64 / 1e3)
                    .collect();
                ms.sort_by(f64::total_cmp);
                let n = ms.len().max(1) as f64;
                Series {
                    name: format!("{} {}", r.aqm.name(), c.sender),
                    points: ms
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (v.max(1e-3).log2(), (i + 1) as f64 / n))
                        .collect(),
                }
            })
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    let title = format!(
        "Short flows' completion time per class, {} at {}, {}-{} bytes, {}/s each",
        fmt_rate(cfg.step_from()),
        super::rtts(&cfg.rtt),
        cfg.short_sizes.min,
        cfg.short_sizes.max,
        cfg.short_per_second
    );
    let chart = Chart::new(
        &title,
        "completion time (ms)",
        "share of flows done by then",
        series,
    )
    .log2_x()
    .y_max(1.0);
    plot::draw(&out.file("fct.png"), &chart)
}

/// The summary's section: per AQM, each class's completion times.
pub fn section(r: &mut Report, cfg: &L4sConfig, runs: &[ShortRun]) {
    if runs.is_empty() {
        return;
    }
    r.heading(2, "Short flows beside the long ones").text(format!(
        "Beside one long flow of each class ({} and {}) at {}, \
         short transfers of each class, each class from a sender of its own: {} per second per class \
         (Poisson, from {:.0} s), {}-{} bytes (uniform). Completion time = from connect() to the \
         receiver's one-byte answer after the last byte: the handshake, the transfer and a last round \
         trip, each stretched by the queue the class waits in.",
        cfg.scalable[0],
        cfg.classic,
        fmt_rate(cfg.step_from()),
        cfg.short_per_second,
        cfg.warmup.as_secs_f64(),
        cfg.short_sizes.min,
        cfg.short_sizes.max,
    ));
    let rows: Vec<(&ShortRun, &str, &ClassFct)> = runs
        .iter()
        .flat_map(|r| ["scalable", "classic"].into_iter().zip(&r.classes).map(move |(class, c)| (r, class, c)))
        .collect();
    r.table(
        Columns::<(&ShortRun, &str, &ClassFct)>::new()
            .col("AQM", "", |(r, _, _)| Cell::text(r.aqm.name()))
            .col("class", "", |(_, class, _)| Cell::text(*class))
            .col("sender", "", |(_, _, c)| Cell::text(&c.sender))
            .col("done / started", "", |(_, _, c)| Cell::text(format!("{} / {}", c.fct.completed, c.fct.started)))
            .col("FCT p50", "ms", |(_, _, c)| Cell::num(c.fct.fct_us.p50 / 1e3, 1))
            .col("FCT p99", "ms", |(_, _, c)| Cell::num(c.fct.fct_us.p99 / 1e3, 1))
            .col("FCT mean", "ms", |(_, _, c)| Cell::num(c.fct.fct_us.mean / 1e3, 1))
            .col("long flows", "Mbit/s", |(r, _, _)| Cell::List(r.long_mbps.clone(), Fmt::dp(1)))
            .col("queue mean", "ms", |(r, _, _)| Cell::num(r.queue_mean_ms, 1))
            .col("utilization", "", |(r, _, _)| Cell::pct(r.utilization, 1))
            .col("steal", "", |(r, _, _)| steal_cell(r.steal_share))
            .col("marks / drops", "", |(r, _, _)| Cell::text(format!("{} / {}", r.marks, r.drops)))
            .table(&rows),
    )
    .text(repairs_line(runs.iter().map(|r| (r.label(), r.guard_repairs))));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short-flow run: the long pair on senders 0 and 1, each class's
    /// short flows from 2 and 3 with the run's sizes and rate, from the
    /// warm-up's end; behind seed 002's AQM the classic ones Not-ECT too.
    /// A short-flow run carries its long flows' rates and is named by its
    /// rate and AQM.
    #[test]
    fn a_short_run_reads_its_long_flows_and_names_itself() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::super::L4sArgs,
        }
        let cfg = Cli::parse_from(["lab", "--quick"]).args.config();
        let p = &points(&cfg)[0];
        let data = RunData {
            outcome: Outcome {
                goodput_bps: vec![30e6, 12.5e6],
                ..Default::default()
            },
            ..Default::default()
        };
        let r = ShortRun::of(&cfg, p, &data);
        assert_eq!(r.long_mbps, [30.0, 12.5]);
        assert_eq!(r.classes[1].sender, cfg.classic);
        assert_eq!(r.label(), format!("50 Mbit/s {} short flows", p.aqm.name()));
        assert_eq!(label(1_000_000_000, p.aqm), format!("1 Gbit/s {} short flows", p.aqm.name()));
    }

    #[test]
    fn each_class_sends_its_short_flows_from_a_sender_of_its_own() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::super::L4sArgs,
        }
        let cfg = Cli::parse_from(["lab", "--quick", "--short-sizes", "2000-3000"]).args.config();
        let points = points(&cfg);
        assert_eq!(points.len(), 5, "one per AQM by default");
        assert!(points.iter().all(|p| p.rate_bps == 50_000_000 && p.mix == long_mix()));
        let scn = scenario(&cfg, &points[0], "dl9", "x");
        let flows: Vec<(usize, &str)> = scn.flows.iter().map(|f| (f.sender, f.cc.as_str())).collect();
        assert_eq!(flows, [(0, "dl9"), (1, "cubic")]);
        let shorts: Vec<(usize, &str, u64, u64, f64)> = scn
            .short_flows
            .iter()
            .map(|s| (s.sender, s.cc.as_str(), s.min_bytes, s.max_bytes, s.per_second))
            .collect();
        assert_eq!(shorts, [(2, "dl9", 2000, 3000, 10.0), (3, "cubic", 2000, 3000, 10.0)]);
        assert!(scn.short_flows.iter().all(|s| s.start_after == cfg.warmup));
        assert!(scn.no_ecn_senders.is_empty());
        let dual = points.iter().find(|p| p.aqm == Aqm::Dual).unwrap();
        assert_eq!(scenario(&cfg, dual, "dl9", "x").no_ecn_senders, [1, 3]);
        let none = L4sConfig {
            short_per_second: 0.0,
            ..cfg.clone()
        };
        assert!(super::points(&none).is_empty());
        let bad = L4sConfig {
            short_per_second: -1.0,
            ..cfg
        };
        assert!(validate(&bad).unwrap_err().to_string().contains("out of range"));
    }

    #[test]
    fn sizes_parse_as_min_and_max() {
        assert_eq!(
            Sizes::parse("10000-100000").unwrap(),
            Sizes {
                min: 10_000,
                max: 100_000
            }
        );
        assert!(Sizes::parse("10000").unwrap_err().contains("MIN-MAX"));
        assert!(Sizes::parse("a-5")
            .unwrap_err()
            .contains("`a` is not a byte count"));
    }
}
