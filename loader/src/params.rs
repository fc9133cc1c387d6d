//! `key=value` parameter lists: parsed and range-checked before anything
//! reaches the kernel.

use anyhow::Result;

use crate::algo::{Algo, NAME_MAX};
use crate::intf::dctcp_params;
use crate::usage_bail;

/// A `key=value` pair as typed, not yet checked against an algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub key: String,
    pub value: u32,
}

impl std::str::FromStr for Assignment {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}` is not of the form name=value (e.g. shift_g=4)"))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("`{s}` has no parameter name before `=`"));
        }
        let value = value
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("`{s}`: value must be a non-negative integer"))?;
        Ok(Assignment {
            key: key.to_string(),
            value,
        })
    }
}

/// Applies `assignments` to `params`, refusing unknown names and values out
/// of range with the valid set in the message.
pub fn apply(algo: Algo, params: &mut dctcp_params, assignments: &[Assignment]) -> Result<()> {
    for a in assignments {
        let Some(spec) = algo.param(&a.key) else {
            let known: Vec<_> = algo.params().iter().map(|p| p.name).collect();
            usage_bail!(
                "unknown parameter `{}` for {}; it has: {}",
                a.key,
                algo.key(),
                known.join(", ")
            );
        };
        if a.value < spec.min || a.value > spec.max {
            usage_bail!(
                "{}={} is out of range: {} takes {}..={} ({})",
                a.key,
                a.value,
                a.key,
                spec.min,
                spec.max,
                spec.help
            );
        }
        (spec.set)(params, a.value);
    }
    Ok(())
}

/// `shift_g=4 alpha_on_init=1024`
pub fn describe(algo: Algo, params: &dctcp_params) -> String {
    algo.params()
        .iter()
        .map(|p| format!("{}={}", p.name, (p.get)(params)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Instance names become kernel congestion-control names and bpffs
/// directories: short, and nothing a path or the kernel would choke on.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > NAME_MAX {
        usage_bail!(
            "name `{name}` must be 1 to {NAME_MAX} characters (the kernel allows 15, and the \
             Reno fallback `<name>_reno` must fit too)"
        );
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        usage_bail!("name `{name}` may contain only letters, digits, `_` and `-`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Assignment {
        s.parse().unwrap()
    }

    #[test]
    fn parses_assignments() {
        assert_eq!(
            parse("shift_g=5"),
            Assignment {
                key: "shift_g".into(),
                value: 5
            }
        );
        assert_eq!(
            parse(" alpha_on_init = 12 "),
            Assignment {
                key: "alpha_on_init".into(),
                value: 12
            }
        );
        assert!("shift_g".parse::<Assignment>().is_err());
        assert!("=4".parse::<Assignment>().is_err());
        assert!("shift_g=-1".parse::<Assignment>().is_err());
        assert!("shift_g=1.5".parse::<Assignment>().is_err());
    }

    #[test]
    fn applies_within_range_and_refuses_outside() {
        let algo = Algo::Dctcp;
        let mut p = algo.default_params();
        apply(
            algo,
            &mut p,
            &[parse("shift_g=10"), parse("alpha_on_init=0")],
        )
        .unwrap();
        assert_eq!((p.shift_g, p.alpha_on_init), (10, 0));

        let err = apply(algo, &mut p, &[parse("shift_g=11")]).unwrap_err();
        assert!(err.to_string().contains("0..=10"), "{err}");
        let err = apply(algo, &mut p, &[parse("alpha_on_init=1025")]).unwrap_err();
        assert!(err.to_string().contains("0..=1024"), "{err}");
        let err = apply(algo, &mut p, &[parse("gain=3")]).unwrap_err();
        assert!(err.to_string().contains("shift_g, alpha_on_init"), "{err}");
        assert!(err.downcast_ref::<crate::error::UsageError>().is_some());
        // A refused list leaves what came before it applied, nothing after.
        assert_eq!((p.shift_g, p.alpha_on_init), (10, 0));
    }

    #[test]
    fn names() {
        check_name("bpf_dctcp").unwrap();
        check_name("a").unwrap();
        check_name("abcdefghij").unwrap();
        assert!(check_name("abcdefghijk").is_err());
        assert!(check_name("").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name("a b").is_err());
    }

    #[test]
    fn describes_defaults() {
        let p = Algo::Dctcp.default_params();
        assert_eq!(describe(Algo::Dctcp, &p), "shift_g=4 alpha_on_init=1024");
    }
}
