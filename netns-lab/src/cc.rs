//! Congestion controls a lab uses: the kernel's by name, or a BPF algorithm
//! attached for the lab alone under the lab's own name and detached after.

use anyhow::Result;
use loader::algo::Algo;
use loader::instance::{self, AttachMode, AttachRequest};
use loader::params::Assignment;

use crate::prefix::Prefix;

/// A BPF algorithm registered for one lab run.
pub struct LabCc {
    pub name: String,
    _prefix: Prefix,
}

impl LabCc {
    pub fn attach(algo: Algo, params: Vec<Assignment>) -> Result<LabCc> {
        let prefix = Prefix::unique()?;
        let name = prefix.as_str().to_string();
        instance::attach(&AttachRequest {
            algo,
            name: name.clone(),
            params,
            mode: AttachMode::Auto,
        })?;
        Ok(LabCc {
            name,
            _prefix: prefix,
        })
    }
}

impl LabCc {
    /// (ssthresh repairs, cwnd repairs, in-flight holds) of the kernel issue
    /// guarded against in bpf/dctcp_core.h, since attach.
    pub fn repairs(&self) -> Result<(u64, u64, u64)> {
        let i = instance::describe(&loader::bpffs::InstanceDir::new(&self.name))?;
        Ok((i.ssthresh_repairs, i.cwnd_repairs, i.inflight_holds))
    }
}

/// An experiment's algorithms by the names its sockets use: `bpf_dctcp` is
/// attached for the run under the lab's own name, kernel ones pass through.
pub struct Algorithms {
    bpf: Option<LabCc>,
}

impl Algorithms {
    pub fn attach(names: &[String]) -> Result<Algorithms> {
        Ok(Algorithms {
            bpf: names
                .iter()
                .any(|a| a == "bpf_dctcp")
                .then(|| LabCc::attach(Algo::Dctcp, vec![]))
                .transpose()?,
        })
    }

    /// What TCP_CONGESTION takes for `name`.
    pub fn cc(&self, name: &str) -> String {
        match (&self.bpf, name) {
            (Some(b), "bpf_dctcp") => b.name.clone(),
            _ => name.to_string(),
        }
    }
}

impl Drop for LabCc {
    fn drop(&mut self) {
        if let Err(e) = instance::detach(&self.name) {
            eprintln!("warning: detaching {}: {e:#}", self.name);
        }
    }
}
