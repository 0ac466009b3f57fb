//! `llm-canary gate` against the sim: verdicts, reports and exit codes.

use crate::common;

use std::process::Command;

use common::TempDir;
use llm_canary::testing::sim::Sim;

const PROBE: &str = r#"name: p
prompt: q.txt
max_tokens: 40
checks: {expect: "(?i)paris", allow_truncation: true}
gate:
  samples: 12
  slo: {ttft_p95: 300ms, success_rate: ">= 0.95", outcome.repetition: "<= 0"}
  vs_baseline: {ttft_p50: "+20%", tokens_per_second_p50: "-15%"}
  inconclusive: INCONCLUSIVE
"#;

/// A target line of `llm-canary.yaml` serving `scenario` of the sim.
fn target(sim: &Sim, name: &str, scenario: &str) -> String {
    format!(
        "  - {{name: {name}, base_url: \"{}\", model: m, server: vllm}}\n",
        sim.base_url(scenario)
    )
}

fn setup(sim: &Sim, inconclusive: &str) -> TempDir {
    let dir = TempDir::new("gate");
    let t = |name: &str, scenario: &str| target(sim, name, scenario);
    let agent = [
        "targets:\n".to_string(),
        t("prod", "healthy,ttft=100ms,itl=10ms"),
        t("cand-same", "healthy,ttft=101ms,itl=10ms"),
        t("cand-slow", "healthy,ttft=400ms,itl=10ms"),
        t("cand-loop", "repetition,every=5,ttft=100ms,itl=10ms"),
        t("noisy-prod", "healthy,ttft=20ms,jitter=160ms,itl=10ms"),
        t("noisy-cand", "healthy,ttft=20ms,jitter=200ms,itl=10ms"),
        t("cand-cold", "healthy,warm=1500ms,itl=10ms"),
        t("cand-down", "http-503"),
    ]
    .concat();
    dir.write(&[
        ("llm-canary.yaml", &agent),
        (
            "probes/p.yaml",
            &PROBE.replace("INCONCLUSIVE", inconclusive),
        ),
        ("prompts/q.txt", common::PROMPT),
    ]);
    dir
}

struct Gate {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn gate(dir: &TempDir, args: &[&str]) -> Gate {
    let mut cmd = common::bin();
    cmd.arg("gate")
        .arg("-c")
        .arg(dir.path().join("llm-canary.yaml"))
        .args(args);
    if !args.contains(&"--concurrency") {
        cmd.args(["--concurrency", "4"]);
    }
    let out = common::output(cmd).await;
    Gate {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The gate with `--junit` and `--summary` written into `dir`: its result, the JUnit file and
/// the Markdown summary.
async fn gate_reporting(dir: &TempDir, args: &[&str]) -> (Gate, std::path::PathBuf, String) {
    let junit = dir.path().join("junit.xml");
    let summary = dir.path().join("summary.md");
    let mut all = args.to_vec();
    all.extend([
        "--junit",
        junit.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
    ]);
    let g = gate(dir, &all).await;
    let md = std::fs::read_to_string(&summary).unwrap_or_default();
    (g, junit, md)
}

/// What a Python `script` prints about the JUnit file (its `sys.argv[1]`), read by Python's own
/// XML parser, as CI tools read it.
fn python_reads(script: &str, junit: &std::path::Path) -> String {
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(junit)
        .output()
        .expect("python3 parses the JUnit file");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn line<'a>(table: &'a str, limit: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.contains(limit))
        .unwrap_or_else(|| panic!("no row for {limit} in\n{table}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn healthy_against_healthy_passes() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let g = gate(
        &dir,
        &["--target", "cand-same", "--baseline-target", "prod"],
    )
    .await;
    assert_eq!(g.code, Some(0), "{}{}", g.stdout, g.stderr);
    assert!(
        g.stdout
            .contains("gate PASSED: cand-same against prod: 5 limits, 0 failed, 0 inconclusive"),
        "{}",
        g.stdout
    );
    assert!(line(&g.stdout, "ttft_p50 +20%").contains("pass"));
    // Plain progress lines when stderr is not a terminal.
    assert!(
        g.stderr.lines().any(|l| l == "gate: 24/24 runs"),
        "{}",
        g.stderr
    );
    // Interleaved: the sim saw candidate and baseline requests alternate.
    let order: Vec<bool> = sim
        .seen()
        .iter()
        .map(|s| s.path.contains("ttft=101ms"))
        .collect();
    // Pairs are planned A,B / B,A …, so the sides' counts differ by at most one among the runs
    // started; with 4 in flight, arrival can reorder at most 4 more (done one side first, the
    // imbalance would reach 12).
    let mut lead = 0i32;
    let max_lead = order
        .iter()
        .map(|&cand| {
            lead += if cand { 1 } else { -1 };
            lead.abs()
        })
        .max()
        .unwrap();
    assert!(max_lead <= 5 && lead == 0, "A/B interleaving: {order:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pairs_run_back_to_back_and_take_turns_going_first() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let g = gate(
        &dir,
        &[
            "--target",
            "cand-same",
            "--baseline-target",
            "prod",
            "--samples",
            "4",
            "--warmup",
            "0",
            "--concurrency",
            "1",
        ],
    )
    .await;
    // The order is what this test checks: on 4 samples the verdict may be inconclusive when the
    // machine is busy (exit 1), but never an error.
    assert!(matches!(g.code, Some(0 | 1)), "{}{}", g.stdout, g.stderr);
    let order: String = sim
        .seen()
        .iter()
        .map(|s| {
            if s.path.contains("ttft=101ms") {
                'C'
            } else {
                'B'
            }
        })
        .collect();
    // Pair 0: candidate first; pair 1: baseline first; …
    assert_eq!(order, "CBBCCBBC");
}

/// The gate run with `args` on a pseudo-terminal (util-linux's `script`) for stdout and
/// stderr: its exit code and all it wrote there.
async fn on_a_terminal(dir: &TempDir, args: &str) -> (Option<i32>, String) {
    let cmd = format!(
        "'{}' gate -c '{}' {args}",
        env!("CARGO_BIN_EXE_llm-canary"),
        dir.path().join("llm-canary.yaml").display()
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .unwrap_or_else(|e| {
                panic!("`script` (Debian package bsdutils/util-linux) is needed for this test: {e}")
            })
    })
    .await
    .unwrap();
    let tty = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), tty)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_gets_a_progress_bar() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let (code, tty) = on_a_terminal(
        &dir,
        "--target cand-same --baseline-target prod --probe p --samples 2 --warmup 0 --concurrency 1",
    )
    .await;
    // The bar is what this test holds; on 2 samples a busy machine can make the verdict
    // inconclusive (exit 1), never an error.
    assert!(matches!(code, Some(0 | 1)), "{tty}");
    // One bar redrawn in place (\r), never the plain lines meant for logs.
    for bar in [
        "\r[#######-----------------------] 1/4 runs",
        "\r[###############---------------] 2/4 runs",
        "\r[##############################] 4/4 runs\r\n",
    ] {
        assert!(tty.contains(bar), "no {bar:?} in {tty:?}");
    }
    // No plain progress line: the only one is what each limit needs, said before any run.
    assert!(
        tty.lines()
            .filter(|l| l.contains("gate: "))
            .all(|l| l.starts_with("gate: p: a fixed 2 per side; least samples per side to pass: ")),
        "{tty:?}"
    );
    assert!(tty.contains("cand-same against prod: 5 limits"), "{tty:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_first_token_fails_naming_the_ttft_limits() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let (g, junit, md) = gate_reporting(
        &dir,
        &["--target", "cand-slow", "--baseline-target", "prod"],
    )
    .await;
    assert_eq!(g.code, Some(1), "{}{}", g.stdout, g.stderr);
    assert!(line(&g.stdout, "ttft_p95 <= 300ms").contains("FAIL"));
    assert!(line(&g.stdout, "ttft_p50 +20%").contains("FAIL"));
    assert!(line(&g.stdout, "tokens_per_second_p50").contains("pass"));
    // 400 ms against 100 ms: about 4 (a busy machine stretches the fast side most).
    let ratio: f64 = g
        .stdout
        .split("p: ttft_p50 ratio ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !(c.is_ascii_digit() || c == '.')).next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no ratio in:\n{}", g.stdout));
    assert!((3.4..4.4).contains(&ratio), "ratio {ratio}");

    // The JUnit file parses: one testcase per probe x limit, the two failures with messages.
    let check = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall('.//testcase')
failed = [c.get('name') for c in cases if c.find('failure') is not None]
print(len(cases), sorted(failed), root.get('failures'))
for c in cases:
    f = c.find('failure')
    if f is not None: assert f.get('message'), c.get('name')
"#;
    assert_eq!(
        python_reads(check, &junit),
        "5 ['ttft_p50 +20%', 'ttft_p95 <= 300ms'] 2"
    );

    assert!(md.starts_with("## ❌ llm-canary gate"), "{md}");
    assert!(md.contains(
        "| probe | limit | candidate [CI] | baseline [CI] | ratio [CI] | verdict | samples |"
    ));
    assert!(
        md.contains("| p | ttft_p95 <= 300ms |") && md.contains("| FAIL |"),
        "{md}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn outputs_that_degenerate_one_time_in_five_fail_on_repetition() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let args = [
        "--target",
        "cand-loop",
        "--baseline-target",
        "prod",
        "--format",
        "json",
    ];
    let g = gate(&dir, &args).await;
    assert_eq!(g.code, Some(1), "{}", g.stderr);
    let v: serde_json::Value = serde_json::from_str(&g.stdout).unwrap();
    let limits = v["probes"][0]["limits"].as_array().unwrap();
    let rep = limits
        .iter()
        .find(|l| l["name"] == "outcome.repetition")
        .unwrap();
    assert_eq!(rep["verdict"], "fail");
    let n = rep["candidate"].as_f64().unwrap();
    assert!((2.0..=3.0).contains(&n), "one in five of 12 samples: {n}");
    assert_eq!(
        limits.iter().find(|l| l["name"] == "ttft_p50").unwrap()["verdict"],
        "pass"
    );
    // The failing limit names the runs behind it: each repeating run's request id and sentence.
    let looping = |v: &serde_json::Value| -> Vec<String> {
        v["probes"][0]["candidate"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["outcome"] == "repetition")
            .map(|s| s["request_id"].as_str().unwrap().to_string())
            .collect()
    };
    let named: Vec<&str> = rep["failed_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(named, looping(&v));
    // The Markdown summary and the JUnit file name them too.
    let (g, junit, md) = gate_reporting(&dir, &args).await;
    assert_eq!(g.code, Some(1), "{}", g.stderr);
    let runs = looping(&serde_json::from_str(&g.stdout).unwrap());
    assert!((2..=3).contains(&runs.len()), "{}", g.stdout);
    for id in &runs {
        let named = format!("\n  - `{id}`: repetition, detector ");
        assert!(md.contains(&named), "no {named:?} in {md}");
    }
    let check = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
f = [c.find('failure') for c in root.findall('.//testcase') if c.get('name') == 'outcome.repetition <= 0'][0]
print(sum(1 for l in f.text.splitlines() if l.startswith('run ') and ': repetition, detector ' in l))
"#;
    assert_eq!(python_reads(check, &junit), runs.len().to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn slightly_slower_with_high_variance_is_inconclusive_not_fail() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    for (policy, code) in [("fail", 1), ("pass", 0)] {
        let dir = setup(&sim, policy);
        let g = gate(
            &dir,
            &[
                "--target",
                "noisy-cand",
                "--baseline-target",
                "noisy-prod",
                "--probe",
                "p",
            ],
        )
        .await;
        let row = line(&g.stdout, "ttft_p50 +20%");
        assert!(
            row.contains("nconclusive") || row.contains("NCONCLUSIVE"),
            "{}",
            g.stdout
        );
        assert!(row.contains("samples to settle"), "{row}");
        assert_eq!(g.code, Some(code), "policy {policy}:\n{}", g.stdout);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_previous_json_serves_as_baseline_and_errors_exit_2() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let g = gate(&dir, &["--target", "prod", "--format", "json"]).await;
    assert_eq!(g.code, Some(0), "{}", g.stderr);
    let v: serde_json::Value = serde_json::from_str(&g.stdout).unwrap();
    assert_eq!(v["probes"][0]["candidate"].as_array().unwrap().len(), 12);
    // Without a baseline the relative limits are reported skipped, never silently dropped.
    let skipped: Vec<&str> = v["probes"][0]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["verdict"] == "skipped")
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["tokens_per_second_p50", "ttft_p50"]);
    assert!(
        g.stderr.contains("gate: no baseline (--baseline-target T or --baseline FILE): the vs_baseline limits of p (tokens_per_second_p50 -15%, ttft_p50 +20%) are skipped, not judged"),
        "{}",
        g.stderr
    );
    let file = dir.path().join("prod.json");
    std::fs::write(&file, &g.stdout).unwrap();

    let ok = gate(
        &dir,
        &[
            "--target",
            "cand-same",
            "--baseline",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(ok.code, Some(0), "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains(&format!("against {}", file.display())));
    let slow = gate(
        &dir,
        &[
            "--target",
            "cand-slow",
            "--baseline",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(slow.code, Some(1));
    assert!(line(&slow.stdout, "ttft_p50 +20%").contains("FAIL"));

    std::fs::write(&file, "{\"not\": \"a gate\"}").unwrap();
    let bad = gate(
        &dir,
        &[
            "--target",
            "cand-same",
            "--baseline",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(bad.code, Some(2));
    assert!(
        bad.stderr.contains("not a gate JSON report"),
        "{}",
        bad.stderr
    );
    let unknown = gate(&dir, &["--target", "nope"]).await;
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("unknown target \"nope\" (known: prod, cand-same, cand-slow, cand-loop, noisy-prod, noisy-cand, cand-cold, cand-down)"),
        "{}",
        unknown.stderr
    );
    let unknown = gate(&dir, &["--target", "prod", "--baseline-target", "prd"]).await;
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown
            .stderr
            .contains("unknown baseline target \"prd\" (known: prod, "),
        "{}",
        unknown.stderr
    );
    let unknown = gate(&dir, &["--target", "prod", "--probe", "q"]).await;
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("unknown probe \"q\" (known: p)"),
        "{}",
        unknown.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn relative_limits_without_a_baseline_are_skipped_out_loud() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let (g, junit, md) = gate_reporting(&dir, &["--target", "cand-same", "--samples", "3"]).await;
    // Exit 0 or 1 by the absolute limits (3 samples on a busy machine may miss the TTFT one);
    // what this test holds is that the relative ones are named as not judged.
    assert!(matches!(g.code, Some(0 | 1)), "{}{}", g.stdout, g.stderr);
    for limit in ["ttft_p50 +20%", "tokens_per_second_p50 -15%"] {
        let row = line(&g.stdout, limit);
        assert!(
            row.contains("skipped") && row.contains("no baseline"),
            "{row}"
        );
        assert!(g.stderr.contains(limit), "{}", g.stderr);
    }
    // Absolute limits carry their operator, implied or written; a fixed N has no cap to reach.
    for limit in [
        "ttft_p95 <= 300ms",
        "success_rate >= 0.95",
        "outcome.repetition <= 0",
    ] {
        let row = line(&g.stdout, limit);
        assert!(row.contains("3 (fixed)"), "{row}");
    }
    assert!(
        g.stdout.contains(": 5 limits, ") && g.stdout.contains(", 2 skipped (no baseline)"),
        "{}",
        g.stdout
    );
    let check = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
skipped = [c.get('name') for c in root.findall('.//testcase') if c.find('skipped') is not None]
print(sorted(skipped), root.get('skipped'))
"#;
    assert_eq!(
        python_reads(check, &junit),
        "['tokens_per_second_p50 -15%', 'ttft_p50 +20%'] 2"
    );
    assert!(
        md.contains("| p | ttft_p50 +20% | ") && md.contains(" | skipped |"),
        "{md}"
    );
    assert!(md.contains("**Not judged:**"), "{md}");

    // In CI a gate that cannot judge its relative limits can be told to refuse: exit 2, before
    // a single run.
    let before = sim.seen().len();
    let strict = gate(&dir, &["--target", "cand-same", "--require-baseline"]).await;
    assert_eq!(strict.code, Some(2), "{}{}", strict.stdout, strict.stderr);
    assert!(
        strict
            .stderr
            .contains("--require-baseline: no baseline for the vs_baseline limits of p (tokens_per_second_p50 -15%, ttft_p50 +20%)"),
        "{}",
        strict.stderr
    );
    assert_eq!(sim.seen().len(), before, "nothing sampled");
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_ready_reports_the_cold_start() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup(&sim, "fail");
    let g = gate(
        &dir,
        &[
            "--target",
            "cand-cold",
            "--wait-ready",
            "20s",
            "--samples",
            "3",
            "--format",
            "json",
        ],
    )
    .await;
    let v: serde_json::Value =
        serde_json::from_str(&g.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", g.stdout, g.stderr));
    let cold = v["cold_start_ms"].as_f64().unwrap();
    assert!((1500.0..6000.0).contains(&cold), "cold start {cold}");
    assert!(
        g.stderr.contains("gate: waiting for cand-cold: http_error"),
        "{}",
        g.stderr
    );
    // A candidate that never answers fails the gate (exit 1), and says so in the JUnit report.
    let junit = dir.path().join("down.xml");
    let never = gate(
        &dir,
        &[
            "--target",
            "cand-down",
            "--wait-ready",
            "1500ms",
            "--junit",
            junit.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(never.code, Some(1), "{}{}", never.stdout, never.stderr);
    assert!(
        never
            .stderr
            .contains("produced no successful generation within 1.5s"),
        "{}",
        never.stderr
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testcase classname=\"gate\" name=\"wait-ready\">")
            && xml.contains("<failure"),
        "{xml}"
    );
}

/// A probe with no fixed `samples:`: the sequential gate, on a fast sim with jitter.
fn setup_sequential(sim: &Sim) -> TempDir {
    let dir = TempDir::new("gate-seq");
    let t = |name: &str, scenario: &str| target(sim, name, scenario);
    let agent = [
        "targets:\n".to_string(),
        t("prod", "healthy,ttft=20ms,jitter=8ms,itl=1ms"),
        t("same", "healthy,ttft=20ms,jitter=8ms,itl=1ms,build=b"),
        t("double", "healthy,ttft=40ms,jitter=16ms,itl=1ms"),
    ]
    .concat();
    let probe = "name: p\nprompt: q.txt\nmax_tokens: 20\nchecks: {expect: \"(?i)paris\", allow_truncation: true}\ngate:\n  slo: {outcome.repetition: \"<= 0\"}\n  vs_baseline: {ttft_p50: \"+15%\"}\n";
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", probe),
        ("prompts/q.txt", common::PROMPT),
    ]);
    dir
}

/// The JSON report of a gate, and its `ttft_p50` limit.
fn json_limit(g: &Gate) -> (serde_json::Value, serde_json::Value) {
    let v: serde_json::Value =
        serde_json::from_str(&g.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", g.stdout, g.stderr));
    let limit = v["probes"][0]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "ttft_p50")
        .unwrap()
        .clone();
    (v, limit)
}

#[tokio::test(flavor = "multi_thread")]
async fn sequential_gate_fails_a_doubled_first_token_before_the_cap() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_sequential(&sim);
    let args = ["--target", "double", "--baseline-target", "prod"];
    let g = gate(&dir, &[&args[..], &["--format", "json"]].concat()).await;
    assert_eq!(g.code, Some(1), "{}{}", g.stdout, g.stderr);
    let (v, l) = json_limit(&g);
    assert_eq!(l["verdict"], "fail", "{l}");
    assert_eq!(l["stopped"], "decided", "{l}");
    let used = l["samples_used"].as_u64().unwrap();
    assert!(used < 200, "decided only at {used}");
    // Sampling stopped at that look: no pair taken after the verdict.
    assert_eq!(v["probes"][0]["samples"].as_u64(), Some(used));
    assert_eq!(v["probes"][0]["mode"], "sequential");
    assert_eq!(v["probes"][0]["max_samples"], 200);
    assert_eq!(v["probes"][0]["stopped"], "decided");
    assert_eq!(
        sim.seen().len() as u64,
        2 * used + 2,
        "pairs plus one warm-up each"
    );
    let (lo, hi) = (
        l["ratio_ci"][0].as_f64().unwrap(),
        l["ratio_ci"][1].as_f64(),
    );
    assert!(lo > 1.15, "{l}");
    assert!(hi.is_none_or(|hi| hi >= lo), "{l}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sequential_gate_passes_the_same_replica_and_says_why_it_stopped() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_sequential(&sim);
    let (g, junit, md) =
        gate_reporting(&dir, &["--target", "same", "--baseline-target", "prod"]).await;
    assert_eq!(g.code, Some(0), "{}{}", g.stdout, g.stderr);
    let row = line(&g.stdout, "ttft_p50 +15%");
    assert!(row.contains("pass") && row.contains(" (decided)"), "{row}");
    assert!(
        g.stdout.contains("intervals: sequential: anytime-valid confidence sequences, 95% for all limits together"),
        "{}",
        g.stdout
    );
    // Plain progress lines name the limits still open, and the end.
    assert!(
        g.stderr.lines().last()
            == Some(&*format!(
                "gate: {} runs, every limit decided",
                sim.seen().len() - 2
            )),
        "{}",
        g.stderr
    );
    assert!(
        md.contains("| verdict | samples |") && md.contains(" (decided) |"),
        "{md}"
    );
    let check = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
print(all('stopped: decided' in c.find('system-out').text for c in root.findall('.//testcase')))
"#;
    assert_eq!(python_reads(check, &junit), "True");
}

#[tokio::test(flavor = "multi_thread")]
async fn sequential_gate_at_its_cap_is_inconclusive() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_sequential(&sim);
    let g = gate(
        &dir,
        &[
            "--target",
            "same",
            "--baseline-target",
            "prod",
            "--max-samples",
            "4",
            "--format",
            "json",
        ],
    )
    .await;
    // Four pairs cannot bound a median to within 15%: undecided, and `inconclusive: fail`
    // (the default) fails the gate.
    assert_eq!(g.code, Some(1), "{}{}", g.stdout, g.stderr);
    let (v, l) = json_limit(&g);
    assert_eq!(l["verdict"], "inconclusive", "{l}");
    assert_eq!(
        (&l["stopped"], &l["samples_used"]),
        (&"cap".into(), &4.into())
    );
    assert_eq!(v["probes"][0]["stopped"], "cap");
    assert_eq!(v["probes"][0]["max_samples"], 4);
    // --samples is the fixed-N gate, and cannot be mixed with --max-samples.
    let both = gate(
        &dir,
        &["--target", "same", "--samples", "3", "--max-samples", "4"],
    )
    .await;
    assert_eq!(both.code, Some(2), "{}", both.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_probe_sets_its_own_cap_or_a_fixed_n_but_not_both() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_sequential(&sim);
    let probe = dir.path().join("probes/p.yaml");
    let text = std::fs::read_to_string(&probe).unwrap();
    let with = |extra: &str| text.replace("gate:\n", &format!("gate:\n{extra}"));
    std::fs::write(&probe, with("  max_samples: 3\n")).unwrap();
    let args = [
        "--target",
        "same",
        "--baseline-target",
        "prod",
        "--format",
        "json",
    ];
    let g = gate(&dir, &args).await;
    let (v, l) = json_limit(&g);
    assert_eq!(
        (&v["probes"][0]["max_samples"], &l["stopped"]),
        (&3.into(), &"cap".into())
    );
    // A fixed N stays the fixed-N gate it always was.
    std::fs::write(&probe, with("  samples: 3\n")).unwrap();
    let (v, l) = json_limit(&gate(&dir, &args).await);
    assert_eq!(
        (&v["probes"][0]["mode"], &v["probes"][0]["samples"]),
        (&"fixed".into(), &3.into())
    );
    assert_eq!(l["stopped"], "cap");
    std::fs::write(&probe, with("  samples: 3\n  max_samples: 4\n")).unwrap();
    let both = gate(&dir, &args).await;
    assert_eq!(both.code, Some(2), "{}", both.stderr);
    assert!(
        both.stderr.contains("p.yaml:7:16: field gate.max_samples: ")
            && both.stderr.contains("max_samples")
            && both.stderr.contains("samples (a fixed number) and max_samples (the sequential gate's cap) exclude each other: keep one"),
        "{}",
        both.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_bar_names_the_limits_still_open() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_sequential(&sim);
    let (code, tty) = on_a_terminal(
        &dir,
        "--target same --baseline-target prod --max-samples 10 --warmup 0 --concurrency 1",
    )
    .await;
    // Ten pairs cannot bound a median to within 15%: the one look, at the cap, leaves it open,
    // and the bar says so (clearing what an earlier, longer line left).
    assert_eq!(code, Some(1), "{tty}");
    assert!(
        tty.contains(
            "\r[##############################] 20/20 runs; open: p ttft_p50 +15%\x1b[K\r\n"
        ),
        "{tty:?}"
    );
    assert!(tty.contains("10 (cap)"), "{tty:?}");
}

/// A sequential probe with absolute limits on the success rate and the first token's p95 and a
/// relative one on its median, against `prod`, a `dead` candidate that answers every request
/// with an HTTP 503, and `same`.
fn setup_stopping(sim: &Sim, vs_baseline: bool) -> TempDir {
    let dir = TempDir::new("gate-stop");
    let t = |name: &str, scenario: &str| target(sim, name, scenario);
    let agent = [
        "targets:\n".to_string(),
        t("prod", "healthy,ttft=20ms,jitter=8ms,itl=1ms"),
        t("same", "healthy,ttft=20ms,jitter=8ms,itl=1ms,build=b"),
        t("dead", "http-503"),
    ]
    .concat();
    let relative = if vs_baseline {
        "  vs_baseline: {ttft_p50: \"+20%\"}\n"
    } else {
        ""
    };
    let probe = format!("name: p\nprompt: q.txt\nmax_tokens: 20\nchecks: {{expect: \"(?i)paris\", allow_truncation: true}}\ngate:\n  slo: {{success_rate: \">= 0.95\", ttft_p95: 300ms}}\n{relative}");
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", &probe),
        ("prompts/q.txt", common::PROMPT),
    ]);
    dir
}

/// A limit of the first probe in a gate's JSON report.
fn limit_named<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["probes"][0]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_candidate_stops_the_gate_at_the_look_that_fails_it() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_stopping(&sim, true);
    // A second probe whose one limit a dead candidate leaves open: the first probe's failure
    // stops it too.
    dir.write(&[(
        "probes/q.yaml",
        "name: q\nprompt: q.txt\nmax_tokens: 20\ngate:\n  slo: {ttft_p95: 300ms}\n",
    )]);
    let args = ["--target", "dead", "--baseline-target", "prod"];
    let g = gate(&dir, &[&args[..], &["--format", "json"]].concat()).await;
    assert_eq!(g.code, Some(1), "{}{}", g.stdout, g.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&g.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", g.stdout, g.stderr));
    // Ten failures of ten bound the success rate far below 0.95 at the first look: both sides
    // stop there, not at the cap of 200 pairs.
    let p = &v["probes"][0];
    assert_eq!(p["max_samples"], 200);
    assert_eq!(p["samples"], 10, "{p}");
    assert_eq!(p["candidate"].as_array().unwrap().len(), 10);
    assert_eq!(p["baseline"].as_array().unwrap().len(), 10);
    assert_eq!(p["stopped"], "early");
    assert_eq!(
        v["stopped_by"],
        serde_json::json!({"probe": "p", "name": "success_rate", "limit": ">= 0.95", "samples": 10})
    );
    let rate = limit_named(&v, "success_rate");
    assert_eq!(
        (&rate["verdict"], &rate["stopped"]),
        (&"fail".into(), &"decided".into())
    );
    // The limits it left open say they were cut short, and stay undecided.
    let median = limit_named(&v, "ttft_p50");
    assert_eq!(
        (&median["verdict"], &median["stopped"]),
        (&"inconclusive".into(), &"early".into())
    );
    let q = &v["probes"][1];
    assert_eq!(
        (&q["probe"], &q["samples"]),
        (&"q".into(), &10.into()),
        "{q}"
    );
    assert_eq!(
        (&q["stopped"], &q["limits"][0]["stopped"]),
        (&"early".into(), &"early".into())
    );
    // Every request the sim saw: ten pairs and one warm-up a side, for each probe.
    assert_eq!(sim.seen().len(), 44);
    assert!(
        g.stderr.lines().any(|l| l == "gate: 40 runs, stopped early: p success_rate >= 0.95 failed after 10 samples per side (--keep-sampling samples on)"),
        "{}",
        g.stderr
    );

    // The table says so too, with the samples each limit stopped at.
    let t = gate(&dir, &args).await;
    assert_eq!(t.code, Some(1), "{}{}", t.stdout, t.stderr);
    assert!(
        t.stdout.contains("\nsampling stopped early: p success_rate >= 0.95 failed after 10 samples per side (--keep-sampling samples on for a complete report)\n"),
        "{}",
        t.stdout
    );
    assert!(
        line(&t.stdout, "ttft_p50 +20%").contains("10 (early)"),
        "{}",
        t.stdout
    );

    // --keep-sampling goes on: the relative limit never gets a first token to judge, so the
    // gate samples to its cap.
    let before = sim.seen().len();
    let k = gate(
        &dir,
        &[
            &args[..],
            &["--keep-sampling", "--max-samples", "40", "--format", "json"],
        ]
        .concat(),
    )
    .await;
    assert_eq!(k.code, Some(1), "{}{}", k.stdout, k.stderr);
    let v: serde_json::Value = serde_json::from_str(&k.stdout).unwrap();
    let p = &v["probes"][0];
    assert_eq!(
        (&p["samples"], &p["stopped"]),
        (&40.into(), &"cap".into()),
        "{p}"
    );
    assert_eq!(p["candidate"].as_array().unwrap().len(), 40);
    assert_eq!(p["baseline"].as_array().unwrap().len(), 40);
    assert!(v["stopped_by"].is_null(), "{v}");
    // The failure keeps the look that decided it.
    let rate = limit_named(&v, "success_rate");
    assert_eq!(
        (&rate["verdict"], &rate["samples_used"]),
        (&"fail".into(), &10.into())
    );
    assert_eq!(limit_named(&v, "ttft_p50")["stopped"], "cap");
    assert_eq!(v["probes"][1]["samples"], 40);
    assert_eq!(sim.seen().len() - before, 2 * 82);
}

/// The numbers in `gate: p: …; least samples per side to pass: LIMIT needs N, …`.
fn need_of(stderr: &str, limit: &str) -> u32 {
    let needle = format!("{limit} needs ");
    stderr
        .lines()
        .filter(|l| l.contains("least samples per side to pass: "))
        .find_map(|l| l.split(&needle).nth(1))
        .and_then(|rest| rest.split([',', ' ']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no need for {limit} in {stderr}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_samples_each_limit_needs_are_said_first_and_hold() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = setup_stopping(&sim, false);
    let g = gate(&dir, &["--target", "same", "--format", "json"]).await;
    assert_eq!(g.code, Some(0), "{}{}", g.stdout, g.stderr);
    let (rate, p95) = (
        need_of(&g.stderr, "success_rate >= 0.95"),
        need_of(&g.stderr, "ttft_p95 <= 300ms"),
    );
    // Said before any run: the first line of progress.
    assert!(
        g.stderr.lines().next().is_some_and(|l| l.starts_with(
            "gate: p: sequential, at most 200 per side; least samples per side to pass: "
        )),
        "{}",
        g.stderr
    );
    // A healthy replica is the best data a limit can see: each passes at exactly its need.
    let v: serde_json::Value = serde_json::from_str(&g.stdout).unwrap();
    for (name, need) in [("success_rate", rate), ("ttft_p95", p95)] {
        let l = limit_named(&v, name);
        assert_eq!(l["verdict"], "pass", "{l}");
        assert_eq!(l["samples_used"], need, "{name}: said {need}, {l}");
    }
    assert!(!g.stderr.contains("warning"), "{}", g.stderr);

    // `check` says the same before a gate is ever run.
    let mut cmd = common::bin();
    cmd.arg("check")
        .arg("-c")
        .arg(dir.path().join("llm-canary.yaml"));
    let out = common::output(cmd).await;
    let check = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{check}");
    assert!(
        check.contains(&format!("\n  gate (every gated probe against a baseline target): p: sequential, at most 200 per side; least samples per side to pass: success_rate >= 0.95 needs {rate}, ttft_p95 <= 300ms needs {p95}\n")),
        "{check}"
    );

    // A cap at the look before the need: a warning names the limit, which cannot pass.
    let cap = (rate - 10).to_string();
    let short = gate(
        &dir,
        &[
            "--target",
            "same",
            "--max-samples",
            &cap,
            "--format",
            "json",
        ],
    )
    .await;
    assert_eq!(short.code, Some(1), "{}{}", short.stdout, short.stderr);
    let warning = short
        .stderr
        .lines()
        .find(|l| l.starts_with("gate: warning: "))
        .unwrap_or_else(|| panic!("no warning in {}", short.stderr));
    assert!(
        warning.starts_with(&format!(
            "gate: warning: p: at most {cap} samples per side are too few for "
        )) && warning.contains(&format!("success_rate >= 0.95 (needs {rate})"))
            && warning.ends_with(
                " can only fail or end inconclusive, so this gate cannot pass (inconclusive: fail)"
            ),
        "{warning}"
    );
    let v: serde_json::Value = serde_json::from_str(&short.stdout).unwrap();
    let l = limit_named(&v, "success_rate");
    assert_eq!(
        (&l["verdict"], &l["stopped"]),
        (&"inconclusive".into(), &"cap".into()),
        "{l}"
    );
    assert!(
        limit_named(&v, "success_rate")["candidate"] == 1.0,
        "every run succeeded"
    );
}
