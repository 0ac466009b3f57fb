//! `priority:` as each server kind reads it: what arrives at a vLLM-like and an SGLang-like
//! sim, the refusal of a vLLM without priority scheduling, and what `check` says is sent.

use crate::common;

use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;
use serde_json::{json, Value};

/// The `priority` field one run of a target with these keys sends to `scenario`, and whether
/// the run succeeded.
async fn sent(scenario: &str, extra: &str) -> (Option<Value>, bool) {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = common::config(&sim, &[("t", scenario, extra)], common::PROBE);
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    let seen = &sim.seen()[0];
    (seen.body.get("priority").cloned(), r.success())
}

#[tokio::test]
async fn lowest_is_what_each_server_serves_last() {
    // vLLM serves lower values first; the sim's healthy server takes any priority.
    assert_eq!(
        sent("healthy", "server: vllm, priority: lowest").await,
        (Some(json!(1_000_000)), true)
    );
    assert_eq!(
        sent("healthy", "server: vllm, priority: highest").await,
        (Some(json!(-1_000_000)), true)
    );
    // SGLang serves higher values first unless started with
    // --schedule-low-priority-values-first.
    assert_eq!(
        sent("sglang-default", "server: sglang, priority: lowest").await,
        (Some(json!(-1_000_000)), true)
    );
    assert_eq!(
        sent(
            "sglang-default",
            "server: sglang, priority: lowest, priority_low_values_first: true"
        )
        .await,
        (Some(json!(1_000_000)), true)
    );
    assert_eq!(
        sent("sglang-default", "server: sglang, priority: 3").await,
        (Some(json!(3)), true)
    );
}

#[tokio::test]
async fn default_sends_nothing_and_a_default_vllm_takes_it() {
    assert_eq!(
        sent("vllm-default", "server: vllm, priority: default").await,
        (None, true)
    );
    assert_eq!(sent("vllm-default", "server: vllm").await, (None, true));
}

#[tokio::test]
async fn a_vllm_without_priority_scheduling_refuses_and_the_error_says_what_to_do() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let extra = "server: vllm, priority: lowest";
    let (_dir, cfg) = common::config(&sim, &[("t", "vllm-default", extra)], common::PROBE);
    let r = Runner::new(1)
        .run_one(&cfg.probes[0], &cfg.targets[0])
        .await;
    assert_eq!(r.outcome.as_str(), "http_error");
    assert_eq!(r.reason.map(|x| x.as_str()), Some("priority_unsupported"));
    let error = r.error.unwrap_or_default();
    for said in [
        "Got priority 1000000 but Priority scheduling is not enabled.",
        "--scheduling-policy priority",
        "--enable-priority-scheduling",
        "remove priority: from the target",
    ] {
        assert!(error.contains(said), "{said:?} not in {error:?}");
    }
}

#[test]
fn check_says_what_each_target_sends_and_where_its_key_goes() {
    let dir = common::TempDir::new("check-priority");
    let agent = r#"agent: {name: test}
targets:
  - {name: vllm, base_url: "http://127.0.0.1:9/v1", server: vllm, model: m, priority: lowest}
  - {name: sglang, base_url: "http://127.0.0.1:9/v1", server: sglang, model: m, priority: lowest, priority_low_values_first: true}
  - {name: anthropic, base_url: "https://api.anthropic.com/v1", api: anthropic-messages, model: m, api_key_file: key}
  - {name: messages-on-vllm, base_url: "http://127.0.0.1:9/v1", api: anthropic-messages, server: vllm, model: m, api_key_file: key}
"#;
    dir.write(&[
        ("llm-canary.yaml", agent),
        ("key", "sk-test"),
        ("probes/p.yaml", common::PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let said = common::run(
        common::bin()
            .arg("check")
            .arg("-c")
            .arg(dir.path().join("llm-canary.yaml")),
    );
    for line in [
        "target vllm: no key\n  priority: lowest → \"priority\": 1000000 (vLLM serves lower values first; needs --scheduling-policy priority)",
        "target sglang: no key\n  priority: lowest → \"priority\": 1000000 (SGLang with --schedule-low-priority-values-first serves lower values first; needs --enable-priority-scheduling)",
        "target anthropic: key in x-api-key, with anthropic-version",
        "target messages-on-vllm: key as a bearer token in authorization",
    ] {
        assert!(said.contains(line), "{line:?} not in:\n{said}");
    }
}
