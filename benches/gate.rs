//! Benchmark of the sequential gate's error rates (prints figures; not a timed test).
//! Run: `cargo bench --bench gate --profile dev` (about 10 minutes; the statistics do not depend
//! on the optimiser, and the dev profile reuses the test build). `GATE_BENCH_TRIALS`,
//! `GATE_BENCH_GATES`, `GATE_BENCH_AT_ONCE` and `GATE_BENCH_SCALE` (of the sim's 100 ms) change
//! the counts and the time scale (`GATE_BENCH_GATES=0`: the statistics alone;
//! `GATE_BENCH_TRIALS=0`: the real engine alone).
//!
//! One limit, `ttft_p95: "+15%"`, the default cap of 200 pairs, batches of 10, conditions:
//! the same replica, a true +30 %, a true +20 % and a true +100 % first token (and, for the
//! statistics alone, a true +15 %: exactly at the limit, where any `fail` is wrong).
//! 1. Pure statistics: thousands of gates on draws from the sim's first-token distribution
//!    (100 ms plus a uniform 0-40 ms of jitter), judged by the gate's own code after every batch.
//! 2. The real engine against the in-process sim at its own time scale (100 ms + U(0, 40 ms);
//!    `GATE_BENCH_SCALE=0.1` for a tenth, where the machine's scheduling tail weighs ten times
//!    more), 100 gates per condition, 25 at a time, each gate's pairs one after another. The candidate's
//!    sim delay is set so that the first token the agent *measures* (sim delay plus the agent's
//!    own overhead, found first) is the stated factor slower.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_canary::testing::config::gate::parse_relative;
use llm_canary::testing::gate::decide::{self, State};
use llm_canary::testing::gate::sample::Sample;
use llm_canary::testing::gate::stats::{self, Verdict};
use llm_canary::testing::gate::{GateOptions, GateReport, BATCH, DEFAULT_MAX_SAMPLES};
use llm_canary::testing::sim::Sim;

const CONDITIONS: [(&str, f64); 4] = [
    ("same vs same", 1.0),
    ("true +30%", 1.3),
    ("true +20%", 1.2),
    ("true +100%", 2.0),
];

/// What one condition came to over its gates.
#[derive(Default)]
struct Tally {
    fail: usize,
    pass: usize,
    inconclusive: usize,
    used: Vec<u32>,
}

impl Tally {
    fn add(&mut self, v: Verdict, used: u32) {
        match v {
            Verdict::Fail => self.fail += 1,
            Verdict::Pass => self.pass += 1,
            _ => self.inconclusive += 1,
        }
        self.used.push(used);
    }

    fn print(&mut self, name: &str, sequential: bool) {
        let n = self.used.len().max(1) as f64;
        self.used.sort_unstable();
        let median = self.used.get(self.used.len() / 2).copied().unwrap_or(0);
        let decided = self
            .used
            .iter()
            .filter(|&&u| u < DEFAULT_MAX_SAMPLES)
            .count();
        let stops = if sequential {
            format!(
                "  decided before the cap {:>5.1}%  median samples per side {median}",
                100.0 * decided as f64 / n
            )
        } else {
            String::new()
        };
        println!(
            "  {name:<13} {:>5} gates: fail {:>5.1}%  pass {:>5.1}%  inconclusive {:>5.1}%{stops}",
            self.used.len(),
            100.0 * self.fail as f64 / n,
            100.0 * self.pass as f64 / n,
            100.0 * self.inconclusive as f64 / n,
        );
    }
}

fn sample(i: usize, ttft_ms: f64) -> Sample {
    Sample {
        request_id: format!("r{i}"),
        outcome: "ok".into(),
        success: true,
        ttft_ms: Some(ttft_ms),
        answer_ttft_ms: Some(ttft_ms),
        e2e_ms: None,
        tpot_ms: None,
        tokens_per_second: None,
        itl_gaps_ms: Vec::new(),
        error: None,
        failed_checks: Vec::new(),
        answer: None,
    }
}

/// One sequential gate on draws: looks after every batch, as the gate does.
fn simulated_gate(rng: &mut fastrand::Rng, k: f64) -> (Verdict, u32) {
    let rel = parse_relative("ttft_p95", "+15%").unwrap();
    let alpha = decide::alpha_per_limit(1);
    let (mut c, mut b) = (Vec::new(), Vec::new());
    loop {
        for _ in 0..BATCH {
            c.push(sample(c.len(), k * (100.0 + 40.0 * rng.f64())));
            b.push(sample(b.len(), 100.0 + 40.0 * rng.f64()));
        }
        let (cr, br): (Vec<&Sample>, Vec<&Sample>) = (c.iter().collect(), b.iter().collect());
        let (r, state) = decide::relative(&rel, &cr, &br, alpha, true);
        if state == State::Decided || c.len() as u32 >= DEFAULT_MAX_SAMPLES {
            return (r.verdict, c.len() as u32);
        }
    }
}

fn pure_statistics(trials: usize) {
    println!("pure statistics: U(100 ms, 140 ms) x factor, ttft_p95 \"+15%\", cap {DEFAULT_MAX_SAMPLES}, looks every {BATCH} pairs");
    for (name, k) in CONDITIONS {
        let mut rng = fastrand::Rng::with_seed(0x6761_7465 ^ k.to_bits());
        let mut t = Tally::default();
        for _ in 0..trials {
            let (v, used) = simulated_gate(&mut rng, k);
            t.add(v, used);
        }
        t.print(name, true);
    }
    // The hardest case for a wrong failure: the candidate exactly at the limit, where every
    // `fail` is wrong (and `pass` cannot be shown): the error rate itself.
    let mut rng = fastrand::Rng::with_seed(0x6564_6765);
    let mut t = Tally::default();
    for _ in 0..trials {
        let (v, used) = simulated_gate(&mut rng, 1.15);
        t.add(v, used);
    }
    t.print("at the limit", true);
    // What a fixed 20 samples with the bootstrap gave on the same draws, for comparison.
    println!("  fixed N = 20, bootstrap (--samples 20), for comparison:");
    let rel = parse_relative("ttft_p95", "+15%").unwrap();
    for (name, k) in CONDITIONS {
        let mut rng = fastrand::Rng::with_seed(0x6669_7865 ^ k.to_bits());
        let mut t = Tally::default();
        for _ in 0..(trials / 40).max(100) {
            let c: Vec<Sample> = (0..20)
                .map(|i| sample(i, k * (100.0 + 40.0 * rng.f64())))
                .collect();
            let b: Vec<Sample> = (0..20)
                .map(|i| sample(i, 100.0 + 40.0 * rng.f64()))
                .collect();
            let (cr, br): (Vec<&Sample>, Vec<&Sample>) = (c.iter().collect(), b.iter().collect());
            t.add(
                stats::judge_relative(&rel, &cr, &br, true, true).verdict,
                20,
            );
        }
        t.print(name, false);
    }
}

/// A fresh config folder with the probe and the given targets (name, scenario).
fn config(
    dir: &std::path::Path,
    sim: &Sim,
    targets: &[(&str, String)],
) -> llm_canary::testing::config::Config {
    std::fs::create_dir_all(dir.join("probes")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    let mut agent = String::from("targets:\n");
    for (name, scenario) in targets {
        agent.push_str(&format!(
            "  - {{name: {name}, base_url: \"{}\", model: m, server: vllm}}\n",
            sim.base_url(scenario)
        ));
    }
    std::fs::write(dir.join("llm-canary.yaml"), agent).unwrap();
    std::fs::write(
        dir.join("probes/p.yaml"),
        "name: p\nprompt: q.txt\nmax_tokens: 8\nchecks: {allow_truncation: true}\ngate:\n  vs_baseline: {ttft_p95: \"+15%\"}\n",
    )
    .unwrap();
    std::fs::write(dir.join("prompts/q.txt"), "What is the capital of France?").unwrap();
    llm_canary::testing::config::load(&dir.join("llm-canary.yaml")).unwrap()
}

fn scenario(ttft_ms: f64, jitter_ms: f64, tag: &str) -> String {
    format!("healthy,ttft={ttft_ms:.2}ms,jitter={jitter_ms:.2}ms,itl=1ms,build={tag}")
}

async fn one_gate(cfg: Arc<llm_canary::testing::config::Config>, target: String) -> GateReport {
    let opts = GateOptions {
        target,
        baseline_target: Some("prod".into()),
        warmup: 1,
        concurrency: 2,
        ..GateOptions::default()
    };
    llm_canary::testing::gate::run(&cfg, &opts, &mut |_| {})
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn real_engine(sim: &Sim, gates: usize, at_once: usize) {
    let scale: f64 = std::env::var("GATE_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let (base_ms, jitter_ms) = (100.0 * scale, 40.0 * scale);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The agent's own share of the first token: measured minus the sim's delay, under the same
    // load as the gates (at_once gates, one run each in flight).
    let cfg = Arc::new(config(
        dir.path(),
        sim,
        &[("prod", scenario(base_ms, 0.0, "calib"))],
    ));
    let overhead = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..at_once {
            let cfg = cfg.clone();
            tasks.spawn(async move {
                let runner = llm_canary::testing::runner::Runner::new(1);
                let mut v = Vec::new();
                for _ in 0..10 {
                    let r = runner.run_one(&cfg.probes[0], &cfg.targets[0]).await;
                    v.push(r.measured.figures.ttft_ms.unwrap_or(f64::NAN) - base_ms);
                }
                v
            });
        }
        let mut all: Vec<f64> = tasks.join_all().await.into_iter().flatten().collect();
        all.sort_by(f64::total_cmp);
        all[all.len() / 2]
    });
    println!(
        "real engine: sim first token {base_ms} ms + U(0, {jitter_ms} ms), agent overhead {overhead:.2} ms (median, {at_once} runs at once); {gates} gates a condition, {at_once} at a time, pairs one after another"
    );
    let mut targets = vec![("prod", scenario(base_ms, jitter_ms, "prod"))];
    let names = ["c100", "c130", "c120", "c200"];
    for ((_, k), name) in CONDITIONS.iter().zip(names) {
        // Measured = sim + overhead: scale the measured figure by k.
        let ttft = k * (base_ms + overhead) - overhead;
        targets.push((name, scenario(ttft, k * jitter_ms, name)));
    }
    let cfg = Arc::new(config(dir.path(), sim, &targets));
    for ((name, _), target) in CONDITIONS.iter().zip(names) {
        let start = Instant::now();
        let reports = rt.block_on(async {
            let mut out = Vec::new();
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..gates {
                if tasks.len() >= at_once {
                    out.extend(tasks.join_next().await.map(|r| r.unwrap()));
                }
                tasks.spawn(one_gate(cfg.clone(), target.to_string()));
            }
            out.extend(tasks.join_all().await);
            out
        });
        let mut t = Tally::default();
        for r in &reports {
            let l = &r.probes[0].limits[0];
            t.add(l.verdict, l.samples_used);
        }
        t.print(name, true);
        println!(
            "  {:>13} {:.0} s, load average {}; the first gate: {}",
            "",
            start.elapsed().as_secs_f64(),
            load_average(),
            reports
                .first()
                .map_or("-", |r| r.probes[0].limits[0].message.as_str())
        );
    }
}

/// The machine's 1-minute load average: measured latencies carry its scheduler delays.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let trials: usize = std::env::var("GATE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    if trials > 0 {
        let start = Instant::now();
        pure_statistics(trials);
        println!("  ({:.0} s)", start.elapsed().as_secs_f64());
    }
    let gates: usize = std::env::var("GATE_BENCH_GATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    if gates == 0 {
        return;
    }
    let (sim_rt, sim) = Sim::start_apart().unwrap();
    let at_once = std::env::var("GATE_BENCH_AT_ONCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    println!(
        "cores {}, load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    real_engine(&sim, gates, at_once);
    drop(sim_rt);
    std::thread::sleep(Duration::from_millis(10));
}
