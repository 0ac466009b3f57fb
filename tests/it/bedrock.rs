//! The bedrock flavor against the sim: requests signed with SigV4 and checked by the sim with
//! its test key (a wrong secret or an unknown key is refused), a Bedrock API key let in,
//! Bedrock's error answers read into reasons, and the AWS secret never in a record, a log line
//! or a metric.

use crate::common;

use llm_canary::testing::outcome::{HttpReason, Outcome};
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::bedrock::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use llm_canary::testing::sim::Sim;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_usage_and_reasons() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_keys, extra) = common::bedrock_keys();
    let cases: &[(&str, Option<HttpReason>)] = &[
        ("healthy", None),
        ("http-429", Some(HttpReason::RateLimited)),
        ("http-503", Some(HttpReason::Overloaded)),
        ("http-404", Some(HttpReason::NotFound)),
        ("http-400", Some(HttpReason::ContextLength)),
        ("http-500", Some(HttpReason::ServerError)),
    ];
    let targets: Vec<(&str, &str, &str)> = cases
        .iter()
        .map(|(s, _)| (*s, *s, extra.as_str()))
        .collect();
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let runner = Runner::new(4);
    for (t, (scenario, reason)) in cfg.targets.iter().zip(cases) {
        let r = runner.run_one(&cfg.probes[0], t).await;
        assert_eq!(
            r.measured.reading.http_reason, *reason,
            "{scenario}: {:?}",
            r.judged.error
        );
        if reason.is_some() {
            assert_eq!(r.judged.outcome, Outcome::HttpError, "{scenario}");
            // Bedrock sends no Retry-After: nothing is made up.
            assert_eq!(r.measured.reading.rate_limit, None, "{scenario}");
        } else {
            assert_eq!(
                r.judged.outcome,
                Outcome::Ok,
                "{scenario}: {:?}",
                r.judged.error
            );
            // The count is metadata's, and its latency the server's own figure.
            assert_eq!(
                r.measured.tokens_source,
                Some(llm_canary::testing::timeline::TokensSource::Usage)
            );
            assert_eq!(
                r.measured.output_tokens,
                Some(r.measured.reading.chunks as u64)
            );
            assert!(r.measured.reading.server_timings.as_ref().unwrap()["latencyMs"].is_number());
        }
    }
    let seen = sim.seen();
    assert_eq!(seen.len(), cases.len());
    for s in &seen {
        assert!(
            s.path.ends_with("/v1/model/m/converse-stream"),
            "{}",
            s.path
        );
        let auth = s.header("authorization").unwrap();
        assert!(
            auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/")),
            "{auth}"
        );
        assert!(auth.contains("/us-east-1/bedrock/aws4_request"), "{auth}");
        assert_eq!(
            s.header("accept"),
            Some("application/vnd.amazon.eventstream")
        );
        // Bedrock refuses keys it does not know: the model is in the path only.
        assert_eq!(s.body.get("model"), None);
        assert_eq!(s.body["inferenceConfig"]["maxTokens"], 64);
        assert!(s.body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with(common::PROMPT));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_checks_the_signature_and_lets_an_api_key_in() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let keys = common::TempDir::new("aws");
    keys.write(&[
        ("id", ACCESS_KEY_ID),
        ("other-id", "AKIDNOTTHESIMS"),
        ("wrong", "not-the-secret"),
        ("secret", SECRET_ACCESS_KEY),
        ("api-key", "bedrock-api-key-123"),
    ]);
    let p = keys.path().display();
    let aws = |id: &str, secret: &str| {
        format!("api: bedrock, aws: {{region: us-east-1, access_key_id_file: \"{p}/{id}\", secret_access_key_file: \"{p}/{secret}\"}}")
    };
    let (wrong, other) = (aws("id", "wrong"), aws("other-id", "secret"));
    let api_key = format!("api: bedrock, api_key_file: \"{p}/api-key\"");
    let targets = [
        ("wrong-secret", "healthy", wrong.as_str()),
        ("unknown-key", "healthy", other.as_str()),
        ("api-key", "healthy", api_key.as_str()),
    ];
    let (_dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let runner = Runner::new(1);
    let run = |i: usize| runner.run_one(&cfg.probes[0], &cfg.targets[i]);
    let r = run(0).await;
    assert_eq!(
        (r.judged.outcome, r.measured.reading.http_reason),
        (Outcome::HttpError, Some(HttpReason::Auth))
    );
    assert!(
        r.judged.error.as_deref().unwrap().contains("signature"),
        "{:?}",
        r.judged.error
    );
    let r = run(1).await;
    assert_eq!(
        (r.judged.outcome, r.measured.reading.http_reason),
        (Outcome::HttpError, Some(HttpReason::Auth))
    );
    assert!(
        r.judged
            .error
            .as_deref()
            .unwrap()
            .contains("security token"),
        "{:?}",
        r.judged.error
    );
    let r = run(2).await;
    assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
    // The refused requests never got past the door; the API key's did.
    let seen = sim.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer bedrock-api-key-123")
    );
    assert_eq!(
        seen[0].header("x-amz-date"),
        None,
        "an API key is not signed"
    );
}

const SESSION_TOKEN: &str = "sim-session-token-0123456789";

/// The default credentials (AWS's variables), a session token, and every place a run is kept:
/// neither the secret key nor the token appears in the records, the trace log or the metrics.
#[test]
fn aws_secrets_never_appear() {
    let env = [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_SESSION_TOKEN", SESSION_TOKEN),
    ];
    common::with_env(&env, aws_secrets_never_appear_body(env));
}

async fn aws_secrets_never_appear_body(env: [(&'static str, &'static str); 3]) {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let extra = "api: bedrock, aws: {region: us-east-1}";
    let targets = [
        ("echo", "echo-auth", extra),
        ("ok", "healthy", extra),
        ("err", "mid-stream-error", extra),
        ("down", "http-500", extra),
    ];
    let (dir, cfg) = common::config(&sim, &targets, common::PROBE);
    let leaked = |text: &str| text.contains(SECRET_ACCESS_KEY) || text.contains(SESSION_TOKEN);

    let path = dir.path().join("llm-canary.yaml");
    let mut cmd = common::bin();
    cmd.args(["--log-level", "trace", "once", "-c"])
        .arg(path)
        .args(["--format", "json", "--show-output"])
        .envs(env);
    let out = common::output(cmd).await;
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{o}\n{e}");
    assert!(!leaked(&o) && !leaked(&e), "a secret leaked:\n{o}\n{e}");
    // The runs happened as asked: the healthy one passed, signed with the session token.
    assert!(o.contains("\"outcome\":\"ok\""), "{o}");
    assert!(o.contains("stream_error"), "{o}");

    let runner = Runner::new(4);
    let metrics = llm_canary::testing::sinks::metrics::Metrics::new(&cfg);
    for t in &cfg.targets {
        let r = runner.run_one(&cfg.probes[0], t).await;
        metrics.record(&r, t);
        let record = serde_json::to_string(&r).unwrap();
        assert!(!leaked(&record), "{record}");
    }
    let text = String::from_utf8(metrics.encode()).unwrap();
    assert!(!leaked(&text), "{text}");
    // The sim did receive the token, so its absence above is redaction, not absence.
    assert!(sim
        .seen()
        .iter()
        .all(|s| s.header("x-amz-security-token") == Some(SESSION_TOKEN)));
}

/// A hosted API publishes no server metrics: calibrate says so, and does not ask for a server
/// kind.
#[tokio::test]
async fn calibrate_says_bedrock_has_no_server_figures() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_keys, extra) = common::bedrock_keys();
    let (dir, _) = common::config(&sim, &[("b", "healthy", extra.as_str())], common::PROBE);
    let path = dir.path().join("llm-canary.yaml");
    let mut cmd = common::bin();
    cmd.args(["calibrate", "--target", "b", "-c"]).arg(path);
    let out = common::output(cmd).await;
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("hosted API `bedrock`") && e.contains("publish no server metrics"),
        "{e}"
    );
    assert!(sim.seen().is_empty(), "nothing is sent to learn that");
}
