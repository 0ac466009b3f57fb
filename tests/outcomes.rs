//! Every outcome of DESIGN's vocabulary, produced by a sim scenario over real loopback sockets.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use llm_canary::outcome::Outcome;
use llm_canary::runner::Runner;
use llm_canary::sim::Sim;

/// (target name, scenario, extra target keys, expected outcome, expected failed checks)
const CASES: &[(&str, &str, &str, &str, &[&str])] = &[
    ("healthy", "healthy", "server: vllm", "ok", &[]),
    (
        "healthy-completions",
        "healthy",
        "api: openai-completions",
        "ok",
        &[],
    ),
    (
        "healthy-zh",
        "healthy-zh",
        "",
        "pattern_mismatch",
        &["pattern_mismatch"],
    ),
    ("crlf", "crlf", "", "ok", &[]),
    ("comments", "comments", "", "ok", &[]),
    ("split", "split", "", "ok", &[]),
    ("nospace", "nospace", "", "ok", &[]),
    ("no-usage", "no-usage", "", "ok", &[]),
    ("reasoning", "reasoning", "", "ok", &[]),
    ("non-stream", "non-stream", "", "ok", &[]),
    ("llama-cpp", "llama-cpp", "server: llama-cpp", "ok", &[]),
    ("http-503", "http-503", "", "http_error", &["http_error"]),
    (
        "http-429",
        "http-429",
        "api: openai-completions",
        "http_error",
        &["http_error"],
    ),
    (
        "no-headers",
        "no-headers",
        "",
        "timeout_ttft",
        &["timeout_ttft"],
    ),
    (
        "role-only",
        "role-only",
        "",
        "timeout_ttft",
        &["timeout_ttft"],
    ),
    (
        "slow-first-token",
        "slow-first-token,ttft=1500ms",
        "",
        "timeout_ttft",
        &["timeout_ttft"],
    ),
    ("stall", "stall,stall=1500ms", "", "stall", &["stall"]),
    (
        "crawl",
        "crawl,itl=300ms",
        "",
        "timeout_total",
        &["timeout_total"],
    ),
    (
        "mid-stream-error",
        "mid-stream-error",
        "",
        "stream_error",
        &["stream_error"],
    ),
    (
        "reset",
        "reset",
        "",
        "stream_interrupted",
        &["stream_interrupted"],
    ),
    (
        "no-done",
        "no-done",
        "",
        "stream_interrupted",
        &["stream_interrupted"],
    ),
    (
        "malformed",
        "malformed",
        "",
        "malformed_stream",
        &["malformed_stream"],
    ),
    (
        "garbage",
        "garbage",
        "",
        "malformed_stream",
        &["malformed_stream"],
    ),
    ("endless", "endless", "", "oversized", &["oversized"]),
    (
        "endless-completions",
        "endless",
        "api: openai-completions",
        "oversized",
        &["oversized"],
    ),
    ("huge-line", "huge-line", "", "oversized", &["oversized"]),
    (
        "empty",
        "empty",
        "",
        "empty_output",
        &["empty_output", "too_short", "pattern_mismatch"],
    ),
    (
        "repetition",
        "repetition",
        "",
        "repetition",
        &["repetition", "truncated"],
    ),
    (
        "repetition-zh",
        "repetition-zh",
        "",
        "repetition",
        &["repetition", "truncated", "pattern_mismatch"],
    ),
    (
        "truncated",
        "truncated",
        "",
        "truncated",
        &["truncated", "pattern_mismatch"],
    ),
    ("too-short", "too-short", "", "too_short", &["too_short"]),
    ("too-long", "too-long", "", "too_long", &["too_long"]),
    (
        "mismatch",
        "mismatch",
        "",
        "pattern_mismatch",
        &["pattern_mismatch"],
    ),
    (
        "forbidden",
        "forbidden",
        "",
        "forbidden_pattern",
        &["forbidden_pattern"],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_from_its_scenario() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let targets: Vec<(&str, &str, &str)> = CASES.iter().map(|c| (c.0, c.1, c.2)).collect();
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let runner = Arc::new(Runner::new(64));
    let pairs = cfg
        .targets
        .iter()
        .map(|t| (cfg.probes[0].clone(), t.clone()))
        .collect();
    let results = runner.run_all(pairs).await;

    let mut wrong = BTreeMap::new();
    for (r, case) in results.iter().zip(CASES) {
        assert_eq!(r.target, case.0);
        let failed: Vec<&str> = r.failed_checks.iter().map(|o| o.as_str()).collect();
        if r.outcome.as_str() != case.3 || failed != case.4 {
            wrong.insert(
                case.0,
                format!(
                    "got {} {:?} ({:?}), want {} {:?}",
                    r.outcome, failed, r.error, case.3, case.4
                ),
            );
        }
        assert_eq!(r.success, r.outcome == Outcome::Ok);
        if r.outcome.is_transport() {
            assert!(
                r.error.is_some(),
                "{}: a transport failure says why",
                case.0
            );
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");

    // Every outcome of the vocabulary is covered by some case, plus connect_error below.
    for o in Outcome::ALL {
        let covered = CASES.iter().any(|c| c.3 == o.as_str()) || o == Outcome::ConnectError;
        assert!(covered, "no case for {o}");
    }
}

#[tokio::test]
async fn connect_error_on_a_closed_port() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, mut cfg) = common::config(&sim, &[("down", "healthy", "")], common::PROBE);
    let target = Arc::make_mut(&mut cfg.targets[0]);
    target.base_url = format!("http://127.0.0.1:{}/v1", common::closed_port());
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_eq!(r.outcome, Outcome::ConnectError, "{:?}", r.error);
    assert!(
        r.error.as_deref().unwrap().starts_with("connect:"),
        "{:?}",
        r.error
    );
    assert_eq!(r.http_status, None);
    assert_eq!(r.figures.ttfb_ms, None);
}

#[tokio::test]
async fn the_role_only_first_chunk_is_not_the_first_token() {
    // vLLM's role chunk arrives at once; content only after the scripted 300ms.
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = common::config(&sim, &[("t", "healthy,ttft=300ms", "")], common::PROBE);
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_eq!(r.outcome, Outcome::Ok);
    let ttfb = r.figures.ttfb_ms.unwrap();
    let ttft = r.figures.ttft_ms.unwrap();
    assert!(ttfb < 100.0, "headers come at once: {ttfb}");
    assert!(ttft >= 300.0, "ttft {ttft} must not count the role chunk");
}
