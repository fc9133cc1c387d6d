//! attach, detach, list and set: the life of a registered algorithm.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, OpenMapMut};
use serde::Serialize;

use dctcp_utils::bpffs::{self, InstanceDir};
use dctcp_utils::preflight;

use crate::algo::{fallback_name, Algo};
use crate::intf::{dctcp_params, dctcp_stats};
use crate::params::{self, Assignment};
use crate::skel::dctcp::DctcpSkelBuilder;
use crate::skel::kdctcp::KdctcpSkelBuilder;
use crate::skel::prague::PragueSkelBuilder;
use crate::skel::xdctcp::XdctcpSkelBuilder;

/// How the registration is held in bpffs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    /// A struct_ops link if the kernel has them (6.4+), else the map.
    Auto,
    /// Pin a struct_ops link (Linux 6.4 and later).
    Link,
    /// Pin the struct_ops map itself (any kernel with struct_ops).
    Map,
}

pub struct AttachRequest {
    pub algo: Algo,
    pub name: String,
    pub params: Vec<Assignment>,
    pub mode: AttachMode,
    /// Prague: the interfaces of this namespace whose egress gets its ECT(1)
    /// program; None: every interface that is up but loopback.
    pub ect1_devs: Option<Vec<String>>,
}

/// Where a Prague instance pins its ECT(1) program (tcx egress).
pub const ECT1_PROG_PIN: &str = "ect1_prog";

pub(crate) const KEY0: [u8; 4] = 0u32.to_ne_bytes();

fn set_c_name(dst: &mut [std::ffi::c_char], name: &str) {
    dst.fill(0);
    for (d, s) in dst.iter_mut().zip(name.bytes()) {
        *d = s as std::ffi::c_char;
    }
}

/// Removes an instance's pins and directory; used to undo a failed attach.
struct PinGuard {
    dir: InstanceDir,
    armed: bool,
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = unregister(&self.dir);
            let _ = std::fs::remove_dir_all(&self.dir.path);
        }
    }
}

/// Loads the algorithm, registers it and its Reno fallback, and pins them so
/// they outlive this process.
pub fn attach(req: &AttachRequest) -> Result<InstanceDir> {
    // Input first: nothing below runs for a bad name or parameter.
    params::check_name(&req.name)?;
    let mut p = req.algo.default_params();
    params::apply(req.algo, &mut p, &req.params)?;
    check_ect1_devs(req)?;

    preflight::require_root("loader attach")?;
    preflight::require_btf()?;
    preflight::require_struct_ops()?;
    let use_link = match req.mode {
        AttachMode::Auto => preflight::kernel_has_struct_ops_link(),
        AttachMode::Link if !preflight::kernel_has_struct_ops_link() => {
            let (major, minor) = preflight::kernel_version().unwrap_or((0, 0));
            dctcp_utils::usage_bail!(
                "--mode link needs struct_ops links, Linux 6.4 or later (this kernel: \
                 {major}.{minor}); use --mode map (or auto, which picks it here)"
            );
        }
        AttachMode::Link => true,
        AttachMode::Map => false,
    };

    let dir = InstanceDir::new(&req.name);
    if dir.exists() {
        bail!(
            "`{}` is already attached (pinned at {}); nothing changed. Use `loader set {} ...` to \
             retune it or `loader detach {}` first",
            req.name,
            dir.path.display(),
            req.name,
            req.name
        );
    }
    let fallback = fallback_name(&req.name);
    let taken = preflight::registered_congestion_controls();
    for n in [&req.name, &fallback] {
        if taken.iter().any(|t| t == n) {
            bail!(
                "the kernel already has a congestion control named `{n}` that loader did not \
                 pin; pick another name with --name"
            );
        }
    }

    bpffs::ensure_mounted()?;
    // Pins go into a hidden staging directory renamed into place at the end,
    // so `list` never sees half an instance.
    let staging = InstanceDir::staging(&req.name, "attaching");
    create_instance_dir(&staging)?;
    let mut guard = PinGuard {
        dir: staging.clone(),
        armed: true,
    };

    let v = load(req.algo, &staging, &req.name, &fallback, &p, use_link, true)?;
    if req.algo == Algo::Prague {
        let devs = match &req.ect1_devs {
            Some(devs) => devs.clone(),
            None => interfaces_up()?,
        };
        for dev in &devs {
            attach_ect1(&staging, dev)?;
        }
        tracing::info!(name = %req.name, devices = ?devs, "ECT(1) program attached");
    }
    std::fs::rename(&staging.path, &dir.path)
        .with_context(|| format!("moving {} into place", staging.path.display()))?;
    guard.armed = false;
    tracing::info!(name = %req.name, fallback = %fallback, link = use_link,
                   programs = v.programs, verified_insns = v.insns, "attached");
    Ok(dir)
}

/// What the verifier passed of one BPF object: its programs, and the
/// instructions it processed over all their paths (`verified_insns`, the
/// figure its 1M complexity limit applies to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Verified {
    pub programs: usize,
    pub insns: u64,
}

impl Verified {
    /// Asks the kernel about each loaded program of `object` (one left out
    /// of the load has no fd to ask with).
    fn of(object: &libbpf_rs::Object) -> Result<Verified> {
        let mut v = Verified::default();
        for prog in object.progs().filter(|p| p.autoload()) {
            let info = dctcp_utils::prog_info::of(prog.as_fd(), &prog.name().to_string_lossy())?;
            v.programs += 1;
            v.insns += u64::from(info.verified_insns);
        }
        Ok(v)
    }
}

/// Loads `algo`'s programs with its default parameters through the
/// verifier and drops them: nothing is registered or pinned.
pub fn verify(algo: Algo) -> Result<Verified> {
    let name = "check";
    let p = algo.default_params();
    let dir = InstanceDir::new(name);
    let link = preflight::kernel_has_struct_ops_link();
    load(algo, &dir, name, &fallback_name(name), &p, link, false)
}

/// A concurrent `detach` of the last other instance may remove the root
/// between our creating it and our subdirectory: retry then.
fn create_instance_dir(dir: &InstanceDir) -> Result<()> {
    retry_not_found(|| std::fs::create_dir_all(&dir.path))
        .with_context(|| format!("creating {}", dir.path.display()))
}

/// How many times `create_instance_dir` retries after `NotFound`.
const CREATE_RETRIES: usize = 5;

/// `create` once and then again after each `NotFound`, up to
/// `CREATE_RETRIES` more times; any other answer is final.
fn retry_not_found(mut create: impl FnMut() -> std::io::Result<()>) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match create() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < CREATE_RETRIES => {
                tries += 1
            }
            r => return r,
        }
    }
}

/// Opens, configures, loads and registers one algorithm's skeleton and pins
/// what an instance consists of (with `register` false it stops after the
/// verifier: `loader check`). A macro because each BPF object has its own
/// skeleton type, whose struct_ops maps are fields named after DCTCP_ALGO.
macro_rules! load_algorithm {
    ($builder:ty, $ops:ident, $ops_mut:ident, $reno:ident, $reno_mut:ident,
     $dir:expr, $name:expr, $fallback:expr, $params:expr, $use_link:expr, $register:expr) => {
        load_algorithm!($builder, $ops, $ops_mut, $reno, $reno_mut, $dir, $name, $fallback,
                        $params, $use_link, $register, |_skel, _dir| Ok::<(), anyhow::Error>(()))
    };
    // `$pin_more(&mut skel, dir)` pins what only this algorithm has.
    ($builder:ty, $ops:ident, $ops_mut:ident, $reno:ident, $reno_mut:ident,
     $dir:expr, $name:expr, $fallback:expr, $params:expr, $use_link:expr, $register:expr,
     $pin_more:expr) => {{
        let (dir, name, fallback, use_link): (&InstanceDir, &str, &str, bool) =
            ($dir, $name, $fallback, $use_link);
        let mut storage = MaybeUninit::uninit();
        let mut open = <$builder>::default()
            .open(&mut storage)
            .context("opening the BPF object")?;

        set_c_name(&mut open.struct_ops.$ops_mut().name, name);
        set_c_name(&mut open.struct_ops.$reno_mut().name, fallback);
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("rodata not mapped")?;
        set_c_name(&mut rodata.fallback_name, fallback);
        // The injection hook exists only in an instance attached to inject.
        open.maps
            .rodata_test_hooks_data
            .as_deref_mut()
            .context("test hooks not mapped")?
            .fault_injection = $params.inject_ssthresh != 0;
        open.maps
            .data_params
            .set_initial_value(&dctcp_utils::bytes::to_bytes($params))?;
        if !use_link {
            for map in [&mut open.maps.$ops, &mut open.maps.$reno] {
                clear_link_flag(map)?;
            }
        }

        let mut skel = open.load().context(
            "loading the BPF programs (the verifier log above says why; a kernel without \
             struct_ops for tcp_congestion_ops or without the tcp_reno_* kfuncs cannot run them)",
        )?;
        let verified = Verified::of(skel.object())?;
        if !$register {
            // Loaded, not registered: dropping the skeleton frees it all.
            return Ok(verified);
        }

        // The fallback first: the main algorithm may hand sockets to it at once.
        let mut fb_link = skel
            .maps
            .$reno
            .attach_struct_ops()
            .context("registering the Reno fallback")?;
        hold(
            &mut fb_link,
            &mut skel.maps.$reno,
            &dir.fallback_link(),
            &dir.fallback_ops(),
            use_link,
        )?;
        let mut link = skel
            .maps
            .$ops
            .attach_struct_ops()
            .with_context(|| format!("registering `{name}`"))?;
        hold(
            &mut link,
            &mut skel.maps.$ops,
            &dir.link(),
            &dir.ops(),
            use_link,
        )?;

        pin_map(&mut skel.maps.data_params, &dir.params())?;
        pin_map(&mut skel.maps.data_stats, &dir.stats())?;
        pin_map(&mut skel.maps.data_trace, &dir.trace())?;
        pin_map(&mut skel.maps.events, &dir.events())?;
        pin_map(&mut skel.maps.rodata_test_hooks, &dir.test_hooks())?;
        ($pin_more)(&mut skel, dir)?;
        Ok::<Verified, anyhow::Error>(verified)
    }};
}

fn load(
    algo: Algo,
    dir: &InstanceDir,
    name: &str,
    fallback: &str,
    p: &dctcp_params,
    use_link: bool,
    register: bool,
) -> Result<Verified> {
    algo.require_kernel()?;
    match algo {
        Algo::Dctcp => load_algorithm!(
            DctcpSkelBuilder,
            dctcp,
            dctcp_mut,
            dctcp_reno,
            dctcp_reno_mut,
            dir,
            name,
            fallback,
            p,
            use_link,
            register
        ),
        Algo::Xdctcp => load_algorithm!(
            XdctcpSkelBuilder,
            xdctcp,
            xdctcp_mut,
            xdctcp_reno,
            xdctcp_reno_mut,
            dir,
            name,
            fallback,
            p,
            use_link,
            register
        ),
        Algo::Kdctcp => load_algorithm!(
            KdctcpSkelBuilder,
            kdctcp,
            kdctcp_mut,
            kdctcp_reno,
            kdctcp_reno_mut,
            dir,
            name,
            fallback,
            p,
            use_link,
            register
        ),
        Algo::Prague => load_algorithm!(
            PragueSkelBuilder,
            prague,
            prague_mut,
            prague_reno,
            prague_reno_mut,
            dir,
            name,
            fallback,
            p,
            use_link,
            register,
            |skel: &mut crate::skel::prague::PragueSkel<'_>, dir: &InstanceDir| {
                // The ECT(1) program, for `loader ect1` and the lab to
                // attach where the flows leave.
                let pin = dir.path.join(ECT1_PROG_PIN);
                skel.progs
                    .prague_ect1
                    .pin(&pin)
                    .with_context(|| format!("pinning {}", pin.display()))
            }
        ),
    }
}

fn pin_map(map: &mut libbpf_rs::MapMut<'_>, pin: &Path) -> Result<()> {
    map.pin(pin)
        .with_context(|| format!("pinning {}", pin.display()))
}

fn clear_link_flag(map: &mut OpenMapMut<'_>) -> Result<()> {
    let flags = map.map_flags() & !libbpf_rs::libbpf_sys::BPF_F_LINK;
    map.set_map_flags(flags)
        .context("switching struct_ops map to map mode")
}

/// Makes the registration outlive this process: pin the link, or in map mode
/// pin the map and disconnect the pseudo-link so dropping it does not
/// unregister.
fn hold(
    link: &mut Link,
    map: &mut libbpf_rs::MapMut<'_>,
    link_pin: &Path,
    map_pin: &Path,
    use_link: bool,
) -> Result<()> {
    if use_link {
        link.pin(link_pin)
            .with_context(|| format!("pinning {}", link_pin.display()))
    } else {
        map.pin(map_pin)
            .with_context(|| format!("pinning {}", map_pin.display()))?;
        link.disconnect();
        Ok(())
    }
}

/// Pins of the ECT(1) program's tcx links: `ect1_link_<ifindex>`.
const ECT1_LINK_PREFIX: &str = "ect1_link_";

/// The interfaces of this network namespace that are up, but loopback
/// (asked of the kernel: /sys/class/net is the namespace's that mounted it).
fn interfaces_up() -> Result<Vec<String>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        bail!("listing interfaces: {}", std::io::Error::last_os_error());
    }
    let mut devs = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*at };
        let flags = ifa.ifa_flags as i32;
        if flags & libc::IFF_UP != 0 && flags & libc::IFF_LOOPBACK == 0 {
            // SAFETY: a NUL-terminated name.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            devs.push(name.to_string_lossy().to_string());
        }
        at = ifa.ifa_next;
    }
    // SAFETY: the list getifaddrs allocated.
    unsafe { libc::freeifaddrs(list) };
    // One entry per address family: each interface once.
    devs.sort();
    devs.dedup();
    Ok(devs)
}

/// --ect1-dev names interfaces of this namespace, and only for Prague.
fn check_ect1_devs(req: &AttachRequest) -> Result<()> {
    let Some(devs) = &req.ect1_devs else {
        return Ok(());
    };
    if req.algo != Algo::Prague && !devs.is_empty() {
        dctcp_utils::usage_bail!(
            "--ect1-dev is for prague only (its ECT(1) program); {} sends ECT(0) itself",
            req.algo.key()
        );
    }
    for dev in devs {
        if let Err(e) = tc_qdisc::hook::ifindex(dev) {
            dctcp_utils::usage_bail!(
                "--ect1-dev {dev}: {e:#}; give interfaces of this network namespace (`ip link`)"
            );
        }
    }
    Ok(())
}

/// The instance's ECT(1) program on tcx egress of `dev` (this namespace),
/// the link pinned in the instance so that detach removes it.
fn attach_ect1(dir: &InstanceDir, dev: &str) -> Result<()> {
    let prog = dir.path.join(ECT1_PROG_PIN);
    let idx = tc_qdisc::hook::ifindex(dev)?;
    let link = tc_qdisc::hook::attach_pinned_egress(&prog, Path::new("/proc/self/ns/net"), dev)?;
    let pin = dir.path.join(format!("{ECT1_LINK_PREFIX}{idx}"));
    let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes())?;
    // SAFETY: a link fd we hold and a NUL-terminated path.
    let r = unsafe {
        libbpf_rs::libbpf_sys::bpf_obj_pin(std::os::fd::AsRawFd::as_raw_fd(&link), c.as_ptr())
    };
    if r < 0 {
        bail!("pinning {}: {}", pin.display(), std::io::Error::from_raw_os_error(-r));
    }
    Ok(())
}

/// The ECT(1) program's links of an instance, detached and unpinned.
fn detach_ect1(dir: &InstanceDir) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(&dir.path) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        let is_link = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(ECT1_LINK_PREFIX));
        if is_link {
            // The interface may be gone, and the link defunct with it.
            if let Ok(link) = Link::open(&path) {
                let _ = link.detach();
            }
            std::fs::remove_file(&path).with_context(|| format!("unpinning {}", path.display()))?;
        }
    }
    Ok(())
}

/// Unregisters main then fallback, whichever way each is held, and unpins.
fn unregister(dir: &InstanceDir) -> Result<()> {
    let mut first_err = detach_ect1(dir).err();
    for (link, ops) in [
        (dir.link(), dir.ops()),
        (dir.fallback_link(), dir.fallback_ops()),
    ] {
        let r = (|| -> Result<()> {
            if link.exists() {
                Link::open(&link)?
                    .detach()
                    .with_context(|| format!("detaching {}", link.display()))?;
            }
            if ops.exists() {
                let map = MapHandle::from_pinned_path(&ops)?;
                let r = map.delete(&KEY0);
                // Already unregistered (`bpftool struct_ops unregister`),
                // which is what detach wants: ENOENT, or EINPROGRESS while
                // the kernel frees it (6.1). Read before anything else runs.
                let errno = std::io::Error::last_os_error().raw_os_error();
                if !(r.is_err() && matches!(errno, Some(libc::ENOENT | libc::EINPROGRESS))) {
                    r.with_context(|| format!("unregistering {}", ops.display()))?;
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

pub fn detach(name: &str) -> Result<()> {
    params::check_name(name)?;
    preflight::require_root("loader detach")?;
    let dir = InstanceDir::new(name);
    if !dir.exists() {
        let known: Vec<_> = bpffs::instances()?.into_iter().map(|d| d.name).collect();
        dctcp_utils::usage_bail!(
            "no algorithm named `{name}` is attached by loader (attached: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    }
    // Out of sight first, so `list` and a concurrent detach skip it.
    let staging = InstanceDir::staging(name, "detaching");
    std::fs::rename(&dir.path, &staging.path).with_context(|| {
        format!(
            "`{name}` is being detached by someone else ({})",
            dir.path.display()
        )
    })?;
    unregister(&staging)?;
    std::fs::remove_dir_all(&staging.path)
        .with_context(|| format!("removing {}", staging.path.display()))?;
    // Leave no empty root behind once the last instance is gone.
    let _ = std::fs::remove_dir(bpffs::ROOT);
    tracing::info!(name, "detached");
    Ok(())
}

/// Undoes what attaches and detaches killed midway left (their staging
/// directories): unregisters whatever they hold and removes them. Returns
/// the directories removed.
pub fn remove_abandoned() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for dir in bpffs::abandoned_staging() {
        unregister(&dir)?;
        std::fs::remove_dir_all(&dir.path)
            .with_context(|| format!("removing {}", dir.path.display()))?;
        removed.push(dir.path.display().to_string());
    }
    Ok(removed)
}

pub fn detach_all() -> Result<Vec<String>> {
    preflight::require_root("loader detach")?;
    for path in remove_abandoned()? {
        tracing::info!(%path, "removed what a killed attach or detach left");
    }
    let mut names = Vec::new();
    for dir in bpffs::instances()? {
        detach(&dir.name)?;
        names.push(dir.name);
    }
    let _ = std::fs::remove_dir(bpffs::ROOT);
    Ok(names)
}

/// One attached instance as `loader list` shows it.
#[derive(Debug, Serialize)]
pub struct Instance {
    pub name: String,
    pub algo: String,
    pub fallback: String,
    pub mode: &'static str,
    pub registered: bool,
    pub params: serde_json::Map<String, serde_json::Value>,
    pub sockets: u64,
    pub inits: u64,
    pub fallbacks: u64,
    pub fallback_sockets: u64,
    /// Switches to the fallback the kernel refused; those flows went to
    /// the kernel's reno.
    pub fallback_refused: u64,
    pub alpha_updates: u64,
    pub loss_reactions: u64,
    /// Window reductions (.ssthresh calls, on ECE or on loss).
    pub reductions: u64,
    pub ssthresh_repairs: u64,
    pub cwnd_repairs: u64,
    pub inflight_holds: u64,
    pub progressive_cuts: u64,
    pub cwr_growth: u64,
    pub events: u64,
    pub events_dropped: u64,
    /// The impossible ssthresh and cwnd the guard last repaired, as it
    /// found them (0: none), README "Known issue".
    pub found_ssthresh: u64,
    pub found_cwnd: u64,
    /// Prague: packets its ECT(1) program rewrote from ECT(0) to ECT(1).
    pub ect1_packets: u64,
    pub pin: String,
    #[serde(skip)]
    pub params_raw: dctcp_params,
}

/// The algorithm a pinned instance carries, read back from the kernel: the
/// struct_ops map behind the link (or the pinned map) has its name.
fn instance_algo(dir: &InstanceDir) -> Result<(Algo, &'static str)> {
    let (map_name, mode) = if dir.link().exists() {
        let info = Link::open(dir.link())?.info()?;
        let libbpf_rs::query::LinkTypeInfo::StructOps(so) = info.info else {
            bail!("{} is not a struct_ops link", dir.link().display());
        };
        (
            MapHandle::from_map_id(so.map_id)?
                .info()?
                .name()?
                .to_string(),
            "link",
        )
    } else if dir.ops().exists() {
        (
            MapHandle::from_pinned_path(dir.ops())?
                .info()?
                .name()?
                .to_string(),
            "map",
        )
    } else {
        bail!(
            "{} holds neither a link nor a struct_ops map; remove it with `loader detach {}`",
            dir.path.display(),
            dir.name
        );
    };
    let algo = Algo::from_struct_ops_map(&map_name).with_context(|| {
        format!(
            "{}: unknown struct_ops map `{map_name}`",
            dir.path.display()
        )
    })?;
    Ok((algo, mode))
}

pub(crate) fn read_value<T: Copy + Default>(pin: &Path) -> Result<T> {
    lookup_value(&open_value::<T>(pin)?)
}

/// The single-value map pinned at `pin`, checked to hold a `T`: a handle
/// that outlives the pin (a detach while a tracer reads it).
pub(crate) fn open_value<T>(pin: &Path) -> Result<MapHandle> {
    let map =
        MapHandle::from_pinned_path(pin).with_context(|| format!("opening {}", pin.display()))?;
    anyhow::ensure!(
        map.value_size() as usize == std::mem::size_of::<T>(),
        "{}: value is {} bytes, this loader expects {}; was it attached by another version?",
        pin.display(),
        map.value_size(),
        std::mem::size_of::<T>()
    );
    Ok(map)
}

/// The value of a map `open_value` opened.
pub(crate) fn lookup_value<T: Copy + Default>(map: &MapHandle) -> Result<T> {
    let bytes = map.lookup(&KEY0, MapFlags::ANY)?.context("empty map")?;
    dctcp_utils::bytes::from_bytes(&bytes).context("short map value")
}

pub fn describe(dir: &InstanceDir) -> Result<Instance> {
    let (algo, mode) = instance_algo(dir)?;
    let p: dctcp_params = read_value(&dir.params())?;
    let s: dctcp_stats = read_value(&dir.stats())?;
    let registered = preflight::registered_congestion_controls().contains(&dir.name);
    Ok(Instance {
        name: dir.name.clone(),
        algo: algo.key().to_string(),
        fallback: fallback_name(&dir.name),
        mode,
        registered,
        params: algo
            .params()
            .iter()
            .map(|spec| (spec.name.to_string(), spec.json(&p)))
            .collect(),
        sockets: s.sockets,
        inits: s.inits,
        fallbacks: s.fallbacks,
        fallback_sockets: s.fallback_sockets,
        fallback_refused: s.fallback_refused,
        alpha_updates: s.alpha_updates,
        loss_reactions: s.loss_reactions,
        reductions: s.reductions,
        ssthresh_repairs: s.ssthresh_repairs,
        cwnd_repairs: s.cwnd_repairs,
        inflight_holds: s.inflight_holds,
        progressive_cuts: s.progressive_cuts,
        cwr_growth: s.cwr_growth,
        events: s.events,
        events_dropped: s.events_dropped,
        found_ssthresh: s.found_ssthresh,
        found_cwnd: s.found_cwnd,
        ect1_packets: s.ect1_packets,
        pin: dir.path.display().to_string(),
        params_raw: p,
    })
}

/// Every attached instance. One that cannot be read (detached meanwhile,
/// or pinned by another version) is reported on stderr and skipped.
pub fn list() -> Result<Vec<Instance>> {
    preflight::require_root("loader list")?;
    Ok(bpffs::instances()?
        .iter()
        .filter_map(|dir| match describe(dir) {
            Ok(i) => Some(i),
            Err(e) if !dir.exists() => {
                tracing::debug!("{} went away: {e:#}", dir.name);
                None
            }
            Err(e) => {
                tracing::warn!("skipping {}: {e:#}", dir.path.display());
                None
            }
        })
        .collect())
}

/// Rewrites the tunables of a live instance; sockets see them on their next
/// ACK. Returns the parameters now in force.
pub fn set(name: &str, assignments: &[Assignment]) -> Result<String> {
    params::check_name(name)?;
    if assignments.is_empty() {
        dctcp_utils::usage_bail!(
            "nothing to set: give name=value pairs, e.g. `loader set {name} shift_g=5`"
        );
    }
    preflight::require_root("loader set")?;
    let dir = InstanceDir::new(name);
    if !dir.exists() {
        dctcp_utils::usage_bail!(
            "no algorithm named `{name}` is attached by loader (see `loader list`)"
        );
    }
    let (algo, _) = instance_algo(&dir)?;
    let mut p: dctcp_params = read_value(&dir.params())?;
    params::apply(algo, &mut p, assignments)?;
    if p.inject_ssthresh != 0 && !fault_injection(&dir)? {
        dctcp_utils::usage_bail!(
            "`{name}` was attached without fault injection, so its programs have no injection \
             hook (the verifier removed it); nothing changed. To watch the guard repair injected \
             values, detach it and attach again with --param inject_ssthresh=N"
        );
    }
    MapHandle::from_pinned_path(dir.params())?
        .update(&KEY0, &dctcp_utils::bytes::to_bytes(&p), MapFlags::ANY)
        .context("writing the parameters")?;
    Ok(params::describe(algo, &p))
}

/// Whether an instance's programs were loaded with guard.h's injection hook
/// (one byte, `fault_injection`, in its pinned test-hooks map).
fn fault_injection(dir: &InstanceDir) -> Result<bool> {
    let bytes = MapHandle::from_pinned_path(dir.test_hooks())
        .and_then(|m| m.lookup(&KEY0, MapFlags::ANY))
        .with_context(|| format!("reading {}", dir.test_hooks().display()))?;
    Ok(bytes.is_some_and(|b| b.first().is_some_and(|&f| f != 0)))
}

/// Names (main and fallback) of every attached instance, for `loader flows`.
pub fn attached_names() -> Vec<(String, String)> {
    bpffs::instances()
        .unwrap_or_default()
        .into_iter()
        .map(|d| {
            let fb = fallback_name(&d.name);
            (d.name, fb)
        })
        .collect()
}

pub fn c_str(bytes: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = bytes
        .iter()
        .map(|&c| c as u8)
        .chain(std::iter::once(0))
        .collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `create` answering `NotFound` `fails` times, then `last` (`None`:
    /// created); how the retry ended and how many times it called.
    fn retried(fails: usize, last: Option<std::io::ErrorKind>) -> (std::io::Result<()>, usize) {
        let mut calls = 0;
        let r = retry_not_found(|| {
            calls += 1;
            match last {
                _ if calls <= fails => Err(std::io::ErrorKind::NotFound.into()),
                None => Ok(()),
                Some(kind) => Err(kind.into()),
            }
        });
        (r, calls)
    }

    #[test]
    fn a_vanished_root_is_retried_five_times_and_other_errors_never() {
        use std::io::ErrorKind::{AlreadyExists, NotFound, PermissionDenied};
        // A detach racing the attach: the directory appears on a retry.
        for fails in [0, 1, CREATE_RETRIES] {
            let (r, calls) = retried(fails, None);
            assert!(r.is_ok(), "{fails}: {r:?}");
            assert_eq!(calls, fails + 1);
        }
        // Still gone after every retry: NotFound, after 1 + 5 calls.
        let (r, calls) = retried(CREATE_RETRIES + 1, None);
        assert_eq!(r.unwrap_err().kind(), NotFound);
        assert_eq!(calls, CREATE_RETRIES + 1);
        // Anything else is answered at once, first try or after a retry.
        for (fails, kind) in [(0, PermissionDenied), (2, AlreadyExists)] {
            let (r, calls) = retried(fails, Some(kind));
            assert_eq!(r.unwrap_err().kind(), kind);
            assert_eq!(calls, fails + 1);
        }
    }

    #[test]
    fn a_c_name_ends_at_its_first_nul_or_at_the_array_end() {
        let c = |s: &[u8]| -> Vec<std::ffi::c_char> {
            s.iter().map(|&b| b as std::ffi::c_char).collect()
        };
        assert_eq!(c_str(&c(b"t_dctcp\0\0junk")), "t_dctcp");
        // TCP_CA_NAME_MAX full: no NUL inside the array.
        assert_eq!(c_str(&c(b"0123456789abcdef")), "0123456789abcdef");
        assert_eq!(c_str(&c(b"\0xyz")), "");
    }
}
