//! Test support: temporary config folders and configs whose targets are sim scenarios.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use llm_canary::config::{self, Config};
use llm_canary::sim::Sim;

/// A folder under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let p = std::env::temp_dir().join(format!(
            "llm-canary-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `files` (relative path, contents), creating folders.
    pub fn write(&self, files: &[(&str, &str)]) {
        for (rel, text) in files {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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

/// A config with one target per `(name, scenario, extra target keys)` and the given probe
/// (which runs against every target).
pub fn config(sim: &Sim, targets: &[(&str, &str, &str)], probe: &str) -> (TempDir, Config) {
    let dir = TempDir::new("cfg");
    let mut agent = String::from("agent: {name: test, concurrency: 64}\ntargets:\n");
    for (name, scenario, extra) in targets {
        let url = sim.base_url(scenario);
        agent.push_str(&format!(
            "  - {{name: {name}, base_url: \"{url}\", model: m, {extra}}}\n"
        ));
    }
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", probe),
        ("prompts/q.txt", PROMPT),
    ]);
    let cfg = config::load(&dir.path().join("llm-canary.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{agent}"));
    (dir, cfg)
}

/// A local port with nothing listening on it.
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
pub mod daemon;
pub mod llama;
pub mod services;
