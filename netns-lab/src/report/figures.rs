//! The figures a summary prints, to hold a report rendered by the model
//! against the summary the hand-written code printed for the same run
//! (`tests/fixtures/reports/<experiment>/`: that run's summary.md and the
//! data it was printed from).

use std::collections::BTreeMap;

/// Every number in `md` outside its table headers (whose names carry units
/// now), with its `%` if it has one: `K = 20, 95.3%, 0 / 1` reads `20`,
/// `95.3%`, `0`, `1`. Counted, so that a figure printed twice must be
/// printed twice again. The numbers of the plots' captions
/// (`![caption](file)`) are counted apart, second.
pub fn figures(md: &str) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let lines: Vec<&str> = md.lines().collect();
    let (mut body, mut captions) = (BTreeMap::new(), BTreeMap::new());
    for (i, line) in lines.iter().enumerate() {
        let is_header = lines
            .get(i + 1)
            .is_some_and(|next| next.trim_start().starts_with("| ---"));
        let t = line.trim_start();
        if is_header || t.starts_with("| ---") {
            continue;
        }
        let counts = if t.starts_with("![") {
            &mut captions
        } else {
            &mut body
        };
        for figure in numbers(line) {
            *counts.entry(figure).or_insert(0) += 1;
        }
    }
    (body, captions)
}

/// The numbers of a line, `76.0 %` read as `76.0%`.
fn numbers(line: &str) -> Vec<String> {
    let mut found = vec![];
    let mut chars = line.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if !c.is_ascii_digit() {
            continue;
        }
        let mut end = start + 1;
        while let Some(&(j, c)) = chars.peek() {
            let more_digits = c == '.' && line[j + 1..].starts_with(|d: char| d.is_ascii_digit());
            if c.is_ascii_digit() || more_digits || c == '%' {
                end = j + c.len_utf8();
                chars.next();
                if c == '%' {
                    break;
                }
            } else {
                break;
            }
        }
        let mut figure = line[start..end].to_string();
        if !figure.ends_with('%') && line[end..].starts_with(" %") {
            figure.push('%');
        }
        found.push(figure);
    }
    found
}

/// The figures one summary printed that the other does not, as `(figure,
/// count in old, count in new)`: empty when both print the same. A figure
/// the old summary gave in its list of files (`step.png` (Fig. 5)) may
/// stand in the new one's plots' captions instead.
pub fn differences(old: &str, new: &str) -> Vec<(String, usize, usize)> {
    let (a, _) = figures(old);
    let (b, captions) = figures(new);
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            (
                k.clone(),
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0),
            )
        })
        .filter(|(k, x, y)| {
            let moved = captions.get(k).copied().unwrap_or(0);
            !(x == y || (y < x && x - y <= moved))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_from_text_and_cells_but_not_headers() {
        let md =
            "K = 20, util 95.3%. Fig. 1.\n\n| p5-p95 | x |\n| --- | --- |\n| 17-23 | 0 / 0 / 1 |\n";
        let (f, captions) = figures(&format!("{md}![Fig. 9](f.png)\n"));
        assert_eq!(captions.keys().collect::<Vec<_>>(), ["9"]);
        let got: Vec<(&str, usize)> = f.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("0", 2),
                ("1", 2),
                ("17", 1),
                ("20", 1),
                ("23", 1),
                ("95.3%", 1)
            ]
        );
    }

    #[test]
    fn a_figure_may_move_into_a_plots_caption_but_not_vanish() {
        let old = "Files: `a.png` (Fig. 5), `b.png` (Fig. 6).";
        assert!(differences(old, "Files.\n\n![Fig. 5](a.png)\n![Fig. 6](b.png)\n").is_empty());
        assert_eq!(
            differences(old, "Files.\n\n![Fig. 5](a.png)\n"),
            [("6".to_string(), 1, 0)]
        );
        // A caption does not excuse a figure the text prints more often.
        assert_eq!(
            differences("a 1", "a 1 b 1\n![1](x.png)"),
            [("1".to_string(), 1, 2)]
        );
    }

    #[test]
    fn a_figure_missing_or_changed_is_a_difference() {
        assert!(differences("a 1.5 b 2", "b 2 a 1.5").is_empty());
        assert_eq!(
            differences("a 1.5 b 2", "a 1.6 b 2 c 2"),
            [
                ("1.5".to_string(), 1, 0),
                ("1.6".to_string(), 0, 1),
                ("2".to_string(), 1, 2)
            ]
        );
    }
}
