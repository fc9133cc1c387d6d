//! Live tracing of an attached algorithm: switch its programs' events on,
//! drain the pinned ring buffer, switch them off again.
//!
//! The ring has a single reader: one tracer per algorithm at a time. The
//! programs count every event they try to emit and every one the full ring
//! refused (dctcp_stats.events / events_dropped), so a session can report
//! seen + dropped = produced.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::{Deserialize, Serialize};

use dctcp_utils::bpffs::{self, InstanceDir};
use dctcp_utils::preflight;
use dctcp_utils::ring::RingDrainer;

use crate::instance::{lookup_value, open_value, read_value, KEY0};
use crate::intf::{dctcp_event, dctcp_stats, dctcp_trace, DCTCP_TRACE_ACK, DCTCP_TRACE_WINDOW};

/// How much the programs emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Flow start/end, state changes and one event per alpha window.
    Window,
    /// All of that plus cwnd on every `every`-th ACK of each flow.
    PerAck { every: u32 },
}

impl Detail {
    fn config(self) -> dctcp_trace {
        match self {
            Detail::Window => dctcp_trace {
                flags: DCTCP_TRACE_WINDOW,
                ack_every: 0,
            },
            Detail::PerAck { every } => dctcp_trace {
                flags: DCTCP_TRACE_WINDOW | DCTCP_TRACE_ACK,
                ack_every: every.max(1),
            },
        }
    }
}

/// Events accounted for over a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Delivered to this reader.
    pub seen: u64,
    /// Refused by the full ring.
    pub dropped: u64,
    /// Emitted by the programs: seen + dropped when nobody else reads the ring.
    pub produced: u64,
}

/// A running trace of one attached algorithm. Dropping it switches tracing
/// off again.
pub struct Session {
    dir: InstanceDir,
    trace: MapHandle,
    /// Opened at the start: the counts stay readable after a detach.
    stats: MapHandle,
    drainer: Option<RingDrainer<dctcp_event>>,
    start: dctcp_stats,
    seen: u64,
}

/// Period of the timed drain; with 8 MiB of ring this keeps up with well over
/// a million events per second.
const DRAIN_PERIOD: Duration = Duration::from_millis(10);

impl Session {
    /// Switches tracing on for `name` and starts draining its ring. With
    /// `take_over`, a trace switch left on (by a tracer that was killed) is
    /// taken over instead of refused.
    pub fn start(name: &str, detail: Detail, take_over: bool) -> Result<Session> {
        preflight::require_root("loader trace")?;
        let dir = InstanceDir::new(name);
        if !dir.exists() {
            let known: Vec<_> = bpffs::instances()?.into_iter().map(|d| d.name).collect();
            dctcp_utils::usage_bail!(
                "no algorithm named `{name}` is attached by loader (attached: {}); attach one \
                 with `loader attach --algo dctcp`",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        }
        if !dir.events().exists() || !dir.trace().exists() {
            bail!(
                "`{name}` was attached by a loader without tracing (no {} pin); detach and \
                 attach it again",
                dir.events().display()
            );
        }
        let trace = MapHandle::from_pinned_path(dir.trace())
            .with_context(|| format!("opening {}", dir.trace().display()))?;
        let current: dctcp_trace = read_value(&dir.trace())?;
        if current.flags != 0 && !take_over {
            bail!(
                "`{name}` is already being traced (its ring buffer has one reader at a time). \
                 If no tracer is running any more (one was killed), take over with --take-over"
            );
        }
        let ring = MapHandle::from_pinned_path(dir.events())
            .with_context(|| format!("opening {}", dir.events().display()))?;
        let drainer = RingDrainer::spawn(ring, DRAIN_PERIOD);
        if current.flags != 0 {
            // A tracer died with tracing on: stop production, discard what
            // it left in the ring until a second passes with nothing more
            // (one pass over a full 8 MiB ring takes an emulated machine
            // far longer than a drain period), then count from a quiet ring.
            write_config(&trace, &dctcp_trace::default())?;
            while !drainer.wait(Duration::from_secs(1)).is_empty() {}
        }
        let stats = open_value::<dctcp_stats>(&dir.stats())?;
        let start: dctcp_stats = lookup_value(&stats)?;
        write_config(&trace, &detail.config())?;
        Ok(Session {
            dir,
            trace,
            stats,
            drainer: Some(drainer),
            start,
            seen: 0,
        })
    }

    /// Events drained since the last call, waiting up to `timeout` for some.
    pub fn events(&mut self, timeout: Duration) -> Vec<dctcp_event> {
        let got = self
            .drainer
            .as_ref()
            .map(|d| d.wait(timeout))
            .unwrap_or_default();
        self.seen += got.len() as u64;
        got
    }

    /// Whether the algorithm is still attached (its pins are there).
    pub fn attached(&self) -> bool {
        self.dir.exists()
    }

    /// Switches tracing off, drains what is left and accounts for every
    /// event of the session.
    pub fn stop(mut self) -> Result<(Vec<dctcp_event>, Counts)> {
        write_config(&self.trace, &dctcp_trace::default())?;
        // Let emissions already past the switch reach the ring.
        std::thread::sleep(DRAIN_PERIOD);
        let rest = self.drainer.take().expect("stopped once").finish()?;
        self.seen += rest.len() as u64;
        let end: dctcp_stats = lookup_value(&self.stats)?;
        let counts = Counts {
            seen: self.seen,
            dropped: end.events_dropped - self.start.events_dropped,
            produced: end.events - self.start.events,
        };
        Ok((rest, counts))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.drainer.is_some() {
            let _ = write_config(&self.trace, &dctcp_trace::default());
        }
    }
}

fn write_config(map: &MapHandle, cfg: &dctcp_trace) -> Result<()> {
    map.update(&KEY0, &dctcp_utils::bytes::to_bytes(cfg), MapFlags::ANY)
        .context("switching tracing")
}
