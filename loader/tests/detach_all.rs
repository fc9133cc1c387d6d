//! `loader detach --all`, the human `list`, and names the kernel already
//! has. A binary of its own: `detach --all` would take the instances of
//! tests running beside it in one binary.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// The tests that list or detach everything, one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn listed_names() -> Vec<String> {
    let list: Value = serde_json::from_str(&loader_ok(&["list", "--json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn detach_all_removes_every_instance_the_human_list_showed() {
    require_root();
    let _serial = serial();
    let a = Attached::new("t_all_a", &["--param", "shift_g=5"]);
    let b = Attached::of("xdctcp", "t_all_b", &[]);
    // The human list names each instance, its algorithm and a parameter
    // as set.
    let human = loader_ok(&["list"]);
    for want in ["t_all_a", "t_all_b", "xdctcp"] {
        assert!(human.contains(want), "`{want}` not in\n{human}");
    }
    assert!(human.contains("shift_g=5"), "{human}");
    let out = loader_ok(&["detach", "--all"]);
    std::mem::forget(a);
    std::mem::forget(b);
    for name in ["t_all_a", "t_all_b"] {
        assert!(!registered(name), "{name} still registered after {out}");
        assert!(!registered(&format!("{name}_reno")), "{name}_reno");
        assert!(
            !Path::new("/sys/fs/bpf/dctcp-bpf").join(name).exists(),
            "{name}'s pins left behind"
        );
    }
    assert!(listed_names().is_empty(), "{:?}", listed_names());
    // Nothing attached: --all has nothing to do and says so, successfully.
    loader_ok(&["detach", "--all"]);
}

#[test]
fn a_name_the_kernel_already_has_is_refused_and_nothing_is_pinned() {
    require_root();
    for name in ["cubic", "reno"] {
        let o = loader(&["attach", "--algo", "dctcp", "--name", name]);
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(e.contains("already has") && e.contains("--name"), "{e}");
        assert!(
            !Path::new("/sys/fs/bpf/dctcp-bpf").join(name).exists(),
            "pins for {name}"
        );
        assert!(!listed_names().contains(&name.to_string()));
    }
}

/// An attach killed midway leaves its staging directory (named after its
/// pid) with whatever it had pinned: `list` does not show it as an
/// instance, and `detach --all` removes it once its process is gone, but
/// not while it lives.
#[test]
fn a_killed_attachs_leftovers_are_hidden_and_removed() {
    require_root();
    let _serial = serial();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    dead.wait().unwrap();
    let root = Path::new("/sys/fs/bpf/dctcp-bpf");
    let abandoned = root.join(format!("+attaching-t_ab-{}", dead.id()));
    let live = root.join(format!("+attaching-t_live-{}", std::process::id()));
    for d in [&abandoned, &live] {
        std::fs::create_dir_all(d).unwrap();
        let o = std::process::Command::new("bpftool")
            .args(["map", "create"])
            .arg(d.join("stats"))
            .args([
                "type", "array", "key", "4", "value", "4", "entries", "1", "name", "t_ab",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(listed_names().is_empty(), "{:?}", listed_names());
    loader_ok(&["detach", "--all"]);
    assert!(
        !abandoned.exists(),
        "a dead attach's staging directory survived"
    );
    assert!(live.exists(), "a live attach's staging directory was taken");
    std::fs::remove_dir_all(&live).unwrap();
}
