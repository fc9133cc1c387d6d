//! The fleet deployment (deploy/, docs/fleet.md), offline: no cluster can
//! run here, so the manifests are decoded strictly against the Kubernetes
//! API types (deploy/validate, with Debian's python3-kubernetes), a broken
//! manifest is refused, the scrape config passes Prometheus' own check, and
//! the DaemonSet's attach.toml is one the loader accepts.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn validate(files: &[&Path]) -> Output {
    Command::new(deploy().join("validate"))
        .args(files)
        .output()
        .expect("deploy/validate (python3, python3-kubernetes: setup.sh installs them)")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dctcp-deploy-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn deploy_manifests_decode_strictly_and_broken_ones_are_refused() {
    let out = validate(&[]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    for object in [
        "Namespace/dctcp-bpf",
        "ConfigMap/dctcp-bpf",
        "DaemonSet/dctcp-bpf",
        "Service/dctcp-bpf-metrics",
        "ServiceMonitor/dctcp-bpf",
    ] {
        assert!(said.contains(&format!("{object}\n")), "{object}: {said}");
    }

    let ds = std::fs::read_to_string(deploy().join("daemonset.yaml")).unwrap();
    let dir = scratch("broken");
    for (from, to, says) in [
        (
            "mountPropagation: Bidirectional",
            "mountPropogation: Bidirectional",
            "mountPropogation: no such field in V1VolumeMount",
        ),
        (
            "periodSeconds: 10",
            "periodSeconds: \"10\"",
            "periodSeconds: expected int",
        ),
        (
            "port: metrics}",
            "port: metric}",
            "names port metric, which it lacks",
        ),
        (
            "configMap: {name: dctcp-bpf}",
            "configMap: {name: dctcp}",
            "names ConfigMap dctcp",
        ),
    ] {
        assert!(ds.contains(from), "{from}");
        let file = dir.join("daemonset.yaml");
        std::fs::write(&file, ds.replacen(from, to, 1)).unwrap();
        let out = validate(&[&file]);
        assert_eq!(out.status.code(), Some(1), "{to}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{to}: {}", stderr(&out));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// deploy/crd-check, built with Go (setup.sh fetched its modules) into
/// target/: the ServiceMonitor decoded into the Prometheus Operator's type.
fn crd_check(files: &[&Path]) -> Output {
    let go = which("go").unwrap_or_else(|| PathBuf::from("/usr/local/go/bin/go"));
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/crd-check");
    let built = Command::new(&go)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(deploy().join("crd-check"))
        .output()
        .expect("go (setup.sh checks for it)");
    assert!(built.status.success(), "go build: {}", stderr(&built));
    Command::new(bin).args(files).output().unwrap()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// The ServiceMonitor is the operator's own type, decoded strictly; a
/// misspelt field and a wrong type are refused.
#[test]
fn deploy_servicemonitor_decodes_as_the_operators_type() {
    let file = deploy().join("servicemonitor.yaml");
    let out = crd_check(&[&file]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}{}", stderr(&out));
    assert_eq!(said, "ServiceMonitor/dctcp-bpf\n");
    let text = std::fs::read_to_string(&file).unwrap();
    let dir = scratch("crd");
    for (from, to, says) in [
        (
            "interval: 15s",
            "intervall: 15s",
            "unknown field \"intervall\"",
        ),
        (
            "path: /metrics",
            "path: [/metrics]",
            "cannot unmarshal array",
        ),
        (
            "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor",
            "apiVersion: monitoring.coreos.com/v2\nkind: ServiceMonitor",
            "apiVersion monitoring.coreos.com/v2",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let broken = dir.join("servicemonitor.yaml");
        std::fs::write(&broken, text.replacen(from, to, 1)).unwrap();
        let out = crd_check(&[&broken]);
        assert_eq!(out.status.code(), Some(1), "{to}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{to}: {}", stderr(&out));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn promtool(file: &Path) -> Output {
    Command::new("promtool")
        .args(["check", "config"])
        .arg(file)
        .output()
        .expect("promtool (Debian's prometheus: setup.sh installs it)")
}

#[test]
fn deploy_scrape_config_passes_promtool() {
    let file = deploy().join("prometheus-scrape.yaml");
    let out = promtool(&file);
    let said = |o: &Output| format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(o));
    assert!(out.status.success(), "{}", said(&out));
    // The same check refuses a broken one.
    let text = std::fs::read_to_string(&file).unwrap();
    let dir = scratch("scrape");
    let broken = dir.join("scrape.yaml");
    std::fs::write(&broken, text.replacen("type: A", "type: B", 1)).unwrap();
    let out = promtool(&broken);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.status.success(), "{}", said(&out));
}

#[test]
fn deploy_daemonsets_attach_toml_is_one_the_loader_accepts() {
    require_root();
    let ds = std::fs::read_to_string(deploy().join("daemonset.yaml")).unwrap();
    // The ConfigMap's attach.toml: the block under `attach.toml: |`.
    let toml: String = ds
        .split("attach.toml: |\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    let dir = scratch("config");
    let file = dir.join("attach.toml");
    std::fs::write(&file, &toml).unwrap();
    let parsed = loader::attach_file::read(&file).unwrap_or_else(|e| panic!("{e:#}\n{toml}"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(parsed.requests.len(), 1, "{toml}");
    assert_eq!(
        parsed.metrics,
        Some("0.0.0.0:9842".parse().unwrap()),
        "the DaemonSet's ports and probes say 9842"
    );
}

/// `just image` builds the image with podman, and its entrypoint runs as
/// the DaemonSet runs it (tools/image-check: attach twice, serve, preStop
/// detach, from the image's own root filesystem with the pod's mounts).
/// The image holds the loader, the libraries it links and the mount points,
/// nothing else.
#[test]
fn deploy_image_builds_and_its_entrypoint_attaches_serves_and_detaches() {
    require_root();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_loader")).parent().unwrap();
    let tag = format!("localhost/dctcp-bpf:test-{}", std::process::id());
    let run = |cmd: &mut Command| {
        let out = cmd.current_dir(&root).output().expect("spawning");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{cmd:?}: {said}{}", stderr(&out));
        said
    };
    /// Removes the test's image however the test ends.
    struct Image<'a>(&'a str);
    impl Drop for Image<'_> {
        fn drop(&mut self) {
            let _ = Command::new("podman").args(["rmi", "-f", self.0]).output();
        }
    }
    let built = run(Command::new("tools/image")
        .arg(&tag)
        .env("BIN_DIR", bin_dir));
    let image = Image(&tag);
    // "image: TAG, N bytes (M MiB)"
    let bytes: u64 = built
        .split(", ")
        .nth(1)
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{built}"));
    let files = run(Command::new("sh").arg("-c").arg(format!(
        "c=$(podman create {tag}) && podman export $c | tar -t; podman rm -f $c > /dev/null"
    )));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let checked = Command::new("tools/image-check")
        .arg(&tag)
        .env("PORT", port.to_string())
        .current_dir(&root)
        .output()
        .unwrap();
    drop(image);
    let left = run(Command::new("podman").args(["images", "-q", &tag]));
    assert_eq!(left, "", "{tag} still there");
    eprintln!("{built}");
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        stderr(&checked)
    );

    let unexpected: Vec<&str> = files
        .lines()
        .filter(|f| !f.ends_with('/'))
        .filter(|f| *f != "usr/bin/loader")
        .filter(|f| !(f.starts_with("lib/x86_64-linux-gnu/lib") || f.starts_with("lib64/ld-linux")))
        .collect();
    assert!(unexpected.is_empty(), "not the loader's: {unexpected:?}");
    assert!(files.lines().any(|f| f == "usr/bin/loader"), "{files}");
    // The stripped loader with glibc, libelf and zlib: 8.3 MiB on 2026-11-28.
    assert!(bytes < 32 << 20, "{bytes} bytes");
}
