//! Drawing `loader top`: header, flow table, cwnd and alpha charts of the
//! selected flow, the lab switch panel, key help. Reads [`App`], changes only
//! what drawing learns (rows per page, scroll offset).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Cell, Chart, Dataset, GraphType, HighlightSpacing, Paragraph, Row, Sparkline,
    Table, TableState, Wrap,
};
use ratatui::Frame;

use crate::flows::alpha_fraction;

use super::app::{App, FlowTrack, Model, SwitchTrack};

pub const NO_FLOWS_HINT: &str = "no sockets use an attached algorithm; attach one with \
    `loader attach --algo dctcp` and select it with setsockopt(TCP_CONGESTION) or sysctl \
    net.ipv4.tcp_congestion_control";

const KEYS: &str = "Up/Down j/k select  PgUp/PgDn page  p/space pause  +/- time window  \
    q/Esc/Ctrl-C quit";

/// (title, width, right-aligned) of each table column.
const COLUMNS: [(&str, Constraint, bool); 11] = [
    ("flow (local -> remote)", Constraint::Fill(1), false),
    ("netns", Constraint::Length(12), false),
    ("algorithm", Constraint::Length(14), false),
    ("cwnd", Constraint::Length(7), true),
    ("ssthresh", Constraint::Length(8), true),
    ("alpha", Constraint::Length(6), true),
    ("F", Constraint::Length(6), true),
    ("srtt ms", Constraint::Length(8), true),
    ("Mbit/s", Constraint::Length(10), true),
    ("pace", Constraint::Length(7), true),
    ("state", Constraint::Length(26), false),
];

/// Rows the switch panel takes when at least one lab switch is pinned.
const SWITCH_HEIGHT: u16 = 7;

pub fn draw(frame: &mut Frame, app: &mut App) {
    let switch_height = if app.shown().switches.is_empty() {
        0
    } else {
        SWITCH_HEIGHT
    };
    let [header, table, charts, switches, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Percentage(40),
        Constraint::Length(switch_height),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    frame.render_widget(header_line(app), header);
    draw_table(frame, table, app);
    draw_charts(frame, charts, app);
    if switch_height > 0 {
        draw_switches(frame, switches, app);
    }
    frame.render_widget(Line::from(KEYS).dark_gray(), footer);
}

fn header_line(app: &App) -> Line<'static> {
    let m = app.shown();
    let algorithms = if m.algorithms.is_empty() {
        "none attached".to_string()
    } else {
        m.algorithms.join(", ")
    };
    let mut spans = vec![
        Span::from("loader top").bold(),
        Span::from(format!("  algorithms: {algorithms}")),
        Span::from(format!("  flows: {}", m.live_flows())),
        Span::from(format!("  window: {}", app.window().1)),
        Span::from(format!("  every {} ms", app.interval_ms)),
    ];
    if app.paused() {
        spans.push(Span::from("  "));
        spans.push(Span::from(" PAUSED ").black().on_yellow().bold());
    }
    if let Some(e) = &m.error {
        spans.push(Span::from(format!("  poll failed: {e}")).red());
    }
    Line::from(spans)
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

fn row(t: &FlowTrack) -> Row<'static> {
    let f = &t.flow;
    // A receiver acknowledges nothing: show what it takes in instead.
    let rate = match (t.tx_mbps, t.rx_mbps) {
        (Some(tx), Some(rx)) if tx == 0.0 && rx > 0.0 => format!("rx {rx:.1}"),
        (tx, _) => opt(tx, |v| format!("{v:.1}")),
    };
    let mut state = if t.gone_since.is_some() {
        "gone".to_string()
    } else if f.fallback {
        format!("{} {} reno-fb", f.tcp_state, f.ca_state)
    } else {
        format!("{} {}", f.tcp_state, f.ca_state)
    };
    // Prague: its fractional window in place of cwnd, and what leads.
    let cwnd = match &f.prague {
        Some(p) => {
            if t.gone_since.is_none() {
                state.push_str(&format!(" {} {}", p.mode, p.ect));
                if p.classic {
                    state.push_str(" classic");
                }
            }
            format!("{:.2}", p.frac_cwnd)
        }
        None => f.cwnd.to_string(),
    };
    let pace = match f.pacing_rate_bps {
        0 | u64::MAX => "-".to_string(),
        bps => format!("{:.1}", bps as f64 / 1e6),
    };
    let values = [
        format!("{} -> {}", f.local, f.remote),
        f.netns.clone(),
        f.algorithm.clone(),
        cwnd,
        opt(f.ssthresh, |v| v.to_string()),
        opt(f.alpha, |a| format!("{:.3}", alpha_fraction(a))),
        opt(t.marked, |v| format!("{v:.3}")),
        format!("{:.2}", f64::from(f.srtt_us) / 1000.0),
        rate,
        pace,
        state,
    ];
    let style = if t.gone_since.is_some() {
        Style::new().dark_gray()
    } else if f.fallback {
        Style::new().yellow()
    } else {
        Style::new()
    };
    Row::new(cells(values)).style(style)
}

/// Cells aligned as the column they go in.
fn cells<S: Into<String>>(values: impl IntoIterator<Item = S>) -> Vec<Cell<'static>> {
    values
        .into_iter()
        .zip(COLUMNS)
        .map(|(v, (_, _, right))| {
            let line = Line::from(v.into());
            Cell::from(if right { line.right_aligned() } else { line })
        })
        .collect()
}

fn draw_table(frame: &mut Frame, area: Rect, app: &mut App) {
    let m = app.shown();
    let rows: Vec<Row> = m.order.iter().map(|c| row(&m.flows[c])).collect();
    let empty = rows.is_empty();
    let header =
        Row::new(cells(COLUMNS.iter().map(|c| c.0))).style(Style::new().bold().underlined());
    let table = Table::new(rows, COLUMNS.map(|c| c.1))
        .header(header)
        .block(Block::bordered().title(" flows "))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::default()
        .with_offset(app.table_offset)
        .with_selected(app.selection().map(|(_, row)| row));
    frame.render_stateful_widget(table, area, &mut state);
    app.table_offset = state.offset();
    // Borders and the header row.
    app.page = usize::from(area.height.saturating_sub(3)).max(1);

    if empty {
        let inner = Block::bordered().inner(area);
        let [_, hint] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(inner);
        let text = Paragraph::new(NO_FLOWS_HINT)
            .wrap(Wrap { trim: true })
            .italic();
        frame.render_widget(text, hint);
    }
}

/// "30 s", "5 min".
fn duration_label(secs: f64) -> String {
    if secs >= 60.0 {
        format!("{} min", secs / 60.0)
    } else {
        format!("{secs} s")
    }
}

/// 1, 2 or 5 times a power of ten, at least `v` and at least 10.
fn nice_ceiling(v: f64) -> f64 {
    let v = v.max(10.0);
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}

/// The time axis every chart shares: the last `window` seconds up to now.
fn time_axis(window: f64) -> Axis<'static> {
    Axis::default()
        .bounds([-window, 0.0])
        .labels([
            format!("-{}", duration_label(window)),
            format!("-{}", duration_label(window / 2.0)),
            "now".to_string(),
        ])
        .gray()
}

fn chart<'a>(title: String, data: &'a [(f64, f64)], window: f64, y: Axis<'a>) -> Chart<'a> {
    let dataset = Dataset::default()
        .marker(Marker::Braille)
        .graph_type(GraphType::Line)
        .cyan()
        .data(data);
    Chart::new(vec![dataset])
        .block(Block::bordered().title(title))
        .x_axis(time_axis(window))
        .y_axis(y)
}

fn draw_charts(frame: &mut Frame, area: Rect, app: &App) {
    let [left, right] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(area);
    let (window, _) = app.window();
    let now = app.shown().now;
    let flow = app.selected_flow();
    let in_window = |t: f64| t >= now - window && t <= now;
    let points: Vec<_> = flow
        .map(|f| f.history.iter().filter(|p| in_window(p.t)).collect())
        .unwrap_or_default();
    let cwnd: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.t - now, f64::from(p.cwnd)))
        .collect();
    let alpha: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.t - now, alpha_fraction(p.alpha?))))
        .collect();
    let name = flow.map_or_else(
        || "no flow selected".to_string(),
        |f| format!("{} -> {}", f.flow.local, f.flow.remote),
    );

    let top = nice_ceiling(cwnd.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1);
    let y = Axis::default()
        .bounds([0.0, top])
        .labels(["0".to_string(), format!("{}", top / 2.0), format!("{top}")])
        .gray();
    frame.render_widget(
        chart(format!(" cwnd (packets): {name} "), &cwnd, window, y),
        left,
    );

    let title = match flow {
        Some(f) if f.flow.fallback => " alpha: none, Reno fallback ".to_string(),
        _ => format!(" alpha: {name} "),
    };
    let y = Axis::default()
        .bounds([0.0, 1.0])
        .labels(["0", "0.5", "1"])
        .gray();
    frame.render_widget(chart(title, &alpha, window, y), right);
}

fn draw_switches(frame: &mut Frame, area: Rect, app: &App) {
    let m: &Model = app.shown();
    let n = m.switches.len().min(4);
    let areas = Layout::horizontal(vec![Constraint::Fill(1); n]).split(area);
    for ((prefix, sw), &area) in m.switches.iter().zip(areas.iter()) {
        draw_switch(frame, area, prefix, sw, app);
    }
}

fn rate(v: Option<f64>) -> String {
    opt(v, |v| format!("{v:.0}"))
}

fn draw_switch(frame: &mut Frame, area: Rect, prefix: &str, sw: &SwitchTrack, app: &App) {
    let block = Block::bordered().title(format!(" switch {prefix} "));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = if sw.now.is_some_and(|n| n.dualpi2.is_some()) { 3 } else { 2 };
    let [text, spark] =
        Layout::vertical([Constraint::Length(rows), Constraint::Fill(1)]).areas(inner);
    let (window, label) = app.window();
    let now = app.shown().now;

    let Some(q) = sw.now else {
        let e = sw.error.clone().unwrap_or_default();
        frame.render_widget(Paragraph::new(e).red().wrap(Wrap { trim: true }), inner);
        return;
    };
    let peak = sw
        .history
        .iter()
        .filter(|p| p.0 >= now - window)
        .map(|p| p.1)
        .max()
        .unwrap_or(0);
    let idle = if q.queue.ts_ns == 0 {
        ", no arrival yet".to_string()
    } else if q.idle_s > 1.0 {
        format!(", idle {:.0} s", q.idle_s)
    } else {
        String::new()
    };
    let mut lines = vec![
        Line::from(format!(
            "queue {} pkts ({:.1} KB{idle}), max {peak} in {label}",
            q.queue.qlen,
            f64::from(q.queue.backlog) / 1000.0
        )),
        Line::from(format!(
            "marks {}/s ({} of {} pkts/s), drops {} (+{}/s), total marked {}",
            rate(sw.marks_per_s),
            opt(sw.marked_fraction, |f| format!("{:.1}%", f * 100.0)),
            rate(sw.pkts_per_s),
            q.stats.dropped + q.stats.taildrop,
            rate(sw.drops_per_s),
            q.stats.marked
        )),
    ];
    if let Some([l, c]) = q.dualpi2 {
        let ms = |v: Option<f64>| opt(v, |v| format!("{v:.2} ms"));
        lines.push(Line::from(format!(
            "dualpi2 sojourn L {} C {}; marked L {} (step {}) C {}, dropped L {} C {}",
            ms(sw.sojourn_ms[0]),
            ms(sw.sojourn_ms[1]),
            l.marked + l.step_marked,
            l.step_marked,
            c.marked,
            l.dropped,
            c.dropped
        )));
    }
    if let Some(e) = &sw.error {
        lines[1] = Line::from(format!("read failed: {e}")).red();
    }
    frame.render_widget(Paragraph::new(lines), text);
    let bars = queue_buckets(sw, now, window, usize::from(spark.width));
    frame.render_widget(
        Sparkline::default()
            .data(&bars)
            .max(peak.max(1).into())
            .green(),
        spark,
    );
}

/// The queue over the window in `n` columns: the largest queue seen in each
/// column's slice of time, the last value carried over slices no poll fell
/// in, nothing before the first poll.
fn queue_buckets(sw: &SwitchTrack, now: f64, window: f64, n: usize) -> Vec<Option<u64>> {
    let mut buckets: Vec<Option<u64>> = vec![None; n];
    if n == 0 {
        return buckets;
    }
    let start = now - window;
    for &(t, q) in sw.history.iter().filter(|p| p.0 >= start && p.0 <= now) {
        let i = (((t - start) / window) * n as f64) as usize;
        let b = &mut buckets[i.min(n - 1)];
        *b = Some(b.unwrap_or(0).max(u64::from(q)));
    }
    let mut last = None;
    for b in &mut buckets {
        match b {
            Some(_) => last = *b,
            None => *b = last,
        }
    }
    buckets
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::Terminal;

    use crossterm::event::KeyCode;

    use super::*;
    use crate::flows::Flow;
    use crate::top::app::tests::{flow, key, sample, switch};

    fn render(app: &mut App, width: u16, height: u16) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| draw(f, app)).unwrap();
        terminal.backend().buffer().clone()
    }

    fn lines(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect()
    }

    fn screen(buf: &Buffer) -> String {
        lines(buf).join("\n")
    }

    /// The row (screen line) the table highlights.
    fn highlighted(buf: &Buffer) -> usize {
        lines(buf)
            .iter()
            .position(|l| l.contains("│> "))
            .expect("a highlighted row")
    }

    /// 300 flows (cwnd = 100 + i, alpha = i / 1024), the first one with a
    /// history, and a lab switch, over two polls.
    fn busy_app() -> App {
        let mut app = App::new(250);
        let flows = |round: u64| -> Vec<Flow> {
            (0..300u64)
                .map(|i| {
                    let mut f = flow(1000 + i, 40000 + i as u16);
                    f.cwnd = 100 + i as u32;
                    f.alpha = Some((i as u32) << 10);
                    f.bytes_acked = round * 1_250_000 * (i + 1);
                    f.delivered = (round * 1000) as u32;
                    f.delivered_ce = (round * 100) as u32;
                    f
                })
                .collect()
        };
        for round in 0..=40u64 {
            let mut s = sample(flows(round));
            s.switches = vec![switch(
                "dl0a1b2",
                17 + (round % 5) as u32,
                round * 1000,
                round * 250,
                0,
            )];
            app.ingest(round as f64 * 0.25, s);
        }
        app
    }

    #[test]
    fn dashboard_of_300_flows_and_a_switch() {
        let mut app = busy_app();
        let buf = render(&mut app, 160, 50);
        let text = screen(&buf);
        let l = lines(&buf);
        eprintln!("{text}");
        assert!(l[0].starts_with("loader top  algorithms: bpf_dctcp  flows: 300  window: 1 min"));
        assert!(l[0].contains("every 250 ms"));
        assert!(!text.contains("PAUSED"));
        for title in [
            "flow (local -> remote)",
            "netns",
            "algorithm",
            "cwnd",
            "ssthresh",
            "alpha",
            "F ",
            "srtt ms",
            "Mbit/s",
            "pace",
            "state",
        ] {
            assert!(text.contains(title), "column {title}");
        }
        // The first flow: cwnd 100, alpha 0/1024, F 0.1, 40 Mbit/s (1.25 MB per 0.25 s).
        let first = l
            .iter()
            .find(|l| l.contains("198.18.0.1:40000 -> 198.18.0.2:5201"))
            .expect("first flow row");
        let cols: Vec<&str> = first.split_whitespace().collect();
        assert_eq!(
            cols[1..],
            [
                "198.18.0.1:40000",
                "->",
                "198.18.0.2:5201",
                "dl0a1b2cl",
                "bpf_dctcp",
                "100",
                "20",
                "0.000",
                "0.100",
                "0.25",
                "40.0",
                "-",
                "ESTAB",
                "open",
                "│"
            ],
            "{first}"
        );
        let second = l.iter().find(|l| l.contains(":40001 ->")).unwrap();
        assert!(
            second.contains(" 101 ") && second.contains(" 0.001 "),
            "{second}"
        );
        // Charts of the selected (first) flow over the window.
        assert!(text.contains(" cwnd (packets): 198.18.0.1:40000 -> 198.18.0.2:5201 "));
        assert!(text.contains(" alpha: 198.18.0.1:40000 -> 198.18.0.2:5201 "));
        assert!(text.contains("-1 min") && text.contains("-30 s") && text.contains("now"));
        // cwnd 100 for 10 s: the axis goes to 200.
        assert!(text.contains("200"));
        // Switch panel with the queue now and the marking rate.
        assert!(text.contains(" switch dl0a1b2 "));
        assert!(
            text.contains("queue 17 pkts (25.7 KB), max 21 in 1 min"),
            "{text}"
        );
        assert!(text.contains("marks 1000/s (25.0% of 4000 pkts/s), drops 0 (+0/s)"));
        assert!(l[49].contains("q/Esc/Ctrl-C quit"));
    }

    /// A poll and a frame of 300 flows with 10 minutes of history each take
    /// about 2 ms optimised, 20 ms not; the bound catches a blow-up (a pass
    /// over every history per row, say), not a slow machine.
    #[test]
    fn three_hundred_flows_poll_and_draw_fast() {
        let mut app = busy_app();
        let flows: Vec<Flow> = (0..300u64)
            .map(|i| flow(1000 + i, 40000 + i as u16))
            .collect();
        for i in 0..1200 {
            app.ingest(10.5 + f64::from(i) * 0.5, sample(flows.clone()));
        }
        assert_eq!(app.shown().flows[&1000].history.len(), 1201);
        let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
        let start = std::time::Instant::now();
        for i in 0..20 {
            app.ingest(610.5 + f64::from(i) * 0.25, sample(flows.clone()));
            app.on_key(key(KeyCode::Down));
            terminal.draw(|f| draw(f, &mut app)).unwrap();
        }
        let per_frame = start.elapsed() / 20;
        eprintln!("poll + frame of 300 flows: {per_frame:?}");
        assert!(
            per_frame < std::time::Duration::from_millis(50),
            "{per_frame:?}"
        );
    }

    #[test]
    fn keys_move_the_highlight_and_pause_shows() {
        let mut app = busy_app();
        let buf = render(&mut app, 160, 50);
        let first = highlighted(&buf);
        assert!(lines(&buf)[first].contains(":40000 ->"));

        app.on_key(key(KeyCode::Down));
        let buf = render(&mut app, 160, 50);
        assert_eq!(highlighted(&buf), first + 1);
        assert!(lines(&buf)[first + 1].contains(":40001 ->"));
        assert!(screen(&buf).contains(" cwnd (packets): 198.18.0.1:40001 -> "));

        // Past the visible rows the table scrolls: the selection stays on screen.
        app.on_key(key(KeyCode::PageDown));
        app.on_key(key(KeyCode::PageDown));
        let buf = render(&mut app, 160, 50);
        let (cookie, _) = app.selection().unwrap();
        let port = 40000 + (cookie - 1000);
        assert!(lines(&buf)[highlighted(&buf)].contains(&format!(":{port} ->")));
        assert!(port > 40020, "scrolled to {port}");
        // Up wraps from the first row to the 300th.
        app.on_key(key(KeyCode::Home));
        app.on_key(key(KeyCode::Up));
        let buf = render(&mut app, 160, 50);
        assert!(lines(&buf)[highlighted(&buf)].contains(":40299 ->"));

        app.on_key(key(KeyCode::Char('p')));
        let buf = render(&mut app, 160, 50);
        assert!(lines(&buf)[0].contains(" PAUSED "));
        app.on_key(key(KeyCode::Char('+')));
        let buf = render(&mut app, 160, 50);
        assert!(lines(&buf)[0].contains("window: 5 min"));
        assert!(screen(&buf).contains("-5 min") && screen(&buf).contains("-2.5 min"));
    }

    /// A bpf-dualpi2 switch adds a line: each queue's mean sojourn between
    /// the last two polls (C: 3 s of sojourn over the 200 stamped of 800
    /// departures, 15 ms)
    /// and what was marked and dropped in each.
    #[test]
    fn a_dualpi2_switch_shows_each_queues_sojourn() {
        use tc_qdisc::pins::QueueNow;
        let mut app = App::new(250);
        for round in 1..=2u64 {
            let q = |sojourn_ns: u64, marked: u64| QueueNow {
                arrivals: 1000 * round,
                marked,
                step_marked: 4,
                dropped: 1,
                departures: 400 * round * 2,
                stamped: 100 * round * 2,
                sojourn_ns: sojourn_ns * round,
            };
            let mut s = sample(vec![]);
            let mut sw = switch("dl0a1b2", 17, round * 1000, round * 10, 0);
            if let Ok(now) = sw.now.as_mut() {
                now.dualpi2 = Some([q(20_000_000, 30), q(3_000_000_000, 7)]);
            }
            s.switches = vec![sw];
            app.ingest(round as f64 * 0.25, s);
        }
        let text = screen(&render(&mut app, 160, 40));
        assert!(
            text.contains("dualpi2 sojourn L 0.10 ms C 15.00 ms; marked L 34 (step 4) C 7, dropped L 1 C 1"),
            "{text}"
        );
    }

    #[test]
    fn empty_table_says_how_to_get_flows() {
        let mut app = App::new(250);
        app.ingest(0.0, sample(vec![]));
        let buf = render(&mut app, 160, 40);
        let text = screen(&buf);
        assert!(text.contains("flows: 0"));
        assert!(
            text.contains("flow (local -> remote)"),
            "column titles stay"
        );
        assert!(text.contains("no sockets use an attached algorithm; attach one with"));
        assert!(text.contains("`loader attach --algo dctcp`"));
        assert!(text.contains(" cwnd (packets): no flow selected "));
        assert!(!text.contains(" switch "), "no switch panel without a lab");
        // Small terminals draw without panicking.
        for (w, h) in [(80, 24), (40, 10), (10, 4), (1, 1)] {
            render(&mut busy_app(), w, h);
            render(&mut app, w, h);
        }
    }

    #[test]
    fn fallback_and_gone_flows_are_marked() {
        let mut app = App::new(250);
        let mut fb = flow(1, 40001);
        fb.fallback = true;
        fb.alpha = None;
        fb.algorithm = "bpf_dctcp_reno".into();
        app.ingest(0.0, sample(vec![fb.clone(), flow(2, 40002)]));
        app.ingest(0.25, sample(vec![fb]));
        let text = screen(&render(&mut app, 160, 40));
        let l: Vec<&str> = text.lines().collect();
        let fb_row = l.iter().find(|l| l.contains(":40001 ->")).unwrap();
        assert!(fb_row.contains("ESTAB open reno-fb") && fb_row.contains("bpf_dctcp_reno"));
        let gone = l.iter().find(|l| l.contains(":40002 ->")).unwrap();
        assert!(gone.contains("gone"), "{gone}");
        assert!(text.contains(" alpha: none, Reno fallback "));
        assert!(text.contains("flows: 1"));
    }

    #[test]
    fn queue_buckets_follow_time() {
        let mut sw = SwitchTrack::default();
        sw.history.extend([(5.0, 3), (6.0, 9), (6.1, 4), (9.5, 1)]);
        // 10 s window ending at 10, five 2 s columns.
        let b = queue_buckets(&sw, 10.0, 10.0, 5);
        assert_eq!(b, [None, None, Some(3), Some(9), Some(1)]);
        assert_eq!(nice_ceiling(0.0), 10.0);
        assert_eq!(nice_ceiling(110.0), 200.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
        assert_eq!(nice_ceiling(3100.0), 5000.0);
    }

    /// A Prague flow shows its fractional window, mode and codepoint, and
    /// every flow its pacing rate.
    #[test]
    fn a_prague_row_shows_its_fractional_window_mode_and_codepoint() {
        let mut t = FlowTrack::new(0.0, crate::top::app::tests::flow(7, 40007));
        t.flow.algorithm = "bpf_prague".into();
        t.flow.pacing_rate_bps = 12_500_000;
        t.flow.prague = Some(crate::flows::PragueFlow {
            frac_cwnd: 1.375,
            mode: "rate",
            ect: "ECT(1)",
            rtt_scale: 0.04,
            round: 9,
            classic: true,
            classic_score: 0.8,
        });
        let text = format!("{:?}", row(&t));
        assert!(text.contains("1.38") && !text.contains("\"10\""), "{text}");
        assert!(text.contains("ESTAB open rate ECT(1) classic"), "{text}");
        assert!(text.contains("12.5"), "{text}");
    }
}
