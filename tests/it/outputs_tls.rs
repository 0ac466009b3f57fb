//! The outputs over TLS and proxies: the daemon pushing to a real Pushgateway that serves HTTPS
//! from its own web config (basic auth, client certificates, a certificate rotated on disk, a
//! reload), through a real forward proxy (tinyproxy) or past it (`no_proxy`); remote-write to
//! a real Prometheus serving HTTPS, which the fleet page then reads with `--prometheus-ca-file`;
//! OTLP to a small TLS receiver; `insecure_skip_verify` warned, logged and measured.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::daemon::Daemon;
use common::pki::Pki;
use common::services::{self, eventually, get, sample, Service};
use common::TempDir;
use llm_canary::testing::sim::Sim;

const PROBE: &str = "name: p\nschedule: \"*/2 * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ncache_bust: auto\ntimeouts: {ttft: 5s, stall: 5s, total: 20s}\nchecks: {expect: \"(?i)paris\"}\n";
const USER: &str = "canary";
const PASSWORD: &str = "s3cret-push";

/// A Pushgateway serving HTTPS with the test server certificate, asking for basic auth and,
/// with `client_auth`, for a client certificate signed by the test CA.
async fn tls_gateway(pki: &Pki, client_auth: bool) -> (Service, TempDir) {
    let dir = TempDir::new("gw-web");
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let mut web = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        pki.server.cert(),
        pki.server.key()
    );
    if client_auth {
        web += &format!(
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
            pki.ca()
        );
    }
    web += &format!("basic_auth_users:\n  {USER}: '{hash}'\n");
    dir.write(&[("web.yaml", &web)]);
    let port = services::free_port();
    let child = Command::new(services::binary(
        "prometheus-pushgateway",
        "prometheus-pushgateway",
    ))
    .arg(format!("--web.listen-address=127.0.0.1:{port}"))
    .arg(format!(
        "--web.config.file={}",
        dir.path().join("web.yaml").display()
    ))
    .arg("--persistence.file=")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start the Pushgateway");
    let gw = Service::from_child(child, port);
    let reader = reader(pki, client_auth);
    let url = format!("https://localhost:{port}/-/ready");
    eventually(
        "the TLS Pushgateway to be ready",
        Duration::from_secs(20),
        || {
            let (reader, url) = (reader.clone(), url.clone());
            async move {
                let r = reader
                    .get(&url)
                    .basic_auth(USER, Some(PASSWORD))
                    .send()
                    .await
                    .ok()?;
                r.status().is_success().then_some(())
            }
        },
    )
    .await;
    (gw, dir)
}

/// A client that trusts the test CA (and shows the client certificate where asked).
fn reader(pki: &Pki, client_cert: bool) -> reqwest::Client {
    let ca = std::fs::read(&pki.ca).unwrap();
    let mut b = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .no_proxy();
    if client_cert {
        let mut pem = std::fs::read(&pki.client.cert).unwrap();
        pem.extend(std::fs::read(&pki.client.key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

/// The runs the gateway holds, read over TLS.
async fn gateway_runs(reader: &reqwest::Client, port: u16) -> Option<f64> {
    let text = reader
        .get(format!("https://localhost:{port}/metrics"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let runs: f64 = text
        .lines()
        .filter(|l| l.starts_with("llm_canary_probe_runs_total{") && l.contains("canary-tls"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (runs > 0.0).then_some(runs)
}

fn start(sim: &Sim, port: u16, push: &str, extra: &[(&str, &str)]) -> Daemon {
    let yaml = format!(
        "agent:\n  name: canary-tls\n  listen: 127.0.0.1:{port}\n\
         push: {push}\n\
         targets:\n  - {{name: sim-a, base_url: \"{}\", model: m-a}}\n",
        sim.base_url("healthy")
    );
    let mut files = vec![
        ("llm-canary.yaml", yaml.as_str()),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
        ("push-password", PASSWORD),
    ];
    files.extend_from_slice(extra);
    Daemon::start(&files, port, &[])
}

fn push_block(gw: u16, tls: &str) -> String {
    format!(
        "{{url: \"https://localhost:{gw}\", job: llm_canary, min_interval: 300ms, \
         username: {USER}, password_file: push-password, tls: {tls}}}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_reach_a_gateway_over_tls_with_basic_auth() {
    let pki = Pki::new("push-tls");
    let (gw, _web) = tls_gateway(&pki, false).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let d = start(
        &sim,
        port,
        &push_block(gw.port, &format!("{{ca_file: \"{}\"}}", pki.ca())),
        &[],
    );
    let reader = reader(&pki, false);
    eventually(
        "the pushed runs on the TLS gateway",
        Duration::from_secs(30),
        || gateway_runs(&reader, gw.port),
    )
    .await;
    let own = get(&d.url("/metrics")).await;
    assert_eq!(
        sample(
            &own,
            "llm_canary_tls_insecure_skip_verify",
            &["sink=\"push\""]
        ),
        Some(0.0),
        "{own}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_requires_client_certificates_gets_one_and_refuses_an_agent_without() {
    let pki = Pki::new("push-mtls");
    let (gw, _web) = tls_gateway(&pki, true).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();

    // With the client certificate: the pushes land.
    let port = services::free_port();
    let with = start(
        &sim,
        port,
        &push_block(
            gw.port,
            &format!(
                "{{ca_file: \"{}\", cert_file: \"{}\", key_file: \"{}\"}}",
                pki.ca(),
                pki.client.cert(),
                pki.client.key()
            ),
        ),
        &[],
    );
    let reader = reader(&pki, true);
    eventually(
        "the pushed runs on the mTLS gateway",
        Duration::from_secs(30),
        || gateway_runs(&reader, gw.port),
    )
    .await;
    drop(with);

    // Without: every push fails, says why, and the runs go on.
    let port = services::free_port();
    let without = start(
        &sim,
        port,
        &push_block(gw.port, &format!("{{ca_file: \"{}\"}}", pki.ca())),
        &[],
    );
    let metrics = eventually(
        "push failures while runs go on",
        Duration::from_secs(30),
        || async {
            let m = reqwest::get(without.url("/metrics"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            let failures = sample(&m, "llm_canary_push_failures_total", &[])?;
            let runs: f64 = m
                .lines()
                .filter(|l| l.starts_with("llm_canary_probe_runs_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            (failures >= 2.0 && runs >= 2.0).then_some(m)
        },
    )
    .await;
    assert!(
        sample(
            &metrics,
            "llm_canary_last_push_failure_timestamp_seconds",
            &[]
        )
        .unwrap()
            > 0.0
    );
    let log = without.log();
    let line = log
        .lines()
        .find(|l| l.contains("push failed"))
        .unwrap_or_else(|| panic!("no push failure in the log:\n{log}"));
    assert!(
        line.contains(&format!("https://localhost:{}", gw.port))
            && line.to_lowercase().contains("certificate"),
        "the failure names the gateway and the missing certificate: {line}"
    );
}

/// A Prometheus serving HTTPS with the test server certificate (its web config is the
/// exporter-toolkit's), accepting remote writes, and ready when `reader` says so.
async fn tls_prometheus(pki: &Pki, reader: &reqwest::Client) -> (Service, TempDir) {
    let dir = TempDir::new("prom-tls");
    dir.write(&[
        ("prometheus.yml", "global: {}\n"),
        (
            "web.yaml",
            &format!(
                "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
                pki.server.cert(),
                pki.server.key()
            ),
        ),
    ]);
    let port = services::free_port();
    let child = Command::new(services::binary("prometheus", "prometheus"))
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!(
            "--web.config.file={}",
            dir.path().join("web.yaml").display()
        ))
        .arg("--web.enable-remote-write-receiver")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start Prometheus");
    let prom = Service::from_child(child, port);
    let url = format!("https://localhost:{port}/-/ready");
    eventually(
        "the TLS Prometheus to be ready",
        Duration::from_secs(30),
        || {
            let req = reader.get(&url);
            async move { req.send().await.ok()?.status().is_success().then_some(()) }
        },
    )
    .await;
    (prom, dir)
}

/// `status-page` reading `store` with `flags`, killed on drop.
struct Page(std::process::Child, u16);

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Page {
    async fn start(store: &str, flags: &[&str]) -> Page {
        let port = services::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args([
                "status-page",
                "--prometheus",
                store,
                "--query-timeout",
                "5s",
            ])
            .args(flags)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the status page");
        services::wait_ready(
            &format!("http://127.0.0.1:{port}/healthz"),
            Duration::from_secs(20),
        )
        .await;
        Page(child, port)
    }

    async fn fleet(&self) -> (u16, String) {
        let r = reqwest::get(format!("http://127.0.0.1:{}/api/v1/fleet", self.1))
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

/// Remote-write to a Prometheus that serves HTTPS, trusting it through `ca_file`; the fleet
/// page reads the same Prometheus with `--prometheus-ca-file`, and without it says the
/// store's certificate is not trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_write_and_the_fleet_page_reach_a_prometheus_over_tls() {
    let pki = Pki::new("rw-tls");
    let reader = reader(&pki, false);
    let (prom, _dir) = tls_prometheus(&pki, &reader).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: canary-tls\n  listen: 127.0.0.1:{port}\n\
         remote_write:\n  url: \"https://localhost:{}/api/v1/write\"\n  interval: 500ms\n  timeout: 2s\n  tls: {{ca_file: \"{}\"}}\n\
         targets:\n  - {{name: sim-a, base_url: \"{}\", model: m-a}}\n",
        prom.port,
        pki.ca(),
        sim.base_url("healthy")
    );
    let d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    let query = format!(
        "https://localhost:{}/api/v1/query?query=llm_canary_probe_runs_total",
        prom.port
    );
    eventually(
        "the written runs in the TLS Prometheus",
        Duration::from_secs(30),
        || {
            let req = reader.get(&query);
            async move {
                let text = req.send().await.ok()?.text().await.ok()?;
                let v: serde_json::Value = serde_json::from_str(&text).ok()?;
                (!v["data"]["result"].as_array()?.is_empty()).then_some(())
            }
        },
    )
    .await;
    let own = get(&d.url("/metrics")).await;
    assert_eq!(
        sample(&own, "llm_canary_remote_write_failures_total", &[]),
        Some(0.0),
        "{}",
        d.log()
    );

    let store = format!("https://localhost:{}", prom.port);
    let trusted = Page::start(&store, &["--prometheus-ca-file", pki.ca()]).await;
    let (status, body) = trusted.fleet().await;
    assert_eq!(status, 200, "{body}");
    let untrusted = Page::start(&store, &[]).await;
    let (status, body) = untrusted.fleet().await;
    assert_eq!(status, 503, "{body}");
    assert!(body.to_lowercase().contains("certificate"), "{body}");
}

/// A small OTLP/HTTP receiver over TLS: the paths it was sent.
async fn tls_receiver(pki: &Pki) -> (std::sync::Arc<std::sync::Mutex<Vec<String>>>, u16) {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&pki.server.cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&pki.server.key).unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let paths = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = paths.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            seen.lock().unwrap().push(req.uri().path().to_string());
                            Ok::<_, hyper::Error>(hyper::Response::new(http_body_util::Full::new(
                                hyper::body::Bytes::new(),
                            )))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (paths, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_metrics_and_traces_reach_a_receiver_over_tls() {
    let pki = Pki::new("otlp-tls");
    let (paths, otlp) = tls_receiver(&pki).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let yaml = format!(
        "agent:\n  name: canary-tls\n  listen: 127.0.0.1:{port}\n\
         otlp:\n  endpoint: \"https://localhost:{otlp}\"\n  interval: 500ms\n  traces: true\n  success_sample_ratio: 1\n  tls: {{ca_file: \"{}\"}}\n\
         targets:\n  - {{name: sim-a, base_url: \"{}\", model: m-a}}\n",
        pki.ca(),
        sim.base_url("healthy")
    );
    let d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    eventually(
        "OTLP metrics and traces over TLS",
        Duration::from_secs(30),
        || {
            let p = paths.lock().unwrap().clone();
            async move {
                (p.iter().any(|p| p == "/v1/metrics") && p.iter().any(|p| p == "/v1/traces"))
                    .then_some(())
            }
        },
    )
    .await;
    let own = get(&d.url("/metrics")).await;
    assert_eq!(
        sample(
            &own,
            "llm_canary_tls_insecure_skip_verify",
            &["sink=\"otlp\""]
        ),
        Some(0.0),
        "{own}"
    );
}

/// tinyproxy in the foreground on a free port, its log (one line per request) in `dir`.
async fn tinyproxy(dir: &TempDir) -> Service {
    let port = services::free_port();
    dir.write(&[(
        "tinyproxy.conf",
        &format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nLogLevel Connect\nMaxClients 20\nAllow 127.0.0.1\nUser nobody\nGroup nogroup\n"
        ),
    )]);
    let log = std::fs::File::create(dir.path().join("tinyproxy.log")).unwrap();
    let child = Command::new(services::binary("tinyproxy", "tinyproxy"))
        .arg("-d")
        .arg("-c")
        .arg(dir.path().join("tinyproxy.conf"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start tinyproxy");
    let s = Service::from_child(child, port);
    eventually("tinyproxy to listen", Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    s
}

/// `proxy_url`: the pushes go through a real forward proxy (a CONNECT tunnel to the TLS
/// gateway), and the gateway still verifies as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_go_through_the_proxy_url() {
    let pki = Pki::new("push-proxy");
    let (gw, _web) = tls_gateway(&pki, false).await;
    let dir = TempDir::new("proxy");
    let proxy = tinyproxy(&dir).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let push = format!(
        "{{url: \"https://localhost:{}\", job: llm_canary, min_interval: 300ms, \
         username: {USER}, password_file: push-password, tls: {{ca_file: \"{}\"}}, \
         proxy_url: \"http://127.0.0.1:{}\"}}",
        gw.port,
        pki.ca(),
        proxy.port
    );
    let _d = start(&sim, port, &push, &[]);
    let reader = reader(&pki, false);
    eventually(
        "the pushed runs on the gateway, through the proxy",
        Duration::from_secs(30),
        || gateway_runs(&reader, gw.port),
    )
    .await;
    let log = std::fs::read_to_string(dir.path().join("tinyproxy.log")).unwrap();
    assert!(
        log.contains(&format!("CONNECT localhost:{}", gw.port)),
        "the proxy carried the pushes: {log}"
    );
}

/// A client certificate replaced on disk is used from the next connection, without a
/// reload: an agent that starts with a certificate the gateway does not trust gets its pushes
/// in once the trusted one is written over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_written_over_the_old_one_is_used_without_a_reload() {
    let pki = Pki::new("push-rotate");
    let (gw, _web) = tls_gateway(&pki, true).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let stranger_cert = std::fs::read_to_string(&pki.stranger.cert).unwrap();
    let stranger_key = std::fs::read_to_string(&pki.stranger.key).unwrap();
    let d = start(
        &sim,
        port,
        &push_block(
            gw.port,
            &format!(
                "{{ca_file: \"{}\", cert_file: client.pem, key_file: client.key}}",
                pki.ca()
            ),
        ),
        &[
            ("client.pem", &stranger_cert),
            ("client.key", &stranger_key),
        ],
    );
    eventually("a refused push", Duration::from_secs(30), || async {
        let m = get(&d.url("/metrics")).await;
        (sample(&m, "llm_canary_push_failures_total", &[])? >= 1.0).then_some(())
    })
    .await;

    // The rotation: key first, then certificate, as a renewal tool writes them.
    std::fs::copy(&pki.client.key, d.dir.path().join("client.key")).unwrap();
    std::fs::copy(&pki.client.cert, d.dir.path().join("client.pem")).unwrap();
    let reader = reader(&pki, true);
    eventually(
        "the pushed runs with the rotated certificate",
        Duration::from_secs(60),
        || gateway_runs(&reader, gw.port),
    )
    .await;
}

/// `insecure_skip_verify` is loud: `check` warns, the daemon logs it at load, and
/// `llm_canary_tls_insecure_skip_verify` says where it is on; a reload that removes a target
/// removes its series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_verification_is_warned_logged_and_measured() {
    let pki = Pki::new("insecure");
    let port = services::free_port();
    let closed = common::closed_port();
    let yaml = |with_a: bool, push_insecure: bool| {
        let mut y = format!(
            "agent:\n  name: canary-tls\n  listen: 127.0.0.1:{port}\n\
             push: {{url: \"https://127.0.0.1:{closed}\", tls: {{insecure_skip_verify: {push_insecure}}}}}\n\
             targets:\n  - {{name: b, base_url: \"https://127.0.0.1:{closed}/v1\", model: m, tls: {{ca_file: \"{}\"}}}}\n",
            pki.ca()
        );
        if with_a {
            y += &format!(
                "  - {{name: a, base_url: \"https://127.0.0.1:{closed}/v1\", model: m, tls: {{insecure_skip_verify: true}}}}\n"
            );
        }
        y
    };
    let probe = "name: p\nschedule: \"0 0 1 1 *\"\nprompt: q.txt\n";
    let d = Daemon::start(
        &[
            ("llm-canary.yaml", &yaml(true, true)),
            ("probes/p.yaml", probe),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );

    let out = common::output({
        let mut c = common::bin();
        c.arg("check")
            .arg("-c")
            .arg(d.dir.path().join("llm-canary.yaml"));
        c
    })
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let warnings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("insecure_skip_verify"))
        .collect();
    assert_eq!(warnings.len(), 2, "{stdout}");
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("warning: target \"a\": tls.insecure_skip_verify is on"))
            && warnings
                .iter()
                .any(|w| w.starts_with("warning: push: tls.insecure_skip_verify is on")),
        "{stdout}"
    );

    let metrics = eventually("the agent's metrics", Duration::from_secs(20), || async {
        let m = reqwest::get(d.url("/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        Some(m)
    })
    .await;
    let gauge = |m: &str, having: &[&str]| sample(m, "llm_canary_tls_insecure_skip_verify", having);
    assert_eq!(gauge(&metrics, &["target=\"a\""]), Some(1.0), "{metrics}");
    assert_eq!(gauge(&metrics, &["target=\"b\""]), Some(0.0), "{metrics}");
    assert_eq!(gauge(&metrics, &["sink=\"push\""]), Some(1.0), "{metrics}");
    let log = d.log();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("tls.insecure_skip_verify is on"))
        .collect();
    assert!(
        warned.len() == 2
            && warned
                .iter()
                .any(|l| l.contains("target \"a\": tls.insecure_skip_verify is on"))
            && warned
                .iter()
                .any(|l| l.contains("push: tls.insecure_skip_verify is on")),
        "{log}"
    );

    // Target a leaves and push verifies again.
    std::fs::write(d.dir.path().join("llm-canary.yaml"), yaml(false, false)).unwrap();
    services::signal(d.child.id(), "HUP");
    let metrics = eventually("the reloaded gauge", Duration::from_secs(20), || async {
        let m = get(&d.url("/metrics")).await;
        (gauge(&m, &["sink=\"push\""]) == Some(0.0)).then_some(m)
    })
    .await;
    assert_eq!(gauge(&metrics, &["target=\"a\""]), None, "{metrics}");
    assert_eq!(gauge(&metrics, &["target=\"b\""]), Some(0.0), "{metrics}");
}

/// A TLS flag of the fleet page that cannot work stops it at start: one line naming the flag,
/// exit 2.
#[tokio::test]
async fn a_store_tls_flag_that_does_not_load_is_refused_at_start() {
    let pki = Pki::new("page-flags");
    for (flags, says) in [
        (
            vec!["--prometheus-ca-file", "/nonexistent/ca.pem"],
            "--prometheus-ca-file: cannot read /nonexistent/ca.pem",
        ),
        (
            vec!["--prometheus-cert-file", pki.client.cert()],
            "--prometheus-cert-file needs --prometheus-key-file",
        ),
        (
            vec!["--prometheus-proxy-url", "https://proxy.example:3128"],
            "--prometheus-proxy-url must be an http:// proxy",
        ),
    ] {
        let mut cmd = common::bin();
        cmd.args(["status-page", "--prometheus", "https://127.0.0.1:9/"])
            .args(&flags);
        let out = common::output(cmd).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("error: {says}")), "{err}");
    }
}

/// A reload makes the output's client anew from the new `tls:` block: pushes refused for an
/// unknown CA land once `ca_file` names it and SIGHUP reloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_rebuilds_the_push_client_from_the_new_tls_block() {
    let pki = Pki::new("push-reload");
    let (gw, _web) = tls_gateway(&pki, false).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let d = start(
        &sim,
        port,
        &push_block(gw.port, "{server_name: localhost}"),
        &[],
    );
    eventually("a refused push", Duration::from_secs(30), || async {
        let m = get(&d.url("/metrics")).await;
        (sample(&m, "llm_canary_push_failures_total", &[])? >= 1.0).then_some(())
    })
    .await;
    let yaml = std::fs::read_to_string(d.dir.path().join("llm-canary.yaml")).unwrap();
    let fixed = yaml.replace(
        "{server_name: localhost}",
        &format!("{{server_name: localhost, ca_file: \"{}\"}}", pki.ca()),
    );
    assert_ne!(yaml, fixed);
    std::fs::write(d.dir.path().join("llm-canary.yaml"), fixed).unwrap();
    services::signal(d.child.id(), "HUP");
    let reader = reader(&pki, false);
    eventually(
        "the pushed runs after the reload",
        Duration::from_secs(60),
        || gateway_runs(&reader, gw.port),
    )
    .await;
}

/// `no_proxy`: a host it names is reached directly, so pushes land though `proxy_url` names a
/// proxy that is not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_in_no_proxy_are_reached_directly() {
    let pki = Pki::new("push-no-proxy");
    let (gw, _web) = tls_gateway(&pki, false).await;
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = services::free_port();
    let push = format!(
        "{{url: \"https://localhost:{}\", job: llm_canary, min_interval: 300ms, \
         username: {USER}, password_file: push-password, tls: {{ca_file: \"{}\"}}, \
         proxy_url: \"http://127.0.0.1:{}\", no_proxy: \"example.com,localhost\"}}",
        gw.port,
        pki.ca(),
        common::closed_port()
    );
    let _d = start(&sim, port, &push, &[]);
    let reader = reader(&pki, false);
    eventually(
        "the pushed runs on the gateway, past the proxy",
        Duration::from_secs(30),
        || gateway_runs(&reader, gw.port),
    )
    .await;
}
