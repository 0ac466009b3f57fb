//! The binary as users and CI drive it: exit codes, output formats, `check`, `demo`, `sim`, and
//! the API key never appearing anywhere.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use llm_canary::sim::Sim;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_llm-canary"))
}

/// Runs the binary off the async runtime (the sim runs on it in-process).
async fn run(args: Vec<String>, envs: Vec<(&'static str, &'static str)>) -> std::process::Output {
    tokio::task::spawn_blocking(move || bin().args(args).envs(envs).output().unwrap())
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn once_exit_codes_and_json_lines() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, _) = common::config(
        &sim,
        &[("good", "healthy", ""), ("bad", "http-503", "")],
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
    const FIELDS: [&str; 26] = [
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
    assert!(text(&unknown.stderr).contains("unknown probe \"nope\""));

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

#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_never_appears() {
    const KEY: &str = "sk-canary-secret-0123456789";
    std::env::set_var("LLM_CANARY_TEST_SECRET", KEY);
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
    // The sim did receive it, so the redaction above was real.
    assert!(sim
        .seen()
        .iter()
        .all(|s| s.header("authorization") == Some(&format!("Bearer {KEY}")[..])));
}

#[test]
fn check_prints_three_fire_times_and_warnings() {
    let dir = common::TempDir::new("check");
    dir.write(&[
        ("llm-canary.yaml", "targets:\n  - {name: g, base_url: \"http://127.0.0.1:9/v1\", model: m}\n"),
        ("probes/p.yaml", "name: p\nschedule: \"*/2 * * * * *\"\nprompt: q.txt\n"),
        ("probes/z.yaml", "name: z\nschedule: \"30 9 * * 1-5\"\ntimezone: Europe/Paris\nprompt: q.txt\ncache_bust: prefix\n"),
        ("prompts/q.txt", "hi"),
    ]);
    let out = bin()
        .arg("check")
        .arg("-c")
        .arg(dir.path().join("llm-canary.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let line = s
        .lines()
        .find(|l| l.contains("schedule \"*/2 * * * * *\""))
        .unwrap();
    assert_eq!(line.matches("+00:00[UTC]").count(), 3, "{line}");
    let paris = s
        .lines()
        .find(|l| l.contains("schedule \"30 9 * * 1-5\""))
        .unwrap();
    assert_eq!(
        paris.matches("T09:30:00+01:00[Europe/Paris]").count(),
        3,
        "{paris}"
    );
    assert!(
        s.contains("warning: probe \"p\" on target \"g\": server kind `generic`"),
        "{s}"
    );
    assert!(
        !s.contains("probe \"z\" on target"),
        "prefix mode needs no warning: {s}"
    );
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
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first.trim().rsplit("http://").next().unwrap().to_string();
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

#[test]
fn the_shipped_configs_are_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = bin()
        .arg("check")
        .arg("-c")
        .arg(root.join("llm-canary.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("4 probe(s)"));
    let out = bin()
        .arg("check")
        .arg("-c")
        .arg(root.join("deploy/ci/llm-canary.yaml"))
        .env("CANDIDATE_API_KEY", "k1")
        .env("PROD_API_KEY", "k2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = bin()
        .arg("check")
        .arg("-c")
        .arg(root.join("deploy/real-model/llm-canary.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
