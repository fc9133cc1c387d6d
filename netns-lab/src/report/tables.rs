//! What every summary writes the same way: markdown tables and the notes
//! on the guard's repairs (README "Known issue").

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// What bpf_dctcp's guard did against the kernel issue (README "Known
/// issue") in a run: ssthresh and cwnd values it found impossible and
/// recomputed, and transmissions it held while far more was in flight than
/// the reduction started from. Written `[ssthresh, cwnd, inflight]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u64; 3]", into = "[u64; 3]")]
pub struct Repairs {
    pub ssthresh: u64,
    pub cwnd: u64,
    pub inflight: u64,
}

impl Repairs {
    /// Whether the guard did anything.
    pub fn any(&self) -> bool {
        *self != Repairs::default()
    }

    /// What the guard did since `before` (counters read then).
    pub fn since(self, before: Repairs) -> Repairs {
        Repairs {
            ssthresh: self.ssthresh - before.ssthresh,
            cwnd: self.cwnd - before.cwnd,
            inflight: self.inflight - before.inflight,
        }
    }
}

impl From<[u64; 3]> for Repairs {
    fn from([ssthresh, cwnd, inflight]: [u64; 3]) -> Self {
        Repairs {
            ssthresh,
            cwnd,
            inflight,
        }
    }
}

impl From<Repairs> for [u64; 3] {
    fn from(r: Repairs) -> Self {
        [r.ssthresh, r.cwnd, r.inflight]
    }
}

/// `ssthresh / cwnd / inflight`, as the summaries' tables show it.
impl std::fmt::Display for Repairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} / {} / {}", self.ssthresh, self.cwnd, self.inflight)
    }
}

/// A markdown table's header row and its separator.
pub fn table_header(s: &mut String, columns: &[&str]) {
    let _ = writeln!(s, "| {} |", columns.join(" | "));
    let _ = writeln!(s, "|{}", " --- |".repeat(columns.len()));
}

/// A summary's sentence on the guard's repairs (ssthresh, cwnd, holds) in
/// each labelled run that had any.
pub fn repairs_line(runs: impl Iterator<Item = (String, Repairs)>) -> String {
    let v: Vec<String> = runs
        .filter(|(_, r)| r.any())
        .map(|(label, r)| format!("{label}: ({}, {}, {})", r.ssthresh, r.cwnd, r.inflight))
        .collect();
    format!(
        "Guard repairs (README \"Known issue\"): {}.",
        if v.is_empty() {
            "none in any run".to_string()
        } else {
            v.join("; ")
        }
    )
}

/// The guard's repairs as a note for a run's line, empty if none.
pub fn repairs_note(r: Repairs) -> String {
    if r.any() {
        format!(
            ", guard repairs {}/{}/{} (README: Known issue)",
            r.ssthresh, r.cwnd, r.inflight
        )
    } else {
        String::new()
    }
}

/// What the hypervisor took from the lab's CPUs during a run, for its line:
/// empty below 2 % (this host's usual 0-1 %). Each point of it cost about
/// 0.4 points of goodput at 100 Mbit/s here (docs/testing.md, "steal").
pub fn steal_note(share: f64) -> String {
    if share < 0.02 {
        String::new()
    } else {
        format!(
            ", the hypervisor took {:.0} % of the lab's CPU (steal: the link stood still that long)",
            share * 100.0
        )
    }
}

/// The steal of a run for a table's cell: the share where it took 2 % or
/// more (as `steal_note` says it), else nothing.
pub fn steal_cell(share: f64) -> super::model::Cell {
    if share < 0.02 {
        super::model::Cell::Missing
    } else {
        super::model::Cell::pct(share, 0)
    }
}

/// The impossible values the guard found, for a run's line: empty if none.
pub fn found_note((s, c): (u64, u64)) -> String {
    let v: Vec<String> = [("ssthresh", s), ("cwnd", c)]
        .iter()
        .filter(|(_, v)| *v != 0)
        .map(|(what, v)| format!("{what} {v:#x}"))
        .collect();
    if v.is_empty() {
        String::new()
    } else {
        format!(", found {}", v.join(" and "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_found_note_names_each_value_found_in_hex() {
        assert_eq!(found_note((0, 0)), "");
        assert_eq!(found_note((0x8220_34e5, 0)), ", found ssthresh 0x822034e5");
        assert_eq!(found_note((0, 0x2709_a97e)), ", found cwnd 0x2709a97e");
        assert_eq!(
            found_note((0x8110_4110, 0x2709_a97e)),
            ", found ssthresh 0x81104110 and cwnd 0x2709a97e"
        );
    }

    #[test]
    fn the_repairs_note_speaks_only_of_repairs() {
        assert_eq!(repairs_note(Repairs::default()), "");
        assert_eq!(
            repairs_note([0, 0, 3].into()),
            ", guard repairs 0/0/3 (README: Known issue)"
        );
        assert_eq!(
            repairs_note([2, 1, 0].into()),
            ", guard repairs 2/1/0 (README: Known issue)"
        );
    }

    #[test]
    fn repairs_are_written_as_three_counts_and_read_back() {
        let r = Repairs::from([2, 1, 7]);
        assert_eq!(serde_json::to_string(&r).unwrap(), "[2,1,7]");
        assert_eq!(serde_json::from_str::<Repairs>("[2,1,7]").unwrap(), r);
        assert_eq!(r.to_string(), "2 / 1 / 7");
        assert_eq!(r.since([1, 1, 3].into()), [1, 0, 4].into());
        assert_eq!(
            repairs_line([("a".to_string(), r), ("b".to_string(), Repairs::default())].into_iter()),
            "Guard repairs (README \"Known issue\"): a: (2, 1, 7)."
        );
    }

    #[test]
    fn the_steal_cell_holds_a_share_from_two_percent() {
        use crate::report::model::Cell;
        assert_eq!(steal_cell(0.0199), Cell::Missing);
        assert_eq!(steal_cell(0.05).show(), "5%");
    }

    #[test]
    fn the_steal_note_speaks_from_two_percent() {
        assert_eq!(steal_note(0.0), "");
        assert_eq!(steal_note(0.0199), "");
        assert_eq!(
            steal_note(0.02),
            ", the hypervisor took 2 % of the lab's CPU (steal: the link stood still that long)"
        );
        assert!(steal_note(0.28).contains("took 28 %"));
    }
}
