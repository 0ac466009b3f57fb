//! The API flavors llama.cpp's server speaks beside chat — OpenAI Responses and Anthropic
//! Messages — against the real server with SmolLM2-135M, and the figures a user cross-checks:
//! our decode speed against the server's own on every answer, short ones included, and
//! `calibrate` reading the server's timings and its `--metrics` counters. Run with
//! `scripts/test-real-llm`.

mod common;

use std::process::Command;

use common::llama::{load_written, run_named, LlamaServer};
use common::TempDir;
use llm_canary::testing::config::Config;
use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::result::TokensSource;
use llm_canary::testing::runner::Runner;

const FLAVORS: [&str; 3] = ["openai-chat", "openai-responses", "anthropic-messages"];

/// (probe, prompt, max_tokens, checks)
const PROBES: [(&str, &str, u32, &str); 5] = [
    (
        "sky",
        "What color is the sky on a clear day? Answer in one sentence.",
        96,
        "{min_chars: 10, expect: \"(?i)sky\"}",
    ),
    (
        "boiling",
        "What is the boiling point of water in Celsius?",
        96,
        "{expect: \"100\"}",
    ),
    ("hi", "Say hi.", 96, "{}"),
    // Loops at temperature 0 in both languages (see tests/real_llm.rs).
    (
        "apple",
        "Write the word \"apple\" one hundred times.",
        200,
        "{allow_truncation: true}",
    ),
    (
        "capital-zh",
        "法国的首都是哪里？",
        200,
        "{allow_truncation: true}",
    ),
];

fn setup(url: &str) -> (TempDir, Config) {
    let mut agent = String::from("targets:\n");
    for api in FLAVORS {
        agent.push_str(&format!("  - {{name: {api}, base_url: \"{url}/v1\", model: smollm2, server: llama-cpp, api: {api}}}\n"));
    }
    // llama.cpp ignores cache_prompt on /v1/messages: a nonce line is what keeps its prefix cache
    // from answering there.
    agent.push_str(&format!("  - {{name: messages-prefix, base_url: \"{url}/v1\", model: smollm2, server: llama-cpp, api: anthropic-messages}}\n"));
    let mut files = vec![("llm-canary.yaml".to_string(), agent)];
    for (name, prompt, max_tokens, checks) in PROBES {
        files.push((format!("prompts/{name}.txt"), prompt.to_string()));
        files.push((
            format!("probes/{name}.yaml"),
            format!("name: {name}\nprompt: {name}.txt\nmax_tokens: {max_tokens}\ntemperature: 0\nchecks: {checks}\n"),
        ));
    }
    load_written("llama-flavors", &files)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_and_messages_against_the_real_server() {
    let llama = LlamaServer::start(1).await;
    let (_dir, cfg) = setup(&llama.url());
    let runner = Runner::new(1);
    // What chat said to each prompt (temperature 0): Messages, which sends no timings, must
    // have said the same in as many tokens.
    let mut chat = std::collections::HashMap::new();
    for api in FLAVORS {
        for probe in ["sky", "boiling"] {
            let r = run_named(&runner, &cfg, probe, api).await;
            assert_eq!(
                r.judged.outcome,
                Outcome::Ok,
                "{probe} over {api}: {:?} {:?}",
                r.judged.failed_checks,
                r.judged.error
            );
            // The server's own count of output tokens, in each flavor's words.
            assert_eq!(
                r.measured.tokens_source,
                Some(TokensSource::Usage),
                "{probe} over {api}"
            );
            let ttft = r.measured.figures.ttft_ms.unwrap();
            if api == "anthropic-messages" {
                let (tokens, sha) = &chat[probe];
                assert_eq!(
                    (&r.measured.output_tokens, &r.measured.output_sha256),
                    (tokens, sha),
                    "{probe} over {api}: not what chat said"
                );
            } else {
                // llama.cpp sends its timings on chat and on Responses' response.completed.
                let t = r
                    .measured
                    .reading
                    .server_timings
                    .as_ref()
                    .expect("llama.cpp's timings");
                let server = r.measured.server_ttft_ms.expect("the server's TTFT");
                assert!(
                    ttft >= server,
                    "{probe} over {api}: our TTFT {ttft} below the server's {server}"
                );
                assert_eq!(
                    r.measured.output_tokens,
                    t["predicted_n"].as_u64(),
                    "{probe} over {api}: our count is not the server's"
                );
            }
            if api == "openai-chat" {
                chat.insert(
                    probe,
                    (r.measured.output_tokens, r.measured.output_sha256.clone()),
                );
            }
            println!(
                "{probe} over {api}: {} tokens, TTFT {ttft:.1} ms (server {:?}), {:.1} tok/s, fingerprint {:?}",
                r.measured.output_tokens.unwrap_or(0),
                r.measured.server_ttft_ms,
                r.measured.figures.tokens_per_second.unwrap_or(0.0),
                r.context.fingerprint
            );
        }
        // Prompt processing is in every flavor's TTFT: the prefix cache answered none of them.
        for probe in ["apple", "capital-zh"] {
            let r = run_named(&runner, &cfg, probe, api).await;
            assert_eq!(
                r.judged.outcome,
                Outcome::Repetition,
                "{probe} over {api}: {:?} {:?}",
                r.judged.failed_checks,
                r.judged.error
            );
        }
    }
}

/// Decode speed without the end-of-sequence bias: the window ends at the chunk that carried
/// the finish reason, so ours matches the server's `predicted_per_second` on short answers too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decode_speed_is_within_three_percent_of_the_servers_on_every_answer() {
    // One thread: the other core is the agent's, as on its own machine.
    let llama = LlamaServer::start(1).await;
    let (_dir, cfg) = setup(&llama.url());
    let runner = Runner::new(1);
    let mut worst: f64 = 0.0;
    // Chat and Responses: llama.cpp sends its timings on both (Messages carries none).
    for api in ["openai-chat", "openai-responses"] {
        for probe in ["hi", "sky", "boiling", "apple"] {
            for _ in 0..3 {
                let r = run_named(&runner, &cfg, probe, api).await;
                assert!(
                    !r.judged.outcome.is_transport(),
                    "{probe} over {api}: {:?}",
                    r.judged.error
                );
                let t = r
                    .measured
                    .reading
                    .server_timings
                    .as_ref()
                    .expect("llama.cpp sends timings");
                let theirs = t["predicted_per_second"].as_f64().unwrap();
                let ours = r.measured.figures.tokens_per_second.unwrap();
                let off = ours / theirs - 1.0;
                println!(
                    "{probe} over {api}: {} tokens, decode {ours:.1} tok/s vs the server's {theirs:.1} ({:+.2}%)",
                    r.measured.output_tokens.unwrap_or(0),
                    off * 100.0
                );
                worst = worst.max(off.abs());
            }
        }
    }
    println!("worst decode-speed gap: {:.2}%", worst * 100.0);
    assert!(
        worst <= 0.03,
        "decode speed off the server's by {:.2}%",
        worst * 100.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibrate_prints_both_sides_for_llama_cpp() {
    let llama = LlamaServer::start(1).await;
    let (dir, _) = setup(&llama.url());
    let cfg = dir.path().join("llm-canary.yaml").display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args([
                "calibrate",
                "-c",
                &cfg,
                "--target",
                "openai-chat",
                "--probe",
                "sky",
                "--samples",
                "5",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // Agreement depends on this machine; what must hold is that both sides are printed, from
    // each response's timings and from the server's `--metrics` counters.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stdout}");
    assert!(
        stdout.contains("per-response timings and counter deltas from http://"),
        "{stdout}"
    );
    for (figure, from) in [
        ("ttft", "timings.prompt_ms"),
        ("ttft", "llamacpp:prompt_seconds_total"),
        ("tpot", "timings.predicted_per_second"),
        ("tpot", "llamacpp:tokens_predicted_seconds_total"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{figure} ")) && l.ends_with(from)),
            "{figure} from {from} missing:\n{stdout}"
        );
    }
    // Nothing else used the server: every sample's counters were ours.
    assert!(!stdout.contains("left out"), "{stdout}");
}

/// What cache busting does in each flavor on llama.cpp: `cache_prompt: false` is honoured over
/// chat and Responses, not over Messages, where only a nonce line (`cache_bust: prefix`) keeps
/// the prefix cache from answering. A repeated prompt answered from the cache starts far sooner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_busting_per_flavor_on_llama_cpp() {
    let llama = LlamaServer::start(1).await;
    let (_dir, mut cfg) = setup(&llama.url());
    let runner = Runner::new(1);
    let median_ttft = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut ttft = std::collections::BTreeMap::new();
    for (target, mode) in [
        ("openai-chat", "auto"),
        ("openai-responses", "auto"),
        ("anthropic-messages", "auto"),
        ("messages-prefix", "prefix"),
        ("openai-chat", "off"),
    ] {
        let probe = cfg.probes.iter_mut().find(|p| p.name == "sky").unwrap();
        std::sync::Arc::make_mut(probe).cache_bust = match mode {
            "auto" => llm_canary::testing::config::CacheBust::Auto,
            "prefix" => llm_canary::testing::config::CacheBust::Prefix,
            _ => llm_canary::testing::config::CacheBust::Off,
        };
        let mut v = Vec::new();
        for _ in 0..4 {
            let r = run_named(&runner, &cfg, "sky", target).await;
            assert!(
                !r.judged.outcome.is_transport(),
                "{target}: {:?}",
                r.judged.error
            );
            v.push(r.measured.figures.ttft_ms.unwrap());
        }
        // The first may fill the cache; the rest show whether it answers.
        let m = median_ttft(v[1..].to_vec());
        println!("{target} cache_bust {mode}: median TTFT {m:.1} ms");
        ttft.insert(format!("{target}/{mode}"), m);
    }
    let cached = ttft["openai-chat/off"];
    for busted in [
        "openai-chat/auto",
        "openai-responses/auto",
        "messages-prefix/prefix",
    ] {
        assert!(ttft[busted] > 2.0 * cached, "{busted}: {ttft:?}");
    }
    // Messages under `auto` is served from the cache: what `check` warns about.
    assert!(
        ttft["anthropic-messages/auto"] < ttft["messages-prefix/prefix"] / 2.0,
        "{ttft:?}"
    );
}
