//! The figures against the sim's scripted schedule, the exact text through hostile framing,
//! and token counts with and without a usage chunk.

use crate::common;

use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::result::TokensSource;
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;

const ENGLISH: &str = "The capital of France is Paris. It lies on the Seine in the north of the country and has been its political and cultural centre for centuries.";
const ENGLISH_TOKENS: u64 = 29;

async fn run(sim: &Sim, scenario: &str, extra: &str) -> llm_canary::testing::result::ProbeResult {
    let (_dir, cfg) = common::config(sim, &[("t", scenario, extra)], common::PROBE);
    let mut runner = Runner::new(1);
    runner.show_output = true;
    runner.run_one(&cfg.probes[0], &cfg.targets[0]).await
}

#[tokio::test]
async fn exact_text_through_split_crlf_comments_and_nospace_streams() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    for scenario in [
        "healthy",
        "split",
        "crlf",
        "comments",
        "nospace",
        "no-usage",
        "llama-cpp",
    ] {
        for api in ["api: openai-chat", "api: openai-completions"] {
            let r = run(&sim, scenario, api).await;
            assert_eq!(
                r.judged.outcome,
                Outcome::Ok,
                "{scenario} {api}: {:?}",
                r.judged.error
            );
            assert_eq!(
                r.measured.output.as_deref(),
                Some(ENGLISH),
                "{scenario} {api}"
            );
            assert_eq!(
                r.measured.reading.chunks as u64, ENGLISH_TOKENS,
                "{scenario} {api}"
            );
            assert_eq!(r.measured.reading.finish_reason.as_deref(), Some("stop"));
        }
    }
}

#[tokio::test]
async fn chinese_split_inside_characters_is_reassembled() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    // `split` writes 1-7 byte pieces: most CJK characters (3 bytes) are cut somewhere.
    let (dir, _) = common::config(&sim, &[("t", "split", "")], common::PROBE);
    std::fs::write(dir.path().join("prompts/q.txt"), "法国的首都是哪里？").unwrap();
    let cfg = llm_canary::testing::config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    let mut runner = Runner::new(1);
    runner.show_output = true;
    let r = runner.run_one(&cfg.probes[0], &cfg.targets[0]).await;
    assert_eq!(
        r.measured.output.as_deref(),
        Some("法国的首都是巴黎。巴黎位于法国北部的塞纳河畔，是法国的政治、经济和文化中心。")
    );
}

#[tokio::test]
async fn ttft_and_decode_speed_match_the_script() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    // First content at 200ms, then one token every 50ms: 20 tokens/s. The gaps are long enough
    // that a first chunk read a few milliseconds late on a busy machine moves the figure by
    // well under the 3.6 % that counting n tokens instead of n - 1 over the span would add.
    let r = run(&sim, "healthy,ttft=200ms,itl=50ms", "").await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    let f = &r.measured.figures;
    let ttft = f.ttft_ms.unwrap();
    assert!((200.0..260.0).contains(&ttft), "ttft {ttft}");
    let tps = f.tokens_per_second.unwrap();
    assert!((19.0..=20.35).contains(&tps), "tokens/s {tps}");
    let tpot = f.tpot_ms.unwrap();
    assert!((49.0..56.0).contains(&tpot), "tpot {tpot}");
    let p50 = f.itl_p50_ms.unwrap();
    assert!((40.0..60.0).contains(&p50), "itl p50 {p50}");
    assert!(f.itl_max_ms.unwrap() >= f.itl_p99_ms.unwrap() && f.itl_p99_ms.unwrap() >= p50);
    assert!(f.ttfb_ms.unwrap() < ttft);
    assert!(
        f.e2e_ms.unwrap() >= ttft + 28.0 * 50.0 - 5.0,
        "e2e {:?}",
        f.e2e_ms
    );
}

#[tokio::test]
async fn a_stall_shows_in_the_inter_token_gaps() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    // A 400ms pause (below the 700ms stall timeout) after the third token.
    let r = run(&sim, "stall,stall=400ms", "").await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    let max = r.measured.figures.itl_max_ms.unwrap();
    // At least the pause; the upper bound leaves room for a busy machine's scheduling delay.
    assert!((400.0..600.0).contains(&max), "itl max {max}");
    assert!(r.measured.figures.itl_p50_ms.unwrap() < 30.0);
}

#[tokio::test]
async fn token_counts_with_and_without_usage() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let with = run(&sim, "healthy", "").await;
    assert_eq!(
        (with.measured.output_tokens, with.measured.tokens_source),
        (Some(ENGLISH_TOKENS), Some(TokensSource::Usage))
    );
    let without = run(&sim, "no-usage", "").await;
    assert_eq!(
        (
            without.measured.output_tokens,
            without.measured.tokens_source
        ),
        (Some(ENGLISH_TOKENS), Some(TokensSource::Chunks))
    );
    // A non-streamed answer has one content arrival: no decode speed can be measured.
    let whole = run(&sim, "non-stream", "").await;
    assert_eq!(whole.measured.output_tokens, Some(ENGLISH_TOKENS));
    assert_eq!(whole.measured.figures.tokens_per_second, None);
    assert_eq!(whole.measured.output.as_deref(), Some(ENGLISH));
}

#[tokio::test]
async fn reasoning_counts_for_ttft_but_not_for_the_checked_text() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let r = run(&sim, "reasoning", "").await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    assert_eq!(r.measured.output.as_deref(), Some(ENGLISH));
    assert!(
        r.measured.reading.chunks as u64 > ENGLISH_TOKENS,
        "reasoning chunks are tokens too"
    );
}

#[tokio::test]
async fn server_timings_are_kept_beside_our_figures() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let r = run(&sim, "llama-cpp", "server: llama-cpp").await;
    let t = r
        .measured
        .reading
        .server_timings
        .clone()
        .expect("llama.cpp timings");
    assert!(t["predicted_per_second"].as_f64().unwrap() > 0.0);
    assert!(t["prompt_ms"].is_number());
    let json: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
    assert_eq!(json["server_timings"]["predicted_n"], ENGLISH_TOKENS);
    let plain = run(&sim, "healthy", "").await;
    let json: serde_json::Value = serde_json::from_str(&plain.to_json_line()).unwrap();
    assert!(json["server_timings"].is_null());
}
