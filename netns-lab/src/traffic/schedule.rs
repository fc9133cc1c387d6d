//! When each sender's long flows run: seed 000's staggered schedule (one
//! long flow, the others joining one by one, then leaving one by one) or
//! any list of start-stop spans per sender, and the phases it cuts a run
//! into, each with the flows active throughout.

use std::time::Duration;

use anyhow::{bail, ensure, Result};
use serde::{Deserialize, Serialize};

use crate::traffic::bulk::FlowSpec;

/// One flow of a sender, from `start` to `stop` after the run starts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub start: Duration,
    pub stop: Duration,
}

/// Each sender's spans, in order: sender i is entry i.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule(pub Vec<Vec<Span>>);

/// A stretch of the run between two changes of the flows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub start: Duration,
    pub end: Duration,
    /// Flows (indices into `Schedule::flows`) active throughout.
    pub active: Vec<usize>,
    /// Flows that started at `start`, and that stopped there.
    pub joined: Vec<usize>,
    pub left: Vec<usize>,
}

impl Phase {
    /// `start -> 1 flow`, `+1 -> 3 flows`, `-1 -> 2 flows`.
    pub fn change(&self) -> String {
        let n = self.active.len();
        let flows = if n == 1 { "flow" } else { "flows" };
        match (self.joined.len(), self.left.len()) {
            _ if self.start.is_zero() => format!("start -> {n} {flows}"),
            (j, 0) => format!("+{j} -> {n} {flows}"),
            (0, l) => format!("-{l} -> {n} {flows}"),
            (j, l) => format!("+{j} -{l} -> {n} {flows}"),
        }
    }

    pub fn len(&self) -> Duration {
        self.end - self.start
    }
}

/// A time in a schedule: `30s`, `1500ms`, or plain seconds (`30`, `2.5`).
pub fn parse_time(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a time (e.g. 30s, 1500ms, 2.5)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: a time in the schedule cannot be negative"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

impl Schedule {
    /// Seed 000's schedule for `senders`: sender 0 from the start to the
    /// end; sender i (1..) joins at i x `join`; once all run, they leave in
    /// the order they came, one every `leave`, and sender 0 runs alone for
    /// a last `leave`.
    pub fn staggered(senders: usize, join: Duration, leave: Duration) -> Schedule {
        let last_join = join * (senders.saturating_sub(1)) as u32;
        let end = last_join + leave * senders as u32;
        Schedule(
            (0..senders)
                .map(|i| {
                    let stop = if i == 0 {
                        end
                    } else {
                        last_join + leave * i as u32
                    };
                    vec![Span {
                        start: join * i as u32,
                        stop,
                    }]
                })
                .collect(),
        )
    }

    /// `0-270,30s-150s,60-90+120-180`: senders separated by commas, each
    /// one's spans START-STOP by `+`.
    pub fn parse(s: &str) -> Result<Schedule, String> {
        let senders = s
            .split(',')
            .map(|sender| {
                sender
                    .split('+')
                    .map(|span| {
                        let (a, b) = span.split_once('-').ok_or_else(|| {
                            format!("`{span}`: a span is START-STOP, e.g. 30s-150s")
                        })?;
                        Ok(Span {
                            start: parse_time(a)?,
                            stop: parse_time(b)?,
                        })
                    })
                    .collect::<Result<Vec<Span>, String>>()
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Schedule(senders))
    }

    /// Fits `senders` senders: an entry for each at most, spans that start
    /// before they stop, a sender's spans in order and not overlapping
    /// (one flow at a time), and some flow at the start.
    pub fn validate(&self, senders: usize) -> Result<()> {
        ensure!(
            self.0.len() <= senders,
            "the schedule has {} entries for {senders} senders: one entry per sender at most (or raise --senders)",
            self.0.len()
        );
        ensure!(
            self.0.iter().any(|s| !s.is_empty()),
            "the schedule has no flow"
        );
        for (i, spans) in self.0.iter().enumerate() {
            for s in spans {
                ensure!(
                    s.stop > s.start,
                    "sender {i}: span {:?}-{:?} stops before it starts",
                    s.start,
                    s.stop
                );
            }
            for w in spans.windows(2) {
                if w[1].start < w[0].stop {
                    bail!(
                        "sender {i}: spans {:?}-{:?} and {:?}-{:?} overlap (a sender runs one flow at a time, in order)",
                        w[0].start,
                        w[0].stop,
                        w[1].start,
                        w[1].stop
                    );
                }
            }
        }
        ensure!(
            self.spans().any(|(_, s)| s.start.is_zero()),
            "no flow starts at 0: the run would begin idle"
        );
        Ok(())
    }

    fn spans(&self) -> impl Iterator<Item = (usize, Span)> + '_ {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(i, spans)| spans.iter().map(move |s| (i, *s)))
    }

    /// When the last flow stops: the run's length.
    pub fn end(&self) -> Duration {
        self.spans().map(|(_, s)| s.stop).max().unwrap_or_default()
    }

    /// The flows of `cc`, sender by sender; one that runs to the end has
    /// no stop of its own.
    pub fn flows(&self, cc: &str) -> Vec<FlowSpec> {
        let end = self.end();
        self.spans()
            .map(|(sender, s)| FlowSpec {
                start: s.start,
                stop: (s.stop < end).then_some(s.stop),
                ..FlowSpec::long(sender, cc)
            })
            .collect()
    }

    /// The run cut at every start and stop.
    pub fn phases(&self) -> Vec<Phase> {
        let spans: Vec<Span> = self.spans().map(|(_, s)| s).collect();
        let mut cuts: Vec<Duration> = spans.iter().flat_map(|s| [s.start, s.stop]).collect();
        cuts.sort();
        cuts.dedup();
        cuts.windows(2)
            .map(|w| {
                let pick = |f: &dyn Fn(&Span) -> bool| -> Vec<usize> {
                    (0..spans.len()).filter(|&i| f(&spans[i])).collect()
                };
                Phase {
                    start: w[0],
                    end: w[1],
                    active: pick(&|s| s.start <= w[0] && s.stop >= w[1]),
                    joined: pick(&|s| s.start == w[0]),
                    left: pick(&|s| s.stop == w[0]),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn seed_schedule_joins_then_leaves_in_order() {
        let sch = Schedule::staggered(5, s(30), s(30));
        sch.validate(5).unwrap();
        assert_eq!(sch.end(), s(270));
        assert_eq!(
            sch.0[1],
            vec![Span {
                start: s(30),
                stop: s(150)
            }]
        );
        assert_eq!(
            sch.0[4],
            vec![Span {
                start: s(120),
                stop: s(240)
            }]
        );
        let phases = sch.phases();
        let counts: Vec<usize> = phases.iter().map(|p| p.active.len()).collect();
        assert_eq!(counts, vec![1, 2, 3, 4, 5, 4, 3, 2, 1]);
        assert_eq!(phases[5].left, vec![1]);
        assert_eq!(phases[5].change(), "-1 -> 4 flows");
        assert_eq!(phases[1].change(), "+1 -> 2 flows");
        assert_eq!(phases[0].change(), "start -> 1 flow");
        let flows = sch.flows("reno");
        assert_eq!(flows[0].stop, None);
        assert_eq!(flows[2].start, s(60));
        assert_eq!(flows[2].stop, Some(s(180)));
    }

    #[test]
    fn parses_spans_per_sender() {
        let sch = Schedule::parse("0-10,2s-4s+6000ms-8").unwrap();
        assert_eq!(sch.0[1].len(), 2);
        assert_eq!(sch.0[1][1].start, s(6));
        sch.validate(2).unwrap();
        let p = sch.phases();
        // 0-2: 1 flow, 2-4: 2, 4-6: 1, 6-8: 2, 8-10: 1.
        assert_eq!(
            p.iter().map(|p| p.active.len()).collect::<Vec<_>>(),
            vec![1, 2, 1, 2, 1]
        );
    }

    #[test]
    fn bad_schedules_are_refused() {
        assert!(Schedule::parse("0--5").is_err());
        assert!(Schedule::parse("-5-10").is_err());
        assert!(Schedule::parse("0-10,x-5").is_err());
        assert!(Schedule::parse("0").is_err());
        let overlap = Schedule::parse("0-10+5-12").unwrap();
        assert!(format!("{:#}", overlap.validate(1).unwrap_err()).contains("overlap"));
        let too_many = Schedule::parse("0-10,0-10,0-10").unwrap();
        assert!(too_many.validate(2).is_err());
        let backwards = Schedule::parse("0-10,8-4").unwrap();
        assert!(backwards.validate(2).is_err());
        let idle = Schedule::parse("1-10").unwrap();
        assert!(idle.validate(1).is_err());
    }

    #[test]
    fn a_span_may_start_where_the_previous_one_stopped() {
        let back_to_back = Schedule::parse("0-10+10-20").unwrap();
        back_to_back.validate(1).unwrap();
        let p = back_to_back.phases();
        assert_eq!(
            p.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [s(10), s(10)]
        );
    }
}
