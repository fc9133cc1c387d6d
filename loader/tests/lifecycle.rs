//! attach / list / set / detach against the running kernel, and bad input.

mod common;

use std::path::Path;

use common::*;

#[test]
fn attach_outlives_loader_and_detach_removes_everything() {
    require_root();
    // The default name, as a user types it.
    let out = loader_ok(&["attach", "--algo", "dctcp"]);
    assert!(out.contains("attached bpf_dctcp"), "{out}");
    let guard = Attached {
        name: "bpf_dctcp".into(),
    };
    // The loader process has exited: the pins keep both registered.
    assert!(
        registered("bpf_dctcp"),
        "bpf_dctcp not in tcp_available_congestion_control"
    );
    assert!(registered("bpf_dctcp_reno"));
    let dir = Path::new("/sys/fs/bpf/dctcp-bpf/bpf_dctcp");
    // Auto mode: links where the kernel has them (6.4), else the maps.
    let (mode, pins) = if has_struct_ops_links() {
        ("link", ["link", "fallback_link"])
    } else {
        ("map", ["ops", "fallback_ops"])
    };
    for pin in pins.iter().chain(&["params", "stats"]) {
        assert!(dir.join(pin).exists(), "missing pin {pin}");
    }
    let listed = guard.listed();
    assert_eq!(listed["algo"], "dctcp");
    assert_eq!(listed["mode"], mode);
    assert_eq!(listed["registered"], true);
    assert_eq!(listed["params"]["shift_g"], 4);
    assert_eq!(listed["params"]["alpha_on_init"], 1024);

    loader_ok(&["detach", "bpf_dctcp"]);
    std::mem::forget(guard);
    assert!(!registered("bpf_dctcp"));
    assert!(!registered("bpf_dctcp_reno"));
    assert!(!dir.exists(), "pins left behind");
}

#[test]
fn map_mode_holds_registration_without_a_link() {
    require_root();
    let a = Attached::new("t_map", &["--mode", "map"]);
    assert!(registered("t_map") && registered("t_map_reno"));
    let dir = Path::new("/sys/fs/bpf/dctcp-bpf/t_map");
    assert!(dir.join("ops").exists() && !dir.join("link").exists());
    assert_eq!(a.listed()["mode"], "map");
    loader_ok(&["detach", "t_map"]);
    assert!(!registered("t_map") && !registered("t_map_reno"));
    assert!(!dir.exists());
}

/// A registration someone else removed (`bpftool struct_ops unregister`)
/// is what detach wants: it finishes, and the pins go.
#[test]
fn detach_after_an_outside_unregister_removes_the_rest() {
    require_root();
    let _a = Attached::new("t_unr", &["--mode", "map"]);
    let dir = Path::new("/sys/fs/bpf/dctcp-bpf/t_unr");
    let show = std::process::Command::new("bpftool")
        .args(["-j", "map", "show", "pinned"])
        .arg(dir.join("ops"))
        .output()
        .expect("bpftool");
    let id = serde_json::from_slice::<serde_json::Value>(&show.stdout).unwrap()["id"].to_string();
    let out = std::process::Command::new("bpftool")
        .args(["struct_ops", "unregister", "id", &id])
        .output()
        .expect("bpftool");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!registered("t_unr"));
    loader_ok(&["detach", "t_unr"]);
    assert!(!registered("t_unr_reno"));
    assert!(!dir.exists());
}

/// Before Linux 6.4 `--mode link` is refused, naming the version, and
/// nothing is loaded; from 6.4 on it is what auto picks.
#[test]
fn link_mode_names_the_kernel_it_needs() {
    require_root();
    if has_struct_ops_links() {
        let a = Attached::new("t_lnk", &["--mode", "link"]);
        assert_eq!(a.listed()["mode"], "link");
        return;
    }
    let out = loader(&[
        "attach", "--algo", "dctcp", "--name", "t_lnk", "--mode", "link",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Linux 6.4 or later"),
        "{}",
        stderr(&out)
    );
    assert!(!registered("t_lnk") && !Path::new("/sys/fs/bpf/dctcp-bpf/t_lnk").exists());
}

#[test]
fn set_rewrites_parameters_of_a_live_instance() {
    require_root();
    let a = Attached::new("t_set", &["--param", "shift_g=5"]);
    assert_eq!(a.listed()["params"]["shift_g"], 5);
    let out = loader_ok(&["set", "t_set", "shift_g=7", "alpha_on_init=300"]);
    assert!(out.contains("shift_g=7 alpha_on_init=300"), "{out}");
    let listed = a.listed();
    assert_eq!(listed["params"]["shift_g"], 7);
    assert_eq!(listed["params"]["alpha_on_init"], 300);

    // Out of range: refused, nothing changed.
    let out = loader(&["set", "t_set", "shift_g=11"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("0..=10"));
    assert_eq!(a.listed()["params"]["shift_g"], 7);
}

/// The `.ssthresh` program's translated size in bytes for instance `name`:
/// the one whose maps include the instance's pinned parameters.
fn ssthresh_prog_bytes(name: &str) -> u64 {
    let bpftool = |args: &[&str]| -> serde_json::Value {
        let out = std::process::Command::new("bpftool")
            .args(args)
            .output()
            .expect("bpftool");
        assert!(out.status.success(), "bpftool {args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let pin = format!("/sys/fs/bpf/dctcp-bpf/{name}/params");
    let params = bpftool(&["map", "show", "pinned", &pin, "-j"])["id"].clone();
    let progs = bpftool(&["prog", "show", "name", "dctcp_ssthresh", "-j"]);
    let progs = progs.as_array().cloned().unwrap_or_else(|| vec![progs]);
    let ours: Vec<_> = progs
        .iter()
        .filter(|p| p["map_ids"].as_array().unwrap().contains(&params))
        .collect();
    assert_eq!(ours.len(), 1, "{name}: {progs:#?}");
    ours[0]["bytes_xlated"].as_u64().unwrap()
}

/// Fault injection is a test hook fixed at attach: an instance attached
/// without it has no injection code at all (the verifier removed it, so its
/// `.ssthresh` is shorter), and `set` refuses to turn it on there (exit 2,
/// nothing changed) while still taking `inject_ssthresh=0`. An instance
/// attached to inject takes new counts live.
#[test]
fn fault_injection_exists_only_where_an_attach_asked_for_it() {
    require_root();
    let plain = Attached::new("t_noinj", &[]);
    let hooked = Attached::new("t_inj", &["--param", "inject_ssthresh=1"]);
    let (without, with) = (
        ssthresh_prog_bytes("t_noinj"),
        ssthresh_prog_bytes("t_inj"),
    );
    assert!(
        without < with,
        "ssthresh {without} bytes without the hook, {with} with it"
    );

    let out = loader(&["set", "t_noinj", "inject_ssthresh=3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("attached without fault injection"),
        "{}",
        stderr(&out)
    );
    assert!(plain.listed()["params"]
        .get("inject_ssthresh")
        .is_none_or(|v| v == 0));
    loader_ok(&["set", "t_noinj", "inject_ssthresh=0"]);

    let out = loader_ok(&["set", "t_inj", "inject_ssthresh=5"]);
    assert!(out.contains("inject_ssthresh=5"), "{out}");
    assert_eq!(hooked.listed()["params"]["inject_ssthresh"], 5);
}

#[test]
fn double_attach_says_so_and_changes_nothing() {
    require_root();
    let a = Attached::new("t_dbl", &["--param", "shift_g=5"]);
    let out = loader(&[
        "attach",
        "--algo",
        "dctcp",
        "--name",
        "t_dbl",
        "--param",
        "shift_g=6",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("already attached"),
        "{}",
        stderr(&out)
    );
    assert_eq!(a.listed()["params"]["shift_g"], 5);
    assert!(registered("t_dbl"));
}

/// Bad input: exit status 2, a message naming the valid choices, and no
/// registration, pin or directory left.
#[test]
fn bad_input_is_refused_before_the_kernel_is_touched() {
    require_root();
    let cases: &[(&[&str], &str)] = &[
        (
            &["attach", "--algo", "cubic"],
            "possible values: dctcp, xdctcp, kdctcp",
        ),
        (
            &[
                "attach", "--algo", "xdctcp", "--name", "t_bad", "--param", "g=0",
            ],
            "g takes (0, 1]",
        ),
        (
            &[
                "attach", "--algo", "xdctcp", "--name", "t_bad", "--param", "ns=1.5",
            ],
            "ns takes [0, 1]",
        ),
        (
            &[
                "attach", "--algo", "xdctcp", "--name", "t_bad", "--param", "nl=-0.2",
            ],
            "nl takes [0, 1]",
        ),
        (
            &[
                "attach",
                "--algo",
                "xdctcp",
                "--name",
                "t_bad",
                "--param",
                "short_bytes=-1",
            ],
            "non-negative integer",
        ),
        (
            &[
                "attach",
                "--algo",
                "xdctcp",
                "--name",
                "t_bad",
                "--param",
                "shift_g=4",
            ],
            "unknown parameter `shift_g` for xdctcp",
        ),
        (
            &[
                "attach",
                "--algo",
                "kdctcp",
                "--name",
                "t_bad",
                "--param",
                "progressive=2",
            ],
            "0 or 1",
        ),
        (
            &[
                "attach",
                "--algo",
                "dctcp",
                "--name",
                "t_bad",
                "--param",
                "shift_g=11",
            ],
            "0..=10",
        ),
        (
            &[
                "attach",
                "--algo",
                "dctcp",
                "--name",
                "t_bad",
                "--param",
                "alpha_on_init=2000",
            ],
            "0..=1024",
        ),
        (
            &[
                "attach", "--algo", "dctcp", "--name", "t_bad", "--param", "gain=3",
            ],
            "unknown parameter `gain`",
        ),
        (
            &[
                "attach", "--algo", "dctcp", "--name", "t_bad", "--param", "shift_g",
            ],
            "name=value",
        ),
        (
            &["attach", "--algo", "dctcp", "--name", "much_too_long"],
            "1 to 10 characters",
        ),
        (&["detach", "t_nosuch"], "no algorithm named `t_nosuch`"),
        (
            &["set", "t_nosuch", "shift_g=3"],
            "no algorithm named `t_nosuch`",
        ),
    ];
    for (args, expect) in cases {
        let out = loader(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "loader {args:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(expect),
            "loader {args:?}: expected `{expect}` in: {}",
            stderr(&out)
        );
    }
    assert!(!registered("t_bad") && !registered("t_bad_reno"));
    assert!(!Path::new("/sys/fs/bpf/dctcp-bpf/t_bad").exists());
}

#[test]
fn unprivileged_user_gets_told_to_use_root() {
    require_root();
    // A copy nobody can execute, wherever the checkout lives.
    let dir = std::env::temp_dir().join(format!("loader-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("loader");
    std::fs::copy(env!("CARGO_BIN_EXE_loader"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for args in [
        &["attach", "--algo", "dctcp", "--name", "t_nobody"][..],
        &["list"],
        &["detach", "--all"],
        &["flows"],
        &["check"],
    ] {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&bin)
            .args(args)
            .output()
            .expect("setpriv (util-linux)");
        // 4: systemd's NOPERMISSION.
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("needs root"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!registered("t_nobody"));
}

/// Root is not enough without the capabilities: CAP_SYS_ADMIN alone, or
/// CAP_BPF with CAP_NET_ADMIN, passes the preflight; anything less is told
/// before the kernel is asked (setpriv drops them from the bounding set, so
/// the exec'd loader runs as uid 0 without them).
#[test]
fn root_without_the_bpf_capabilities_is_refused() {
    require_root();
    for (dropped, refused) in [
        ("-sys_admin,-bpf", true),
        ("-sys_admin,-net_admin", true),
        ("-bpf,-net_admin", false),
        ("-sys_admin", false),
    ] {
        let out = std::process::Command::new("setpriv")
            .arg(format!("--bounding-set={dropped}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_loader"))
            .arg("list")
            .output()
            .expect("setpriv (util-linux)");
        let told = out.status.code() == Some(4) && stderr(&out).contains("needs root");
        assert_eq!(
            told,
            refused,
            "{dropped}: {:?} {}",
            out.status,
            stderr(&out)
        );
    }
}

/// A kernel without BTF (here: /sys/kernel/btf hidden under a tmpfs in a
/// mount namespace of the loader's own) is named before anything is loaded.
#[test]
fn a_kernel_without_btf_is_told_before_anything_is_loaded() {
    require_root();
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs none /sys/kernel/btf && exec "$0" attach --algo dctcp --name t_nobtf"#)
        .arg(env!("CARGO_BIN_EXE_loader"))
        .output()
        .expect("unshare (util-linux)");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("exposes no BTF"), "{}", stderr(&out));
    assert!(!registered("t_nobtf"));
}

/// A directory under the root that holds no instance (made by hand, or its
/// pins removed from under it) is left out of `loader list` with a warning
/// that names it; the rest is listed as usual.
#[test]
fn list_skips_a_directory_without_pins_and_names_it() {
    require_root();
    struct Husk(&'static Path);
    impl Drop for Husk {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(self.0);
        }
    }
    // Dropped in reverse: the husk goes first, then the detach of the last
    // instance takes the root directory along.
    let a = Attached::new("t_beside", &[]);
    let husk = Husk(Path::new("/sys/fs/bpf/dctcp-bpf/t_husk"));
    std::fs::create_dir_all(husk.0).unwrap();
    let out = loader(&["list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(listed.iter().all(|i| i["name"] != "t_husk"), "{listed:#?}");
    assert!(listed.iter().any(|i| i["name"] == a.name), "{listed:#?}");
    assert!(
        stderr(&out).contains("WARN")
            && stderr(&out).contains("skipping /sys/fs/bpf/dctcp-bpf/t_husk"),
        "{}",
        stderr(&out)
    );
}

/// `loader check` passes every check on a kernel the suite attaches on,
/// names how this kernel holds a registration (asked of the kernel itself),
/// and loads each algorithm through the verifier without registering or
/// pinning anything.
#[test]
fn check_verifies_every_algorithm_and_registers_nothing() {
    require_root();
    let out = loader(&["check", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let checks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let named: Vec<&str> = checks
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        named,
        [
            "kernel",
            "BTF",
            "struct_ops",
            "registration",
            "bpffs",
            "dctcp",
            "xdctcp",
            "kdctcp",
            "prague"
        ]
    );
    assert!(checks.iter().all(|c| c["ok"] == true), "{checks:#?}");
    let mode = checks[3]["note"].as_str().unwrap();
    let want = if has_struct_ops_links() {
        "--mode link"
    } else {
        "--mode map"
    };
    assert!(mode.ends_with(want), "{mode}");
    // Each DCTCP algorithm's 9 tcp_congestion_ops callbacks and its Reno
    // fallback's 5, Prague's 7, its fallback's 5 and its ECT(1) program, as
    // the kernel counted them once loaded, and the instructions the
    // verifier walked in them: about 12,300 for a DCTCP on 6.18, at least a
    // program's entry and exit in each wherever. Prague needs 6.10 and says
    // so where it cannot load.
    for algo in &checks[5..] {
        let want = if algo["check"] == "prague" { 13 } else { 14 };
        if algo["check"] == "prague" && !kernel_at_least(6, 10) {
            assert!(algo["verified"].is_null(), "{algo}");
            let note = algo["note"].as_str().unwrap();
            assert!(note.starts_with("not on this kernel: prague needs Linux 6.10"), "{note}");
            continue;
        }
        let (programs, insns) = (&algo["verified"]["programs"], &algo["verified"]["insns"]);
        assert_eq!(programs, want, "{algo}");
        assert!(insns.as_u64().unwrap() > want * 2, "{algo}");
        let note = format!("its {want} programs pass the verifier ({insns} instructions processed)");
        assert_eq!(algo["note"], note, "{algo}");
    }
    // The names it loaded under (other tests attach beside it meanwhile).
    assert!(!registered("check") && !registered("check_reno"));
    assert!(!std::path::Path::new("/sys/fs/bpf/dctcp-bpf/check").exists());
    let table = loader_ok(&["check"]);
    assert_eq!(table.lines().count(), 9, "{table}");
    assert!(
        table
            .lines()
            .all(|l| l.split_whitespace().nth(1) == Some("ok")),
        "{table}"
    );
}

/// xDCTCP and the seed 002 variant attach beside DCTCP under their own
/// names, with decimal parameters, and are retuned live.
#[test]
fn xdctcp_and_kdctcp_attach_beside_dctcp_with_their_own_parameters() {
    require_root();
    let d = Attached::new("t_vd", &[]);
    let x = Attached::of(
        "xdctcp",
        "t_vx",
        &["--param", "ns=0.25", "--param", "short_bytes=100000"],
    );
    let k = Attached::of("kdctcp", "t_vk", &["--param", "progressive=1"]);
    for a in [&d, &x, &k] {
        assert!(
            registered(&a.name) && registered(&a.fallback()),
            "{}",
            a.name
        );
    }
    let xl = x.listed();
    assert_eq!(xl["algo"], "xdctcp");
    let p = &xl["params"];
    assert_eq!(
        (p["g"].as_f64(), p["ns"].as_f64(), p["nl"].as_f64()),
        (Some(0.09), Some(0.25), Some(1.0))
    );
    assert_eq!(p["short_bytes"], 100000);
    let kl = k.listed();
    assert_eq!(kl["algo"], "kdctcp");
    assert_eq!(kl["params"]["progressive"], 1);
    assert_eq!(kl["params"]["per_ack_alpha"], 0);
    assert_eq!(kl["params"]["g_ack"].as_f64(), Some(0.0039));
    assert_eq!(d.listed()["params"]["shift_g"], 4);

    let out = loader_ok(&["set", "t_vx", "g=0.05", "nl=0.75"]);
    assert!(
        out.contains("g=0.05 ns=0.25 nl=0.75 short_bytes=100000"),
        "{out}"
    );
    for bad in [
        "g=0",
        "g=1.5",
        "ns=-0.1",
        "nl=2",
        "short_bytes=-5",
        "per_ack_alpha=1",
    ] {
        let o = loader(&["set", "t_vx", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
    }
    // Refused values changed nothing.
    assert_eq!(x.listed()["params"]["nl"].as_f64(), Some(0.75));
    let out = loader_ok(&["set", "t_vk", "per_ack_alpha=1", "fine_alpha=1"]);
    assert!(
        out.contains("per_ack_alpha=1 progressive=1 cwr_growth=0 fine_alpha=1"),
        "{out}"
    );
}

/// The attach modes this kernel has: map always, link from Linux 6.4.
fn attach_modes() -> &'static [&'static str] {
    if has_struct_ops_links() {
        &["link", "map"]
    } else {
        &["map"]
    }
}

/// A step of attach that fails after the kernel holds both registrations is
/// rolled back: nothing registered, nothing pinned. The failure is real: the
/// attach's staging directory (named after its pid, which `exec` keeps) is
/// made beforehand with a map pinned where the instance's `stats` goes, so
/// pinning it fails with EEXIST once both struct_ops are registered.
#[test]
fn attach_failing_after_registration_rolls_everything_back() {
    require_root();
    let modes = attach_modes();
    for &mode in modes {
        let name = format!("t_rb_{mode}");
        clear_stale(&name);
        let script = format!(
            "d=/sys/fs/bpf/dctcp-bpf/+attaching-{name}-$$ && mkdir -p $d && \
             bpftool map create $d/stats type array key 4 value 4 entries 1 name t_rb_block && \
             exec \"$0\" attach --algo dctcp --name {name} --mode {mode}"
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script, env!("CARGO_BIN_EXE_loader")])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{mode}: {err}");
        assert!(
            err.contains("pinning") && err.contains("stats") && err.contains("exists"),
            "{mode}: the error names the failed step: {err}"
        );
        assert!(
            !registered(&name) && !registered(&format!("{name}_reno")),
            "{mode}: a registration outlived the failed attach"
        );
        // The root goes with the last pin in it, which a test on another
        // thread may remove meanwhile: no root, nothing left.
        let left: Vec<String> = match std::fs::read_dir("/sys/fs/bpf/dctcp-bpf") {
            Ok(dir) => dir
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(&name))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("/sys/fs/bpf/dctcp-bpf: {e}"),
        };
        assert!(left.is_empty(), "{mode}: left in bpffs: {left:?}");
        assert!(
            !loader_ok(&["list"]).contains(&name),
            "{mode}: listed after the failed attach"
        );
    }
}

/// What a run that dies between attach and detach leaves (a mutant of
/// detach under `just mutants` does it) goes with `just mutants`' exit,
/// `tools/clear-stale-registrations --pins`: the pins, which detaches a
/// link-mode instance, then the registrations map mode keeps with no pin.
#[test]
fn a_dead_runs_instances_go_with_the_pins_and_registrations_it_left() {
    require_root();
    let modes = attach_modes();
    let names: Vec<String> = modes.iter().map(|m| format!("t_dl_{m}")).collect();
    for (name, mode) in names.iter().zip(modes) {
        // The run dies: no detach.
        std::mem::forget(Attached::new(name, &["--mode", mode]));
        assert!(registered(name) && registered(&format!("{name}_reno")));
    }
    let mut args = vec!["--pins"];
    args.extend(names.iter().map(String::as_str));
    let err = clear_stale_registrations(&args);
    let list = loader_ok(&["list"]);
    for name in &names {
        assert!(
            err.contains(&format!("removed the pins of {name}")),
            "{err}"
        );
        assert!(!Path::new("/sys/fs/bpf/dctcp-bpf").join(name).exists());
        assert!(!list.contains(name.as_str()), "{name} still listed: {list}");
        // A link's last reference is put from a work queue: give it a second.
        let gone = || !registered(name) && !registered(&format!("{name}_reno"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !gone() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            gone(),
            "{name}: still registered after its pins went: {err}"
        );
    }
}
