//! A [`Report`] as `summary.md` and as `index.html`: one page, self-contained
//! (styles and plots inline, no script, nothing fetched), that shows the
//! run's configuration, the report and every plot of its folder.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::model::{Block, Check, Figure, Report, Table};

/// The report as markdown, tables as GitHub renders them.
pub fn markdown(r: &Report) -> String {
    let mut s = format!("# {}\n\n", r.title);
    for b in &r.blocks {
        match b {
            Block::Heading(level, text) => {
                let _ = writeln!(s, "{} {text}\n", "#".repeat(usize::from(*level)));
            }
            Block::Text(text) => {
                let _ = writeln!(s, "{text}\n");
            }
            Block::Markdown(text) => {
                let _ = writeln!(s, "{}\n", text.trim_end());
            }
            Block::Table(t) => md_table(
                &mut s,
                &t.heads.iter().map(|h| h.title()).collect::<Vec<_>>(),
                t.rows.iter().map(|r| r.iter().map(|c| c.show()).collect()),
            ),
            Block::Checks(checks) => md_table(
                &mut s,
                &["check", "target", "measured", "met"].map(String::from),
                checks.iter().map(check_cells),
            ),
            Block::Figures(figs) => {
                for f in figs {
                    let _ = writeln!(s, "![{}]({})\n", f.caption, f.file);
                }
            }
        }
    }
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}

fn check_cells(c: &Check) -> Vec<String> {
    vec![
        c.what.clone(),
        c.target.clone(),
        c.measured.clone(),
        c.met_word().to_string(),
    ]
}

fn md_table(s: &mut String, heads: &[String], rows: impl Iterator<Item = Vec<String>>) {
    let heads: Vec<&str> = heads.iter().map(String::as_str).collect();
    super::tables::table_header(s, &heads);
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s.push('\n');
}

/// `<`, `>`, `&` and `"` as entities.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// A line of markdown as HTML: escaped, with `code` and **bold** spans
/// (what the reports write; anything else stays as it is).
pub fn inline(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(['`', '*']) {
        out += &escape(&rest[..i]);
        let tail = &rest[i..];
        let (open, close, tag) = if tail.starts_with("**") {
            ("**", "**", "strong")
        } else if tail.starts_with('`') {
            ("`", "`", "code")
        } else {
            out.push('*');
            rest = &tail[1..];
            continue;
        };
        match tail[open.len()..].find(close) {
            Some(end) => {
                let inner = &tail[open.len()..open.len() + end];
                let inner = if tag == "code" {
                    escape(inner)
                } else {
                    inline(inner)
                };
                let _ = write!(out, "<{tag}>{inner}</{tag}>");
                rest = &tail[open.len() + end + close.len()..];
            }
            None => {
                out += &escape(open);
                rest = &tail[open.len()..];
            }
        }
    }
    out + &escape(rest)
}

/// Markdown as the lab's notes write it (headings, tables, bullet lists,
/// paragraphs) as HTML.
pub fn markdown_html(md: &str) -> String {
    #[derive(Default)]
    struct Open {
        para: Vec<String>,
        table: Vec<Vec<String>>,
        list: Vec<String>,
    }
    impl Open {
        fn close(&mut self, out: &mut String) {
            if !self.para.is_empty() {
                let _ = writeln!(out, "<p>{}</p>", inline(&self.para.join(" ")));
            }
            if let Some((head, rows)) = self.table.split_first() {
                html_table(out, head, rows.iter().cloned());
            }
            if !self.list.is_empty() {
                out.push_str("<ul>\n");
                for item in &self.list {
                    let _ = writeln!(out, "<li>{}</li>", inline(item));
                }
                out.push_str("</ul>\n");
            }
            *self = Open::default();
        }
    }
    let (mut out, mut open) = (String::new(), Open::default());
    for line in md.lines() {
        let t = line.trim();
        let in_list = !open.list.is_empty();
        if t.starts_with('|') {
            if open.table.is_empty() {
                open.close(&mut out);
            }
            let cells = split_row(t);
            // The separator row under the header.
            if !cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'))
            {
                open.table.push(cells);
            }
        } else if t.is_empty() {
            open.close(&mut out);
        } else if let Some(h) = t.strip_prefix('#') {
            open.close(&mut out);
            let level = 1 + h.chars().take_while(|&c| c == '#').count();
            let _ = writeln!(
                out,
                "<h{level}>{}</h{level}>",
                inline(h.trim_start_matches('#').trim())
            );
        } else if let Some(item) = t.strip_prefix("- ") {
            if !in_list {
                open.close(&mut out);
            }
            open.list.push(item.to_string());
        } else if in_list && line.starts_with(' ') {
            // A list item's continuation line.
            let last = open.list.last_mut().expect("in a list");
            last.push(' ');
            last.push_str(t);
        } else {
            if in_list || !open.table.is_empty() {
                open.close(&mut out);
            }
            open.para.push(t.to_string());
        }
    }
    open.close(&mut out);
    out
}

/// The cells of a markdown table row; `\|` is a bar inside a cell.
fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().expect("one").push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().expect("one").push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

fn html_table(out: &mut String, head: &[String], rows: impl Iterator<Item = Vec<String>>) {
    out.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", inline(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for c in row {
            // Numbers line up on the right.
            let numeric = c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '.')
                && c.chars().any(|ch| ch.is_ascii_digit());
            let class = match c.as_str() {
                "**NO**" => " class=\"no\"",
                "yes" => " class=\"yes\"",
                _ if numeric => " class=\"n\"",
                _ => "",
            };
            let _ = write!(out, "<td{class}>{}</td>", inline(&c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

fn table_html(out: &mut String, t: &Table) {
    let heads: Vec<String> = t.heads.iter().map(|h| h.title()).collect();
    html_table(
        out,
        &heads,
        t.rows.iter().map(|r| r.iter().map(|c| c.show()).collect()),
    );
}

const STYLE: &str = "\
body{font:15px/1.45 system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:0 auto;max-width:1180px;padding:1em 1.5em;color:#1b1f24;background:#fff}\
h1{font-size:1.6em;margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}h3{margin-top:1.3em}\
.run{color:#57606a;margin:0 0 1em}\
.scroll{overflow-x:auto;margin:.6em 0 1em}\
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #d0d7de;padding:.25em .55em;vertical-align:top}\
th{background:#f6f8fa;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
td.yes{color:#1a7f37;font-weight:600}td.no{color:#cf222e;font-weight:700}\
code{font:.92em ui-monospace,'DejaVu Sans Mono',monospace;background:#f6f8fa;padding:0 .2em;border-radius:3px}\
figure{margin:1em 0 2em}figure svg{max-width:100%;height:auto;border:1px solid #eaeef2}\
figcaption{color:#57606a;font-size:.9em}\
details{margin:.5em 0 1em}summary{cursor:pointer;font-weight:600}";

/// `index.html` of the results folder `dir`: the report under `subtitle`
/// (what the page is of), the configuration it ran with (config.json),
/// each of the report's figures where it stands, and after them every
/// other plot of the folder, so that none is missed.
pub fn html(r: &Report, dir: &Path, subtitle: &str) -> Result<String> {
    let mut body = String::new();
    let _ = writeln!(body, "<h1>{}</h1>", inline(&r.title));
    let _ = writeln!(body, "<p class=\"run\">{}</p>", inline(subtitle));
    if let Ok(config) = std::fs::read_to_string(dir.join("config.json")) {
        let value: serde_json::Value =
            serde_json::from_str(&config).context("reading config.json")?;
        let mut rows = vec![];
        flatten("", &value, &mut rows);
        body.push_str("<details><summary>Configuration (config.json)</summary>\n");
        html_table(
            &mut body,
            &["option".into(), "value".into()],
            rows.into_iter().map(|(k, v)| vec![k, v]),
        );
        body.push_str("</details>\n");
    }
    let mut shown: Vec<PathBuf> = vec![];
    for b in &r.blocks {
        match b {
            Block::Heading(level, text) => {
                let _ = writeln!(body, "<h{level}>{}</h{level}>", inline(text));
            }
            Block::Text(text) => {
                let _ = writeln!(body, "<p>{}</p>", inline(text));
            }
            Block::Markdown(md) => body.push_str(&markdown_html(md)),
            Block::Table(t) => table_html(&mut body, t),
            Block::Checks(checks) => html_table(
                &mut body,
                &["check", "target", "measured", "met"].map(String::from),
                checks.iter().map(check_cells),
            ),
            Block::Figures(figs) => {
                for f in figs {
                    body.push_str(&figure(dir, f)?);
                    shown.push(svg_of(&dir.join(&f.file)));
                }
            }
        }
    }
    let rest: Vec<PathBuf> = svgs(dir)?
        .into_iter()
        .filter(|p| !shown.contains(p))
        .collect();
    if !rest.is_empty() {
        body.push_str("<h2>Every plot of this folder</h2>\n");
        for p in rest {
            let file = p.strip_prefix(dir).unwrap_or(&p).with_extension("png");
            let file = file.to_string_lossy().into_owned();
            body.push_str(&figure(
                dir,
                &Figure {
                    caption: file.clone(),
                    file,
                },
            )?);
        }
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(&r.title)
    ))
}

/// config.json's values by their path (`star.k`), lists joined.
pub fn flatten(prefix: &str, v: &serde_json::Value, rows: &mut Vec<(String, String)>) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, rows);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            let items: Vec<String> = items.iter().map(scalar).collect();
            rows.push((prefix.to_string(), items.join(", ")));
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, rows);
            }
        }
        v => rows.push((prefix.to_string(), scalar(v))),
    }
}

fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".into(),
        v => v.to_string(),
    }
}

/// The SVG drawn beside a plot's PNG.
fn svg_of(png: &Path) -> PathBuf {
    png.with_extension("svg")
}

/// A figure with its SVG inline, or a line saying the plot is missing.
fn figure(dir: &Path, f: &Figure) -> Result<String> {
    let path = svg_of(&dir.join(&f.file));
    let svg = match std::fs::read_to_string(&path) {
        Ok(svg) => svg,
        Err(_) => {
            return Ok(format!(
                "<p class=\"run\">{}: no plot (the run drew none)</p>\n",
                escape(&f.file)
            ))
        }
    };
    // The XML declaration may not stand inside HTML.
    let svg = match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => anyhow::bail!("{} is no SVG", path.display()),
    };
    Ok(format!(
        "<figure>\n{}\n<figcaption>{} (<code>{}</code>)</figcaption>\n</figure>\n",
        svg.trim_end(),
        inline(&f.caption),
        escape(&f.file)
    ))
}

/// Every SVG under `dir`, sorted (top level first, then each run's folder).
fn svgs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = vec![];
    let mut folders = vec![dir.to_path_buf()];
    while let Some(d) = folders.pop() {
        let mut here: Vec<PathBuf> = std::fs::read_dir(&d)
            .with_context(|| format!("reading {}", d.display()))?
            .flatten()
            .map(|e| e.path())
            .collect();
        here.sort();
        for p in here {
            if p.is_dir() {
                folders.push(p);
            } else if p.extension().is_some_and(|e| e == "svg") {
                found.push(p);
            }
        }
    }
    found.sort_by_key(|p| (p.components().count(), p.clone()));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{Cell, Check, Columns};

    fn report() -> Report {
        let mut r = Report::new("Queue occupancy");
        r.text("Two flows; `K` = 20, **DCTCP** <fast> & tight.")
            .heading(2, "Runs")
            .runs_table(
                Columns::<(&str, f64)>::new()
                    .col("algorithm", "", |r| Cell::text(r.0))
                    .col("queue", "packets", |r| Cell::num(r.1, 1))
                    .table(&[("a|b", 19.04), ("cubic", 331.0)]),
            )
            .checks(vec![
                Check::judged("mean", "17-23", "19.0", true),
                Check::judged("drops", "0", "2", false),
            ])
            .figures(vec![Figure {
                file: "q.png".into(),
                caption: "the queue".into(),
            }]);
        r
    }

    #[test]
    fn markdown_has_each_block_in_order() {
        let md = markdown(&report());
        assert_eq!(
            md,
            "# Queue occupancy\n\nTwo flows; `K` = 20, **DCTCP** <fast> & tight.\n\n## Runs\n\n\
             | algorithm | queue (packets) |\n| --- | --- |\n| a\\|b | 19.0 |\n| cubic | 331.0 |\n\n\
             | check | target | measured | met |\n| --- | --- | --- | --- |\n| mean | 17-23 | 19.0 | yes |\n\
             | drops | 0 | 2 | **NO** |\n\n![the queue](q.png)\n"
        );
    }

    #[test]
    fn inline_spans_are_kept_and_everything_else_escaped() {
        assert_eq!(
            inline("a `<b>` **c d** e * f **"),
            "a <code>&lt;b&gt;</code> <strong>c d</strong> e * f **"
        );
        assert_eq!(inline("unclosed `tick"), "unclosed `tick");
    }

    #[test]
    fn code_inside_bold_stays_code_and_bold_inside_code_stays_text() {
        assert_eq!(
            inline("**a `<b>`** `**c**`"),
            "<strong>a <code>&lt;b&gt;</code></strong> <code>**c**</code>"
        );
    }

    #[test]
    fn config_values_are_named_by_path_and_only_lists_of_scalars_joined() {
        let v = serde_json::json!({
            "k": 20,
            "rates": [1, 2],
            "star": {"flows": [{"cc": "a"}, {"cc": null}]},
            "grid": [[1, 2], [3]],
            "mixed": [1, {"y": "z"}],
        });
        let mut rows = vec![];
        flatten("", &v, &mut rows);
        let rows: Vec<String> = rows.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            rows,
            [
                "grid[0]=1, 2",
                "grid[1]=3",
                "k=20",
                "mixed[0]=1",
                "mixed[1].y=z",
                "rates=1, 2",
                "star.flows[0].cc=a",
                "star.flows[1].cc=-",
            ]
        );
    }

    #[test]
    fn only_an_escaped_bar_joins_cells_and_a_backslash_stays() {
        assert_eq!(split_row(r"| a\b | c\|d | e |"), [r"a\b", "c|d", "e"]);
    }

    #[test]
    fn numbers_align_right_and_verdicts_get_their_colour() {
        let mut out = String::new();
        let cells = ["12", "-3", ".5", "-", "v1", "n/a", "yes", "**NO**", "1 MB"];
        html_table(
            &mut out,
            &[],
            std::iter::once(cells.map(String::from).to_vec()),
        );
        let classes: Vec<&str> = out
            .split("<td")
            .skip(1)
            .map(|td| td.split('>').next().unwrap())
            .collect();
        let n = r#" class="n""#;
        assert_eq!(
            classes,
            [n, n, n, "", "", "", r#" class="yes""#, r#" class="no""#, n],
            "{out}"
        );
    }

    #[test]
    fn markdown_notes_become_headings_tables_lists_and_paragraphs() {
        let html = markdown_html(
            "## Packets\n\nOne line\nand the next.\n\n| a | b \\| c |\n| --- | --- |\n| 1 | x |\n- item one\n  goes on\n- two\nAfter.\n",
        );
        assert_eq!(
            html,
            "<h2>Packets</h2>\n<p>One line and the next.</p>\n<div class=\"scroll\"><table>\n\
             <thead><tr><th>a</th><th>b | c</th></tr></thead>\n<tbody>\n\
             <tr><td class=\"n\">1</td><td>x</td></tr>\n</tbody></table></div>\n\
             <ul>\n<li>item one goes on</li>\n<li>two</li>\n</ul>\n<p>After.</p>\n"
        );
    }

    #[test]
    fn the_page_holds_config_report_and_every_plot_of_the_folder() {
        let dir = std::env::temp_dir().join(format!("render-{}", std::process::id()));
        let run = dir.join("queue").join("20261205-120000");
        std::fs::create_dir_all(run.join("100m-cubic")).unwrap();
        std::fs::write(
            run.join("config.json"),
            r#"{"k":20,"rates_bps":[1,2],"star":{"flows":2}}"#,
        )
        .unwrap();
        let svg = "<?xml version=\"1.0\"?>\n<svg viewBox=\"0 0 10 10\"><line/></svg>\n";
        std::fs::write(run.join("q.svg"), svg).unwrap();
        std::fs::write(run.join("100m-cubic").join("throughput.svg"), svg).unwrap();
        let page = html(&report(), &run, "lab queue · `20261205-120000`").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        for part in [
            "<title>Queue occupancy</title>",
            "<p class=\"run\">lab queue · <code>20261205-120000</code></p>",
            "<td>rates_bps</td><td class=\"n\">1, 2</td>",
            "<td>star.flows</td><td class=\"n\">2</td>",
            "<th>queue (packets)</th>",
            "<td>a|b</td>",
            "<td class=\"no\"><strong>NO</strong></td>",
            "<figcaption>the queue (<code>q.png</code>)</figcaption>",
            "<h2>Every plot of this folder</h2>",
            "<figcaption>100m-cubic/throughput.png",
        ] {
            assert!(page.contains(part), "{part} not in\n{page}");
        }
        assert_eq!(page.matches("<svg").count(), 2, "each plot once");
        assert!(!page.contains("<?xml") && !page.contains("<script"));
    }
}
