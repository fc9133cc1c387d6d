//! Helpers every lab test binary uses.

/// One test at a time within a binary: experiments measure queues and must
/// not compete for the CPUs, and the leftover checks count namespaces.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "lab tests create namespaces and load BPF: run them as root (just test)"
    );
}
