//! One agent at fleet scale (prints figures; not a timed test). Run: `cargo bench --bench fleet`.
//!
//! `llm-canary run` (release build) drives 1,000 (probe, target) pairs a minute against the sim
//! (in this process, on its own runtime): 50 probes on 20 targets, each probe firing on its own
//! second of the minute. It runs twice, once pushing to a real Pushgateway (`min_interval: 5s`)
//! and once remote-writing to a real Prometheus (`interval: 15s`), and prints for each: CPU
//! per run, RSS, TTFT error (the agent's TTFT minus the sim's own time from receiving the
//! request to writing the first content chunk, so it includes connecting over loopback), and
//! missed schedules; for remote-write also the samples per second into the store, for the push
//! the size of one push and the gateway's own RSS.
//!
//! `LLM_CANARY_BENCH_SECS` sets the probing time per mode (default 120; the README's figures
//! are 600); `LLM_CANARY_FLEET_MODE=push` or `remote-write` runs one mode only.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use llm_canary::testing::sim::Sim;

mod support;
use support::{cpu_seconds, load_average, status_kib};

const TARGETS: usize = 20;
const PROBES: usize = 50;

/// A helper process (gateway, receiver, the daemon), killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get(rt: &tokio::runtime::Runtime, url: &str) -> Option<String> {
    rt.block_on(async {
        let r = reqwest::get(url).await.ok()?;
        r.status().is_success().then_some(())?;
        r.text().await.ok()
    })
}

fn wait_ready(rt: &tokio::runtime::Runtime, url: &str) {
    let start = Instant::now();
    while get(rt, url).is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "{url} not ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The sum of every sample of `metric` in a text exposition.
fn total(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn quantiles(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "no samples".into();
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| llm_canary::testing::timeline::nearest_rank(&v, p);
    format!(
        "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} runs)",
        q(0.5),
        q(0.99),
        v[v.len() - 1],
        v.len()
    )
}

/// The second of the minute probe `i` fires on.
fn second_of(i: usize) -> i64 {
    (i * 60 / PROBES) as i64
}

/// Starts the output's server; returns it, the config's output section and its base URL.
fn start_output(
    rt: &tokio::runtime::Runtime,
    mode: &str,
    dir: &std::path::Path,
) -> (Proc, String, String) {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = if mode == "push" {
        Command::new("/usr/bin/prometheus-pushgateway")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--persistence.file=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-pushgateway (Debian package prometheus-pushgateway)")
    } else {
        std::fs::write(dir.join("prometheus.yml"), "global: {}\n").unwrap();
        Command::new("/usr/bin/prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package prometheus)")
    };
    let p = Proc(child);
    wait_ready(rt, &format!("{base}/-/ready"));
    let section = if mode == "push" {
        format!("push: {{url: \"{base}\", min_interval: 5s}}\n")
    } else {
        // One sampling is about 116,000 samples: the queue holds four.
        format!("remote_write: {{url: \"{base}/api/v1/write\", interval: 15s, queue: {{max_samples: 500000}}}}\n")
    };
    (p, section, base)
}

fn run_mode(rt: &tokio::runtime::Runtime, sim: &Sim, mode: &str, secs: u64) {
    let tmp = tempfile::Builder::new()
        .prefix("llm-canary-bench-fleet-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("probes")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    let (output, section, output_url) = start_output(rt, mode, dir);
    let port = free_port();
    let mut agent = format!(
        // One results file for the whole run: rotation would hide runs from the count.
        "agent: {{name: fleet-bench, labels: {{region: bench}}, concurrency: 64, listen: 127.0.0.1:{port}, results_log: results.jsonl, results_log_max_bytes: 4294967296}}\n{section}targets:\n"
    );
    for t in 0..TARGETS {
        agent.push_str(&format!("  - {{name: t{t}, base_url: \"{}\", model: m, server: vllm, labels: {{model_version: \"1\", cluster: c1}}}}\n", sim.base_url("healthy,ttft=20ms,itl=5ms")));
    }
    std::fs::write(dir.join("llm-canary.yaml"), agent).unwrap();
    for p in 0..PROBES {
        std::fs::write(
            dir.join(format!("probes/p{p}.yaml")),
            format!("name: p{p}\nschedule: \"{} * * * * *\"\nprompt: q.txt\nmax_tokens: 64\nchecks: {{expect: \"(?i)paris\"}}\n", second_of(p)),
        )
        .unwrap();
    }
    std::fs::write(dir.join("prompts/q.txt"), "What is the capital of France?").unwrap();

    let daemon = Proc(
        Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args(["run", "-c"])
            .arg(dir.join("llm-canary.yaml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = daemon.0.id();
    wait_ready(rt, &format!("http://127.0.0.1:{port}/healthz"));
    let idle = status_kib(pid, "VmRSS:").unwrap_or(0);
    let cpu0 = cpu_seconds(pid).unwrap_or(0.0);
    let started_at = jiff::Timestamp::now();
    let start = Instant::now();
    let (mut peak, mut last) = (idle, idle);
    let mut loads = Vec::new();
    let mut server_ttft: HashMap<String, f64> = HashMap::new();
    let mut next_harvest = Instant::now() + Duration::from_secs(60);
    // The sim keeps its last 10,000 requests: read them every minute, before they roll over.
    let harvest = |server_ttft: &mut HashMap<String, f64>| {
        let text = get(rt, &format!("http://{}/_sim/requests", sim.addr())).unwrap_or_default();
        let seen: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        for s in seen {
            let id = s["headers"]
                .as_array()
                .and_then(|h| {
                    h.iter().find(|kv| {
                        kv[0]
                            .as_str()
                            .is_some_and(|k| k.eq_ignore_ascii_case("x-request-id"))
                    })
                })
                .and_then(|kv| kv[1].as_str().map(str::to_string));
            if let (Some(id), Some(t)) = (id, s["server_ttft_ms"].as_f64()) {
                server_ttft.insert(id, t);
            }
        }
    };
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(r) = status_kib(pid, "VmRSS:") {
            peak = peak.max(r);
            last = r;
        }
        if Instant::now() >= next_harvest {
            harvest(&mut server_ttft);
            loads.push(load_average());
            next_harvest += Duration::from_secs(60);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid).unwrap_or(0.0) - cpu0;
    let own = get(rt, &format!("http://127.0.0.1:{port}/metrics")).unwrap_or_default();
    let output_rss = status_kib(output.0.id(), "VmRSS:").unwrap_or(0);
    // The gateway's page is every pushed series; the receiver's is its own health.
    let output_text = get(rt, &format!("{output_url}/metrics")).unwrap_or_default();
    drop(daemon);
    harvest(&mut server_ttft);
    loads.push(load_average());

    let runs = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    let fired = support::fired_seconds(&runs);
    let (mut ok, mut errors) = (0, Vec::new());
    for l in runs.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        ok += usize::from(v["outcome"] == "ok");
        if let (Some(ours), Some(theirs)) = (
            v["ttft_ms"].as_f64(),
            v["request_id"].as_str().and_then(|id| server_ttft.get(id)),
        ) {
            errors.push(ours - theirs);
        }
    }
    // Every fire time of every pair inside the window, a second clear of either edge.
    let (from, to) = (
        started_at.as_second() + 1,
        started_at.as_second() + wall as i64 - 2,
    );
    let (mut expected, mut missed) = (0, 0);
    for p in 0..PROBES {
        for t in 0..TARGETS {
            let seen = fired.get(&(format!("p{p}"), format!("t{t}")));
            for s in (from..to).filter(|s| s.rem_euclid(60) == second_of(p)) {
                expected += 1;
                missed += usize::from(!seen.is_some_and(|f| f.contains(&s)));
            }
        }
    }
    let n = runs.lines().count();
    println!(
        "{mode}: {} pairs a minute for {wall:.0} s: {n} runs ({ok} ok); load average (1 min) during it: {}",
        TARGETS * PROBES,
        loads.join(", ")
    );
    println!(
        "  CPU {cpu:.2} s = {:.2} % of one core; {:.3} ms of CPU per run",
        100.0 * cpu / wall,
        1000.0 * cpu / n.max(1) as f64
    );
    println!(
        "  RSS: idle {:.1} MiB, peak {:.1} MiB, at the end {:.1} MiB",
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        last as f64 / 1024.0
    );
    println!("  TTFT error (agent minus sim): {}", quantiles(errors));
    println!(
        "  schedules: {expected} fires expected in the window, {missed} missed; skipped (previous run in flight): {}",
        total(&own, "llm_canary_skipped_runs_total")
    );
    let series = own.lines().filter(|l| l.starts_with("llm_canary_")).count();
    if mode == "push" {
        println!(
            "  registry: {series} series; gateway: {:.1} MiB of exposition text, RSS {:.1} MiB; push failures {}",
            output_text.len() as f64 / (1024.0 * 1024.0),
            output_rss as f64 / 1024.0,
            total(&own, "llm_canary_push_failures_total")
        );
    } else {
        let sent = total(&own, "llm_canary_remote_write_samples_sent_total");
        println!(
            "  registry: {series} series; remote-write: {sent} samples sent = {:.0} samples/s, dropped {}, failures {}; receiver: {} head series, RSS {:.1} MiB",
            sent / wall,
            total(&own, "llm_canary_remote_write_samples_dropped_total"),
            total(&own, "llm_canary_remote_write_failures_total"),
            total(&output_text, "prometheus_tsdb_head_series"),
            output_rss as f64 / 1024.0
        );
    }
}

fn main() {
    let Some(secs) = support::bench_secs(120) else {
        return;
    };
    let modes = match std::env::var("LLM_CANARY_FLEET_MODE").as_deref() {
        Ok("push") => vec!["push"],
        Ok("remote-write") => vec!["remote-write"],
        _ => vec!["push", "remote-write"],
    };
    let (rt, sim) = Sim::start_apart().unwrap();
    println!("load average (1 min) at the start: {}", load_average());
    for mode in modes {
        run_mode(&rt, &sim, mode, secs);
    }
    drop(sim);
}
