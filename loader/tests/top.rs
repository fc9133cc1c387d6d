//! `loader top` for real: the binary in a tmux terminal, over a live DCTCP
//! flow between two namespaces and a lab switch pinned in bpffs, driven by
//! keys; and what it does without a terminal.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use dctcp_utils::bpffs::LAB_ROOT;
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
use netns_lab::Prefix;
use tc_qdisc::intf::{marker_stats, queue_now};

const MB: u64 = 1 << 20;
const KEY0: [u8; 4] = 0u32.to_ne_bytes();

/// A lab switch as a running lab pins it: queue_now and marker_stats under
/// LAB_ROOT/<prefix>/, with known values (the queue at `qlen`; the i-th CPU,
/// counting from 1, saw 1000 i packets, 250 i of them marked, i dropped).
/// Removed on drop.
struct FakeSwitch {
    dir: PathBuf,
    created_root: bool,
    cpus: u64,
    _prefix: Prefix,
}

impl FakeSwitch {
    fn new(qlen: u32) -> FakeSwitch {
        let prefix = Prefix::unique().unwrap();
        let created_root = !Path::new(LAB_ROOT).exists();
        let dir = Path::new(LAB_ROOT).join(prefix.as_str());
        std::fs::create_dir_all(&dir).unwrap();
        let sw = FakeSwitch {
            dir,
            created_root,
            cpus: libbpf_rs::num_possible_cpus().unwrap() as u64,
            _prefix: prefix,
        };
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as u64,
            ..Default::default()
        };
        let create = |ty, name: &str, size: usize| {
            let mut map = MapHandle::create(ty, Some(name), 4, size as u32, 1, &opts).unwrap();
            map.pin(sw.dir.join(name)).unwrap();
            map
        };
        let q = create(
            MapType::Array,
            "queue_now",
            std::mem::size_of::<queue_now>(),
        );
        let now = queue_now {
            ts_ns: dctcp_utils::clock::monotonic_ns(),
            qlen,
            backlog: qlen * 1514,
        };
        q.update(&KEY0, &dctcp_utils::bytes::to_bytes(&now), MapFlags::ANY)
            .unwrap();
        let s = create(
            MapType::PercpuArray,
            "marker_stats",
            std::mem::size_of::<marker_stats>(),
        );
        let per_cpu: Vec<Vec<u8>> = (1..=sw.cpus)
            .map(|i| {
                dctcp_utils::bytes::to_bytes(&marker_stats {
                    pkts: 1000 * i,
                    bytes: 1_514_000 * i,
                    marked: 250 * i,
                    dropped: i,
                    ..Default::default()
                })
            })
            .collect();
        s.update_percpu(&KEY0, &per_cpu, MapFlags::ANY).unwrap();
        sw
    }

    fn prefix(&self) -> String {
        self.dir.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// 1 + 2 + ... + cpus.
    fn cpu_sum(&self) -> u64 {
        self.cpus * (self.cpus + 1) / 2
    }
}

impl Drop for FakeSwitch {
    fn drop(&mut self) {
        for pin in ["queue_now", "marker_stats"] {
            let _ = std::fs::remove_file(self.dir.join(pin));
        }
        let _ = std::fs::remove_dir(&self.dir);
        if self.created_root {
            let _ = std::fs::remove_dir(LAB_ROOT);
        }
    }
}

/// A detached tmux server of our own (its own socket) with one shell in a
/// 160x50 window; killed, with whatever runs in it, on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn new() -> Tmux {
        let t = Tmux {
            socket: std::env::temp_dir()
                .join(format!("dctcp-top-test-{}.tmux", std::process::id())),
        };
        t.tmux(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "50",
            "-s",
            "top",
            "sh",
        ]);
        // Type nothing before the shell's prompt, or the echo comes first.
        t.wait_for("the shell's prompt", |s| {
            s.iter().any(|l| !l.trim().is_empty())
        });
        t
    }

    /// Runs a tmux command on our server: its output, or why it failed.
    fn try_tmux(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .map_err(|e| format!("running tmux: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.try_tmux(args)
            .unwrap_or_else(|e| panic!("tmux {args:?}: {e}"))
    }

    /// Types `line` and Enter.
    fn type_line(&self, line: &str) {
        self.tmux(&["send-keys", "-t", "top", "-l", line]);
        self.tmux(&["send-keys", "-t", "top", "Enter"]);
    }

    fn key(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "top", key]);
    }

    /// The process the pane's shell runs in the foreground now.
    fn shell_child(&self) -> Option<i32> {
        let sh = self
            .try_tmux(&["display-message", "-p", "-t", "top", "#{pane_pid}"])
            .ok()?;
        let sh = sh.trim();
        let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    fn screen(&self) -> Vec<String> {
        self.tmux(&["capture-pane", "-p", "-t", "top"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits until the screen satisfies `ok`, and returns that screen.
    fn wait_for(&self, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited 20 s for {what}; the screen:\n{}",
                screen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Whether process `pid` has exited (or is only waiting to be reaped).
fn exited(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Waits up to `secs` for `pid` to exit.
fn wait_exit(pid: i32, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !exited(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The hang-up ends loader top; should it not, a failed test must
        // still not leave it running.
        let top = self.shell_child();
        let _ = self.try_tmux(&["kill-server"]);
        if let Some(pid) = top {
            if !wait_exit(pid, 5) {
                // SAFETY: kill(2) on the pid of the process this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The screen line the flow table highlights.
fn highlighted(screen: &[String]) -> Option<usize> {
    screen.iter().position(|l| l.contains("│> "))
}

/// The `n`th column after the algorithm's name on a table row: 1 cwnd,
/// 2 ssthresh, 3 alpha, 4 F, 5 srtt, 6 Mbit/s.
fn column_after<T: std::str::FromStr>(row: &str, algo: &str, n: usize) -> Option<T> {
    row.split_whitespace()
        .skip_while(|c| *c != algo)
        .nth(n)?
        .parse()
        .ok()
}

#[test]
fn dashboard_shows_a_live_flow_and_a_lab_switch_and_answers_keys() {
    require_root();
    assert!(
        Tmux::available(),
        "tmux is not installed: setup.sh installs it, and without it loader top goes untested"
    );
    let _a = Attached::new("t_top", &[]);
    let sw = FakeSwitch::new(17);
    let pair = Pair::new();
    let tmux = Tmux::new();
    tmux.type_line(&format!(
        "{} top --interval 100; echo TOP_EXIT=$?",
        env!("CARGO_BIN_EXE_loader")
    ));
    tmux.wait_for("the dashboard", |s| {
        s[0].starts_with("loader top  algorithms:") && s[0].contains("t_top")
    });

    // A transfer with t_top on both ends, held open after its first half.
    let t = Transfer::start(&pair, "t_top", Some("t_top"), 64 * MB, 16 * MB);
    let client_row = |s: &[String]| -> Option<String> {
        s.iter()
            .find(|l| {
                l.contains(&format!("{CLIENT_ADDR}:"))
                    && l.contains(&format!("-> {SERVER_ADDR}:{PORT}"))
                    && l.contains(pair.client.name())
            })
            .cloned()
    };
    tmux.wait_for("the client's row with a cwnd", |s| {
        client_row(s).is_some_and(|r| column_after::<u32>(&r, "t_top", 1).is_some_and(|c| c > 0))
    });
    // From the second poll on, a rate computed between polls.
    let screen = tmux.wait_for("the client's throughput", |s| {
        client_row(s).is_some_and(|r| column_after::<f64>(&r, "t_top", 6).is_some())
    });
    let row = client_row(&screen).unwrap();
    assert!(row.contains("ESTAB"), "{row}");
    let text = screen.join("\n");
    eprintln!("{text}");
    assert!(text.contains(" cwnd (packets): ") && text.contains(" alpha: "));
    assert!(screen[0].contains("window: 1 min"), "{}", screen[0]);
    assert!(!screen[0].contains("PAUSED"));
    // The lab switch panel, read from the pins.
    assert!(
        text.contains(&format!(" switch {} ", sw.prefix())),
        "no switch panel:\n{text}"
    );
    assert!(text.contains("queue 17 pkts (25.7 KB"), "{text}");
    assert!(
        text.contains(&format!("drops {} (+0/s)", sw.cpu_sum())),
        "{text}"
    );
    // Both ends are rows: the server's too.
    tmux.wait_for("the server's row", |s| {
        s.iter()
            .any(|l| l.contains(&format!("{SERVER_ADDR}:{PORT} -> {CLIENT_ADDR}:")))
    });

    // Down moves the highlight to the next row.
    let before = highlighted(&tmux.screen()).expect("a highlighted row");
    tmux.key("Down");
    tmux.wait_for("the highlight to move", |s| {
        highlighted(s).is_some_and(|h| h != before)
    });

    tmux.key("p");
    tmux.wait_for("the pause indicator", |s| s[0].contains("PAUSED"));
    tmux.key("+");
    let screen = tmux.wait_for("the wider window", |s| s[0].contains("window: 5 min"));
    assert!(screen.join("\n").contains("-5 min"), "time axis follows");
    tmux.key("p");
    tmux.wait_for("the pause to end", |s| !s[0].contains("PAUSED"));

    tmux.key("q");
    let screen = tmux.wait_for("loader top to exit", |s| {
        s.iter().any(|l| l.ends_with("TOP_EXIT=0"))
    });
    assert!(
        !screen
            .iter()
            .any(|l| l.starts_with("loader top  algorithms:")),
        "the alternate screen was left"
    );
    // Cooked mode and echo are back.
    tmux.type_line("stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo STTY_$((6*7))");
    let screen = tmux.wait_for("stty", |s| s.iter().any(|l| l.ends_with("STTY_42")));
    let modes = screen.iter().find(|l| l.ends_with("STTY_42")).unwrap();
    assert_eq!(
        modes.trim(),
        "icanon echo STTY_42",
        "terminal left in raw mode"
    );

    // Ctrl-C is a key in raw mode, and quits; SIGTERM restores the terminal too.
    let exits = |s: &[String]| s.iter().filter(|l| l.ends_with("TOP_EXIT=0")).count();
    for (how, n) in [("Ctrl-C", 2), ("SIGTERM", 3)] {
        tmux.type_line(&format!(
            "{} top; echo TOP_EXIT=$?",
            env!("CARGO_BIN_EXE_loader")
        ));
        tmux.wait_for("the dashboard again", |s| {
            s[0].starts_with("loader top  algorithms:")
        });
        if how == "Ctrl-C" {
            tmux.key("C-c");
        } else {
            let top = tmux.shell_child().expect("loader top under the shell");
            // SAFETY: plain kill(2) on the pid of the process we started.
            assert_eq!(unsafe { libc::kill(top, libc::SIGTERM) }, 0);
        }
        let screen = tmux.wait_for(&format!("loader top to exit on {how}"), |s| exits(s) == n);
        assert!(
            !screen
                .iter()
                .any(|l| l.starts_with("loader top  algorithms:")),
            "{how}: the alternate screen was left"
        );
    }

    // A terminal that goes away (the window closed) ends it too.
    tmux.type_line(&format!("{} top", env!("CARGO_BIN_EXE_loader")));
    tmux.wait_for("the dashboard again", |s| {
        s[0].starts_with("loader top  algorithms:")
    });
    let top = tmux.shell_child().expect("loader top under the shell");
    tmux.tmux(&["kill-server"]);
    if !wait_exit(top, 5) {
        // SAFETY: kill(2) on the pid of the process this test started.
        unsafe { libc::kill(top, libc::SIGKILL) };
        panic!("loader top still ran 5 s after its terminal hung up");
    }
    drop(tmux);

    let (client, server) = t.finish();
    assert_eq!(server.bytes, 80 * MB);
    assert_eq!(client.ca_at_end, "t_top");
}

#[test]
fn lab_switch_pins_are_decoded_and_summed_over_cpus() {
    require_root();
    let sw = FakeSwitch::new(23);
    let found = tc_qdisc::pins::read_all();
    let r = found
        .iter()
        .find(|r| r.prefix == sw.prefix())
        .unwrap_or_else(|| panic!("{} not found in {found:?}", sw.prefix()));
    let now = r.now.as_ref().expect("readable");
    assert_eq!((now.queue.qlen, now.queue.backlog), (23, 23 * 1514));
    assert!(now.idle_s < 10.0, "{}", now.idle_s);
    let n = sw.cpu_sum();
    assert_eq!(now.stats.pkts, 1000 * n);
    assert_eq!(now.stats.bytes, 1_514_000 * n);
    assert_eq!(now.stats.marked, 250 * n);
    assert_eq!(now.stats.dropped, n);
    assert_eq!(now.stats.taildrop, 0);

    // A directory without both pins (a lab still setting up) is not a
    // switch: one with queue_now alone is skipped, not listed unreadable.
    let half = Path::new(LAB_ROOT).join(format!("{}x", sw.prefix()));
    std::fs::create_dir(&half).unwrap();
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as u64,
        ..Default::default()
    };
    let size = std::mem::size_of::<queue_now>() as u32;
    let mut q = MapHandle::create(MapType::Array, Some("queue_now"), 4, size, 1, &opts).unwrap();
    q.pin(half.join("queue_now")).unwrap();
    let listed = tc_qdisc::pins::read_all();
    q.unpin(half.join("queue_now")).unwrap();
    std::fs::remove_dir(&half).unwrap();
    assert!(
        !listed.iter().any(|r| r.prefix.ends_with('x')),
        "{listed:?}"
    );
}

#[test]
fn without_a_terminal_it_points_to_flows_and_trace() {
    require_root();
    // Standard output is a pipe here.
    let out = loader(&["top"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "loader top needs a terminal; use `loader flows` or `loader trace` for scripts"
        ),
        "{}",
        stderr(&out)
    );
    let out = loader(&["top", "--interval", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("50..=5000"), "{}", stderr(&out));
}
