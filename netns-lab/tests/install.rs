//! `tools/install` (just install / uninstall) into a staging directory, and
//! `tools/deb` (just deb) installed with dpkg, used and purged, with this
//! build's binaries. Man pages and completions are checked against the
//! binaries' own `--help`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{require_root, serial, skip, stderr, tmpdir, workspace_bin};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// This build's four binaries in one directory, as tools/install wants
/// them. loader is the workspace's, built beside lab by `cargo test
/// --workspace`.
fn bin_dir() -> PathBuf {
    let lab = Path::new(env!("CARGO_BIN_EXE_lab"));
    let loader = workspace_bin("loader");
    let dir = tmpdir("install-bins");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, path) in [
        ("lab", lab),
        ("loader", loader.as_path()),
        ("rpcgen", Path::new(env!("CARGO_BIN_EXE_rpcgen"))),
        ("delayline", Path::new(env!("CARGO_BIN_EXE_delayline"))),
    ] {
        std::os::unix::fs::symlink(path, dir.join(name)).unwrap();
    }
    dir
}

fn tool(script: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(repo().join("tools").join(script));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "{:?}: {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            out.push(e.path());
            if e.file_type().unwrap().is_dir() {
                out.extend(files_under(&e.path()));
            }
        }
    }
    out
}

/// The subcommands `bin --help` lists.
fn subcommands(bin: &Path) -> Vec<String> {
    let help = ok(Command::new(bin).arg("--help").output().unwrap());
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// A man page as text: man-db renders bold as `X\bX` when not on a terminal.
fn man(manpath: &Path, args: &[&str]) -> String {
    let page = ok(Command::new("man")
        .args(args)
        .env("MANPATH", manpath)
        .env("MANWIDTH", "100")
        .output()
        .unwrap());
    let mut text = String::new();
    for c in page.chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    text
}

#[test]
fn install_then_uninstall_leaves_nothing() {
    require_root();
    let _serial = serial();
    let bins = bin_dir();
    let dest = tmpdir("install-dest");
    std::fs::create_dir_all(&dest).unwrap();
    let env = [("DESTDIR", dest.as_path()), ("BIN_DIR", bins.as_path())];
    let out = ok(tool("install", &[], &env));
    assert!(out.contains("installed dctcp-bpf"), "{out}");
    let root = dest.join("usr/local");

    // The binaries run from where they were installed: loader and lab on
    // PATH, lab's helpers beside each other off it.
    for b in [
        "bin/loader",
        "bin/lab",
        "lib/dctcp-bpf/rpcgen",
        "lib/dctcp-bpf/delayline",
    ] {
        let help = ok(Command::new(root.join(b)).arg("--help").output().unwrap());
        assert!(help.contains("Usage:"), "{b}: {help}");
    }
    assert!(!root.join("bin/rpcgen").exists());

    // One man page per command and subcommand of --help, found by name
    // (`man loader attach` is man-db's spelling of loader-attach).
    let manpath = root.join("share/man");
    for b in ["loader", "lab"] {
        let subs = subcommands(&root.join("bin").join(b));
        assert!(subs.len() >= 2, "{b}: {subs:?}");
        for page in std::iter::once(b.to_string()).chain(subs.iter().map(|s| format!("{b}-{s}"))) {
            assert!(
                manpath.join(format!("man1/{page}.1.gz")).exists(),
                "no man page {page}"
            );
        }
    }
    let page = man(&manpath, &["loader", "attach"]);
    assert!(
        page.contains("--from") && page.contains("[[attach]]"),
        "{page}"
    );
    let page = man(&manpath, &["lab-coexist"]);
    assert!(page.contains("--dctcp"), "{page}");

    // Completions: bash completes a subcommand, zsh's file is a compdef.
    let bash = root.join("share/bash-completion/completions/loader");
    let words = ok(Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(loader at); COMP_CWORD=1; _loader loader at loader; echo \"${{COMPREPLY[@]}}\"",
            bash.display()
        ))
        .output()
        .unwrap());
    assert_eq!(words.trim(), "attach", "{words}");
    let zsh = std::fs::read_to_string(root.join("share/zsh/site-functions/_lab")).unwrap();
    assert!(zsh.starts_with("#compdef lab"), "{zsh}");

    // The unit names the installed loader and config.
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/dctcp-bpf.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/loader attach --from /etc/dctcp-bpf/attach.toml"),
        "{unit}"
    );
    assert!(
        unit.contains("ExecStop=/usr/local/bin/loader detach --from /etc/dctcp-bpf/attach.toml")
    );
    // The metrics unit serves where the same config says.
    let metrics_unit =
        std::fs::read_to_string(root.join("lib/systemd/system/dctcp-bpf-metrics.service")).unwrap();
    assert!(
        metrics_unit
            .contains("ExecStart=/usr/local/bin/loader serve --config /etc/dctcp-bpf/attach.toml"),
        "{metrics_unit}"
    );
    // systemd's own check of each unit, pointed at the staged files.
    for (name, text) in [
        ("dctcp-bpf.service", &unit),
        ("dctcp-bpf-metrics.service", &metrics_unit),
    ] {
        let staged = dest.join(name);
        std::fs::write(
            &staged,
            text.replace(
                "/usr/local/bin/",
                &format!("{}/", root.join("bin").display()),
            ),
        )
        .unwrap();
        let verify = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&staged)
            .env("MANPATH", &manpath)
            .output()
            .expect("systemd-analyze (systemd)");
        assert!(
            verify.status.success(),
            "systemd-analyze verify {name}: {}",
            stderr(&verify)
        );
        std::fs::remove_file(&staged).unwrap();
    }
    let config = dest.join("etc/dctcp-bpf/attach.toml");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        include_str!("../../packaging/attach.toml")
    );

    // A second install is refused; uninstall leaves the stage empty.
    let again = tool("install", &[], &env);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already installed"),
        "{}",
        stderr(&again)
    );
    ok(tool("install", &["--uninstall"], &env));
    assert_eq!(files_under(&dest), Vec::<PathBuf>::new());

    // A config the admin changed survives uninstall, and a later install.
    ok(tool("install", &[], &env));
    std::fs::write(&config, "# mine\n").unwrap();
    let o = tool("install", &["--uninstall"], &env);
    ok(o.clone());
    assert!(
        stderr(&o).contains("kept /etc/dctcp-bpf/attach.toml"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        files_under(&dest),
        [dest.join("etc"), dest.join("etc/dctcp-bpf"), config.clone()]
    );
    let out = ok(tool("install", &[], &env));
    assert!(
        out.contains("kept the existing /etc/dctcp-bpf/attach.toml"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "# mine\n");
    ok(tool("install", &["--uninstall"], &env));
    std::fs::remove_dir_all(&dest).unwrap();
    std::fs::remove_dir_all(&bins).unwrap();
}

/// The package: built, installed with dpkg, used, purged. Not run where
/// dctcp-bpf is installed already (it is someone's).
#[test]
fn deb_installs_runs_and_purges_to_nothing() {
    require_root();
    let _serial = serial();
    let installed = Command::new("dpkg")
        .args(["-s", "dctcp-bpf"])
        .output()
        .unwrap();
    if installed.status.success() {
        skip("dctcp-bpf is installed on this machine (someone's): not replacing it");
        return;
    }
    let bins = bin_dir();
    let deb = ok(tool("deb", &[], &[("BIN_DIR", bins.as_path())]));
    let deb = repo().join(deb.trim());
    ok(Command::new("dpkg").arg("-i").arg(&deb).output().unwrap());
    let listed = ok(Command::new("dpkg")
        .args(["-L", "dctcp-bpf"])
        .output()
        .unwrap());
    let files: Vec<&str> = listed.lines().filter(|f| Path::new(f).is_file()).collect();
    for want in [
        "/usr/bin/loader",
        "/usr/bin/lab",
        "/usr/lib/dctcp-bpf/rpcgen",
        "/usr/lib/dctcp-bpf/delayline",
        "/usr/lib/systemd/system/dctcp-bpf.service",
        "/usr/lib/systemd/system/dctcp-bpf-metrics.service",
        "/usr/share/man/man1/loader-serve.1.gz",
        "/usr/share/man/man1/loader-attach.1.gz",
        "/usr/share/bash-completion/completions/loader",
        "/etc/dctcp-bpf/attach.toml",
    ] {
        assert!(
            files.contains(&want),
            "{want} not in the package: {files:?}"
        );
    }
    // Used as installed: attach, list, detach.
    let loader = |args: &[&str]| Command::new("/usr/bin/loader").args(args).output().unwrap();
    let attached = loader(&["attach", "--algo", "dctcp", "--name", "t_deb"]);
    let listed = loader(&["list", "--json"]);
    let detached = loader(&["detach", "t_deb"]);
    ok(attached);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("\"t_deb\""));
    ok(detached);

    ok(Command::new("dpkg")
        .args(["-P", "dctcp-bpf"])
        .output()
        .unwrap());
    for f in &files {
        assert!(!Path::new(f).exists(), "{f} left after purge");
    }
    assert!(!Path::new("/etc/dctcp-bpf").exists());
    assert!(!Command::new("dpkg")
        .args(["-s", "dctcp-bpf"])
        .output()
        .unwrap()
        .status
        .success());
    std::fs::remove_file(&deb).unwrap();
    std::fs::remove_dir_all(&bins).unwrap();
}
