//! One interface's packets, both ways, from an AF_PACKET socket in its
//! namespace: the kernel's copy for taps (dev_queue_xmit_nit), so outbound
//! packets are seen as they leave the interface, after its qdisc, with the
//! CE marks the switch set; inbound ones as the interface receives them.
//! A classic BPF filter cuts each copy to the snap length before it is
//! queued; PACKET_AUXDATA still gives the packet's own length.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::pcapng::Direction;

/// Bytes kept of each packet: Ethernet, IPv4 and TCP with the most options
/// (14 + 20 + 60) fit.
pub const SNAPLEN: u32 = 128;

/// One packet as the socket gave it.
pub struct Frame<'a> {
    pub ts_ns: u64,
    pub original_len: u32,
    pub data: &'a [u8],
    pub direction: Direction,
}

pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

fn check(rc: libc::c_int, what: &str) -> io::Result<()> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, value: &T, what: &str) -> io::Result<()> {
    // SAFETY: value points at a T of the size given.
    check(
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                level,
                name,
                (value as *const T).cast(),
                size_of::<T>() as libc::socklen_t,
            )
        },
        what,
    )
}

impl PacketSocket {
    /// A socket for `ifname` in the calling thread's namespace, `rcvbuf`
    /// bytes of queue between the kernel and the reader.
    pub fn open(ifname: &str, rcvbuf: i32) -> io::Result<PacketSocket> {
        let name = std::ffi::CString::new(ifname)?;
        // SAFETY: a plain C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {ifname}"),
            ));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2) with constant arguments; the fd is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        check(raw, "AF_PACKET socket (needs CAP_NET_RAW)")?;
        // SAFETY: raw is a new, valid fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Nothing is queued until bound: first a filter that takes nothing,
        // then the bind, then the real one (what arrived from any interface
        // between socket() and bind() would otherwise be read).
        let mut take = [libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        let mut filter = |k: u32| {
            take[0].k = k;
            let prog = libc::sock_fprog { len: 1, filter: take.as_mut_ptr() };
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog, "SO_ATTACH_FILTER")
        };
        filter(0)?;
        // SAFETY: zeroed is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a sockaddr_ll of the length given.
        check(
            unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sll as *const libc::sockaddr_ll).cast(),
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            },
            "binding the capture socket",
        )?;
        let mut buf = [0u8; 1];
        // SAFETY: a 1-byte buffer; MSG_DONTWAIT never blocks.
        while unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                1,
                libc::MSG_DONTWAIT,
            )
        } >= 0
        {}
        // ret #SNAPLEN: every packet, cut to the snap length.
        filter(SNAPLEN)?;
        setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &rcvbuf,
            "SO_RCVBUFFORCE",
        )?;
        setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &1i32,
            "SO_TIMESTAMPNS",
        )?;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_AUXDATA,
            &1i32,
            "PACKET_AUXDATA",
        )?;
        // The counters start now (reading them resets them).
        let _ = Self::take_drops_of(&fd);
        Ok(PacketSocket { fd, ifindex })
    }

    /// Waits up to `timeout_ms` for a packet; None when none came.
    pub fn next<'a>(&self, buf: &'a mut [u8], timeout_ms: i32) -> io::Result<Option<Frame<'a>>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: zeroed is valid for these plain C structs.
        let mut from: libc::sockaddr_ll = unsafe { zeroed() };
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control);
        // SAFETY: msg points at live buffers of the lengths it states.
        let got = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if got < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if from.sll_ifindex != self.ifindex {
            return Ok(None);
        }
        let captured = (got as usize).min(buf.len());
        let (mut ts_ns, mut original_len) = (0u64, captured as u32);
        // SAFETY: the control buffer as recvmsg filled it, walked with the
        // CMSG macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                        let t: libc::timespec = std::ptr::read_unaligned(data.cast());
                        ts_ns = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
                    }
                    (libc::SOL_PACKET, libc::PACKET_AUXDATA) => {
                        let a: libc::tpacket_auxdata = std::ptr::read_unaligned(data.cast());
                        original_len = a.tp_len;
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let direction = if from.sll_pkttype == libc::PACKET_OUTGOING {
            Direction::Outbound
        } else {
            Direction::Inbound
        };
        Ok(Some(Frame {
            ts_ns,
            original_len,
            data: &buf[..captured],
            direction,
        }))
    }

    /// Packets the kernel dropped for want of room in the socket's queue
    /// since the last call.
    pub fn take_drops(&self) -> u64 {
        Self::take_drops_of(&self.fd).unwrap_or(0)
    }

    fn take_drops_of(fd: &OwnedFd) -> io::Result<u64> {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: st is a tpacket_stats of the length given.
        check(
            unsafe {
                libc::getsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_STATISTICS,
                    (&mut st as *mut libc::tpacket_stats).cast(),
                    &mut len,
                )
            },
            "PACKET_STATISTICS",
        )?;
        Ok(u64::from(st.tp_drops))
    }
}
