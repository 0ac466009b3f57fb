//! The daemon's front door under a hostile client: under a 128-descriptor limit, several hundred
//! connections that send half a request head and never finish it. Probes scheduled meanwhile
//! still succeed, /metrics still answers at once, the daemon stays cheap (CPU and RSS), and
//! every one of those connections is closed by the server: pushed out by newer ones at the cap,
//! or at the header timeout.

use crate::common;

use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::services::{free_port, get, sample, wait_ready};
use llm_canary::testing::listener::Limits;
use llm_canary::testing::sim::Sim;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NOFILE: u32 = 128;
const HALF_OPEN: usize = 300;

/// `llm-canary run` under `prlimit --nofile=N:N`, probing the sim's healthy scenario every second.
fn start(sim: &Sim) -> Daemon {
    assert!(
        std::path::Path::new("/usr/bin/prlimit").exists(),
        "/usr/bin/prlimit is missing: install the Debian package `util-linux`"
    );
    let port = free_port();
    let yaml = format!(
        "agent: {{name: door, listen: \"127.0.0.1:{port}\", concurrency: 4, results_log: results.jsonl}}\n\
         targets:\n  - {{name: sim, base_url: \"{}\", model: m}}\n",
        sim.base_url("healthy")
    );
    Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {connect: 2s, ttft: 3s, stall: 3s, total: 5s}\nchecks: {expect: \"(?i)paris\"}\n"),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &["/usr/bin/prlimit", &format!("--nofile={NOFILE}:{NOFILE}")],
    )
}

/// The daemon's own figures, from /proc and its /metrics.
impl Daemon {
    /// utime + stime of the daemon (prlimit execs it, so the pid is the same), in seconds.
    fn cpu_seconds(&self) -> f64 {
        common::procfs::cpu_seconds(self.child.id()).unwrap()
    }

    fn rss_mib(&self) -> f64 {
        common::procfs::status_kib(self.child.id(), "VmRSS:").unwrap() as f64 / 1024.0
    }

    async fn runs(&self, outcome: &str) -> f64 {
        sample(
            &get(&self.url("/metrics")).await,
            "llm_canary_probe_runs_total",
            &[&format!("outcome=\"{outcome}\"")],
        )
        .unwrap_or(0.0)
    }
}

/// Connects and sends half a request head, never the blank line that ends it.
async fn half_open(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: canary\r\nX-Slow: ")
        .await
        .unwrap();
    s
}

/// Waits until the server closes `s` (end of stream or reset); the instant it did.
async fn closed(mut s: TcpStream) -> Instant {
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b).await {
            Ok(0) | Err(_) => return Instant::now(),
            Ok(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_starve_neither_probes_nor_scrapes() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let d = start(&sim);
    wait_ready(&d.url("/healthz"), Duration::from_secs(20)).await;
    let first_ok = tokio::time::timeout(Duration::from_secs(20), async {
        while d.runs("ok").await < 1.0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    assert!(first_ok.await.is_ok(), "no ok run within 20 s\n{}", d.log());

    let scraper = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ok_before = d.runs("ok").await;
    let cpu_before = d.cpu_seconds();
    let start = Instant::now();

    let addr = format!("127.0.0.1:{}", d.port);
    let mut held = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        held.push(half_open(&addr).await);
    }
    let last_opened = Instant::now();
    let closes: Vec<_> = held.into_iter().map(|s| tokio::spawn(closed(s))).collect();

    // While the last of them still hold their places: scrapes answer at once, probes go on.
    let mut slowest = Duration::ZERO;
    let mut rss_max: f64 = 0.0;
    for _ in 0..8 {
        let t = Instant::now();
        let r = scraper.get(d.url("/metrics")).send().await;
        let took = t.elapsed();
        let r = r.unwrap_or_else(|e| panic!("/metrics failed after {took:?}: {e}\n{}", d.log()));
        assert_eq!(r.status().as_u16(), 200);
        assert!(r
            .text()
            .await
            .unwrap()
            .contains("llm_canary_probe_runs_total"));
        slowest = slowest.max(took);
        rss_max = rss_max.max(d.rss_mib());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Every half-open connection is closed by the server: the newest at the header timeout.
    let header_timeout = Limits::HEADER_TIMEOUT;
    let mut last_close = start;
    for c in closes {
        let at = tokio::time::timeout(header_timeout * 3, c)
            .await
            .expect("a half-open connection was never closed")
            .unwrap();
        last_close = last_close.max(at);
    }
    let newest_held = last_close - last_opened;
    assert!(
        newest_held >= header_timeout - Duration::from_millis(500)
            && newest_held < header_timeout + Duration::from_secs(2),
        "the newest half-open connection was closed after {newest_held:?}, not at the {header_timeout:?} header timeout"
    );

    let window = start.elapsed();
    let cpu = d.cpu_seconds() - cpu_before;
    let ok_runs = d.runs("ok").await - ok_before;
    let connect_errors = d.runs("connect_error").await;
    rss_max = rss_max.max(d.rss_mib());
    eprintln!(
        "front door: {HALF_OPEN} half-open connections under nofile={NOFILE}, window {:.1} s: \
         daemon CPU {cpu:.2} s ({:.1} %), RSS max {rss_max:.1} MiB, slowest /metrics {slowest:?}, \
         ok runs {ok_runs}, connect_error {connect_errors}",
        window.as_secs_f64(),
        100.0 * cpu / window.as_secs_f64()
    );
    assert!(
        ok_runs >= 3.0,
        "only {ok_runs} ok runs in {window:?}\n{}",
        d.log()
    );
    assert_eq!(connect_errors, 0.0, "{}", d.log());
    assert!(
        slowest < Duration::from_secs(1),
        "slowest /metrics {slowest:?}"
    );
    assert!(
        cpu < 0.10 * window.as_secs_f64(),
        "daemon CPU {cpu:.2} s in {window:?}"
    );
    assert!(rss_max < 32.0, "daemon RSS {rss_max:.1} MiB");
}
