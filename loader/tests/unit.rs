//! The systemd unit's start/stop cycle: the ExecStart and ExecStop lines of
//! packaging/dctcp-bpf.service.in, run in order as systemd would (systemd
//! itself does not run here), against a config of the test's own, in a
//! network namespace of their own: the default congestion control they set
//! is per namespace. A binary of its own: it lists what is attached.

mod common;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use netns_lab::{Netns, Prefix};
use serde_json::Value;
use socket2::{Domain, Protocol, Socket, Type};

const UNIT: &str = include_str!("../../packaging/dctcp-bpf.service.in");

/// The unit's command lines for `key` (ExecStart, ExecStop).
fn exec_lines(key: &str) -> Vec<String> {
    let lines: Vec<String> = UNIT
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect();
    assert!(!lines.is_empty(), "no {key}= in the unit");
    lines
}

/// A config file, and the namespace the unit runs in: one of the test's
/// own, or (None) the initial one, where the host's allowed list can be
/// changed.
struct Host {
    ns: Option<Netns>,
    config: PathBuf,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Host {
    fn new(config: &str) -> Host {
        Host::in_ns(config, true)
    }

    fn initial(config: &str) -> Host {
        Host::in_ns(config, false)
    }

    fn in_ns(config: &str, own: bool) -> Host {
        require_root();
        let p = Prefix::unique().unwrap();
        let ns = own.then(|| Netns::create(&p.ns("un")).unwrap());
        let dir = std::env::temp_dir().join(format!("dctcp-bpf-unit-{}", p.as_str()));
        std::fs::create_dir_all(&dir).unwrap();
        let config_path = dir.join("attach.toml");
        std::fs::write(&config_path, config).unwrap();
        Host {
            ns,
            config: config_path,
            _dir: TempDir(dir),
        }
    }

    /// Runs every `key=` line of the unit in the namespace, with our loader
    /// and config in place of the installed ones; the last line's output.
    fn systemd(&self, key: &str) -> Output {
        let bin = Path::new(env!("CARGO_BIN_EXE_loader")).parent().unwrap();
        let mut last = None;
        for line in exec_lines(key) {
            let line = line
                .replace("@BINDIR@", &bin.display().to_string())
                .replace(
                    "/etc/dctcp-bpf/attach.toml",
                    &self.config.display().to_string(),
                );
            let argv: Vec<&str> = line.split_whitespace().collect();
            let mut cmd = match &self.ns {
                Some(ns) => ns.command(Path::new(argv[0])),
                None => std::process::Command::new(argv[0]),
            };
            last = Some(cmd.args(&argv[1..]).output().unwrap());
        }
        last.unwrap()
    }

    /// `f` in the unit's namespace.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        match &self.ns {
            Some(ns) => ns.run(f).unwrap(),
            None => f(),
        }
    }

    fn sysctl(&self, key: &str) -> String {
        let path = format!("/proc/sys/net/ipv4/{key}");
        self.run(move || std::fs::read_to_string(path).unwrap().trim().to_string())
    }

    /// What a new socket in the namespace gets without asking.
    fn new_socket_cc(&self) -> String {
        self.run(|| {
            let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
            dctcp_utils::sockopt::congestion(s.as_fd()).unwrap()
        })
    }

    fn state_file(&self) -> PathBuf {
        let ns = match &self.ns {
            Some(ns) => ns.path(),
            None => PathBuf::from("/proc/self/ns/net"),
        };
        loader::attach_file::sysctl_state_file(&ns).unwrap()
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn allowed() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the unit's ExecStop on the way out, test passed or not.
/// Then puts the host's default and allowed list back as they were, by
/// itself: a broken loader (a mutant under `just mutants`) must not leave
/// the host changed.
struct Stop<'a> {
    host: &'a Host,
    default: String,
    allowed: String,
}

impl<'a> Stop<'a> {
    fn new(host: &'a Host) -> Stop<'a> {
        Stop {
            host,
            default: host.sysctl("tcp_congestion_control"),
            allowed: allowed().join(" "),
        }
    }
}

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        let out = self.host.systemd("ExecStop");
        if !out.status.success() {
            eprintln!("ExecStop: {}", stderr(&out));
        }
        let ipv4 = |k: &str| format!("/proc/sys/net/ipv4/{k}");
        let _ = std::fs::write(ipv4("tcp_congestion_control"), &self.default);
        let _ = std::fs::write(ipv4("tcp_allowed_congestion_control"), &self.allowed);
        // And the record of them, which a `restore` that did nothing (a
        // mutant, 2026-11-29) left for the next start to trust.
        let _ = std::fs::remove_file(self.host.state_file());
    }
}

/// One of the kernel's own algorithms the host does not allow (cubic here),
/// if any: where it allows all there is none.
fn not_allowed() -> Option<String> {
    dctcp_utils::preflight::registered_congestion_controls()
        .into_iter()
        .find(|n| !allowed().contains(n) && !n.starts_with("t_"))
}

/// Detaches on the way out whatever a failing test left attached.
struct Detach(&'static [&'static str]);

impl Drop for Detach {
    fn drop(&mut self) {
        for n in self.0 {
            if registered(n) {
                let _ = loader(&["detach", n]);
            }
        }
    }
}

/// The unit runs in the initial namespace: the host's default and allowed
/// list change for the length of this test (new namespaces inherit that
/// default, hence one test of this binary at a time).
#[test]
fn start_twice_then_stop_puts_everything_back() {
    let _serial = serial();
    // One of the kernel's own the host does not allow yet: it must leave
    // the list again at stop.
    let added: Vec<String> = ["t_unitx", "t_unitx_reno"]
        .iter()
        .map(|n| n.to_string())
        .chain(not_allowed())
        .collect();
    let host = Host::initial(&format!(
        "[[attach]]\nalgo = \"dctcp\"\nname = \"t_unit\"\nparams = {{ shift_g = 5 }}\n\
         [[attach]]\nalgo = \"xdctcp\"\nname = \"t_unitx\"\nmode = \"map\"\n\
         [sysctl]\ndefault = \"t_unit\"\nallowed = {added:?}\n"
    ));
    // Whatever happens below, the host gets its default back.
    let _stop = Stop::new(&host);
    let default_before = host.sysctl("tcp_congestion_control");
    let allowed_before = allowed();

    let out = ok(&host.systemd("ExecStart"));
    assert!(
        out.contains("attached t_unit (dctcp, fallback t_unit_reno) with shift_g=5"),
        "{out}"
    );
    assert!(registered("t_unit") && registered("t_unitx"));
    let list: Value = serde_json::from_str(&loader_ok(&["list", "--json"])).unwrap();
    let of = |n: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == n)
            .unwrap_or_else(|| panic!("{n} not listed"))
            .clone()
    };
    assert_eq!(of("t_unit")["params"]["shift_g"], 5);
    assert_eq!(of("t_unitx")["algo"], "xdctcp");
    assert_eq!(of("t_unitx")["mode"], "map");
    // The default is ours, and a new socket gets it.
    assert_eq!(host.sysctl("tcp_congestion_control"), "t_unit");
    assert_eq!(host.new_socket_cc(), "t_unit");
    // The file's names joined the host's list (and the kernel lists the
    // default there too).
    let now = allowed();
    for n in allowed_before.iter().chain(&added) {
        assert!(
            now.iter().any(|a| a == n),
            "{n}: {allowed_before:?} -> {now:?}"
        );
    }
    assert!(host.state_file().exists());

    // A second start (a rerun by hand, a restart after a failed stop)
    // succeeds and changes nothing.
    let out = ok(&host.systemd("ExecStart"));
    assert!(
        out.contains("t_unit is already attached; left as it is"),
        "{out}"
    );
    assert_eq!(host.sysctl("tcp_congestion_control"), "t_unit");
    assert_eq!(allowed(), now);

    let out = ok(&host.systemd("ExecStop"));
    assert!(
        out.contains("detached t_unit") && out.contains("detached t_unitx"),
        "{out}"
    );
    assert!(!registered("t_unit") && !registered("t_unitx") && !registered("t_unit_reno"));
    // What the first start found is back.
    assert_eq!(host.sysctl("tcp_congestion_control"), default_before);
    assert_eq!(host.new_socket_cc(), default_before);
    assert_eq!(allowed(), allowed_before);
    assert!(!host.state_file().exists());

    // A second stop finds nothing to do.
    let out = ok(&host.systemd("ExecStop"));
    assert!(out.contains("t_unit was not attached"), "{out}");
}

/// In a namespace of its own the unit may make an algorithm the host allows
/// the default; the host's allowed list is not its to change, so its stop
/// leaves that list as it finds it, even one the host changed meanwhile.
#[test]
fn a_stop_in_a_namespace_leaves_the_hosts_allowed_list_alone() {
    let _serial = serial();
    let _cleanup = Detach(&["t_unitm"]);
    let host = Host::new(
        "[[attach]]\nalgo = \"dctcp\"\nname = \"t_unitm\"\n[sysctl]\ndefault = \"reno\"\n",
    );
    let _stop = Stop::new(&host);
    let default_before = host.sysctl("tcp_congestion_control");
    ok(&host.systemd("ExecStart"));
    assert_eq!(host.sysctl("tcp_congestion_control"), "reno");
    assert!(host.state_file().exists());
    // The host allows one more meanwhile (`Stop` puts its list back).
    if let Some(n) = not_allowed() {
        let list = format!("{} {n}", allowed().join(" "));
        std::fs::write("/proc/sys/net/ipv4/tcp_allowed_congestion_control", list).unwrap();
    }
    let during = allowed();
    let out = ok(&host.systemd("ExecStop"));
    assert!(out.contains("detached t_unitm"), "{out}");
    assert!(!registered("t_unitm"));
    assert_eq!(host.sysctl("tcp_congestion_control"), default_before);
    assert_eq!(allowed(), during);
    assert!(!host.state_file().exists());
}

/// A record the stop cannot read (a directory in its place here, a disk
/// error elsewhere) ends the stop before anything changes, naming the
/// file: taken for no record, it would leave a default the start changed
/// (cargo-mutants, 2026-11-29: `NotFound` widened to every error).
#[test]
fn a_stop_that_cannot_read_its_record_names_it_and_changes_nothing() {
    let _serial = serial();
    let _cleanup = Detach(&["t_unitr"]);
    let host = Host::new(
        "[[attach]]\nalgo = \"dctcp\"\nname = \"t_unitr\"\n[sysctl]\ndefault = \"reno\"\n",
    );
    let _stop = Stop::new(&host);
    ok(&host.systemd("ExecStart"));
    let record = host.state_file();
    std::fs::remove_file(&record).unwrap();
    std::fs::create_dir(&record).unwrap();
    // Gone before `_stop` runs the stop again.
    let unreadable = TempDir(record.clone());
    let out = host.systemd("ExecStop");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("reading {}", record.display())),
        "{}",
        stderr(&out)
    );
    assert!(registered("t_unitr"));
    assert_eq!(host.sysctl("tcp_congestion_control"), "reno");
    // Once it is readable (absent: nothing recorded) the stop goes through.
    drop(unreadable);
    let out = ok(&host.systemd("ExecStop"));
    assert!(out.contains("detached t_unitr"), "{out}");
    assert!(!registered("t_unitr"));
}

/// Elsewhere the kernel takes as default only what the host allows, and
/// the allowed list is the initial namespace's to change: refused before
/// anything loads (a default the kernel refuses stays referenced by it).
#[test]
fn outside_the_initial_namespace_sysctls_are_refused_and_undone() {
    let _serial = serial();
    let _cleanup = Detach(&["t_unitn"]);
    for sysctl in ["default = \"t_unitn\"", "allowed = [\"t_unitn\"]"] {
        let host = Host::new(&format!(
            "[[attach]]\nalgo = \"dctcp\"\nname = \"t_unitn\"\n[sysctl]\n{sysctl}\n"
        ));
        // What the namespace inherited from the host: allowed there.
        let default_before = host.sysctl("tcp_congestion_control");
        let allowed_before = allowed();
        let out = host.systemd("ExecStart");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("initial network namespace"),
            "{sysctl}: {}",
            stderr(&out)
        );
        assert!(!registered("t_unitn"));
        assert_eq!(host.sysctl("tcp_congestion_control"), default_before);
        assert_eq!(allowed(), allowed_before);
        assert!(!host.state_file().exists());
    }
}

#[test]
fn a_start_that_cannot_finish_leaves_nothing() {
    let _serial = serial();
    let _cleanup = Detach(&["t_unitf"]);
    // The second algorithm's name is the kernel's own cubic: refused at
    // load, after t_unitf was attached and before [sysctl] applies.
    let host = Host::initial(
        "[[attach]]\nalgo = \"dctcp\"\nname = \"t_unitf\"\n\
         [[attach]]\nalgo = \"dctcp\"\nname = \"cubic\"\n\
         [sysctl]\ndefault = \"t_unitf\"\n",
    );
    let default_before = host.sysctl("tcp_congestion_control");
    let out = host.systemd("ExecStart");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("`cubic`"), "{}", stderr(&out));
    assert!(!registered("t_unitf") && !registered("t_unitf_reno"));
    assert_eq!(host.sysctl("tcp_congestion_control"), default_before);
    assert!(!host.state_file().exists());
}

#[test]
fn bad_or_missing_config_fails_before_anything_loads() {
    let _serial = serial();
    let _cleanup = Detach(&["t_unitb"]);
    let host =
        Host::new("[[attach]]\nalgo = \"dctcp\"\nname = \"t_unitb\"\nparams = { shift_g = 11 }\n");
    for key in ["ExecStart", "ExecStop"] {
        let out = host.systemd(key);
        // 2: systemd's INVALIDARGUMENT.
        assert_eq!(out.status.code(), Some(2), "{key}: {}", stderr(&out));
        assert!(stderr(&out).contains("shift_g=11"), "{}", stderr(&out));
    }
    assert!(!registered("t_unitb"));
    std::fs::remove_file(&host.config).unwrap();
    for key in ["ExecStart", "ExecStop"] {
        let out = host.systemd(key);
        // 6: systemd's NOTCONFIGURED.
        assert_eq!(out.status.code(), Some(6), "{key}: {}", stderr(&out));
        assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    }
    assert!(!registered("t_unitb"));
}
