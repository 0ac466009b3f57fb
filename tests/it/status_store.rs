//! The status store (`status.store`), on the real daemon: 90 days of 100 pairs survive a restart
//! byte for byte in the page's JSON with the results log gone; SIGKILLs at random moments while
//! runs land every second leave a database that passes its integrity check and a daemon that
//! starts, with the runs lost measured; a full disk is counted and logged while probing goes on;
//! a corrupt or foreign file is refused with its path.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use common::daemon::Daemon;
use common::services::{eventually, free_port, get, sample, signal};
use llm_canary::testing::sim::Sim;
use serde_json::Value;

/// The library the `faketime` package's wrapper preloads.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn agent(port: u16, extra: &str) -> String {
    format!(
        "agent: {{name: store-test, listen: \"127.0.0.1:{port}\", concurrency: 16, results_log: results.jsonl, results_log_max_bytes: 1073741824}}\nstatus: {{store: state/status.db}}\n{extra}"
    )
}

fn targets(sim: &Sim, scenarios: &[(&str, &str)]) -> String {
    let mut s = "targets:\n".to_string();
    for (name, scenario) in scenarios {
        s.push_str(&format!(
            "  - {{name: {name}, base_url: \"{}\", model: m, server: vllm}}\n",
            sim.base_url(scenario)
        ));
    }
    s
}

fn probe(name: &str, schedule: &str) -> String {
    format!("name: {name}\nschedule: \"{schedule}\"\nprompt: q.txt\nmax_tokens: 16\ntimeouts: {{connect: 1s, ttft: 2s, stall: 2s, total: 4s}}\nchecks: {{expect: \"(?i)paris\"}}\n")
}

/// The daemon on `yaml` with two probes firing every second on each target.
fn every_second(yaml: &str, port: u16) -> Daemon {
    let (p1, p2) = (probe("p1", "* * * * * *"), probe("p2", "* * * * * *"));
    let files = [
        ("llm-canary.yaml", yaml),
        ("probes/p1.yaml", p1.as_str()),
        ("probes/p2.yaml", p2.as_str()),
        ("prompts/q.txt", "What is the capital of France?"),
    ];
    Daemon::start(&files, port, &[])
}

/// Waits until the daemon answers /healthz, or fails with its log.
async fn until_up(d: &mut Daemon) {
    let limit = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = d.child.try_wait() {
            panic!("the daemon exited ({status}) at start:\n{}", d.log());
        }
        if !get(&d.url("/healthz")).await.is_empty() {
            return;
        }
        assert!(Instant::now() < limit, "no /healthz in 120 s:\n{}", d.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops `d` (SIGTERM, or SIGKILL) and hands back its folder.
fn stop(mut d: Daemon, sig: &str) -> common::TempDir {
    signal(d.child.id(), sig);
    let status = d.child.wait().unwrap();
    if sig == "TERM" {
        assert!(
            status.success(),
            "exit after SIGTERM: {status}\n{}",
            d.log()
        );
    }
    let dir = common::TempDir::new("unused");
    std::mem::replace(&mut d.dir, dir)
}

/// 90 days of a pair: every 3 hours before the last day, every 5 minutes in it; a failure
/// every 11th run (so incidents open and close), some in maintenance.
fn seed(out: &mut Vec<(i64, String)>, probe: &str, target: &str, now: i64) {
    let mut at: Vec<i64> = (0..288).map(|i| now - 300 * (i + 1) - 7).collect();
    at.extend((8..8 * 90).map(|h| now - 3 * 3600 * h - 61));
    at.sort();
    for (i, t) in at.into_iter().enumerate() {
        let ok = i % 11 != 0;
        let line = serde_json::json!({
            "probe": probe, "target": target, "request_id": format!("seed-{i}"),
            "started_at": jiff::Timestamp::from_second(t).unwrap().to_string(),
            "outcome": if ok { "ok" } else { "http_error" }, "success": ok,
            "http_status": if ok { 200 } else { 503 }, "ttft_ms": 40.0 + (i % 50) as f64 * 1.7,
            "tokens_per_second": 60.0 + (i % 7) as f64, "warmup": false,
            "maintenance": i % 97 == 5, "trace_id": format!("{t:032x}"),
            "error": if ok { None } else { Some(format!("HTTP 503 overloaded ({i})")) },
        });
        out.push((t, format!("{line}\n")));
    }
}

/// The page's JSON: the status, every target's history (both windows, both metrics) and the
/// incidents.
async fn page(d: &Daemon, targets: &[String]) -> Vec<(String, String)> {
    let mut paths = vec![
        "/api/v1/status".to_string(),
        "/api/v1/incidents".to_string(),
    ];
    for t in targets {
        for w in ["30d", "90d"] {
            for m in ["uptime", "ttft_p95"] {
                paths.push(format!("/api/v1/history?target={t}&window={w}&metric={m}"));
            }
        }
    }
    let mut out = Vec::new();
    for p in paths {
        let body = reqwest::get(d.url(&p)).await.unwrap().text().await.unwrap();
        out.push((p, body));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn ninety_days_of_a_hundred_pairs_survive_a_restart_byte_for_byte() {
    assert!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: install the Debian package faketime (apt-get install faketime)"
    );
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    // A frozen wall clock (the monotonic one runs), so both daemons answer as of one instant.
    let frozen = "2026-06-15 12:34:56";
    let now = jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", frozen)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp()
        .as_second();
    let names: Vec<String> = (0..10).map(|t| format!("t{t}")).collect();
    let scenarios: Vec<(&str, &str)> = names
        .iter()
        .map(|n| (n.as_str(), if n == "t9" { "http-503" } else { "healthy" }))
        .collect();
    let mut files = vec![(
        "llm-canary.yaml".to_string(),
        agent(port, &targets(&sim, &scenarios)),
    )];
    // Once a year: nothing fires by itself while the test runs; `/probe` runs pairs now.
    for p in 0..10 {
        files.push((
            format!("probes/p{p}.yaml"),
            probe(&format!("p{p}"), "0 0 1 1 *"),
        ));
    }
    files.push((
        "prompts/q.txt".into(),
        "What is the capital of France?".into(),
    ));
    let mut lines = Vec::new();
    for p in 0..10 {
        for t in &names {
            seed(&mut lines, &format!("p{p}"), t, now);
        }
    }
    lines.sort_by_key(|l| l.0);
    let seeded = lines.len();
    let log: String = lines.into_iter().map(|l| l.1).collect();
    files.push(("results.jsonl.1".into(), log));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    // libfaketime preloaded by `env` (which execs): the daemon is the child the test signals.
    let preload = format!("LD_PRELOAD={LIBFAKETIME}");
    let faked = format!("FAKETIME={frozen}");
    let wrapper = ["env", &preload, &faked, "DONT_FAKE_MONOTONIC=1"];

    // The first start finds no store: it replays the log (as after an upgrade) and saves it.
    let mut d = Daemon::start(&files, port, &wrapper);
    until_up(&mut d).await;
    assert!(
        d.log().contains(&format!("runs={seeded}")),
        "the first start replays the whole log:\n{}",
        d.log()
    );
    // Runs that land while it runs go through the writer: a healthy pair and a failing one.
    for (t, p) in [
        ("t0", "p0"),
        ("t9", "p3"),
        ("t0", "p0"),
        ("t9", "p3"),
        ("t9", "p3"),
    ] {
        let body = get(&d.url(&format!("/probe?target={t}&probe={p}"))).await;
        assert!(body.contains("llm_canary_probe_success"), "{body}");
    }
    let before = page(&d, &names).await;
    let dir = stop(d, "TERM");
    // Without the results log, the store alone must hold the page.
    for f in ["results.jsonl", "results.jsonl.1"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let mut d = Daemon::start_in(dir, port, &wrapper);
    until_up(&mut d).await;
    assert!(d.log().contains("runs=0"), "{}", d.log());
    let after = page(&d, &names).await;

    assert!(
        before[0].1.contains("\"request_id\":\"seed-"),
        "the seeded failures are listed"
    );
    let history: Value = serde_json::from_str(&before[3].1).unwrap();
    let first = &history["points"][0];
    assert!(
        first["runs"].as_u64().unwrap() > 0,
        "90 days back holds runs: {first}"
    );
    let incidents: Value = serde_json::from_str(&before[1].1).unwrap();
    assert!(
        incidents.to_string().contains("t9-"),
        "the live failures opened an incident: {incidents}"
    );
    for ((path, a), (_, b)) in before.iter().zip(&after) {
        assert!(
            a == b,
            "{path} differs after the restart:\nbefore {}\nafter  {}",
            &a[..a.len().min(2000)],
            &b[..b.len().min(2000)]
        );
    }
    println!(
        "{seeded} seeded runs of 100 pairs, 90 days: {} JSON documents identical after a restart from the store alone ({} KiB)",
        before.len(),
        before.iter().map(|p| p.1.len()).sum::<usize>() / 1024
    );
}

/// Runs per pair in the results log (lines that parse).
fn log_runs(dir: &Path) -> std::collections::BTreeMap<(String, String), u64> {
    let mut out = std::collections::BTreeMap::new();
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    for l in text.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(l) {
            let k = (
                v["probe"].as_str().unwrap_or("").to_string(),
                v["target"].as_str().unwrap_or("").to_string(),
            );
            *out.entry(k).or_default() += 1;
        }
    }
    out
}

/// Runs per pair the store's 5-minute slots hold, and its integrity check's answer.
fn store_runs(path: &Path) -> (std::collections::BTreeMap<(String, String), u64>, String) {
    let c = rusqlite::Connection::open(path).unwrap();
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    let mut st = c
        .prepare("SELECT p.probe, p.target, sum(f.runs + f.maintenance) FROM fine f JOIN pair p ON p.id = f.pair GROUP BY p.id")
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok(((r.get(0)?, r.get(1)?), r.get::<_, i64>(2)? as u64))
        })
        .unwrap();
    (rows.map(Result::unwrap).collect(), check)
}

/// Runs per pair the page shows over its last 24 hours.
fn page_runs(status: &str) -> std::collections::BTreeMap<(String, String), u64> {
    let v: Value = serde_json::from_str(status).unwrap();
    let mut out = std::collections::BTreeMap::new();
    let text = v.to_string();
    // Every pair object carries probe, target and last_24h.
    fn walk(v: &Value, out: &mut std::collections::BTreeMap<(String, String), u64>) {
        match v {
            Value::Object(m) => {
                if let (Some(p), Some(t), Some(day)) =
                    (m.get("probe"), m.get("target"), m.get("last_24h"))
                {
                    let n = day["runs"].as_u64().unwrap_or(0)
                        + day["maintenance"].as_u64().unwrap_or(0);
                    out.insert(
                        (
                            p.as_str().unwrap_or("").into(),
                            t.as_str().unwrap_or("").into(),
                        ),
                        n,
                    );
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&v, &mut out);
    assert!(
        !out.is_empty(),
        "no pair in {}",
        &text[..text.len().min(500)]
    );
    out
}

fn missing(
    truth: &std::collections::BTreeMap<(String, String), u64>,
    kept: &std::collections::BTreeMap<(String, String), u64>,
) -> (u64, u64) {
    let (mut lost, mut extra) = (0, 0);
    for (k, n) in truth {
        let m = kept.get(k).copied().unwrap_or(0);
        lost += n.saturating_sub(m);
        extra += m.saturating_sub(*n);
    }
    (lost, extra)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkills_at_random_moments_leave_a_sound_store_and_a_daemon_that_starts() {
    const KILLS: usize = 20;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    let yaml = agent(
        port,
        &targets(&sim, &[("up", "healthy"), ("down", "http-503")]),
    );
    let mut d = every_second(&yaml, port);
    let db = d.dir.path().join("state/status.db");
    let (mut store_lost, mut store_extra, mut runs) = (0, 0, 0);
    for kill in 0..KILLS {
        until_up(&mut d).await;
        if kill > 0 {
            // The page after a restart: the store, and the log's runs it lacks.
            let truth = log_runs(d.dir.path());
            let shown = page_runs(&get(&d.url("/api/v1/status")).await);
            let (lost, _) = missing(&truth, &shown);
            assert_eq!(
                lost, 0,
                "the page lacks runs the log has: {truth:?} vs {shown:?}"
            );
        }
        // A random moment while runs land (at least one firing in).
        let ms = 1200 + fastrand::u64(..2500);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let dir = stop(d, "KILL");
        let truth = log_runs(dir.path());
        let (kept, check) = store_runs(&db);
        assert_eq!(check, "ok", "integrity_check after SIGKILL {kill}");
        let (lost, extra) = missing(&truth, &kept);
        store_lost += lost;
        store_extra += extra;
        runs = truth.values().sum::<u64>();
        d = Daemon::start_in(dir, port, &[]);
    }
    until_up(&mut d).await;
    println!(
        "{KILLS} SIGKILLs, {runs} runs in the results log (4 pairs, each every second): the store lacked {store_lost} runs in all at the kills ({:.2} a kill), held {store_extra} the log lacked; the page after each restart lacked none",
        store_lost as f64 / KILLS as f64
    );
    // At most the last few seconds: 4 pairs a second, 3 seconds a kill.
    assert!(
        store_lost <= (KILLS * 12) as u64,
        "{store_lost} runs lost over {KILLS} kills"
    );
}

/// A tmpfs of `size` mounted on a fresh folder (in a temporary one), unmounted on drop.
struct Tmpfs(PathBuf, #[allow(dead_code)] common::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let uid = Command::new("id").arg("-u").output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&uid.stdout).trim(),
            "0",
            "the disk-full test mounts a tmpfs: run it as root (sudo)"
        );
        let dir = common::TempDir::new("tmpfs");
        let at = dir.path().join("small");
        std::fs::create_dir(&at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs failed");
        Tmpfs(at, dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_is_logged_and_counted_and_probing_goes_on() {
    let fs = Tmpfs::mount("1m");
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    let store = fs.0.join("status.db");
    let yaml = format!(
        "agent: {{name: full, listen: \"127.0.0.1:{port}\", results_log: results.jsonl}}\nstatus: {{store: \"{}\"}}\n{}",
        store.display(),
        targets(&sim, &[("up", "healthy"), ("down", "http-503")])
    );
    let mut d = every_second(&yaml, port);
    until_up(&mut d).await;
    // Fill what is left of the tmpfs.
    let mut filler = std::fs::File::create(fs.0.join("filler")).unwrap();
    let chunk = vec![0u8; 4096];
    while std::io::Write::write_all(&mut filler, &chunk).is_ok() {}
    let errors = eventually("a store error counted", Duration::from_secs(30), || async {
        let m = get(&d.url("/metrics")).await;
        sample(&m, "llm_canary_status_store_errors_total", &[]).filter(|v| *v > 0.0)
    })
    .await;
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("cannot write to the status store"))
        .unwrap_or_else(|| panic!("no log line for the failed write:\n{log}"));
    assert!(line.contains(&store.display().to_string()), "{line}");
    assert!(line.contains("disk is full"), "{line}");
    // Probing goes on: more runs after the errors.
    let runs = |m: &str| {
        m.lines()
            .filter(|l| l.starts_with("llm_canary_probe_runs_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let then = runs(&get(&d.url("/metrics")).await);
    eventually(
        "runs after the disk filled",
        Duration::from_secs(20),
        || async {
            let now = runs(&get(&d.url("/metrics")).await);
            (now >= then + 4.0).then_some(now)
        },
    )
    .await;
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon is still up"
    );
    println!("disk full: {errors} store errors counted, probing went on");
    drop(d);
    drop(fs);
}

/// `run` on a config whose store is `contents`: exit 2 and one sentence naming the path.
fn refused(contents: impl FnOnce(&Path)) -> String {
    let dir = common::TempDir::new("store-refused");
    let p = probe("p", "0 0 1 1 *");
    dir.write(&[
        ("llm-canary.yaml", "agent: {name: r, listen: \"127.0.0.1:0\"}\nstatus: {store: status.db}\ntargets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n"),
        ("probes/p.yaml", p.as_str()),
        ("prompts/q.txt", "What is the capital of France?"),
    ]);
    let db = dir.path().join("status.db");
    contents(&db);
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["run", "-c"])
        .arg(dir.path().join("llm-canary.yaml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(&db.display().to_string()),
        "names the path: {err}"
    );
    err
}

#[test]
fn a_corrupt_or_foreign_store_is_refused_naming_its_path() {
    let err = refused(|p| std::fs::write(p, vec![0x5a; 8192]).unwrap());
    assert!(err.contains("not a SQLite database"), "{err}");
    // A truncated database of ours: its header survives, its pages do not.
    let err = refused(|p| {
        let c = rusqlite::Connection::open(p).unwrap();
        c.execute_batch("PRAGMA application_id = 1280068931; CREATE TABLE pair (id INTEGER PRIMARY KEY, probe TEXT, target TEXT, tail TEXT); CREATE TABLE big (x BLOB);").unwrap();
        for _ in 0..50 {
            c.execute("INSERT INTO big VALUES (zeroblob(4000))", [])
                .unwrap();
        }
        drop(c);
        let bytes = std::fs::read(p).unwrap();
        let mut broken = bytes.clone();
        for b in broken.iter_mut().skip(4096).take(8192) {
            *b = 0xa5;
        }
        std::fs::write(p, broken).unwrap();
    });
    assert!(
        err.contains("corrupt") || err.contains("quick check"),
        "{err}"
    );
    let err = refused(|p| {
        let c = rusqlite::Connection::open(p).unwrap();
        c.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    });
    assert!(err.contains("another program"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_moves_the_store_says_it_takes_effect_at_restart() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    let yaml = agent(port, &targets(&sim, &[("up", "healthy")]));
    let p = probe("p", "0 0 1 1 *");
    let files = [
        ("llm-canary.yaml", yaml.as_str()),
        ("probes/p.yaml", p.as_str()),
        ("prompts/q.txt", "What is the capital of France?"),
    ];
    let mut d = Daemon::start(&files, port, &[]);
    until_up(&mut d).await;
    let moved = yaml.replace("state/status.db", "elsewhere/status.db");
    d.dir.write(&[("llm-canary.yaml", moved.as_str())]);
    signal(d.child.id(), "HUP");
    let line = eventually("the reload's warning", Duration::from_secs(20), || async {
        d.log()
            .lines()
            .find(|l| l.contains("status.store changed"))
            .map(str::to_string)
    })
    .await;
    assert!(line.contains("takes effect at restart"), "{line}");
    assert!(
        line.contains("state/status.db"),
        "names the running store: {line}"
    );
    assert!(
        !d.dir.path().join("elsewhere").exists(),
        "the new path is not opened before a restart"
    );
}
