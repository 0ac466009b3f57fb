//! What probing costs: the server's token counts on every flavor's record, and the monthly
//! estimate `check` prints for targets with a `price:`.

use crate::common;

use std::process::Command;

use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;

#[tokio::test(flavor = "multi_thread")]
async fn every_flavor_reports_the_prompt_tokens_the_sim_counted() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let targets: Vec<(String, String)> = common::CHAT_FLAVORS
        .iter()
        .chain(["openai-completions"].iter())
        .map(|f| (f.replace('-', "_"), format!("api: {f}")))
        .collect();
    let list: Vec<(&str, &str, &str)> = targets
        .iter()
        .map(|(n, e)| (n.as_str(), "healthy", e.as_str()))
        .collect();
    let (_dir, cfg) = common::config(&sim, &list, common::PROBE);
    let runner = Runner::new(1);
    for t in &cfg.targets {
        let r = runner.run_one(&cfg.probes[0], t).await;
        assert_eq!(
            r.judged.outcome.as_str(),
            "ok",
            "{}: {:?}",
            t.name,
            r.judged.error
        );
        let n = r
            .measured
            .reading
            .input_tokens
            .unwrap_or_else(|| panic!("{}: no input tokens", t.name));
        // The sim counts the prompt's words and the nonce line cache_bust: prefix adds.
        assert!((5..100).contains(&n), "{}: {n}", t.name);
    }
}

#[test]
fn check_prints_tokens_per_day_and_the_monthly_estimate() {
    let dir = common::TempDir::new("cost");
    dir.write(&[
        (
            "llm-canary.yaml",
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, price: {input: 0.15, output: 0.6}}\n",
        ),
        (
            "probes/p.yaml",
            "name: capital\nschedule: \"*/1 * * * *\"\nprompt: q.txt\nmax_tokens: 64\n",
        ),
        // 55 characters: 14 tokens at 4 a token.
        ("prompts/q.txt", "What is the capital of France? Answer in one sentence.\n"),
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["check", "-c"])
        .arg(dir.path().join("llm-canary.yaml"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("probing cost, estimated"), "{text}");
    assert!(
        text.contains("capital -> t: 1440 runs/day, about 20160 input + 92160 output tokens/day, 0.06 USD/day"),
        "{text}"
    );
    assert!(
        text.contains("monthly estimate (30 days): 1.75 USD"),
        "{text}"
    );
}
