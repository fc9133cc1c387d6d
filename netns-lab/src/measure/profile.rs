//! CPU time spent in chosen kernel code, from `perf record -a -g` samples.
//!
//! A sample counts for the code when its call chain holds one of the code's
//! functions or BPF programs, so what the code calls (the ring buffer, the
//! clock, a kfunc) counts with it, and only once however deep the chain
//! nests. Nothing is added to the code measured: bpf_stats, the other
//! method, adds two clock reads to every program call. The BPF JIT gives
//! programs frame pointers, so the chains reach them and their callers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};

/// perf's sampling frequency per CPU: one sample is 1/FREQ s of one CPU.
const FREQ: u32 = 10_000;

/// A `perf record` of the whole machine, from `start` until `finish`.
pub struct Profile {
    child: Child,
    file: PathBuf,
}

impl Profile {
    pub fn start() -> Result<Profile> {
        static RECORDS: AtomicU32 = AtomicU32::new(0);
        let file = std::env::temp_dir().join(format!(
            "lab-perf-{}-{}.data",
            std::process::id(),
            RECORDS.fetch_add(1, Ordering::Relaxed)
        ));
        let child = Command::new("perf")
            .args(["record", "-a", "-g", "-q", "-e", "cpu-clock", "-F"])
            .arg(FREQ.to_string())
            .arg("-o")
            .arg(&file)
            // Stopped by SIGINT in finish(); the hour is only a bound.
            .args(["--", "sleep", "3600"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("running perf (linux-perf; `lab bench --no-perf` skips this method)")?;
        // perf needs a moment to open its events on every CPU.
        std::thread::sleep(Duration::from_millis(200));
        Ok(Profile { child, file })
    }

    /// Stops the record and reads its call chains.
    pub fn finish(mut self) -> Result<Samples> {
        // SAFETY: signalling our own child, which we have not waited for.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait()?;
        anyhow::ensure!(
            status.success() || status.code().is_none(),
            "perf record failed: {status}"
        );
        let out = Command::new("perf")
            .args(["script", "-F", "ip,sym", "-i"])
            .arg(&self.file)
            .stderr(Stdio::null())
            .output()
            .context("perf script")?;
        anyhow::ensure!(out.status.success(), "perf script failed: {}", out.status);
        Ok(Samples::parse(&String::from_utf8_lossy(&out.stdout)))
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Every sample's call chain, as symbol ids.
pub struct Samples {
    symbols: Vec<String>,
    chains: Vec<Vec<u32>>,
}

impl Samples {
    /// `perf script -F ip,sym` output: one block per sample, one frame per
    /// line ("<ip> <symbol>"), blocks separated by empty lines.
    fn parse(text: &str) -> Samples {
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut symbols = Vec::new();
        let mut chains = Vec::new();
        let mut chain = Vec::new();
        for line in text.lines() {
            let frame = line.trim();
            if frame.is_empty() {
                if !chain.is_empty() {
                    chains.push(std::mem::take(&mut chain));
                }
                continue;
            }
            let sym = frame
                .split_once(char::is_whitespace)
                .map_or("", |(_, s)| s.trim());
            let id = *ids.entry(sym).or_insert_with(|| {
                symbols.push(sym.to_string());
                symbols.len() as u32 - 1
            });
            chain.push(id);
        }
        if !chain.is_empty() {
            chains.push(chain);
        }
        Samples { symbols, chains }
    }

    /// CPU seconds in the code `is_code` names: samples with a matching
    /// frame anywhere in their chain.
    pub fn cpu_s(&self, is_code: impl Fn(&str) -> bool) -> f64 {
        let hit: Vec<bool> = self.symbols.iter().map(|s| is_code(s)).collect();
        let n = self
            .chains
            .iter()
            .filter(|c| c.iter().any(|&id| hit[id as usize]))
            .count();
        n as f64 / f64::from(FREQ)
    }
}

/// Whether `sym` is a BPF program (`bpf_prog_<tag>_<name>`, the name cut
/// at 15 characters by the kernel) whose name starts with one of `names`.
pub fn bpf_program(sym: &str, names: &[&str]) -> bool {
    sym.strip_prefix("bpf_prog_")
        .and_then(|s| s.split_once('_'))
        .is_some_and(|(_, name)| names.iter().any(|n| name.starts_with(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "\
\tffffffff81001000 read_tsc
\tffffffff81002000 ktime_get_mono_fast_ns
\tffffffffc0026ae3 bpf_prog_f7959c7003e45ca0_bottleneck_egress
\tffffffff81eeffa9 __dev_queue_xmit

\tffffffffc0026be1 bpf_prog_a762f083ea34ca16_bottleneck_dequeue
\tffffffff81eeffa9 htb_dequeue

\tffffffff81003000 tcp_reno_cong_avoid
\tffffffffc0030000 bpf_prog_0123456789abcdef_dctcp_cong_avoi
\tffffffffc0030000 bpf_prog_0123456789abcdef_dctcp_cong_avoi

\tffffffff81004000 pv_native_safe_halt
";

    #[test]
    fn a_sample_counts_once_for_code_anywhere_in_its_chain() {
        let s = Samples::parse(SCRIPT);
        assert_eq!(s.chains.len(), 4);
        let one = 1.0 / f64::from(FREQ);
        // The clock read under the egress program counts for it.
        assert_eq!(s.cpu_s(|f| bpf_program(f, &["bottleneck_egre"])), one);
        assert_eq!(s.cpu_s(|f| bpf_program(f, &["bottleneck_"])), 2.0 * one);
        // Two frames of the same program (recursion, or a kfunc between
        // them) are still one sample.
        assert_eq!(s.cpu_s(|f| bpf_program(f, &["dctcp_"])), one);
        assert_eq!(s.cpu_s(|f| f.starts_with("tcp_reno_")), one);
        assert_eq!(s.cpu_s(|f| f == "nothing"), 0.0);
    }

    #[test]
    fn program_names_are_matched_after_the_tag() {
        assert!(bpf_program(
            "bpf_prog_f7959c7003e45ca0_bottleneck_egress",
            &["bottleneck_egre"]
        ));
        assert!(!bpf_program(
            "bpf_prog_f7959c7003e45ca0_bottleneck_egress",
            &["egress"]
        ));
        assert!(!bpf_program("bottleneck_egress", &["bottleneck_egre"]));
        assert!(!bpf_program("bpf_prog_f7959c7003e45ca0", &[""]));
    }
}
