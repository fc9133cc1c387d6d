//! `loader check`: can this kernel run the algorithms? Asked before anything
//! is registered: BTF, struct_ops, how a registration is held (link or map),
//! bpffs, and each algorithm's programs through the verifier (loaded with
//! default parameters and dropped, never registered). A node's preflight:
//! the DaemonSet's first init container runs it (docs/fleet.md).

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::algo::Algo;
use crate::instance::{self, Verified};
use dctcp_utils::{bpffs, preflight};

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub check: String,
    pub ok: bool,
    pub note: String,
    /// An algorithm's: what the verifier passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<Verified>,
}

fn check(name: &str, ok: bool, note: impl Into<String>) -> Check {
    Check {
        check: name.into(),
        ok,
        note: note.into(),
        verified: None,
    }
}

/// Every check on this kernel, in order.
pub fn run() -> Vec<Check> {
    report(
        preflight::kernel_version().unwrap_or((0, 0)),
        preflight::require_btf(),
        preflight::require_struct_ops(),
        instance::verify,
    )
}

/// The report from what the kernel answered; `verify` loads one algorithm.
/// An algorithm is not loaded where BTF or struct_ops is missing (the
/// verifier would only say so again, less clearly).
fn report(
    (major, minor): (u32, u32),
    btf: Result<()>,
    struct_ops: Result<()>,
    verify: impl Fn(Algo) -> Result<Verified>,
) -> Vec<Check> {
    let can_load = btf.is_ok() && struct_ops.is_ok();
    let first_line = |e: &anyhow::Error| format!("{e:#}").lines().next().unwrap_or("").to_string();
    let mut out = vec![
        check("kernel", true, format!("Linux {major}.{minor}")),
        match &btf {
            Ok(()) => check("BTF", true, "/sys/kernel/btf/vmlinux"),
            Err(e) => check("BTF", false, first_line(e)),
        },
        match &struct_ops {
            Ok(()) => check("struct_ops", true, "BPF_PROG_TYPE_STRUCT_OPS loads"),
            Err(e) => check("struct_ops", false, first_line(e)),
        },
        if (major, minor) >= (6, 4) {
            check(
                "registration",
                true,
                "struct_ops links (Linux 6.4+): --mode link",
            )
        } else {
            check(
                "registration",
                true,
                "no struct_ops links before Linux 6.4, the struct_ops map holds it: --mode map",
            )
        },
        if bpffs::is_bpffs(Path::new(bpffs::BPFFS)) {
            check("bpffs", true, format!("mounted at {}", bpffs::BPFFS))
        } else {
            check(
                "bpffs",
                true,
                format!("not mounted at {}: attach mounts it", bpffs::BPFFS),
            )
        },
    ];
    for &algo in Algo::ALL {
        let name = algo.key();
        out.push(if !can_load {
            check(
                name,
                false,
                "not loaded: BTF and struct_ops are needed first",
            )
        } else if let Some(why) = algo.kernel_refusal((major, minor)) {
            // Not this install's fault: the others run, this one cannot here.
            check(name, true, format!("not on this kernel: {why}"))
        } else {
            match verify(algo) {
                Ok(v) => Check {
                    verified: Some(v),
                    ..check(
                        name,
                        true,
                        format!(
                            "its {} programs pass the verifier ({} instructions processed)",
                            v.programs, v.insns
                        ),
                    )
                },
                Err(e) => check(name, false, first_line(&e)),
            }
        });
    }
    out
}

/// `loader check`: the report (a table, or `--json`); fails (exit status 1)
/// when any check does, naming them.
pub fn command(json: bool) -> Result<()> {
    preflight::require_root("loader check")?;
    let checks = run();
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        for c in &checks {
            println!(
                "{:<13} {:<3} {}",
                c.check,
                if c.ok { "ok" } else { "NO" },
                c.note
            );
        }
    }
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.check.as_str())
        .collect();
    anyhow::ensure!(
        failed.is_empty(),
        "this kernel cannot run every algorithm: {} failed (see above; README \"Kernel \
         requirements\")",
        failed.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oks(checks: &[Check]) -> Vec<(&str, bool)> {
        checks.iter().map(|c| (c.check.as_str(), c.ok)).collect()
    }

    #[test]
    fn without_btf_or_struct_ops_nothing_is_loaded() {
        for (btf, struct_ops) in [(false, true), (true, false)] {
            let given = |ok: bool| {
                if ok {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!("missing\nmore"))
                }
            };
            let checks = report((6, 1), given(btf), given(struct_ops), |a| {
                panic!("{a:?} loaded")
            });
            let got = oks(&checks);
            assert_eq!(got[1..3], [("BTF", btf), ("struct_ops", struct_ops)]);
            assert_eq!(
                got[5..],
                [
                    ("dctcp", false),
                    ("xdctcp", false),
                    ("kdctcp", false),
                    ("prague", false)
                ]
            );
            // A failed check's note is the error's first line.
            assert!(checks
                .iter()
                .filter(|c| !c.ok)
                .all(|c| !c.note.contains('\n')));
        }
    }

    #[test]
    fn each_algorithm_is_its_own_verdict_and_the_mode_follows_the_version() {
        let checks = report((6, 4), Ok(()), Ok(()), |a| match a {
            Algo::Xdctcp => Err(anyhow::anyhow!("verifier says no\nlog")),
            _ => Ok(Verified {
                programs: 14,
                insns: 2000,
            }),
        });
        assert_eq!(
            oks(&checks)[5..],
            [
                ("dctcp", true),
                ("xdctcp", false),
                ("kdctcp", true),
                ("prague", true)
            ]
        );
        // Prague needs 6.10: on 6.4 it is not loaded, and that is no failure.
        assert!(
            checks[8].note.starts_with("not on this kernel: prague needs Linux 6.10"),
            "{}",
            checks[8].note
        );
        assert_eq!(checks[8].verified, None);
        assert_eq!(checks[6].note, "verifier says no");
        assert_eq!(checks[6].verified, None);
        assert_eq!(
            checks[5].note,
            "its 14 programs pass the verifier (2000 instructions processed)"
        );
        assert_eq!(checks[7].verified.map(|v| v.insns), Some(2000));
        assert!(checks[3].note.ends_with("--mode link"));
        assert_eq!(checks[0].note, "Linux 6.4");
        let old = report((6, 3), Ok(()), Ok(()), |_| Ok(Verified::default()));
        assert!(old[3].note.ends_with("--mode map"));
        let new = report((6, 10), Ok(()), Ok(()), |_| Ok(Verified::default()));
        assert!(new[8].note.starts_with("its 0 programs"), "{}", new[8].note);
    }
}
