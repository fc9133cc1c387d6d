//! `lab compare DIR DIR ...`: runs of one experiment on one page, as flent
//! plots several result files together: what differs in their
//! configuration, the same series of each run overlaid (the queue's CDF,
//! the throughput over time and each flow's rate, where the runs recorded
//! them), and their figures side by side (each run's runs.csv).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::model::{Figure, Report};
use super::plot::{self, Chart, Series};
use super::results::{ResultsDir, RunInfo};

/// Compares two runs or more.
///
/// Each DIR is a results folder of `lab <experiment>` (it holds lab.json);
/// all must be runs of the same experiment. Writes one page, index.html,
/// with the plots beside it (PNG and SVG): the options that differ between
/// the runs; for every run folder the runs share (e.g.
/// 100M-bpf_dctcp-bpf-step), the queue's CDF, the throughput over time and
/// each flow's mean rate of every run overlaid; and each figure of their
/// runs.csv side by side, with the last run's over the first's.
/// Bad input (fewer than two folders, a folder that is no run, runs of
/// different experiments) exits 2 and writes nothing.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The runs' results folders (results/<experiment>/<timestamp>).
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The page's folder (default results/<experiment>/compare-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One run as compare reads it.
struct Run {
    dir: PathBuf,
    /// How the page names it: the folder's name, or its path where two
    /// runs share a name.
    name: String,
    info: RunInfo,
    config: BTreeMap<String, String>,
    /// runs.csv: its header and rows (none where the experiment writes none).
    table: Option<(Vec<String>, Vec<Vec<String>>)>,
}

/// `lab compare`.
pub fn command(args: &CompareArgs) -> Result<()> {
    let usage =
        |e: anyhow::Error| anyhow::Error::new(dctcp_utils::error::UsageError(format!("{e:#}")));
    let runs = read_runs(&args.runs).map_err(usage)?;
    let path = match &args.out {
        Some(p) => p.clone(),
        None => super::results::default_root()
            .join(&runs[0].info.experiment)
            .join(format!("compare-{}", super::results::timestamp())),
    };
    let existed = path.exists();
    let out = ResultsDir::create(&path, "", Some(&path))?;
    let written = write_page(&runs, &out);
    if written.is_err() && !existed {
        // A page half written is no page.
        let _ = std::fs::remove_dir_all(&path);
    }
    written
}

fn write_page(runs: &[Run], out: &ResultsDir) -> Result<()> {
    let report = page(runs, out)?;
    out.write_text("summary.md", &super::render::markdown(&report))?;
    let subtitle = format!(
        "`lab compare`: {} runs of `lab {}`",
        runs.len(),
        runs[0].info.experiment
    );
    out.write_text(
        "index.html",
        &super::render::html(&report, &out.path, &subtitle)?,
    )?;
    println!("page: {}", out.file("index.html").display());
    Ok(())
}

/// Reads and checks each folder: a run of lab, all of one experiment.
fn read_runs(dirs: &[PathBuf]) -> Result<Vec<Run>> {
    if dirs.len() < 2 {
        bail!("give two runs or more to compare (one: open its index.html)");
    }
    let mut runs = vec![];
    for dir in dirs {
        if !dir.is_dir() {
            bail!("{}: no such folder", dir.display());
        }
        let info = RunInfo::read(dir)?;
        let config = match std::fs::read_to_string(dir.join("config.json")) {
            Ok(text) => {
                let v: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("{}: config.json is not JSON", dir.display()))?;
                let mut rows = vec![];
                super::render::flatten("", &v, &mut rows);
                rows.into_iter().collect()
            }
            Err(_) => BTreeMap::new(),
        };
        let table = match std::fs::read_to_string(dir.join("runs.csv")) {
            Ok(text) => Some(parse_csv(&text)),
            Err(_) => None,
        };
        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        runs.push(Run {
            dir: dir.clone(),
            name,
            info,
            config,
            table,
        });
    }
    let first = &runs[0];
    if let Some(other) = runs
        .iter()
        .find(|r| r.info.experiment != first.info.experiment)
    {
        bail!(
            "{} is a run of `lab {}`, {} of `lab {}`: compare runs of one experiment",
            first.dir.display(),
            first.info.experiment,
            other.dir.display(),
            other.info.experiment
        );
    }
    // Two runs of one name (a and b/20261205-...): named by their path.
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    for r in &mut runs {
        if names.iter().filter(|n| **n == r.name).count() > 1 {
            r.name = r.dir.display().to_string();
        }
    }
    Ok(runs)
}

/// A CSV as the report's renderer writes it: a header and rows; quoted
/// fields may hold commas and doubled quotes.
fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines().map(split_csv);
    let header = lines.next().unwrap_or_default();
    (header, lines.collect())
}

fn split_csv(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                fields.last_mut().expect("one").push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().expect("one").push(c),
        }
    }
    fields
}

/// The page: the runs and their differences, the overlaid series, the
/// figures side by side.
fn page(runs: &[Run], out: &ResultsDir) -> Result<Report> {
    let experiment = &runs[0].info.experiment;
    let mut r = Report::new(format!("lab {experiment}: {} runs compared", runs.len()));
    let mut list = String::new();
    for run in runs {
        let _ = writeln!(list, "- **{}**: `{}`", run.name, run.info.command);
    }
    r.markdown(list);
    r.heading(2, "What differs");
    let keys: Vec<&String> = {
        let mut k: Vec<&String> = runs.iter().flat_map(|r| r.config.keys()).collect();
        k.sort();
        k.dedup();
        k
    };
    let differing: Vec<&String> = keys
        .into_iter()
        .filter(|k| {
            let first = runs[0].config.get(*k);
            runs.iter().any(|r| r.config.get(*k) != first)
        })
        .collect();
    if differing.is_empty() {
        r.text("The runs' configurations (config.json) are the same: they differ only by chance, and by the machine's state.");
    } else {
        r.table(side_by_side(
            runs,
            "option",
            differing.iter().map(|k| {
                (
                    k.to_string(),
                    runs.iter()
                        .map(|r| r.config.get(*k).cloned().unwrap_or_else(|| "-".into()))
                        .collect(),
                )
            }),
        ));
    }
    overlays(&mut r, runs, out)?;
    figures_side_by_side(&mut r, runs);
    Ok(r)
}

/// A table with a first column `what` and one column per run.
fn side_by_side(
    runs: &[Run],
    what: &str,
    rows: impl Iterator<Item = (String, Vec<String>)>,
) -> super::model::Table {
    use super::model::{Cell, Head, Table};
    let mut heads = vec![Head {
        name: what.into(),
        unit: "",
    }];
    heads.extend(runs.iter().map(|r| Head {
        name: r.name.clone(),
        unit: "",
    }));
    Table {
        heads,
        rows: rows
            .map(|(k, vals)| {
                std::iter::once(Cell::text(k))
                    .chain(vals.into_iter().map(Cell::Text))
                    .collect()
            })
            .collect(),
    }
}

/// Each row of the runs' runs.csv (named by its leading text fields, as
/// `100M bpf_dctcp@bpf-step`) and its figures, one column per run.
fn figures_side_by_side(r: &mut Report, runs: &[Run]) {
    r.heading(2, "Figures side by side");
    let Some((header, _)) = runs.iter().find_map(|r| r.table.as_ref()) else {
        r.text(
            "No run has a runs.csv (the experiment writes none yet): open each run's index.html.",
        );
        return;
    };
    // A row's identity: its fields before the first number.
    let key_width = |rows: &[Vec<String>]| {
        rows.first().map_or(1, |row| {
            row.iter()
                .take_while(|f| f.parse::<f64>().is_err())
                .count()
                .max(1)
        })
    };
    let mut keys: Vec<String> = vec![];
    let mut values: BTreeMap<(String, usize), Vec<String>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        let Some((h, rows)) = &run.table else {
            continue;
        };
        let w = key_width(rows);
        for row in rows {
            let key = row[..w.min(row.len())].join(" ");
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            for (c, name) in h.iter().enumerate().skip(w) {
                let Some(col) = header.iter().position(|x| x == name) else {
                    continue;
                };
                let v = values
                    .entry((key.clone(), col))
                    .or_insert_with(|| vec!["-".into(); runs.len()]);
                v[i] = row.get(c).cloned().unwrap_or_default();
            }
        }
    }
    for key in keys {
        r.heading(3, key.clone());
        let rows: Vec<(String, Vec<String>)> = header
            .iter()
            .enumerate()
            .filter_map(|(col, name)| {
                let v = values.get(&(key.clone(), col))?;
                Some((name.replace('_', " "), v.clone()))
            })
            .collect();
        r.table(with_ratio(side_by_side(runs, "figure", rows.into_iter())));
    }
}

/// The table with one more column: the last run's figure over the first's,
/// where both are numbers and the first is not 0.
fn with_ratio(mut t: super::model::Table) -> super::model::Table {
    use super::model::{Cell, Head};
    let number = |c: &Cell| match c {
        Cell::Text(s) => s.parse::<f64>().ok(),
        _ => None,
    };
    t.heads.push(Head {
        name: "last / first".into(),
        unit: "",
    });
    for row in &mut t.rows {
        let ratio = match (row.get(1).and_then(number), row.last().and_then(number)) {
            (Some(a), Some(b)) if a != 0.0 => Cell::num(b / a, 3),
            _ => Cell::Missing,
        };
        row.push(ratio);
    }
    t
}

/// For each run folder the runs share, the same series of every run on one
/// chart: the queue's CDF (queue.csv.gz), the throughput over time and the
/// mean rate of each flow (throughput.csv).
fn overlays(r: &mut Report, runs: &[Run], out: &ResultsDir) -> Result<()> {
    let subs = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                e.path().join("throughput.csv").exists() || e.path().join("queue.csv.gz").exists()
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let shared: Vec<String> = subs(&runs[0].dir)
        .into_iter()
        .filter(|s| runs.iter().all(|r| r.dir.join(s).is_dir()))
        .collect();
    r.heading(2, "Series overlaid");
    if shared.is_empty() {
        r.text("The runs share no run folder with a queue or throughput series (queue.csv.gz, throughput.csv).");
        return Ok(());
    }
    let mut figs = vec![];
    for sub in &shared {
        let mut cdfs = vec![];
        let mut totals = vec![];
        let mut per_flow = vec![];
        for run in runs {
            let dir = run.dir.join(sub);
            if let Some(q) = read_queue(&dir.join("queue.csv.gz"))? {
                cdfs.push(Series {
                    name: run.name.clone(),
                    points: crate::stats::cdf(&q),
                });
            }
            if let Some((t, flows)) = read_throughput(&dir.join("throughput.csv"))? {
                let (total, means) = summed_and_means(&t, &flows);
                totals.push(Series {
                    name: run.name.clone(),
                    points: total,
                });
                per_flow.push(Series {
                    name: run.name.clone(),
                    points: means,
                });
            }
        }
        if !cdfs.is_empty() {
            let file = format!("{sub}_queue_cdf.png");
            plot::draw(
                &out.file(&file),
                &Chart::new(
                    &format!("{sub}: queue length CDF"),
                    "queue (packets)",
                    "fraction of arrivals",
                    cdfs,
                )
                .y_max(1.02),
            )?;
            figs.push(Figure {
                file,
                caption: format!("{sub}: the queue found by every arrival, each run's CDF"),
            });
        }
        if !totals.is_empty() {
            let file = format!("{sub}_throughput.png");
            plot::draw(
                &out.file(&file),
                &Chart::new(
                    &format!("{sub}: throughput of all flows"),
                    "time (s)",
                    "Mbit/s",
                    totals,
                ),
            )?;
            figs.push(Figure {
                file,
                caption: format!("{sub}: the flows' summed throughput over time, each run"),
            });
            let flows = per_flow.iter().map(|s| s.points.len()).max().unwrap_or(0);
            let file = format!("{sub}_flow_rates.png");
            plot::draw(
                &out.file(&file),
                &Chart::new(
                    &format!("{sub}: each flow's mean rate"),
                    "flow",
                    "Mbit/s",
                    per_flow,
                )
                .points()
                .x_categories((0..flows).map(|i| format!("flow {i}")).collect()),
            )?;
            figs.push(Figure {
                file,
                caption: format!("{sub}: each flow's mean rate over the run, each run"),
            });
        }
    }
    r.figures(figs);
    Ok(())
}

/// Throughput over time: the flows' sum at each time, and each flow's
/// mean (flow i at x = i).
fn summed_and_means(t: &[f64], flows: &[Vec<f64>]) -> (Vec<(f64, f64)>, Vec<(f64, f64)>) {
    let total = t
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, flows.iter().map(|f| f[i]).sum()))
        .collect();
    let means = flows
        .iter()
        .enumerate()
        .map(|(i, f)| (i as f64, f.iter().sum::<f64>() / f.len().max(1) as f64))
        .collect();
    (total, means)
}

/// The queue length found by each arrival (queue.csv.gz's `qlen_pkts`).
fn read_queue(path: &Path) -> Result<Option<Vec<f64>>> {
    let Ok(f) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut lines = BufReader::new(flate2::read::GzDecoder::new(f)).lines();
    let header = lines.next().transpose()?.unwrap_or_default();
    let Some(col) = header.split(',').position(|h| h == "qlen_pkts") else {
        bail!("{}: no qlen_pkts column", path.display());
    };
    let mut q = vec![];
    for line in lines {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if let Some(v) = line.split(',').nth(col).and_then(|v| v.parse().ok()) {
            q.push(v);
        }
    }
    Ok(Some(q))
}

/// throughput.csv: its times and each flow's Mbit/s at those times.
fn read_throughput(path: &Path) -> Result<Option<(Vec<f64>, Vec<Vec<f64>>)>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let (header, rows) = parse_csv(&text);
    let flows = header.len().saturating_sub(1);
    let num = |s: &String| s.parse::<f64>().unwrap_or(0.0);
    let t = rows.iter().map(|r| r.first().map_or(0.0, num)).collect();
    let per_flow = (1..=flows)
        .map(|c| rows.iter().map(|r| r.get(c).map_or(0.0, num)).collect())
        .collect();
    Ok(Some((t, per_flow)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A run folder as `lab queue` leaves it: lab.json, config.json, runs.csv.
    fn run(dir: &Path, experiment: &str, config: &str, csv: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let info = RunInfo {
            experiment: experiment.into(),
            command: format!("lab {experiment} {config}"),
            started: "20261205-120000".into(),
        };
        ResultsDir::create(dir, "", Some(dir))
            .unwrap()
            .write_json("lab.json", &info)
            .unwrap();
        std::fs::write(dir.join("config.json"), config).unwrap();
        if !csv.is_empty() {
            std::fs::write(dir.join("runs.csv"), csv).unwrap();
        }
        dir.to_path_buf()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("compare-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn the_page_names_what_differs_and_puts_each_figure_beside_its_own() {
        let d = tmp("page");
        // Both folders are named r1: the page names them by their path.
        // The second writes its columns in another order and lacks a row.
        let a = run(
            &d.join("a/r1"),
            "queue",
            r#"{"k":20,"rate":"100M","star":{"flows":2}}"#,
            "rate,algo,mean,drops\n100M,bpf_dctcp,17.5,0\n100M,cubic,350,2\n",
        );
        let b = run(
            &d.join("b/r1"),
            "queue",
            r#"{"k":30,"rate":"100M","star":{"flows":4}}"#,
            "rate,algo,drops,mean\n100M,bpf_dctcp,0,26.25\n",
        );
        let runs = read_runs(&[a.clone(), b.clone()]).unwrap();
        let out = ResultsDir::create(&d, "", Some(&d.join("page"))).unwrap();
        let md = crate::report::render::markdown(&page(&runs, &out).unwrap());
        let (na, nb) = (a.display().to_string(), b.display().to_string());
        let expected = format!(
            "# lab queue: 2 runs compared\n\n\
             - **{na}**: `lab queue {{\"k\":20,\"rate\":\"100M\",\"star\":{{\"flows\":2}}}}`\n\
             - **{nb}**: `lab queue {{\"k\":30,\"rate\":\"100M\",\"star\":{{\"flows\":4}}}}`\n\n\
             ## What differs\n\n\
             | option | {na} | {nb} |\n| --- | --- | --- |\n| k | 20 | 30 |\n| star.flows | 2 | 4 |\n\n\
             ## Series overlaid\n\n\
             The runs share no run folder with a queue or throughput series (queue.csv.gz, throughput.csv).\n\n\
             ## Figures side by side\n\n\
             ### 100M bpf_dctcp\n\n\
             | figure | {na} | {nb} | last / first |\n| --- | --- | --- | --- |\n\
             | mean | 17.5 | 26.25 | 1.500 |\n| drops | 0 | 0 | - |\n\n\
             ### 100M cubic\n\n\
             | figure | {na} | {nb} | last / first |\n| --- | --- | --- | --- |\n\
             | mean | 350 | - | - |\n| drops | 2 | - | - |\n"
        );
        let _ = std::fs::remove_dir_all(&d);
        assert_eq!(md, expected);
    }

    #[test]
    fn runs_the_same_but_by_chance_and_without_runs_csv_say_so() {
        let d = tmp("same");
        let a = run(&d.join("x"), "incast", r#"{"k":20}"#, "");
        let b = run(&d.join("y"), "incast", r#"{"k":20}"#, "");
        let runs = read_runs(&[a, b]).unwrap();
        assert_eq!((runs[0].name.as_str(), runs[1].name.as_str()), ("x", "y"));
        let out = ResultsDir::create(&d, "", Some(&d.join("page"))).unwrap();
        let md = crate::report::render::markdown(&page(&runs, &out).unwrap());
        let _ = std::fs::remove_dir_all(&d);
        assert!(
            md.contains("are the same: they differ only by chance"),
            "{md}"
        );
        assert!(md.contains("No run has a runs.csv"), "{md}");
        assert!(!md.contains("| option |"), "{md}");
    }

    #[test]
    fn only_the_run_folders_every_run_has_are_overlaid() {
        let d = tmp("overlay");
        let a = run(&d.join("a"), "queue", "{}", "");
        let b = run(&d.join("b"), "queue", "{}", "");
        for (run, q) in [(&a, [3.0, 5.0]), (&b, [30.0, 50.0])] {
            let sub = run.join("100M-cubic");
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(
                sub.join("throughput.csv"),
                "t,f0,f1\n0.5,40,50\n1.0,45,55\n",
            )
            .unwrap();
            let f = std::fs::File::create(sub.join("queue.csv.gz")).unwrap();
            let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
            writeln!(gz, "t_ns,qlen_pkts\n1,{}\n2,{}", q[0], q[1]).unwrap();
            gz.finish().unwrap();
        }
        // A run folder with a throughput series only: overlaid too.
        for run in [&a, &b] {
            std::fs::create_dir_all(run.join("100M-dctcp")).unwrap();
            std::fs::write(run.join("100M-dctcp/throughput.csv"), "t,f0\n0.5,90\n").unwrap();
        }
        // Only in the first run: not overlaid.
        std::fs::create_dir_all(a.join("1G-cubic")).unwrap();
        std::fs::write(a.join("1G-cubic/throughput.csv"), "t,f0\n0.5,900\n").unwrap();
        let runs = read_runs(&[a.clone(), b]).unwrap();
        let out = ResultsDir::create(&d, "", Some(&d.join("page"))).unwrap();
        let report = page(&runs, &out).unwrap();
        let files: Vec<String> = report
            .blocks
            .iter()
            .filter_map(|b| match b {
                crate::report::model::Block::Figures(f) => Some(f.iter().map(|f| f.file.clone())),
                _ => None,
            })
            .flatten()
            .collect();
        let drawn = files.iter().all(|f| out.file(f).exists());
        let queue = read_queue(&a.join("100M-cubic/queue.csv.gz")).unwrap();
        let rates = read_throughput(&a.join("100M-cubic/throughput.csv")).unwrap();
        let _ = std::fs::remove_dir_all(&d);
        assert_eq!(
            files,
            [
                "100M-cubic_queue_cdf.png",
                "100M-cubic_throughput.png",
                "100M-cubic_flow_rates.png",
                "100M-dctcp_throughput.png",
                "100M-dctcp_flow_rates.png",
            ]
        );
        assert!(drawn, "{files:?}");
        assert_eq!(queue, Some(vec![3.0, 5.0]));
        assert_eq!(
            rates,
            Some((vec![0.5, 1.0], vec![vec![40.0, 45.0], vec![50.0, 55.0]]))
        );
        let (t, flows) = rates.unwrap();
        assert_eq!(
            summed_and_means(&t, &flows),
            (
                vec![(0.5, 90.0), (1.0, 100.0)],
                vec![(0.0, 42.5), (1.0, 52.5)]
            )
        );
    }

    #[test]
    fn what_is_no_pair_of_runs_of_one_experiment_is_refused() {
        let d = tmp("refuse");
        let a = run(&d.join("a"), "queue", "{}", "");
        let b = run(&d.join("b"), "incast", "{}", "");
        std::fs::create_dir_all(d.join("empty")).unwrap();
        let err = |dirs: &[PathBuf]| read_runs(dirs).err().map(|e| format!("{e:#}"));
        let one = err(&[a.clone()]);
        let mixed = err(&[a.clone(), b]);
        let missing = err(&[a.clone(), d.join("nothere")]);
        let empty = err(&[a, d.join("empty")]);
        let _ = std::fs::remove_dir_all(&d);
        assert!(one.unwrap().contains("give two runs or more"));
        assert!(mixed.unwrap().contains("of `lab queue`,"));
        assert!(missing.unwrap().contains("no such folder"));
        assert!(empty.unwrap().contains("is empty"));
    }

    #[test]
    fn csv_fields_keep_their_commas_and_quotes() {
        assert_eq!(
            split_csv("a,\"b, \"\"c\"\"\",,1"),
            ["a", "b, \"c\"", "", "1"]
        );
        let (h, rows) = parse_csv("x,y\n1,2\n3,4\n");
        assert_eq!((h.len(), rows.len(), rows[1][1].as_str()), (2, 2, "4"));
    }
}
