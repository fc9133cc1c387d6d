//! `key=value` parameter lists: parsed and range-checked before anything
//! reaches the kernel.

use anyhow::Result;

use dctcp_utils::usage_bail;

use crate::algo::{Algo, Kind, ParamSpec, NAME_MAX};
use crate::intf::{dctcp_params, DCTCP_ONE};

/// A `key=value` pair as typed, not yet checked against an algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub key: String,
    pub value: String,
}

impl std::str::FromStr for Assignment {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}` is not of the form name=value (e.g. shift_g=4)"))?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(format!("`{s}` has no parameter name before `=`"));
        }
        if value.is_empty() {
            return Err(format!("`{s}` has no value after `=`"));
        }
        Ok(Assignment {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// A fraction as stored: the nearest multiple of 1/65536.
fn parse_frac(v: &str) -> Option<u64> {
    let x: f64 = v.parse().ok()?;
    // Negative or huge: None, which parse() reports as out of range.
    (x.is_finite() && (0.0..=1e6).contains(&x)).then(|| (x * f64::from(DCTCP_ONE)).round() as u64)
}

/// The shortest decimal that reads back as the same stored fraction.
pub fn format_frac(raw: u64) -> String {
    let x = raw as f64 / f64::from(DCTCP_ONE);
    (0..=6)
        .map(|digits| format!("{x:.digits$}"))
        .find(|s| parse_frac(s) == Some(raw))
        .unwrap_or_else(|| format!("{x}"))
}

impl ParamSpec {
    /// The value as typed, in stored units, or why it is refused.
    pub fn parse(&self, value: &str) -> Result<u64, String> {
        let raw = match self.kind {
            Kind::Int | Kind::Flag => value
                .parse::<u64>()
                .map_err(|_| "must be a non-negative integer".to_string())?,
            Kind::Frac => match value.parse::<f64>() {
                Ok(x) if x.is_finite() => parse_frac(value).unwrap_or(u64::MAX),
                _ => return Err("must be a decimal number such as 0.25".to_string()),
            },
            Kind::Choice(names) => match names.iter().position(|n| *n == value) {
                Some(i) => i as u64,
                None => return Err(format!("must be one of {}", names.join(", "))),
            },
        };
        if raw < self.min || raw > self.max {
            return Err(format!(
                "out of range: {} takes {}",
                self.name,
                self.range()
            ));
        }
        Ok(raw)
    }

    /// The valid values, as a user writes them.
    pub fn range(&self) -> String {
        match self.kind {
            Kind::Int if self.max == u64::MAX => format!("{}.. (integer)", self.min),
            Kind::Int => format!("{}..={}", self.min, self.max),
            Kind::Flag => "0 or 1".to_string(),
            Kind::Frac if self.min == 0 => {
                format!("[0, {}] in steps of 1/65536", format_frac(self.max))
            }
            Kind::Frac => format!("(0, {}] in steps of 1/65536", format_frac(self.max)),
            Kind::Choice(names) => names.join(", "),
        }
    }

    /// The value as a user writes it.
    pub fn display(&self, p: &dctcp_params) -> String {
        let raw = (self.get)(p);
        match self.kind {
            Kind::Frac => format_frac(raw),
            Kind::Choice(names) => names.get(raw as usize).unwrap_or(&"?").to_string(),
            Kind::Int | Kind::Flag => raw.to_string(),
        }
    }

    /// The value for `loader list --json`: fractions as numbers.
    pub fn json(&self, p: &dctcp_params) -> serde_json::Value {
        let raw = (self.get)(p);
        match self.kind {
            Kind::Frac => serde_json::json!(format_frac(raw).parse::<f64>().unwrap_or(0.0)),
            Kind::Choice(_) => self.display(p).into(),
            Kind::Int | Kind::Flag => raw.into(),
        }
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
        match spec.parse(&a.value) {
            Ok(raw) => (spec.set)(params, raw),
            Err(why) => usage_bail!("{}={}: {} ({})", a.key, a.value, why, spec.help),
        }
    }
    Ok(())
}

/// `shift_g=4 alpha_on_init=1024`; fault injection only when it is on, the
/// guard only when it is off.
pub fn describe(algo: Algo, params: &dctcp_params) -> String {
    use crate::algo::{GUARD, INJECT_SSTHRESH};
    algo.params()
        .iter()
        .filter(|p| p.name != INJECT_SSTHRESH.name || (p.get)(params) != 0)
        .filter(|p| p.name != GUARD.name || (p.get)(params) != 1)
        .map(|p| format!("{}={}", p.name, p.display(params)))
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
            parse(" alpha_on_init = 12 "),
            Assignment {
                key: "alpha_on_init".into(),
                value: "12".into()
            }
        );
        assert!("shift_g".parse::<Assignment>().is_err());
        assert!("=4".parse::<Assignment>().is_err());
        assert!("shift_g=".parse::<Assignment>().is_err());
    }

    fn refused(algo: Algo, p: &mut dctcp_params, a: &str) -> String {
        let err = apply(algo, p, &[parse(a)]).unwrap_err();
        assert!(err
            .downcast_ref::<dctcp_utils::error::UsageError>()
            .is_some());
        err.to_string()
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
        assert_eq!((p.g, p.alpha_on_init), (64, 0));
        assert_eq!(describe(algo, &p), "shift_g=10 alpha_on_init=0");

        assert!(refused(algo, &mut p, "shift_g=11").contains("0..=10"));
        assert!(refused(algo, &mut p, "shift_g=-1").contains("non-negative integer"));
        assert!(refused(algo, &mut p, "shift_g=1.5").contains("non-negative integer"));
        assert!(refused(algo, &mut p, "alpha_on_init=1025").contains("0..=1024"));
        assert!(refused(algo, &mut p, "gain=3").contains("shift_g, alpha_on_init"));
        // A refused list leaves what came before it applied, nothing after.
        assert_eq!((p.g, p.alpha_on_init), (64, 0));
    }

    /// Prague's modes go by name, its RTT target within 100 us to 100 ms.
    #[test]
    fn prague_takes_mode_names_and_a_bounded_rtt_target() {
        let algo = Algo::Prague;
        let mut p = algo.default_params();
        assert_eq!(
            describe(algo, &p),
            "g=0.0625 alpha_on_init=0 rtt_target_us=25000 rtt_scaling=1 rtt_transition=4 \
             mode=auto mode_switch_mtus=4 pacing=1 classic_ecn=0 classic_qdelay_us=3000"
        );
        apply(algo, &mut p, &[parse("mode=rate"), parse("rtt_target_us=100")]).unwrap();
        assert_eq!((p.mode, p.rtt_target_us), (1, 100));
        assert_eq!(algo.param("mode").unwrap().json(&p), "rate");
        apply(algo, &mut p, &[parse("mode=window")]).unwrap();
        assert_eq!(p.mode, 0);
        let why = refused(algo, &mut p, "mode=fast");
        assert!(why.contains("must be one of window, rate, auto"), "{why}");
        assert!(refused(algo, &mut p, "mode=1").contains("one of"));
        assert!(refused(algo, &mut p, "rtt_target_us=99").contains("100..=100000"));
        assert!(refused(algo, &mut p, "rtt_target_us=100001").contains("100..=100000"));
        assert!(refused(algo, &mut p, "mode_switch_mtus=0").contains("1..=1000"));
        assert!(refused(algo, &mut p, "shift_g=4").contains("unknown parameter"));
        assert_eq!(p.mode, 0);
    }

    /// `guard=0` turns the guard off in the programs' own terms (it sets
    /// no_guard) and is the only way it shows in a description; a tunable
    /// at 1 still shows.
    #[test]
    fn the_guard_shows_only_when_off() {
        let algo = Algo::Dctcp;
        let mut p = algo.default_params();
        apply(algo, &mut p, &[parse("guard=0"), parse("shift_g=1")]).unwrap();
        assert_eq!(p.no_guard, 1);
        let d = describe(algo, &p);
        assert!(d.contains("guard=0") && d.contains("shift_g=1"), "{d}");
        apply(algo, &mut p, &[parse("guard=1")]).unwrap();
        assert_eq!(p.no_guard, 0);
        assert!(
            !describe(algo, &p).contains("guard"),
            "{}",
            describe(algo, &p)
        );
    }

    #[test]
    fn fractions_are_decimal_and_bounded() {
        let algo = Algo::Xdctcp;
        let mut p = algo.default_params();
        assert_eq!(
            describe(algo, &p),
            "g=0.09 ns=0.3 nl=1 short_bytes=1048576 alpha_on_init=1024"
        );
        apply(
            algo,
            &mut p,
            &[
                parse("g=1"),
                parse("ns=0"),
                parse("nl=0.5"),
                parse("short_bytes=0"),
            ],
        )
        .unwrap();
        assert_eq!((p.g, p.ns, p.nl, p.short_bytes), (65536, 0, 32768, 0));
        // g in (0, 1]; ns and nl in [0, 1]; the threshold a byte count.
        for bad in [
            "g=0",
            "g=1.01",
            "g=-0.5",
            "g=0.000001",
            "ns=1.5",
            "nl=-0.1",
            "ns=x",
        ] {
            let err = refused(algo, &mut p, bad);
            assert!(err.contains(bad), "{err}");
        }
        assert!(refused(algo, &mut p, "g=0").contains("(0, 1]"));
        assert!(refused(algo, &mut p, "nl=2").contains("[0, 1]"));
        assert!(refused(algo, &mut p, "short_bytes=-1").contains("non-negative integer"));
        assert!(refused(algo, &mut p, "short_bytes=1e5").contains("non-negative integer"));
        assert_eq!((p.g, p.ns, p.nl, p.short_bytes), (65536, 0, 32768, 0));
    }

    #[test]
    fn switches_are_bits() {
        let algo = Algo::Kdctcp;
        let mut p = algo.default_params();
        assert_eq!(p.features, 0);
        apply(
            algo,
            &mut p,
            &[parse("progressive=1"), parse("fine_alpha=1")],
        )
        .unwrap();
        assert_eq!(
            p.features,
            crate::intf::DCTCP_F_PROGRESSIVE | crate::intf::DCTCP_F_FINE_ALPHA
        );
        apply(algo, &mut p, &[parse("progressive=0")]).unwrap();
        assert_eq!(p.features, crate::intf::DCTCP_F_FINE_ALPHA);
        assert!(refused(algo, &mut p, "per_ack_alpha=2").contains("0 or 1"));
        assert!(describe(algo, &p).starts_with("g=0.0625 g_ack=0.0039 per_ack_alpha=0"));
    }

    #[test]
    fn fractions_read_back_as_typed() {
        for (typed, raw) in [
            ("0.09", 5898),
            ("0.3", 19661),
            ("0.0625", 4096),
            ("1", 65536),
        ] {
            assert_eq!(parse_frac(typed), Some(raw));
            assert_eq!(format_frac(raw), typed);
        }
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

    #[test]
    fn fractions_must_be_finite_and_ranges_read_as_typed() {
        let g = Algo::Xdctcp.param("g").unwrap();
        for v in ["inf", "NaN", "-inf"] {
            assert!(g.parse(v).unwrap_err().contains("decimal number"), "{v}");
        }
        assert_eq!(
            Algo::Xdctcp.param("short_bytes").unwrap().range(),
            "0.. (integer)"
        );
        assert_eq!(Algo::Dctcp.param("shift_g").unwrap().range(), "0..=10");
        let p = Algo::Xdctcp.default_params();
        assert_eq!(g.json(&p), serde_json::json!(0.09));
        assert_eq!(
            Algo::Xdctcp.param("short_bytes").unwrap().json(&p),
            serde_json::json!(1_048_576)
        );
    }
}
