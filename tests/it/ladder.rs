//! The context-length ladder against the sim: a server that corrupts answers past a prompt size
//! is caught at the right rung, the prefill speed the sim plays is measured back, and the
//! daemon records and exports every rung.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, get, sample};
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;
use llm_canary::testing::sinks::metrics::Metrics;
use serde_json::Value;

const LADDER: &str = "name: needle\nmax_tokens: 32\ntimeouts: {connect: 1s, ttft: 5s, stall: 2s, total: 8s}\nladder: {sizes: [512, 2048, 8192], needle: true}\n";

/// Answers corrupted past 4,000 prompt tokens; 20,000 prompt tokens read a second.
const CORRUPT: &str = "healthy,corrupt_above=4000,prefill=20000";

#[tokio::test(flavor = "multi_thread")]
async fn the_ladder_finds_the_rung_where_answers_break_and_measures_prefill() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = common::config(&sim, &[("t", CORRUPT, "")], LADDER);
    let runner = Arc::new(Runner::new(4));
    let pairs = vec![(cfg.probes[0].clone(), cfg.targets[0].clone())];
    // The first firing's smallest rung is a cold start: no baseline for prefill then.
    let first = runner.run_all(pairs.clone()).await;
    assert!(
        first.iter().all(|r| r.context.prefill.is_none()),
        "{first:?}"
    );
    let results = runner.run_all(pairs).await;
    let rungs: Vec<Option<u32>> = results.iter().map(|r| r.id.rung.map(|r| r.size)).collect();
    assert_eq!(rungs, [Some(512), Some(2048), Some(8192)]);

    let outcomes: Vec<&str> = results.iter().map(|r| r.judged.outcome.as_str()).collect();
    assert_eq!(outcomes, ["ok", "ok", "pattern_mismatch"], "{results:?}");
    let error = results[2].judged.error.as_deref().unwrap();
    assert!(
        error.starts_with("rung 8192: expected the code "),
        "{error}"
    );
    assert!(error.ends_with("the answer did not contain it"), "{error}");
    for r in &results {
        // The sim counts 4 characters a token, as the estimate does.
        let (estimate, reported) = (
            r.id.rung.map(|r| r.prompt_tokens_estimate).unwrap(),
            r.measured.reading.input_tokens.unwrap(),
        );
        assert!(estimate.abs_diff(reported) <= 2, "{estimate} vs {reported}");
        let size = u64::from(r.id.rung.unwrap().size);
        assert!(
            estimate <= size && estimate + 40 > size,
            "{estimate} for {size}"
        );
    }
    // No figure for the baseline rung; the others read back the sim's 20,000 tokens a second,
    // within what scheduling on a busy machine adds to either TTFT.
    assert!(results[0].context.prefill.is_none());
    for r in &results[1..] {
        let p = r
            .context
            .prefill
            .unwrap_or_else(|| panic!("no prefill: {r:?}"));
        println!(
            "rung {:?}: prefill {p:?} (the sim reads 20000 tokens a second)",
            r.id.rung.map(|r| r.size)
        );
        assert!(
            (10_000.0..40_000.0).contains(&p.tokens_per_second),
            "rung {:?}: {p:?}",
            r.id.rung.map(|r| r.size)
        );
        let line: Value = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(line["prefill_tokens_source"], "usage");
        assert_eq!(line["rung"], r.id.rung.unwrap().size.to_string());
    }

    // Each rung's series carry its rung.
    let m = Metrics::new(&cfg);
    for r in &results {
        m.record(r, &cfg.targets[0]);
    }
    let text = String::from_utf8(m.encode()).unwrap();
    let at = |metric: &str, rung: &str| sample(&text, metric, &[&format!("rung=\"{rung}\"")]);
    assert_eq!(at("llm_canary_probe_success", "2048"), Some(1.0), "{text}");
    assert_eq!(at("llm_canary_probe_success", "8192"), Some(0.0), "{text}");
    assert!(at("llm_canary_prefill_tokens_per_second", "512").is_none());
    for rung in ["2048", "8192"] {
        let v = at("llm_canary_prefill_tokens_per_second", rung).unwrap();
        assert!((10_000.0..40_000.0).contains(&v), "{rung}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_padded_ladder_keeps_the_probes_own_question_and_checks() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    // Without a needle, the probe's question ends each padded prompt, judged by its own checks.
    let probe = "name: padded\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {connect: 1s, ttft: 5s, stall: 2s, total: 8s}\nchecks: {expect: \"(?i)paris\"}\nladder: {sizes: [256, 1024], needle: false}\n";
    let (_dir, cfg) = common::config(&sim, &[("t", "healthy", "")], probe);
    let results = Arc::new(Runner::new(4))
        .run_all(vec![(cfg.probes[0].clone(), cfg.targets[0].clone())])
        .await;
    let got: Vec<(Option<u32>, &str)> = results
        .iter()
        .map(|r| (r.id.rung.map(|r| r.size), r.judged.outcome.as_str()))
        .collect();
    assert_eq!(got, [(Some(256), "ok"), (Some(1024), "ok")], "{results:?}");
    // The prompt the sim read was padded to the rung: its count of it says so.
    let input = results[1].measured.reading.input_tokens.unwrap();
    assert!((984..=1025).contains(&input), "{input}");
}

/// The daemon fires the whole ladder for one `/probe`, answers with every rung's series and
/// writes one record per rung.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_records_and_exports_every_rung() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: ladder\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\ntargets:\n  - {{name: t, base_url: \"{}\", model: m}}\n",
        sim.base_url(CORRUPT)
    );
    let d = Daemon::start(
        &[("llm-canary.yaml", &yaml), ("probes/p.yaml", LADDER)],
        port,
        &[],
    );
    services::wait_ready(&d.url("/healthz"), Duration::from_secs(30)).await;
    let answer = get(&d.url("/probe?target=t&probe=needle")).await;
    for (rung, success) in [("512", 1.0), ("2048", 1.0), ("8192", 0.0)] {
        let having = [&format!("rung=\"{rung}\"")[..]];
        assert_eq!(
            sample(&answer, "llm_canary_probe_success", &having),
            Some(success),
            "{answer}"
        );
    }
    let log = std::fs::read_to_string(d.dir.path().join("results.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rungs: Vec<&str> = lines.iter().map(|l| l["rung"].as_str().unwrap()).collect();
    assert_eq!(rungs, ["512", "2048", "8192"], "{log}");
    assert_eq!(lines[2]["outcome"], "pattern_mismatch");
}

/// The example probe of docs/context-ladder.md loads, and climbs a healthy server cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn the_documented_example_probe_runs_as_written() {
    let doc = include_str!("../../docs/context-ladder.md");
    let start = doc.find("```yaml\n").expect("a yaml example") + "```yaml\n".len();
    let example = &doc[start..start + doc[start..].find("```").unwrap()];
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, cfg) = common::config(&sim, &[("t", "healthy", "")], example);
    let ladder = cfg.probes[0].ladder.clone().expect("a ladder");
    assert_eq!((ladder.sizes, ladder.needle), (vec![512, 2048, 8192], true));
    // `check` says what a firing sends, and counts every rung in the day's tokens.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["check", "-c"])
        .arg(dir.path().join("llm-canary.yaml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("  ladder: a run per rung each firing, of about 512, 2048, 8192 tokens, each asked for a fact hidden in it\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "context-ladder -> t: 432 runs/day, about 1548288 input + 13824 output tokens/day"
        ),
        "{text}"
    );
    let results = Arc::new(Runner::new(4))
        .run_all(vec![(cfg.probes[0].clone(), cfg.targets[0].clone())])
        .await;
    let outcomes: Vec<&str> = results.iter().map(|r| r.judged.outcome.as_str()).collect();
    assert_eq!(outcomes, ["ok", "ok", "ok"], "{results:?}");
}
