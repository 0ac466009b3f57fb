//! A real llama.cpp server for tests: `llama-server` with SmolLM2-135M on a free loopback port,
//! waited for on /health, stopped on drop. `scripts/test-real-llm` installs both and sets
//! LLAMA_SERVER and LLAMA_MODEL. `--jinja` applies the model's own chat template, which is what
//! lets the server accept `tools` and parse the model's tool calls.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use llm_canary::testing::config::{self, Config};
use llm_canary::testing::result::ProbeResult;
use llm_canary::testing::runner::Runner;

use super::services::{free_port, wait_ready};
use super::TempDir;

/// Writes `files` (path, text) into a fresh folder and loads its `llm-canary.yaml`: the real
/// suites build their configs from prompts that suit the model.
pub fn load_written(tag: &str, files: &[(String, String)]) -> (TempDir, Config) {
    let dir = TempDir::new(tag);
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    dir.write(&refs);
    let cfg = config::load(&dir.path().join("llm-canary.yaml")).unwrap();
    (dir, cfg)
}

/// One run of the probe named `probe` on the target named `target`.
pub async fn run_named(runner: &Runner, cfg: &Config, probe: &str, target: &str) -> ProbeResult {
    let p = cfg.probes.iter().find(|p| p.name == probe).unwrap();
    runner.run_one(p, cfg.target(target).unwrap()).await
}

fn need(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the real-server suite with scripts/test-real-llm, which installs llama.cpp's server and SmolLM2 and sets it")
    })
}

/// The model file `scripts/install-llama-server` installed (LLAMA_MODEL).
pub fn model_path() -> String {
    need("LLAMA_MODEL")
}

pub struct LlamaServer {
    child: Child,
    pub port: u16,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    /// Starts a server with `threads` threads (`-c 2048`).
    pub async fn start(threads: u32) -> LlamaServer {
        LlamaServer::start_on(free_port(), threads).await
    }

    /// The same on `port`: a server stopped by dropping it comes back on its address.
    pub async fn start_on(port: u16, threads: u32) -> LlamaServer {
        LlamaServer::start_with(port, threads, &[]).await
    }

    /// The same with more server flags (`--no-cache-prompt`).
    pub async fn start_with(port: u16, threads: u32, extra: &[&str]) -> LlamaServer {
        LlamaServer::start_model(port, threads, &model_path(), extra).await
    }

    /// The same serving the GGUF file at `model` (a corrupted copy, for the fault drill).
    pub async fn start_model(port: u16, threads: u32, model: &str, extra: &[&str]) -> LlamaServer {
        let server = need("LLAMA_SERVER");
        let child = Command::new(&server)
            .args([
                "-m",
                model,
                "-c",
                "2048",
                "-t",
                &threads.to_string(),
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                // Its own Prometheus metrics, for `calibrate`.
                "--metrics",
                "--jinja",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {server}: {e}"));
        let s = LlamaServer { child, port };
        wait_ready(&format!("{}/health", s.url()), Duration::from_secs(120)).await;
        s
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Pins every thread of the server to `cpu` (util-linux's `taskset`).
    pub fn pin(&self, cpu: u32) {
        let status = Command::new("taskset")
            .args([
                "-a",
                "-p",
                "-c",
                &cpu.to_string(),
                &self.child.id().to_string(),
            ])
            .stdout(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("taskset (util-linux) is needed: {e}"));
        assert!(
            status.success(),
            "taskset could not pin the server to cpu {cpu}"
        );
    }
}

/// A busy loop pinned to one CPU while it lives: a noisy neighbour that takes half of that
/// CPU from whatever else runs there.
pub struct NoisyNeighbour(Child);

impl NoisyNeighbour {
    pub fn on(cpu: u32) -> NoisyNeighbour {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("taskset (util-linux) is needed: {e}"));
        NoisyNeighbour(child)
    }
}

impl Drop for NoisyNeighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
