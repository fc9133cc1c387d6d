//! The clock BPF programs stamp their records with.

/// CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns().
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Across a second boundary, so that seconds and nanoseconds must both
    /// count: 1.05 s asleep reads 1.05 s later, give or take the scheduler.
    #[test]
    fn it_counts_nanoseconds_across_seconds() {
        let t0 = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(1050));
        let dt = monotonic_ns() - t0;
        assert!((1_050_000_000..1_500_000_000).contains(&dt), "{dt} ns");
    }
}
