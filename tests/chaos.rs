//! Chaos: every fault scenario of the sim mixed with healthy targets, 50 probes in flight, for
//! a few minutes (`LLM_CANARY_CHAOS_SECS`, default 180). Every run must get its outcome, the
//! healthy targets' TTFT error must stay within the engine's bounds while the others misbehave,
//! memory must stay bounded, and no task or socket may leak. Run with `scripts/chaos`.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::procfs;
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;

/// (scenario, expected outcome); each appears once among the faulty targets.
const FAULTS: [(&str, &str); 25] = [
    ("http-503", "http_error"),
    ("http-429", "http_error"),
    ("http-500", "http_error"),
    ("no-headers", "timeout_ttft"),
    ("role-only", "timeout_ttft"),
    ("slow-first-token,ttft=1500ms", "timeout_ttft"),
    ("stall,stall=1500ms", "stall"),
    ("crawl,itl=300ms", "timeout_total"),
    ("mid-stream-error", "stream_error"),
    ("reset", "stream_interrupted"),
    ("no-done", "stream_interrupted"),
    ("malformed", "malformed_stream"),
    ("garbage", "malformed_stream"),
    ("endless", "oversized"),
    ("huge-line", "oversized"),
    ("empty", "empty_output"),
    ("repetition", "repetition"),
    ("repetition-zh", "repetition"),
    ("truncated", "truncated"),
    ("too-short", "too_short"),
    ("too-long", "too_long"),
    ("mismatch", "pattern_mismatch"),
    ("forbidden", "forbidden_pattern"),
    ("split", "ok"),
    ("crlf", "ok"),
];

/// The machine's own scheduling noise, apart from the agent's work: a thread that sleeps 1 ms
/// at a time and records how late it wakes, until `stop`. When the whole virtual machine is
/// paused (CPU steal, a host's quota), it wakes late like every thread; the agent's own load
/// barely delays it, because the kernel favours a thread that mostly sleeps.
fn noise_sensor(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<f64>> {
    std::thread::spawn(move || {
        let mut late_ms = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(1));
            late_ms.push((t.elapsed().as_secs_f64() - 0.001) * 1000.0);
        }
        late_ms
    })
}

#[test]
fn fifty_probes_of_faults_and_health_for_minutes() {
    let secs: u64 = std::env::var("LLM_CANARY_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180);
    let (_sim_rt, sim) = Sim::start_apart().unwrap();
    let agent_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let mut targets: Vec<(String, String, String)> = FAULTS
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (format!("fault{i}"), s.to_string(), String::new()))
        .collect();
    for i in 0..25 {
        targets.push((
            format!("healthy{i}"),
            "healthy,ttft=30ms,itl=5ms".into(),
            "server: vllm".into(),
        ));
    }
    let refs: Vec<(&str, &str, &str)> = targets
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    let probe = common::PROBE.replace(
        "timeouts: {connect: 1s, ttft: 700ms, stall: 700ms, total: 3s}",
        "timeouts: {connect: 1s, ttft: 700ms, stall: 700ms, total: 2500ms}",
    );
    let (_dir, cfg) = common::config(&sim, &refs, &probe);
    let pid = std::process::id();
    let open_fds = || procfs::open_fds(pid).unwrap();
    let fds_before = open_fds();

    let runner = Arc::new(Runner::new(50));
    let stop_sensor = Arc::new(AtomicBool::new(false));
    let sensor = noise_sensor(stop_sensor.clone());
    let ((busy0, stolen0), own0) = (
        procfs::machine_cpu_seconds().unwrap(),
        procfs::cpu_seconds(pid).unwrap(),
    );
    let start = Instant::now();
    let (mut rounds, mut runs, mut wrong) = (0, 0, Vec::new());
    let mut errors_ms = Vec::new();
    let mut rss = Vec::new();
    while start.elapsed() < Duration::from_secs(secs) {
        let pairs = cfg
            .targets
            .iter()
            .map(|t| (cfg.probes[0].clone(), t.clone()))
            .collect();
        let results = agent_rt.block_on(runner.run_all(pairs));
        for (r, t) in results.iter().zip(&cfg.targets) {
            runs += 1;
            let want = match t.name.strip_prefix("fault") {
                Some(i) => FAULTS[i.parse::<usize>().unwrap()].1,
                None => "ok",
            };
            if r.judged.outcome.as_str() != want {
                wrong.push(format!(
                    "round {rounds}: {} ({}) got {} {:?}, want {want}",
                    t.name, t.base_url, r.judged.outcome, r.judged.error
                ));
            }
            if t.name.starts_with("healthy") {
                errors_ms.push(sim.first_token_error_ms(r).unwrap());
            }
        }
        rss.push(procfs::status_kib(pid, "VmRSS:").unwrap());
        rounds += 1;
    }
    drop(runner);
    let ((busy1, stolen1), own1) = (
        procfs::machine_cpu_seconds().unwrap(),
        procfs::cpu_seconds(pid).unwrap(),
    );
    stop_sensor.store(true, Ordering::Relaxed);
    let mut noise_ms = sensor.join().unwrap();

    // Sockets close once the last run's connections are dropped; tasks end with them.
    let settle = Instant::now();
    while (open_fds() > fds_before || agent_rt.metrics().num_alive_tasks() > 0)
        && settle.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let fds_after = open_fds();
    let tasks = agent_rt.metrics().num_alive_tasks();

    errors_ms.sort_by(f64::total_cmp);
    noise_ms.sort_by(f64::total_cmp);
    let p = |q: f64| llm_canary::testing::timeline::nearest_rank(&errors_ms, q);
    let noise_p99 = llm_canary::testing::timeline::nearest_rank(&noise_ms, 0.99);
    // CPU seconds over the run as a percentage of one core.
    let share = |secs: f64| 100.0 * secs / start.elapsed().as_secs_f64();
    let others = ((busy1 - busy0) - (own1 - own0)).max(0.0);
    println!(
        "machine beside the test: other processes {:.1} % of a core, stolen by the host {:.1} %",
        share(others),
        share(stolen1 - stolen0)
    );
    let (first, peak) = (rss[0], *rss.iter().max().unwrap());
    println!(
        "chaos: {rounds} rounds, {runs} runs in {:.0}s; healthy TTFT error p50 {:.3} ms p99 {:.3} ms max {:.3} ms; machine noise (a 1 ms sleeper's lateness) p99 {noise_p99:.3} ms max {:.3} ms; RSS after round 1 {:.1} MiB, peak {:.1} MiB, last {:.1} MiB; fds {fds_before} -> {fds_after}; tasks left {tasks}",
        start.elapsed().as_secs_f64(),
        p(0.5),
        p(0.99),
        p(1.0),
        noise_ms.last().copied().unwrap_or(0.0),
        first as f64 / 1024.0,
        peak as f64 / 1024.0,
        *rss.last().unwrap() as f64 / 1024.0
    );
    assert!(
        wrong.is_empty(),
        "{} of {runs} runs misclassified:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // The engine's bound is 3 ms; what the machine itself added (a paused virtual machine
    // delays every thread alike) is measured beside it, not blamed on the engine.
    assert!(
        p(0.99) < 3.0 + noise_p99,
        "healthy TTFT error p99 {:.3} ms, over 3 ms plus the machine's noise p99 {noise_p99:.3} ms",
        p(0.99)
    );
    assert!(
        peak - first < 32 * 1024,
        "RSS grew from {first} KiB to {peak} KiB"
    );
    assert_eq!(fds_after, fds_before, "file descriptors leaked");
    assert_eq!(tasks, 0, "tasks leaked");
}
