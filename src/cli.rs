//! The command line (DESIGN's contract): run | once | gate | check | sim | demo.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "llm-canary",
    version,
    about = "Black-box canary for LLM inference endpoints",
    propagate_version = true
)]
pub struct Cli {
    /// Log level for stderr (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, global = true, default_value = "warn")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Daemon: fire every probe on its schedule, push, serve /metrics and /healthz.
    Run {
        #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
        config: PathBuf,
    },
    /// Run every (probe, target) once, now; exit 0 if all ok, 1 if some failed.
    Once {
        #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
        config: PathBuf,
        /// Only this probe (repeatable).
        #[arg(long = "probe")]
        probes: Vec<String>,
        /// Only this target (repeatable).
        #[arg(long = "target")]
        targets: Vec<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Push the results once to the configured Pushgateway.
        #[arg(long)]
        push: bool,
        /// Include the generated text in JSON results.
        #[arg(long)]
        show_output: bool,
        /// Probe runs in flight at once (default: agent.concurrency).
        #[arg(long)]
        concurrency: Option<usize>,
    },
    /// Pre-release gate: sample a candidate (against a baseline) and decide; exit 0 pass, 1 fail.
    Gate {
        #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
        config: PathBuf,
        /// The candidate target.
        #[arg(long)]
        target: String,
        /// A baseline target sampled in the same run, interleaved with the candidate.
        #[arg(long, conflicts_with = "baseline")]
        baseline_target: Option<String>,
        /// A previous gate's JSON (--format json) as the baseline.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// Samples per probe and side (default: the probe's gate.samples, else 20).
        #[arg(long)]
        samples: Option<u32>,
        /// Uncounted runs per probe and side before sampling.
        #[arg(long, default_value_t = 1)]
        warmup: u32,
        /// Only this probe (repeatable; default: every probe with a gate: section).
        #[arg(long = "probe")]
        probes: Vec<String>,
        /// Runs in flight at once (default 2: one candidate and one baseline run).
        #[arg(long, default_value_t = 2)]
        concurrency: usize,
        /// Before sampling, poll the candidate until its first successful generation (e.g. 5m).
        #[arg(long)]
        wait_ready: Option<String>,
        /// Write a JUnit XML report here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).
        #[arg(long)]
        summary: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Validate config, probes and prompts; print each probe's next fire times.
    Check {
        #[arg(short = 'c', long = "config", default_value = "llm-canary.yaml")]
        config: PathBuf,
    },
    /// The simulated OpenAI-compatible replica, for demos, fire drills and tests.
    Sim {
        #[arg(long, default_value = "127.0.0.1:8099")]
        listen: String,
    },
    /// Start `sim` in-process and run probes against a few of its scenarios.
    Demo,
}
