//! `loader attach --from FILE` and `loader detach --from FILE`: the
//! algorithms a host keeps attached, and optionally its default congestion
//! control, in one TOML file. The systemd unit runs the pair at start and
//! stop. The whole file is checked before anything is loaded; an attach that
//! fails midway detaches what it attached, so a unit that fails to start
//! leaves nothing behind.
//!
//! ```toml
//! [[attach]]
//! algo = "dctcp"            # dctcp, xdctcp, kdctcp or prague
//! name = "bpf_dctcp"        # optional; default bpf_<algo>
//! params = { shift_g = 4 }  # optional; the names and ranges of `loader attach --help`
//! mode = "auto"             # optional; auto, link or map
//!
//! [sysctl]                  # optional
//! default = "bpf_dctcp"     # net.ipv4.tcp_congestion_control of this network namespace
//! allowed = ["bpf_dctcp"]   # added to net.ipv4.tcp_allowed_congestion_control
//!
//! [metrics]                 # optional; read by `loader serve --config FILE`
//! listen = "127.0.0.1:9842" # the Prometheus endpoint's address
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use dctcp_utils::bpffs::InstanceDir;
use dctcp_utils::error::Exit;
use dctcp_utils::{preflight, usage_bail};

use crate::algo::{fallback_name, Algo};
use crate::instance::{self, AttachMode, AttachRequest};
use crate::params::{self, Assignment};

/// Where the unit's config lives (the path its ExecStart names).
pub const DEFAULT_PATH: &str = "/etc/dctcp-bpf/attach.toml";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    attach: Vec<RawEntry>,
    #[serde(default)]
    sysctl: Option<Sysctl>,
    #[serde(default)]
    metrics: Option<RawMetrics>,
}

/// The `[metrics]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    algo: String,
    name: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
    mode: Option<String>,
}

/// The `[sysctl]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sysctl {
    /// net.ipv4.tcp_congestion_control while attached.
    pub default: Option<String>,
    /// Added to net.ipv4.tcp_allowed_congestion_control while attached.
    #[serde(default)]
    pub allowed: Vec<String>,
}

/// A checked file: every request valid, every sysctl name one the file
/// registers or the kernel has.
pub struct AttachFile {
    pub path: PathBuf,
    pub requests: Vec<AttachRequest>,
    pub sysctl: Option<Sysctl>,
    /// `[metrics] listen`: where `loader serve --config` listens.
    pub metrics: Option<std::net::SocketAddr>,
}

impl AttachFile {
    /// The names the file registers, with their Reno fallbacks.
    fn names(&self) -> Vec<String> {
        self.requests
            .iter()
            .flat_map(|r| [r.name.clone(), fallback_name(&r.name)])
            .collect()
    }
}

/// Reads and checks `path`; touches nothing.
pub fn read(path: &Path) -> Result<AttachFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Exit::not_configured(format!(
                "{} does not exist: write one (`man loader-attach`; `just install` puts an \
                 example in {DEFAULT_PATH})",
                path.display()
            )))
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    parse(path, &text, &Kernel::now()?)
}

/// What the kernel has now, for the `[sysctl]` checks.
struct Kernel {
    /// Registered congestion controls.
    available: Vec<String>,
    /// The host's allowed list.
    allowed: Vec<String>,
    /// Whether this runs in the initial network namespace.
    initial_ns: bool,
}

impl Kernel {
    fn now() -> Result<Kernel> {
        Ok(Kernel {
            available: preflight::registered_congestion_controls(),
            allowed: sysctl::allowed()?,
            initial_ns: sysctl::allowed_is_writable()?,
        })
    }
}

/// Checks a file's text against what the kernel has now.
fn parse(path: &Path, text: &str, kernel: &Kernel) -> Result<AttachFile> {
    let at = path.display();
    let raw: RawFile = match toml::from_str(text) {
        Ok(r) => r,
        Err(e) => usage_bail!("{at}: {}", e.to_string().trim_end()),
    };
    if raw.attach.is_empty() {
        usage_bail!("{at}: no [[attach]] table: nothing to attach");
    }
    let mut requests: Vec<AttachRequest> = Vec::new();
    for (i, e) in raw.attach.into_iter().enumerate() {
        let which = format!("{at}: [[attach]] #{}", i + 1);
        let Ok(algo) = Algo::from_str(&e.algo, false) else {
            usage_bail!(
                "{which}: algo `{}` is not one of dctcp, xdctcp, kdctcp, prague",
                e.algo
            );
        };
        let mode = match e.mode.as_deref() {
            None => AttachMode::Auto,
            Some(m) => match AttachMode::from_str(m, false) {
                Ok(mode) => mode,
                Err(_) => usage_bail!("{which}: mode `{m}` is not one of auto, link, map"),
            },
        };
        let name = e.name.unwrap_or_else(|| algo.default_name().to_string());
        params::check_name(&name).with_context(|| which.clone())?;
        let params: Vec<Assignment> = e
            .params
            .into_iter()
            .map(|(key, v)| {
                let value = match v {
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::Float(x) => x.to_string(),
                    toml::Value::Boolean(b) => u8::from(b).to_string(),
                    toml::Value::String(s) => s,
                    other => usage_bail!("{which}: {key} is {}, not a number", other.type_str()),
                };
                Ok(Assignment { key, value })
            })
            .collect::<Result<_>>()?;
        params::apply(algo, &mut algo.default_params(), &params).with_context(|| which.clone())?;
        if let Some(twin) = requests.iter().find(|r| {
            r.name == name || fallback_name(&r.name) == name || r.name == fallback_name(&name)
        }) {
            usage_bail!(
                "{which}: `{name}` clashes with `{}` registered above",
                twin.name
            );
        }
        requests.push(AttachRequest {
            algo,
            name,
            params,
            mode,
            ect1_devs: None,
        });
    }
    let metrics = match raw.metrics {
        None => None,
        Some(m) => match m.listen.parse() {
            Ok(addr) => Some(addr),
            Err(_) => usage_bail!(
                "{at}: [metrics] listen = \"{}\" is not an address and port, e.g. \"127.0.0.1:9842\" \
                 or \"[::1]:9842\"",
                m.listen
            ),
        },
    };
    let file = AttachFile {
        path: path.to_path_buf(),
        requests,
        sysctl: raw.sysctl,
        metrics,
    };
    if let Some(s) = &file.sysctl {
        let ours = file.names();
        for n in s.default.iter().chain(&s.allowed) {
            if !ours.contains(n) && !kernel.available.contains(n) {
                usage_bail!(
                    "{at}: [sysctl] names `{n}`, which neither this file registers ({}) nor the \
                     kernel has ({})",
                    ours.join(", "),
                    kernel.available.join(", ")
                );
            }
        }
        // Outside the initial namespace the allowed list cannot be written,
        // and the kernel takes as default only what it allows. Checked here
        // because the kernel's refusal of a default (EPERM) keeps a reference
        // to the algorithm it refused: a BPF one then stays loaded until
        // reboot (tcp_set_default_congestion_control, seen on 6.18).
        if !kernel.initial_ns {
            if !s.allowed.is_empty() {
                usage_bail!(
                    "{at}: [sysctl] allowed: the host's allowed list can be changed only from \
                     the initial network namespace; this is another"
                );
            }
            if let Some(d) = s.default.as_ref().filter(|d| !kernel.allowed.contains(d)) {
                usage_bail!(
                    "{at}: [sysctl] default = \"{d}\": outside the initial network namespace \
                     the kernel takes as default only what the host allows ({}); add it to \
                     `allowed` and run this in the initial namespace",
                    kernel.allowed.join(", ")
                );
            }
        }
    }
    Ok(file)
}

/// What happened to one algorithm of the file.
pub enum Outcome {
    Attached(String),
    AlreadyAttached(String),
    Detached(String),
    NotAttached(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Attached(s) => write!(f, "attached {s}"),
            Outcome::AlreadyAttached(n) => write!(f, "{n} is already attached; left as it is"),
            Outcome::Detached(n) => write!(f, "detached {n}"),
            Outcome::NotAttached(n) => write!(f, "{n} was not attached"),
        }
    }
}

/// Attaches every algorithm of the file that is not attached yet, then
/// applies `[sysctl]`. An algorithm already attached under its name (a
/// second start) is left as it is if it runs the same algorithm. On error,
/// what this call attached is detached again.
pub fn attach(file: &AttachFile) -> Result<Vec<Outcome>> {
    preflight::require_root("loader attach --from")?;
    let mut outcomes = Vec::new();
    let mut ours = Vec::new();
    let result = (|| -> Result<()> {
        for req in &file.requests {
            let dir = InstanceDir::new(&req.name);
            if dir.exists() {
                let inst = instance::describe(&dir)?;
                anyhow::ensure!(
                    inst.algo == req.algo.key(),
                    "`{}` is attached running {}, not {} as {} says; `loader detach {}` first",
                    req.name,
                    inst.algo,
                    req.algo.key(),
                    file.path.display(),
                    req.name
                );
                outcomes.push(Outcome::AlreadyAttached(req.name.clone()));
                continue;
            }
            let dir = instance::attach(req)?;
            ours.push(req.name.clone());
            let inst = instance::describe(&dir)?;
            outcomes.push(Outcome::Attached(format!(
                "{} ({}, fallback {}) with {}",
                inst.name,
                inst.algo,
                inst.fallback,
                params::describe(req.algo, &inst.params_raw)
            )));
        }
        if let Some(s) = &file.sysctl {
            sysctl::apply(s)?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        for name in ours.iter().rev() {
            if let Err(undo) = instance::detach(name) {
                tracing::warn!("undoing the attach of {name}: {undo:#}");
            }
        }
        return Err(e);
    }
    Ok(outcomes)
}

/// Puts the sysctls back, then detaches every algorithm of the file that is
/// attached. Sockets using them keep running them until they close.
pub fn detach(file: &AttachFile) -> Result<Vec<Outcome>> {
    preflight::require_root("loader detach --from")?;
    sysctl::restore(&file.names())?;
    let mut outcomes = Vec::new();
    for req in &file.requests {
        if InstanceDir::new(&req.name).exists() {
            instance::detach(&req.name)?;
            outcomes.push(Outcome::Detached(req.name.clone()));
        } else {
            outcomes.push(Outcome::NotAttached(req.name.clone()));
        }
    }
    Ok(outcomes)
}

/// Where the sysctl values a start found are kept.
pub const STATE_DIR: &str = "/run/dctcp-bpf";

/// The file that keeps them for the network namespace `netns` (a
/// /proc/<pid>/ns/net or a bind mount of one): named by its inode.
pub fn sysctl_state_file(netns: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(netns)
        .with_context(|| format!("reading {}", netns.display()))?
        .ino();
    Ok(Path::new(STATE_DIR).join(format!("sysctl-netns{ino}.json")))
}

/// The two sysctls, and what they were before the first `attach --from`
/// changed them, kept per network namespace under /run (gone at reboot, as
/// the pins are).
mod sysctl {
    use std::collections::BTreeSet;

    use super::*;

    const DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
    const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

    #[derive(Serialize, Deserialize)]
    struct Before {
        default: String,
        allowed: Vec<String>,
    }

    fn read(path: &str) -> Result<String> {
        Ok(std::fs::read_to_string(path)
            .with_context(|| format!("reading {path}"))?
            .trim()
            .to_string())
    }

    fn write(path: &str, value: &str) -> Result<()> {
        std::fs::write(path, value).with_context(|| format!("writing `{value}` to {path}"))
    }

    /// Only in the initial network namespace: the kernel makes the host's
    /// own sysctls read-only in every other (ipv4_sysctl_init_net).
    pub(super) fn allowed_is_writable() -> Result<bool> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(ALLOWED).with_context(|| format!("reading {ALLOWED}"))?;
        Ok(meta.permissions().mode() & 0o222 != 0)
    }

    pub(super) fn allowed() -> Result<Vec<String>> {
        Ok(read(ALLOWED)?
            .split_whitespace()
            .map(String::from)
            .collect())
    }

    fn state_file() -> Result<PathBuf> {
        super::sysctl_state_file(Path::new("/proc/self/ns/net"))
    }

    pub(super) fn apply(s: &Sysctl) -> Result<()> {
        let state = state_file()?;
        let before = Before {
            default: read(DEFAULT)?,
            allowed: allowed()?,
        };
        let mut allowed = before.allowed.clone();
        for n in &s.allowed {
            if !allowed.contains(n) {
                allowed.push(n.clone());
            }
        }
        // The first start records the values an admin had; a second start
        // must not record its own.
        let first = !state.exists();
        if first {
            std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
            std::fs::write(&state, serde_json::to_string(&before)?)
                .with_context(|| format!("writing {}", state.display()))?;
        }
        let result = (|| {
            if allowed != before.allowed {
                write_allowed(&allowed)?;
            }
            if let Some(d) = &s.default {
                write(DEFAULT, d)?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = write_allowed(&before.allowed);
            if first {
                let _ = std::fs::remove_file(&state);
                let _ = std::fs::remove_dir(STATE_DIR);
            }
        }
        result
    }

    /// Only in the initial network namespace: `parse` refuses an `allowed`
    /// elsewhere, and `restore` leaves the list alone there.
    fn write_allowed(names: &[String]) -> Result<()> {
        write(ALLOWED, &names.join(" "))
    }

    /// Before the algorithms go: a default naming one of them would keep
    /// it in use by every new socket after its name is unregistered.
    pub(super) fn restore(ours: &[String]) -> Result<()> {
        let state = state_file()?;
        let before: Option<Before> = match std::fs::read_to_string(&state) {
            Ok(t) => Some(
                serde_json::from_str(&t).with_context(|| format!("reading {}", state.display()))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", state.display())),
        };
        let initial = allowed_is_writable()?;
        let host_allows = allowed()?;
        // The default goes back to what was recorded, or off ours where
        // nothing was (cubic, else reno). Outside the initial namespace the
        // kernel takes only what the host allows and keeps a reference to
        // what it refuses (docs/kernels.md): nothing else is offered there.
        let default = read(DEFAULT)?;
        let back = before
            .as_ref()
            .map(|b| b.default.clone())
            .filter(|d| !ours.contains(d) && (initial || host_allows.contains(d)));
        if ours.contains(&default) || back.as_ref().is_some_and(|b| *b != default) {
            write(DEFAULT, back.as_deref().unwrap_or("cubic"))
                .or_else(|_| write(DEFAULT, "reno"))
                .context("putting back the default congestion control")?;
        }
        // Our names leave the allowed list as they unregister; what else the
        // file's `allowed` added goes back to what was recorded. Outside the
        // initial namespace `apply` never wrote the list, nor could this.
        let others = |names: &[String]| -> BTreeSet<String> {
            names
                .iter()
                .filter(|n| !ours.contains(n))
                .cloned()
                .collect()
        };
        if let Some(b) = before.as_ref().filter(|_| initial) {
            let back = others(&b.allowed);
            if back != others(&host_allows) {
                write_allowed(&back.into_iter().collect::<Vec<_>>())?;
            }
        }
        if before.is_some() {
            std::fs::remove_file(&state)
                .with_context(|| format!("removing {}", state.display()))?;
            let _ = std::fs::remove_dir(STATE_DIR);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(initial_ns: bool) -> Kernel {
        Kernel {
            available: vec!["reno".into(), "cubic".into()],
            allowed: vec!["reno".into(), "cubic".into()],
            initial_ns,
        }
    }

    fn check(text: &str) -> Result<AttachFile> {
        parse(Path::new("t.toml"), text, &kernel(true))
    }

    fn refused(text: &str) -> String {
        let e = check(text).err().expect("accepted");
        assert!(
            e.downcast_ref::<dctcp_utils::error::UsageError>().is_some(),
            "{e:#}"
        );
        format!("{e:#}")
    }

    #[test]
    fn a_full_file_becomes_requests() {
        let f = check(
            "[[attach]]\nalgo = \"dctcp\"\nparams = { shift_g = 5 }\n\
             [[attach]]\nalgo = \"xdctcp\"\nname = \"xd\"\nmode = \"map\"\nparams = { ns = 0.25, nl = 1 }\n\
             [sysctl]\ndefault = \"bpf_dctcp\"\nallowed = [\"xd\", \"cubic\"]\n",
        )
        .unwrap();
        assert_eq!(f.requests.len(), 2);
        assert_eq!(f.requests[0].name, "bpf_dctcp");
        assert_eq!(f.requests[0].mode, AttachMode::Auto);
        assert_eq!(
            f.requests[0].params,
            vec![Assignment {
                key: "shift_g".into(),
                value: "5".into()
            }]
        );
        assert_eq!(f.requests[1].algo, Algo::Xdctcp);
        assert_eq!(f.requests[1].mode, AttachMode::Map);
        assert_eq!(f.names(), ["bpf_dctcp", "bpf_dctcp_reno", "xd", "xd_reno"]);
        assert_eq!(f.sysctl.unwrap().default.as_deref(), Some("bpf_dctcp"));
    }

    #[test]
    fn bad_files_are_refused_with_the_place() {
        for (file, says) in [
            ("", "nothing to attach"),
            ("[[attach]]\nalgo = \"vegas\"\n", "#1: algo `vegas`"),
            ("[[attach]]\nalgo = \"dctcp\"\nshift_g = 4\n", "unknown field"),
            ("[[attach]]\nalgo = \"dctcp\"\nparams = { shift_g = 11 }\n", "shift_g=11"),
            ("[[attach]]\nalgo = \"dctcp\"\nparams = { g = 0.1 }\n", "unknown parameter `g`"),
            ("[[attach]]\nalgo = \"dctcp\"\nparams = { shift_g = [4] }\n", "not a number"),
            ("[[attach]]\nalgo = \"dctcp\"\nname = \"a/b\"\n", "may contain"),
            ("[[attach]]\nalgo = \"dctcp\"\nmode = \"fast\"\n", "mode `fast`"),
            (
                "[[attach]]\nalgo = \"dctcp\"\n[[attach]]\nalgo = \"dctcp\"\n",
                "#2: `bpf_dctcp` clashes",
            ),
            (
                "[[attach]]\nalgo = \"dctcp\"\nname = \"a_reno\"\n[[attach]]\nalgo = \"dctcp\"\nname = \"a\"\n",
                "clashes",
            ),
            ("[[attach]]\nalgo = \"dctcp\"\n[sysctl]\ndefault = \"bbr\"\n", "`bbr`"),
            ("[[attach]]\nalgo = \"dctcp\"\n[sysctl]\nallowed = [\"vegas\"]\n", "`vegas`"),
            // toml's own errors carry the line.
            ("[[attach]]\nalgo = dctcp\n", "line 2"),
        ] {
            let err = refused(file);
            assert!(err.contains(says), "{file:?}: {err}");
        }
    }

    #[test]
    fn sysctl_may_name_what_the_kernel_has() {
        let f = check("[[attach]]\nalgo = \"dctcp\"\n[sysctl]\ndefault = \"cubic\"\nallowed = [\"bpf_dctcp_reno\"]\n");
        assert!(f.is_ok());
    }

    #[test]
    fn outside_the_initial_namespace_only_an_allowed_default() {
        let elsewhere = |t: &str| parse(Path::new("t.toml"), t, &kernel(false));
        let f = "[[attach]]\nalgo = \"dctcp\"\n[sysctl]\n";
        assert!(elsewhere(&format!("{f}default = \"cubic\"\n")).is_ok());
        let e = elsewhere(&format!("{f}default = \"bpf_dctcp\"\n"))
            .err()
            .unwrap();
        assert!(
            format!("{e}").contains("only what the host allows (reno, cubic)"),
            "{e}"
        );
        let e = elsewhere(&format!("{f}allowed = [\"cubic\"]\n"))
            .err()
            .unwrap();
        assert!(format!("{e}").contains("initial network namespace"), "{e}");
        assert!(check(&format!(
            "{f}default = \"bpf_dctcp\"\nallowed = [\"bpf_dctcp\"]\n"
        ))
        .is_ok());
    }

    #[test]
    fn the_shipped_example_attaches_bpf_dctcp() {
        let f = check(include_str!("../../packaging/attach.toml")).unwrap();
        assert_eq!(f.requests.len(), 1);
        assert_eq!(f.requests[0].name, "bpf_dctcp");
        assert!(f.sysctl.is_none());
        // Its commented [sysctl] works once uncommented.
        let on = include_str!("../../packaging/attach.toml").replace("# [sysctl]", "[sysctl]");
        let on = on
            .replace("# default", "default")
            .replace("# allowed", "allowed");
        assert_eq!(check(&on).unwrap().sysctl.unwrap().allowed, ["bpf_dctcp"]);
    }

    #[test]
    fn a_missing_file_is_not_configured() {
        // One that cannot be read (a directory) is a plain failure.
        let e = read(Path::new("/")).err().unwrap();
        assert!(e.downcast_ref::<Exit>().is_none(), "{e:#}");
        assert!(format!("{e:#}").contains("reading /"), "{e:#}");
        let e = read(Path::new("/nonexistent/attach.toml")).err().unwrap();
        assert_eq!(e.downcast_ref::<Exit>().map(|x| x.status), Some(6), "{e:#}");
    }
}
