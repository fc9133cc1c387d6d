//! Short flows arriving at random beside the long ones: each a new
//! connection from one sender to the receiver that sends its bytes, closes
//! its side, and waits for the receiver's one-byte answer. Its completion
//! time runs from connect() to that answer: handshake, data and the last
//! ACK's round trip, what an application waiting on a short transfer sees.
//!
//! Arrivals are a Poisson process (open loop: a slow flow does not delay the
//! next), sizes uniform between two bounds, both from a seeded generator so a
//! run can be repeated flow for flow.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

use crate::net::topology::{Star, RECEIVER_ADDR};
use crate::rng::Rng;
use crate::stats::{summarize, Summary};
use crate::traffic::bulk::{listen_announced, send_bytes};

/// Port of the first short-flow server (each generator of a run has the
/// next); the bulk flows use 5201 upwards.
pub const SHORT_PORT: u16 = 6201;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShortFlowSpec {
    /// Sender host the flows start from.
    pub sender: usize,
    pub cc: String,
    /// Mean arrivals per second.
    pub per_second: f64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Arrivals begin this long after the long flows (past their slow start).
    pub start_after: Duration,
    pub seed: u64,
}

impl ShortFlowSpec {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            self.per_second > 0.0 && self.per_second <= 10_000.0,
            "short-flow rate {} per second out of range: (0, 10000]",
            self.per_second
        );
        anyhow::ensure!(
            self.min_bytes >= 1 && self.min_bytes <= self.max_bytes && self.max_bytes <= 1 << 30,
            "short-flow sizes {}..{} bytes: need 1 <= min <= max <= 1 GiB",
            self.min_bytes,
            self.max_bytes
        );
        Ok(())
    }
}

/// One short flow as it went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShortFlow {
    /// Arrival, seconds after the long flows started.
    pub start_s: f64,
    pub bytes: u64,
    /// Completion time; None if it had not completed when the run ended.
    pub fct_us: Option<u64>,
    pub sport: u16,
}

/// Completion times of a set of short flows.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FctSummary {
    pub started: usize,
    pub completed: usize,
    /// Of the completed ones, microseconds.
    pub fct_us: Summary,
}

impl FctSummary {
    pub fn of(flows: &[ShortFlow]) -> FctSummary {
        let fct: Vec<f64> = flows
            .iter()
            .filter_map(|f| f.fct_us)
            .map(|u| u as f64)
            .collect();
        FctSummary {
            started: flows.len(),
            completed: fct.len(),
            fct_us: summarize(&fct),
        }
    }
}

/// The arrivals of `spec` within `window`: (offset, bytes).
fn schedule(spec: &ShortFlowSpec, window: Duration) -> Vec<(Duration, u64)> {
    let mut rng = Rng(spec.seed);
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += rng.exp_gap(spec.per_second);
        if t >= window.as_secs_f64() {
            return out;
        }
        let span = spec.max_bytes - spec.min_bytes + 1;
        out.push((
            Duration::from_secs_f64(t),
            spec.min_bytes + rng.next_u64() % span,
        ));
    }
}

/// The running generator: a server in the receiver's namespace, a
/// dispatcher in the sender's, one thread per flow in flight.
pub struct ShortFlows {
    server: JoinHandle<std::io::Result<Result<()>>>,
    client: JoinHandle<std::io::Result<Vec<ShortFlow>>>,
    done: Arc<AtomicBool>,
}

/// Reads a flow to its end and answers with one byte.
fn serve(mut s: Socket) -> std::io::Result<()> {
    // Not the listener's 100 ms, which accept() inherits.
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut buf = vec![0u8; 64 << 10];
    while s.read(&mut buf)? > 0 {}
    s.write_all(&[1])?;
    s.shutdown(Shutdown::Write)
}

/// One flow: connect, send, close our side, wait for the answer.
fn one_flow(cc: &str, port: u16, bytes: u64) -> Result<(u16, Duration)> {
    let mut s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    dctcp_utils::sockopt::set_congestion(s.as_fd(), cc)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let t0 = Instant::now();
    s.connect(&SocketAddr::from((RECEIVER_ADDR, port)).into())?;
    let sport = s.local_addr()?.as_socket().map_or(0, |a| a.port());
    send_bytes(&mut s, bytes)?;
    s.shutdown(Shutdown::Write)?;
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer)?;
    Ok((sport, t0.elapsed()))
}

impl ShortFlows {
    /// Starts serving on `port` at once and sending `spec.start_after`
    /// from now, until `window` from now (or `stop`).
    pub fn start(
        star: &Star,
        spec: &ShortFlowSpec,
        port: u16,
        window: Duration,
        stop: &Arc<AtomicBool>,
    ) -> Result<ShortFlows> {
        spec.validate()?;
        let host = star
            .senders
            .get(spec.sender)
            .with_context(|| format!("no sender {} for the short flows", spec.sender))?;
        let done = Arc::new(AtomicBool::new(false));

        let (ready_tx, ready_rx) = mpsc::channel();
        let cc = spec.cc.clone();
        let server_done = done.clone();
        let server = star.receiver.ns.spawn(move || -> Result<()> {
            // accept() wakes up now and then to see whether to stop.
            let addr = SocketAddr::from((RECEIVER_ADDR, port));
            let l = listen_announced(&cc, addr, Duration::from_millis(100), None, &ready_tx)?;
            let mut conns = Vec::new();
            while !server_done.load(Ordering::Relaxed) {
                match l.accept() {
                    // Threads inherit this thread's namespace.
                    Ok((s, _)) => conns.push(std::thread::spawn(move || serve(s))),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
                conns.retain(|c| !c.is_finished());
            }
            Ok(())
        })?;
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .context("short-flow server did not start")?
            .map_err(|e| anyhow!("short-flow server: {e}"))?;

        let arrivals = schedule(spec, window.saturating_sub(spec.start_after));
        let (cc, start_after, stop) = (spec.cc.clone(), spec.start_after, stop.clone());
        let client = host.ns.spawn(move || -> Vec<ShortFlow> {
            let origin = Instant::now();
            let (tx, rx) = mpsc::channel();
            let mut flows = Vec::with_capacity(arrivals.len());
            for (i, &(at, bytes)) in arrivals.iter().enumerate() {
                let due = origin + start_after + at;
                while let Some(wait) = due.checked_duration_since(Instant::now()) {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(wait.min(Duration::from_millis(50)));
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                flows.push(ShortFlow {
                    start_s: (start_after + at).as_secs_f64(),
                    bytes,
                    fct_us: None,
                    sport: 0,
                });
                let (tx, cc) = (tx.clone(), cc.clone());
                std::thread::spawn(move || {
                    let _ = tx.send((i, one_flow(&cc, port, bytes)));
                });
            }
            drop(tx);
            // Flows still in flight get a little time; the rest stay open-ended.
            let deadline = Instant::now() + Duration::from_secs(5);
            while let Some(wait) = deadline.checked_duration_since(Instant::now()) {
                match rx.recv_timeout(wait) {
                    Ok((i, Ok((sport, fct)))) => {
                        flows[i].sport = sport;
                        flows[i].fct_us = Some(fct.as_micros() as u64);
                    }
                    Ok((i, Err(e))) => tracing::warn!("short flow {i}: {e:#}"),
                    Err(_) => break,
                }
            }
            flows
        })?;
        Ok(ShortFlows {
            server,
            client,
            done,
        })
    }

    /// Waits for the flows to finish (at most 5 s past the last arrival) and
    /// stops the server.
    pub fn finish(self) -> Result<Vec<ShortFlow>> {
        let flows = self
            .client
            .join()
            .map_err(|_| anyhow!("short-flow client panicked"))??;
        self.done.store(true, Ordering::Relaxed);
        self.server
            .join()
            .map_err(|_| anyhow!("short-flow server panicked"))???;
        Ok(flows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(per_second: f64) -> ShortFlowSpec {
        ShortFlowSpec {
            sender: 0,
            cc: "cubic".into(),
            per_second,
            min_bytes: 10_000,
            max_bytes: 100_000,
            start_after: Duration::ZERO,
            seed: 7,
        }
    }

    #[test]
    fn arrivals_are_poisson_and_sizes_uniform() {
        let a = schedule(&spec(200.0), Duration::from_secs(100));
        // 20,000 expected; Poisson sd is 141.
        assert!((19_400..=20_600).contains(&a.len()), "{}", a.len());
        let gaps: Vec<f64> = a
            .windows(2)
            .map(|w| (w[1].0 - w[0].0).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 0.005).abs() < 0.0002, "mean gap {mean}");
        // Exponential: about e^-1 of the gaps exceed the mean.
        let over = gaps.iter().filter(|&&g| g > mean).count() as f64 / gaps.len() as f64;
        assert!((over - (-1f64).exp()).abs() < 0.02, "{over}");
        assert!(a.iter().all(|&(_, b)| (10_000..=100_000).contains(&b)));
        let mean_size = a.iter().map(|&(_, b)| b as f64).sum::<f64>() / a.len() as f64;
        assert!((mean_size - 55_000.0).abs() < 1_000.0, "{mean_size}");
        // Seeded: the same run twice.
        assert_eq!(a, schedule(&spec(200.0), Duration::from_secs(100)));
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(spec(0.0).validate().is_err());
        assert!(spec(-1.0).validate().is_err());
        let mut s = spec(10.0);
        s.min_bytes = 0;
        assert!(s.validate().is_err());
        s.min_bytes = 200_000;
        assert!(s.validate().is_err());
        assert!(spec(10.0).validate().is_ok());
    }

    #[test]
    fn summary_of_completion_times() {
        let f = |fct| ShortFlow {
            start_s: 0.0,
            bytes: 1,
            fct_us: fct,
            sport: 1,
        };
        let s = FctSummary::of(&[f(Some(100)), f(Some(300)), f(None), f(Some(200))]);
        assert_eq!((s.started, s.completed), (4, 3));
        assert_eq!(s.fct_us.mean, 200.0);
        assert_eq!(s.fct_us.p50, 200.0);
        assert_eq!(s.fct_us.max, 300.0);
    }
}
