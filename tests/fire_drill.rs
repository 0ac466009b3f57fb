//! The playbook's fire drill, with real parts: llama.cpp's server with SmolLM2 probed every 5 s
//! by the daemon, which pushes to a real Pushgateway, scraped by a real Prometheus evaluating
//! the shipped rules (every 2 s instead of every 30 s; their 3 minutes untouched). The model
//! server is killed: the P0 `LLMCanaryTargetDown` must fire 3 minutes after the last successful
//! run (plus one evaluation), not before; started again, the alert resolves. About 4 minutes;
//! run with scripts/test-real-llm (built only with the `real-llm` feature).

mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::llama::LlamaServer;
use common::services::{self, eventually, free_port};
use common::TempDir;

const TARGET: &str = "smollm2";
/// The rules' evaluation interval here, in seconds.
const EVALUATION: u64 = 2;
/// The probe's schedule, and its period in seconds.
const SCHEDULE: &str = "*/5 * * * * *";
const PROBE_EVERY: u64 = 5;
/// What the rule promises: a page 3 minutes after the last success.
const DOWN_AFTER: f64 = 180.0;
/// Between the evaluation that fires and our poll seeing it: the poll period and API latency.
const SLACK: f64 = 2.0;

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The state ("pending" or "firing") of the alert `name` on the drill's target, if active.
async fn alert_state(prom: &str, name: &str) -> Option<String> {
    let body = services::get(&format!("{prom}/api/v1/alerts")).await;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["alerts"]
        .as_array()?
        .iter()
        .find(|a| a["labels"]["alertname"] == name && a["labels"]["target"] == TARGET)
        .and_then(|a| a["state"].as_str().map(String::from))
}

/// The value of the instant query `expr`, when it has one.
async fn value(prom: &str, expr: &str) -> Option<f64> {
    let r = reqwest::Client::new()
        .get(format!("{prom}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&r.text().await.ok()?).ok()?;
    v["data"]["result"].as_array()?.first()?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_model_server_pages_in_three_minutes_and_resolves_when_back() {
    let port = free_port();
    let llama = LlamaServer::start_on(port, 2).await;
    let gw = services::pushgateway().await;
    let dir = TempDir::new("drill");
    let rules = services::rules_every(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/llm-canary.rules.yml"),
        &format!("{EVALUATION}s"),
        &dir,
    );
    let prometheus =
        services::prometheus_with_rules(&[format!("127.0.0.1:{}", gw.port)], &[rules], None).await;
    let prom = prometheus.url();
    dir.write(&[
        ("llm-canary.yaml", &format!(
            "agent: {{name: drill}}\npush: {{url: \"{}\", min_interval: 1s}}\ntargets:\n  - {{name: {TARGET}, base_url: \"{}/v1\", api: openai-chat, server: llama-cpp, model: smollm2-135m, labels: {{model_version: q4_1, cluster: local, env: drill}}}}\n",
            gw.url(),
            llama.url()
        )),
        ("probes/sky.yaml", &format!(
            "name: sky\nschedule: \"{SCHEDULE}\"\nprompt: sky.txt\nmax_tokens: 16\ntemperature: 0\ntimeouts: {{connect: 1s, ttft: 20s, stall: 10s, total: 30s}}\nchecks: {{min_chars: 1, allow_truncation: true, repetition: off}}\n"
        )),
        ("prompts/sky.txt", "What color is the sky on a clear day? Answer in one sentence."),
    ]);
    let _daemon = services::daemon(&dir.path().join("llm-canary.yaml"));
    let success = format!("max(llm_canary_last_success_timestamp_seconds{{target=\"{TARGET}\"}})");
    // Healthy first: two successful runs in Prometheus, and no page.
    let first = eventually(
        "a successful run in Prometheus",
        Duration::from_secs(120),
        || value(&prom, &success),
    )
    .await;
    eventually(
        "a second successful run",
        Duration::from_secs(60),
        || async { value(&prom, &success).await.filter(|s| *s > first) },
    )
    .await;
    assert_eq!(alert_state(&prom, "LLMCanaryTargetDown").await, None);

    // Kill the model server.
    let killed = Instant::now();
    let killed_at = unix_now();
    drop(llama);
    let limit = Duration::from_secs_f64(DOWN_AFTER + EVALUATION as f64 + SLACK + 5.0);
    eventually("LLMCanaryTargetDown firing", limit, || async {
        (alert_state(&prom, "LLMCanaryTargetDown").await.as_deref() == Some("firing")).then_some(())
    })
    .await;
    let fired_at = unix_now();
    let fired = killed.elapsed().as_secs_f64();
    let last_success = value(&prom, &success).await.expect("the last success");
    let since_success = fired_at - last_success;
    let ratio_alert = alert_state(&prom, "LLMCanaryTargetFailing").await;
    println!(
        "fire drill: LLMCanaryTargetDown fired {fired:.1} s after the kill, {since_success:.1} s after the last successful run started ({:.1} s before the kill; probes every {PROBE_EVERY} s, rules every {EVALUATION} s); LLMCanaryTargetFailing then: {}",
        killed_at - last_success,
        ratio_alert.as_deref().unwrap_or("inactive")
    );
    // 3 minutes after the last success, plus at most one evaluation: never earlier, never later.
    assert!(
        since_success >= DOWN_AFTER && since_success <= DOWN_AFTER + EVALUATION as f64 + SLACK,
        "fired {since_success:.1} s after the last success"
    );
    // So at most that after the kill, the last success having started before it.
    assert!(
        fired <= DOWN_AFTER + EVALUATION as f64 + SLACK,
        "fired {fired:.1} s after the kill"
    );

    // Start it again on the same address. Its first run is a cold start on a shared CPU, as
    // slow as the machine is busy; once that success is in Prometheus, the page resolves at the
    // next evaluation.
    let llama = LlamaServer::start_on(port, 2).await;
    let back = Instant::now();
    eventually(
        "a successful run after the restart",
        Duration::from_secs(120),
        || async { value(&prom, &success).await.filter(|s| *s > killed_at) },
    )
    .await;
    let seen = Instant::now();
    eventually(
        "LLMCanaryTargetDown resolved",
        Duration::from_secs_f64(EVALUATION as f64 + SLACK),
        || async {
            alert_state(&prom, "LLMCanaryTargetDown")
                .await
                .is_none()
                .then_some(())
        },
    )
    .await;
    println!(
        "fire drill: resolved {:.1} s after the success reached Prometheus, {:.1} s after the server was back ({:.1} s after the kill)",
        seen.elapsed().as_secs_f64(),
        back.elapsed().as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    drop(llama);
}
