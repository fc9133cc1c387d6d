//! `loader detach --all`, the human `list`, and names the kernel already
//! has. A binary of its own: `detach --all` would take the instances of
//! tests running beside it in one binary.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

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
