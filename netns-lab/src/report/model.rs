//! One experiment's results as data: tables whose columns are declared once
//! (name, unit, format, and how a row fills the cell), the checks of the
//! figures against their targets, the plots, and the prose between them.
//! `summary.md`, `index.html` and `runs.csv` are renderings of one
//! [`Report`] (`render.rs`), so a cell can never drift from its header and
//! every format says the same figures.

/// How a number is shown: fixed decimals, optionally as a percentage of a
/// share (0.953 shows as 95.3%).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fmt {
    pub decimals: usize,
    pub percent: bool,
}

impl Fmt {
    pub const fn dp(decimals: usize) -> Fmt {
        Fmt {
            decimals,
            percent: false,
        }
    }

    pub const fn pct(decimals: usize) -> Fmt {
        Fmt {
            decimals,
            percent: true,
        }
    }

    /// The value as a reader sees it: `95.3%`, `17.2`.
    pub fn show(self, v: f64) -> String {
        if self.percent {
            format!("{:.*}%", self.decimals, v * 100.0)
        } else {
            format!("{:.*}", self.decimals, v)
        }
    }

    /// The value for data (a CSV): in the shown unit, three more decimals,
    /// no sign of the unit.
    pub fn data(self, v: f64) -> String {
        let v = if self.percent { v * 100.0 } else { v };
        format!("{:.*}", self.decimals + 3, v)
    }
}

/// One cell of a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    Int(i64),
    Num(f64, Fmt),
    /// A spread such as p5-p95.
    Range(f64, f64, Fmt),
    /// One value per flow, `94.1 / 3.2`.
    List(Vec<f64>, Fmt),
    /// Not measured in this row (`-`).
    Missing,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    pub fn int(v: impl TryInto<i64>) -> Cell {
        v.try_into().map_or(Cell::Missing, Cell::Int)
    }

    pub fn num(v: f64, decimals: usize) -> Cell {
        Cell::Num(v, Fmt::dp(decimals))
    }

    pub fn pct(share: f64, decimals: usize) -> Cell {
        Cell::Num(share, Fmt::pct(decimals))
    }

    /// `Some(v)` as [`Cell::num`], `None` as missing.
    pub fn opt(v: Option<f64>, decimals: usize) -> Cell {
        v.map_or(Cell::Missing, |v| Cell::num(v, decimals))
    }

    /// As a reader sees it in a table.
    pub fn show(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Int(v) => v.to_string(),
            Cell::Num(v, f) => f.show(*v),
            Cell::Range(lo, hi, f) => format!("{}-{}", f.show(*lo), f.show(*hi)),
            Cell::List(v, f) => v.iter().map(|x| f.show(*x)).collect::<Vec<_>>().join(" / "),
            Cell::Missing => "-".into(),
        }
    }

    /// As data: a range is two fields (low, high), a list one field of
    /// values separated by spaces, a missing value an empty field.
    fn data(&self) -> Vec<String> {
        match self {
            Cell::Text(s) => vec![s.clone()],
            Cell::Int(v) => vec![v.to_string()],
            Cell::Num(v, f) => vec![f.data(*v)],
            Cell::Range(lo, hi, f) => vec![f.data(*lo), f.data(*hi)],
            Cell::List(v, f) => vec![v.iter().map(|x| f.data(*x)).collect::<Vec<_>>().join(" ")],
            Cell::Missing => vec![String::new()],
        }
    }

    /// How many data fields a cell of this kind takes.
    fn width(&self) -> usize {
        self.data().len()
    }
}

/// A column's head: what it holds and in which unit (empty: none, or the
/// unit is in the values, as `95.3%`).
#[derive(Clone, Debug, PartialEq)]
pub struct Head {
    pub name: String,
    pub unit: &'static str,
}

impl Head {
    /// The header a reader sees: `queue mean (packets)`.
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }

    /// The header's name for data: lower case, words joined by `_`, the
    /// unit last (`queue_mean_packets`).
    pub fn key(&self) -> String {
        let words = format!("{} {}", self.name, self.unit);
        let mut key = String::new();
        for word in words.split(|c: char| !c.is_ascii_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            if !key.is_empty() {
                key.push('_');
            }
            key.push_str(&word.to_ascii_lowercase());
        }
        if words.contains('%') {
            key.push_str("_pct");
        }
        key
    }
}

/// A table: its heads and rows of cells, one per head.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub heads: Vec<Head>,
    pub rows: Vec<Vec<Cell>>,
}

/// The columns of a table over rows of `R`, each declared once with how a
/// row fills it: `Columns::new().col("drops", "", |o| Cell::int(o.drops))`.
pub struct Columns<'a, R> {
    cols: Vec<(Head, Box<dyn Fn(&R) -> Cell + 'a>)>,
}

impl<'a, R> Default for Columns<'a, R> {
    fn default() -> Self {
        Columns { cols: vec![] }
    }
}

impl<'a, R> Columns<'a, R> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn col(
        mut self,
        name: impl Into<String>,
        unit: &'static str,
        cell: impl Fn(&R) -> Cell + 'a,
    ) -> Self {
        let head = Head {
            name: name.into(),
            unit,
        };
        self.cols.push((head, Box::new(cell)));
        self
    }

    /// A column only where `keep` holds (e.g. the trace's columns in a
    /// traced run).
    pub fn col_if(
        self,
        keep: bool,
        name: impl Into<String>,
        unit: &'static str,
        cell: impl Fn(&R) -> Cell + 'a,
    ) -> Self {
        if keep {
            self.col(name, unit, cell)
        } else {
            self
        }
    }

    /// The table of `rows`, a cell per column in each.
    pub fn table<'r>(&self, rows: impl IntoIterator<Item = &'r R>) -> Table
    where
        R: 'r,
    {
        Table {
            heads: self.cols.iter().map(|(h, _)| h.clone()).collect(),
            rows: rows
                .into_iter()
                .map(|r| self.cols.iter().map(|(_, f)| f(r)).collect())
                .collect(),
        }
    }
}

impl Table {
    /// The table as CSV: a header of keys, a field per value (a range's
    /// column is two, `_lo` and `_hi`, from the kind of its first row's
    /// cell). Fields with a comma or a quote are quoted.
    pub fn csv(&self) -> String {
        let widths: Vec<usize> = (0..self.heads.len())
            .map(|i| self.rows.first().map_or(1, |r| r[i].width()))
            .collect();
        let mut header = vec![];
        for (h, &w) in self.heads.iter().zip(&widths) {
            if w == 2 {
                header.push(format!("{}_lo", h.key()));
                header.push(format!("{}_hi", h.key()));
            } else {
                header.push(h.key());
            }
        }
        let mut out = header.join(",") + "\n";
        for row in &self.rows {
            let fields: Vec<String> = row
                .iter()
                .zip(&widths)
                .flat_map(|(c, &w)| {
                    let mut d = c.data();
                    d.resize(w, String::new());
                    d
                })
                .map(|f| csv_field(&f))
                .collect();
            out += &fields.join(",");
            out.push('\n');
        }
        out
    }
}

fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// A figure held against its target: what, the target (with the theory
/// that sets it), what was measured, and whether it was met (`None`:
/// reported beside the others, not judged).
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub what: String,
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
}

impl Check {
    pub fn judged(
        what: impl Into<String>,
        target: impl Into<String>,
        measured: impl Into<String>,
        met: bool,
    ) -> Check {
        Check {
            what: what.into(),
            target: target.into(),
            measured: measured.into(),
            met: Some(met),
        }
    }

    pub fn reported(
        what: impl Into<String>,
        target: impl Into<String>,
        measured: impl Into<String>,
    ) -> Check {
        Check {
            what: what.into(),
            target: target.into(),
            measured: measured.into(),
            met: None,
        }
    }

    /// The met column: `yes`, `**NO**` (bold in markdown), `-`.
    pub fn met_word(&self) -> &'static str {
        match self.met {
            Some(true) => "yes",
            Some(false) => "**NO**",
            None => "-",
        }
    }
}

/// A plot the experiment drew: its file (PNG; the SVG beside it has the
/// same stem), relative to the results folder, and what it shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub file: String,
    pub caption: String,
}

impl Figure {
    pub fn new(file: impl Into<String>, caption: impl Into<String>) -> Figure {
        Figure {
            file: file.into(),
            caption: caption.into(),
        }
    }
}

/// A part of a report, in reading order.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A heading of level 2 or 3 (the report's title is level 1).
    Heading(u8, String),
    /// A paragraph; `code` and **bold** spans are kept in every rendering.
    Text(String),
    Table(Table),
    Checks(Vec<Check>),
    Figures(Vec<Figure>),
    /// Markdown written elsewhere (the captures' index, `lab --pcap`): as
    /// it is in summary.md, converted on the page.
    Markdown(String),
}

/// One experiment's report. `runs` is the table of one row per run, the
/// one `runs.csv` holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub title: String,
    pub blocks: Vec<Block>,
    pub runs: Option<Table>,
}

impl Report {
    pub fn new(title: impl Into<String>) -> Report {
        Report {
            title: title.into(),
            ..Report::default()
        }
    }

    pub fn heading(&mut self, level: u8, text: impl Into<String>) -> &mut Self {
        self.blocks.push(Block::Heading(level, text.into()));
        self
    }

    /// A paragraph; an empty one is left out (a note that had nothing to say).
    pub fn text(&mut self, text: impl Into<String>) -> &mut Self {
        let text = text.into();
        if !text.trim().is_empty() {
            self.blocks.push(Block::Text(text));
        }
        self
    }

    pub fn table(&mut self, t: Table) -> &mut Self {
        self.blocks.push(Block::Table(t));
        self
    }

    /// The table of runs: shown where it stands, and runs.csv.
    pub fn runs_table(&mut self, t: Table) -> &mut Self {
        self.runs = Some(t.clone());
        self.table(t)
    }

    pub fn checks(&mut self, checks: Vec<Check>) -> &mut Self {
        if !checks.is_empty() {
            self.blocks.push(Block::Checks(checks));
        }
        self
    }

    pub fn figures(&mut self, figures: Vec<Figure>) -> &mut Self {
        if !figures.is_empty() {
            self.blocks.push(Block::Figures(figures));
        }
        self
    }

    pub fn markdown(&mut self, md: impl Into<String>) -> &mut Self {
        self.blocks.push(Block::Markdown(md.into()));
        self
    }

    /// Every check of the report, in order.
    pub fn all_checks(&self) -> impl Iterator<Item = &Check> {
        self.blocks.iter().flat_map(|b| match b {
            Block::Checks(c) => c.as_slice(),
            _ => &[],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Run {
        label: &'static str,
        mean: f64,
        p: (f64, f64),
        util: f64,
        drops: u64,
        gp: Vec<f64>,
        over_time: Option<f64>,
    }

    fn runs() -> Vec<Run> {
        vec![
            Run {
                label: "bpf_dctcp@bpf-step",
                mean: 19.04,
                p: (16.0, 22.0),
                util: 0.9531,
                drops: 0,
                gp: vec![47.04, 46.96],
                over_time: Some(19.55),
            },
            Run {
                label: "cubic@droptail, \"deep\"",
                mean: 331.0,
                p: (250.0, 420.0),
                util: 1.0,
                drops: 12,
                gp: vec![60.0, 34.0],
                over_time: None,
            },
        ]
    }

    fn table() -> Table {
        Columns::<Run>::new()
            .col("algorithm@backend", "", |r| Cell::text(r.label))
            .col("queue mean", "packets", |r| Cell::num(r.mean, 1))
            .col("p5-p95", "packets", |r| {
                Cell::Range(r.p.0, r.p.1, Fmt::dp(0))
            })
            .col("over time", "", |r| Cell::opt(r.over_time, 1))
            .col("utilization", "", |r| Cell::pct(r.util, 1))
            .col("drops", "", |r| Cell::int(r.drops))
            .col("goodput per flow", "Mbit/s", |r| {
                Cell::List(r.gp.clone(), Fmt::dp(1))
            })
            .table(&runs())
    }

    #[test]
    fn each_cell_shows_its_value_in_its_columns_format() {
        let t = table();
        assert_eq!(t.heads[1].title(), "queue mean (packets)");
        assert_eq!(t.heads[0].title(), "algorithm@backend");
        let shown: Vec<String> = t.rows[0].iter().map(Cell::show).collect();
        assert_eq!(
            shown,
            [
                "bpf_dctcp@bpf-step",
                "19.0",
                "16-22",
                "19.6",
                "95.3%",
                "0",
                "47.0 / 47.0"
            ]
        );
        assert_eq!(t.rows[1][3].show(), "-");
        assert_eq!(Cell::int(u64::MAX), Cell::Missing);
    }

    #[test]
    fn the_csv_has_a_key_per_field_and_the_unit_of_what_is_shown() {
        let csv = table().csv();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "algorithm_backend,queue_mean_packets,p5_p95_packets_lo,p5_p95_packets_hi,over_time,\
             utilization,drops,goodput_per_flow_mbit_s"
        );
        assert_eq!(
            lines.next().unwrap(),
            "bpf_dctcp@bpf-step,19.0400,16.000,22.000,19.5500,95.3100,0,47.0400 46.9600"
        );
        assert_eq!(
            lines.next().unwrap(),
            "\"cubic@droptail, \"\"deep\"\"\",331.0000,250.000,420.000,,100.0000,12,60.0000 34.0000"
        );
        assert_eq!(lines.next(), None);
        let pct = Head {
            name: "empty".into(),
            unit: "%",
        };
        assert_eq!(pct.key(), "empty_pct");
    }

    #[test]
    fn a_column_kept_only_where_asked_and_checks_in_order() {
        let t = Columns::<Run>::new()
            .col("a", "", |r| Cell::text(r.label))
            .col_if(false, "b", "", |r| Cell::int(r.drops))
            .table(&runs());
        assert_eq!(t.heads.len(), 1);
        let mut r = Report::new("t");
        r.text("  ").checks(vec![]).checks(vec![
            Check::judged("mean", "K +/- 3", "19.0", true),
            Check::reported("max", "K + N", "25"),
        ]);
        r.checks(vec![Check::judged("drops", "0", "3", false)]);
        assert_eq!(
            r.blocks.len(),
            2,
            "an empty paragraph and no checks are left out"
        );
        let met: Vec<&str> = r.all_checks().map(Check::met_word).collect();
        assert_eq!(met, ["yes", "-", "**NO**"]);
    }
}
