//! PNG line charts (plotters, text with the DejaVu font from
//! fonts-dejavu-core, which setup.sh installs).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

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

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<Series>,
    /// Horizontal reference lines (value, label), e.g. K.
    pub hlines: Vec<(f64, String)>,
    /// Fixed y range; otherwise 0 to the data's maximum.
    pub y_max: Option<f64>,
    /// Each point a marker, not joined (a scatter of runs).
    pub points: bool,
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
            y_max: None,
            points: false,
        }
    }

    /// A horizontal reference line, e.g. K.
    pub fn hline(mut self, y: f64, label: String) -> Self {
        self.hlines.push((y, label));
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
    let pts = c.series.iter().flat_map(|s| s.points.iter());
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

/// Draws `chart` to a 1000x560 PNG at `path`.
pub fn draw(path: &Path, chart: &Chart<'_>) -> Result<()> {
    draw_stack(path, std::slice::from_ref(chart))
}

/// Draws `charts` one above the other, 1000 wide and 360 high each (560 for
/// a single chart), e.g. queue, cwnd and alpha over the same seconds.
pub fn draw_stack(path: &Path, charts: &[Chart<'_>]) -> Result<()> {
    register_font()?;
    let height = if charts.len() == 1 {
        560
    } else {
        360 * charts.len() as u32
    };
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    for (area, chart) in root.split_evenly((charts.len(), 1)).iter().zip(charts) {
        draw_on(area, chart)?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn draw_on<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart<'_>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (x0, x1, y1) = bounds(chart);
    let mut cc = ChartBuilder::on(area)
        .caption(chart.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, 0f64..y1)
        .map_err(|e| anyhow!("{e}"))?;
    cc.configure_mesh()
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
        let width = if s.points.len() > 900 { 1 } else { 2 };
        cc.draw_series(LineSeries::new(
            s.points.iter().copied(),
            color.stroke_width(width),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(s.name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
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
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
