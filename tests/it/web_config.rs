//! The agent's endpoints behind an exporter-toolkit web config (`--web.config.file`), with real
//! parts: a real Prometheus scrapes the daemon's /metrics over TLS with basic auth, and another
//! daemon's with a client certificate (RequireAndVerifyClientCert), while jobs without them are
//! refused; headless Chromium loads the status page over HTTPS trusting the test CA from an
//! NSS database; a rotated certificate is served from the next connection and a broken file
//! leaves the last good one in force; a plain-HTTP client on the TLS port is refused cleanly
//! while the daemon goes on probing; `check` and `run` refuse bad files; the fleet page asks for
//! basic auth and keeps its rate limit.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::daemon::Daemon;
use common::pki::{Pair, Pki};
use common::services::{self, eventually, free_port, sample};
use llm_canary::testing::sim::Sim;
use reqwest::StatusCode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PASSWORD: &str = "scrape-pw";
const TOKEN: &str = "adm-web-token";
const PROBE: &str = "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ntimeouts: {connect: 1s, ttft: 2s, stall: 2s, total: 5s}\nchecks: {expect: \"(?i)paris\"}\n";

/// A daemon probing the sim every second, its endpoints on `listen` behind `web` (web.yml
/// beside its config, named by agent.web_config_file).
fn daemon(sim: &Sim, listen: &str, web: &str) -> Daemon {
    daemon_with(sim, listen, web, &[])
}

/// [`daemon`] with more files in its folder.
fn daemon_with(sim: &Sim, listen: &str, web: &str, more: &[(&str, &str)]) -> Daemon {
    let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
    let yaml = format!(
        "agent: {{name: web, listen: \"{listen}\", concurrency: 4, admin_token_file: token.txt, web_config_file: web.yml}}\n\
         targets:\n  - {{name: sim, base_url: \"{}\", model: m}}\n",
        sim.base_url("healthy")
    );
    let mut files = vec![
        ("llm-canary.yaml", yaml.as_str()),
        ("web.yml", web),
        ("token.txt", TOKEN),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
    ];
    files.extend_from_slice(more);
    Daemon::start(&files, port, &[])
}

fn https(port: u16, path: &str) -> String {
    format!("https://127.0.0.1:{port}{path}")
}

/// A client that trusts the test CA only, showing `identity` if given.
fn client(pki: &Pki, identity: Option<&Pair>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca).unwrap()).unwrap();
    let mut b = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(10));
    if let Some(p) = identity {
        let mut pem = std::fs::read(&p.cert).unwrap();
        pem.extend(std::fs::read(&p.key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

/// Waits until the daemon answers HTTPS at all (any status).
async fn answering(d: &Daemon, c: &reqwest::Client) {
    eventually(
        &format!("the daemon answers HTTPS\n{}", d.log()),
        Duration::from_secs(30),
        || async {
            c.get(https(d.port, "/healthz"))
                .send()
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;
}

fn bcrypt_hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

/// Successful runs so far, read over HTTPS with the scrape user.
async fn runs(c: &reqwest::Client, port: u16) -> f64 {
    let text = c
        .get(https(port, "/metrics"))
        .basic_auth("prom", Some(PASSWORD))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    sample(&text, "llm_canary_probe_runs_total", &["outcome=\"ok\""]).unwrap_or(0.0)
}

/// `up` per job, as Prometheus has it now.
async fn up(prom: &services::Service) -> Option<std::collections::BTreeMap<String, f64>> {
    let text = reqwest::get(format!("{}/api/v1/query?query=up", prom.url()))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(
        v["data"]["result"]
            .as_array()?
            .iter()
            .filter_map(|r| {
                Some((
                    r["metric"]["job"].as_str()?.to_string(),
                    r["value"][1].as_str()?.parse().ok()?,
                ))
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_over_tls_with_basic_auth_or_a_client_certificate() {
    let pki = Pki::new("web-scrape");
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (cert, key, ca) = (pki.server.cert(), pki.server.key(), pki.ca());
    // Not loopback-only, so the admin endpoints want their token too.
    let a_port = free_port();
    let a = daemon(
        &sim,
        &format!("0.0.0.0:{a_port}"),
        &format!(
            "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n\
             basic_auth_users:\n  prom: \"{}\"\n\
             http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n",
            bcrypt_hash(PASSWORD)
        ),
    );
    let b_port = free_port();
    let b = daemon(
        &sim,
        &format!("127.0.0.1:{b_port}"),
        &format!(
            "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {ca}\n  client_allowed_sans: [canary-client]\n"
        ),
    );
    let anonymous = client(&pki, None);
    answering(&a, &anonymous).await;

    // Without credentials: 401 asking for Basic, with the configured headers.
    let r = anonymous
        .get(https(a_port, "/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "Basic");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let wrong = anonymous
        .get(https(a_port, "/"))
        .basic_auth("prom", Some("guess"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // Every endpoint is behind it, the status page and the badges too.
    for path in [
        "/",
        "/api/v1/status",
        "/badge/sim.svg",
        "/feed.atom",
        "/healthz",
    ] {
        let r = anonymous.get(https(a_port, path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
        let r = anonymous
            .get(https(a_port, path))
            .basic_auth("prom", Some(PASSWORD))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["x-frame-options"], "deny", "{path}");
    }
    // The admin endpoints need both guards: the user, and the admin token beside it.
    let only_basic = anonymous
        .post(https(a_port, "/-/reload"))
        .basic_auth("prom", Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(only_basic.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(only_basic.headers()["www-authenticate"], "Bearer");
    let only_token = anonymous
        .post(https(a_port, "/-/reload"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(only_token.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(only_token.headers()["www-authenticate"], "Basic");
    let both = anonymous
        .post(https(a_port, "/-/reload"))
        .basic_auth("prom", Some(PASSWORD))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(both.status(), StatusCode::OK, "{}", a.log());

    // B: a client certificate from the CA passes; none, or one from another CA, fails the
    // handshake.
    answering(&b, &client(&pki, Some(&pki.client))).await;
    let ok = client(&pki, Some(&pki.client))
        .get(https(b_port, "/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert!(anonymous
        .get(https(b_port, "/metrics"))
        .send()
        .await
        .is_err());
    assert!(client(&pki, Some(&pki.stranger))
        .get(https(b_port, "/metrics"))
        .send()
        .await
        .is_err());

    let job = |name: &str, port: u16, tls: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config: {{ca_file: {ca}{tls}}}\n    static_configs: [{{targets: [\"127.0.0.1:{port}\"]}}]\n"
        )
    };
    let client_tls = format!(
        ", cert_file: {}, key_file: {}",
        pki.client.cert(),
        pki.client.key()
    );
    let stranger_tls = format!(
        ", cert_file: {}, key_file: {}",
        pki.stranger.cert(),
        pki.stranger.key()
    );
    let config = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\nscrape_configs:\n{}    basic_auth: {{username: prom, password: {PASSWORD}}}\n{}{}{}{}",
        job("basic", a_port, ""),
        job("anonymous", a_port, ""),
        job("certificate", b_port, &client_tls),
        job("no_certificate", b_port, ""),
        job("stranger", b_port, &stranger_tls),
    );
    let prom = services::prometheus_with_config(&config).await;
    let want = [
        ("anonymous", 0.0),
        ("basic", 1.0),
        ("certificate", 1.0),
        ("no_certificate", 0.0),
        ("stranger", 0.0),
    ];
    let got = eventually(
        "every job scraped as expected",
        Duration::from_secs(60),
        || async {
            let up = up(&prom).await?;
            want.iter()
                .all(|(j, v)| up.get(*j) == Some(v))
                .then_some(up)
        },
    )
    .await;
    assert_eq!(got.len(), want.len(), "{got:?}");
    // The basic-auth job carries the daemon's series, not just `up`.
    eventually(
        "the runs scraped through basic auth",
        Duration::from_secs(30),
        || async {
            let text = reqwest::get(format!(
                "{}/api/v1/query?query=llm_canary_probe_runs_total{{job=\"basic\",outcome=\"ok\"}}",
                prom.url()
            ))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            let n: f64 = v["data"]["result"][0]["value"][1].as_str()?.parse().ok()?;
            (n > 0.0).then_some(())
        },
    )
    .await;
}

/// What a TLS client is served at `port` (as `localhost`): the leaf certificate's DER.
async fn served_certificate(port: u16, trusted: &[&Path]) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in trusted {
        for c in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der(pem: &Path) -> Vec<u8> {
    CertificateDer::from_pem_file(pem).unwrap().to_vec()
}

/// Replaces `to` with `from`'s bytes in one rename, as certificate tools rotate files.
fn rotate(from: &Path, to: &Path) {
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_from_the_next_connection_and_a_broken_file_is_not_used() {
    let pki = Pki::new("web-rotate");
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    // Relative to web.yml's folder, as the toolkit reads them: the daemon's own copies.
    let d = daemon_with(
        &sim,
        &format!("127.0.0.1:{port}"),
        "tls_server_config:\n  cert_file: tls/cert.pem\n  key_file: tls/key.pem\n",
        &[
            ("tls/cert.pem", &read(&pki.server.cert)),
            ("tls/key.pem", &read(&pki.server.key)),
        ],
    );
    let (cert, key) = (
        d.dir.path().join("tls/cert.pem"),
        d.dir.path().join("tls/key.pem"),
    );
    let both_cas = [pki.ca.as_path(), pki.other_ca.as_path()];
    let c = client(&pki, None);
    answering(&d, &c).await;
    assert_eq!(
        served_certificate(port, &both_cas).await,
        der(&pki.server.cert)
    );

    // The status page over HTTPS in a real browser that trusts the test CA.
    browser_loads_the_status_page(&pki, &https(port, "/")).await;

    // Rotated: key first, then the certificate; the next connection is served the new one.
    rotate(&pki.untrusted.key, &key);
    rotate(&pki.untrusted.cert, &cert);
    assert_eq!(
        served_certificate(port, &both_cas).await,
        der(&pki.untrusted.cert)
    );

    // A broken file: the last good config stays in force, and it is said once.
    let web = d.dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: tls/cert.pem\n  key_fil: tls/key.pem\n",
    )
    .unwrap();
    for _ in 0..3 {
        assert_eq!(
            served_certificate(port, &both_cas).await,
            der(&pki.untrusted.cert)
        );
    }
    let warned = d
        .log()
        .matches("the changed web config is not used")
        .count();
    assert_eq!(warned, 1, "{}", d.log());
    assert!(d.log().contains("key_fil"), "{}", d.log());
    // Mended to name files that are not there yet: still the last good config. Then they
    // arrive, web.yml untouched, and the next connection is served the first certificate.
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: tls/next.pem\n  key_file: tls/next-key.pem\n",
    )
    .unwrap();
    assert_eq!(
        served_certificate(port, &both_cas).await,
        der(&pki.untrusted.cert)
    );
    rotate(&pki.server.key, &d.dir.path().join("tls/next-key.pem"));
    rotate(&pki.server.cert, &d.dir.path().join("tls/next.pem"));
    assert_eq!(
        served_certificate(port, &both_cas).await,
        der(&pki.server.cert)
    );
    assert_eq!(
        c.get(https(port, "/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

/// Headless Chromium, with a HOME of its own whose NSS database trusts the test CA, loads `url`
/// (the status page): its DOM is the page's, not a certificate warning, and its screenshot is
/// written to target/web-config-status-page.png.
async fn browser_loads_the_status_page(pki: &Pki, url: &str) {
    let home = common::TempDir::new("chromium-home");
    let db = home.path().join(".pki/nssdb");
    std::fs::create_dir_all(&db).unwrap();
    let certutil = services::binary("certutil", "libnss3-tools");
    let db_arg = format!("sql:{}", db.display());
    let ok = |args: &[&str]| {
        let out = Command::new(&certutil).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "certutil {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ok(&["-N", "-d", &db_arg, "--empty-password"]);
    ok(&[
        "-A",
        "-d",
        &db_arg,
        "-n",
        "llm-canary test CA",
        "-t",
        "C,,",
        "-i",
        pki.ca(),
    ]);
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/web-config-status-page.png");
    let _ = std::fs::remove_file(&shot);
    let chromium = |extra: Vec<String>| {
        let (home, url, bin) = (
            home.path().to_path_buf(),
            url.to_string(),
            services::chromium(),
        );
        tokio::task::spawn_blocking(move || {
            let profile = home.join("profile");
            let out = Command::new("timeout")
                .args(["-k", "5", "60", &bin])
                .env("HOME", &home)
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
                .arg(format!("--user-data-dir={}", profile.display()))
                .args(extra)
                .arg(url)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "chromium: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).to_string()
        })
    };
    let dom = chromium(vec!["--dump-dom".into()]).await.unwrap();
    assert!(
        dom.contains("llm-canary status: web") && dom.contains("sim"),
        "the browser did not load the page over HTTPS:\n{}",
        llm_canary::testing::util::clip(&dom)
    );
    chromium(vec![
        format!("--screenshot={}", shot.display()),
        "--window-size=1280,900".into(),
    ])
    .await
    .unwrap();
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_the_tls_port_is_refused_and_the_daemon_goes_on_probing() {
    let pki = Pki::new("web-plain");
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = free_port();
    let d = daemon(
        &sim,
        &format!("127.0.0.1:{port}"),
        &format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prom: \"{}\"\n",
            pki.server.cert(),
            pki.server.key(),
            bcrypt_hash(PASSWORD)
        ),
    );
    let c = client(&pki, None);
    answering(&d, &c).await;
    let before = eventually(
        &format!("a first run\n{}", d.log()),
        Duration::from_secs(30),
        || async {
            let n = runs(&c, port).await;
            (n > 0.0).then_some(n)
        },
    )
    .await;
    for _ in 0..3 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: canary\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(
            answer.starts_with("HTTP/1.0 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(
            answer.ends_with("Client sent an HTTP request to an HTTPS server.\n"),
            "{answer}"
        );
    }
    // Garbage that is not HTTP either: the handshake fails and the connection closes.
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
        .await
        .unwrap();
    // A client that connects and never starts the handshake is closed at the header timeout.
    let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(15), silent.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    eventually("more runs recorded", Duration::from_secs(30), || async {
        (runs(&c, port).await > before).then_some(())
    })
    .await;
    let mut d = d;
    assert!(d.child.try_wait().unwrap().is_none(), "{}", d.log());
}

/// `llm-canary ARGS`: exit code and stderr.
fn cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn check_and_run_refuse_a_bad_web_config_in_one_sentence() {
    let pki = Pki::new("web-check");
    let dir = common::TempDir::new("web-check");
    let (cert, key, ca) = (pki.server.cert(), pki.server.key(), pki.ca());
    let other_key = pki.untrusted.key();
    let tls = format!("tls_server_config:\n  cert_file: {cert}\n");
    dir.write(&[
        (
            "llm-canary.yaml",
            "agent: {name: w, listen: \"127.0.0.1:0\", web_config_file: good.yml}\ntargets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
        ),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
        ("good.yml", &format!("{tls}  key_file: {key}\n")),
        ("missing-key.yml", &format!("{tls}  key_file: nope.pem\n")),
        ("wrong-key.yml", &format!("{tls}  key_file: {other_key}\n")),
        ("bad-hash.yml", "basic_auth_users:\n  prom: \"$2y$10$short\"\n"),
        (
            "unreadable-ca.yml",
            &format!("{tls}  key_file: {key}\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: probes\n"),
        ),
        ("unknown-key.yml", &format!("{tls}  key_file: {key}\n  ca_file: {ca}\n")),
    ]);
    let cfg = dir.path().join("llm-canary.yaml");
    let cfg = cfg.to_str().unwrap();
    let (code, err) = cli(&["check", "-c", cfg]);
    assert_eq!(code, 0, "{err}");
    let d = dir.path().display().to_string();
    let cases = [
        ("missing-key.yml", format!("{d}/missing-key.yml:3:13: field tls_server_config.key_file: cannot read {d}/nope.pem: No such file or directory (os error 2)")),
        ("wrong-key.yml", format!("{d}/wrong-key.yml:3:13: field tls_server_config.key_file: the private key in {other_key} is not the certificate's in {cert}")),
        ("bad-hash.yml", format!("{d}/bad-hash.yml:2:9: field basic_auth_users.prom: not a bcrypt hash (Invalid hash: the hash format is malformed; expected 60 ASCII bytes): make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'")),
        ("unreadable-ca.yml", format!("{d}/unreadable-ca.yml:5:19: field tls_server_config.client_ca_file: cannot read {d}/probes: Is a directory (os error 21)")),
        ("unknown-key.yml", format!("{d}/unknown-key.yml:4:3: field tls_server_config.ca_file: unknown field `ca_file`, expected one of cert, key, client_ca, cert_file, key_file, client_auth_type, client_ca_file, client_allowed_sans, min_version, max_version, cipher_suites, prefer_server_cipher_suites, curve_preferences")),
    ];
    for (file, want) in &cases {
        let web = dir.path().join(file);
        let (code, err) = cli(&[
            "check",
            "-c",
            cfg,
            "--web.config.file",
            web.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{file}: {err}");
        assert_eq!(
            err.trim_end().lines().last().unwrap_or(""),
            format!("error: {want}"),
            "{file}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{file}: {err}");
    }
    // `run` will not start on one: exit 2, one line.
    let web = dir.path().join("wrong-key.yml");
    let (code, err) = cli(&["run", "-c", cfg, "--web.config.file", web.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("field tls_server_config.key_file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_asks_for_basic_auth_and_keeps_its_rate_limit() {
    let dir = common::TempDir::new("fleet-web");
    dir.write(&[(
        "web.yml",
        &format!(
            "basic_auth_users:\n  viewer: \"{}\"\nrate_limit: {{interval: 1h, burst: 4}}\n",
            bcrypt_hash(PASSWORD)
        ),
    )]);
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args([
            "status-page",
            "--prometheus",
            "http://127.0.0.1:9",
            "--listen",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--web.config.file")
        .arg(dir.path().join("web.yml"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _page = services::Service::from_child(child, port);
    let url = format!("http://127.0.0.1:{port}/healthz");
    let c = reqwest::Client::new();
    let refused = eventually("the page answers", Duration::from_secs(30), || async {
        c.get(&url).send().await.ok()
    })
    .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(refused.headers()["www-authenticate"], "Basic");
    let ok = c
        .get(&url)
        .basic_auth("viewer", Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let wrong = c
        .get(&url)
        .basic_auth("viewer", Some("nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // The fourth request of the burst, then the rate limit, before auth is looked at.
    let fourth = c
        .get(&url)
        .basic_auth("viewer", Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(fourth.status(), StatusCode::OK);
    let fifth = c
        .get(&url)
        .basic_auth("viewer", Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(fifth.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[test]
fn the_example_in_docs_security_md_passes_check() {
    let page = std::fs::read_to_string(common::root().join("docs/security.md")).unwrap();
    let block = page
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.starts_with("tls_server_config:"))
        .expect("docs/security.md shows a whole web config");
    let pki = Pki::new("web-doc");
    let dir = pki.dir.path().display().to_string();
    let web = block.replace("/etc/llm-canary/tls/", &format!("{dir}/"));
    // The hash is the one the comment beside it names.
    let hash = web
        .lines()
        .find_map(|l| l.trim().strip_prefix("prometheus: \""))
        .and_then(|l| l.split('"').next())
        .unwrap();
    assert!(bcrypt::verify("change-me", hash).unwrap());
    let cfg = common::TempDir::new("web-doc");
    cfg.write(&[
        ("web.yml", &web),
        (
            "llm-canary.yaml",
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
        ),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let (code, err) = cli(&[
        "check",
        "-c",
        cfg.path().join("llm-canary.yaml").to_str().unwrap(),
        "--web.config.file",
        cfg.path().join("web.yml").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}\n{web}");
}
