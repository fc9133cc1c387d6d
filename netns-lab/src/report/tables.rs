//! What every summary writes the same way: markdown tables and the notes
//! on the guard's repairs (README "Known issue").

use std::fmt::Write as _;

/// A markdown table's header row and its separator.
pub fn table_header(s: &mut String, columns: &[&str]) {
    let _ = writeln!(s, "| {} |", columns.join(" | "));
    let _ = writeln!(s, "|{}", " --- |".repeat(columns.len()));
}

/// A summary's sentence on the guard's repairs (ssthresh, cwnd, holds) in
/// each labelled run that had any.
pub fn repairs_line(runs: impl Iterator<Item = (String, (u64, u64, u64))>) -> String {
    let v: Vec<String> = runs
        .filter(|(_, r)| *r != (0, 0, 0))
        .map(|(label, r)| format!("{label}: {r:?}"))
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

/// `(s, c, h)` guard repairs as a note for a run's line, empty if none.
pub fn repairs_note(r: (u64, u64, u64)) -> String {
    match r {
        (0, 0, 0) => String::new(),
        (s, c, h) => format!(", guard repairs {s}/{c}/{h} (README: Known issue)"),
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
        assert_eq!(repairs_note((0, 0, 0)), "");
        assert_eq!(
            repairs_note((0, 0, 3)),
            ", guard repairs 0/0/3 (README: Known issue)"
        );
        assert_eq!(
            repairs_note((2, 1, 0)),
            ", guard repairs 2/1/0 (README: Known issue)"
        );
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
