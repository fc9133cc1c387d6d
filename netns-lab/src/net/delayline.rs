//! The delay element's engine: frames read from one interface through an
//! AF_PACKET socket are held for a constant delay (chosen by the frame's
//! IPv4 destination) and written, in arrival order, to another.
//!
//! Kernels without netem, fq or a BPF qdisc cannot hold a packet for later
//! (see DESIGN.md), so the lab holds the ACK path's packets here. Each
//! destination's packets wait in a FIFO of their own: a constant delay per
//! FIFO releases in arrival order, so the element never reorders a flow.
//!
//! Timing: each frame's arrival is the kernel's receive timestamp
//! (SO_TIMESTAMPNS, taken before the frame waits in the socket), so the time
//! this process takes to wake up for it counts against the delay instead of
//! adding to it. The thread sleeps in ppoll until `spin` before the next
//! release, with 1 ns of timer slack and SCHED_FIFO where allowed, and spins
//! the rest. What a release misses its due time by is the holding error,
//! reported as a histogram.
//!
//! Slots (netem's `slot`): with a [`Slot`], held frames leave only as a
//! slot opens, every `interval_ns` on the monotonic clock, and at most
//! `packets` of a FIFO's per slot; the rest wait for the next opening.
//! That turns a steady ACK stream into bursts, as a shared medium that
//! aggregates (Wi-Fi, DOCSIS) does, so the senders' data reaches the
//! bottleneck in bursts too.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest frame the element carries (lab links have offloads off and MTU
/// 1500), with its virtio-net header.
const FRAME_MAX: usize = 2048;
/// `struct virtio_net_hdr` before each frame (PACKET_VNET_HDR): a frame
/// whose checksum the sender left to the device (CHECKSUM_PARTIAL, as veth
/// allows) is passed on as such, not as bytes with a half-done checksum.
const VNET_HDR: usize = 10;
/// Frames read per recvmmsg.
const BATCH: usize = 64;

/// One destination prefix and its delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub net: Ipv4Addr,
    pub prefix_len: u8,
    pub delay_ns: u64,
}

impl Route {
    fn matches(&self, dst: Ipv4Addr) -> bool {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len))
            .unwrap_or(0);
        u32::from(dst) & mask == u32::from(self.net) & mask
    }
}

impl std::str::FromStr for Route {
    type Err = anyhow::Error;
    /// `198.18.0.0/24=8000000`: prefix, then the delay in nanoseconds.
    fn from_str(s: &str) -> Result<Route> {
        let (net, ns) = s
            .split_once('=')
            .with_context(|| format!("route {s:?}: expected ADDR/LEN=NANOSECONDS"))?;
        let (addr, len) = net
            .split_once('/')
            .with_context(|| format!("route {s:?}: expected ADDR/LEN"))?;
        let prefix_len: u8 = len.parse().context("prefix length")?;
        anyhow::ensure!(prefix_len <= 32, "prefix length {prefix_len} > 32");
        Ok(Route {
            net: addr.parse().context("route address")?,
            prefix_len,
            delay_ns: ns.parse().context("route delay (ns)")?,
        })
    }
}

/// Release in slots: frames leave as a slot opens, every `interval_ns`,
/// at most `packets` per FIFO and slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub interval_ns: u64,
    pub packets: u32,
}

impl Slot {
    /// The first opening at or after `t`.
    fn opening_from(&self, t: u64) -> u64 {
        t.div_ceil(self.interval_ns) * self.interval_ns
    }

    /// The opening of the slot `t` falls in.
    fn current(&self, t: u64) -> u64 {
        t / self.interval_ns * self.interval_ns
    }
}

/// Holding error percentiles, nanoseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Lateness {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

impl Lateness {
    fn of(h: &Histogram<u64>) -> Lateness {
        Lateness {
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
            mean_ns: h.mean(),
        }
    }
}

/// What the element did, printed as JSON when it stops.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub received: u64,
    pub released: u64,
    /// Frames dropped because the hold buffer was full.
    pub dropped_full: u64,
    /// Frames longer than the element carries, dropped.
    pub dropped_oversize: u64,
    /// Frames still held when the element stopped.
    pub held_at_stop: u64,
    /// Released before a frame that arrived earlier for the same
    /// destination (0 by construction; counted to show it).
    pub reordered: u64,
    /// Frames whose arrival time is the process's clock, not the kernel's.
    pub user_timestamped: u64,
    pub max_held: u64,
    /// Release time minus due time.
    pub lateness: Lateness,
    /// How old each frame was (since the kernel stamped it) when the
    /// element read it: time in the host's backlog and the socket.
    pub age_at_read: Lateness,
    /// Per route (the last is the default): frames held.
    pub per_route: Vec<u64>,
    /// With slots: slots that released a frame, the most one FIFO
    /// released in a slot, and frames that waited past an opening because
    /// their slot was full.
    pub slots_used: u64,
    pub most_in_a_slot: u32,
    pub slot_full_waits: u64,
    pub cpu_s: f64,
}

struct Held {
    due: u64,
    seq: u64,
    len: usize,
    buf: Box<[u8; FRAME_MAX]>,
}

/// One FIFO per route.
struct Line {
    delay_ns: u64,
    fifo: VecDeque<Held>,
    last_seq: u64,
    /// With slots: the opening of the slot it last released in, and how
    /// many it released there.
    slot_at: u64,
    in_slot: u32,
}

impl Line {
    /// When its head may leave, if it holds one: its due time, or with
    /// slots the first opening from then that has room; and whether a
    /// full slot held it back.
    fn next_release(&self, slot: Option<Slot>) -> Option<(u64, bool)> {
        let due = self.fifo.front()?.due;
        Some(match slot {
            None => (due, false),
            Some(s) => {
                let at = s.opening_from(due);
                if at <= self.slot_at && self.in_slot >= s.packets {
                    (self.slot_at + s.interval_ns, true)
                } else {
                    (at.max(self.slot_at), false)
                }
            }
        })
    }
}

pub struct Spec {
    pub input: String,
    pub output: String,
    /// Routes by destination; the first match wins.
    pub routes: Vec<Route>,
    /// Delay of frames no route matches (ARP, IPv6, other addresses).
    pub default_delay_ns: u64,
    /// Spin this long before a due time instead of sleeping.
    pub spin_ns: u64,
    /// Hold at most this many frames (beyond: dropped, counted).
    pub max_held: usize,
    /// Release in slots (netem's `slot`), or as each frame is due.
    pub slot: Option<Slot>,
}

pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn clock(id: libc::clockid_t) -> u64 {
    // SAFETY: ts is a valid out pointer.
    let mut ts: libc::timespec = unsafe { zeroed() };
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mono() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, v: T) -> io::Result<()> {
    // SAFETY: v lives across the call and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name)?;
    // SAFETY: c is a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        bail!("no interface {name} in this namespace");
    }
    Ok(i as i32)
}

/// A packet socket bound to `dev`; `proto` 0 receives nothing.
fn packet_socket(dev: &str, proto: u16) -> Result<OwnedFd> {
    let proto_be = proto.to_be();
    // SAFETY: plain socket(2).
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(proto_be),
        )
    })
    .context("AF_PACKET socket (needs CAP_NET_RAW and CONFIG_PACKET)")?;
    // SAFETY: fd was just created and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto_be;
    sll.sll_ifindex = ifindex(dev)?;
    // SAFETY: sll is a valid sockaddr_ll of the size passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .with_context(|| format!("binding a packet socket to {dev}"))?;
    Ok(fd)
}

/// IPv4 destination of an Ethernet frame, if it carries IPv4.
fn ipv4_dst(buf: &[u8]) -> Option<Ipv4Addr> {
    let frame = buf.get(VNET_HDR..)?;
    if frame.len() >= 34 && frame[12..14] == [0x08, 0x00] {
        Some(Ipv4Addr::new(frame[30], frame[31], frame[32], frame[33]))
    } else {
        None
    }
}

/// Real-time kernel timestamp of a received message, if it has one.
fn rx_timestamp(hdr: &libc::msghdr) -> Option<u64> {
    // SAFETY: the CMSG macros walk the control buffer recvmmsg filled.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}

/// Lowers timer slack and asks for SCHED_FIFO; both only help the timing.
fn tune_thread() {
    // SAFETY: prctl and sched_setscheduler on this thread, plain arguments.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
        let p = libc::sched_param { sched_priority: 50 };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
            // The binary has no log subscriber: say it where the lab reads errors.
            eprintln!("delayline: SCHED_FIFO refused; the delay's timing depends on the scheduler");
        }
    }
}

fn cpu_seconds() -> f64 {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e9
}

/// Runs until SIGTERM or SIGINT, then reports; `ready` is called once the
/// sockets are bound.
pub fn run(spec: &Spec, ready: impl FnOnce()) -> Result<Report> {
    let rx = packet_socket(&spec.input, libc::ETH_P_ALL as u16)?;
    // Only what arrives from the peer; frames the kernel sends out of this
    // interface (the other direction) are not ours.
    setsockopt(&rx, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1i32)?;
    setsockopt(&rx, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1i32)?;
    setsockopt(&rx, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16i32 << 20)?;
    setsockopt(&rx, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1i32)?;
    let tx = packet_socket(&spec.output, 0)?;
    setsockopt(&tx, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1i32)?;
    // The element is the queue: past it, straight to the device.
    setsockopt(&tx, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1i32)?;
    setsockopt(&tx, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 16i32 << 20)?;

    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    tune_thread();
    ready();
    let cpu0 = cpu_seconds();

    let mut lines: Vec<Line> = spec
        .routes
        .iter()
        .map(|r| r.delay_ns)
        .chain(std::iter::once(spec.default_delay_ns))
        .map(|delay_ns| Line {
            delay_ns,
            fifo: VecDeque::new(),
            last_seq: 0,
            slot_at: 0,
            in_slot: 0,
        })
        .collect();
    let mut rep = Report {
        per_route: vec![0; lines.len()],
        ..Report::default()
    };
    let mut late = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3)?;
    let mut age = late.clone();
    let mut pool: Vec<Box<[u8; FRAME_MAX]>> = Vec::new();
    let mut held = 0usize;
    let mut seq = 0u64;

    let mut slots: Vec<Box<[u8; FRAME_MAX]>> =
        (0..BATCH).map(|_| Box::new([0; FRAME_MAX])).collect();
    let mut iov: Vec<libc::iovec> = slots
        .iter_mut()
        .map(|s| libc::iovec {
            iov_base: s.as_mut_ptr().cast(),
            iov_len: FRAME_MAX,
        })
        .collect();
    const CTRL: usize = 64;
    let mut ctrl = vec![[0u64; CTRL / 8]; BATCH];
    // SAFETY: mmsghdr is plain data; pointers are set below.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { zeroed() }).collect();

    while !STOP.load(Ordering::Relaxed) {
        let now = mono();
        release_due(
            &tx, &mut lines, spec.slot, now, &mut late, &mut rep, &mut pool, &mut held,
        )?;

        for (i, m) in msgs.iter_mut().enumerate() {
            m.msg_hdr.msg_iov = &mut iov[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = ctrl[i].as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = CTRL;
            m.msg_hdr.msg_flags = 0;
        }
        // SAFETY: msgs describe BATCH valid buffers.
        let n = unsafe {
            libc::recvmmsg(
                rx.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n > 0 {
            // The kernel stamps in real time; the element runs on the
            // monotonic clock.
            let mono_now = mono();
            let offset = clock(libc::CLOCK_REALTIME) as i128 - mono_now as i128;
            for (m, slot) in msgs.iter().zip(&slots).take(n as usize) {
                let len = m.msg_len as usize;
                rep.received += 1;
                if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > FRAME_MAX {
                    rep.dropped_oversize += 1;
                    continue;
                }
                if held >= spec.max_held {
                    rep.dropped_full += 1;
                    continue;
                }
                let arrival = match rx_timestamp(&m.msg_hdr) {
                    Some(rt) => {
                        let t = rt as i128 - offset;
                        // A stamp from the future or older than a second
                        // is not a receive time (e.g. a sender's EDT).
                        if t <= mono_now as i128 && t + 1_000_000_000 > mono_now as i128 {
                            t as u64
                        } else {
                            rep.user_timestamped += 1;
                            mono_now
                        }
                    }
                    None => {
                        rep.user_timestamped += 1;
                        mono_now
                    }
                };
                age.saturating_record((mono_now - arrival).max(1));
                let route = ipv4_dst(&slot[..len])
                    .and_then(|d| spec.routes.iter().position(|r| r.matches(d)))
                    .unwrap_or(spec.routes.len());
                let mut buf = pool.pop().unwrap_or_else(|| Box::new([0; FRAME_MAX]));
                buf[..len].copy_from_slice(&slot[..len]);
                seq += 1;
                let line = &mut lines[route];
                line.fifo.push_back(Held {
                    due: arrival + line.delay_ns,
                    seq,
                    len,
                    buf,
                });
                rep.per_route[route] += 1;
                held += 1;
                rep.max_held = rep.max_held.max(held as u64);
            }
            continue;
        } else if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                _ => return Err(e).context("recvmmsg"),
            }
        }

        let next = lines
            .iter()
            .filter_map(|l| l.next_release(spec.slot).map(|(at, _)| at))
            .min();
        let now = mono();
        let wait = match next {
            Some(due) if due <= now + spec.spin_ns => continue, // spin
            Some(due) => due - now - spec.spin_ns,
            // Nothing held: wake now and then to see a stop.
            None => 100_000_000,
        };
        let ts = libc::timespec {
            tv_sec: (wait / 1_000_000_000) as i64,
            tv_nsec: (wait % 1_000_000_000) as i64,
        };
        let mut pfd = libc::pollfd {
            fd: rx.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a null sigmask leaves signals as they are.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }

    rep.held_at_stop = held as u64;
    rep.lateness = Lateness::of(&late);
    rep.age_at_read = Lateness::of(&age);
    rep.cpu_s = cpu_seconds() - cpu0;
    Ok(rep)
}

/// Sends every frame whose time has come, oldest due first.
// The pool keeps frames boxed: a frame moves between the pool and a FIFO
// as a pointer, never as 2 KB of copy.
#[allow(clippy::vec_box, clippy::too_many_arguments)]
fn release_due(
    tx: &OwnedFd,
    lines: &mut [Line],
    slot: Option<Slot>,
    now: u64,
    late: &mut Histogram<u64>,
    rep: &mut Report,
    pool: &mut Vec<Box<[u8; FRAME_MAX]>>,
    held: &mut usize,
) -> Result<()> {
    while let Some((i, h, target)) = next_due(lines, slot, now, rep) {
        let sent_at = mono();
        // SAFETY: h.buf holds h.len bytes of a frame.
        let rc = unsafe { libc::send(tx.as_raw_fd(), h.buf.as_ptr().cast(), h.len, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // A full device queue loses this frame as a wire would.
            if e.raw_os_error() != Some(libc::ENOBUFS) && e.raw_os_error() != Some(libc::EAGAIN) {
                return Err(e).context("sending a held frame");
            }
            rep.dropped_full += 1;
        } else {
            rep.released += 1;
        }
        late.saturating_record(sent_at.saturating_sub(target).max(1));
        let line = &mut lines[i];
        if h.seq < line.last_seq {
            rep.reordered += 1;
        }
        line.last_seq = h.seq;
        pool.push(h.buf);
        *held -= 1;
    }
    Ok(())
}

/// The next frame to leave at `now`, taken from its FIFO: which FIFO, the
/// frame, and the time it was meant to leave (its due time, or with slots
/// the opening of the slot now open, whose count it joins).
fn next_due(
    lines: &mut [Line],
    slot: Option<Slot>,
    now: u64,
    rep: &mut Report,
) -> Option<(usize, Held, u64)> {
    let (_, i, held_back) = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.next_release(slot).map(|(at, full)| (at, i, full)))
        .filter(|&(at, _, _)| at <= now)
        .min()?;
    let line = &mut lines[i];
    let h = line.fifo.pop_front().expect("a FIFO with a release time has a head");
    let Some(s) = slot else {
        let due = h.due;
        return Some((i, h, due));
    };
    let open = s.current(now);
    if open != line.slot_at {
        line.slot_at = open;
        line.in_slot = 0;
        rep.slots_used += 1;
    }
    if held_back {
        rep.slot_full_waits += 1;
    }
    line.in_slot += 1;
    rep.most_in_a_slot = rep.most_in_a_slot.max(line.in_slot);
    Some((i, h, open))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_parses_and_matches_its_prefix_only() {
        let r: Route = "198.18.3.0/24=8000000".parse().unwrap();
        assert_eq!(r.delay_ns, 8_000_000);
        assert!(r.matches(Ipv4Addr::new(198, 18, 3, 1)));
        assert!(!r.matches(Ipv4Addr::new(198, 18, 4, 1)));
        let all: Route = "0.0.0.0/0=1".parse().unwrap();
        assert!(all.matches(Ipv4Addr::new(10, 0, 0, 1)));
        assert!("198.18.3.0/33=1".parse::<Route>().is_err());
        assert!("198.18.3.0=1".parse::<Route>().is_err());
    }

    #[test]
    fn ipv4_destination_only_of_ipv4_frames() {
        let mut f = [0u8; VNET_HDR + 60];
        f[VNET_HDR + 12] = 0x08;
        f[VNET_HDR + 30..VNET_HDR + 34].copy_from_slice(&[198, 18, 0, 1]);
        assert_eq!(ipv4_dst(&f), Some(Ipv4Addr::new(198, 18, 0, 1)));
        f[VNET_HDR + 13] = 0x06; // ARP
        assert_eq!(ipv4_dst(&f), None);
    }

    fn line(delay_ns: u64, dues: &[u64]) -> Line {
        Line {
            delay_ns,
            fifo: dues
                .iter()
                .enumerate()
                .map(|(i, &due)| Held {
                    due,
                    seq: i as u64 + 1,
                    len: 0,
                    buf: Box::new([0; FRAME_MAX]),
                })
                .collect(),
            last_seq: 0,
            slot_at: 0,
            in_slot: 0,
        }
    }

    /// What leaves at each of `times`: (FIFO, seq, meant-to-leave time).
    fn releases(lines: &mut [Line], slot: Option<Slot>, times: &[u64], rep: &mut Report) -> Vec<Vec<(usize, u64, u64)>> {
        times
            .iter()
            .map(|&now| {
                std::iter::from_fn(|| next_due(lines, slot, now, rep).map(|(i, h, at)| (i, h.seq, at))).collect()
            })
            .collect()
    }

    #[test]
    fn without_slots_each_frame_leaves_when_due() {
        let mut rep = Report::default();
        let mut l = [line(0, &[5, 12, 12])];
        let got = releases(&mut l, None, &[4, 5, 11, 20], &mut rep);
        assert_eq!(got, [vec![], vec![(0, 1, 5)], vec![], vec![(0, 2, 12), (0, 3, 12)]]);
        assert_eq!((rep.slots_used, rep.most_in_a_slot), (0, 0));
    }

    /// Slots every 10 ns, 2 frames each: frames due at 1, 2, 3 and 14
    /// leave at 10 (two), 20 (the third, held back, and the one due at
    /// 14), each FIFO counted apart; nothing leaves between openings.
    #[test]
    fn with_slots_frames_leave_at_openings_at_most_n_per_fifo() {
        let slot = Slot {
            interval_ns: 10,
            packets: 2,
        };
        let mut rep = Report::default();
        let mut l = [line(0, &[1, 2, 3, 14]), line(0, &[4])];
        let got = releases(&mut l, Some(slot), &[9, 10, 15, 19, 21], &mut rep);
        assert_eq!(
            got,
            [
                vec![],
                vec![(0, 1, 10), (0, 2, 10), (1, 1, 10)],
                vec![],
                vec![],
                vec![(0, 3, 20), (0, 4, 20)],
            ]
        );
        assert_eq!(rep.slots_used, 3, "FIFO 0 in two slots, FIFO 1 in one");
        assert_eq!(rep.most_in_a_slot, 2);
        assert_eq!(rep.slot_full_waits, 1, "only the third frame waited for room");
        // Woken late, a frame due long ago leaves in the slot now open.
        let mut l = [line(0, &[1])];
        assert_eq!(releases(&mut l, Some(slot), &[35], &mut rep), [vec![(0, 1, 30)]]);
    }
}
