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
    assert_eq!(r.judged.outcome.as_str(), "http_error");
    assert_eq!(
        r.measured.reading.http_reason.map(|x| x.as_str()),
        Some("priority_unsupported")
    );
    let error = r.judged.error.unwrap_or_default();
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

/// A probe that waits in a busy server's queue as long as it must: its first token may come
/// seconds late.
const PATIENT_PROBE: &str = r#"name: p
prompt: q.txt
max_tokens: 64
timeouts: {connect: 1s, ttft: 30s, stall: 5s, total: 60s}
checks: {min_chars: 1}
"#;

/// Fires, while one user request holds the sim's only slot, probes and user requests in turn
/// (probe, user, probe, user ...), each queued before the next is sent. Returns each
/// request's (is_probe, when it was served, how long it waited in ms), in arrival order.
async fn busy_server(probe_keys: &str) -> Vec<(bool, std::time::Instant, f64)> {
    const SPEC: &str = "healthy,slots=1,ttft=20ms,itl=5ms";
    const EACH: usize = 4;
    let sim = std::sync::Arc::new(Sim::start("127.0.0.1:0").await.unwrap());
    let (_dir, cfg) = common::config(
        &sim,
        &[
            ("users", SPEC, "server: vllm"),
            ("probes", SPEC, probe_keys),
        ],
        PATIENT_PROBE,
    );
    let runner = std::sync::Arc::new(Runner::new(64));
    let fire = |t: usize| {
        let (runner, probe, target) = (
            runner.clone(),
            cfg.probes[0].clone(),
            cfg.targets[t].clone(),
        );
        tokio::spawn(async move { runner.run_one(&probe, &target).await })
    };
    // The request that keeps the slot busy: served at once.
    let first = fire(0);
    while sim.seen().is_empty() {
        tokio::task::yield_now().await;
    }
    let mut runs = Vec::new();
    for i in 0..2 * EACH {
        let is_probe = i % 2 == 0;
        runs.push((is_probe, fire(usize::from(is_probe))));
        // Queued before the next arrives, so the arrival order is the one written.
        while sim.waiting(SPEC) < i + 1 {
            tokio::task::yield_now().await;
        }
    }
    let first = first.await.unwrap();
    assert!(
        first.success(),
        "{:?} {:?}",
        first.judged.outcome,
        first.judged.error
    );
    let mut out = Vec::new();
    for (is_probe, run) in runs {
        let r = run.await.unwrap();
        assert!(r.success(), "{:?}", r.judged.error);
        let served = sim.served_at(&r.id.request_id).expect("a slot");
        let waited = sim.queue_wait_ms(&r.id.request_id).expect("a wait");
        out.push((is_probe, served, waited));
    }
    out
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

/// vLLM's rule in a busy sim with one slot: probes at `lowest` are served after every user
/// request that was waiting, though each probe arrived first; at the default priority (no
/// field), the same probes are served in arrival order and users wait behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_at_lowest_wait_behind_users_and_users_never_behind_probes() {
    let lowest = busy_server("server: vllm, priority: lowest").await;
    let last_user = lowest.iter().filter(|r| !r.0).map(|r| r.1).max().unwrap();
    let first_probe = lowest.iter().filter(|r| r.0).map(|r| r.1).min().unwrap();
    assert!(
        last_user < first_probe,
        "a probe at lowest was served before a user request"
    );
    let (users, probes) = (
        mean(lowest.iter().filter(|r| !r.0).map(|r| r.2)),
        mean(lowest.iter().filter(|r| r.0).map(|r| r.2)),
    );
    let fcfs = busy_server("server: vllm").await;
    let (fcfs_users, fcfs_probes) = (
        mean(fcfs.iter().filter(|r| !r.0).map(|r| r.2)),
        mean(fcfs.iter().filter(|r| r.0).map(|r| r.2)),
    );
    // In arrival order, each user request waits behind the probe that came before it.
    let served: Vec<bool> = {
        let mut by_time = fcfs.clone();
        by_time.sort_by_key(|r| r.1);
        by_time.iter().map(|r| r.0).collect()
    };
    assert_eq!(served, [true, false, true, false, true, false, true, false]);
    assert!(
        users < fcfs_users,
        "users waited {users:.0} ms with probes at lowest, {fcfs_users:.0} ms without"
    );
    println!(
        "one slot, 4 user requests and 4 probes queued alternately behind a user request: \
         mean queue wait with probes at lowest: users {users:.0} ms, probes {probes:.0} ms; \
         with probes at the default priority: users {fcfs_users:.0} ms, probes {fcfs_probes:.0} ms"
    );
}
