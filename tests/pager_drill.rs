//! The page, the incident and the pager agree. Two simulated replicas, each its own process,
//! probed by the daemon at a 30-second and at a 2-minute cadence (default confirmation runs),
//! pushing to a real Pushgateway, scraped by a real Prometheus evaluating the shipped rules
//! (every 2 s), which sends to a real Alertmanager with the shipped routing, whose pager
//! receiver is a webhook in this test. Both replicas are killed, then started again once both
//! pages went out. For each cadence the timeline is printed, and it must hold that:
//! - the status page says *down* no later than `LLMCanaryTargetDown` fires;
//! - it says *up* again no later than the alert resolves;
//! - the incident's length is within one cadence of the outage;
//! - the resolved notification reaches the pager within 90 s of the first good run.
//!
//! About 7 minutes (the 2-minute cadence, four times over).
//!
//! And a silent agent: three agents remote-writing into a Prometheus loaded with the shipped
//! `prometheus.yml`; one stops, the fleet page shows its location silent and the shipped
//! `LLMCanaryFleetAgentSilent` fires (about 2.5 minutes).
//!
//! Run with scripts/test-real-llm (built with the `real-llm` feature; the two tests run side by
//! side while llama.cpp builds).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::services::{self, eventually, free_port, Service};
use common::TempDir;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The rules' evaluation interval here, in seconds.
const EVALUATION: u64 = 2;
/// How often this test looks at the page, Prometheus and the pager, in seconds.
const POLL: f64 = 0.5;
/// The bound on a resolved notification, from the first good run.
const RESOLVED_WITHIN: f64 = 90.0;

/// A target and its probe's cadence.
struct Pair {
    target: &'static str,
    every: u64,
}

const PAIRS: [Pair; 2] = [
    Pair {
        target: "fast",
        every: 30,
    },
    Pair {
        target: "slow",
        every: 120,
    },
];

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `llm-canary sim` on `port`, its own process, so it can be killed as a server dies.
fn sim(port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["sim", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the sim")
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// What the pager received: (when, status, target) for each LLMCanaryTargetDown alert in each
/// notification.
type Pages = Arc<Mutex<Vec<(f64, String, String)>>>;

/// The pager: a webhook that records every notification's alerts and answers 200.
async fn pager() -> (u16, Pages) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let pages: Pages = Arc::default();
    let seen = pages.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                // The head, then as many body bytes as it announces.
                let body = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break buf[end + 4..end + 4 + len].to_vec();
                    }
                };
                let at = unix_now();
                if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                    for a in v["alerts"].as_array().into_iter().flatten() {
                        if a["labels"]["alertname"] == "LLMCanaryTargetDown" {
                            seen.lock().unwrap().push((
                                at,
                                a["status"].as_str().unwrap_or_default().to_string(),
                                a["labels"]["target"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_string(),
                            ));
                        }
                    }
                }
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (port, pages)
}

/// Alertmanager with the shipped routing and templates, every receiver pointed at the pager.
async fn alertmanager(pager_port: u16, dir: &TempDir) -> Service {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/alertmanager");
    let hook = |path: &str| format!("http://127.0.0.1:{pager_port}/{path}");
    let config = std::fs::read_to_string(root.join("alertmanager.yml"))
        .unwrap()
        .replace("https://pager.example.com/hooks/llm-canary", &hook("page"))
        .replace(
            "https://chat-bridge.example.com/hooks/llm-canary",
            &hook("chat"),
        )
        .replace(
            "https://tickets.example.com/hooks/llm-canary",
            &hook("ticket"),
        )
        .replace(
            "https://hooks.slack.example.com/services/REPLACE/ME",
            &hook("slack"),
        );
    let am = dir.path().join("alertmanager");
    common::copy_dir(&root.join("templates"), &am.join("templates"));
    std::fs::write(am.join("alertmanager.yml"), config).unwrap();
    let port = free_port();
    let child = Command::new(services::binary(
        "prometheus-alertmanager",
        "prometheus-alertmanager",
    ))
    .arg(format!(
        "--config.file={}",
        am.join("alertmanager.yml").display()
    ))
    .arg(format!("--storage.path={}", am.join("data").display()))
    .arg(format!("--web.listen-address=127.0.0.1:{port}"))
    .arg("--cluster.listen-address=")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start Alertmanager");
    let s = Service::from_child(child, port);
    services::wait_ready(&format!("{}/-/ready", s.url()), Duration::from_secs(30)).await;
    s
}

/// The targets' states on the status page (`/api/v1/status`).
async fn page_states(daemon: &str) -> Vec<(String, String)> {
    let body = services::get(&format!("{daemon}/api/v1/status")).await;
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["target"].as_str().unwrap_or_default().to_string(),
                t["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The targets with LLMCanaryTargetDown firing in Prometheus.
async fn firing(prom: &str) -> Vec<String> {
    let body = services::get(&format!("{prom}/api/v1/alerts")).await;
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == "LLMCanaryTargetDown" && a["state"] == "firing")
        .filter_map(|a| a["labels"]["target"].as_str().map(String::from))
        .collect()
}

/// When each thing was first seen, per target (Unix seconds).
#[derive(Debug, Default, Clone)]
struct Timeline {
    page_down: Option<f64>,
    alert_firing: Option<f64>,
    paged: Option<f64>,
    page_up: Option<f64>,
    alert_resolved: Option<f64>,
    resolved_sent: Option<f64>,
}

/// Where the drill looks: the daemon's status API, Prometheus' alerts, the pager's inbox.
struct Watch<'a> {
    daemon: &'a str,
    prom: &'a str,
    pages: &'a Pages,
}

impl Watch<'_> {
    /// Notes, every half second, when each target's page state, alert and notifications first
    /// changed, until `done` holds for every target (or 6 minutes pass: a failure).
    async fn until(&self, lines: &mut [Timeline], what: &str, done: impl Fn(&Timeline) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(6 * 60);
        while !lines.iter().all(&done) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "not every target {what} within 6 minutes: {lines:?}"
            );
            let (states, fire) = (page_states(self.daemon).await, firing(self.prom).await);
            self.note(lines, &states, &fire);
            tokio::time::sleep(Duration::from_secs_f64(POLL)).await;
        }
    }

    fn note(&self, lines: &mut [Timeline], states: &[(String, String)], fire: &[String]) {
        let now = unix_now();
        let index = |t: &str| PAIRS.iter().position(|p| p.target == t);
        for (t, st) in states {
            let Some(l) = index(t).map(|i| &mut lines[i]) else {
                continue;
            };
            if st == "down" && l.page_down.is_none() {
                l.page_down = Some(now);
            }
            let was_paged = l.page_down.is_some() && l.alert_firing.is_some();
            if was_paged && st == "up" && l.page_up.is_none() {
                l.page_up = Some(now);
            }
        }
        for (p, l) in PAIRS.iter().zip(lines.iter_mut()) {
            let on = fire.iter().any(|t| t == p.target);
            if on && l.alert_firing.is_none() {
                l.alert_firing = Some(now);
            }
            if !on && l.alert_firing.is_some() && l.alert_resolved.is_none() {
                l.alert_resolved = Some(now);
            }
        }
        for (at, status, t) in self.pages.lock().unwrap().iter() {
            let Some(l) = index(t).map(|i| &mut lines[i]) else {
                continue;
            };
            match status.as_str() {
                "firing" if l.paged.is_none() => l.paged = Some(*at),
                "resolved" if l.resolved_sent.is_none() => l.resolved_sent = Some(*at),
                _ => {}
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_the_incident_and_the_pager_agree_at_30_s_and_2_min() {
    let (pager_port, pages) = pager().await;
    let dir = TempDir::new("pager-drill");
    let am = alertmanager(pager_port, &dir).await;
    let gw = services::pushgateway().await;
    let rules = services::rules_every(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/llm-canary.rules.yml"),
        &format!("{EVALUATION}s"),
        &dir,
    );
    let prometheus = services::prometheus_with_config(&format!(
        "global: {{scrape_interval: 1s, evaluation_interval: {EVALUATION}s}}\n\
         rule_files: ['{}']\n\
         alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{}']\n\
         scrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        rules.display(),
        am.port,
        gw.port
    ))
    .await;
    let prom = prometheus.url();
    let ports: Vec<u16> = PAIRS.iter().map(|_| free_port()).collect();
    let mut sims: Vec<Child> = ports.iter().map(|p| sim(*p)).collect();
    let listen = free_port();
    let targets: String = PAIRS
        .iter()
        .zip(&ports)
        .map(|(p, port)| {
            format!(
                "  - {{name: {}, base_url: \"http://127.0.0.1:{port}/s/healthy/v1\", model: m, labels: {{env: drill}}}}\n",
                p.target
            )
        })
        .collect();
    let mut files = vec![
        (
            "llm-canary.yaml".to_string(),
            format!(
                "agent: {{name: drill, listen: \"127.0.0.1:{listen}\"}}\npush: {{url: \"{}\", min_interval: 1s}}\ntargets:\n{targets}",
                gw.url()
            ),
        ),
        ("prompts/q.txt".to_string(), "What is the capital of France?".to_string()),
    ];
    for p in &PAIRS {
        // No `confirm:`: the default, two confirmation runs 20 s apart.
        files.push((
            format!("probes/{}.yaml", p.target),
            format!(
                "name: {t}\nevery: {e}s\ntargets: [{t}]\nprompt: q.txt\nmax_tokens: 32\ntimeouts: {{connect: 1s, ttft: 5s, stall: 5s, total: 10s}}\nchecks: {{min_chars: 1, repetition: off}}\n",
                t = p.target,
                e = p.every
            ),
        ));
    }
    let written: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    dir.write(&written);
    let _daemon = services::daemon(&dir.path().join("llm-canary.yaml"));
    let daemon = format!("http://127.0.0.1:{listen}");

    // Both up on the page and in Prometheus first.
    eventually(
        "both targets up on the page",
        Duration::from_secs(180),
        || async {
            let s = page_states(&daemon).await;
            (s.len() == PAIRS.len() && s.iter().all(|(_, st)| st == "up")).then_some(())
        },
    )
    .await;
    let killed_at = unix_now();
    for s in sims.drain(..) {
        kill(s);
    }

    // Until both pages went out, then until both resolved: the page's states, the alerts and
    // the pager, every half second.
    let mut lines: Vec<Timeline> = vec![Timeline::default(); PAIRS.len()];
    let watch = Watch {
        daemon: &daemon,
        prom: &prom,
        pages: &pages,
    };
    watch
        .until(&mut lines, "paged, after the kill", |l| l.paged.is_some())
        .await;
    let back_at = unix_now();
    let _sims: Vec<Child> = ports.iter().map(|p| sim(*p)).collect();
    watch
        .until(&mut lines, "resolved, after the restart", |l| {
            l.resolved_sent.is_some() && l.page_up.is_some()
        })
        .await;

    let body = services::get(&format!("{daemon}/api/v1/incidents")).await;
    let incidents: Value = serde_json::from_str(&body).unwrap();
    let rel =
        |t: Option<f64>| t.map_or("never".to_string(), |t| format!("+{:.1} s", t - killed_at));
    for (p, l) in PAIRS.iter().zip(&lines) {
        let incident = incidents["incidents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["target"] == p.target)
            .unwrap_or_else(|| panic!("no incident for {}: {incidents}", p.target));
        let ts = |k: &str| -> f64 {
            let t: jiff::Timestamp = incident[k].as_str().unwrap().parse().unwrap();
            t.as_millisecond() as f64 / 1000.0
        };
        let (started, ended) = (ts("started_at"), ts("ended_at"));
        println!(
            "pager drill, every {} s ({}): killed +0.0 s; first failed run {}; page down {}; \
             LLMCanaryTargetDown firing {}; paged {}; restarted {}; first good run {}; \
             page up {}; alert resolved {}; resolved notification {}; incident {:.0} s for an outage of {:.0} s",
            p.every,
            p.target,
            rel(Some(started)),
            rel(l.page_down),
            rel(l.alert_firing),
            rel(l.paged),
            rel(Some(back_at)),
            rel(Some(ended)),
            rel(l.page_up),
            rel(l.alert_resolved),
            rel(l.resolved_sent),
            ended - started,
            back_at - killed_at,
        );
        let (down, firing_at) = (l.page_down.unwrap(), l.alert_firing.unwrap());
        assert!(
            down <= firing_at + POLL,
            "{}: the page said down {:.1} s after the alert fired",
            p.target,
            down - firing_at
        );
        let (up, resolved) = (l.page_up.unwrap(), l.alert_resolved.unwrap());
        assert!(
            up <= resolved + POLL,
            "{}: the page said up {:.1} s after the alert resolved",
            p.target,
            up - resolved
        );
        let (incident_len, outage) = (ended - started, back_at - killed_at);
        assert!(
            (incident_len - outage).abs() <= p.every as f64 + 5.0,
            "{}: an incident of {incident_len:.0} s for an outage of {outage:.0} s at a {} s cadence",
            p.target,
            p.every
        );
        let sent = l.resolved_sent.unwrap();
        assert!(
            sent - ended <= RESOLVED_WITHIN,
            "{}: the resolved notification came {:.0} s after the first good run",
            p.target,
            sent - ended
        );
    }
}

/// Three agents (real processes) in three regions remote-write into a real Prometheus loaded
/// with the shipped `prometheus.yml` (its rule files as shipped, evaluated every 2 s). The ap
/// agent is stopped: within two of its cadences the fleet page shows ap silent, the target
/// only ap was failing stays failing (never up), and `LLMCanaryFleetAgentSilent` fires.
/// About 2.5 minutes (the alert's 2-minute silence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agent_is_silent_on_the_fleet_page_and_pages_with_the_shipped_config() {
    let sim = llm_canary::testing::sim::Sim::start("127.0.0.1:0")
        .await
        .unwrap();
    let dir = TempDir::new("silent-drill");
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let shipped = std::fs::read_to_string(deploy.join("prometheus.yml")).unwrap();
    // The shipped file with each rule file made absolute (and on the test's clock), Alertmanager
    // and the scrape jobs' example hosts left as they are: unreachable, and harmless.
    let mut config = String::new();
    for line in shipped.lines() {
        let file = line.trim_start().strip_prefix("- ").and_then(|l| {
            let name = l.split_whitespace().next()?;
            name.ends_with(".rules.yml").then_some(name)
        });
        match file {
            Some(name) => {
                let copy =
                    services::rules_every(&deploy.join(name), &format!("{EVALUATION}s"), &dir);
                let moved = dir.path().join(name);
                std::fs::rename(&copy, &moved).unwrap();
                config.push_str(&format!("  - '{}'\n", moved.display()));
            }
            None => {
                config.push_str(line);
                config.push('\n');
            }
        }
    }
    assert_eq!(
        config.matches(".rules.yml'").count(),
        4,
        "the shipped rule files: {config}"
    );
    let prometheus = services::prometheus_with_config(&config).await;
    let prom = prometheus.url();
    let write = format!("{prom}/api/v1/write");
    let regions = ["ap", "eu", "us"];
    let mut agents: Vec<Option<common::daemon::Daemon>> = regions
        .iter()
        .map(|region| {
            let port = free_port();
            let scenario = |t: &str| {
                if t == "only-ap" && *region == "ap" {
                    "http-500"
                } else {
                    "healthy"
                }
            };
            let mut yaml = format!(
                "agent:\n  name: canary-{region}\n  labels: {{region: {region}}}\n  listen: 127.0.0.1:{port}\n\
                 remote_write:\n  url: \"{write}\"\n  interval: 1s\n  timeout: 2s\ntargets:\n"
            );
            for t in ["steady", "only-ap"] {
                yaml.push_str(&format!(
                    "  - {{name: {t}, base_url: \"{}\", model: m-7b}}\n",
                    sim.base_url(scenario(t))
                ));
            }
            Some(common::daemon::Daemon::start(
                &[
                    ("llm-canary.yaml", &yaml),
                    ("probes/p.yaml", "name: p\nevery: 5s\nprompt: q.txt\nmax_tokens: 64\nconfirm: off\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 3s}\nchecks: {expect: \"(?i)paris\"}\n"),
                    ("prompts/q.txt", common::PROMPT),
                ],
                port,
                &[],
            ))
        })
        .collect();
    let page_port = free_port();
    let mut page = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args([
            "status-page",
            "--prometheus",
            &prom,
            "--query-timeout",
            "5s",
        ])
        .arg("--listen")
        .arg(format!("127.0.0.1:{page_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the fleet page");
    let fleet = format!("http://127.0.0.1:{page_port}/api/v1/fleet");
    let target = |v: &Value, name: &str| -> Value {
        v["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["target"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    // Every location reporting, only-ap failing from ap.
    eventually(
        "three locations on the fleet page",
        Duration::from_secs(120),
        || async {
            let v: Value = serde_json::from_str(&services::get(&fleet).await).ok()?;
            let t = target(&v, "only-ap");
            let all = t["locations"].as_array()?.len() == 3;
            (all && t["locations_failing"] == 1 && t["locations_silent"] == 0).then_some(())
        },
    )
    .await;
    let stopped_at = unix_now();
    agents[0] = None;
    // Silent within two cadences (the probe's 5 s and the write's 1 s: well within 30 s), and
    // the target ap alone failed never turns up meanwhile.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let silent_at = loop {
        let v: Value = serde_json::from_str(&services::get(&fleet).await).unwrap_or(Value::Null);
        let t = target(&v, "only-ap");
        assert_ne!(
            t["state"], "up",
            "a silent failing location turned the target up: {t}"
        );
        if t["locations_silent"] == 1 {
            let ap = t["locations"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["location"] == "ap")
                .unwrap()
                .clone();
            assert_eq!(ap["silent"], true, "{ap}");
            assert_eq!(t["locations_failing"], 1, "ap still counts as failing: {t}");
            break unix_now();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ap not silent on the fleet page 30 s after its agent stopped: {t}"
        );
        tokio::time::sleep(Duration::from_secs_f64(POLL)).await;
    };
    // The shipped alert: two minutes without a sample, then the next evaluation.
    let alert = || async {
        let body = services::get(&format!("{prom}/api/v1/alerts")).await;
        let v: Value = serde_json::from_str(&body).ok()?;
        v["data"]["alerts"]
            .as_array()?
            .iter()
            .any(|a| {
                a["labels"]["alertname"] == "LLMCanaryFleetAgentSilent"
                    && a["labels"]["region"] == "ap"
                    && a["state"] == "firing"
            })
            .then_some(())
    };
    eventually(
        "LLMCanaryFleetAgentSilent firing for ap",
        Duration::from_secs(180),
        alert,
    )
    .await;
    let fired_at = unix_now();
    let body = services::get(&format!("{prom}/api/v1/alerts")).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    let others: Vec<&Value> = v["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == "LLMCanaryFleetAgentSilent")
        .filter(|a| a["labels"]["region"] != "ap")
        .collect();
    assert!(others.is_empty(), "only ap is silent: {others:?}");
    println!(
        "silent drill: ap's agent stopped +0.0 s; silent on the fleet page +{:.1} s; LLMCanaryFleetAgentSilent firing +{:.1} s",
        silent_at - stopped_at,
        fired_at - stopped_at
    );
    let _ = page.kill();
    let _ = page.wait();
}
