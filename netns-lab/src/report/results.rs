//! `results/<experiment>/<timestamp>/`: configuration, raw samples, plots
//! and summary of one experiment.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use super::model::Report;
use super::render;

pub struct ResultsDir {
    pub path: PathBuf,
}

/// What a results folder is a run of (its lab.json): `lab compare` reads it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    /// The experiment, `queue`.
    pub experiment: String,
    /// The command line that ran it.
    pub command: String,
    /// When it started, UTC (`YYYYmmdd-HHMMSS`).
    pub started: String,
}

impl RunInfo {
    /// The run of `experiment` this process is making.
    pub fn now(experiment: &str) -> RunInfo {
        RunInfo {
            experiment: experiment.to_string(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            started: timestamp(),
        }
    }

    /// The lab.json of the folder `dir`, or why it is no run of lab.
    pub fn read(dir: &Path) -> Result<RunInfo> {
        let path = dir.join("lab.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("{}: not what `lab` writes", path.display())),
            Err(_) if std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none()) => {
                anyhow::bail!("{} is empty: not a results folder of lab", dir.display())
            }
            Err(_) => anyhow::bail!(
                "{}: not a results folder of lab (no lab.json; `lab <experiment>` writes one)",
                dir.display()
            ),
        }
    }
}

/// Results land under `results/` of the current directory unless --out says.
/// A column of [`ResultsDir::csv_rows`]: its name, and its field of a record.
pub type Column<T> = (&'static str, fn(&T) -> String);

pub fn default_root() -> PathBuf {
    PathBuf::from("results")
}

/// UTC timestamp `YYYYmmdd-HHMMSS` (sorts by time).
pub fn timestamp() -> String {
    let t = unsafe { libc::time(std::ptr::null_mut()) };
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to a time_t and a tm.
    unsafe { libc::gmtime_r(&t, &mut tm) };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

impl ResultsDir {
    /// `root/<experiment>/<timestamp>`, or `out` itself when given.
    pub fn create(root: &Path, experiment: &str, out: Option<&Path>) -> Result<ResultsDir> {
        let path = match out {
            Some(p) => p.to_path_buf(),
            None => root.join(experiment).join(timestamp()),
        };
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ResultsDir { path })
    }

    pub fn sub(&self, name: &str) -> Result<ResultsDir> {
        let path = self.path.join(name);
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ResultsDir { path })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let f = File::create(self.file(name)).with_context(|| format!("creating {name}"))?;
        serde_json::to_writer_pretty(BufWriter::new(f), value)?;
        Ok(())
    }

    /// A report in each of its forms: summary.md, runs.csv (its table of
    /// runs, if it has one) and index.html.
    pub fn write_report(&self, report: &Report) -> Result<()> {
        self.write_text("summary.md", &render::markdown(report))?;
        if let Some(runs) = &report.runs {
            self.write_text("runs.csv", &runs.csv())?;
        }
        let subtitle = match RunInfo::read(&self.path) {
            Ok(run) => format!("`{}`, started {} UTC", run.command, run.started),
            Err(_) => format!("`{}`", self.path.display()),
        };
        self.write_text("index.html", &render::html(report, &self.path, &subtitle)?)
    }

    pub fn write_text(&self, name: &str, text: &str) -> Result<()> {
        std::fs::write(self.file(name), text).with_context(|| format!("writing {name}"))
    }

    /// A CSV of one row per record, each column a name beside how it is
    /// written, so header and rows cannot drift apart.
    pub fn csv_rows<T>(&self, name: &str, rows: &[T], columns: &[Column<T>]) -> Result<()> {
        let header: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let mut w = self.csv(name, &header.join(","))?;
        for r in rows {
            let fields: Vec<String> = columns.iter().map(|c| (c.1)(r)).collect();
            writeln!(w, "{}", fields.join(","))?;
        }
        w.flush()?;
        Ok(())
    }

    /// A CSV writer; `.csv.gz` names are compressed.
    pub fn csv(&self, name: &str, header: &str) -> Result<Box<dyn Write>> {
        let f = BufWriter::new(
            File::create(self.file(name)).with_context(|| format!("creating {name}"))?,
        );
        let mut w: Box<dyn Write> = if name.ends_with(".gz") {
            Box::new(GzEncoder::new(f, flate2::Compression::fast()))
        } else {
            Box::new(f)
        };
        writeln!(w, "{header}")?;
        Ok(w)
    }
}
