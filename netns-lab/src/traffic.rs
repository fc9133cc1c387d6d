//! Long-lived bulk flows from senders to the receiver: one thread per flow
//! end, each in its host's namespace, with the congestion control set on the
//! socket before connect (and on the listener, whose algorithm decides
//! whether ECN is accepted and how the receiver echoes CE).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

use crate::tcpinfo::{self, TcpInfo};
use crate::topology::{Star, RECEIVER_ADDR};

pub const BASE_PORT: u16 = 5201;

#[derive(Clone, Debug, Serialize)]
pub struct FlowSpec {
    pub sender: usize,
    pub cc: String,
}

#[derive(Clone, Debug, Serialize)]
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
}

struct SenderEnd {
    sport: u16,
    cc_used: String,
    info: TcpInfo,
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
    loader::sockopt::set_congestion(l.as_fd(), cc)?;
    if let Some(bytes) = window_clamp {
        // Set before listen(): the SYN-ACK picks the smallest window scale
        // that can express it, and the receiver can never advertise more
        // than 65535 << that scale (under twice `bytes`), even where the
        // kernel raises the clamp itself later as it tunes its buffers.
        loader::sockopt::set_window_clamp(l.as_fd(), bytes)?;
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

fn send_until(cc: &str, port: u16, deadline: Instant, stop: &AtomicBool) -> Result<SenderEnd> {
    let mut s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    loader::sockopt::set_congestion(s.as_fd(), cc)?;
    s.connect(&SocketAddr::from((RECEIVER_ADDR, port)).into())
        .context("connecting to the receiver")?;
    let sport = s.local_addr()?.as_socket().map_or(0, |a| a.port());
    let buf = vec![0x5au8; 64 << 10];
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        s.write_all(&buf)?;
    }
    let info = tcpinfo::read(s.as_fd())?;
    let cc_used = loader::sockopt::congestion(s.as_fd())?;
    s.shutdown(Shutdown::Write)?;
    let mut sink = [0u8; 64];
    while s.read(&mut sink)? > 0 {}
    Ok(SenderEnd {
        sport,
        cc_used,
        info,
    })
}

/// Runs `flows` for `duration`, sampling received bytes every `interval`
/// and calling `tick(elapsed)` each time (progress, counters). `stop` ends
/// the run early (Ctrl-C). `window_clamp` caps each receiver's window, bytes.
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
    let mut receivers = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        let (ready_tx, ready_rx) = mpsc::channel();
        let counter = counters[i].clone();
        let cc = f.cc.clone();
        let port = BASE_PORT + i as u16;
        // A sender that never connects must not leave accept() waiting forever.
        let accept_timeout = duration + Duration::from_secs(15);
        receivers.push(star.receiver.ns.spawn(move || -> Result<u32> {
            let addr = SocketAddr::from((RECEIVER_ADDR, port));
            let l = listen_announced(&cc, addr, accept_timeout, window_clamp, &ready_tx)?;
            let (mut s, _) = l.accept()?;
            let mut buf = vec![0u8; 256 << 10];
            loop {
                match s.read(&mut buf)? {
                    0 => return Ok(tcpinfo::read(s.as_fd())?.max_rcv_window()),
                    n => counter.fetch_add(n as u64, Ordering::Relaxed),
                };
            }
        })?);
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .context("receiver did not start")?
            .map_err(|e| anyhow!("receiver listener for {}: {e}", f.cc))?;
    }

    let start = Instant::now();
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
        senders.push(
            host.ns
                .spawn(move || send_until(&cc, port, deadline, &stop))?,
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
    }

    let mut out = Vec::new();
    for (i, (sender, f)) in senders.into_iter().zip(flows).enumerate() {
        let end = sender
            .join()
            .map_err(|_| anyhow!("sender thread panicked"))??
            .with_context(|| format!("flow {i} ({})", f.cc))?;
        out.push(FlowResult {
            sender: f.sender,
            cc: f.cc.clone(),
            cc_used: end.cc_used,
            sport: end.sport,
            dport: BASE_PORT + i as u16,
            bytes: 0,
            series: std::mem::take(&mut series[i]),
            series_end_s: ends.clone(),
            info: end.info,
            receiver_max_window: 0,
        });
    }
    for (i, r) in receivers.into_iter().enumerate() {
        out[i].receiver_max_window = r
            .join()
            .map_err(|_| anyhow!("receiver thread panicked"))??
            .with_context(|| format!("receiver of flow {i}"))?;
        out[i].bytes = counters[i].load(Ordering::Relaxed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
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
}
