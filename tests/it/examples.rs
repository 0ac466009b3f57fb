//! Every config in examples/: `check` accepts it as shipped, and `once` runs its probes against
//! the sim, every target's base_url pointed at it (a sim scenario's URL keeps its scenario),
//! each run judged ok. The hosted examples' credentials come from the sim's stand-ins where a
//! cloud hands them out (Entra ID's token endpoint, the EC2 instance role), and `check` names
//! the header (or signature) each target's requests carry.

use crate::common;

use std::path::PathBuf;

use common::{bin, output, root, TempDir};
use llm_canary::testing::sim::bedrock::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use llm_canary::testing::sim::credentials::ENTRA_CLIENT_SECRET;
use llm_canary::testing::sim::Sim;
use serde_json::Value;

/// The keys the hosted examples read (any value passes `check`; the sim takes none but
/// Bedrock's, which must sign with its test key).
const ENV: [(&str, &str); 7] = [
    ("OPENAI_API_KEY", "sk-example-test"),
    ("AZURE_CLIENT_SECRET", ENTRA_CLIENT_SECRET),
    ("ANTHROPIC_API_KEY", "sk-ant-example-test"),
    ("GEMINI_API_KEY", "gemini-example-test"),
    ("AZURE_OPENAI_API_KEY", "azure-example-test"),
    ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
    ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
];

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 9, "examples/ holds {files:?}");
    files
}

/// What `check` says each hosted example's target sends.
const AUTH: [(&str, &str); 7] = [
    ("openai.yaml", "key as a bearer token in authorization"),
    ("anthropic.yaml", "key in x-api-key, with anthropic-version"),
    ("gemini.yaml", "key in x-goog-api-key"),
    ("azure-openai.yaml", "key in api-key"),
    (
        "azure-openai-entra.yaml",
        "Entra ID bearer token in authorization (client credentials",
    ),
    (
        "bedrock.yaml",
        "requests signed with AWS SigV4 for us-east-1, keys read at load",
    ),
    (
        "bedrock-instance-role.yaml",
        "requests signed with AWS SigV4 for us-east-1, keys from AWS's default chain",
    ),
];

/// The environment an example runs in against the sim: every example's keys, the Entra ID
/// authority at the sim, and for the instance-role example no keys at all but the sim as the
/// instance metadata service.
fn env_for(cmd: &mut std::process::Command, name: &str, sim: &Sim) {
    cmd.envs(ENV)
        .env("AZURE_AUTHORITY_HOST", format!("http://{}", sim.addr()));
    if name == "bedrock-instance-role.yaml" {
        cmd.env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE")
            .env("AWS_CONFIG_FILE", "/nonexistent/llm-canary-test/config")
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                "/nonexistent/llm-canary-test/credentials",
            )
            .env(
                "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                format!("http://{}", sim.addr()),
            );
    }
}

/// The config with every `base_url:` at the sim: the scenario its URL names (`/s/<scenario>/`),
/// else `healthy`.
fn at_the_sim(config: &str, sim: &Sim) -> String {
    let mut out = String::new();
    for line in config.lines() {
        match line.split_once("base_url: ") {
            Some((key, url)) => {
                let scenario = url
                    .split("/s/")
                    .nth(1)
                    .and_then(|rest| rest.split('/').next())
                    .unwrap_or("healthy");
                out.push_str(&format!("{key}base_url: {}", sim.base_url(scenario)));
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_passes_check_and_runs_against_the_sim() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = TempDir::new("examples");
    common::copy_dir(&root().join("examples"), dir.path());
    for example in examples() {
        let name = example.file_name().unwrap().to_str().unwrap().to_string();

        let mut check = bin();
        check.arg("check").arg("-c").arg(&example);
        env_for(&mut check, &name, &sim);
        let out = output(check).await;
        assert!(
            out.status.success(),
            "check -c examples/{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some((_, says)) = AUTH.iter().find(|(f, _)| *f == name) {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains(says), "check -c examples/{name}:\n{stdout}");
        }

        let config = std::fs::read_to_string(&example).unwrap();
        let targets = config.matches("base_url: ").count();
        let local = dir.path().join(&name);
        std::fs::write(&local, at_the_sim(&config, &sim)).unwrap();
        let mut once = bin();
        once.args(["once", "--format", "json", "-c"]).arg(&local);
        env_for(&mut once, &name, &sim);
        let out = output(once).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "once -c examples/{name} against the sim: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
            .collect();
        assert!(
            records.len() >= targets,
            "examples/{name}: {} records for {targets} targets",
            records.len()
        );
        for r in &records {
            assert_eq!(r["outcome"], "ok", "examples/{name}: {r}");
        }
    }
    // The instance-role example signed with the role the sim's IMDS handed out, and the Entra
    // example sent a token its token endpoint issued.
    let seen = sim.seen();
    assert!(
        seen.iter().any(|s| s
            .header("authorization")
            .is_some_and(|a| a.contains("Credential=ASIASIMIMDS"))),
        "no request signed with the instance role's keys"
    );
    assert!(
        seen.iter().any(|s| s
            .header("authorization")
            .is_some_and(|a| a.starts_with("Bearer sim-entra-"))),
        "no request with an Entra ID token"
    );
}

#[test]
fn the_full_example_has_slo_alerts_a_monthly_cost_a_ladder_and_a_cache_check() {
    let full = root().join("examples/full.yaml");
    let out = bin().args(["rules", "-c"]).arg(&full).output().unwrap();
    let rules = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for alert in [
        "LLMCanarySLOFastBurn",
        "LLMCanarySLOSlowBurn",
        "LLMCanarySLOBudgetBurn",
    ] {
        assert!(rules.contains(&format!("alert: {alert}")), "{rules}");
    }
    // A probe's own objective beside the target's.
    assert!(rules.contains("probe=\"capital\""), "{rules}");

    let out = bin().args(["check", "-c"]).arg(&full).output().unwrap();
    let check = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(check.contains("monthly estimate (30 days): "), "{check}");
    assert!(
        check.contains("cache_check: each firing is two runs"),
        "{check}"
    );
    assert!(check.contains("context-ladder"), "{check}");
}
