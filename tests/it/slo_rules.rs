//! `rules -c FILE`: the SLO rules it writes are the ones shipped in deploy/prometheus/, promtool
//! checks them and runs their unit tests, and a real Prometheus loads and evaluates them.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::services::{self, binary, eventually, get};
use common::{root, run, TempDir};
use llm_canary::testing::sim::Sim;

fn rules(config: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["rules", "-c"])
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn the_shipped_slo_rules_are_what_rules_writes() {
    let out = rules(&root().join("deploy/prometheus/slo/llm-canary.yaml"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(root().join("deploy/prometheus/slo.rules.yml")).unwrap(),
        "deploy/prometheus/slo.rules.yml is stale: run llm-canary rules -c deploy/prometheus/slo/llm-canary.yaml -o deploy/prometheus/slo.rules.yml"
    );
}

#[test]
fn promtool_checks_the_slo_rules_and_their_unit_tests_pass() {
    let promtool = binary("promtool", "prometheus");
    let out = run(Command::new(&promtool)
        .args(["check", "rules"])
        .arg(root().join("deploy/prometheus/slo.rules.yml")));
    assert!(out.contains("SUCCESS: 41 rules found"), "{out}");
    let out = run(Command::new(&promtool)
        .args(["test", "rules"])
        .arg(root().join("deploy/prometheus/tests/slo_test.yml")));
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn a_config_without_slo_has_nothing_to_generate() {
    let dir = TempDir::new("noslo");
    dir.write(&[
        (
            "llm-canary.yaml",
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
        ),
        ("probes/p.yaml", "name: p\nprompt: q.txt\n"),
        ("prompts/q.txt", "What is the capital of France?\n"),
    ]);
    let out = rules(&dir.path().join("llm-canary.yaml"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no target or probe has an slo"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_loads_the_rules_and_reads_the_agents_series() {
    // Two targets of the sim, the daemon pushing their runs: `a` (every run an HTTP 503) has
    // an availability objective, `b` (healthy, fast) two latency objectives, and the probe its
    // own availability objective on both. Every generated rule evaluates without error in a
    // real Prometheus, on the series the agent writes (its `le` spelling included).
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let dir = TempDir::new("slo");
    let agent = format!(
        "agent: {{name: canary-slo}}\npush: {{url: \"{}\", min_interval: 300ms}}\ntargets:\n  - name: a\n    base_url: \"{}\"\n    model: m\n    slo: {{availability: 99.9%, window: 28d}}\n  - name: b\n    base_url: \"{}\"\n    model: m\n    slo:\n      latency:\n        - {{figure: ttft, at_most: 5s, share: 99%}}\n        - {{figure: e2e, at_most: 10s, share: 90%}}\n",
        gw.url(),
        sim.base_url("http-503"),
        sim.base_url("healthy"),
    );
    dir.write(&[
        ("llm-canary.yaml", &agent),
        (
            "probes/p.yaml",
            "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 16\nchecks: {allow_truncation: true}\nslo: {availability: 99%}\n",
        ),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let out = rules(&dir.path().join("llm-canary.yaml"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = dir.path().join("written.rules.yml");
    std::fs::write(&written, &out.stdout).unwrap();
    let file = services::rules_every(&written, "1s", &dir);
    let prom =
        services::prometheus_with_rules(&[format!("127.0.0.1:{}", gw.port)], &[file], None).await;
    let _daemon = services::daemon(&dir.path().join("llm-canary.yaml"));

    let query = |expr: &'static str| {
        let url = format!("{}/api/v1/query", prom.url());
        async move {
            let r = reqwest::Client::new()
                .get(url)
                .query(&[("query", expr)])
                .send()
                .await
                .ok()?;
            let v: serde_json::Value = serde_json::from_str(&r.text().await.ok()?).ok()?;
            let first = v["data"]["result"].as_array()?.first()?.clone();
            first["value"][1].as_str()?.parse::<f64>().ok()
        }
    };
    // a fails every run: 1000x a 0.1% budget.
    let burn = eventually("a's burn rate", Duration::from_secs(60), || {
        query("llm_canary:slo_burn_rate:rate5m{probe=\"\",target=\"a\",slo=\"availability\"}")
    })
    .await;
    assert!((burn - 1000.0).abs() < 1e-6, "{burn}");
    // The probe's own objective, on each target apart: 100x a 1% budget on a, nothing on b.
    let burn = eventually("p's burn rate on a", Duration::from_secs(60), || {
        query("llm_canary:slo_burn_rate:rate5m{probe=\"p\",target=\"a\",slo=\"availability\"}")
    })
    .await;
    assert!((burn - 100.0).abs() < 1e-6, "{burn}");
    let burn = eventually("p's burn rate on b", Duration::from_secs(60), || {
        query("llm_canary:slo_burn_rate:rate5m{probe=\"p\",target=\"b\",slo=\"availability\"}")
    })
    .await;
    assert_eq!(burn, 0.0);
    // b's runs are all fast and ok: no latency errors, all goodput.
    let slow = eventually("b's ttft error ratio", Duration::from_secs(60), || {
        query("llm_canary:slo_errors:ratio_rate5m{target=\"b\",slo=\"ttft_le_5s\"}")
    })
    .await;
    assert_eq!(slow, 0.0);
    let goodput = eventually("b's goodput", Duration::from_secs(60), || {
        query("llm_canary:goodput_ratio:rate5m{probe=\"\",target=\"b\"}")
    })
    .await;
    assert_eq!(goodput, 1.0);
    let goodput_a = eventually("a's goodput", Duration::from_secs(60), || {
        query("llm_canary:goodput_ratio:rate5m{probe=\"\",target=\"a\"}")
    })
    .await;
    assert_eq!(goodput_a, 0.0);

    // The dashboard's SLO row shows these targets: every query returns data.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/grafana/llm-canary.json")).unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .filter(|e| crate::deploy_kit::is_slo_query(e))
        .collect();
    assert_eq!(exprs.len(), 4, "{exprs:?}");
    for e in exprs {
        let e = crate::deploy_kit::substitute(&e);
        let url = format!("{}/api/v1/query", prom.url());
        eventually(&format!("data for {e}"), Duration::from_secs(60), || {
            let (url, e) = (url.clone(), e.clone());
            async move {
                let r = reqwest::Client::new()
                    .get(url)
                    .query(&[("query", e)])
                    .send()
                    .await
                    .ok()?;
                let v: serde_json::Value = serde_json::from_str(&r.text().await.ok()?).ok()?;
                v["data"]["result"].as_array()?.first().cloned()
            }
        })
        .await;
    }

    let body: serde_json::Value =
        serde_json::from_str(&get(&format!("{}/api/v1/rules", prom.url())).await).unwrap();
    let rules = body["data"]["groups"][0]["rules"].as_array().unwrap();
    for r in rules {
        assert_eq!(r["health"], "ok", "{r}");
    }
    let names: Vec<&str> = rules.iter().filter_map(|r| r["name"].as_str()).collect();
    for name in [
        "LLMCanarySLOFastBurn",
        "LLMCanarySLOSlowBurn",
        "LLMCanarySLOBudgetBurn",
        "llm_canary:slo_error_budget_remaining:ratio",
    ] {
        assert!(names.contains(&name), "{name} not loaded: {names:?}");
    }
}
