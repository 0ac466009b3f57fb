//! Footprint of the daemon (prints figures; not a timed test). Run: `cargo bench --bench daemon`.
//!
//! Starts `llm-canary run` (release build) with 100 (probe, target) pairs firing every 15 s
//! against the sim (in this process), over a week of history for every pair in a rotated
//! results log (the status page's memory full), and samples the daemon's RSS and CPU time from
//! /proc: idle RSS once the history is rebuilt and before the first fire, peak and final RSS
//! while probing (with the status page and its JSON fetched every 10 s), and average CPU use.
//! `LLM_CANARY_BENCH_SECS` sets the probing time (default 600). `LLM_CANARY_BENCH_DAYS=90` seeds
//! 90 days instead of a week (hourly runs before the week): the daily rollups and the incidents
//! full, the incident list at its cap, and `/api/v1/incidents` and `/feed.atom` fetched too.
//! `LLM_CANARY_BENCH_OTLP=1` also exports OTLP metrics and every run's span (`otlp: {traces: true}`) every 15 s, to the sim,
//! which refuses them (404): the agent encodes and sends as it would to a collector.
//! `LLM_CANARY_BENCH_STORE=1` keeps the history in a status store (`status.store`): a first
//! start finds no store, replays the log and writes it (as after an upgrade) and is stopped;
//! the measured daemon then starts from the store, and the bytes it writes per minute while
//! probing (`/proc/<pid>/io`) and the store's size are printed too. Without it, the same figures
//! come from the replay alone, to set beside them.
//! `LLM_CANARY_BENCH_SMAPS=1` prints the idle daemon's resident memory by mapping, and how much
//! of the binary's code is resident; `LLM_CANARY_BENCH_COLD=1` drops the binary from the page
//! cache before starting it, as after a reboot.
//!
//! The same run measures Debian's `prometheus-blackbox-exporter` (its default config,
//! `/etc/prometheus/blackbox.yml`) idle beside it, split the same way, as the footprint to stay
//! under; the bench fails and says what to install when it is missing.
//!
//! Soak mode (`scripts/soak`): `LLM_CANARY_SOAK=1` fires 20 pairs every second instead, and
//! also reports RSS growth after a warm-up minute, open file descriptors over time, and missed
//! schedules (fires the results log lacks).

use std::time::{Duration, Instant};

use llm_canary::testing::sim::Sim;

mod support;
use support::{cpu_seconds, open_fds, status_kib};

/// `days` of one pair's history: every 5 minutes for the last day, hourly before that, so
/// every slot of the status history holds something; a failure every 11th run.
fn seed_history(out: &mut Vec<(i64, String)>, probe: &str, target: &str, now: i64, days: i64) {
    let mut at: Vec<i64> = (0..288).map(|i| now - 300 * (i + 1)).collect();
    at.extend((24..24 * days).map(|h| now - 3600 * h - 60));
    at.sort();
    for (i, t) in at.into_iter().enumerate() {
        let ok = i % 11 != 0;
        let ts = jiff::Timestamp::from_second(t).unwrap();
        out.push((t, format!(
            "{{\"probe\":\"{probe}\",\"target\":\"{target}\",\"request_id\":\"seed-{i}\",\"started_at\":\"{ts}\",\"outcome\":\"{}\",\"success\":{ok},\"http_status\":{},\"ttft_ms\":{},\"tokens_per_second\":85.5,\"warmup\":false,\"maintenance\":false,\"trace_id\":\"{t:032x}\",\"error\":{}}}\n",
            if ok { "ok" } else { "http_error" },
            if ok { 200 } else { 503 },
            40 + i % 50,
            if ok { "null".to_string() } else { format!("\"HTTP 503 overloaded: the replica is draining ({i})\"") },
        )));
    }
}

/// The idle daemon's resident memory by mapping (`LLM_CANARY_BENCH_SMAPS=1`): the binary, each
/// library, the heap, the stacks and the other anonymous mappings.
/// Also how much of the binary's code (its executable mapping) is resident.
fn print_mappings(pid: u32) {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    let (mut name, mut perms, mut size) = (String::new(), String::new(), 0);
    let binary = env!("CARGO_BIN_EXE_llm-canary");
    let kib = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("Size:") => size = kib(f.next()),
            Some("Rss:") => {
                let rss = kib(f.next());
                *by.entry(name.clone()).or_default() += rss;
                if name == binary && perms.contains('x') {
                    println!("    the binary's code: {rss} of {size} KiB resident");
                }
            }
            Some(first)
                if first.contains('-') && first.ends_with(|c: char| c.is_ascii_hexdigit()) =>
            {
                perms = f.next().unwrap_or_default().to_string();
                name = f.nth(3).unwrap_or("[anonymous]").to_string();
            }
            _ => {}
        }
    }
    let mut rows: Vec<_> = by.into_iter().filter(|(_, kib)| *kib > 0).collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    for (name, kib) in rows {
        println!("    {kib:>6} KiB  {name}");
    }
}

/// Drops a file's clean pages from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`).
fn evict(path: &str) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: the descriptor is open for the call; the advice only drops clean cached pages.
    let err = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(err, 0, "posix_fadvise");
}

/// One plain HTTP/1.0 GET; the body's length (0 when nothing answers).
fn fetch(port: u16, path: &str) -> usize {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(s, "GET {path} HTTP/1.0\r\nHost: bench\r\n\r\n");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf.len()
}

/// Debian's blackbox_exporter with its default config, idle on a free loopback port after one
/// scrape of its own /metrics: (RSS, file-backed, anonymous) in KiB.
fn blackbox_exporter_idle() -> (u64, u64, u64) {
    const BIN: &str = "/usr/bin/prometheus-blackbox-exporter";
    const CONFIG: &str = "/etc/prometheus/blackbox.yml";
    assert!(
        std::path::Path::new(BIN).exists() && std::path::Path::new(CONFIG).exists(),
        "{BIN} is missing: apt-get install prometheus-blackbox-exporter (the footprint this bench compares with)"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(BIN)
        .arg(format!("--config.file={CONFIG}"))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = Instant::now();
    while fetch(port, "/metrics") == 0 && up.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id();
    let figures = (
        status_kib(pid, "VmRSS:").unwrap_or(0),
        status_kib(pid, "RssFile:").unwrap_or(0),
        status_kib(pid, "RssAnon:").unwrap_or(0),
    );
    let _ = child.kill();
    let _ = child.wait();
    figures
}

/// `llm-canary run` on the bench's folder, its output dropped.
fn spawn_daemon(dir: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["run", "-c"])
        .arg(dir.join("llm-canary.yaml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Bytes the process passed to write() calls and bytes it sent to the block layer
/// (`/proc/<pid>/io`'s `wchar` and `write_bytes`).
fn written(pid: u32) -> Option<(u64, u64)> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("wchar:")?, field("write_bytes:")?))
}

fn main() {
    let Some(secs) = support::bench_secs(600) else {
        return;
    };
    let bbe = blackbox_exporter_idle();
    let soak = std::env::var_os("LLM_CANARY_SOAK").is_some();
    let (n_targets, n_probes, schedule) = if soak {
        (4, 5, "* * * * * *")
    } else {
        (10, 10, "*/15 * * * * *")
    };
    let (_rt, sim) = Sim::start_apart().unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("llm-canary-bench-daemon-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("probes")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut agent = format!(
        // One results file large enough for the whole run: rotation would hide runs from the
        // count. The week of history sits in the rotated file before it.
        "agent: {{name: bench, concurrency: 16, listen: \"127.0.0.1:{port}\", results_log: results.jsonl, results_log_max_bytes: 4294967296}}\ntargets:\n",
    );
    for t in 0..n_targets {
        agent.push_str(&format!("  - {{name: t{t}, base_url: \"{}\", model: m, server: vllm, labels: {{model_version: \"1\"}}}}\n", sim.base_url("healthy")));
    }
    let otlp = std::env::var_os("LLM_CANARY_BENCH_OTLP").is_some();
    if otlp {
        agent.push_str(&format!(
            "otlp: {{endpoint: \"http://{}\", traces: true}}\n",
            sim.addr()
        ));
    }
    let store = std::env::var_os("LLM_CANARY_BENCH_STORE").is_some();
    if store {
        agent.push_str("status: {store: status.db}\n");
    }
    std::fs::write(dir.join("llm-canary.yaml"), agent).unwrap();
    for p in 0..n_probes {
        std::fs::write(
            dir.join(format!("probes/p{p}.yaml")),
            format!("name: p{p}\nschedule: \"{schedule}\"\nprompt: q.txt\nmax_tokens: 64\nchecks: {{expect: \"(?i)paris\"}}\n"),
        )
        .unwrap();
    }
    std::fs::write(dir.join("prompts/q.txt"), "What is the capital of France?").unwrap();
    let now = jiff::Timestamp::now().as_second();
    let days: i64 = std::env::var("LLM_CANARY_BENCH_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(7);
    let mut lines = Vec::new();
    for p in 0..n_probes {
        for t in 0..n_targets {
            seed_history(&mut lines, &format!("p{p}"), &format!("t{t}"), now, days);
        }
    }
    // In the order the runs started, as a daemon writes them.
    lines.sort_by_key(|l| l.0);
    let seeded = lines.len();
    let history: String = lines.into_iter().map(|l| l.1).collect();
    std::fs::write(dir.join("results.jsonl.1"), &history).unwrap();
    drop(history);

    // With a store: the first start replays the log into it, as after an upgrade.
    let mut upgrade = None;
    if store {
        let started = Instant::now();
        let mut first = spawn_daemon(dir);
        while fetch(port, "/healthz") == 0 && started.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(50));
        }
        upgrade = Some(started.elapsed().as_secs_f64());
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &first.id().to_string()])
            .status();
        let _ = first.wait();
    }
    let logged_before = std::fs::metadata(dir.join("results.jsonl")).map_or(0, |m| m.len());
    let lines_before =
        std::fs::read_to_string(dir.join("results.jsonl")).map_or(0, |t| t.lines().count());
    // Start just after a fire instant of "*/15", so that idle is measured before the first fire.
    if !soak {
        let into = jiff::Timestamp::now().as_millisecond().rem_euclid(15_000);
        std::thread::sleep(Duration::from_millis((15_000 - into + 200) as u64));
    }
    // As after a reboot: the binary's pages out of the page cache, read again as it runs.
    if std::env::var_os("LLM_CANARY_BENCH_COLD").is_some() {
        evict(env!("CARGO_BIN_EXE_llm-canary"));
    }
    let mut child = spawn_daemon(dir);
    let pid = child.id();
    // Idle: the history is rebuilt (the endpoints answer only after it) and nothing has fired.
    let rebuilt = Instant::now();
    while fetch(port, "/healthz") == 0 && rebuilt.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let rebuild_secs = rebuilt.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    let fired = std::fs::metadata(dir.join("results.jsonl")).map_or(0, |m| m.len()) > logged_before;
    let idle = status_kib(pid, "VmRSS:").unwrap_or(0);
    // Mapped code and libraries (file-backed) against the heap and stacks (anonymous).
    let idle_file = status_kib(pid, "RssFile:").unwrap_or(0);
    let idle_anon = status_kib(pid, "RssAnon:").unwrap_or(0);
    if std::env::var_os("LLM_CANARY_BENCH_SMAPS").is_some() {
        print_mappings(pid);
    }
    let (mut page_bytes, mut json_bytes, mut last_fetch) = (0, 0, Instant::now());
    let (mut incidents_bytes, mut feed_bytes) = (0, 0);
    // The daemon's CPU time spent answering the page and the JSON, apart from probing.
    let mut fetch_cpu = 0.0;
    let cpu0 = cpu_seconds(pid).unwrap_or(0.0);
    let io0 = written(pid);
    let start = Instant::now();
    let started_at = jiff::Timestamp::now();
    let (mut peak, mut last) = (idle, idle);
    let (mut after_warmup, mut fds_after_warmup, mut fds_max) = (None, None, 0);
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(250));
        if last_fetch.elapsed() >= Duration::from_secs(10) {
            let before = cpu_seconds(pid).unwrap_or(0.0);
            page_bytes = fetch(port, "/");
            json_bytes = fetch(port, "/api/v1/status");
            if days > 7 {
                incidents_bytes = fetch(port, "/api/v1/incidents");
                feed_bytes = fetch(port, "/feed.atom");
            }
            fetch_cpu += cpu_seconds(pid).unwrap_or(0.0) - before;
            last_fetch = Instant::now();
        }
        if let Some(r) = status_kib(pid, "VmRSS:") {
            peak = peak.max(r);
            last = r;
        }
        let fds = open_fds(pid).unwrap_or(0);
        fds_max = fds_max.max(fds);
        if after_warmup.is_none() && start.elapsed() > Duration::from_secs(60) {
            after_warmup = Some(last);
            fds_after_warmup = Some(fds);
        }
    }
    let fds_end = open_fds(pid).unwrap_or(0);
    let cpu = cpu_seconds(pid).unwrap_or(0.0) - cpu0;
    let io1 = written(pid);
    let wall = start.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    let runs = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    let ok = runs
        .lines()
        .skip(lines_before)
        .filter(|l| l.contains("\"outcome\":\"ok\""))
        .count();
    println!(
        "daemon, {} pairs firing \"{schedule}\" for {wall:.0} s{}: {} runs ({ok} ok)",
        n_targets * n_probes,
        if otlp {
            ", OTLP metrics and spans on"
        } else {
            ""
        },
        runs.lines().count() - lines_before
    );
    if let Some(u) = upgrade {
        let size =
            |f: &str| std::fs::metadata(dir.join(f)).map_or(0, |m| m.len()) as f64 / 1048576.0;
        println!(
            "  status store: first start (replay of the log, written to the store) {u:.1} s to the first answer; start from the store {rebuild_secs:.1} s; store {:.2} MiB + write-ahead log {:.2} MiB at the end",
            size("status.db"),
            size("status.db-wal")
        );
    }
    if let (Some(a), Some(b)) = (io0, io1) {
        println!(
            "  writes while probing: {:.0} KiB a minute through write() (results log{}), {:.0} KiB a minute reaching the block layer",
            (b.0 - a.0) as f64 / 1024.0 / (wall / 60.0),
            if store { " and status store" } else { "" },
            (b.1 - a.1) as f64 / 1024.0 / (wall / 60.0)
        );
    }
    println!(
        "  status history: {seeded} runs of {days} days rebuilt in {rebuild_secs:.1} s (to the first answer){}; status page {:.0} KiB, JSON {:.0} KiB",
        if fired { ", a run had fired already" } else { "" },
        page_bytes as f64 / 1024.0,
        json_bytes as f64 / 1024.0
    );
    if days > 7 {
        println!(
            "  /api/v1/incidents {:.0} KiB, /feed.atom {:.0} KiB",
            incidents_bytes as f64 / 1024.0,
            feed_bytes as f64 / 1024.0
        );
    }
    println!(
        "  idle RSS {:.1} MiB (file-backed {:.1}, anonymous {:.1}); while probing: peak {:.1} MiB, at the end {:.1} MiB",
        idle as f64 / 1024.0,
        idle_file as f64 / 1024.0,
        idle_anon as f64 / 1024.0,
        peak as f64 / 1024.0,
        last as f64 / 1024.0
    );
    println!(
        "  beside it, blackbox_exporter idle (default config): RSS {:.1} MiB (file-backed {:.1}, anonymous {:.1})",
        bbe.0 as f64 / 1024.0,
        bbe.1 as f64 / 1024.0,
        bbe.2 as f64 / 1024.0
    );
    println!(
        "  CPU {cpu:.2} s = {:.3} % of one core on average, of which answering the page and the JSON {fetch_cpu:.2} s",
        100.0 * cpu / wall
    );
    if let (Some(w), Some(f)) = (after_warmup, fds_after_warmup) {
        println!(
            "  after the first minute: RSS {:.1} MiB -> {:.1} MiB at the end (growth {:+.2} MiB); open fds {f} -> {fds_end} (max {fds_max})",
            w as f64 / 1024.0,
            last as f64 / 1024.0,
            (last as f64 - w as f64) / 1024.0
        );
    }
    if soak {
        // Every pair fires once a second: count the whole seconds of the window each one missed.
        let per_pair = support::fired_seconds(&runs);
        let (from, to) = (
            started_at.as_second() + 2,
            started_at.as_second() + wall as i64 - 2,
        );
        let window = (to - from) as usize;
        let expected = window * n_targets * n_probes;
        let missed: usize = per_pair
            .values()
            .map(|secs| (from..to).filter(|s| !secs.contains(s)).count())
            .sum::<usize>()
            + (n_targets * n_probes - per_pair.len()) * window;
        println!("  schedules: {expected} fires expected in the window, {missed} missed");
    }
    drop(sim);
}
