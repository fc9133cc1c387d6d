//! The algorithms this build carries: their names, tunables and valid ranges.

use clap::ValueEnum;

use crate::intf::{dctcp_params, DCTCP_MAX_ALPHA, DCTCP_MAX_SHIFT_G, DCTCP_NAME_MAX};

/// Suffix of the Reno fallback registered beside each algorithm.
pub const FALLBACK_SUFFIX: &str = "_reno";

/// Longest instance name: the kernel allows 15 characters
/// (TCP_CA_NAME_MAX - 1) and the fallback needs room for its suffix.
pub const NAME_MAX: usize = DCTCP_NAME_MAX as usize - 1 - FALLBACK_SUFFIX.len();

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Algo {
    /// DCTCP as in net/ipv4/tcp_dctcp.c (Alizadeh et al. 2010, RFC 8257).
    Dctcp,
}

/// One tunable: where it lives in the parameter block and what it may hold.
pub struct ParamSpec {
    pub name: &'static str,
    pub min: u32,
    pub max: u32,
    pub help: &'static str,
    pub get: fn(&dctcp_params) -> u32,
    pub set: fn(&mut dctcp_params, u32),
}

const DCTCP_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "shift_g",
        min: 0,
        max: DCTCP_MAX_SHIFT_G,
        help: "EWMA gain of alpha, g = 1/2^shift_g (kernel default 4, g = 1/16)",
        get: |p| p.shift_g,
        set: |p, v| p.shift_g = v,
    },
    ParamSpec {
        name: "alpha_on_init",
        min: 0,
        max: DCTCP_MAX_ALPHA,
        help: "alpha of a new flow in 1/1024 (default 1024 = 1.0: cautious first reduction)",
        get: |p| p.alpha_on_init,
        set: |p, v| p.alpha_on_init = v,
    },
];

impl Algo {
    pub const ALL: &'static [Algo] = &[Algo::Dctcp];

    /// What `--algo` calls it.
    pub fn key(self) -> &'static str {
        match self {
            Algo::Dctcp => "dctcp",
        }
    }

    /// Name registered with the kernel unless `--name` says otherwise.
    pub fn default_name(self) -> &'static str {
        match self {
            Algo::Dctcp => "bpf_dctcp",
        }
    }

    /// Name of the struct_ops map in the BPF object: how a pinned link tells
    /// which algorithm it carries.
    pub fn struct_ops_map(self) -> &'static str {
        match self {
            Algo::Dctcp => "dctcp",
        }
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
        }
    }

    pub fn default_params(self) -> dctcp_params {
        match self {
            Algo::Dctcp => dctcp_params {
                shift_g: 4,
                alpha_on_init: DCTCP_MAX_ALPHA,
            },
        }
    }

    pub fn param(self, name: &str) -> Option<&'static ParamSpec> {
        self.params().iter().find(|p| p.name == name)
    }
}

pub fn fallback_name(name: &str) -> String {
    format!("{name}{FALLBACK_SUFFIX}")
}
