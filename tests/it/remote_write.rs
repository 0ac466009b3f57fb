//! `remote_write:` against real receivers (Debian's Prometheus with
//! `--web.enable-remote-write-receiver`, and Debian's VictoriaMetrics): what the store holds
//! matches the results log, an outage shorter than the queue loses nothing, a longer one drops
//! the oldest samples and counts them. And against a scripted receiver: a bearer token, retries of the same batch on
//! 429 and 5xx, a dropped batch on 400, with push to a real Pushgateway beside.

use crate::common;

use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::services::{self, eventually, get, sample, signal, Service};
use common::TempDir;
use llm_canary::testing::sim::Sim;

const PROBE: &str = "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ntimeouts: {ttft: 5s, stall: 5s, total: 20s}\nchecks: {expect: \"(?i)paris\"}\n";

const USER: &str = "canary";
const PASSWORD: &str = "s3cret-test";
/// bcrypt of PASSWORD (cost 4, the cheapest), as Prometheus's web config wants it; made with
/// python3 -c "import crypt; print(crypt.crypt('s3cret-test', crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))"
const PASSWORD_BCRYPT: &str = "$2b$04$yEaYGxehxLxwEv0YfmHhAe5MQpXqdG9TiUfOMiRs6V8IDZ5dgX.Cu";

/// Which receiver a store runs.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Prometheus,
    VictoriaMetrics,
}

/// The receiver's folder (data and web config), kept across its restarts.
struct Store {
    dir: TempDir,
    port: u16,
    auth: bool,
    kind: Kind,
}

impl Store {
    fn new(auth: bool) -> Store {
        let dir = TempDir::new("rw-store");
        dir.write(&[(
            "web.yml",
            &format!("basic_auth_users:\n  {USER}: {PASSWORD_BCRYPT}\n"),
        )]);
        Store {
            dir,
            port: services::free_port(),
            auth,
            kind: Kind::Prometheus,
        }
    }

    fn victoria_metrics() -> Store {
        Store {
            kind: Kind::VictoriaMetrics,
            ..Store::new(false)
        }
    }

    async fn start(&self) -> Service {
        if self.kind == Kind::VictoriaMetrics {
            return services::victoria_metrics_on(self.dir.path(), self.port).await;
        }
        let web = self.dir.path().join("web.yml");
        services::receiver_on(
            self.dir.path(),
            self.port,
            self.auth.then_some(web.as_path()),
            self.auth.then_some((USER, PASSWORD)),
        )
        .await
    }

    fn write_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }

    /// `data.result` of an instant query (a range selector gives every raw sample).
    async fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let mut req = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .query(&[("query", expr)]);
        if self.auth {
            req = req.basic_auth(USER, Some(PASSWORD));
        }
        let body = req.send().await.unwrap().text().await.unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{expr}: {v}");
        v["data"]["result"].as_array().unwrap().clone()
    }

    /// Every stored (time in ms, value) of the one series `selector` names, over the last 10m.
    async fn samples(&self, selector: &str) -> Vec<(i64, f64)> {
        let r = self.query(&format!("{selector}[10m]")).await;
        assert_eq!(r.len(), 1, "{selector}: {r:?}");
        r[0]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let t = (p[0].as_f64().unwrap() * 1000.0).round() as i64;
                (t, p[1].as_str().unwrap().parse().unwrap())
            })
            .collect()
    }
}

fn start_agent(store: &Store, sim: &Sim, queue: &str, auth: &str) -> Daemon {
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: canary-rw\n  labels: {{region: test}}\n  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n\
         remote_write:\n  url: \"{}\"\n  interval: 250ms\n  timeout: 2s\n  queue: {queue}\n{auth}\
         targets:\n  - {{name: sim-a, base_url: \"{}\", model: m-a, server: vllm, labels: {{model_version: \"7\", cluster: c1}}}}\n",
        store.write_url(),
        sim.base_url("healthy")
    );
    Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("rw-password", PASSWORD),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    )
}

/// The results log: (started_at in ms, the whole record).
fn results(d: &Daemon) -> Vec<(i64, serde_json::Value)> {
    std::fs::read_to_string(d.dir.path().join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let t: jiff::Timestamp = v["started_at"].as_str().unwrap().parse().unwrap();
            (t.as_millisecond(), v)
        })
        .collect()
}

async fn own(d: &Daemon, metric: &str, having: &[&str]) -> f64 {
    sample(&get(&d.url("/metrics")).await, metric, having).unwrap_or(-1.0)
}

/// SIGTERM and the exit code: the daemon samples once more and flushes its queue.
async fn terminate(d: &mut Daemon) -> Option<i32> {
    signal(d.child.id(), "TERM");
    let child = &mut d.child;
    eventually("the daemon to exit", Duration::from_secs(30), || {
        let r = child.try_wait().unwrap();
        async move { r }
    })
    .await
    .code()
}

async fn runs_beyond(d: &Daemon, n: usize, what: &str) {
    eventually(what, Duration::from_secs(40), || async {
        (results(d).len() >= n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_shorter_than_the_queue_loses_nothing() {
    let auth = format!("  username: {USER}\n  password_file: rw-password\n");
    loses_nothing_through_an_outage(Store::new(true), &auth).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn victoria_metrics_receives_through_an_outage() {
    loses_nothing_through_an_outage(Store::victoria_metrics(), "").await;
}

/// Runs go on while the store is stopped; once it is back the queue drains, and every run of
/// the results log is in the store, with the agent's and target's labels.
async fn loses_nothing_through_an_outage(store: Store, auth: &str) {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let receiver = store.start().await;
    let mut d = start_agent(&store, &sim, "{max_samples: 100000}", auth);

    let stored_runs = "llm_canary_probe_runs_total{outcome=\"ok\",target=\"sim-a\"}";
    eventually(
        "three runs in the store",
        Duration::from_secs(40),
        || async {
            let r = store.query(stored_runs).await;
            let v: f64 = r.first()?["value"][1].as_str()?.parse().ok()?;
            (v >= 3.0).then_some(())
        },
    )
    .await;

    // The receiver goes away while runs go on; the agent counts failures and keeps samples.
    receiver.stop();
    let at_outage = results(&d).len();
    runs_beyond(&d, at_outage + 4, "four runs during the outage").await;
    let failures = own(&d, "llm_canary_remote_write_failures_total", &[]).await;
    let queued = own(&d, "llm_canary_remote_write_queue_samples", &[]).await;
    assert!(
        failures >= 1.0 && queued > 0.0,
        "failures {failures}, queued {queued}\n{}",
        d.log()
    );

    // A new receiver on the same port and data: the queue drains.
    let _receiver = store.start().await;
    eventually("the queue to drain", Duration::from_secs(60), || async {
        (own(&d, "llm_canary_remote_write_queue_samples", &[]).await == 0.0).then_some(())
    })
    .await;
    assert_eq!(
        own(
            &d,
            "llm_canary_remote_write_samples_dropped_total",
            &["queue_full"]
        )
        .await,
        0.0
    );
    assert_eq!(terminate(&mut d).await, Some(0), "{}", d.log());

    // Every run in the results log is in the store: its start time as the last-run gauge,
    // and the run counter reaching the number of runs.
    let runs = results(&d);
    assert!(runs.len() >= at_outage + 4);
    // A store may make what it accepted searchable a moment later (VictoriaMetrics moves its
    // in-memory parts to searchable ones every second or so).
    let last = runs.last().unwrap().0;
    eventually(
        "the last run to be searchable",
        Duration::from_secs(30),
        || async {
            let s = store
                .samples("llm_canary_last_run_timestamp_seconds{target=\"sim-a\"}")
                .await;
            s.iter()
                .any(|(_, v)| (v * 1000.0).round() as i64 == last)
                .then_some(())
        },
    )
    .await;
    let stamps = store
        .samples("llm_canary_last_run_timestamp_seconds{target=\"sim-a\"}")
        .await;
    let stored: std::collections::BTreeSet<i64> = stamps
        .iter()
        .map(|(_, v)| (v * 1000.0).round() as i64)
        .collect();
    let missing: Vec<i64> = runs
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| !stored.contains(t))
        .collect();
    assert!(
        missing.is_empty(),
        "runs not in the store: {missing:?} of {:?}\nstored: {stamps:?}\n{}",
        runs.iter().map(|r| r.0).collect::<Vec<_>>(),
        d.log()
    );
    let counts = store.samples(stored_runs).await;
    assert_eq!(counts.last().unwrap().1 as usize, runs.len());
    let measured = runs
        .iter()
        .filter(|(_, r)| r["warmup"] == false && r["ttft_ms"].is_number())
        .count();
    let ttft_count = store
        .samples("llm_canary_ttft_seconds_count{target=\"sim-a\"}")
        .await;
    assert_eq!(ttft_count.last().unwrap().1 as usize, measured);

    // The agent's and the target's labels, job and instance, on the written series.
    let series = store
        .query("llm_canary_ttft_seconds_bucket{le=\"+Inf\"}")
        .await;
    let m = &series[0]["metric"];
    for (k, v) in [
        ("job", "llm_canary"),
        ("instance", "canary-rw"),
        ("region", "test"),
        ("probe", "p"),
        ("target", "sim-a"),
        ("model", "m-a"),
        ("model_version", "7"),
        ("cluster", "c1"),
    ] {
        assert_eq!(m[k].as_str(), Some(v), "{k} on {m}");
    }
    // The store saw the outage too: the failures counter, written after it.
    let stored_failures = store
        .samples("llm_canary_remote_write_failures_total")
        .await;
    assert!(stored_failures.last().unwrap().1 >= 1.0);
    println!(
        "outage of {} runs: {} runs in the log, {} in the store, {} failed requests",
        runs.len() - at_outage,
        runs.len(),
        runs.len() - missing.len(),
        stored_failures.last().unwrap().1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_queue_drops_the_oldest_and_counts_them() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let store = Store::new(false);
    let receiver = store.start().await;
    // One sample of the registry is about 140 samples: the queue holds about four, a second's
    // worth; retries come at most 250 ms apart, so the receiver's return is seen in time.
    let max = 600.0;
    let mut d = start_agent(
        &store,
        &sim,
        "{max_samples: 600, max_samples_per_send: 50, max_backoff: 250ms}",
        "",
    );
    eventually("two runs in the store", Duration::from_secs(40), || async {
        let r = store
            .query("llm_canary_probe_runs_total{outcome=\"ok\"}")
            .await;
        let v: f64 = r.first()?["value"][1].as_str()?.parse().ok()?;
        (v >= 2.0).then_some(())
    })
    .await;

    receiver.stop();
    let outage = jiff::Timestamp::now().as_millisecond();
    let since = Instant::now();
    // The queue never holds more than its bound while it overflows.
    eventually("drops counted", Duration::from_secs(40), || async {
        let queued = own(&d, "llm_canary_remote_write_queue_samples", &[]).await;
        assert!(queued <= max, "queue {queued} above {max}");
        let dropped = own(
            &d,
            "llm_canary_remote_write_samples_dropped_total",
            &["queue_full"],
        )
        .await;
        (dropped > 0.0 && since.elapsed() > Duration::from_secs(4)).then_some(())
    })
    .await;
    let _receiver = store.start().await;
    // The outage lasts until the new receiver is ready.
    let restart = jiff::Timestamp::now().as_millisecond();
    eventually("the queue to drain", Duration::from_secs(60), || async {
        (own(&d, "llm_canary_remote_write_queue_samples", &[]).await == 0.0).then_some(())
    })
    .await;
    eventually(
        "a run after the outage",
        Duration::from_secs(30),
        || async {
            results(&d)
                .iter()
                .any(|(t, _)| *t > restart + 1_000)
                .then_some(())
        },
    )
    .await;
    let dropped = own(
        &d,
        "llm_canary_remote_write_samples_dropped_total",
        &["queue_full"],
    )
    .await;
    let failures = own(&d, "llm_canary_remote_write_failures_total", &[]).await;
    assert_eq!(terminate(&mut d).await, Some(0), "{}", d.log());

    // The oldest samples of the outage are gone: fewer snapshots than intervals...
    let info = store.samples("llm_canary_build_info").await;
    let during = info
        .iter()
        .filter(|(t, _)| *t > outage && *t < restart)
        .count();
    let intervals = ((restart - outage) / 250) as usize;
    assert!(
        during + 4 < intervals,
        "{during} of {intervals} outage snapshots stored"
    );
    // ...while the newest were kept: the store holds a snapshot from the outage's last second
    // that already counts drops.
    let stored_drops = store
        .samples("llm_canary_remote_write_samples_dropped_total{reason=\"queue_full\"}")
        .await;
    assert!(
        stored_drops
            .iter()
            .any(|(t, v)| *v > 0.0 && *t <= restart && *t > restart - 2_000),
        "no late outage snapshot with drops in {stored_drops:?} (restart at {restart})"
    );
    // Runs after the outage are all there.
    let stored: Vec<i64> = store
        .samples("llm_canary_last_run_timestamp_seconds{target=\"sim-a\"}")
        .await
        .iter()
        .map(|(_, v)| (v * 1000.0).round() as i64)
        .collect();
    let after: Vec<i64> = results(&d)
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| *t > restart + 1_000)
        .collect();
    assert!(!after.is_empty(), "no run after the outage");
    assert!(
        after.iter().all(|t| stored.contains(t)),
        "{after:?} vs {stored:?}"
    );
    println!(
        "outage of {:.1} s with a 600-sample queue: {dropped} samples dropped and counted, {failures} failed requests, {during} of {intervals} outage snapshots kept",
        (restart - outage) as f64 / 1000.0
    );
}

/// (Authorization header, body) of each request a [`Recorder`] took.
type Taken = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// A receiver that answers with a script of statuses (then 204) and keeps what it was sent.
struct Recorder {
    port: u16,
    seen: Taken,
}

impl Recorder {
    async fn start(script: &'static [u16]) -> Recorder {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Taken = Default::default();
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (sock, _) = listener.accept().await.unwrap();
                let log = log.clone();
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let log = log.clone();
                        async move {
                            let auth = req
                                .headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap_or("?").to_string())
                                .unwrap_or_default();
                            let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
                            let n = {
                                let mut log = log.lock().unwrap();
                                log.push((auth, body));
                                log.len()
                            };
                            let status = script.get(n - 1).copied().unwrap_or(204);
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(http_body_util::Full::new(bytes::Bytes::from_static(
                                        b"scripted",
                                    )))
                                    .unwrap(),
                            )
                        }
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(sock), service),
                );
            }
        });
        Recorder { port, seen }
    }

    fn requests(&self) -> Vec<(String, Vec<u8>)> {
        self.seen.lock().unwrap().clone()
    }
}

/// Remote-write beside push, with a bearer token: a 429 and a 503 are retried with the same
/// batch, a 400 drops that batch (counted as rejected) and the next goes on; the token is on
/// every request and in no log; the Pushgateway gets the same runs meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_retries_rejections_and_push_beside() {
    const TOKEN: &str = "rw-token-8f1c";
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let recorder = Recorder::start(&[429, 503, 400]).await;
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: canary-both\n  listen: 127.0.0.1:{port}\n\
         push: {{url: \"http://127.0.0.1:{}\", job: llm_canary, min_interval: 300ms}}\n\
         remote_write:\n  url: \"http://127.0.0.1:{}/api/v1/write\"\n  interval: 250ms\n  timeout: 2s\n\
         \x20 queue: {{max_backoff: 250ms}}\n  bearer_token_file: rw-token\n\
         targets:\n  - {{name: sim-a, base_url: \"{}\", model: m-a}}\n",
        gw.port,
        recorder.port,
        sim.base_url("healthy")
    );
    let mut d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("rw-token", TOKEN),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(40);
    while recorder.requests().len() < 6 {
        assert!(
            Instant::now() < deadline,
            "{} writes in 40 s; the agent's log:\n{}",
            recorder.requests().len(),
            d.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = recorder.requests();
    for (auth, _) in &sent {
        assert_eq!(auth, &format!("Bearer {TOKEN}"));
    }
    // 429 and 503: the same batch again; after the 400, another one.
    assert_eq!(sent[0].1, sent[1].1, "a 429 is retried with the same batch");
    assert_eq!(sent[1].1, sent[2].1, "a 503 is retried with the same batch");
    assert_ne!(sent[2].1, sent[3].1, "a 400 drops the batch");
    eventually("the rejection counted", Duration::from_secs(10), || async {
        let m = get(&d.url("/metrics")).await;
        let rejected = sample(
            &m,
            "llm_canary_remote_write_samples_dropped_total",
            &["reason=\"rejected\""],
        )?;
        let failures = sample(&m, "llm_canary_remote_write_failures_total", &[])?;
        (rejected > 0.0 && failures >= 3.0).then_some(())
    })
    .await;
    // The gateway got the runs too.
    eventually("runs on the gateway", Duration::from_secs(20), || async {
        let m = get(&format!("http://127.0.0.1:{}/metrics", gw.port)).await;
        sample(
            &m,
            "llm_canary_probe_runs_total",
            &["instance=\"canary-both\"", "outcome=\"ok\""],
        )
        .filter(|&n| n > 0.0)
    })
    .await;
    assert_eq!(terminate(&mut d).await, Some(0));
    assert!(!d.log().contains(TOKEN), "the token is logged");
}
