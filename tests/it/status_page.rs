//! The status page in a real browser: the daemon (a real process) probes healthy, slow, failing,
//! flaky and maintenance targets on the sim, on top of a week of history it rebuilds from a
//! rotated results log; headless Chromium renders `/`, and every state, uptime, figure and
//! failure in the rendered DOM is checked against the results log the daemon wrote. The
//! screenshot is saved to `target/status-page.png`.

use crate::common;
mod incidents;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::daemon::Daemon;
use common::services::{self, eventually, get, sample};
use llm_canary::testing::daemon::status_page::{percent, when};
use llm_canary::testing::sim::Sim;
use regex::Regex;
use serde_json::Value;

const TOKEN_ENV: &str = "LLM_CANARY_TEST_STATUS_ADMIN_TOKEN";
const TOKEN: &str = "adm-s3cret-token";
const PROBE: &str = "name: p\nschedule: \"*/2 * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ncache_bust: prefix\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 5s}\nchecks: {expect: \"(?i)paris\"}\n";
const HOSTILE: &str =
    "HTTP 502: <script>alert('x')</script><img src=x onerror=alert(1)> & \"quotes\"";

/// Headless Chromium with a fresh profile, killed after a minute at most.
pub fn chromium(args: &[&str], url: &str) -> String {
    let bin = services::chromium();
    let profile = common::TempDir::new("chromium");
    let out = Command::new("timeout")
        .args(["-k", "5", "60", &bin])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Headless Chromium's screenshot of `url` at `window` ("width,height") written to `path`,
/// which must be a PNG of at least `min_bytes` (a blank page is far smaller).
pub async fn screenshot_to(url: &str, path: &Path, window: &str, min_bytes: usize) {
    let _ = std::fs::remove_file(path);
    let (shot, url, window) = (path.to_path_buf(), url.to_string(), window.to_string());
    tokio::task::spawn_blocking(move || {
        chromium(
            &[
                &format!("--screenshot={}", shot.display()),
                &format!("--window-size={window}"),
            ],
            &url,
        )
    })
    .await
    .unwrap();
    let png = std::fs::read(path).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > min_bytes,
        "{} bytes",
        png.len()
    );
}

/// A week of one pair's history, every 20 minutes, a hostile failure every 7th run; before it, a
/// day a fortnight (85 days ago to 15), four hourly runs each, the second failing.
fn seeded_history(now: jiff::Timestamp) -> (String, String) {
    let (mut older, mut newer) = (String::new(), String::new());
    for day in (15..=85).rev().step_by(14) {
        for h in 0..4 {
            let at = now - jiff::SignedDuration::from_hours(24 * day - h);
            let ok = h != 1;
            let line = serde_json::json!({
                "probe": "p", "target": "healthy", "model": "m", "request_id": format!("seed-old-{day}-{h}"),
                "started_at": at.to_string(), "outcome": if ok { "ok" } else { "timeout" },
                "success": ok, "http_status": 200, "ttft_ms": 100.0 + (day + h) as f64,
                "tokens_per_second": 70.0, "warmup": false, "maintenance": false,
                "trace_id": "", "error": if ok { None } else { Some("no first token within 5s") },
            });
            older.push_str(&format!("{line}\n"));
        }
    }
    for i in 0..(7 * 72 - 2) {
        let at = now - jiff::SignedDuration::from_mins(20 * (7 * 72 - 1 - i));
        let ok = i % 7 != 3;
        let line = serde_json::json!({
            "probe": "p", "target": "healthy", "model": "m", "request_id": format!("seed-{i}"),
            "started_at": at.to_string(), "outcome": if ok { "ok" } else { "http_error" },
            "success": ok, "http_status": if ok { 200 } else { 502 }, "ttft_ms": 40.0 + i as f64,
            "tokens_per_second": 80.0, "warmup": false, "maintenance": false,
            "trace_id": format!("{i:032x}"), "error": if ok { None } else { Some(HOSTILE) },
        });
        let file = if i < 300 { &mut older } else { &mut newer };
        file.push_str(&format!("{line}\n"));
    }
    (older, newer)
}

fn log_records(dir: &Path) -> Vec<Value> {
    ["results.jsonl.1", "results.jsonl"]
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            // A line counts once its newline is written: the daemon may be writing the next.
            let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            complete
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// DOM text back to what it says.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// `312 ms` or `1.25 s` in milliseconds, and half the unit it was written to.
fn parse_ms(s: &str) -> (f64, f64) {
    let (v, unit) = s.split_once(' ').unwrap();
    let decimals = v.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let half = 0.5 * 10f64.powi(-decimals);
    let scale = if unit == "s" { 1000.0 } else { 1.0 };
    (v.parse::<f64>().unwrap() * scale, half * scale)
}

fn nearest_rank(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((q * v.len() as f64).ceil() as usize).max(1) - 1]
}

struct Expected {
    state: &'static str,
    recent: (usize, usize),
    uptime: [String; 3],
    latest: Option<(f64, f64, f64)>,
}

/// What the page must say of one pair, computed from the log alone.
fn expected(records: &[&Value], now: jiff::Timestamp, in_window: bool) -> Expected {
    let at = |r: &Value| {
        r["started_at"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
    };
    let nb = now.as_second().div_euclid(300);
    let nh = now.as_second().div_euclid(3600);
    let uptime = |keep: &dyn Fn(i64) -> bool| {
        let counted: Vec<&&Value> = records
            .iter()
            .filter(|r| keep(at(r).as_second()) && r["maintenance"] == false)
            .collect();
        let ok = counted.iter().filter(|r| r["success"] == true).count();
        percent((!counted.is_empty()).then(|| ok as f64 / counted.len() as f64))
    };
    let recent: Vec<&&Value> = records.iter().rev().take(5).collect();
    let failed = recent.iter().filter(|r| r["success"] == false).count();
    // The page's rule: down at two failures in a row, degraded at one, up at a success.
    let in_a_row = recent.iter().take_while(|r| r["success"] == false).count();
    let state = match (in_window, recent.len(), in_a_row) {
        (true, _, _) => "maintenance",
        (_, 0, _) => "pending",
        (_, _, 0) => "up",
        (_, _, 1) => "degraded",
        _ => "down",
    };
    let slot = |r: &Value| at(r).as_second().div_euclid(300);
    let latest = records
        .iter()
        .rev()
        .find(|r| r["ttft_ms"].is_number() && r["warmup"] == false)
        .map(|last| {
            let in_slot: Vec<&&Value> = records.iter().filter(|r| slot(r) == slot(last)).collect();
            let ttft: Vec<f64> = in_slot
                .iter()
                .filter(|r| r["warmup"] == false)
                .filter_map(|r| r["ttft_ms"].as_f64())
                .collect();
            let tps: Vec<f64> = in_slot
                .iter()
                .filter_map(|r| r["tokens_per_second"].as_f64())
                .collect();
            let mean = tps.iter().sum::<f64>() / tps.len() as f64;
            (
                nearest_rank(ttft.clone(), 0.5),
                nearest_rank(ttft, 0.95),
                mean,
            )
        });
    Expected {
        state,
        recent: (failed, recent.len()),
        uptime: [
            uptime(&|s| s.div_euclid(300) > nb - 12 && s.div_euclid(300) <= nb),
            uptime(&|s| s.div_euclid(300) > nb - 288 && s.div_euclid(300) <= nb),
            uptime(&|s| s.div_euclid(3600) > nh - 168 && s.div_euclid(3600) <= nh),
        ],
        latest,
    }
}

async fn admin(port: u16, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut req = client
        .post(format!("http://127.0.0.1:{port}{path}"))
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[test]
fn the_page_in_a_real_browser_says_what_the_results_log_says() {
    // Set before the runtime starts a thread: changing the environment races its readers.
    common::with_env(
        &[(TOKEN_ENV, TOKEN)],
        the_page_in_a_real_browser_says_what_the_results_log_says_body(),
    );
}

async fn the_page_in_a_real_browser_says_what_the_results_log_says_body() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let targets = [
        ("healthy", "healthy"),
        ("slow", "healthy,ttft=300ms"),
        ("failing", "http-500"),
        ("flaky", "http-500,every=2"),
        ("looping", "repetition"),
        ("deploying", "reset"),
        ("nightly", "healthy"),
    ];
    let mut yaml = format!(
        "agent:\n  name: status-test\n  listen: 0.0.0.0:{port}\n  results_log: results.jsonl\n  admin_token_env: {TOKEN_ENV}\ntargets:\n"
    );
    for (name, scenario) in targets {
        yaml.push_str(&format!(
            "  - {{name: {name}, base_url: \"{}\", model: m}}\n",
            sim.base_url(scenario)
        ));
    }
    yaml.push_str("maintenance:\n  - {targets: [nightly], schedule: \"* * * * *\", duration: 1h, reason: nightly reindex}\n");
    let (older, newer) = seeded_history(jiff::Timestamp::now());
    let d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
            ("results.jsonl.1", &older),
            ("results.jsonl", &newer),
        ],
        port,
        &[],
    );
    services::wait_ready(&d.url("/healthz"), Duration::from_secs(30)).await;

    // The admin guard: not loopback-only, so the token is needed, and compared whole.
    let body = r#"{"target": "deploying", "duration": "30m", "reason": "deploy <v2>"}"#;
    assert_eq!(admin(port, "/-/maintenance", None, body).await.0, 401);
    let wrong = admin(port, "/-/maintenance", Some("adm-s3cret-toke"), body).await;
    assert_eq!(wrong.0, 401);
    assert!(!wrong.1.contains(TOKEN));
    assert_eq!(admin(port, "/-/reload", Some("wrong"), "").await.0, 401);
    let (status, text) = admin(port, "/-/maintenance", Some(TOKEN), body).await;
    assert_eq!(status, 200, "{text}");
    assert!(!d.log().contains(TOKEN), "the token was logged");

    // Enough runs of every pair for the recent-runs rule, then no more: a reload without a
    // schedule freezes the log while the page is read.
    let dir = d.dir.path().to_path_buf();
    eventually("six runs of each target", Duration::from_secs(60), || {
        let records = log_records(&dir);
        let done = targets.iter().all(|(t, _)| {
            records
                .iter()
                .filter(|r| {
                    r["target"] == *t
                        && r["request_id"]
                            .as_str()
                            .is_some_and(|id| !id.starts_with("seed-"))
                })
                .count()
                >= 6
        });
        async move { done.then_some(()) }
    })
    .await;
    d.dir.write(&[(
        "probes/p.yaml",
        &PROBE.replace("schedule: \"*/2 * * * * *\"\n", ""),
    )]);
    let (status, text) = admin(port, "/-/reload", Some(TOKEN), "").await;
    assert_eq!(status, 200, "{text}");
    eventually("no run in flight", Duration::from_secs(20), || async {
        let h: Value = serde_json::from_str(&get(&d.url("/healthz")).await).ok()?;
        (h["runs_in_flight"] == 0).then_some(())
    })
    .await;

    let url = d.url("/");
    let dom = tokio::task::spawn_blocking(move || chromium(&["--dump-dom"], &url))
        .await
        .unwrap();
    let screenshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/status-page.png");
    std::fs::write(screenshot.with_extension("html"), &dom).unwrap();
    screenshot_to(&d.url("/"), &screenshot, "1280,2200", 20_000).await;

    let records = log_records(&dir);
    check_dom(&dom, &records, d.log());
    incidents::check(&d, &dom, &records).await;

    // The JSON says what the page says; the gauge and the records carry the windows.
    let api: Value = serde_json::from_str(&get(&d.url("/api/v1/status")).await).unwrap();
    for t in api["targets"].as_array().unwrap() {
        let name = t["target"].as_str().unwrap();
        let state = t["probes"][0]["state"].as_str().unwrap();
        assert!(
            dom.contains(&format!(
                "data-target=\"{name}\" data-probe=\"p\" data-state=\"{state}\""
            )),
            "{name}: {state}"
        );
    }
    for (target, says) in [
        ("failing", ">down 0.00%</text>"),
        ("nightly", ">maintenance</text>"),
        ("slow", ">up 100.00%</text>"),
    ] {
        let r = reqwest::get(d.url(&format!("/badge/{target}.svg")))
            .await
            .unwrap();
        assert_eq!(r.headers()["content-type"], "image/svg+xml");
        let svg = r.text().await.unwrap();
        assert!(
            svg.contains(says) && svg.contains(&format!(">{target}</text>")),
            "{svg}"
        );
    }
    let looping = api["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["target"] == "looping")
        .unwrap();
    let failure = &looping["probes"][0]["failures"][0];
    assert_eq!(failure["outcome"], "repetition", "{failure}");
    assert!(failure["detector"].is_string(), "{failure}");
    assert_eq!(failure["failed_checks"][0], "repetition", "{failure}");
    let sentence = failure["error"].as_str().unwrap();
    assert!(
        sentence.starts_with(&format!(
            "repetition, detector {}: ",
            failure["detector"].as_str().unwrap()
        )),
        "{sentence}"
    );
    let r = reqwest::get(d.url("/badge/nope.svg")).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let metrics = get(&d.url("/metrics")).await;
    for (t, on) in [
        ("deploying", 1.0),
        ("nightly", 1.0),
        ("healthy", 0.0),
        ("failing", 0.0),
    ] {
        let label = format!("target=\"{t}\"");
        assert_eq!(
            sample(&metrics, "llm_canary_maintenance", &[&label]),
            Some(on),
            "{t}"
        );
    }
    let flagged = |t: &str| {
        records
            .iter()
            .filter(|r| r["target"] == t && r["maintenance"] == true)
            .count()
    };
    assert!(flagged("deploying") >= 1 && flagged("healthy") == 0);
    assert_eq!(
        flagged("nightly"),
        records.iter().filter(|r| r["target"] == "nightly").count()
    );
    check_probe_on_demand(&d).await;
}

fn check_dom(dom: &str, records: &[Value], log: String) {
    let generated = Regex::new(r#"<span id="generated">([^<]+)</span>"#).unwrap();
    let shown = &generated.captures(dom).expect("generated time")[1];
    let now: jiff::Timestamp = shown.parse().expect("an RFC 3339 time");
    assert!(
        !dom.contains("<script>alert"),
        "hostile markup became markup"
    );
    let row = Regex::new(r#"(?s)<tr class="pair" data-target="([^"]+)" data-probe="p" data-state="([a-z]+)">(.*?)</tr>"#).unwrap();
    let rows: HashMap<String, (String, String)> = row
        .captures_iter(dom)
        .map(|c| (c[1].to_string(), (c[2].to_string(), c[3].to_string())))
        .collect();
    assert_eq!(rows.len(), 7, "{dom}");
    let cell = |html: &str, re: &str| {
        Regex::new(re)
            .unwrap()
            .captures(html)
            .map(|c| c[1].to_string())
    };
    for (target, (state, html)) in &rows {
        let mine: Vec<&Value> = records
            .iter()
            .filter(|r| r["target"] == target.as_str())
            .collect();
        let want = expected(&mine, now, target == "deploying" || target == "nightly");
        assert_eq!(state, want.state, "{target}'s state\n{log}");
        assert_eq!(
            cell(html, r#"<small class="recent">(\d+ of last \d+) failed"#).unwrap(),
            format!("{} of last {}", want.recent.0, want.recent.1),
            "{target}"
        );
        for (i, w) in ["1h", "24h", "7d"].iter().enumerate() {
            let got = cell(
                html,
                &format!(r#"data-window="{w}"[^>]*>([^<]+)(?:<br>|</td>)"#),
            )
            .unwrap();
            assert_eq!(got, want.uptime[i], "{target} uptime {w}");
        }
        match want.latest {
            Some((p50, p95, tps)) => {
                for (class, want) in [("ttft-p50", p50), ("ttft-p95", p95)] {
                    let (got, half) = parse_ms(
                        &cell(html, &format!(r#"<span class="{class}">([^<]+)</span>"#)).unwrap(),
                    );
                    assert!(
                        (got - want).abs() <= half + want * 1e-3,
                        "{target} {class}: page {got}, log {want}"
                    );
                }
                let got: f64 = cell(html, r#"<span class="tps">([^<]+)</span>"#)
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(
                    (got - tps).abs() <= 0.05 + tps * 1e-3,
                    "{target} tokens/s: page {got}, log {tps}"
                );
                assert!(
                    html.matches("<path d=\"M").count() >= 3,
                    "{target}: TTFT and decode charts"
                );
            }
            None => assert!(html.contains("no TTFT yet"), "{target}"),
        }
    }
    // Slow is slow, on the page as in the log.
    let p50 = |t: &str| {
        parse_ms(&cell(&rows[t].1, r#"<span class="ttft-p50">([^<]+)</span>"#).unwrap()).0
    };
    assert!(p50("slow") >= 300.0 && p50("healthy") < 300.0);
    let target_state = |t: &str| {
        cell(
            dom,
            &format!(r#"<tr class="target" data-target="{t}" data-state="([a-z]+)""#),
        )
        .unwrap()
    };
    assert_eq!(target_state("failing"), "down");
    assert_eq!(target_state("deploying"), "maintenance");
    assert!(
        dom.contains("maintenance until")
            && dom.contains("nightly reindex")
            && dom.contains("deploy &lt;v2&gt; (announced)")
    );

    // The failures table: each pair's last five failures, merged, newest first, at most 20.
    let mut want: Vec<&Value> = Vec::new();
    for t in rows.keys() {
        let f: Vec<&Value> = records
            .iter()
            .filter(|r| r["target"] == t.as_str() && r["success"] == false)
            .collect();
        want.extend(f.iter().rev().take(5));
    }
    // Newest first; runs that started at the same instant by target name.
    let key = |r: &Value| {
        (
            r["started_at"]
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .unwrap(),
            r["target"].as_str().unwrap().to_string(),
        )
    };
    want.sort_by(|a, b| key(b).0.cmp(&key(a).0).then(key(a).1.cmp(&key(b).1)));
    want.truncate(20);
    let failure = Regex::new(r#"(?s)<tr class="failure"><td class="num">([^<]+)(?:<br><small>in maintenance</small>)?</td><td class="f-target">([^<]*)</td><td class="f-probe">p</td><td class="f-outcome">([^<]*)</td><td class="f-http num">(\d*)</td><td><code class="f-request-id">([^<]*)</code></td><td><code class="f-trace-id">([^<]*)</code></td><td class="err"><span class="f-error">([^<]*)</span>(?:<br><small class="f-checks">failed checks: ([^<]*)</small>)?</td></tr>"#).unwrap();
    let got: Vec<_> = failure.captures_iter(dom).collect();
    assert_eq!(got.len(), want.len());
    for (c, r) in got.iter().zip(&want) {
        let started: jiff::Timestamp = r["started_at"].as_str().unwrap().parse().unwrap();
        assert_eq!(&c[1], when(started), "{r}");
        assert_eq!(
            (&c[2], &c[3]),
            (
                r["target"].as_str().unwrap(),
                r["outcome"].as_str().unwrap()
            )
        );
        assert_eq!(c[4].parse::<u64>().ok(), r["http_status"].as_u64());
        assert_eq!(
            (&c[5], &c[6]),
            (
                r["request_id"].as_str().unwrap(),
                r["trace_id"].as_str().unwrap()
            )
        );
        assert_eq!(
            unescape(&c[7]),
            llm_canary::testing::util::clip(r["error"].as_str().unwrap_or(""))
        );
        // Several failed checks are all named.
        let checks: Vec<&str> = r["failed_checks"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c.as_str()).collect())
            .unwrap_or_default();
        let shown = c.get(8).map(|m| m.as_str());
        assert_eq!(
            shown,
            (checks.len() > 1).then(|| checks.join(", ")).as_deref(),
            "{r}"
        );
    }
    assert!(
        got.iter().any(|c| unescape(&c[7]) == HOSTILE),
        "the seeded hostile error is listed as text"
    );
    // A content failure has its sentence as much as an HTTP error: the detector that found
    // the loop, in words, and no generated text (the daemon quotes none).
    let looped: Vec<String> = got
        .iter()
        .filter(|c| &c[3] == "repetition")
        .map(|c| unescape(&c[7]))
        .collect();
    assert!(
        !looped.is_empty(),
        "the looping target's failures are listed"
    );
    for e in &looped {
        let detector = e
            .strip_prefix("repetition, detector ")
            .map(|d| d.split(':').next());
        assert!(
            matches!(
                detector,
                Some(Some("item_cycle" | "tail_loop" | "lines" | "ngrams"))
            ),
            "{e}"
        );
    }
}

/// `/probe` runs a configured pair now (the schedule is gone) and answers with its series; it
/// refuses names the config does not have.
async fn check_probe_on_demand(d: &Daemon) {
    let runs = |text: &str| {
        sample(
            text,
            "llm_canary_probe_runs_total",
            &["target=\"healthy\"", "outcome=\"ok\""],
        )
        .unwrap_or(0.0)
    };
    let before = runs(&get(&d.url("/metrics")).await);
    let text = get(&d.url("/probe?target=healthy&probe=p")).await;
    assert_eq!(runs(&text), before + 1.0, "{text}");
    assert!(
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .all(|l| l.contains("target=\"healthy\"")),
        "{text}"
    );
    assert_eq!(sample(&text, "llm_canary_probe_success", &[]), Some(1.0));
    for (query, says) in [
        (
            "target=nope&probe=p",
            "unknown target \"nope\" (known: healthy, slow, failing, flaky, looping, deploying, nightly)",
        ),
        ("target=healthy&probe=q", "unknown probe \"q\" (known: p)"),
        ("target=healthy", "usage: /probe?target=T&probe=P"),
    ] {
        let r = reqwest::get(d.url(&format!("/probe?{query}")))
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400);
        assert!(r.text().await.unwrap().contains(says), "{query}");
    }
}

/// HEAD of `url` answers what GET does, status and headers, without a body.
async fn head_is_get_without_the_body(url: &str) -> u16 {
    let http = reqwest::Client::new();
    let got = http.get(url).send().await.unwrap();
    let head = http.head(url).send().await.unwrap();
    assert_eq!(head.status(), got.status(), "{url}");
    for name in ["content-type", "cache-control", "www-authenticate"] {
        assert_eq!(
            head.headers().get(name),
            got.headers().get(name),
            "{name} of {url}"
        );
    }
    assert!(
        head.headers().contains_key("content-length"),
        "HEAD {url}: {:?}",
        head.headers()
    );
    let status = got.status().as_u16();
    assert!(!got.bytes().await.unwrap().is_empty(), "GET {url}");
    assert!(head.bytes().await.unwrap().is_empty(), "HEAD {url}");
    status
}

/// Load balancers and uptime checkers ask with HEAD: the agent's endpoints and the fleet page
/// answer it wherever they answer GET, `/healthz` first.
#[tokio::test(flavor = "multi_thread")]
async fn head_is_answered_wherever_get_is() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let d = Daemon::start(
        &[
            (
                "llm-canary.yaml",
                &format!(
                    "agent:\n  listen: 127.0.0.1:{port}\ntargets:\n  - {{name: t, base_url: \"{}\", model: m}}\n",
                    sim.base_url("healthy")
                ),
            ),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    services::wait_ready(&d.url("/healthz"), Duration::from_secs(20)).await;
    for (path, status) in [
        ("/healthz", 200),
        ("/", 200),
        ("/api/v1/status", 200),
        ("/api/v1/incidents", 200),
        ("/api/v1/history?target=t&window=30d&metric=uptime", 200),
        ("/api/v1/history?window=7d", 400),
        ("/feed.atom", 200),
        ("/feed/t.atom", 200),
        ("/badge/t.svg", 200),
        ("/metrics", 200),
        ("/badge/nope.svg", 404),
        ("/nope", 404),
    ] {
        assert_eq!(
            head_is_get_without_the_body(&d.url(path)).await,
            status,
            "{path}"
        );
    }

    // The fleet page, on a store that does not answer: its 503 as much as its 200 and 404.
    let store = format!("http://127.0.0.1:{}", common::closed_port());
    let page_port = services::free_port();
    let mut page = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["status-page", "--prometheus", &store, "--listen"])
        .arg(format!("127.0.0.1:{page_port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = |path: &str| format!("http://127.0.0.1:{page_port}{path}");
    services::wait_ready(&url("/healthz"), Duration::from_secs(20)).await;
    for (path, status) in [
        ("/healthz", 200),
        ("/", 503),
        ("/api/v1/fleet", 503),
        ("/nope", 404),
    ] {
        assert_eq!(
            head_is_get_without_the_body(&url(path)).await,
            status,
            "{path}"
        );
    }
    let _ = page.kill();
    let _ = page.wait();
}
