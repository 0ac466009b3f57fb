//! Footprint of the daemon (prints figures; not a timed test). Run: `cargo bench --bench daemon`.
//!
//! Starts `llm-canary run` (release build) with 100 (probe, target) pairs firing every 15 s
//! against the sim (in this process), and samples the daemon's RSS and CPU time from /proc:
//! idle RSS before the first fire, peak and final RSS while probing, and average CPU use.
//! `LLM_CANARY_BENCH_SECS` sets the probing time (default 600).
//!
//! Soak mode (`scripts/soak`): `LLM_CANARY_SOAK=1` fires 20 pairs every second instead, and
//! also reports RSS growth after a warm-up minute, open file descriptors over time, and missed
//! schedules (fires the results log lacks).

use std::time::{Duration, Instant};

use llm_canary::sim::Sim;

mod support;
use support::{cpu_seconds, open_fds, status_kib};

fn main() {
    let Some(secs) = support::bench_secs(600) else {
        return;
    };
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
    let mut agent = String::from(
        // One results file large enough for the whole run: rotation would hide runs from the count.
        "agent: {name: bench, concurrency: 16, results_log: results.jsonl, results_log_max_bytes: 4294967296}\ntargets:\n",
    );
    for t in 0..n_targets {
        agent.push_str(&format!("  - {{name: t{t}, base_url: \"{}\", model: m, server: vllm, labels: {{model_version: \"1\"}}}}\n", sim.base_url("healthy")));
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

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["run", "-c"])
        .arg(dir.join("llm-canary.yaml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(500));
    let idle = status_kib(pid, "VmRSS:").unwrap_or(0);
    let cpu0 = cpu_seconds(pid).unwrap_or(0.0);
    let start = Instant::now();
    let started_at = jiff::Timestamp::now();
    let (mut peak, mut last) = (idle, idle);
    let (mut after_warmup, mut fds_after_warmup, mut fds_max) = (None, None, 0);
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(250));
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
    let wall = start.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    let runs = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    let ok = runs
        .lines()
        .filter(|l| l.contains("\"outcome\":\"ok\""))
        .count();
    println!(
        "daemon, {} pairs firing \"{schedule}\" for {wall:.0} s: {} runs ({ok} ok)",
        n_targets * n_probes,
        runs.lines().count()
    );
    println!(
        "  idle RSS {:.1} MiB; while probing: peak {:.1} MiB, at the end {:.1} MiB",
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        last as f64 / 1024.0
    );
    println!(
        "  CPU {cpu:.2} s = {:.3} % of one core on average",
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
