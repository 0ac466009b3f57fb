//! The gemini flavor end to end. Streams the Gemini API sent (Google's SDK test data; provenance
//! in tests/fixtures/streams/gemini/PROVENANCE.md) are served byte for byte from a loopback
//! server and read by the real reader: text, thoughts, tool calls, tokens and finish. What the
//! request carried (path, key header, body) is checked on the way. Against the sim, Gemini's
//! refusals carry their reasons.

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llm_canary::testing::config;
use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::result::{ProbeResult, TokensSource};
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::http::{read_request, respond, HttpRequest};
use llm_canary::testing::sim::Sim;

const KEY: &str = "AIzaSy-test-key-0123456789";

const PROBE: &str = "name: p\nprompt: q.txt\nmax_tokens: 1024\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 5s}\n";

const TOOLS: &str = r#"[{"type": "function", "function": {"name": "now", "description": "The date and time now.", "parameters": {"type": "object", "properties": {}}}}]"#;

/// A loopback server that answers every POST with `stream` as an SSE body (anything else with
/// a 404), and keeps each request it read.
async fn replay(stream: &'static [u8]) -> (SocketAddr, Arc<Mutex<Vec<HttpRequest>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let Ok(Some(req)) = read_request(&mut sock, &mut buf, Duration::from_secs(5)).await
                else {
                    return;
                };
                let (status, body) = match req.method.as_str() {
                    "POST" => (200, stream),
                    _ => (404, &b""[..]),
                };
                keep.lock().unwrap().push(req);
                let close = [("connection", "close".to_string())];
                let _ = respond(&mut sock, status, "text/event-stream", &close, body).await;
            });
        }
    });
    (addr, got)
}

/// One run of `probe` against a Gemini target served `stream`: the result, with its text, and
/// the request that reached the server.
async fn run(stream: &'static [u8], probe: &str) -> (ProbeResult, HttpRequest) {
    let (addr, got) = replay(stream).await;
    let dir = common::TempDir::new("gemini");
    let agent = format!(
        "targets:\n  - {{name: g, base_url: \"http://{addr}/v1beta\", api: gemini, model: gemini-2.0-flash, api_key_file: key.txt}}\n"
    );
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("key.txt", KEY),
        ("probes/p.yaml", probe),
        ("prompts/q.txt", "What is the capital of Wyoming?"),
        ("tools/now.json", TOOLS),
    ]);
    let cfg = config::load(&dir.path().join("llm-canary.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let mut runner = Runner::new(1);
    runner.show_output = true;
    let r = runner.run_one(&cfg.probes[0], &cfg.targets[0]).await;
    let post = got
        .lock()
        .unwrap()
        .iter()
        .find(|q| q.method == "POST")
        .cloned()
        .expect("the run's request reached the server");
    (r, post)
}

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/streams/gemini/",
            $name,
            ".sse"
        ))
    };
}

#[tokio::test]
async fn a_short_reply_and_the_request_that_asked_for_it() {
    let (r, req) = run(fixture!("streaming-success-basic-reply-short"), PROBE).await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    assert_eq!(
        r.measured.output.as_deref(),
        Some("The capital of Wyoming is **Cheyenne**.\n")
    );
    assert_eq!(r.measured.reading.chunks, 3);
    assert_eq!(
        (
            r.measured.output_tokens,
            r.measured.tokens_source,
            r.measured.reading.input_tokens
        ),
        (Some(10), Some(TokensSource::Usage), Some(7))
    );
    assert_eq!(r.measured.reading.reasoning_tokens, None);
    assert_eq!(r.measured.reading.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        r.measured.reading.reported_model.as_deref(),
        Some("gemini-2.0-flash")
    );

    assert_eq!(
        req.path,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(req.header("x-goog-api-key"), Some(KEY));
    assert_eq!(req.header("authorization"), None);
    let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["contents"][0]["role"], "user");
    assert_eq!(
        body["contents"][0]["parts"][0]["text"],
        "What is the capital of Wyoming?"
    );
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 1024);
    assert!(body.get("model").is_none() && body.get("stream").is_none());
}

#[tokio::test]
async fn thoughts_are_reasoning_and_output_tokens() {
    let (r, _) = run(
        fixture!("streaming-success-thinking-reply-thought-summary"),
        PROBE,
    )
    .await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    assert_eq!(
        r.measured.output.as_deref(),
        Some("The sky is blue because tiny gas molecules in Earth's atmosphere scatter blue light from the sun more efficiently than other colors. Blue light has shorter, smaller wavelengths, causing it to be scattered in all directions, making the sky appear blue to our eyes.")
    );
    // Three thought chunks and two of the answer; thoughts are output the model generated.
    assert_eq!(r.measured.reading.chunks, 5);
    assert_eq!(
        (
            r.measured.output_tokens,
            r.measured.reading.reasoning_tokens
        ),
        (Some(588), Some(540))
    );
    assert_eq!(r.measured.reading.input_tokens, Some(10));
    let (ttft, answer) = (
        r.measured.figures.ttft_ms.unwrap(),
        r.measured.figures.answer_ttft_ms.unwrap(),
    );
    assert!(answer >= ttft, "ttft {ttft}, answer {answer}");
    assert_eq!(
        r.measured.reading.reported_model.as_deref(),
        Some("gemini-2.5-flash")
    );
}

#[tokio::test]
async fn a_whole_function_call_after_thoughts() {
    let probe = format!("{PROBE}tools: tools/now.json\nchecks: {{tool_call: now}}\n");
    let (r, req) = run(
        fixture!("streaming-success-thinking-function-call-thought-summary-signature"),
        &probe,
    )
    .await;
    assert_eq!(
        r.judged.outcome,
        Outcome::Ok,
        "{:?} {:?}",
        r.judged.failed_checks,
        r.judged.error
    );
    assert_eq!(r.measured.output.as_deref(), Some("now{}"));
    assert_eq!(
        (
            r.measured.output_tokens,
            r.measured.reading.reasoning_tokens
        ),
        (Some(174), Some(168))
    );
    assert_eq!(r.measured.reading.finish_reason.as_deref(), Some("stop"));
    let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "now");
}

#[tokio::test]
async fn a_recitation_stop_is_content_filtered() {
    let (r, _) = run(fixture!("streaming-failure-recitation-no-content"), PROBE).await;
    assert_eq!(
        r.judged.outcome,
        Outcome::ContentFiltered,
        "{:?}",
        r.judged.error
    );
    assert_eq!(r.judged.failed_checks, vec![Outcome::ContentFiltered]);
    assert_eq!(
        r.measured.output.as_deref(),
        Some("text1text2text3text4text5text6text7text8")
    );
    assert_eq!(
        r.measured.reading.finish_reason.as_deref(),
        Some("content_filter")
    );
    assert_eq!(r.measured.output_tokens, Some(261));
}

#[tokio::test]
async fn a_blocked_prompt_is_content_filtered() {
    let (r, _) = run(fixture!("streaming-failure-prompt-blocked-safety"), PROBE).await;
    // Nothing came back: empty first, by the vocabulary's precedence, and filtered beside it.
    assert_eq!(
        r.judged.outcome,
        Outcome::EmptyOutput,
        "{:?}",
        r.judged.error
    );
    assert!(
        r.judged.failed_checks.contains(&Outcome::ContentFiltered),
        "{:?}",
        r.judged.failed_checks
    );
    assert_eq!(
        r.measured.reading.finish_reason.as_deref(),
        Some("content_filter")
    );
}

/// Each refusing scenario in Google's error body: the reason comes from its status word as
/// much as from the HTTP status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_in_googles_words_carry_their_reason() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let cases = [
        ("http-400", "context_length"),
        ("http-404", "not_found"),
        ("http-429", "rate_limited"),
        ("http-500", "server_error"),
        ("http-503", "overloaded"),
    ];
    let targets: Vec<(&str, &str, &str)> =
        cases.iter().map(|c| (c.0, c.0, "api: gemini")).collect();
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let runner = Runner::new(4);
    for (t, (scenario, reason)) in cfg.targets.iter().zip(cases) {
        let r = runner.run_one(&cfg.probes[0], t).await;
        assert_eq!(r.judged.outcome, Outcome::HttpError, "{scenario}");
        assert_eq!(
            r.measured.reading.http_reason.map(|x| x.as_str()),
            Some(reason),
            "{scenario}"
        );
        let delay = r
            .measured
            .reading
            .rate_limit
            .as_ref()
            .and_then(|h| h.get("retryDelay"));
        assert_eq!(delay.is_some(), scenario == "http-429", "{scenario}");
        // The sentence is Google's message.
        let error = r.judged.error.unwrap_or_default();
        assert!(!error.contains("\"status\""), "{scenario}: {error}");
    }
    let seen = sim.seen();
    assert!(seen
        .iter()
        .all(|s| s.path.contains(":streamGenerateContent")));
    assert!(seen.iter().all(|s| s.body.get("model").is_none()));
}

/// A hosted API: `check` warns that `cache_bust: auto` cannot skip Gemini's own prompt cache
/// (and not under `prefix`), and `calibrate` says there are no server figures to read.
#[test]
fn check_warns_of_the_providers_cache_and_calibrate_has_nothing_to_read() {
    let dir = common::TempDir::new("gemini-hosted");
    let agent = "targets:\n  - {name: g, base_url: \"https://generativelanguage.googleapis.com/v1beta\", api: gemini, model: gemini-2.5-flash}\n";
    let cmd = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args(args)
            .arg("-c")
            .arg(dir.path().join("llm-canary.yaml"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let warning = "the hosted API `gemini` caches long prompts on the provider's side";
    for (bust, warned) in [("auto", true), ("prefix", false)] {
        dir.write(&[
            ("llm-canary.yaml", agent),
            (
                "probes/p.yaml",
                &format!("name: p\nprompt: q.txt\ncache_bust: {bust}\n"),
            ),
            ("prompts/q.txt", "What is the capital of France?"),
        ]);
        let (code, text) = cmd(&["check"]);
        assert_eq!(code, Some(0), "{text}");
        assert_eq!(text.contains(warning), warned, "{bust}: {text}");
    }
    let (code, text) = cmd(&["calibrate", "--target", "g"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("speaks the hosted API `gemini`: hosted providers publish no server metrics"),
        "{text}"
    );
}

/// The key travels in `x-goog-api-key` and nowhere else: not in the URL, the record, the table
/// or the trace-level log, even when a leaky proxy echoes it back in an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_never_appears() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let extra = "api: gemini, api_key_file: key.txt";
    let targets = [("echo", "echo-auth", extra), ("ok", "healthy", extra)];
    let dir = common::TempDir::new("gemini-key");
    dir.write(&[
        ("llm-canary.yaml", &common::agent_yaml(&sim, &targets)),
        ("key.txt", KEY),
        ("probes/p.yaml", common::PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let cfg = dir.path().join("llm-canary.yaml");
    for format in ["json", "table"] {
        let mut cmd = common::bin();
        cmd.args(["--log-level", "trace", "once", "--show-output", "--format"])
            .arg(format)
            .arg("-c")
            .arg(&cfg);
        let out = common::output(cmd).await;
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(1), "{o}{e}");
        assert!(
            !o.contains(KEY) && !e.contains(KEY),
            "key leaked:\n{o}\n{e}"
        );
        assert!(
            o.contains("invalid credentials: ***"),
            "the echoed key is redacted: {o}"
        );
    }
    // The sim did receive it, in its header only, so the redaction above was real.
    let seen = sim.seen();
    assert_eq!(seen.len(), 4, "one request per target and format");
    for s in &seen {
        assert_eq!(s.header("x-goog-api-key"), Some(KEY));
        assert!(!s.path.contains(KEY) && s.header("authorization").is_none());
    }
}

/// Runs a probe with `cache_bust: MODE` twice on one Gemini target of the sim; what the sim saw.
async fn twice(mode: &str) -> Vec<llm_canary::testing::sim::Seen> {
    let probe = format!("name: p\nprompt: q.txt\nmax_tokens: 64\ncache_bust: {mode}\nchecks: {{expect: \"(?i)paris\"}}\n");
    common::twice("api: gemini", &probe).await
}

/// What `check` warns about, shown: under `auto` Gemini gets only the header, and a prefix
/// cache answers the second run; `prefix` puts a fresh nonce first and defeats it.
#[tokio::test]
async fn only_prefix_busts_a_prefix_cache() {
    let seen = twice("auto").await;
    assert!(!seen[1].http_cache_hit && seen[1].prefix_cache_hit);
    assert_eq!(seen[1].header("cache-control"), Some("no-cache"));
    let keys = common::body_keys(&seen[1]);
    assert_eq!(keys, ["contents", "generationConfig"]);

    let seen = twice("prefix").await;
    assert!(!seen[1].http_cache_hit && !seen[1].prefix_cache_hit);
    let first = |i: usize| seen[i].body["contents"][0]["parts"][0]["text"].as_str();
    common::assert_prefix_busted(first(0), first(1));
}
