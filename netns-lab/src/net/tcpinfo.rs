//! The few TCP_INFO fields the lab reports. Where they sit in `struct
//! tcp_info` comes from the running kernel's BTF, and without BTF from
//! include/uapi/linux/tcp.h (a stable ABI that only grows at the end; the
//! libc crate's copy stops before most of these). A test holds the two
//! equal on the kernel it runs on.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct TcpInfo {
    pub srtt_us: u32,
    pub snd_cwnd: u32,
    pub total_retrans: u32,
    pub min_rtt_us: u32,
    pub delivered_ce: u32,
    pub bytes_retrans: u64,
    /// Reordering events seen (Linux 4.19+): retransmits that were not losses.
    pub reord_seen: u32,
    /// Time with data to send (Linux 4.10+), us.
    pub busy_us: u64,
    /// Of that, time the receiver's window held the sender back, us.
    pub rwnd_limited_us: u64,
    /// The window scale this end announced at the handshake.
    pub rcv_wscale: u8,
    /// ECN was negotiated at the handshake (tcpi_options' TCPI_OPT_ECN).
    pub ecn: bool,
}

/// tcpi_options' bit for a connection that negotiated ECN.
const TCPI_OPT_ECN: u8 = 8;

impl TcpInfo {
    /// The largest window this end can ever advertise, bytes.
    pub fn max_rcv_window(&self) -> u32 {
        65535 << self.rcv_wscale
    }
}

/// Byte offsets of the fields read (the window scale's in bits).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layout {
    pub rtt: usize,
    pub snd_cwnd: usize,
    pub total_retrans: usize,
    pub min_rtt: usize,
    pub busy_time: usize,
    pub rwnd_limited: usize,
    pub delivered_ce: usize,
    pub bytes_retrans: usize,
    pub reord_seen: usize,
    pub rcv_wscale_bit: usize,
    pub options: usize,
}

impl Layout {
    /// include/uapi/linux/tcp.h's.
    pub const UAPI: Layout = Layout {
        rtt: 68,
        snd_cwnd: 80,
        total_retrans: 100,
        min_rtt: 148,
        busy_time: 168,
        rwnd_limited: 176,
        delivered_ce: 196,
        bytes_retrans: 208,
        reord_seen: 220,
        // tcpi_snd_wscale:4, tcpi_rcv_wscale:4 share byte 6, low bits first.
        rcv_wscale_bit: 52,
        options: 5,
    };

    /// The running kernel's, from its BTF; None without BTF or without one
    /// of the fields.
    pub fn from_btf() -> Option<Layout> {
        use libbpf_rs::btf::types::{MemberAttr, Struct};
        let btf = libbpf_rs::btf::Btf::from_vmlinux().ok()?;
        let s: Struct<'_> = btf.type_by_name("tcp_info")?;
        let bit = |name: &str| {
            s.iter()
                .find(|m| m.name.is_some_and(|n| n == name))
                .map(|m| match m.attr {
                    MemberAttr::Normal { offset } | MemberAttr::BitField { offset, .. } => {
                        offset as usize
                    }
                })
        };
        let byte = |name: &str| bit(name).map(|b| b / 8);
        Some(Layout {
            rtt: byte("tcpi_rtt")?,
            snd_cwnd: byte("tcpi_snd_cwnd")?,
            total_retrans: byte("tcpi_total_retrans")?,
            min_rtt: byte("tcpi_min_rtt")?,
            busy_time: byte("tcpi_busy_time")?,
            rwnd_limited: byte("tcpi_rwnd_limited")?,
            delivered_ce: byte("tcpi_delivered_ce")?,
            bytes_retrans: byte("tcpi_bytes_retrans")?,
            reord_seen: byte("tcpi_reord_seen")?,
            rcv_wscale_bit: bit("tcpi_rcv_wscale")?,
            options: byte("tcpi_options")?,
        })
    }

    /// The layout `read` uses: the kernel's, else the UAPI header's.
    pub fn current() -> &'static Layout {
        static LAYOUT: OnceLock<Layout> = OnceLock::new();
        LAYOUT.get_or_init(|| Layout::from_btf().unwrap_or(Layout::UAPI))
    }
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .map_or(0, |s| u32::from_ne_bytes(s.try_into().unwrap()))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .map_or(0, |s| u64::from_ne_bytes(s.try_into().unwrap()))
}

pub fn read(fd: BorrowedFd<'_>) -> std::io::Result<TcpInfo> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf/len describe a writable buffer.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let b = &buf[..len as usize];
    let at = Layout::current();
    Ok(TcpInfo {
        srtt_us: u32_at(b, at.rtt),
        snd_cwnd: u32_at(b, at.snd_cwnd),
        total_retrans: u32_at(b, at.total_retrans),
        min_rtt_us: u32_at(b, at.min_rtt),
        delivered_ce: u32_at(b, at.delivered_ce),
        bytes_retrans: u64_at(b, at.bytes_retrans),
        reord_seen: u32_at(b, at.reord_seen),
        busy_us: u64_at(b, at.busy_time),
        rwnd_limited_us: u64_at(b, at.rwnd_limited),
        rcv_wscale: b
            .get(at.rcv_wscale_bit / 8)
            .map_or(0, |w| (w >> (at.rcv_wscale_bit % 8)) & 0xf),
        ecn: b.get(at.options).is_some_and(|o| o & TCPI_OPT_ECN != 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// This kernel's BTF places every field where the UAPI header does: a
    /// kernel (or a BTF reader) that moved one fails here, not in a lab's
    /// figures.
    #[test]
    fn the_kernels_btf_agrees_with_the_uapi_layout() {
        let btf = Layout::from_btf().expect("this kernel has BTF with struct tcp_info");
        assert_eq!(btf, Layout::UAPI);
    }

    /// The offsets agree with the part of struct tcp_info libc does declare.
    #[test]
    fn offsets_match_libc_prefix() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let ours = read(s.as_fd()).unwrap();
        let mut theirs: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut theirs as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(ours.snd_cwnd, theirs.tcpi_snd_cwnd);
        assert_eq!(ours.total_retrans, theirs.tcpi_total_retrans);
        assert_eq!(ours.ecn, theirs.tcpi_options & TCPI_OPT_ECN != 0);
        assert!(ours.snd_cwnd >= 2);
    }
}
