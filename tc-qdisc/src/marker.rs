//! The BPF switch program, loaded and attached: marker and queue probe on the
//! bottleneck's tcx egress, per-flow CE counter on the receiver's tcx ingress.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::net::Ipv4Addr;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{AsRawLibbpf, Link, MapCore, MapFlags, MapHandle, ProgramMut, RingBufferBuilder};
use serde::Serialize;

use crate::intf::{
    from_bytes, marker_config, marker_stats, queue_sample, rx_flow_key, rx_flow_stats,
};
use crate::skel::SwitchSkelBuilder;
use loader::netns::with_netns;

/// Packets seen at one receiver flow.
#[derive(Clone, Debug, Serialize)]
pub struct RxFlow {
    pub src: Ipv4Addr,
    pub sport: u16,
    pub dst: Ipv4Addr,
    pub dport: u16,
    pub pkts: u64,
    pub data_bytes: u64,
    pub ce_pkts: u64,
    pub ce_bytes: u64,
    pub ect_pkts: u64,
}

/// Every arrival the probe recorded, in order.
#[derive(Default)]
pub struct QueueTrace {
    pub samples: Vec<queue_sample>,
}

pub struct BpfSwitch {
    _links: Vec<Link>,
    stats: MapHandle,
    rx_flows: MapHandle,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Result<Vec<queue_sample>>>>,
}

fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name)?;
    // SAFETY: NUL-terminated name.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => bail!("no interface {name}: {}", std::io::Error::last_os_error()),
        i => Ok(i),
    }
}

/// Attaches `prog` to tcx of interface `dev` in namespace `ns` (tcx needs
/// Linux 6.6; `lab doctor` says whether this kernel has it).
fn attach_tcx(prog: &ProgramMut<'_>, ns: &Path, dev: &str) -> Result<Link> {
    with_netns(ns, || -> Result<Link> {
        let idx = ifindex(dev)?;
        // SAFETY: a loaded program; libbpf returns a new link or NULL.
        let ptr = unsafe {
            libbpf_rs::libbpf_sys::bpf_program__attach_tcx(
                prog.as_libbpf_object().as_ptr(),
                idx as i32,
                std::ptr::null(),
            )
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            anyhow!(
                "attaching to tcx of {dev}: {} (tcx needs Linux 6.6 or later)",
                std::io::Error::last_os_error()
            )
        })?;
        // SAFETY: ptr is a valid link we now own.
        Ok(unsafe { Link::from_ptr(ptr) })
    })?
}

impl BpfSwitch {
    /// Loads the switch with `cfg` and attaches the marker/probe to `egress`
    /// in `switch_ns` and the CE counter to `rx_if` in `rx_ns`.
    pub fn start(
        cfg: marker_config,
        switch_ns: &Path,
        egress: &str,
        rx_ns: &Path,
        rx_if: &str,
    ) -> Result<BpfSwitch> {
        let mut storage = MaybeUninit::uninit();
        let mut open = SwitchSkelBuilder::default()
            .open(&mut storage)
            .context("opening the BPF switch")?;
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("rodata not mapped")?;
        // The skeleton's copy of marker_config has the same C layout: write it bytewise.
        let bytes = loader::intf::to_bytes(&cfg);
        assert_eq!(
            std::mem::size_of_val(&ro.cfg),
            bytes.len(),
            "marker_config layouts differ"
        );
        // SAFETY: both are the C struct marker_config from bpf/intf.h, same size.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                &mut ro.cfg as *mut _ as *mut u8,
                bytes.len(),
            )
        };
        let skel = open
            .load()
            .context("loading the BPF switch (needs bpf_cast_to_kern_ctx, Linux 6.3+)")?;

        let links = vec![
            attach_tcx(&skel.progs.bottleneck_egress, switch_ns, egress)?,
            attach_tcx(&skel.progs.receiver_ingress, rx_ns, rx_if)?,
        ];
        let stats = MapHandle::try_from(&skel.maps.stats)?;
        let rx_flows = MapHandle::try_from(&skel.maps.rx_flows)?;
        let samples = MapHandle::try_from(&skel.maps.samples)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reader = (cfg.sample > 0).then(|| spawn_reader(samples, stop.clone()));
        Ok(BpfSwitch {
            _links: links,
            stats,
            rx_flows,
            stop,
            reader,
        })
    }

    /// Marker counters, summed over CPUs.
    pub fn stats(&self) -> Result<marker_stats> {
        let per_cpu = self
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .context("no stats")?;
        let mut t = marker_stats::default();
        for s in per_cpu.iter().filter_map(|b| from_bytes::<marker_stats>(b)) {
            t.pkts += s.pkts;
            t.bytes += s.bytes;
            t.marked += s.marked;
            t.dropped += s.dropped;
            t.taildrop += s.taildrop;
            t.ce_in += s.ce_in;
            t.ring_full += s.ring_full;
        }
        Ok(t)
    }

    /// What the receiver saw, per flow.
    pub fn rx_flows(&self) -> Result<Vec<RxFlow>> {
        let mut out = Vec::new();
        for key in self.rx_flows.keys() {
            let Some(k) = from_bytes::<rx_flow_key>(&key) else {
                continue;
            };
            let Some(v) = self
                .rx_flows
                .lookup(&key, MapFlags::ANY)?
                .and_then(|b| from_bytes::<rx_flow_stats>(&b))
            else {
                continue;
            };
            out.push(RxFlow {
                src: Ipv4Addr::from(u32::from_be(k.saddr)),
                sport: k.sport,
                dst: Ipv4Addr::from(u32::from_be(k.daddr)),
                dport: k.dport,
                pkts: v.pkts,
                data_bytes: v.data_bytes,
                ce_pkts: v.ce_pkts,
                ce_bytes: v.ce_bytes,
                ect_pkts: v.ect_pkts,
            });
        }
        out.sort_by_key(|f| (f.src, f.sport));
        Ok(out)
    }

    /// Stops the probe and returns every sample it recorded. The programs
    /// stay attached until this value is dropped.
    pub fn take_trace(&mut self) -> Result<QueueTrace> {
        self.stop.store(true, Ordering::Relaxed);
        let Some(reader) = self.reader.take() else {
            return Ok(QueueTrace::default());
        };
        let samples = reader
            .join()
            .map_err(|_| anyhow!("queue probe reader panicked"))??;
        Ok(QueueTrace { samples })
    }
}

impl Drop for BpfSwitch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// Drains the ring on a timer: the BPF side submits without wakeups, so the
/// reader polls instead of sleeping in epoll.
fn spawn_reader(map: MapHandle, stop: Arc<AtomicBool>) -> JoinHandle<Result<Vec<queue_sample>>> {
    std::thread::spawn(move || {
        let out = Arc::new(Mutex::new(Vec::<queue_sample>::with_capacity(1 << 20)));
        let sink = out.clone();
        let mut builder = RingBufferBuilder::new();
        builder.add(&map, move |data: &[u8]| {
            if let Some(s) = from_bytes::<queue_sample>(data) {
                sink.lock().unwrap().push(s);
            }
            0
        })?;
        let ring = builder.build()?;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
            ring.consume()?;
        }
        ring.consume()?;
        drop(ring);
        let v = std::mem::take(&mut *out.lock().unwrap());
        Ok(v)
    })
}
