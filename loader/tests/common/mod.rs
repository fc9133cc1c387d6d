//! Shared pieces of the loader's integration tests: running the binary,
//! attaching with guaranteed teardown, a two-namespace veth topology, and
//! bulk TCP transfers between its ends. These tests need root.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use dctcp_utils::sockopt;
use netns_lab::{Netns, Prefix, Veth};
use serde_json::Value;
use socket2::{Domain, Protocol, Socket, Type};

pub const CLIENT_ADDR: &str = "198.18.0.1";
pub const SERVER_ADDR: &str = "198.18.0.2";

/// Whether this kernel has struct_ops links (Linux 6.4+), asked of the
/// kernel itself rather than of the loader's version check (which is what
/// the tests judge): the function behind `BPF_LINK_CREATE` for a struct_ops
/// map, `bpf_struct_ops_link_create`, came with them in 6.4.
pub fn has_struct_ops_links() -> bool {
    let syms = std::fs::read_to_string("/proc/kallsyms").expect("reading /proc/kallsyms");
    syms.lines()
        .any(|l| l.split_whitespace().nth(2) == Some("bpf_struct_ops_link_create"))
}

/// Whether the running kernel is `major.minor` or later.
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    dctcp_utils::preflight::kernel_version().is_some_and(|v| v >= (major, minor))
}

pub fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the loader's integration tests load BPF and create namespaces: run them as root (just test)"
    );
}

pub fn loader(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loader"))
        .args(args)
        .output()
        .expect("running loader")
}

/// Runs loader and insists on exit status 0.
pub fn loader_ok(args: &[&str]) -> String {
    let out = loader(args);
    assert!(
        out.status.success(),
        "loader {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn registered(name: &str) -> bool {
    dctcp_utils::preflight::registered_congestion_controls()
        .iter()
        .any(|n| n == name)
}

/// Removes a registration of `name` (or `name`_reno) that an earlier run left
/// in the kernel with no pin (map mode outlives its file descriptors): a
/// mutant of detach under `just mutants` leaks one, and every later attach
/// of the name would be refused. The test that leaked it has failed already.
pub fn clear_stale(name: &str) {
    // Only when there is one: the tool is a python3 process, which takes
    // seconds under the VM tier's emulation.
    if !registered(name) && !registered(&format!("{name}_reno")) {
        return;
    }
    clear_stale_registrations(&[name]);
}

/// `tools/clear-stale-registrations ARGS`, which must succeed: its stderr,
/// where it names each pin and registration it removed.
pub fn clear_stale_registrations(args: &[&str]) -> String {
    let tool = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tools/clear-stale-registrations"
    );
    let out = Command::new(tool)
        .args(args)
        .output()
        .expect("running tools/clear-stale-registrations");
    let err = stderr(&out);
    assert!(
        out.status.success(),
        "clear-stale-registrations {args:?}: {err}"
    );
    err
}

/// An attached instance, detached when the test ends however it ends.
pub struct Attached {
    pub name: String,
}

impl Attached {
    pub fn new(name: &str, extra: &[&str]) -> Attached {
        Attached::of("dctcp", name, extra)
    }

    /// `loader attach --algo <algo> --name <name> <extra>`.
    pub fn of(algo: &str, name: &str, extra: &[&str]) -> Attached {
        clear_stale(name);
        let mut args = vec!["attach", "--algo", algo, "--name", name];
        args.extend_from_slice(extra);
        loader_ok(&args);
        Attached {
            name: name.to_string(),
        }
    }

    pub fn fallback(&self) -> String {
        format!("{}_reno", self.name)
    }

    /// This instance's entry in `loader list --json`.
    pub fn listed(&self) -> Value {
        let list: Value = serde_json::from_str(&loader_ok(&["list", "--json"])).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == self.name.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{} not in loader list: {list}", self.name))
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = loader(&["detach", &self.name]);
    }
}

/// Two namespaces joined by a veth pair: client 198.18.0.1, server 198.18.0.2.
pub struct Pair {
    pub client: Netns,
    pub server: Netns,
    pub client_if: String,
    pub server_if: String,
    _prefix: Prefix,
}

impl Pair {
    pub fn new() -> Pair {
        let p = Prefix::unique().unwrap();
        let client = Netns::create(&p.ns("cl")).unwrap();
        let server = Netns::create(&p.ns("sv")).unwrap();
        let veth = Veth::create(
            &client,
            &p.ifname("c"),
            &format!("{CLIENT_ADDR}/24"),
            &server,
            &p.ifname("s"),
            &format!("{SERVER_ADDR}/24"),
        )
        .unwrap();
        Pair {
            client,
            server,
            client_if: veth.a,
            server_if: veth.b,
            _prefix: p,
        }
    }
}

impl Pair {
    /// A segment per packet and an ACK per two segments: many ACKs.
    pub fn offloads_off(&self) {
        for (ns, dev) in [
            (&self.client, &self.client_if),
            (&self.server, &self.server_if),
        ] {
            let st = std::process::Command::new("ip")
                .args(["netns", "exec", ns.name(), "ethtool", "-K", dev])
                .args(["tso", "off", "gso", "off", "gro", "off"])
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(st.success(), "ethtool -K {dev}");
        }
    }
}

/// What one end of a transfer saw.
#[derive(Debug)]
pub struct EndReport {
    pub bytes: u64,
    /// TCP_CONGESTION right after the connection was set up, and at the end.
    pub ca_at_start: String,
    pub ca_at_end: String,
}

/// A client-to-server bulk transfer in two halves: the client sends
/// `first` bytes, reports on `paused`, waits for [`Transfer::resume`], then
/// sends `second` bytes and closes.
pub struct Transfer {
    pub paused: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
    client: JoinHandle<std::io::Result<std::io::Result<EndReport>>>,
    server: JoinHandle<std::io::Result<std::io::Result<EndReport>>>,
}

pub const PORT: u16 = 5201;

fn send_bytes(s: &mut Socket, mut n: u64) -> std::io::Result<()> {
    let buf = vec![0x5au8; 1 << 20];
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        s.write_all(&buf[..k])?;
        n -= k as u64;
    }
    Ok(())
}

impl Transfer {
    /// `client_ca`/`server_ca`: TCP_CONGESTION of the client socket (before
    /// connect) and of the listener (None: the namespace's default).
    pub fn start(
        pair: &Pair,
        client_ca: &str,
        server_ca: Option<&str>,
        first: u64,
        second: u64,
    ) -> Transfer {
        Transfer::start_on(pair, PORT, client_ca, server_ca, first, second)
    }

    /// As `start`, the server listening on `port` (one per transfer when
    /// several run at once).
    pub fn start_on(
        pair: &Pair,
        port: u16,
        client_ca: &str,
        server_ca: Option<&str>,
        first: u64,
        second: u64,
    ) -> Transfer {
        let to: SocketAddr = format!("{SERVER_ADDR}:{port}").parse().unwrap();
        Transfer::between(
            &pair.client,
            &pair.server,
            to,
            client_ca,
            server_ca,
            first,
            second,
        )
    }

    /// As `start`, from namespace `client` to `to`, served in `server` (a
    /// lab's star: its senders and receiver).
    pub fn between(
        client: &Netns,
        server: &Netns,
        to: SocketAddr,
        client_ca: &str,
        server_ca: Option<&str>,
        first: u64,
        second: u64,
    ) -> Transfer {
        let (ready_tx, ready_rx) = mpsc::channel();
        let server_ca = server_ca.map(str::to_string);
        let server = server
            .spawn(move || -> std::io::Result<EndReport> {
                let addr = to;
                let l = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
                l.set_reuse_address(true)?;
                if let Some(ca) = &server_ca {
                    sockopt::set_congestion(l.as_fd(), ca)?;
                }
                l.bind(&addr.into())?;
                l.listen(8)?;
                ready_tx.send(()).unwrap();
                let (mut s, _) = l.accept()?;
                let ca_at_start = sockopt::congestion(s.as_fd())?;
                let mut buf = vec![0u8; 1 << 20];
                let mut bytes = 0u64;
                loop {
                    match s.read(&mut buf)? {
                        0 => break,
                        n => bytes += n as u64,
                    }
                }
                let ca_at_end = sockopt::congestion(s.as_fd())?;
                Ok(EndReport {
                    bytes,
                    ca_at_start,
                    ca_at_end,
                })
            })
            .unwrap();
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server listening");

        let (paused_tx, paused_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel::<()>();
        let client_ca = client_ca.to_string();
        let client = client
            .spawn(move || -> std::io::Result<EndReport> {
                let addr = to;
                let mut s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
                sockopt::set_congestion(s.as_fd(), &client_ca)?;
                s.connect(&addr.into())?;
                let ca_at_start = sockopt::congestion(s.as_fd())?;
                send_bytes(&mut s, first)?;
                let _ = paused_tx.send(());
                let _ = resume_rx.recv_timeout(Duration::from_secs(60));
                send_bytes(&mut s, second)?;
                let ca_at_end = sockopt::congestion(s.as_fd())?;
                s.shutdown(Shutdown::Write)?;
                let mut sink = [0u8; 16];
                while s.read(&mut sink)? > 0 {}
                Ok(EndReport {
                    bytes: first + second,
                    ca_at_start,
                    ca_at_end,
                })
            })
            .unwrap();
        Transfer {
            paused: paused_rx,
            resume: resume_tx,
            client,
            server,
        }
    }

    pub fn wait_paused(&self) {
        self.paused
            .recv_timeout(Duration::from_secs(60))
            .expect("client sent its first half");
    }

    pub fn resume(&self) {
        let _ = self.resume.send(());
    }

    /// (client, server) reports.
    pub fn finish(self) -> (EndReport, EndReport) {
        self.resume();
        let c = self.client.join().unwrap().unwrap().expect("client");
        let s = self.server.join().unwrap().unwrap().expect("server");
        (c, s)
    }
}

/// `loader flows --json` entries whose algorithm is `name`.
pub fn flows_of(name: &str) -> Vec<Value> {
    let all: Value = serde_json::from_str(&loader_ok(&["flows", "--json"])).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .filter(|f| f["algorithm"] == name)
        .cloned()
        .collect()
}

/// Counts IPv4 TCP segments with payload sent to `port` on `dev` inside `ns`
/// until `stop`, and how many of them carried ECT or CE in the IP header.
pub fn count_ecn_marks(
    ns: &Netns,
    dev: &str,
    port: u16,
    stop: Arc<AtomicBool>,
) -> JoinHandle<std::io::Result<(u64, u64)>> {
    let counts = count_codepoints(ns, dev, port, stop);
    std::thread::spawn(move || {
        counts
            .join()
            .unwrap()
            .map(|[not_ect, ect1, ect0, ce]| (not_ect + ect1 + ect0 + ce, ect1 + ect0 + ce))
    })
}

/// Data segments to `port` captured on `dev` by ECN field: [Not-ECT,
/// ECT(1), ECT(0), CE].
pub fn count_codepoints(
    ns: &Netns,
    dev: &str,
    port: u16,
    stop: Arc<AtomicBool>,
) -> JoinHandle<std::io::Result<[u64; 4]>> {
    let dev = dev.to_string();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let handle = ns
        .spawn(move || -> [u64; 4] {
            let sock = Socket::new(
                Domain::PACKET,
                Type::RAW,
                Some(Protocol::from(i32::from((libc::ETH_P_IP as u16).to_be()))),
            )
            .expect("packet socket");
            sock.bind_device(Some(dev.as_bytes()))
                .expect("bind to device");
            sock.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            // Segments are up to 64 KB with GSO; a deep buffer keeps more of them.
            let _ = sock.set_recv_buffer_size(32 << 20);
            ready_tx.send(()).unwrap();
            let mut counts = [0u64; 4];
            let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 65536];
            while !stop.load(Ordering::Relaxed) {
                let Ok(n) = sock.recv(&mut buf) else { continue };
                // SAFETY: recv initialised the first n bytes.
                let pkt: Vec<u8> = buf[..n]
                    .iter()
                    .map(|b| unsafe { b.assume_init() })
                    .collect();
                let ip = &pkt[14..];
                if ip.len() < 40 || ip[9] != 6 {
                    continue;
                }
                let ihl = usize::from(ip[0] & 0xf) * 4;
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                let tcp = &ip[ihl..];
                let doff = usize::from(tcp[12] >> 4) * 4;
                if u16::from_be_bytes([tcp[2], tcp[3]]) != port || total <= ihl + doff {
                    continue;
                }
                counts[usize::from(ip[1] & 0x3)] += 1;
            }
            counts
        })
        .unwrap();
    // Capturing before the caller starts the traffic.
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("capture socket ready");
    handle
}
