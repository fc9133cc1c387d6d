//! Line charts as PNG and SVG (plotters, text with the DejaVu font from
//! fonts-dejavu-core, which setup.sh installs).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// A series with more points than the frame has pixel columns: drawn one
/// pixel wide, and its points alone stand for its line.
const DENSE_POINTS: usize = 900;

fn register_font() -> Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = std::fs::read(FONT)
            .map_err(|e| format!("{FONT}: {e} (install fonts-dejavu-core: ./setup.sh)"))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{FONT} is not a usable font"))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Points of a value that holds until the next one, as a staircase: a
/// line between two of them would show a change that never happened.
pub fn stairs(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<Series>,
    /// Horizontal reference lines (value, label), e.g. K.
    pub hlines: Vec<(f64, String)>,
    /// Vertical marks without a label, e.g. when flows joined.
    pub vlines: Vec<f64>,
    /// Fixed y range; otherwise 0 to the data's maximum.
    pub y_max: Option<f64>,
    /// Each point a marker, not joined (a scatter of runs).
    pub points: bool,
    /// x holds log2 of the quantity, labelled with the quantity itself: a
    /// logarithmic axis.
    pub log2_x: bool,
    /// y holds log2 of the quantity, labelled with the quantity: a
    /// logarithmic axis over the data's (and reference lines') range.
    pub log2_y: bool,
    /// Lines drawn over the series whatever `points` says, e.g. a theory's
    /// curve beside measured points.
    pub curves: Vec<Series>,
    /// x is a category's index: a tick at each, labelled with its name.
    pub x_categories: Vec<String>,
}

impl<'a> Chart<'a> {
    /// Lines of `series`, y from 0 to the data's maximum.
    pub fn new(title: &'a str, x_label: &'a str, y_label: &'a str, series: Vec<Series>) -> Self {
        Chart {
            title,
            x_label,
            y_label,
            series,
            hlines: vec![],
            vlines: vec![],
            y_max: None,
            points: false,
            log2_x: false,
            log2_y: false,
            curves: vec![],
            x_categories: vec![],
        }
    }

    /// x values are indices into `names`: the axis names each one.
    pub fn x_categories(mut self, names: Vec<String>) -> Self {
        self.x_categories = names;
        self
    }

    /// A line over the series (a theory's curve), also in a scatter.
    pub fn curve(mut self, s: Series) -> Self {
        self.curves.push(s);
        self
    }

    /// x values are log2 of the quantity; the axis is labelled in the
    /// quantity (0.25, 0.5, 1, 2, ...).
    pub fn log2_x(mut self) -> Self {
        self.log2_x = true;
        self
    }

    /// y values are log2 of the quantity (a ratio: 1/2 and 2 as far from
    /// 1); the axis is labelled in the quantity.
    pub fn log2_y(mut self) -> Self {
        self.log2_y = true;
        self
    }

    /// A horizontal reference line, e.g. K.
    pub fn hline(mut self, y: f64, label: String) -> Self {
        self.hlines.push((y, label));
        self
    }

    /// A vertical mark at `x`, e.g. a change of the flows.
    pub fn vline(mut self, x: f64) -> Self {
        self.vlines.push(x);
        self
    }

    pub fn y_max(mut self, y: f64) -> Self {
        self.y_max = Some(y);
        self
    }

    /// Markers instead of lines.
    pub fn points(mut self) -> Self {
        self.points = true;
        self
    }
}

fn bounds(c: &Chart<'_>) -> (f64, f64, f64) {
    let pts = c
        .series
        .iter()
        .chain(&c.curves)
        .flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    for (y, _) in &c.hlines {
        y1 = y1.max(*y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if c.points {
        // Markers on the frame's edge would be cut in half.
        let pad = (x1 - x0) * 0.08;
        (x0, x1) = (x0 - pad, x1 + pad);
    }
    (
        x0,
        x1,
        // Scatters leave the top third to the legend, which lines cross anyway.
        c.y_max.unwrap_or(match (y1 > 0.0, c.points) {
            (false, _) => 1.0,
            (true, false) => y1 * 1.08,
            (true, true) => y1 * 1.4,
        }),
    )
}

/// Where the legend goes: the corner of the frame that hides the fewest
/// data points under it (upper right on a tie), judged from the legend's
/// size in pixels (entries and longest label). Where every corner would
/// hide data (and the y axis is linear), also the share of the height to
/// add on top (`Some(band)`) so that the legend sits above the data in the
/// upper right.
fn legend_place(
    c: &Chart<'_>,
    (w, h): (u32, u32),
    (x0, x1, y0, y1): (f64, f64, f64, f64),
) -> (SeriesLabelPosition, Option<f64>) {
    use SeriesLabelPosition::{LowerLeft, LowerRight, UpperLeft, UpperRight};
    let names = c.series.iter().chain(&c.curves).map(|s| s.name.as_str());
    let entries = c.series.len() + c.curves.len() + c.hlines.len();
    let longest = names
        .chain(c.hlines.iter().map(|(_, l)| l.as_str()))
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0);
    // The frame is the area less caption, axis labels and margins; a legend
    // row is about 22 px, a character 9 px, the sample line and padding 60.
    let frame_h = f64::from(h.saturating_sub(120).max(1));
    let frame_w = f64::from(w.saturating_sub(120).max(1));
    let fy = ((entries as f64 * 22.0 + 16.0) / frame_h).min(0.9);
    let fx = ((longest as f64 * 9.0 + 60.0) / frame_w).min(0.9);
    let dx = x1 - x0;
    // Lines are sampled between their points too, so a sparse line that
    // crosses a corner counts; a reference line counts across its width.
    let mut samples: Vec<(f64, f64)> = vec![];
    for s in c.series.iter().chain(&c.curves) {
        if c.points || s.points.len() > DENSE_POINTS {
            samples.extend(&s.points);
            continue;
        }
        samples.extend(s.points.first());
        for pair in s.points.windows(2) {
            let ((xa, ya), (xb, yb)) = (pair[0], pair[1]);
            samples.extend((1..=16).map(|i| {
                let t = f64::from(i) / 16.0;
                (xa + (xb - xa) * t, ya + (yb - ya) * t)
            }));
        }
    }
    for &(y, _) in &c.hlines {
        samples.extend((0..=64).map(|i| (x0 + dx * f64::from(i) / 64.0, y)));
    }
    let hidden = |right: bool, upper: bool| {
        let xs = if right {
            (x1 - fx * dx, x1)
        } else {
            (x0, x0 + fx * dx)
        };
        let dy = y1 - y0;
        let ys = if upper {
            (y1 - fy * dy, y1)
        } else {
            (y0, y0 + fy * dy)
        };
        samples
            .iter()
            .filter(|&&(x, y)| x >= xs.0 && x <= xs.1 && y >= ys.0 && y <= ys.1)
            .count()
    };
    let corners = [
        (UpperRight, hidden(true, true)),
        (UpperLeft, hidden(false, true)),
        (LowerRight, hidden(true, false)),
        (LowerLeft, hidden(false, false)),
    ];
    let (corner, n) = corners
        .into_iter()
        .min_by_key(|&(_, n)| n)
        .expect("four corners");
    // A log axis is not stretched: room for the legend there would take
    // powers of two, and squeeze the data into a strip. A fixed range is:
    // a legend over a queue's burst hides the burst (a 1 Gbit/s queue plot
    // of 2026-12-01 did).
    if n > 0 && !c.log2_y {
        (UpperRight, Some(fy))
    } else {
        (corner, None)
    }
}

/// Draws `chart` to a 1000x560 PNG at `path`, and the same as SVG beside it
/// (`index.html` shows the SVG: it scales).
pub fn draw(path: &Path, chart: &Chart<'_>) -> Result<()> {
    draw_stack(path, std::slice::from_ref(chart))
}

/// Draws `charts` one above the other, 1000 wide and 360 high each (560 for
/// a single chart), e.g. queue, cwnd and alpha over the same seconds: a PNG
/// at `path` and an SVG beside it.
pub fn draw_stack(path: &Path, charts: &[Chart<'_>]) -> Result<()> {
    register_font()?;
    let height = if charts.len() == 1 {
        560
    } else {
        360 * charts.len() as u32
    };
    let size = (1000, height);
    draw_all(BitMapBackend::new(path, size).into_drawing_area(), charts)
        .with_context(|| format!("writing {}", path.display()))?;
    let svg = path.with_extension("svg");
    draw_all(SVGBackend::new(&svg, size).into_drawing_area(), charts)
        .with_context(|| format!("writing {}", svg.display()))
}

fn draw_all<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    charts: &[Chart<'_>],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    for (area, chart) in root.split_evenly((charts.len(), 1)).iter().zip(charts) {
        draw_on(area, chart)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))
}

fn draw_on<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart<'_>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (x0, x1, mut y1) = bounds(chart);
    // A log axis spans whole powers of two around the data and the lines.
    let y0 = if chart.log2_y {
        let ys = chart
            .series
            .iter()
            .chain(&chart.curves)
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(chart.hlines.iter().map(|h| h.0));
        let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
            (lo.min(y), hi.max(y))
        });
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (-1.0, 1.0) };
        y1 = hi.ceil().max(lo.floor() + 1.0);
        lo.floor()
    } else {
        0.0
    };
    let (corner, band) = legend_place(chart, area.dim_in_pixel(), (x0, x1, y0, y1));
    if let Some(band) = band {
        y1 = y0 + (y1 - y0) / (1.0 - band);
    }
    let mut cc = ChartBuilder::on(area)
        .caption(chart.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| anyhow!("{e}"))?;
    let log_label = |x: &f64| {
        let v = x.exp2();
        if v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    // Ticks land on sums like 0.1 + 0.2: six decimals at most, trailing
    // zeros off, so they read 0.3 and not 0.30000000000000004.
    let plain_label = |x: &f64| {
        let s = format!("{x:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s == "-0" {
            "0".to_string()
        } else {
            s.to_string()
        }
    };
    // A category's name at its index, nothing between.
    let category_label = |x: &f64| {
        let i = x.round();
        match chart.x_categories.get(i as usize) {
            Some(name) if (x - i).abs() < 1e-6 && i >= 0.0 => name.clone(),
            _ => String::new(),
        }
    };
    let x_format: &dyn Fn(&f64) -> String = if !chart.x_categories.is_empty() {
        &category_label
    } else if chart.log2_x {
        &log_label
    } else {
        &plain_label
    };
    // On a log axis, a tick at each power of two (plotters picks steps of
    // 1 for as many labels as there are whole numbers in the range).
    let x_ticks = if !chart.x_categories.is_empty() {
        chart.x_categories.len().max(2)
    } else if chart.log2_x {
        ((x1.floor() - x0.ceil()) as usize + 1).max(2)
    } else {
        10
    };
    let y_format: &dyn Fn(&f64) -> String = if chart.log2_y {
        &log_label
    } else {
        &plain_label
    };
    let y_ticks = if chart.log2_y {
        ((y1.floor() - y0.ceil()) as usize + 1).max(2)
    } else {
        10
    };
    cc.configure_mesh()
        .x_labels(x_ticks)
        .x_label_formatter(x_format)
        .y_labels(y_ticks)
        .y_label_formatter(y_format)
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(23, 190, 207),
        RGBColor(0, 0, 0),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(127, 127, 127),
    ];
    for (i, s) in chart.series.iter().enumerate() {
        let color = palette[i % palette.len()];
        if chart.points {
            cc.draw_series(s.points.iter().map(|&p| Circle::new(p, 6, color.filled())))
                .map_err(|e| anyhow!("{e}"))?
                .label(s.name.as_str())
                .legend(move |(x, y)| Circle::new((x + 12, y), 6, color.filled()));
            continue;
        }
        // A wide polyline is drawn with mitred joins: where a dense series
        // turns back on itself (up and down at one pixel column, as the
        // queue at every arrival does) the mitre shoots far past the frame,
        // through the caption. One-pixel lines have no joins; a series with
        // more points than the frame has columns looks the same in them.
        let width = if s.points.len() > DENSE_POINTS { 1 } else { 2 };
        cc.draw_series(LineSeries::new(
            s.points.iter().copied(),
            color.stroke_width(width),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(s.name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
    }
    for (i, s) in chart.curves.iter().enumerate() {
        let color = palette[(chart.series.len() + i) % palette.len()];
        cc.draw_series(LineSeries::new(
            s.points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(s.name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
    }
    for &x in &chart.vlines {
        let style = BLACK.mix(0.35).stroke_width(1);
        cc.draw_series(LineSeries::new(vec![(x, y0), (x, y1)], style))
            .map_err(|e| anyhow!("{e}"))?;
    }
    for (y, label) in &chart.hlines {
        let style = BLACK.mix(0.6).stroke_width(1);
        cc.draw_series(LineSeries::new(vec![(x0, *y), (x1, *y)], style))
            .map_err(|e| anyhow!("{e}"))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    cc.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .position(corner)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A linear chart's frame: y from 0.
    fn linear((x0, x1, y1): (f64, f64, f64)) -> (f64, f64, f64, f64) {
        (x0, x1, 0.0, y1)
    }

    fn line(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }

    #[test]
    fn stairs_hold_each_value_until_the_next() {
        let s = stairs(&[(0.0, 2.0), (1.0, 3.0), (4.0, 1.0)]);
        assert_eq!(
            s,
            vec![(0.0, 2.0), (1.0, 2.0), (1.0, 3.0), (4.0, 3.0), (4.0, 1.0)]
        );
        assert!(stairs(&[]).is_empty());
    }

    /// A rising line leaves the upper left free: the legend goes there, and
    /// the y range stays the data's.
    #[test]
    fn the_legend_takes_a_free_corner() {
        let chart = Chart::new(
            "t",
            "x",
            "y",
            vec![line("rising", vec![(0.0, 0.0), (10.0, 10.0)])],
        );
        let (corner, band) = legend_place(&chart, (1000, 560), linear(bounds(&chart)));
        assert!(matches!(corner, SeriesLabelPosition::UpperLeft));
        assert_eq!(band, None);
    }

    /// Lines that fill every corner (a flat line at the top, one at the
    /// bottom, as cubic and DCTCP on one queue chart): the legend goes on top
    /// of the data, in room added above it.
    #[test]
    fn a_full_frame_gets_room_for_its_legend() {
        let chart = Chart::new(
            "t",
            "x",
            "y",
            vec![
                line("high", vec![(0.0, 400.0), (10.0, 410.0)]),
                line("low", vec![(0.0, 2.0), (10.0, 20.0)]),
            ],
        );
        let (corner, band) = legend_place(&chart, (1000, 560), linear(bounds(&chart)));
        assert!(matches!(corner, SeriesLabelPosition::UpperRight));
        let band = band.expect("room added");
        assert!(band > 0.05 && band < 0.3, "{band}");
        // A fixed range gets the room too: the legend never hides data.
        let fixed = Chart::new("t", "x", "y", chart.series).y_max(410.0);
        assert!(legend_place(&fixed, (1000, 560), linear(bounds(&fixed))).1.is_some());
        // Not a log axis, where room would cost powers of two.
        let log = Chart::new("t", "x", "y", fixed.series).log2_y();
        assert_eq!(legend_place(&log, (1000, 560), linear(bounds(&log))).1, None);
    }

    /// The queue at every arrival zigzags up and down within a pixel
    /// column; nothing of it may land outside the frame (in the caption).
    #[test]
    fn a_dense_zigzag_stays_inside_its_frame() {
        register_font().unwrap();
        let (w, h) = (1000u32, 360u32);
        let points: Vec<(f64, f64)> = (0..8000)
            .map(|i| (f64::from(i) * 1e-5, if i % 2 == 0 { 8.0 } else { 26.0 }))
            .collect();
        let chart = Chart::new(
            "queue",
            "time (s)",
            "queue (packets)",
            vec![Series {
                name: "queue".into(),
                points,
            }],
        );
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let area = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            draw_on(&area, &chart).unwrap();
            area.present().unwrap();
        }
        // The series' colour anywhere in the caption band above the frame.
        let blue = [31u8, 119, 180];
        let strays = buf[..(w * 30 * 3) as usize]
            .chunks(3)
            .filter(|p| *p == blue)
            .count();
        assert_eq!(strays, 0, "{strays} series pixels above the frame");
    }
}
