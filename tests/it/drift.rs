//! Naming the broken deployment against the sim: answers that ignore the prompt
//! (`same-answer`), answers that drift from a recorded reference (`word-salad`), `record`
//! writing references that `check` then accepts, and the gate comparing answers.

use crate::common::{self, bin, TempDir};
use llm_canary::testing::config;
use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;

/// Two probes with different prompts on each target (`scenario`s by name); `capital` keeps its
/// answer in `references/capital.txt` and gates on answer similarity.
fn kit(sim: &Sim, targets: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new("drift");
    let mut agent = String::from("agent: {name: test, concurrency: 1}\ntargets:\n");
    for (name, scenario) in targets {
        agent.push_str(&format!(
            "  - {{name: {name}, base_url: \"{}\", model: m}}\n",
            sim.base_url(scenario)
        ));
    }
    dir.write(&[
        ("llm-canary.yaml", &agent),
        (
            "probes/capital.yaml",
            "name: capital\nprompt: capital.txt\nmax_tokens: 64\ntemperature: 0\nchecks:\n  reference: {file: references/capital.txt}\ngate:\n  vs_baseline: {answer_similarity_p50: \">= 0.8\"}\n",
        ),
        (
            "probes/city-json.yaml",
            "name: city-json\nprompt: city-json.txt\nmax_tokens: 64\ntemperature: 0\n",
        ),
        ("prompts/capital.txt", common::PROMPT),
        (
            "prompts/city-json.txt",
            "Give the capital of France as JSON with its population in millions.",
        ),
    ]);
    dir
}

async fn cli(args: &[&str]) -> (i32, String) {
    let mut cmd = bin();
    cmd.args(args);
    let out = common::output(cmd).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn record_writes_the_references_that_check_then_accepts_and_word_salad_drifts() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = kit(&sim, &[("prod", "healthy"), ("shadow", "word-salad")]);
    let config = dir.path().join("llm-canary.yaml");
    let config = config.to_str().unwrap();

    // Before `record`: a config error that says how to write the file, with its place.
    let (code, out) = cli(&["check", "-c", config]).await;
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("capital.yaml:")
            && out.contains("reference")
            && out.contains("does not exist: `llm-canary record -c CONFIG --target TARGET`"),
        "{out}"
    );

    let (code, out) = cli(&["record", "-c", config, "--target", "prod"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("city-json: no checks.reference, nothing to write"),
        "{out}"
    );
    assert!(out.contains("capital: wrote "), "{out}");
    let written = std::fs::read_to_string(dir.path().join("references/capital.txt")).unwrap();
    assert!(written.contains("Paris"), "{written}");
    let (code, out) = cli(&["check", "-c", config]).await;
    assert_eq!(code, 0, "{out}");

    // Held to the reference: the healthy target is the same text, the word salad far from it.
    let (code, out) = cli(&[
        "once", "-c", config, "--probe", "capital", "--format", "json",
    ])
    .await;
    assert_eq!(code, 1, "{out}");
    let records: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| records.iter().find(|r| r["target"] == t).unwrap().clone();
    assert_eq!(of("prod")["outcome"], "ok", "{out}");
    assert_eq!(of("prod")["similarity"], 1.0, "{out}");
    let shadow = of("shadow");
    assert_eq!(shadow["outcome"], "answer_drift", "{out}");
    let s = shadow["similarity"].as_f64().unwrap();
    assert!(s < 0.2, "{out}");
    // It outranks what word salad to max_tokens also is: truncated.
    let failed: Vec<&str> = shadow["failed_checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(failed[0], "answer_drift", "{failed:?}");
    assert!(failed.contains(&"truncated"), "{failed:?}");
    assert!(
        shadow["error"]
            .as_str()
            .unwrap()
            .starts_with("the answer drifted from the reference "),
        "{out}"
    );

    // An unknown probe or a target without references to write is an error, not silence.
    let (code, out) = cli(&[
        "record",
        "-c",
        config,
        "--target",
        "prod",
        "--probe",
        "city-json",
    ])
    .await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("names a checks.reference"), "{out}");
}

#[tokio::test]
async fn the_same_answer_to_different_prompts_is_prompt_ignored_and_healthy_answers_are_not() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = kit(&sim, &[("broken", "same-answer"), ("healthy", "healthy")]);
    // The reference's file is not what this test is about.
    dir.write(&[("references/capital.txt", "The capital of France is Paris.")]);
    let cfg = config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    let runner = Runner::new(1);
    let run = |probe: &'static str, target: &'static str| {
        let (cfg, runner) = (&cfg, &runner);
        async move { common::llama::run_named(runner, cfg, probe, target).await }
    };
    // The first answer has nothing to be compared with; the second repeats it.
    let first = run("capital", "broken").await;
    assert_ne!(first.judged.outcome, Outcome::PromptIgnored);
    let second = run("city-json", "broken").await;
    assert_eq!(
        second.judged.outcome,
        Outcome::PromptIgnored,
        "{:?}",
        second.judged.error
    );
    assert_eq!(
        second.judged.error.as_deref(),
        Some("the answer is nearly the same as probe capital's, which asks another prompt on this target (similarity 1.000): the answers do not depend on the prompt")
    );
    // And from then on, both ways.
    let again = run("capital", "broken").await;
    assert!(
        again.judged.failed_checks.contains(&Outcome::PromptIgnored),
        "{again:?}"
    );

    // A healthy target answers each prompt its own way, run after run.
    for _ in 0..2 {
        for probe in ["capital", "city-json"] {
            let r = run(probe, "healthy").await;
            assert!(
                !r.judged.failed_checks.contains(&Outcome::PromptIgnored),
                "{probe}: {:?}",
                r.judged.error
            );
        }
    }
}

#[tokio::test]
async fn the_gate_fails_a_candidate_whose_answers_ignore_the_prompt_and_passes_the_same_answers() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = kit(
        &sim,
        &[
            ("prod", "healthy"),
            ("rc-ok", "healthy"),
            ("rc-broken", "same-answer"),
        ],
    );
    dir.write(&[("references/capital.txt", "The capital of France is Paris.")]);
    let config = dir.path().join("llm-canary.yaml");
    let config = config.to_str().unwrap();
    let gate = |candidate: &'static str| {
        let config = config.to_string();
        async move {
            cli(&[
                "gate",
                "-c",
                &config,
                "--target",
                candidate,
                "--baseline-target",
                "prod",
                "--format",
                "json",
            ])
            .await
        }
    };
    let limit = |out: &str| -> serde_json::Value {
        // The report is the first JSON object; progress lines may follow on stderr.
        let report: serde_json::Value =
            serde_json::Deserializer::from_str(&out[out.find('{').unwrap()..])
                .into_iter()
                .next()
                .unwrap()
                .unwrap();
        report["probes"][0]["limits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == "answer_similarity_p50")
            .unwrap()
            .clone()
    };
    let (code, out) = gate("rc-ok").await;
    assert_eq!(code, 0, "{out}");
    let l = limit(&out);
    assert_eq!(l["verdict"], "pass", "{l}");
    assert_eq!(l["candidate"], 1.0, "{l}");

    let (code, out) = gate("rc-broken").await;
    assert_eq!(code, 1, "{out}");
    let l = limit(&out);
    assert_eq!(l["verdict"], "fail", "{l}");
    assert!(l["candidate"].as_f64().unwrap() < 0.8, "{l}");
    assert!(
        l["message"]
            .as_str()
            .unwrap()
            .starts_with("answer_similarity_p50 "),
        "{l}"
    );
    let named = &l["failed_runs"][0]["sentence"];
    assert!(
        named.as_str().unwrap().starts_with("similarity 0.")
            && named.as_str().unwrap().contains("to the baseline's answer"),
        "{l}"
    );
}

/// The shipped config against the sim: its probes ask different questions of one target, and
/// a healthy replica answers each its own way (a cache check's long filler before the capital
/// question is no request for a summary).
#[tokio::test]
async fn the_shipped_config_raises_no_prompt_ignored_against_a_healthy_sim() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let root = sim.base_url("healthy");
    let root = root.trim_end_matches("/s/healthy/v1");
    let dir = TempDir::new("shipped");
    let repo = common::root();
    common::copy_dir(&repo.join("probes"), &dir.path().join("probes"));
    common::copy_dir(&repo.join("prompts"), &dir.path().join("prompts"));
    common::copy_dir(&repo.join("schemas"), &dir.path().join("schemas"));
    let config = std::fs::read_to_string(repo.join("llm-canary.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8099", root);
    dir.write(&[("llm-canary.yaml", &config)]);
    let (code, out) = cli(&[
        "once",
        "-c",
        dir.path().join("llm-canary.yaml").to_str().unwrap(),
        "--format",
        "json",
    ])
    .await;
    assert!(!out.contains("prompt_ignored"), "{out}");
    assert_eq!(code, 0, "{out}");
}
