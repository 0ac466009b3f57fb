//! The daemon (`llm-canary run`) as a real process against the sim, a real Pushgateway and a
//! real Prometheus: schedules, pushes, the outage, reloads and shutdown.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, eventually, get, sample, signal, Service};
use common::TempDir;
use llm_canary::testing::sim::{http, Sim};

const PROBE: &str = "name: p\nschedule: \"*/2 * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ncache_bust: auto\ntimeouts: {ttft: 5s, stall: 5s, total: 20s}\nchecks: {expect: \"(?i)paris\"}\n";

fn agent_yaml(port: u16, gateway: &str, sim: &Sim, scenario: &str, grace: &str) -> String {
    format!(
        "agent:\n  name: canary-test\n  labels: {{region: test}}\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n  shutdown_grace: {grace}\n\
         push: {{url: \"{gateway}\", job: llm_canary, min_interval: 300ms}}\n\
         targets:\n  - {{name: sim-a, base_url: \"{}\", model: m-a, server: vllm, labels: {{model_version: \"7\", cluster: c1}}}}\n",
        sim.base_url(scenario)
    )
}

fn start(yaml: String, probe: &str, port: u16) -> Daemon {
    Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", probe),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    )
}

impl Daemon {
    fn results(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("results.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    async fn metrics(&self) -> String {
        get(&self.url("/metrics")).await
    }

    /// SIGTERM, then the exit code (it must exit by itself).
    async fn terminate(&mut self) -> Option<i32> {
        signal(self.child.id(), "TERM");
        let child = &mut self.child;
        eventually(
            "the daemon to exit after SIGTERM",
            Duration::from_secs(30),
            || {
                let r = child.try_wait().unwrap();
                async move { r }
            },
        )
        .await
        .code()
    }
}

async fn gateway_runs(gw: &Service) -> f64 {
    let text = get(&format!("{}/metrics", gw.url())).await;
    text.lines()
        .filter(|l| l.starts_with("llm_canary_probe_runs_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_push_and_prometheus_scrapes_the_gateway() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let prom = services::prometheus(&[format!("127.0.0.1:{}", gw.port)]).await;
    let port = services::free_port();
    let mut d = start(
        agent_yaml(port, &gw.url(), &sim, "healthy", "10s"),
        PROBE,
        port,
    );

    // A few periods of a 2-second schedule reach the gateway.
    eventually(
        "three runs on the gateway",
        Duration::from_secs(30),
        || async { (gateway_runs(&gw).await >= 3.0).then_some(()) },
    )
    .await;
    let push_time = |t: String| {
        sample(
            &t,
            "push_time_seconds",
            &["instance=\"canary-test\"", "job=\"llm_canary\""],
        )
    };
    let t1 = push_time(get(&format!("{}/metrics", gw.url())).await).expect("push_time_seconds");
    eventually(
        "push_time_seconds to advance",
        Duration::from_secs(20),
        || async { (push_time(get(&format!("{}/metrics", gw.url())).await)? > t1).then_some(()) },
    )
    .await;

    // The agent's own /metrics and /healthz.
    let own = d.metrics().await;
    assert!(
        sample(&own, "llm_canary_build_info", &["version="]).is_some(),
        "{own}"
    );
    assert_eq!(
        sample(&own, "llm_canary_config_last_reload_successful", &[]),
        Some(1.0)
    );
    let health: serde_json::Value =
        serde_json::from_str(&get(&format!("http://127.0.0.1:{port}/healthz")).await).unwrap();
    assert_eq!(health["status"], "ok");
    assert!(health["push"]["last_success"].is_string(), "{health}");

    // Prometheus scraping the gateway with honor_labels keeps the agent's instance.
    let q = format!(
        "{}/api/v1/query?query=llm_canary_ttft_seconds_bucket",
        prom.url()
    );
    let series = eventually(
        "Prometheus to hold the TTFT buckets",
        Duration::from_secs(30),
        || {
            let q = q.clone();
            async move {
                let v: serde_json::Value = serde_json::from_str(&get(&q).await).ok()?;
                let r = v["data"]["result"].as_array()?.clone();
                (!r.is_empty()).then_some(r)
            }
        },
    )
    .await;
    let m = &series[0]["metric"];
    assert_eq!(
        (
            m["instance"].as_str(),
            m["job"].as_str(),
            m["probe"].as_str()
        ),
        (Some("canary-test"), Some("llm_canary"), Some("p"))
    );
    assert_eq!(
        (
            m["model_version"].as_str(),
            m["region"].as_str(),
            m["model"].as_str()
        ),
        (Some("7"), Some("test"), Some("m-a"))
    );

    // Shut down: the last push carries every run in the results log.
    assert_eq!(d.terminate().await, Some(0));
    let results = d.results();
    let text = get(&format!("{}/metrics", gw.url())).await;
    let labels = [
        "probe=\"p\"",
        "target=\"sim-a\"",
        "model=\"m-a\"",
        "cluster=\"c1\"",
        "model_version=\"7\"",
        "region=\"test\"",
        "instance=\"canary-test\"",
    ];
    let ok = sample(
        &text,
        "llm_canary_probe_runs_total",
        &[&labels[..], &["outcome=\"ok\""]].concat(),
    )
    .unwrap();
    assert_eq!(
        ok as usize,
        results.len(),
        "runs on the gateway = lines in the results log"
    );
    let measured = results
        .iter()
        .filter(|r| r["warmup"] == false && r["ttft_ms"].is_number())
        .count();
    assert_eq!(
        sample(&text, "llm_canary_ttft_seconds_count", &labels).unwrap() as usize,
        measured,
        "warm-up runs stay out of the histogram"
    );
    assert_eq!(
        results.iter().filter(|r| r["warmup"] == true).count(),
        1,
        "one cold start"
    );
    assert!(sample(&text, "llm_canary_warmup_ttft_seconds", &labels).unwrap() > 0.0);
    assert!(sample(
        &text,
        "llm_canary_ttft_seconds_bucket",
        &[&labels[..], &["le=\"0.05\""]].concat()
    )
    .is_some());
    assert_eq!(
        sample(&text, "llm_canary_probe_success", &labels),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_outage_loses_no_run_and_delays_no_probe() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw_port = services::free_port();
    let gw = services::pushgateway_on(gw_port).await;
    let port = services::free_port();
    let mut d = start(
        agent_yaml(
            port,
            &format!("http://127.0.0.1:{gw_port}"),
            &sim,
            "healthy",
            "10s",
        ),
        PROBE,
        port,
    );
    eventually("a first push", Duration::from_secs(30), || async {
        (gateway_runs(&gw).await >= 1.0).then_some(())
    })
    .await;

    drop(gw); // the outage
    let before = d.results().len();
    eventually(
        "three runs during the outage",
        Duration::from_secs(30),
        || {
            let n = d.results().len();
            async move { (n >= before + 3).then_some(()) }
        },
    )
    .await;
    let health: serde_json::Value =
        serde_json::from_str(&get(&format!("http://127.0.0.1:{port}/healthz")).await).unwrap();
    assert!(
        health["push"]["last_error"].is_string(),
        "the failed pushes show: {health}"
    );
    assert!(sample(&d.metrics().await, "llm_canary_push_failures_total", &[]).unwrap() >= 1.0);

    let gw = services::pushgateway_on(gw_port).await; // recovery, empty
    let (runs, logged) = eventually(
        "the first push after recovery",
        Duration::from_secs(90),
        || async {
            let runs = gateway_runs(&gw).await;
            (runs > 0.0).then(|| (runs, d.results().len()))
        },
    )
    .await;
    assert!(
        runs as usize >= before + 3,
        "the first push after recovery carries the outage's runs: {runs} < {}",
        before + 3
    );
    assert!(runs as usize <= logged);

    // No missed schedule: consecutive runs stay two seconds apart throughout.
    let starts: Vec<jiff::Timestamp> = d
        .results()
        .iter()
        .map(|r| r["started_at"].as_str().unwrap().parse().unwrap())
        .collect();
    for w in starts.windows(2) {
        let gap = (w[1] - w[0]).get_milliseconds() + (w[1] - w[0]).get_seconds() * 1000;
        assert!(
            (1500..=2600).contains(&gap),
            "runs {} and {} are {gap} ms apart",
            w[0],
            w[1]
        );
    }
    assert_eq!(d.terminate().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_a_changed_probe_and_refuses_a_broken_one() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let port = services::free_port();
    let mut d = start(
        agent_yaml(port, &gw.url(), &sim, "healthy", "10s"),
        PROBE,
        port,
    );
    let runs_of = |text: &str, probe: &str| {
        sample(
            text,
            "llm_canary_probe_runs_total",
            &[&format!("probe=\"{probe}\""), "outcome=\"ok\""],
        )
    };
    let before = eventually("two runs of p", Duration::from_secs(30), || async {
        let n = runs_of(&d.metrics().await, "p")?;
        (n >= 2.0).then_some(n)
    })
    .await;

    // A second probe appears; p keeps its series (no reset).
    d.dir
        .write(&[("probes/q.yaml", &PROBE.replace("name: p", "name: q"))]);
    signal(d.child.id(), "HUP");
    eventually(
        "probe q to run after SIGHUP",
        Duration::from_secs(30),
        || async { (runs_of(&d.metrics().await, "q")? >= 1.0).then_some(()) },
    )
    .await;
    assert!(
        runs_of(&d.metrics().await, "p").unwrap() >= before,
        "p's counter was not reset"
    );

    // Removing q retires its series.
    std::fs::remove_file(d.dir.path().join("probes/q.yaml")).unwrap();
    let reply = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    assert_eq!(
        runs_of(&d.metrics().await, "q"),
        None,
        "q's series are gone"
    );

    // A broken file is refused; the old config keeps running.
    d.dir.write(&[(
        "probes/p.yaml",
        "name: p\nschedule: \"*/61 * * * *\"\nprompt: q.txt\n",
    )]);
    signal(d.child.id(), "HUP");
    eventually("the refusal to show", Duration::from_secs(10), || async {
        (sample(
            &d.metrics().await,
            "llm_canary_config_last_reload_successful",
            &[],
        )? == 0.0)
            .then_some(())
    })
    .await;
    let reply = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 400);
    assert!(reply
        .text()
        .await
        .unwrap()
        .contains("invalid cron expression"));
    let n = runs_of(&d.metrics().await, "p").unwrap();
    eventually(
        "p to keep running on the old config",
        Duration::from_secs(10),
        || async { (runs_of(&d.metrics().await, "p")? > n).then_some(()) },
    )
    .await;
    assert_eq!(d.terminate().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_run_in_flight_finish_or_records_it_aborted() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    // Each run takes about 3 s (30 tokens, 100 ms apart); one fires every 2 s, so a second run
    // of the pair is skipped while the first is in flight.
    let slow = "slow-decode,itl=100ms";
    for (grace, finished) in [("10s", true), ("300ms", false)] {
        let port = services::free_port();
        let mut d = start(agent_yaml(port, &gw.url(), &sim, slow, grace), PROBE, port);
        eventually("a run in flight", Duration::from_secs(30), || async {
            (sample(&d.metrics().await, "llm_canary_runs_in_flight", &[])? >= 1.0).then_some(())
        })
        .await;
        if finished {
            // The next fire time comes while the run is still in flight: skipped, not stacked.
            eventually("a skipped run", Duration::from_secs(15), || async {
                (sample(
                    &d.metrics().await,
                    "llm_canary_skipped_runs_total",
                    &["probe=\"p\""],
                )? >= 1.0)
                    .then_some(())
            })
            .await;
            assert!(sample(&d.metrics().await, "llm_canary_runs_in_flight", &[]).unwrap() <= 1.0);
        }
        let logged = d.results().len();
        assert_eq!(d.terminate().await, Some(0));
        let text = get(&format!("{}/metrics", gw.url())).await;
        let aborted =
            sample(&text, "llm_canary_aborted_runs_total", &["probe=\"p\""]).unwrap_or(0.0);
        if finished {
            assert!(
                d.results().len() > logged,
                "the run in flight finished and was logged"
            );
            assert_eq!(aborted, 0.0);
        } else {
            assert_eq!(aborted, 1.0, "{text}");
        }
    }
}

async fn once_push(cfg: std::path::PathBuf) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .arg("once")
            .arg("-c")
            .arg(cfg)
            .arg("--push")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_push_uses_the_daemons_grouping() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let dir = TempDir::new("oncepush");
    let yaml = agent_yaml(services::free_port(), &gw.url(), &sim, "healthy", "1s");
    dir.write(&[
        ("llm-canary.yaml", &yaml),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let out = once_push(dir.path().join("llm-canary.yaml")).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = get(&format!("{}/metrics", gw.url())).await;
    assert_eq!(
        sample(
            &text,
            "llm_canary_probe_runs_total",
            &[
                "instance=\"canary-test\"",
                "job=\"llm_canary\"",
                "outcome=\"ok\""
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "llm_canary_probe_success", &["probe=\"p\""]),
        Some(1.0)
    );

    // Without a gateway to push to, the run still prints its table and says why it failed.
    drop(gw);
    let out = once_push(dir.path().join("llm-canary.yaml")).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 of 1 probe runs ok"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("push to http://127.0.0.1:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A stand-in gateway that records each request's method, path and Authorization header.
async fn recording_gateway() -> (
    u16,
    std::sync::Arc<std::sync::Mutex<Vec<(String, String, Option<String>)>>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Ok(Some(req)) =
                    http::read_request(&mut sock, &mut buf, Duration::from_secs(5)).await
                {
                    log.lock().unwrap().push((
                        req.method.clone(),
                        req.path.clone(),
                        req.header("authorization").map(str::to_string),
                    ));
                    let _ = http::respond(&mut sock, 200, "text/plain", &[], b"").await;
                }
            });
        }
    });
    (port, seen)
}

#[test]
fn push_auth_is_sent_and_never_shown() {
    // Set before the runtime starts a thread: changing the environment races its readers.
    common::with_env(
        &[
            ("LLM_CANARY_TEST_PUSH_PASSWORD", "pw-s3cret"),
            ("LLM_CANARY_TEST_PUSH_TOKEN", "tok-s3cret"),
        ],
        push_auth_is_sent_and_never_shown_body(),
    );
}

async fn push_auth_is_sent_and_never_shown_body() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (port, seen) = recording_gateway().await;
    for (auth, want) in [
        (
            "username: canary, password_env: LLM_CANARY_TEST_PUSH_PASSWORD",
            "Basic Y2FuYXJ5OnB3LXMzY3JldA==",
        ),
        (
            "bearer_token_env: LLM_CANARY_TEST_PUSH_TOKEN",
            "Bearer tok-s3cret",
        ),
    ] {
        let dir = TempDir::new("pushauth");
        let yaml = agent_yaml(
            services::free_port(),
            &format!("http://127.0.0.1:{port}"),
            &sim,
            "healthy",
            "1s",
        )
        .replace(
            "job: llm_canary, min_interval: 300ms}",
            &format!("job: \"team/llm\", min_interval: 300ms, {auth}}}"),
        );
        dir.write(&[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ]);
        let out = once_push(dir.path().join("llm-canary.yaml")).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("s3cret"), "a push secret leaked: {text}");
        let (method, path, authz) = seen.lock().unwrap().pop().unwrap();
        assert_eq!(method, "PUT");
        // A job with a slash travels in @base64 form.
        assert_eq!(path, "/metrics/job@base64/dGVhbS9sbG0/instance/canary-test");
        assert_eq!(authz.as_deref(), Some(want));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_on_shutdown_removes_the_group() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let port = services::free_port();
    let yaml = agent_yaml(port, &gw.url(), &sim, "healthy", "5s").replace(
        "min_interval: 300ms}",
        "min_interval: 300ms, delete_on_shutdown: true}",
    );
    let mut d = start(yaml, PROBE, port);
    eventually("a first push", Duration::from_secs(30), || async {
        (gateway_runs(&gw).await >= 1.0).then_some(())
    })
    .await;
    assert_eq!(d.terminate().await, Some(0));
    let text = get(&format!("{}/metrics", gw.url())).await;
    assert!(
        !text.contains("instance=\"canary-test\""),
        "the group is gone from the gateway"
    );
}

/// The records of `target` in the results log, in the order they were written.
fn runs_of(d: &Daemon, target: &str) -> Vec<serde_json::Value> {
    d.results()
        .into_iter()
        .filter(|r| r["target"] == target)
        .collect()
}

fn started(r: &serde_json::Value) -> f64 {
    let t: jiff::Timestamp = r["started_at"].as_str().unwrap().parse().unwrap();
    t.as_millisecond() as f64 / 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_is_confirmed_before_the_next_scheduled_one_and_a_blip_is_not_a_failure() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    // `down` fails every request; `blip` every second one, so a failed run's confirmation
    // succeeds.
    let yaml = format!(
        "agent:\n  name: canary-test\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n\
         targets:\n  - {{name: down, base_url: \"{}\", model: m}}\n  - {{name: blip, base_url: \"{}\", model: m}}\n",
        sim.base_url("http-500"),
        sim.base_url("http-500,every=2"),
    );
    let probe = "name: p\nschedule: \"*/5 * * * * *\"\nprompt: q.txt\nmax_tokens: 32\nconfirm: {runs: 2, after: 1s}\nchecks: {expect: \"(?i)paris\"}\n";
    let d = start(yaml, probe, port);

    let down = eventually(
        "a scheduled run of `down` and its two confirmations",
        Duration::from_secs(40),
        || async {
            let runs = runs_of(&d, "down");
            (runs.len() >= 3).then_some(runs)
        },
    )
    .await;
    let flags: Vec<_> = down[..3]
        .iter()
        .map(|r| (r["confirm"].clone(), r["success"].clone()))
        .collect();
    assert_eq!(
        flags,
        [
            (false.into(), false.into()),
            (true.into(), false.into()),
            (true.into(), false.into())
        ],
        "{down:?}"
    );
    // Each `after` (1 s) after the run before it, all before the next scheduled run (5 s).
    let t: Vec<f64> = down[..3].iter().map(started).collect();
    assert!(
        t[1] - t[0] >= 1.0 && t[2] - t[1] >= 1.0 && t[2] - t[0] < 5.0,
        "{t:?}"
    );
    // Then nothing until the next scheduled run: the failure is confirmed.
    if let Some(fourth) = down.get(3) {
        assert_eq!(fourth["confirm"], false, "{down:?}");
    }
    let text = d.metrics().await;
    assert_eq!(
        sample(
            &text,
            "llm_canary_confirm_runs_total",
            &["target=\"down\"", "outcome=\"http_error\""]
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "llm_canary_confirmed_failure_timestamp_seconds",
            &["target=\"down\""]
        ),
        Some(t[0]),
        "{text}"
    );

    // One failed run of `blip`, then a successful confirmation: counted, never confirmed.
    eventually(
        "a failed run of `blip` confirmed ok",
        Duration::from_secs(40),
        || async {
            let runs = runs_of(&d, "blip");
            runs.windows(2)
                .any(|w| {
                    w[0]["success"] == false
                        && w[0]["confirm"] == false
                        && w[1]["success"] == true
                        && w[1]["confirm"] == true
                })
                .then_some(())
        },
    )
    .await;
    let text = d.metrics().await;
    assert!(
        sample(
            &text,
            "llm_canary_confirm_runs_total",
            &["target=\"blip\"", "outcome=\"ok\""]
        ) >= Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "llm_canary_confirmed_failure_timestamp_seconds",
            &["target=\"blip\""]
        ),
        None,
        "{text}"
    );
}

/// Where in its interval each run of `probe` started: seconds past the last multiple of
/// `interval` since the Unix epoch, less the pair's expected offset.
fn lateness(d: &Daemon, probe: &str, interval: f64, offset: f64) -> Vec<f64> {
    d.results()
        .iter()
        .filter(|r| r["probe"] == probe && r["confirm"] == false)
        .map(|r| (started(r) - offset).rem_euclid(interval))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_and_at_every_fire_at_multiples_of_their_interval_across_a_restart() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let yaml = |port: u16| {
        format!(
            "agent:\n  name: canary-test\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n\
             targets:\n  - {{name: sim-a, base_url: \"{}\", model: m}}\n",
            sim.base_url("healthy")
        )
    };
    let every = "name: every\nevery: 2s\njitter: 1s\nprompt: q.txt\nmax_tokens: 8\n";
    let at_every = "name: at-every\nschedule: \"@every 3s\"\nprompt: q.txt\nmax_tokens: 8\n";
    // The pair's stable share of its jitter, the same in every process.
    let offset =
        llm_canary::testing::schedule::pair_offset(Duration::from_secs(1), "every", "sim-a");
    let offset = offset.as_secs_f64();
    // Far enough from 0 that a daemon ignoring it would start every run ~1.8 s "late" here.
    assert!(offset > 0.1, "{offset}");
    let run = |port: u16| {
        Daemon::start(
            &[
                ("llm-canary.yaml", &yaml(port)),
                ("probes/every.yaml", every),
                ("probes/at-every.yaml", at_every),
                ("prompts/q.txt", common::PROMPT),
            ],
            port,
            &[],
        )
    };
    for start in ["first", "restarted"] {
        let d = run(services::free_port());
        eventually(
            "three runs of each probe",
            Duration::from_secs(40),
            || async {
                (lateness(&d, "every", 2.0, offset).len() >= 3
                    && lateness(&d, "at-every", 3.0, 0.0).len() >= 3)
                    .then_some(())
            },
        )
        .await;
        // Each run starts just after its fire time (a run's own start-up, on a busy machine),
        // never before it and never a whole share of the interval later.
        for (probe, interval, offset) in [("every", 2.0, offset), ("at-every", 3.0, 0.0)] {
            let late = lateness(&d, probe, interval, offset);
            assert!(
                late.iter().all(|l| *l < 0.5),
                "{start}: {probe} started {late:?} s after its fire times (offset {offset}): {:?}",
                d.results()
            );
        }
        // Consecutive runs one interval apart.
        let t: Vec<f64> = d
            .results()
            .iter()
            .filter(|r| r["probe"] == "at-every")
            .map(started)
            .collect();
        assert!(
            t.windows(2).all(|w| ((w[1] - w[0]) - 3.0).abs() < 0.5),
            "{start}: {t:?}"
        );
    }
}

/// The daemon's stderr, line by line, as it comes.
struct Stderr(std::sync::mpsc::Receiver<String>);

impl Stderr {
    fn of(child: &mut std::process::Child) -> Stderr {
        use std::io::BufRead;
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Stderr(rx)
    }

    /// The lines up to and including the first that contains `what`; panics with those read
    /// if none comes within 20 s or stderr closes first.
    fn until(&self, what: &str) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut lines = Vec::new();
        while let Ok(l) = self
            .0
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            let done = l.contains(what);
            lines.push(l);
            if done {
                return lines;
            }
        }
        panic!("no line with {what:?} in:\n{}", lines.join("\n"));
    }
}

/// At its default level, with no RUST_LOG, a daemon started by hand says that it started (its
/// version, address, targets, pairs and where results go), when a pair goes down (with the
/// run's sentence) and when it comes back (once each, not once per run), when it reloads and
/// when it stops; not a line per run.
#[tokio::test(flavor = "multi_thread")]
async fn run_at_its_default_level_says_start_changes_reload_and_stop() {
    let port = common::closed_port();
    let listen = services::free_port();
    let dir = TempDir::new("speaks");
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!(
                "agent:\n  listen: 127.0.0.1:{listen}\n  results_log: results.jsonl\n  shutdown_grace: 5s\n\
                 targets:\n  - {{name: t, base_url: \"http://127.0.0.1:{port}/s/healthy/v1\", model: m}}\n"
            ),
        ),
        (
            "probes/p.yaml",
            "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nconfirm: off\ntimeouts: {connect: 1s}\n",
        ),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .env_remove("RUST_LOG")
        .args(["run", "-c"])
        .arg(dir.path().join("llm-canary.yaml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Stderr::of(&mut child);
    let mut seen = stderr.until("daemon started");
    let started = seen.last().unwrap().clone();
    for part in [
        format!("version=\"{} (", env!("CARGO_PKG_VERSION")),
        format!("listen=http://127.0.0.1:{listen}"),
        " targets=1 pairs=1 ".to_string(),
        format!(
            "results=\"results log {}\"",
            dir.path().join("results.jsonl").display()
        ),
    ] {
        assert!(started.contains(&part), "{part:?} in {started}");
    }
    assert!(started.contains(" INFO "), "{started}");
    // Nothing else is said at start.
    assert_eq!(seen.len(), 1, "{}", seen.join("\n"));

    // Nothing listens on the target's port: the runs fail, and the second in a row (down, as
    // the status page says) says so once.
    let down = stderr.until("pair down");
    let line = down.last().unwrap();
    assert!(
        line.contains(" WARN ")
            && line.contains(&format!(
                "pair down: connect: connection refused (127.0.0.1:{port})"
            ))
            && line.contains("probe=p target=t outcome=connect_error"),
        "{line}"
    );
    seen.extend(down);
    // The sim comes up on that port: the pair is back at its next run.
    let _sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
    let back = stderr.until("pair back");
    let line = back.last().unwrap();
    assert!(
        line.contains(" INFO ") && line.contains("probe=p target=t failed_runs="),
        "{line}"
    );
    seen.extend(back);

    signal(child.id(), "HUP");
    let reloaded = stderr.until("config reloaded");
    assert!(
        reloaded.last().unwrap().contains("by=SIGHUP"),
        "{}",
        reloaded.join("\n")
    );
    seen.extend(reloaded);

    signal(child.id(), "TERM");
    seen.extend(stderr.until("shutting down"));
    seen.extend(stderr.until("daemon stopped"));
    let all = seen.join("\n");
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    // One line per change, not per run: every run went to the results log, none to stderr.
    assert_eq!(all.matches("pair down").count(), 1, "{all}");
    assert_eq!(all.matches("pair back").count(), 1, "{all}");
    assert!(!all.contains("probe run finished"), "{all}");
    let runs = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    assert!(runs.lines().count() >= 2, "{runs}");
}
