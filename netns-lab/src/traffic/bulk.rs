//! Long-lived bulk flows from senders to the receiver: one thread per flow
//! end, each in its host's namespace, with the congestion control set on the
//! socket before connect (and on the listener, whose algorithm decides
//! whether ECN is accepted and how the receiver echoes CE).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

use dctcp_utils::clock::monotonic_ns;

use crate::net::tcpinfo::{self, TcpInfo};
use crate::net::topology::{Star, RECEIVER_ADDR};

pub const BASE_PORT: u16 = 5201;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowSpec {
    pub sender: usize,
    pub cc: String,
    /// When the sender connects, from the start of the run.
    pub start: Duration,
    /// When it stops, if before the end of the run: it aborts the
    /// connection (RST), so nothing it had queued to send trickles on.
    pub stop: Option<Duration>,
}

impl FlowSpec {
    /// A flow from the start of the run to its end.
    pub fn long(sender: usize, cc: &str) -> FlowSpec {
        FlowSpec {
            sender,
            cc: cc.to_string(),
            start: Duration::ZERO,
            stop: None,
        }
    }

    fn scheduled(&self) -> bool {
        self.start > Duration::ZERO || self.stop.is_some()
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FlowResult {
    pub sender: usize,
    pub cc: String,
    /// What the sender's socket actually ran at the end (fallbacks show here).
    pub cc_used: String,
    pub sport: u16,
    pub dport: u16,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Bytes the receiver read in each interval.
    pub series: Vec<u64>,
    /// When each interval of `series` ended, seconds from the start: a
    /// loaded machine stretches intervals past their nominal length.
    pub series_end_s: Vec<f64>,
    pub info: TcpInfo,
    /// The most the receiver could ever advertise, bytes: 65535 << the
    /// window scale it chose at the handshake.
    pub receiver_max_window: u32,
    /// When the receiver read the flow's first and last byte, seconds from
    /// the start of the run (None: nothing arrived).
    pub first_byte_s: Option<f64>,
    pub last_byte_s: Option<f64>,
    /// The connection was gone when the sender closed it: its receiver gave
    /// up on a flow silent 15 s past the run's end (a retransmission
    /// timeout backed off that far) and reset it.
    pub reset_at_close: bool,
}

impl FlowResult {
    /// Each interval of `series` as (its end, seconds from the start; the
    /// rate over it, Mbit/s), over its measured length: a late sample
    /// covers more than the nominal interval.
    pub fn rate_points(&self) -> Vec<(f64, f64)> {
        let mut t0 = 0.0;
        self.series
            .iter()
            .zip(&self.series_end_s)
            .map(|(&bytes, &t1)| {
                let dt = (t1 - t0).max(1e-6);
                t0 = t1;
                (t1, bytes as f64 * 8.0 / dt / 1e6)
            })
            .collect()
    }
}

struct SenderEnd {
    sport: u16,
    cc_used: String,
    info: TcpInfo,
    reset_at_close: bool,
}

/// The most a receiver listening with `window_clamp` bytes can ever
/// advertise: 65535 shifted by the smallest window scale that expresses the
/// clamp (see `listener`), so never less than 65535 bytes.
pub fn advertised_cap_bytes(window_clamp: u32) -> u32 {
    let mut scale = 0;
    while (65535u64 << scale) < u64::from(window_clamp) && scale < 14 {
        scale += 1;
    }
    (65535u64 << scale).min(u64::from(u32::MAX)) as u32
}

fn listener(cc: &str, addr: SocketAddr, window_clamp: Option<u32>) -> Result<Socket> {
    let l = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    l.set_reuse_address(true)?;
    dctcp_utils::sockopt::set_congestion(l.as_fd(), cc)?;
    if let Some(bytes) = window_clamp {
        // Set before listen(): the SYN-ACK picks the smallest window scale
        // that can express it, and the receiver can never advertise more
        // than 65535 << that scale (under twice `bytes`), even where the
        // kernel raises the clamp itself later as it tunes its buffers.
        dctcp_utils::sockopt::set_window_clamp(l.as_fd(), bytes)?;
    }
    l.bind(&addr.into())?;
    l.listen(1024)?;
    Ok(l)
}

/// Writes exactly `n` bytes of filler to `s`.
pub(crate) fn send_bytes(s: &mut Socket, n: u64) -> std::io::Result<()> {
    let buf = vec![0x5au8; 256 << 10];
    let mut left = n;
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        s.write_all(&buf[..k])?;
        left -= k as u64;
    }
    Ok(())
}

/// A listener for `cc` flows on `addr` whose accept() gives up after
/// `accept_timeout`; `ready` hears how it went, so the caller can wait for
/// it before anyone connects.
pub(crate) fn listen_announced(
    cc: &str,
    addr: SocketAddr,
    accept_timeout: Duration,
    window_clamp: Option<u32>,
    ready: &mpsc::Sender<Result<(), String>>,
) -> Result<Socket> {
    let l = listener(cc, addr, window_clamp).and_then(|l| {
        l.set_read_timeout(Some(accept_timeout))?;
        Ok(l)
    });
    let _ = ready.send(l.as_ref().map(|_| ()).map_err(|e| e.to_string()));
    l
}

/// Sleeps until `at`, or less if `stop` is raised; whether `at` came.
fn sleep_until(at: Instant, stop: &AtomicBool) -> bool {
    while !stop.load(Ordering::Relaxed) {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
    false
}

/// Sends from `start` until `end`. A scheduled flow aborts the connection
/// at its end, its writes waiting at most 5 ms for room: what the receiver
/// hears stops one queue and one round trip later, not when the socket's
/// send buffer has drained.
fn send_between(
    cc: &str,
    port: u16,
    start: Instant,
    end: Instant,
    abort: bool,
    stop: &AtomicBool,
) -> Result<Option<SenderEnd>> {
    if !sleep_until(start, stop) {
        return Ok(None);
    }
    let mut s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    dctcp_utils::sockopt::set_congestion(s.as_fd(), cc)?;
    s.connect(&SocketAddr::from((RECEIVER_ADDR, port)).into())
        .context("connecting to the receiver")?;
    let sport = s.local_addr()?.as_socket().map_or(0, |a| a.port());
    let buf = vec![0x5au8; 64 << 10];
    if abort {
        // A write waits at most this long for room, so the flow stops on
        // time even while its socket waits out a retransmission timeout.
        s.set_write_timeout(Some(Duration::from_millis(5)))?;
    }
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        match s.write(&buf) {
            Ok(_) => {}
            Err(e) if abort && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let info = tcpinfo::read(s.as_fd())?;
    let cc_used = dctcp_utils::sockopt::congestion(s.as_fd())?;
    let mut reset_at_close = false;
    if abort {
        s.set_linger(Some(Duration::ZERO))?;
        drop(s);
    } else {
        reset_at_close = !close_and_drain(&mut s)?;
    }
    Ok(Some(SenderEnd {
        sport,
        cc_used,
        info,
        reset_at_close,
    }))
}

/// Closes the sending side and reads until the receiver closes its own:
/// true, or false if the receiver had already reset the connection (it
/// gives up on a flow that stays silent long after the run; see `receive`).
fn close_and_drain(s: &mut Socket) -> Result<bool> {
    let gone = |e: &std::io::Error| {
        matches!(
            e.kind(),
            ErrorKind::ConnectionReset | ErrorKind::NotConnected
        )
    };
    match s.shutdown(Shutdown::Write) {
        Err(e) if gone(&e) => return Ok(false),
        r => r?,
    }
    let mut sink = [0u8; 64];
    loop {
        match s.read(&mut sink) {
            Ok(0) => return Ok(true),
            Ok(_) => {}
            Err(e) if gone(&e) => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// What a receiver saw of its flow.
struct ReceiverEnd {
    max_window: u32,
    first_byte_ns: Option<u64>,
    last_byte_ns: Option<u64>,
}

fn ecn_word(ecn: bool) -> &'static str {
    if ecn {
        "with ECN"
    } else {
        "without ECN"
    }
}

/// Accepts one connection on `l` by `deadline`, giving up early on `stop`
/// or at the deadline: a sender whose handshake never completed here (every
/// packet it sent was lost) is one flow's failure, reported with the flow,
/// not the whole run's.
fn accept_by(l: &Socket, deadline: Instant, stop: &AtomicBool) -> Result<Option<Socket>> {
    l.set_read_timeout(Some(Duration::from_millis(100)))?;
    loop {
        match l.accept() {
            Ok((s, _)) => return Ok(Some(s)),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    return Ok(None);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads a flow to its end (a close or, from a flow that aborts at its stop
/// time, a reset) or until `give_up` (a reset the switch dropped: it is not
/// ECN-capable), counting bytes into `counter` and noting when the first
/// and the last arrived.
fn receive(mut s: Socket, counter: &AtomicU64, give_up: Instant) -> Result<ReceiverEnd> {
    // A flow stalled for a retransmission timeout has not ended.
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut buf = vec![0u8; 256 << 10];
    let (mut first, mut last) = (None, None);
    loop {
        match s.read(&mut buf) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if Instant::now() > give_up {
                    break;
                }
            }
            Ok(0) => break,
            Ok(n) => {
                let now = monotonic_ns();
                first.get_or_insert(now);
                last = Some(now);
                counter.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(ReceiverEnd {
        max_window: tcpinfo::read(s.as_fd())?.max_rcv_window(),
        first_byte_ns: first,
        last_byte_ns: last,
    })
}

/// Runs `flows` for `duration`, each from its start to its stop, sampling
/// received bytes every `interval` and calling `tick(elapsed)` each time
/// (progress, counters). `stop` ends the run early (Ctrl-C). `window_clamp`
/// caps each receiver's window, bytes.
pub fn run_bulk(
    star: &Star,
    flows: &[FlowSpec],
    window_clamp: Option<u32>,
    duration: Duration,
    interval: Duration,
    stop: &Arc<AtomicBool>,
    mut tick: impl FnMut(Duration) -> Result<()>,
) -> Result<Vec<FlowResult>> {
    let counters: Vec<Arc<AtomicU64>> = flows.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
    // A sender that never connects must not leave accept() waiting forever,
    // nor one whose last packet never comes a read.
    let accept_deadline = Instant::now() + duration + Duration::from_secs(15);
    let mut receivers = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        let give_up = match f.stop {
            Some(t) => Instant::now() + t + Duration::from_secs(3),
            None => accept_deadline,
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let counter = counters[i].clone();
        let cc = f.cc.clone();
        let port = BASE_PORT + i as u16;
        let stop = stop.clone();
        receivers.push(
            star.receiver
                .ns
                .spawn(move || -> Result<Option<ReceiverEnd>> {
                    let addr = SocketAddr::from((RECEIVER_ADDR, port));
                    let l = listen_announced(
                        &cc,
                        addr,
                        Duration::from_millis(100),
                        window_clamp,
                        &ready_tx,
                    )?;
                    accept_by(&l, accept_deadline, &stop)?
                        .map(|s| receive(s, &counter, give_up))
                        .transpose()
                })?,
        );
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .context("receiver did not start")?
            .map_err(|e| anyhow!("receiver listener for {}: {e}", f.cc))?;
    }

    let start = Instant::now();
    let start_ns = monotonic_ns();
    let deadline = start + duration;
    let mut senders = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        let cc = f.cc.clone();
        let port = BASE_PORT + i as u16;
        let stop = stop.clone();
        let host = star
            .senders
            .get(f.sender)
            .with_context(|| format!("no sender {}", f.sender))?;
        let (from, to) = (start + f.start, f.stop.map_or(deadline, |t| start + t));
        let abort = f.scheduled();
        senders.push(
            host.ns
                .spawn(move || send_between(&cc, port, from, to, abort, &stop))?,
        );
    }

    let mut series: Vec<Vec<u64>> = vec![Vec::new(); flows.len()];
    let mut ends = Vec::new();
    let mut last: Vec<u64> = vec![0; flows.len()];
    let mut next = start + interval;
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += interval;
        for (i, c) in counters.iter().enumerate() {
            let now = c.load(Ordering::Relaxed);
            series[i].push(now - last[i]);
            last[i] = now;
        }
        ends.push(start.elapsed().as_secs_f64());
        tick(start.elapsed())?;
        // Woken late (a descheduled thread; an emulated CPU stalls for a
        // second): the late sample covers the whole gap, and the grid moves
        // on. Catching up would record ticks of no length that read as a
        // flow delivering nothing (9 in a row seen under QEMU).
        let now = Instant::now();
        while next <= now {
            next += interval;
        }
    }

    let mut out = Vec::new();
    for (i, (sender, f)) in senders.into_iter().zip(flows).enumerate() {
        let end = sender
            .join()
            .map_err(|_| anyhow!("sender thread panicked"))??
            .with_context(|| format!("flow {i} ({})", f.cc))?;
        let (sport, cc_used, info, reset_at_close) = match end {
            Some(e) => (e.sport, e.cc_used, e.info, e.reset_at_close),
            // Stopped before it was due to start.
            None => (0, f.cc.clone(), TcpInfo::default(), false),
        };
        // Whether it had ECN says why, where a flow never got through: one
        // without it sends Not-ECT, which a marking switch drops above K
        // (Star::ecn_everywhere keeps a lost SYN from causing that).
        // A DCTCP flow without ECN moves to a Reno (its own fallback, or the
        // kernel's where that was refused): not the algorithm under test.
        if sport != 0 && cc_used != f.cc {
            eprintln!(
                "lab: flow {i} asked for {} and ran {cc_used} ({}): its figures are not {}'s",
                f.cc,
                ecn_word(info.ecn),
                f.cc
            );
        }
        if reset_at_close {
            eprintln!(
                "lab: flow {i} ({}, {}) was still stalled 15 s after the run and its receiver \
                 reset it; its series shows when it went silent",
                f.cc,
                ecn_word(info.ecn)
            );
        }
        out.push(FlowResult {
            sender: f.sender,
            cc: f.cc.clone(),
            cc_used,
            sport,
            dport: BASE_PORT + i as u16,
            bytes: 0,
            series: std::mem::take(&mut series[i]),
            series_end_s: ends.clone(),
            info,
            receiver_max_window: 0,
            first_byte_s: None,
            last_byte_s: None,
            reset_at_close,
        });
    }
    let since_start = |ns: Option<u64>| ns.map(|t| t.saturating_sub(start_ns) as f64 / 1e9);
    for (i, r) in receivers.into_iter().enumerate() {
        let end = r
            .join()
            .map_err(|_| anyhow!("receiver thread panicked"))??
            .with_context(|| format!("receiver of flow {i}"))?;
        if end.is_none() && out[i].sport != 0 {
            eprintln!(
                "lab: flow {i} ({}, {}) connected, but its receiver saw no connection by 15 s \
                 after the run: nothing it sent got through",
                out[i].cc,
                ecn_word(out[i].info.ecn)
            );
        }
        if let Some(end) = end {
            out[i].receiver_max_window = end.max_window;
            out[i].first_byte_s = since_start(end.first_byte_ns);
            out[i].last_byte_s = since_start(end.last_byte_ns);
        }
        out[i].bytes = counters[i].load(Ordering::Relaxed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {

    /// A sample the sampler took a second late carries ten intervals'
    /// bytes over its ten intervals' length: the same rate, not a spike.
    #[test]
    fn a_late_sample_is_a_rate_over_its_measured_length() {
        let f = FlowResult {
            sender: 0,
            cc: "cubic".into(),
            cc_used: "cubic".into(),
            sport: 1,
            dport: 2,
            bytes: 0,
            series: vec![125_000, 1_250_000, 125_000],
            series_end_s: vec![0.1, 1.1, 1.2],
            info: Default::default(),
            receiver_max_window: 0,
            first_byte_s: None,
            last_byte_s: None,
            reset_at_close: false,
        };
        let p = f.rate_points();
        let ends: Vec<f64> = p.iter().map(|p| p.0).collect();
        assert_eq!(ends, [0.1, 1.1, 1.2]);
        for (_, mbps) in p {
            assert!((mbps - 10.0).abs() < 1e-6, "{mbps} Mbit/s, not 10");
        }
    }
    use super::*;

    fn max_window_after_transfer(window_clamp: Option<u32>) -> u32 {
        let l = listener("reno", SocketAddr::from(([127, 0, 0, 1], 0)), window_clamp).unwrap();
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(&vec![0u8; 64 << 20]).unwrap();
        });
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        while s.read(&mut buf).unwrap() > 0 {}
        client.join().unwrap();
        tcpinfo::read(s.as_fd()).unwrap().max_rcv_window()
    }

    /// A clamp on the listener bounds what its accepted sockets can ever
    /// advertise, through the window scale, after a transfer long enough
    /// for receive-buffer autotuning to have grown everything it can.
    #[test]
    fn a_window_clamp_bounds_the_advertised_window_for_good() {
        assert_eq!(max_window_after_transfer(Some(20 * 1448)), 65535);
        assert_eq!(max_window_after_transfer(Some(64 * 1448)), 65535 << 1);
        assert!(max_window_after_transfer(None) > 1 << 20);
        assert_eq!(advertised_cap_bytes(20 * 1448), 65535);
        assert_eq!(advertised_cap_bytes(64 * 1448), 65535 << 1);
    }

    /// A sender whose receiver has reset the connection (as `receive` does
    /// to a flow silent past its deadline) closes without an error and says
    /// so; one whose receiver closes in order says that.
    #[test]
    fn closing_after_the_receiver_reset_the_connection_is_reported_not_an_error() {
        for reset in [true, false] {
            let l = listener("reno", SocketAddr::from(([127, 0, 0, 1], 0)), None).unwrap();
            let addr = l.local_addr().unwrap();
            let mut c = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            c.connect(&addr).unwrap();
            let (peer, _) = l.accept().unwrap();
            if reset {
                peer.set_linger(Some(Duration::ZERO)).unwrap();
                drop(peer);
                // The reset arrives before the sender closes, as when the
                // receiver gave up on a stalled flow.
                std::thread::sleep(Duration::from_millis(50));
            } else {
                std::thread::spawn(move || {
                    let mut peer = peer;
                    let mut sink = [0u8; 64];
                    while peer.read(&mut sink).unwrap() > 0 {}
                });
            }
            assert_eq!(close_and_drain(&mut c).unwrap(), !reset, "reset {reset}");
        }
    }
}
