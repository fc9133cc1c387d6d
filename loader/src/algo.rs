//! The algorithms this build carries: their names, tunables and valid ranges.

use clap::ValueEnum;

use crate::intf::{
    dctcp_params, DCTCP_DEFAULT_G, DCTCP_F_CWR_GROWTH, DCTCP_F_FINE_ALPHA, DCTCP_F_PER_ACK_ALPHA,
    DCTCP_F_PROGRESSIVE, DCTCP_MAX_ALPHA, DCTCP_MAX_SHIFT_G, DCTCP_NAME_MAX, DCTCP_ONE,
    KDCTCP_DEFAULT_G_ACK, PRAGUE_DEFAULT_CLASSIC_QDELAY_US, PRAGUE_DEFAULT_G, PRAGUE_DEFAULT_MODE_SWITCH_MTUS,
    PRAGUE_MAX_CLASSIC_QDELAY_US,
    PRAGUE_DEFAULT_RTT_TARGET_US, PRAGUE_DEFAULT_RTT_TRANSITION, PRAGUE_MAX_RTT_TARGET_US,
    PRAGUE_MIN_RTT_TARGET_US, XDCTCP_DEFAULT_G, XDCTCP_DEFAULT_NL, XDCTCP_DEFAULT_NS,
    XDCTCP_DEFAULT_SHORT_BYTES,
};

/// Suffix of the Reno fallback registered beside each algorithm.
pub const FALLBACK_SUFFIX: &str = "_reno";

/// Longest instance name: the kernel allows 15 characters
/// (TCP_CA_NAME_MAX - 1) and the fallback needs room for its suffix.
pub const NAME_MAX: usize = DCTCP_NAME_MAX as usize - 1 - FALLBACK_SUFFIX.len();

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Algo {
    /// DCTCP as in net/ipv4/tcp_dctcp.c (Alizadeh et al. 2010, RFC 8257).
    Dctcp,
    /// xDCTCP (seed 003): short flows cut cwnd by ns alpha, long ones by nl alpha.
    Xdctcp,
    /// DCTCP with seed 002's modifications (Kuehlewind et al.), each a switch.
    Kdctcp,
    /// TCP Prague (L4S, RFC 9331): fractional window, RTT independence,
    /// pacing, ECT(1) through its tcx program (Linux 6.10+).
    Prague,
}

/// How a tunable is written and stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A non-negative integer, stored as is.
    Int,
    /// A decimal fraction, stored in 1/DCTCP_ONE (1/65536).
    Frac,
    /// 0 or 1.
    Flag,
    /// One of these names, stored as its index.
    Choice(&'static [&'static str]),
}

/// One tunable: where it lives in the parameter block and what it may hold.
/// `min` and `max` are in stored units (for `Frac`, 1/65536).
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub min: u64,
    pub max: u64,
    pub help: &'static str,
    pub get: fn(&dctcp_params) -> u64,
    pub set: fn(&mut dctcp_params, u64),
}

const ALPHA_ON_INIT: ParamSpec = ParamSpec {
    name: "alpha_on_init",
    kind: Kind::Int,
    min: 0,
    max: DCTCP_MAX_ALPHA as u64,
    help: "alpha of a new flow in 1/1024 (default 1024 = 1.0: cautious first reduction)",
    get: |p| p.alpha_on_init.into(),
    set: |p, v| p.alpha_on_init = v as u32,
};

/// A fraction in [min, 1] (in 1/65536) stored in a u32 field.
macro_rules! fraction {
    ($name:literal, $field:ident, $min:expr, $help:literal) => {
        ParamSpec {
            name: $name,
            kind: Kind::Frac,
            min: $min,
            max: DCTCP_ONE as u64,
            help: $help,
            get: |p| p.$field.into(),
            set: |p, v| p.$field = v as u32,
        }
    };
}

/// g as a fraction in (0, 1] (xDCTCP and kdctcp: not only powers of two).
const G: ParamSpec = fraction!(
    "g",
    g,
    1,
    "EWMA gain of alpha per window, alpha = (1 - g) alpha + g F"
);

/// Fault injection, in every algorithm: shows the guard repairing the value
/// the 6.18 issue stores (README, Known issue) on any kernel.
pub const INJECT_SSTHRESH: ParamSpec = ParamSpec {
    name: "inject_ssthresh",
    kind: Kind::Int,
    min: 0,
    max: u32::MAX as u64,
    help: "fault injection: each flow's first N reductions return an impossible ssthresh \
           (0x81104110) for the guard to repair (default 0: off)",
    get: |p| p.inject_ssthresh.into(),
    set: |p, v| p.inject_ssthresh = v as u32,
};

/// The guard against the 6.18 issue's impossible windows, in every
/// algorithm; stored inverted (no_guard) so a zeroed struct has it on.
pub const GUARD: ParamSpec = ParamSpec {
    name: "guard",
    kind: Kind::Flag,
    min: 0,
    max: 1,
    help:
        "1 (default): repair impossible ssthresh and cwnd values and hold bursts (docs/kernels.md, \
           Known issue); 0: off, for kernels that never need it (it runs on every ACK and \
           before every transmission)",
    get: |p| u64::from(p.no_guard == 0),
    set: |p, v| p.no_guard = u32::from(v == 0),
};

const DCTCP_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "shift_g",
        kind: Kind::Int,
        min: 0,
        max: DCTCP_MAX_SHIFT_G as u64,
        help: "EWMA gain of alpha, g = 1/2^shift_g (kernel default 4, g = 1/16)",
        // g is stored as a fraction; dctcp only ever writes powers of two.
        get: |p| u64::from(DCTCP_ONE.trailing_zeros() - p.g.max(1).trailing_zeros()),
        set: |p, v| p.g = DCTCP_ONE >> v,
    },
    ALPHA_ON_INIT,
    INJECT_SSTHRESH,
    GUARD,
];

const XDCTCP_PARAMS: &[ParamSpec] = &[
    G,
    fraction!(
        "ns",
        ns,
        0,
        "short flows cut cwnd to cwnd (1 - ns alpha) (seed 003 best: 0.3)"
    ),
    fraction!(
        "nl",
        nl,
        0,
        "long flows cut cwnd to cwnd (1 - nl alpha) (seed 003 best: 1.0)"
    ),
    ParamSpec {
        name: "short_bytes",
        kind: Kind::Int,
        min: 0,
        max: u64::MAX,
        help: "a flow is short until it has sent this many bytes (default 1048576)",
        get: |p| p.short_bytes,
        set: |p, v| p.short_bytes = v,
    },
    ALPHA_ON_INIT,
    INJECT_SSTHRESH,
    GUARD,
];

macro_rules! feature {
    ($name:literal, $bit:expr, $help:literal) => {
        ParamSpec {
            name: $name,
            kind: Kind::Flag,
            min: 0,
            max: 1,
            help: $help,
            get: |p| u64::from(p.features & $bit != 0),
            set: |p, v| {
                if v != 0 {
                    p.features |= $bit
                } else {
                    p.features &= !$bit
                }
            },
        }
    };
}

const KDCTCP_PARAMS: &[ParamSpec] = &[
    G,
    fraction!(
        "g_ack",
        g_ack,
        1,
        "gain of alpha per ACK when per_ack_alpha=1 (seed 002: 1/256)"
    ),
    feature!(
        "per_ack_alpha",
        DCTCP_F_PER_ACK_ALPHA,
        "1: update alpha on every ACK with gain g_ack instead of once per window"
    ),
    feature!(
        "progressive",
        DCTCP_F_PROGRESSIVE,
        "1: on each ECE during CWR, recompute the cut from the cwnd CWR began with"
    ),
    feature!(
        "cwr_growth",
        DCTCP_F_CWR_GROWTH,
        "1: keep growing the window during CWR (and keep the growth count if nothing was cut)"
    ),
    feature!(
        "fine_alpha",
        DCTCP_F_FINE_ALPHA,
        "1: alpha resolution 1/2^20 instead of 1/2^10"
    ),
    ALPHA_ON_INIT,
    INJECT_SSTHRESH,
    GUARD,
];

/// Prague's `mode`, in enum prague_mode's order.
pub const PRAGUE_MODES: &[&str] = &["window", "rate", "auto"];

macro_rules! int {
    ($name:literal, $field:ident, $min:expr, $max:expr, $help:literal) => {
        ParamSpec {
            name: $name,
            kind: Kind::Int,
            min: $min as u64,
            max: $max as u64,
            help: $help,
            get: |p| p.$field.into(),
            set: |p, v| p.$field = v as u32,
        }
    };
}

macro_rules! flag {
    ($name:literal, $field:ident, $help:literal) => {
        ParamSpec {
            name: $name,
            kind: Kind::Flag,
            min: 0,
            max: 1,
            help: $help,
            get: |p| p.$field.into(),
            set: |p, v| p.$field = v as u32,
        }
    };
}

const PRAGUE_PARAMS: &[ParamSpec] = &[
    fraction!(
        "g",
        g,
        1,
        "EWMA gain of alpha per round (reference 1/16: 0.0625)"
    ),
    int!(
        "alpha_on_init",
        alpha_on_init,
        0,
        DCTCP_MAX_ALPHA,
        "alpha of a new flow in 1/1024; 0 (default, the reference's alpha_mode 0): alpha \
         starts at 0 and the first mark halves the window"
    ),
    int!(
        "rtt_target_us",
        rtt_target_us,
        PRAGUE_MIN_RTT_TARGET_US,
        PRAGUE_MAX_RTT_TARGET_US,
        "RTT independence: below this RTT a flow grows as if its RTT were this (default 25000)"
    ),
    flag!(
        "rtt_scaling",
        rtt_scaling,
        "1 (default): RTT independence on once rtt_transition rounds past slow start"
    ),
    int!(
        "rtt_transition",
        rtt_transition,
        0,
        1000,
        "rounds after slow start before RTT independence and the rate mode (default 4)"
    ),
    ParamSpec {
        name: "mode",
        kind: Kind::Choice(PRAGUE_MODES),
        min: 0,
        max: 2,
        help: "what limits sending: window (the fractional window, at least 2 segments), \
               rate (the pacing rate, below 2 segments per RTT if need be) or auto (default: \
               rate at or below mode_switch_mtus of window, window above)",
        get: |p| p.mode.into(),
        set: |p, v| p.mode = v as u32,
    },
    int!(
        "mode_switch_mtus",
        mode_switch_mtus,
        1,
        1000,
        "mode=auto: the window, in 1500-byte MTUs, at or below which the rate mode leads (default 4)"
    ),
    flag!(
        "pacing",
        pacing,
        "1 (default): pace at the window's rate (the rate mode's, below it); 0: no pacing"
    ),
    flag!(
        "classic_ecn",
        classic_ecn,
        "1: detect a classic (RFC 3168) ECN AQM by the queue delay its marks come at, and \
         respond to marks there as Reno (halve once a round, grow a segment a round); 0 \
         (default, the reference's): Prague's response everywhere"
    ),
    int!(
        "classic_qdelay_us",
        classic_qdelay_us,
        0,
        PRAGUE_MAX_CLASSIC_QDELAY_US,
        "classic_ecn: a marked round whose srtt exceeds the path's min RTT by this much counts \
         for a classic AQM (default 3000: above an L4S step's 1 ms, below CoDel's 5 ms)"
    ),
    INJECT_SSTHRESH,
    GUARD,
];

impl Algo {
    pub const ALL: &'static [Algo] = &[Algo::Dctcp, Algo::Xdctcp, Algo::Kdctcp, Algo::Prague];

    /// What `--algo` calls it.
    pub fn key(self) -> &'static str {
        match self {
            Algo::Dctcp => "dctcp",
            Algo::Xdctcp => "xdctcp",
            Algo::Kdctcp => "kdctcp",
            Algo::Prague => "prague",
        }
    }

    /// Name registered with the kernel unless `--name` says otherwise.
    pub fn default_name(self) -> &'static str {
        match self {
            Algo::Dctcp => "bpf_dctcp",
            Algo::Xdctcp => "bpf_xdctcp",
            Algo::Kdctcp => "bpf_kdctcp",
            Algo::Prague => "bpf_prague",
        }
    }

    /// Name of the struct_ops map in the BPF object (DCTCP_ALGO in its
    /// .bpf.c): how a pinned link tells which algorithm it carries.
    pub fn struct_ops_map(self) -> &'static str {
        self.key()
    }

    pub fn from_struct_ops_map(map: &str) -> Option<Algo> {
        Algo::ALL
            .iter()
            .copied()
            .find(|a| a.struct_ops_map() == map)
    }

    pub fn params(self) -> &'static [ParamSpec] {
        match self {
            Algo::Dctcp => DCTCP_PARAMS,
            Algo::Xdctcp => XDCTCP_PARAMS,
            Algo::Kdctcp => KDCTCP_PARAMS,
            Algo::Prague => PRAGUE_PARAMS,
        }
    }

    /// The same values as DCTCP_PARAMS in each .bpf.c (both from intf.h).
    pub fn default_params(self) -> dctcp_params {
        let dctcp = dctcp_params {
            g: DCTCP_DEFAULT_G,
            alpha_on_init: DCTCP_MAX_ALPHA,
            ..Default::default()
        };
        match self {
            Algo::Dctcp => dctcp,
            Algo::Xdctcp => dctcp_params {
                g: XDCTCP_DEFAULT_G,
                ns: XDCTCP_DEFAULT_NS,
                nl: XDCTCP_DEFAULT_NL,
                short_bytes: XDCTCP_DEFAULT_SHORT_BYTES.into(),
                ..dctcp
            },
            Algo::Kdctcp => dctcp_params {
                g_ack: KDCTCP_DEFAULT_G_ACK,
                ..dctcp
            },
            Algo::Prague => dctcp_params {
                // alpha_on_init stays 0 (Default's): Prague's alpha starts at 0.
                g: PRAGUE_DEFAULT_G,
                rtt_target_us: PRAGUE_DEFAULT_RTT_TARGET_US,
                rtt_scaling: 1,
                rtt_transition: PRAGUE_DEFAULT_RTT_TRANSITION,
                mode: crate::intf::prague_mode_PRAGUE_MODE_AUTO,
                mode_switch_mtus: PRAGUE_DEFAULT_MODE_SWITCH_MTUS,
                pacing: 1,
                classic_qdelay_us: PRAGUE_DEFAULT_CLASSIC_QDELAY_US,
                ..Default::default()
            },
        }
    }

    /// The oldest kernel that can run it, and why.
    pub fn min_kernel(self) -> Option<((u32, u32), &'static str)> {
        match self {
            // tcp_congestion_ops.cong_control took the ACK and its flags in 6.10.
            Algo::Prague => Some((
                (6, 10),
                "its window is set in cong_control, whose arguments are those of Linux 6.10 on",
            )),
            _ => None,
        }
    }

    /// Why a kernel `version` cannot run it, if it cannot.
    pub fn kernel_refusal(self, (k_major, k_minor): (u32, u32)) -> Option<String> {
        let ((major, minor), why) = self.min_kernel()?;
        ((k_major, k_minor) < (major, minor)).then(|| {
            format!(
                "{} needs Linux {major}.{minor} or later ({why}); this kernel is \
                 {k_major}.{k_minor}",
                self.key()
            )
        })
    }

    /// Refuses, before anything loads, an algorithm this kernel cannot run.
    pub fn require_kernel(self) -> anyhow::Result<()> {
        let version = dctcp_utils::preflight::kernel_version().unwrap_or((0, 0));
        match self.kernel_refusal(version) {
            Some(why) => anyhow::bail!("{why}"),
            None => Ok(()),
        }
    }

    pub fn param(self, name: &str) -> Option<&'static ParamSpec> {
        self.params().iter().find(|p| p.name == name)
    }
}

pub fn fallback_name(name: &str) -> String {
    format!("{name}{FALLBACK_SUFFIX}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::skel::SkelBuilder;
    use std::mem::MaybeUninit;

    #[test]
    fn names_are_the_keys_users_type_and_the_maps_the_objects_carry() {
        let keys: Vec<&str> = Algo::ALL.iter().map(|a| a.key()).collect();
        assert_eq!(keys, ["dctcp", "xdctcp", "kdctcp", "prague"]);
        for &a in Algo::ALL {
            assert_eq!(Algo::from_str(a.key(), false), Ok(a), "--algo {}", a.key());
            assert_eq!(a.default_name(), format!("bpf_{}", a.key()));
            assert!(a.default_name().len() <= NAME_MAX);
            assert_eq!(Algo::from_struct_ops_map(a.struct_ops_map()), Some(a));
        }
        assert_eq!(Algo::from_struct_ops_map("tcp_reno"), None);
        // Each object's struct_ops map is named as `list` expects to find it
        // (opening parses the ELF; nothing reaches the kernel).
        let mut s = MaybeUninit::uninit();
        let o = crate::skel::dctcp::DctcpSkelBuilder::default()
            .open(&mut s)
            .unwrap();
        assert_eq!(o.maps.dctcp.name(), Algo::Dctcp.struct_ops_map());
        let mut s = MaybeUninit::uninit();
        let o = crate::skel::xdctcp::XdctcpSkelBuilder::default()
            .open(&mut s)
            .unwrap();
        assert_eq!(o.maps.xdctcp.name(), Algo::Xdctcp.struct_ops_map());
        let mut s = MaybeUninit::uninit();
        let o = crate::skel::kdctcp::KdctcpSkelBuilder::default()
            .open(&mut s)
            .unwrap();
        assert_eq!(o.maps.kdctcp.name(), Algo::Kdctcp.struct_ops_map());
        let mut s = MaybeUninit::uninit();
        let o = crate::skel::prague::PragueSkelBuilder::default()
            .open(&mut s)
            .unwrap();
        assert_eq!(o.maps.prague.name(), Algo::Prague.struct_ops_map());
    }

    #[test]
    fn every_algorithm_has_its_own_tunables_and_the_shared_ones() {
        for &a in Algo::ALL {
            assert!(a.param("alpha_on_init").is_some(), "{a:?}");
            assert!(a.param("inject_ssthresh").is_some(), "{a:?}");
            assert!(a.param("guard").is_some(), "{a:?}");
            assert!(a.param("nosuch").is_none());
        }
        assert!(Algo::Dctcp.param("shift_g").is_some() && Algo::Dctcp.param("g").is_none());
        assert!(Algo::Xdctcp.param("ns").is_some() && Algo::Kdctcp.param("ns").is_none());
        assert!(Algo::Kdctcp.param("per_ack_alpha").is_some());
        assert!(Algo::Prague.param("rtt_target_us").is_some() && Algo::Prague.param("ns").is_none());
        assert_eq!(fallback_name("bpf_dctcp"), "bpf_dctcp_reno");
    }
}
