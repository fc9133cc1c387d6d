//! `loader serve`: a Prometheus endpoint over every attached instance and
//! every running lab switch. Each scrape reads the pinned maps and walks the
//! sockets then and there (the same readers as `loader list`, `loader flows`
//! and `loader top`), so the endpoint follows instances attached, detached
//! and re-attached under it. Reading an array map is one syscall that takes
//! no lock the BPF programs wait on: a scrape never slows the writers.

pub mod exposition;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tiny_http::{Header, Method, Request, Response, Server};

use crate::flows::{alpha_fraction, Collector};
use crate::instance;
use exposition::{InstanceNow, PragueNow, Snapshot, SwitchNow};

/// Where `loader serve` listens unless told: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9842";
/// The scrape path and the health path (readiness probes).
pub const METRICS_PATH: &str = "/metrics";
pub const HEALTH_PATH: &str = "/healthz";

/// Reads everything one scrape shows. An instance that vanishes between
/// listing and reading is left out (`instance::list` skips it); so is a
/// switch whose pins cannot be read.
pub fn snapshot(flows: &Collector) -> Result<Snapshot> {
    let all = flows.collect(false)?;
    let instances = instance::list()?
        .into_iter()
        .map(|i| {
            let mine = all
                .iter()
                .filter(|f| f.algorithm == i.name && !f.fallback && f.tcp_state == "ESTAB");
            let (mut alphas, mut delivered, mut delivered_ce) = (Vec::new(), 0u64, 0u64);
            let mut prague = (i.algo == "prague").then(PragueNow::default);
            for f in mine {
                if let Some(a) = f.alpha {
                    alphas.push(alpha_fraction(a));
                }
                delivered += u64::from(f.delivered);
                delivered_ce += u64::from(f.delivered_ce);
                if let (Some(now), Some(p)) = (prague.as_mut(), &f.prague) {
                    now.rate_mode += u64::from(p.mode == "rate");
                    now.classic += u64::from(p.classic);
                }
            }
            InstanceNow {
                instance: i,
                alphas,
                delivered,
                delivered_ce,
                prague,
            }
        })
        .collect();
    let switches = tc_qdisc::pins::read_all()
        .into_iter()
        .filter_map(|r| {
            let now = r.now.ok()?;
            Some(SwitchNow {
                prefix: r.prefix,
                queue_packets: now.queue.qlen,
                queue_bytes: now.queue.backlog,
                packets: now.stats.pkts,
                bytes: now.stats.bytes,
                marked: now.stats.marked,
                dropped: now.stats.dropped,
                dualpi2: now.dualpi2,
            })
        })
        .collect();
    Ok(Snapshot {
        instances,
        switches,
    })
}

/// Binds `addr`; the error says what to do about a busy or foreign address.
pub fn bind(addr: SocketAddr) -> Result<Server> {
    Server::http(addr).map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {addr}: {e} (is another `loader serve` or exporter on that port? \
             pick another with --metrics HOST:PORT)"
        )
    })
}

/// Answers requests until `stop` is set: GET /metrics and GET /healthz,
/// 405 for any other method, 404 for any other path.
pub fn serve(server: &Server, stop: &AtomicBool) -> Result<()> {
    let flows = Collector::new()?;
    while !stop.load(Ordering::Relaxed) {
        let Some(req) = server
            .recv_timeout(Duration::from_millis(200))
            .context("accepting a connection")?
        else {
            continue;
        };
        if let Err(e) = answer(req, &flows) {
            // A client that went away mid-answer is its own business.
            tracing::debug!("answering a request: {e:#}");
        }
    }
    Ok(())
}

fn answer(req: Request, flows: &Collector) -> std::io::Result<()> {
    let text = |code: u16, body: &str| {
        Response::from_string(body)
            .with_status_code(code)
            .with_header(header("Content-Type", "text/plain; charset=utf-8"))
    };
    if *req.method() != Method::Get {
        let allow = header("Allow", "GET");
        return req.respond(text(405, "only GET is answered here\n").with_header(allow));
    }
    // The path without a query string (Prometheus may add none, curl may).
    let path = req.url().split('?').next().unwrap_or_default().to_string();
    match path.as_str() {
        METRICS_PATH => match snapshot(flows) {
            Ok(s) => req.respond(
                Response::from_string(exposition::render(&s))
                    .with_header(header("Content-Type", exposition::CONTENT_TYPE)),
            ),
            Err(e) => req.respond(text(500, &format!("reading the maps: {e:#}\n"))),
        },
        HEALTH_PATH => req.respond(text(200, "ok\n")),
        _ => req.respond(text(
            404,
            &format!("not here: GET {METRICS_PATH} or {HEALTH_PATH}\n"),
        )),
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

/// `loader serve`: binds, says where on stdout (a test or a script may bind
/// port 0 and read it back), and serves until Ctrl-C or SIGTERM.
pub fn run(addr: SocketAddr) -> Result<()> {
    dctcp_utils::preflight::require_root("loader serve")?;
    dctcp_utils::preflight::require_btf()?;
    let server = bind(addr)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;
    let local = server
        .server_addr()
        .to_ip()
        .map_or_else(|| addr.to_string(), |a| a.to_string());
    println!("serving http://{local}{METRICS_PATH} (health: {HEALTH_PATH})");
    use std::io::Write as _;
    std::io::stdout().flush()?;
    serve(&server, &stop)
}
