//! The probe's own connection against the sim over TLS (`Sim::start_tls` with certificates made
//! by `common::pki`): each setup step timed, the TLS session recorded, refused certificates
//! given their reasons, proxies honoured. `once --format json` runs as a child process that
//! trusts the test CA through a target's `tls:` block, or through SSL_CERT_FILE as an
//! operator's system store would.

use serde_json::Value;

use llm_canary::testing::sim::Sim;

use crate::common::{self, pki::Pki};

/// `once --format json` on a folder holding `agent` (an llm-canary.yaml), the common probe
/// and prompt, with these environment variables: one record per line.
async fn once(agent: &str, envs: &[(&str, &str)]) -> Vec<Value> {
    let dir = common::TempDir::new("wire");
    dir.write(&[
        ("llm-canary.yaml", agent),
        ("probes/p.yaml", common::PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let mut cmd = common::bin();
    cmd.args(["once", "--format", "json", "-c"])
        .arg(dir.path().join("llm-canary.yaml"))
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .envs(envs.iter().copied());
    let out = common::output(cmd).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.trim().is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn target(name: &str, url: &str, extra: &str) -> String {
    format!("  - {{name: {name}, base_url: \"{url}\", model: m, {extra}}}\n")
}

fn ms(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is no number: {v}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_flavor_over_tls_times_each_step_and_records_the_session() {
    let pki = Pki::new("flavors");
    // The sim requires the client certificate: every target's tls: block presents it.
    let sim = Sim::start_tls(
        "127.0.0.1:0",
        &pki.server.cert,
        &pki.server.key,
        Some(&pki.ca),
    )
    .await
    .unwrap();
    let tls = format!(
        "tls: {{ca_file: \"{}\", cert_file: \"{}\", key_file: \"{}\"}}",
        pki.ca(),
        pki.client.cert(),
        pki.client.key()
    );
    let url = sim.base_url("healthy");
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let root = url.trim_end_matches("/v1");
    let (_keys, bedrock) = common::bedrock_keys();
    let mut agent = String::from("agent: {name: t, concurrency: 8}\ntargets:\n");
    for (name, url, extra) in [
        ("openai-chat", url.as_str(), "api: openai-chat"),
        ("openai-completions", &url, "api: openai-completions"),
        ("openai-responses", &url, "api: openai-responses"),
        ("anthropic-messages", &url, "api: anthropic-messages"),
        ("azure-openai", &url, "api: azure-openai"),
        ("gemini", &url, "api: gemini"),
        ("ollama", root, "api: ollama"),
        ("bedrock", &url, bedrock.as_str()),
    ] {
        agent.push_str(&target(name, url, &format!("{extra}, {tls}")));
    }
    // By name, so the name is looked up.
    let by_name = url.replacen("127.0.0.1", "localhost", 1);
    agent.push_str(&target("by-name", &by_name, &tls));
    let records = once(&agent, &[]).await;
    assert_eq!(records.len(), 9);
    for v in &records {
        assert_eq!(v["outcome"], "ok", "{v}");
        let (connect, tls, ttft) = (ms(v, "connect_ms"), ms(v, "tls_ms"), ms(v, "ttft_ms"));
        assert!(connect >= 0.0 && tls > 0.0, "{v}");
        let after = ms(v, "ttft_after_connect_ms");
        let dns = v["dns_ms"].as_f64().unwrap_or(0.0);
        // TTFT is counted from the request's start; after connect leaves the setup out.
        assert!((ttft - (dns + connect + tls) - after).abs() < 0.01, "{v}");
        assert!(ms(v, "ttfb_ms") >= dns + connect + tls, "{v}");
        let session = &v["tls"];
        assert!(
            matches!(session["version"].as_str(), Some("TLSv1.3" | "TLSv1.2")),
            "{v}"
        );
        assert!(
            session["cipher"].as_str().unwrap().starts_with("TLS_"),
            "{v}"
        );
        assert_eq!(
            session["issuer"], "O=llm-canary tests,CN=llm-canary test CA",
            "{v}"
        );
        let expiry: jiff::Timestamp = session["earliest_expiry"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(expiry > jiff::Timestamp::now(), "{v}");
        match v["target"].as_str() {
            Some("by-name") => assert!(ms(v, "dns_ms") >= 0.0, "{v}"),
            _ => assert!(v["dns_ms"].is_null(), "an IP address needs no DNS: {v}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_http_has_no_tls_step_and_no_session() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let agent = format!("targets:\n{}", target("t", &sim.base_url("healthy"), ""));
    let v = &once(&agent, &[]).await[0];
    assert_eq!(v["outcome"], "ok", "{v}");
    assert!(
        v["tls_ms"].is_null() && v["tls"].is_null() && v["dns_ms"].is_null(),
        "{v}"
    );
    assert!(ms(v, "connect_ms") >= 0.0, "{v}");
    assert!(ms(v, "ttft_after_connect_ms") <= ms(v, "ttft_ms"), "{v}");
}

/// One target per refused certificate, each with its reason and a sentence that says what to
/// do.
#[tokio::test(flavor = "multi_thread")]
async fn refused_certificates_are_named_with_what_to_do() {
    let pki = Pki::new("refused");
    let start = |pair: &common::pki::Pair| {
        let (cert, key) = (pair.cert.clone(), pair.key.clone());
        async move {
            Sim::start_tls("127.0.0.1:0", &cert, &key, None)
                .await
                .unwrap()
        }
    };
    let expired = start(&pki.expired).await;
    let wrong = start(&pki.wrong_name).await;
    let untrusted = start(&pki.untrusted).await;
    let agent = format!(
        "targets:\n{}{}{}",
        target("expired", &expired.base_url("healthy"), ""),
        target("wrong-name", &wrong.base_url("healthy"), ""),
        target("untrusted", &untrusted.base_url("healthy"), ""),
    );
    let records = once(&agent, &[("SSL_CERT_FILE", pki.ca())]).await;
    let by = |name: &str| {
        records
            .iter()
            .find(|v| v["target"] == name)
            .unwrap_or_else(|| panic!("{name}: {records:?}"))
    };
    for (name, reason, words) in [
        ("expired", "cert_expired", "expired at"),
        (
            "wrong-name",
            "cert_name_mismatch",
            "is for wrong.example, not 127.0.0.1",
        ),
        (
            "untrusted",
            "cert_unknown_authority",
            "signed by a CA the agent does not trust: set tls.ca_file",
        ),
    ] {
        let v = by(name);
        assert_eq!(v["outcome"], "connect_error", "{v}");
        assert_eq!(v["reason"], reason, "{v}");
        let error = v["error"].as_str().unwrap();
        assert!(
            error.starts_with("connect: ") && error.contains(words),
            "{v}"
        );
        // The steps up to the handshake were timed; the handshake never finished.
        assert!(ms(v, "connect_ms") >= 0.0 && v["tls_ms"].is_null(), "{v}");
        assert!(v["tls"].is_null(), "{v}");
    }
}

/// `sim --client-ca`: a target whose `tls:` block presents the client certificate gets in; one
/// without, or with a certificate from another CA, is refused with what to set.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_certificate_gets_in_where_the_sim_requires_one() {
    let pki = Pki::new("mtls");
    let sim = Sim::start_tls(
        "127.0.0.1:0",
        &pki.server.cert,
        &pki.server.key,
        Some(&pki.ca),
    )
    .await
    .unwrap();
    let url = sim.base_url("healthy");
    let ca = pki.ca();
    let tls = |pair: Option<&common::pki::Pair>| match pair {
        Some(p) => format!(
            "tls: {{ca_file: \"{ca}\", cert_file: \"{}\", key_file: \"{}\"}}",
            p.cert(),
            p.key()
        ),
        None => format!("tls: {{ca_file: \"{ca}\"}}"),
    };
    let agent = format!(
        "targets:\n{}{}{}",
        target("client", &url, &tls(Some(&pki.client))),
        target("none", &url, &tls(None)),
        target("stranger", &url, &tls(Some(&pki.stranger))),
    );
    let records = once(&agent, &[]).await;
    let by = |name: &str| records.iter().find(|v| v["target"] == name).unwrap();
    let v = by("client");
    assert_eq!(v["outcome"], "ok", "{v}");
    assert!(
        ms(v, "tls_ms") > 0.0 && v["tls"]["version"].is_string(),
        "{v}"
    );
    for (name, words) in [
        (
            "none",
            "requires a client certificate: set tls.cert_file and tls.key_file",
        ),
        ("stranger", "refused the client certificate"),
    ] {
        let v = by(name);
        assert_eq!(
            (&v["outcome"], &v["reason"]),
            (&"connect_error".into(), &"tls_handshake".into()),
            "{v}"
        );
        assert!(v["error"].as_str().unwrap().contains(words), "{v}");
    }
}

/// The daemon's gauges: the expiring certificate's notAfter, and the last run's setup steps
/// (no DNS for 127.0.0.1), scraped from its /metrics.
#[tokio::test(flavor = "multi_thread")]
async fn the_daemon_exports_the_certificates_expiry_and_the_setup_steps() {
    use common::services::{eventually, free_port, get, sample};
    let pki = Pki::new("expiry");
    let sim = Sim::start_tls("127.0.0.1:0", &pki.expiring.cert, &pki.expiring.key, None)
        .await
        .unwrap();
    let port = free_port();
    // Named as the sim's model list names a scenario, so the list identifies it.
    let agent = format!(
        "agent: {{listen: \"127.0.0.1:{port}\"}}\ntargets:\n  - {{name: t, base_url: \"{}\", model: healthy, tls: {{ca_file: \"{}\"}}}}\n",
        sim.base_url("healthy"),
        pki.ca()
    );
    let probe = common::PROBE.replace("name: p\n", "name: p\nschedule: \"*/2 * * * * *\"\n");
    let daemon = common::daemon::Daemon::start(
        &[
            ("llm-canary.yaml", &agent),
            ("probes/p.yaml", &probe),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    let text = eventually(
        "a TLS run in the daemon's metrics",
        std::time::Duration::from_secs(30),
        || {
            let url = daemon.url("/metrics");
            async move {
                let text = get(&url).await;
                sample(
                    &text,
                    "llm_canary_tls_earliest_cert_expiry_timestamp_seconds",
                    &[],
                )
                .map(|_| text)
            }
        },
    )
    .await;
    let expiry = sample(
        &text,
        "llm_canary_tls_earliest_cert_expiry_timestamp_seconds",
        &["target=\"t\""],
    );
    assert_eq!(
        expiry,
        Some(pki.expiring_not_after() as f64),
        "{}",
        daemon.log()
    );
    let phase = |p: &str| {
        sample(
            &text,
            "llm_canary_last_connection_phase_seconds",
            &["probe=\"p\"", &format!("phase=\"{p}\"")],
        )
    };
    assert!(phase("connect").is_some_and(|s| s >= 0.0), "{text}");
    assert!(phase("tls").is_some_and(|s| s > 0.0), "{text}");
    assert_eq!(phase("dns"), None, "no DNS for an IP address: {text}");
    // The model list, asked beside the runs, came over the target's TLS settings too: its
    // hash joins the fingerprint.
    eventually(
        "the model list's hash in the fingerprint",
        std::time::Duration::from_secs(30),
        || {
            let url = daemon.url("/metrics");
            async move {
                let text = get(&url).await;
                text.lines()
                    .any(|l| l.starts_with("llm_canary_target_info{") && l.contains("; models "))
                    .then_some(())
            }
        },
    )
    .await;
}

/// A real HTTP proxy (Debian's tinyproxy): `https://` through its CONNECT tunnel, `http://` as
/// absolute-form requests to it; `no_proxy` goes around it; a proxy that is not there is named.
#[tokio::test(flavor = "multi_thread")]
async fn targets_go_through_their_proxy_and_around_it_where_no_proxy_says() {
    use common::services::{binary, free_port, Service};
    let pki = Pki::new("proxy");
    let tls_sim = Sim::start_tls("127.0.0.1:0", &pki.server.cert, &pki.server.key, None)
        .await
        .unwrap();
    let plain_sim = Sim::start("127.0.0.1:0").await.unwrap();
    let around_sim = Sim::start_tls("127.0.0.1:0", &pki.server.cert, &pki.server.key, None)
        .await
        .unwrap();
    let dir = common::TempDir::new("tinyproxy");
    let port = free_port();
    let log = dir.path().join("tinyproxy.log");
    dir.write(&[(
        "tinyproxy.conf",
        &format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\nAllow 127.0.0.1\nLogLevel Info\nLogFile \"{}\"\n",
            log.display()
        ),
    )]);
    let child = std::process::Command::new(binary("tinyproxy", "tinyproxy"))
        .args(["-d", "-c"])
        .arg(dir.path().join("tinyproxy.conf"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _proxy = Service::from_child(child, port);
    common::services::eventually(
        "tinyproxy to listen",
        std::time::Duration::from_secs(10),
        || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
        },
    )
    .await;
    let dead = common::closed_port();
    let via = |p: u16| format!("proxy_url: \"http://127.0.0.1:{p}\"");
    let ca = format!("tls: {{ca_file: \"{}\"}}", pki.ca());
    let agent = format!(
        "targets:\n{}{}{}{}",
        target(
            "tls-via",
            &tls_sim.base_url("healthy"),
            &format!("{ca}, {}", via(port))
        ),
        target("plain-via", &plain_sim.base_url("healthy"), &via(port)),
        target(
            "around",
            &around_sim.base_url("healthy"),
            &format!("{ca}, {}, no_proxy: \"127.0.0.1\"", via(dead))
        ),
        target("dead", &plain_sim.base_url("healthy"), &via(dead)),
    );
    let records = once(&agent, &[]).await;
    let by = |name: &str| records.iter().find(|v| v["target"] == name).unwrap();
    for name in ["tls-via", "plain-via", "around"] {
        assert_eq!(by(name)["outcome"], "ok", "{}", by(name));
    }
    assert!(ms(by("tls-via"), "tls_ms") > 0.0, "{}", by("tls-via"));
    let v = by("dead");
    assert_eq!(v["outcome"], "connect_error", "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with(&format!(
            "connect: through the proxy 127.0.0.1:{dead}: connection refused"
        )),
        "{v}"
    );
    // The proxy saw the tunnel and the plain request; nothing of the target it went around.
    let log = std::fs::read_to_string(&log).unwrap();
    let tls_addr = tls_sim.addr().to_string();
    assert!(log.contains(&format!("CONNECT {tls_addr}")), "{log}");
    assert!(
        log.contains(&format!("POST http://{}/", plain_sim.addr())),
        "{log}"
    );
    assert!(!log.contains(&around_sim.addr().to_string()), "{log}");
}

/// `llm-canary sim --tls-cert --tls-key --client-ca`: it says it serves https://, and a probe
/// whose `tls:` block presents the client certificate gets an answer from it; a bad key file is
/// named.
#[tokio::test(flavor = "multi_thread")]
async fn the_sim_command_serves_over_tls_and_requires_the_client_certificate() {
    use std::io::BufRead;
    let pki = Pki::new("simcmd");
    let mut child = common::bin()
        .args(["sim", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&pki.server.cert)
        .arg("--tls-key")
        .arg(&pki.server.key)
        .arg("--client-ca")
        .arg(&pki.ca)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let sim = Killed(child);
    assert!(
        first.starts_with("llm-canary sim listening on https://127.0.0.1:"),
        "{first}"
    );
    let origin = first.trim().rsplit(' ').next().unwrap().to_string();
    let tls = format!(
        "tls: {{ca_file: \"{}\", cert_file: \"{}\", key_file: \"{}\"}}",
        pki.ca(),
        pki.client.cert(),
        pki.client.key()
    );
    let agent = format!(
        "targets:\n{}",
        target("t", &format!("{origin}/s/healthy/v1"), &tls)
    );
    let v = &once(&agent, &[]).await[0];
    assert_eq!(v["outcome"], "ok", "{v}");
    assert_eq!(
        v["tls"]["issuer"], "O=llm-canary tests,CN=llm-canary test CA",
        "{v}"
    );
    drop(sim);

    let out = common::bin()
        .args(["sim", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&pki.server.cert)
        .arg("--tls-key")
        .arg(&pki.server.cert)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{} holds no PEM private key",
            pki.server.cert.display()
        )),
        "{err}"
    );
}

/// A child process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `timeouts.connect` bounds the whole setup, the TLS handshake included: a server that takes
/// the connection and never answers the handshake is a connect timeout, not a TTFT one.
#[tokio::test(flavor = "multi_thread")]
async fn a_handshake_that_never_ends_is_a_connect_timeout() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((sock, _)) = silent.accept().await {
            open.push(sock);
        }
    });
    let dir = common::TempDir::new("silent");
    dir.write(&[
        (
            "llm-canary.yaml",
            &format!(
                "targets:\n{}",
                target("t", &format!("https://{addr}/v1"), "")
            ),
        ),
        (
            "probes/p.yaml",
            "name: p\nprompt: q.txt\ntimeouts: {connect: 300ms, ttft: 5s, stall: 5s, total: 10s}\n",
        ),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let mut cmd = common::bin();
    cmd.args(["once", "--format", "json", "-c"])
        .arg(dir.path().join("llm-canary.yaml"));
    let out = common::output(cmd).await;
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "connect_error", "{v}");
    assert_eq!(v["error"], format!("connect: timed out ({addr})"), "{v}");
    assert!(ms(&v, "connect_ms") >= 0.0 && v["tls_ms"].is_null(), "{v}");
    assert!(ms(&v, "e2e_ms") < 2000.0, "{v}");
    held.abort();
}

/// A client that connects to the TLS sim and never starts the handshake is closed at the
/// header timeout (5 s), as one that never sends its headers is.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_client_is_closed_at_the_header_timeout_before_its_handshake() {
    use tokio::io::AsyncReadExt;
    let pki = Pki::new("silent-client");
    let sim = Sim::start_tls("127.0.0.1:0", &pki.server.cert, &pki.server.key, None)
        .await
        .unwrap();
    let mut sock = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let opened = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(std::time::Duration::from_secs(15), sock.read(&mut buf))
        .await
        .expect("the sim closes a silent connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let after = opened.elapsed();
    assert!(after >= std::time::Duration::from_millis(4900), "{after:?}");
}
