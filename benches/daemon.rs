//! Footprint of the daemon (prints figures; not a timed test). Run: `cargo bench --bench daemon`.
//!
//! Starts `llm-canary run` (release build) with 100 (probe, target) pairs firing every 15 s
//! against the sim (in this process), and samples the daemon's RSS and CPU time from /proc:
//! idle RSS before the first fire, peak and final RSS while probing, and average CPU use.
//! `LLM_CANARY_BENCH_SECS` sets the probing time (default 600).

use std::time::{Duration, Instant};

use llm_canary::sim::Sim;

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().ok()? + f[12].parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs: u64 = std::env::var("LLM_CANARY_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sim = rt.block_on(Sim::start("127.0.0.1:0")).unwrap();
    let dir = std::env::temp_dir().join(format!("llm-canary-bench-daemon-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("probes")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    let mut agent = String::from(
        "agent: {name: bench, concurrency: 16, results_log: results.jsonl}\ntargets:\n",
    );
    for t in 0..10 {
        agent.push_str(&format!("  - {{name: t{t}, base_url: \"{}\", model: m, server: vllm, labels: {{model_version: \"1\"}}}}\n", sim.base_url("healthy")));
    }
    std::fs::write(dir.join("llm-canary.yaml"), agent).unwrap();
    for p in 0..10 {
        std::fs::write(
            dir.join(format!("probes/p{p}.yaml")),
            format!("name: p{p}\nschedule: \"*/15 * * * * *\"\nprompt: q.txt\nmax_tokens: 64\nchecks: {{expect: \"(?i)paris\"}}\n"),
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
    let (mut peak, mut last) = (idle, idle);
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(r) = status_kib(pid, "VmRSS:") {
            peak = peak.max(r);
            last = r;
        }
    }
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
        "daemon, 100 pairs every 15 s for {wall:.0} s: {} runs ({ok} ok)",
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
    let _ = std::fs::remove_dir_all(&dir);
    drop(sim);
}
