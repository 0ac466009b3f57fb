//! `/probe` driven by a real Prometheus with the scrape config of docs/status-page.md (blackbox_exporter's
//! multi-target relabeling), and the admin endpoints open on a loopback-only listener.

use crate::common;

use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, eventually, get, sample};
use llm_canary::testing::sim::Sim;
use serde_json::Value;

/// A probe with no schedule: only `/probe` runs it.
const PROBE: &str = "name: p\nprompt: q.txt\nmax_tokens: 32\ncache_bust: prefix\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 3s}\nchecks: {expect: \"(?i)paris\"}\n";

fn start(sim: &Sim, port: u16, extra_agent: &str) -> Daemon {
    let yaml = format!(
        "agent:\n  name: on-demand\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n{extra_agent}targets:\n  - {{name: chat-a, base_url: \"{}\", model: m}}\n  - {{name: chat-b, base_url: \"{}\", model: m}}\n",
        sim.base_url("healthy"),
        sim.base_url("http-503")
    );
    Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    )
}

/// The `/probe` scrape config of docs/status-page.md, pointed at this test's agent.
fn readme_scrape_config(agent: &str) -> String {
    let readme = include_str!("../../docs/status-page.md");
    let start = readme
        .find("scrape_configs:\n  - job_name: llm-canary-probe")
        .expect("docs/status-page.md documents a /probe scrape config");
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let config = block
        .replace("scrape_interval: 1m", "scrape_interval: 1s")
        .replace("scrape_timeout: 50s", "scrape_timeout: 900ms")
        .replace("probe: [capital]", "probe: [p]")
        .replace("[chat-7b-shadow, chat-13b-shadow]", "[chat-a, chat-b]")
        .replace("llm-canary:9464", agent);
    assert_ne!(
        config, block,
        "the example in docs/status-page.md changed: update this test"
    );
    format!("global: {{scrape_interval: 1s}}\n{config}")
}

fn log_lines(d: &Daemon) -> Vec<Value> {
    std::fs::read_to_string(d.dir.path().join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_drives_the_runs_through_probe() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let d = start(&sim, port, "");
    services::wait_ready(&d.url("/healthz"), Duration::from_secs(30)).await;
    assert!(
        log_lines(&d).is_empty(),
        "no schedule: nothing runs by itself"
    );
    let prom =
        services::prometheus_with_config(&readme_scrape_config(&format!("127.0.0.1:{port}"))).await;

    // Each scrape is one run of the pair it names; the relabeling keeps the target name.
    let q = format!(
        "{}/api/v1/query?query=llm_canary_probe_runs_total{{job=\"llm-canary-probe\"}}",
        prom.url()
    );
    let series = eventually(
        "Prometheus to hold runs of both targets",
        Duration::from_secs(60),
        || {
            let q = q.clone();
            async move {
                let v: Value = serde_json::from_str(&get(&q).await).ok()?;
                let r = v["data"]["result"].as_array()?.clone();
                let targets: Vec<&str> = r
                    .iter()
                    .filter(|s| s["value"][1].as_str().is_some_and(|v| v != "0"))
                    .filter_map(|s| s["metric"]["target"].as_str())
                    .collect();
                (targets.contains(&"chat-a") && targets.contains(&"chat-b")).then_some(r)
            }
        },
    )
    .await;
    for s in &series {
        let m = &s["metric"];
        assert_eq!(
            m["instance"], m["target"],
            "instance is the target name: {m}"
        );
        assert_eq!(m["probe"], "p");
    }
    let logged = log_lines(&d);
    assert!(logged
        .iter()
        .any(|r| r["target"] == "chat-a" && r["outcome"] == "ok"));
    assert!(logged
        .iter()
        .any(|r| r["target"] == "chat-b" && r["outcome"] == "http_error"));
    let up = get(&format!("{}/api/v1/query?query=up", prom.url())).await;
    assert!(
        !up.contains("\"0\"]"),
        "every /probe scrape succeeded: {up}"
    );
}

#[test]
fn a_loopback_listener_takes_admin_requests_without_the_token() {
    // Set before the runtime starts a thread: changing the environment races its readers.
    common::with_env(
        &[("LLM_CANARY_TEST_LOOPBACK_ADMIN", "unused-token")],
        a_loopback_listener_takes_admin_requests_without_the_token_body(),
    );
}

async fn a_loopback_listener_takes_admin_requests_without_the_token_body() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let d = start(
        &sim,
        port,
        "  admin_token_env: LLM_CANARY_TEST_LOOPBACK_ADMIN\n",
    );
    services::wait_ready(&d.url("/healthz"), Duration::from_secs(30)).await;
    let gauge = |text: &str, t: &str| {
        sample(
            text,
            "llm_canary_maintenance",
            &[&format!("target=\"{t}\"")],
        )
    };
    assert_eq!(gauge(&get(&d.url("/metrics")).await, "chat-a"), Some(0.0));
    let post = |body: &'static str| {
        let url = d.url("/-/maintenance");
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, text) =
        post(r#"{"target": "chat-a", "duration": "10m", "reason": "deploy"}"#).await;
    assert_eq!(status, 200, "{text}");
    let window: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(window["maintenance"]["reason"], "deploy");
    assert_eq!(window["maintenance"]["announced"], true);
    eventually("the gauge to follow", Duration::from_secs(10), || async {
        (gauge(&get(&d.url("/metrics")).await, "chat-a")? == 1.0).then_some(())
    })
    .await;
    assert_eq!(gauge(&get(&d.url("/metrics")).await, "chat-b"), Some(0.0));
    // A run in the window is flagged in its record.
    get(&d.url("/probe?target=chat-a&probe=p")).await;
    assert_eq!(log_lines(&d).last().unwrap()["maintenance"], true);

    let (status, text) = post(r#"{"target": "chat-z", "duration": "10m"}"#).await;
    assert_eq!(
        (status, text.trim()),
        (400, "unknown target \"chat-z\" (known: chat-a, chat-b)")
    );
    let (status, _) = post(r#"{"target": "chat-a", "duration": "0s"}"#).await;
    assert_eq!(status, 200);
    eventually("the window to end", Duration::from_secs(10), || async {
        (gauge(&get(&d.url("/metrics")).await, "chat-a")? == 0.0).then_some(())
    })
    .await;
    get(&d.url("/probe?target=chat-a&probe=p")).await;
    assert_eq!(log_lines(&d).last().unwrap()["maintenance"], false);
}
