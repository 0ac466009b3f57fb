//! The deployment kit in `deploy/`, tested with the real tools: promtool (rules and their unit
//! tests), amtool (config, routing, templates), a Kubernetes schema validator, and the Grafana
//! dashboard's queries against a real Prometheus fed by the daemon through a Pushgateway.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::services::{self, binary, eventually, get};
use common::{root, run, TempDir};
use llm_canary::sim::Sim;

/// `promtool <args> <file>` on a file of deploy/prometheus/, and what it printed.
fn promtool(args: &[&str], file: &str) -> String {
    run(Command::new(binary("promtool", "prometheus"))
        .args(args)
        .arg(root().join("deploy/prometheus").join(file)))
}

#[test]
fn prometheus_rules_check() {
    let out = promtool(&["check", "rules"], "llm-canary.rules.yml");
    assert!(out.contains("SUCCESS: 37 rules found"), "{out}");
}

#[test]
fn prometheus_alert_unit_tests() {
    let out = promtool(&["test", "rules"], "tests/alerts_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn prometheus_weekly_baseline_unit_tests() {
    // Three weeks of a daily cycle: about a minute of promtool.
    let out = promtool(&["test", "rules"], "tests/weekly_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_rule_tests_are_what_the_generator_writes() {
    let dir = root().join("deploy/prometheus/tests");
    let before: Vec<String> = ["alerts_test.yml", "weekly_test.yml"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
        .collect();
    let tmp = TempDir::new("gen");
    std::fs::copy(dir.join("generate.py"), tmp.path().join("generate.py")).unwrap();
    run(Command::new("python3").arg(tmp.path().join("generate.py")));
    for (f, b) in ["alerts_test.yml", "weekly_test.yml"].iter().zip(before) {
        assert_eq!(
            std::fs::read_to_string(tmp.path().join(f)).unwrap(),
            b,
            "{f} is stale: run python3 deploy/prometheus/tests/generate.py"
        );
    }
}

#[test]
fn alertmanager_config_routes_and_templates() {
    let am = root().join("deploy/alertmanager");
    let amtool = binary("amtool", "prometheus-alertmanager");
    run(Command::new(&amtool)
        .args(["check-config"])
        .arg(am.join("alertmanager.yml")));
    for (severity, receiver) in [("P0", "page"), ("P1", "chat"), ("P2", "ticket")] {
        let out = Command::new(&amtool)
            .args(["config", "routes", "test", "--config.file"])
            .arg(am.join("alertmanager.yml"))
            .arg(format!("severity={severity}"))
            .args(["alertname=LLMCanaryTTFTAboveBaseline", "target=t"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            receiver,
            "{severity}"
        );
    }
    let rendered = run(Command::new(&amtool)
        .current_dir(&am)
        .args(["template", "render", "--template.glob=templates/*.tmpl", "--template.data=tests/firing.json"])
        .arg("--template.text={{ template \"llm_canary.title\" . }}\n{{ template \"llm_canary.text\" . }}"));
    let expected = std::fs::read_to_string(am.join("tests/firing.expected")).unwrap();
    assert_eq!(rendered.trim_end(), expected.trim_end());
    for field in [
        "chat-7b-v3 20240112",
        "cluster: inference-prod-01",
        "now: 1.95s",
        "baseline: 300.4ms",
        "ratio: 6.49x",
        "since: 2026-11-29 14:03 UTC",
        "runbook: https://",
        "dashboard: https://",
        "Resolved:",
    ] {
        assert!(
            rendered.contains(field),
            "the message lacks {field:?}:\n{rendered}"
        );
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

#[test]
fn every_manifest_parses_and_kubernetes_objects_validate() {
    let mut files = Vec::new();
    yaml_files(&root().join("deploy"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let docs: Result<Vec<serde_json::Value>, _> = serde_saphyr::from_str_multiple(&text);
        assert!(
            docs.is_ok(),
            "{} does not parse: {:?}",
            f.display(),
            docs.err()
        );
    }
    let validator = std::env::var("KUBERNETES_VALIDATE").unwrap_or_else(|_| {
        root()
            .join(".venv-tools/bin/kubernetes-validate")
            .display()
            .to_string()
    });
    assert!(
        Path::new(&validator).exists(),
        "{validator} is missing: scripts/test installs it (python3 -m venv .venv-tools && .venv-tools/bin/pip install kubernetes-validate)"
    );
    // The manifests one by one; tests/deploy_fleet.rs renders and validates every layout.
    let k8s = root().join("deploy/kubernetes");
    let manifests = [
        "common/namespace.yaml",
        "common/service.yaml",
        "common/networkpolicy.yaml",
        "common/pushgateway.yaml",
        "deployment.yaml",
    ];
    let out = run(Command::new(&validator)
        .arg("--strict")
        .args(manifests.iter().map(|m| k8s.join(m))));
    assert_eq!(out.matches("passed").count(), 7, "{out}");
}

#[test]
fn the_kubernetes_config_is_a_valid_agent_config() {
    // As the pods mount it: the config folder beside the probes folder.
    let common = root().join("deploy/kubernetes/common");
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .arg("check")
        .arg("-c")
        .arg(common.join("config/llm-canary.yaml"))
        .env("SHADOW_API_KEY", "test")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dep: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("deploy/kubernetes/deployment.yaml")).unwrap(),
    )
    .unwrap();
    // The container's limits are the daemon's budget.
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"]["memory"], "64Mi");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
}

#[test]
fn systemd_accepts_the_unit_and_rates_it_hardened() {
    // The unit as installed, pointing at this build instead of /usr/local/bin.
    let dir = TempDir::new("unit");
    let unit = std::fs::read_to_string(root().join("deploy/systemd/llm-canary.service"))
        .unwrap()
        .replace(
            "/usr/local/bin/llm-canary",
            env!("CARGO_BIN_EXE_llm-canary"),
        );
    dir.write(&[("llm-canary.service", &unit)]);
    let path = dir.path().join("llm-canary.service");
    let analyze = |args: &[&str]| {
        Command::new(binary("systemd-analyze", "systemd"))
            .args(args)
            .arg(&path)
            .output()
            .unwrap()
    };
    // Unknown or misspelt directives, bad values and a missing binary are errors here.
    let out = analyze(&["verify"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    // systemd's exposure score, 0 (locked down) to 10 (fully exposed); --threshold is in tenths.
    let out = analyze(&["security", "--offline=true", "--threshold=20"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let score = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for llm-canary.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no exposure level in {text}"));
    assert!(
        out.status.success() && score <= 2.0,
        "exposure {score}:\n{text}"
    );
    println!("systemd-analyze security: exposure {score}");
}

#[test]
fn dockerfile_and_systemd_unit_refer_to_what_exists() {
    let docker = std::fs::read_to_string(root().join("deploy/Dockerfile")).unwrap();
    for line in docker
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        for src in line
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .split_last()
            .unwrap()
            .1
        {
            assert!(
                root().join(src).exists(),
                "Dockerfile copies {src}, which does not exist"
            );
        }
    }
    assert!(
        docker.contains("USER 65532"),
        "the runtime image runs as non-root"
    );
    let unit = std::fs::read_to_string(root().join("deploy/systemd/llm-canary.service")).unwrap();
    for want in [
        "[Unit]",
        "[Service]",
        "[Install]",
        "ExecStart=/usr/local/bin/llm-canary run",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "DynamicUser=yes",
        "MemoryMax=64M",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
    ] {
        assert!(unit.contains(want), "the unit lacks {want}");
    }
}

/// Grafana variables become "all": `.*` for label matchers, a range for `$__rate_interval`.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$env", ".*")
        .replace("$cluster", ".*")
        .replace("$model", ".*")
        .replace("$target", ".*")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_parses_and_returns_data() {
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/grafana/llm-canary.json")).unwrap(),
    )
    .unwrap();
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    // 80 minutes of recorded TTFT p95 for the target the daemon probes below, alternating 100 ms
    // and 120 ms: the sliding baseline (the hour before the last 15 minutes) is then 110 ms and
    // its upper edge 110 + 3 x 10 ms, which the band panel must show.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut history = String::from("# TYPE llm_canary:ttft_seconds:p95_5m gauge\n");
    for (i, t) in (now - 80 * 60..now - 60).step_by(30).enumerate() {
        let v = if i % 2 == 0 { 0.10 } else { 0.12 };
        history.push_str(&format!("llm_canary:ttft_seconds:p95_5m{{target=\"t1\",probe=\"p\",model=\"m1\",model_version=\"1\",cluster=\"c1\",env=\"prod\"}} {v} {t}\n"));
    }
    history.push_str("# EOF\n");
    let prom = services::prometheus_with_rules(
        &[format!("127.0.0.1:{}", gw.port)],
        &[root().join("deploy/prometheus/llm-canary.rules.yml")],
        Some(&history),
    )
    .await;
    let dir = TempDir::new("dash");
    let agent = format!(
        "agent: {{name: canary-dash, labels: {{region: test}}}}\npush: {{url: \"{}\", min_interval: 300ms}}\ntargets:\n  - {{name: t1, base_url: \"{}\", model: m1, server: vllm, labels: {{env: prod, cluster: c1, model_version: \"1\"}}}}\n",
        gw.url(),
        sim.base_url("healthy")
    );
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\nchecks: {expect: \"(?i)paris\"}\n"),
        ("prompts/q.txt", common::PROMPT),
    ]);
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _daemon = Kill(
        Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .arg("run")
            .arg("-c")
            .arg(dir.path().join("llm-canary.yaml"))
            .spawn()
            .unwrap(),
    );

    let query = |expr: String| {
        let url = format!("{}/api/v1/query", prom.url());
        async move {
            let r = reqwest::Client::new()
                .get(url)
                .query(&[("query", expr)])
                .send()
                .await
                .unwrap();
            serde_json::from_str::<serde_json::Value>(&r.text().await.unwrap()).unwrap()
        }
    };
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push((
                p["title"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert!(exprs.len() >= 15);
    for (title, expr) in &exprs {
        let e = substitute(expr);
        let v = query(e.clone()).await;
        assert_eq!(v["status"], "success", "{title}: {e} does not parse: {v}");
        let first = eventually(
            &format!("data for {title}: {e}"),
            Duration::from_secs(60),
            || {
                let e = e.clone();
                let q = &query;
                async move {
                    let v = q(e).await;
                    let first = v["data"]["result"].as_array()?.first()?.clone();
                    Some(first)
                }
            },
        )
        .await;
        // The band is the rules' sliding baseline over the backfilled history.
        let value = || first["value"][1].as_str().unwrap().parse::<f64>().unwrap();
        if expr.contains(":baseline_upper") {
            assert!((value() - 0.14).abs() < 0.002, "{title}: {e} = {first}");
        } else if expr.contains(":baseline") {
            assert!((value() - 0.11).abs() < 0.002, "{title}: {e} = {first}");
        }
    }
    // The variables list values too.
    for v in dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "query")
    {
        let q = v["query"]["query"].as_str().unwrap();
        let (selector, label) = q
            .trim_start_matches("label_values(")
            .trim_end_matches(')')
            .rsplit_once(", ")
            .unwrap();
        let url = format!(
            "{}/api/v1/label/{label}/values?match[]={}",
            prom.url(),
            substitute(selector)
        );
        let body: serde_json::Value = serde_json::from_str(&get(&url).await).unwrap();
        assert!(
            !body["data"].as_array().unwrap().is_empty(),
            "variable {label}: {body}"
        );
    }
}
