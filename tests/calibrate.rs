//! `llm-canary calibrate` against the sim, which reports what it served in vLLM's names on its
//! own /metrics and in llama.cpp's per-response timings: honest figures agree, figures skewed on
//! purpose are caught.

mod common;

use std::process::Command;

use llm_canary::sim::Sim;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn calibrate(cfg: &str, target: &str, extra: &[&str]) -> Run {
    let mut args: Vec<String> = ["calibrate", "-c", cfg, "--target", target, "--samples", "6"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

// A first token 300 ms out leaves the 5% tolerance 15 ms of room for a busy test machine.
const TARGETS: [(&str, &str, &str); 4] = [
    ("vllm", "healthy,ttft=300ms", "server: vllm"),
    ("vllm-skewed", "healthy,ttft=300ms,skew=0.5", "server: vllm"),
    ("llama", "llama-cpp,ttft=300ms", "server: llama-cpp"),
    ("generic", "healthy", ""),
];

#[tokio::test(flavor = "multi_thread")]
async fn honest_figures_agree_and_skewed_ones_do_not() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, _) = common::config(&sim, &TARGETS, common::PROBE);
    let cfg = dir.path().join("llm-canary.yaml").display().to_string();

    let r = calibrate(&cfg, "vllm", &[]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("histogram deltas from http://"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("agree: after the"), "{}", r.stdout);
    for figure in ["ttft", "e2e"] {
        assert!(
            r.stdout.lines().any(|l| l.starts_with(figure)),
            "{figure} row missing:\n{}",
            r.stdout
        );
    }

    // The server says its first token took half of what a client waited.
    let r = calibrate(&cfg, "vllm-skewed", &["--format", "json"]).await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["agree"], false);
    let ttft = v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["figure"] == "ttft")
        .unwrap();
    let ratio = ttft["ratio"].as_f64().unwrap();
    assert!((1.8..2.2).contains(&ratio), "ours / theirs = {ratio}");
    assert!(v["verdict"].as_str().unwrap().starts_with("disagree"));

    // llama.cpp reports per response: prompt_ms and predicted_per_second.
    let r = calibrate(&cfg, "llama", &["--format", "json"]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["source"], "per-response timings");
    let figures: Vec<&str> = v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["figure"].as_str().unwrap())
        .collect();
    assert_eq!(figures, ["ttft", "tpot"]);

    // A generic server has no figures of its own to compare: a usage error, said plainly.
    let r = calibrate(&cfg, "generic", &[]).await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("set `server:`"), "{}", r.stderr);
    let r = calibrate(&cfg, "nope", &[]).await;
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr
            .contains("known: vllm, vllm-skewed, llama, generic"),
        "{}",
        r.stderr
    );
}
