//! Choosing and reading a socket's congestion control (TCP_CONGESTION), and
//! the other TCP options the lab sets (TCP_WINDOW_CLAMP).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The kernel's TCP_CA_NAME_MAX: a congestion control's name, NUL included.
const TCP_CA_NAME_MAX: usize = 16;

/// setsockopt(IPPROTO_TCP, `opt`, `value`); errors name the option as `what`.
fn set_tcp(fd: BorrowedFd<'_>, opt: libc::c_int, value: &[u8], what: &str) -> io::Result<()> {
    // SAFETY: valid fd, and a pointer/length pair to `value`'s bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    }
}

pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    set_tcp(
        fd,
        libc::TCP_CONGESTION,
        name.as_bytes(),
        &format!("TCP_CONGESTION={name}"),
    )
}

/// TCP_WINDOW_CLAMP: the receiver never advertises more than `bytes`.
pub fn set_window_clamp(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "window clamp out of range"))?;
    set_tcp(
        fd,
        libc::TCP_WINDOW_CLAMP,
        &v.to_ne_bytes(),
        &format!("TCP_WINDOW_CLAMP={bytes}"),
    )
}

pub fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; TCP_CA_NAME_MAX];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf and len describe a writable buffer.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(len as usize);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}
