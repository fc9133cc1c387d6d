//! `loader trace`: stream an attached algorithm's events until a deadline or
//! Ctrl-C, then account for every event.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use dctcp_utils::{bpffs, preflight};
use loader::event::{Decoder, Event, FlowFilter};
use loader::intf::dctcp_event;
use loader::trace::{Detail, Session};

use crate::cli::TraceFormat;

pub struct Args {
    pub name: Option<String>,
    pub flow: Option<FlowFilter>,
    pub detail: Detail,
    pub format: TraceFormat,
    pub duration: Option<Duration>,
    pub output: Option<PathBuf>,
    pub take_over: bool,
}

/// The algorithm to trace: the one named, or the only one attached.
fn pick_name(name: Option<String>) -> Result<String> {
    if let Some(n) = name {
        loader::params::check_name(&n)?;
        return Ok(n);
    }
    preflight::require_root("loader trace")?;
    let names: Vec<_> = bpffs::instances()?.into_iter().map(|d| d.name).collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => dctcp_utils::usage_bail!(
            "no algorithm is attached; attach one with `loader attach --algo dctcp`"
        ),
        many => dctcp_utils::usage_bail!(
            "several algorithms are attached ({}); pick one with --algo NAME",
            many.join(", ")
        ),
    }
}

struct Writer {
    out: Box<dyn Write>,
    format: TraceFormat,
    header_done: bool,
}

impl Writer {
    fn write(&mut self, e: &Event) -> Result<()> {
        match self.format {
            TraceFormat::Jsonl => {
                serde_json::to_writer(&mut self.out, e)?;
                self.out.write_all(b"\n")?;
            }
            TraceFormat::Csv => {
                if !self.header_done {
                    writeln!(self.out, "{}", Event::CSV_HEADER)?;
                    self.header_done = true;
                }
                writeln!(self.out, "{}", e.csv_row())?;
            }
        }
        Ok(())
    }
}

pub fn run(args: Args) -> Result<()> {
    // A reader that goes away (`loader trace | head`) must end the trace
    // through the error path below, which switches tracing off: dying of
    // SIGPIPE, as the other commands do, would leave it on.
    // SAFETY: setting a signal disposition; no other thread exists yet.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let name = pick_name(args.name)?;
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut writer = Writer {
        out,
        format: args.format,
        header_done: false,
    };

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;

    let mut session = Session::start(&name, args.detail, args.take_over)?;
    eprintln!(
        "tracing {name} ({}){}; Ctrl-C to stop",
        match args.detail {
            Detail::Window => "windows, states, flow start/end".to_string(),
            Detail::PerAck { every: 1 } => "per ACK".to_string(),
            Detail::PerAck { every } => format!("one ACK in {every}"),
        },
        args.duration
            .map(|d| format!(" for {} s", d.as_secs()))
            .unwrap_or_default()
    );
    let started = Instant::now();
    let mut written = 0u64;
    let mut decoder = Decoder::default();
    let mut emit = |batch: &[dctcp_event], w: &mut Writer| -> Result<()> {
        for e in batch {
            if args.flow.as_ref().is_none_or(|f| f.matches(&e.flow)) {
                w.write(&decoder.decode(e))?;
                written += 1;
            }
        }
        Ok(())
    };

    let result = (|| -> Result<()> {
        while !stop.load(Ordering::Relaxed) && args.duration.is_none_or(|d| started.elapsed() < d) {
            let batch = session.events(Duration::from_millis(100));
            emit(&batch, &mut writer)?;
            // A detached algorithm produces nothing more: the trace is over
            // (what it produced before is drained below).
            if !session.attached() {
                eprintln!("{name} was detached: stopping");
                break;
            }
        }
        Ok(())
    })();
    // Switch tracing off whatever happened (a closed pipe, a full disk).
    let (rest, counts) = session.stop()?;
    let flushed = result.and_then(|()| {
        emit(&rest, &mut writer)?;
        writer.out.flush().map_err(Into::into)
    });
    eprintln!(
        "{name}: {} events seen, {} dropped (ring full), {} produced{}; {written} written in {:.1} s",
        counts.seen,
        counts.dropped,
        counts.produced,
        if counts.seen + counts.dropped == counts.produced {
            ""
        } else {
            " (another reader took some)"
        },
        started.elapsed().as_secs_f64()
    );
    // The reader went away: the trace is over, as a filter's is.
    match flushed {
        Err(e) if broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// Whether writing failed because the reader closed its end (as io::Error
/// from a plain write, or inside serde_json's error from a JSON one).
fn broken_pipe(e: &anyhow::Error) -> bool {
    let kind = e
        .downcast_ref::<std::io::Error>()
        .map(std::io::Error::kind)
        .or_else(|| {
            e.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
        });
    kind == Some(std::io::ErrorKind::BrokenPipe)
}
