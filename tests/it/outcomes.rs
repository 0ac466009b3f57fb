//! Every outcome of docs/design.md's vocabulary, produced by a sim scenario over real loopback sockets.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;

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
    ("http-529", "http-529", "", "http_error", &["http_error"]),
    ("http-404", "http-404", "", "http_error", &["http_error"]),
    ("http-400", "http-400", "", "http_error", &["http_error"]),
    (
        "vllm-default",
        "vllm-default",
        "server: vllm, priority: lowest",
        "http_error",
        &["http_error"],
    ),
    (
        "sglang-default",
        "sglang-default",
        "server: sglang, priority: lowest",
        "ok",
        &[],
    ),
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
        "html-splice",
        "html-splice",
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
        "repetition-list",
        "repetition-list",
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
    // Ollama has no content filter: every other flavor's own words for the stop.
    (
        "content-filter",
        "content-filter",
        "server: vllm",
        "content_filtered",
        CONTENT_FILTERED,
    ),
    (
        "content-filter-completions",
        "content-filter",
        "api: openai-completions",
        "content_filtered",
        CONTENT_FILTERED,
    ),
    (
        "content-filter-responses",
        "content-filter",
        "api: openai-responses",
        "content_filtered",
        CONTENT_FILTERED,
    ),
    (
        "content-filter-messages",
        "content-filter",
        "api: anthropic-messages",
        "content_filtered",
        CONTENT_FILTERED,
    ),
    (
        "content-filter-gemini",
        "content-filter",
        "api: gemini",
        "content_filtered",
        CONTENT_FILTERED,
    ),
];

/// A stop after four tokens: filtered, and without the fact for it.
const CONTENT_FILTERED: &[&str] = &["content_filtered", "pattern_mismatch"];

/// The reason each refusing scenario's `http_error` carries, and whether the record keeps
/// rate-limit headers.
const REASONS: &[(&str, &str, bool)] = &[
    ("http-429", "rate_limited", true),
    ("http-500", "server_error", false),
    ("http-503", "overloaded", false),
    ("http-529", "overloaded", false),
    ("http-404", "not_found", false),
    ("http-400", "context_length", false),
    ("vllm-default", "priority_unsupported", false),
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
        assert_eq!(r.id.target, case.0);
        let failed: Vec<&str> = r.judged.failed_checks.iter().map(|o| o.as_str()).collect();
        if r.judged.outcome.as_str() != case.3 || failed != case.4 {
            wrong.insert(
                case.0,
                format!(
                    "got {} {:?} ({:?}), want {} {:?}",
                    r.judged.outcome, failed, r.judged.error, case.3, case.4
                ),
            );
        }
        assert_eq!(r.success(), r.judged.outcome == Outcome::Ok);
        let want = REASONS.iter().find(|x| x.0 == case.1);
        let reason = r.measured.reading.http_reason.map(|x| x.as_str());
        match want {
            Some((_, reason_want, headers)) => {
                assert_eq!(reason, Some(*reason_want), "{}", case.0);
                assert_eq!(
                    r.measured.reading.rate_limit.is_some(),
                    *headers,
                    "{}",
                    case.0
                );
            }
            None => assert_eq!(reason, None, "{}: only an http_error has a reason", case.0),
        }
        if let Some(h) = &r.measured.reading.rate_limit {
            assert_eq!(h.get("retry-after").map(String::as_str), Some("2"));
            assert_eq!(
                h.get("x-ratelimit-remaining-requests").map(String::as_str),
                Some("0")
            );
        }
        if r.judged.outcome.is_transport() {
            assert!(
                r.judged.error.is_some(),
                "{}: a transport failure says why",
                case.0
            );
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");

    // Every outcome of the vocabulary is covered by some case, plus connect_error below; the
    // checks this probe does not ask for (JSON, tool calls) in tests/it/content_checks.rs, and
    // the ones that compare answers (with another probe's, with a reference) in
    // tests/it/drift.rs.
    let elsewhere = [
        Outcome::ConnectError,
        Outcome::FormatError,
        Outcome::ToolCallError,
        Outcome::PromptIgnored,
        Outcome::AnswerDrift,
    ];
    for o in Outcome::ALL {
        let covered = CASES.iter().any(|c| c.3 == o.as_str()) || elsewhere.contains(&o);
        assert!(covered, "no case for {o}");
    }
}

/// The flavors beside openai-chat, each with the cases that need no other target key: the same
/// scenario must give the same outcome whatever API the server speaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_in_every_flavor() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    // Every flavor in one config, each with every generic scenario.
    let flavors = [
        "openai-chat",
        "openai-completions",
        "openai-responses",
        "anthropic-messages",
        "ollama",
        "azure-openai",
        "gemini",
        "bedrock",
    ];
    // Bedrock signs with the sim's test key, which the sim checks.
    let (_keys, bedrock) = common::bedrock_keys();
    let mut names = Vec::new();
    let mut cases = Vec::new();
    for flavor in flavors {
        let extra = match flavor {
            "bedrock" => bedrock.clone(),
            _ => format!("api: {flavor}"),
        };
        for case in CASES.iter().filter(|c| c.2.is_empty()) {
            names.push((format!("{flavor}-{}", case.0), extra.clone()));
            cases.push(case);
        }
    }
    let targets: Vec<(&str, &str, &str)> = names
        .iter()
        .zip(&cases)
        .map(|((n, extra), c)| (n.as_str(), c.1, extra.as_str()))
        .collect();
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let pairs = cfg
        .targets
        .iter()
        .map(|t| (cfg.probes[0].clone(), t.clone()))
        .collect();
    // Fewer in flight than targets: the byte-split scenarios write hundreds of tiny pieces each,
    // and a two-core machine running 116 of them at once misses the 700 ms first-token deadline.
    let results = Arc::new(Runner::new(16)).run_all(pairs).await;
    let mut wrong = BTreeMap::new();
    for ((r, case), (name, _)) in results.iter().zip(&cases).zip(&names) {
        let failed: Vec<&str> = r.judged.failed_checks.iter().map(|o| o.as_str()).collect();
        if r.judged.outcome.as_str() != case.3 || failed != case.4 {
            wrong.insert(
                name.clone(),
                format!(
                    "got {} {:?} ({:?}), want {} {:?}",
                    r.judged.outcome, failed, r.judged.error, case.3, case.4
                ),
            );
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let generic = CASES.iter().filter(|c| c.2.is_empty()).count();
    assert_eq!(results.len(), flavors.len() * generic);
    // Each flavor was spoken on its own path.
    let paths: Vec<String> = sim.seen().into_iter().map(|s| s.path).collect();
    for tail in [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/messages",
        "/api/chat",
        "/v1/openai/deployments/m/chat/completions",
        "/v1/models/m:streamGenerateContent",
        "/v1/model/m/converse-stream",
    ] {
        let n = paths
            .iter()
            .filter(|p| p.split('?').next().is_some_and(|p| p.ends_with(tail)))
            .count();
        assert!(n >= generic - 2, "{tail}: {n} requests");
    }
}

/// Reasoning before the answer, in every flavor that carries it: TTFT is the first token of
/// any kind, answer TTFT the first answer token; the server's counts are taken as totals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_timing_and_token_counts_in_every_flavor() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let flavors = common::CHAT_FLAVORS;
    let extras: Vec<String> = flavors.iter().map(|f| format!("api: {f}")).collect();
    let targets: Vec<(&str, &str, &str)> = flavors
        .iter()
        .zip(&extras)
        .map(|(f, e)| (*f, "reasoning,ttft=50ms,itl=20ms", e.as_str()))
        .collect();
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let runner = Runner::new(4);
    for t in &cfg.targets {
        let r = runner.run_one(&cfg.probes[0], t).await;
        assert_eq!(
            r.judged.outcome,
            Outcome::Ok,
            "{}: {:?}",
            t.name,
            r.judged.error
        );
        let (ttft, answer) = (
            r.measured.figures.ttft_ms.unwrap(),
            r.measured.figures.answer_ttft_ms.unwrap(),
        );
        // Eight reasoning tokens 20 ms apart come first.
        assert!(
            answer - ttft >= 140.0,
            "{}: ttft {ttft}, answer {answer}",
            t.name
        );
        // The sim counts every token it sent; Anthropic's message_start already said 1, and the
        // cumulative count must not be added to it.
        assert_eq!(
            r.measured.output_tokens,
            Some(r.measured.reading.chunks as u64),
            "{}",
            t.name
        );
        let reasoning = match t.name.as_str() {
            "openai-chat" | "openai-responses" | "gemini" => Some(8),
            _ => None,
        };
        assert_eq!(r.measured.reading.reasoning_tokens, reasoning, "{}", t.name);
        assert!(
            r.context.fingerprint.is_some(),
            "{}: the echoed model at least",
            t.name
        );
    }
}

#[tokio::test]
async fn connect_error_on_a_closed_port() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, mut cfg) = common::config(&sim, &[("down", "healthy", "")], common::PROBE);
    let target = Arc::make_mut(&mut cfg.targets[0]);
    target.base_url = format!("http://127.0.0.1:{}/v1", common::closed_port())
        .parse()
        .unwrap();
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_eq!(
        r.judged.outcome,
        Outcome::ConnectError,
        "{:?}",
        r.judged.error
    );
    assert!(
        r.judged.error.as_deref().unwrap().starts_with("connect:"),
        "{:?}",
        r.judged.error
    );
    assert_eq!(r.measured.reading.http_status, None);
    assert_eq!(r.measured.figures.ttfb_ms, None);
}

#[tokio::test]
async fn the_role_only_first_chunk_is_not_the_first_token() {
    // vLLM's role chunk arrives at once; content only after the scripted 300ms.
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = common::config(&sim, &[("t", "healthy,ttft=300ms", "")], common::PROBE);
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_eq!(r.judged.outcome, Outcome::Ok);
    let ttfb = r.measured.figures.ttfb_ms.unwrap();
    let ttft = r.measured.figures.ttft_ms.unwrap();
    assert!(ttfb < 100.0, "headers come at once: {ttfb}");
    assert!(ttft >= 300.0, "ttft {ttft} must not count the role chunk");
}

/// The server's own figures kept beside ours: llama.cpp's `timings` on the chat flavor and
/// Ollama's durations on its own, both giving the server's time to first token.
#[tokio::test]
async fn server_timings_and_server_ttft() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let targets = [
        ("chat", "llama-cpp,ttft=120ms", "server: llama-cpp"),
        (
            "responses",
            "llama-cpp,ttft=120ms",
            "api: openai-responses, server: llama-cpp",
        ),
        (
            "ollama",
            "llama-cpp,ttft=120ms",
            "api: ollama, server: ollama",
        ),
    ];
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let runner = Runner::new(2);
    for t in &cfg.targets {
        let r = runner.run_one(&cfg.probes[0], t).await;
        assert_eq!(
            r.judged.outcome,
            Outcome::Ok,
            "{}: {:?}",
            t.name,
            r.judged.error
        );
        let timings = r
            .measured
            .reading
            .server_timings
            .as_ref()
            .expect("server timings");
        let key = if t.name == "ollama" {
            "prompt_eval_duration"
        } else {
            "prompt_ms"
        };
        assert!(timings.get(key).is_some(), "{}: {timings}", t.name);
        let server = r.measured.server_ttft_ms.expect("server ttft");
        assert!((server - 120.0).abs() < 1.0, "{}: {server}", t.name);
        // Ours includes the server's and the trip to it.
        assert!(r.measured.figures.ttft_ms.unwrap() >= server, "{}", t.name);
        // The server's figure is published beside ours.
        let metrics = llm_canary::testing::sinks::metrics::Metrics::new(&cfg);
        metrics.record(&r, t);
        let text = String::from_utf8(metrics.encode()).unwrap();
        let gauge: f64 = text
            .lines()
            .find(|l| l.starts_with("llm_canary_server_ttft_seconds{"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{}: no server TTFT gauge in\n{text}", t.name));
        assert!(
            (gauge - server / 1000.0).abs() < 1e-9,
            "{}: {gauge}",
            t.name
        );
    }
}
