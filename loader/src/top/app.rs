//! State of `loader top`: the flows and switches of the last polls, the rates
//! computed between two polls, the bounded history per flow, and what the
//! keys change (selection, pause, time window). No terminal here: the poller
//! feeds [`App::ingest`], the event loop feeds [`App::on_key`], the UI reads.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::flows::Flow;
use tc_qdisc::intf::marker_stats;

use tc_qdisc::pins::{SwitchNow, SwitchReading};

/// History kept per flow and per switch, whatever the window shown.
pub const HISTORY_S: f64 = 600.0;
/// ... and never more points than 10 minutes at the fastest interval (50 ms).
pub const MAX_POINTS: usize = 12_000;
/// A flow that disappeared stays, greyed, for this long.
pub const GONE_S: f64 = 5.0;
/// Time windows `+`/`-` step through: (seconds, label).
pub const WINDOWS: [(f64, &str); 5] = [
    (10.0, "10 s"),
    (30.0, "30 s"),
    (60.0, "1 min"),
    (300.0, "5 min"),
    (600.0, "10 min"),
];
const DEFAULT_WINDOW: usize = 2;

/// What one poll brought.
#[derive(Debug)]
pub struct Sample {
    /// The sockets of attached algorithms, or why walking them failed.
    pub flows: Result<Vec<Flow>, String>,
    /// Attached algorithm names (without their fallbacks).
    pub algorithms: Vec<String>,
    pub switches: Vec<SwitchReading>,
}

/// A point of a flow's history.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Seconds since `loader top` started.
    pub t: f64,
    pub cwnd: u32,
    /// 0..=1024; None for the Reno fallback.
    pub alpha: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
struct FlowCounters {
    t: f64,
    bytes_acked: u64,
    bytes_received: u64,
    delivered: u32,
    delivered_ce: u32,
}

impl FlowCounters {
    fn of(t: f64, f: &Flow) -> Self {
        FlowCounters {
            t,
            bytes_acked: f.bytes_acked,
            bytes_received: f.bytes_received,
            delivered: f.delivered,
            delivered_ce: f.delivered_ce,
        }
    }
}

/// Mbit/s from a byte counter that went from `old` to `new` in `dt` seconds.
fn mbps(old: u64, new: u64, dt: f64) -> Option<f64> {
    new.checked_sub(old).map(|b| b as f64 * 8.0 / dt / 1e6)
}

/// Appends `item` to a history bounded in time and in length.
fn push_bounded<T>(history: &mut VecDeque<T>, item: T, t_of: impl Fn(&T) -> f64, now: f64) {
    history.push_back(item);
    while history.len() > MAX_POINTS || history.front().is_some_and(|p| now - t_of(p) > HISTORY_S) {
        history.pop_front();
    }
}

/// One flow, as far as `loader top` follows it.
#[derive(Clone, Debug)]
pub struct FlowTrack {
    /// As of the last poll that saw it.
    pub flow: Flow,
    /// Sending rate from bytes_acked between the last two polls.
    pub tx_mbps: Option<f64>,
    /// Receiving rate from bytes_received.
    pub rx_mbps: Option<f64>,
    /// Marked fraction F: delivered_ce / delivered between the last two polls
    /// (None when nothing was delivered).
    pub marked: Option<f64>,
    pub history: VecDeque<Point>,
    /// When it stopped showing up in polls.
    pub gone_since: Option<f64>,
    last: FlowCounters,
}

impl FlowTrack {
    pub(crate) fn new(t: f64, flow: Flow) -> Self {
        let mut track = FlowTrack {
            last: FlowCounters::of(t, &flow),
            flow,
            tx_mbps: None,
            rx_mbps: None,
            marked: None,
            history: VecDeque::new(),
            gone_since: None,
        };
        track.record(t);
        track
    }

    fn update(&mut self, t: f64, flow: Flow) {
        let now = FlowCounters::of(t, &flow);
        let dt = t - self.last.t;
        if dt > 0.0 {
            self.tx_mbps = mbps(self.last.bytes_acked, now.bytes_acked, dt);
            self.rx_mbps = mbps(self.last.bytes_received, now.bytes_received, dt);
            let delivered = now.delivered.wrapping_sub(self.last.delivered);
            let ce = now.delivered_ce.wrapping_sub(self.last.delivered_ce);
            self.marked =
                (delivered > 0 && ce <= delivered).then(|| f64::from(ce) / f64::from(delivered));
        }
        self.last = now;
        self.flow = flow;
        self.gone_since = None;
        self.record(t);
    }

    fn record(&mut self, t: f64) {
        let p = Point {
            t,
            cwnd: self.flow.cwnd,
            alpha: self.flow.alpha,
        };
        push_bounded(&mut self.history, p, |p| p.t, t);
    }

    fn disappear(&mut self, t: f64) {
        self.gone_since.get_or_insert(t);
        self.tx_mbps = None;
        self.rx_mbps = None;
        self.marked = None;
    }
}

/// One lab switch, as far as `loader top` follows it.
#[derive(Clone, Debug, Default)]
pub struct SwitchTrack {
    /// The last successful read.
    pub now: Option<SwitchNow>,
    /// Why the last read failed, if it did.
    pub error: Option<String>,
    /// CE marks per second and marks per arrival between the last two polls.
    pub marks_per_s: Option<f64>,
    pub marked_fraction: Option<f64>,
    /// Arrivals and drops (AQM drops plus predicted tail drops) per second.
    pub pkts_per_s: Option<f64>,
    pub drops_per_s: Option<f64>,
    /// (t, packets queued).
    pub history: VecDeque<(f64, u32)>,
    /// DualPI2's L and C queues: mean sojourn (ms) of what left each
    /// between the last two polls.
    pub sojourn_ms: [Option<f64>; 2],
    last: Option<(f64, marker_stats)>,
}

impl SwitchTrack {
    fn update(&mut self, t: f64, reading: Result<SwitchNow, String>) {
        let now = match reading {
            Ok(now) => now,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        self.error = None;
        if let Some((t0, old)) = self.last {
            let dt = t - t0;
            let new = now.stats;
            if dt > 0.0 {
                let pkts = new.pkts.saturating_sub(old.pkts);
                let marked = new.marked.saturating_sub(old.marked);
                let drops = (new.dropped + new.taildrop).saturating_sub(old.dropped + old.taildrop);
                self.pkts_per_s = Some(pkts as f64 / dt);
                self.marks_per_s = Some(marked as f64 / dt);
                self.drops_per_s = Some(drops as f64 / dt);
                self.marked_fraction = (pkts > 0).then(|| marked as f64 / pkts as f64);
            }
        }
        if let (Some(new), Some(old)) = (now.dualpi2, self.now.and_then(|n| n.dualpi2)) {
            for (i, (n, o)) in new.iter().zip(&old).enumerate() {
                let left = n.stamped.saturating_sub(o.stamped);
                self.sojourn_ms[i] = (left > 0)
                    .then(|| n.sojourn_ns.saturating_sub(o.sojourn_ns) as f64 / left as f64 / 1e6);
            }
        }
        self.last = Some((t, now.stats));
        self.now = Some(now);
        push_bounded(&mut self.history, (t, now.queue.qlen), |p| p.0, t);
    }
}

/// Everything one screen shows: what the polls gave up to `now`.
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Seconds since start of the last poll applied.
    pub now: f64,
    pub flows: HashMap<u64, FlowTrack>,
    /// Cookies in display order: by namespace, local end, remote end.
    pub order: Vec<u64>,
    pub switches: BTreeMap<String, SwitchTrack>,
    pub algorithms: Vec<String>,
    /// The last poll's failure, if it failed.
    pub error: Option<String>,
    pub polls: u64,
}

impl Model {
    pub fn apply(&mut self, t: f64, sample: Sample) {
        self.now = t;
        self.polls += 1;
        self.algorithms = sample.algorithms;
        match sample.flows {
            Ok(flows) => {
                self.error = None;
                self.apply_flows(t, flows);
            }
            // Keep what was shown; say why it is not moving.
            Err(e) => self.error = Some(e),
        }
        let mut old = std::mem::take(&mut self.switches);
        for r in sample.switches {
            let mut track = old.remove(&r.prefix).unwrap_or_default();
            track.update(t, r.now);
            self.switches.insert(r.prefix, track);
        }
    }

    fn apply_flows(&mut self, t: f64, flows: Vec<Flow>) {
        let mut seen = std::collections::HashSet::with_capacity(flows.len());
        for flow in flows {
            seen.insert(flow.cookie);
            match self.flows.get_mut(&flow.cookie) {
                Some(track) => track.update(t, flow),
                None => {
                    self.flows.insert(flow.cookie, FlowTrack::new(t, flow));
                }
            }
        }
        self.flows.retain(|cookie, track| {
            if !seen.contains(cookie) {
                track.disappear(t);
            }
            track.gone_since.is_none_or(|since| t - since <= GONE_S)
        });
        let mut order: Vec<u64> = self.flows.keys().copied().collect();
        order.sort_by(|a, b| {
            let (fa, fb) = (&self.flows[a].flow, &self.flows[b].flow);
            (&fa.netns, &fa.local, &fa.remote, a).cmp(&(&fb.netns, &fb.local, &fb.remote, b))
        });
        self.order = order;
    }

    /// Flows still present (not greyed out).
    pub fn live_flows(&self) -> usize {
        self.flows
            .values()
            .filter(|f| f.gone_since.is_none())
            .count()
    }
}

/// `loader top`'s whole state.
#[derive(Debug)]
pub struct App {
    live: Model,
    /// What the screen froze on when paused; polls keep updating `live`.
    frozen: Option<Model>,
    /// The selected flow, by socket cookie, and its row the last time it was
    /// seen (where the selection lands if that flow goes away).
    selected: Option<u64>,
    selected_row: usize,
    window: usize,
    /// Poll period, for the header.
    pub interval_ms: u64,
    /// Table rows one page holds and the first row shown; the UI sets them
    /// at each draw.
    pub page: usize,
    pub table_offset: usize,
    quit: bool,
}

impl App {
    pub fn new(interval_ms: u64) -> Self {
        App {
            live: Model::default(),
            frozen: None,
            selected: None,
            selected_row: 0,
            window: DEFAULT_WINDOW,
            interval_ms,
            page: 10,
            table_offset: 0,
            quit: false,
        }
    }

    /// Takes a poll made at `t` seconds since start.
    pub fn ingest(&mut self, t: f64, sample: Sample) {
        self.live.apply(t, sample);
        self.sync_selection();
    }

    /// What the screen shows: the frozen model while paused.
    pub fn shown(&self) -> &Model {
        self.frozen.as_ref().unwrap_or(&self.live)
    }

    pub fn paused(&self) -> bool {
        self.frozen.is_some()
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    pub fn window(&self) -> (f64, &'static str) {
        WINDOWS[self.window]
    }

    /// The selected flow's cookie and its row in the shown order.
    pub fn selection(&self) -> Option<(u64, usize)> {
        let cookie = self.selected?;
        let row = self.shown().order.iter().position(|&c| c == cookie)?;
        Some((cookie, row))
    }

    pub fn selected_flow(&self) -> Option<&FlowTrack> {
        self.selected.and_then(|c| self.shown().flows.get(&c))
    }

    /// Keeps the selection on the same flow when rows move; when it is gone,
    /// on the row where it was.
    fn sync_selection(&mut self) {
        if let Some((_, row)) = self.selection() {
            self.selected_row = row;
            return;
        }
        let order = &self.shown().order;
        let row = self.selected_row.min(order.len().saturating_sub(1));
        self.selected = order.get(row).copied();
        self.selected_row = row;
    }

    fn select_row(&mut self, row: usize) {
        let order = &self.shown().order;
        if let Some(&cookie) = order.get(row) {
            self.selected = Some(cookie);
            self.selected_row = row;
        }
    }

    /// Moves the selection by `delta` rows; `wrap` goes round the ends
    /// (arrows), otherwise it stops there (pages).
    fn move_selection(&mut self, delta: isize, wrap: bool) {
        let n = self.shown().order.len() as isize;
        if n == 0 {
            return;
        }
        let cur = self.selection().map_or(-1, |(_, r)| r as isize);
        let next = if wrap {
            (cur + delta).rem_euclid(n)
        } else {
            (cur + delta).clamp(0, n - 1)
        };
        self.select_row(next as usize);
    }

    pub fn toggle_pause(&mut self) {
        self.frozen = match self.frozen {
            Some(_) => None,
            None => Some(self.live.clone()),
        };
        self.sync_selection();
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        let page = self.page.max(1) as isize;
        match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1, true),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1, true),
            KeyCode::PageDown => self.move_selection(page, false),
            KeyCode::PageUp => self.move_selection(-page, false),
            KeyCode::Home | KeyCode::Char('g') => self.select_row(0),
            KeyCode::End | KeyCode::Char('G') => {
                self.select_row(self.shown().order.len().saturating_sub(1))
            }
            KeyCode::Char('p') | KeyCode::Char(' ') => self.toggle_pause(),
            KeyCode::Char('+') | KeyCode::Char('=') => {
                self.window = (self.window + 1).min(WINDOWS.len() - 1)
            }
            KeyCode::Char('-') | KeyCode::Char('_') => self.window = self.window.saturating_sub(1),
            _ => {}
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tc_qdisc::intf::queue_now;

    /// A socket of `bpf_dctcp` between two lab addresses.
    pub fn flow(cookie: u64, port: u16) -> Flow {
        Flow {
            netns: "dl0a1b2cl".into(),
            local: format!("198.18.0.1:{port}"),
            remote: "198.18.0.2:5201".into(),
            algorithm: "bpf_dctcp".into(),
            ours: true,
            fallback: false,
            tcp_state: "ESTAB",
            ca_state: "open",
            ecn: true,
            ecn_mode: "rfc3168",
            cwnd: 10,
            ssthresh: Some(20),
            srtt_us: 250,
            mss: 1448,
            alpha: Some(512),
            ce_state: Some(0),
            ab_ecn: Some(0),
            ab_tot: Some(0),
            delivered: 0,
            delivered_ce: 0,
            bytes_acked: 0,
            bytes_received: 0,
            cookie,
            pacing_rate_bps: 0,
            prague: None,
        }
    }

    pub fn sample(flows: Vec<Flow>) -> Sample {
        Sample {
            flows: Ok(flows),
            algorithms: vec!["bpf_dctcp".into()],
            switches: Vec::new(),
        }
    }

    pub fn switch(prefix: &str, qlen: u32, pkts: u64, marked: u64, drops: u64) -> SwitchReading {
        SwitchReading {
            prefix: prefix.into(),
            now: Ok(SwitchNow {
                queue: queue_now {
                    ts_ns: 1,
                    qlen,
                    backlog: qlen * 1514,
                },
                idle_s: 0.0,
                stats: marker_stats {
                    pkts,
                    marked,
                    dropped: drops,
                    ..Default::default()
                },
                dualpi2: None,
            }),
        }
    }

    pub fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn selected_cookie(app: &App) -> Option<u64> {
        app.selection().map(|(c, _)| c)
    }

    #[test]
    fn throughput_and_marked_fraction_come_from_deltas_between_two_polls() {
        let mut app = App::new(250);
        let mut f = flow(7, 40000);
        f.bytes_acked = 1_000_000;
        f.delivered = 100;
        f.delivered_ce = 10;
        app.ingest(1.0, sample(vec![f.clone()]));
        let t = &app.shown().flows[&7];
        assert_eq!((t.tx_mbps, t.marked), (None, None), "one poll has no rate");

        // 0.25 s later: 3,125,000 more bytes acked = 100 Mbit/s; 400 more
        // packets delivered, 100 of them with ECE = F 0.25.
        f.bytes_acked += 3_125_000;
        f.bytes_received = 5_000;
        f.delivered += 400;
        f.delivered_ce += 100;
        f.cwnd = 42;
        app.ingest(1.25, sample(vec![f.clone()]));
        let t = &app.shown().flows[&7];
        assert!((t.tx_mbps.unwrap() - 100.0).abs() < 1e-9, "{:?}", t.tx_mbps);
        assert!((t.rx_mbps.unwrap() - 0.16).abs() < 1e-9, "{:?}", t.rx_mbps);
        assert!((t.marked.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(t.history.back().unwrap().cwnd, 42);

        // Nothing delivered since: F is unknown, not 0; the rate is 0.
        app.ingest(1.5, sample(vec![f.clone()]));
        let t = &app.shown().flows[&7];
        assert_eq!(t.marked, None);
        assert_eq!(t.tx_mbps, Some(0.0));

        // delivered wraps around u32 between polls.
        f.delivered = u32::MAX - 9;
        f.delivered_ce = 0;
        app.ingest(1.75, sample(vec![f.clone()]));
        f.delivered = 10; // 20 packets later
        f.delivered_ce = 5;
        app.ingest(2.0, sample(vec![f]));
        assert!((app.shown().flows[&7].marked.unwrap() - 0.25).abs() < 1e-12);
    }

    #[test]
    fn history_is_bounded_in_time_and_points() {
        let mut app = App::new(50);
        let f = flow(1, 40000);
        // 11 minutes at 50 ms.
        let polls = (660.0 / 0.05) as usize;
        for i in 0..polls {
            app.ingest(i as f64 * 0.05, sample(vec![f.clone()]));
        }
        let h = &app.shown().flows[&1].history;
        assert!(h.len() <= MAX_POINTS, "{}", h.len());
        let span = h.back().unwrap().t - h.front().unwrap().t;
        assert!(span <= HISTORY_S && span > HISTORY_S - 1.0, "{span}");

        // At a slow interval the time bound is the one that bites.
        let mut app = App::new(5000);
        for i in 0..200 {
            app.ingest(f64::from(i) * 5.0, sample(vec![f.clone()]));
        }
        let h = &app.shown().flows[&1].history;
        assert_eq!(h.len(), 121, "600 s at 5 s, both ends");
    }

    #[test]
    fn selection_follows_the_flow_when_rows_reorder() {
        let mut app = App::new(250);
        app.ingest(0.0, sample(vec![flow(1, 40001), flow(3, 40003)]));
        assert_eq!(
            selected_cookie(&app),
            Some(1),
            "first row selected at start"
        );
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.selection(), Some((3, 1)));

        // A new flow sorts before it: the selection moves down with it.
        app.ingest(
            0.25,
            sample(vec![flow(3, 40003), flow(2, 40002), flow(1, 40001)]),
        );
        assert_eq!(app.shown().order, vec![1, 2, 3]);
        assert_eq!(app.selection(), Some((3, 2)));

        // When the selected flow is gone for good, the selection stays on its row.
        app.ingest(0.5, sample(vec![flow(1, 40001), flow(2, 40002)]));
        assert_eq!(app.selection(), Some((3, 2)), "greyed, still selected");
        app.ingest(
            0.5 + GONE_S + 0.25,
            sample(vec![flow(1, 40001), flow(2, 40002)]),
        );
        assert_eq!(app.selection(), Some((2, 1)), "nearest row once dropped");
    }

    #[test]
    fn flows_that_disappear_are_greyed_then_dropped() {
        let mut app = App::new(250);
        app.ingest(0.0, sample(vec![flow(1, 40001), flow(2, 40002)]));
        app.ingest(1.0, sample(vec![flow(1, 40001)]));
        let m = app.shown();
        assert_eq!(m.order, vec![1, 2]);
        assert_eq!(m.flows[&2].gone_since, Some(1.0));
        assert_eq!(m.live_flows(), 1);
        app.ingest(1.0 + GONE_S, sample(vec![flow(1, 40001)]));
        assert_eq!(app.shown().order, vec![1, 2], "kept for GONE_S");
        app.ingest(1.0 + GONE_S + 0.25, sample(vec![flow(1, 40001)]));
        assert_eq!(app.shown().order, vec![1]);
        assert!(!app.shown().flows.contains_key(&2));

        // A failed poll changes nothing but says so.
        app.ingest(
            10.0,
            Sample {
                flows: Err("iterating sockets: EPERM".into()),
                algorithms: vec![],
                switches: vec![],
            },
        );
        assert_eq!(app.shown().order, vec![1]);
        assert_eq!(
            app.shown().error.as_deref(),
            Some("iterating sockets: EPERM")
        );
    }

    #[test]
    fn keys_pause_change_window_wrap_selection_and_quit() {
        let mut app = App::new(250);
        let flows: Vec<Flow> = (0..30).map(|i| flow(i, 40000 + i as u16)).collect();
        app.ingest(0.0, sample(flows.clone()));
        assert_eq!(selected_cookie(&app), Some(0));

        // Arrows wrap round the ends; pages stop there.
        app.on_key(key(KeyCode::Up));
        assert_eq!(app.selection(), Some((29, 29)));
        app.on_key(key(KeyCode::Char('j')));
        assert_eq!(app.selection(), Some((0, 0)));
        app.page = 12;
        app.on_key(key(KeyCode::PageDown));
        app.on_key(key(KeyCode::PageDown));
        assert_eq!(app.selection().unwrap().1, 24);
        app.on_key(key(KeyCode::PageDown));
        assert_eq!(app.selection().unwrap().1, 29);
        app.on_key(key(KeyCode::PageUp));
        assert_eq!(app.selection().unwrap().1, 17);
        app.on_key(key(KeyCode::Char('k')));
        assert_eq!(app.selection().unwrap().1, 16);

        // Pause freezes what is shown while polls go on.
        app.on_key(key(KeyCode::Char('p')));
        assert!(app.paused());
        let mut more = flows.clone();
        more[0].cwnd = 99;
        more.push(flow(100, 50000));
        app.ingest(0.25, sample(more));
        assert_eq!(app.shown().now, 0.0);
        assert_eq!(app.shown().order.len(), 30);
        assert_eq!(app.shown().flows[&0].flow.cwnd, 10);
        app.on_key(key(KeyCode::Char(' ')));
        assert!(!app.paused());
        assert_eq!(app.shown().order.len(), 31);
        assert_eq!(app.shown().flows[&0].flow.cwnd, 99);
        assert_eq!(app.selection().unwrap().0, 16, "same flow after unpause");

        // Windows step and stop at both ends.
        assert_eq!(app.window().1, "1 min");
        app.on_key(key(KeyCode::Char('+')));
        assert_eq!(app.window(), (300.0, "5 min"));
        for _ in 0..5 {
            app.on_key(key(KeyCode::Char('+')));
        }
        assert_eq!(app.window().1, "10 min");
        for _ in 0..9 {
            app.on_key(key(KeyCode::Char('-')));
        }
        assert_eq!(app.window(), (10.0, "10 s"));

        for quit in [
            key(KeyCode::Char('q')),
            key(KeyCode::Esc),
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        ] {
            let mut app = App::new(250);
            app.on_key(key(KeyCode::Char('c')));
            assert!(!app.should_quit(), "plain c does nothing");
            app.on_key(quit);
            assert!(app.should_quit(), "{quit:?}");
        }
    }

    #[test]
    fn switch_rates_come_from_counter_deltas() {
        let mut app = App::new(500);
        let mut s = sample(vec![]);
        s.switches = vec![switch("dl0a1b2", 5, 1000, 100, 0)];
        app.ingest(0.0, s);
        let mut s = sample(vec![]);
        // 0.5 s later: 2,000 arrivals, 500 marked, 3 drops.
        s.switches = vec![switch("dl0a1b2", 21, 3000, 600, 3)];
        app.ingest(0.5, s);
        let sw = &app.shown().switches["dl0a1b2"];
        assert_eq!(sw.now.unwrap().queue.qlen, 21);
        assert_eq!(sw.marks_per_s, Some(1000.0));
        assert_eq!(sw.marked_fraction, Some(0.25));
        assert_eq!(sw.pkts_per_s, Some(4000.0));
        assert_eq!(sw.drops_per_s, Some(6.0));
        assert_eq!(sw.history.iter().map(|p| p.1).collect::<Vec<_>>(), [5, 21]);
        // The lab ended: its switch goes with it.
        app.ingest(1.0, sample(vec![]));
        assert!(app.shown().switches.is_empty());
    }
}
