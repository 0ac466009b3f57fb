//! Benchmark of the probe engine (prints figures; not a timed test). Run: `cargo bench --bench engine`.
//!
//! 1. TTFT measurement error: the agent's arrival instant of the first content chunk minus the
//!    sim's instant of handing that chunk to the kernel, for 1 stream and 50 concurrent streams.
//!    The sim runs in this process on its own runtime, so both instants come from one clock.
//! 2. Peak RSS of `llm-canary once` against 50 targets (via /usr/bin/time).
//! 3. The stream reader's throughput on one core: SSE decoding, JSON parsing and delta reading.
//! 4. What `prompt_ignored` costs a run: chrF between real answers (the labeled corpus's), each
//!    against every other, and so per run for a target with 100 probes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;
use llm_canary::testing::stream::{self, sse::SseReader, StreamCaps};

/// A fresh config folder, removed when dropped.
fn temp_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("llm-canary-bench-")
        .tempdir()
        .unwrap();
    std::fs::create_dir_all(dir.path().join("probes")).unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    dir
}

fn write_config(dir: &std::path::Path, sim: &Sim, n: usize, scenario: &str) -> std::path::PathBuf {
    let mut agent = String::from("agent: {name: bench, concurrency: 64}\ntargets:\n");
    for i in 0..n {
        agent.push_str(&format!(
            "  - {{name: t{i}, base_url: \"{}\", model: m, server: vllm}}\n",
            sim.base_url(scenario)
        ));
    }
    std::fs::write(dir.join("llm-canary.yaml"), agent).unwrap();
    std::fs::write(
        dir.join("probes/p.yaml"),
        "name: p\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {ttft: 5s, stall: 5s, total: 30s}\nchecks: {expect: \"(?i)paris\"}\n",
    )
    .unwrap();
    std::fs::write(dir.join("prompts/q.txt"), "What is the capital of France?").unwrap();
    dir.join("llm-canary.yaml")
}

fn quantiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| llm_canary::testing::timeline::nearest_rank(&v, p);
    (q(0.5), q(0.99), *v.last().unwrap())
}

fn ttft_error(sim_rt: &tokio::runtime::Runtime, sim: &Sim, concurrency: usize, rounds: usize) {
    let dir = temp_dir();
    let cfg = llm_canary::testing::config::load(&write_config(
        dir.path(),
        sim,
        concurrency,
        "healthy,ttft=20ms,itl=5ms",
    ))
    .unwrap();
    let agent_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runner = Arc::new(Runner::new(concurrency));
    let mut errors = Vec::new();
    for _ in 0..rounds {
        let pairs = cfg
            .targets
            .iter()
            .map(|t| (cfg.probes[0].clone(), t.clone()))
            .collect();
        let results = agent_rt.block_on(runner.run_all(pairs));
        for r in results {
            assert!(r.success(), "{:?} {:?}", r.judged.outcome, r.judged.error);
            errors.push(sim.first_token_error_ms(&r).unwrap());
        }
    }
    let _ = sim_rt;
    let min = errors.iter().copied().fold(f64::INFINITY, f64::min);
    let (p50, p99, max) = quantiles(errors.clone());
    println!(
        "ttft error, {concurrency:>2} concurrent stream(s), {:>4} samples: p50 {p50:.3} ms  p99 {p99:.3} ms  max {max:.3} ms  (min {min:.3} ms)",
        errors.len()
    );
}

fn once_rss(sim: &Sim) {
    let dir = temp_dir();
    let cfg = write_config(dir.path(), sim, 50, "healthy");
    let out = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M %e %U %S"])
        .arg(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["once", "-c"])
        .arg(&cfg)
        .output();
    match out {
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or_default();
            let f: Vec<&str> = last.split_whitespace().collect();
            let ok = String::from_utf8_lossy(&o.stdout).contains("50 of 50 probe runs ok");
            println!(
                "once with 50 targets: peak RSS {:.1} MiB, wall {} s, user {} s, sys {} s (all ok: {ok})",
                f[0].parse::<f64>().unwrap_or(0.0) / 1024.0,
                f.get(1).unwrap_or(&"?"),
                f.get(2).unwrap_or(&"?"),
                f.get(3).unwrap_or(&"?")
            );
        }
        Err(e) => {
            println!("once RSS: /usr/bin/time is missing ({e}); install the Debian package `time`")
        }
    }
}

fn reader_throughput() {
    let chunk = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}]}"#;
    let n = 200_000;
    let mut body = Vec::with_capacity(n * (chunk.len() + 2));
    for _ in 0..n {
        body.extend_from_slice(chunk.as_bytes());
        body.extend_from_slice(b"\n\n");
    }
    let start = Instant::now();
    let caps = StreamCaps {
        max_line: 1 << 20,
        max_body: usize::MAX,
    };
    let reader = SseReader::new(stream::reads(body.chunks(16 * 1024)), caps, start);
    let mut chars = 0usize;
    for e in stream::drain_ready(reader) {
        let v: serde_json::Value = serde_json::from_str(&e.unwrap().data).unwrap();
        let d = llm_canary::testing::probe::flavor::openai_chat::delta(&v["choices"][0]);
        chars += d.text.len();
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(chars, n * 6);
    println!(
        "stream reader: {:.0} chunks/s on one core ({:.0} MB/s), decode + JSON + delta",
        n as f64 / secs,
        body.len() as f64 / secs / 1e6
    );
}

/// A hostile server's line that never ends: the time to refuse 1 MiB of it (the line cap), by
/// the size of the reads it comes in. The parser must see the line once, not at every read.
fn endless_line() {
    let caps = StreamCaps {
        max_line: 1 << 20,
        max_body: 8 << 20,
    };
    let mut body = b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'x', 2 << 20));
    for size in [4096, 16384, 65536] {
        let start = Instant::now();
        let refused = stream::sse::decode(body.chunks(size), caps).is_err();
        println!(
            "endless line in {size}-byte reads: refused {refused} after {:.2} ms of one core",
            start.elapsed().as_secs_f64() * 1000.0
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (sim_rt, sim) = Sim::start_apart().unwrap();
    ttft_error(&sim_rt, &sim, 1, 200);
    ttft_error(&sim_rt, &sim, 50, 10);
    once_rss(&sim);
    reader_throughput();
    endless_line();
    answer_similarity();
    std::thread::sleep(Duration::from_millis(10));
}

/// chrF between the corpus's real answers, every ordered pair of the first 120: the work
/// `prompt_ignored` does after each run, once per other probe's latest answer on the target.
fn answer_similarity() {
    use llm_canary::testing::checks::similarity::{chrf, Grams};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let answers: Vec<String> = paths
        .iter()
        .filter_map(|p| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
            let real = !v["source"].as_str()?.starts_with("hand");
            real.then(|| v["text"].as_str().map(str::to_string))?
        })
        .take(120)
        .collect();
    let chars = answers.iter().map(|a| a.chars().count()).sum::<usize>() / answers.len();
    let pairs = (answers.len() * answers.len()) as f64;
    // The fastest of three rounds: the least the machine's other work added.
    let fastest = |round: &dyn Fn() -> f64| {
        (0..3)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(round());
                start.elapsed().as_secs_f64() / pairs
            })
            .fold(f64::INFINITY, f64::min)
    };
    let fresh = fastest(&|| {
        answers
            .iter()
            .flat_map(|a| answers.iter().map(move |b| chrf(a, b)))
            .sum()
    });
    // As `prompt_ignored` does: the run's answer taken apart once, each other answer afresh.
    let per = fastest(&|| {
        answers
            .iter()
            .flat_map(|a| {
                let grams = Grams::new(a);
                answers
                    .iter()
                    .map(move |b| grams.chrf(&Grams::new(b)))
                    .collect::<Vec<_>>()
            })
            .sum()
    });
    println!(
        "chrF: {:.1} µs per pair of real answers ({chars} characters on average, {pairs} pairs), \
         {:.1} µs with one side taken apart once; prompt_ignored with 100 probes on a target: \
         {:.2} ms of one core per run",
        fresh * 1e6,
        per * 1e6,
        per * 99.0 * 1e3
    );
}
