//! The lab switches as pinned, for live views (`loader top`): every running
//! lab pins its marker's live state under [`LAB_ROOT`]`/<prefix>/`:
//!
//! ```text
//! queue_now      ARRAY, 1 entry: struct queue_now (the queue an arrival found, refreshed once per jiffy)
//! marker_stats   PERCPU_ARRAY, 1 entry: struct marker_stats (summed over CPUs)
//! dualpi2_stats  PERCPU_ARRAY, 2 entries (L, C): struct dualpi2_queue_stats (bpf-dualpi2 only)
//! ```

use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use dctcp_utils::bpffs::LAB_ROOT;
use dctcp_utils::bytes::{from_bytes, sum_per_cpu};
use dctcp_utils::clock::monotonic_ns;

use crate::intf::{dualpi2_queue_stats, marker_stats, queue_now, DUALPI2_C, DUALPI2_L};

const KEY0: [u8; 4] = 0u32.to_ne_bytes();

/// One switch as read at one poll.
#[derive(Clone, Copy, Debug, Default)]
pub struct SwitchNow {
    pub queue: queue_now,
    /// Seconds since the marker last saw an arrival (and wrote `queue`).
    pub idle_s: f64,
    pub stats: marker_stats,
    /// DualPI2's L and C queues, on a bpf-dualpi2 switch.
    pub dualpi2: Option<[QueueNow; 2]>,
}

/// One DualPI2 queue's counters, summed over CPUs (the histogram left out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueNow {
    pub arrivals: u64,
    pub marked: u64,
    pub step_marked: u64,
    /// Early and tail drops.
    pub dropped: u64,
    pub departures: u64,
    /// Departures that carried their enqueue time, and the sum of their
    /// sojourn.
    pub stamped: u64,
    pub sojourn_ns: u64,
}

impl From<&dualpi2_queue_stats> for QueueNow {
    fn from(q: &dualpi2_queue_stats) -> QueueNow {
        QueueNow {
            arrivals: q.arrivals,
            marked: q.marked,
            step_marked: q.step_marked,
            dropped: q.dropped + q.taildrop,
            departures: q.departures,
            stamped: q.stamped,
            sojourn_ns: q.sojourn_ns,
        }
    }
}

/// A lab switch found under [`LAB_ROOT`]: its prefix and what reading it gave.
#[derive(Clone, Debug)]
pub struct SwitchReading {
    pub prefix: String,
    pub now: Result<SwitchNow, String>,
}

/// Every lab switch pinned now, sorted by prefix. Directories without the two
/// pins (a lab still setting up, or another kind of lab object) are skipped;
/// a switch whose pins cannot be read is returned with the error.
pub fn read_all() -> Vec<SwitchReading> {
    let Ok(entries) = std::fs::read_dir(LAB_ROOT) else {
        return Vec::new();
    };
    let mut out: Vec<SwitchReading> = entries
        .flatten()
        .filter(|e| e.path().join("queue_now").exists() && e.path().join("marker_stats").exists())
        .map(|e| SwitchReading {
            prefix: e.file_name().to_string_lossy().into_owned(),
            now: read(&e.path()).map_err(|e| format!("{e:#}")),
        })
        .collect();
    out.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    out
}

/// Reads the two pins of one switch directory.
pub fn read(dir: &Path) -> Result<SwitchNow> {
    let queue: queue_now = {
        let map = open(&dir.join("queue_now"), std::mem::size_of::<queue_now>())?;
        let bytes = map
            .lookup(&KEY0, MapFlags::ANY)?
            .context("queue_now: empty map")?;
        from_bytes(&bytes).context("queue_now: short value")?
    };
    let stats = sum_stats(&open(
        &dir.join("marker_stats"),
        std::mem::size_of::<marker_stats>(),
    )?)?;
    let dualpi2 = dir
        .join("dualpi2_stats")
        .exists()
        .then(|| read_dualpi2(&dir.join("dualpi2_stats")))
        .transpose()?;
    Ok(SwitchNow {
        queue,
        idle_s: monotonic_ns().saturating_sub(queue.ts_ns) as f64 / 1e9,
        stats,
        dualpi2,
    })
}

/// The L and C queues' counters of a DualPI2 switch's pin.
fn read_dualpi2(pin: &Path) -> Result<[QueueNow; 2]> {
    let map = open(pin, std::mem::size_of::<dualpi2_queue_stats>())?;
    let queue = |key: u32| -> Result<QueueNow> {
        let per_cpu = map
            .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)?
            .context("dualpi2_stats: empty map")?;
        let q: dualpi2_queue_stats =
            sum_per_cpu(&per_cpu).context("dualpi2_stats: a value shorter than the struct")?;
        Ok(QueueNow::from(&q))
    };
    Ok([queue(DUALPI2_L)?, queue(DUALPI2_C)?])
}

fn open(pin: &Path, value_size: usize) -> Result<MapHandle> {
    let map =
        MapHandle::from_pinned_path(pin).with_context(|| format!("opening {}", pin.display()))?;
    anyhow::ensure!(
        map.value_size() as usize == value_size,
        "{}: value is {} bytes, this loader expects {}; was the lab built from another version?",
        pin.display(),
        map.value_size(),
        value_size
    );
    Ok(map)
}

/// The marker's per-CPU counters (`marker_stats` map), summed over CPUs.
pub fn sum_stats(map: &MapHandle) -> Result<marker_stats> {
    let per_cpu = map
        .lookup_percpu(&KEY0, MapFlags::ANY)?
        .context("marker_stats: empty map")?;
    sum_per_cpu(&per_cpu).context("marker_stats: a value shorter than the struct")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue's live counters: early and tail drops together.
    #[test]
    fn a_dualpi2_queue_reads_with_its_drops_summed() {
        let q = dualpi2_queue_stats {
            arrivals: 100,
            marked: 7,
            step_marked: 3,
            dropped: 2,
            taildrop: 5,
            departures: 90,
            stamped: 23,
            sojourn_ns: 1_000,
            ..Default::default()
        };
        assert_eq!(
            QueueNow::from(&q),
            QueueNow {
                arrivals: 100,
                marked: 7,
                step_marked: 3,
                dropped: 7,
                departures: 90,
                stamped: 23,
                sojourn_ns: 1_000,
            }
        );
    }
}
