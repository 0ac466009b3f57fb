//! What users copy out of the repository works where they put it: the CI example copied as
//! deploy/ci/README.md says, and the Debian package's /etc/llm-canary/ as scripts/build-deb
//! lays it out. The CI examples' install steps run against the release artifacts, in
//! tests/release.rs.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{bin, output, root, TempDir};
use llm_canary::testing::sim::Sim;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The ```sh blocks of a Markdown file, each as one script.
fn sh_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in markdown.lines() {
        match (line, open.as_mut()) {
            ("```sh", None) => open = Some(String::new()),
            ("```", Some(_)) => blocks.extend(open.take()),
            (_, Some(block)) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// `check -c gate/llm-canary.yaml` in `dir`, as the CI job runs it (keys set, as CI secrets).
fn check_gate_config(dir: &Path) -> Output {
    bin()
        .args(["check", "-c", "gate/llm-canary.yaml"])
        .current_dir(dir)
        .env("CANDIDATE_API_KEY", "k1")
        .env("PROD_API_KEY", "k2")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ci_example_copied_as_its_readme_says_validates_and_gates() {
    let readme = std::fs::read_to_string(root().join("deploy/ci/README.md")).unwrap();
    let blocks = sh_blocks(&readme);
    assert_eq!(blocks.len(), 2, "GitHub's and GitLab's copy commands");
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    for (block, workflow) in blocks
        .iter()
        .zip([".github/workflows/llm-gate.yml", "llm-gate.gitlab-ci.yml"])
    {
        // A user's repository, and the commands exactly as written.
        let repo = TempDir::new("ci-copy");
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", block])
            .current_dir(repo.path())
            .env("LLM_CANARY", root())
            .output()
            .unwrap();
        assert!(out.status.success(), "{block}\n{}", text(&out.stderr));
        let job = std::fs::read_to_string(repo.path().join(workflow)).unwrap();
        assert!(
            job.contains("llm-canary check -c gate/llm-canary.yaml")
                && job.contains("llm-canary gate -c gate/llm-canary.yaml"),
            "{workflow} no longer runs what this test checks"
        );
        let out = check_gate_config(repo.path());
        assert_eq!(out.status.code(), Some(0), "{block}\n{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("capital"),
            "{}",
            text(&out.stdout)
        );

        // The copied gate, with the sim as the candidate: the probe and its prompt are found,
        // and its SLOs pass on a healthy replica.
        let config = repo.path().join("gate/llm-canary.yaml");
        let yaml = std::fs::read_to_string(&config).unwrap().replace(
            "http://llm-candidate.inference.svc:8000/v1",
            &sim.base_url("healthy"),
        );
        std::fs::write(&config, yaml).unwrap();
        let mut gate = bin();
        gate.args([
            "gate",
            "-c",
            "gate/llm-canary.yaml",
            "--target",
            "candidate",
        ])
        .args(["--samples", "5", "--junit", "gate-junit.xml"])
        .args(["--summary", "gate-summary.md"])
        .current_dir(repo.path())
        .env("CANDIDATE_API_KEY", "k1")
        .env("PROD_API_KEY", "k2");
        let out = output(gate).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let junit = std::fs::read_to_string(repo.path().join("gate-junit.xml")).unwrap();
        assert!(junit.contains("capital"), "{junit}");
    }
}

#[test]
fn the_ci_example_needs_nothing_outside_its_folder() {
    // Copied alone, without the rest of the repository beside it, the config still loads.
    let repo = TempDir::new("ci-alone");
    let gate = repo.path().join("gate");
    common::copy_dir(&root().join("deploy/ci"), &gate);
    let out = check_gate_config(repo.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for file in ["github-actions.yml", "gitlab-ci.yml"] {
        let job = std::fs::read_to_string(gate.join(file)).unwrap();
        assert!(
            !job.contains("your-org"),
            "{file} still points at a placeholder"
        );
    }
}

#[test]
fn the_packaged_config_is_valid_where_the_package_puts_it() {
    // /etc/llm-canary/ as the package lays it out ([package.metadata.deb] in Cargo.toml).
    let etc = TempDir::new("deb-etc");
    std::fs::copy(
        root().join("deploy/debian/llm-canary.yaml"),
        etc.path().join("llm-canary.yaml"),
    )
    .unwrap();
    common::copy_dir(&root().join("probes"), &etc.path().join("probes"));
    common::copy_dir(&root().join("prompts"), &etc.path().join("prompts"));
    common::copy_dir(&root().join("schemas"), &etc.path().join("schemas"));
    let out = bin()
        .arg("check")
        .arg("-c")
        .arg(etc.path().join("llm-canary.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("5 probe(s)"),
        "{}",
        text(&out.stdout)
    );
}
