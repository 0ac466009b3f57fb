//! `llm-canary report` on a results log the daemon wrote against the sim, rotated files
//! included: one target healthy, one loading (503) for its first seconds, then healthy.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{eventually, free_port};
use llm_canary::testing::sim::Sim;

const PROBE: &str = "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {ttft: 5s, stall: 5s, total: 10s}\n";

fn report(log: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .arg("report")
        .arg(log)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "report {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn summary(log: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&report(log, &["--format", "json"])).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_summarises_a_rotated_log_the_daemon_wrote() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    let yaml = format!(
        "agent:\n  name: canary-report\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n  results_log_max_bytes: 3000\n  results_log_keep: 100\n\
         targets:\n  - {{name: steady, base_url: \"{}\", model: m}}\n  - {{name: loading, base_url: \"{}\", model: m}}\n",
        sim.base_url("healthy"),
        sim.base_url("healthy,warm=3s"),
    );
    let mut daemon = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    let log = daemon.dir.path().join("results.jsonl");
    // Until the loading target's incident has closed and the log has rotated.
    let s = eventually(
        "a resolved incident in a rotated log",
        Duration::from_secs(60),
        || {
            let log = log.clone();
            async move {
                let rotated = log.with_extension("jsonl.1").exists();
                let s = log.exists().then(|| summary(&log))?;
                let closed = s["incidents"]
                    .as_array()?
                    .iter()
                    .any(|i| i["target"] == "loading" && !i["ended_at"].is_null());
                (rotated && closed).then_some(s)
            }
        },
    )
    .await;
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();

    // Every line of every file is counted: the rotated ones too.
    let lines: usize = llm_canary::testing::sinks::results_log::log_files(&log)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap().lines().count())
        .sum();
    let s2 = summary(&log);
    let pairs = s2["pairs"].as_array().unwrap();
    let runs: u64 = pairs.iter().map(|p| p["runs"].as_u64().unwrap()).sum();
    assert_eq!(runs as usize, lines, "{s2:#}");
    assert!(s["pairs"].as_array().unwrap().len() == 2);

    let pair = |t: &str| pairs.iter().find(|p| p["target"] == t).unwrap().clone();
    let (steady, loading) = (pair("steady"), pair("loading"));
    assert_eq!(steady["success_rate"], 1.0, "{steady:#}");
    assert_eq!(steady["incidents"], 0);
    assert!(
        loading["outcomes"]["http_error"].as_u64().unwrap() >= 1,
        "{loading:#}"
    );
    assert!(
        loading["outcomes"]["ok"].as_u64().unwrap() >= 1,
        "{loading:#}"
    );
    assert!(loading["success_rate"].as_f64().unwrap() < 1.0);
    assert_eq!(loading["incidents"], 1);
    let ttft = |k: &str| steady[k].as_f64().unwrap();
    assert!(ttft("ttft_p50_ms") > 0.0);
    assert!(
        ttft("ttft_p50_ms") <= ttft("ttft_p95_ms") && ttft("ttft_p95_ms") <= ttft("ttft_p99_ms")
    );
    assert!(steady["tokens_per_second_p50"].as_f64().unwrap() > 0.0);
    // Each run ends after its first token, so every order statistic of e2e is above TTFT's.
    assert!(steady["e2e_p95_ms"].as_f64().unwrap() >= ttft("ttft_p95_ms"));
    let incident = &s2["incidents"][0];
    assert_eq!(incident["target"], "loading");
    assert!(incident["outcomes"]["http_error"].as_u64().unwrap() >= 1);
    // The latest failures, each with its request id and sentence, as the log has them.
    let failed: Vec<serde_json::Value> = llm_canary::testing::sinks::results_log::log_files(&log)
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|r| r["success"] == false)
        .collect();
    let listed = s2["latest_failures"].as_array().unwrap();
    assert!(!listed.is_empty() && listed.len() <= 10, "{s2:#}");
    for f in listed {
        let run = failed
            .iter()
            .find(|r| r["request_id"] == f["request_id"])
            .unwrap_or_else(|| panic!("{f:#} is no failed run of the log"));
        assert_eq!(f["target"], "loading");
        assert_eq!(f["error"], run["error"], "{f:#}");
        assert!(f["error"].as_str().unwrap().contains("503"), "{f:#}");
    }

    // Markdown: a table GitHub renders (header, alignment row, one row per pair) and the
    // incident section.
    let md = report(&log, &["--format", "markdown"]);
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert!(
        table[0].starts_with("| PROBE | TARGET | RUNS | SUCCESS |"),
        "{md}"
    );
    assert!(table[1].starts_with("|---|---|---:|"), "{md}");
    assert!(
        table.iter().any(|l| l.starts_with("| p | loading |")),
        "{md}"
    );
    assert!(md.contains("### Incidents"), "{md}");
    let first = listed[0]["request_id"].as_str().unwrap();
    assert!(
        md.contains("### Latest failures") && md.contains(&format!("| `{first}` | ")),
        "{md}"
    );
    let cols = table[0].matches('|').count();
    assert!(
        table.iter().take(4).all(|l| l.matches('|').count() == cols),
        "{md}"
    );

    let text = report(&log, &[]);
    assert!(text.starts_with("PROBE"), "{text}");
    assert!(text.contains("http_error"), "{text}");

    // --since past every run: no pairs.
    let none: serde_json::Value =
        serde_json::from_str(&report(&log, &["--format", "json", "--since", "0s"])).unwrap();
    assert_eq!(none["pairs"].as_array().unwrap().len(), 0, "{none:#}");
}

#[test]
fn a_missing_log_is_one_sentence_and_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["report", "/nonexistent/results.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/results.jsonl"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
