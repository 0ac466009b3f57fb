//! A real llama.cpp server for tests: `llama-server` with SmolLM2-135M on a free loopback port,
//! waited for on /health, stopped on drop. `scripts/test-real-llm` installs both and sets
//! LLAMA_SERVER and LLAMA_MODEL.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::services::{free_port, wait_ready};

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
        let need = |var: &str| {
            std::env::var(var).unwrap_or_else(|_| {
                panic!("{var} is not set: run the real-server suite with scripts/test-real-llm, which installs llama.cpp's server and SmolLM2 and sets it")
            })
        };
        let (server, model) = (need("LLAMA_SERVER"), need("LLAMA_MODEL"));
        let child = Command::new(&server)
            .args([
                "-m",
                &model,
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
            ])
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
}
