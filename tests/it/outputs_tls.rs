//! The outputs over TLS: the daemon pushing to a real Pushgateway that serves HTTPS from its
//! own web config (basic auth, then client certificates), and through a real forward proxy.

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
