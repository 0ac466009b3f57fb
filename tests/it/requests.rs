//! What arrives at the server: cache busting per mode and server kind (against the sim's prefix
//! cache and HTTP cache), priority, headers, the request id and the API key.

use crate::common;

use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;
use serde_json::json;

const PROBE_WITH: &str = r#"name: p
prompt: q.txt
max_tokens: 64
temperature: 0
cache_bust: MODE
checks: {expect: "(?i)paris"}
"#;

/// Runs the probe with `cache_bust: MODE` twice on one target of this server.
async fn twice(mode: &str, server: &str) -> Vec<llm_canary::testing::sim::Seen> {
    let extra = format!("server: {server}");
    common::twice(&extra, &PROBE_WITH.replace("MODE", mode)).await
}

#[tokio::test]
async fn off_is_served_from_both_caches() {
    // Proves the sim's caches work, so the passes below mean something.
    let seen = twice("off", "vllm").await;
    assert!(!seen[0].prefix_cache_hit && !seen[0].http_cache_hit);
    assert!(
        seen[1].prefix_cache_hit,
        "prefix cache should answer a repeated prompt"
    );
    assert!(
        seen[1].http_cache_hit,
        "HTTP cache should answer a repeated body"
    );
    assert_eq!(seen[1].header("cache-control"), None);
    assert!(seen[1].body.get("cache_salt").is_none());
}

#[tokio::test]
async fn auto_on_vllm_sends_a_fresh_cache_salt() {
    let seen = twice("auto", "vllm").await;
    assert!(!seen[1].prefix_cache_hit && !seen[1].http_cache_hit);
    let (a, b) = (&seen[0].body["cache_salt"], &seen[1].body["cache_salt"]);
    assert!(a.is_string() && a != b, "{a} {b}");
    assert_eq!(seen[1].header("cache-control"), Some("no-cache"));
    assert!(seen[1].body.get("cache_prompt").is_none());
}

#[tokio::test]
async fn auto_on_llama_cpp_turns_the_prompt_cache_off() {
    let seen = twice("auto", "llama-cpp").await;
    assert!(!seen[1].prefix_cache_hit && !seen[1].http_cache_hit);
    assert_eq!(seen[1].body["cache_prompt"], json!(false));
    assert!(seen[1].body.get("cache_salt").is_none());
}

#[tokio::test]
async fn prefix_defeats_every_cache_on_a_generic_server() {
    let seen = twice("prefix", "generic").await;
    assert!(!seen[1].prefix_cache_hit && !seen[1].http_cache_hit);
    let first = |i: usize| seen[i].body["messages"][0]["content"].as_str();
    common::assert_prefix_busted(first(0), first(1));
}

#[tokio::test]
async fn auto_on_generic_can_only_send_the_header() {
    let seen = twice("auto", "generic").await;
    assert!(!seen[1].http_cache_hit);
    assert!(
        seen[1].prefix_cache_hit,
        "a generic server gets no cache field; `check` warns about this"
    );
    // Nothing the plain OpenAI API would reject.
    let keys = common::body_keys(&seen[1]);
    assert_eq!(
        keys,
        [
            "max_tokens",
            "messages",
            "model",
            "stream",
            "stream_options",
            "temperature"
        ]
    );
    assert_eq!(
        seen[1].body["stream_options"],
        json!({"include_usage": true})
    );
}

#[test]
fn priority_headers_request_id_and_key_arrive() {
    // Set before the runtime starts a thread: changing the environment races its readers.
    common::with_env(
        &[("LLM_CANARY_TEST_KEY_REQ", "sk-test-arrives")],
        priority_headers_request_id_and_key_arrive_body(),
    );
}

async fn priority_headers_request_id_and_key_arrive_body() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let extra = "server: vllm, priority: 7, headers: {x-canary: \"1\", x-team: infra}, api_key_env: LLM_CANARY_TEST_KEY_REQ";
    let (_dir, cfg) = common::config(&sim, &[("t", "healthy", extra)], common::PROBE);
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert!(r.success(), "{:?}", r.judged.error);
    let seen = &sim.seen()[0];
    assert_eq!(seen.body["priority"], json!(7));
    assert_eq!(seen.header("x-canary"), Some("1"));
    assert_eq!(seen.header("x-team"), Some("infra"));
    assert_eq!(seen.header("x-request-id"), Some(r.id.request_id.as_str()));
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test-arrives"));
    assert_eq!(seen.body["stream"], json!(true));
    assert_eq!(seen.body["max_tokens"], json!(64));
    // A second run has its own request id.
    let r2 = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_ne!(r.id.request_id, r2.id.request_id);
    assert_eq!(
        sim.seen()[1].header("x-request-id"),
        Some(r2.id.request_id.as_str())
    );
    // Each carries its own sampled W3C trace context, whose trace id the result names.
    for (seen, r) in sim.seen().iter().zip([&r, &r2]) {
        let tp = seen.header("traceparent").expect("a traceparent header");
        assert_eq!(tp, format!("00-{}-{}", r.id.trace_id, &tp[36..]));
        assert!(tp.ends_with("-01"), "{tp}");
    }
    assert_ne!(r.id.trace_id, r2.id.trace_id);
}
#[test]
fn anthropic_keys_go_in_x_api_key_with_a_version_and_bearer_elsewhere() {
    // Set before the runtime starts a thread: changing the environment races its readers.
    common::with_env(
        &[("LLM_CANARY_TEST_KEY_ANT", "sk-ant-test")],
        anthropic_keys_go_in_x_api_key_with_a_version_and_bearer_elsewhere_body(),
    );
}

async fn anthropic_keys_go_in_x_api_key_with_a_version_and_bearer_elsewhere_body() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let anthropic =
        "api: anthropic-messages, server: anthropic, api_key_env: LLM_CANARY_TEST_KEY_ANT";
    let vllm = "api: anthropic-messages, server: vllm, api_key_env: LLM_CANARY_TEST_KEY_ANT";
    let (_dir, cfg) = common::config(
        &sim,
        &[("a", "healthy", anthropic), ("v", "healthy", vllm)],
        common::PROBE,
    );
    let runner = Runner::new(1);
    for t in &cfg.targets {
        runner.run_one(&cfg.probes[0], t).await;
    }
    let seen = sim.seen();
    assert_eq!(seen[0].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(seen[1].header("authorization"), Some("Bearer sk-ant-test"));
    assert_eq!(seen[1].header("x-api-key"), None);
    assert!(seen[0].path.ends_with("/v1/messages"), "{}", seen[0].path);
}
