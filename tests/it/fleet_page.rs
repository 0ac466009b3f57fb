//! `status-page --prometheus URL`, the fleet page, against real stores: three agents (real
//! processes) labelled with three regions probe three targets on the sim and remote-write to a
//! real Prometheus (the page's recording rules evaluated by it), then to VictoriaMetrics (the
//! rules evaluated by vmalert). One target fails from one location, another from two: the page
//! (a real process) shows them degraded and down, every location in its row, with as many
//! failing locations as the shipped alerts' own recording rule counts; headless Chromium renders
//! it, and the screenshot is saved to `target/fleet-page.png`.
//!
//! A location that stops writing: three locations' samples, with the times they were written at,
//! are put into a real Prometheus's storage (the last one written now), one location's ending
//! earlier; the page shows it silent since its last sample, and the target only it failed stays
//! failing. A store that cannot be read is a page that refreshes itself, with a 503.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, binary, get, Service};
use common::{root, TempDir};
use llm_canary::testing::sim::Sim;
use serde_json::Value;

const PROBE: &str = "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 3s}\nchecks: {expect: \"(?i)paris\"}\n";
const REGIONS: [&str; 3] = ["ap", "eu", "us"];

/// Which region serves which target a failing scenario: `steady` nowhere, `one-down` from ap,
/// `two-down` from ap and us.
fn scenario(target: &str, region: &str) -> &'static str {
    match (target, region) {
        ("one-down", "ap") | ("two-down", "ap" | "us") => "http-500",
        _ => "healthy",
    }
}

/// One agent in `region`, remote-writing to `write_url` every 500 ms.
fn agent(sim: &Sim, region: &str, write_url: &str) -> Daemon {
    let port = services::free_port();
    let mut yaml = format!(
        "agent:\n  name: canary-{region}\n  labels: {{region: {region}}}\n  listen: 127.0.0.1:{port}\n\
         remote_write:\n  url: \"{write_url}\"\n  interval: 500ms\n  timeout: 2s\ntargets:\n"
    );
    for target in ["steady", "one-down", "two-down"] {
        yaml.push_str(&format!(
            "  - {{name: {target}, base_url: \"{}\", model: m-7b}}\n",
            sim.base_url(scenario(target, region))
        ));
    }
    Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    )
}

/// `llm-canary status-page` as a child process, killed on drop.
struct Page {
    child: Child,
    port: u16,
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Page {
    async fn start(store: &str) -> Page {
        let port = services::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args([
                "status-page",
                "--prometheus",
                store,
                "--query-timeout",
                "5s",
            ])
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the status page");
        let page = Page { child, port };
        services::wait_ready(&page.url("/healthz"), Duration::from_secs(20)).await;
        page
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// The page's recording rules, evaluated every second.
fn rules(dir: &TempDir) -> std::path::PathBuf {
    services::rules_every(
        &root().join("deploy/prometheus/status-page.rules.yml"),
        "1s",
        dir,
    )
}

/// Waits until the page's JSON shows each target in the state the faults give it, with each
/// location's state and its 24-hour uptime from the recorded series; returns that JSON.
async fn settled(page: &Page) -> Value {
    let limit = Duration::from_secs(90);
    let start = std::time::Instant::now();
    loop {
        let last = get(&page.url("/api/v1/fleet")).await;
        if let Some(v) = serde_json::from_str(&last)
            .ok()
            .filter(as_the_faults_make_it)
        {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "after {limit:?} the fleet page does not show steady up, one-down degraded and two-down down with their uptimes: {last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each target in the state the faults give it, every location in its state with a 24-hour
/// uptime from the recorded series.
fn as_the_faults_make_it(v: &Value) -> bool {
    let check = || -> Option<()> {
        let targets = v["targets"].as_array()?;
        let names: Vec<&str> = targets
            .iter()
            .filter_map(|t| t["target"].as_str())
            .collect();
        (names == ["one-down", "steady", "two-down"]).then_some(())?;
        for t in targets {
            let name = t["target"].as_str()?;
            let locations = t["locations"].as_array()?;
            let regions: Vec<&str> = locations
                .iter()
                .filter_map(|l| l["location"].as_str())
                .collect();
            (regions == REGIONS).then_some(())?;
            for l in locations {
                let region = l["location"].as_str()?;
                let failing = scenario(name, region) != "healthy";
                let want = if failing { "down" } else { "up" };
                (l["state"] == want).then_some(())?;
                let uptime = l["uptime_24h"].as_f64()?;
                // Every run from a failing location fails; none from a healthy one.
                (if failing {
                    uptime < 0.01
                } else {
                    uptime > 0.99
                })
                .then_some(())?;
            }
        }
        Some(())
    };
    check().is_some()
}

fn check(v: &Value) {
    let target = |name: &str| {
        v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"] == name)
            .unwrap()
            .clone()
    };
    for (name, state, failing) in [
        ("steady", "up", 0),
        ("one-down", "degraded", 1),
        ("two-down", "down", 2),
    ] {
        let t = target(name);
        assert_eq!(t["state"], state, "{name}: {t}");
        assert_eq!(t["locations_failing"], failing, "{name}: {t}");
        assert_eq!(t["model"], "m-7b", "{t}");
        for l in t["locations"].as_array().unwrap() {
            let region = l["location"].as_str().unwrap();
            let healthy = scenario(name, region) == "healthy";
            assert!(l["last_run"].is_string(), "{name} from {region}: {l}");
            // Agents writing every 500 ms are never taken for silent ones.
            assert_eq!(l["silent"], false, "{name} from {region}: {l}");
            // The sim answers healthy requests in well under a second.
            if healthy {
                assert!(l["last_success"].is_string(), "{name} from {region}: {l}");
                let p95 = l["ttft_p95_seconds"].as_f64().unwrap();
                assert!(p95 > 0.0 && p95 < 1.0, "{name} from {region}: {l}");
                assert_eq!(l["success_ratio_3m"], 1.0, "{l}");
            } else {
                assert_eq!(l["success_ratio_3m"], 0.0, "{l}");
            }
        }
        // The failures: http_error from exactly the failing locations.
        let mut failed: Vec<(String, String)> = t["failures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                assert!(f["runs_24h"].as_f64().unwrap() > 0.0, "{f}");
                (
                    f["location"].as_str().unwrap().to_string(),
                    f["outcome"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        failed.sort();
        let want: Vec<(String, String)> = REGIONS
            .iter()
            .filter(|r| scenario(name, r) != "healthy")
            .map(|r| (r.to_string(), "http_error".to_string()))
            .collect();
        assert_eq!(failed, want, "{name}");
    }
}

/// The rendered page in a real browser says what the JSON says; the screenshot goes to
/// `target/<name>.png`.
async fn in_browser(page: &Page, name: &str) -> String {
    let url = page.url("/");
    let dom =
        tokio::task::spawn_blocking(move || crate::status_page::chromium(&["--dump-dom"], &url))
            .await
            .unwrap();
    for (target, state) in [
        ("steady", "up"),
        ("one-down", "degraded"),
        ("two-down", "down"),
    ] {
        assert!(
            dom.contains(&format!(
                "<tr class=\"target\" data-target=\"{target}\" data-state=\"{state}\">"
            )),
            "{target} is not {state} in the page: {dom}"
        );
        for region in REGIONS {
            let want = if scenario(target, region) == "healthy" {
                "up"
            } else {
                "down"
            };
            assert!(
                dom.contains(&format!(
                    "data-target=\"{target}\" data-location=\"{region}\" data-state=\"{want}\""
                )),
                "{target} from {region} is not {want} in the page"
            );
        }
    }
    assert!(dom.contains("1 of 3 locations failing") && dom.contains("2 of 3 locations failing"));
    let shot = root().join(format!("target/{name}.png"));
    crate::status_page::screenshot_to(&page.url("/"), &shot, "1280,900", 10_000).await;
    dom
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_locations_through_prometheus() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = TempDir::new("fleet-rules");
    // The alerts' rules beside the page's: their count of failing locations is the page's.
    let alerts = services::rules_every(
        &root().join("deploy/prometheus/llm-canary.rules.yml"),
        "1s",
        &dir,
    );
    let prom = services::prometheus_with_rules(&[], &[rules(&dir), alerts], None).await;
    let write = format!("{}/api/v1/write", prom.url());
    let _agents: Vec<Daemon> = REGIONS.iter().map(|r| agent(&sim, r, &write)).collect();
    let page = Page::start(&prom.url()).await;
    let v = settled(&page).await;
    check(&v);
    let failing = |body: String| -> Option<Vec<(String, u64)>> {
        let r: Value = serde_json::from_str(&body).ok()?;
        let mut out: Vec<(String, u64)> = r["data"]["result"]
            .as_array()?
            .iter()
            .filter_map(|s| {
                let value = s["value"][1].as_str()?.parse::<f64>().ok()?;
                Some((s["metric"]["target"].as_str()?.to_string(), value as u64))
            })
            .collect();
        out.sort();
        Some(out)
    };
    let from_page: Vec<(String, u64)> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let n = t["locations_failing"].as_u64().unwrap();
            (t["target"].as_str().unwrap().to_string(), n)
        })
        .collect();
    let query = format!(
        "{}/api/v1/query?query=llm_canary:target_locations_failing:count",
        prom.url()
    );
    let mut from_rules = None;
    for _ in 0..40 {
        from_rules = failing(get(&query).await);
        if from_rules.as_ref() == Some(&from_page) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        from_rules.as_ref(),
        Some(&from_page),
        "the alerts' llm_canary:target_locations_failing:count against the page"
    );
    in_browser(&page, "fleet-page").await;
}

/// vmalert from Debian's victoria-metrics package: the page's rules, read from and written
/// back to VictoriaMetrics, every second.
fn vmalert(rules: &std::path::Path, vm: &Service) -> Service {
    let port = services::free_port();
    let child = Command::new(binary("vmalert", "victoria-metrics"))
        .arg(format!("-rule={}", rules.display()))
        .arg(format!("-datasource.url={}", vm.url()))
        .arg(format!("-remoteWrite.url={}", vm.url()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-evaluationInterval=1s")
        .arg("-remoteWrite.flushInterval=500ms")
        .arg("-loggerLevel=ERROR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start vmalert");
    Service::from_child(child, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_locations_through_victoria_metrics() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = TempDir::new("fleet-vm");
    let vm = services::victoria_metrics_on(dir.path(), services::free_port()).await;
    let _vmalert = vmalert(&rules(&dir), &vm);
    let write = format!("{}/api/v1/write", vm.url());
    let _agents: Vec<Daemon> = REGIONS.iter().map(|r| agent(&sim, r, &write)).collect();
    let page = Page::start(&vm.url()).await;
    let v = settled(&page).await;
    check(&v);
    in_browser(&page, "fleet-page-victoria-metrics").await;
}

/// How often the written locations sample, seconds.
const CADENCE: u64 = 30;

/// Ten minutes of samples from `ap`, `eu` and `us`, one every [`CADENCE`], as an agent's
/// remote-write samples its registry, as OpenMetrics text with their times: `steady` succeeds
/// everywhere, `only-ap` fails from ap alone. eu's last sample is at `now`, us's one cadence
/// earlier (late, not silent), ap's `ap_stopped` seconds before `now`.
fn written(now: u64, ap_stopped: u64) -> String {
    let last = |region: &str| match region {
        "ap" => now - ap_stopped,
        "us" => now - CADENCE,
        _ => now,
    };
    // Ten minutes back from each location's last sample, one every cadence.
    let times = |region: &str| {
        let last = last(region);
        (last - 600..=last).step_by(CADENCE as usize)
    };
    let labels = |region: &str| {
        format!("instance=\"canary-{region}\",job=\"llm_canary\",region=\"{region}\"")
    };
    let mut o = String::new();
    for region in REGIONS {
        for t in times(region) {
            o.push_str(&format!(
                "llm_canary_build_info{{{},version=\"1\"}} 1 {t}\n",
                labels(region)
            ));
        }
    }
    let failing = |target: &str, region: &str| target == "only-ap" && region == "ap";
    for outcome in ["ok", "http_error"] {
        for region in REGIONS {
            for target in ["only-ap", "steady"] {
                let counts = outcome == "ok" && !failing(target, region)
                    || outcome == "http_error" && failing(target, region);
                for (n, t) in times(region).enumerate() {
                    let n = if counts { n + 1 } else { 0 };
                    o.push_str(&format!(
                        "llm_canary_probe_runs_total{{{},model=\"m-7b\",outcome=\"{outcome}\",probe=\"p\",target=\"{target}\"}} {n} {t}\n",
                        labels(region)
                    ));
                }
            }
        }
    }
    for region in REGIONS {
        for target in ["only-ap", "steady"] {
            for t in times(region) {
                o.push_str(&format!(
                    "llm_canary_last_run_timestamp_seconds{{{},model=\"m-7b\",probe=\"p\",target=\"{target}\"}} {t} {t}\n",
                    labels(region)
                ));
            }
        }
    }
    o.push_str("# EOF\n");
    o
}

/// A Prometheus holding [`written`] up to now, and the page reading it.
async fn ap_stopped(ago: u64) -> (Service, Page, u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let prom = services::prometheus_with_rules(&[], &[], Some(&written(now, ago))).await;
    let page = Page::start(&prom.url()).await;
    (prom, page, now)
}

fn rfc3339(secs: u64) -> String {
    jiff::Timestamp::from_second(secs as i64)
        .unwrap()
        .to_string()
}

fn target<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["target"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

fn location<'a>(t: &'a Value, region: &str) -> &'a Value {
    t["locations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["location"] == region)
        .unwrap_or_else(|| panic!("no {region} in {t}"))
}

/// ap's last sample 2.5 cadences ago: silent since then; us, one cadence late, is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_that_stops_writing_is_silent_within_two_cadences() {
    let (_prom, page, now) = ap_stopped(CADENCE * 5 / 2).await;
    let v: Value = serde_json::from_str(&get(&page.url("/api/v1/fleet")).await).unwrap();
    // The page read the store at most this long after the last sample was written.
    let read_at: jiff::Timestamp = v["generated_at"].as_str().unwrap().parse().unwrap();
    assert!(
        read_at.as_second() - (now as i64) < CADENCE as i64 / 2,
        "the page read the store too late for this test's margins: {v}"
    );
    for name in ["only-ap", "steady"] {
        let t = target(&v, name);
        assert_eq!(t["locations_silent"], 1, "{t}");
        let ap = location(t, "ap");
        assert_eq!(ap["silent"], true, "{ap}");
        assert_eq!(ap["silent_since"], rfc3339(now - CADENCE * 5 / 2), "{ap}");
        for region in ["eu", "us"] {
            let l = location(t, region);
            assert_eq!(
                (&l["silent"], &l["silent_since"]),
                (&Value::Bool(false), &Value::Null),
                "{l}"
            );
            assert_eq!(l["state"], "up", "{l}");
        }
    }
    let t = target(&v, "only-ap");
    assert_eq!(
        (&t["state"], &t["locations_failing"]),
        (&"degraded".into(), &1.into()),
        "{t}"
    );
    assert_eq!(location(t, "ap")["state"], "down", "{t}");
    let html = get(&page.url("/")).await;
    assert!(
        html.contains("<p class=\"quiet\" data-location=\"ap\">"),
        "{html}"
    );
    assert!(
        html.contains(
            "data-target=\"only-ap\" data-location=\"ap\" data-state=\"down\" data-silent>"
        ),
        "{html}"
    );
    assert!(
        html.contains("1 of 3 locations failing, 1 silent"),
        "{html}"
    );
    assert!(
        !html.contains("data-location=\"us\" data-state=\"up\" data-silent"),
        "{html}"
    );
}

/// ap stopped four minutes ago, past the 3 minutes the state reads: the target only it failed
/// stays degraded ("1 of 3 failing, 1 silent"), never up; the page says so at its top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_location_gone_quiet_keeps_counting_as_failing() {
    let (_prom, page, now) = ap_stopped(240).await;
    let v: Value = serde_json::from_str(&get(&page.url("/api/v1/fleet")).await).unwrap();
    let t = target(&v, "only-ap");
    assert_eq!(t["state"], "degraded", "only-ap turned {}: {t}", t["state"]);
    assert_eq!(
        (&t["locations_failing"], &t["locations_silent"]),
        (&1.into(), &1.into()),
        "{t}"
    );
    let ap = location(t, "ap");
    assert_eq!(
        (&ap["state"], &ap["silent"]),
        (&"down".into(), &true.into()),
        "{ap}"
    );
    assert_eq!(ap["silent_since"], rfc3339(now - 240), "{ap}");
    assert_eq!(ap["success_ratio_3m"], 0.0, "its last 3 minutes: {ap}");
    let steady = target(&v, "steady");
    assert_eq!(steady["state"], "up", "{steady}");
    assert_eq!(location(steady, "ap")["state"], "up", "{steady}");
    let dom = in_browser_silent(&page).await;
    assert!(dom.contains("1 of 3 locations failing, 1 silent"), "{dom}");
    assert!(dom.contains("0 of 3 locations failing, 1 silent"), "{dom}");
    assert!(
        dom.contains(&format!(
            "has written nothing since <span class=\"num\">{}</span>",
            rfc3339(now - 240)
        )),
        "{dom}"
    );
}

/// The page with a silent location in a real browser; the screenshot goes to
/// `target/fleet-page-silent.png`.
async fn in_browser_silent(page: &Page) -> String {
    let url = page.url("/");
    let dom =
        tokio::task::spawn_blocking(move || crate::status_page::chromium(&["--dump-dom"], &url))
            .await
            .unwrap();
    assert!(
        dom.contains("<p class=\"quiet\" data-location=\"ap\">"),
        "{dom}"
    );
    let shot = root().join("target/fleet-page-silent.png");
    crate::status_page::screenshot_to(&page.url("/"), &shot, "1280,700", 10_000).await;
    dom
}

/// A store that does not answer: the page says so with a 503 naming it, in a page that
/// refreshes itself, and stays up; the JSON is a JSON error.
#[tokio::test]
async fn an_unreachable_store_is_a_503_that_names_it() {
    let store = format!("http://127.0.0.1:{}", common::closed_port());
    let page = Page::start(&store).await;
    let r = reqwest::get(page.url("/")).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    let html = r.text().await.unwrap();
    assert!(
        html.contains("<meta http-equiv=\"refresh\" content=\"30\">"),
        "{html}"
    );
    assert!(
        html.contains("store unreachable") && html.contains(&store),
        "{html}"
    );
    assert!(
        html.contains("has failed every reading since <span id=\"unavailable-since\""),
        "{html}"
    );
    let r = reqwest::get(page.url("/api/v1/fleet")).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    let text = v["error"].as_str().unwrap();
    assert!(
        text.starts_with("The fleet status is unavailable: the store at ") && text.contains(&store),
        "{text}"
    );
    // One sentence: the store and why, not the query string.
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(!text.contains("api/v1/query"), "{text}");
    let since: jiff::Timestamp = v["unavailable_since"].as_str().unwrap().parse().unwrap();
    assert!(since <= jiff::Timestamp::now(), "{v}");
    assert!(
        html.contains(&since.to_string()[..19]),
        "the page and the JSON agree: {html}"
    );
    assert_eq!(
        reqwest::get(page.url("/healthz")).await.unwrap().status(),
        200
    );
    assert_eq!(reqwest::get(page.url("/nope")).await.unwrap().status(), 404);
}

/// Credentials in --prometheus are refused at start (exit 2), without repeating them.
#[tokio::test]
async fn credentials_in_the_store_url_are_refused() {
    let mut cmd = common::bin();
    cmd.args([
        "status-page",
        "--prometheus",
        "http://u:hunter2@127.0.0.1:9/",
    ]);
    let out = common::output(cmd).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--prometheus must not carry credentials"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// The recording rules' promtool unit test.
#[test]
fn the_recording_rules_pass_their_promtool_test() {
    let out = Command::new(binary("promtool", "prometheus"))
        .args(["test", "rules"])
        .arg(root().join("deploy/prometheus/tests/status_page_test.yml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
