//! The binary as users and CI drive it: exit codes, output formats, `check`, `demo`, `sim`, and
//! the API key never appearing anywhere.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use llm_canary::testing::sim::Sim;

use common::bin;

/// Runs the binary off the async runtime (the sim runs on it in-process).
async fn run(args: Vec<String>, envs: Vec<(&'static str, &'static str)>) -> std::process::Output {
    let mut cmd = bin();
    cmd.args(args).envs(envs);
    common::output(cmd).await
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `check -c CONFIG` with these environment variables: it must pass; its standard output.
fn checked(config: &std::path::Path, envs: &[(&str, &str)]) -> String {
    let out = bin()
        .arg("check")
        .arg("-c")
        .arg(config)
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[tokio::test(flavor = "multi_thread")]
async fn once_exit_codes_and_json_lines() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, _) = common::config(
        &sim,
        &[
            (
                "good",
                "healthy",
                "labels: {model_version: \"7\", env: dev}",
            ),
            ("bad", "http-503", ""),
        ],
        common::PROBE,
    );
    let cfg = dir.path().join("llm-canary.yaml").display().to_string();

    let ok = run(
        vec![
            "once".into(),
            "-c".into(),
            cfg.clone(),
            "--target".into(),
            "good".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let table = text(&ok.stdout);
    assert!(
        table.starts_with("PROBE")
            && table.contains("good")
            && table.contains("1 of 1 probe runs ok"),
        "{table}"
    );

    let all = run(
        vec![
            "once".into(),
            "-c".into(),
            cfg.clone(),
            "--format".into(),
            "json".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(all.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = text(&all.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    const FIELDS: [&str; 39] = [
        "probe",
        "target",
        "model",
        "request_id",
        "started_at",
        "outcome",
        "success",
        "failed_checks",
        "http_status",
        "ttfb_ms",
        "ttft_ms",
        "e2e_ms",
        "output_tokens",
        "tokens_source",
        "tpot_ms",
        "tokens_per_second",
        "itl_p50_ms",
        "itl_p99_ms",
        "itl_max_ms",
        "finish_reason",
        "output_chars",
        "repetition_score",
        "warmup",
        "error",
        "server_timings",
        "content_chunks",
        "labels",
        "answer_ttft_ms",
        "reasoning_tokens",
        "server_ttft_ms",
        "reported_model",
        "fingerprint",
        "target_changed",
        "output_sha256",
        "output_changed",
        "trace_id",
        "maintenance",
        "response_bytes",
        "stopped_early",
    ];
    for l in &lines {
        for f in FIELDS {
            assert!(l.get(f).is_some(), "field {f} missing in {l}");
        }
        assert!(l.get("output").is_none(), "no generated text unless asked");
        assert!(jiff::Timestamp::from_str_rfc3339(
            l["started_at"].as_str().unwrap()
        ));
    }
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(
        lines[0]["warmup"], true,
        "first success after start is a warm-up"
    );
    // A record says which version it measured: the target's labels.
    assert_eq!(
        lines[0]["labels"],
        serde_json::json!({"env": "dev", "model_version": "7"})
    );
    assert_eq!(lines[1]["labels"], serde_json::json!({}));
    assert_eq!(lines[1]["outcome"], "http_error");
    assert_eq!(lines[1]["http_status"], 503);
    assert!(lines[1]["ttft_ms"].is_null());

    let unknown = run(
        vec![
            "once".into(),
            "-c".into(),
            cfg.clone(),
            "--probe".into(),
            "nope".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("unknown probe \"nope\" (known: p)"));

    let shown = run(
        vec![
            "once".into(),
            "-c".into(),
            cfg,
            "--target".into(),
            "good".into(),
            "--format".into(),
            "json".into(),
            "--show-output".into(),
        ],
        vec![],
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(text(&shown.stdout).trim()).unwrap();
    assert!(v["output"].as_str().unwrap().contains("Paris"));
}

trait Rfc3339 {
    fn from_str_rfc3339(s: &str) -> bool;
}
impl Rfc3339 for jiff::Timestamp {
    fn from_str_rfc3339(s: &str) -> bool {
        s.ends_with('Z') && s.parse::<jiff::Timestamp>().is_ok()
    }
}

const KEY: &str = "sk-canary-secret-0123456789";
#[test]
fn the_api_key_never_appears() {
    // Set before the runtime starts a thread: changing the environment races its readers.
    common::with_env(
        &[("LLM_CANARY_TEST_SECRET", KEY)],
        the_api_key_never_appears_body(),
    );
}

async fn the_api_key_never_appears_body() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let extra = "api_key_env: LLM_CANARY_TEST_SECRET";
    let targets = [
        ("echo", "echo-auth", extra),
        ("ok", "healthy", extra),
        ("err", "mid-stream-error", extra),
        ("down", "http-500", extra),
    ];
    let (dir, _) = common::config(&sim, &targets, common::PROBE);
    let cfg = dir.path().join("llm-canary.yaml").display().to_string();
    for format in ["json", "table"] {
        let out = run(
            vec![
                "--log-level".into(),
                "trace".into(),
                "once".into(),
                "-c".into(),
                cfg.clone(),
                "--format".into(),
                format.into(),
                "--show-output".into(),
            ],
            vec![("LLM_CANARY_TEST_SECRET", KEY)],
        )
        .await;
        assert_eq!(out.status.code(), Some(1));
        let (o, e) = (text(&out.stdout), text(&out.stderr));
        assert!(
            !o.contains(KEY) && !e.contains(KEY),
            "key leaked:\n{o}\n{e}"
        );
        assert!(
            o.contains("invalid credentials: Bearer ***"),
            "the echoed key is redacted: {o}"
        );
    }
    // The sim did receive it, so the redaction above was real: every request (four targets,
    // two formats) carried the key.
    let seen = sim.seen();
    let completions = seen
        .iter()
        .filter(|s| s.path.ends_with("/chat/completions"));
    assert_eq!(
        completions.clone().count(),
        8,
        "one request per target and format"
    );
    assert!(completions
        .clone()
        .all(|s| s.header("authorization") == Some(&format!("Bearer {KEY}")[..])));
}

#[test]
fn check_prints_three_fire_times_and_warnings() {
    let dir = common::TempDir::new("check");
    dir.write(&[
        ("llm-canary.yaml", "targets:\n  - {name: g, base_url: \"http://127.0.0.1:9/v1\", model: m}\n  - {name: lr, base_url: \"http://127.0.0.1:9/v1\", model: m, server: llama-cpp, api: openai-responses}\n  - {name: lm, base_url: \"http://127.0.0.1:9/v1\", model: m, server: llama-cpp, api: anthropic-messages}\n  - {name: vr, base_url: \"http://127.0.0.1:9/v1\", model: m, server: vllm, api: openai-responses}\n  - {name: o, base_url: \"http://127.0.0.1:9\", model: m, server: ollama, api: ollama}\nmaintenance:\n  - {targets: [g], schedule: \"0 3 * * 0\", duration: 30m}\n"),
        ("probes/p.yaml", "name: p\nschedule: \"*/2 * * * * *\"\nprompt: q.txt\n"),
        ("probes/z.yaml", "name: z\nschedule: \"30 9 * * 1-5\"\ntimezone: Europe/Paris\nprompt: q.txt\ncache_bust: prefix\n"),
        ("prompts/q.txt", "hi"),
    ]);
    let config = dir.path().join("llm-canary.yaml");
    let s = checked(&config, &[]);
    // The cadence in words beside the fire times: a 6-field step is seconds.
    let line = s
        .lines()
        .find(|l| l.contains("schedule \"*/2 * * * * *\" (every 2 seconds): next "))
        .unwrap_or_else(|| panic!("{s}"));
    // RFC 3339: `Z` in UTC, the zone's offset elsewhere; never a bracketed zone name.
    let times: Vec<&str> = line.split("next ").nth(1).unwrap().split(", ").collect();
    assert_eq!(times.len(), 3, "{line}");
    for t in times {
        assert!(
            t.ends_with('Z') && t.parse::<jiff::Timestamp>().is_ok(),
            "{line}"
        );
    }
    let paris = s
        .lines()
        .find(|l| l.contains("schedule \"30 9 * * 1-5\" (at 09:30 on Monday to Friday): next "))
        .unwrap_or_else(|| panic!("{s}"));
    // +01:00 in winter, +02:00 in summer.
    for t in paris.split("next ").nth(1).unwrap().split(", ") {
        assert!(
            t.contains("T09:30:00+0") && t.parse::<jiff::Timestamp>().is_ok(),
            "{paris}"
        );
    }
    assert!(
        s.contains("warning: probe \"p\" on target \"g\": server kind `generic`"),
        "{s}"
    );
    // A maintenance window's cadence in words too.
    assert!(
        s.contains("maintenance of g for 30m from \"0 3 * * 0\" (at 03:00 on Sunday): next "),
        "{s}"
    );
    // Per flavor: llama.cpp honours cache_prompt on /v1/responses, not on /v1/messages; vLLM's
    // cache_salt is a chat and completions field; Ollama has none.
    for (target, warned) in [("lr", false), ("lm", true), ("vr", true), ("o", true)] {
        assert_eq!(
            s.contains(&format!(
                "warning: probe \"p\" on target \"{target}\": server kind"
            )),
            warned,
            "{target}: {s}"
        );
    }
    assert!(
        !s.contains("probe \"z\" on target"),
        "prefix mode needs no warning: {s}"
    );
    // Neither agent.listen nor push: a daemon on this config would keep its results to itself.
    assert!(
        s.contains("warning: `run` with this config: results go nowhere but the log on stderr: set agent.listen (e.g. 0.0.0.0:9464, for Prometheus to scrape /metrics) or push.url (a Pushgateway)"),
        "{s}"
    );
    dir.write(&[(
        "llm-canary.yaml",
        "agent: {listen: \"127.0.0.1:0\"}\ntargets:\n  - {name: g, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
    )]);
    assert!(!checked(&config, &[]).contains("results go nowhere"));
}

/// Reads stderr lines until one satisfies `done`, or 20 s pass; returns them all.
fn stderr_until(
    stderr: std::process::ChildStderr,
    done: impl Fn(&str) -> bool + Send + 'static,
) -> Vec<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let end = done(&line);
            if tx.send(line).is_err() || end {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut lines = Vec::new();
    while let Ok(l) = rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        lines.push(l);
    }
    lines
}

#[tokio::test(flavor = "multi_thread")]
async fn run_says_when_results_go_nowhere_and_logs_plain_figures() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = common::TempDir::new("nowhere");
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!(
                "targets:\n  - {{name: t, base_url: \"{}\", model: m}}\n",
                sim.base_url("healthy")
            ),
        ),
        (
            "probes/p.yaml",
            "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\n",
        ),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let mut child = bin()
        .args(["--log-level", "debug", "run", "-c"])
        .arg(dir.path().join("llm-canary.yaml"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        stderr_until(stderr, |l| l.contains("probe run finished"))
    })
    .await
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let all = lines.join("\n");
    assert!(
        lines.iter().any(|l| l.contains("WARN")
            && l.contains("results go nowhere but the log on stderr: set agent.listen")),
        "{all}"
    );
    let finished = lines
        .iter()
        .find(|l| l.contains("probe run finished"))
        .unwrap_or_else(|| panic!("no run logged:\n{all}"));
    // Figures as numbers, not Rust's Option wrapping.
    assert!(
        finished.contains(" ttft_ms=") && !finished.contains("Some("),
        "{finished}"
    );
}

/// `once --format json` on the config in `dir`: its records.
async fn once_json(dir: &common::TempDir) -> Vec<serde_json::Value> {
    let out = run(
        vec![
            "once".into(),
            "-c".into(),
            dir.path().join("llm-canary.yaml").display().to_string(),
            "--format".into(),
            "json".into(),
        ],
        vec![],
    )
    .await;
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connect_error_is_one_short_sentence() {
    let port = common::closed_port();
    let dir = common::TempDir::new("refused");
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!(
                "targets:\n  - {{name: t, base_url: \"http://127.0.0.1:{port}/v1\", model: m}}\n"
            ),
        ),
        ("probes/p.yaml", "name: p\nprompt: q.txt\n"),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let v = &once_json(&dir).await[0];
    assert_eq!(v["outcome"], "connect_error");
    assert_eq!(
        v["error"],
        format!("connect: connection refused (127.0.0.1:{port})")
    );
}

/// `https://` against a plain-HTTP server (the sim) is named at once, not a connect timeout.
#[tokio::test(flavor = "multi_thread")]
async fn https_against_plain_http_says_the_scheme_looks_wrong() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let url = sim.base_url("healthy").replacen("http://", "https://", 1);
    let dir = common::TempDir::new("scheme");
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!("targets:\n  - {{name: t, base_url: \"{url}\", model: m}}\n"),
        ),
        ("probes/p.yaml", "name: p\nprompt: q.txt\n"),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let v = &once_json(&dir).await[0];
    let addr = url
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(v["outcome"], "connect_error");
    assert_eq!(v["reason"], "tls_mismatch");
    assert_eq!(
        v["error"],
        format!("connect: the server answered the TLS handshake in plain HTTP: the scheme looks wrong, try http:// ({addr})")
    );
    // Answered, not timed out (the connect timeout is 3 s).
    assert!(v["e2e_ms"].as_f64().unwrap() < 2000.0, "{v}");
}

/// `http://` against a TLS server is named too, whether the server answers plain HTTP with a
/// TLS alert (rustls, as the sim does) or with the sentence HTTPS servers send (Go's, this
/// agent's own endpoints behind a web config).
#[tokio::test(flavor = "multi_thread")]
async fn http_against_tls_says_the_scheme_looks_wrong() {
    let pki = common::pki::Pki::new("scheme");
    let sim = Sim::start_tls("127.0.0.1:0", &pki.server.cert, &pki.server.key, None)
        .await
        .unwrap();
    // The sim's own URL is https:// here: the scheme made wrong on purpose.
    let url = sim.base_url("healthy").replacen("https://", "http://", 1);
    // A server that says it in words: a 400 with the sentence, as Go's servers send.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let go = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let _ = sock
                .write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                .await;
        }
    });
    let dir = common::TempDir::new("scheme-tls");
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!(
                "targets:\n  - {{name: alert, base_url: \"{url}\", model: m}}\n  - {{name: words, base_url: \"http://{go}/v1\", model: m}}\n"
            ),
        ),
        ("probes/p.yaml", "name: p\nprompt: q.txt\n"),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let runs = once_json(&dir).await;
    assert_eq!(runs.len(), 2);
    for v in &runs {
        let addr = match v["target"].as_str().unwrap() {
            "alert" => sim.addr().to_string(),
            _ => go.to_string(),
        };
        assert_eq!(v["outcome"], "connect_error", "{v}");
        assert_eq!(v["reason"], "tls_mismatch", "{v}");
        assert_eq!(
            v["error"],
            format!("connect: the server answered plain HTTP in TLS: the scheme looks wrong, try https:// ({addr})")
        );
    }
}

#[test]
fn demo_shows_healthy_and_failing_probes() {
    let out = bin().arg("demo").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for want in [
        "healthy-vllm",
        " ok ",
        "repetition",
        "stall",
        "timeout_ttft",
        "http_error",
        "stream_error",
    ] {
        assert!(s.contains(want), "demo output lacks {want:?}:\n{s}");
    }
}

#[test]
fn sim_command_serves_until_stopped() {
    let mut child = bin()
        .args(["sim", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let addr = first.trim().rsplit("http://").next().unwrap().to_string();
    // The start-up list: the canned answers, then every scenario under the default timeouts.
    let mut list = String::new();
    while !list.contains("scenarios, as a probe with the default timeouts") {
        assert!(stdout.read_line(&mut list).unwrap() > 0, "{list}");
    }
    for _ in llm_canary::testing::sim::scenarios::CATALOG {
        stdout.read_line(&mut list).unwrap();
    }
    for want in [
        "healthy scenarios answer canned text, whatever the question",
        "any other prompt                  The capital of France is Paris.",
        "(connect 3s, ttft 10s, stall 5s, total 1m)",
        "  stall              a 3s pause after the third token (stall=...): ok under the default stall 5s; stall with timeouts.stall below 3s",
    ] {
        assert!(list.contains(want), "no {want:?} in\n{list}");
    }
    let dir = common::TempDir::new("simcmd");
    dir.write(&[
        ("llm-canary.yaml", &format!("targets:\n  - {{name: s, base_url: \"http://{addr}/s/healthy-zh/v1\", model: m}}\n")),
        ("probes/p.yaml", "name: p\nprompt: q.txt\nchecks: {expect: \"巴黎\"}\n"),
        ("prompts/q.txt", "法国的首都是哪里？"),
    ]);
    let out = bin()
        .arg("once")
        .arg("-c")
        .arg(dir.path().join("llm-canary.yaml"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // The graceful stop it promises: SIGTERM, and it exits 0 by itself, promptly.
    let pid = child.id();
    common::services::signal(pid, "TERM");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(5)) {
        Ok(status) => assert_eq!(status.unwrap().code(), Some(0), "exit after SIGTERM"),
        Err(_) => {
            common::services::signal(pid, "KILL");
            panic!("the sim did not exit within 5 s of SIGTERM");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sims_slow_scenarios_are_what_its_list_says() {
    // `sim` prints "ok under the default ..." for these: a probe left at the default timeouts
    // must see ok, and one with tighter timeouts the outcome the list names.
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = common::TempDir::new("simlist");
    let t = |name: &str| {
        format!(
            "  - {{name: {name}, base_url: \"{}\", model: m}}\n",
            sim.base_url(name)
        )
    };
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!("targets:\n{}{}", t("stall"), t("slow-first-token")),
        ),
        (
            "probes/default.yaml",
            // Both probes send the same prompt at once: a nonce keeps the sim's prefix cache
            // from answering the second in a quarter of the time.
            "name: default\nprompt: q.txt\ncache_bust: prefix\nchecks: {expect: \"(?i)paris\"}\n",
        ),
        (
            "probes/tight.yaml",
            "name: tight\nprompt: q.txt\ncache_bust: prefix\ntimeouts: {stall: 2s, ttft: 2s}\n",
        ),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let records = once_json(&dir).await;
    let got: Vec<String> = records
        .iter()
        .map(|v| format!("{} {} {}", v["probe"], v["target"], v["outcome"]))
        .collect();
    assert_eq!(
        got,
        [
            r#""default" "stall" "ok""#,
            r#""default" "slow-first-token" "ok""#,
            r#""tight" "stall" "stall""#,
            r#""tight" "slow-first-token" "timeout_ttft""#,
        ],
        "{records:#?}"
    );
}

#[test]
fn the_shipped_configs_are_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = checked(&root.join("llm-canary.yaml"), &[]);
    assert!(example.contains("5 probe(s)"));
    // The example serves /metrics: `run` on it exports somewhere.
    assert!(!example.contains("results go nowhere"));
    checked(
        &root.join("deploy/ci/llm-canary.yaml"),
        &[("CANDIDATE_API_KEY", "k1"), ("PROD_API_KEY", "k2")],
    );
    checked(&root.join("deploy/real-model/llm-canary.yaml"), &[]);
}

/// A content failure says what failed and on what text, in the table and in the record.
#[tokio::test(flavor = "multi_thread")]
async fn a_pattern_mismatch_names_the_pattern_and_shows_the_text() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, _) = common::config(&sim, &[("wrong", "mismatch", "")], common::PROBE);
    let cfg = dir.path().join("llm-canary.yaml").display().to_string();
    // The generated text stays out unless asked for (docs/design.md): the pattern is named.
    let records = once_json(&dir).await;
    let error = records[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("expect /(?i)paris/ did not match the answer (")
            && error.ends_with("characters; --show-output quotes it)"),
        "{error}"
    );
    let shown = run(
        vec![
            "once".into(),
            "-c".into(),
            cfg.clone(),
            "--show-output".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(shown.status.code(), Some(1));
    let table = text(&shown.stdout);
    assert!(
        table.contains("pattern_mismatch")
            && table.contains("expect /(?i)paris/ did not match \"I am not sure"),
        "{table}"
    );
}

/// Every subcommand that reads the config says what `-c` is.
#[test]
fn every_config_flag_has_help() {
    use clap::CommandFactory;
    let cli = llm_canary::cli::Cli::command();
    let mut seen = 0;
    for sub in cli.get_subcommands() {
        if let Some(c) = sub.get_arguments().find(|a| a.get_id() == "config") {
            assert_eq!(c.get_short(), Some('c'), "{}", sub.get_name());
            let help = c.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(help.contains("config file"), "{}: {help:?}", sub.get_name());
            seen += 1;
        }
    }
    assert!(seen >= 5, "{seen} subcommands take -c");
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    // The commit build.rs read, unless git cannot say (a source tarball): then "unknown".
    let root = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| text(&o.stdout).trim().to_owned())
    };
    let commit = match std::env::var("LLM_CANARY_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => git(&["rev-parse", "--short=12", "HEAD"])
            .filter(|_| {
                let top = git(&["rev-parse", "--show-toplevel"]).map(std::fs::canonicalize);
                matches!(top, Some(Ok(top)) if top == std::fs::canonicalize(root).unwrap())
            })
            .unwrap_or_else(|| "unknown".to_owned()),
    };
    let expected = format!("llm-canary {} ({commit})\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"][..]] {
        let out = bin().args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout), expected, "{args:?}");
    }
    if commit != "unknown" {
        assert!(
            commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{commit}"
        );
    }
}

#[test]
fn check_warns_of_targets_no_probe_can_page_within_the_p0_clock() {
    let dir = common::TempDir::new("check-p0");
    let target =
        |n: &str| format!("  - {{name: {n}, base_url: \"http://127.0.0.1:9/v1\", model: m}}\n");
    let targets: String = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| target(n))
        .collect();
    dir.write(&[
        ("llm-canary.yaml", &format!("agent: {{listen: \"127.0.0.1:0\"}}\ntargets:\n{targets}")),
        ("probes/minute.yaml", "name: minute\nschedule: \"* * * * *\"\ntargets: [a]\nprompt: q.txt\n"),
        ("probes/five.yaml", "name: five\nschedule: \"*/5 * * * *\"\ntargets: [a, b]\nprompt: q.txt\n"),
        ("probes/two-quick.yaml", "name: two-quick\nschedule: \"*/2 * * * *\"\ntargets: [c]\nprompt: q.txt\nconfirm: {after: 5s}\n"),
        ("probes/half-off.yaml", "name: half-off\nschedule: \"*/30 * * * * *\"\ntargets: [d]\nprompt: q.txt\nconfirm: off\n"),
        ("probes/two-off.yaml", "name: two-off\nschedule: \"*/2 * * * *\"\ntargets: [e]\nprompt: q.txt\nconfirm: {runs: 0}\n"),
        ("prompts/q.txt", "hi"),
    ]);
    let s = checked(&dir.path().join("llm-canary.yaml"), &[]);
    let warned = |t: &str| s.contains(&format!("warning: target \"{t}\" may page only"));
    // a: its 1-minute probe pages in time, whatever the 5-minute one does. c: a 2-minute
    // cadence with confirmations 5 s apart makes it (2m + 10s + 45s). d: 30 s probes make the
    // rules' own 3-minute clock.
    for (t, want) in [
        ("a", false),
        ("b", true),
        ("c", false),
        ("d", false),
        ("e", true),
    ] {
        assert_eq!(warned(t), want, "{t}: {s}");
    }
    assert!(
        s.contains("warning: target \"b\" may page only 385s after it goes down, past the 3-minute P0 clock: its fastest, probe \"five\" runs every 5m and confirms a failure with 2 run(s) 20s apart"),
        "{s}"
    );
    assert!(
        s.contains("probe \"two-off\" runs every 2m with `confirm: off`"),
        "{s}"
    );
    assert!(
        s.contains("  confirm: a failed run is re-run up to 2 time(s), 5s after each failure, before its next scheduled run"),
        "{s}"
    );
}

#[test]
fn check_prints_the_cadence_of_intervals_and_warns_by_it() {
    let dir = common::TempDir::new("check-every");
    let target =
        |n: &str| format!("  - {{name: {n}, base_url: \"http://127.0.0.1:9/v1\", model: m}}\n");
    let targets: String = ["a", "b", "c"].iter().map(|n| target(n)).collect();
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!("agent: {{listen: \"127.0.0.1:0\"}}\ntargets:\n{targets}maintenance:\n  - {{targets: [c], schedule: \"@every 6h\", duration: 10m}}\n"),
        ),
        ("probes/five.yaml", "name: five\nevery: 5m\njitter: 30s\ntargets: [a]\nprompt: q.txt\n"),
        ("probes/seven.yaml", "name: seven\nschedule: \"@every 7m\"\ntargets: [b]\nprompt: q.txt\n"),
        ("probes/minute.yaml", "name: minute\nschedule: \"@every 1m\"\ntargets: [c]\nprompt: q.txt\n"),
        ("prompts/q.txt", "hi"),
    ]);
    let s = checked(&dir.path().join("llm-canary.yaml"), &[]);
    // Each form as written, its cadence in words, and fire times at multiples of the interval
    // counted from the Unix epoch.
    for (prefix, secs, suffix) in [
        ("  every 5m (every 5 minutes): next ", 300, "; each target at its own fixed share of the 30s jitter after these"),
        ("  schedule \"@every 7m\" (every 7 minutes, at times of day that move from one day to the next): next ", 420, ""),
        ("  schedule \"@every 1m\" (every minute): next ", 60, ""),
        ("maintenance of c for 10m from \"@every 6h\" (every 6 hours): next ", 21_600, ""),
    ] {
        let line = s
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix:?} in {s}"));
        let times = line[prefix.len()..].strip_suffix(suffix).unwrap_or_else(|| panic!("{line}"));
        let times: Vec<i64> = times
            .split(", ")
            .map(|t| t.parse::<jiff::Timestamp>().unwrap().as_second())
            .collect();
        assert!(times.len() >= 2, "{line}");
        assert!(times.iter().all(|t| t % secs == 0), "{line}");
        assert!(times.windows(2).all(|w| w[1] - w[0] == secs), "{line}");
    }
    // The P0 clock reads the interval as it reads a cron's cadence.
    assert!(
        s.contains("warning: target \"a\" may page only 385s after it goes down, past the 3-minute P0 clock: its fastest, probe \"five\" runs every 5m"),
        "{s}"
    );
    assert!(s.contains("warning: target \"b\" may page only"), "{s}");
    assert!(!s.contains("warning: target \"c\""), "{s}");
    // ... and so does the estimate of runs per day.
    assert!(s.contains("  minute -> c: 1440 runs/day"), "{s}");
}

/// `judge` on the shipped `capital` probe: a file, stdin and JSON lines, each verdict as a run
/// would give it, and the exit codes of `once`.
#[test]
fn judge_reads_a_file_stdin_and_json_lines() {
    use std::io::Write;
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/llm-canary.yaml");
    let dir = tempfile::tempdir().unwrap();
    let healthy = dir.path().join("healthy.txt");
    std::fs::write(&healthy, "The capital of France is Paris, on the Seine.").unwrap();
    let out = bin()
        .args(["judge", "-c", cfg, "--probe", "capital", "--text-file"])
        .arg(&healthy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("outcome        ok\n") && table.ends_with("1 of 1 answers ok\n"),
        "{table}"
    );

    // Stdin, cut by max_tokens, as JSON: truncated, and the loop is found first.
    let mut child = bin()
        .args(["judge", "-c", cfg, "--probe", "capital", "--format", "json"])
        .args(["--finish-reason", "length"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let looping = "Paris is the capital of France. ".repeat(12);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(looping.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "repetition", "{v}");
    assert_eq!(
        v["failed_checks"],
        serde_json::json!(["repetition", "truncated"])
    );
    assert_eq!(v["repetition"]["detector"], "tail_loop", "{v}");
    assert_eq!(v["output_chars"], looping.chars().count());
    assert!(v.get("id").is_none(), "{v}");

    // JSON lines on stdin (`--jsonl -`): one verdict per line, in order, with its id; a line's
    // own finish reason wins.
    let lines = dir.path().join("answers.jsonl");
    let mut child = bin()
        .args(["judge", "-c", cfg, "--probe", "capital", "--format", "json"])
        .args(["--jsonl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            concat!(
                r#"{"id": "a", "text": "Paris is the capital of France."}"#,
                "\n\n",
                r#"{"id": 7, "text": "Berlin is the capital of Germany."}"#,
                "\n",
                r#"{"id": "c", "text": "The capital of France is Paris", "finish_reason": "length"}"#,
                "\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let verdicts: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(String, String)> = verdicts
        .iter()
        .map(|v| (v["id"].to_string(), v["outcome"].to_string()))
        .collect();
    assert_eq!(
        got,
        [
            (r#""a""#.into(), r#""ok""#.into()),
            ("7".into(), r#""pattern_mismatch""#.into()),
            (r#""c""#.into(), r#""truncated""#.into()),
        ]
    );
    assert_eq!(
        verdicts[1]["error"],
        // The text is the user's own: the sentence quotes it.
        r#"expect /(?i)paris/ did not match "Berlin is the capital of Germany.""#
    );

    // Usage errors exit 2 with one sentence: an unknown probe, a line that is no verdict's input.
    let out = bin()
        .args(["judge", "-c", cfg, "--probe", "nope", "--text-file"])
        .arg(&healthy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown probe \"nope\""));
    std::fs::write(&lines, "{\"text\": \"no id\"}\n").unwrap();
    let out = bin()
        .args(["judge", "-c", cfg, "--probe", "capital", "--jsonl"])
        .arg(&lines)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("answers.jsonl line 1"),
        "{}",
        text(&out.stderr)
    );
}

/// A run-time error stops a command with exit 2 and one line, as a usage or config error does:
/// scripts tell "the probe failed" (1) from "the command could not do its job" (2).
#[test]
fn a_run_time_error_exits_2_with_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = bin().args(["sim", "--listen", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&addr),
        "the sentence names the address: {err}"
    );
}
