//! Real Prometheus parts for tests: a Pushgateway and a Prometheus server started on free
//! loopback ports and stopped on drop. A missing binary fails the test with what to install.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;

pub struct Service {
    child: Child,
    pub port: u16,
    _dir: Option<TempDir>,
}

impl Service {
    /// A service the test started itself, listening on `port`, killed on drop.
    pub fn from_child(child: Child, port: u16) -> Service {
        Service {
            child,
            port,
            _dir: None,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops it as an operator would (SIGTERM) and waits: Prometheus then writes out what its
    /// write-ahead log still buffers, which a kill would lose.
    pub fn stop(mut self) {
        signal(self.child.id(), "TERM");
        let _ = self.child.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn binary(name: &str, package: &str) -> String {
    let path = format!("/usr/bin/{name}");
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: install the Debian package `{package}` (scripts/test installs it)"
    );
    path
}

/// A headless-capable Chromium or Chrome, wherever Debian or Ubuntu put it, or
/// `$LLM_CANARY_CHROMIUM`: scripts/find-chromium holds the one list, which scripts/test checks
/// too.
pub fn chromium() -> String {
    let script = super::root().join("scripts/find-chromium");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} (scripts/test installs chromium as root)",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits (polling) until `url` answers 200, or panics after `limit`.
pub async fn wait_ready(url: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        if let Ok(r) = reqwest::get(url).await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(
            start.elapsed() < limit,
            "{url} did not become ready within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `check` until it returns `Some`, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn pushgateway_on(port: u16) -> Service {
    let bin = binary("prometheus-pushgateway", "prometheus-pushgateway");
    let child = Command::new(bin)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // Debian's build persists to /var/lib/prometheus by default: every test gateway would
        // start with the last one's metrics. Memory only.
        .arg("--persistence.file=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Pushgateway");
    let s = Service {
        child,
        port,
        _dir: None,
    };
    wait_ready(&format!("{}/-/ready", s.url()), Duration::from_secs(20)).await;
    s
}

pub async fn pushgateway() -> Service {
    pushgateway_on(free_port()).await
}

/// Prometheus scraping `targets` (host:port) every second with `honor_labels: true`.
pub async fn prometheus(targets: &[String]) -> Service {
    prometheus_with_rules(targets, &[], None).await
}

/// The same, evaluating `rule_files` every second.
/// Prometheus with `rule_files`, scraping `targets`; `history`, OpenMetrics text with timestamps,
/// is first written into its storage with `promtool tsdb create-blocks-from openmetrics`, so
/// queries that need hours of the past have it.
pub async fn prometheus_with_rules(
    targets: &[String],
    rule_files: &[std::path::PathBuf],
    history: Option<&str>,
) -> Service {
    let dir = TempDir::new("prom");
    if let Some(text) = history {
        dir.write(&[("history.om", text)]);
        let out = Command::new(binary("promtool", "prometheus"))
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(dir.path().join("history.om"))
            .arg(dir.path().join("data"))
            .output()
            .expect("run promtool");
        assert!(
            out.status.success(),
            "promtool could not backfill the history: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    let rules: Vec<String> = rule_files
        .iter()
        .map(|r| format!("'{}'", r.display()))
        .collect();
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [{}]\nscrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      - targets: [{}]\n",
        rules.join(", "),
        list.join(", ")
    );
    dir.write(&[("prometheus.yml", &config)]);
    let child = start_prometheus(
        &dir.path().join("prometheus.yml"),
        &dir.path().join("data"),
        free_port(),
        &[],
    );
    let s = Service {
        port: child.1,
        child: child.0,
        _dir: Some(dir),
    };
    wait_ready(&format!("{}/-/ready", s.url()), Duration::from_secs(30)).await;
    s
}

/// Prometheus on a whole `prometheus.yml` of the test's own.
pub async fn prometheus_with_config(config: &str) -> Service {
    let dir = TempDir::new("prom");
    dir.write(&[("prometheus.yml", config)]);
    let (child, port) = start_prometheus(
        &dir.path().join("prometheus.yml"),
        &dir.path().join("data"),
        free_port(),
        &[],
    );
    let s = Service {
        port,
        child,
        _dir: Some(dir),
    };
    wait_ready(&format!("{}/-/ready", s.url()), Duration::from_secs(30)).await;
    s
}

/// Prometheus with `config` on `port`, storing in `data`; it also accepts remote writes, so a
/// test can point an agent's `remote_write:` at `/api/v1/write`.
fn start_prometheus(
    config: &std::path::Path,
    data: &std::path::Path,
    port: u16,
    extra: &[String],
) -> (Child, u16) {
    let child = Command::new(binary("prometheus", "prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver")
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start Prometheus");
    (child, port)
}

/// VictoriaMetrics (single node) on `port`, storing in `dir/vm-data` (kept across restarts like
/// the Prometheus receiver's): a second remote-write store, written at `/api/v1/write` and
/// queried with its Prometheus-compatible `/api/v1/query`. Points are searchable at once
/// (`-search.latencyOffset=0s`; its default hides the last 30 s).
pub async fn victoria_metrics_on(dir: &std::path::Path, port: u16) -> Service {
    let child = Command::new(binary("victoria-metrics", "victoria-metrics"))
        .arg(format!(
            "-storageDataPath={}",
            dir.join("vm-data").display()
        ))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-retentionPeriod=1d")
        .arg("-search.latencyOffset=0s")
        .arg("-search.disableCache")
        .arg("-loggerLevel=ERROR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start VictoriaMetrics");
    let s = Service {
        child,
        port,
        _dir: None,
    };
    wait_ready(&format!("{}/health", s.url()), Duration::from_secs(30)).await;
    s
}

/// A remote-write receiver: Prometheus without scrape jobs on `port`, storing in `dir/data`
/// (the folder outlives the process, so a test can stop it and start another on the same
/// data), behind `web_config` (`--web.config.file`, e.g. basic auth) if given. Ready when
/// `/-/ready` answers `ready_auth`'s request.
pub async fn receiver_on(
    dir: &std::path::Path,
    port: u16,
    web_config: Option<&std::path::Path>,
    ready_auth: Option<(&str, &str)>,
) -> Service {
    std::fs::write(dir.join("prometheus.yml"), "global: {}\n").unwrap();
    let extra: Vec<String> = web_config
        .map(|w| format!("--web.config.file={}", w.display()))
        .into_iter()
        .collect();
    let (child, port) =
        start_prometheus(&dir.join("prometheus.yml"), &dir.join("data"), port, &extra);
    let s = Service {
        child,
        port,
        _dir: None,
    };
    let url = format!("{}/-/ready", s.url());
    let client = reqwest::Client::new();
    eventually("the receiver to be ready", Duration::from_secs(30), || {
        let mut req = client.get(&url);
        if let Some((u, p)) = ready_auth {
            req = req.basic_auth(u, Some(p));
        }
        async move {
            let r = req.send().await.ok()?;
            r.status().is_success().then_some(())
        }
    })
    .await;
    s
}

/// `llm-canary run -c <config>` from this build, killed on drop.
pub struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn daemon(config: &std::path::Path) -> Daemon {
    Daemon(
        Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .arg("run")
            .arg("-c")
            .arg(config)
            .spawn()
            .expect("start the daemon"),
    )
}

/// A copy of the rule file `rules`, written into `dir`, whose groups are evaluated every
/// `interval` (e.g. "2s") instead of their own: the same rules on a test's clock.
pub fn rules_every(rules: &std::path::Path, interval: &str, dir: &TempDir) -> std::path::PathBuf {
    let text = std::fs::read_to_string(rules).unwrap();
    let mut groups = 0;
    let out: Vec<String> = text
        .lines()
        .map(|l| match l.strip_suffix(l.trim_start()) {
            Some(indent) if l.trim_start().starts_with("interval: ") => {
                groups += 1;
                format!("{indent}interval: {interval}")
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(groups > 0, "{} sets no group interval", rules.display());
    let name = rules.file_name().unwrap().to_str().unwrap();
    dir.write(&[(name, &out.join("\n"))]);
    dir.path().join(name)
}

/// The body at `url`, or "" when nothing answers (yet).
pub async fn get(url: &str) -> String {
    match reqwest::get(url).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The value of the first sample of `metric` whose line contains every one of `having`.
pub fn sample(text: &str, metric: &str, having: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .find(|l| having.iter().all(|h| l.contains(h)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Sends a signal to a process with `kill`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}
