//! `llm-canary calibrate` against the sim, which reports what it served on its own /metrics (in
//! vLLM's, SGLang's or llama.cpp's names) and in llama.cpp's per-response timings: honest figures
//! agree, figures skewed on purpose are caught, and samples the server's figures cannot be ours
//! for (other traffic, another replica's metrics) are left out and said so.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::Sim;
use serde_json::Value;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }

    /// The table row of `figure` whose server's figure is `from`.
    fn row(&self, figure: &str, from: &str) -> Option<&str> {
        self.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{figure} ")) && l.ends_with(from))
    }

    /// The rows a histogram server (vLLM, SGLang) gives, under its own names: TTFT, end to end,
    /// the decode pace, and queue time (the server's alone).
    fn has_histogram_rows(&self, prefix: &str, queue: &str) {
        for (figure, from) in [
            ("ttft", "time_to_first_token_seconds"),
            ("e2e", "e2e_request_latency_seconds"),
            ("tpot", "inter_token_latency_seconds"),
        ] {
            let from = format!("{prefix}:{from}");
            assert!(
                self.row(figure, &from).is_some(),
                "{figure} row from {from} missing:\n{}",
                self.stdout
            );
        }
        assert!(
            self.stdout
                .lines()
                .any(|l| l.starts_with("queue ") && l.contains(queue)),
            "queue row from {queue} missing:\n{}",
            self.stdout
        );
    }
}

async fn calibrate(cfg: &str, target: &str, extra: &[&str]) -> Run {
    let mut args: Vec<String> = ["calibrate", "-c", cfg, "--target", target]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !extra.contains(&"--samples") {
        args.extend(["--samples".to_string(), "6".to_string()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut cmd = common::bin();
    cmd.args(args);
    let out = common::output(cmd).await;
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    println!("{}{}", run.stdout, run.stderr);
    run
}

// A first token 300 ms out leaves the 5% tolerance 15 ms of room for a busy test machine.
const TARGETS: [(&str, &str, &str); 7] = [
    ("vllm", "healthy,ttft=300ms", "server: vllm"),
    ("vllm-skewed", "healthy,ttft=300ms,skew=0.5", "server: vllm"),
    (
        "sglang",
        "healthy,ttft=300ms,metrics=sglang",
        "server: sglang",
    ),
    ("llama", "llama-cpp,ttft=300ms", "server: llama-cpp"),
    (
        "llama-no-metrics",
        "llama-cpp,ttft=300ms,metrics=none",
        "server: llama-cpp",
    ),
    ("generic", "healthy", ""),
    ("azure", "healthy", "api: azure-openai"),
];

async fn setup() -> (Sim, common::TempDir, String) {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, _) = common::config(&sim, &TARGETS, common::PROBE);
    let cfg = dir.path().join("llm-canary.yaml").display().to_string();
    (sim, dir, cfg)
}

/// The JSON comparisons as (figure, server's figure) pairs.
fn figures(v: &Value) -> Vec<(String, String)> {
    v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["figure"].as_str().unwrap().to_string(),
                c["server_figure"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn comparison<'a>(v: &'a Value, figure: &str, from: &str) -> &'a Value {
    v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["figure"] == figure && c["server_figure"] == from)
        .unwrap_or_else(|| panic!("no {figure} row from {from}: {v:#}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn honest_figures_agree_and_skewed_ones_do_not() {
    let (_sim, _dir, cfg) = setup().await;

    let r = calibrate(&cfg, "vllm", &[]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("histogram deltas from http://"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("median (nearest rank)"), "{}", r.stdout);
    assert!(r.stdout.contains("agree: after the"), "{}", r.stdout);
    r.has_histogram_rows("vllm", "vllm:request_queue_time_seconds");

    let r = calibrate(&cfg, "vllm", &["--format", "json"]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["statistic"], "median (nearest rank)");
    // The sim's inter-token histogram holds every gap it wrote: its mean is our decode pace.
    let tpot = comparison(&v, "tpot", "vllm:inter_token_latency_seconds");
    let ratio = tpot["ratio"].as_f64().unwrap();
    assert!(
        (0.95..1.05).contains(&ratio),
        "tpot ours / theirs = {ratio}"
    );
    assert!(
        (tpot["theirs_ms"].as_f64().unwrap() - 10.0).abs() < 2.0,
        "{tpot}"
    );
    let queue = &v["server_only"][0];
    assert_eq!(queue["figure"], "queue");
    assert_eq!(queue["server_figure"], "vllm:request_queue_time_seconds");
    assert_eq!(queue["samples"], 6);
    assert_eq!(queue["theirs_ms"], 0.0);
    assert_eq!(v["shared_samples"], 0);
    assert_eq!(v["uncounted_samples"], 0);

    // The server says its first token took half of what a client waited.
    let r = calibrate(&cfg, "vllm-skewed", &["--format", "json"]).await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["agree"], false);
    let ratio = comparison(&v, "ttft", "vllm:time_to_first_token_seconds")["ratio"]
        .as_f64()
        .unwrap();
    assert!((1.8..2.2).contains(&ratio), "ours / theirs = {ratio}");
    assert!(v["verdict"].as_str().unwrap().starts_with("disagree"));

    // A generic server has no figures of its own to compare: a usage error, said plainly.
    let r = calibrate(&cfg, "generic", &[]).await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("set `server:`"), "{}", r.stderr);
    // A hosted API has none either, and says so rather than asking for a server kind.
    let r = calibrate(&cfg, "azure", &[]).await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("hosted providers publish no server metrics"),
        "{}",
        r.stderr
    );
    let r = calibrate(&cfg, "nope", &[]).await;
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr
            .contains("known: vllm, vllm-skewed, sglang, llama, llama-no-metrics, generic, azure"),
        "{}",
        r.stderr
    );
}

/// SGLang's names (`sglang:`, its own queue histogram and request counter) are read as vLLM's are.
#[tokio::test(flavor = "multi_thread")]
async fn sglang_names_are_read() {
    let (_sim, _dir, cfg) = setup().await;
    let r = calibrate(&cfg, "sglang", &[]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("/metrics; round trip"), "{}", r.stdout);
    r.has_histogram_rows("sglang", "sglang:queue_time_seconds");
    // Its request counter was found: no stand-in was needed.
    assert!(!r.stdout.contains("no request counter"), "{}", r.stdout);
}

/// llama.cpp: each response's timings, and its `--metrics` counters beside them; a server
/// started without `--metrics` still gives the timings.
#[tokio::test(flavor = "multi_thread")]
async fn llama_cpp_timings_and_counters() {
    let (_sim, _dir, cfg) = setup().await;
    let r = calibrate(&cfg, "llama", &["--format", "json"]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert!(
        v["source"]
            .as_str()
            .unwrap()
            .starts_with("per-response timings and counter deltas from http://"),
        "{v:#}"
    );
    let want = [
        ("ttft", "timings.prompt_ms"),
        ("ttft", "llamacpp:prompt_seconds_total"),
        ("tpot", "timings.predicted_per_second"),
        ("tpot", "llamacpp:tokens_predicted_seconds_total"),
    ];
    assert_eq!(
        figures(&v),
        want.map(|(a, b)| (a.to_string(), b.to_string()))
    );
    for (figure, from) in want {
        let c = comparison(&v, figure, from);
        assert_eq!(c["samples"], 6, "{c}");
        let ratio = c["ratio"].as_f64().unwrap();
        assert!(
            (0.95..1.05).contains(&ratio),
            "{figure} from {from}: {ratio}"
        );
    }
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("llama.cpp counts no requests"),
        "{v:#}"
    );

    let r = calibrate(&cfg, "llama-no-metrics", &[]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("answered HTTP 501"), "{}", r.stdout);
    assert!(r.stdout.contains("--metrics"), "{}", r.stdout);
    assert!(r.row("ttft", "timings.prompt_ms").is_some(), "{}", r.stdout);
    assert!(!r.stdout.contains("llamacpp:prompt_seconds_total"));
}

/// Other traffic on the server while calibrating: the server's deltas are not ours, and the
/// output says so rather than mixing them in or dropping them silently.
#[tokio::test(flavor = "multi_thread")]
async fn other_traffic_is_left_out_and_said_so() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (dir, cfg) = common::config(&sim, &TARGETS, common::PROBE);
    let path = dir.path().join("llm-canary.yaml").display().to_string();
    // Two other clients, back to back, for as long as calibrate runs.
    let stop = Arc::new(AtomicBool::new(false));
    let mut others = Vec::new();
    for _ in 0..2 {
        let (stop, cfg) = (stop.clone(), cfg.clone());
        others.push(tokio::spawn(async move {
            let runner = Runner::new(1);
            let (probe, target) = (&cfg.probes[0], cfg.target("vllm").unwrap());
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                runner.run_one(probe, target).await;
                n += 1;
            }
            n
        }));
    }
    let r = calibrate(&path, "vllm", &[]).await;
    stop.store(true, Ordering::Relaxed);
    let mut served = 0;
    for o in others {
        served += o.await.unwrap();
    }
    assert!(served >= 6, "the other clients sent only {served} requests");
    assert!(
        r.stdout
            .contains("sample(s) left out: the server served other requests meanwhile"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("this is a shared server"), "{}", r.stdout);
    // Every sample overlapped another request: nothing is left to compare.
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("no sample gave both sides' time to first token"),
        "{}",
        r.stdout
    );
}

/// Metrics that never count our requests (another replica's, behind a load balancer): each
/// sample is left out as uncounted, in so many words.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_that_never_count_ours_are_said_so() {
    let (_sim, _dir, cfg) = setup().await;
    let other = Sim::start("127.0.0.1:0").await.unwrap();
    // The other replica has served something, so its histograms exist.
    let runner = Runner::new(1);
    let (_d, other_cfg) = common::config(&other, &TARGETS, common::PROBE);
    runner
        .run_one(&other_cfg.probes[0], other_cfg.target("vllm").unwrap())
        .await;
    let url = format!("http://{}/metrics", other.addr());
    let r = calibrate(
        &cfg,
        "vllm",
        &["--samples", "3", "--metrics-url", &url, "--format", "json"],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["uncounted_samples"], 3);
    let notes = v["notes"].to_string();
    assert!(
        notes.contains(
            "3 of 3 sample(s) left out: the server's `vllm:request_success_total` did not move"
        ),
        "{notes}"
    );
    assert!(notes.contains("another replica"), "{notes}");
}

/// The core returns data and tells a callback how far it has got: the round trip first, then
/// each sample in turn; the command decides whether anyone sees it.
#[tokio::test(flavor = "multi_thread")]
async fn progress_is_reported_through_a_callback() {
    use llm_canary::testing::calibrate::{calibrate, Figure, Options, Progress};
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = common::config(&sim, &TARGETS, common::PROBE);
    let opts = Options {
        target: "llama".into(),
        probe: None,
        samples: 3,
        tolerance: 0.05,
        metrics_url: None,
    };
    let mut seen = Vec::new();
    let c = calibrate(&cfg, &opts, |p| seen.push(p)).await.unwrap();
    assert!(
        matches!(seen[0], Progress::RoundTrip(ms) if ms == c.round_trip_ms),
        "{seen:?}"
    );
    let samples: Vec<(u32, u32)> = seen[1..]
        .iter()
        .map(|p| match *p {
            Progress::Sample { done, of } => (done, of),
            other => panic!("{other:?} after the round trip"),
        })
        .collect();
    assert_eq!(samples, [(1, 3), (2, 3), (3, 3)]);
    assert_eq!(c.comparisons[0].figure, Figure::Ttft);
}
