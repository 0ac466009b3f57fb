//! The prefix-cache check (`cache_check:`) against the sim: a working prefix cache and a broken
//! one (`prefix-cache-broken`) told apart by the records and the gauges, on every flavor that
//! reports a cached count, and through the daemon's `/probe`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, get, sample};
use llm_canary::testing::result::ProbeResult;
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;
use serde_json::Value;

/// A slow enough first token that a cache hit (a quarter of it) stands out on a busy machine.
const SIM_TTFT: &str = "ttft=200ms";

const PROBE: &str = "name: p\nprompt: q.txt\nmax_tokens: 64\ncache_check: {prefix_chars: 4000}\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 5s}\nchecks: {expect: \"(?i)paris\"}\n";

fn record(r: &ProbeResult) -> Value {
    serde_json::from_str(&r.to_json_line()).unwrap()
}

/// Each target's (cold, warm) records, by target name.
async fn fire(targets: &[(&str, &str, &str)]) -> (common::TempDir, Vec<(String, Value, Value)>) {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, cfg) = common::config(&sim, targets, PROBE);
    let pairs = cfg
        .targets
        .iter()
        .map(|t| (cfg.probes[0].clone(), Arc::clone(t)))
        .collect();
    let results = Arc::new(Runner::new(4)).run_all(pairs).await;
    assert_eq!(results.len(), 2 * targets.len(), "two runs a firing");
    let metrics = llm_canary::testing::sinks::metrics::Metrics::new(&cfg);
    for r in &results {
        metrics.record(r, cfg.target(&r.id.target).unwrap());
    }
    let text = String::from_utf8(metrics.encode()).unwrap();
    let mut out = Vec::new();
    for pair in results.chunks(2) {
        let (cold, warm) = (record(&pair[0]), record(&pair[1]));
        let name = pair[0].id.target.clone();
        assert_eq!(pair[1].id.target, name, "a firing's runs are together");
        // The gauges say what the warm record says.
        let having = format!("target=\"{name}\"");
        let gauge = |m: &str| sample(&text, m, &[having.as_str()]);
        // The record rounds to thousandths.
        let ratio = gauge("llm_canary_prefix_cache_hit_ratio");
        let want = warm["prefix_cache_hit_ratio"].as_f64();
        assert_eq!(ratio.is_some(), want.is_some(), "{name}");
        if let (Some(ratio), Some(want)) = (ratio, want) {
            assert!((ratio - want).abs() < 0.001, "{name}: {ratio} vs {want}");
        }
        let speedup = gauge("llm_canary_prefix_cache_ttft_speedup").unwrap();
        let want = warm["prefix_cache_ttft_speedup"].as_f64().unwrap();
        assert!(
            (speedup - want).abs() < 0.001,
            "{name}: {speedup} vs {want}"
        );
        out.push((name, cold, warm));
    }
    (dir, out)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_working_cache_and_a_broken_one_are_told_apart() {
    let good = format!("healthy,{SIM_TTFT}");
    let broken = format!("prefix-cache-broken,{SIM_TTFT}");
    let (_dir, fired) = fire(&[
        ("good", &good, "api: openai-chat, server: vllm"),
        ("broken", &broken, "api: openai-chat, server: vllm"),
    ])
    .await;
    for (name, cold, warm) in &fired {
        for r in [cold, warm] {
            assert_eq!(r["outcome"], "ok", "{name}: {r}");
        }
        assert_eq!(
            (&cold["cache_phase"], &warm["cache_phase"]),
            (&"cold".into(), &"warm".into())
        );
        // The cold run's prefix was new to the server: nothing cached, no figures of its own.
        assert_eq!(cold["cached_tokens"], 0, "{name}");
        assert!(
            cold["prefix_cache_hit_ratio"].is_null() && cold["prefix_cache_ttft_speedup"].is_null()
        );
        assert_ne!(cold["request_id"], warm["request_id"]);
        assert_eq!(
            cold["input_tokens"], warm["input_tokens"],
            "the same prompt"
        );
        // About 4,000 characters of prefix: about 1,000 tokens at the sim's 4 a token.
        assert!(cold["input_tokens"].as_u64().unwrap() > 900, "{cold}");
    }
    let (_, _, warm) = &fired[0];
    let ratio = warm["prefix_cache_hit_ratio"].as_f64().unwrap();
    let speedup = warm["prefix_cache_ttft_speedup"].as_f64().unwrap();
    assert!(ratio > 0.99, "working: hit ratio {ratio}");
    assert!(
        speedup > 2.0,
        "working: a quarter of the first-token wait, speedup {speedup}"
    );
    let (_, _, warm) = &fired[1];
    let ratio = warm["prefix_cache_hit_ratio"].as_f64().unwrap();
    let speedup = warm["prefix_cache_ttft_speedup"].as_f64().unwrap();
    assert_eq!(
        (warm["cached_tokens"].as_u64(), ratio),
        (Some(0), 0.0),
        "broken"
    );
    assert!((0.6..1.5).contains(&speedup), "broken: speedup {speedup}");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_flavor_reads_its_cached_count_and_anthropic_without_one_has_no_ratio() {
    let healthy = format!("healthy,{SIM_TTFT}");
    let llama = format!("llama-cpp,{SIM_TTFT}");
    let (_dir, fired) = fire(&[
        ("responses", &healthy, "api: openai-responses"),
        ("completions", &healthy, "api: openai-completions"),
        // llama.cpp's own cache-busting field is not sent: the warm run must reach the cache.
        ("llama", &llama, "api: openai-chat, server: llama-cpp"),
        ("ollama", &healthy, "api: ollama, server: ollama"),
        ("anthropic", &healthy, "api: anthropic-messages"),
    ])
    .await;
    for (name, cold, warm) in &fired {
        assert_eq!(
            (&cold["outcome"], &warm["outcome"]),
            (&"ok".into(), &"ok".into()),
            "{name}"
        );
        let speedup = warm["prefix_cache_ttft_speedup"].as_f64().unwrap();
        assert!(speedup > 2.0, "{name}: speedup {speedup}");
        let ratio = warm["prefix_cache_hit_ratio"].as_f64();
        match name.as_str() {
            // The sim's Messages usage carries no cache reads: absent, not 0.
            "anthropic" => assert_eq!(ratio, None, "{warm}"),
            // From prompt_eval_count compared between the runs.
            "ollama" => {
                assert!(warm["cached_tokens"].is_null());
                assert!(ratio.unwrap() > 0.99, "{warm}");
            }
            _ => assert!(ratio.unwrap() > 0.99, "{name}: {warm}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_records_both_runs_and_exports_the_gauges() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: cache\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\ntargets:\n  - {{name: broken, base_url: \"{}\", model: m}}\n",
        sim.base_url(&format!("prefix-cache-broken,{SIM_TTFT}"))
    );
    let d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    services::wait_ready(&d.url("/healthz"), Duration::from_secs(30)).await;
    // Two firings: the first cold run is the pair's warm-up.
    get(&d.url("/probe?target=broken&probe=p")).await;
    let answer = get(&d.url("/probe?target=broken&probe=p")).await;
    assert_eq!(
        sample(&answer, "llm_canary_prefix_cache_hit_ratio", &[]),
        Some(0.0),
        "{answer}"
    );
    assert!(sample(&answer, "llm_canary_prefix_cache_ttft_speedup", &[]).is_some());
    // Every run counted; of the latencies, only the second cold run's: a warm run is served
    // from the cache on purpose.
    assert_eq!(
        sample(&answer, "llm_canary_probe_runs_total", &["outcome=\"ok\""]),
        Some(4.0)
    );
    assert_eq!(
        sample(&answer, "llm_canary_ttft_seconds_count", &[]),
        Some(1.0)
    );
    let log = std::fs::read_to_string(d.dir.path().join("results.jsonl")).unwrap();
    let phases: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["cache_phase"].to_string())
        .collect();
    assert_eq!(phases, ["\"cold\"", "\"warm\"", "\"cold\"", "\"warm\""]);
}
