//! htb's hysteresis mode (`sch_htb.htb_hysteresis`), switched on for the
//! length of a lab and restored afterwards.
//!
//! Without it htb re-arms its watchdog hrtimer for every packet it cannot
//! send yet: at 1 Gbit/s that is about 83,000 timer programs a second, and on
//! a virtual machine each one exits to the hypervisor. With it a class may
//! run `burst` bytes into debt before it waits, so the timer fires once per
//! burst. The parameter is global (every htb on the machine), so labs share
//! it: the first one that asks records the value it found, the last one that
//! leaves puts it back, and `lab cleanup` does so for labs that were killed.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

const PARAM: &str = "/sys/module/sch_htb/parameters/htb_hysteresis";

/// What the kernel's htb is doing now; None where htb is not built in and
/// not loaded.
pub fn current() -> Option<bool> {
    fs::read_to_string(PARAM).ok().map(|v| v.trim() != "0")
}

/// Holds hysteresis on until dropped.
#[derive(Debug)]
pub struct Hysteresis {
    state: PathBuf,
}

/// The shared record: the value found before the first holder, then the
/// pids of the labs that hold it on.
struct State {
    original: String,
    holders: Vec<u32>,
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Runs `f` on the record under an exclusive lock on its file, then writes
/// it back, or removes the file if `f` left no record.
fn with_state<T>(path: &Path, f: impl FnOnce(&mut Option<State>) -> Result<T>) -> Result<T> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = locked(path)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut lines = text.lines();
    let mut state = lines.next().map(|original| State {
        original: original.to_string(),
        holders: lines
            .filter_map(|l| l.parse().ok())
            .filter(|&p| alive(p))
            .collect(),
    });
    let out = f(&mut state)?;
    match state {
        Some(s) => {
            file.set_len(0)?;
            file.rewind()?;
            writeln!(file, "{}", s.original)?;
            for p in s.holders {
                writeln!(file, "{p}")?;
            }
        }
        None => fs::remove_file(path)?,
    }
    Ok(out)
}

/// The record file, opened and locked. The last holder removes it under
/// the lock, so a lab that was waiting for the lock on the removed file
/// opens the path again.
fn locked(path: &Path) -> Result<File> {
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: a valid descriptor; the lock goes with the file.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).context("locking the htb record");
        }
        let same =
            fs::metadata(path).is_ok_and(|m| m.ino() == file.metadata().map_or(0, |f| f.ino()));
        if same {
            return Ok(file);
        }
    }
}

fn write_param(value: &str) -> Result<()> {
    fs::write(PARAM, value).with_context(|| {
        format!("writing {PARAM} (is sch_htb built in or loaded? running as root?)")
    })
}

/// Puts the recorded value back when no live holder is left.
fn restore_if_unheld(state: &mut Option<State>) -> Result<bool> {
    match state {
        Some(s) if s.holders.is_empty() => {
            write_param(&s.original)?;
            *state = None;
            Ok(true)
        }
        _ => Ok(false),
    }
}

impl Hysteresis {
    /// Switches hysteresis on for this process; `state` is the shared record
    /// (e.g. /run/dctcp-lab/htb_hysteresis).
    pub fn hold(state: &Path) -> Result<Hysteresis> {
        if !Path::new(PARAM).exists() {
            // A modular htb shows its parameters once loaded.
            let _ = std::process::Command::new("modprobe")
                .args(["-q", "sch_htb"])
                .status();
        }
        let original = fs::read_to_string(PARAM)
            .with_context(|| format!("reading {PARAM}: this kernel has no sch_htb"))?;
        let pid = std::process::id();
        with_state(state, |s| {
            let s = s.get_or_insert_with(|| State {
                original: original.trim().to_string(),
                holders: Vec::new(),
            });
            s.holders.push(pid);
            write_param("1")
        })?;
        Ok(Hysteresis {
            state: state.to_path_buf(),
        })
    }
}

impl Drop for Hysteresis {
    fn drop(&mut self) {
        let pid = std::process::id();
        let r = with_state(&self.state, |s| {
            if let Some(s) = s.as_mut() {
                s.holders.retain(|&p| p != pid);
            }
            restore_if_unheld(s)
        });
        if let Err(e) = r {
            eprintln!("warning: restoring {PARAM}: {e:#}; `lab cleanup` retries");
        }
    }
}

/// For `lab cleanup`: restores the value a killed lab left changed. True if
/// it did.
pub fn restore_abandoned(state: &Path) -> Result<bool> {
    if !state.exists() {
        return Ok(false);
    }
    with_state(state, restore_if_unheld)
}
