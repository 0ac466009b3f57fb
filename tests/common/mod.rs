//! Test support: temporary config folders and configs whose targets are sim scenarios.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use llm_canary::testing::config::{self, Config};
use llm_canary::testing::sim::Sim;

/// A folder under the system temp dir (tempfile's: unique, removed on drop), with a writer
/// for config files.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// `tag` starts the folder's name, to tell which test left it when a run is killed.
    pub fn new(tag: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("llm-canary-test-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `files` (relative path, contents), creating folders.
    pub fn write(&self, files: &[(&str, &str)]) {
        for (rel, text) in files {
            let p = self.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }
}

pub const PROBE: &str = r#"name: p
prompt: q.txt
cache_bust: prefix
max_tokens: 64
timeouts: {connect: 1s, ttft: 700ms, stall: 700ms, total: 3s}
checks: {min_chars: 20, max_chars: 400, expect: "(?i)paris", forbid: "(?i)as an ai"}
"#;

pub const PROMPT: &str = "What is the capital of France?";

/// The flavors that speak in chat messages, and so carry reasoning and tool calls: all but
/// openai-completions (and azure-openai, which is openai-chat's stream).
pub const CHAT_FLAVORS: [&str; 5] = [
    "openai-chat",
    "openai-responses",
    "anthropic-messages",
    "ollama",
    "gemini",
];

/// An agent file with one target per `(name, scenario, extra target keys)`.
pub fn agent_yaml(sim: &Sim, targets: &[(&str, &str, &str)]) -> String {
    let mut agent = String::from("agent: {name: test, concurrency: 64}\ntargets:\n");
    for (name, scenario, extra) in targets {
        // Ollama's base_url is the server root; every other flavor's ends in /v1.
        let url = match extra.contains("api: ollama") {
            true => sim.base_url(scenario).trim_end_matches("/v1").to_string(),
            false => sim.base_url(scenario),
        };
        agent.push_str(&format!(
            "  - {{name: {name}, base_url: \"{url}\", model: m, {extra}}}\n"
        ));
    }
    agent
}

/// A config with one target per `(name, scenario, extra target keys)` and the given probe
/// (which runs against every target).
pub fn config(sim: &Sim, targets: &[(&str, &str, &str)], probe: &str) -> (TempDir, Config) {
    let dir = TempDir::new("cfg");
    let agent = agent_yaml(sim, targets);
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", probe),
        ("prompts/q.txt", PROMPT),
    ]);
    let cfg = config::load(&dir.path().join("llm-canary.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{agent}"));
    (dir, cfg)
}

/// A Bedrock target's extra keys, signing with the sim's test key read from files in the
/// returned folder (keep it while the config is used).
pub fn bedrock_keys() -> (TempDir, String) {
    use llm_canary::testing::sim::bedrock::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
    let dir = TempDir::new("aws");
    dir.write(&[("id", ACCESS_KEY_ID), ("secret", SECRET_ACCESS_KEY)]);
    let p = dir.path().display();
    let extra = format!("api: bedrock, aws: {{region: us-east-1, access_key_id_file: \"{p}/id\", secret_access_key_file: \"{p}/secret\"}}");
    (dir, extra)
}

/// Copies the folder `from` into `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// A local port with nothing listening on it.
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
pub mod daemon;
pub mod llama;
pub mod pki;
pub mod procfs;
pub mod services;

/// Runs `probe` twice on one target (`extra`: the target's own keys); what the sim saw of
/// each request. Both runs must pass.
pub async fn twice(extra: &str, probe: &str) -> Vec<llm_canary::testing::sim::Seen> {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let (_dir, cfg) = config(&sim, &[("t", "healthy", extra)], probe);
    let runner = llm_canary::testing::runner::Runner::new(1);
    for _ in 0..2 {
        let r = runner.run_one(&cfg.probes[0], &cfg.targets[0]).await;
        assert!(
            r.success(),
            "{extra}: {:?} {:?}",
            r.judged.outcome,
            r.judged.error
        );
    }
    sim.seen()
}

/// The top-level keys of a request's JSON body, sorted.
pub fn body_keys(seen: &llm_canary::testing::sim::Seen) -> Vec<&str> {
    let mut keys: Vec<&str> = seen
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// The prompts of two requests sent with `cache_bust: prefix`: each is the probe's prompt
/// behind a `[canary ...]` marker, and the two differ, so no cache can answer the second.
pub fn assert_prefix_busted(first: Option<&str>, second: Option<&str>) {
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(
        first.starts_with("[canary ") && first.ends_with(PROMPT),
        "{first}"
    );
    assert_ne!(first, second);
}

/// The agent's binary, as cargo built it for the tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_llm-canary"))
}

/// Runs `cmd` off the async runtime (the sim runs on it in-process).
pub async fn output(mut cmd: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// The repository's root (where deploy/ is).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd`, which must succeed; returns what it printed (stdout, then stderr).
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Sets environment variables, then runs `test` on a fresh multi-threaded runtime. The
/// variables are in place before any thread exists, so none reads the environment while it
/// changes (`std::env::set_var` beside running threads is a data race).
pub fn with_env<F: std::future::Future>(vars: &[(&str, &str)], test: F) -> F::Output {
    for (name, value) in vars {
        std::env::set_var(name, value);
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a test runtime")
        .block_on(test)
}
