//! The playbook's fire drill, with real parts: llama.cpp's server with SmolLM2 probed every 2
//! minutes by the daemon with its default confirmation runs (`{runs: 2, after: 20s}`), which
//! pushes to a real Pushgateway, scraped by a real Prometheus evaluating the shipped rules
//! (every 2 s instead of every 30 s). First a blip: the server is down for one scheduled run
//! and back before its confirmation, which succeeds: no page, ever. Then the server is killed
//! just after a run: the P0 `LLMCanaryTargetDown` must fire within 3 minutes of the kill, once
//! the next scheduled run and its two confirmations failed; started again, the alert resolves
//! at the next successful run. 7 to 10 minutes (it waits for a 2-minute schedule four times);
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
const SCHEDULE: &str = "0 */2 * * * *";
const PROBE_EVERY: u64 = 120;
/// The P0 clock: a hard-down target pages within 3 minutes of the fault.
const P0_CLOCK: f64 = 180.0;
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

/// The newest `metric` of the drill's target in Prometheus.
fn newest(metric: &str) -> String {
    format!("max({metric}{{target=\"{TARGET}\"}})")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_model_server_pages_within_three_minutes_and_a_blip_never_does() {
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
        // No `confirm:`: the default, two confirmation runs 20 s apart.
        ("probes/sky.yaml", &format!(
            "name: sky\nschedule: \"{SCHEDULE}\"\nprompt: sky.txt\nmax_tokens: 16\ntemperature: 0\ntimeouts: {{connect: 1s, ttft: 20s, stall: 10s, total: 30s}}\nchecks: {{min_chars: 1, allow_truncation: true, repetition: off}}\n"
        )),
        ("prompts/sky.txt", "What color is the sky on a clear day? Answer in one sentence."),
    ]);
    let _daemon = services::daemon(&dir.path().join("llm-canary.yaml"));
    let success = newest("llm_canary_last_success_timestamp_seconds");
    let last_run = newest("llm_canary_last_run_timestamp_seconds");
    let first = eventually(
        "a successful run in Prometheus",
        Duration::from_secs(PROBE_EVERY + 120),
        || value(&prom, &success),
    )
    .await;

    // A blip: down for the next scheduled run, back before its confirmation (20 s later).
    drop(llama);
    let failed = eventually(
        "the next scheduled run, failed",
        Duration::from_secs(PROBE_EVERY + 30),
        || async { value(&prom, &last_run).await.filter(|r| *r > first) },
    )
    .await;
    let llama = LlamaServer::start_on(port, 2).await;
    let back = eventually(
        "the confirmation run, ok",
        Duration::from_secs(60),
        || async { value(&prom, &success).await.filter(|s| *s > failed) },
    )
    .await;
    let confirmed_ok =
        format!("max(llm_canary_confirm_runs_total{{outcome=\"ok\",target=\"{TARGET}\"}})");
    assert_eq!(value(&prom, &confirmed_ok).await, Some(1.0));
    println!(
        "fire drill: the blip's failed run at +{:.1} s, its confirmation ok {:.1} s later",
        failed - first,
        back - failed
    );
    // Once the rules have evaluated with the confirmation's success, the alert was never
    // pending nor firing.
    eventually(
        "the rules to see the confirmation's success",
        Duration::from_secs(30),
        || async {
            let s = value(
                &prom,
                &newest("llm_canary:target_last_success_timestamp_seconds"),
            )
            .await;
            s.filter(|s| *s >= back)
        },
    )
    .await;
    let ever = format!(
        "max_over_time(ALERTS{{alertname=\"LLMCanaryTargetDown\",target=\"{TARGET}\"}}[15m])"
    );
    assert_eq!(value(&prom, &ever).await, None, "the blip paged");

    // Hard down, killed just after a successful run: the worst moment, a whole period before
    // the next run finds it down.
    let killed = Instant::now();
    let killed_at = unix_now();
    drop(llama);
    let limit = Duration::from_secs_f64(P0_CLOCK + 30.0);
    eventually("LLMCanaryTargetDown firing", limit, || async {
        (alert_state(&prom, "LLMCanaryTargetDown").await.as_deref() == Some("firing")).then_some(())
    })
    .await;
    let fired = killed.elapsed().as_secs_f64();
    let last_success = value(&prom, &success).await.expect("the last success");
    let first_failed = value(
        &prom,
        &newest("llm_canary_confirmed_failure_timestamp_seconds"),
    )
    .await
    .expect("a confirmed failure");
    println!(
        "fire drill: LLMCanaryTargetDown fired {fired:.1} s after the kill ({:.1} s after the last successful run started, {:.1} s after the first failed run started; probes every {PROBE_EVERY} s, confirmations 20 s apart, rules every {EVALUATION} s)",
        unix_now() - last_success,
        unix_now() - first_failed,
    );
    assert!(
        first_failed > killed_at,
        "the confirmed failure began before the kill"
    );
    assert!(fired <= P0_CLOCK, "fired {fired:.1} s after the kill");
    // About a minute after the first failed run: two confirmations 20 s apart, a push, a scrape
    // and an evaluation, and the time the runs take to fail.
    assert!(
        unix_now() - first_failed <= 90.0,
        "fired {:.1} s after the first failed run",
        unix_now() - first_failed
    );

    // Start it again on the same address: the next scheduled run succeeds, and once that
    // success is in Prometheus, the page resolves at the next evaluation.
    let llama = LlamaServer::start_on(port, 2).await;
    eventually(
        "a successful run after the restart",
        Duration::from_secs(PROBE_EVERY + 60),
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
        "fire drill: resolved {:.1} s after the success reached Prometheus ({:.1} s after the kill)",
        seen.elapsed().as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    drop(llama);
}
