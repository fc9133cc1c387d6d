//! The few TCP_INFO fields the lab reports. Offsets are those of
//! `struct tcp_info` in include/uapi/linux/tcp.h, a stable kernel ABI that
//! only grows at the end; the libc crate's copy stops before most of them.

use std::os::fd::{AsRawFd, BorrowedFd};

use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, Serialize)]
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
}

impl TcpInfo {
    /// The largest window this end can ever advertise, bytes.
    pub fn max_rcv_window(&self) -> u32 {
        65535 << self.rcv_wscale
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
    Ok(TcpInfo {
        srtt_us: u32_at(b, 68),
        snd_cwnd: u32_at(b, 80),
        total_retrans: u32_at(b, 100),
        min_rtt_us: u32_at(b, 148),
        delivered_ce: u32_at(b, 196),
        bytes_retrans: u64_at(b, 208),
        reord_seen: u32_at(b, 220),
        busy_us: u64_at(b, 168),
        rwnd_limited_us: u64_at(b, 176),
        // tcpi_snd_wscale:4, tcpi_rcv_wscale:4 share byte 6, low bits first.
        rcv_wscale: b.get(6).map_or(0, |w| w >> 4),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

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
        assert!(ours.snd_cwnd >= 2);
    }
}
