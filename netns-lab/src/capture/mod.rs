//! `lab --pcap`: every run's packets, headers only, in pcapng files that
//! Wireshark and tshark open, and seed 004's per-round-trip view of them
//! (`lab rtts`, [`rtts`]).
//!
//! Each capture point is an AF_PACKET socket on one of the star's
//! interfaces, in that interface's namespace, writing its own file (a flow
//! seen at two points in one file would look to tshark like its own
//! retransmission): `bottleneck` is the switch's port toward the receiver,
//! where data leaves after the queue with the marks the switch set and
//! ACKs come back; `all` adds each sender's and the receiver's interface.
//! Files go to `pcap/<NNN>-<run>/<point>.pcapng` in the run's results, each
//! cut at `--pcap-limit` bytes (the summary and the console say so).

pub mod pcapng;
pub mod rtts;
mod socket;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::net::topology::Star;
use pcapng::{Interface, Writer};

/// Where a run's packets are captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum Points {
    /// The switch's port toward the receiver: data after the queue, with
    /// its CE marks, and the ACKs coming back.
    Bottleneck,
    /// The bottleneck, each sender's interface and the receiver's.
    All,
}

/// `--pcap` and `--pcap-limit` as given.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub points: Points,
    /// Bytes at most in each file.
    pub limit_bytes: u64,
}

/// The default bound of one capture file: 200 MB hold about 1.6 million
/// packets' headers, 20 s of a 1 Gbit/s bottleneck both ways.
pub const DEFAULT_LIMIT: &str = "200M";

/// `--pcap-limit`: bytes (k, M, G as powers of 1000), above 0.
pub fn parse_limit(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.trim().char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1e3),
        Some((i, 'M')) => (&s[..i], 1e6),
        Some((i, 'G')) => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (bytes, or with k, M, G: 200M)"))?;
    let bytes = (v * mult).round();
    if bytes.is_nan() || bytes < 1.0 {
        return Err(format!(
            "a capture bound of {s} keeps nothing: give one above 0 (200M)"
        ));
    }
    if bytes < 4096.0 {
        return Err(format!(
            "a capture bound of {s} holds not even the file's headers: give 4k or more"
        ));
    }
    Ok(bytes as u64)
}

struct Selected {
    plan: Plan,
    dir: Option<PathBuf>,
    runs: usize,
    label: String,
}

static SELECTED: Mutex<Option<Selected>> = Mutex::new(None);

/// Captures every run from now on (`lab --pcap`); None captures nothing.
pub fn select(plan: Option<Plan>) {
    *SELECTED.lock().unwrap() = plan.map(|plan| Selected {
        plan,
        dir: None,
        runs: 0,
        label: String::new(),
    });
}

/// The results folder the captures go under (`<dir>/pcap/`).
pub fn set_results_dir(dir: &Path) {
    if let Some(s) = SELECTED.lock().unwrap().as_mut() {
        s.dir = Some(dir.join("pcap"));
    }
}

/// Names the next run's capture (the run's progress label).
pub fn name_next_run(label: &str) {
    if let Some(s) = SELECTED.lock().unwrap().as_mut() {
        s.label = label.to_string();
    }
}

/// A file name's worth of `label`: letters, digits, '.' and '_', the rest
/// '-'.
fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut out = String::new();
    for part in s.split('-').filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(part);
    }
    out.chars().take(60).collect()
}

/// What one capture point wrote.
#[derive(Clone, Debug, Serialize)]
pub struct PointReport {
    pub point: String,
    pub file: PathBuf,
    pub packets: u64,
    pub bytes: u64,
    /// Packets left out once the file reached its bound.
    pub cut: u64,
    /// Packets the kernel dropped for want of room in the socket's queue.
    pub missed: u64,
}

/// What a run's capture wrote, point by point.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureReport {
    pub dir: PathBuf,
    pub limit_bytes: u64,
    pub points: Vec<PointReport>,
}

impl CaptureReport {
    /// One line per point, for the console and the summary.
    pub fn lines(&self) -> Vec<String> {
        self.points
            .iter()
            .map(|p| {
                let mut s = format!(
                    "capture {}: {} packets, {:.1} MB",
                    p.file.display(),
                    p.packets,
                    p.bytes as f64 / 1e6
                );
                if p.cut > 0 {
                    let bound = match self.limit_bytes {
                        b if b >= 1_000_000 => format!("{:.0} MB", b as f64 / 1e6),
                        b => format!("{:.0} kB", b as f64 / 1e3),
                    };
                    s += &format!(
                        "; CUT: {} packets left out at the {bound} bound (--pcap-limit)",
                        p.cut
                    );
                }
                if p.missed > 0 {
                    s += &format!(
                        "; {} packets missed (the capture socket's queue was full)",
                        p.missed
                    );
                }
                s
            })
            .collect()
    }
}

struct PointThread {
    point: String,
    file: PathBuf,
    handle: JoinHandle<std::io::Result<Result<PointReport>>>,
}

/// A run's capture under way; stopped by [`Capture::finish`], or when
/// dropped (on an error or Ctrl-C), before the namespaces go.
pub struct Capture {
    stop: Arc<AtomicBool>,
    threads: Vec<PointThread>,
    dir: PathBuf,
    limit_bytes: u64,
}

/// One capture point: a namespace, an interface, and what it is.
struct Point {
    name: String,
    ns: PathBuf,
    ifname: String,
    description: String,
}

fn points_of(star: &Star, points: Points) -> Vec<Point> {
    let mut out = vec![Point {
        name: "bottleneck".into(),
        ns: star.switch.path(),
        ifname: star.bottleneck_if.clone(),
        description: format!(
            "the switch's port toward the receiver (namespace {}): data as it leaves the queue, with \
             the switch's marks; ACKs as they come back",
            star.switch.name()
        ),
    }];
    if points == Points::All {
        for (i, h) in star.senders.iter().enumerate() {
            out.push(Point {
                name: format!("sender-{i}"),
                ns: h.ns.path(),
                ifname: h.ifname.clone(),
                description: format!(
                    "sender {i} ({}, namespace {}): its own view",
                    h.addr,
                    h.ns.name()
                ),
            });
        }
        out.push(Point {
            name: "receiver".into(),
            ns: star.receiver.ns.path(),
            ifname: star.receiver.ifname.clone(),
            description: format!(
                "the receiver ({}, namespace {})",
                star.receiver.addr,
                star.receiver.ns.name()
            ),
        });
    }
    out
}

impl Capture {
    /// Starts capturing `star` if `lab --pcap` asked for it (None if not).
    /// Each point's socket is open before this returns.
    pub fn start(star: &Star) -> Result<Option<Capture>> {
        let (plan, dir): (Plan, PathBuf) = {
            let mut sel = SELECTED.lock().unwrap();
            let Some(s) = sel.as_mut() else {
                return Ok(None);
            };
            let root = s
                .dir
                .clone()
                .context("the capture has no results folder (set_results_dir)")?;
            s.runs += 1;
            let name = match slug(&s.label) {
                l if l.is_empty() => format!("{:03}", s.runs),
                l => format!("{:03}-{l}", s.runs),
            };
            (s.plan, root.join(name))
        };
        Capture::open(star, plan.points, plan.limit_bytes, &dir).map(Some)
    }

    /// Captures `star` at `points` into `dir`, each file bounded at
    /// `limit_bytes`.
    pub fn open(star: &Star, points: Points, limit_bytes: u64, dir: &Path) -> Result<Capture> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut cap = Capture {
            stop: stop.clone(),
            threads: Vec::new(),
            dir: dir.to_path_buf(),
            limit_bytes,
        };
        for p in points_of(star, points) {
            let file = dir.join(format!("{}.pcapng", p.name));
            let (ready_tx, ready_rx) = mpsc::sync_channel(1);
            let (f, stop, limit) = (file.clone(), stop.clone(), limit_bytes);
            let point = p.name.clone();
            let ns = p.ns.clone();
            let handle = dctcp_utils::setns::spawn_in(&ns, move || {
                capture_point(&p, &f, limit, &stop, ready_tx)
            })?;
            let opened = ready_rx
                .recv()
                .unwrap_or_else(|_| Err("the capture thread ended".into()));
            cap.threads.push(PointThread {
                point,
                file,
                handle,
            });
            if let Err(e) = opened {
                bail!("capturing {}: {e}", cap.threads.last().unwrap().point);
            }
        }
        Ok(cap)
    }

    /// Stops every point, writes what is still queued, and says what each
    /// file holds (appended to the folder's captures.md as well).
    pub fn finish(mut self) -> Result<CaptureReport> {
        let reports = self.stop_all();
        let mut points = Vec::new();
        for r in reports {
            points.push(r?);
        }
        let report = CaptureReport {
            dir: self.dir.clone(),
            limit_bytes: self.limit_bytes,
            points,
        };
        record(&report)?;
        // Seed 004's view of the bottleneck, beside its capture.
        if let Some(b) = report.points.first() {
            let cap = pcapng::read(&std::fs::read(&b.file)?)?;
            let a = rtts::analyse(&cap, 0)?;
            write_rtts(&self.dir, &a, &a.render(20, None))?;
        }
        Ok(report)
    }

    fn stop_all(&mut self) -> Vec<Result<PointReport>> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|t| {
                let what = format!("capture {} ({})", t.point, t.file.display());
                match t.handle.join() {
                    Ok(Ok(r)) => r.with_context(|| what.clone()),
                    Ok(Err(e)) => Err(anyhow::Error::new(e).context(what)),
                    Err(_) => bail!("{what}: the thread panicked"),
                }
            })
            .collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        drop(self.stop_all());
    }
}

/// What the experiment's captures in `dir` hold, as markdown for its
/// report: the files, and each bottleneck's flows as `lab rtts` reads them.
/// None when nothing was captured.
pub fn summary_section(dir: &Path) -> Result<Option<String>> {
    let pcap = dir.join("pcap");
    let Ok(index) = std::fs::read_to_string(pcap.join("captures.md")) else {
        return Ok(None);
    };
    // The index without its title.
    let mut s = index.trim_start_matches("# Captures\n\n").to_string();
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&pcap)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("rtts.md").exists())
        .collect();
    runs.sort();
    for run in runs {
        let text = std::fs::read_to_string(run.join("rtts.md"))?;
        // The flows' table: up to the first round-trip listing.
        let table = text.split("\nRound trips of").next().unwrap_or("");
        let name = run.file_name().unwrap_or_default().to_string_lossy();
        s += &format!("\n{name}: {}", table.trim_end());
        s += &format!("\n(each flow's round trips: pcap/{name}/rtts.md)\n");
    }
    Ok(Some(s))
}

/// Appends a run's capture to `pcap/captures.md`: a table a reader finds
/// beside the files.
fn record(report: &CaptureReport) -> Result<()> {
    let index = report
        .dir
        .parent()
        .context("a capture folder has a parent")?
        .join("captures.md");
    let new = !index.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&index)
        .with_context(|| format!("writing {}", index.display()))?;
    if new {
        writeln!(
            f,
            "# Captures\n\nOne folder per run, one pcapng file per capture point (`tshark -r FILE`, \
             `lab rtts FILE`).\n\n| run | point | packets | MB | left out at the bound | missed by the socket |\n\
             | --- | --- | --- | --- | --- | --- |"
        )?;
    }
    let run = report.dir.file_name().unwrap_or_default().to_string_lossy();
    for p in &report.points {
        writeln!(
            f,
            "| {run} | {} | {} | {:.1} | {} | {} |",
            p.point,
            p.packets,
            p.bytes as f64 / 1e6,
            p.cut,
            p.missed
        )?;
    }
    Ok(())
}

/// One point's loop, on a thread inside its namespace: open the socket (say
/// so on `ready`), write until told to stop, then drain what is queued.
fn capture_point(
    p: &Point,
    file: &Path,
    limit: u64,
    stop: &AtomicBool,
    ready: mpsc::SyncSender<Result<(), String>>,
) -> Result<PointReport> {
    let opened = socket::PacketSocket::open(&p.ifname, 32 << 20)
        .map_err(|e| e.to_string())
        .and_then(|s| {
            let f = File::create(file).map_err(|e| format!("creating {}: {e}", file.display()))?;
            let iface = Interface {
                name: p.ifname.clone(),
                description: p.description.clone(),
                snaplen: socket::SNAPLEN,
            };
            let comment = format!("dctcp-bpf lab, capture point {}: {}", p.name, p.description);
            Writer::new(BufWriter::with_capacity(1 << 20, f), &comment, &[iface])
                .map(|w| (s, w))
                .map_err(|e| format!("writing {}: {e}", file.display()))
        });
    let (sock, mut w) = match opened {
        Ok(v) => {
            let _ = ready.send(Ok(()));
            v
        }
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            bail!("{e}");
        }
    };
    let mut report = PointReport {
        point: p.name.clone(),
        file: file.to_path_buf(),
        packets: 0,
        bytes: 0,
        cut: 0,
        missed: 0,
    };
    let mut buf = vec![0u8; socket::SNAPLEN as usize];
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        // Once stopping, only what is queued already: no waiting.
        match sock.next(&mut buf, if stopping { 0 } else { 50 })? {
            Some(fr) => {
                if w.written() + Writer::<BufWriter<File>>::packet_block_len(fr.data.len()) > limit
                {
                    report.cut += 1;
                } else {
                    w.packet(0, fr.ts_ns, fr.original_len, fr.data, fr.direction)?;
                    report.packets += 1;
                }
            }
            None if stopping => break,
            None => {}
        }
    }
    report.missed = sock.take_drops();
    report.bytes = w.written();
    w.finish()?;
    Ok(report)
}

/// Seed 004's view of a capture: each flow's round trips (when each ended,
/// how long it took, the bytes sent during it and their rate), its RTT
/// distribution (tshark's ack_rtt: p50, p99), retransmissions, CE-marked
/// share and duplicate ACKs.
///
/// Reads a pcapng file (a `lab --pcap` capture, or any with Ethernet or
/// raw IPv4 frames) and prints the flows' table, then each flow's first
/// round trips as the seed's Figure 4 lists them:
///
///   RTT 2.3  0.022900(  40us)  out:  30.0KB  rate:   5.85 Gbps
///
/// (flow.round trip, its end in seconds from the flow's SYN and its
/// length, the bytes sent during it, their rate). A round trip starts when
/// a segment is sent (the first, or the first after the previous round
/// trip ended) and ends when an ACK covers it. Bad input (no such file, not
/// pcapng, cut short or corrupt) exits 2 and writes nothing.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct RttsArgs {
    /// The capture (pcapng).
    pub file: PathBuf,
    /// The interface to read, by number (0: the first) or name; a lab
    /// capture has one per file.
    #[arg(long, default_value = "0")]
    pub interface: String,
    /// Round trips listed per flow.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// List only this flow's round trips (numbered from 1 as in the table).
    #[arg(long)]
    pub flow: Option<usize>,
    /// Also write flows.csv, rtts.csv (every round trip) and rtts.md here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `lab rtts`.
pub fn rtts_command(args: &RttsArgs) -> Result<()> {
    let usage =
        |e: anyhow::Error| anyhow::Error::new(dctcp_utils::error::UsageError(format!("{e:#}")));
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))
        .map_err(usage)?;
    let cap = pcapng::read(&bytes)
        .with_context(|| format!("{}", args.file.display()))
        .map_err(usage)?;
    let interface = match args.interface.parse::<usize>() {
        Ok(i) => i,
        Err(_) => cap
            .interfaces
            .iter()
            .position(|i| i.name == args.interface)
            .with_context(|| {
                let names: Vec<&str> = cap.interfaces.iter().map(|i| i.name.as_str()).collect();
                format!(
                    "no interface {} in {} (it has: {})",
                    args.interface,
                    args.file.display(),
                    names.join(", ")
                )
            })
            .map_err(usage)?,
    };
    let a = rtts::analyse(&cap, interface).map_err(usage)?;
    if let Some(f) = args.flow {
        if f == 0 || f > a.flows.len() {
            return Err(usage(anyhow::anyhow!(
                "no flow {f}: the capture has {} (numbered from 1)",
                a.flows.len()
            )));
        }
    }
    let text = a.render(args.rounds, args.flow.map(|f| f - 1));
    print!("{text}");
    if let Some(dir) = &args.out {
        write_rtts(dir, &a, &text)?;
        println!("written: {}", dir.display());
    }
    Ok(())
}

/// flows.csv, rtts.csv and rtts.md of an analysis, into `dir`.
pub fn write_rtts(dir: &Path, a: &rtts::Analysis, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut flows = BufWriter::new(File::create(dir.join("flows.csv"))?);
    writeln!(flows, "flow,from,to,data_packets,data_bytes,rtt_samples,rtt_p50_ms,rtt_p99_ms,retransmissions,ce_packets,ce_share,dup_acks,round_trips")?;
    for f in &a.flows {
        writeln!(
            flows,
            "{},{},{},{},{},{},{:.4},{:.4},{},{},{:.4},{},{}",
            f.flow + 1,
            f.from,
            f.to,
            f.data_packets,
            f.data_bytes,
            f.rtt_samples,
            f.rtt_p50_ms,
            f.rtt_p99_ms,
            f.retransmissions,
            f.ce_packets,
            f.ce_share,
            f.dup_acks,
            f.round_trips
        )?;
    }
    flows.flush()?;
    let mut rt = BufWriter::new(File::create(dir.join("rtts.csv"))?);
    writeln!(rt, "flow,round_trip,end_s,len_ms,bytes_out,rate_bps")?;
    for r in &a.round_trips {
        writeln!(
            rt,
            "{},{},{:.6},{:.4},{},{:.0}",
            r.flow + 1,
            r.n,
            r.end_s,
            r.len_ms,
            r.bytes_out,
            r.rate_bps
        )?;
    }
    rt.flush()?;
    std::fs::write(dir.join("rtts.md"), text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_in_bytes_and_nothing_is_refused() {
        assert_eq!(parse_limit("200M"), Ok(200_000_000));
        assert_eq!(parse_limit("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_limit("64k"), Ok(64_000));
        assert_eq!(parse_limit("5000"), Ok(5000));
        for bad in ["0", "0M", "-1", "-5M", "abc", "", "NaN"] {
            let e = parse_limit(bad).unwrap_err();
            assert!(
                e.contains("nothing") || e.contains("not a size"),
                "{bad}: {e}"
            );
        }
        assert!(parse_limit("100").unwrap_err().contains("4k or more"));
    }

    #[test]
    fn run_labels_become_file_names() {
        assert_eq!(
            slug("100 Mbit/s bpf_dctcp@bpf-step"),
            "100-Mbit-s-bpf_dctcp-bpf-step"
        );
        assert_eq!(slug("1:1 @ 50M"), "1-1-50M");
        assert_eq!(slug("--"), "");
        assert_eq!(slug(&"x".repeat(100)).len(), 60);
    }

    #[test]
    fn a_report_says_when_the_bound_cut_the_file() {
        let mut r = CaptureReport {
            dir: "d".into(),
            limit_bytes: 1_000_000,
            points: vec![PointReport {
                point: "bottleneck".into(),
                file: "d/bottleneck.pcapng".into(),
                packets: 10,
                bytes: 999_000,
                cut: 0,
                missed: 0,
            }],
        };
        assert!(!r.lines()[0].contains("CUT"));
        r.points[0].cut = 7;
        r.points[0].missed = 2;
        let l = &r.lines()[0];
        assert!(
            l.contains("CUT: 7 packets left out at the 1 MB bound"),
            "{l}"
        );
        assert!(l.contains("2 packets missed"), "{l}");
    }
}
