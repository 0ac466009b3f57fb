//! `demo`: starts the simulated replica in-process on a free port, writes a small config whose
//! targets are some of its scenarios (healthy and failing), and runs `once` against it, so a
//! newcomer sees healthy and failing probes in one command. Always exits 0.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Format, OnceArgs};
use crate::sim::Sim;

const AGENT: &str = r#"agent:
  name: demo
targets:
  - {name: healthy-vllm, base_url: "{SIM}/s/healthy/v1", server: vllm, model: sim-chat, labels: {model_version: "1"}}
  - {name: healthy-llama-cpp, base_url: "{SIM}/s/llama-cpp/v1", api: openai-completions, server: llama-cpp, model: sim-completions}
  - {name: looping, base_url: "{SIM}/s/repetition/v1", server: vllm, model: sim-chat}
  - {name: stalling, base_url: "{SIM}/s/stall,stall=2s/v1", server: vllm, model: sim-chat}
  - {name: slow-start, base_url: "{SIM}/s/slow-first-token,ttft=2s/v1", server: vllm, model: sim-chat}
  - {name: overloaded, base_url: "{SIM}/s/http-503/v1", server: vllm, model: sim-chat}
  - {name: broken-stream, base_url: "{SIM}/s/mid-stream-error/v1", server: vllm, model: sim-chat}
"#;

const PROBES: &str = r#"- name: capital
  targets: [healthy-vllm, healthy-llama-cpp, looping, stalling, slow-start, overloaded, broken-stream]
  prompt: capital.txt
  max_tokens: 64
  timeouts: {ttft: 1s, stall: 1s, total: 10s}
  checks: {min_chars: 20, expect: "(?i)paris", forbid: "(?i)as an ai"}
- name: capital-zh
  targets: [healthy-vllm]
  prompt: capital-zh.txt
  max_tokens: 64
  checks: {expect: "巴黎"}
- name: long-context
  targets: [healthy-vllm]
  prompt: long-context.yaml
  max_tokens: 128
  checks: {min_chars: 40, expect: "(?i)eiffel"}
- name: format
  targets: [healthy-vllm]
  prompt: format.yaml
  max_tokens: 64
  checks: {expect: '^\s*\{.*"city"\s*:\s*"Paris".*\}\s*$'}
"#;

const PROMPTS: [(&str, &str); 4] = [
    ("capital.txt", include_str!("../../prompts/capital.txt")),
    (
        "capital-zh.txt",
        include_str!("../../prompts/capital-zh.txt"),
    ),
    (
        "long-context.yaml",
        include_str!("../../prompts/long-context.yaml"),
    ),
    ("format.yaml", include_str!("../../prompts/format.yaml")),
];

/// Writes the demo config into a fresh folder and returns the agent file's path.
pub(crate) fn write_demo_config(
    dir: &std::path::Path,
    sim_url: &str,
) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir.join("probes"))?;
    std::fs::create_dir_all(dir.join("prompts"))?;
    let agent = dir.join("llm-canary.yaml");
    std::fs::write(&agent, AGENT.replace("{SIM}", sim_url))?;
    std::fs::write(dir.join("probes/demo.yaml"), PROBES)?;
    for (name, text) in PROMPTS {
        std::fs::write(dir.join("prompts").join(name), text)?;
    }
    Ok(agent)
}

pub(crate) async fn demo() -> anyhow::Result<ExitCode> {
    let sim = Sim::start("127.0.0.1:0")
        .await
        .context("demo: cannot start the simulated replica")?;
    let dir = std::env::temp_dir().join(format!("llm-canary-demo-{}", std::process::id()));
    let path = write_demo_config(&dir, &format!("http://{}", sim.addr()))
        .context("demo: cannot write its config")?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "llm-canary demo: simulated replica on http://{}; each target below is one of its scenarios\n",
        sim.addr()
    )?;
    let cfg = crate::config::load(&path);
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = cfg?;
    let opts = OnceArgs {
        config: path.clone(),
        probes: vec![],
        targets: vec![],
        format: Format::Table,
        show_output: false,
        concurrency: None,
        push: false,
    };
    crate::commands::once::once(&cfg, &opts, &mut out).await?;
    writeln!(
        out,
        "\nThe failing rows are on purpose: each target is a sim scenario (see `llm-canary sim`)."
    )?;
    Ok(ExitCode::SUCCESS)
}
