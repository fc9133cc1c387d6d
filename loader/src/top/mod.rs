//! `loader top`: a live terminal dashboard of the flows that use an attached
//! algorithm, and of the lab switches that are running.
//!
//! A background thread polls every interval: the BPF socket iterator in every
//! network namespace ([`crate::flows::Collector`], loaded once), the attached algorithms and
//! the lab switch pins ([`tc_qdisc::pins::read_all`]). The main thread only draws and
//! reads keys, so a slow poll never freezes the screen. [`app`] holds the
//! state, [`ui`] draws it.

pub mod app;
pub mod ui;

use std::io::{IsTerminal, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use crossterm::event::{self, Event};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use dctcp_utils::{preflight, usage_bail};

use crate::{flows, instance};

use app::{App, Sample};

/// Poll period bounds, in ms, for `--interval`.
pub const MIN_INTERVAL_MS: u64 = 50;
pub const MAX_INTERVAL_MS: u64 = 5000;

/// How long the event loop waits for a key before looking for new polls.
const TICK: Duration = Duration::from_millis(50);

#[derive(Clone, Debug)]
pub struct Options {
    /// Poll period.
    pub interval: Duration,
}

/// One poll of everything the dashboard shows.
pub fn poll(collector: &flows::Collector) -> Sample {
    Sample {
        flows: collector.collect(false).map_err(|e| format!("{e:#}")),
        algorithms: instance::attached_names()
            .into_iter()
            .map(|(name, _)| name)
            .collect(),
        switches: tc_qdisc::pins::read_all(),
    }
}

/// Runs the dashboard until q, Esc, Ctrl-C or SIGINT/SIGTERM/SIGHUP.
pub fn run(opts: &Options) -> Result<()> {
    preflight::require_root("loader top")?;
    if !std::io::stdout().is_terminal() {
        usage_bail!(
            "loader top needs a terminal; use `loader flows` or `loader trace` for scripts"
        );
    }
    // The first poll runs before the terminal is taken over, so that what
    // stops it (no BTF, no BPF iterators) is printed as any other error.
    let collector = flows::Collector::new()?;
    let first = poll(&collector);
    if let Err(e) = &first.flows {
        bail!("{e}");
    }
    let started = Instant::now();
    let mut app = App::new(opts.interval.as_millis() as u64);
    app.ingest(0.0, first);

    let poller = Poller::start(collector, opts.interval, started);
    catch_signals();
    let mut screen = Screen::enter()?;
    let result = event_loop(&mut screen.terminal, &mut app, &poller, started);
    drop(screen);
    drop(poller);
    result
}

fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    poller: &Poller,
    started: Instant,
) -> Result<()> {
    let mut dirty = true;
    while !app.should_quit() && !STOP.load(Ordering::Relaxed) {
        if dirty {
            terminal.draw(|f| ui::draw(f, app))?;
            dirty = false;
        }
        if event::poll(TICK)? {
            match event::read()? {
                Event::Key(key) => {
                    app.on_key(key);
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        loop {
            match poller.samples.try_recv() {
                Ok((at, sample)) => {
                    app.ingest(at.duration_since(started).as_secs_f64(), sample);
                    dirty = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => bail!("the polling thread died"),
            }
        }
    }
    Ok(())
}

/// The background poller: one [`poll`] every interval, on a fixed schedule,
/// until it is dropped. Dropping does not wait for a poll under way, so
/// quitting is never held up by one.
struct Poller {
    samples: Receiver<(Instant, Sample)>,
    _stop: Sender<()>,
}

impl Poller {
    fn start(collector: flows::Collector, interval: Duration, started: Instant) -> Poller {
        let (tx, samples) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let mut next = started + interval;
            loop {
                match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                let sample = poll(&collector);
                if tx.send((Instant::now(), sample)).is_err() {
                    return;
                }
                next += interval;
                // Fell behind (a slow poll): start the schedule again from now.
                if next < Instant::now() {
                    next = Instant::now() + interval;
                }
            }
        });
        Poller {
            samples,
            _stop: stop,
        }
    }
}

/// Set by SIGINT, SIGTERM and SIGHUP: leave the loop and restore the terminal.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// The terminal in raw mode on the alternate screen; put back as it was when
/// dropped, on success and error alike, and by the panic hook on a panic.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    _restore: Restore,
}

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore_terminal();
    }
}

impl Screen {
    fn enter() -> Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        // From here on every way out restores the terminal.
        let restore = Restore;
        TAKEN.store(true, Ordering::SeqCst);
        enable_raw_mode().context("putting the terminal in raw mode")?;
        crossterm::execute!(std::io::stdout(), EnterAlternateScreen)
            .context("switching to the alternate screen")?;
        let terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
            .context("setting up the terminal")?;
        Ok(Screen {
            terminal,
            _restore: restore,
        })
    }
}

/// Whether the terminal is in raw mode on the alternate screen now. Leaving
/// the alternate screen twice would move the cursor back over what was
/// printed since (a panic message, say), so only the first restore acts.
static TAKEN: AtomicBool = AtomicBool::new(false);

fn restore_terminal() {
    if !TAKEN.swap(false, Ordering::SeqCst) {
        return;
    }
    let _ = disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}
