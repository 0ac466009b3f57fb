//! Credentials as clouds hand them out, from the sim's loopback stand-ins, each issuing
//! credentials good for 12 s: Bedrock requests signed with keys from EC2 IMDSv2, ECS container
//! credentials and STS web identity (through AWS's own chain, pointed at the stand-ins by the
//! SDK's endpoint overrides) and from a named profile; Azure OpenAI requests carrying Entra ID
//! tokens from client credentials and a managed identity. Each source proves the sim accepted
//! what its stand-in issued, and then a second credential, fetched before the first expired,
//! with no reload. No issued secret appears in a record, a metric or the log.

use std::collections::BTreeSet;

use crate::common;

use llm_canary::testing::config::Config;
use llm_canary::testing::outcome::{HttpReason, Outcome};
use llm_canary::testing::runner::Runner;
use llm_canary::testing::sim::credentials::{ENTRA_CLIENT_SECRET, LIFETIME};
use llm_canary::testing::sim::Sim;

/// A free loopback port, for a sim whose address goes into the environment before any thread
/// starts.
fn sim_port() -> u16 {
    common::closed_port()
}

/// The variables that keep AWS's chain from finding anything on the machine running the tests,
/// plus `extra`.
fn aws_env(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        (
            "AWS_CONFIG_FILE",
            "/nonexistent/llm-canary-test/config".to_string(),
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/llm-canary-test/credentials".to_string(),
        ),
        ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
    ];
    for (k, v) in extra {
        env.retain(|(e, _)| e != k);
        env.push((k, v.clone()));
    }
    env
}

fn with_env<F: std::future::Future>(env: &[(&'static str, String)], test: F) -> F::Output {
    // The runner must not see keys from the machine's own environment.
    for k in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
    ] {
        std::env::remove_var(k);
    }
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    common::with_env(&vars, test)
}

/// The key id a Bedrock request was signed with.
fn key_id(auth: &str) -> String {
    let cred = auth
        .split("Credential=")
        .nth(1)
        .unwrap_or_else(|| panic!("not SigV4: {auth}"));
    cred.split('/').next().unwrap().to_string()
}

/// Runs the config's one probe on its one target, run after run, until the first credential
/// has expired and the sim has accepted requests with a second (or [`LIFETIME`] three times
/// over has passed): every run must pass, since a credential is replaced before it expires,
/// and the sim refuses an expired one. Returns the credentials in the order the requests
/// carried them.
async fn two_credentials(
    sim: &Sim,
    cfg: &Config,
    of: fn(&llm_canary::testing::sim::Seen) -> String,
) -> Vec<String> {
    let runner = Runner::new(1);
    let metrics = llm_canary::testing::sinks::metrics::Metrics::new(cfg);
    let start = std::time::Instant::now();
    let deadline = start + LIFETIME * 3;
    // The first credential was issued after `start`, so it has expired by then.
    let first_expired = start + LIFETIME + std::time::Duration::from_secs(1);
    let mut records = Vec::new();
    loop {
        let r = runner.run_one(&cfg.probes[0], &cfg.targets[0]).await;
        assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
        metrics.record(&r, &cfg.targets[0]);
        records.push(serde_json::to_string(&r).unwrap());
        let seen: Vec<String> = sim.seen().iter().map(of).collect();
        let distinct: BTreeSet<&String> = seen.iter().collect();
        if distinct.len() >= 2 && std::time::Instant::now() > first_expired {
            let secrets = sim.issued_secrets();
            assert!(!secrets.is_empty());
            let text = String::from_utf8(metrics.encode()).unwrap();
            for s in &secrets {
                assert!(!text.contains(s.as_str()), "a secret in the metrics");
                assert!(
                    records.iter().all(|r| !r.contains(s.as_str())),
                    "a secret in a record"
                );
            }
            let mut order = seen.clone();
            order.dedup();
            let unique: BTreeSet<&String> = order.iter().collect();
            assert_eq!(
                unique.len(),
                order.len(),
                "each credential in one stretch: {seen:?}"
            );
            assert_ne!(
                seen.last(),
                seen.first(),
                "the last run used the first credential"
            );
            return order;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still one credential after {:?}: {seen:?}",
            LIFETIME * 3
        );
    }
}

fn aws_key_id(s: &llm_canary::testing::sim::Seen) -> String {
    key_id(s.header("authorization").expect("signed"))
}

/// A Bedrock target on the sim with no keys named: AWS's chain finds them.
fn bedrock(sim: &Sim, extra: &str) -> (common::TempDir, Config) {
    let keys = format!("api: bedrock, aws: {{region: us-east-1{extra}}}");
    common::config(sim, &[("bedrock", "healthy", keys.as_str())], common::PROBE)
}

async fn assert_rotates(port: u16, source: &str) {
    let sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
    let (_dir, cfg) = bedrock(&sim, "");
    let ids = two_credentials(&sim, &cfg, aws_key_id).await;
    for id in &ids {
        assert!(id.starts_with(&format!("ASIASIM{source}")), "{ids:?}");
    }
    // Every request carried the session token that went with its key (the sim checks it).
    assert!(sim
        .seen()
        .iter()
        .all(|s| s.header("x-amz-security-token").is_some()));
}

#[test]
fn bedrock_signs_with_the_instance_role_from_imdsv2_and_its_next_credential() {
    let port = sim_port();
    let env = aws_env(&[
        ("AWS_EC2_METADATA_DISABLED", "false".into()),
        (
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        ),
    ]);
    with_env(&env, assert_rotates(port, "IMDS"));
}

#[test]
fn bedrock_signs_with_container_credentials_and_their_next_ones() {
    let port = sim_port();
    let env = aws_env(&[(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        format!("http://127.0.0.1:{port}/container/credentials"),
    )]);
    with_env(&env, assert_rotates(port, "ECS"));
}

/// EKS Pod Identity: the container-credentials endpoint, asked with the pod's token.
#[test]
fn bedrock_signs_with_pod_identity_credentials_sent_with_the_pods_token() {
    let port = sim_port();
    let dir = common::TempDir::new("pod-identity");
    dir.write(&[("token", "sim-pod-identity-token")]);
    let env = aws_env(&[
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("http://127.0.0.1:{port}/container/credentials"),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            dir.path().join("token").display().to_string(),
        ),
    ]);
    with_env(&env, async move {
        let sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
        let (_dir, cfg) = bedrock(&sim, "");
        let r = Runner::new(1)
            .run_one(&cfg.probes[0], &cfg.targets[0])
            .await;
        assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
        assert!(aws_key_id(&sim.seen()[0]).starts_with("ASIASIMECS"));
        assert_eq!(
            sim.container_authorizations(),
            [Some("sim-pod-identity-token".to_string())]
        );
    });
}

#[test]
fn bedrock_signs_with_web_identity_credentials_and_their_next_ones() {
    let port = sim_port();
    let dir = common::TempDir::new("irsa");
    dir.write(&[(
        "token",
        "eyJhbGciOiJSUzI1NiJ9.sim-service-account-token.sig",
    )]);
    let env = aws_env(&[
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/sim-web-identity-role".into(),
        ),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            dir.path().join("token").display().to_string(),
        ),
        ("AWS_ENDPOINT_URL_STS", format!("http://127.0.0.1:{port}")),
    ]);
    with_env(&env, assert_rotates(port, "STS"));
}

/// `aws.profile` reads the shared files, as every AWS tool does: the sim's test key, under a
/// named profile, signs; the default profile (another key) is not used.
#[test]
fn bedrock_signs_with_a_named_profile() {
    use llm_canary::testing::sim::bedrock::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
    let dir = common::TempDir::new("profile");
    let creds = format!("[default]\naws_access_key_id = AKIDNOTTHESIMS\naws_secret_access_key = wrong\n\n[sim]\naws_access_key_id = {ACCESS_KEY_ID}\naws_secret_access_key = {SECRET_ACCESS_KEY}\n");
    dir.write(&[
        ("credentials", creds.as_str()),
        ("config", "[profile sim]\nregion = us-east-1\n"),
    ]);
    let env = aws_env(&[
        (
            "AWS_CONFIG_FILE",
            dir.path().join("config").display().to_string(),
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.path().join("credentials").display().to_string(),
        ),
    ]);
    with_env(&env, async {
        let sim = Sim::start("127.0.0.1:0").await.unwrap();
        let (_dir, cfg) = bedrock(&sim, ", profile: sim");
        let r = Runner::new(1)
            .run_one(&cfg.probes[0], &cfg.targets[0])
            .await;
        assert_eq!(r.judged.outcome, Outcome::Ok, "{:?}", r.judged.error);
        assert_eq!(aws_key_id(&sim.seen()[0]), ACCESS_KEY_ID);
        // Without the profile, the default one's key is refused by the sim.
        let (_dir, cfg) = bedrock(&sim, "");
        let r = Runner::new(1)
            .run_one(&cfg.probes[0], &cfg.targets[0])
            .await;
        assert_eq!(
            (r.judged.outcome, r.measured.reading.http_reason),
            (Outcome::HttpError, Some(HttpReason::Auth))
        );
    });
}

/// The agent's own log at its most verbose, and its records on stdout, hold none of what the
/// stand-in issued, though the sim received it.
#[test]
fn issued_aws_secrets_never_appear_in_the_log_or_records() {
    let port = sim_port();
    let env = aws_env(&[
        ("AWS_EC2_METADATA_DISABLED", "false".into()),
        (
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        ),
    ]);
    with_env(&env, async {
        let sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
        let (dir, _cfg) = bedrock(&sim, "");
        let mut cmd = common::bin();
        cmd.args(["--log-level", "trace", "once", "-c"])
            .arg(dir.path().join("llm-canary.yaml"))
            .args(["--format", "json", "--show-output"]);
        let out = common::output(cmd).await;
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
        assert!(o.contains("\"outcome\":\"ok\""), "{o}");
        let secrets = sim.issued_secrets();
        assert_eq!(secrets.len(), 2, "one key's secret and session token");
        for s in &secrets {
            assert!(
                !o.contains(s.as_str()) && !e.contains(s.as_str()),
                "a secret leaked:\n{o}\n{e}"
            );
        }
    });
}

/// An Azure OpenAI target with `entra:` on the sim.
fn azure(sim: &Sim, entra: &str, extra: &str) -> (common::TempDir, Config) {
    let keys = format!("api: azure-openai, entra: {{{entra}}}{extra}");
    common::config(sim, &[("azure", "healthy", keys.as_str())], common::PROBE)
}

fn bearer(s: &llm_canary::testing::sim::Seen) -> String {
    s.header("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("a bearer token")
        .to_string()
}

#[test]
fn azure_takes_entra_tokens_from_client_credentials_and_their_next_ones() {
    let port = sim_port();
    let env = [
        ("AZURE_AUTHORITY_HOST", format!("http://127.0.0.1:{port}")),
        ("SIM_ENTRA_SECRET", ENTRA_CLIENT_SECRET.to_string()),
    ];
    with_env(&env, async {
        let sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
        let (_dir, cfg) = azure(
            &sim,
            "tenant_id: sim-tenant, client_id: sim-client, client_secret_env: SIM_ENTRA_SECRET",
            ", api_version: 2025-04-01-preview",
        );
        let tokens = two_credentials(&sim, &cfg, bearer).await;
        assert!(
            tokens.iter().all(|t| t.starts_with("sim-entra-")),
            "{tokens:?}"
        );
        for s in sim.seen() {
            assert!(
                s.path
                    .ends_with("/chat/completions?api-version=2025-04-01-preview"),
                "{}",
                s.path
            );
            assert_eq!(s.header("api-key"), None);
        }
    });
}

#[test]
fn azure_takes_entra_tokens_from_a_managed_identity() {
    let port = sim_port();
    let env = [(
        "AZURE_POD_IDENTITY_AUTHORITY_HOST",
        format!("http://127.0.0.1:{port}"),
    )];
    with_env(&env, async {
        let sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
        let (_dir, cfg) = azure(&sim, "managed_identity: true", "");
        let tokens = two_credentials(&sim, &cfg, bearer).await;
        assert!(
            tokens.iter().all(|t| t.starts_with("sim-entra-")),
            "{tokens:?}"
        );
        // The default API version.
        assert!(sim.seen()[0].path.ends_with("?api-version=2024-10-21"));
    });
}

/// A secret the token endpoint refuses: the run is an `auth` error, and the secret is nowhere
/// in it.
#[test]
fn a_refused_client_secret_is_an_auth_error_without_the_secret() {
    let port = sim_port();
    let env = [
        ("AZURE_AUTHORITY_HOST", format!("http://127.0.0.1:{port}")),
        ("SIM_ENTRA_SECRET", "not-the-client-secret".to_string()),
    ];
    with_env(&env, async {
        let sim = Sim::start(&format!("127.0.0.1:{port}")).await.unwrap();
        let (_dir, cfg) = azure(
            &sim,
            "tenant_id: sim-tenant, client_id: sim-client, client_secret_env: SIM_ENTRA_SECRET",
            "",
        );
        let r = Runner::new(1)
            .run_one(&cfg.probes[0], &cfg.targets[0])
            .await;
        assert_eq!(
            (r.judged.outcome, r.measured.reading.http_reason),
            (Outcome::HttpError, Some(HttpReason::Auth)),
            "{:?}",
            r.judged.error
        );
        let record = serde_json::to_string(&r).unwrap();
        assert!(!record.contains("not-the-client-secret"), "{record}");
    });
}
