//! A request/response generator for the lab's namespaces (binary `rpcgen`,
//! one binary for both roles): workers answer requests on persistent
//! connections; a client sends them either in synchronized rounds, one
//! request to every worker at once (incast, the partition/aggregate
//! pattern), or open-loop at Poisson arrivals. Latency is recorded per
//! request in HDR histograms, per response size.
//!
//! Wire format, little-endian: a request is a 24-byte header (id u64,
//! response bytes u64, request payload bytes u32, magic u32) and its
//! payload; a response is a 16-byte header (id u64, payload bytes u64) and
//! its payload. One request is outstanding per connection at a time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::rng::Rng;

const MAGIC: u32 = 0x3143_5052; // "RPC1"
const REQ_HEADER: usize = 24;
const RESP_HEADER: usize = 16;
/// Largest response or request payload: 1 GiB.
pub const MAX_BYTES: u64 = 1 << 30;

/// What a worker did, printed as JSON when it stops.
#[derive(Debug, Default, Serialize)]
pub struct WorkerCounts {
    pub connections: u64,
    pub requests: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    requests: AtomicU64,
    request_bytes: AtomicU64,
    response_bytes: AtomicU64,
}

/// Serves requests on `listen` with congestion control `cc` until
/// `shutdown` resolves; `delay` is added before each response (a service
/// time). Returns what it served.
pub async fn worker(
    listen: SocketAddr,
    cc: Option<String>,
    delay: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerCounts> {
    let sock = TcpSocket::new_v4()?;
    sock.set_reuseaddr(true)?;
    if let Some(cc) = &cc {
        // Set on the listener: whether ECN is accepted, and the algorithm
        // accepted connections start with.
        dctcp_utils::sockopt::set_congestion(sock.as_fd(), cc)?;
    }
    sock.bind(listen)
        .with_context(|| format!("binding {listen}"))?;
    let listener: TcpListener = sock.listen(1024)?;
    let counters = Arc::new(Counters::default());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                counters.connections.fetch_add(1, Ordering::Relaxed);
                let c = counters.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, delay, &c).await {
                        tracing::debug!("connection: {e:#}");
                    }
                });
            }
        }
    }
    let c = &counters;
    Ok(WorkerCounts {
        connections: c.connections.load(Ordering::Relaxed),
        requests: c.requests.load(Ordering::Relaxed),
        request_bytes: c.request_bytes.load(Ordering::Relaxed),
        response_bytes: c.response_bytes.load(Ordering::Relaxed),
    })
}

async fn serve(mut s: TcpStream, delay: Duration, c: &Counters) -> Result<()> {
    s.set_nodelay(true)?;
    let mut header = [0u8; REQ_HEADER];
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match s.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let id = u64::from_le_bytes(header[0..8].try_into().unwrap());
        let resp = u64::from_le_bytes(header[8..16].try_into().unwrap());
        let req = u32::from_le_bytes(header[16..20].try_into().unwrap());
        let magic = u32::from_le_bytes(header[20..24].try_into().unwrap());
        if magic != MAGIC || resp > MAX_BYTES {
            bail!("not an rpcgen request");
        }
        let mut left = u64::from(req);
        while left > 0 {
            let k = left.min(buf.len() as u64) as usize;
            s.read_exact(&mut buf[..k]).await?;
            left -= k as u64;
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut h = [0u8; RESP_HEADER];
        h[0..8].copy_from_slice(&id.to_le_bytes());
        h[8..16].copy_from_slice(&resp.to_le_bytes());
        s.write_all(&h).await?;
        let mut left = resp;
        while left > 0 {
            let k = left.min(buf.len() as u64) as usize;
            s.write_all(&buf[..k]).await?;
            left -= k as u64;
        }
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.request_bytes.fetch_add(u64::from(req), Ordering::Relaxed);
        c.response_bytes.fetch_add(resp, Ordering::Relaxed);
    }
}

/// A connection to a worker with one request outstanding at a time.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(to: SocketAddr, cc: Option<&str>) -> Result<Conn> {
        let sock = TcpSocket::new_v4()?;
        if let Some(cc) = cc {
            dctcp_utils::sockopt::set_congestion(sock.as_fd(), cc)?;
        }
        let s = sock
            .connect(to)
            .await
            .with_context(|| format!("connecting to worker {to}"))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            s,
            buf: vec![0u8; 64 << 10],
        })
    }

    /// Sends request `id` and reads its whole response; returns the payload
    /// bytes received.
    async fn call(&mut self, id: u64, req: u32, resp: u64) -> Result<u64> {
        let mut h = [0u8; REQ_HEADER];
        h[0..8].copy_from_slice(&id.to_le_bytes());
        h[8..16].copy_from_slice(&resp.to_le_bytes());
        h[16..20].copy_from_slice(&req.to_le_bytes());
        h[20..24].copy_from_slice(&MAGIC.to_le_bytes());
        self.s.write_all(&h).await?;
        let mut left = u64::from(req);
        while left > 0 {
            let k = left.min(self.buf.len() as u64) as usize;
            self.s.write_all(&self.buf[..k]).await?;
            left -= k as u64;
        }
        let mut rh = [0u8; RESP_HEADER];
        self.s.read_exact(&mut rh).await?;
        let got_id = u64::from_le_bytes(rh[0..8].try_into().unwrap());
        let len = u64::from_le_bytes(rh[8..16].try_into().unwrap());
        if got_id != id || len != resp {
            bail!("response {got_id} ({len} bytes) to request {id} ({resp} bytes)");
        }
        let mut left = len;
        while left > 0 {
            let k = left.min(self.buf.len() as u64) as usize;
            self.s.read_exact(&mut self.buf[..k]).await?;
            left -= k as u64;
        }
        Ok(len)
    }
}

/// Response sizes and how often each is asked for.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mix(pub Vec<(u64, f64)>);

impl std::str::FromStr for Mix {
    type Err = String;

    /// `10000` or `10000:0.9,1000000:0.1` (weights need not sum to 1).
    fn from_str(s: &str) -> Result<Mix, String> {
        let mut v = Vec::new();
        for part in s.split(',') {
            let (size, w) = part.split_once(':').unwrap_or((part, "1"));
            let size: u64 = size.trim().parse().map_err(|_| {
                format!("`{part}`: a size is a byte count, e.g. 10000 or 10000:0.9")
            })?;
            let w: f64 = w
                .trim()
                .parse()
                .map_err(|_| format!("`{part}`: a weight is a number, e.g. 10000:0.9"))?;
            if size == 0 || size > MAX_BYTES {
                return Err(format!(
                    "response size {size} out of range: 1 to {MAX_BYTES} bytes"
                ));
            }
            if !(w.is_finite() && w > 0.0) {
                return Err(format!("`{part}`: weights must be positive"));
            }
            v.push((size, w));
        }
        Ok(Mix(v))
    }
}

/// How the client sends.
#[derive(Clone, Debug, Serialize)]
pub enum Pattern {
    /// `rounds` times: one request to every worker at once, wait for all.
    Incast { rounds: u64, gap: Duration },
    /// Poisson arrivals at `per_second` for `duration`, each to the next
    /// worker in turn, over `connections` per worker.
    OpenLoop {
        per_second: f64,
        duration: Duration,
        connections: usize,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct ClientSpec {
    pub workers: Vec<SocketAddr>,
    pub cc: Option<String>,
    pub request_bytes: u32,
    pub mix: Mix,
    pub pattern: Pattern,
    pub seed: u64,
}

impl ClientSpec {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            !self.workers.is_empty(),
            "give at least one worker (--connect)"
        );
        anyhow::ensure!(!self.mix.0.is_empty(), "give a response size");
        match &self.pattern {
            Pattern::Incast { rounds, .. } => {
                anyhow::ensure!(
                    (1..=10_000_000).contains(rounds),
                    "--rounds {rounds}: 1 to 10000000"
                );
            }
            Pattern::OpenLoop {
                per_second,
                duration,
                connections,
            } => {
                anyhow::ensure!(
                    per_second.is_finite() && *per_second > 0.0 && *per_second <= 1e6,
                    "--rate {per_second}: (0, 1000000] requests per second"
                );
                anyhow::ensure!(!duration.is_zero(), "--duration must be positive");
                anyhow::ensure!(
                    (1..=1024).contains(connections),
                    "--connections {connections}: 1 to 1024"
                );
            }
        }
        Ok(())
    }
}

/// Latency of one response size, microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

fn latency(h: &Histogram<u64>) -> Latency {
    Latency {
        count: h.len(),
        mean: h.mean(),
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientReport {
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// Per response size (bytes, as a string key for JSON).
    pub latency_us: BTreeMap<String, Latency>,
    /// Incast: each round's completion time (last response), microseconds.
    pub round_us: Vec<u64>,
    pub elapsed_s: f64,
}

fn new_histogram() -> Histogram<u64> {
    // 1 us to 100 s at 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("histogram bounds")
}

impl Mix {
    /// A size drawn by weight.
    fn pick(&self, rng: &mut Rng) -> u64 {
        let total: f64 = self.0.iter().map(|m| m.1).sum();
        let mut x = rng.unit() * total;
        for &(size, w) in &self.0 {
            if x <= w {
                return size;
            }
            x -= w;
        }
        self.0.last().expect("validated").0
    }
}

type Done = (u64, u64, Result<u64>, Duration);

/// Runs the client to completion.
pub async fn client(spec: ClientSpec) -> Result<ClientReport> {
    spec.validate()?;
    let cc = spec.cc.as_deref();
    let mut rng = Rng(spec.seed);
    let mut hist: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
    let mut report = ClientReport::default();
    let start = Instant::now();
    let mut record = |report: &mut ClientReport, (_, size, r, lat): Done| match r {
        Ok(bytes) => {
            report.completed += 1;
            report.response_bytes += bytes;
            let us = (lat.as_micros() as u64).clamp(1, 100_000_000);
            hist.entry(size)
                .or_insert_with(new_histogram)
                .saturating_record(us);
        }
        Err(e) => {
            report.failed += 1;
            tracing::warn!("request of {size} bytes: {e:#}");
        }
    };
    let req = spec.request_bytes;
    match spec.pattern.clone() {
        Pattern::Incast { rounds, gap } => {
            let mut conns = Vec::new();
            for &w in &spec.workers {
                conns.push(Conn::open(w, cc).await?);
            }
            let mut id = 0u64;
            for _ in 0..rounds {
                let round_start = Instant::now();
                let mut tasks = tokio::task::JoinSet::new();
                for mut conn in conns.drain(..) {
                    let size = spec.mix.pick(&mut rng);
                    id += 1;
                    report.sent += 1;
                    report.request_bytes += u64::from(req);
                    let my = id;
                    tasks.spawn(async move {
                        let t = Instant::now();
                        let r = conn.call(my, req, size).await;
                        (conn, (my, size, r, t.elapsed()))
                    });
                }
                while let Some(joined) = tasks.join_next().await {
                    let (conn, done) = joined.context("request task")?;
                    let failed = done.2.is_err();
                    record(&mut report, done);
                    if failed {
                        bail!("a worker failed mid-round; its connection is unusable");
                    }
                    conns.push(conn);
                }
                report
                    .round_us
                    .push(round_start.elapsed().as_micros() as u64);
                if !gap.is_zero() {
                    tokio::time::sleep(gap).await;
                }
            }
        }
        Pattern::OpenLoop {
            per_second,
            duration,
            connections,
        } => {
            // An idle-connection pool per worker; a request waits for one
            // (and that wait is part of its latency: arrivals do not).
            let mut pools = Vec::new();
            for &w in &spec.workers {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                for _ in 0..connections {
                    tx.send(Conn::open(w, cc).await?).expect("pool open");
                }
                pools.push((tx, Arc::new(tokio::sync::Mutex::new(rx))));
            }
            let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<Done>();
            let mut t = 0.0;
            let mut id = 0u64;
            loop {
                t += rng.exp_gap(per_second);
                if t >= duration.as_secs_f64() {
                    break;
                }
                tokio::time::sleep_until((start + Duration::from_secs_f64(t)).into()).await;
                while let Ok(done) = done_rx.try_recv() {
                    record(&mut report, done);
                }
                let size = spec.mix.pick(&mut rng);
                let (tx, rx) = pools[(id % pools.len() as u64) as usize].clone();
                id += 1;
                report.sent += 1;
                report.request_bytes += u64::from(req);
                let arrival = Instant::now();
                let done_tx = done_tx.clone();
                let my = id;
                tokio::spawn(async move {
                    let conn = rx.lock().await.recv().await;
                    let Some(mut conn) = conn else { return };
                    let r = conn.call(my, req, size).await;
                    let ok = r.is_ok();
                    let _ = done_tx.send((my, size, r, arrival.elapsed()));
                    if ok {
                        let _ = tx.send(conn);
                    }
                });
            }
            drop(done_tx);
            // Requests in flight finish; a lost connection ends its waiters.
            let deadline = Instant::now() + Duration::from_secs(30);
            while report.completed + report.failed < report.sent {
                match tokio::time::timeout_at(deadline.into(), done_rx.recv()).await {
                    Ok(Some(done)) => record(&mut report, done),
                    _ => break,
                }
            }
        }
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    report.latency_us = hist
        .iter()
        .map(|(size, h)| (size.to_string(), latency(h)))
        .collect();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_and_refuse() {
        assert_eq!("10000".parse::<Mix>().unwrap(), Mix(vec![(10000, 1.0)]));
        assert_eq!(
            "10000:0.9,1000000:0.1".parse::<Mix>().unwrap(),
            Mix(vec![(10000, 0.9), (1000000, 0.1)])
        );
        for bad in ["0", "x", "10:0", "10:-1", "10:y", "2000000000"] {
            assert!(bad.parse::<Mix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn picks_follow_the_weights() {
        let mix: Mix = "1:0.9,2:0.1".parse().unwrap();
        let mut rng = Rng(3);
        let twos = (0..100_000).filter(|_| mix.pick(&mut rng) == 2).count();
        assert!((9_000..=11_000).contains(&twos), "{twos}");
    }
}
